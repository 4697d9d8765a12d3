"""Parts of a donated container that the step loop puts in again: JAX803's donation advice must not delete them.

A step given a container built afresh in every iteration (``runner_state = (x, y, x_eval, y_eval, state, rng)``;
``runner_state, info = update(runner_state, task)``) rebinds the container's name from its results, so the
rebinding looks safe to donate; but donating the container deletes every array in it, and a part the loop does
not rebind (``x_eval``, made before the loop) goes into the next iteration's container already deleted: JAX
raises on the deleted buffer. Fresh AY's first look: the reviewer found the advice ``donate_argnums=(0,)`` would
delete the evaluation set an epoch loop passes again (four copies of one script).
"""

from __future__ import annotations

import ast
from typing import Optional

from . import values as V
from ..python.syntax import walk, walk_statements


def kept_part(m, names: set, loop_node: ast.AST, body: list) -> Optional[tuple]:
    """``(statement, name)``: an assignment in ``body`` of one of ``names`` (what the step would donate) to a
    tuple, list or dict display inside the loop ``loop_node`` with the plain name ``name`` among its parts, where
    no statement of the loop rebinds ``name`` and it is not known to hold only a Python constant; None when
    there is none."""
    rebound = _bound_in(loop_node)
    in_loop = {id(n) for n in walk_statements(getattr(loop_node, "body", []))}
    for stmt in walk_statements(body):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id in names and isinstance(stmt.value, (ast.Tuple, ast.List, ast.Dict))):
            continue
        if id(stmt) not in in_loop:
            continue
        parts = stmt.value.values if isinstance(stmt.value, ast.Dict) else stmt.value.elts
        scope = m.scope_at(stmt.value)
        for part in parts:
            if isinstance(part, ast.Name) and part.id not in names and part.id not in rebound \
                    and not _constant(m, part, scope):
                return stmt, part.id
    return None


def _bound_in(loop_node: ast.AST) -> set:
    """The names a statement of the loop (its header's target included) binds."""
    out = {n.id for n in walk(getattr(loop_node, "target", None) or ast.Pass())
           if isinstance(n, ast.Name)}
    for stmt in walk_statements(getattr(loop_node, "body", [])):
        for n in walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                out.add(n.id)
    return out


def _constant(m, name: ast.Name, scope) -> bool:
    """A name bound to a literal (a Python number, string, bool or None): nothing there to donate."""
    if V.const_int(m, name, scope) is not None:
        return True
    ev = m.binding(name.id, scope, (name.lineno, name.col_offset))
    return ev is not None and ev.plain_assign and isinstance(ev.value, ast.Constant)
