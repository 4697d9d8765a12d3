"""Arms of an ``if`` that never run: its test is a constant (``if False:``), or a bare name every binding
of which in its scope is a constant of one truth value (``show_output = True`` just above ``if show_output:``).
Python semantics only; asked by :mod:`.certainraise`, whose lines that never run the engine makes opt-in."""

from __future__ import annotations

import ast
from typing import Optional


def dead_arm(m, s: ast.If, line: int, dynamic) -> Optional[str]:
    """Why the arm of ``if`` statement ``s`` that holds ``line`` never runs: its test is a constant
    (``if False:``), or a bare name (``if show_output:``, ``if not debug:``) that every binding in its
    scope binds to a constant of one truth value (``show_output = True``; not a parameter, an import,
    a loop target, a name some function declares ``global``, nor in a module that may bind names out
    of sight). None otherwise (fresh AR: an ``else`` of a flag set to ``True`` just above it)."""
    in_body = bool(s.body) and s.body[0].lineno <= line <= (s.body[-1].end_lineno or s.body[-1].lineno)
    in_else = bool(s.orelse) and s.orelse[0].lineno <= line <= (s.orelse[-1].end_lineno or s.orelse[-1].lineno)
    if not (in_body or in_else):
        return None
    test, negate = s.test, False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negate = test.operand, True
    if isinstance(test, ast.Constant):
        value, how = bool(test.value), f"`{ast.unparse(s.test)}` is a constant"
    elif isinstance(test, ast.Name):
        found = _constant_name(m, test, dynamic)
        if found is None:
            return None
        value, bound = found
        how = f"`{test.id}` is only ever bound to `{bound}`"
    else:
        return None
    value = value != negate
    if value and in_else:
        return f"the test on line {s.lineno} is always true ({how}): its `else` never runs"
    if not value and in_body:
        return f"the test on line {s.lineno} is always false ({how}): its body never runs"
    return None

def _constant_name(m, name: ast.Name, dynamic) -> Optional[tuple]:
    """``(truth, spelled)`` when every binding of ``name`` in the scope it is read from is an
    assignment of a constant of one truth value; None otherwise."""
    if dynamic():
        return None
    scope = m.scope_at(name)
    while scope is not None and (scope.kind == "class" or name.id not in scope.events):
        if scope.kind == "function" and (name.id in scope.globals or name.id in getattr(scope, "nonlocals", ())):
            scope = m.module_scope
            continue
        scope = scope.parent
    if scope is None:
        return None
    if scope.kind == "module" and any(name.id in s.globals for s in m.scopes if s.kind == "function"):
        return None  # a function may rebind it
    truths, spelled = set(), None
    for ev in scope.events.get(name.id, ()):
        value = getattr(ev, "value", None)
        if ev.kind != "assign" or not ev.plain_assign or not isinstance(value, ast.Constant) \
                or not isinstance(getattr(ev, "node", None), ast.Name):
            return None
        truths.add(bool(value.value))
        spelled = ast.unparse(value)
    return (truths.pop(), spelled) if len(truths) == 1 else None
