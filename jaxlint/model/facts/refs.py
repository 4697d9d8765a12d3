"""Pallas and state refs: mutable views of a kernel's inputs and outputs, where ``o_ref[i] = v``
and ``o_ref.at[i].set(v)`` are writes, not pitfalls (JAX401, JAX403). A parameter of a kernel this
module hands to ``pallas_call`` is a ref (a fact); elsewhere a receiver named like one (the
conventions' ``ref-names``) is taken for one.

Functions of the model (``m``), imported explicitly.
"""

from __future__ import annotations

import ast

from ... import names as N
from . import callables, frequency
from . import values as V
from .proof import Fact, disproven, proven, unknown
from ..python.records import Scope
from ..python.syntax import _pos, unparse

# Transforms that run the function on whatever its caller passes (arrays, Pallas refs, objects):
# they say nothing of what a parameter holds.
PASS_THROUGH = frozenset({"jax.named_call"})


def _last_name(e: ast.AST) -> str:
    """The most specific name in a receiver: ``o_ref`` in ``o_ref``, ``self.o_ref``, ``o_refs[0]``."""
    while isinstance(e, (ast.Subscript, ast.Call)):
        e = e.value if isinstance(e, ast.Subscript) else e.func
    if isinstance(e, ast.Attribute):
        return e.attr
    return e.id if isinstance(e, ast.Name) else ""


def looks_like_ref(m, receiver: ast.AST, scope: Scope) -> bool:
    """Pallas/state refs (``o_ref.at[i].set(v)``) are mutable: there the statement is the write.
    A parameter of a kernel this module hands to ``pallas_call`` is a ref (a fact); elsewhere a
    receiver named like one (the conventions' ``ref-names``) is taken for one."""
    if V.is_jax(m, receiver, scope):
        return False
    root = receiver
    while isinstance(root, (ast.Subscript, ast.Attribute)):
        root = root.value
    if isinstance(root, ast.Name):
        ev = m.binding(root.id, scope, (root.lineno, root.col_offset))
        if ev is not None and ev.kind == "param" and ev.scope.func is not None \
                and id(ev.scope.func) in pallas_kernels(m):
            return True
    return m.conventions.matches("ref-names", _last_name(receiver))


def pallas_kernels(m) -> set:
    """ids of the functions of this module handed to ``pallas_call`` as its kernel (directly,
    through a name or ``functools.partial``): their parameters are refs."""
    found = m.facts.pallas_kernels
    if found is None:
        found = m.facts.pallas_kernels = set()
        for call in m.calls_by_name.get("pallas_call", ()):
            scope = m.scope_at(call)
            if m.resolve(call.func, scope) not in N.PALLAS_CALLS:
                continue
            kernel = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "kernel"), None)
            if kernel is not None:
                found.update(id(f) for f in callables.local_functions(m, kernel, scope))
    return found


def immutable_array(m, target: ast.Subscript, scope: Scope) -> Fact:
    """Whether the base of an item assignment ``x[...] = v`` that the model takes for an array is a
    JAX array (immutable): *disproven* for a parameter of a kernel this module hands to
    ``pallas_call`` (a ref, written in place); *unknown* for a parameter of a function traced only
    by a pass-through transform (``jax.named_call``: a Pallas kernel is often wrapped so, and handed
    to ``pallas_call`` elsewhere) that no code of this module calls; *proven* otherwise."""
    base = target.value
    root = base
    while isinstance(root, (ast.Subscript, ast.Attribute)):
        root = root.value
    ev = m.binding(root.id, scope, _pos(root)) if isinstance(root, ast.Name) else None
    g = ev.scope.func if ev is not None and ev.kind == "param" else None
    if g is None:
        return proven("immutable-array", f"`{unparse(base, 30)}` is made by JAX operations")
    if id(g) in pallas_kernels(m):
        return disproven("immutable-array", f"`{root.id}` is a parameter of `{g.name}`, which this module hands to "
                                            "`pallas_call`: a ref, written in place")
    causes = g.trace_causes
    if causes and all(c.kind == "transform" and c.name in PASS_THROUGH for c in causes):
        if not frequency.callers(m, g):
            return unknown("immutable-array", f"`{root.id}` is a parameter of `{g.name}`, traced only under "
                                              f"{causes[0].name} and called nowhere in this module: it may be a Pallas "
                                              "or state ref, which is written in place")
    return proven("immutable-array", f"`{root.id}` is a traced argument of `{g.name}` used as an array")
