"""JAX304: shapes that change from one iteration to the next, so JAX compiles again (the JAX3xx
family's recompiles; its data-dependent shapes and control flow on tracers are in shapes.py)."""

from __future__ import annotations

import ast
from typing import Iterator

from jaxlint.model import ModuleModel
from jaxlint.model.facts import callables, eagerwork, growth, ragged
from jaxlint.model.facts.proof import DISPROVEN
from jaxlint.model.facts import loops as loopfacts
from jaxlint.model.policy import looprecord, roles
from jaxlint.rule import Finding, Line, Rule, unparse


class ShapeChurn(Rule):
    code = "JAX304"
    needs = ("eager",)  # arrays grown in a loop; the jitted-call findings rest on the call being compiled
    short = "A jitted function given an argument whose shape changes every iteration of a loop, so it recompiles."
    confirmed_by = "compiles"
    name = "shape-churn"
    summary = ("Finds calls, in a loop, of a jitted function with an argument whose shape follows the loop: "
               "sliced to a width that changes (`f(x[:i])`, `f(x[:, :t])`, `f(x[i:j])` with `j` recomputed in the "
               "loop), built with a size from the loop (`f(jnp.ones(n))`, `f(jnp.arange(t))`, `f(jnp.zeros((n, "
               "d)))`), stacked from a list that grows each iteration (`buf.append(x); f(jnp.stack(buf))`), "
               "converted from per-item data of varying length (`f(jnp.array([vocab[w] for w in s.split()]))`), "
               "collected by a loop that ends on data (an episode's `rewards.append(r)` in `while not done:`, then "
               "`f(rewards)` or `f(jnp.stack(rewards))`), "
               "drawn from a list of arrays built with different sizes (`for x in [make(n) for n in sizes]`), or "
               "selected by a boolean mask the loop recomputes (`f(x[x[:, 0] > 0])`, a rollout's `obs = "
               "next_obs[~dones]` before the next iteration's call); "
               "and sweeps in batches whose last one is shorter (`f(x[i:i + bs])` for `i in range(0, n, bs)`). "
               "Also an array grown by an eager join of itself in every iteration (`x = jnp.concatenate([x, "
               "y])`, `jnp.append`, `vstack`, also inside a `jax.tree.map`), outside traced code; and an array "
               "rebound in every iteration to a jitted function's result that joins it with more data "
               "(`idx = generate_step(params, idx)` returning `jnp.concatenate([idx, token])`).")
    rationale = ("A jitted function is compiled once per distinct input shape. An argument whose shape follows "
                 "the loop (a growing prefix, a ragged window, an array sized by the loop counter, a growing "
                 "buffer, a tokenized sentence, an episode's rewards, the rows a boolean mask keeps) is traced and "
                 "compiled again for every new shape: every iteration "
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
                    "range(0, n, bs)`): one more compile per program, bounded, as the shorter shape is cached. An "
                    "array grown by a join in a loop of a function that may run under its caller's `jit` (eager "
                    "unknown: there the loop is unrolled and its shapes are static), or in a loop whose iteration "
                    "runs a whole program (a scan, an epoch) or that runs a few times in all.")
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
        yield from self._grown(model)
        yield from self._compiled_growth(model)
        yield from self._jitted(model)

    def _grown(self, model: ModuleModel) -> Iterator[Finding]:
        """Arrays grown by an eager concatenation in every iteration (issue 39): a new shape each time."""
        for g in growth.grown_in_loops(model):
            if g.loop.bounded:
                continue  # a loop over a few literal items: a few shapes
            join = unparse(g.call.func, 30)
            via = f" (in the function `{unparse(g.via.func, 20)}` applies to each leaf)" if g.via is not None else ""
            facts = [f"`{g.name}` is bound again by `{join}` of itself and more data{via} in every iteration of the "
                     f"loop on line {g.loop.node.lineno}, and by nothing else in the loop: it grows",
                     "outside traced code, each JAX operation is compiled for its input shapes: a new shape is a "
                     "new compile"]
            rec = looprecord.record(model, g.loop)
            program = rec.program
            if program is not None:
                opt_in = (f"one compile per iteration next to a whole program per iteration "
                          f"(`{unparse(program.func, 30)}` on line {program.lineno})")
            elif loopfacts.few_iterations(model, model.context(g.stmt)):
                opt_in = "the loop runs a few times in all (known trip counts): a few compiles"
            else:
                opt_in = None
            yield self.finding(g.call, [
                f"`{g.name}` grows by `{join}` in every iteration of the loop on ", Line(g.loop.node.lineno),
                ": each iteration gives it a new shape, so this join (and every eager operation on it) is compiled "
                "again, and the copies grow with its length; collect the pieces in a Python list and join them once "
                "after the loop, or write into a preallocated buffer with `.at[i].set`"], evidence=facts,
                opt_in=opt_in, facts=[growth.eager(model, g)])

    def _compiled_growth(self, model: ModuleModel) -> Iterator[Finding]:
        """``idx = generate_step(params, idx)``: the compiled step returns its argument joined with more."""
        for g in growth.grown_through_compiled(model):
            if g.loop.bounded:
                continue
            fn = unparse(g.call.func, 30)
            facts = [f"`{fn}` is compiled, and its `return` joins its argument with more data "
                     f"(`{unparse(g.join.func, 30)}` on line {g.join.lineno})",
                     f"`{g.name}` is bound again to that result in every iteration of the loop on line "
                     f"{g.loop.node.lineno}, and by nothing else in the loop: it is longer at every call"]
            opt_in = ("the loop runs a few times in all (known trip counts): a few compiles"
                      if loopfacts.few_iterations(model, model.context(g.stmt)) else None)
            yield self.finding(g.call, [
                f"`{g.name}` grows by one join inside the compiled `{fn}` (", Line(g.join.lineno), ") in every "
                "iteration of the loop on ", Line(g.loop.node.lineno), f": each call gets a longer `{g.name}`, so "
                f"`{fn}` traces and compiles again every iteration; write into a preallocated buffer "
                "(`buf.at[:, i].set(token)`) and pass the current length as an array"], evidence=facts, opt_in=opt_in)

    def _jitted(self, model: ModuleModel) -> Iterator[Finding]:
        for call in model.loop_calls:
            ctx = model.context(call)
            if model.in_traced_code(call):
                continue
            loops = tuple(lp for lp in ctx.loops if not lp.bounded)
            if not loops:
                continue
            wrap = callables.callable_info(model, call.func, ctx.scope)
            jitted = f"`{unparse(call.func, 40)}` is jitted: each new input shape is a new compile"
            if wrap is not None and wrap.kind == "transform":
                # ``grad_func(model, obs)`` with ``grad_func = nnx.value_and_grad(loss)`` and ``loss`` jitted: the
                # passes run as ``loss``'s compiled programs, one per input shape (fresh set AV)
                grad = eagerwork.eager_gradient(model, call)
                target = grad.transform.args[0] if grad is not None and grad.fact.status == DISPROVEN else None
                wrap = (callables.callable_info(model, target, model.scope_at(grad.transform))
                        if target is not None else None)
                jitted = (f"`{unparse(call.func, 40)}` differentiates the jitted `{unparse(target, 30)}`: its passes "
                          "are compiled for each new input shape") if wrap is not None else jitted
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
            reported = collected_reported = False
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
                grown = _grown_argument(model, arg, ctx)
                if grown is not None:
                    g, bound = grown
                    upto = f" until it reaches `{bound}`" if bound else ""
                    facts = [jitted,
                             f"`{g.name}` grows by `{unparse(g.call.func, 30)}` in every iteration of the loop on line "
                             f"{g.loop.node.lineno} (line {g.call.lineno}), and `{unparse(arg, 30)}` "
                             f"{'is' if bound is None else 'is a slice of'} it"]
                    yield self.finding(arg, [f"`{unparse(arg, 30)}` is {'' if bound is None else 'a slice of '}`{g.name}`, "
                                             f"which grows by `{unparse(g.call.func, 30)}` in every iteration of the "
                                             "loop on ", Line(g.loop.node.lineno), " (", Line(g.call.lineno),
                                             f"), so its shape changes every iteration{upto} and `{unparse(call.func, 40)}` "
                                             "is traced and compiled again each time; keep a fixed-size buffer "
                                             "(`buf.at[:, t].set(token)`) and pass the current length as an array"],
                                       evidence=facts)
                    continue
                src = churn.shape_source(arg, ctx)
                if src is not None:
                    if src.kind == "collected" and collected_reported:
                        continue  # the batch's other lists, filled by the same loop: the same compiles
                    collected_reported = collected_reported or src.kind == "collected"
                    facts = [jitted, f"`{unparse(arg, 30)}` {src.origin}, in the loop on line {loops[-1].node.lineno}"]
                    if src.proof is not None:
                        facts.append(src.proof)
                    yield self.finding(arg, _churn_message(unparse(arg, 30), unparse(call.func), src), evidence=facts)


def _grown_argument(model: ModuleModel, arg: ast.AST, ctx):
    """``(growth, bound)`` when the argument is an array grown by an eager join in every iteration of a
    loop around the call (:func:`growth.grown_in_loops`), or a slice of one whose bound is not a literal
    (``idx[:, -self.maxlen:]``: a new shape each iteration until the bound), directly or through a name
    bound once in that loop; ``bound`` is None for the array itself. None otherwise (a slice with a
    literal bound, ``idx[:, -1:]``, keeps a fixed size once it is reached)."""
    loops = {id(lp) for lp in ctx.loops}
    grown = {g.name: g for g in growth.grown_in_loops(model) if id(g.loop) in loops}
    if not grown:
        return None
    expr = arg
    if isinstance(arg, ast.Name) and arg.id not in grown:
        ev = model.binding(arg.id, ctx.scope, (arg.lineno, arg.col_offset))
        loop = ctx.loops[-1].node
        if ev is None or not ev.plain_assign or ev.value is None or not (
                loop.lineno <= ev.node.lineno <= (loop.end_lineno or loop.lineno)):
            return None
        expr = ev.value
    if isinstance(expr, ast.Name):
        g = grown.get(expr.id)
        return (g, None) if g is not None and g.call.lineno != arg.lineno else None
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) and expr.value.id in grown:
        parts = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        for part in parts:
            if isinstance(part, ast.Slice):
                bounds = [b for b in (part.lower, part.upper) if b is not None]
                loose = [b for b in bounds if not isinstance(b, ast.Constant) and not (
                    isinstance(b, ast.UnaryOp) and isinstance(b.operand, ast.Constant))]
                if loose:
                    return grown[expr.value.id], unparse(loose[0], 30).lstrip("-")
        return None
    return None


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
    "collected": ("pad it to a fixed length (the longest run, or a few bucket lengths) and pass the length or a "
                  "mask, or collect into a fixed-size device buffer (`buf.at[t].set(x)`)"),
    "masked": ("keep every row and pass the mask into the jitted function (weight or `jnp.where` the dropped "
               "rows), so every call has the same shape"),
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


RULES = [ShapeChurn]
