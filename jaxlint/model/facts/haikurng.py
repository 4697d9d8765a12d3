"""Whether ``net.apply(params, rng, ...)`` of a haiku-transformed function draws from ``rng``.

``hk.transform(f).apply(params, rng, *args)`` runs ``f`` with ``rng`` as the source of every
``hk.next_rng_key()`` (and ``next_rng_keys``, ``maybe_next_rng_key``, ``reserve_rng_keys``) that ``f``
reaches; a dropout layer takes its key from there. So the same ``rng`` on every step gives the same
keys, the same dropout masks, on every step (fresh AN's RoBERTa notebooks: a key made once and
handed to the jitted update for 31,250 steps).

Proven when the transformed function is a function of this module and a call of one of those
haiku functions is reached from it through the module's own functions and ``hk.Module`` classes
(a class called or instantiated there: its ``__call__`` and ``__init__``, and the methods they call),
and every ``if`` around that call in its function (and every ``if ...: return`` before it) tests a
bare name whose value is a literal that lets the call run: a parameter bound, along the chain of
calls from ``apply``, to a literal argument (``apply(params, rng, x, training=True)``, then
``Block(cfg)(x, training=training)``) or to its default. A draw behind ``if training:`` is not
proven by ``apply(..., training=False)`` nor where the value is not known. ``hk.without_apply_rng``
takes no key. Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from . import callables, libraryobjects
from ..python.branches import name_branches
from ..python.instances import class_named
from ..python.records import Scope

_TRANSFORMS = {"haiku.transform": 1, "haiku.transform_with_state": 2}  # the position of apply's ``rng``
_CONSUMERS = frozenset({"haiku.next_rng_key", "haiku.next_rng_keys", "haiku.maybe_next_rng_key",
                        "haiku.reserve_rng_keys"})
_MAX_FUNCTIONS = 64  # functions followed from the transformed one


def apply_draw(m, call: ast.Call, scope: Scope, passed: list) -> Optional[ast.Call]:
    """The haiku call that draws from the key ``call`` (``net.apply(params, rng, ...)``) passes as
    its ``rng`` (``passed``: ``[(position, keyword)]`` of the key among the arguments), or None
    when not proven (see the module's text)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "apply"):
        return None
    maker = libraryobjects.library_maker(m, func.value, scope)
    position = _TRANSFORMS.get(maker)  # ``apply(params, rng, ...)``; with state: ``apply(params, state, rng, ...)``
    if position is None or not any(i == position or kw == "rng" for i, kw in passed):
        return None
    transformed = _transformed(m, func.value, scope)
    if transformed is None:
        return None
    rest = ast.Call(func=func, args=call.args[position + 1:],
                    keywords=[k for k in call.keywords if k.arg not in ("params", "state", "rng")])
    seen: set = set()
    todo = [(transformed, bind_literals(transformed, rest, {}, False))]
    while todo and len(seen) < _MAX_FUNCTIONS:
        f, env = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        for c in f.calls:
            if not m.work.spend():
                return None
            cscope = m.scope_at(c)
            if m.resolve(c.func, cscope) in _CONSUMERS and opened(m, f, c, env):
                return c
            for g in callables.local_functions(m, c.func, cscope):
                todo.append((g, bind_literals(g, c, env, g.is_method and isinstance(c.func, ast.Attribute))))
            for method, cls in classes_called(m, c, cscope):
                meth = cls.methods.get(method)
                if meth is not None:
                    todo.append((meth, bind_literals(meth, c, env, True)))
    return None


UNKNOWN = object()  # :func:`literal_value` could not tell


def literal_value(expr: ast.AST, env: dict):
    """The value of ``expr`` when it is a literal, a name (or ``self.<field>``) with a known literal in
    ``env``, or ``not`` of one of those (``deterministic=not training``); :data:`UNKNOWN` otherwise."""
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.Name):
        return env.get(expr.id, UNKNOWN)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return env.get("self." + expr.attr, UNKNOWN)  # a flax module's field (facts/flaxrng.py)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        inner = literal_value(expr.operand, env)
        return UNKNOWN if inner is UNKNOWN else not inner
    return UNKNOWN


def bind_literals(g, call: ast.Call, env: dict, bound_self: bool) -> dict:
    """``{parameter of g: literal value}`` for the arguments of ``call`` that are literals, or
    parameters of the caller with a known literal (``env``)."""
    params = list(g.params)[1 if bound_self else 0:]
    out = {}
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return out  # ``f(*args)``, ``f(**kw)``: which parameter gets what is not followed
    pairs = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords]
    for name, value in pairs:
        known = literal_value(value, env)
        if known is not UNKNOWN:
            out[name] = known
    passed = {name for name, _ in pairs}
    for name in params + list(g.kwonly):
        default = g.default(name) if name not in passed and not isinstance(g.node, ast.Lambda) else None
        if isinstance(default, ast.Constant):
            out[name] = default.value  # not passed: the default's literal
    return out


def _transformed(m, receiver: ast.AST, scope: Scope):
    """The function of this module ``receiver`` is the haiku transform of (``hk.transform(f)``)."""
    if not isinstance(receiver, ast.Name):
        return None
    ev = m.binding(receiver.id, scope, (receiver.lineno, receiver.col_offset))
    if ev is None or not ev.plain_assign or not isinstance(ev.value, ast.Call) or not ev.value.args:
        return None
    found = callables.local_functions(m, ev.value.args[0], ev.scope)
    return found[0] if len(found) == 1 else None


def classes_called(m, call: ast.Call, scope: Scope) -> list:
    """``[(method, class)]``: ``__init__`` of a class of this module ``call`` instantiates
    (``Block(cfg)``), ``__call__`` of one whose instance it calls (``Block(cfg)(x)``, ``layer(x)``
    with ``layer = Block(cfg)``)."""
    out = []
    made = class_named(m, call.func, scope)
    if made is not None:
        out.append(("__init__", made))
    elif not isinstance(call.func, ast.Attribute):
        called = callables.instance_class(m, call.func, scope)
        if called is not None:
            out.append(("__call__", called))
    return out


def opened(m, f, call: ast.Call, literals: dict) -> bool:
    """Whether every ``if`` of ``f`` around ``call``, and every ``if ...: return`` of ``f``'s body
    before it, tests a bare name (a parameter) whose literal value in ``literals`` lets the call run."""
    ifs = {id(n) for n in ast.walk(f.node) if isinstance(n, ast.If)}
    ctx = m.context(call)
    arms = [b for b in (ctx.branches if ctx is not None else ()) if b[0] in ifs]
    named = name_branches(m, f.node, call)
    if len(named) != len(arms):
        return False
    tests = [(name, branch == 0, negate) for name, branch, negate in named]
    body = getattr(f.node, "body", [])
    for stmt in body:
        if stmt.lineno >= call.lineno:
            break
        if isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], (ast.Return, ast.Raise)):
            test, negate = stmt.test, False
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, negate = test.operand, True
            if not isinstance(test, ast.Name):
                return False
            tests.append((test.id, False, negate))  # the call runs where the early exit is not taken
    for name, taken, negate in tests:
        if name not in literals or taken != (bool(literals[name]) != negate):
            return False
    return True
