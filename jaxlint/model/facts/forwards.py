"""A model's forward pass called from Python: ``model.apply(variables, x)`` on an instance of a flax
``linen`` module class of this module, or ``net.apply(params, rng, x)`` on a function transformed
by haiku (``hk.transform``, ``hk.without_apply_rng(hk.transform(f))``, ``hk.transform_with_state``).

Both return JAX arrays (jitted or not): the values fact (facts/values.py) asks. Measured
2026-12-06 and not kept: reporting such a call outside jit at every step as JAX701 gave 11 findings on
20 sets, 0 TRUE, 5 HARMLESS (one-shot evaluations and plots) and 6 FALSE (cleanrl replaces the
instance's method with its jitted form, ``q_network.apply = jax.jit(q_network.apply)``). What is
kept (facts/forwardchains.py): a forward pass outside any trace whose output feeds its own next
input in a loop of steps (a sampler's reverse chain, a rollout), one sequential forward pass per step.
Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from . import callables, libraryobjects
from ..python.records import Scope

_LINEN_MODULES = frozenset({"flax.linen.Module", "flax.linen.module.Module"})
_HAIKU_TRANSFORMS = frozenset({"haiku.transform", "haiku.transform_with_state", "haiku.without_apply_rng",
                               "haiku.multi_transform", "haiku.multi_transform_with_state"})


def model_forward(m, call: ast.Call, scope: Scope) -> Optional[str]:
    """How a message names the forward pass ``call`` runs (see the module's text), or None."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "apply"):
        return None
    receiver = func.value
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "params" for k in first.keys):
        # ``model.apply({"params": params}, x)``: flax linen's variables, by collection name
        return f"the forward pass of the flax module `{ast.unparse(receiver)[:30]}`"
    cls = callables.instance_class(m, receiver, scope)
    if cls is not None:
        outer = cls.scope.parent if cls.scope is not None else m.module_scope
        if any(m.resolve(b, outer or m.module_scope) in _LINEN_MODULES for b in cls.node.bases):
            return f"the forward pass of the flax module `{cls.node.name}`"
        return None
    maker = libraryobjects.library_maker(m, receiver, scope)
    if maker in _HAIKU_TRANSFORMS:
        return f"the forward pass of the haiku-transformed function (`{maker.rsplit('.', 1)[1]}`)"
    return None

