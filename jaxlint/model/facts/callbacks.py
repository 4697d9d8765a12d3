"""Host callbacks in compiled loops: ``jax.debug.print``/``jax.debug.callback``/``io_callback``/
``pure_callback`` called in the body of a ``lax.scan``/``fori_loop``/``while_loop`` (or in a
function of this module that the body calls), so that every iteration of the compiled loop stops
to run Python on the host. Functions of the model (``m``), asked by JAX206.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, deviceloops
from ..python.records import FunctionInfo
from ..python.syntax import call_arg

# How deep the calls from a loop body to the function holding the callback are followed.
_CALL_DEPTH = 3
_SHORT_NAMES = frozenset(q.rsplit(".", 1)[1] for q in N.HOST_CALLBACKS)
_BRANCHES = frozenset({"jax.lax.cond", "jax.lax.switch", "flax.nnx.cond", "flax.nnx.switch"})


class LoopCallback:
    """``call`` (a host callback) runs at every iteration of the device loop ``loop`` (the
    ``lax.scan(...)`` call), in ``body`` (the loop's body function) or a function it calls,
    ``via`` (the functions in between, outermost first)."""

    __slots__ = ("call", "qualname", "loop", "body", "via", "inner_loop", "solver")

    def __init__(self, call: ast.Call, qualname: str, loop: ast.Call, body: FunctionInfo, via: tuple,
                 inner_loop: Optional[ast.Call] = None, solver: bool = False):
        self.call = call
        self.qualname = qualname
        self.loop = loop
        self.body = body
        self.via = via
        # ``loop`` is a library solver's call or class (``diffrax.ODETerm(f)``,
        # ``optx.minimise(fn, ...)``: ``names.SOLVER_STEP_FUNCTIONS``) that calls ``body`` at every
        # iteration of the solver's own compiled loop
        self.solver = solver
        # a device loop the same iteration runs (``lax.scan`` over an epoch's minibatches in the
        # body of a ``lax.scan`` over updates): one callback per such program, not per step
        self.inner_loop = inner_loop


def loop_callbacks(m) -> list:
    """Every :class:`LoopCallback` of the module, found once. A callback in a function that
    ``lax.cond``/``lax.switch`` runs as a branch is left out: that is how a loop calls the host
    only now and then."""
    memo = m.facts.loop_callbacks
    if memo is not None:
        return memo
    out: list = []
    if _SHORT_NAMES.isdisjoint(m.calls_by_name):
        m.facts.loop_callbacks = out
        return out
    branches = _branch_functions(m)
    solver_steps = _solver_step_functions(m)
    seen: set = set()
    for f in m.functions:
        loop = deviceloops.loop_running(m, f)
        solver = loop is None and id(f) in solver_steps
        if solver:
            loop = solver_steps[id(f)]
        if loop is None:
            continue
        stack = [(f, ())]
        visited = {id(f)}
        while stack:
            g, via = stack.pop()
            if id(g) in branches:
                continue
            for c in g.calls:
                if m.function_at(c) is not g:
                    continue  # in a nested def or lambda: runs only if that is called
                qn = m.resolve(c.func, g.scope)
                if qn in N.HOST_CALLBACKS:
                    if id(c) not in seen:
                        seen.add(id(c))
                        out.append(LoopCallback(c, qn, loop, f, via, _inner_loop(m, [f, *via]), solver))
                    continue
                if len(via) >= _CALL_DEPTH:
                    continue
                for h in callables.local_functions(m, c.func, g.scope):
                    if id(h) not in visited:
                        visited.add(id(h))
                        stack.append((h, via + (h,)))
    m.facts.loop_callbacks = out
    return out


def _inner_loop(m, funcs: list) -> Optional[ast.Call]:
    """The first device loop (not a short literal one) called directly in one of ``funcs``."""
    for g in funcs:
        for c in g.calls:
            if m.function_at(c) is not g:
                continue
            qn = m.resolve(c.func, g.scope)
            if qn in deviceloops.DEVICE_LOOPS and not deviceloops.small_trip_count(c, qn):
                return c
    return None


def _solver_step_functions(m) -> dict:
    """id of each function of this module given to a library solver that calls it at every
    iteration of its compiled loop (``names.SOLVER_STEP_FUNCTIONS``) -> the first such call."""
    return deviceloops.functions_given(m, N.SOLVER_STEP_FUNCTIONS)


def _branch_functions(m) -> set:
    """ids of the functions of this module that ``lax.cond``/``lax.switch`` run as a branch."""
    out: set = set()
    for short in ("cond", "switch"):
        for call in m.calls_by_name.get(short, ()):
            scope = m.scope_at(call)
            qn = m.resolve(call.func, scope)
            if qn not in _BRANCHES:
                continue
            for idx, kw in N.LAX_BODIES[qn]:
                arg = call_arg(call, idx, kw)
                if arg is None:
                    continue
                for elt in (arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]):
                    out.update(id(g) for g in callables.local_functions(m, elt, scope))
    return out

