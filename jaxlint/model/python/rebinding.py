"""Rebinding facts: what turning a statement into ``name = ...`` would mean for the program.

A fix that rewrites ``x[i] = v`` into ``x = x.at[i].set(v)`` adds a binding of ``x``. That is only
the same program when ``x`` is already a local variable of the statement's scope (not global,
nonlocal or a closure variable, which the new binding would turn into an UnboundLocalError), and
only worth doing when the new value is seen: read after the statement, or anywhere in a loop
around it. The walk records which statement a target or an expression statement belongs to and
the loops of every scope; the names a scope binds (as the syntax shows them) and where a name is
read are worked out here, lazily, once per scope.

Functions of the model (``m``), not a mixin; the model's walk fills ``m.stmt_of``.
"""

from __future__ import annotations

import ast
from typing import Optional

from .records import Scope
from .syntax import child_nodes, walk

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _start(node: ast.AST) -> tuple:
    return (node.lineno, node.col_offset)


def _end(node: ast.AST) -> tuple:
    return (node.end_lineno, node.end_col_offset)


def _local_names(scope: ast.AST) -> tuple[set, set]:
    """(names bound in ``scope``'s own namespace, names it declares global/nonlocal), from the
    syntax. Under-approximates bindings (comprehension targets, walruses in nested defaults and
    lambdas are left out), so a name found here is certainly local."""
    bound: set = set()
    declared: set = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = scope.args
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
            if arg is not None:
                bound.add(arg.arg)
    stack = list(reversed(scope.body))
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            bound.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
            continue
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                bound.add(node.id)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name != "*":
                    bound.add(alias.asname or alias.name.split(".")[0])
            continue
        if isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
        if isinstance(node, _COMPREHENSIONS):
            # the loop targets are the comprehension's own; only walruses inside bind here
            for gen in node.generators:
                stack.append(gen.iter)
                stack.extend(gen.ifs)
            stack.extend([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt])
            continue
        stack.extend(child_nodes(node))
    return bound, declared


def statement_of(m, node: ast.AST) -> Optional[ast.stmt]:
    """The statement ``node`` is a whole target of (``node = v``, ``node op= v``, either target
    of ``a = node = v``) or the whole value of (``node`` as an expression statement)."""
    return m.stmt_of.get(id(node))


def statement_scope(m, stmt: ast.stmt) -> Optional[Scope]:
    """The scope a statement :func:`statement_of` returned runs in."""
    ctx = m.ctx.get(id(stmt))
    if ctx is None:  # statements in a ``match`` case: their target or value has a context
        if isinstance(stmt, ast.Assign):
            owned = stmt.targets
        else:
            owned = [stmt.target if isinstance(stmt, ast.AugAssign) else stmt.value]
        for node in owned:
            ctx = m.ctx.get(id(node))
            if ctx is not None:
                break
    return ctx.scope if ctx is not None else None


def outermost_loop(m, stmt: ast.stmt, scope: Scope) -> Optional[ast.AST]:
    """The outermost ``for``/``while`` statement in ``scope`` whose body repeats ``stmt``, or
    None (a loop's ``else`` runs once, after the loop: it does not count)."""
    start, end = _start(stmt), _end(stmt)
    best: Optional[ast.AST] = None
    for loop in scope.func.loops if scope.func is not None else m.loops:
        node = loop.node
        if loop.kind == "comprehension" or not node.body:
            continue
        if not (_start(node.body[0]) <= start and end <= _end(node.body[-1])):
            continue
        ctx = m.ctx.get(id(node))
        if ctx is not None and ctx.scope is scope and (best is None or _start(node) < _start(best)):
            best = node
    return best


def own_names(m, scope: Scope) -> tuple[set, set]:
    """(names the syntax shows ``scope`` binding in its own namespace, names it declares
    global or nonlocal). The bindings are under-approximated: a name in them is local."""
    key = ("names", id(scope))
    found = m._rebinding_memo.get(key)
    if found is None:
        found = m._rebinding_memo[key] = _local_names(scope.node)
    return found


def name_reads(m, scope: Scope, name: str) -> list:
    """Positions where ``name`` is read in ``scope``'s node, nested functions included."""
    key = ("reads", id(scope))
    reads = m._rebinding_memo.get(key)
    if reads is None:
        reads = m._rebinding_memo[key] = {}
        for n in walk(scope.node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                reads.setdefault(n.id, []).append(_start(n))
    return reads.get(name, [])


def rebinds_local(m, name: str, stmt: ast.stmt) -> bool:
    """Whether ``name = ...`` at ``stmt`` rebinds the very variable the statement reads: the
    name is already local to the statement's scope (so adding an assignment cannot turn a
    read of a global or closure variable into an UnboundLocalError), and is not declared
    global or nonlocal there."""
    scope = statement_scope(m, stmt)
    if scope is None:
        return False
    if scope.kind == "module":
        return True
    bound, declared = own_names(m, scope)
    return name in bound and name not in declared


def rebinding_seen(m, name: str, stmt: ast.stmt) -> bool:
    """Whether rebinding ``name`` at ``stmt`` is seen: in a function, the name is read after
    the statement or anywhere in a loop around it (a module's or class's names are seen from
    outside)."""
    scope = statement_scope(m, stmt)
    if scope is None or scope.kind != "function":
        return True
    reads = name_reads(m, scope, name)
    start, end = _start(stmt), _end(stmt)
    loop = outermost_loop(m, stmt, scope)
    return any((pos >= end or (loop is not None and _start(loop) <= pos <= _end(loop) and pos < start))
               and not _other_branch(m, stmt, pos) for pos in reads)


def _other_branch(m, stmt: ast.stmt, pos: tuple) -> bool:
    """Whether ``pos`` is in the other branch of an ``if`` that ``stmt`` is in: one run never
    reaches both (``if c: x[0] = v`` / ``else: return x``)."""
    start, end = _start(stmt), _end(stmt)
    for node in m.ifs:
        if not isinstance(node, ast.If) or not node.orelse:
            continue
        for mine, other in ((node.body, node.orelse), (node.orelse, node.body)):
            if (_start(mine[0]) <= start and end <= _end(mine[-1])
                    and _start(other[0]) <= pos <= _end(other[-1])):
                return True
    return False
