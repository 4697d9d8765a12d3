"""JAX1xx: code that makes JAX trace and compile again and again."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint import names as N
from jaxlint.model import FunctionInfo, JitWrap, Loop, ModuleModel, Scope
from jaxlint.rule import Finding, Rule, unparse


def new_callable(model: ModuleModel, target: Optional[ast.AST], inside, scope: Scope) -> Optional[str]:
    """If ``target`` is a callable object created anew each time the code in ``inside`` runs
    (a lambda, partial, bound method, transformed function, or a def in that region), say what
    it is. ``inside`` is a tuple of Loop records or a FunctionInfo: the region that repeats;
    ``scope`` is the scope the target expression is evaluated in."""
    if target is None:
        return None
    if isinstance(target, ast.Lambda):
        return "a lambda"
    if isinstance(target, ast.Call):
        qn = model.resolve(target.func, scope)
        if qn == N.PARTIAL:
            return "a functools.partial object"
        if qn in N.TRANSFORMS or qn in N.JIT_WRAPPERS:
            return f"the result of `{unparse(target.func)}(...)`"
        return None
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        funcs = model.local_functions(target, scope)
        if funcs and funcs[0].is_method:
            return f"the bound method `{unparse(target)}`"
        return None
    if isinstance(target, ast.Name):
        ev = model.binding(target.id, scope, (target.lineno, target.col_offset))
        if ev is None:
            return None
        if ev.kind == "def":
            created = ev.node
            what = f"the function `{target.id}` defined there"
        elif ev.kind == "assign" and ev.path is None and isinstance(ev.value, (ast.Lambda, ast.Call)):
            created = ev.value
            desc = new_callable(model, ev.value, inside, ev.scope)
            if desc is None:
                return None
            what = f"`{target.id}`, {desc} made there"
        else:
            return None
        return what if _created_inside(model, created, inside) else None
    return None


def _created_inside(model: ModuleModel, node: ast.AST, inside) -> bool:
    ctx = model.context(node)
    if ctx is None:
        return False
    if isinstance(inside, FunctionInfo):
        f = model.function_at(node)
        while f is not None:
            if f is inside:
                return True
            f = f.parent
        return False
    return any(loop in ctx.loops for loop in inside)


def _loop_calls(loop: Loop) -> Iterator[ast.Call]:
    yield from loop.calls
    for child in loop.children:
        yield from _loop_calls(child)


def _calls_of(model: ModuleModel, calls, made: ast.AST, name: Optional[str]) -> bool:
    """Whether one of ``calls`` calls the wrapper ``made`` directly or through the name bound to it."""
    for call in calls:
        func = call.func
        if func is made:
            return True
        if name is not None and isinstance(func, ast.Name) and func.id == name:
            ev = model.binding(name, model.scope_at(call), (call.lineno, call.col_offset))
            if ev is not None and (ev.node is made or ev.value is made):
                return True
    return False


def _bound_name(model: ModuleModel, wrap: JitWrap) -> Optional[str]:
    """The local name a jit wrapper is bound to (``f = jax.jit(g)`` or a decorated def)."""
    if wrap.decorator:
        return wrap.node.name  # type: ignore[attr-defined]
    scope = model.scope_at(wrap.node)
    for name, evs in scope.events.items():
        for ev in evs:
            if ev.kind == "assign" and ev.path is None and ev.value is wrap.node:
                return name
    return None


def jit_in_loop(model: ModuleModel, wrap: JitWrap) -> Optional[str]:
    """The JAX101 description for a wrapper, or None when it does not apply."""
    ctx = wrap.ctx
    if not ctx.loops or model.in_traced_code(wrap.node) or wrap.inline or model.in_timing_harness(ctx):
        return None
    if wrap.decorator:
        what = f"the function `{wrap.node.name}` defined in the loop"  # type: ignore[attr-defined]
    else:
        what = new_callable(model, wrap.target, ctx.loops, ctx.scope)
    if what is None:
        return None
    loop = ctx.loops[-1]
    if not _calls_of(model, _loop_calls(loop), wrap.node, _bound_name(model, wrap)):
        return None  # built into a table, returned or stored: not called per iteration here
    return what


class JitInLoop(Rule):
    code = "JAX101"
    confirmed_by = "compiles"
    name = "jit-in-loop"
    summary = ("Finds `jax.jit`/`jax.pmap` wrappers created inside a loop around a callable that is new on "
               "every iteration (a lambda, `functools.partial`, bound method, transformed or freshly defined "
               "function) and called in that iteration.")
    rationale = ("JAX caches compiled programs per function object. A new lambda, partial or nested function "
                 "each iteration is a new key, so every iteration traces and compiles from scratch: seconds of "
                 "compile time per step instead of microseconds of dispatch. Re-wrapping the same module-level "
                 "function hits the cache and is not reported.")
    bad = """
        import jax
        import jax.numpy as jnp

        def train(params, batches, lr):
            for batch in batches:
                step = jax.jit(lambda p, b: p - lr * jnp.mean(b))
                params = step(params, batch)
            return params
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(p, b, lr):
            return p - lr * jnp.mean(b)

        def train(params, batches, lr):
            for batch in batches:
                params = step(params, batch, lr)
            return params
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for wrap in model.jit_wraps:
            what = jit_in_loop(model, wrap)
            if what is not None:
                yield self.finding(wrap.node, f"`{wrap.spelling}` of {what} recompiles every iteration; "
                                              "create the jitted function once, outside the loop")


_RUN_ONCE = ("main", "_main")


class JitPerCall(Rule):
    code = "JAX102"
    confirmed_by = "compiles"
    name = "jit-per-call"
    summary = ("Finds jit wrappers built inside a function around a callable made there (a closure, lambda, "
               "partial or bound method) and called there, so each call of the outer function compiles anew.")
    rationale = ("The wrapper and its cache live only as long as one call of the outer function, and the "
                 "wrapped callable is a new object each call, so every call retraces and recompiles. Jit once "
                 "(module level, `__init__`, a returned factory, or a cached helper) and reuse the result.")
    bad = """
        import jax
        import jax.numpy as jnp

        def predict(params, x):
            @jax.jit
            def forward(x):
                return jnp.tanh(params @ x)
            return forward(x)
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def predict(params, x):
            return jnp.tanh(params @ x)
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for wrap in model.jit_wraps:
            outer = wrap.func.parent if wrap.decorator and wrap.func else model.function_at(wrap.node)
            if outer is None or outer.traced or isinstance(outer.node, ast.Lambda) or wrap.inline:
                continue
            if _called_once(outer) or _cached(outer):
                continue
            if jit_in_loop(model, wrap) is not None:
                continue  # JAX101 reports it
            if wrap.decorator:
                what = f"the nested function `{wrap.node.name}`"  # type: ignore[attr-defined]
            else:
                what = new_callable(model, wrap.target, outer, wrap.ctx.scope)
            if what is None or _wraps_callable_param(model, wrap, outer):
                continue
            name = _bound_name(model, wrap)
            uses = [c for c in outer.calls if _calls_of(model, [c], wrap.node, name)]
            if not uses:
                continue
            if any(model.context(c).loops for c in uses):
                continue  # called in a loop of the same call: the compile is amortized over it
            if name is not None and _escapes(outer, name):
                continue
            yield self.finding(wrap.node, f"`{wrap.spelling}` of {what} is rebuilt and recompiled on every call "
                                          f"of `{outer.name}`; jit once and reuse it")


def _wraps_callable_param(model: ModuleModel, wrap: JitWrap, outer: FunctionInfo) -> bool:
    """A higher-order helper that jits around a function it was given (``def check(fun): ...
    jax.jit(lambda *a: fun(*a))``): a new function each call, so there is no cache to reuse."""
    params = set(outer.params) | set(outer.kwonly)
    if wrap.decorator:
        body = wrap.node
    else:
        target = wrap.target
        funcs = model.local_functions(target, wrap.ctx.scope) if target is not None else []
        body = funcs[0].node if funcs else target
    if body is None:
        return False
    inner = model.func_of_node.get(id(body))
    if inner is not None:
        params -= set(inner.scope.events)  # the nested function's own names shadow the outer ones
    for node in ast.walk(body):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in params:
                return True
            qn = model.resolve(f, wrap.ctx.scope)
            args = [a for a in node.args if isinstance(a, ast.Name)] + [
                kw.value for kw in node.keywords if isinstance(kw.value, ast.Name)]
            if not any(a.id in params for a in args):
                continue
            if qn == N.PARTIAL or qn in N.TRANSFORMS:
                if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in params:
                    return True
            elif (qn is None or not qn.startswith(_KNOWN_PURE)) and not _method_of(f, params) \
                    and not model.local_functions(f, wrap.ctx.scope):
                # An outer parameter handed to code from elsewhere (``condition(model, data)``,
                # ``SVI(model, guide, ...)``): most likely a user-supplied model or callback.
                return True
    return False


_KNOWN_PURE = ("jax.", "builtins.", "numpy.", "math.", "functools.")


def _method_of(func: ast.AST, names: set) -> bool:
    """``model.apply`` where ``model`` is one of ``names``: the program is the same each call
    (``jax.jit(lambda x: model.apply(params, x))`` is the pitfall itself)."""
    while isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func.id in names


def _called_once(f: Optional[FunctionInfo]) -> bool:
    """Entry points and tests (and functions nested in them) run once per process or test."""
    while f is not None:
        name = f.name
        if (name in _RUN_ONCE or name.startswith(("test", "setUp")) or name.endswith("_test")
                or "example" in name or "benchmark" in name):
            return True
        f = f.parent
    return False


def _cached(f: FunctionInfo) -> bool:
    return any(d in N.CACHE_DECORATORS for d in f.decorators)


def _escapes(f: FunctionInfo, name: str) -> bool:
    """The wrapper leaves the function (returned, stored on an object or in a container)."""
    for r in f.returns:
        called = {id(n.func) for n in ast.walk(r) if isinstance(n, ast.Call)}
        if any(isinstance(n, ast.Name) and n.id == name and id(n) not in called for n in ast.walk(r)):
            return True
    for stmt in ast.walk(f.node):
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and stmt.value.id == name:
            if any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in stmt.targets):
                return True
    return False


class StaticArgChurn(Rule):
    code = "JAX103"
    confirmed_by = "compiles"
    name = "static-arg-churn"
    summary = ("Finds calls, inside a loop, of a jitted function whose static argument "
               "(`static_argnums`/`static_argnames`) is the loop variable or a value recomputed in the loop.")
    rationale = ("Static arguments are part of the compilation cache key: every new value compiles a new "
                 "program. A step counter or loop index passed as static compiles once per iteration. Pass it "
                 "as a traced array, or keep static arguments to a handful of fixed values.")
    bad = """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnums=1)
        def scale(x, step):
            return x * (0.99 ** step)

        def run(x):
            for step in range(1000):
                x = scale(x, step)
            return x
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def scale(x, step):
            return x * (0.99 ** step)

        def run(x):
            for step in range(1000):
                x = scale(x, jnp.asarray(step))
            return x
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        varying_cache: dict = {}
        for call in (c for loop in model.loops for c in loop.calls):
            ctx = model.context(call)
            if ctx is None or not ctx.loops or model.in_traced_code(call):
                continue
            wrap = model.callable_info(call.func, ctx.scope)
            if wrap is not None and (wrap.static_argnums or wrap.static_argnames) and model.in_timing_harness(ctx):
                continue
            if wrap is None or not (wrap.static_argnums or wrap.static_argnames):
                continue
            params = wrap.positional_params()
            shift = 0
            if wrap.func is not None and wrap.func.is_method and params and params[0] in ("self", "cls"):
                if wrap.decorator and isinstance(call.func, ast.Attribute):
                    shift = 1  # decorated method called as self.m(...): static_argnums count self
                elif not wrap.decorator:
                    params = params[1:]  # jax.jit(self.m): bound, numbering starts after self
            static_pos = {i if i >= 0 else i + len(params) for i in wrap.static_argnums}
            static_names = set(wrap.static_argnames) | {params[i] for i in static_pos if 0 <= i < len(params)}
            varying = set()
            for loop in ctx.loops:
                if id(loop) not in varying_cache:
                    varying_cache[id(loop)] = _varying_names(loop)
                varying |= varying_cache[id(loop)]
            for i, arg in enumerate(call.args):
                if isinstance(arg, ast.Starred):
                    break
                idx = i + shift
                pname = params[idx] if idx < len(params) else None
                if idx in static_pos or (pname is not None and pname in static_names):
                    if _mentions(arg, varying):
                        yield self._report(arg, pname or f"#{idx}", call)
            for kw in call.keywords:
                if kw.arg in static_names and _mentions(kw.value, varying):
                    yield self._report(kw.value, kw.arg, call)

    def _report(self, arg: ast.AST, pname: str, call: ast.Call) -> Finding:
        return self.finding(arg, f"static argument `{pname}` of `{unparse(call.func)}` changes every iteration, "
                                 "compiling a new program each time; pass it as an array or hoist it")


def _mentions(expr: ast.AST, names: set) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


def _varying_names(loop: Loop) -> set:
    """Names that take a new value each iteration: the loop's targets (unless it walks a short
    literal list of options) and names assigned non-constant values in its body."""
    node = loop.node
    out: set = set()
    if isinstance(node, (ast.For, ast.AsyncFor)):
        if not isinstance(node.iter, (ast.Tuple, ast.List, ast.Set)):
            out |= loop.target_names()
        body = node.body
    elif isinstance(node, ast.While):
        body = node.body
    else:
        if not all(isinstance(g.iter, (ast.Tuple, ast.List, ast.Set)) for g in node.generators):
            out |= loop.target_names()
        body = []
    for stmt in body:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Assign) and not isinstance(sub.value, ast.Constant):
                for t in sub.targets:
                    out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
            elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name):
                out.add(sub.target.id)
    return out


RULES = [JitInLoop, JitPerCall, StaticArgChurn]
