"""Immutable training-state objects: flax's ``TrainState`` and its struct dataclasses, whose ``replace``
returns a new object and leaves the old one as it was (asked by JAX403: ``state.replace(rngs=...)`` as a
statement of its own does nothing; fresh set AX: a NeRF's jitted step dropped the update of its sampling
keys that way, so every step drew the same points).

A value is such an object when the module shows it: the result of ``x.apply_gradients(...)`` (flax's
``TrainState`` method, where no class of the module defines its own), of ``C.create(...)`` or
``x.replace(...)`` on one, or a parameter annotated with a class that is one (flax's ``TrainState``,
``flax.struct.PyTreeNode``, a class decorated with ``flax.struct.dataclass``, or a class of the module
deriving from one). Names only say nothing: an object of unknown type is not one. A function of the model."""

from __future__ import annotations

import ast
from typing import Optional

from ..python.instances import class_named
from ..python.syntax import _pos

_BASES = frozenset({"flax.training.train_state.TrainState", "flax.struct.PyTreeNode"})
_DECORATORS = frozenset({"flax.struct.dataclass"})
_STATE_METHODS = ("apply_gradients", "replace")


def immutable_state(m, expr: ast.AST, scope, depth: int = 0) -> Optional[str]:
    """Why ``expr`` (a name) holds an immutable flax state object, as evidence; None when the module
    does not show it."""
    if depth > 3 or not isinstance(expr, ast.Name):
        return None
    ev = m.binding(expr.id, scope, _pos(expr))
    if ev is None:
        return None
    if ev.kind == "param":
        cls = _annotation_class(m, ev, scope)
        return f"`{expr.id}` is a parameter annotated `{cls}`, an immutable flax struct" if cls else None
    value = ev.value if ev.plain_assign else None
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
        return None
    method, receiver = value.func.attr, value.func.value
    if method == "apply_gradients" and not any("apply_gradients" in c.methods for c in m.classes.values()):
        return (f"`{expr.id}` is the result of `{ast.unparse(value.func)}(...)` (line {value.lineno}): a flax "
                "`TrainState`")
    if method == "create" and _struct_class(m, receiver, ev.scope, 0):
        return f"`{expr.id}` is made by `{ast.unparse(value.func)}(...)` (line {value.lineno}): a flax `TrainState`"
    if method in _STATE_METHODS and isinstance(receiver, ast.Name):
        inner = immutable_state(m, receiver, ev.scope, depth + 1)
        return (f"`{expr.id}` is the result of `{ast.unparse(value.func)}(...)` (line {value.lineno}); {inner}"
                if inner else None)
    return None


def _annotation_class(m, ev, scope) -> Optional[str]:
    """The class a parameter's annotation names, when it is an immutable flax struct."""
    node = ev.node
    args = getattr(node, "args", None)
    if args is None:
        return None
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
        if a.arg == ev.value and a.annotation is not None and _struct_class(m, a.annotation, scope, 0):
            return ast.unparse(a.annotation)
    return None


def _struct_class(m, expr: ast.AST, scope, depth: int) -> bool:
    """Whether ``expr`` names flax's ``TrainState``/``PyTreeNode`` or a class of this module that derives
    from one or is decorated with ``flax.struct.dataclass``."""
    if depth > 3:
        return False
    qn = m.resolve(expr, scope)
    if qn in _BASES:
        return True
    c = class_named(m, expr, scope)
    if c is None:
        return False
    if any(m.resolve(d, m.module_scope) in _DECORATORS for d in c.node.decorator_list):
        return True
    return any(_struct_class(m, b, m.module_scope, depth + 1) for b in c.node.bases)
