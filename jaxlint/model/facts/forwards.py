"""A model's forward pass called from Python: ``model.apply(variables, x)`` on an instance of a flax
``linen`` module class of this module, or ``net.apply(params, rng, x)`` on a function transformed
by haiku (``hk.transform``, ``hk.without_apply_rng(hk.transform(f))``, ``hk.transform_with_state``).

Both are plain Python functions: outside ``jit`` every layer's operations dispatch one by one and
the module's Python runs again on every call, and what they return is JAX arrays. Functions of the
model (``m``): the values fact (facts/values.py) and JAX701 ask them.
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
