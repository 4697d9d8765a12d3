"""Methods a library's own loop calls at every step: a class of the module that subclasses a
library's algorithm class and defines the method the library's training loop calls per step
(stable-baselines3's ``learn`` calls ``train()`` after every ``train_freq`` environment steps).
What the library calls is data (``names.LIBRARY_LOOP_METHODS``), read from its public classes;
the user's names decide nothing. Functions of the model (``m``), asked by JAX201.
"""

from __future__ import annotations

from typing import Optional

from ... import names as N
from ..python.instances import class_named as _class_named
from ..python.records import FunctionInfo


def library_loop_method(m, f: FunctionInfo) -> Optional[str]:
    """The library class whose training loop calls the method ``f`` at every step, when ``f`` is
    a method of a class of this module that subclasses it (directly, or through classes of this
    module) and ``f``'s name is one that loop calls; None otherwise."""
    if f.cls is None or f.name not in _CALLED:
        return None
    return _base_calling(m, f.cls, f.name, 0)


_CALLED = frozenset(name for names in N.LIBRARY_LOOP_METHODS.values() for name in names)


def _base_calling(m, cls, name: str, depth: int) -> Optional[str]:
    if depth > 4:
        return None
    outer = cls.scope.parent if cls.scope is not None else None
    for base in cls.node.bases:
        qn = m.resolve(base, outer) if outer is not None else None
        if qn is not None and name in N.LIBRARY_LOOP_METHODS.get(qn, ()):
            return qn
        local = _class_named(m, base, outer) if outer is not None else None
        if local is not None:
            found = _base_calling(m, local, name, depth + 1)
            if found is not None:
                return found
    return None
