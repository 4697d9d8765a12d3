"""Instances of flax linen modules: ``Generator().init(key, x)`` makes the module's parameters from
``key``. flax derives each parameter's key from the given key and the parameter's path (the names of the
submodules leading to it), so a ``jax.random`` draw from the same key shares no bits with the weights
(JAX's own key-reuse checker agrees), but two ``init`` calls given one key make the same weights wherever
their parameter paths and shapes coincide: always for two instances of one class built alike. Functions
of the model (``m``), asked by the key facts (facts/keys.py, keypairs.py). Fresh AD's CycleGAN (two
generators and two discriminators initialised from one key each) was a catalogued miss.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from ..python import limits as L
from ..python.instances import class_named
from ..python.records import Scope
from ..python.syntax import _pos

MODULE_BASES = frozenset({"flax.linen.Module", "flax.linen.module.Module"})
INIT = "init"


def module_instance(m, expr: ast.AST, scope: Scope) -> bool:
    """Whether ``expr`` is proven an instance of a flax linen module: ``Cls(...)``, or a name bound once by a
    plain assignment to ``Cls(...)``, where ``Cls`` is a flax.linen layer (``nn.Dense``) or a class deriving
    from ``flax.linen.Module`` (through classes of this module, or a class of another module of the project)."""
    made = made_by(m, expr, scope)
    return made is not None and _module_class(m, made[0].func, made[1], 0)


def made_by(m, expr: ast.AST, scope: Scope) -> Optional[tuple]:
    """``(call, scope)``: the call that made the instance ``expr`` (``Cls(...)`` itself, or the value of the only,
    plain binding of a name), or None."""
    if isinstance(expr, ast.Name):
        ev = m.binding(expr.id, scope, _pos(expr))
        if ev is None or not ev.plain_assign or len(ev.scope.events.get(expr.id, ())) != 1:
            return None
        expr, scope = ev.value, ev.scope
    return (expr, scope) if isinstance(expr, ast.Call) else None


def _module_class(m, func: ast.AST, scope: Optional[Scope], depth: int) -> bool:
    if depth > L.CALLABLE_CHAIN or scope is None:
        return False
    qn = m.resolve(func, scope)
    if qn is not None and qn.startswith("flax.linen.") and qn.rsplit(".", 1)[1][:1].isupper():
        return True  # ``nn.Dense(3)``, ``nn.Module`` subclasses of the library
    cls = class_named(m, func, scope)
    if cls is not None:
        return class_is_module(m, cls.node, depth)
    if isinstance(func, ast.Name):
        made = made_by(m, func, scope)  # ``UNetDefault = partial(UNet, ...)``
        if made is not None and made[0].args and m.resolve(made[0].func, made[1]) == N.PARTIAL:
            return _module_class(m, made[0].args[0], made[1], depth + 1)
        found = m._imported(func.id, scope)  # a class of another module of the project
        if found is not None and found[1] is not None:
            summary, name = found
            return bool(summary.project.answer(summary.path, ("flax-module", name),
                                               lambda model: _named_module(model, name, depth + 1), False,
                                               (b"Module",)))
    return False


def class_is_module(m, node: ast.ClassDef, depth: int = 0) -> bool:
    """Whether the class ``node`` of this module derives from ``flax.linen.Module``."""
    outer = m.scope_at(node)
    return any(m.resolve(b, outer) in MODULE_BASES or _module_class(m, b, outer, depth + 1) for b in node.bases)


def _named_module(m, name: str, depth: int) -> bool:
    """For the project resolver: whether the top-level name ``name`` of this module is a flax linen module class
    (or a ``functools.partial`` of one)."""
    node = next((s for s in m.tree.body if isinstance(s, ast.ClassDef) and s.name == name), None)
    if node is not None:
        return class_is_module(m, node, depth)
    end = ast.Name(name, ast.Load(), lineno=10 ** 9, col_offset=0)  # read after the module's last line
    return _module_class(m, end, m.module_scope, depth)


def class_key(m, expr: ast.AST, scope: Scope) -> Optional[tuple]:
    """Which module class the instance ``expr`` (``Cls(...)``, or a name bound once to one) is made from, as a
    comparable key; None when not shown. Two ``init`` calls of instances of one class given one key make the
    same weights wherever the constructor arguments give them the same shapes (flax derives each parameter's
    key from the key and the parameter's path, which the class fixes)."""
    made = made_by(m, expr, scope)
    if made is None:
        return None
    expr, scope = made
    cls = class_named(m, expr.func, scope)
    if cls is not None:
        return ("class", id(cls.node))
    qn = m.resolve(expr.func, scope)
    if qn is not None:
        return ("name", qn)
    found = m._imported(expr.func.id, scope) if isinstance(expr.func, ast.Name) else None
    return ("imported", found[0].path, found[1]) if found is not None and found[1] is not None else None
