"""Pipelining: a sync on a value an earlier iteration made, after this iteration queued its step.

``loss_prev = None; for b in batches: state, loss = step(state, b); if loss_prev is not None:
print(float(loss_prev)); loss_prev = loss`` fetches step N-1's loss after step N is dispatched: the
host waits for step N-1 while step N is still queued, so the device never idles. The same holds
for blocking on step N-k's output to bound the number of steps in flight
(``outs[i - 2].block_until_ready()``). Such a sync lags the queue; it is not a stall.

A component of the model: functions of the model, not a mixin.
"""

from __future__ import annotations

import ast
from typing import Optional

from . import callables
from . import values as V
from .periodicity import loop_counters
from ..python.records import Loop
from ..python.syntax import walk

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _top_index(body: list, node: ast.AST) -> Optional[int]:
    """The index of the statement of ``body`` that contains ``node`` (by position)."""
    pos = (node.lineno, node.col_offset)
    for i, stmt in enumerate(body):
        end = (stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)
        if (stmt.lineno, stmt.col_offset) <= pos <= end:
            return i
    return None


def _stores(stmt: ast.AST) -> set:
    out = set()
    todo = [stmt]
    while todo:
        n = todo.pop()
        if isinstance(n, _NESTED):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        todo.extend(ast.iter_child_nodes(n))
    return out


def _lag_index(sub: ast.Subscript, counters: set) -> bool:
    """``outs[i - 2]`` (a counter of the loop minus a positive literal) or ``outs[-2]`` (an
    earlier item than the one the iteration appended)."""
    idx = sub.slice
    if isinstance(idx, ast.BinOp) and isinstance(idx.op, ast.Sub) and isinstance(idx.right, ast.Constant):
        k = idx.right.value
        return (isinstance(k, int) and not isinstance(k, bool) and k >= 1
                and isinstance(idx.left, ast.Name) and idx.left.id in counters)
    if isinstance(idx, ast.UnaryOp) and isinstance(idx.op, ast.USub) and isinstance(idx.operand, ast.Constant):
        k = idx.operand.value
        return isinstance(k, int) and not isinstance(k, bool) and k >= 2
    return False


def lagged_sync(model, node: ast.AST, loop: Loop) -> bool:
    """Whether the sync ``node`` in ``loop`` reads only values of earlier iterations, after the
    current iteration has queued compiled work: every JAX value it reads is a name the loop body
    binds only after the sync's statement (so it holds the previous iteration's value), or an item
    of a list indexed back from the current one (``outs[i - 2]``, ``outs[-2]``)."""
    body = getattr(loop.node, "body", None)
    if not isinstance(body, list):
        return False
    at = _top_index(body, node)
    if at is None:
        return False
    scope = model.scope_at(node)
    queued = any(callables.callable_info(model, c.func, model.scope_at(c)) is not None
                 for stmt in body[:at] for c in walk(stmt) if isinstance(c, ast.Call))
    if not queued:
        return False
    later: set = set()
    for stmt in body[at + 1:]:
        later |= _stores(stmt)
    before: set = set()
    for stmt in body[:at + 1]:
        before |= _stores(stmt)
    counters = None
    lagged = 0
    skip: set = set()
    for n in walk(node):
        if id(n) in skip:
            continue
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load):
            if counters is None:
                counters = loop_counters(loop)
            if _lag_index(n, counters):
                lagged += 1
                skip.update(id(x) for x in walk(n))
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            if n.id in later and n.id not in before:
                lagged += 1  # bound only after the sync: the previous iteration's value
            elif V.is_jax(model, n, scope):
                return False  # a value of this iteration (or loop-invariant) is read too
    return lagged > 0
