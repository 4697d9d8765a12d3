"""The one forwarding base of jaxlint's stand-ins for JAX's own objects (``hooks.Counted`` for what
``jax.jit``/``jax.pmap`` return, ``eager.Jitted`` for JAX's jitted ``jax.numpy`` functions): the
real object is ``_jaxlint_real``, and attribute access, binding as a method, equality, hashing
and ``repr`` all go to it, so caches keyed on it behave as without jaxlint."""

from __future__ import annotations

import types


class Forwarding:
    _jaxlint_real: object

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    def __getattr__(self, name):
        if name.startswith("_jaxlint_"):
            raise AttributeError(name)
        return getattr(self._jaxlint_real, name)

    def __eq__(self, other):
        return self._jaxlint_real == (other._jaxlint_real if isinstance(other, Forwarding) else other)

    def __hash__(self):
        return hash(self._jaxlint_real)

    def __repr__(self):
        return repr(self._jaxlint_real)
