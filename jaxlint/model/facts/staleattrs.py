"""Stale attributes: an attribute of ``self`` that a method compiled once reads while JAX traces
it, and that another method of the class rebinds before calling the compiled method again.

``self._step = jax.jit(self._step_impl)`` in ``__init__`` makes one wrapper per instance around
the bound method: ``self`` is not an argument of the compiled function, so ``self.eos_ids`` read
in ``_step_impl`` is read once, at trace time, and baked into the program; later calls with
arguments of the same shapes reuse it. ``generate`` setting ``self.eos_ids = eos_ids`` and then
calling ``self._step(tokens)`` changes nothing after the first call (measured on jax 0.10.2 CPU:
tests/test_stale_attributes.py runs it).

:func:`stale_attribute_reads` gives, for a method compiled that way, the reads with JAX603's facts
(``compiled-once``, ``rebound-after-call``, ``new-value``). Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from . import callables, frequency
from .closures import _loops_of, traced_bodies
from .jaxrecords import JitWrap
from .proof import proven, unknown
from ..python.records import FunctionInfo
from ..python.syntax import _pos, walk

_CALLABLE_MAKERS = (ast.Lambda,)


class StaleAttribute:
    """``read`` (``self.attr`` in ``body``, run by the trace of the method ``func``) and
    ``rebinding`` (the ``self.attr = ...`` statement in ``method``) with the call of the compiled
    wrapper (stored as ``self.<wrapper>``) after it, and the three facts."""

    __slots__ = ("func", "body", "read", "attr", "wrapper", "method", "rebinding", "call", "facts")

    def __init__(self, func, body, read, attr, wrapper, method, rebinding, call, facts):
        self.func, self.body, self.read, self.attr, self.wrapper = func, body, read, attr, wrapper
        self.method, self.rebinding, self.call, self.facts = method, rebinding, call, facts


def _self_name(f: FunctionInfo) -> Optional[str]:
    """The first parameter of a plain method (not a static or class method)."""
    if f.cls is None or not isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not f.params:
        return None
    if any(d.endswith(("staticmethod", "classmethod")) for d in f.decorators):
        return None
    return f.params[0]


def _stored_wrapper(m, f: FunctionInfo) -> Optional[tuple]:
    """``(attribute, wrap)`` when ``f`` is compiled once per instance: ``self.attr = jax.jit(self.f)``
    in ``__init__``, the only assignment of ``self.attr`` in the class."""
    cls = f.cls
    init = cls.methods.get("__init__")
    me = init and _self_name(init)
    if me is None:
        return None
    for wrap in m.jit_wraps:
        if wrap.decorator or wrap.kind not in ("jit", "pjit") or not isinstance(wrap.node, ast.Call):
            continue
        t = wrap.target
        if not (isinstance(t, ast.Attribute) and t.attr == f.name and isinstance(t.value, ast.Name)
                and t.value.id == me and wrap.ctx.scope is init.scope):
            continue
        stmt = next((x for x in init.node.body if isinstance(x, ast.Assign) and x.value is wrap.node), None)
        if stmt is None or len(stmt.targets) != 1:
            continue  # made in a branch or a nested block of __init__: not proven once per instance
        target = stmt.targets[0]
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == me \
                and len(cls.self_attrs.get(target.attr, ())) == 1:
            return target.attr, wrap
    return None


def _self_stores(m, g: FunctionInfo, attr: str) -> list:
    """The statements of method ``g`` (nested functions left out) that assign ``self.attr``."""
    me = _self_name(g)
    out = []
    for node in walk(g.node):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for x in walk(t):
                    if isinstance(x, ast.Attribute) and x.attr == attr and isinstance(x.value, ast.Name) \
                            and x.value.id == me and isinstance(x.ctx, ast.Store) and m.function_at(node) is g:
                        out.append(node)
    return out


def _wrapper_calls(m, g: FunctionInfo, attr: str, wrap: JitWrap) -> list:
    """The calls ``self.<attr>(...)`` of the compiled wrapper in method ``g``'s own code."""
    me = _self_name(g)
    return [c for c in g.calls if isinstance(c.func, ast.Attribute) and c.func.attr == attr
            and isinstance(c.func.value, ast.Name) and c.func.value.id == me
            and callables.callable_info(m, c.func, m.scope_at(c)) is wrap]


def stale_attribute_reads(m, f: FunctionInfo) -> list:
    """The :class:`StaleAttribute` reads of method ``f``, compiled once per instance."""
    me = _self_name(f)
    if me is None or f.jit_entry is None:
        return []
    stored = _stored_wrapper(m, f)
    if stored is None:
        return []
    wrapper, wrap = stored
    cls = f.cls
    bodies = [g for g in traced_bodies(m, f) if g is f or _pos(f.node) <= _pos(g.node) <= (
        f.node.end_lineno, f.node.end_col_offset)]
    out: list = []
    seen: set = set()
    for body in bodies:
        for n in walk(body.node):
            if not (isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name)
                    and n.value.id == me and n.attr not in seen):
                continue
            found = m._lookup(me, m.scope_at(n), _pos(n))
            if found is None or found[0].kind != "param" or found[0].scope is not f.scope:
                continue
            attr = n.attr
            if attr == wrapper or attr in cls.methods or any(
                    isinstance(v, _CALLABLE_MAKERS) or callables.callable_info(m, v, cls.scope) is not None
                    for v in cls.self_attrs.get(attr, ())):
                continue
            stale = _rebound(m, f, n, attr, wrapper, wrap)
            if stale is not None:
                seen.add(attr)
                out.append(stale)
    return out


def _rebound(m, f, read, attr, wrapper, wrap) -> Optional[StaleAttribute]:
    """The best-proven rebinding of ``self.attr`` in a method (not ``__init__``, not the traced
    code) that calls the compiled wrapper after it."""
    best = None
    for name, g in f.cls.methods.items():
        if name == "__init__" or g is f or _self_name(g) is None:
            continue
        calls = _wrapper_calls(m, g, wrapper, wrap)
        if not calls:
            continue
        for stmt in _self_stores(m, g, attr):
            later = [c for c in calls if _pos(c) > _pos(stmt)]
            if not later:
                continue
            facts = [_once(f, wrapper), _after(m, f, g, stmt, calls, later[0]), _new_value(m, g, stmt, attr)]
            score = sum(x.status != "proven" for x in facts)
            if best is None or score < best[0]:
                best = (score, StaleAttribute(f, f, read, attr, wrapper, g, stmt, later[0], facts))
    return best[1] if best is not None else None


def _once(f, wrapper: str):
    return proven("compiled-once", f"`self.{wrapper} = jax.jit(self.{f.name})` is made once per instance, in "
                                   f"`__init__`: later calls reuse the program traced by the first")


def _after(m, f, g, stmt, calls, call):
    """rebound-after-call: a loop of ``g`` that rebinds and calls; a call before the rebinding and
    one after; or ``g`` itself proven to run again and again."""
    ctx = m.context(stmt)
    cctx = m.context(call)
    if ctx is not None and cctx is not None:
        for lp in reversed(ctx.loops):
            if lp.kind != "comprehension" and lp in cctx.loops:
                return proven("rebound-after-call", f"the loop on line {lp.node.lineno} rebinds `self.{read_attr(stmt)}`"
                                                    f" and calls `self.{call.func.attr}`: every call after the first "
                                                    "runs the first trace")
    if any(_pos(c) < _pos(stmt) for c in calls):
        return proven("rebound-after-call", f"`{g.name}` calls the compiled `{f.name}`, rebinds the attribute on line "
                                            f"{stmt.lineno} and calls it again on line {call.lineno}")
    rep = frequency.repeats(m, g)
    if rep is not None and rep.kind in ("loop", "caller"):
        where = f" (line {rep.call.lineno})" if rep.call is not None else ""
        return proven("rebound-after-call", f"`{g.name}` rebinds the attribute before each call of the compiled "
                                            f"`{f.name}`, and runs again and again{where}: every call after the "
                                            "first runs the first trace")
    return unknown("rebound-after-call", f"`{g.name}` rebinds the attribute (line {stmt.lineno}) before it calls the "
                                         f"compiled `{f.name}`; whether it runs more than once on one instance is "
                                         "not known")


def read_attr(stmt) -> str:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    for t in targets:
        for x in walk(t):
            if isinstance(x, ast.Attribute) and isinstance(x.ctx, ast.Store):
                return x.attr
    return "?"


def _new_value(m, g: FunctionInfo, stmt, attr: str):
    """new-value: an augmented assignment, a value computed from the attribute itself, or from an
    argument of the method (the caller's value at each call)."""
    if isinstance(stmt, ast.AugAssign):
        return proven("new-value", f"`self.{attr}` is updated in place")
    value = stmt.value
    if value is None:
        return unknown("new-value", f"the new value of `self.{attr}` is not known")
    me = _self_name(g)
    params = set(g.params[1:]) | set(g.kwonly)
    for n in walk(value):
        if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.value, ast.Name) and n.value.id == me:
            return proven("new-value", f"`self.{attr}` is recomputed from its own value")
        if isinstance(n, ast.Name) and n.id in params and not _rebound_before(g, n.id, stmt):
            return proven("new-value", f"`self.{attr}` is set from `{n.id}`, an argument of each call of `{g.name}`")
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            found = m._lookup(n.id, g.scope, _pos(n))
            ctx = m.context(stmt)
            if found is not None and found[0].kind == "for" and found[0].scope is g.scope and ctx is not None \
                    and any(lp in ctx.loops for lp in _loops_of(m, found[0])):
                return proven("new-value", f"`self.{attr}` is set from `{n.id}`, the item of the loop around it: "
                                           "a new value each iteration")
    return unknown("new-value", f"the new value of `self.{attr}` may equal the one traced")


def _rebound_before(g: FunctionInfo, name: str, stmt) -> bool:
    """Whether ``g`` binds ``name`` again before ``stmt`` (then it is no longer the argument)."""
    return any(b.kind != "param" and b.pos < _pos(stmt) for b in g.scope.events.get(name, ()))
