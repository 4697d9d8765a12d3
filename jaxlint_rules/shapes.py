"""JAX3xx: shapes and Python control flow that tracing cannot express, or unrolls."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint import names as N
from jaxlint.model import FunctionInfo, Loop, ModuleModel, Scope, call_arg
from jaxlint.model.facts import callables, hostvalues, statics, tracers
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
               "an argument used as a number) inside jitted (or vmapped, or lax-body) code; and `for` loops over "
               "`range(n)` of a traced `n` (a jitted function's argument that a caller passes), which raise "
               "TracerIntegerConversionError.")
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

        yield from self._ranges(model, staging)

    def _ranges(self, model: ModuleModel, staging) -> Iterator[Finding]:
        """``for i in range(n)`` with ``n`` a tracer: Python asks the tracer for an int."""
        for loop in model.loops:
            it = getattr(loop.node, "iter", None)
            if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range") \
                    or not staging.staged(f := model.function_at(it)) \
                    or model.resolve(it.func, model.scope_at(it)) != "builtins.range":
                continue
            ctx = model.context(it)
            for arg in it.args:
                fact = tracers.tracer(staging, f, arg, ctx.scope, ctx)
                facts = None if fact.disproven else self.proof(
                    model, it, fact, lambda f=f, it=it: tracers.traced_path(staging, f, it))
                if facts:
                    yield self.finding(it, f"`range` of the traced value `{unparse(arg, 30)}` raises "
                                           f"TracerIntegerConversionError {staging.how_staged(f)}; loop on device "
                                           "with jax.lax.fori_loop (or scan), or make the count a static argument "
                                           "(static_argnames=)", facts=facts)
                    break

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
                    "as much as the loop is long, which the code does not show. A loop in code traced only by a "
                    "transform such as `jax.vmap` with no jit shown around it: called outside jit, the "
                    "transform runs op by op, and no program holds the copies.")

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        staging = model.staging
        for f in staging.functions():
            if not f.loops:
                continue
            for loop in f.loops:
                found = self._unrolled(model, loop, f)
                if found is not None:
                    msg, opt_in = found
                    if opt_in is None and not staging.compiled(f):
                        # traced by a transform alone (jax.vmap called outside jit runs op by op): no
                        # program holds the copies unless a jit the code does not show encloses it
                        opt_in = (f"whether a compiled program holds the loop is unknown: `{f.name}` is traced "
                                  f"{staging.how_staged(f).removeprefix('when ')}, and no jit around it is shown")
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
        if hostvalues.walked_structure(model, node, rng.args, scope) is not None:
            return None  # ``for i in range(len(layers)): w, b = layers[i]``: one pass over a model's layers
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


RULES = [DataDependentShape, TracedControlFlow, TracedShapeArgument, UnrolledLoopInTracedCode]
