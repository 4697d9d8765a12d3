"""JAX7xx: work run operation by operation outside compiled code, every step or every element."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint.model import ModuleModel
from jaxlint.model.facts import callables, eagerwork, elementwise, forwardchains, growth
from jaxlint.model.facts.proof import disproven, proven, unknown
from jaxlint.model.policy import looprecord, roles
from jaxlint.rule import Finding, Line, Rule, unparse

_TEST_CODE = "in test code, which runs a fixed, small number of steps"
_TEST_ELEMENTS = "in test code, which checks small arrays element by element"


def _compiled(model: ModuleModel, call: ast.Call) -> bool:
    """``call`` runs compiled programs (:func:`eagerwork.runs_compiled`)."""
    return eagerwork.runs_compiled(model, call)


def _not_small_beside_the_program(model: ModuleModel, item, loop) -> Optional[str]:
    """Why an eager gradient in a loop whose iteration runs a whole program is not small beside it, or None:
    the function it differentiates runs a device loop itself (outside jit its derivative compiles at every
    call), or is the function whose call is the iteration's program (the gradient does that work again, op by
    op around what is compiled)."""
    through = eagerwork.gradient_through_loop(model, item)
    if through is None:
        return None
    loop_call, compiled = through
    ran = f"the function it differentiates runs `{unparse(loop_call.func, 30)}` (line {loop_call.lineno})"
    if compiled is None:
        return ran + ": outside jit, each call compiles the loop's derivative again, whatever else the iteration runs"
    program = looprecord.record(model, loop).program
    transform = item.transform
    if program is None or not transform.args:
        return None
    mine = {id(f) for f in callables.local_functions(model, transform.args[0], model.scope_at(transform))}
    if not any(id(f) in mine for f in callables.local_functions(model, program.func, model.scope_at(program))):
        return None
    return (ran + f" through the compiled `{compiled}`, and is the function the iteration's program calls "
            f"(`{unparse(program.func, 30)}` on line {program.lineno}): the gradient does that work again, op by op "
            "around what is compiled, at every call")


class EagerUpdateInLoop(Rule):
    code = "JAX701"
    needs = ("eager-update", "eager-gradient", "per-step", "eager")
    short = "An optimizer or parameter update, or its gradient, run eagerly, outside jit, every step of a loop."
    confirmed_by = "eager"
    name = "eager-update-in-loop"
    summary = ("Finds the per-step parameter update run outside any compiled function in a step loop that "
               "calls compiled code: an optax optimizer's `update(...)` (the optimizer made by `optax.adam(...)`, "
               "`optax.chain(...)`, ...), `optax.apply_updates(...)`, the update function of JAX's example optimizers "
               "(`opt_update(i, grads, opt_state)` of `optimizers.adam(...)`), flax NNX's `Optimizer.update(...)`, flax's "
               "`TrainState.apply_gradients(...)` (unless a class of the module defines its own), a "
               "`jax.tree.map` of an arithmetic update rule over two or more JAX trees (`lambda p, g: p - lr * "
               "g`), or a comprehension of one over zipped sequences (`[p - lr * g for p, g in zip(params, "
               "grads)]`). Also the gradient of such a step computed outside jit in a loop of steps (`range`, `while`, "
               "or state threaded through the iterations): `jax.grad(f)(x)`, `jax.value_and_grad(f)(params, "
               "...)`, or `g(x)` after `g = jax.grad(f)`, whether or not the loop calls compiled code, in "
               "module-level code or in a function the module calls only from there; and a step function of the "
               "module with no `jit` (`train_step(state, batch)` whose body runs `jax.value_and_grad(loss_fn)(...)`, "
               "directly or in a function it calls) called so in a loop of steps: the whole step runs op by op; and, in "
               "such a step function, an optimizer update after a compiled call (`loss, grads = grads_of(state, b); "
               "state = state.apply_gradients(grads=grads)`). Not "
               "reported: updates or gradients inside jitted or transformed code, a name bound to "
               "`jax.jit(jax.grad(f))`, the gradient of a compiled function, a step function jitted by a decorator, "
               "by rebinding its name or its instance attribute, or with a decorator the module cannot see, loops of a few known iterations "
               "(at most 100), under a periodic guard, or on an optimizer this module cannot see made.")
    rationale = ("Outside `jit`, every leaf of every tree and every stage of the optimizer is its own device "
                 "dispatch: a few hundred small launches per step for a small network (measured on a small "
                 "MLP on CPU: about 3 ms per eager optax step against 0.13 ms with the update inside the jitted "
                 "step). Move the update into the jitted step function (return the new parameters and "
                 "optimizer state from it); `jaxlint trace` counts the eager dispatches per line. An eager "
                 "gradient costs more: `jax.grad` keeps no compiled cache, so each call traces the function "
                 "again before running its forward and backward passes op by op (bench/eager_grad_cost.py, "
                 "CPU, jax 0.10.2: about 2.3-5 ms a call for a scalar polynomial or a small MLP, against "
                 "0.01-0.07 ms jitted, 65-270 times more). Jit the whole step, gradient and update, and call "
                 "that in the loop.")
    bad = """
        import jax
        import jax.numpy as jnp
        import optax

        @jax.jit
        def grads_of(params, batch):
            return jax.grad(lambda p: jnp.mean((p["w"] * batch) ** 2))(params)

        def train(params, batches):
            tx = optax.adam(1e-3)
            opt_state = tx.init(params)
            for batch in batches:
                grads = grads_of(params, batch)
                updates, opt_state = tx.update(grads, opt_state, params)
                params = optax.apply_updates(params, updates)
            return params
    """
    good = """
        import jax
        import jax.numpy as jnp
        import optax

        tx = optax.adam(1e-3)

        @jax.jit
        def train_step(params, opt_state, batch):
            grads = jax.grad(lambda p: jnp.mean((p["w"] * batch) ** 2))(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state

        def train(params, batches):
            opt_state = tx.init(params)
            for batch in batches:
                params, opt_state = train_step(params, opt_state, batch)
            return params
    """
    opt_in_cases = ("Eager updates in test code, which runs a fixed, small number of steps; an eager gradient "
                    "in a loop over items that threads no JAX state the model can see (steps, or one item each), or in a "
                    "function no code of the module calls (another module may call it under jit); a model's forward "
                    "pass (`model.apply({\"params\": p}, z)`, a haiku apply) outside jit whose output feeds its next "
                    "input (a sampler's chain): how long the chain runs and how large the model is are not known.")

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        loops: set = set()  # loops already given an eager-gradient finding
        yield from self._gradients(model, loops)
        yield from self._step_functions(model, loops)
        yield from self._step_updates(model, loops)
        yield from self._forward_chains(model, loops)
        by_loop: dict = {}  # one finding per loop: its first eager update, naming the others
        for call in model.loop_calls:
            upd = eagerwork.eager_update(model, call)
            if upd is None:
                continue
            ctx = model.context(call)
            role = roles.sync_role(model, ctx)
            if role.kind != roles.PER_STEP:
                self.quiet(model, call, f"{role.kind}: " + "; ".join(role.evidence))
                continue
            compiled_calls = [c for c in role.loop.all_calls() if _compiled(model, c)]
            if not compiled_calls:
                continue  # the whole step is eager: jitting it is the advice, not moving the update
            fact = eagerwork.updated_state(model, upd, role.loop, compiled_calls)
            if self.proof(model, call, fact) is None:
                continue
            by_loop.setdefault(id(role.loop), []).append((upd, role, compiled_calls[0], fact))
        for found in by_loop.values():
            found.sort(key=lambda f: (f[0].call.lineno, f[0].call.col_offset))
            (upd, role, compiled, fact), rest = found[0], found[1:]
            call, loop = upd.call, role.loop
            also: list = []
            for i, (u, _, _, _) in enumerate(rest):
                also += [" (and " if i == 0 else ", ", f"{u.what} on ", Line(u.call.lineno)]
            also += [")"] if rest else []
            facts = role.evidence + [
                f"{upd.what} is not inside any jitted or transformed function: each leaf and optimizer stage "
                "is a separate device dispatch",
                f"the same iteration calls compiled code (`{unparse(compiled.func, 40)}` on line {compiled.lineno})"]
            per = "leaf and optimizer stage" if upd.kind == "optimizer-update" else "leaf"
            yield self.finding(call, [f"{upd.what}", *also, " runs outside jit in every iteration of the loop on ",
                                      Line(loop.node.lineno), f", one device dispatch per {per} "
                                      "each step; move the update into the jitted step (`", unparse(compiled.func, 40),
                                      "` on ", Line(compiled.lineno), ") and return the new parameters and state"],
                               opt_in=_TEST_CODE if model.in_test_code(call) else None, evidence=facts,
                               facts=[fact])


    def _per_loop(self, model: ModuleModel, make, loops: set) -> list:
        """``(item, role, facts)`` of the first call per loop of steps for which ``make(call)`` gives an
        item with a ``fact`` (its ``call`` in a loop outside any trace, the loop's steps proven or
        unknown), skipping loops in ``loops`` (already given a finding)."""
        by_loop: dict = {}
        for call in model.loop_calls:
            item = make(model, call)
            if item is None:
                continue
            role = roles.sync_role(model, model.context(call))
            if role.kind == roles.PROGRAM:
                why = _not_small_beside_the_program(model, item, role.loop)
                if why is not None:  # the gradient is the program's work again, or compiles at every call
                    role = roles.LoopRole(roles.PER_STEP, role.loop, [
                        f"the loop on line {role.loop.node.lineno} runs it in every iteration", why])
            if role.kind != roles.PER_STEP:
                self.quiet(model, call, f"{role.kind}: " + "; ".join(role.evidence))
                continue
            if id(role.loop) in loops:
                continue
            facts = self.proof(model, call, item.fact, lambda: _steps(model, role.loop),
                               lambda: eagerwork.outside_trace(model, call))
            if facts is not None:
                by_loop.setdefault(id(role.loop), []).append((item, role, facts))
        return [min(found, key=lambda f: (f[0].call.lineno, f[0].call.col_offset)) for found in by_loop.values()]

    def _gradients(self, model: ModuleModel, loops: set) -> Iterator[Finding]:
        for grad, role, facts in self._per_loop(model, eagerwork.eager_gradient, loops):
            call, loop = grad.call, role.loop
            loops.add(id(loop))
            target = unparse(grad.transform.args[0], 30)
            spelled = f"`{unparse(grad.transform.func, 30)}(...)`"
            what = [spelled] if call.func is grad.transform else [
                f"`{unparse(call.func, 30)}` (", spelled, " on ", Line(grad.transform.lineno), ")"]
            yield self.finding(call, [*what, " computes a gradient outside jit in every iteration of the loop "
                                      "on ", Line(loop.node.lineno), f": each call traces `{target}` again and runs "
                                      "its forward and backward passes op by op; jit the step (the gradient and the "
                                      "update) and call that in the loop"],
                               opt_in=_TEST_CODE if model.in_test_code(call) else None,
                               evidence=role.evidence[1:], facts=facts)

    def _step_functions(self, model: ModuleModel, loops: set) -> Iterator[Finding]:
        """A step function of the module, not jitted, whose body computes a gradient, called in a
        loop of steps outside any trace (``state, loss = train_step(state, batch)`` with no
        ``@jax.jit`` on ``train_step``): the whole step runs op by op every iteration."""
        for step, role, facts in self._per_loop(model, eagerwork.eager_step, loops):
            call, loop = step.call, role.loop
            loops.add(id(loop))
            if step.remote is not None:
                name, where, line, transform, target, decorated = step.remote
                how = (f"is decorated with `@{transform}` (line {line} there), so calling it computes a gradient, "
                       "here outside jit" if decorated else
                       f"is not jitted, and its body computes a gradient (`{transform}(...)` on line {line} there)")
                yield self.finding(call, [f"`{name}` (of `{where}`) {how}, in every iteration of the loop on ",
                                          Line(loop.node.lineno), f": each call traces "
                                          f"`{target}` again and runs the forward and backward passes and everything "
                                          "else in it op by op; jit the step (the gradient and the update) and call "
                                          "that in the loop"],
                                   opt_in=_TEST_CODE if model.in_test_code(call) else None,
                                   evidence=role.evidence[1:], facts=facts)
                continue
            name = step.function.name
            target = unparse(step.transform.args[0], 30)
            yield self.finding(call, [f"`{name}` is not jitted, and its body computes a gradient (`",
                                      unparse(step.transform.func, 30), "(...)` on ", Line(step.inner.lineno),
                                      ") that runs here in every iteration of the loop on ", Line(loop.node.lineno),
                                      f": each call traces `{target}` again and runs the forward and backward passes "
                                      f"and everything else in `{name}` op by op; jit `{name}` (`jax.jit`, with "
                                      "`donate_argnums` for the state it returns) and call that in the loop"],
                               opt_in=_TEST_CODE if model.in_test_code(call) else None,
                               evidence=role.evidence[1:], facts=facts)


    def _forward_chains(self, model: ModuleModel, loops: set) -> Iterator[Finding]:
        """A model's forward pass outside jit whose output feeds its next input, in a loop of steps
        (a diffusion sampler's reverse chain): every step runs the whole network op by op."""
        grown = {(id(g.loop), g.name) for g in growth.grown_in_loops(model)}  # a growing input is JAX304's
        for chain, role, facts in self._per_loop(model, forwardchains.eager_chain, loops):
            if (id(chain.loop), chain.carried) in grown:
                continue
            loops.add(id(role.loop))
            yield self.finding(chain.call, [f"{chain.what} runs outside jit in every iteration of the loop on ",
                                            Line(role.loop.node.lineno), f", and `{chain.carried}`, its next input, "
                                            "comes from its output (", Line(chain.rebind.lineno), "): each step "
                                            "dispatches every layer's operations one by one; jit one step (the pass "
                                            f"and the update of `{chain.carried}`) and call that in the loop, or run "
                                            "the chain with `jax.lax.fori_loop`"],
                               opt_in=_TEST_CODE if model.in_test_code(chain.call) else _CHAIN_SIZE,
                               evidence=role.evidence[1:], facts=facts)

    def _step_updates(self, model: ModuleModel, loops: set) -> Iterator[Finding]:
        """A step function of the module, not jitted, that runs a compiled call and then the
        optimizer update eagerly (``loss, grads = compute_grads(state, b); state =
        state.apply_gradients(grads=grads)``), called in a loop of steps outside any trace."""
        seen: set = set()  # one finding per update, at the update (the line to change)
        for step, role, facts in self._per_loop(model, eagerwork.eager_step_update, loops):
            call, loop, name, upd = step.call, role.loop, step.function.name, step.update
            loops.add(id(loop))
            if id(upd.call) in seen:
                continue
            seen.add(id(upd.call))
            per = "leaf and optimizer stage" if upd.kind == "optimizer-update" else "leaf"
            yield self.finding(upd.call, [f"{upd.what} runs outside jit after the compiled `",
                                          unparse(step.compiled.func, 40), "` (", Line(step.compiled.lineno),
                                          f"), and `{name}` is called in every iteration of the loop on ",
                                          Line(loop.node.lineno), " (", Line(call.lineno), f"): one device dispatch "
                                          f"per {per} each step; move the update into `",
                                          unparse(step.compiled.func, 40), f"` (return the new state) or jit `{name}`"],
                               opt_in=_TEST_CODE if model.in_test_code(call) else None,
                               evidence=role.evidence[1:], facts=facts)


# Measured on 24 sets (this session): 6 such chains, 1 a 1000-step diffusion sampler (catalogued), 5 in demos
# and one-shot rollouts whose cost is small; how long the chain runs and how large the model is decide.
_CHAIN_SIZE = ("how many steps the chain runs and how large the model is are not known: a demo's short rollout or "
               "a few decoded tokens cost little, a diffusion sampler's thousand steps a lot")


def _steps(model: ModuleModel, loop):
    """The "per-step" fact of an eager gradient's loop: the loop runs steps (``while``,
    ``range``/``count``, or JAX state threaded through it), not one item each."""
    steps = looprecord.record(model, loop).steps
    make = proven if steps.proven else unknown if steps.unknown else disproven
    return make("per-step", steps.why)


class ElementwiseLoopOverArray(Rule):
    code = "JAX702"
    short = "A Python loop that reads a JAX array one element at a time on the host."
    confirmed_by = "eager"
    name = "element-wise-loop-over-array"
    summary = ("Finds Python loops outside traced code that read a JAX array one element at a time on the "
               "host: `float(x[i])`, `x[i].item()`, `jax.tree.map(lambda v: v[i].item(), tree)`, an `if` "
               "comparing `z[j, i]`, or `for v in x: if v > 0:`, where the array is the same in every "
               "iteration and the index is the loop's counter; and an element taken off a JAX array by iterating it "
               "and used as an index (`[data[i] for i in idx]`, `data[i:i + n]`). Not reported: loops known to run at most 16 "
               "times, arrays rebound in the loop (a new result each step is JAX201's), slices.")
    rationale = ("Each `x[i]` outside jit is a device dispatch (a gather) and each host read of it a sync: a "
                 "loop over n elements pays n dispatches and n round trips instead of one copy (a real report: "
                 "28 s for a nested loop over an array, 0.015 s after one `np.asarray`). Copy the array to the "
                 "host once before the loop (`x = np.asarray(x)`, `jax.device_get(tree)`) and index that, or "
                 "compute on the whole array with `jax.numpy`.")
    bad = """
        import jax.numpy as jnp

        def count_rises(z):
            z = jnp.cumsum(z)
            rises = 0
            for i in range(1, z.shape[0]):
                if z[i] > z[i - 1]:
                    rises += 1
            return rises
    """
    good = """
        import numpy as np
        import jax.numpy as jnp

        def count_rises(z):
            z = np.asarray(jnp.cumsum(z))
            rises = 0
            for i in range(1, z.shape[0]):
                if z[i] > z[i - 1]:
                    rises += 1
            return rises
    """
    opt_in_cases = ("Element-wise reads in test code, where arrays are small and the check is the point.")

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for read in elementwise.element_reads(model):
            loop = read.loop
            array = unparse(read.array, 30)
            facts = [f"`{array}` {'holds JAX arrays' if read.tree else 'is a JAX array'}, and no iteration of the loop on "
                     f"line {loop.node.lineno} rebinds it",
                     f"`{unparse(read.subscript, 30)}` picks one element by the loop's counter or item: a device "
                     "dispatch per element",
                     f"the statement {read.how}: a sync per element"]
            if isinstance(read.node, ast.Subscript):  # the element indexes something (elementwise._index_reads)
                facts[-1] = (f"`{unparse(read.node, 30)}` uses the element as an index: reading it on the host when "
                             "what is indexed is a host container, a device gather when it is a JAX array")
                yield self.finding(read.node, [f"iterating the JAX array `{array}` takes one element per iteration of "
                                               "the loop on ", Line(loop.node.lineno), f", and `{unparse(read.node, 30)}` "
                                               "indexes with it: a host read (or a device gather) per element; copy "
                                               f"`{array}` to the host once before the loop (`np.asarray({array})`) "
                                               "and index with that, or gather with the whole array at once"],
                                   opt_in=_TEST_ELEMENTS if model.in_test_code(read.node) else None, evidence=facts)
                continue
            if read.tree:
                what = f"`{unparse(read.subscript, 30)}` in the tree map reads one element of every JAX array in `{array}`"
            elif isinstance(read.subscript, ast.Name):
                what = f"iterating the JAX array `{array}` takes one element"
            else:
                what = f"`{unparse(read.subscript, 30)}` reads one element of the JAX array `{array}`"
            yield self.finding(read.node, [what, " per iteration of the loop on ", Line(loop.node.lineno),
                                           f", and the host waits for each; copy `{array}` to the host once before "
                                           f"the loop (`{'jax.device_get' if read.tree else 'np.asarray'}({array})`) "
                                           "and index that, or compute on the whole array"],
                               opt_in=_TEST_ELEMENTS if model.in_test_code(read.node) else None, evidence=facts)


RULES = [EagerUpdateInLoop, ElementwiseLoopOverArray]
