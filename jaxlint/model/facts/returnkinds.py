"""What the module's top-level functions return, for other modules (module summaries,
facts/summary.py): the functions that certainly return one JAX array, judged from their
``return`` statements alone so that it holds in a shallow model too.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables
from ..python import limits as L
from ..python.records import Scope
from .hostvalues import _internal
from .values import _CONSTANT_FOLDING_COLLECTIVES, _none_comparison, _returned


def array_results(m, names=None) -> frozenset:
    """The top-level functions of this module (of ``names`` only, when given) that certainly
    return one JAX array, judged
    from their ``return`` statements alone, so that it holds in a shallow model too (whose
    function bodies were not walked): every ``return`` gives a ``jax.numpy``/``jax.random``/
    ``jax.lax``/``jax.nn`` call (or arithmetic, a comparison, indexing, ``.T`` or an array
    method on one), a call of a compiled callable, or a call of another such function. At
    least one ``return``, no bare ``return`` or ``yield``, no decorator, bound once at module
    level. A tuple of arrays does not count: its truth is its length, not a sync."""
    memo = m.facts.array_results
    asked = m.module_scope.events if names is None else names
    return frozenset(n for n in asked if _def_returns_array(m, n, memo))


def _def_returns_array(m, name: str, memo: dict) -> bool:
    if name in memo:
        return bool(memo[name])
    memo[name] = False  # cycle guard: mutual recursion is not certain
    evs = m.module_scope.events.get(name, ())
    if len(evs) != 1 or evs[0].kind != "def":
        return False
    node = evs[0].node
    if not isinstance(node, ast.FunctionDef) or node.decorator_list:
        return False
    found = _returned(node)
    if found is None:
        return False
    returns, local = found
    result = bool(returns) and all(_certain_array(m, r, local, memo, 0) for r in returns)
    memo[name] = result
    return result


def _certain_array(m, e: ast.AST, local: set, memo: dict, depth: int) -> bool:
    """Whether a returned expression is certainly one JAX array whatever the function is
    given (``local``: the names the function binds, which hide the module's)."""
    if depth > L.ARRAY_CHAIN or not m.work.spend():
        return False
    t = type(e)
    if t is ast.Call:
        func = e.func
        root = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            if root.id in local:
                return False
            qn = m.resolve(func, m.module_scope)
            if qn is not None and qn not in _CONSTANT_FOLDING_COLLECTIVES and N.produces_array(qn) \
                    and not _internal(qn):
                return True
            if callables.callable_info(m, func, m.module_scope) is not None:
                return True
            return isinstance(func, ast.Name) and _def_returns_array(m, func.id, memo)
        if isinstance(func, ast.Attribute):
            # jnp.sum(x).astype(y), jnp.stack(xs).reshape(n, -1)
            return func.attr not in N.HOST_METHODS and func.attr not in N.NON_ARRAY_METHODS and \
                _certain_array(m, func.value, local, memo, depth + 1)
        return False
    if t is ast.BinOp:
        if isinstance(e.op, ast.Mod) and isinstance(e.left, (ast.Constant, ast.JoinedStr)):
            return False
        return _certain_array(m, e.left, local, memo, depth + 1) or \
            _certain_array(m, e.right, local, memo, depth + 1)
    if t is ast.UnaryOp:
        return not isinstance(e.op, ast.Not) and _certain_array(m, e.operand, local, memo, depth + 1)
    if t is ast.Compare:
        if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in e.ops):
            return False
        if _none_comparison(e):
            return False
        return any(_certain_array(m, x, local, memo, depth + 1) for x in [e.left, *e.comparators])
    if t is ast.Subscript:
        return _certain_array(m, e.value, local, memo, depth + 1)
    if t is ast.Attribute:
        return e.attr not in N.METADATA_ATTRS and _certain_array(m, e.value, local, memo, depth + 1)
    if t is ast.IfExp:
        return _certain_array(m, e.body, local, memo, depth + 1) and \
            _certain_array(m, e.orelse, local, memo, depth + 1)
    return False


def returned_elements(m, func: ast.AST, scope: Scope, index: Optional[int]) -> Optional[list]:
    """``(function, expression)`` of what every ``return`` of each function of this module that
    calling ``func`` runs gives back (element ``index`` of the returned tuple, or the whole value
    when ``index`` is None); None when there is no such function, one returns nothing, or a
    ``return`` is not a tuple with that element (``history, losses = run(x)``)."""
    funcs = callables.local_functions(m, func, scope)
    if not funcs:
        return None
    out = []
    for f in funcs:
        if not f.returns:
            return None
        for r in f.returns:
            if index is None:
                out.append((f, r))
                continue
            if not isinstance(r, (ast.Tuple, ast.List)) or index >= len(r.elts) or any(
                    isinstance(e, ast.Starred) for e in r.elts):
                return None
            out.append((f, r.elts[index]))
    return out
