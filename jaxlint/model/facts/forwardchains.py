"""Eager forward chains: a model's forward pass (``forwards.model_forward``) run outside any trace in a
loop whose next input comes from its own output (``g = model.apply(v, z, t)``; ``z = step(z, g)``):
a sampler's reverse chain or a rollout, one sequential pass per step, every layer's operations
dispatched one by one. Its evaluation over independent batches is not a chain (measured on 20 sets:
such passes were one-shot evaluations or jitted by rebinding the method). Asked by JAX701.
Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from . import eagerwork
from .forwards import model_forward
from .work import work_memo
from ..python.syntax import walk


class EagerChain:
    """A forward pass run outside any trace in a loop whose next input comes from its output:
    ``call`` (the ``.apply``), ``what`` (how a message names it), ``carried`` (the input name the
    loop rebinds from the output), ``rebind`` (that assignment), ``loop`` and ``fact``."""

    __slots__ = ("call", "what", "carried", "rebind", "loop", "fact")

    def __init__(self, call, what, carried, rebind, loop, fact):
        self.call, self.what, self.carried, self.rebind, self.loop, self.fact = call, what, carried, rebind, loop, fact


def eager_chain(m, call: ast.Call) -> Optional[EagerChain]:
    """The :class:`EagerChain` of ``call`` (in a loop), else None: a model forward pass of
    :func:`model_forward`, not in traced code, whose method is never replaced by a jitted one
    (``net.apply = jax.jit(net.apply)``), with an argument ``z`` the innermost loop around it
    rebinds from the pass's result (``g = model.apply(v, z, t)``; ``z = step(z, g)``, through other
    names bound in the loop). Proven eager when every caller of its function runs outside any
    trace (``eagerwork.outside_trace``)."""
    ctx = m.context(call)
    if ctx is None or not ctx.loops or m.in_traced_code(call):
        return None
    scope = ctx.scope
    what = model_forward(m, call, scope)
    if what is None or _jitted_method(m, call.func):
        return None
    loop = ctx.loops[-1]
    inputs = {n.id for a in [*call.args[1:], *(k.value for k in call.keywords)] for n in walk(a)
              if isinstance(n, ast.Name)}
    stmt = _statement(loop, call)
    if stmt is None or not inputs:
        return None
    derived = {t.id for t in _targets(stmt)}  # names the output flows into, in the loop's order
    for later in _after(loop, stmt):
        if not isinstance(later, ast.Assign) or not any(isinstance(n, ast.Name) and n.id in derived
                                                         for n in walk(later.value)):
            continue
        names = {t.id for t in _targets(later)}
        carried = names & inputs
        if carried:
            fact = eagerwork.outside_trace(m, call)
            return EagerChain(call, what, sorted(carried)[0], later, loop, fact)
        derived |= names
    return None


def _jitted_method(m, func: ast.AST) -> bool:
    """``x.apply = jax.jit(x.apply)`` anywhere in the module: the name may run compiled."""
    memo = work_memo(m)
    if "assigned-attributes" not in memo:  # every attribute the module assigns, spelled, found once
        memo["assigned-attributes"] = {ast.unparse(t) for node in ast.walk(m.tree) if isinstance(node, ast.Assign)
                                       for t in node.targets if isinstance(t, ast.Attribute)}
    return ast.unparse(func) in memo["assigned-attributes"]


def _statement(loop, node: ast.AST) -> Optional[ast.stmt]:
    """The statement of the loop's own body (not nested) that holds ``node``: an assignment."""
    for stmt in getattr(loop.node, "body", ()):
        if isinstance(stmt, ast.Assign) and any(n is node for n in walk(stmt.value)):
            return stmt
    return None


def _after(loop, stmt: ast.stmt) -> list:
    body = list(loop.node.body)
    return body[body.index(stmt) + 1:]


def _targets(stmt: ast.Assign) -> list:
    return [n for t in stmt.targets for n in walk(t) if isinstance(n, ast.Name)]
