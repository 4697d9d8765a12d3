"""Lax loops outside jit whose body is made anew on every call (asked by JAX102).

``jax.lax.scan(body, ...)`` (also ``fori_loop``, ``while_loop``, ``cond``, ``switch``, ``map``) called
from Python traces ``body`` into a program and compiles it; the trace is cached by the function
object. A ``body`` the enclosing function defines (a nested ``def`` or a lambda) is a new object on
every call of that function, so every call traces and compiles the loop again. Measured on CPU
(jax 0.10.2): 78 ms a call for a 100-step scan over a 64-vector against 0.16 ms with the body
defined once; 32-35 ms for a ``cond`` or ``fori_loop`` of lambdas against 0.19 ms.

A finding needs two facts beside the fresh body:

* **eager**: the enclosing function runs outside any trace (under ``jit`` its loop compiles once
  with it): :func:`~jaxlint.model.facts.eagerwork.outside_trace`, proven for module-level code and
  for functions every call of which the module shows made from such code; where it is not proven
  there is no finding (asked first, it also spares the project-wide search for callers);
* **repeats**: the function runs again and again at the steps of a loop (a loop over a few
  configurations, where each call may have new shapes and compile anyway, is not enough: measured on
  the review sets, a notebook timing 19 window sizes), or it is called once and then again inside a
  measurement (:mod:`~jaxlint.model.facts.warmups`: the warm-up warmed nothing, the figure is a compile).

A function traced only by an eager transform (``jax.vmap(rollout)(x)`` outside jit) is traced anew at
each call of the transform, its body with it: the same finding, at a transform call proven eager at
every step of a loop.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from ..facts import callables, deviceloops, eagerwork, jaxrange, warmups
from ..facts.frequency import cached, callers, per_step
from ..facts.proof import Fact, proven, unknown
from . import evidence, roles


class FreshBodyLoop:
    """A lax ``call`` in ``outer`` over ``body`` (a function ``outer`` defines); ``eager`` and
    ``repeats`` its facts; ``rep`` the repetition evidence (None when not per step); ``site`` and
    ``loop``: the eager transform's call and its step loop, when ``outer`` is traced by one."""

    __slots__ = ("call", "outer", "body", "eager", "repeats", "rep", "site", "loop")

    def __init__(self, call, outer, body, eager: Fact, repeats: Fact, rep=None, site=None, loop=None):
        self.call = call
        self.outer = outer
        self.body = body
        self.eager = eager
        self.repeats = repeats
        self.rep = rep
        self.site = site
        self.loop = loop


def fresh_body_loops(m) -> list:
    """Every lax loop or branch of the module over a body made per call, in a function proven to run
    outside any trace, with its facts (a library function a caller may jit is left out: asking how
    often it runs would read the whole project, for a finding that could not be shown)."""
    out: list = []
    for call in deviceloops.lax_calls(m):
        bodies = [b for b in deviceloops.traced_bodies(m, call) if not isinstance(b, ast.Call)]
        outer = m.function_at(call) if bodies else None
        if outer is None or isinstance(outer.node, ast.Lambda) or cached(outer):
            continue
        scope = m.scope_at(call)
        made = _fresh_bodies(m, bodies, scope, outer)
        if not made:
            continue
        fresh = [g for g, _ in made]
        if outer.traced:
            defined = [g for g, expr in made if expr is None]  # a transform traces what ``outer`` defines anew
            found = _transform_site(m, call, outer, defined[0]) if defined else None
            if found is not None:
                out.append(found)
            continue
        eager = eagerwork.outside_trace(m, call)  # asked first: this module's own calls only
        if eager.status != "proven":
            continue  # a library function a caller may jit: not shown to run eagerly at all
        looped = _made_per_iteration(m, call, made)
        if looped is not None:
            body, loop = looped
            repeats = proven("repeats", f"the loop on line {loop.node.lineno} runs steps, and makes the body anew in "
                                        "every iteration")
            out.append(FreshBodyLoop(call, outer, body, eager, repeats, None, None, loop))
            continue
        freq = roles.frequency(m, outer)
        # called once to warm up, then again inside a measurement: the timed call compiles again
        timed = warmups.repetition(m, outer, callers(m, outer)) if not per_step(freq.rep) else None
        if freq.kind == roles.ONCE and timed is None:
            continue
        rep = freq.rep if per_step(freq.rep) else timed
        repeats = (proven("repeats", "; ".join(evidence.repetition(rep, m.conventions))) if rep is not None else
                   unknown("repeats", f"no evidence that `{outer.name}` runs at the steps of a loop"))
        out.append(FreshBodyLoop(call, outer, fresh[0], eager, repeats, rep))
    return out


# From this JAX release on, a bound method handed to a lax loop or branch outside jit is traced anew at every
# call (probed with the wheels of every release between: 0.4.30 reuses the first trace, 0.4.31 to 0.10.2 trace
# both branches of a `lax.cond` again at each of three calls); before it, equal bound methods shared one trace.
BOUND_METHOD_RETRACE = (0, 4, 31)


def bound_method_release(m) -> tuple:
    """``(retraces, why)``: whether the project may run on a JAX that traces a bound method anew at every call
    (its configured ``jax-version`` or its declared range reaches :data:`BOUND_METHOD_RETRACE`; no declaration:
    current JAX), and that as evidence."""
    when = jaxrange.text(BOUND_METHOD_RETRACE)
    configured = m.jax_version
    if configured is not None and tuple(configured) >= BOUND_METHOD_RETRACE:
        retraces = True
        why = f"jax-version {jaxrange.text(configured)} is configured (the oldest JAX the project supports)"
    else:
        found = jaxrange.of_model(m)
        retraces = found.range is None or found.range.includes_from(BOUND_METHOD_RETRACE)
        why = (f"{found.why}: current JAX assumed" if found.range is None else
               f"{found.where}: the declared range includes JAX {when} or later")
    return retraces, (f"JAX {when} and later trace a bound method anew at every call (earlier releases reuse one "
                      f"trace); {why}")


def _fresh_bodies(m, bodies: list, scope, outer) -> list:
    """``(function, expression)`` for each body a new object at each call of ``outer``: a lambda or ``def``
    ``outer`` defines (expression None), or ``self.method`` of ``outer``'s instance, evaluated where the
    lax call reads it: a new bound method each time (fresh set AV: ``lax.cond(pred, self._get_untried,
    self._select_ucb)`` in a bandit's per-step method compiled at every step, 50 ms a call against 0.3 ms
    with module-level branches, measured on CPU)."""
    out = []
    for b in bodies:
        for g in callables.local_functions(m, b, scope):
            if getattr(g.node, "decorator_list", None):
                continue  # a staticmethod is one function; other decorators make what they make
            if g.parent is outer:
                out.append((g, None))
            elif (g.cls is not None and g.parent is None and isinstance(b, ast.Attribute)
                  and _instance_param(outer, b.value) and bound_method_release(m)[0]):
                out.append((g, b))
    return out


def _instance_param(outer, expr: ast.AST) -> bool:
    """``expr`` is the instance parameter of the method ``outer`` (its first parameter, in a method of a class
    that is neither a static nor a class method): reading a method off it makes a new bound method."""
    return (outer.cls is not None and bool(outer.params) and isinstance(expr, ast.Name) and expr.id == outer.params[0]
            and not {"builtins.staticmethod", "builtins.classmethod"} & set(outer.decorators))


def _made_per_iteration(m, call: ast.Call, made: list) -> Optional[tuple]:
    """``(body, loop)`` when ``call`` runs at every step of a loop of its own function and a body is made
    anew in each iteration: a lambda or ``def`` inside the loop, or a bound method read there. None
    otherwise (made once before the loop: one object, one compile)."""
    ctx = m.context(call)
    role = roles.sync_role(m, ctx, syncs=False) if ctx is not None else None
    if role is None or role.kind not in (roles.PER_STEP, roles.PROGRAM) or role.loop is None:
        return None  # (an iteration that runs a whole program: here that program's compile is made again)
    loop = role.loop.node
    first, last = loop.lineno, loop.end_lineno or loop.lineno
    for g, expr in made:
        node = expr if expr is not None else g.node
        if first < node.lineno <= last:
            return g, role.loop
    return None


def _transform_site(m, call: ast.Call, outer, body) -> Optional[FreshBodyLoop]:
    """For ``outer`` traced only by eager transforms: the transform's call (``jax.vmap(outer)(x)``) proven
    to run outside any trace in every iteration of a loop (one that runs "a whole program" per iteration
    included: here that program is the transform, traced and compiled again each time), or None."""
    if not outer.trace_causes or any(c.kind != "transform" for c in outer.trace_causes):
        return None
    for site in m.calls:
        made = site.func
        if not (isinstance(made, ast.Call) and made.args):
            continue  # ``jax.vmap(f)(x)``: the transform's product called where it is made
        if m.resolve(made.func, m.scope_at(made)) not in N.TRANSFORMS or not any(
                g is outer for g in callables.local_functions(m, made.args[0], m.scope_at(made), instances=False)):
            continue
        ctx = m.context(site)
        role = roles.sync_role(m, ctx, syncs=False) if ctx is not None else None
        eager = eagerwork.outside_trace(m, site)
        if role is None or role.kind not in (roles.PER_STEP, roles.PROGRAM) or eager.status != "proven":
            continue
        repeats = proven("repeats", f"`{ast.unparse(made.func)}({outer.name})` is called in every iteration of the "
                                    f"loop on line {role.loop.node.lineno}")
        return FreshBodyLoop(call, outer, body, eager, repeats, None, site, role.loop)
    return None
