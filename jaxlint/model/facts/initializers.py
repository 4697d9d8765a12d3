"""Draws through JAX's parameter initializers: ``init = jax.nn.initializers.glorot_normal()`` makes a
function ``init(key, shape, dtype)`` that draws from ``key`` as ``jax.random.normal`` does. Two weights
made with ``init(key, ...)`` from one key are not independent: the draws share their leading values
(probed on jax 0.10.2: ``glorot_normal()(k, (256, 10))`` divided by its scale equals the first 2,560
values of ``glorot_normal()(k, (784, 256))`` divided by its own; fresh set AU's MNIST model). The key
facts (:mod:`.keys`) count such a call as a draw from its first argument.

Only the random factories count (``constant``, ``ones`` and ``zeros`` take a key and ignore it), as
JAX spells them and as flax re-exports them (``flax.linen.initializers``, ``flax.nnx.initializers``).
"""

from __future__ import annotations

import ast
from typing import Optional

from ..python.syntax import _pos, unparse

FACTORIES = frozenset({
    "glorot_normal", "glorot_uniform", "he_normal", "he_uniform", "kaiming_normal", "kaiming_uniform",
    "lecun_normal", "lecun_uniform", "xavier_normal", "xavier_uniform", "normal", "uniform", "truncated_normal",
    "orthogonal", "delta_orthogonal", "variance_scaling",
})
_MODULES = ("jax.nn.initializers.", "flax.linen.initializers.", "flax.nnx.initializers.", "flax.linen.",
            "flax.nnx.")


def _factory(m, expr: ast.AST, scope) -> bool:
    """``expr`` is a call of one of the random initializer factories (``jax.nn.initializers.he_normal()``)."""
    if not isinstance(expr, ast.Call):
        return False
    qn = m.resolve(expr.func, scope) or ""
    module, _, last = qn.rpartition(".")
    return last in FACTORIES and (module + ".") in _MODULES and not (
        module in ("flax.linen", "flax.nnx") and last in ("normal", "uniform"))


def draw_spelling(m, call: ast.Call, scope) -> Optional[str]:
    """How ``call`` reads in a message when it draws from its first argument through an initializer:
    the factory's result called at once, or a name bound once (in the scope that reads it) to it."""
    func = call.func
    if isinstance(func, ast.Call):
        return unparse(func) if _factory(m, func, scope) else None
    if not isinstance(func, ast.Name):
        return None
    ev = m.binding(func.id, scope, _pos(func))
    if ev is None or not ev.plain_assign or len(ev.scope.events.get(func.id, ())) != 1:
        return None
    return func.id if _factory(m, ev.value, ev.scope) else None


def calls(m) -> list:
    """The calls of the module that may draw through an initializer: none where no factory is called."""
    if not any(name in m.calls_by_name for name in FACTORIES):
        return []
    return [c for c in m.calls if isinstance(c.func, (ast.Name, ast.Call)) and c.args
            and draw_spelling(m, c, m.scope_at(c)) is not None]
