"""Static pytree fields: attributes a module's classes declare static rather than pytree leaves,
read in traced code as Python values, not tracers (``flax.struct.field(pytree_node=False)``,
``struct.static_field()``, ``eqx.field(static=True)``, a ``flax.linen`` module's fields, what an
``nnx.Module`` sets in ``__init__`` from its arguments). JAX's and the libraries' API, as data.

A function of the model (``m``), memoized on it, imported explicitly.
"""

from __future__ import annotations

import ast

from ..python.records import FunctionInfo
from ..python.syntax import walk

_STATIC_FIELD_CALLS = frozenset({"flax.struct.static_field", "equinox.static_field"})
_LINEN_MODULES = frozenset({"flax.linen.Module", "flax.linen.module.Module"})
_NNX_MODULES = frozenset({"flax.nnx.Module", "flax.nnx.module.Module"})


def static_fields(m) -> set:
    """Attributes this module's classes declare static, not pytree leaves:
    ``x: int = flax.struct.field(pytree_node=False)``, ``flax.struct.static_field()``,
    ``equinox.field(static=True)``; the fields of a ``flax.linen.Module`` (hyperparameters of
    a module whose arrays live in ``params``); and what a ``flax.nnx.Module`` sets in
    ``__init__`` from a parameter or a constant (an int or a string is static in its graph
    definition, only ``nnx.Variable``s are state)."""
    found = m.facts.static_fields
    if found is None:
        out: set = set()
        for cls in m.classes.values():  # every class the walk recorded
            scope = cls.scope
            bases = {m.resolve(b, scope) for b in cls.node.bases} if scope is not None else set()
            linen = bool(bases & _LINEN_MODULES)
            for stmt in cls.node.body:
                if linen and isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    out.add(stmt.target.id)
                    continue
                value = stmt.value if isinstance(stmt, (ast.AnnAssign, ast.Assign)) else None
                if not isinstance(value, ast.Call):
                    continue
                # ``static_field()`` is the name of the static-field helper in flax.struct, equinox,
                # jax-md's and netket's ``struct``/``dataclasses`` modules alike: a library's API name
                static_call = (scope is not None and m.resolve(value.func, scope) in _STATIC_FIELD_CALLS) or (
                    _called_name(value.func) == "static_field")
                if static_call or any(
                        (kw.arg == "pytree_node" and isinstance(kw.value, ast.Constant) and kw.value.value is False)
                        or (kw.arg == "static" and isinstance(kw.value, ast.Constant) and kw.value.value is True)
                        for kw in value.keywords):
                    targets = [stmt.target] if isinstance(stmt, ast.AnnAssign) else stmt.targets
                    out |= {t.id for t in targets if isinstance(t, ast.Name)}
            if bases & _NNX_MODULES and "__init__" in cls.methods:
                out |= _nnx_static_attrs(cls.methods["__init__"])
            if _registered(m, cls) == "static":  # jax.tree_util.register_static: the whole object is aux data
                out |= _declared_fields(cls)
        for cls, meta in _registered_dataclasses(m):
            out |= meta
        found = m.facts.static_fields = frozenset(out)
    return found


# Annotations that declare a field an array (a pytree leaf that is a tracer in traced code).
_ARRAY_ANNOTATIONS = frozenset({"jax.Array", "jax.numpy.ndarray", "jax.numpy.DeviceArray", "chex.Array",
                                "chex.ArrayDevice", "jax.typing.ArrayLike"})
_JAXTYPING = "jaxtyping."


def array_fields(m) -> frozenset:
    """Attributes this module's classes declare pytree leaves, and no class of the module declares
    static: annotated as arrays (``x: jax.Array``, ``w: jnp.ndarray``, ``v: chex.Array``, ``y:
    Float[Array, "n"]``), or scalar fields (``step: int``, ``t: jnp.int32``) of a class registered as
    a pytree dataclass (a ``flax.struct.PyTreeNode``, ``@flax.struct.dataclass``,
    ``@chex.dataclass``), and the data fields of ``jax.tree_util.register_dataclass``. Read off a
    traced argument, such a field is a leaf: a tracer, whatever Python value was put there. A field
    annotated as a container, an optional or another class is a subtree, not known to be a leaf."""
    found = m.facts.array_fields
    if found is None:
        out: set = set()
        for cls in m.classes.values():
            scope = cls.scope
            if scope is None:
                continue
            dataclass = _registered(m, cls) == "dataclass"  # a field not declared static is a leaf or a subtree
            for stmt in cls.node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and (
                        _array_annotation(m, stmt.annotation, scope)
                        or (dataclass and _scalar_annotation(m, stmt.annotation, scope))):
                    out.add(stmt.target.id)
        for cls, meta in _registered_dataclasses(m):
            out |= _declared_fields(cls) - meta
        found = m.facts.array_fields = frozenset(out - static_fields(m))
    return found


# Pytree dataclasses: every field is a leaf unless declared static (JAX's and the libraries' API).
_DATACLASS_BASES = frozenset({"flax.struct.PyTreeNode"})
_DATACLASS_DECORATORS = frozenset({"flax.struct.dataclass", "chex.dataclass", "jax.tree_util.register_dataclass"})
_STATIC_DECORATORS = frozenset({"jax.tree_util.register_static"})


def _registered(m, cls) -> str:
    """"dataclass" for a pytree dataclass (its fields are leaves unless declared static), "static"
    for a class registered with ``jax.tree_util.register_static`` (decorator or call), else ""."""
    scope = cls.scope
    if scope is None:
        return ""
    for dec in cls.node.decorator_list:
        qn = m.resolve(dec.func if isinstance(dec, ast.Call) else dec, scope.parent or scope)
        if qn in _STATIC_DECORATORS:
            return "static"
        if qn in _DATACLASS_DECORATORS and not (isinstance(dec, ast.Call) and dec.args):
            return "dataclass"
    if any(m.resolve(b, scope.parent or scope) in _DATACLASS_BASES for b in cls.node.bases):
        return "dataclass"
    for call in m.calls_by_name.get("register_static", ()):
        if call.args and isinstance(call.args[0], ast.Name) and call.args[0].id == cls.node.name and \
                m.resolve(call.func, m.scope_at(call)) in _STATIC_DECORATORS:
            return "static"
    return ""


def _registered_dataclasses(m) -> list:
    """``(class, meta field names)`` for each ``jax.tree_util.register_dataclass(C, data_fields=...,
    meta_fields=[...])`` call on a class of this module (literal field lists)."""
    out = []
    by_name = {c.node.name: c for c in m.classes.values()}
    for call in m.calls_by_name.get("register_dataclass", ()):
        if not call.args or not isinstance(call.args[0], ast.Name) or call.args[0].id not in by_name:
            continue
        if m.resolve(call.func, m.scope_at(call)) != "jax.tree_util.register_dataclass":
            continue
        meta = next((kw.value for kw in call.keywords if kw.arg == "meta_fields"), None)
        if meta is None and len(call.args) >= 3:
            meta = call.args[2]
        names = {e.value for e in getattr(meta, "elts", ()) if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        out.append((by_name[call.args[0].id], frozenset(names)))
    return out


def _declared_fields(cls) -> set:
    """The fields a class body declares (``x: int``, ``x = ...``) and what ``__init__`` sets on ``self``."""
    out = {stmt.target.id for stmt in cls.node.body if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)}
    out |= {t.id for stmt in cls.node.body if isinstance(stmt, ast.Assign) for t in stmt.targets if isinstance(t, ast.Name)}
    out |= set(cls.self_attrs)
    return out


def _scalar_annotation(m, ann: ast.AST, scope) -> bool:
    """``int``, ``float``, ``bool``, ``complex`` or a JAX/NumPy scalar type (``jnp.int32``): a field of
    a pytree dataclass so annotated is one leaf (not a container, an object or None)."""
    qn = m.resolve(ann, scope)
    if qn in ("builtins.int", "builtins.float", "builtins.bool", "builtins.complex"):
        return True
    return qn is not None and qn.startswith(("jax.numpy.", "numpy.")) and qn.rsplit(".", 1)[-1] in _SCALAR_TYPES


_SCALAR_TYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                           "float32", "float64", "bfloat16", "complex64", "complex128", "bool_"})


def _array_annotation(m, ann: ast.AST, scope) -> bool:
    if isinstance(ann, ast.Subscript):  # jaxtyping's Float[Array, "b n"]
        qn = m.resolve(ann.value, scope)
        return qn is not None and qn.startswith(_JAXTYPING)
    qn = m.resolve(ann, scope)
    return qn in _ARRAY_ANNOTATIONS


def _called_name(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _nnx_static_attrs(init: FunctionInfo) -> set:
    """``self.n = n`` / ``self.n = 4`` / ``self.d = n * k`` in an ``nnx.Module``'s ``__init__``:
    attributes set from its parameters and constants by arithmetic alone (no call: ``nnx.Param``,
    ``nnx.Linear(...)`` and ``jnp`` arrays are state)."""
    params = set(init.params) | set(init.kwonly)
    out = set()
    for stmt in walk(init.node):
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            continue
        t = stmt.targets[0]
        if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"):
            continue
        names = [n for n in walk(stmt.value) if isinstance(n, ast.Name)]
        plain = all(isinstance(n, (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop,
                                   ast.expr_context)) for n in walk(stmt.value))
        if plain and all(n.id in params for n in names) and "self" not in {n.id for n in names}:
            out.add(t.attr)
    return out
