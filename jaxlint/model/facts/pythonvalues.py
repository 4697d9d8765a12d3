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


# Types whose values are data, not callables: a parameter so annotated is not a function handed in.
_DATA_TYPES = _PY_TYPES - {"builtins.type"} | frozenset({
    "jax.Array", "jax.numpy.ndarray", "numpy.ndarray", "optax.Params", "optax.OptState",
    "omegaconf.DictConfig", "omegaconf.ListConfig", "ml_collections.ConfigDict", "ml_collections.FrozenConfigDict",
    "flax.core.FrozenDict", "flax.core.frozen_dict.FrozenDict", "typing.Dict", "typing.List", "typing.Tuple",
    "typing.Mapping", "typing.Sequence", "typing.MutableMapping", "collections.abc.Mapping",
    "collections.abc.Sequence"})
_DATA_MODULES = ("chex.", "jaxtyping.")  # every type these name is an array, a pytree of them or a number
_WRAPPERS = frozenset({"typing.Optional", "typing.Union"})


def data_annotation(model: ModuleModel, ann: ast.AST, scope: Scope) -> bool:
    """Whether the annotation ``ann`` names a type of data, not of a callable: a Python number,
    string or container, an array or pytree type (``jax.Array``, ``chex.ArrayTree``, jaxtyping's),
    a configuration (``omegaconf.DictConfig``, ``ml_collections.ConfigDict``), ``optax.Params``;
    through ``Optional[...]``, ``Union[...]``, ``X | None`` and subscripts (``Dict[str, Any]``)."""
    if isinstance(ann, ast.Constant) and ann.value is None:
        return True
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return data_annotation(model, ann.left, scope) and data_annotation(model, ann.right, scope)
    if isinstance(ann, ast.Subscript):
        qn = model.resolve(ann.value, scope)
        if qn in _WRAPPERS:
            inner = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            return all(data_annotation(model, a, scope) for a in inner)
        ann = ann.value
    qn = model.resolve(ann, scope)
    return qn is not None and (qn in _DATA_TYPES or qn.startswith(_DATA_MODULES))


def data_params(model: ModuleModel, f) -> set:
    """The parameters of the function ``f`` (a ``FunctionInfo``) annotated as data (:func:`data_annotation`)."""
    a = f.node.args
    if not hasattr(a, "posonlyargs"):
        return set()
    scope = f.scope.parent if f.scope.parent is not None else model.module_scope
    return {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]
            if p.annotation is not None and data_annotation(model, p.annotation, scope)}
