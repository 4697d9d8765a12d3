"""Clock calls: ``time.perf_counter()``, ``time.time()``, ``timeit.default_timer()``... spelled by their
own name or by a local alias (``from timeit import default_timer as timer``, then ``timer()``).
Functions of the model (``m``), asked by the timing facts (facts/timing.py).
"""

from __future__ import annotations

import ast

from ... import names as N
from ..python.syntax import last_name

TIMEIT_CALLS = frozenset({"timeit.timeit", "timeit.repeat", "timeit.Timer"})
CLOCKS = frozenset(N.TIMERS - TIMEIT_CALLS)
CLOCK_NAMES = frozenset(q.rsplit(".", 1)[1] for q in CLOCKS)


def is_clock(m, call: ast.Call) -> bool:
    """A call of a clock (:data:`CLOCKS`), spelled by its own name or a local alias of it
    (``from timeit import default_timer as timer``, then ``timer()``)."""
    if not isinstance(call, ast.Call):
        return False
    if last_name(call.func) not in CLOCK_NAMES:
        aliased = m.facts.clock_call_ids
        if aliased is None:
            aliased = m.facts.clock_call_ids = frozenset(
                id(c) for c in m.calls_named(CLOCK_NAMES) if last_name(c.func) not in CLOCK_NAMES)
        if id(call) not in aliased:
            return False
    return m.resolve(call.func, m.scope_at(call)) in CLOCKS
