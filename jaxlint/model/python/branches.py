"""The arms of ``if`` statements a node sits in, by the bare names they test (``if shuffle:``,
``if not deterministic:``): what a call's literal argument for that name switches on or off. Python
semantics only (the model's recorded branches of each node's context)."""

from __future__ import annotations

import ast

from .syntax import walk


def name_branches(m, fn: ast.AST, node: ast.AST) -> list:
    """``[(name, branch, negated)]`` for each ``if P:`` / ``if not P:`` of the function ``fn``
    (its node) around ``node`` whose test is a bare name: the branch ``node`` is in (0: the body,
    1: ``else``) and whether the test is negated."""
    ctx = m.context(node)
    if ctx is None or not ctx.branches:
        return []
    ifs = {id(n): n for n in walk(fn) if isinstance(n, ast.If)}
    out = []
    for if_id, branch in ctx.branches:
        n = ifs.get(if_id)
        if n is None:
            continue
        test, negate = n.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negate = test.operand, True
        if isinstance(test, ast.Name):
            out.append((test.id, branch, negate))
    return out
