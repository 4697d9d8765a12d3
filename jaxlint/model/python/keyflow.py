"""The reads and bindings of names in one scope, in source order with their contexts: the index the
key flow (jaxlint/model/keys.py) follows to tell which binding of a key a ``jax.random`` call reads
and whether a later binding hides an earlier one on every path.

Built once per scope on first use (:func:`_key_names`)."""

from __future__ import annotations

import ast
from typing import Optional

from .records import Context, Scope
from .syntax import _end, _pos, child_nodes, walk

_SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class NameEvent:
    __slots__ = ("name", "store", "definite", "pos", "ctx", "nested", "stmt")

    def __init__(self, name, store, definite, pos, ctx, nested, stmt):
        self.name = name
        self.store = store  # a binding (else a read)
        self.definite = definite  # ``name = ...``: the binding certainly happens when the statement runs
        self.pos = pos  # reads: where the name is; bindings: the end of the statement (after the value)
        self.ctx = ctx
        self.nested = nested  # a read inside a nested function or class: runs at an unknown time
        self.stmt = stmt


def prefix(short: tuple, long: tuple) -> bool:
    return len(short) <= len(long) and long[:len(short)] == short


class ScopeNames:
    """Every read and binding of a name in one scope's own code, in source order, with contexts."""

    def __init__(self, model, scope: Scope):
        self.model = model
        self.by_name: dict = {}
        self.simple: list = []  # (start, end, stmt): the simple statements of the scope
        node = scope.node
        body = node.body if not isinstance(node, ast.Lambda) else []
        self._body(body, None)

    def _add(self, name, store, definite, pos, ctx, nested, stmt):
        self.by_name.setdefault(name, []).append(NameEvent(name, store, definite, pos, ctx, nested, stmt))

    def _body(self, stmts, fallback: Optional[Context]) -> None:
        for stmt in stmts:
            ctx = self.model.ctx.get(id(stmt), fallback)
            if ctx is None:
                continue
            self._stmt(stmt, ctx)

    def _stmt(self, stmt: ast.stmt, ctx: Context) -> None:
        if isinstance(stmt, _SIMPLE):
            self.simple.append((_pos(stmt), _end(stmt), stmt))
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            if stmt.value is not None:
                self._reads(stmt.value, ctx, stmt)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                self._target(t, ctx, stmt, definite=stmt.value is not None)
            return
        if isinstance(stmt, ast.AugAssign):
            self._reads(stmt.value, ctx, stmt)
            if isinstance(stmt.target, ast.Name):
                self._add(stmt.target.id, False, False, _pos(stmt.target), ctx, False, stmt)
                self._add(stmt.target.id, True, False, _end(stmt), ctx, False, stmt)
            else:
                self._reads(stmt.target, ctx, stmt)
            return
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for part in stmt.decorator_list:
                self._reads(part, ctx, stmt)
            self._nested(stmt, ctx)
            self._add(stmt.name, True, False, _end(stmt), ctx, False, stmt)
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            self._reads(stmt.iter, ctx, stmt)
            inner = self.model.ctx.get(id(stmt.body[0]), ctx) if stmt.body else ctx
            self._target(stmt.target, inner, stmt, definite=False)
            self._body(stmt.body, inner)
            self._body(stmt.orelse, ctx)
            return
        if isinstance(stmt, ast.While):
            self._reads(stmt.test, self.model.ctx.get(id(stmt.test), ctx), stmt)
            self._body(stmt.body, ctx)
            self._body(stmt.orelse, ctx)
            return
        if isinstance(stmt, ast.If):
            self._reads(stmt.test, ctx, stmt)
            self._body(stmt.body, ctx)
            self._body(stmt.orelse, ctx)
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self._reads(item.context_expr, ctx, stmt)
                if item.optional_vars is not None:
                    self._target(item.optional_vars, ctx, stmt, definite=False)
            self._body(stmt.body, ctx)
            return
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self._body(stmt.body, ctx)
            for h in stmt.handlers:
                if h.type is not None:
                    self._reads(h.type, ctx, stmt)
                if h.name:
                    self._add(h.name, True, False, _pos(h), ctx, False, stmt)
                self._body(h.body, ctx)
            self._body(stmt.orelse, ctx)
            self._body(stmt.finalbody, ctx)
            return
        # Return, Raise, Assert, Delete, Match, Global, ...: read every name in it; ``match`` arms
        # and their captures are read conservatively (a capture is not a definite binding).
        for n in walk(stmt):
            if isinstance(n, ast.Name):
                self._add(n.id, not isinstance(n.ctx, ast.Load), False, _pos(n), ctx, False, stmt)
            elif isinstance(n, _NESTED):
                self._nested(n, ctx)

    def _target(self, t: ast.AST, ctx: Context, stmt, definite: bool) -> None:
        if isinstance(t, ast.Name):
            self._add(t.id, True, definite, _end(stmt) if definite else _pos(t), ctx, False, stmt)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for elt in t.elts:
                self._target(elt, ctx, stmt, definite)
        elif isinstance(t, ast.Starred):
            self._target(t.value, ctx, stmt, definite)
        else:  # x.attr = ..., x[i] = ...: reads x (and the index)
            self._reads(t, ctx, stmt)

    def _reads(self, expr: ast.AST, ctx: Context, stmt) -> None:
        stack = [expr]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Name):
                if isinstance(n.ctx, ast.Load):
                    self._add(n.id, False, False, _pos(n), ctx, False, stmt)
                else:  # a walrus: a binding that may not run (``a and (x := f())``)
                    self._add(n.id, True, False, _pos(n), ctx, False, stmt)
                continue
            if isinstance(n, _NESTED):
                self._nested(n, ctx)
                continue
            stack.extend(child_nodes(n))

    def _nested(self, node: ast.AST, ctx: Context) -> None:
        """Names a nested function or class reads: it may run at any time, so each read may see
        any binding of the enclosing scope."""
        for n in walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                self._add(n.id, False, False, _pos(n), ctx, True, None)

    def statement(self, node: ast.AST) -> Optional[ast.stmt]:
        """The simple statement of this scope ``node`` is part of."""
        pos = _pos(node)
        best = None
        for start, end, stmt in self.simple:
            if start <= pos <= end and (best is None or start >= _pos(best)):
                best = stmt
        return best


def hides(b: NameEvent, r: NameEvent, lower: tuple) -> bool:
    """Whether binding ``b`` runs on every path from position ``lower`` to the read ``r``."""
    if not (lower < b.pos < r.pos):
        return False
    if not prefix(b.ctx.loops, r.ctx.loops):
        return False
    return set(b.ctx.branches) <= set(r.ctx.branches)
