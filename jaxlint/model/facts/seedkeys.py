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

In a loop, a literal seed repeats per iteration: JAX503's (a constant key in a loop). Functions of
the model (``m``), asked by JAX502.
"""

from __future__ import annotations

import ast
from typing import Optional

from . import keys
from .loops import exclusive
from ..python.syntax import _pos, call_arg

_MAKERS = frozenset(keys.KEY_MAKERS)


class SeedDraw:
    """A draw (``call``, the ``jax.random`` function ``fn``) from a key made by ``maker`` with the
    literal ``seed``; ``first``: the earlier draw from another key of that seed."""

    __slots__ = ("call", "fn", "maker", "seed", "first")

    def __init__(self, call: ast.Call, fn: str, maker: ast.Call, seed: int):
        self.call = call
        self.fn = fn
        self.maker = maker
        self.seed = seed
        self.first: Optional["SeedDraw"] = None


def seed_key_draws(m) -> list:
    """The second and later draws from a key made again from a seed an earlier key of the same
    function was made from (see the module's text), in source order."""
    memo = m.facts.seed_key_draws_memo
    if memo is not None:
        return memo
    out: list = []
    if keys.may_call_jax_random(m):
        groups: dict = {}
        for call in m.calls:
            fn = keys.random_function(m, call)
            if fn is None or fn not in keys.KEY_FUNCS:
                continue
            ctx = m.context(call)
            if ctx is None or ctx.loops:
                continue
            scope = m.scope_at(call)
            made = _constant_key(m, call_arg(call, 0, "key"), scope)
            if made is not None:
                groups.setdefault((id(scope), made[1]), []).append((SeedDraw(call, fn, made[0], made[1]), ctx))
        ifs = {id(n): n for n in m.ifs if isinstance(n, ast.If)} if groups else {}
        for draws in groups.values():
            draws.sort(key=lambda d: _pos(d[0].call))
            for j, (draw, ctx) in enumerate(draws):
                first = next((d for d, c in draws[:j] if d.maker is not draw.maker and not exclusive(m, c, ctx, ifs)),
                             None)
                if first is not None:
                    draw.first = first
                    out.append(draw)
    out.sort(key=lambda d: _pos(d.call))
    m.facts.seed_key_draws_memo = out
    return out


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
