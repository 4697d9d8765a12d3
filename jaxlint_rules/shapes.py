"""JAX3xx: shapes and Python control flow that tracing cannot express, or unrolls."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint import names as N
from jaxlint.model import FunctionInfo, Loop, ModuleModel, Scope, call_arg
from jaxlint.model.facts import callables, hostvalues, ragged, statics, tracers
from jaxlint.model.policy import roles
from jaxlint.model.facts import loops as loopfacts
from jaxlint.model.facts import values as V
from jaxlint.rule import Finding, Rule, unparse


def _describe_if(node: ast.AST) -> tuple[str, str]:
    if isinstance(node, ast.While):
        return "`while`", "use jax.lax.while_loop (or fori_loop)"
    if isinstance(node, ast.IfExp):
        return "a conditional expression", "use jnp.where or jax.lax.cond"
    if isinstance(node, ast.Assert):
        return "`assert`", "use jax.experimental.checkify or jax.debug checks, or assert on shapes only"
    return "`if`", "use jax.lax.cond or jnp.where, or make the value static"


# --------------------------------------------------------------------------- JAX301


# Functions whose output size depends on the data unless ``size=`` is given.
_SIZE_FUNCS = N.SIZE_FUNCS


class DataDependentShape(Rule):
    code = "JAX301"
    needs = ("tracer", "traced-path")
    fails_at_runtime = True  # NonConcreteBooleanIndexError/ConcretizationTypeError (jit, vmap, lax bodies)
    short = "An operation whose output shape depends on the data (mask indexing, nonzero, unique) inside traced code."
    name = "data-dependent-shape"
    summary = ("Finds boolean-mask indexing (`x[x > 0]`, `x[mask]`, `x.at[mask]`), `jnp.nonzero`/`argwhere`/"
               "`flatnonzero`/`unique*`/`compress`/`extract`/set operations and one-argument `jnp.where(c)` "
               "without `size=`, and `jnp.repeat` with traced repeats, inside traced code.")
    rationale = ("XLA programs have static shapes. An operation whose output size depends on the values in an "
                 "array cannot be compiled: under `jax.jit`, `vmap` or a `lax` body it raises "
                 "NonConcreteBooleanIndexError/ConcretizationTypeError. Keep the shape fixed: "
                 "`jnp.where(mask, x, 0)` or a masked reduction instead of `x[mask]`, and `size=`/`fill_value=` "
                 "for `jnp.nonzero`, `jnp.unique` and friends.")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def positive_mean(x):
            return jnp.mean(x[x > 0])
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def positive_mean(x):
            mask = x > 0
            return jnp.sum(jnp.where(mask, x, 0.0)) / jnp.maximum(jnp.sum(mask), 1)
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        staging = model.staging
        for f in staging.functions():
            for sub in f.subscripts:
                scope = model.scope_at(sub)
                if not V.is_jax(model, sub.value, scope):
                    continue
                parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
                found = _first_traced(staging, f, [p for p in parts if V.is_mask(model, p, scope)], scope)
                facts = found and self.proof(model, sub, found[1], lambda f=f, sub=sub: tracers.traced_path(staging, f, sub))
                if facts:
                    yield self.finding(sub, f"boolean-mask indexing `{unparse(sub, 30)}` has a size that depends "
                                            "on the data, so it raises NonConcreteBooleanIndexError "
                                            f"{staging.how_staged(f)}; use jnp.where(mask, x, fill) or a masked "
                                            "reduction", facts=facts)
            for call in f.calls:
                scope = model.scope_at(call)
                what = self._sized_call(model, call, scope)
                if what is None:
                    continue
                head, fix, operands = what
                found = _first_traced(staging, f, operands, scope)
                facts = found and self.proof(model, call, found[1],
                                             lambda f=f, call=call: tracers.traced_path(staging, f, call))
                if facts:
                    yield self.finding(call, f"{head} has a size that depends on the data, so it raises "
                                             f"ConcretizationTypeError {staging.how_staged(f)}; {fix}",
                                       facts=facts)

    def _sized_call(self, model: ModuleModel, call: ast.Call, scope: Scope) -> Optional[tuple]:
        """``(what, fix, operands)`` for a call whose output size depends on the data of one of
        ``operands`` when that one is traced."""
        func = call.func
        qn = model.resolve(func, scope)
        has = {kw.arg for kw in call.keywords}
        if None in has:
            return None  # **kwargs may carry size=
        if any(isinstance(a, ast.Starred) for a in call.args):
            return None
        if qn in _SIZE_FUNCS:
            if "size" in has:
                return None
            operands = [a for a in (call_arg(call, i, None) for i in _SIZE_FUNCS[qn]) if a is not None]
            return f"`{unparse(func)}(...)` without `size=`", "pass size= (and fill_value=)", operands
        if qn == "jax.numpy.where":
            if len(call.args) == 1 and not has & {"x", "y", "size"}:
                return ("one-argument `jnp.where(cond)` without `size=`",
                        "use jnp.where(cond, x, y) or pass size=", [call.args[0]])
            return None
        if qn == "jax.numpy.repeat":
            repeats = call_arg(call, 1, "repeats")
            if repeats is not None and "total_repeat_length" not in has:
                return "`jnp.repeat` with traced `repeats`", "pass total_repeat_length=", [repeats]
            return None
        if qn is None and isinstance(func, ast.Attribute) and func.attr == "nonzero" and "size" not in has:
            return f"`{unparse(func)}()` without `size=`", "pass size= (and fill_value=)", [func.value]
        return None


def _shape_parts(arg: ast.AST) -> list:
    """The sizes a shape argument is made of: the elements of a tuple or list literal, of each side
    of a concatenation (``(k,) + x.shape``), or the argument itself."""
    if isinstance(arg, (ast.Tuple, ast.List)):
        return list(arg.elts)
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add) and (
            isinstance(arg.left, (ast.Tuple, ast.List)) or isinstance(arg.right, (ast.Tuple, ast.List))):
        return _shape_parts(arg.left) + _shape_parts(arg.right)
    return [arg]


def _first_traced(staging, f: FunctionInfo, exprs: list, scope: Scope, ctx=None):
    """``(expression, tracer fact)`` for the first of ``exprs`` proven a tracer, else for the first
    one not known either way, else for the first one (disproven: not a tracer); None for no
    expressions."""
    first = gap = None
    for e in exprs:
        fact = tracers.tracer(staging, f, e, scope, ctx)
        if fact.proven:
            return e, fact
        if fact.unknown and gap is None:
            gap = e, fact
        if first is None:
            first = e, fact
    return gap or first


# --------------------------------------------------------------------------- JAX302


class TracedControlFlow(Rule):
    code = "JAX302"
    needs = ("tracer", "traced-path")
    fails_at_runtime = True  # TracerBoolConversionError (reported under jit, vmap, lax bodies; not grad alone)
    short = "Python control flow (if, while, and/or) on a traced array inside jitted code."
    name = "traced-control-flow"
    summary = ("Finds Python `if`/`while`/`assert`, conditional expressions and `and`/`or`/`not` applied to a "
               "value known to be an array (the result of a JAX operation, a comparison or arithmetic with one, "
               "an argument used as a number) inside jitted (or vmapped, or lax-body) code.")
    rationale = ("Inside `jax.jit` a value is an abstract tracer: Python cannot decide which branch to take, so "
                 "converting it to bool raises TracerBoolConversionError. Branch on device with "
                 "`jnp.where`/`jax.lax.cond`/`jax.lax.switch`, loop with `jax.lax.while_loop`, or make the value "
                 "a static argument. Tests on shapes, dtypes, static arguments and `is None` are fine, and so "
                 "are tests of arguments that may be None, a container or an object (a pytree: `if "
                 "dynamic_scale:`, `params or {}`), of parameters with a default no caller passes, of config "
                 "values fixed with `functools.partial` before jit, and of flags that short-circuit (`flag and "
                 "...` with `flag` fixed to False).")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def relu(x):
            if x.sum() > 0:
                return x
            return jnp.zeros_like(x)
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def relu(x):
            return jax.lax.cond(x.sum() > 0, lambda v: v, jnp.zeros_like, x)
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        staging = model.staging
        covered: set = set()
        for node in model.ifs:
            test = node.test
            anchor = test if isinstance(node, ast.While) else node
            ctx = model.context(anchor)
            f = model.function_at(anchor)
            if ctx is None or not staging.staged(f):
                continue
            _cover(test, covered)
            culprit = self._culprit(model, staging, f, ctx, test, True)
            facts = culprit and self.proof(model, anchor, culprit[1],
                                           lambda f=f, anchor=anchor: tracers.traced_path(staging, f, anchor))
            if facts:
                kind, fix = _describe_if(node)
                yield self.finding(test, f"{kind} on the traced value `{unparse(culprit[0], 30)}` raises "
                                         f"TracerBoolConversionError {staging.how_staged(f)}; {fix}",
                                   facts=facts)
        for node in model.bool_nodes:
            if id(node) in covered:
                continue
            ctx = model.context(node)
            f = model.function_at(node)
            if ctx is None or not staging.staged(f):
                continue
            _cover(node, covered)
            culprit = self._culprit(model, staging, f, ctx, node, False)
            facts = culprit and self.proof(model, node, culprit[1],
                                           lambda f=f, node=node: tracers.traced_path(staging, f, node))
            if not facts:
                continue
            if isinstance(node, ast.UnaryOp):
                what, fix = "`not`", "use jnp.logical_not (or ~)"
            else:
                op = "and" if isinstance(node.op, ast.And) else "or"
                what, fix = f"`{op}`", f"use jnp.logical_{op} (or {'&' if op == 'and' else '|'}) or jnp.where"
            yield self.finding(node, f"{what} on the traced value `{unparse(culprit[0], 30)}` raises "
                                     f"TracerBoolConversionError {staging.how_staged(f)}; {fix}",
                               facts=facts)

    def _culprit(self, model: ModuleModel, staging, f: FunctionInfo, ctx, e: ast.AST, tested: bool):
        """``(operand, tracer fact)`` for the first operand that Python converts to bool and that is
        proven a tracer, else for the first one not known either way; None when none may be one.
        ``tested``: the value of ``e`` itself is converted (an ``if`` test, a ``not`` operand, a
        non-last operand of ``and``/``or``)."""
        if isinstance(e, ast.BoolOp):
            last = len(e.values) - 1
            stops_at = isinstance(e.op, ast.Or)  # `or` stops at a true operand, `and` at a false one
            gap = None
            for i, v in enumerate(e.values):
                found = self._culprit(model, staging, f, ctx, v, tested or i < last)
                if found is not None:
                    if found[1].proven:
                        return found
                    gap = gap or found
                if i < last and statics.static_truth(staging, f, v, ctx.scope) is stops_at:
                    break  # a flag fixed at every trace short-circuits: the rest never runs
            return gap
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return self._culprit(model, staging, f, ctx, e.operand, True)
        if tested and V.truthy_tracer(model, e, ctx.scope):
            fact = tracers.tracer(staging, f, e, ctx.scope, ctx)
            if not fact.disproven:
                return e, fact
            self.quiet(model, e, fact)
        return None


def _cover(e: ast.AST, covered: set) -> None:
    """Mark the ``and``/``or``/``not`` nodes of one boolean expression: one finding per expression."""
    if isinstance(e, ast.BoolOp):
        covered.add(id(e))
        for v in e.values:
            _cover(v, covered)
    elif isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        covered.add(id(e))
        _cover(e.operand, covered)


# --------------------------------------------------------------------------- JAX303

# name -> the (position, keyword) of every argument that decides an output shape.
_SHAPE_ARGS = N.SHAPE_ARGS


class TracedShapeArgument(Rule):
    code = "JAX303"
    needs = ("tracer", "traced-path")
    fails_at_runtime = True  # ConcretizationTypeError or a TypeError about shapes
    short = "An array size or shape computed from a traced value inside traced code."
    name = "traced-shape-argument"
    summary = ("Finds array constructors (`jnp.zeros/ones/full/empty/arange/linspace/eye/tri/identity`), "
               "`reshape`, `broadcast_to`, `lax.dynamic_slice` sizes and `jax.random` `shape=`/`num=` given a "
               "size computed from a traced value inside traced code.")
    rationale = ("Shapes are part of the compiled program and must be known when tracing. A size read from "
                 "a tracer's value (`jnp.zeros(n)` with a traced `n`, `x.reshape(k, -1)` with `k = jnp.sum(m)`) "
                 "raises ConcretizationTypeError or a TypeError about shapes under jit. Derive sizes from "
                 "`x.shape`, or pass them as static arguments (`static_argnames=`).")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def pad_to(x, length):
            return jnp.concatenate([x, jnp.zeros(length - x.shape[0])])
    """
    good = """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnames="length")
        def pad_to(x, length):
            return jnp.concatenate([x, jnp.zeros(length - x.shape[0])])
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        staging = model.staging
        for f in staging.functions():
            for call in f.calls:
                scope = model.scope_at(call)
                for arg in self._size_args(model, call, scope):
                    parts = [p.value if isinstance(p, ast.Starred) else p for p in _shape_parts(arg)]
                    found = _first_traced(staging, f, parts, scope)
                    facts = found and self.proof(model, found[0], found[1],
                                                 lambda f=f, call=call: tracers.traced_path(staging, f, call))
                    if facts:
                        bad = found[0]
                        yield self.finding(bad, f"size `{unparse(bad, 30)}` of `{unparse(call.func)}` is "
                                                "computed from a traced value, and shapes must be known when "
                                                f"tracing: this raises a TypeError or ConcretizationTypeError "
                                                f"{staging.how_staged(f)}; derive it from `.shape`, or make it a "
                                                "static argument (static_argnames=)", facts=facts)
                        break

    def _size_args(self, model: ModuleModel, call: ast.Call, scope: Scope) -> list:
        func = call.func
        qn = model.resolve(func, scope)
        if qn in _SHAPE_ARGS:
            out = []
            for idx, kw in _SHAPE_ARGS[qn]:
                arg = call_arg(call, idx, kw)
                if arg is not None:
                    out.append(arg)
            return out
        if (qn is None and isinstance(func, ast.Attribute) and func.attr == "reshape"
                and V.is_jax(model, func.value, scope)):
            return list(call.args) + [kw.value for kw in call.keywords if kw.arg in ("shape", "newshape")]
        return []


# --------------------------------------------------------------------------- JAX304


class ShapeChurn(Rule):
    code = "JAX304"
    short = "A jitted function given an argument whose shape changes every iteration of a loop, so it recompiles."
    confirmed_by = "compiles"
    name = "shape-churn"
    summary = ("Finds calls, in a loop, of a jitted function with an argument whose shape follows the loop: "
               "sliced to a width that changes (`f(x[:i])`, `f(x[:, :t])`, `f(x[i:j])` with `j` recomputed in the "
               "loop), built with a size from the loop (`f(jnp.ones(n))`, `f(jnp.arange(t))`, `f(jnp.zeros((n, "
               "d)))`), stacked from a list that grows each iteration (`buf.append(x); f(jnp.stack(buf))`), "
               "converted from per-item data of varying length (`f(jnp.array([vocab[w] for w in s.split()]))`), "
               "or drawn from a list of arrays built with different sizes (`for x in [make(n) for n in sizes]`); "
               "and sweeps in batches whose last one is shorter (`f(x[i:i + bs])` for `i in range(0, n, bs)`).")
    rationale = ("A jitted function is compiled once per distinct input shape. An argument whose shape follows "
                 "the loop (a growing prefix, a ragged window, an array sized by the loop counter, a growing "
                 "buffer, a tokenized sentence) is traced and compiled again for every new shape: every iteration "
                 "when it grows with a counter, once per distinct length when it follows the data, once per size "
                 "when the sizes are listed. Pad to a fixed length (or a few bucket sizes) and pass the valid "
                 "length or a mask as an array; take fixed-size windows with `jax.lax.dynamic_slice`; give "
                 "data-dependent functions `size=`. A sweep in fixed-size batches compiles twice when the length "
                 "is not a multiple of the batch size: once for the full batches, once more for the last, "
                 "shorter one; pad it (with a mask) or drop it. Sweeps that stop at a multiple of the batch "
                 "size or skip a short batch, batches from a loader, row indexing `x[i]`, sizes bucketed with "
                 "`//` or a helper, buffers flushed when full, and loops over a few literal sizes are not "
                 "reported.")
    opt_in_cases = ("A sweep in fixed-size batches whose last batch is shorter (`f(x[i:i + bs])` for `i in "
                    "range(0, n, bs)`): one more compile per program, bounded, as the shorter shape is cached.")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def prefix_energy(x):
            return jnp.sum(x ** 2)

        def energies(x):
            return [prefix_energy(x[:t]) for t in range(1, x.shape[0])]
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def prefix_energy(x, t):
            return jnp.sum(jnp.where(jnp.arange(x.shape[0]) < t, x ** 2, 0.0))

        def energies(x):
            return [prefix_energy(x, t) for t in range(1, x.shape[0])]
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for call in model.loop_calls:
            ctx = model.context(call)
            if model.in_traced_code(call):
                continue
            loops = tuple(lp for lp in ctx.loops if not lp.bounded)
            if not loops:
                continue
            wrap = callables.callable_info(model, call.func, ctx.scope)
            if wrap is None or wrap.kind not in ("jit", "pmap", "filter_jit"):
                continue
            if roles.loop_role(model, ctx.loops[-1], ctx).kind == roles.BENCHMARK:
                continue
            churn = model.shape_variance(ctx.scope, loops)
            static_pos, static_names = wrap.static_positions(call)
            args = []
            for i, arg in enumerate(call.args):
                if isinstance(arg, ast.Starred):
                    break
                if i not in static_pos:
                    args.append(arg)
            args += [kw.value for kw in call.keywords if kw.arg is not None and kw.arg not in static_names]
            reported = False
            for arg in args:
                size = ragged.ragged_batch(churn, arg, ctx)
                if size is not None:
                    if not reported:  # one finding per call, not one per argument sliced alike
                        yield self.finding(arg, f"`{unparse(arg, 30)}` is shorter in the last iteration unless the "
                                                f"length is a multiple of `{size}`, so `{unparse(call.func)}` compiles "
                                                "once more for the last, shorter batch; pad it to the full batch size "
                                                "(and mask the padding) or drop it", opt_in=_RAGGED,
                                           evidence=[f"`{unparse(call.func, 40)}` is jitted: each new input shape "
                                                     "is a new compile",
                                                     f"the loop on line {loops[-1].node.lineno} sweeps in steps of "
                                                     f"`{size}` and slices one batch per step, to the end"])
                    reported = True
                    continue
                src = churn.shape_source(arg, ctx)
                if src is not None:
                    facts = [f"`{unparse(call.func, 40)}` is jitted: each new input shape is a new compile",
                             f"`{unparse(arg, 30)}` {src.origin}, in the loop on line {loops[-1].node.lineno}"]
                    yield self.finding(arg, _churn_message(unparse(arg, 30), unparse(call.func), src), evidence=facts)


_RAGGED = ("a shorter last batch compiles once more, once per program: the shorter shape is cached for the "
           "next sweep")

# What to do about each kind of shape that follows the loop.
_CHURN_FIX = {
    "slice": ("pad to a fixed size (or a few bucket sizes) and pass the length or a mask, or take a fixed-size "
              "window with jax.lax.dynamic_slice"),
    "built": "build it at a fixed size (the largest, or a few bucket sizes) and pass the length or a mask",
    "stacked": ("preallocate a fixed-size buffer (jnp.zeros((max_len, ...))), write each item with .at[t].set, "
                "and pass the count or a mask"),
    "sized": "pass size= (and fill_value=) so the result has a fixed size, and mask the fill",
    "converted": "pad every item to a fixed length (or a few bucket lengths) and pass the length or a mask",
    "drawn": "pad them to one size (or a few bucket sizes) and pass the lengths or masks",
}


def _churn_message(arg: str, callee: str, src) -> str:
    if src.every:
        how = f"a new shape in every iteration, so `{callee}` is traced and compiled again in every iteration"
    elif src.sizes:
        shown = ", ".join(str(s) for s in src.sizes)
        how = (f"{len(src.sizes)} different sizes ({shown}), so `{callee}` is traced and compiled {len(src.sizes)} "
               "times, once per size")
    elif src.count:
        how = (f"up to {src.count} different shapes, so `{callee}` is traced and compiled up to {src.count} times, "
               "once per shape")
    elif src.kind == "drawn":
        how = f"one shape per distinct size, so `{callee}` is traced and compiled once per distinct shape among them"
    else:
        how = (f"a new shape for each distinct {src.per}, so `{callee}` is traced and compiled once per distinct "
               f"{src.per}")
    return f"`{arg}` {src.origin}: {how}; {_CHURN_FIX[src.kind]}"


# --------------------------------------------------------------------------- JAX305

UNROLL_TRIPS = 100


class UnrolledLoopInTracedCode(Rule):
    code = "JAX305"
    short = "A long Python loop inside traced code, unrolled into a very large compiled program."
    confirmed_by = "unroll"
    name = "unrolled-loop-in-traced-code"
    summary = ("Finds Python `for` loops inside traced code that run at least 100 times (a literal or "
               "module-constant `range`) or that feed a jitted step function its own result every iteration.")
    rationale = ("Tracing runs the Python loop and records every iteration: `for _ in range(1000)` inside jit "
                 "becomes a program with a thousand copies of the body, which takes minutes to compile and "
                 "grows the executable. `jax.lax.fori_loop` or `jax.lax.scan` record the body once and compile "
                 "in seconds. Short loops over layers or pytree leaves are fine.")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def simulate(x, v):
            for _ in range(1000):
                v = v - 0.01 * x
                x = x + 0.01 * v
            return x, v
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def simulate(x, v):
            def step(_, state):
                x, v = state
                v = v - 0.01 * x
                return x + 0.01 * v, v
            return jax.lax.fori_loop(0, 1000, step, (x, v))
    """

    opt_in_cases = ("A Python loop of unknown length in traced code that calls a jitted function without feeding "
                    "it its own result (a sweep over a few settings, each traced on purpose): the unroll costs "
                    "as much as the loop is long, which the code does not show.")

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        staging = model.staging
        for f in staging.functions():
            if not f.loops:
                continue
            for loop in f.loops:
                found = self._unrolled(model, loop, f)
                if found is not None:
                    msg, opt_in = found
                    yield self.finding(loop.node, msg, opt_in=opt_in)

    def _unrolled(self, model: ModuleModel, loop: Loop, f: FunctionInfo) -> Optional[tuple]:
        """``(message, opt-in reason or None)`` for a loop that tracing unrolls at a cost."""
        if loop.kind != "for" or loop.bounded:
            return None
        node = loop.node
        scope = model.context(node).scope
        rng = loopfacts.range_call(model, node.iter, scope)
        if rng is None:
            return None
        vals = [V.const_int(model, a, scope) for a in rng.args]
        if rng.keywords or any(isinstance(a, ast.Starred) for a in rng.args):
            vals = [None]
        if all(v is not None for v in vals):
            try:
                trips = len(range(*vals))
            except (TypeError, ValueError, OverflowError):
                return None
            if trips >= UNROLL_TRIPS and loopfacts.traces_jax_ops(model, loop, f):
                return (f"Python `for` loop of {trips} iterations in traced code is unrolled: the compiled program "
                        f"holds {trips} copies of its body, so compiling it is slow; use jax.lax.fori_loop or "
                        "jax.lax.scan", None)
            return None
        if any(hostvalues.rank_derived(model, a, scope) for a in rng.args):
            return None  # a loop over the axes of an array: a handful of iterations
        for call in loop.calls:
            call_scope = model.scope_at(call)
            qn = model.resolve(call.func, call_scope)
            if qn is not None and qn.split(".")[0] in ("jax", "flax", "equinox", "optax", "haiku"):
                continue  # library functions jit themselves; they are not the user's step function
            wrap = callables.callable_info(model, call.func, call_scope)
            if wrap is None or wrap.kind not in ("jit", "pmap", "filter_jit"):
                continue
            name = unparse(call.func)
            if model.shape_variance(call_scope, (loop,)).feeds_back(call):
                # each iteration continues from the last: an iterative algorithm, as long as its step count
                return (f"Python `for` loop in traced code feeds the jitted `{name}` its own result every "
                        f"iteration: tracing inlines one copy of `{name}` per iteration, so the program grows "
                        "with the step count and compiles slowly; use jax.lax.fori_loop or jax.lax.scan", None)
            return (f"Python `for` loop of unknown length in traced code calls the jitted `{name}` every "
                    f"iteration: tracing inlines one copy of `{name}` per iteration; if the loop is long, use "
                    "jax.lax.fori_loop, jax.lax.scan or jax.vmap",
                    "the loop's length is unknown and no state is carried through the call")
        return None


RULES = [DataDependentShape, TracedControlFlow, TracedShapeArgument, ShapeChurn, UnrolledLoopInTracedCode]
