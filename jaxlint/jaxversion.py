"""The oldest JAX a project supports: ``jax-version = "0.4.30"`` in ``[tool.jaxlint]``,
``jaxlint check --jax-version``, or flake8's ``--jaxlint-jax-version``.

It decides the fixes: a rewrite is offered only to a replacement that exists in the oldest JAX the
project supports (``jax.tree.map`` needs JAX 0.4.25). Unset, the oldest version the project's
packaging files allow decides instead (jaxlint/declaration.py, facts/jaxrange.py), and without one
every mechanical fix is offered. It changes a finding in one case: JAX404 (removed-api) makes a
reference opt-in where the packaging files allow only versions older than the removal, and a
``jax-version`` at or after the removal is the user's word that the project runs there: a default
finding again. One before the removal says nothing of the newest version: the packaging files decide.

Set once per run (like the conventions, jaxlint/conventions.py) by each front end: the model reads
:func:`active` (``JaxModel.jax_version``). It imports nothing of jaxlint.
"""

from __future__ import annotations

import re
from typing import Optional

_VERSION = re.compile(r"(0|[1-9]\d{0,3})(?:\.(0|[1-9]\d{0,3})){0,2}")

_active: Optional[tuple] = None


def parse(value) -> tuple:
    """``"0.4.30"`` -> ``(0, 4, 30)`` (``"0.5"`` -> ``(0, 5, 0)``). Anything else, a TOML number
    (``0.4`` is a float, ``0.4.30`` no TOML at all), a suffix (``0.4.30rc1``), a leading ``v`` or
    zero, raises ValueError with a message that says what is expected."""
    if not isinstance(value, str) or not _VERSION.fullmatch(value.strip()):
        got = f"{value!r}" if isinstance(value, str) else f"{type(value).__name__} {value!r}"
        raise ValueError(f"jax-version must be a JAX release as a string of 1 to 3 numbers, such as "
                         f"\"0.4.30\", not {got}")
    parts = tuple(int(p) for p in value.strip().split("."))
    return parts + (0,) * (3 - len(parts))


def text(version: tuple) -> str:
    """``(0, 4, 30)`` -> ``"0.4.30"``."""
    return ".".join(str(p) for p in version)


def active() -> Optional[tuple]:
    """The oldest supported JAX of this run, or None (not stated)."""
    return _active


def configure(version: Optional[tuple]) -> Optional[tuple]:
    """Put a parsed ``jax-version`` in force (None: not stated)."""
    global _active
    _active = tuple(version) if version is not None else None
    return _active
