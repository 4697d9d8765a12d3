"""Repetition: callables created anew each time code runs, where a jit wrapper is called, and
which values take a new value on every iteration of a loop. (How often a function runs:
jaxlint/model/frequency.py.)

Functions of the model (``m``), not a mixin: the recompilation, RNG and side-effect rules import
them.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, deviceloops, pythonvalues
from ..python import rebinding
from ..python import limits as L
from . import values as V
from .frequency import called_once
from ..python.records import BOUNDED_TRIPS, FunctionInfo, Loop, Scope
from .jaxrecords import Churn, JitWrap, NewCallable
from ..python.syntax import _pos, walk
from ..python.syntax import call_arg as _arg

_KNOWN_PURE = ("jax.", "builtins.", "numpy.", "math.", "functools.")


def _method_of(func: ast.AST, names: set) -> bool:
    """``model.apply`` where ``model`` is one of ``names``: the program is the same each call
    (``jax.jit(lambda x: model.apply(params, x))`` is the pitfall itself)."""
    while isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func.id in names


def many_trips(loops) -> Optional[Loop]:
    """The innermost of ``loops`` that iterates over steps or items: a ``range``/``while`` loop
    (however short), or a loop over anything but a few literal options or the parts of one
    structure (``for mode in ("train", "eval")``, ``for k, v in d.items()``), which runs a fixed
    few times per call of its function."""
    for loop in reversed(loops):
        if loop.ranged or (not loop.bounded and loop.steplike):
            return loop
    return None


def new_callable(m, target: Optional[ast.AST], inside, scope: Scope) -> Optional[NewCallable]:
    """If ``target`` is a callable object created anew each time the code in ``inside`` runs
    (a lambda, partial, bound method, transformed function, or a def in that region), what
    it is. ``inside`` is a tuple of Loop records or a FunctionInfo: the region that repeats;
    ``scope`` is the scope the target expression is evaluated in."""
    if target is None:
        return None
    if isinstance(target, ast.Lambda):
        return NewCallable("lambda", target)
    if isinstance(target, ast.Call):
        qn = m.resolve(target.func, scope)
        if qn == N.PARTIAL:
            return NewCallable("partial", target)
        if qn in N.TRANSFORMS or qn in N.JIT_WRAPPERS:
            return NewCallable("transformed", target)
        return None
    if isinstance(target, ast.Attribute):
        # A method looked up on an instance is a new bound-method object at every evaluation.
        if callables.attribute_callable(m, target, scope) == "bound_method":
            return NewCallable("bound_method", target)
        return None
    if isinstance(target, ast.Name):
        ev = m.binding(target.id, scope, (target.lineno, target.col_offset))
        if ev is None:
            return None
        if ev.kind == "def":
            created = ev.node
            what = NewCallable("def", ev.node, target.id)
        elif ev.plain_assign and isinstance(ev.value, (ast.Lambda, ast.Call, ast.Attribute)):
            created = ev.value
            desc = new_callable(m, ev.value, inside, ev.scope)
            if desc is None:
                return None
            what = NewCallable("name", ev.value, target.id, desc)
        else:
            return None
        if isinstance(created, ast.Attribute):  # no context of its own: where the name is bound
            return what if _bound_inside(m, ev, inside) else None
        return what if created_inside(m, created, inside) else None
    return None


def _bound_inside(m, ev, inside) -> bool:
    if isinstance(inside, FunctionInfo):
        s = ev.scope
        while s is not None:
            if s.func is inside:
                return True
            s = s.parent
        return False
    return any(loop in ev.loops for loop in inside)


def rebuilt_callable(m, wrap: JitWrap, inside) -> Optional[NewCallable]:
    """What makes rebuilding the jit wrapper ``wrap`` each time the region ``inside`` runs (see
    :func:`new_callable`) trace and compile again: the callable it wraps, created anew there,
    whose new object misses the wrapper's cache. A bound method misses only the caches of the
    wrappers keyed on the function object's identity (``jax.jit``): ``jax.pmap`` and
    equinox's ``filter_jit`` find the bound method equal to the last one and reuse the
    compiled program (``names.IDENTITY_KEYED_WRAPPERS``)."""
    new = new_callable(m, wrap.target, inside, wrap.ctx.scope)
    inner = new
    while inner is not None and inner.kind == "name":
        inner = inner.inner
    if inner is not None and inner.kind == "bound_method" \
            and callables.wrapper_qualname(m, wrap) not in N.IDENTITY_KEYED_WRAPPERS:
        return None
    return new


def rewrapped_callable(m, wrap: JitWrap, inside) -> Optional[str]:
    """How to name the callable a ``jax.jit``/``jax.pmap`` wrapper (``names.REWRAP_COST``)
    rebuilt each time the region ``inside`` runs wraps, when it is the same function object (or,
    for ``jax.pmap``, an equal bound method) every time: the rebuilt wrapper finds the compiled
    program in the cache, but building it and looking the cache up costs many times a call of a
    wrapper made once. A library or module-level function (``jax.random.split``, ``mod.f``), a
    def outside the region, a function stored on an object. None when the callable is new each
    time (:func:`rebuilt_callable`'s case) or not known (a parameter, a factory's result)."""
    if wrap.decorator or callables.wrapper_qualname(m, wrap) not in N.REWRAP_COST:
        return None
    t, scope = wrap.target, wrap.ctx.scope
    if isinstance(t, ast.Attribute):
        kind = callables.attribute_callable(m, t, scope)
        if kind == "bound_method" and callables.wrapper_qualname(m, wrap) not in N.IDENTITY_KEYED_WRAPPERS:
            return f"the bound method `{ast.unparse(t)}` (a new object equal to the last one)"
        qn = m.resolve(t, scope)  # through imports only: a module's function (``jax.random.split``)
        if kind == "stored" or (kind is None and qn is not None):
            return f"`{qn or ast.unparse(t)}`"
        return None
    if isinstance(t, ast.Name):
        ev = m.binding(t.id, scope, (t.lineno, t.col_offset))
        if ev is None:
            qn = m.resolve(t, scope)
            return f"`{qn}`" if qn is not None and not qn.startswith("builtins.") else None
        # a def outside the function that builds the wrapper: a nested def of that function is a new
        # object per call (the recompile JAX102 reports), whatever loop the wrapper is in
        outer = m.function_at(wrap.node)
        if ev.kind == "def" and not created_inside(m, ev.node, inside) and (
                outer is None or not created_inside(m, ev.node, outer)):
            return f"the function `{t.id}`"
    return None


def compiled_once(m, f: FunctionInfo) -> bool:
    """Whether a function is traced only as the body of jit wrappers whose result the program
    calls once: each wrapper is bound to one name, read only by one call, and that call is in
    no loop, at module level or in a function that runs once (:func:`called_once`). Nothing
    compiled from it runs a second time, so what its Python body does at trace time happens
    once per run either way."""
    if not f.trace_causes or any(c.kind != "jit" for c in f.trace_causes):
        return False
    wraps = [w for w in m.jit_wraps if w.func is f or (
        w.func is None and w.target is not None and f in callables.local_functions(m, w.target, w.ctx.scope))]
    if not wraps or len(wraps) != len(f.trace_causes):
        return False
    for wrap in wraps:
        name = bound_name(m, wrap)
        if name is None:
            return False
        scope = m.scope_at(wrap.node) if not wrap.decorator else (wrap.func.scope.parent or m.module_scope)
        calls = [c for c in m.calls_by_name.get(name, ()) if isinstance(c.func, ast.Name)]
        if len(calls) != 1 or len(rebinding.name_reads(m, scope, name)) != 1:
            return False  # called twice, or handed on (returned, stored, passed)
        ctx = m.context(calls[0])
        if ctx is None or ctx.loops:
            return False
        outer = m.function_at(calls[0])
        if outer is not None and not called_once(outer, m):
            return False
    return True


def traced_per_compilation(m, f: FunctionInfo) -> bool:
    """Whether a traced function's Python body runs only when a jit wrapper compiles: every
    reason it is traced is a jit wrapper, a traced caller that is itself traced per
    compilation, or a transform or lax primitive applied to it inside a function traced per
    compilation (a scan body defined in a jitted function). Later calls of the compiled
    function then skip the body's Python. Without a jit around it a transform traces anew on
    every call (``jax.vmap(f)(x)`` runs ``f``'s Python each time, with tracers)."""
    memo = m.facts.per_compilation_memo
    key = id(f)
    if key in memo:
        return memo[key]
    memo[key] = False  # a cycle of callers proves nothing
    result = bool(f.trace_causes)
    for cause in f.trace_causes:
        if cause.kind == "jit":
            continue
        if cause.kind == "caller":
            outers = [cause.caller]
        else:  # where the transform or lax primitive is applied to f (else: where f is defined)
            outers = _applied_in(m, f) or [f.parent]
        if not all(g is not None and g.traced and traced_per_compilation(m, g) for g in outers):
            result = False
            break
    memo[key] = result
    return result


def _applied_in(m, f: FunctionInfo) -> list:
    """The functions (None: module level) whose code applies a transform or a lax primitive
    to ``f`` (``jax.vmap(f)``, ``lax.scan(f, ...)``)."""
    memo = m.facts.applied_memo
    if memo is None:
        memo = m.facts.applied_memo = {}
        names = {q.rsplit(".", 1)[1] for q in list(N.TRANSFORMS) + list(N.LAX_BODIES)}
        for call in m.calls_named(names):
            scope = m.scope_at(call)
            qn = m.resolve(call.func, scope)
            if qn in N.TRANSFORMS:
                slots = [(0, "fun")]
            else:
                slots = N.LAX_BODIES.get(qn or "", [])
            for idx, kw in slots:
                arg = _arg(call, idx, kw)
                if arg is None:
                    continue
                for elt in (arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]):
                    for g in callables.local_functions(m, elt, scope):
                        memo.setdefault(id(g), []).append(m.function_at(call))
    return memo.get(id(f), [])


def created_inside(m, node: ast.AST, inside) -> bool:
    ctx = m.context(node)
    if ctx is None:
        return False
    if isinstance(inside, FunctionInfo):
        f = m.function_at(node)
        while f is not None:
            if f is inside:
                return True
            f = f.parent
        return False
    return any(loop in ctx.loops for loop in inside)


def calls_wrapper(m, calls, made: ast.AST, name: Optional[str], bodies: bool = False) -> bool:
    """Whether one of ``calls`` calls the wrapper ``made`` directly or through the name bound to it;
    with ``bodies``, also hands it to a lax control-flow call that traces it (``deviceloops.traced_bodies``)."""
    for call in calls:
        outer = call.func  # ``jax.vmap(f)(x)`` outside jit traces ``f``: a jitted ``f`` compiles for it
        mapped = outer.args[0] if isinstance(outer, ast.Call) and outer.args and m.resolve(
            outer.func, m.scope_at(call)) in N.TRANSFORMS else None
        for func in (call.func, *(deviceloops.traced_bodies(m, call) if bodies else ()), *((mapped,) if mapped else ())):
            if func is made:
                return True
            if name is not None and isinstance(func, ast.Name) and func.id == name:
                ev = m.binding(name, m.scope_at(call), (call.lineno, call.col_offset))
                if ev is not None and (ev.node is made or ev.value is made):
                    return True
    return False


def bound_name(m, wrap: JitWrap) -> Optional[str]:
    """The local name a jit wrapper is bound to (``f = jax.jit(g)`` or a decorated def)."""
    if wrap.decorator:
        return wrap.node.name  # type: ignore[attr-defined]
    scope = m.scope_at(wrap.node)
    for name, evs in scope.events.items():
        for ev in evs:
            if ev.plain_assign and ev.value is wrap.node:
                return name
    return None


def wraps_callable_param(m, wrap: JitWrap, outer: FunctionInfo) -> bool:
    """A higher-order helper that jits around a function it was given (``def check(fun): ...
    jax.jit(lambda *a: fun(*a))``): a new function each call, so there is no cache to reuse."""
    params = set(outer.params) | set(outer.kwonly)
    params -= pythonvalues.data_params(m, outer)  # annotated as data (``params: chex.ArrayTree``): not a function handed in
    if wrap.decorator:
        body = wrap.node
    else:
        target = wrap.target
        funcs = callables.local_functions(m, target, wrap.ctx.scope) if target is not None else []
        body = funcs[0].node if funcs else target
    if body is None:
        return False
    inner = m.func_of_node.get(id(body))
    if inner is not None:
        params -= set(inner.scope.events)  # the nested function's own names shadow the outer ones
    for node in walk(body):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in params:
                return True
            qn = m.resolve(f, wrap.ctx.scope)
            args = [a for a in node.args if isinstance(a, ast.Name)] + [
                kw.value for kw in node.keywords if isinstance(kw.value, ast.Name)]
            if not any(a.id in params for a in args):
                continue
            if qn == N.PARTIAL or qn in N.TRANSFORMS:
                if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in params:
                    return True
            elif (qn is None or not qn.startswith(_KNOWN_PURE)) and not _method_of(f, params) \
                    and not callables.local_functions(m, f, wrap.ctx.scope):
                # An outer parameter handed to code from elsewhere (``condition(model, data)``,
                # ``SVI(model, guide, ...)``): most likely a user-supplied model or callback.
                return True
    return False

# ------------------------------------------------------------------ what a loop's callable closes over


def per_iteration_function(m, target: Optional[ast.AST], varying: set, scope: Scope,
                           depth: int = 0) -> Optional[str]:
    """The name of a value made anew each iteration (``varying``: the names rebound in every
    iteration) that the function ``target`` itself comes from: a method of it
    (``jax.vmap(env.step)``), a function built from its methods (``auto_reset(env.step,
    env.init)``), or a lambda or def calling its methods. Each iteration then compiles a
    different program, which hoisting the wrapper out of the loop cannot avoid (one compile per
    environment or per model). Values the callable only reads as data (``partial(f, lr=lr)``,
    ``lambda x: x * scale``) are not such a source: passed as arguments, they would not
    recompile."""
    if target is None or depth > L.CALLABLE_CHAIN or not m.work.spend():
        return None
    if isinstance(target, ast.Attribute):
        base = target
        while isinstance(base, ast.Attribute):
            base = base.value
        if isinstance(base, ast.Name) and base.id in varying and base.id not in ("self", "cls"):
            return base.id
        return None
    if isinstance(target, ast.Name):
        if target.id not in varying:
            return None
        ev = m.binding(target.id, scope, _pos(target))
        if ev is not None and ev.plain_assign:
            return per_iteration_function(m, ev.value, varying, ev.scope, depth + 1)
        if ev is not None and ev.kind == "def":
            f = m.func_of_node.get(id(ev.node))
            return _calls_methods_of(m, f, varying) if f is not None else None
        return None
    if isinstance(target, ast.Call):
        qn = m.resolve(target.func, scope)
        if qn == N.PARTIAL or qn in N.TRANSFORMS or qn in N.JIT_WRAPPERS:
            return per_iteration_function(m, target.args[0], varying, scope, depth + 1) if target.args else None
        for part in [target.func, *target.args, *(kw.value for kw in target.keywords)]:
            if isinstance(part, (ast.Attribute, ast.Name, ast.Call)):
                found = per_iteration_function(m, part, varying, scope, depth + 1)
                if found is not None:
                    return found
        return None
    if isinstance(target, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
        f = m.func_of_node.get(id(target))
        return _calls_methods_of(m, f, varying) if f is not None else None
    return None


def _calls_methods_of(m, f: FunctionInfo, varying: set) -> Optional[str]:
    own = set(f.scope.events)
    for node in walk(f.node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr not in _ARRAY_METHODS:
            base = node.func
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in varying and base.id not in own \
                    and base.id not in ("self", "cls") and not V.is_jax(m, base, f.scope):
                return base.id
    return None


def captured_per_iteration(m, target: Optional[ast.AST], varying: set, scope: Scope) -> list:
    """The names rebound every iteration (``varying``) that the callable ``target`` closes over
    or binds (a lambda's or def's free names, ``partial``'s arguments), in source order: passed
    as arguments instead, they would let one compiled program serve every iteration."""
    if target is None:
        return []
    if isinstance(target, ast.Name):
        ev = m.binding(target.id, scope, _pos(target))
        if ev is not None and ev.kind == "def":
            node: Optional[ast.AST] = ev.node
        elif ev is not None and ev.plain_assign and isinstance(ev.value, (ast.Lambda, ast.Call)):
            return captured_per_iteration(m, ev.value, varying, ev.scope)
        else:
            return []
    else:
        node = target
    f = m.func_of_node.get(id(node)) if node is not None else None
    own = set(f.scope.events) if f is not None else set()
    if f is not None:
        for sub in walk(node):  # names bound in functions nested in it are theirs
            inner = m.func_of_node.get(id(sub))
            if inner is not None:
                own |= set(inner.scope.events)
    seen: list = []
    parts = [node] if f is not None else ([*node.args[1:], *(kw.value for kw in node.keywords)]
                                          if isinstance(node, ast.Call) else [])
    # a lambda's or def's defaults (``lambda x, s=s: ...``) are evaluated where it is made: the
    # value of this iteration, bound into the function
    defaults = [d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None] \
        if f is not None and isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)) else []
    for part, check_own in [*((p, True) for p in parts), *((d, False) for d in defaults)]:
        for n in walk(part):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in varying \
                    and (not check_own or n.id not in own) and n.id not in seen:
                seen.append(n.id)
    return seen


# ------------------------------------------------------------------ values that change per iteration


def churn(m, expr: ast.AST, loops: tuple, scope: Scope) -> Optional[Churn]:
    """Why ``expr`` (evaluated inside ``loops``, the loops around it, outermost first) takes a
    new value on every iteration of one of them, or None when it is not known to: a loop
    counter or a name incremented in the loop, the item of a loop over anything but a few
    literal options (``range`` of a small constant included), or a value computed from those
    by arithmetic, numeric builtins (``int``, ``len``, ``min``...), attributes or indexing.
    Values that take a few values only are not churn: comparisons and ``not``, ``x % k`` for a
    ``k`` that is the same in every iteration, a choice between constants (``"a" if c else "b"``), an index into a literal
    table. Values from calls of other functions (``task_of(step)``, ``next(it)``) are not known
    to change, nor are names computed in the loop from loop-invariant values."""
    return _churn(m, expr, loops, scope, 0, set())


def _churn(m, e: ast.AST, loops: tuple, scope: Scope, depth: int, seen: set) -> Optional[Churn]:
    if depth > L.CHURN_CHAIN or not m.work.spend():
        return None
    if isinstance(e, ast.Name):
        return _name_churn(m, e, loops, scope, depth, seen)
    if isinstance(e, ast.Constant):
        return None
    if isinstance(e, (ast.Compare, ast.BoolOp)) or (isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not)):
        if isinstance(e, ast.BoolOp):  # ``a or b`` is one of its operands
            return _first_churn(m, e.values, loops, scope, depth, seen)
        return None  # True or False
    if isinstance(e, ast.BinOp):
        if isinstance(e.op, ast.Mod) and (V.const_int(m, e.right, scope) is not None
                                          or _churn(m, e.right, loops, scope, depth + 1, seen) is None):
            # one of k values, k a constant or the same in every iteration (``step % len(tasks)``):
            # each value comes back every k iterations, so a new value each time is not shown
            return None
        return _first_churn(m, [e.left, e.right], loops, scope, depth, seen)
    if isinstance(e, ast.UnaryOp):
        return _churn(m, e.operand, loops, scope, depth + 1, seen)
    if isinstance(e, ast.IfExp):
        return _first_churn(m, [e.body, e.orelse], loops, scope, depth, seen)
    if isinstance(e, (ast.Tuple, ast.List)):
        return _first_churn(m, e.elts, loops, scope, depth, seen)
    if isinstance(e, ast.JoinedStr):
        return _first_churn(m, [v.value for v in e.values if isinstance(v, ast.FormattedValue)],
                                 loops, scope, depth, seen)
    if isinstance(e, ast.Attribute):
        return _churn(m, e.value, loops, scope, depth + 1, seen)
    if isinstance(e, ast.Subscript):
        if isinstance(e.value, (ast.Tuple, ast.List, ast.Dict, ast.Constant)):
            return None  # an entry of a literal table
        return _first_churn(m, [e.value, e.slice], loops, scope, depth, seen)
    if isinstance(e, ast.Slice):
        return _first_churn(m, [p for p in (e.lower, e.upper, e.step) if p is not None], loops, scope, depth, seen)
    if isinstance(e, ast.Call):
        qn = m.resolve(e.func, scope) or ""
        if qn in _NUMERIC_BUILTINS or qn.startswith("math."):
            return _first_churn(m, [*e.args, *(kw.value for kw in e.keywords)], loops, scope, depth, seen)
        reduced = None
        if isinstance(e.func, ast.Attribute) and e.func.attr in _DATA_REDUCTIONS and not e.args and qn == "":
            reduced = e.func.value  # ``mask.sum()``, ``x.item()``: a number read from this iteration's data
        elif qn in _NUMPY_REDUCTIONS and e.args:
            reduced = e.args[0]
        found = _churn(m, reduced, loops, scope, depth + 1, seen) if reduced is not None else None
        if found is not None and found.kind in ("item", "data"):
            return Churn("data", found.loop, found.name)  # changes with the data, not surely every time
        return found
    return None


# Reductions of an array to a number: of this iteration's data (a batch's mask), a value that
# changes with the data (``n_valid = int(batch["mask"].sum())``).
_DATA_REDUCTIONS = frozenset({"item", "sum", "max", "min", "argmax", "argmin", "count_nonzero"})
_NUMPY_REDUCTIONS = frozenset(f"{mod}.{f}" for mod in ("numpy", "jax.numpy")
                              for f in ("sum", "max", "min", "argmax", "argmin", "count_nonzero", "amax", "amin"))


def _first_churn(m, parts, loops, scope, depth, seen) -> Optional[Churn]:
    for p in parts:
        found = _churn(m, p, loops, scope, depth + 1, seen)
        if found is not None:
            return found
    return None


def _name_churn(m, e: ast.Name, loops: tuple, scope: Scope, depth: int, seen: set) -> Optional[Churn]:
    name = e.id
    found = m._lookup(name, scope, _pos(e))
    if found is None:
        return None
    owner = found[0].scope
    events = owner.events.get(name, ())
    if (id(owner), name) in seen:
        # defined from itself in the loop (``width = width * 2 + 1``): it accumulates
        loop = next((lp for lp in reversed(loops) if any(lp in b.loops for b in events)), None)
        return Churn("accumulated", loop, name) if loop is not None else None
    seen = seen | {(id(owner), name)}

    def inside(b) -> bool:
        return _target_loop(loops, b) is not None or any(lp in b.loops for lp in loops)

    # The binding that reaches the expression, when it is made in the loops (it is this
    # iteration's value); otherwise every binding of the name inside the loops, since one later
    # in the body reaches the next iteration (``n = 1`` before the loop, ``n = n * 2`` after the use).
    reaching = found[0]
    candidates = [reaching] if inside(reaching) else [b for b in reversed(events) if inside(b)]
    for b in candidates:
        if b.kind == "for":
            own = _target_loop(loops, b)
            if own is not None:
                if own.bounded or _few_trips(m, own, owner):
                    continue  # a few literal options: each value compiles once, then hits the cache
                return Churn("counter" if _counts(own, b) else "item", own, name)
        loop = next((lp for lp in reversed(loops) if lp in b.loops), None)
        if loop is None:
            continue  # bound before the loops: the same value in every iteration
        if b.kind in ("aug", "for"):
            return Churn("accumulated" if b.kind == "aug" else "item", loop, name)
        if b.kind == "assign" and b.value is not None:
            value = b.value if b.path is None else element_at(b.value, b.path)
            if value is None:
                continue  # unpacked from a value we cannot take apart: not known to change
            inner = _churn(m, value, loops, b.scope, depth + 1, seen)
            if inner is not None:
                return inner
    return None


def _few_trips(m, loop: Loop, scope: Scope) -> bool:
    """A ``range`` loop with constant bounds (``range(num_viz)``, ``num_viz = 3``) and at most
    ``BOUNDED_TRIPS`` iterations."""
    it = loop_target_iterable(loop)
    if not (isinstance(it, ast.Call) and m.resolve(it.func, scope) == "builtins.range" and it.args
            and not it.keywords and len(it.args) <= 3):
        return False
    vals = [V.const_int(m, a, scope) for a in it.args]
    if any(v is None for v in vals):
        return False
    try:
        return len(range(*vals)) <= BOUNDED_TRIPS
    except (TypeError, ValueError):
        return False




# Methods of arrays: a lambda calling ``batch.sum()`` reads the batch as data.
_ARRAY_METHODS = frozenset({
    "sum", "mean", "max", "min", "std", "var", "prod", "argmax", "argmin", "reshape", "astype", "transpose",
    "dot", "squeeze", "flatten", "ravel", "clip", "round", "all", "any", "cumsum", "take", "item", "tolist",
    "swapaxes", "conj", "nonzero", "sort", "argsort", "repeat", "view"})
_NUMERIC_BUILTINS = frozenset({"builtins." + n for n in (
    "int", "float", "round", "len", "min", "max", "abs", "pow", "sum", "divmod", "str", "bool", "complex")})


def loop_target_iterable(loop: Loop) -> Optional[ast.AST]:
    node = loop.node
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return node.iter
    gens = getattr(node, "generators", None)
    return gens[0].iter if gens else None


def _target_loop(loops: tuple, b) -> Optional[Loop]:
    """The loop among ``loops`` whose target the ``for`` binding ``b`` binds."""
    for lp in loops:
        node = lp.node
        targets = [node.target] if isinstance(node, (ast.For, ast.AsyncFor)) else [
            g.target for g in getattr(node, "generators", ())]
        if any(n is b.node for t in targets for n in walk(t)):
            return lp
    return None


def _counts(loop: Loop, b) -> bool:
    """The binding is the loop's counter: the whole target of a ``range``/``count`` loop, or the
    index of ``enumerate``."""
    it = b.value
    if isinstance(it, ast.Call):
        name = it.func.attr if isinstance(it.func, ast.Attribute) else getattr(it.func, "id", "")
        if name == "enumerate":
            return b.path == (0,)
    return loop.ranged and not b.path


def element_at(value: ast.AST, path: tuple) -> Optional[ast.AST]:
    """The part of a tuple/list literal an unpacking path picks, or None when it cannot be told."""
    for i in path:
        if not isinstance(value, (ast.Tuple, ast.List)) or any(isinstance(x, ast.Starred) for x in value.elts) \
                or i >= len(value.elts):
            return None
        value = value.elts[i]
    return value
