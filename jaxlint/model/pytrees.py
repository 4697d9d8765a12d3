"""Static pytree fields: attributes a module's classes declare static rather than pytree leaves,
read in traced code as Python values, not tracers (``flax.struct.field(pytree_node=False)``,
``struct.static_field()``, ``eqx.field(static=True)``, a ``flax.linen`` module's fields, what an
``nnx.Module`` sets in ``__init__`` from its arguments). JAX's and the libraries' API, as data.

A function of the model (``m``), memoized on it, imported explicitly.
"""

from __future__ import annotations

import ast

from .records import FunctionInfo
from .syntax import walk

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
    found = m.__dict__.get("_static_fields")
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
                static_call = scope is not None and m.resolve(value.func, scope) in _STATIC_FIELD_CALLS
                if static_call or any(
                        (kw.arg == "pytree_node" and isinstance(kw.value, ast.Constant) and kw.value.value is False)
                        or (kw.arg == "static" and isinstance(kw.value, ast.Constant) and kw.value.value is True)
                        for kw in value.keywords):
                    targets = [stmt.target] if isinstance(stmt, ast.AnnAssign) else stmt.targets
                    out |= {t.id for t in targets if isinstance(t, ast.Name)}
            if bases & _NNX_MODULES and "__init__" in cls.methods:
                out |= _nnx_static_attrs(cls.methods["__init__"])
        found = m._static_fields = frozenset(out)
    return found


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
