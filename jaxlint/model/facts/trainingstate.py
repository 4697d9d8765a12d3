"""Whether a compiled step's rebound arguments are a model's training state (asked by JAX803).

A step loop ``state = train_step(state, batch)`` without donation keeps the old and the new value
of each rebound argument in device memory together. What that costs is the arguments' size: the
parameters and optimizer state of a model (and, on a device, one copy per step in flight), or a
few bytes for a PRNG key or a counter. The size is known only when the program runs, but what the
values *are* is a fact of the step's body, by JAX's and the optimizer libraries' API:

* ``state.apply_gradients(...)`` (flax's ``TrainState``): ``state`` holds parameters and
  optimizer state;
* ``optax.apply_updates(params, updates)`` (and ``equinox.apply_updates(model, updates)``): ``params``
  are parameters;
* ``tx.update(grads, opt_state, ...)`` whose first argument is a gradient (the result of
  ``jax.grad``/``jax.value_and_grad`` and their equinox and flax NNX forms): ``opt_state`` is an
  optimizer's state;
* ``jax.tree.map(f, params, grads)`` with a gradient among its trees: a hand-written gradient step;
* a call given the step's rebound parameter and a gradient whose result rebinds that parameter
  (``params, opt_state = optimizer(params, grads, opt_state)``, or through ``lax.cond``): whatever
  the callee, the new parameters are computed from the old ones and their gradient (fresh AA's
  first look: a course's own optimizer, called in a ``lax.cond`` that skips non-finite steps).

The fact is proven when one of these operands is computed from a parameter of the step that the
loop rebinds; unknown otherwise (the step is not a def of this module, or no update of a rebound
argument is in its body). A function of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, libraryobjects, proof
from ..python.syntax import call_arg, unparse

_UPDATE_METHOD = "apply_gradients"  # flax.training.train_state.TrainState (and its subclasses)


def _names_bound(stmt: ast.AST) -> set:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _reads(expr: ast.AST, names: set) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


def _propagate(assigns: list, seeds: set, rounds: int = 3) -> set:
    """``seeds`` and the names assignments compute from them (up to ``rounds`` rounds)."""
    out = set(seeds)
    for _ in range(rounds):
        before = len(out)
        for stmt in assigns:
            if _reads(stmt.value, out):
                out |= _names_bound(stmt)
        if len(out) == before:
            break
    return out


def _gradients(m, node: ast.AST, assigns: list, computed: Optional[list] = None) -> set:
    """Names in ``node`` that hold a gradient: bound from a call of a gradient transform's product
    (``jax.grad(loss)(p)``, or ``fn(p)`` with ``fn = jax.value_and_grad(loss)``), and names computed
    from those (``grads = jax.lax.pmean(grads, "batch")``)."""
    scope_of = m.scope_at

    def transform(e: ast.AST) -> bool:
        f = e.func if isinstance(e, ast.Call) else None
        if f is not None and m.resolve(f, scope_of(e)) == N.PARTIAL and e.args:
            f = e.args[0]
        return f is not None and m.resolve(f, scope_of(e)) in N.GRADIENT_TRANSFORMS

    products = {name for stmt in assigns if isinstance(stmt.value, ast.Call) and transform(stmt.value)
                for name in _names_bound(stmt)}
    seeds = set()
    for stmt in assigns:
        for c in ast.walk(stmt.value):
            if isinstance(c, ast.Call) and ((isinstance(c.func, ast.Call) and transform(c.func))
                                            or (isinstance(c.func, ast.Name) and c.func.id in products)):
                seeds |= _names_bound(stmt)
                if computed is not None:
                    computed.append(stmt)  # ``(loss, aux), grads = ...``: gradients (and values), not state
                break
    return _propagate(assigns, seeds) if seeds else set()


def _updated_operands(m, node: ast.AST, grads: set):
    """(operand, update call) for each optimizer update in ``node``: what the update writes."""
    for c in ast.walk(node):
        if not isinstance(c, ast.Call):
            continue
        f = c.func
        if isinstance(f, ast.Attribute) and f.attr == _UPDATE_METHOD:
            yield f.value, c
            continue
        qn = m.resolve(f, m.scope_at(c))
        if qn in ("optax.apply_updates", "equinox.apply_updates") and c.args:
            yield c.args[0], c
        elif (qn is None and len(c.args) >= 3 and grads and _reads(c.args[1], grads)
              and libraryobjects.example_optimizer_update(m, f, m.scope_at(c)) is not None):
            yield c.args[2], c  # ``opt_update(i, grads, opt_state)`` of JAX's example optimizers
        elif qn in N.TREE_MAPS and len(c.args) >= 3 and grads and any(_reads(a, grads) for a in c.args[1:]):
            for a in c.args[1:]:
                if not _reads(a, grads):
                    yield a, c
        elif (isinstance(f, ast.Attribute) and f.attr == "update" and len(c.args) >= 2 and grads
              and _reads(c.args[0], grads)):
            for a in c.args[1:3]:
                yield a, c


def training_state(m, call: ast.Call, wrap, positions: list, keywords: list) -> "proof.Fact":
    """Whether the arguments ``call`` passes at ``positions``/``keywords`` (the ones the loop
    rebinds) are a model's training state: see the module docstring. The step may be a def of this
    module, or a top-level function of another module of the project (``jax.jit(model.update_step)``
    after ``from . import model``), read there."""
    funcs = [wrap.func] if wrap.func is not None else (
        callables.local_functions(m, wrap.target, m.scope_at(wrap.node)) if wrap.target is not None else [])
    spelled = unparse(call.func, 40)
    bound = callables.bound_positionals(m, wrap.target, m.scope_at(wrap.node)) if wrap.target is not None else 0
    if not funcs and wrap.updates and not keywords:
        hit = next((wrap.updates[i] for i in positions if i in wrap.updates), None)
        if hit is not None:  # a step made by another module's factory, summarized there
            operand, update, line = hit
            return proof.proven("training-state", f"`{spelled}` (made by a factory in another module of the project) "
                                                  f"applies an optimizer update to `{operand}` (`{update}` on line "
                                                  f"{line} there), computed from its argument: the rebound values "
                                                  "are a model's parameters or optimizer state")
    if len(funcs) != 1 or isinstance(funcs[0].node, ast.Lambda):
        remote = _imported_step(m, wrap, positions, keywords, bound) if not funcs else None
        if remote is not None:
            name, operand, update, line = remote
            return proof.proven("training-state", f"`{name}` (another module of the project) applies an optimizer "
                                                  f"update to `{operand}` (`{update}` on line {line} there), computed "
                                                  "from its argument: the rebound values are a model's parameters or "
                                                  "optimizer state")
        return proof.unknown("training-state", f"`{spelled}` is not a def of this module: what its rebound arguments "
                                               "hold (a model's parameters, or a key or a counter) is not known")
    f = funcs[0]
    params = wrap.static_layout(call)[0]
    # ``jax.pmap(partial(train_step, model.apply))``: the call's arguments bind the parameters after those
    # the partial binds (donate_argnums counts the call's own arguments)
    seeds = {params[i + bound] for i in positions if 0 <= i + bound < len(params)} | set(keywords)
    found = update_of(m, f, seeds)
    if found is not None:
        operand, update = found
        return proof.proven("training-state", f"`{f.name}` applies an optimizer update to "
                                              f"`{unparse(operand, 30)}` (`{unparse(update.func, 40)}` on line "
                                              f"{update.lineno}), computed from its argument: the rebound values "
                                              "are a model's parameters or optimizer state")
    return proof.unknown("training-state", f"`{f.name}` applies no optimizer update or gradient step to an argument "
                                           "the loop rebinds: what those hold (parameters, or a key or a counter), "
                                           "and their size, is not known")


def updates_by_position(m, f) -> dict:
    """``{position: (operand, update, line)}`` for each positional parameter of ``f`` that ``f``
    applies an optimizer update to (for a summary of a factory's step, read by another module)."""
    out = {}
    if isinstance(f.node, ast.Lambda):
        return out
    for i, p in enumerate(f.params):
        found = update_of(m, f, {p})
        if found is not None:
            operand, update = found
            out[i] = (unparse(operand, 30), unparse(update.func, 40), update.lineno)
    return out


def update_of(m, f, seeds: set, grads_in: frozenset = frozenset(), depth: int = 0) -> Optional[tuple]:
    """``(operand, update call)`` of the first optimizer update in ``f``'s body of a value computed
    from the parameters ``seeds`` (``grads_in``: parameters that hold a gradient), or None. The
    update may be made by a function of the module the body hands a gradient and such a value
    (``update_weights(weights, grads, opt_state)``), followed two calls deep."""
    assigns = [n for n in ast.walk(f.node) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
               and n.value is not None]
    computed: list = []
    grads = _gradients(m, f.node, assigns, computed) | (_propagate(assigns, set(grads_in)) if grads_in else set())
    # the state: the parameters and what is computed from them, not through a gradient's computation
    derived = _propagate([a for a in assigns if not any(a is c for c in computed)], seeds)
    grads -= derived  # ``params, opt = update_weights(params, grads, opt)``: new state, not a gradient
    for operand, update in _updated_operands(m, f.node, grads):
        if _reads(operand, derived):
            return operand, update
    generic = _gradient_step(assigns, computed, seeds, derived, grads)
    if depth < 3 and derived:
        found = _carried_update(m, f, derived, depth)
        if found is not None:
            return found
    if depth >= 2 or not grads:
        return generic
    for c in ast.walk(f.node):
        if not isinstance(c, ast.Call) or any(isinstance(a, ast.Starred) for a in c.args):
            continue
        given = [(i, a) for i, a in enumerate(c.args)]
        if not (any(_reads(a, grads) for _, a in given) and any(_reads(a, derived) for _, a in given)):
            continue
        local = callables.local_functions(m, c.func, m.scope_at(c))
        for g in local:
            if isinstance(g.node, ast.Lambda) or g is f:
                continue
            inner_seeds = {g.params[i] for i, a in given if i < len(g.params) and _reads(a, derived)}
            inner_grads = frozenset(g.params[i] for i, a in given if i < len(g.params) and _reads(a, grads))
            found = update_of(m, g, inner_seeds, inner_grads, depth + 1)
            if found is not None:
                return found
        other = callables.imported_function(m, c.func, m.scope_at(c)) if not local else None
        project = getattr(other[0], "project", None) if other is not None else None
        if project is not None and getattr(other[0], "path", None) is not None and project.training_update(
                other[0].path, other[1], tuple(i for i, a in given if _reads(a, derived)), (),
                tuple(i for i, a in given if _reads(a, grads))) is not None:
            # ``model.update_weights(weights, grads, opt_state)`` of another module: the call is the update
            return next(a for _, a in given if _reads(a, derived)), c
    return generic


def _gradient_step(assigns: list, computed: list, seeds: set, derived: set, grads: set) -> Optional[tuple]:
    """``(target, call)`` of a call given the parameters a gradient was taken of and that gradient,
    whose result rebinds those parameters: ``params, opt = lax.cond(ok, do_update, skip, (params, opt,
    grads))``, ``params = my_sgd(params, grads)``. Asked after the updates whose operand is known."""
    if not grads:
        return None
    differentiated = {n.id for c in computed for n in ast.walk(c.value) if isinstance(n, ast.Name) and n.id in derived}
    for stmt in assigns:
        v = stmt.value
        if (isinstance(v, ast.Call) and isinstance(stmt, ast.Assign) and _names_bound(stmt) & seeds & differentiated
                and not any(stmt is c for c in computed) and _reads(v, grads) and _reads(v, derived)):
            return stmt.targets[0], v
    return None


# Device loops that carry a value through their body: (body position, body keyword, carry position, carry
# keyword, the body's parameter that receives the carry).
_CARRYING_LOOPS = {"jax.lax.scan": (0, "f", 1, "init", 0), "jax.lax.fori_loop": (2, "body_fun", 3, "init_val", 1),
                   "jax.lax.while_loop": (1, "body_fun", 2, "init_val", 0)}


def _carried_update(m, f, derived: set, depth: int) -> Optional[tuple]:
    """An update of the state applied by a device loop's body that carries it: ``lax.scan(lambda s, _:
    sgd_step(s), init=training_state, length=n)`` runs ``n`` optimizer steps on ``training_state``
    (the body, or a function of the module it hands the carry to, applies the update)."""
    for c in ast.walk(f.node):
        spec = _CARRYING_LOOPS.get(m.resolve(c.func, m.scope_at(c))) if isinstance(c, ast.Call) else None
        if spec is None:
            continue
        body, carry = call_arg(c, spec[0], spec[1]), call_arg(c, spec[2], spec[3])
        if body is None or carry is None or not _reads(carry, derived):
            continue
        for g in callables.local_functions(m, body, m.scope_at(c)):
            if g is f or len(g.params) <= spec[4]:
                continue
            param = g.params[spec[4]]
            found = update_of(m, g, {param}, depth=depth + 1) or _handed_on(m, g, param, depth + 1)
            if found is not None:
                return found
    return None


def _handed_on(m, g, param: str, depth: int) -> Optional[tuple]:
    """``lambda state, _: sgd_step(state)``: the update of a function of the module ``g`` hands ``param`` to."""
    for c in ast.walk(g.node):
        if not isinstance(c, ast.Call):
            continue
        for i, a in enumerate(c.args):
            if isinstance(a, ast.Name) and a.id == param:
                for h in callables.local_functions(m, c.func, m.scope_at(c)):
                    if h is not g and i < len(h.params) and not isinstance(h.node, ast.Lambda):
                        found = update_of(m, h, {h.params[i]}, depth=depth + 1)
                        if found is not None:
                            return found
    return None


def _imported_step(m, wrap, positions: list, keywords: list, bound: int) -> Optional[tuple]:
    """For a wrapper of another module's top-level function, or of a method of an instance of another
    module's class made in this module: ``(name, operand, update, line)`` when that function applies an
    optimizer update to a parameter the rebound arguments bind."""
    target = wrap.target
    while isinstance(target, ast.Call) and target.args:  # jax.jit(partial(model.update_step, ...))
        target = target.args[0]
    if target is None:
        return None
    scope = m.scope_at(wrap.node)
    found = callables.imported_function(m, target, scope)
    if found is None and isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        # ``jax.pmap(trainer.update_fn)`` with ``trainer = Trainer(config)`` of another module: the bound
        # method, whose parameters start after ``self``
        ev = m.binding(target.value.id, scope, (target.lineno, target.col_offset))
        made = callables.imported_function(m, ev.value.func, ev.scope) \
            if ev is not None and ev.plain_assign and isinstance(ev.value, ast.Call) else None
        found = (made[0], f"{made[1]}.{target.attr}") if made is not None else None
        bound += 1
    if found is None:
        return None
    summary, name = found
    project, path = getattr(summary, "project", None), getattr(summary, "path", None)
    if project is None or path is None:
        return None
    return project.training_update(path, name, tuple(i + bound for i in positions), tuple(keywords))


def remote_update(m, name: str, positions: tuple, keywords: tuple, grads: tuple = ()) -> Optional[tuple]:
    """For another module's question (:meth:`~jaxlint.project.ProjectResolver.training_update`):
    ``(name, operand, update spelled, line)`` when this module's top-level function ``name`` (or
    method ``Class.name`` of a top-level class; positions count ``self``) applies
    an optimizer update to a value computed from its parameters at ``positions`` or ``keywords``
    (``grads``: the positions of those given a gradient)."""
    cls, _, meth = name.rpartition(".")  # ``Trainer.update_fn``: a method of a top-level class
    for f in m.functions:
        if f.name != meth or f.parent is not None or isinstance(f.node, ast.Lambda) \
                or (f.cls.node.name if f.cls is not None and f.cls.node in m.tree.body else None) != (cls or None):
            continue
        seeds = {f.params[i] for i in positions if 0 <= i < len(f.params)} | set(keywords)
        found = update_of(m, f, seeds, frozenset(f.params[i] for i in grads if 0 <= i < len(f.params)))
        if found is not None:
            operand, update = found
            return name, unparse(operand, 30), unparse(update.func, 40), update.lineno
    return None
