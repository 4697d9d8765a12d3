"""Guards that make a node run once per new key, not at every iteration: ``if key not in cache:``
around a store or a compile (a cache filled as keys come). Asked by JAX101 (a wrapper built once per
new key) and JAX601 (a store into a cache under such a test). Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from ..python.records import Loop


def membership_guarded(m, target: ast.Subscript) -> bool:
    """``if key not in cache: cache[key] = ...``: an ``if`` around the store tests membership in the
    container."""
    ctx = m.context(target)
    if ctx is None:
        return False
    name = target.value.id
    for test, _ in ctx.guards:
        for part in ([test] if not isinstance(test, ast.BoolOp) else test.values):
            if isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not):
                part = part.operand
            if (isinstance(part, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in part.ops)
                    and any(isinstance(c, ast.Name) and c.id == name for c in part.comparators)):
                return True
    return False


def new_key_guard(ctx, loop: Loop) -> Optional[ast.Compare]:
    """The ``if key not in cache:`` test inside ``loop`` around a node (its guards taken inside the
    loop): the node runs once per key not seen before, not at every iteration."""
    if ctx is None or loop not in ctx.loops:
        return None
    depth = ctx.loops.index(loop) + 1
    for test, nloops in ctx.guards:
        if nloops < depth:
            continue  # an ``if`` outside the loop
        for part in ([test] if not isinstance(test, ast.BoolOp) else test.values):
            if (isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.ops[0], ast.NotIn)
                    and isinstance(part.comparators[0], (ast.Name, ast.Attribute))):
                return part
    return None
