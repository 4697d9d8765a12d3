"""Keys made twice from one constant seed: ``jax.random.normal(jax.random.PRNGKey(0), (n, d))`` and,
in the same function, ``jax.random.normal(jax.random.PRNGKey(0), (n, 1))``. A key is a pure function
of its seed, so two calls of ``PRNGKey``/``key`` with the same literal seed make the same key, and the
two draws get the same random bits (d2l's weight-decay data: the label noise is the first feature
column scaled). The variable-based reuse (facts/keys.py) cannot see it: there is no variable, or
two variables each used once.

What makes a pair (a draw or a ``split``/``fold_in`` from each key, both outside loops):

* each key is the maker call itself with one integer literal as its seed, or a name bound once in
  the scope, outside loops, to such a call;
* both draws are in the same function (or both in module-level code) and the two keys come from
  two different maker calls (one maker used twice is the variable-based reuse's);
* no ``if`` runs one and not the other (:func:`~jaxlint.model.facts.loops.exclusive`).

In a loop, a literal seed repeats per iteration: JAX503's (a constant key in a loop). A variable seed
(``PRNGKey(step)``, a new key per iteration) made twice in one iteration from the same value of the
name, nothing storing it in between, makes that iteration's key twice (fresh AO's MALA chain: the
proposal's noise and the acceptance test's uniform from one key): its pairs are :attr:`SeedDraw.loop`'s.

Whether the shared bits change what the program computes is a second fact, :func:`results_meet`:
the two draws' results (the names or attributes their statements bind, not rebound since) are
combined by one arithmetic expression or ``jax.numpy``/``jax.lax`` call of the scope (``y = X @ w + b
+ noise``; ``x + normal(PRNGKey(0), s)`` after ``x = normal(PRNGKey(0), s)``), not only handed to the
same function (dummy inputs of a model's ``init``).
Measured 2026-12-06 on 19 sets: 19 pairs, 1 TRUE (the one whose results meet), 17 HARMLESS (demos,
the same seed on purpose for a second experiment), 1 FALSE (a task whose ``reset`` ignores its key);
pairs whose results never meet are opt-in. Functions of the model (``m``), asked by JAX502.
"""

from __future__ import annotations

import ast
from typing import Optional

from . import keys
from .loops import exclusive
from ..python.syntax import _pos, call_arg, walk

_MAKERS = frozenset(keys.KEY_MAKERS)


class SeedDraw:
    """A draw (``call``, the ``jax.random`` function ``fn``) from a key made by ``maker`` with the
    literal ``seed``; ``first``: the earlier draw from another key of that seed."""

    __slots__ = ("call", "fn", "maker", "seed", "first", "loop")

    def __init__(self, call: ast.Call, fn: str, maker: ast.Call, seed, loop=None):
        self.call = call
        self.fn = fn
        self.maker = maker
        self.seed = seed  # the literal seed; in a loop, the name of the variable seed
        self.first: Optional["SeedDraw"] = None
        self.loop = loop  # in a loop: both makers read the same value of ``seed`` in one iteration of it


def seed_key_draws(m) -> list:
    """The second and later draws from a key made again from a seed an earlier key of the same
    function was made from (see the module's text), in source order."""
    memo = m.facts.seed_key_draws_memo
    if memo is not None:
        return memo
    out: list = []
    if keys.may_call_jax_random(m):
        groups: dict = {}
        for call in m.calls_named(keys.KEY_FUNCS):  # spelled like a draw or a split: resolved only then
            fn = keys.random_function(m, call)
            if fn is None or fn not in keys.KEY_FUNCS:
                continue
            ctx = m.context(call)
            if ctx is None:
                continue
            scope = m.scope_at(call)
            if ctx.loops:
                made = _variable_seed(m, call_arg(call, 0, "key"), scope)
                if made is not None:
                    loop = ctx.loops[-1]
                    groups.setdefault((id(scope), id(loop.node), id(made[2])), []).append(
                        (SeedDraw(call, fn, made[0], made[1], loop), ctx))
                continue
            made = _constant_key(m, call_arg(call, 0, "key"), scope)
            if made is not None:
                groups.setdefault((id(scope), made[1]), []).append((SeedDraw(call, fn, made[0], made[1]), ctx))
        ifs = {id(n): n for n in m.ifs if isinstance(n, ast.If)} if groups else {}
        for draws in groups.values():
            draws.sort(key=lambda d: _pos(d[0].call))
            for j, (draw, ctx) in enumerate(draws):
                first = next((d for d, c in draws[:j] if d.maker is not draw.maker and not exclusive(m, c, ctx, ifs)
                              and (d.loop is None or _unchanged(m, d.maker, draw.maker))), None)
                if first is not None:
                    draw.first = first
                    out.append(draw)
    out.sort(key=lambda d: _pos(d.call))
    m.facts.seed_key_draws_memo = out
    return out


def results_meet(m, draw: SeedDraw) -> Optional[ast.stmt]:
    """The first statement of the draws' scope that reads what both draws computed (see the module's
    text), or None."""
    first, second = _statement(m, draw.first.call), _statement(m, draw.call)
    if first is None or second is None:
        return None
    scope = m.scope_at(draw.call)
    ours: list = []
    for node in walk(scope.node if scope.node is not m.tree else m.tree):
        if isinstance(node, _SIMPLE) and m.scope_at(node) is scope:
            ours.append(node)
    ours.sort(key=_pos)
    made_first: set = set()
    made_second: set = set()
    for stmt in ours:
        read = _reads(stmt)
        if stmt is first:
            made_first |= _binds(stmt)
            continue
        if stmt is second:
            if _combined(m, stmt, made_first, {id(draw.call)}):
                return stmt
            made_second |= _binds(stmt)
            made_first -= made_second  # the first's names, rebound here, hold the second's values
            continue
        if made_second and read & made_first and read & made_second and _combined(m, stmt, made_first, made_second):
            return stmt
        bound = _binds(stmt)
        made_first -= bound  # rebound: later reads are of other values
        made_second -= bound
    return None


_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)


def _statement(m, call: ast.Call) -> Optional[ast.stmt]:
    """The simple statement (an assignment, an expression, a return) holding ``call``."""
    for node in walk(m.scope_at(call).node):
        if isinstance(node, _SIMPLE) and node.lineno <= call.lineno <= node.end_lineno and any(
                n is call for n in ast.walk(node)):
            return node
    return None


def _combined(m, stmt: ast.stmt, a: set, b: set) -> bool:
    """Whether one arithmetic expression or ``jax.numpy``/``jax.lax`` call in the statement's value
    computes with both ``a`` and ``b`` (names or attributes read; in ``b``, also the ids of calls):
    the values meet in a computation, not only as two arguments of some function (dummy inputs of a
    model's ``init``)."""
    value = getattr(stmt, "value", None)
    for node in walk(value) if value is not None else ():
        if isinstance(node, ast.BinOp) or (isinstance(node, ast.Call) and (m.resolve(node.func, m.scope_at(node)) or "")
                                           .startswith(("jax.numpy.", "jax.lax."))):
            inner = _reads_of(node) | {id(n) for n in walk(node)}
            if inner & a and inner & b:
                return True
    return False


def _reads_of(value: ast.AST) -> set:
    out: set = set()
    for n in walk(value):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
            out.add(ast.unparse(n))
    return out


def _binds(stmt: ast.stmt) -> set:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    out: set = set()
    for t in targets:
        for n in ast.walk(t) if t is not None else ():
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                out.add(ast.unparse(n))
    return out


def _reads(stmt: ast.stmt) -> set:
    value = getattr(stmt, "value", None)
    return _reads_of(value) if value is not None else set()


def _constant_key(m, key: Optional[ast.AST], scope) -> Optional[tuple]:
    """``(maker call, seed)`` when ``key`` is ``PRNGKey(<int literal>)`` (or ``jax.random.key``), or a
    name bound once in ``scope``, outside loops, to one."""
    if isinstance(key, ast.Name):
        evs = scope.events.get(key.id, ())
        ev = m.binding(key.id, scope, _pos(key))
        if ev is None or len(evs) != 1 or not ev.plain_assign or ev.loops or ev.scope is not scope:
            return None
        key = ev.value
    if not (isinstance(key, ast.Call) and len(key.args) == 1 and not key.keywords):
        return None
    seed = key.args[0]
    if not (isinstance(seed, ast.Constant) and type(seed.value) is int):
        return None
    return (key, seed.value) if m.resolve(key.func, scope) in _MAKERS else None


def _variable_seed(m, key: Optional[ast.AST], scope) -> Optional[tuple]:
    """``(maker call, seed name, binding)`` for ``PRNGKey(step)`` (or ``jax.random.key``) with a plain
    name as its seed, the maker itself the draw's key (in a loop: ``normal(PRNGKey(step), s)`` and
    ``uniform(PRNGKey(step))`` in one iteration make one key twice)."""
    if not (isinstance(key, ast.Call) and len(key.args) == 1 and not key.keywords
            and isinstance(key.args[0], ast.Name) and m.resolve(key.func, scope) in _MAKERS):
        return None
    seed = key.args[0]
    ev = m.binding(seed.id, scope, _pos(seed))
    return (key, seed.id, ev) if ev is not None and ev.kind != "other" else None


def _unchanged(m, a: ast.Call, b: ast.Call) -> bool:
    """Whether nothing stores the seed name of maker ``a`` between it and maker ``b`` (so both read
    one value)."""
    name = a.args[0].id
    scope = m.scope_at(a)
    start, end = _pos(a), _pos(b)
    return not any(start < ev.pos < end for ev in scope.events.get(name, ()) if ev.pos is not None)
