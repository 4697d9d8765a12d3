"""A key a tree map's function closes over: ``jax.tree.map(lambda p: p + normal(key, p.shape), params)``.
``jax.tree.map(f, tree)`` calls ``f`` once per leaf, and a ``jax.random`` draw is a pure function of
its key and shape: a function that draws from a variable of the code around it (not from its own
parameters, not from a key it derives per leaf) draws the same bits for every leaf. Leaves of one
shape get the same noise, others correlated noise (fresh set O: a Bayesian network's weight sample
``eps`` identical in every layer of a shape; set M: one random mask for every layer).

What makes one (the function is a lambda or def of this module handed to ``jax.tree.map``,
``jax.tree_util.tree_map`` or the older ``tree_multimap``; the draw is in its own body):

* the draw's key is a plain name the function does not bind (no parameter, assignment or loop of
  its own): the enclosing code's variable, the same object at every leaf;
* the draw is not under an ``if`` of the function (a branch may draw for one leaf only);
* it draws values, not indices or an order (``permutation``, ``choice``, ``shuffle``: one key for
  every leaf shuffles a batch's arrays together, on purpose).

Functions of the model (``m``), asked by JAX502.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, keys
from ..python.syntax import _pos, call_arg, walk

_MAPS = frozenset(N.TREE_MAPS) | {"jax.tree_multimap", "jax.tree_util.tree_multimap"}
# Draws of indices or orders: the same key at every leaf picks the same rows of each array, which is
# how a batch's observations, actions and rewards are shuffled or subsampled together.
_INDEX_DRAWS = frozenset({"permutation", "choice", "shuffle"})


class MappedKeyDraw:
    """A draw (``call``, the ``jax.random`` function ``fn``) from the closed-over key ``key`` in the
    function ``func`` that the tree map ``mapper`` calls per leaf."""

    __slots__ = ("call", "fn", "key", "func", "mapper")

    def __init__(self, call: ast.Call, fn: str, key: str, func, mapper: ast.Call):
        self.call = call
        self.fn = fn
        self.key = key
        self.func = func
        self.mapper = mapper


def mapped_key_draws(m) -> list:
    """The draws from a closed-over key in functions tree maps call per leaf, in source order."""
    memo = m.facts.mapped_key_draws_memo
    if memo is not None:
        return memo
    out: list = []
    if keys.may_call_jax_random(m):
        seen: set = set()
        for mapper in m.calls_named({"map", "tree_map", "tree_multimap"}):
            scope = m.scope_at(mapper)
            if not mapper.args or len(mapper.args) < 2 or m.resolve(mapper.func, scope) not in _MAPS:
                continue
            for f in callables.local_functions(m, mapper.args[0], scope):
                if id(f.node) in seen:
                    continue
                seen.add(id(f.node))
                draw = _closed_over_draw(m, f)
                if draw is not None:
                    out.append(MappedKeyDraw(draw[0], draw[1], draw[2], f, mapper))
    out.sort(key=lambda d: _pos(d.call))
    m.facts.mapped_key_draws_memo = out
    return out


def _closed_over_draw(m, f) -> Optional[tuple]:
    """``(call, fn, key name)`` of the first draw in ``f``'s own body (not nested functions, not under
    an ``if``) from a name ``f`` does not bind."""
    own = set(f.params) | set(f.kwonly) | set(f.scope.events)
    body = [f.node.body] if isinstance(f.node, ast.Lambda) else f.node.body
    for stmt in body:
        if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef)):
            continue
        for node in walk(stmt):
            if not isinstance(node, ast.Call) or isinstance(node, ast.Lambda):
                continue
            fn = keys.random_function(m, node, f.scope)
            if fn not in keys.SAMPLERS or fn in _INDEX_DRAWS:
                continue  # one permutation for every leaf shuffles a batch's arrays together: on purpose
            key = call_arg(node, 0, "key")
            if isinstance(key, ast.Name) and key.id not in own and not _conditional(node, stmt):
                return node, fn, key.id
    return None


def _conditional(node: ast.AST, stmt: ast.AST) -> bool:
    """Whether ``node`` sits in a conditional expression or a lambda of ``stmt`` (it may not run per leaf)."""
    for sub in walk(stmt):
        if isinstance(sub, (ast.IfExp, ast.Lambda)) and any(n is node for n in walk(sub)):
            return True
    return False
