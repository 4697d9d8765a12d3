"""The parts of ``jax.jit``'s cache key a user can change, named by parameter (a trace's
:class:`~.collector.Signature`), for the retrace reasons of the run report and ``inspect``."""

from __future__ import annotations

import inspect
from typing import Any, Optional

import jax

from .adapters import base
from .collector import Signature


def _safe_repr(value: Any) -> str:
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        text = repr(value)
    elif isinstance(value, tuple) and all(v is None or isinstance(v, (bool, int, float, str)) for v in value):
        text = repr(value)
    else:
        text = f"<{type(value).__qualname__} object>"
    return text if len(text) <= 40 else text[:39] + "…"


def signature(fun: Any, ji: Any, dbg: Any, avals: Any, args: tuple, kwargs: dict) -> Signature:
    """The parts of jit's cache key that users can change, named by parameter."""
    positional, star = base.positional_params(fun, ji)

    def name_of(i: int) -> str:
        if i < len(positional):
            return positional[i]
        return f"{star or 'args'}[{i - len(positional)}]"

    static_nums = set(getattr(ji, "static_argnums", ()) or ())
    static_names = set(getattr(ji, "static_argnames", ()) or ())
    static, trees = {}, {}
    partitioned, partitioned_trees = None, {}
    for i, value in enumerate(args):
        if i in static_nums:
            by_arg = _equinox_static(fun, value)
            if by_arg is not None:  # the user's own arguments, as filter_jit split them
                static.update(by_arg[0])
                partitioned = "equinox.filter_jit"
                partitioned_trees = by_arg[1]
                continue
            static[name_of(i)] = (_safe_repr(value), _hash(value))
        else:
            trees[name_of(i)] = jax.tree_util.tree_structure(value)
    for k, value in kwargs.items():
        if k in static_names:
            static[k] = (_safe_repr(value), _hash(value))
        else:
            trees[k] = jax.tree_util.tree_structure(value)
    if partitioned:
        # filter_jit's dynamic halves are flat lists of array leaves: the structure of the user's
        # arguments is in the static half, one entry per argument
        for k in [k for k in trees if k.startswith("dynamic_")]:
            del trees[k]
        trees.update(partitioned_trees)
    names = list(getattr(dbg, "arg_names", None) or ())
    avals = list(avals)
    if len(names) != len(avals):
        names = [f"leaf[{i}]" for i in range(len(avals))]
    leaves = {}
    for path, aval in zip(names, avals):
        leaves[path] = (tuple(getattr(aval, "shape", ())), str(getattr(aval, "dtype", "?")),
                        bool(getattr(aval, "weak_type", False)), getattr(aval, "sharding", None))
    sig = Signature(static, trees, leaves)
    sig.partitioned = partitioned
    return sig


def _equinox_static(fun: Any, value: Any) -> Optional[tuple]:
    """The static half of ``eqx.filter_jit``'s arguments, per argument of the user's function:
    filter_jit calls one ``jax.jit``-ed function with every non-array leaf of the call (Python
    floats included) packed in one static argument ``(static_fun, static_first, static_rest)``,
    each ``(leaves, treedef)`` with None where an array was. ``({parameter name: (shown value,
    hash)} for the parameters with a static leaf, {parameter name: pytree structure} for the
    others)``; None when ``value`` is not that."""
    if getattr(fun, "__module__", None) != "equinox._jit" or not (isinstance(value, tuple) and len(value) == 3):
        return None
    try:
        parts = []
        for leaves, treedef in value:
            parts.append(jax.tree_util.tree_unflatten(treedef, list(leaves)))
        fun_part, first, (rest, kwargs) = parts
        user = fun_part[0] if isinstance(fun_part, tuple) and fun_part else fun_part
        params = [p.name for p in inspect.signature(user).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        given = [first, *list(rest)[:-1]]  # filter_jit adds one dummy None to the positional ones
        named = [(params[i] if i < len(params) else f"args[{i - len(params)}]", v) for i, v in enumerate(given)]
        named += list(dict(kwargs).items())
    except Exception:
        return None
    static, trees = {}, {}
    for name, v in named:
        if jax.tree_util.tree_leaves(v):  # a Python value (or a module's static fields): static
            static[name] = (_safe_repr(v), _hash(v))
        else:  # arrays only (None here): its structure; shapes and dtypes are in the leaves
            trees[name] = jax.tree_util.tree_structure(v)
    return static, trees


def _hash(value: Any) -> Any:
    try:
        return hash(value)
    except Exception:
        return id(value)
