"""The auxiliary output of a gradient: ``(loss, aux), grads = jax.value_and_grad(f, has_aux=True)(...)``.

JAX hands the ``aux`` a loss function returns back as it is: a JAX value where the function computed
one, but a Python number, string or host object where it returned one (a host environment's reward,
an ``int`` step count; flax 0.12.8's ``nnx.value_and_grad`` returns a Python ``int`` aux as an
``int``, checked on CPU). So a part of a gradient's result is a JAX value by the transform only where
it is the value or the gradients; a part inside the aux is what the loss function's ``return`` put
there. :func:`aux_part_kind` answers for a binding of such a part, following names bound to parts
(``loss_and_aux, grads = ...``; ``loss, aux = loss_and_aux``; ``reward, state = aux``).
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from ..python.records import Scope
from . import callables

_VALUE_AND_GRAD = frozenset({"jax.value_and_grad", "flax.nnx.value_and_grad", "equinox.filter_value_and_grad"})
_CHAIN = 4  # names followed back to the gradient call


def aux_part_kind(m, value: ast.AST, path: list, scope: Scope, is_jax) -> Optional[bool]:
    """Whether the part ``path`` of ``value`` is a JAX value, where that part lies inside the aux of a
    ``has_aux`` gradient of a function of this module; None where this fact does not decide (not a
    gradient's aux, or the loss function is not known here). ``is_jax``: the value-kind question."""
    path = list(path)
    for _ in range(_CHAIN):
        if not isinstance(value, ast.Name):
            break
        ev = m.binding(value.id, scope, (value.lineno, value.col_offset))
        if ev is None or ev.kind != "assign" or ev.value is None:
            return None
        path = list(ev.path or ()) + path
        value, scope = ev.value, ev.scope
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Call) and value.func.args):
        return None
    transform = value.func
    qn = m.resolve(transform.func, scope)
    if qn not in N.GRADIENT_TRANSFORMS or not any(
            kw.arg == "has_aux" and isinstance(kw.value, ast.Constant) and kw.value.value is True
            for kw in transform.keywords):
        return None
    prefix = [0, 1] if qn in _VALUE_AND_GRAD else [1]
    if path[:len(prefix)] != prefix:
        return None  # the value or the gradients: JAX values
    rest = path[len(prefix):]
    # a candidate whose returns are not all pairs cannot be the one given ``has_aux`` (it would raise):
    # a notebook's later ``def loss_fn`` of another shape
    funcs = [f for f in callables.local_functions(m, transform.args[0], scope) + _other_defs(m, transform.args[0])
             if f.returns and all(isinstance(r, ast.Tuple) and len(r.elts) == 2 for r in f.returns)]
    if not funcs:
        return None
    for f in funcs:
        for r in f.returns:
            part = r.elts[1]
            for i in rest:
                if not (isinstance(part, ast.Tuple) and isinstance(i, int) and i < len(part.elts)):
                    break
                part = part.elts[i]
            if is_jax(m, part, f.scope) or _depends(m, part, f.scope, _differentiated(f, transform), 0):
                return True
    return False


def _differentiated(f, transform: ast.Call) -> set:
    """The names of ``f``'s parameters the transform differentiates (``argnums``, 0 by default): JVP
    tracers inside, so what is computed from them is a JAX value too."""
    nums = {0}
    for kw in transform.keywords:
        if kw.arg == "argnums":
            try:
                value = ast.literal_eval(kw.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return set()  # not a literal: which parameters are differentiated is not shown
            nums = set(value) if isinstance(value, (tuple, list)) else {value}
    params = [a.arg for a in f.node.args.posonlyargs + f.node.args.args]
    return {params[i] for i in nums if isinstance(i, int) and 0 <= i < len(params)}


def _depends(m, e: ast.AST, scope: Scope, names: set, depth: int) -> bool:
    """Whether ``e`` reads one of ``names``, directly or through names assigned in ``scope``."""
    if depth > _CHAIN or not names:
        return False
    for n in ast.walk(e):
        if not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)):
            continue
        if n.id in names:
            return True
        ev = m.binding(n.id, scope, (n.lineno, n.col_offset))
        if ev is not None and ev.scope is scope and ev.kind == "assign" and ev.value is not None \
                and _depends(m, ev.value, scope, names, depth + 1):
            return True
    return False


def _other_defs(m, e: ast.AST) -> list:
    """Every top-level ``def`` of the name ``e`` in the module: which one a function body reaches
    depends on when it runs (a notebook may define ``loss_fn`` twice, its cells running in between)."""
    if not isinstance(e, ast.Name):
        return []
    return [f for f in m.functions if f.name == e.id and f.parent is None and f.cls is None]
