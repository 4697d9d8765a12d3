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
