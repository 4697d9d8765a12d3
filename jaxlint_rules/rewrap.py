"""JAX104: a jit/pmap wrapper rebuilt every step around the same function (part of the JAX1xx
family in recompilation.py: there a new callable recompiles; here nothing recompiles, but every new
wrapper misses jit's dispatch fast path)."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint.model import JitWrap, ModuleModel, Repetition, cached, per_step
from jaxlint.model.facts import frequency, proof, repetition, rewrapping
from jaxlint.model.facts.repetition import many_trips
from jaxlint.model.policy import evidence, looprecord, roles
from jaxlint.model.facts import loops as loopfacts
from jaxlint.rule import Finding, Line, Rule

from .recompilation import jit_in_loop, why_repeated

_TEST_CODE = "test code: a wrapper rebuilt per test step costs microseconds, once per test run"
_LIGHT = ("a `{spelling}` without shardings rebuilt costs {cost} more per call (a sharded one 0.1-1 ms): hidden behind any step the device takes longer over, so worth changing only in a small, "
          "dispatch-bound loop (reviewers judged such findings not worth acting on behind a real training step)")


class JitRebuiltPerStep(Rule):
    code = "JAX104"
    name = "jit-rebuilt-per-step"
    needs = ("per-step", "same-callee")
    short = "A jit or pmap wrapper rebuilt every step around the same function: no recompile, a slow dispatch each step."
    summary = ("Finds `jax.jit`/`jax.pmap` wrappers built again at every step around the same function "
               "object, and called there: `jax.jit(jax.random.split)(key)` or `jax.jit(train_step, ...)` in "
               "the body of a training loop, or in a function that runs at every step (one given the training "
               "step, a per-step method, one called in a loop of steps here or in another module of the "
               "project). The wrapped function is a module-level or imported function, a def outside the "
               "code that repeats, or for `jax.pmap` a bound method. A wrapper around a new callable (a "
               "lambda, a partial, a nested def, a bound method under `jax.jit`) recompiles and is JAX101/"
               "JAX102's. Not reported: a wrapper made once and reused, stored or cached; a loop over a few "
               "items or of at most 100 iterations in all; code that runs once.")
    rationale = ("JAX finds the trace and the compiled program of the same function again, so nothing "
                 "recompiles; but each new wrapper object is built (its arguments parsed and checked) and "
                 "called for the first time, which misses jit's C++ dispatch fast path and goes through "
                 "Python. Measured on CPU under jax 0.10.2 (bench/jit_wrapper_cost.py, each call waited for): "
                 "a rebuilt `jax.jit` costs about 0.05-0.2 ms more per call than one made once (10 to 300 "
                 "argument leaves), 0.1-1 ms more with `in_shardings`/`out_shardings`, `jax.random.split` "
                 "0.075 ms more, a rebuilt `jax.pmap` 0.03-0.07 ms more: host time at every step, which a "
                 "small step cannot hide behind the device. Create the wrapper once (at module level, in "
                 "`__init__`, or before the loop) and reuse it.")
    bad = """
        import jax
        import jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec

        def train_step(params, batch):
            return params - 0.1 * jnp.mean(batch)

        def update_params(params, batch, global_step, mesh):
            replicated = NamedSharding(mesh, PartitionSpec())
            step = jax.jit(train_step, in_shardings=(replicated, replicated), donate_argnums=0)
            return step(params, batch)

        def train(params, batches, mesh):
            for i in range(10_000):
                params = update_params(params, batches[i % 8], i, mesh)
            return params
    """
    good = """
        import jax
        import jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec

        def train_step(params, batch):
            return params - 0.1 * jnp.mean(batch)

        def make_step(mesh):
            replicated = NamedSharding(mesh, PartitionSpec())
            return jax.jit(train_step, in_shardings=(replicated, replicated), donate_argnums=0)

        def train(params, batches, mesh):
            step = make_step(mesh)
            for i in range(10_000):
                params = step(params, batches[i % 8])
            return params
    """
    opt_in_cases = ("A `jax.jit` without `in_shardings`/`out_shardings`, or a `jax.pmap`, rebuilt (0.03-0.2 ms "
                    "a call, hidden behind most steps; with shardings 0.1-1 ms). Where it is not proven that "
                    "the code runs at every step (a loop over items that carries no JAX state, a function with no evidence that it runs at every step), where the wrapped "
                    "function is read from an object's attribute (the same function only while nothing "
                    "stores another), in test code, in a loop that measures time, or where one iteration runs "
                    "a whole program (a rollout, an epoch), next to which the wrapper costs nothing that "
                    "matters.")

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for wrap in model.jit_wraps:
            if wrap.decorator or wrap.inline or model.in_traced_code(wrap.node):
                continue
            ctx = wrap.ctx
            loop = many_trips(ctx.loops) if ctx.loops else None
            if loop is not None:
                found = self._in_loop(model, wrap, loop)
            elif ctx.loops and not model.function_at(wrap.node):
                continue  # a loop over a few items in module-level code: runs a few times, once
            else:
                found = self._per_call(model, wrap)
            if found is not None:
                yield found

    def _in_loop(self, model: ModuleModel, wrap: JitWrap, loop) -> Optional[Finding]:
        ctx = wrap.ctx
        if jit_in_loop(model, wrap) is not None:
            return None  # a new callable each iteration: JAX101's recompile
        same = rewrapping.same_callee(model, wrap, ctx.loops)
        if same is None or not repetition.calls_wrapper(model, ctx.loops[-1].all_calls(), wrap.node,
                                                        repetition.bound_name(model, wrap)):
            return None  # new or unknown callable, or stored/returned, not called in the iteration
        what, callee = same
        record = looprecord.record(model, loop)
        steps = rewrapping.loop_steps(model, ctx, loop, wrap.node, record)
        facts = self.proof(model, wrap.node, steps, callee)
        if facts is None:
            return None
        if loopfacts.few_iterations(model, ctx):
            self.quiet(model, wrap.node, "per-step (disproven): the loops around it run a few known times in all "
                                         "(at most 100)")
            return None
        opt_in = None
        role = roles.loop_role(model, loop, ctx)
        if role.kind == roles.BENCHMARK:
            opt_in = f"{role.evidence[0]}: building wrappers may be what it measures"
        elif record.program is not None:
            opt_in = (f"one iteration of the loop on line {loop.node.lineno} runs a whole program: a wrapper per "
                      "iteration costs nothing that matters next to it")
        elif model.in_test_code(wrap.node):
            opt_in = _TEST_CODE
        cost = rewrapping.rewrap_cost(model, wrap)
        if opt_in is None and proof.first_unknown(facts) is None and not rewrapping.heavy_wrapper(model, wrap):
            opt_in = _LIGHT.format(spelling=wrap.spelling, cost=cost)
        message = [f"`{wrap.spelling}` of {what} is rebuilt on every iteration of the loop on ",
                   Line(loop.node.lineno), f": it does not recompile (the trace cache hits), but each new wrapper "
                   f"misses jit's fast dispatch path, {cost} more per call than a wrapper made once (measured on "
                   "CPU); create it once, before the loop, and reuse it"]
        return self.finding(wrap.node, message, opt_in=opt_in, facts=facts)

    def _per_call(self, model: ModuleModel, wrap: JitWrap) -> Optional[Finding]:
        outer = model.function_at(wrap.node)
        if outer is None or outer.traced or isinstance(outer.node, ast.Lambda):
            return None
        if repetition.rebuilt_callable(model, wrap, outer) is not None:
            return None  # a new callable per call: JAX102's recompile
        same = rewrapping.same_callee(model, wrap, outer)
        if same is None:
            return None
        what, callee = same
        name = repetition.bound_name(model, wrap)
        depth = len(wrap.ctx.loops)
        uses = [c for c in outer.calls if repetition.calls_wrapper(model, [c], wrap.node, name)]
        if not uses or (name is not None and frequency.escapes(model, outer, name)):
            return None  # not called here, or returned or stored: made once, kept by its user
        if any(len(model.context(c).loops) > depth for c in uses):
            self.quiet(model, wrap.node, "per-step (disproven): the wrapper is made once per call and reused in "
                                         "a loop of it")
            return None
        if cached(outer):
            self.quiet(model, wrap.node, f"per-step (disproven): `{outer.name}` is a cached builder")
            return None
        # a wrapper without shardings is opt-in wherever it runs: the project's other modules
        # (costly to read) are asked only where they can make the finding a default one
        heavy = rewrapping.heavy_wrapper(model, wrap)
        freq = roles.frequency(model, outer, project=heavy)
        if freq.kind == roles.ONCE:
            self.quiet(model, wrap.node, "per-step (disproven): " + "; ".join(freq.evidence))
            return None
        rep = freq.rep
        if rep is None and frequency.compute_helper(model, outer, uses):
            rep = Repetition("helper", outer)
        if rep is not None and rep.kind != "helper" and per_step(rep):
            steps = proof.proven("per-step", "; ".join(evidence.repetition(rep, model.conventions)))
        elif rep is not None and rep.kind != "helper":
            steps = proof.unknown("per-step", f"`{outer.name}` runs again and again, but is not known to run at "
                                              "every step (" + "; ".join(evidence.repetition(rep, model.conventions))
                                  + ")")
        elif rep is not None:
            steps = proof.unknown("per-step", f"`{outer.name}` does little but this compiled call (the kind of "
                                              "helper called per batch), but no call of it in a loop is seen")
        else:
            steps = proof.unknown("per-step", "; ".join(freq.evidence))
        cost = rewrapping.rewrap_cost(model, wrap)
        message = [f"`{wrap.spelling}` of {what} is rebuilt on every call of `{outer.name}`",
                   *((" (", *why_repeated(rep), ")") if rep is not None else ()),
                   f": it does not recompile (the trace cache hits), but each new wrapper misses jit's fast "
                   f"dispatch path, {cost} more per call than a wrapper made once (measured on CPU); create it "
                   "once (at module level or in `__init__`) and reuse it"]
        opt_in = _TEST_CODE if model.in_test_code(wrap.node) else None
        if opt_in is None and proof.first_unknown([steps, callee]) is None and not heavy:
            opt_in = _LIGHT.format(spelling=wrap.spelling, cost=cost)
        return self.finding(wrap.node, message, opt_in=opt_in, facts=[steps, callee])


RULES = [JitRebuiltPerStep]
