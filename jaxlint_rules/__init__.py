"""The rule catalog: one module per family, each rule a small class.

JAX1xx recompilation.py   retracing and recompiling
JAX2xx host_transfer.py   device-to-host syncs
"""

from __future__ import annotations

from . import host_transfer, recompilation

ALL_RULES = sorted([*recompilation.RULES, *host_transfer.RULES], key=lambda r: r.code)
RULES_BY_CODE = {r.code: r for r in ALL_RULES}
