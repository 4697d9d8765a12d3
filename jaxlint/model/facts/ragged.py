"""Ragged batches: a sweep in fixed-size batches (``f(x[i:i + bs])`` for ``i in range(0, n, bs)``)
whose last batch is shorter unless the length is a multiple of the batch size (JAX304's opt-in
case). Slice widths and loop bounds are read as polynomials of their names (jaxlint/model/variance.py).

Functions of a :class:`~jaxlint.model.variance.ShapeVariance` (``sv``), imported explicitly.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from . import loops as loopfacts
from . import values as V
from ..python.records import Scope
from ..python.syntax import walk
from ..python.widths import combine, polynomial

if TYPE_CHECKING:  # annotations only
    from ..python.module import ModuleModel


def ragged_batch(sv, arg: ast.AST, ctx=None) -> Optional[str]:
    """When a call argument is one batch of a sweep in fixed steps (``x[i:i + bs]`` or
    ``x[i:min(i + bs, n)]`` for ``i in range(0, n, bs)``, ``x[i * bs:(i + 1) * bs]`` for
    ``i in range(ceil(n / bs))``) whose last batch is shorter unless ``n % bs == 0``: the batch
    size, as written. The argument then has two shapes, not one per iteration. None when
    every batch is full: the sweep stops at a multiple of the step (``range(0, k * bs, bs)``,
    ``range(0, n - bs + 1, bs)``, ``range(n // bs)``, literal bounds that divide), or the
    loop drops a short batch (``if len(batch) < bs: break``; ``ctx``: the call's context, for
    the ``if`` tests around it)."""
    sub = _sliced(sv, arg)
    if sub is None:
        return None
    parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    for part in parts:
        if not isinstance(part, ast.Slice) or part.lower is None or part.upper is None:
            continue
        for loop in reversed(sv.loops):
            width = _ragged_in(sv, loop, part)
            if width is not None:
                if _drops_short(sv, loop, ctx):
                    return None
                return width
    return None


def _sliced(sv, arg: ast.AST) -> Optional[ast.Subscript]:
    if isinstance(arg, ast.Subscript):
        return arg
    if isinstance(arg, ast.Name):
        ev = sv.m.binding(arg.id, sv.scope, (arg.lineno, arg.col_offset))
        if (ev is not None and ev.plain_assign and ev.scope is sv.scope
                and any(lp in sv.loops for lp in ev.loops) and isinstance(ev.value, ast.Subscript)):
            return ev.value
    return None


def _ragged_in(sv, loop, part: ast.Slice) -> Optional[str]:
    node = loop.node
    if not isinstance(node, ast.For):
        return None
    rng = loopfacts.range_call(sv.m, node.iter, sv.scope)
    if rng is None or rng.keywords or any(isinstance(a, ast.Starred) for a in rng.args):
        return None
    target = node.target
    if rng is not node.iter and isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(
            node.iter, ast.Call) and sv.m.resolve(node.iter.func, sv.scope) == "builtins.enumerate":
        target = target.elts[1]  # for j, i in enumerate(range(...))
    if not isinstance(target, ast.Name):
        return None
    i = target.id
    lower = _resolved(sv, part.lower, loop)
    upper = _resolved(sv, part.upper, loop)
    atoms: dict = {}
    lo = polynomial(lower, atoms)
    if lo is None:
        return None
    clamp = _clamped(sv.m, upper, sv.scope)
    up = polynomial(clamp if clamp is not None else upper, atoms)
    if up is None:
        return None
    width = combine(up, lo, -1)
    if not width or any(k in atoms and sv.atom_varies(atoms[k]) for key in width for k in key):
        return None  # not a fixed width (JAX304's churn case, or a different kind of slice)
    key_i = ast.dump(ast.Name(id=i, ctx=ast.Load()))
    if len(rng.args) == 3 and lo.get((key_i,)) == 1 and set(lo) <= {(key_i,), ()}:
        # x[i:i + w] / x[i:min(i + w, n)] for i in range(start, stop, w)
        start, stop, step = rng.args
        st = polynomial(step, atoms)
        if st is None or _strip(width) != _strip(st) or _full_sweep(sv, start, stop, step, atoms):
            return None
        return ast.unparse(step)
    if len(rng.args) == 1 and len(lo) == 1 and len(width) == 1:
        # x[i * w:(i + 1) * w] for i in range(ceil(n / w))
        (lkey, lcoef), = lo.items()
        (wkey, wcoef), = width.items()
        if key_i not in lkey or lcoef != wcoef or tuple(k for k in lkey if k != key_i) != wkey:
            return None
        if not _rounds_up(rng.args[0], width, atoms):
            return None
        return _unparse_poly(width, atoms)
    return None


def _resolved(sv, e: ast.AST, loop) -> ast.AST:
    """A name bound in the loop (plain assignment in this scope) stands for its value."""
    if isinstance(e, ast.Name):
        ev = sv.m.binding(e.id, sv.scope, (e.lineno, e.col_offset))
        if ev is not None and ev.plain_assign and ev.scope is sv.scope and loop in ev.loops:
            return ev.value
    return e


def _full_sweep(sv, start: ast.AST, stop: ast.AST, step: ast.AST, atoms: dict) -> bool:
    m = sv.m
    a, b, s = (V.const_int(m, x, sv.scope) for x in (start, stop, step))
    if a is not None and b is not None and s:
        return (b - a) % s == 0
    st = polynomial(step, atoms)
    sp = polynomial(stop, atoms)
    sa = polynomial(start, atoms)
    if st is None or sp is None or sa is None or len(st) != 1:
        return False
    (skey, scoef), = st.items()
    if not skey:
        return False
    span = combine(sp, sa, -1)
    # every term a multiple of the step: range(0, k * bs, bs), range(0, (n // bs) * bs, bs)
    if span and all(set(skey) <= set(k) for k in span):
        return True
    # the sweep stops a batch short of the end: range(0, n - bs + 1, bs), range(0, n - bs, bs)
    return span.get(skey, 0) < 0


def _drops_short(sv, loop, ctx) -> bool:
    """The loop skips or ends at a short batch: an ``if`` whose test reads ``len(...)`` or
    ``.shape``, around the call or ending in ``break``/``continue`` in the loop body."""
    def sized(test: ast.AST) -> bool:
        for n in walk(test):
            if isinstance(n, ast.Attribute) and n.attr in ("shape", "size"):
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len":
                return True
        return False

    if ctx is not None and loop in ctx.loops:
        inside = ctx.loops.index(loop) + 1  # guards with this many loops around them are in the body
        if any(sized(test) for test, depth in ctx.guards if depth >= inside):
            return True
    for stmt in getattr(loop.node, "body", []):
        if isinstance(stmt, ast.If) and sized(stmt.test) and stmt.body and isinstance(
                stmt.body[-1], (ast.Break, ast.Continue)):
            return True
    return False


def _clamped(model: ModuleModel, e: ast.AST, scope: Scope) -> Optional[ast.AST]:
    """``i + bs`` from ``min(i + bs, n)`` / ``min(n, i + bs)``: the unclamped bound."""
    if (isinstance(e, ast.Call) and len(e.args) == 2 and not e.keywords
            and model.resolve(e.func, scope) == "builtins.min"):
        for a in e.args:
            if isinstance(a, ast.BinOp) and isinstance(a.op, ast.Add):
                return a
    return None


def _strip(poly: dict) -> dict:
    """A width without its sign: the same batch size whatever the order of its terms."""
    return {k: abs(v) for k, v in poly.items()}


def _unparse_poly(poly: dict, atoms: dict) -> str:
    (key, coef), = poly.items()
    names = [ast.unparse(atoms[k]) for k in key if k in atoms]
    text = " * ".join(names) or str(coef)
    return text if coef == 1 or not names else f"{coef} * {text}"


def _rounds_up(count: ast.AST, width: dict, atoms: dict) -> bool:
    """``ceil(n / w)``, ``math.ceil(n / w)``, ``(n + w - 1) // w``, ``-(-n // w)``: the number of
    batches of size ``w``, the last one partial."""
    if len(width) != 1:
        return False
    (wkey, _), = width.items()
    if not wkey or len(wkey) != 1 or wkey[0] not in atoms:
        return False
    w = ast.dump(atoms[wkey[0]])
    if isinstance(count, ast.Call) and len(count.args) == 1:
        name = count.func.attr if isinstance(count.func, ast.Attribute) else getattr(count.func, "id", "")
        inner = count.args[0]
        if name == "ceil" and isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Div):
            return ast.dump(inner.right) == w
        if name == "int" and isinstance(inner, ast.Call):
            return _rounds_up(inner, width, atoms)
    if isinstance(count, ast.BinOp) and isinstance(count.op, ast.FloorDiv) and ast.dump(count.right) == w:
        num = count.left
        return (isinstance(num, ast.BinOp) and isinstance(num.op, (ast.Add, ast.Sub))
                and w in {ast.dump(n) for n in walk(num)})
    if (isinstance(count, ast.UnaryOp) and isinstance(count.op, ast.USub) and isinstance(count.operand, ast.BinOp)
            and isinstance(count.operand.op, ast.FloorDiv) and ast.dump(count.operand.right) == w):
        return True
    return False
