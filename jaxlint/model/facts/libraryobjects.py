"""Objects made by library calls: which library call made the value a name or ``self.attr`` holds
(``strategy = evosax.CMA_ES(...)``, ``self.tx = optax.adam(1e-3)``). What such an object's methods
do is the library's public API, kept as data in :mod:`jaxlint.names`. Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables
from ..python.instances import annotated_class
from ..python.records import Scope


def library_maker(m, expr: ast.AST, scope: Scope) -> Optional[str]:
    """The qualified name of the call that made ``expr``'s value: a name or ``self.attr`` bound,
    at every binding, to a call of one and the same resolvable callable (``optax.adam(...)``;
    through a factory's factory, ``optax.inject_hyperparams(optax.adam)(...)`` is ``optax.
    inject_hyperparams``). None when not known (a parameter, two different makers, no call)."""
    values = []
    if isinstance(expr, ast.Name):
        ev = m.binding(expr.id, scope, (expr.lineno, expr.col_offset))
        if ev is not None and isinstance(ev.node, ast.withitem) and isinstance(ev.node.optional_vars, ast.Name) \
                and isinstance(ev.node.context_expr, ast.Call):
            # ``with tqdm(total=n) as pbar``: the object itself, for makers whose ``__enter__`` returns it
            qn = m.resolve(ev.node.context_expr.func, ev.scope)
            return qn if qn in N.ENTER_RETURNS_SELF else None
        if ev is None or not ev.plain_assign:
            return None
        values = [(ev.value, ev.scope)]
    elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        owner = callables.instance_class(m, expr.value, scope)
        values = [(v, m.scope_at(v)) for v in (owner.self_attrs.get(expr.attr, ()) if owner is not None else ())]
    found = set()
    for value, vscope in values:
        if not isinstance(value, ast.Call):
            return None
        func = value.func
        while isinstance(func, ast.Call):
            func = func.func
        qn = m.resolve(func, vscope)
        if qn is None:
            return None
        found.add(qn)
    return next(iter(found)) if len(found) == 1 else None


def dispatch_only_method(m, call: ast.Call, scope: Scope) -> bool:
    """``strategy.tell(x, fitness, state)`` on an object a library call made, where that library's
    method only dispatches JAX work and returns device values (``names.LIBRARY_DISPATCH_METHODS``):
    it does not wait for the device. Also a name every binding of which is such a bound method
    (``rollout = manager.batch_rollout`` in both branches of an ``if``, then ``rollout(key, None)``)."""
    f = call.func
    if isinstance(f, ast.Name):
        values = every_value(m, f, scope)
        return bool(values) and all(isinstance(v, ast.Attribute) and _in_table(
            m, v, s, N.LIBRARY_DISPATCH_METHODS) for v, s in values)
    return isinstance(f, ast.Attribute) and _in_table(m, f, scope, N.LIBRARY_DISPATCH_METHODS)


def compiled_factory_result(m, call: ast.Call, scope: Scope) -> bool:
    """Whether ``call`` calls a compiled function that a library object's method returned
    (``names.LIBRARY_COMPILED_FACTORY_METHODS``): ``update_fn(repertoire, state, keys)`` after
    ``update_fn = map_elites.get_distributed_update_fn(...)`` with ``map_elites =
    DistributedMAPElites(...)`` (a ``jax.pmap``), at every binding of the name; or the factory's
    result called directly."""
    f = call.func
    if isinstance(f, ast.Call):
        values = [(f, scope)]
    elif isinstance(f, ast.Name):
        values = every_value(m, f, scope)
    else:
        return False
    return bool(values) and all(isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and _in_table(
        m, v.func, s, N.LIBRARY_COMPILED_FACTORY_METHODS) for v, s in values)


def every_value(m, name: ast.Name, scope: Scope) -> list:
    """``(value, scope)`` of every binding of ``name`` in the scope of the binding that reaches
    it, when all are plain assignments (``x = value``); empty otherwise (a parameter, a loop
    target, an unpacking, an import, an unbound name)."""
    ev = m.binding(name.id, scope, (name.lineno, name.col_offset))
    if ev is None:
        return []
    events = ev.scope.events.get(name.id, ())
    if not events or not all(e.plain_assign for e in events):
        return []
    return [(e.value, e.scope) for e in events]


def _in_table(m, f: ast.Attribute, scope: Scope, table: dict) -> bool:
    """``obj.method`` where a library call made ``obj`` and the table lists ``method`` for that
    call (a key ending in "." is a package prefix)."""
    qn = library_maker(m, f.value, scope)
    if qn is None:
        return False
    for prefix, methods in table.items():
        if (qn == prefix or (prefix.endswith(".") and qn.startswith(prefix))) and f.attr in methods:
            return True
    return False


def imported_dispatching_method(m, c: ast.Call, scope) -> bool:
    """``obj.method(...)`` where every binding of ``obj`` is ``Cls(...)`` of one top-level class
    of another module of the project, whose own ``method`` ends in unwaited JAX work
    (:func:`~jaxlint.model.facts.timing.dispatching_methods_of`, asked of that module's summary):
    ``sac.train(batch)`` after ``sac = ConservativeSAC(...)`` of ``from .cql import ConservativeSAC``."""
    f = c.func
    if not isinstance(f, ast.Attribute) or not isinstance(f.value, ast.Name) or m.project is None:
        return False
    values = every_value(m, f.value, scope)
    if values and all(isinstance(v, ast.Call) for v, _ in values):
        found = {callables.imported_function(m, v.func, s) for v, s in values}
    else:
        found = _annotated_and_kept(m, f.value, scope)
    if len(found) != 1 or None in found:
        return False
    summary, cls = next(iter(found))
    return summary.dispatching_method(cls, f.attr)


_SAME_TREE = frozenset({"jax.block_until_ready", "jax.device_put"})  # give back the pytree they are given


def _annotated_and_kept(m, name: ast.Name, scope) -> set:
    """``def learner(agent: DrQAgent, ...)`` of ``from .drq import DrQAgent``, where every other
    binding of ``agent`` in the function is ``jax.block_until_ready(agent)`` or the first element
    of what a dispatching method of that class (a jitted one, or one that ends in unwaited JAX
    work) called on ``agent`` returns (``agent, info = agent.update(batch)``: a jitted method of a
    pytree class returns that class, rebuilt): ``{(summary, class name)}``, or empty."""
    ev = m.binding(name.id, scope, (name.lineno, name.col_offset))
    events = ev.scope.events.get(name.id, ()) if ev is not None else ()
    params = [e for e in events if e.kind == "param"]
    if len(params) != 1:
        return set()
    got = annotated_class(m, params[0], want_name=True)
    found = callables.imported_function(m, got[0], got[1]) if got is not None else None
    if found is None:
        return set()
    summary, cls = found
    for e in events:
        if e is params[0]:
            continue
        v = e.value
        if e.plain_assign and isinstance(v, ast.Call) and len(v.args) == 1 and isinstance(v.args[0], ast.Name) \
                and v.args[0].id == name.id and m.resolve(v.func, e.scope) in _SAME_TREE:
            continue  # ``agent = jax.block_until_ready(agent)``: the same pytree back
        if not (e.kind == "assign" and e.path is not None and tuple(e.path) == (0,) and isinstance(v, ast.Call)
                and isinstance(v.func, ast.Attribute) and isinstance(v.func.value, ast.Name)
                and v.func.value.id == name.id and summary.dispatching_method(cls, v.func.attr)):
            return set()
    return {found}


def example_optimizer_update(m, func: ast.AST, scope: Scope) -> Optional[str]:
    """The maker (``jax.example_libraries.optimizers.adam``) when ``func`` is the update function of one
    of JAX's example optimizers: a name bound, at every binding, to the second element of the triple
    a maker returns (``opt_init, opt_update, get_params = optimizers.adam(1e-3)``). Calling it,
    ``opt_update(i, grads, opt_state)``, returns the updated state."""
    if not isinstance(func, ast.Name):
        return None
    ev = m.binding(func.id, scope, (func.lineno, func.col_offset))
    if ev is None or ev.kind != "assign" or tuple(ev.path or ()) != (1,) or not isinstance(ev.value, ast.Call):
        return None
    qn = m.resolve(ev.value.func, ev.scope)
    return qn if qn is not None and qn.startswith(N.EXAMPLE_OPTIMIZER_MAKERS) else None
