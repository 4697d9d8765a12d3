"""Python values by comparison and type test: a name compared with a string or tested with
``isinstance(x, (int, str))`` holds a Python value there, not a tracer (what staging asks before it
calls a traced function's parameter a tracer)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from . import values as V
from ..python.records import Scope
from ..python.syntax import _pos

if TYPE_CHECKING:  # annotations only
    from ..python.module import ModuleModel


def _pairs(cmp: ast.Compare, ours) -> list:
    """``(operator, other operand)`` for each comparison in ``cmp`` that involves ``ours``."""
    operands = [cmp.left, *cmp.comparators]
    out = []
    for i, op in enumerate(cmp.ops):
        a, b = operands[i], operands[i + 1]
        if ours(a):
            out.append((op, b))
        elif ours(b):
            out.append((op, a))
    return out


def _python_comparison(model: ModuleModel, op: ast.cmpop, other: ast.AST, scope: Scope) -> bool:
    """A comparison only a Python value makes sense in: ``is None``, ``== "mode"``,
    ``== Enum.MEMBER`` (an attribute of an imported or module-level name other than a JAX/NumPy
    constant), ``in ("a", "b")``."""
    if isinstance(op, (ast.Is, ast.IsNot)):
        return isinstance(other, ast.Constant) and other.value is None
    if isinstance(op, (ast.In, ast.NotIn)):
        return isinstance(other, (ast.Tuple, ast.List, ast.Set)) and bool(other.elts) and all(
            isinstance(x, ast.Constant) and isinstance(x.value, str) for x in other.elts)
    if not isinstance(op, (ast.Eq, ast.NotEq)):
        return False
    if isinstance(other, ast.Constant):
        return isinstance(other.value, str)
    if isinstance(other, ast.Attribute) and not V.is_jax(model, other, scope):
        root = other
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name):
            return False
        qn = model.resolve(other, scope)
        if qn is not None:
            return not qn.startswith(("jax.", "numpy.", "math.", "builtins."))
        ev = model.binding(root.id, scope, _pos(root))
        return ev is not None and ev.scope is model.module_scope
    return False


_PY_TYPES = frozenset("builtins." + t for t in ("str", "int", "float", "bool", "complex", "tuple", "list", "dict",
                                                "set", "frozenset", "bytes", "type"))


def _python_types(model: ModuleModel, e: ast.AST, scope: Scope) -> bool:
    elts = e.elts if isinstance(e, ast.Tuple) else [e]
    for t in elts:
        qn = model.resolve(t, scope)
        if qn is None or not (qn in _PY_TYPES or qn.startswith("numpy.")):
            return False
    return bool(elts)
