"""Static truth and constants in traced code: a Python value a traced function's test or argument
has on every call (a ``static_argnames`` flag, a ``functools.partial``-bound constant), so that a
branch on it is decided at trace time.

Functions of a :class:`~jaxlint.model.staging.Staging` (``st``), imported explicitly.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables
from ..python import limits as L
from ..python.records import FunctionInfo, Scope
from ..python.syntax import _pos


def static_truth(st, f: Optional[FunctionInfo], expr: ast.AST, scope: Scope) -> Optional[bool]:
    """The truth value ``expr`` has every time staged ``f`` is traced, when it is fixed: a
    literal, ``not`` of one, or a parameter every staged entry fixes to the same constant
    (``jax.jit(partial(f, flag=False))``, a caller passing a literal or leaving the default);
    None when it is not known."""
    if isinstance(expr, ast.Constant):
        return bool(expr.value)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        inner = static_truth(st, f, expr.operand, scope)
        return None if inner is None else not inner
    if not isinstance(expr, ast.Name):
        return None
    ev = st.m.binding(expr.id, scope, _pos(expr))
    if ev is None or ev.kind != "param" or ev.scope.func is None:
        return None
    value = static_constant(st, ev.scope.func, expr.id)
    return None if value is None else bool(value[0])


def static_constant(st, g: FunctionInfo, name: str) -> Optional[tuple]:
    """``(value,)`` when every staged entry of ``g`` fixes parameter ``name`` to the same
    literal: a ``functools.partial`` inside each jit that compiles it, or each staged caller
    passing that literal (or leaving a literal default). None when any entry may pass
    something else (a decorator jit, a transform, a lax body)."""
    m = st.m
    values = []
    for cause in g.trace_causes:
        if cause.kind == "caller":
            caller = cause.caller
            if caller is None:
                return None
            if not st.staged(caller):
                continue
            for call in caller.calls:
                if g not in callables.local_functions(m, call.func, caller.scope):
                    continue
                if any(isinstance(a, ast.Starred) for a in call.args) or any(
                        kw.arg is None for kw in call.keywords):
                    return None
                given = callables.passed_argument(g, call, name)
                if given is None:
                    given = g.default(name)  # left out: the default
                if not isinstance(given, ast.Constant):
                    return None
                values.append(given.value)
        elif cause.kind == "jit":
            wraps = [w for w in m.jit_wraps if w.target is not None and not w.decorator
                     and g in callables.local_functions(m, w.target, m.scope_at(w.node))]
            if not wraps or any(w.func is g and w.decorator for w in m.jit_wraps):
                return None
            for w in wraps:
                fixed = _partial_constant(st, w.target, m.scope_at(w.node), g, name, 0)
                if fixed is None:
                    return None
                values.append(fixed[0])
        else:
            return None
    if not values or any(v != values[0] or type(v) is not type(values[0]) for v in values):
        return None
    return (values[0],)


def _partial_constant(st, expr: ast.AST, scope: Scope, g: FunctionInfo, name: str,
                      depth: int) -> Optional[tuple]:
    """``(value,)`` when the callable ``expr`` (a jit's target) is a ``functools.partial`` of
    ``g`` that binds ``name`` to a literal."""
    m = st.m
    if depth > L.PARTIAL_CHAIN:
        return None
    if isinstance(expr, ast.Name):
        ev = m.binding(expr.id, scope, _pos(expr))
        if ev is None or not ev.plain_assign:
            return None
        return _partial_constant(st, ev.value, ev.scope, g, name, depth + 1)
    if not isinstance(expr, ast.Call) or not expr.args:
        return None
    qn = m.resolve(expr.func, scope)
    if qn == N.PARTIAL:
        for kw in expr.keywords:
            if kw.arg == name:
                return (kw.value.value,) if isinstance(kw.value, ast.Constant) else None
        if any(isinstance(a, ast.Starred) for a in expr.args):
            return None
        inner = expr.args[0]
        params = g.params[1:] if g.is_method and isinstance(inner, ast.Attribute) else g.params
        for i, a in enumerate(expr.args[1:]):
            if i < len(params) and params[i] == name:
                return (a.value,) if isinstance(a, ast.Constant) else None
        return _partial_constant(st, inner, scope, g, name, depth + 1)
    if qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS:
        return _partial_constant(st, expr.args[0], scope, g, name, depth + 1)
    return None
