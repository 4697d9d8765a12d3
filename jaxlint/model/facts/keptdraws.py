"""Draws a loop keeps side by side: ``params[name] = normal(key, shape)`` over layer names, a
comprehension of draws, ``ws.append(normal(key, s))``. With a key the loop does not change, the
kept values are equal (several layers with the same weights), which JAX502 reports even in a loop
that is not a step loop. Functions of the model (``m``), asked by jaxlint_rules/rng.py.
"""

from __future__ import annotations

import ast

from .keys import _key_names
from ..python.syntax import walk


def kept_per_iteration(m, call: ast.Call, loop) -> bool:
    """Whether each iteration of ``loop`` keeps what ``call`` returns beside the others: the
    call (under arithmetic, ``.astype``/``.reshape``-style methods) is the value stored into an
    item named by the loop variable (``params[name] = normal(key, s) * 0.02``, a dict entry
    ``{name: crop(x, key)}``), appended (``ws.append(normal(key, s))``), or the element of the
    comprehension ``loop`` is. Then the results live side by side, and a key that does not change
    makes them equal (several layers with the same weights, even over a few literal names)."""
    node, targets = loop.node, loop.target_names()
    if isinstance(node, _COMPREHENSIONS):
        return any(_carries(e, call) for e in ([node.value] if isinstance(node, ast.DictComp) else [node.elt]))
    ctx = m.context(call)
    if ctx is None or ctx.scope.kind == "class":
        return False
    stmt = _key_names(m, ctx.scope).statement(call)
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None and _carries(stmt.value, call):
        ts = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if any(isinstance(t, ast.Subscript) and any(
                isinstance(n, ast.Name) and n.id in targets for n in walk(t.slice)) for t in ts):
            return True
    f = stmt.value.func if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
    if isinstance(f, ast.Attribute) and f.attr in ("append", "insert", "add"):
        return any(_carries(a, call) for a in stmt.value.args)
    return stmt is not None and any(isinstance(d, ast.Dict) and any(
        isinstance(k, ast.Name) and k.id in targets and _carries(v, call) for k, v in zip(d.keys, d.values))
        for d in walk(stmt))


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_KEEPS_VALUES = frozenset({"astype", "reshape", "T", "squeeze", "ravel", "flatten"})


def _carries(expr: ast.AST, call: ast.Call) -> bool:
    """Whether ``expr`` is ``call`` or arithmetic on it (``normal(k, s) * 0.02 + b``,
    ``normal(k, s).astype(dt)``), so that equal calls give equal values."""
    for _ in range(16):
        if expr is call:
            return True
        if isinstance(expr, ast.BinOp):
            if _carries(expr.left, call):
                return True
            expr = expr.right
        elif isinstance(expr, ast.UnaryOp):
            expr = expr.operand
        elif (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
              and expr.func.attr in _KEEPS_VALUES):
            expr = expr.func.value
        else:
            return False
    return False
