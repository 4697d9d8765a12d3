"""JAX1xx: code that makes JAX trace and compile again and again (JAX101, JAX102; JAX103 is in
static_args.py, JAX104 in rewrap.py)."""

from __future__ import annotations

import ast
import os
from typing import Iterator, Optional

from jaxlint import names as N
from jaxlint.model import (JitWrap, ModuleModel, NewCallable, Repetition, cached, called_once, many_trips,
    per_step, varying_names)
from jaxlint.model.facts import callables, frequency, periodicity, proof, repetition, warmups
from jaxlint.model.policy import evidence, freshbodies, roles
from jaxlint.model.facts import loops as loopfacts
from jaxlint.rule import Finding, Line, Rule, unparse


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
        return f"the bound method `{unparse(new.node)}` (a new object at every attribute access)"
    if new.kind == "def":
        return f"the function `{new.name}` defined there"
    return f"`{new.name}`, {describe(new.inner)} made there"


def why_repeated(rep: Repetition) -> list:
    """How a message says why a function runs again and again (``ModuleModel.repeats``): message
    parts, with the lines it cites as :class:`~jaxlint.rule.Line`."""
    name = f"`{rep.func.name}`"
    if rep.kind == "step_name":
        return [f"{name} is a per-step method"]
    if rep.kind == "loop":
        return [f"{name} is called in the loop on ", Line(rep.loop.node.lineno)]  # type: ignore[union-attr]
    if rep.kind == "factory":
        return [f"{name} is the function `{rep.via.name}` returns, called by its users again and again"]  # type: ignore[union-attr]
    if rep.kind == "caller":
        return [f"{name} is called from `{rep.via.name}`, and ", *why_repeated(rep.inner)]  # type: ignore[union-attr,arg-type]
    if rep.kind == "elsewhere":
        return [f"{name} is called in a loop in `{os.path.basename(rep.name)}`"]
    if rep.kind == "inherited":
        return [f"{name} is called in a loop of a base class in `{os.path.basename(rep.name)}`"]
    if rep.kind == "step_param":
        return [f"{name} takes the training step `{rep.name}`, so it runs at steps of a loop"]
    if rep.kind == "timed":  # a warm-up call, then a measured one (facts/warmups.py)
        if rep.warm is None:
            return [f"{name} is called on ", Line(rep.call.lineno), f" under {rep.name}, which runs it again and again"]
        return [f"{name} is called on ", Line(rep.warm.lineno), ", then again on ", Line(rep.call.lineno),
                f" under {rep.name}"]
    return [f"{name} does little but this compiled call, so whatever calls it per batch compiles per batch"]


def _names(names) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def jit_in_loop(model: ModuleModel, wrap: JitWrap) -> Optional[str]:
    """The JAX101 description for a wrapper, or None when it does not apply."""
    ctx = wrap.ctx
    if not ctx.loops or model.in_traced_code(wrap.node) or wrap.inline:
        return None
    if wrap.decorator:
        what = f"the function `{wrap.node.name}` defined in the loop"  # type: ignore[attr-defined]
    else:
        what = describe(repetition.rebuilt_callable(model, wrap, ctx.loops))
    if what is None:
        return None
    loop = ctx.loops[-1]
    if not repetition.calls_wrapper(model, loop.all_calls(), wrap.node, repetition.bound_name(model, wrap)):
        return None  # built into a table, returned or stored: not called per iteration here
    return what


def benchmark(model: ModuleModel, ctx) -> Optional[str]:
    """Why the innermost loop around a node measures time (its loop record's ``benchmark``), as
    the reason a compile per iteration there is reported only with ``--pedantic``: compiling per
    configuration may be what it measures. None when it does not measure."""
    role = roles.loop_role(model, ctx.loops[-1], ctx) if ctx is not None and ctx.loops else None
    if role is None or role.kind != roles.BENCHMARK:
        return None
    return f"{role.evidence[0]}: compiling per configuration may be what it measures"


class JitInLoop(Rule):
    code = "JAX101"
    short = "A jit wrapper built in a loop around a new callable (or caches cleared there): every iteration recompiles."
    confirmed_by = "compiles"
    name = "jit-in-loop"
    summary = ("Finds `jax.jit`/`jax.pmap` wrappers created inside a loop around a callable that is new on "
               "every iteration (a lambda, `functools.partial`, bound method, transformed or freshly defined "
               "function) and called in that iteration. In a loop over a few literal options or the entries of "
               "a dict it is reported when the function around the loop is known to run again and again; a "
               "wrapper around a different function each iteration (a method of an environment made in the "
               "loop) is not reported. A wrapper rebuilt every step around the same function (`jax.jit(jax.random.split)(key)`, "
               "a module-level function) does not recompile: JAX104 reports it. Also `jax.clear_caches()` as a "
               "statement of a loop's body (not under an `if`) whose iterations call a compiled function: each "
               "iteration drops the program, and the next call compiles it again.")
    rationale = ("JAX caches compiled programs per function object. A new lambda, partial or nested function "
                 "each iteration is a new key, so every iteration traces and compiles from scratch: seconds of "
                 "compile time per step instead of microseconds of dispatch. A method looked up on an instance "
                 "(`self.step`, `env.step`, `self.env.step` with `self.env = Env(...)`) is a new bound-method "
                 "object at every lookup, so `jax.jit` of it misses too; `jax.pmap` and equinox's `filter_jit` "
                 "find it equal to the last one and reuse the program. Re-wrapping the same function object hits "
                 "the cache (a module-level function, `mod.func`, `Cls.func`, a staticmethod, a function stored "
                 "on an object such as `state.apply_fn`) and does not recompile (JAX104 reports "
                 "its slower dispatch). The message says what repeats: "
                 "every iteration of the loop, or every call of the function around a loop over a few items.")
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

    opt_in_cases = ("A wrapper rebuilt in a loop over a few items (literal options, the entries of a dict) "
                    "inside a function with no evidence that it runs more than once, or reused in a loop inside "
                    "each item of a function not known to run at every step: a few compiles per call, which "
                    "matter only if the function is called again and again.")

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for wrap in model.jit_wraps:
            what = jit_in_loop(model, wrap)
            if what is None:
                continue  # the same function rewrapped: JAX104's (no recompile)
            loops = wrap.ctx.loops
            varying: set = set()
            for loop in loops:
                varying |= varying_names(loop)
            target = wrap.node if wrap.decorator else wrap.target
            if repetition.per_iteration_function(model, target, varying, wrap.ctx.scope) is not None:
                continue  # a different function each iteration (one per environment): compiling each is inherent
            captured = repetition.captured_per_iteration(model, target, varying, wrap.ctx.scope)
            fix = (f"pass {_names(captured)} as {'an argument' if len(captured) == 1 else 'arguments'} and "
                   if captured else "")
            hot = many_trips(loops)
            if hot is not None:
                facts = [f"the wrapper is built inside the loop on line {hot.node.lineno}, around {what}: a new "
                         "object each iteration, so JAX's cache misses",
                         "the same iteration calls it, and the loop runs steps (not a few literal items)"]
                if captured:
                    facts.append(f"it closes over {_names(captured)}, which change every iteration")
                opt_in = benchmark(model, wrap.ctx)
                guard = periodicity.periodic_guard_test(model, wrap.ctx, hot)
                if guard is not None and opt_in is None:
                    # an evaluation every N steps, a teacher refreshed per section: one compile per period
                    opt_in = (f"built only when the periodic `if` on line {guard.lineno} runs, so it compiles once "
                              "per period, not every iteration")
                when = (["is rebuilt whenever the periodic `if` on ", Line(guard.lineno), " in the loop on ",
                         Line(hot.node.lineno), " runs, so each of those iterations traces and compiles it again; "]
                        if guard is not None else
                        ["is rebuilt on every iteration of the loop on ", Line(hot.node.lineno),
                         ", so every iteration traces and compiles it again; "])
                yield self.finding(
                    wrap.site, [f"`{wrap.spelling}` of {what} ", *when, f"{fix}create the jitted function once, "
                                "before the loop"], evidence=facts, opt_in=opt_in)
                continue
            items = loopfacts.literal_numbers_loop(model, loops[-1], wrap.ctx.scope)
            bound = repetition.captured_per_iteration(model, target, loops[-1].target_names(), wrap.ctx.scope) \
                if items is not None else []
            if bound and not model.in_traced_code(wrap.node):
                captured = bound
                # ``[jax.jit(lambda x, s=s: f(x, s))(x) for s in (0.5, 1.0, 2.0)]``: each number
                # compiles its own program, where one traced argument would compile once. A few
                # iterations make a sync cheap, never a compile.
                facts = [f"the wrapper is built for each of the {items} numbers of the loop on line "
                         f"{loops[-1].node.lineno} around {what}, which binds {_names(captured)}: a new program per "
                         "number",
                         f"passed as an argument, {_names(captured)} would be traced: one program for every number"]
                yield self.finding(wrap.node, [f"`{wrap.spelling}` of {what} is built and compiled for each of the "
                                               f"{items} numbers of the loop on ", Line(loops[-1].node.lineno),
                                               f" because it binds {_names(captured)}; pass {_names(captured)} as "
                                               "an argument of one jitted function, which compiles once for all "
                                               "of them"], evidence=facts, opt_in=benchmark(model, wrap.ctx))
                continue
            outer = model.function_at(wrap.node)
            if outer is None or outer.traced or called_once(outer, model) or cached(outer):
                self.quiet(model, wrap.node, "repeats (disproven): the loop is over a few items in module-level code, "
                                             "traced code, a test, an entry point or a cached function: a few compiles, "
                                             "once")
                continue  # module-level code or a test: a few compiles, once
            freq = roles.frequency(model, outer)
            if freq.kind in (roles.ONCE, roles.ONCE_BY_NAME):
                self.quiet(model, wrap.node, "repeats (disproven): " + "; ".join(freq.evidence))
                continue
            rep = freq.rep
            name = repetition.bound_name(model, wrap)
            reused = any(len(model.context(c).loops) > len(loops) for c in outer.calls
                         if repetition.calls_wrapper(model, [c], wrap.node, name))
            if benchmark(model, wrap.ctx) is not None:
                opt_in: Optional[str] = benchmark(model, wrap.ctx)
            elif rep is None:
                opt_in = f"no evidence that `{outer.name}` runs more than once"
            elif reused and not per_step(rep):
                opt_in = (f"one compile per item and call of `{outer.name}`, reused in a loop, and `{outer.name}` "
                          "is not known to run at every step")
            else:
                opt_in = None
            message = [f"`{wrap.spelling}` of {what} is rebuilt for each item of the loop on ", Line(loops[-1].node.lineno),
                       f" on every call of `{outer.name}`",
                       *((" (", *why_repeated(rep), ")") if rep is not None else ()),
                       f", so every call traces and compiles it again; {fix}create the jitted function once "
                       "(at module level, in `__init__`, or before the loop) and reuse it"]
            yield self.finding(wrap.site, message, opt_in=opt_in)
        yield from self._cleared_caches(model)

    def _cleared_caches(self, model: ModuleModel) -> Iterator[Finding]:
        """``jax.clear_caches()`` in every iteration of a loop that calls a compiled function: the
        compiled programs are dropped, so the next iteration's call traces and compiles again (fresh set
        AR: a trainer clearing the caches after every step to save host memory)."""
        for call in model.calls_by_name.get("clear_caches", ()):
            ctx = model.context(call)
            if ctx is None or not ctx.loops or model.in_traced_code(call):
                continue
            if model.resolve(call.func, ctx.scope) != "jax.clear_caches":
                continue
            loop = ctx.loops[-1]
            if not any(isinstance(st, ast.Expr) and st.value is call for st in loop.node.body):
                continue  # under an ``if`` or a ``try``: not shown to run at every iteration
            hot = many_trips(ctx.loops)
            if hot is None:
                continue
            compiled = next((c for c in loop.all_calls() if c is not call and not model.in_traced_code(c)
                             and (w := callables.callable_info(model, c.func, model.scope_at(c))) is not None
                             and w.kind in _COMPILING), None)
            if compiled is None:
                continue  # nothing compiled in the loop: clearing costs nothing here
            facts = [f"`jax.clear_caches()` is a statement of the loop body on line {loop.node.lineno}: it runs in every "
                     "iteration and drops every compiled program and trace",
                     f"the same loop calls the compiled `{unparse(compiled.func, 40)}` on line {compiled.lineno}"]
            yield self.finding(call, ["`jax.clear_caches()` runs in every iteration of the loop on ",
                                      Line(loop.node.lineno), f", which calls the compiled `{unparse(compiled.func, 40)}` "
                                      "(", Line(compiled.lineno), "): every iteration traces and compiles it again; "
                                      "clear the caches once after the loop (or every N steps if host memory grows)"],
                               evidence=facts, opt_in=benchmark(model, ctx))


# The wrappers whose result is a compiled program (not a transform that runs op by op outside jit)
_COMPILING = frozenset(N.JIT_WRAPPERS.values())


class JitPerCall(Rule):
    code = "JAX102"
    needs = ("repeats", "eager")
    short = "A jit wrapper built around a fresh callable in a function that runs again and again: a recompile per call."
    confirmed_by = "compiles"
    name = "jit-per-call"
    summary = ("Finds jit wrappers built inside a function around a callable made there (a closure, lambda, "
               "partial or bound method) and called there, or handed to a `lax` loop or branch outside jit "
               "(`lax.fori_loop(0, n, jax.jit(body), x)`, which traces it at every call), in a function with "
               "evidence that it runs again and again: called in a loop of its module or of another module of "
               "the project (on an instance of its class or of a subclass that does not override it, or as "
               "`self.method(...)` in a loop of a base class), a per-step method (`step`, `update`, `act`, "
               "`__call__`, `sample`, `insert`), a closure a factory returns, called from such a function, "
               "given the training step, or a small helper whose result is the compiled call. Also a `lax` loop or "
               "branch outside jit whose body is a function the enclosing function defines (`def body(c, x): ...; "
               "jax.lax.scan(body, ...)`, or a lambda) in a function proven to run outside any trace and again "
               "and again, or a lambda or `def` made in every iteration of a step loop around the call; and a "
               "bound method of the instance (`lax.cond(pred, self._explore, self._exploit)` in a per-step method): "
               "the body is a new object each call, so the loop is traced and compiled each time.")
    rationale = ("The wrapper and its cache live only as long as one call of the outer function, and the "
                 "wrapped callable is a new object each call (a bound method of any instance of a class of the "
                 "module included, for `jax.jit`), so every call retraces and recompiles. Jit once "
                 "(module level, `__init__`, a returned factory, or a cached helper) and reuse the result. "
                 "Functions that run once (set-up code, `train()`, `main`, tests) compile once and are not "
                 "reported. A wrapper rebuilt around the same function object (a module-level or library "
                 "function, or for `jax.pmap` a bound method, equal each time) does not recompile: JAX104 "
                 "reports it.")
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

    opt_in_cases = ("A wrapper rebuilt per call of a function with no evidence in its module that it runs "
                    "more than once (no call in a loop, no per-step name, not returned by a factory), a small "
                    "helper whose work is the compiled call included when nothing in the project calls it in a "
                    "loop (repeats unknown); or one "
                    "compile per call next to a whole loop of work: the function also runs a loop of its own, or "
                    "reuses the wrapper in its loop and is not known to run at every step (a per-trial function "
                    "of a sweep). A lax loop over a body defined per call in a function the module does not show "
                    "runs outside a trace (a library function a caller may jit, where it compiles once).")

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for wrap in model.jit_wraps:
            outer = wrap.func.parent if wrap.decorator and wrap.func else model.function_at(wrap.node)
            if outer is None or outer.traced or isinstance(outer.node, ast.Lambda) or wrap.inline:
                continue
            if cached(outer):
                self.quiet(model, wrap.node, f"repeats (disproven): `{outer.name}` is a cached builder, run once "
                                             "per set of arguments")
                continue
            once = frequency.once_by_name(outer, model)  # opt-in, not silence: a name decides it
            if jit_in_loop(model, wrap) is not None:
                continue  # JAX101's case
            if wrap.decorator:
                what = f"the nested function `{wrap.node.name}`"  # type: ignore[attr-defined]
            else:  # the same function rewrapped per call (no recompile) is JAX104's
                what = describe(repetition.rebuilt_callable(model, wrap, outer))
            if what is None:
                continue
            # a helper jitting around a function it is given has no cache to reuse: not a finding, unless a
            # warm-up call and a measured one show the measurement timing the compile (below)
            given = repetition.wraps_callable_param(model, wrap, outer)
            name = repetition.bound_name(model, wrap)
            # a call of it, or a lax loop or branch outside jit that traces it (each call, a new trace)
            uses = [c for c in outer.calls if repetition.calls_wrapper(model, [c], wrap.node, name, bodies=True)]
            if not uses:
                continue
            if name is not None and frequency.escapes(model, outer, name):
                continue
            freq = roles.frequency(model, outer)
            # called once to warm up, then again inside a measurement: the timed call compiles again
            timed = warmups.repetition(model, outer, frequency.callers(model, outer)) if freq.rep is None else None
            if freq.kind == roles.ONCE and timed is None:
                self.quiet(model, wrap.node, "repeats (disproven): " + "; ".join(freq.evidence))
                continue  # every call of it is made once (or it is a constructor or cached)
            if given and timed is None:
                continue
            rep = freq.rep or timed
            if rep is None and frequency.compute_helper(model, outer, uses):
                rep = Repetition("helper", outer)
            named_once = rep is None and freq.kind == roles.ONCE_BY_NAME  # only names say it runs once
            looped = next((c for c in uses if model.context(c).loops), None)
            if looped is not None:
                # Reused in a loop of the same call: one compile per call of ``outer``, of the program
                # its loop runs (an evaluation pass rebuilding its eval step at every evaluation).
                cost = ["so every call traces and compiles again the program its loop on ",
                        Line(model.context(looped).loops[0].node.lineno), " runs"]
            else:
                cost = ["so every call traces and compiles it again"]
            if rep is not None and rep.kind == "timed":
                cost = [*cost, ": the measured call on ", Line(rep.call.lineno), " times a compile"]
            message = [f"`{wrap.spelling}` of {what} is rebuilt on every call of `{outer.name}`",
                       *((" (", *why_repeated(rep), ")") if rep is not None else ()),
                       ", ", *cost, "; create the jitted function once (at module level, in `__init__` or a "
                       "cached factory) and reuse it"]
            own = loopfacts.own_loop(model, outer, uses) if rep is not None and looped is None else None
            if once is not None and frequency.looped_by_parent(model, outer, rep):
                once = None  # ``main`` runs once, but calls this nested function in its loop: again and again
            if once is not None:
                opt_in: Optional[str] = once
            elif named_once:
                opt_in = (f"only names say that `{outer.name}` runs once per program: it is "
                                         "named like code that runs once, or called only from such code "
                                         "(jaxlint's conventions on set-up and entry-point names)")
            elif rep is None:
                opt_in = f"no evidence that `{outer.name}` runs more than once"
            elif own is not None:
                opt_in = f"`{outer.name}` also runs a loop of its own; one compile per call is small next to it"
            elif looped is not None and not per_step(rep) and rep.kind != "timed":
                opt_in = (f"one compile per call of `{outer.name}`, reused in its loop, and `{outer.name}` is not "
                          "known to run at every step")
            else:
                opt_in = None
            facts = evidence.repetition(rep, model.conventions) if rep is not None else freq.evidence
            if rep is None:
                repeats = proof.unknown("repeats", f"no evidence that `{outer.name}` runs more than once")
            elif rep.kind == "helper":
                # the shape of a per-batch helper is a guess, not a proof: its callers are not seen
                repeats = proof.unknown("repeats", f"`{outer.name}` does little but this compiled call (the kind of "
                                                   "helper called per batch), but no call of it in a loop is seen "
                                                   "in the project")
            else:
                repeats = proof.proven("repeats", "; ".join(facts))
                facts = []
            yield self.finding(wrap.site, message, opt_in=opt_in, evidence=facts, facts=[repeats])
        yield from self._fresh_lax_bodies(model)

    def _fresh_lax_bodies(self, model: ModuleModel) -> Iterator[Finding]:
        """A lax loop or branch outside jit whose body the function around it defines
        (:mod:`~jaxlint.model.facts.freshbodies`): every call traces and compiles the loop again."""
        for found in freshbodies.fresh_body_loops(model):
            call, outer, body = found.call, found.outer, found.body
            bound = body.parent is None and body.cls is not None  # ``self.method``: a new bound method each read
            spelled = ("a lambda" if isinstance(body.node, ast.Lambda) else
                       f"`self.{body.name}`" if bound else f"`{body.name}`")
            facts = [(f"{spelled} is a bound method, made anew at every read" if bound else
                      f"{spelled} is defined inside `{outer.name}`") + ": a new function object each time, and the "
                     "loop's trace is cached by that object"] + ([freshbodies.bound_method_release(model)[1]] if bound else [])
            fix = ((f"pass a module-level function (or a staticmethod) instead, given what it reads from `self` as "
                    f"operands, or jit `{outer.name}`") if bound else
                   f"define it once (at module level, taking what it closes over as arguments or carry) or jit "
                   f"`{outer.name}`")
            if found.site is not None:  # ``jax.vmap(outer)(x)`` outside jit, every step
                transform = unparse(found.site.func.func, 30)
                yield self.finding(call, [f"`{unparse(call.func, 30)}` traces and compiles its body {spelled} again on "
                                          f"every call of `{transform}({outer.name})` (", Line(found.site.lineno),
                                          ", in every iteration of the loop on ", Line(found.loop.node.lineno),
                                          f"): outside jit the transform traces `{outer.name}` anew each call, and "
                                          f"{spelled} is a new function each time, so the compile cache misses; "
                                          f"jit the transformed function once (`jax.jit({transform}({outer.name}))`) "
                                          "or define the body at module level"],
                                   evidence=facts, facts=[found.eager, found.repeats])
                continue
            if found.loop is not None:  # made anew in every iteration of a step loop of ``outer`` itself
                yield self.finding(call, [f"`{unparse(call.func, 30)}` traces and compiles its body {spelled} again in "
                                          "every iteration of the loop on ", Line(found.loop.node.lineno),
                                          f": {spelled} is made anew in each iteration, so the compile cache misses; "
                                          f"{fix}"],
                                   evidence=facts, facts=[found.eager, found.repeats])
                continue
            rep = found.rep
            once = frequency.once_by_name(outer, model)
            if found.eager.status != "proven":
                opt_in: Optional[str] = found.eager.why
            elif once is not None:
                opt_in = once
            elif rep is None:
                opt_in = f"no evidence that `{outer.name}` runs more than once"
            else:
                opt_in = None
            yield self.finding(call, [f"`{unparse(call.func, 30)}` traces and compiles its body {spelled} again on every "
                                      f"call of `{outer.name}`",
                                      *((" (", *why_repeated(rep), ")") if rep is not None else ()),
                                      (f": {spelled} is a bound method, a new object each call, so the " if bound else
                                       f": {spelled} is defined inside `{outer.name}`, a new function each call, "
                                       "so the ") + "compile cache misses",
                                      *((" and the measured call on ", Line(rep.call.lineno), " times a compile")
                                        if rep is not None and rep.kind == "timed" else ()),
                                      f"; {fix}"],
                               opt_in=opt_in, evidence=facts, facts=[found.eager, found.repeats])


RULES = [JitInLoop, JitPerCall]
