"""A jitted method whose ``self`` is a static argument, called on an instance made anew in every iteration of
the loop around the call (asked by JAX103; fresh set AX: ``@partial(jit, static_argnums=0) def update(self,
params, batch)`` and ``model = JAXNN(params=new_params)`` after each step). A static argument is part of the
cache key by its hash and equality; an instance of a class that defines neither ``__eq__`` nor ``__hash__``
(nor inherits them from a base the module does not show) equals only itself, so each new instance is a cache
miss: the method is traced and compiled again at every call (a probe: 20 traces in 20 steps).

A function of the model (``m``), imported explicitly."""

from __future__ import annotations

import ast
from typing import Optional

from . import callables
from ..python.instances import class_named
from ..python.syntax import _pos

_IDENTITY_OVERRIDES = frozenset({"__eq__", "__hash__"})


class FreshSelf:
    """``call`` (``model.update(...)``) of ``method`` (its jit wrapper ``wrap``) on ``receiver``, an instance of
    ``cls`` that ``binding`` makes anew in every iteration of ``loop``."""

    __slots__ = ("call", "receiver", "cls", "method", "wrap", "binding", "loop")

    def __init__(self, call, receiver, cls, method, wrap, binding, loop):
        self.call, self.receiver, self.cls, self.method = call, receiver, cls, method
        self.wrap, self.binding, self.loop = wrap, binding, loop


def fresh_static_self(m, call: ast.Call) -> Optional[FreshSelf]:
    """The :class:`FreshSelf` ``call`` makes, or None."""
    func = call.func
    ctx = m.context(call)
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)) or ctx is None or not ctx.loops:
        return None
    loop = ctx.loops[-1]
    if loop.bounded or m.in_traced_code(call):
        return None
    scope = ctx.scope
    cls = callables.instance_class(m, func.value, scope, 0)
    if cls is None or not _identity_equality(m, cls):
        return None
    method = cls.methods.get(func.attr)
    wrap = method.jit_entry if method is not None else None
    if wrap is None or not wrap.decorator or not _self_static(wrap, method):
        return None
    for ev in scope.events.get(func.value.id, ()):
        if loop not in ev.loops or not ev.plain_assign or not isinstance(ev.value, ast.Call):
            continue
        if class_named(m, ev.value.func, scope) is cls \
                and m.binding(func.value.id, scope, _pos(func.value)) is not None:
            return FreshSelf(call, func.value, cls, method, wrap, ev, loop)
    return None


def _self_static(wrap, method) -> bool:
    params = method.params
    if not params:
        return False
    return 0 in (wrap.static_argnums or ()) or params[0] in (wrap.static_argnames or ())


def _identity_equality(m, cls) -> bool:
    """Whether instances of ``cls`` compare (and hash) by identity: no decorator (a dataclass defines
    ``__eq__``), no base but ``object`` or classes of this module that are so too, and no ``__eq__`` or
    ``__hash__`` of its own."""
    seen = 0
    todo = [cls]
    while todo:
        c = todo.pop()
        seen += 1
        if seen > 8 or c.node.decorator_list or c.node.keywords or _IDENTITY_OVERRIDES & set(c.methods):
            return False
        for b in c.node.bases:
            if isinstance(b, ast.Name) and b.id == "object":
                continue
            base = class_named(m, b, m.module_scope)
            if base is None:
                return False  # a base the module does not show may define equality
            todo.append(base)
    return True
