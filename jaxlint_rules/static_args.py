"""JAX103: a static argument of a jitted function that takes a new value every iteration or every
call (a loop counter, a lambda made anew), so every time is a cache miss and a new compile."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint.model import Churn, ModuleModel, many_trips, per_step
from jaxlint.model.facts import callables, frequency, guards, repetition, staticself, warmups
from jaxlint.model.policy import roles
from jaxlint.rule import Finding, Line, Rule, unparse

from .recompilation import benchmark, describe, why_repeated


def _callables_made_in(f) -> Optional[frozenset]:
    """The names a function binds to a def, a lambda or a ``partial(...)``: callables made anew at
    each call (a cheap filter before ``repetition.new_callable``); None when the function makes no
    lambda, partial or nested def at all (then no call in it can be given one it made)."""
    names = set()
    for name, evs in f.scope.events.items():
        for ev in evs:
            if ev.kind == "def" or (ev.plain_assign and (isinstance(ev.value, ast.Lambda) or _is_partial(ev.value))):
                names.add(name)
    if names:
        return frozenset(names)
    return frozenset() if any(isinstance(c, ast.Call) and any(
        isinstance(a, ast.Lambda) or _is_partial(a) for a in (*c.args, *(k.value for k in c.keywords)))
        for c in f.calls) else None


def _given_made_callables(model: ModuleModel) -> Iterator[ast.Call]:
    """The calls (in a script's loops, or in a function that makes a callable) given a lambda, a
    ``partial(...)`` or a name its function binds to one: a cheap filter before the questions of
    ``callable_info`` and ``repetition.new_callable``."""
    made = {id(f): _callables_made_in(f) for f in model.functions}
    top = (c for c in model.loop_calls if model.function_at(c) is None)  # a script's loops
    for call in (*top, *(c for f in model.functions if made[id(f)] is not None for c in f.calls)):
        f = model.function_at(call)
        names = made[id(f)] if f is not None else None
        if any(isinstance(a, ast.Lambda) or _is_partial(a) or (names and isinstance(a, ast.Name) and a.id in names)
               for a in (*call.args, *(k.value for k in call.keywords))):
            yield call


def _is_partial(e: ast.AST) -> bool:
    return isinstance(e, ast.Call) and (getattr(e.func, "id", None) or getattr(e.func, "attr", None)) == "partial"


def _may_filter_jit(model: ModuleModel) -> bool:
    """A cheap gate: the module builds a ``filter_jit`` wrapper itself or imports the libraries that
    make them (equinox, haliax). A filter_jit function imported from another module of the project
    into a module that imports neither is not looked at (asking every call of every module what it
    runs cost more than 1% of a cold check of the pinned libraries)."""
    if any(w.kind == "filter_jit" for w in model.jit_wraps):
        return True
    return any((module or "").split(".", 1)[0] in ("equinox", "haliax")
               for module, _, _ in model.module_scope.import_src.values())


class StaticArgChurn(Rule):
    code = "JAX103"
    short = "A static argument new every iteration or call (a loop counter, a new lambda): the jitted function recompiles."
    confirmed_by = "compiles"
    name = "static-arg-churn"
    summary = ("Finds calls, inside a loop, of a jitted function whose static argument "
               "(`static_argnums`/`static_argnames`) takes a new value on every iteration: the loop counter, "
               "the item of a loop over a sequence, a value incremented in the loop, or one computed from "
               "those. Values that stay the same or take a few values (literal options, a short constant "
               "range, comparisons, `i % k`) are not reported, nor are values returned by other functions. "
               "Also a lambda, `functools.partial`, nested def or transformed function passed as a static "
               "argument and made anew at every iteration of a loop, or at every call of a function that runs "
               "at every step or is called once and then again inside a time measurement (a warm-up, then a "
               "timed call: the figure is a compile); equinox's `filter_jit` treats every non-array argument "
               "this way. And a method jitted with `self` static (`static_argnums=0`) called on an instance made "
               "anew in every iteration of a class that compares by identity (no `__eq__`/`__hash__`).")
    rationale = ("Static arguments are part of the compilation cache key: every new value compiles a new "
                 "program. A step counter or loop index passed as static compiles once per iteration. Pass it "
                 "as a traced array, or keep static arguments to a handful of fixed values.")
    opt_in_cases = ("A loop that measures time (a benchmark over configurations: compiling per configuration may be "
                    "what it measures). A new callable passed as a static argument in a function with no evidence "
                    "that it runs at every step or again after a first, timed call (a loop over a few configurations: "
                    "each may compile anyway).")
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
        for call in (c for loop in model.loops for c in loop.calls):
            ctx = model.context(call)
            if ctx is None or not ctx.loops or model.in_traced_code(call):
                continue
            wrap = callables.callable_info(model, call.func, ctx.scope)
            if wrap is None or not (wrap.static_argnums or wrap.static_argnames):
                continue
            bench = benchmark(model, ctx)
            guard = guards.new_key_guard(ctx, ctx.loops[-1])
            if guard is not None:  # ``if n not in cache:``: the call runs once per new value, as the jit cache would
                self.quiet(model, call, f"per-step (disproven): the `if {unparse(guard, 40)}` on line {guard.lineno} "
                                        "runs it once per new value, not at every iteration")
                continue
            params, shift, static_pos, static_names = wrap.static_layout(call)
            for i, arg in enumerate(call.args):
                if isinstance(arg, ast.Starred):
                    break
                idx = i + shift
                pname = params[idx] if idx < len(params) else None
                if idx in static_pos or (pname is not None and pname in static_names):
                    churn = repetition.churn(model, arg, ctx.loops, ctx.scope)
                    if churn is not None:
                        yield self._report(arg, pname or f"#{idx}", call, churn, bench)
            for kw in call.keywords:
                if kw.arg in static_names:
                    churn = repetition.churn(model, kw.value, ctx.loops, ctx.scope)
                    if churn is not None:
                        yield self._report(kw.value, kw.arg, call, churn, bench)
        yield from self._filter_jit_callables(model)
        yield from self._fresh_static_callables(model)
        yield from self._fresh_static_self(model)

    def _fresh_static_self(self, model: ModuleModel) -> Iterator[Finding]:
        """``model.update(params, batch)`` of a method jitted with ``self`` static, on an instance made anew
        in every iteration (``model = Net(new_params)``) of a class that compares by identity: every call is
        a cache miss (:mod:`~jaxlint.model.facts.staticself`)."""
        if not any(w.decorator and (w.static_argnums or w.static_argnames) for w in model.jit_wraps):
            return
        for call in model.loop_calls:
            found = staticself.fresh_static_self(model, call)
            if found is None:
                continue
            x, cname, meth = found.receiver.id, found.cls.node.name, found.method.name
            facts = [f"`{meth}` is jitted with `self` static (line {found.wrap.node.lineno}): the instance is hashed "
                     "into the cache key and compared by equality",
                     f"`{x}` is a new `{cname}` in every iteration of the loop on line {found.loop.node.lineno} "
                     f"(line {found.binding.node.lineno})",
                     f"`{cname}` defines neither `__eq__` nor `__hash__` (nor inherits them from a base the module "
                     "does not show): a new instance equals only itself"]
            yield self.finding(call, [f"`{x}.{meth}(...)` is jitted with `self` static, and `{x}` is a new `{cname}` "
                                      "in every iteration of the loop on ", Line(found.loop.node.lineno), " (",
                                      Line(found.binding.node.lineno), f"): `{cname}` compares by identity, so every "
                                      "call is a cache miss and traces and compiles again; keep one instance (pass "
                                      f"the arrays that change as arguments), or give `{cname}` `__eq__` and "
                                      "`__hash__` over the fields that matter"],
                               evidence=facts, opt_in=benchmark(model, model.context(call)))

    def _fresh_static_callables(self, model: ModuleModel) -> Iterator[Finding]:
        """``jax.jit(solve, static_argnums=0)`` given a lambda, partial, nested def or transformed
        function made anew at every iteration of a loop, or at every call of a function that runs
        again and again: static arguments are keyed by hash and equality, and these objects equal
        only themselves (a bound method equals the next one of the same instance: not reported)."""
        if not any(w.static_argnums or w.static_argnames for w in model.jit_wraps):
            return  # no jit with static arguments made here (one imported from another module is not asked)
        for call in _given_made_callables(model):
            f = model.function_at(call)
            ctx = model.context(call)
            if ctx is None or model.in_traced_code(call) or (f is not None and f.traced):
                continue
            wrap = callables.callable_info(model, call.func, ctx.scope)
            if wrap is None or wrap.kind == "filter_jit" or not (wrap.static_argnums or wrap.static_argnames):
                continue
            params, shift, static_pos, static_names = wrap.static_layout(call)
            statics = [(a, params[i + shift] if i + shift < len(params) else f"#{i + shift}")
                       for i, a in enumerate(call.args) if not isinstance(a, ast.Starred) and (
                           i + shift in static_pos or (i + shift < len(params) and params[i + shift] in static_names))]
            statics += [(k.value, k.arg) for k in call.keywords if k.arg in static_names]
            inside = ctx.loops if ctx.loops else f
            if inside is None:
                continue
            news = [(a, p, repetition.new_callable(model, a, inside, ctx.scope)) for a, p in statics]
            news = [(a, p, n) for a, p, n in news if n is not None and n.kind != "bound_method"]
            if not news:
                continue
            opt_in = None
            if ctx.loops:
                if many_trips(ctx.loops) is None:
                    continue
                opt_in = benchmark(model, ctx)
                where = ["every iteration of the loop on ", Line(ctx.loops[-1].node.lineno)]
                rep = None
            else:
                freq = roles.frequency(model, f)
                rep = freq.rep if per_step(freq.rep) else warmups.repetition(model, f, frequency.callers(model, f))
                if rep is None:
                    if freq.kind == roles.ONCE:
                        continue
                    opt_in = f"no evidence that `{f.name}` runs at the steps of a loop, or again after a first call"
                    where = [f"every call of `{f.name}`"]
                else:
                    where = [f"every call of `{f.name}` (", *why_repeated(rep), ")"]
            for arg, pname, new in news:
                what = describe(new)
                facts = [f"`{pname}` is a static argument of the jitted `{unparse(call.func, 40)}`: its value is hashed "
                         "into the cache key and compared by equality",
                         f"the argument is {what}, a new object each time, equal only to itself"]
                timed = (["; the measured call on ", Line(rep.call.lineno), " times a compile"]
                         if rep is not None and rep.kind == "timed" else [])
                yield self.finding(arg, [f"static argument `{pname}` of `{unparse(call.func, 40)}` is {what}: a new "
                                         "object on ", *where, ", and a function equals only itself, so every time is "
                                         "a cache miss and a new compile", *timed, "; define the function once (at module level, "
                                         "taking what it closes over as arguments) and pass that same object, or pass "
                                         "the values as traced arguments"], evidence=facts, opt_in=opt_in)

    def _filter_jit_callables(self, model: ModuleModel) -> Iterator[Finding]:
        """equinox's ``filter_jit`` (and haliax's) treats every argument that is not an array as
        static, hashed into the cache key: a lambda, closure or partial made anew on every
        iteration, or on every call of a function that runs at every step, compiles every time."""
        for wrap_call in self._filter_jit_calls(model):
            call, wrap = wrap_call
            ctx = model.context(call)
            if ctx is None or model.in_traced_code(call):
                continue
            outer = model.function_at(call)
            inside = ctx.loops if ctx.loops else outer
            if inside is None or (outer is not None and outer.traced):
                continue
            news = [(arg, repetition.new_callable(model, arg, inside, ctx.scope))
                    for arg in [*call.args, *(kw.value for kw in call.keywords)]]
            news = [(arg, new) for arg, new in news if new is not None]
            if not news:
                continue  # asked first: how often the code runs is the costly question
            if ctx.loops:
                if roles.loop_role(model, ctx.loops[-1], ctx).kind == roles.BENCHMARK or many_trips(ctx.loops) is None:
                    continue
                where = ["every iteration of the loop on ", Line(ctx.loops[-1].node.lineno)]
            else:
                freq = roles.frequency(model, outer)
                if freq.rep is None or not per_step(freq.rep):
                    continue
                where = [f"every call of `{outer.name}` (", *why_repeated(freq.rep), ")"]
            for arg, new in news:
                what = describe(new)
                facts = [f"`{unparse(call.func, 40)}` is compiled by `{wrap.spelling}`, which treats every argument that "
                         "is not an array as static: hashed into the cache key",
                         f"the argument is {what}, a new object each time"]
                yield self.finding(arg, [f"{what} passed to the `{wrap.spelling}` function `{unparse(call.func, 40)}` "
                                         "is static (not an array) and new on ", *where, ", so every time is a cache "
                                         "miss and a new compile; define the function once, or pass the values it "
                                         "closes over as array arguments"], evidence=facts)
                break

    def _filter_jit_calls(self, model: ModuleModel):
        if not _may_filter_jit(model):
            return
        for call in _given_made_callables(model):
            wrap = callables.callable_info(model, call.func, model.scope_at(call))
            if wrap is not None and wrap.kind == "filter_jit":
                yield call, wrap

    def _report(self, arg: ast.AST, pname: str, call: ast.Call, churn: Churn, bench: Optional[str] = None) -> Finding:
        source = {"counter": f"the loop counter `{churn.name}`", "item": f"the loop item `{churn.name}`",
                  "accumulated": f"`{churn.name}`, updated on every iteration",
                  "data": f"a number read from the loop item `{churn.name}`"}[churn.kind]
        how = f"is {source}" if unparse(arg) == churn.name else f"is computed from {source}"
        if churn.kind == "data":
            facts = [f"`{pname}` is a static argument of the jitted `{unparse(call.func, 40)}`: each new value is a "
                     "new cache key",
                     f"it {how} (a count or value of this iteration's data), which changes with the data of the "
                     f"loop on line {churn.loop.node.lineno}"]
            return self.finding(arg, [f"static argument `{pname}` of `{unparse(call.func)}` {how}: it changes with the "
                                      "data of each iteration of the loop on ", Line(churn.loop.node.lineno),
                                      ", and every new value compiles a new program; pass it as a traced argument "
                                      "(a mask or a traced count), or pad the data to a few fixed sizes"],
                                evidence=facts, opt_in=bench)
        facts = [f"`{pname}` is a static argument of the jitted `{unparse(call.func, 40)}`: each new value is a "
                 "new cache key",
                 f"it {how}, which changes on every iteration of the loop on line {churn.loop.node.lineno} (not "
                 "a few literal options)"]
        parts = _parts_walked(churn) if churn.kind == "counter" else None
        if parts is not None and bench is None:
            bench = (f"the loop on line {churn.loop.node.lineno} walks the indices of `{parts}` "
                     "(`range(len(...))`): the static argument takes the same values each time the loop runs, so it "
                     "compiles once per part, not once per step")
        return self.finding(arg, [f"static argument `{pname}` of `{unparse(call.func)}` {how}: it takes a new value "
                                  "on every iteration of the loop on ", Line(churn.loop.node.lineno), ", so every "
                                  "iteration compiles a new program; pass it as a traced argument (not static), "
                                  "or keep it to a few fixed values"], evidence=facts, opt_in=bench)


def _parts_walked(churn: Churn) -> Optional[str]:
    """The collection a counter loop walks the indices of (``for i in range(len(agents))``), spelled;
    None for other loops (a step count, a ``while``)."""
    it = getattr(churn.loop.node, "iter", None)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and len(it.args) == 1:
        inner = it.args[0]
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "len" \
                and len(inner.args) == 1:
            return unparse(inner.args[0], 30)
    return None


RULES = [StaticArgChurn]
