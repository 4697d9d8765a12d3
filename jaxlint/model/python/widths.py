"""Sizes and widths: slice bounds read as polynomials of their names (``i + bs - i`` is ``bs``), and
the records of where an argument's shape comes from when it follows a loop (jaxlint/model/variance.py)."""

from __future__ import annotations

import ast
from typing import Optional


def polynomial(e: Optional[ast.AST], atoms: dict) -> Optional[dict]:
    """A slice bound as a polynomial: {(atom key, ...): coefficient}, where an atom is any
    sub-expression other than int literals, ``+``, ``-`` and ``*``, keyed by its dump (``atoms``
    maps keys back to nodes). None for non-int literals."""
    if isinstance(e, ast.Constant):
        if isinstance(e.value, int) and not isinstance(e.value, bool):
            return {(): e.value} if e.value else {}
        return None
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        inner = polynomial(e.operand, atoms)
        if inner is None:
            return None
        return {k: -v for k, v in inner.items()} if isinstance(e.op, ast.USub) else inner
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = polynomial(e.left, atoms), polynomial(e.right, atoms)
        if left is None or right is None:
            return None
        if isinstance(e.op, ast.Mult):
            out: dict = {}
            for ka, va in left.items():
                for kb, vb in right.items():
                    key = tuple(sorted(ka + kb))
                    out[key] = out.get(key, 0) + va * vb
            return {k: v for k, v in out.items() if v}
        return combine(left, right, 1 if isinstance(e.op, ast.Add) else -1)
    key = ast.dump(e)
    atoms[key] = e
    return {(key,): 1}


def combine(a: dict, b: dict, sign: int) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return {k: v for k, v in out.items() if v}


class ShapeSource:
    """Where a call argument's shape comes from, when it follows the loops around the call
    (:meth:`ShapeVariance.shape_source`).

    ``kind``: "slice" (``x[:i]``), "built" (``jnp.ones(n)``, ``jnp.zeros((n, d))``), "sized" (the
    output of ``jnp.nonzero``/``unique``/... without ``size=`` on per-iteration data), "stacked" (a
    list that grows in the loop, stacked or passed whole), "converted" (``jnp.array`` of per-item
    Python data of varying length) or "drawn" (an item of a list of arrays built with different
    sizes). ``origin``: a phrase that says so, after the argument (``is built by `jnp.ones` with a
    size that follows `n```). ``every``: a new shape in every iteration (a loop counter, a list
    that gets an item each iteration), so one compilation per iteration. ``per``: what one
    compilation is for otherwise ("width", "value of `n`"). ``sizes``: the distinct sizes, where
    the module fixes them; ``count``: how many distinct shapes at most, where the module fixes
    that but not the sizes. "masked" (``x[mask]`` with a boolean mask recomputed in the loop); ``proof``:
    what shows a fact the origin rests on (why the mask is boolean), for the evidence."""

    __slots__ = ("kind", "origin", "every", "per", "sizes", "count", "proof")

    def __init__(self, kind: str, origin: str, every: bool, per: str, sizes: Optional[tuple] = None,
                 count: Optional[int] = None, proof: Optional[str] = None):
        self.kind = kind
        self.proof = proof
        self.origin = origin
        self.every = every
        self.per = per
        self.sizes = sizes
        self.count = count

    def _key(self) -> tuple:
        return (self.kind, self.origin, self.every, self.per, self.sizes, self.count)

    def __eq__(self, other) -> bool:
        return self._key() == other._key() if isinstance(other, ShapeSource) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return "ShapeSource(%s)" % ", ".join(map(repr, self._key()))


class SizeDriver:
    """What an integer size follows: ``what`` (text), a new value every iteration or not, and what
    one compilation is per."""

    __slots__ = ("what", "every", "per")

    def __init__(self, what: str, every: bool, per: str):
        self.what = what
        self.every = every
        self.per = per

    def _key(self) -> tuple:
        return (self.what, self.every, self.per)

    def __eq__(self, other) -> bool:
        return self._key() == other._key() if isinstance(other, SizeDriver) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return "SizeDriver(%s)" % ", ".join(map(repr, self._key()))
