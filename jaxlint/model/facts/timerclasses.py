"""Timer objects: a project's own timer class whose instance (or one of its methods) is a context
manager that reads the clock when the block starts and when it ends, and waits for nothing.

``timer = Timer()`` then ``with timer("train"): state, info = train_step(state, batch)`` (octo,
fresh set F), or ``with timer.context("train"):`` (serl, fresh set E): the block's JAX work is
dispatched asynchronously, so the figure is the dispatch. The class is read from its definition,
in this module or another module of the project (through the project resolver, fully modelled
once per process): its ``__call__`` (for ``timer(...)``) or the named method is a
``@contextmanager`` generator that reads a clock before its ``yield`` and after it, directly or
through a method of the same class (``self.tick(key)`` / ``self.tock(key)``), and runs nothing
after the ``yield`` that waits or may wait for the device. A class of a library, or one that
cannot be read, is not a timer here (its exit may wait).

Functions of the model (``m``); :func:`.timing.timer_context` asks :func:`instance_timer`, handing
it ``ops``: timing's own readings of a call (``(is_clock, calls_in, device_role)``), so that this
module does not import the one that asks it.
"""

from __future__ import annotations

import ast
from typing import Optional

from . import callables
from ..python.instances import class_named
from ..python.syntax import _pos, walk

_CONTEXTMANAGERS = frozenset({"contextlib.contextmanager", "contextlib.asynccontextmanager"})


def instance_timer(m, ctx: ast.Call, ops: tuple) -> bool:
    """Whether ``with ctx:`` is a timer object of the project (see the module's docstring):
    ``timer(...)`` calls the instance's ``__call__``, ``timer.name(...)`` its method ``name``."""
    func = ctx.func
    if isinstance(func, ast.Name):
        instance, method = func, "__call__"
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        instance, method = func.value, func.attr
    else:
        return False
    scope = m.scope_at(ctx)
    ev = m.binding(instance.id, scope, _pos(instance))
    if ev is None or not ev.plain_assign or not isinstance(ev.value, ast.Call):
        return False
    made = ev.value.func
    cls = class_named(m, made, ev.scope)
    if cls is not None:
        return timer_method(m, cls, method, ops)
    other = callables.imported_function(m, made, ev.scope)
    if other is None or m.project is None:
        return False
    summary, name = other
    return bool(m.project.timer_method(summary.path, name, method))


def timer_method_named(m, cls_name: str, method: str, ops: tuple) -> bool:
    """:func:`timer_method` of the top-level class ``cls_name`` of the module (False: none)."""
    for cls in m.classes.values():
        if cls.node.name == cls_name and cls.node in m.tree.body:
            return timer_method(m, cls, method, ops)
    return False


def timer_method(m, cls, method: str, ops: tuple) -> bool:
    """Whether calling ``method`` of the class ``cls`` gives a context manager that reads a clock
    on entry and on exit and waits for nothing at exit."""
    _calls_in = ops[1]

    f = cls.methods.get(method)
    if f is None:
        return False
    if not any(d in _CONTEXTMANAGERS for d in f.decorators):
        return _returns_timer_manager(m, cls, f, ops)
    yields = [n for n in walk(f.node) if isinstance(n, (ast.Yield, ast.YieldFrom))]
    if len(yields) != 1:
        return False
    at = (yields[0].lineno, yields[0].col_offset)
    calls = list(_calls_in(f.node.body))
    before = [c for c in calls if (c.lineno, c.col_offset) < at]
    after = [c for c in calls if (c.lineno, c.col_offset) > at]
    return _times_between(m, cls, f, before, after, ops, by_name=False)


def _times_between(m, cls, f, first: list, last: list, ops: tuple, by_name: bool) -> bool:
    """Whether the calls made on entry (``first``) and on exit (``last``), with those of the
    timer's methods they call one level down (on ``self``; with ``by_name``, on any object), read
    the clock on both sides and wait for nothing on exit."""
    is_clock, _calls_in, _device_role = ops

    def expand(found: list) -> list:
        out = list(found)
        for c in found:
            if by_name:
                g = cls.methods.get(c.func.attr) if isinstance(c.func, ast.Attribute) else None
            else:
                g = _own_method(cls, c)
            if g is not None and g is not f:
                out += list(_calls_in(g.node.body))
        return out

    first, last = expand(first), expand(last)
    return (any(is_clock(m, c) for c in first) and any(is_clock(m, c) for c in last)
            and not any(_device_role(m, c, 1) in ("wait", "maybe") for c in last))


def _returns_timer_manager(m, cls, f, ops: tuple) -> bool:
    """``def context(self, key): return _TimerContext(self, key)``: the method returns an instance
    of a class of this module whose ``__enter__`` and ``__exit__`` read the clock, directly or
    through a method of ``cls`` they call by name (``self.timer.tick(key)``), and whose exit waits
    for nothing."""
    _calls_in = ops[1]
    rets = callables.returned_values(f.node)
    if len(rets) != 1 or not isinstance(rets[0], ast.Call):
        return False
    manager = class_named(m, rets[0].func, m.scope_at(rets[0]))
    if manager is None or manager is cls:
        return False
    enter, exit_ = manager.methods.get("__enter__"), manager.methods.get("__exit__")
    if enter is None or exit_ is None:
        return False
    return _times_between(m, cls, f, list(_calls_in(enter.node.body)), list(_calls_in(exit_.node.body)), ops,
                          by_name=True)


def _own_method(cls, call: ast.Call) -> Optional[object]:
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return cls.methods.get(func.attr)
    return None
