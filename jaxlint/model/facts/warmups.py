"""Timed reruns: a function called once as a warm-up and again inside a wall-clock measurement.

Benchmarks and lecture notebooks time a function after a first call "to compile" (``solve(m)``, then
``t0 = time(); solve(m); dt = time() - t0``, or ``%time solve(m)`` in the next cell). Where every call
of the function builds a new compiled program (a ``jax.jit`` of a function it defines, a ``lax`` loop
over a body it defines, a new lambda passed as a static argument), the warm-up warmed nothing: the
timed call traces and compiles again, and the figure it reports includes the compile.

:func:`timed_rerun` is the fact that a function runs more than once in that way: two calls of it
in one scope (the module's top level, a notebook's cells, or one function's body), none in a loop,
the later one inside a measurement: between a clock read bound to a name and a later statement of
the same block that subtracts that name from a clock read (``time() - start``), or under a
notebook's ``%time``/``%%time`` magic. ``%timeit`` runs its statement many times itself: one call
there is a rerun with no warm-up needed.
"""

from __future__ import annotations

import ast
from typing import Optional

from .clocks import is_clock
from .timing import clock_assignment
from .jaxrecords import Repetition
from ..python.syntax import rebinds_name, subtracts_name, walk


class TimedRerun:
    """``call``: the timed call; ``warm``: the earlier call (None under ``%timeit``); ``how``: the
    measurement, spelled (``the clock pair on lines 12-14``, ``%time``)."""

    __slots__ = ("call", "warm", "how")

    def __init__(self, call: ast.Call, warm: Optional[ast.Call], how: str):
        self.call, self.warm, self.how = call, warm, how


def timed_rerun(m, f, sites: list) -> Optional[TimedRerun]:
    """The timed rerun of ``f`` among its call sites ``sites`` (``(call, caller)`` pairs of the
    module's call graph), or None. Calls in loops are the loop's evidence, not this."""
    plain = [(c, g) for c, g in sites if isinstance(c, ast.Call) and not _looped(m, c)]
    plain.sort(key=lambda cg: (cg[0].lineno, cg[0].col_offset))
    for i, (call, g) in enumerate(plain):
        how = _measured(m, call)
        if how is None:
            continue
        if how == "%timeit":
            return TimedRerun(call, None, how)
        warm = next((c for c, h in plain[:i] if h is g), None)
        if warm is not None:
            return TimedRerun(call, warm, how)
    return None


def repetition(m, f, sites: list) -> Optional[Repetition]:
    """:func:`timed_rerun` as a :class:`Repetition` of kind "timed": ``call`` the measured call,
    ``warm`` the warm-up call (None under ``%timeit``), ``name`` the measurement."""
    found = timed_rerun(m, f, sites)
    if found is None:
        return None
    return Repetition("timed", f, call=found.call, name=found.how, warm=found.warm)


def _looped(m, call: ast.AST) -> bool:
    ctx = m.context(call)
    return ctx is None or bool(ctx.loops)


def _measured(m, call: ast.Call) -> Optional[str]:
    """How the call is measured: ``%time``/``%timeit`` (a notebook magic over its line), ``the
    clock pair on lines A-B``; None when no measurement holds it."""
    for magic, first, last in getattr(m, "timed_magics", ()):
        if first <= call.lineno <= last:
            return "%timeit" if "timeit" in magic else "%time"
    block, index = _block_of(m, call)
    if block is None:
        return None
    for i in range(index - 1, -1, -1):
        found = clock_assignment(m, block[i])
        if found is None:
            continue
        name = found[0]
        if any(subtracts_name(st, name) for st in block[i + 1:index]):
            return None  # that measurement ended before the call
        for later in block[index + 1:]:
            if subtracts_name(later, name) and any(isinstance(n, ast.Call) and is_clock(m, n) for n in walk(later)):
                return f"the clock pair on lines {block[i].lineno}-{later.lineno}"
            if rebinds_name(later, name):
                return None  # a new start: the first one's elapsed time is never taken
        return None
    return None


def _block_of(m, call: ast.Call) -> tuple:
    """The statement list that holds the call's statement directly, and its index there: the
    module's body, or the body of the function the call is in (not inside a compound statement:
    a measurement across branches is not read)."""
    f = m.function_at(call)
    body = m.tree.body if f is None else getattr(f.node, "body", None)
    if not isinstance(body, list):
        return None, -1
    for i, stmt in enumerate(body):
        if stmt.lineno <= call.lineno <= (stmt.end_lineno or stmt.lineno) and not isinstance(
                stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With,
                       ast.Try)):
            return body, i
    return None, -1
