"""Keys that every row of a ``jax.vmap`` shares: ``jax.vmap(update)(x, out)`` where ``update``
draws with ``jax.random.categorical(r, ...)`` and ``r`` is closed over, or a key argument mapped
with ``in_axes=None``.

``jax.vmap`` maps a function over an axis of the arguments its ``in_axes`` map; a value the
function closes over, or an argument whose ``in_axes`` entry is ``None``, is broadcast: every row
sees the same value. JAX's random functions are pure in the key, so a draw from such a key gives
every row the same random numbers (the same Gumbel noise for every sampled row, the same dropout
mask for every example). The facts:

* the mapped function is a function of this module (a def or lambda: its body is read);
* its draw (a ``jax.random`` sampler, a distribution's ``sample(seed=key)``, an rlax distribution's
  ``sample(key, ...)``) reads a key that is the same for every row: a name bound
  outside the function, or a parameter that ``in_axes`` does not map (``None`` at its position;
  a bare ``in_axes=None`` maps nothing), or a key split from one of these inside the function
  (``split`` of one key gives the same subkeys on every row); a key folded with row data
  (``fold_in(key, i)``) is not followed;
* the draw's result is read.

A parameter ``in_axes`` maps (the default 0, a dict or a name: unknown layout, taken as mapped)
is a per-row key. Functions of the model (``m``): JAX502 (jaxlint_rules/rng.py) asks them.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, keys
from .keyhandoffs import _code
from .keys import SAMPLERS
from ..python.syntax import _pos, call_arg

_VMAPS = frozenset({"jax.vmap"})


class RowKeyDraw:
    """A draw in a vmapped function from a key every row shares: ``call`` the draw, ``key`` the
    name it reads (the broadcast key, or the name split from it), ``source`` the broadcast key's
    name, ``how`` "closed" or "unmapped", ``vmap`` the ``jax.vmap`` call, ``func`` the mapped
    function."""

    __slots__ = ("call", "key", "source", "how", "vmap", "func")

    def __init__(self, call, key, source, how, vmap, func):
        self.call = call
        self.key = key
        self.source = source
        self.how = how
        self.vmap = vmap
        self.func = func


def row_key_draws(m) -> list:
    """:class:`RowKeyDraw` records, one per draw, in source order."""
    memo = m.facts.row_key_draws_memo
    if memo is not None:
        return memo
    out: list = []
    if keys.may_call_jax_random(m) or "sample" in m.attr_names:  # a draw of jax.random or a distribution
        seen: set = set()
        applied: Optional[dict] = None
        for vmap in m.calls_named(("vmap",)):
            scope = m.scope_at(vmap)
            if m.resolve(vmap.func, scope) not in _VMAPS or not vmap.args or not m.work.spend():
                continue
            if applied is None:  # ``vmap(f)(x, key)``: the call of the mapped function, by the vmap call
                applied = {id(c.func): c for c in m.calls_by_name.get("", ()) if isinstance(c.func, ast.Call)}
            for g in callables.local_functions(m, vmap.args[0], scope):
                if g.node is None or id(g.node) in seen:
                    continue
                for found in _draws(m, g, vmap, applied.get(id(vmap))):
                    seen.add(id(g.node))
                    out.append(found)
    out.sort(key=lambda d: _pos(d.call))
    m.facts.row_key_draws_memo = out
    return out


def _unmapped(g, vmap: ast.Call) -> Optional[list]:
    """The parameters of ``g`` that ``in_axes`` leaves unmapped (None when it maps nothing: a
    bare ``None``, which vmap rejects without ``out_axes`` tricks, is left alone)."""
    axes = call_arg(vmap, 1, "in_axes")
    params = list(g.params)
    if axes is None:
        return []
    if isinstance(axes, ast.Constant) and axes.value is None:
        return None
    if isinstance(axes, (ast.Tuple, ast.List)):
        if any(isinstance(e, ast.Starred) for e in axes.elts):
            return []
        return [params[i] for i, ax in enumerate(axes.elts)
                if i < len(params) and isinstance(ax, ast.Constant) and ax.value is None]
    return []


def _draws(m, g, vmap: ast.Call, applied: Optional[ast.Call]) -> list:
    unmapped = _unmapped(g, vmap)
    if unmapped is None:
        return []
    own = set(g.params) | set(g.kwonly)
    if g.node.args.vararg is not None or g.node.args.kwarg is not None:
        return []  # ``*args``: which argument binds which name is not read here
    nodes = _code(m, g.node, "\0")
    # names split (not folded) from a shared key inside the function: the same subkeys on every row
    split_from: dict = {}
    out = []
    for n in nodes:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
            if keys.random_function(m, n.value, m.scope_at(n.value)) == "split":
                src = call_arg(n.value, 0, "key")
                base = _shared(m, src, g, applied, own, unmapped, split_from)
                if base is not None:
                    for t in n.targets:
                        for x in ast.walk(t):
                            if isinstance(x, ast.Name):
                                split_from[x.id] = base
        if not isinstance(n, ast.Call):
            continue
        arg = _drawn_key(m, n)
        if arg is None:
            continue
        base = _shared(m, arg, g, applied, own, unmapped, split_from)
        if base is None or keys.result_dead(m, n):
            continue
        name, how = base
        out.append(RowKeyDraw(n, _name(arg), name, how, vmap, g))
    return out


def _drawn_key(m, call: ast.Call) -> Optional[ast.AST]:
    """The key a draw reads: a ``jax.random`` sampler's, a distribution's ``sample(seed=key)``, or the
    positional key of an rlax distribution's ``sample(key, ...)`` (``rlax.epsilon_greedy(eps).sample(key,
    q)``: ``names.RLAX_SAMPLERS``); None for any other call."""
    scope = m.scope_at(call)
    if keys.random_function(m, call, scope) in SAMPLERS:
        return call_arg(call, 0, "key")
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in keys.DIST_SAMPLE):
        return None
    seed = next((k.value for k in call.keywords if k.arg == "seed"), None)
    if seed is not None:
        return seed
    maker = func.value
    if isinstance(maker, ast.Name):
        ev = m.binding(maker.id, scope, _pos(maker))
        maker = ev.value if ev is not None and ev.plain_assign else None
        scope = ev.scope if ev is not None else scope
    if isinstance(maker, ast.Call) and m.resolve(maker.func, scope) in N.RLAX_SAMPLERS and call.args:
        return call.args[0]
    return None


def _name(expr) -> Optional[str]:
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _row_index(m, expr, g) -> bool:
    """Whether ``expr`` indexes a key with something bound inside ``g`` (``keys[i]`` with ``i`` a
    mapped parameter: one key per row)."""
    while isinstance(expr, ast.Subscript):
        for x in ast.walk(expr.slice):
            if isinstance(x, ast.Name):
                ev = m.binding(x.id, m.scope_at(expr), _pos(x))
                if ev is None or _within(ev.scope, g.scope):
                    return True
        expr = expr.value
    return False


def _argument(g, parent: Optional[ast.Call], param: str) -> Optional[ast.AST]:
    """The argument that ``parent``, the call of ``vmap(...)``'s result, gives ``param`` (None
    when the mapped function is not called there, or not with it)."""
    if parent is None:
        return None
    i = g.params.index(param)
    if i < len(parent.args) and not any(isinstance(a, ast.Starred) for a in parent.args[:i + 1]):
        return parent.args[i]
    return next((kw.value for kw in parent.keywords if kw.arg == param), None)


def _shared(m, expr, g, applied, own: set, unmapped: list, split_from: dict) -> Optional[tuple]:
    """``(name, "closed" | "unmapped")`` when ``expr`` is a key every row of the vmap shares."""
    name = _name(expr)
    if name is None or _row_index(m, expr, g):
        return None
    ev = m.binding(name, m.scope_at(expr), _pos(expr))
    if ev is None:
        return None
    if _within(ev.scope, g.scope):
        if ev.kind == "param" and ev.scope is g.scope and name in unmapped:
            given = _argument(g, applied, name)
            # the key given at the call right after vmap (not a literal: ``None`` is no key)
            return (name, "unmapped") if given is not None and not isinstance(given, ast.Constant) else None
        if ev.kind == "assign" and name in split_from and _sole_binding(m, name, ev.scope):
            return split_from[name]
        return None
    if name in own:
        return None
    if ev.kind not in ("assign", "param"):
        return None
    return name, "closed"


def _sole_binding(m, name: str, scope) -> bool:
    return len(scope.events.get(name, ())) == 1


def _within(scope, outer) -> bool:
    """Whether ``scope`` is ``outer`` or a scope nested in it."""
    while scope is not None:
        if scope is outer:
            return True
        scope = scope.parent
    return False
