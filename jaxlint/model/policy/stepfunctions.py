"""Syncs inside a function that a step loop calls at every iteration: ``train_step(params, batch)``
called in the loop, whose body runs the jitted update and then ``float(loss)``, ``print(loss)`` or
``self.losses.append(float(loss))``. Written in the loop, JAX201 would report it; behind one call it
is the same sync at every step (fresh U's DQN agent, ``agent.train_step()`` at every environment
step; the issue's "syncs behind helpers").

A sync counts where all of these are shown:

* the function is not traced, not test code, and runs at every iteration of a step loop of this
  module, by the call graph only (:func:`.frequency.repeats` of kind ``loop``, or ``caller`` down to
  one): the loop's role at the call site is per step (:func:`.roles.sync_role`: no periodic guard,
  no whole program per iteration);
* the sync is in the function's own body, in no loop of it and under no ``if`` (it runs at every
  call), and it is a host fetch or a format of a JAX value made in the function (not a parameter:
  a value the caller passes is the caller-side helper rule's, :mod:`.helpersyncs`);
* nothing needs the value on the host: the sync is a statement of its own (``print(...)``,
  ``losses.append(float(loss))``, ``logger.info(...)``), or a ``return`` whose value every call in
  a loop drops (``agent.train_step()`` as a statement); a value the caller keeps may be what the
  host needs (an action for the environment);
* no earlier sync of the function read the same values (the same bindings): a JAX array keeps its
  host copy, so ``return float(loss)`` after ``losses.append(float(loss))`` waits for nothing (fresh
  U's review: judged FALSE).

Asked by JAX201 (jaxlint_rules/host_transfer.py). Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from ..facts import fetches
from ..facts import frequency as F
from ..python.syntax import last_name
from . import roles, transfers


class StepFunctionSync:
    """``node`` (a fetch or format call) in ``func``, which the loop of ``role`` calls at every step
    through ``site`` (the call of ``func``, or of the function that calls it); ``what``, ``kind``: the
    sync in words and its kind (``fetch`` or ``format``)."""

    __slots__ = ("node", "func", "role", "site", "what", "kind")

    def __init__(self, node, func, role, site, what, kind):
        self.node, self.func, self.role, self.site, self.what, self.kind = node, func, role, site, what, kind


def step_function_syncs(m) -> Iterator[StepFunctionSync]:
    for f in m.functions:
        if isinstance(f.node, ast.Lambda) or f.traced or not f.calls:
            continue
        syncs = [c for c in f.calls if _candidate(m, f, c)]
        if not syncs:
            continue
        found = _loop_site(m, f)
        if found is None:
            continue
        role, site, calls = found
        fetched: set = set()  # (name, binding) of values an earlier sync of the function already waited for
        for call in sorted(syncs, key=lambda c: (c.lineno, c.col_offset)):
            placed = _placed(m, f, call, calls)
            if placed is None:
                continue
            operand = fetches.host_fetch(m, call)
            what = transfers.fetch_spelling(m, call, operand) if operand is not None else None
            kind = "fetch"
            if what is None:
                if last_name(call.func) not in fetches.FETCH_OR_FORMAT_NAMES or not fetches.formats_jax_call(m, call):
                    continue
                what, kind = f"`{last_name(call.func)}(...)` of a JAX value", "format"
                operand = next((a for a in call.args), None)
            if operand is None or not _made_here(m, f, operand):
                continue
            read = {(n.id, id(m.binding(n.id, f.scope, (n.lineno, n.col_offset)))) for n in ast.walk(operand)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            if read <= fetched:
                continue  # ``return float(loss)`` after ``losses.append(float(loss))``: its host copy is there
            fetched |= read
            if m.in_test_code(call):
                continue
            yield StepFunctionSync(call, f, role, site, what, kind)


def _candidate(m, f, call: ast.Call) -> bool:
    ctx = m.context(call)
    return ctx is not None and not ctx.loops and not ctx.guards and not ctx.branches and fetches.may_sync(m, call)


def _loop_site(m, f) -> Optional[tuple]:
    """``(role, site, calls)``: the per-step role of the loop that calls ``f`` (directly or through
    functions that each call the next once), the call in that loop, and the calls of ``f`` itself in
    the chain; None when the call graph shows no such loop."""
    rep = F.repeats(m, f)
    own = []
    while rep is not None and rep.kind == "caller" and rep.inner is not None:
        if rep.call is not None and not own:
            own.append(rep.call)
        ctx = m.context(rep.call) if rep.call is not None else None
        if ctx is None or ctx.loops or ctx.guards or ctx.branches:
            return None  # a call in a loop or under an ``if`` of the caller: not once per step
        rep = rep.inner
    if rep is None or rep.kind != "loop" or rep.call is None:
        return None
    role = roles.sync_role(m, m.context(rep.call))
    if role.kind != roles.PER_STEP:
        return None
    return role, rep.call, own or [rep.call]


def _placed(m, f, call: ast.Call, calls: list) -> Optional[ast.stmt]:
    """The statement of ``f``'s body the sync is, when its value is dropped: an expression statement,
    or a ``return`` whose value each call of ``f`` in ``calls`` drops."""
    for stmt in f.node.body:
        if not any(n is call for n in ast.walk(stmt)):
            continue
        if isinstance(stmt, ast.Expr):
            return stmt
        if isinstance(stmt, ast.Return) and all(_dropped(m, c) for c in calls):
            return stmt
        return None
    return None


def _dropped(m, call: ast.AST) -> bool:
    stmt = m.stmt_of.get(id(call))
    return isinstance(stmt, ast.Expr) and stmt.value is call


def _made_here(m, f, operand: ast.AST) -> bool:
    """The synced value is made in ``f`` by a call (``loss = update(params, batch)``): not a
    parameter of it, nor an item or attribute of one (``metrics["loss"]``)."""
    names = {n.id for n in ast.walk(operand) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    params = set(f.params) | set(f.kwonly)
    if not names or names & params:
        return False
    for name in names:
        evs = f.scope.events.get(name, ())
        if not evs:
            return False
        for ev in evs:
            value = ev.value if ev.kind == "assign" else None
            while isinstance(value, (ast.Subscript, ast.Attribute)):
                value = value.value
            if not isinstance(value, ast.Call):
                return False
    return True
