"""Boolean row selections: ``x[mask]`` whose mask is a boolean array, NumPy's or JAX's.

Selecting with a boolean array keeps as many rows as the mask has True entries, so the result's
shape is a value of the data, not of the program. :func:`boolean_index` answers whether an index is
such a mask and says why, for the evidence. Proven:

* a comparison (``<``, ``==``, ...) with an array on one side: a JAX value, a NumPy array, or an
  array subscript with a tuple index holding a slice (``obs[:, 0] > 0.8``: lists take no tuple);
* ``np.``/``jnp.`` ``isnan``/``isfinite``/``logical_*``/``isin``/..., ``.astype(bool)``,
  ``.any(axis=...)``/``.all(axis=...)`` (a reduction along an axis keeps an array);
* ``~m``, ``m1 & m2``, ``m1 | m2`` of proven masks, and a name bound to one.

``~a`` of an array whose dtype the module does not show (``~dones``, ``dones`` returned by another
object's method) is taken as a boolean mask too, and the reason says so: ``~`` of a float array
raises, and of an integer array gives negative positions, which nobody writes as an index; the
name's array methods (``dones.sum()``) show it is an array, not a Python bool. Everything else is
not a mask here (an integer index array keeps its own, fixed, number of rows).
"""

from __future__ import annotations

import ast
from typing import Optional

from ..python import limits as L
from ..python.records import Scope
from ..python.syntax import _pos
from ..python.widths import ShapeSource
from . import hostarrays
from . import values as V

_MASK_FUNCS = frozenset(p + n for p in ("numpy.", "jax.numpy.") for n in (
    "isnan", "isinf", "isfinite", "isneginf", "isposinf", "signbit", "isclose", "logical_and", "logical_or",
    "logical_not", "logical_xor", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
    "isin", "in1d",
))
_BOOL_DTYPES = frozenset({"builtins.bool", "numpy.bool_", "numpy.bool", "jax.numpy.bool_", "jax.numpy.bool"})
_ARRAY_USES = frozenset({"sum", "any", "all", "mean", "shape", "ndim", "astype", "nonzero", "squeeze"})


def boolean_index(m, e: ast.AST, scope: Scope) -> Optional[str]:
    """Why the index ``e`` is a boolean mask (a phrase for the evidence), or None when that is not
    shown."""
    return _mask(m, e, scope, 0)


def masked_source(var, sub: ast.Subscript, carried: bool = False) -> Optional[ShapeSource]:
    """For :class:`ShapeVariance` ``var``: ``x[mask]`` with a boolean mask recomputed in its loops
    has as many rows as the mask has True entries (``carried``: the value a later line of the loop
    body binds, for the next iteration)."""
    if isinstance(sub.slice, (ast.Slice, ast.Constant)) or not var.expr_varies(sub.slice):
        return None
    why = boolean_index(var.m, sub.slice, var.scope)
    if why is None:
        return None
    rebound = f"is rebound on line {sub.lineno} to `{_short(sub)}`, " if carried else "is "
    return ShapeSource("masked", f"{rebound}selected by the boolean mask `{_short(sub.slice)}`, recomputed in the loop, "
                                 "so it has as many rows as the mask has True entries", False,
                       "count of selected rows", proof=why)


def carried_selection(var, name: ast.Name) -> Optional[ShapeSource]:
    """A name the innermost loop's body rebinds, last and after this use, to a boolean selection
    (``obs = next_obs[~dones]`` at the end of a rollout step): what the next iteration passes."""
    inner = var.loops[-1] if var.loops else None
    evs = [ev for ev in var.scope.events.get(name.id, ()) if inner in ev.loops]
    if not evs:
        return None
    last = max(evs, key=lambda ev: _pos(ev.node))
    if not last.plain_assign or _pos(last.node) <= _pos(name) or not isinstance(last.value, ast.Subscript):
        return None
    return masked_source(var, last.value, carried=True)


def _mask(m, e: ast.AST, scope: Scope, depth: int) -> Optional[str]:
    if depth > L.MASK_CHAIN or not m.work.spend():
        return None
    if isinstance(e, ast.Compare):
        if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in e.ops):
            return None
        if any(_array(m, side, scope) for side in [e.left, *e.comparators]):
            return f"`{_short(e)}` compares an array element by element"
        return None
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Invert):
        inner = _mask(m, e.operand, scope, depth + 1)
        if inner is not None:
            return inner
        if _used_as_array(m, e.operand, scope):
            return (f"`{_short(e)}` negates an array (`~` of a float array raises, and of an integer array "
                    "gives negative positions, not a selection)")
        return None
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.BitAnd, ast.BitOr)):
        left, right = _mask(m, e.left, scope, depth + 1), _mask(m, e.right, scope, depth + 1)
        return left if left is not None and right is not None else None
    if isinstance(e, ast.Call):
        qn = m.resolve(e.func, scope)
        if qn in _MASK_FUNCS:
            return f"`{_short(e)}` gives a boolean array"
        f = e.func
        if qn is None and isinstance(f, ast.Attribute):
            if f.attr == "astype" and e.args and m.resolve(e.args[0], scope) in _BOOL_DTYPES:
                return f"`{_short(e)}` is a boolean array"
            if f.attr in ("any", "all") and any(kw.arg == "axis" for kw in e.keywords) \
                    and _mask(m, f.value, scope, depth + 1) is not None:
                return f"`{_short(e)}` reduces a boolean array along an axis"
        return None
    if isinstance(e, ast.Name):
        ev = m.binding(e.id, scope, _pos(e))
        if ev is not None and ev.plain_assign and ev.value is not None:
            return _mask(m, ev.value, ev.scope, depth + 1)
    return None


def _array(m, e: ast.AST, scope: Scope) -> bool:
    """Whether ``e`` is certainly an array (not a Python number): a JAX value, a NumPy array, or a
    subscript with a tuple index that holds a slice."""
    if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Tuple) \
            and any(isinstance(p, ast.Slice) for p in e.slice.elts):
        return True
    if isinstance(e, ast.BinOp):
        return _array(m, e.left, scope) or _array(m, e.right, scope)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("abs", "sum", "max", "min") \
            and any(kw.arg == "axis" for kw in e.keywords):
        return True  # a reduction along an axis: an array
    return V.is_jax(m, e, scope) or hostarrays.numpy_array(m, e, scope)


def _used_as_array(m, e: ast.AST, scope: Scope) -> bool:
    """Whether the name ``e`` (or the name the negation is bound to) is used with an array's methods
    or attributes in its scope (``dones.sum()``, ``mask.shape``) or indexed (``dones[keep]``: a Python
    bool takes no index, and ``~`` of a list or tuple raises)."""
    if not isinstance(e, ast.Name):
        return False
    ev = m.binding(e.id, scope, _pos(e))
    if ev is None:
        return False
    names = {e.id}
    for name, events in ev.scope.events.items():  # the name the negation is bound to: ``keep = ~dones``
        if any(b.plain_assign and isinstance(b.value, ast.UnaryOp) and isinstance(b.value.op, ast.Invert)
               and isinstance(b.value.operand, ast.Name) and b.value.operand.id == e.id for b in events):
            names.add(name)
    return any((isinstance(n, ast.Attribute) and n.attr in _ARRAY_USES or isinstance(n, ast.Subscript))
               and isinstance(n.value, ast.Name) and n.value.id in names for n in ast.walk(ev.scope.node))


def _short(e: ast.AST) -> str:
    text = ast.unparse(e)
    return text if len(text) <= 40 else text[:37] + "..."
