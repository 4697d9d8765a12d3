"""Rewrapping: a ``jax.jit``/``jax.pmap`` wrapper built again around the same callable each time
the code around it runs (JAX104).

JAX's caches hit (the trace and the compiled program are found: nothing recompiles), but every new
wrapper object is called for the first time, which misses jit's C++ dispatch fast path and pays
for building the wrapper: ``bench/jit_wrapper_cost.py`` measures it. Two facts decide a finding:
``same-callee`` (the wrapped callable is the same function object each time, or for
``jax.pmap`` an equal bound method; a new one is JAX101/JAX102's recompile) and ``per-step``
(where it is built runs at every step).

Functions of the model (``m``); they ask the repetition and periodicity facts.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, periodicity, repetition, work
from .proof import Fact, proven, unknown
from ..python.records import Context, Loop
from ..python.syntax import statement_walk, unparse


def same_callee(m, wrap, inside) -> Optional[tuple]:
    """``(what, fact)`` for a ``jax.jit``/``jax.pmap`` wrapper rebuilt each time the region
    ``inside`` (a tuple of loops or a function) runs around a callable that is not new there
    (:func:`repetition.rewrapped_callable`): ``what`` names it for a message; ``fact`` is
    ``same-callee`` proven (a module-level or imported function, a def outside the region, or for
    ``jax.pmap`` a bound method, which it finds equal to the last one) or unknown (a function read
    from an attribute of an object or a class, the same one only while nothing stores another
    there). None when
    the callable is new each time (JAX101/JAX102's recompile) or not known (a parameter, a call's
    result)."""
    what = repetition.rewrapped_callable(m, wrap, inside)
    if what is None:
        return None
    t = wrap.target
    if isinstance(t, ast.Attribute):
        kind = callables.attribute_callable(m, t, wrap.ctx.scope)
        if kind == "stored" and m.resolve(t, wrap.ctx.scope) is None:  # not a module's function
            return what, unknown("same-callee", f"`{unparse(t, 40)}` is read from an object each time: the same "
                                                "function only as long as nothing stores another one there")
        if kind == "bound_method":
            return what, proven("same-callee", f"`{wrap.spelling}` finds the bound method `{unparse(t, 40)}` equal "
                                               "to the last one made from the same instance and reuses its trace")
    return what, proven("same-callee", f"{what} is the same function object every time: the trace and compile "
                                       "caches hit, nothing recompiles")


def heavy_wrapper(m, wrap) -> bool:
    """Whether the rebuilt wrapper is a ``jax.jit`` given shardings, whose set-up each new wrapper
    repeats: measured 0.09-1.06 ms more per call on CPU (10 to 300 leaves), against 0.03-0.2 ms for
    a plain ``jax.jit`` (static or donated arguments included) or a ``jax.pmap``
    (bench/jit_wrapper_cost.py)."""
    return rewrap_cost(m, wrap) == N.REWRAP_COST["jax.jit sharded"]


def rewrap_cost(m, wrap) -> str:
    """What a rebuilt wrapper costs per call more than one made once (``names.REWRAP_COST``);
    ``jax.jit`` with ``in_shardings``/``out_shardings`` pays more, growing with the leaves."""
    qn = callables.wrapper_qualname(m, wrap)
    keywords = {k.arg for k in getattr(wrap.node, "keywords", ())}
    if qn == "jax.jit" and keywords & {"in_shardings", "out_shardings"}:
        return N.REWRAP_COST["jax.jit sharded"]
    return N.REWRAP_COST[qn]


def compiled_beside(m, ctx: Context, loop: Loop, guard: ast.AST, made: ast.AST) -> Optional[ast.Call]:
    """The step the rebuilt wrapper ``made`` sits beside under a periodic ``if`` (``guard``, a test
    in ``ctx.guards``): a call of compiled code, other than the wrapper, that the same ``if`` runs
    in the same iteration of ``loop`` and whose result rebinds state the loop threads from one
    iteration to the next (``q_state = update(q_state, batch)`` under ``if step % every == 0``).
    Then the wrapper is rebuilt at every step of that state, however often the ``if`` lets it.
    None when the guarded code only computes values the loop does not carry (a periodic energy
    or loss to log)."""
    carried = work.carried_state(m, loop)
    if not carried:
        return None
    for stmt in statement_walk(loop.node):
        call = getattr(stmt, "value", None)
        if not isinstance(stmt, ast.Assign) or not isinstance(call, ast.Call) or call is made or call.func is made:
            continue
        targets = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        c = m.context(call)
        if not targets & carried or c is None or not any(test is guard for test, _ in c.guards):
            continue
        if callables.callable_info(m, call.func, c.scope) is not None:
            return call
    return None


def loop_steps(m, ctx: Context, loop: Loop, made: ast.AST, record) -> Fact:
    """The ``per-step`` fact of a wrapper built in an iteration of ``loop`` (``record``, its loop
    record): the loop runs steps (its ``steps`` fact), and no periodic ``if`` runs the wrapper
    only now and then, unless that ``if`` also runs the compiled step beside it (then the wrapper
    is rebuilt at every step that runs)."""
    steps = record.steps
    if not steps.proven:
        return Fact("per-step", steps.status, steps.why)
    guard = periodicity.periodic_guard_test(m, ctx, loop)
    if guard is None:
        return proven("per-step", f"{steps.why}; no periodic `if` guards the wrapper")
    beside = compiled_beside(m, ctx, loop, guard, made)
    if beside is None:
        return Fact("per-step", "disproven", f"the `if {unparse(guard, 40)}` on line {guard.lineno} runs it only now "
                                             "and then, and no compiled step beside it")
    return proven("per-step", f"{steps.why}; the `if {unparse(guard, 40)}` on line {guard.lineno} runs it with the "
                              f"compiled `{unparse(beside.func, 40)}` on line {beside.lineno}: it is rebuilt at every "
                              "step that runs")
