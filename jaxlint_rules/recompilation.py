"""JAX1xx: code that makes JAX trace and compile again and again."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint.model import (
    JitWrap,
    ModuleModel,
    NewCallable,
    cached,
    called_once,
    escapes,
    mentions,
    varying_names,
)
from jaxlint.rule import Finding, Rule, unparse


def describe(new: Optional[NewCallable]) -> Optional[str]:
    """How a message names a callable created anew (``ModuleModel.new_callable``)."""
    if new is None:
        return None
    if new.kind == "lambda":
        return "a lambda"
    if new.kind == "partial":
        return "a functools.partial object"
    if new.kind == "transformed":
        return f"the result of `{unparse(new.node.func)}(...)`"
    if new.kind == "bound_method":
        return f"the bound method `{unparse(new.node)}`"
    if new.kind == "def":
        return f"the function `{new.name}` defined there"
    return f"`{new.name}`, {describe(new.inner)} made there"


def jit_in_loop(model: ModuleModel, wrap: JitWrap) -> Optional[str]:
    """The JAX101 description for a wrapper, or None when it does not apply."""
    ctx = wrap.ctx
    if not ctx.loops or model.in_traced_code(wrap.node) or wrap.inline or model.in_timing_harness(ctx):
        return None
    if wrap.decorator:
        what = f"the function `{wrap.node.name}` defined in the loop"  # type: ignore[attr-defined]
    else:
        what = describe(model.new_callable(wrap.target, ctx.loops, ctx.scope))
    if what is None:
        return None
    loop = ctx.loops[-1]
    if not model.calls_wrapper(loop.all_calls(), wrap.node, model.bound_name(wrap)):
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
            if called_once(outer) or cached(outer):
                continue
            if jit_in_loop(model, wrap) is not None:
                continue  # JAX101 reports it
            if wrap.decorator:
                what = f"the nested function `{wrap.node.name}`"  # type: ignore[attr-defined]
            else:
                what = describe(model.new_callable(wrap.target, outer, wrap.ctx.scope))
            if what is None or model.wraps_callable_param(wrap, outer):
                continue
            name = model.bound_name(wrap)
            uses = [c for c in outer.calls if model.calls_wrapper([c], wrap.node, name)]
            if not uses:
                continue
            if any(model.context(c).loops for c in uses):
                continue  # called in a loop of the same call: the compile is amortized over it
            if name is not None and escapes(outer, name):
                continue
            yield self.finding(wrap.node, f"`{wrap.spelling}` of {what} is rebuilt and recompiled on every call "
                                          f"of `{outer.name}`; jit once and reuse it")


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
            params, shift, static_pos, static_names = wrap.static_layout(call)
            varying = set()
            for loop in ctx.loops:
                if id(loop) not in varying_cache:
                    varying_cache[id(loop)] = varying_names(loop)
                varying |= varying_cache[id(loop)]
            for i, arg in enumerate(call.args):
                if isinstance(arg, ast.Starred):
                    break
                idx = i + shift
                pname = params[idx] if idx < len(params) else None
                if idx in static_pos or (pname is not None and pname in static_names):
                    if mentions(arg, varying):
                        yield self._report(arg, pname or f"#{idx}", call)
            for kw in call.keywords:
                if kw.arg in static_names and mentions(kw.value, varying):
                    yield self._report(kw.value, kw.arg, call)

    def _report(self, arg: ast.AST, pname: str, call: ast.Call) -> Finding:
        return self.finding(arg, f"static argument `{pname}` of `{unparse(call.func)}` changes every iteration, "
                                 "compiling a new program each time; pass it as an array or hoist it")


RULES = [JitInLoop, JitPerCall, StaticArgChurn]
