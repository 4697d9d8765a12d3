"""Loop variance of values and shapes: what takes a new value in each iteration of the loops
around a call, and slice widths as polynomials of their bounds."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from . import limits as L
from .records import Scope

if TYPE_CHECKING:  # annotations only: the model imports this module
    from .module import ModuleModel


def _polynomial(e: Optional[ast.AST], atoms: dict) -> Optional[dict]:
    """A slice bound as a polynomial: {(atom key, ...): coefficient}, where an atom is any
    sub-expression other than int literals, ``+``, ``-`` and ``*``, keyed by its dump (``atoms``
    maps keys back to nodes). None for non-int literals."""
    if isinstance(e, ast.Constant):
        if isinstance(e.value, int) and not isinstance(e.value, bool):
            return {(): e.value} if e.value else {}
        return None
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        inner = _polynomial(e.operand, atoms)
        if inner is None:
            return None
        return {k: -v for k, v in inner.items()} if isinstance(e.op, ast.USub) else inner
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = _polynomial(e.left, atoms), _polynomial(e.right, atoms)
        if left is None or right is None:
            return None
        if isinstance(e.op, ast.Mult):
            out: dict = {}
            for ka, va in left.items():
                for kb, vb in right.items():
                    key = tuple(sorted(ka + kb))
                    out[key] = out.get(key, 0) + va * vb
            return {k: v for k, v in out.items() if v}
        return _combine(left, right, 1 if isinstance(e.op, ast.Add) else -1)
    key = ast.dump(e)
    atoms[key] = e
    return {(key,): 1}

def _combine(a: dict, b: dict, sign: int) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return {k: v for k, v in out.items() if v}


class ShapeVariance:
    """What takes a new value, or a new slice width, in each iteration of the loops around one
    call (``ModuleModel.shape_variance``)."""

    def __init__(self, model: ModuleModel, scope: Scope, loops: tuple, bounded_iters: set):
        self.m = model
        self.scope = scope
        self.loops = loops
        self.bounded_iters = bounded_iters  # ids of the iterables of loops over a few literal options
        self._memo: dict = {}

    def name_varies(self, name: str, depth: int = 0) -> bool:
        if name in self._memo:
            return self._memo[name]
        self._memo[name] = True  # a name defined from itself in the loop (t = t + 1) varies
        result = self._name_varies(name, depth)
        self._memo[name] = result
        return result

    def _name_varies(self, name: str, depth: int) -> bool:
        if any(name in lp.target_names() for lp in self.loops):
            return True
        for ev in self.scope.events.get(name, ()):
            if not any(lp in self.loops for lp in ev.loops):
                continue
            if ev.kind == "for" and id(ev.value) in self.bounded_iters:
                continue  # a nested loop over a few literal options: each shape compiles once
            if ev.kind in ("aug", "for"):
                return True
            if ev.kind == "assign" and depth < L.VARIANCE_CHAIN and self.m.work.spend() and self.expr_varies(ev.value, depth + 1):
                return True
        return False

    def expr_varies(self, e: ast.AST, depth: int = 0) -> bool:
        for n in ast.walk(e):
            if isinstance(n, ast.Name) and self.name_varies(n.id, depth):
                return True
            if isinstance(n, ast.Call):
                qn = self.m.resolve(n.func, self.scope)
                if qn is None or not qn.startswith("builtins."):
                    return True  # recomputed every iteration by code we cannot see
        return False

    def atom_varies(self, atom: ast.AST) -> bool:
        """Whether a slice-bound atom changes per iteration. Clamps (`min(i + b, n)`) change only
        at the end of a sweep and are not counted."""
        if isinstance(atom, ast.Call):
            qn = self.m.resolve(atom.func, self.scope)
            if qn != "builtins.len":
                return False
        return any(isinstance(n, ast.Name) and self.name_varies(n.id) for n in ast.walk(atom))

    def width_varies(self, sl: ast.Slice) -> bool:
        atoms: dict = {}
        lower = _polynomial(sl.lower, atoms) if sl.lower is not None else {}
        # An open upper bound is the (fixed) length of the sliced axis.
        upper = _polynomial(sl.upper, atoms) if sl.upper is not None else {("<end>",): 1}
        if lower is None or upper is None:
            return False
        width = _combine(upper, lower, -1)
        return any(any(k in atoms and self.atom_varies(atoms[k]) for k in key) for key in width)

    def churning(self, e: ast.AST) -> bool:
        if not isinstance(e, ast.Subscript):
            return False
        parts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        return any(isinstance(p, ast.Slice) and self.width_varies(p) for p in parts)

    def argument_churns(self, arg: ast.AST) -> bool:
        """Whether a call argument is a slice whose width changes per iteration, directly or
        through a name assigned such a slice in the loop."""
        if self.churning(arg):
            return True
        if isinstance(arg, ast.Name):
            ev = self.m.binding(arg.id, self.scope, (arg.lineno, arg.col_offset))
            if (ev is not None and ev.plain_assign and ev.scope is self.scope
                    and any(lp in self.loops for lp in ev.loops)):
                return self.churning(ev.value)
        return False

    # -- the last batch of a sweep in fixed-size steps, and state fed back through a call

    def ragged_batch(self, arg: ast.AST, ctx=None) -> Optional[str]:
        """When a call argument is one batch of a sweep in fixed steps (``x[i:i + bs]`` or
        ``x[i:min(i + bs, n)]`` for ``i in range(0, n, bs)``, ``x[i * bs:(i + 1) * bs]`` for
        ``i in range(ceil(n / bs))``) whose last batch is shorter unless ``n % bs == 0``: the batch
        size, as written. The argument then has two shapes, not one per iteration. None when
        every batch is full: the sweep stops at a multiple of the step (``range(0, k * bs, bs)``,
        ``range(0, n - bs + 1, bs)``, ``range(n // bs)``, literal bounds that divide), or the
        loop drops a short batch (``if len(batch) < bs: break``; ``ctx``: the call's context, for
        the ``if`` tests around it)."""
        sub = self._sliced(arg)
        if sub is None:
            return None
        parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        for part in parts:
            if not isinstance(part, ast.Slice) or part.lower is None or part.upper is None:
                continue
            for loop in reversed(self.loops):
                width = self._ragged_in(loop, part)
                if width is not None:
                    if self._drops_short(loop, ctx):
                        return None
                    return width
        return None

    def _sliced(self, arg: ast.AST) -> Optional[ast.Subscript]:
        if isinstance(arg, ast.Subscript):
            return arg
        if isinstance(arg, ast.Name):
            ev = self.m.binding(arg.id, self.scope, (arg.lineno, arg.col_offset))
            if (ev is not None and ev.plain_assign and ev.scope is self.scope
                    and any(lp in self.loops for lp in ev.loops) and isinstance(ev.value, ast.Subscript)):
                return ev.value
        return None

    def _ragged_in(self, loop, part: ast.Slice) -> Optional[str]:
        node = loop.node
        if not isinstance(node, ast.For):
            return None
        rng = self.m.range_call(node.iter, self.scope)
        if rng is None or rng.keywords or any(isinstance(a, ast.Starred) for a in rng.args):
            return None
        target = node.target
        if rng is not node.iter and isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(
                node.iter, ast.Call) and self.m.resolve(node.iter.func, self.scope) == "builtins.enumerate":
            target = target.elts[1]  # for j, i in enumerate(range(...))
        if not isinstance(target, ast.Name):
            return None
        i = target.id
        lower = self._resolved(part.lower, loop)
        upper = self._resolved(part.upper, loop)
        atoms: dict = {}
        lo = _polynomial(lower, atoms)
        if lo is None:
            return None
        clamp = _clamped(self.m, upper, self.scope)
        up = _polynomial(clamp if clamp is not None else upper, atoms)
        if up is None:
            return None
        width = _combine(up, lo, -1)
        if not width or any(k in atoms and self.atom_varies(atoms[k]) for key in width for k in key):
            return None  # not a fixed width (JAX304's churn case, or a different kind of slice)
        key_i = ast.dump(ast.Name(id=i, ctx=ast.Load()))
        if len(rng.args) == 3 and lo.get((key_i,)) == 1 and set(lo) <= {(key_i,), ()}:
            # x[i:i + w] / x[i:min(i + w, n)] for i in range(start, stop, w)
            start, stop, step = rng.args
            st = _polynomial(step, atoms)
            if st is None or _strip(width) != _strip(st) or self._full_sweep(start, stop, step, atoms):
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

    def _resolved(self, e: ast.AST, loop) -> ast.AST:
        """A name bound in the loop (plain assignment in this scope) stands for its value."""
        if isinstance(e, ast.Name):
            ev = self.m.binding(e.id, self.scope, (e.lineno, e.col_offset))
            if ev is not None and ev.plain_assign and ev.scope is self.scope and loop in ev.loops:
                return ev.value
        return e

    def _full_sweep(self, start: ast.AST, stop: ast.AST, step: ast.AST, atoms: dict) -> bool:
        m = self.m
        a, b, s = (m.const_int(x, self.scope) for x in (start, stop, step))
        if a is not None and b is not None and s:
            return (b - a) % s == 0
        st = _polynomial(step, atoms)
        sp = _polynomial(stop, atoms)
        sa = _polynomial(start, atoms)
        if st is None or sp is None or sa is None or len(st) != 1:
            return False
        (skey, scoef), = st.items()
        if not skey:
            return False
        span = _combine(sp, sa, -1)
        # every term a multiple of the step: range(0, k * bs, bs), range(0, (n // bs) * bs, bs)
        if span and all(set(skey) <= set(k) for k in span):
            return True
        # the sweep stops a batch short of the end: range(0, n - bs + 1, bs), range(0, n - bs, bs)
        return span.get(skey, 0) < 0

    def _drops_short(self, loop, ctx) -> bool:
        """The loop skips or ends at a short batch: an ``if`` whose test reads ``len(...)`` or
        ``.shape``, around the call or ending in ``break``/``continue`` in the loop body."""
        def sized(test: ast.AST) -> bool:
            for n in ast.walk(test):
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

    def feeds_back(self, call: ast.Call) -> bool:
        """Whether the loop binds the call's result to a name it passes the call (``w = step(w, g)``,
        ``state, m = update(state, batch)``): each iteration continues from the last, the shape
        of an iterative algorithm (an optimizer, a simulation, a decoder) rather than a sweep of
        independent calls whose results are collected."""
        args = set()
        for a in list(call.args) + [kw.value for kw in call.keywords]:
            a = a.value if isinstance(a, ast.Starred) else a
            for n in ast.walk(a):
                if isinstance(n, ast.Name):
                    args.add(n.id)
        if not args:
            return False
        for name in args:
            for ev in self.scope.events.get(name, ()):
                if ev.kind not in ("assign", "aug") or not any(lp in self.loops for lp in ev.loops):
                    continue
                value = ev.node.value if ev.kind == "aug" else ev.value
                if value is not None and any(n is call for n in ast.walk(value)):
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
                and w in {ast.dump(n) for n in ast.walk(num)})
    if (isinstance(count, ast.UnaryOp) and isinstance(count.op, ast.USub) and isinstance(count.operand, ast.BinOp)
            and isinstance(count.operand.op, ast.FloorDiv) and ast.dump(count.operand.right) == w):
        return True
    return False
