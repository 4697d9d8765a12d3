"""Device loops: ``lax.scan``/``fori_loop``/``while_loop`` (and flax nnx's), one call of which runs
its body many times on the accelerator. Which calls are device loops, whether a literal trip count
makes one a short loop inside a step, and which device loop a function is the body of.

At trace time the body runs once per trace of the call; at run time its compiled code runs at
every iteration. Rules about what the compiled program does (a constant key draws the same
numbers at every iteration) ask :func:`loop_running` ; rules about Python-level calls (a wrapper
rebuilt per call) must not: the body is traced once.

Functions of the model (``m``), not a mixin.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables
from ..python.records import BOUNDED_TRIPS, FunctionInfo
from ..python.syntax import call_arg

DEVICE_LOOPS = frozenset({"jax.lax.scan", "jax.lax.fori_loop", "jax.lax.while_loop", "jax.lax.map",
                          "flax.nnx.scan", "flax.nnx.fori_loop", "flax.nnx.while_loop"})
# Where each loop takes the function it runs per iteration: (position, keyword).
_BODY_ARG = {"jax.lax.scan": (0, "f"), "jax.lax.fori_loop": (2, "body_fun"),
             "jax.lax.while_loop": (1, "body_fun"), "flax.nnx.fori_loop": (2, "body_fun"),
             "flax.nnx.while_loop": (1, "body_fun")}


def small_trip_count(call: ast.Call, qn: str) -> bool:
    """``lax.fori_loop(0, 4, ...)``, ``lax.scan(f, c, xs, length=2)``: a literal trip count of at
    most BOUNDED_TRIPS (a short loop inside one step)."""
    def lit(node) -> Optional[int]:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        return None

    if qn.endswith("fori_loop") and len(call.args) >= 2:
        lo, hi = lit(call.args[0]), lit(call.args[1])
        return lo is not None and hi is not None and hi - lo <= BOUNDED_TRIPS
    for kw in call.keywords:
        if kw.arg == "length":
            n = lit(kw.value)
            return n is not None and n <= BOUNDED_TRIPS
    return False


def loop_running(m, f: FunctionInfo) -> Optional[ast.Call]:
    """The device loop of this module that runs ``f`` as its body at every iteration
    (``lax.scan(f, init, None, n)``, ``lax.fori_loop(0, n, f, x)``), not a short literal one;
    None when no such call names ``f``. The module's device loops are read once, on first use."""
    bodies = m.facts.loop_bodies
    if bodies is None:
        bodies = m.facts.loop_bodies = _loop_bodies(m)
    return bodies.get(id(f))


def _loop_bodies(m) -> dict:
    """id of each function of this module some device loop runs as its body -> the first such loop."""
    return functions_given(m, _BODY_ARG, skip=small_trip_count)


def functions_given(m, where_by_callee: dict, skip=None) -> dict:
    """id of each function of this module passed to a call of one of ``where_by_callee``'s
    callables (qualified name -> (position, keyword) of the function argument) -> the first such
    call; ``skip(call, qualified name)`` leaves a call out."""
    out: dict = {}
    for short in sorted({q.rsplit(".", 1)[1] for q in where_by_callee}):
        for call in m.calls_by_name.get(short, ()):
            scope = m.scope_at(call)
            qn = m.resolve(call.func, scope)
            where = where_by_callee.get(qn)
            if where is None or (skip is not None and skip(call, qn)):
                continue
            arg = call_arg(call, *where)
            if arg is None:
                continue
            for g in callables.local_functions(m, arg, scope):
                out.setdefault(id(g), call)
    return out


def traced_bodies(m, call: ast.Call) -> list:
    """The function arguments a lax control-flow call traces (``lax.fori_loop(0, n, body, x)``'s
    ``body``, ``lax.scan``'s ``f``, ``lax.cond``'s branches, ``lax.switch``'s list): outside
    jit, each such call traces what it is given and compiles the result, so a function handed to
    it runs (at trace time) on every call, as if called. Empty for any other call."""
    short = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
    if short not in _BODY_SHORT_NAMES:
        return []
    slots = N.LAX_BODIES.get(m.resolve(call.func, m.scope_at(call)) or "")
    out: list = []
    for idx, kw in slots or ():
        arg = call_arg(call, idx, kw)
        if arg is not None:
            out.extend(arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg])
    return out


_BODY_SHORT_NAMES = frozenset(q.rsplit(".", 1)[1] for q in N.LAX_BODIES)


def lax_calls(m) -> tuple:
    """The calls spelled like a lax control-flow call (``scan``, ``fori_loop``, ``cond``, ...): a cheap
    pre-filter before :func:`traced_bodies` resolves them."""
    return m.calls_named(_BODY_SHORT_NAMES)


def loop_under(m, f: FunctionInfo, depth: int = 0) -> Optional[tuple]:
    """``(loop call, compiled)``: the device loop (``lax.scan``/``fori_loop``/``while_loop``/``map``, flax nnx's)
    that calling ``f`` runs, in its own body or in a function of this module it calls (three levels down), and
    the name of a compiled function on the way there (None when there is none); None when the module shows no
    such loop. Differentiated outside jit, a function that runs the loop itself compiles the loop's derivative
    at every call (measured on CPU: 105 ms a call for a 50-step scan, 0.02 ms jitted): the loop's own cache
    holds the forward program only. Through a compiled function the derivative is cached with it, and the
    gradient re-traces and runs op by op what is around it."""
    if depth > 3 or f is None or (isinstance(f.node, ast.Lambda) and depth > 0):
        return None
    memo = m.facts.eager_memo
    key = ("loop-under", id(f))
    if key in memo:
        return memo[key]
    memo[key] = None  # a recursive call sees "none" meanwhile
    found = None
    for c in f.calls:
        if m.resolve(c.func, m.scope_at(c)) in DEVICE_LOOPS:
            found = (c, None)
            break
    if found is None:
        for c in f.calls:
            wrap = callables.callable_info(m, c.func, m.scope_at(c))
            compiled = wrap is not None and wrap.kind in ("jit", "pmap", "filter_jit")
            for g in callables.local_functions(m, c.func, m.scope_at(c)):
                if g is f:
                    continue
                inner = loop_under(m, g, depth + 1)
                if inner is not None:
                    found = (inner[0], inner[1] or (g.name if compiled or g.jit_entry is not None else None))
                    break
            if found is not None:
                break
    memo[key] = found
    return found
