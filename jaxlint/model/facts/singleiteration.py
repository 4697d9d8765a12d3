"""Work that one iteration of a loop does and the others do not: a node under ``if i == k:`` where
``i`` is the loop's own counter or element and takes a different value in each iteration
(``for n in [0, 1]: if n == 1: y = dropout(y, key)``; ``for step in range(steps): if step ==
0: ...``). Such a node runs at most once per run of the loop, so a key it uses is used once, not
once per iteration (JAX502).

The loop's values are proven distinct only for ``range(...)`` (and ``enumerate``'s count, and
``reversed(range(...))``) and for a literal list or tuple of distinct constants; the other side of
the ``==`` must be the same in every iteration (it reads no name the loop changes).
"""

from __future__ import annotations

import ast
from typing import Optional

from ..python.records import Context, Loop
from .loops import loop_iterable, range_call, varying_names


def distinct_targets(m, loop: Loop, scope) -> set:
    """The names of ``loop``'s target that take a different value in each iteration."""
    node = loop.node
    if not isinstance(node, (ast.For, ast.AsyncFor)):
        return set()
    it = loop_iterable(node)
    target = node.target
    if isinstance(it, ast.Call) and m.resolve(it.func, scope) == "builtins.enumerate":
        if isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name):
            return {target.elts[0].id}
        return set()
    if not isinstance(target, ast.Name):
        return set()
    if isinstance(it, (ast.List, ast.Tuple)):
        values = [e.value for e in it.elts if isinstance(e, ast.Constant)]
        if len(values) == len(it.elts) and len(set(map(repr, values))) == len(values):
            return {target.id}
        return set()
    # ``range(...)``, ``reversed(range(...))`` (``range_call`` sees through ``reversed``)
    return {target.id} if range_call(m, it, scope) is not None else set()


def single_iteration_guard(m, ctx: Optional[Context], loop: Loop) -> Optional[ast.Compare]:
    """The ``i == k`` test of an ``if`` inside ``loop`` around a node with this context, where
    ``i`` takes a different value each iteration and ``k`` the same: the node runs in one iteration
    at most. None when there is none."""
    if ctx is None or loop not in ctx.loops:
        return None
    depth = ctx.loops.index(loop) + 1
    names = None
    for test, nloops in ctx.guards:
        if nloops < depth:
            continue  # an ``if`` outside the loop
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        for part in parts:
            if not (isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.ops[0], ast.Eq)):
                continue
            if names is None:
                names = distinct_targets(m, loop, ctx.scope)
                if not names:
                    return None
                varying = varying_names(loop) | loop.target_names()
            left, right = part.left, part.comparators[0]
            for mine, other in ((left, right), (right, left)):
                if isinstance(mine, ast.Name) and mine.id in names and not any(
                        isinstance(n, ast.Name) and n.id in varying for n in ast.walk(other)):
                    return part
    return None
