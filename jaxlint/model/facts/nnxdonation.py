"""In-place steps without donation: a flax NNX training step (``@nnx.jit def train_step(model,
optimizer, batch): ...; optimizer.update(model, grads)``) called in a step loop with the same
model and optimizer objects every iteration (or in a function that a loop of the module calls: a
trainer's ``train_step`` method running ``self._step(self.model, self.optimizer, batch)``), its
``nnx.jit`` declaring no ``donate_argnums``/``donate_argnames``.

NNX updates the objects in place: the compiled program returns the new parameters and optimizer
state, and NNX writes them back into the objects' variables after the call. Without donation the
program gets new buffers for them while the old ones are alive, so both are in device memory at the
peak (measured on jax 0.10.2, flax 0.12.8, CPU: with ``donate_argnums=(0, 1)`` the kernel the model
held before the call is deleted by it; without, it stays alive through the call). Asked by JAX803.
Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, libraryobjects
from .jaxrecords import JitWrap
from .proof import Fact, proven, unknown

_STATE_READERS = frozenset({"flax.nnx.state", "flax.nnx.split", "flax.nnx.to_pure_dict", "flax.nnx.variables"})


class InPlaceStep:
    """``call`` (in every iteration of ``loop``) runs ``wrap`` (an ``nnx.jit`` of ``func``), whose body
    applies ``update`` (``optimizer.update(model, grads)``) to the objects passed at ``positions``
    (``names``, as the caller spells them); ``fact``: whether they are an NNX optimizer and its model
    ("training-state")."""

    __slots__ = ("call", "wrap", "func", "update", "positions", "names", "loop", "fact", "via")

    def __init__(self, call, wrap, func, update, positions, names, loop, fact, via=None):
        self.call, self.wrap, self.func, self.update = call, wrap, func, update
        self.positions, self.names, self.loop, self.fact = positions, names, loop, fact
        self.via = via  # (the function the call is in, its call in ``loop``) when the loop is the caller's


def inplace_steps_without_donation(m) -> list:
    """Every :class:`InPlaceStep` of the module, found once."""
    memo = m.facts.inplace_steps
    if memo is not None:
        return memo
    from . import loops
    from .frequency import repeats

    out: list = []
    calls = list(m.loop_calls) if m.jit_wraps else []
    # and calls outside loops of the module's ``nnx.jit`` defs, by their names (``self._step(...)``)
    named = {w.func.name for w in m.jit_wraps if w.func is not None and _nnx_wrapper(m, w)}
    if named:
        looped = {id(c) for c in calls}
        calls += [c for c in m.calls if id(c) not in looped and getattr(c.func, "attr", getattr(c.func, "id", None))
                  in named]
    for call in calls:
        scope = m.scope_at(call)
        step = _nnx_step(m, call)
        if step is None or step[0].donation_declared:
            continue
        ctx = m.context(call)
        loop, via = loops.hot_loop(m, ctx) if ctx is not None else None, None
        if loop is None and ctx is not None and not ctx.loops and (f := m.function_at(call)) is not None:
            # ``self._step(self.model, self.optimizer, batch)`` in a method that a loop of this module calls
            # (fresh AC's nanochat trainers): the same objects at every call, as in a loop of its own
            rep = repeats(m, f)
            if rep is not None and rep.kind == "loop":
                loop, via = rep.loop, (f, rep.call)
        if loop is None or m.in_traced_code(call):
            continue
        wrap, update, params = step
        positions, names = [], []
        for p in params:
            i = wrap.func.params.index(p)
            arg = call.args[i] if i < len(call.args) else None
            if not isinstance(arg, (ast.Name, ast.Attribute)) or i in wrap.static_argnums:
                break
            positions.append(i)
            names.append(ast.unparse(arg))
        else:
            if _reads_state(m, loop, names):
                continue  # ``snapshot = nnx.state(model)`` in the loop: the old arrays may be kept
            out.append(InPlaceStep(call, wrap, wrap.func, update, positions, names, loop,
                                   _training_state(m, call, update, positions, scope), via))
    m.facts.inplace_steps = out
    return out


def updated_in_place(m, call: ast.Call) -> list:
    """The names ``call`` passes to an ``nnx.jit`` step of this module that updates them in place
    (its body calls ``optimizer.update(model, grads)`` on those parameters): the objects carry the
    step's state from one iteration of a loop to the next, as ``state = step(state, b)`` would."""
    step = _nnx_step(m, call)
    if step is not None:
        positions = [step[0].func.params.index(p) for p in step[2]]
    else:  # a step of another module of the project, summarized with what it updates in place
        wrap = callables.callable_info(m, call.func, m.scope_at(call))
        positions = wrap.in_place if isinstance(wrap, JitWrap) and wrap.func is None else ()
    return [call.args[i].id for i in positions if i < len(call.args) and isinstance(call.args[i], ast.Name)]


def in_place_positions(m, wrap: JitWrap) -> tuple:
    """The positions of the parameters the ``nnx.jit`` def of ``wrap`` updates in place (for a
    summary another module reads: :func:`updated_in_place`)."""
    if wrap.func is None or wrap.func.is_method or not _nnx_wrapper(m, wrap):
        return wrap.in_place
    found = _update_in(wrap.func)
    return tuple(wrap.func.params.index(p) for p in found[1]) if found is not None else ()


def _nnx_step(m, call: ast.Call) -> Optional[tuple]:
    """``(wrap, the update call, its parameters)`` when ``call`` runs an ``nnx.jit`` def of this module
    (not a method) whose body updates some of its parameters in place (:func:`_update_in`)."""
    wrap = callables.callable_info(m, call.func, m.scope_at(call))
    if not isinstance(wrap, JitWrap) or wrap.func is None or wrap.func.is_method or not _nnx_wrapper(m, wrap):
        return None
    found = _update_in(wrap.func)
    return (wrap, *found) if found is not None else None


def _nnx_wrapper(m, wrap: JitWrap) -> bool:
    site = wrap.site
    expr = site.func if isinstance(site, ast.Call) else site
    qn = m.resolve(expr, m.scope_at(site) or m.module_scope) or ""
    return qn.startswith("flax.nnx.") and N.JIT_WRAPPERS.get(qn) == "jit"


def _update_in(f) -> Optional[tuple]:
    """``(the update call, [optimizer parameter, model parameter?])``: the body calls ``p.update(...)`` on
    one of its parameters ``p``, first argument another parameter (flax >= 0.11: ``optimizer.update(
    model, grads)``) or not (``optimizer.update(grads)``: the optimizer holds the model)."""
    for c in f.calls:
        func = c.func
        if isinstance(func, ast.Attribute) and func.attr == "update" and isinstance(func.value, ast.Name) \
                and func.value.id in f.params:
            params = [func.value.id]
            first = c.args[0] if c.args else None
            if isinstance(first, ast.Name) and first.id in f.params and first.id != func.value.id:
                params.append(first.id)
            return c, sorted(params, key=f.params.index)
    return None


def _reads_state(m, loop, names: list) -> bool:
    for c in loop.all_calls():
        qn = m.resolve(c.func, m.scope_at(c))
        if qn in _STATE_READERS and any(ast.unparse(a) in names for a in c.args):
            return True
    return False


def _training_state(m, call: ast.Call, update: ast.Call, positions: list, scope) -> Fact:
    """Proven when the object the step's ``update`` is called on is, at this call, one the module makes
    with ``nnx.Optimizer(...)``: its model's parameters and the optimizer's state are replaced."""
    opt_param = update.func.value.id
    made = None  # (the argument, its maker) where one is made by an NNX optimizer
    for i in positions:
        arg = call.args[i]
        maker = libraryobjects.library_maker(m, arg, scope)
        if maker in N.LIBRARY_DEVICE_FIELDS:  # flax NNX's optimizers
            made = (ast.unparse(arg), maker)
            break
    if made is not None:
        return proven("training-state", f"`{made[0]}` is made by `{made[1]}(...)` and the step calls "
                                        f"`{opt_param}.update(...)` on it (line {update.lineno}): the model's "
                                        "parameters and the optimizer's state are replaced every call")
    return unknown("training-state", f"what the step's `{opt_param}` is at this call is not shown (not made by "
                                     "`nnx.Optimizer(...)` in this module): its size is not known")
