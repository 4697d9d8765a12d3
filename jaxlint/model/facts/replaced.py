"""Copies of a record with fields given anew: which value a field of such a copy holds.

``buffer = buffer.replace(can_sample=jax.jit(buffer.can_sample))`` makes ``buffer.can_sample`` the
jitted function: the keyword copy of a flax.struct, chex or flashbax dataclass (``.replace``), of a
NamedTuple (``._replace``) or of any dataclass (``dataclasses.replace``) holds the given value in that
field and every other field as it was. Functions of the model (``m``); callables asks them.
"""

from __future__ import annotations

import ast
from typing import Optional

from ..python import limits as L
from ..python.records import Scope
from ..python.syntax import _pos


# Copies of a record with some fields given anew by keyword: ``obj.replace(f=v)`` (flax.struct,
# chex and flashbax dataclasses), ``obj._replace(f=v)`` (NamedTuple), ``dataclasses.replace(obj, f=v)``.
_REPLACE_METHODS = frozenset({"replace", "_replace"})


def replaced_field(m, name: ast.Name, attr: str, scope: Scope) -> Optional[tuple]:
    """``(value, scope)`` when ``name`` is bound to a copy of a record whose field ``attr`` was given by
    keyword (``buffer = buffer.replace(can_sample=jax.jit(buffer.can_sample))``: ``buffer.can_sample``
    is then that value), following earlier copies that leave ``attr`` as it was
    (``b = b.replace(add=...)``). None when a binding on the way is anything else."""
    pos = _pos(name)
    for _ in range(L.CALLABLE_CHAIN):
        ev = m.binding(name.id, scope, pos)
        if ev is None or not ev.plain_assign or not isinstance(ev.value, ast.Call):
            return None
        call = ev.value
        if isinstance(call.func, ast.Attribute) and call.func.attr in _REPLACE_METHODS and m.resolve(
                call.func, ev.scope) is None:
            source = call.func.value
        elif m.resolve(call.func, ev.scope) == "dataclasses.replace" and call.args:
            source = call.args[0]
        else:
            return None
        if call.args and source is not call.args[0]:
            return None  # ``s.replace("a", "b")``: a string's replace, no record
        given = next((kw.value for kw in call.keywords if kw.arg == attr), None)
        if given is not None:
            return given, ev.scope
        if not isinstance(source, ast.Name) or any(kw.arg is None for kw in call.keywords):
            return None
        name, scope, pos = source, ev.scope, _pos(source)
    return None
