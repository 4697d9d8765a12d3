"""JAX2xx: device-to-host transfers that stall the accelerator."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint import names as N
from jaxlint.model import FETCH_OR_FORMAT_NAMES, ModuleModel, last_name
from jaxlint.rule import Finding, Rule, unparse


def _fetch_spelling(call: ast.Call, value: Optional[ast.AST]) -> Optional[str]:
    """How a message names a host fetch: ``float(loss)``, ``x.item()``."""
    if value is None:
        return None
    if isinstance(call.func, ast.Attribute) and call.func.value is value:
        return f"`{unparse(value, 30)}.{call.func.attr}()`"
    return f"`{unparse(call.func)}({unparse(value, 30)})`"


class HostTransferInLoop(Rule):
    code = "JAX201"
    confirmed_by = "transfers"
    name = "host-transfer-in-loop"
    summary = ("Finds `float(x)`, `int(x)`, `bool(x)`, `if x:`, `x.item()`, `x.tolist()`, `np.asarray(x)`, "
               "`jax.device_get(x)` and print/f-string/logging of `x`, where `x` is a JAX value, that run every "
               "iteration of a loop dispatching JAX work.")
    rationale = ("JAX dispatches work asynchronously: the Python loop runs ahead while the accelerator computes. "
                 "Reading a value on the host waits for all queued work and copies it back, so the next step "
                 "cannot be queued until it arrives. Done every step, the accelerator idles between steps. "
                 "Fetch every N steps (`if step % 100 == 0:`), accumulate on device, or fetch after the loop.")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def train_step(params, batch):
            loss = jnp.mean((params - batch) ** 2)
            return params - 0.1 * loss, loss

        def train(params, batches):
            for batch in batches:
                params, loss = train_step(params, batch)
                print(f"loss {float(loss):.4f}")
            return params
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def train_step(params, batch):
            loss = jnp.mean((params - batch) ** 2)
            return params - 0.1 * loss, loss

        def train(params, batches):
            for step, batch in enumerate(batches):
                params, loss = train_step(params, batch)
                if step % 100 == 0:
                    print(f"loss {float(loss):.4f}")
            return params
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        reported: set = set()
        for call in model.calls:
            ctx = model.context(call)
            if ctx is None or not ctx.loops or last_name(call.func) not in FETCH_OR_FORMAT_NAMES:
                continue
            what = _fetch_spelling(call, model.host_fetch(call))
            if what is None and model.formats_jax_call(call):
                what = f"`{unparse(call.func)}(...)` of a JAX value"
                reported.update(id(n) for a in call.args for n in ast.walk(a))
            if what is None:
                continue
            if model.per_iteration_loop(ctx) is not None:
                reported.update(id(n) for a in call.args for n in ast.walk(a))
                yield self._report(call, what)
        for node in model.joined_strs:
            if id(node) in reported:
                continue
            scope = model.scope_at(node)
            if model.formats_jax(node, scope) and model.per_iteration_loop(model.context(node)):
                yield self._report(node, "an f-string of a JAX value")
        for node in model.percent_formats:
            if id(node) in reported:
                continue
            scope = model.scope_at(node)
            if model.formats_jax(node.right, scope) and model.per_iteration_loop(model.context(node)):
                yield self._report(node, "`%`-formatting a JAX value")
        for node in model.ifs:
            test = node.test
            ctx = model.context(test) if isinstance(node, ast.While) else model.context(node)
            if ctx is None or not model.is_jax(test, ctx.scope):
                continue
            if model.per_iteration_loop(ctx) is not None:
                kind = {ast.If: "`if`", ast.While: "`while`", ast.IfExp: "a conditional expression",
                        ast.Assert: "`assert`"}[type(node)]
                yield self._report(test, f"{kind} on the JAX value `{unparse(test, 30)}`")

    def _report(self, node: ast.AST, what: str) -> Finding:
        return self.finding(node, f"{what} syncs with the device every iteration; keep it on device, "
                                  "fetch every N steps or after the loop")


class BlockUntilReadyInLoop(Rule):
    code = "JAX202"
    name = "block-until-ready-in-loop"
    summary = "Finds `x.block_until_ready()`/`jax.block_until_ready(x)` every iteration of a loop of JAX work."
    rationale = ("Blocking every step empties JAX's asynchronous dispatch queue: the host waits for the device, "
                 "then the device waits for the host to dispatch the next step. Block once after the loop, or "
                 "only in a timing harness (loops that read `time.perf_counter()` are not reported).")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x):
            return jnp.tanh(x) * 2.0

        def run(x, n):
            for _ in range(n):
                x = step(x)
                x.block_until_ready()
            return x
    """
    good = """
        import time
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x):
            return jnp.tanh(x) * 2.0

        def run(x, n):
            for _ in range(n):
                x = step(x)
            return x.block_until_ready()

        def benchmark(x, n):
            for _ in range(n):
                t0 = time.perf_counter()
                step(x).block_until_ready()
                print(time.perf_counter() - t0)
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for call in model.calls:
            func = call.func
            if last_name(func) != "block_until_ready":
                continue
            qn = model.resolve(func, model.scope_at(call))
            if not (qn == N.BLOCK_UNTIL_READY or (isinstance(func, ast.Attribute)
                                                   and func.attr == "block_until_ready" and qn is None)):
                continue
            ctx = model.context(call)
            loop = model.per_iteration_loop(ctx)
            if loop is None or model.in_timing_harness(ctx):
                continue
            yield self.finding(call, "`block_until_ready()` every iteration stalls asynchronous dispatch; "
                                     "block once after the loop")


_SAFE_ON_TRACERS = N.NUMPY_TRACER_SAFE


class HostConversionInTracedCode(Rule):
    code = "JAX203"
    name = "host-conversion-in-traced-code"
    summary = ("Finds `float()`, `int()`, `bool()`, `.item()`, `.tolist()` and NumPy or `math` functions applied "
               "to a tracer inside jitted (or otherwise traced) code.")
    rationale = ("Inside `jax.jit` a value is an abstract tracer with no number in it yet. Converting it to a "
                 "Python or NumPy value raises a ConcretizationTypeError/TracerArrayConversionError, or, under "
                 "transforms that allow it, bakes a constant into the program. Use `jnp` functions, keep the value "
                 "as an array, or mark the argument static.")
    bad = """
        import jax
        import jax.numpy as jnp
        import numpy as np

        @jax.jit
        def normalize(x):
            scale = float(jnp.max(jnp.abs(x)))
            return x / np.maximum(scale, 1e-6)
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def normalize(x):
            scale = jnp.max(jnp.abs(x))
            return x / jnp.maximum(scale, 1e-6)
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for f, call in model.traced_calls():
            scope = f.scope
            func = call.func
            qn = model.resolve(func, scope)
            values = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
            values += [kw.value for kw in call.keywords]
            what = error = None
            if qn in N.HOST_BUILTINS:
                if values and model.is_jax(values[0], scope):
                    what = f"`{unparse(func)}()`"
                    error = "TracerBoolConversionError" if qn == "builtins.bool" else "ConcretizationTypeError"
            elif qn is not None and (qn.startswith("numpy.") or qn.startswith("math.")):
                if qn not in _SAFE_ON_TRACERS and not qn.startswith(("numpy.random.", "numpy.testing.")):
                    if any(model.is_jax(v, scope) for v in values):
                        what = f"`{unparse(func)}()`"
                        error = "TracerArrayConversionError" if qn.startswith("numpy.") else "ConcretizationTypeError"
            elif isinstance(func, ast.Attribute) and func.attr in ("item", "tolist") and qn is None:
                if model.is_jax(func.value, scope):
                    what = f"`.{func.attr}()`"
                    error = "ConcretizationTypeError"
            if what is None:
                continue
            if what == "`.item()`" and not model.staging.staged(f):  # autodiff alone: the value becomes a constant
                yield self.finding(call, "`.item()` on a tracer under autodiff turns it into a constant, so no "
                                         "gradient flows through it; keep it an array (use jax.numpy)")
                continue
            yield self.finding(call, f"{what} on a tracer raises {error} {model.staging.how_staged(f)}; use "
                                     "jax.numpy and keep it an array, or make the argument static")


RULES = [HostTransferInLoop, BlockUntilReadyInLoop, HostConversionInTracedCode]
