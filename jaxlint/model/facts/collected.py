"""Lists a loop fills until the data says stop: an episode's observations, actions or rewards, appended
in ``while not done:`` after ``obs, reward, done, info = env.step(action)``. The list's length is that
loop's trip count, which the data decides, so a compiled function given the list (a pytree of one leaf
per item) or an array stacked from it sees a new shape for each new length (JAX304, issue 39: fresh set
AV, a REINFORCE notebook's ``nnx.jit`` return computation given each episode's rewards).

Functions of a :class:`~jaxlint.model.facts.variance.ShapeVariance` (``sv``) and of the model, imported
explicitly."""

from __future__ import annotations

import ast
from typing import Optional

from ..python.syntax import _pos, walk
from ..python.widths import ShapeSource

_GROW = ("append", "extend", "insert")
_SHRINK = ("pop", "popleft", "clear", "remove")


def _filler(m, scope, name: str, ev, inner, depth: int) -> Optional[tuple]:
    """``(loop, name)``: the loop that ends on data and fills the list ``name`` (bound by ``ev`` to an empty
    list at the start of each iteration of ``inner``), directly or through a list it extends ``name`` with that
    such a loop fills (``batch.extend(episode)`` per episode of a batch); None when nothing shows the length
    follows the data, or something in ``inner`` shortens the list."""
    if depth > 2 or not _new_empty_list(m, ev, scope):
        return None
    if not ev.loops or ev.loops[-1] is not inner:
        return None
    filler = None
    for method in (*_GROW, *_SHRINK):
        for c in m.calls_by_name.get(method, ()):
            f = c.func
            if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == name):
                continue
            cctx = m.context(c)
            if cctx is None or cctx.scope is not scope or inner not in cctx.loops:
                continue
            if m.binding(name, scope, _pos(f.value)) is not ev:
                continue
            if method in _SHRINK:
                return None
            for w in cctx.loops[cctx.loops.index(inner) + 1:]:
                until = ends_on_data(m, w, scope)
                if until is not None:
                    filler = filler or (w, until)
            part = c.args[0] if method == "extend" and len(c.args) == 1 else None
            if filler is None and isinstance(part, ast.Name) and cctx.loops[-1] is not inner:
                ev2 = m.binding(part.id, scope, _pos(part))
                if ev2 is not None and ev2.scope is scope:
                    filler = _filler(m, scope, part.id, ev2, cctx.loops[-1], depth + 1)
    return filler


def _new_empty_list(m, ev, scope) -> bool:
    """Whether ``ev`` binds its name to a new empty list: ``xs = []``, ``xs = list()``, or one element of a
    tuple of them (``obs, acts = [], []``)."""
    if ev.kind != "assign":
        return False
    value = ev.value
    if ev.path is not None:
        if len(ev.path) != 1 or not isinstance(value, (ast.Tuple, ast.List)) or ev.path[0] >= len(value.elts):
            return False
        value = value.elts[ev.path[0]]
    return (isinstance(value, ast.List) and not value.elts) or (
        isinstance(value, ast.Call) and not value.args and not value.keywords
        and m.resolve(value.func, scope) == "builtins.list")


def ends_on_data(m, loop, scope) -> Optional[str]:
    """The name whose value, computed by a call in the body of the ``while`` loop ``loop``, decides when
    it stops: the loop's test reads it (``while not done:``), or a ``break`` under an ``if`` that reads it
    does (``while True: ... if done: break``), and the body rebinds it to a call's result or a part of one
    (``obs, reward, done, info = env.step(a)``, ``done = jnp.logical_or(term, trunc)``). None otherwise: a
    ``for`` loop, a counter (``while t < t_stop: t += dt``, ``done = step >= n``), a name the body does
    not rebind."""
    node = loop.node
    if not isinstance(node, ast.While):
        return None
    if isinstance(node.test, ast.Constant):
        tests = [s.test for s in _breaking_ifs(node.body)] if node.test.value else []
    else:
        tests = [node.test]
    for test in tests:
        for n in walk(test):
            if isinstance(n, ast.Name) and _rebound_by_call(scope, n.id, loop):
                return n.id
    return None


def _breaking_ifs(body: list):
    """The ``if`` statements of a loop body (not of loops or functions nested in it) whose branch
    breaks out of the loop."""
    for s in body:
        if isinstance(s, ast.If):
            if any(isinstance(b, ast.Break) for b in s.body):
                yield s
            yield from _breaking_ifs(s.body)
            yield from _breaking_ifs(s.orelse)
        elif isinstance(s, (ast.With, ast.AsyncWith, ast.Try)):
            yield from _breaking_ifs(s.body)


def _rebound_by_call(scope, name: str, loop) -> bool:
    evs = [ev for ev in scope.events.get(name, ()) if loop in ev.loops]
    return bool(evs) and all(ev.kind == "assign" and ev.value is not None and any(
        isinstance(c, ast.Call) for c in walk(ev.value)) for ev in evs)


def collected_list(sv, name: ast.Name, ev, via: str = "") -> Optional[ShapeSource]:
    """When the list ``name`` (bound by ``ev`` to an empty list in the innermost loop around the call, before
    it, so each iteration starts a new one) is filled by a loop nested in that iteration which ends on data
    (:func:`ends_on_data`), directly or through lists it is extended with, and nothing in that iteration
    shortens it: its :class:`ShapeSource` ("collected", one shape per distinct length). ``via``: the
    function that stacks it, as spelled, or empty when the list is passed whole. None otherwise."""
    m, ctx = sv.m, sv._call_ctx
    if ctx is None or not ctx.loops or not sv.loops or ev.scope is not sv.scope:
        return None
    inner = ctx.loops[-1]
    filler = _filler(m, sv.scope, name.id, ev, inner, 0)
    if filler is None:
        return None
    w, until = filler
    what = f"a list filled by a loop that `{until}` ends (a value that loop computes)"
    return ShapeSource("collected", f"is `{via}` of `{name.id}`, {what}" if via else f"is {what}",
                       False, f"length of `{name.id}`",
                       proof=f"`{name.id}` is a new empty list in every iteration of the loop on line "
                             f"{inner.node.lineno} (line {ev.node.lineno}), and nothing there shortens it; the loop "
                             f"on line {w.node.lineno} fills it and stops when `{until}` says so, a value it "
                             "computes by a call")
