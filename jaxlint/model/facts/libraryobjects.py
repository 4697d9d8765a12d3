"""Objects made by library calls: which library call made the value a name or ``self.attr`` holds
(``strategy = evosax.CMA_ES(...)``, ``self.tx = optax.adam(1e-3)``). What such an object's methods
do is the library's public API, kept as data in :mod:`jaxlint.names`. Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables
from ..python.records import Scope


def library_maker(m, expr: ast.AST, scope: Scope) -> Optional[str]:
    """The qualified name of the call that made ``expr``'s value: a name or ``self.attr`` bound,
    at every binding, to a call of one and the same resolvable callable (``optax.adam(...)``;
    through a factory's factory, ``optax.inject_hyperparams(optax.adam)(...)`` is ``optax.
    inject_hyperparams``). None when not known (a parameter, two different makers, no call)."""
    values = []
    if isinstance(expr, ast.Name):
        ev = m.binding(expr.id, scope, (expr.lineno, expr.col_offset))
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
    it does not wait for the device."""
    f = call.func
    if not isinstance(f, ast.Attribute):
        return False
    qn = library_maker(m, f.value, scope)
    if qn is None:
        return False
    for prefix, methods in N.LIBRARY_DISPATCH_METHODS.items():
        if (qn == prefix or (prefix.endswith(".") and qn.startswith(prefix))) and f.attr in methods:
            return True
    return False
