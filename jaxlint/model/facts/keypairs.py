"""Whether two uses of one key repeat randomness, beyond sharing the key (keys.py's key flow): two
derivations that give different keys, and two index draws that pair two arrays on purpose. Asked by
JAX502 (jaxlint_rules/rng.py) for each pair of uses of one binding. Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from . import flaxmodules, flaxrng
from .keys import FOLD_IN, SPLIT, KeyUse
from ..python.syntax import call_arg, least_int, walk

# Draws of indices: with one key they pick the same indices for arrays of the same length, which
# is how a dataset's inputs and labels are shuffled or subsampled together. Name of the data argument.
_INDEX_DRAWS = {"choice": "a", "permutation": "x", "shuffle": "x"}


def distinct_derivations(m, a: KeyUse, b: KeyUse) -> bool:
    """Whether two derivations from one key give different keys: ``fold_in`` with different
    data, or ``fold_in(key, n)`` beside ``split(key, n)`` (``fold_in(key, i)`` equals
    ``split(key, n)[i]`` for ``i < n`` under the default threefry, so only ``i >= n`` is apart)."""
    if a.fn == FOLD_IN and b.fn == FOLD_IN:
        if a.data is None or b.data is None:
            return True
        return ast.dump(a.data) != ast.dump(b.data)
    pair = {a.fn: a, b.fn: b}
    if set(pair) != {FOLD_IN, SPLIT}:
        return False
    fold, split = pair[FOLD_IN], pair[SPLIT]
    if fold.data is None:
        return False
    if split.num is not None and ast.dump(fold.data) == ast.dump(split.num):
        return True
    d = least_int(fold.data, tuple(loop.node for loop in getattr(m.context(fold.call), 'loops', ())))  # ``100 + i``
    if split.num is None:
        n = 2
    else:
        n = split.num.value if isinstance(split.num, ast.Constant) else None
    return (isinstance(d, int) and isinstance(n, int) and not isinstance(d, bool)
            and not isinstance(n, bool) and d >= n)


def paired_draws(m, a: KeyUse, b: KeyUse) -> bool:
    """Two draws of indices with one key and the same arguments but the data
    (``choice(key, x, (n,))`` and ``choice(key, y, (n,))``), or the same draw indexing two different
    arrays (``x[permutation(key, n)]``, ``y[permutation(key, n)]``): the same indices on purpose, to
    keep two arrays paired."""
    if a.fn != b.fn or a.fn not in _INDEX_DRAWS:
        return False
    ca, cb = a.call, b.call
    if len(ca.args) != len(cb.args) or sorted(k.arg or "" for k in ca.keywords) != \
            sorted(k.arg or "" for k in cb.keywords):
        return False
    data = _INDEX_DRAWS[a.fn]
    da, db = call_arg(ca, 1, data), call_arg(cb, 1, data)
    if da is None or db is None:
        return False
    if ast.dump(da) == ast.dump(db):  # the same indices drawn twice: paired if they index two different arrays
        ia, ib = _indexed(m, ca), _indexed(m, cb)
        return (ast.dump(ca) == ast.dump(cb) and ia is not None and ib is not None
                and ast.dump(ia) != ast.dump(ib))
    rest_a = [ast.dump(x) for x in ca.args[2:]] + sorted(
        (k.arg or "", ast.dump(k.value)) for k in ca.keywords if k.arg not in (data, "key"))
    rest_b = [ast.dump(x) for x in cb.args[2:]] + sorted(
        (k.arg or "", ast.dump(k.value)) for k in cb.keywords if k.arg not in (data, "key"))
    return rest_a == rest_b


def _indexed(m, draw: ast.Call) -> Optional[ast.AST]:
    """The array a draw of indices indexes in place (``data[jax.random.permutation(key, n)]``): the subscript's
    value, or None. Fresh AZ: ``data[permutation(key, arange(n))]`` and ``masks[permutation(key, arange(n))]``
    shuffle a dataset and its masks together (judged FALSE twice as key reuse)."""
    scope = m.scope_at(draw)
    body = scope.node if scope is not None and scope.func is not None else m.tree
    for node in walk(body):
        if isinstance(node, ast.Subscript) and node.slice is draw:
            return node.value
    return None


def init_pair(m, a: KeyUse, b: KeyUse) -> Optional[str]:
    """How two uses of one key relate when one is a flax module's ``init`` (:mod:`.flaxmodules`): "skip" for an
    ``init`` beside a ``jax.random`` use (flax draws each parameter from a key derived by its path: no bits
    shared); "same" for two ``init`` calls of one instance spelled alike (the same weights twice, as a target
    network's copy is made on purpose); "class" for two instances of one class (the same weights where the
    shapes agree); "other" for modules whose classes differ or are not shown (shared paths not shown).
    None when neither is an ``init``. The same for two ``apply`` calls proven to draw dropout masks from the key
    (facts/flaxrng.py), prefixed "apply-"; an ``apply`` beside any other use is "skip" (flax derives the
    layer's key from the stream's key and the layer's path)."""
    ia, ib = a.fn == flaxmodules.INIT, b.fn == flaxmodules.INIT
    pa, pb = a.fn == flaxrng.APPLY, b.fn == flaxrng.APPLY
    if not (ia or ib or pa or pb):
        return None
    if ia != ib or pa != pb:
        return "skip"
    ra, rb = a.call.func.value, b.call.func.value
    prefix = "apply-" if pa else ""
    if ast.dump(ra) == ast.dump(rb):
        return prefix + "same"
    if pa:
        ka, kb = flaxrng.applied_class(m, a.call, a.ctx.scope), flaxrng.applied_class(m, b.call, b.ctx.scope)
    else:
        ka, kb = flaxmodules.class_key(m, ra, a.ctx.scope), flaxmodules.class_key(m, rb, b.ctx.scope)
    return prefix + ("class" if ka is not None and ka == kb else "other")
