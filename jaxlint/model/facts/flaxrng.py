"""Whether ``model.apply(variables, ..., rngs={"dropout": key})`` of a flax linen module draws from ``key``.

flax hands each entry of ``rngs`` to the module as an RNG stream; an ``nn.Dropout`` layer that is not
deterministic takes its mask's key from the ``"dropout"`` stream (its ``rng_collection``), and
``self.make_rng(name)`` takes one from the stream ``name``. Every key taken is derived from the stream's key
and the module's path, so the same ``key`` on every step gives the same dropout masks on every step (fresh
AO's nanoGPT: one module-level ``dropout_rng`` read by the jitted ``train_step`` for 5,000 steps; fresh H's
d2l notebooks: one key handed to the jitted step every iteration).

Proven when the applied module is an instance of a flax linen module class of this module (``model =
GPT(...)``, then ``model.apply``; or a ``TrainState``'s ``apply_fn`` where every ``apply_fn=`` of the module,
in any call, is the ``apply`` of instances of that one class, and no code stores an ``apply_fn`` attribute) and, from its ``__call__`` through the module's own
functions, methods and module classes (instantiated and called: ``Block(cfg)(x, training=training)``, a
submodule stored in ``setup``, the first layer of an ``nn.Sequential``), a draw is reached:

* ``nn.Dropout(rate)(x, deterministic=d)`` (or ``deterministic`` given to the constructor) with ``d`` known
  to be false and ``rate`` known not to be zero, on a stream given in ``rngs``;
* ``self.make_rng(name)`` with ``name`` a stream given in ``rngs``;

and every ``if`` around it opens for the known values (:func:`.haikurng.opened`). Values are known from
literals along the chain of calls from ``apply`` (``apply(params, x, training=True)``), parameters'
defaults, a module's fields (the construction's arguments, or the field's default) and module-level
constants. Anything else (a value read from a config object, ``method=``, ``**kwargs``) leaves the draw
unproven. Functions of the model (``m``), asked by facts/keyhandoffs.py and facts/keydraws.py.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional

from . import callables, flaxmodules
from ... import names as N
from .haikurng import UNKNOWN, bind_literals, classes_called, literal_value, opened
from ..python.instances import class_named
from ..python.records import Scope
from ..python.syntax import _pos, call_arg

_DROPOUT = "flax.linen.Dropout"
_SEQUENTIAL = "flax.linen.Sequential"
APPLY = "apply"  # the key use a flax module's ``apply`` makes (facts/keys.py)
APPLIES = ("apply", "apply_fn")
_APPLY_ONLY = ("variables", "rngs", "mutable", "method", "capture_intermediates")
_MAX_FUNCTIONS = 64  # (function, known values) pairs followed from ``__call__``


def apply_draw(m, call: ast.Call, scope: Scope, carries: Callable[[ast.AST], bool]) -> Optional[ast.Call]:
    """The call (an ``nn.Dropout`` layer's or ``self.make_rng``) that draws from a stream of ``rngs``
    whose key ``carries`` (a predicate on the dict's values), when ``call`` is the ``apply`` of a flax
    linen module and the draw is proven (see the module's text); None otherwise."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in APPLIES:
        return None
    rngs = next((k.value for k in call.keywords if k.arg == "rngs"), None)
    if not isinstance(rngs, ast.Dict) or any(k.arg in ("method", None) for k in call.keywords):
        return None
    streams = {k.value for k, v in zip(rngs.keys, rngs.values)
               if isinstance(k, ast.Constant) and isinstance(k.value, str) and v is not None and carries(v)}
    if not streams:
        return None
    applied = _applied(m, func, scope)
    if applied is None:
        return None
    cls, made, made_scope = applied
    meth = cls.methods.get("__call__")
    if meth is None:
        return None
    rest = ast.Call(func=func, args=call.args[1:], keywords=[k for k in call.keywords if k.arg not in _APPLY_ONLY])
    env = bind_literals(meth, rest, {}, True)
    env.update(_fields(m, cls, made, {}))
    return _reach(m, meth, env, streams)


def apply_key(m, call: ast.Call, scope: Scope) -> Optional[ast.Name]:
    """The key (a name) of ``call``'s ``rngs={"dropout": key}`` its module is proven to draw from."""
    rngs = next((k.value for k in call.keywords if k.arg == "rngs"), None)
    if not isinstance(rngs, ast.Dict):
        return None
    for value in rngs.values:
        if isinstance(value, ast.Name) and apply_draw(m, call, scope, lambda v, value=value: v is value):
            return value
    return None


def applied_class(m, call: ast.Call, scope: Scope) -> Optional[int]:
    """An id of the module class whose instance ``call`` (``model.apply``, ``state.apply_fn``) applies."""
    found = _applied(m, call.func, scope) if isinstance(call.func, ast.Attribute) else None
    return id(found[0]) if found is not None else None


def _reach(m, start, env: dict, streams: set) -> Optional[ast.Call]:
    seen: set = set()
    todo = [(start, env)]
    while todo and len(seen) < _MAX_FUNCTIONS:
        f, env = todo.pop()
        mark = (id(f), tuple(sorted((k, repr(v)) for k, v in env.items())))
        if mark in seen:
            continue
        seen.add(mark)
        own = {k: v for k, v in env.items() if k.startswith("self.")}
        for c in f.calls:
            if not m.work.spend():
                return None
            cscope = m.scope_at(c)
            if (_dropout_draws(m, f, c, cscope, env, streams) or _makes_rng(f, c, env, streams)) \
                    and opened(m, f, c, env):
                return c
            on_self = (isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
                       and f.params and c.func.value.id == f.params[0])
            for g in callables.local_functions(m, c.func, cscope):
                bound = g.is_method and isinstance(c.func, ast.Attribute)
                todo.append((g, {**bind_literals(g, c, env, bound), **(own if on_self else {})}))
            for sub, made in _submodules_called(m, f, c, cscope):
                meth = sub.methods.get("__call__")
                if meth is not None:
                    todo.append((meth, {**bind_literals(meth, c, env, True), **_fields(m, sub, made, env)}))
    return None


def _applied(m, func: ast.Attribute, scope: Scope) -> Optional[tuple]:
    """``(class, construction call or None, its scope)``: the flax module class of this module whose
    instance ``func`` (``model.apply``, ``state.apply_fn``) applies."""
    if func.attr == "apply":
        made = flaxmodules.made_by(m, func.value, scope)
        if made is None:
            return None
        call, made_scope = _through_partial(m, made[0], made[1])
        cls = class_named(m, call.func, made_scope)
        if cls is None or not flaxmodules.class_is_module(m, cls.node):
            return None
        return cls, call, made_scope
    if any(isinstance(t, ast.Attribute) and t.attr == "apply_fn" for t, _ in m.stores):
        return None  # ``obj.apply_fn = ...``: stored by other code than a constructor
    found = set()
    for c in m.calls:
        for k in c.keywords:
            if k.arg != "apply_fn":
                continue
            if not (isinstance(k.value, ast.Attribute) and k.value.attr == "apply"):
                return None  # ``apply_fn=some_function``: not a module's apply
            got = _applied(m, k.value, m.scope_at(c))
            if got is None:
                return None
            found.add((got[0], got[1], got[2]))
    classes = {id(cls) for cls, _, _ in found}
    if len(classes) != 1:
        return None
    cls, made, made_scope = next(iter(found))
    return (cls, made, made_scope) if len(found) == 1 else (cls, None, None)


def _through_partial(m, call: ast.Call, scope: Scope) -> tuple:
    """``(call, scope)``: ``Net(...)`` itself, or for ``Net = functools.partial(Cls, a, b=1)`` then
    ``Net(c)`` the construction it makes, ``Cls(a, c, b=1)`` (in the partial's scope)."""
    if not isinstance(call.func, ast.Name):
        return call, scope
    made = flaxmodules.made_by(m, call.func, scope)
    if made is None or not made[0].args or m.resolve(made[0].func, made[1]) != N.PARTIAL:
        return call, scope
    partial = made[0]
    return ast.Call(func=partial.args[0], args=partial.args[1:] + call.args,
                    keywords=partial.keywords + call.keywords), made[1]


def _fields(m, cls, made: Optional[ast.Call], env: dict) -> dict:
    """``{"self.<field>": value}`` for the fields of the module class ``cls`` (annotated names of its
    body) whose value is known: the construction's argument (``made``, positional ones in field order
    when the class has no other module class as a base) or, not given, the field's literal default."""
    names, defaults = [], {}
    for stmt in cls.node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.append(stmt.target.id)
            if isinstance(stmt.value, ast.Constant):
                defaults[stmt.target.id] = stmt.value.value
    out = {}
    given: dict = {}
    if made is None:
        return {}  # the construction is not known (several, or a module made elsewhere)
    if any(isinstance(a, ast.Starred) for a in made.args) or any(k.arg is None for k in made.keywords):
        return {}
    own_fields = all(isinstance(b, ast.Attribute) or class_named(m, b, m.scope_at(cls.node)) is None
                     for b in cls.node.bases)
    if made.args and not own_fields:
        return {}
    given.update(zip(names, made.args))
    given.update((k.arg, k.value) for k in made.keywords)
    for name in names:
        if name in given:
            value = literal_value(given[name], env)
            if value is not UNKNOWN:
                out["self." + name] = value
        elif name in defaults:
            out["self." + name] = defaults[name]
    return out


def _submodules_called(m, f, c: ast.Call, scope: Scope) -> list:
    """``[(class, construction)]``: a module class of this module whose instance ``c`` calls:
    ``Block(cfg)(x)``, ``self.block(x)`` with ``self.block = Block(cfg)`` stored once, a name bound to
    one, or the first layer of ``nn.Sequential([Block(...), ...])(x)`` (the only one given ``c``'s
    keyword arguments)."""
    func = c.func
    if isinstance(func, ast.Call) and m.resolve(func.func, scope) == _SEQUENTIAL and func.args:
        layers = func.args[0]
        first = (layers.elts[0] if isinstance(layers, (ast.List, ast.Tuple)) and layers.elts else
                 layers.elt if isinstance(layers, ast.ListComp) else None)
        if not isinstance(first, ast.Call):
            return []
        made = first
    else:
        made = _construction(m, f, func, scope)
    if made is None:
        return [(cls, None) for method, cls in classes_called(m, c, scope) if method == "__call__"]
    cls = class_named(m, made.func, m.scope_at(made))
    return [(cls, made)] if cls is not None and flaxmodules.class_is_module(m, cls.node) else []


def _construction(m, f, expr: ast.AST, scope: Scope) -> Optional[ast.Call]:
    """The call that made the module instance ``expr``: ``Cls(...)`` itself, a name bound once to one,
    or ``self.attr`` assigned once (in ``setup``)."""
    if isinstance(expr, ast.Call):
        return expr
    if isinstance(expr, ast.Name):
        made = flaxmodules.made_by(m, expr, scope)
        return made[0] if made is not None else None
    if (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and f.cls is not None
            and f.params and expr.value.id == f.params[0]):
        values = f.cls.self_attrs.get(expr.attr, ())
        if len(values) == 1 and isinstance(values[0], ast.Call):
            return values[0]
    return None


def _dropout_draws(m, f, c: ast.Call, scope: Scope, env: dict, streams: set) -> bool:
    """``c`` calls an ``nn.Dropout`` layer that draws from one of ``streams``: its rate is known
    not to be zero and its ``deterministic`` known false, and no ``rng=`` is passed to it."""
    made = _construction(m, f, c.func, scope)
    if made is None or m.resolve(made.func, m.scope_at(made)) != _DROPOUT:
        return False
    if any(k.arg == "rng" for k in c.keywords) or len(c.args) > 2:
        return False
    collection = call_arg(made, 3, "rng_collection")
    if collection is not None and not (isinstance(collection, ast.Constant) and collection.value in streams):
        return False
    if collection is None and "dropout" not in streams:
        return False
    rate = _number(m, call_arg(made, 0, "rate"), env)
    if rate is UNKNOWN or not rate:
        return False
    deterministic = call_arg(c, 1, "deterministic")
    if deterministic is None:
        deterministic = call_arg(made, 2, "deterministic")
    if deterministic is None:
        return False
    value = literal_value(deterministic, env)
    return value is not UNKNOWN and not value


def _makes_rng(f, c: ast.Call, env: dict, streams: set) -> bool:
    """``self.make_rng("dropout")`` on one of ``streams``."""
    func = c.func
    if not (isinstance(func, ast.Attribute) and func.attr == "make_rng" and isinstance(func.value, ast.Name)
            and f.params and func.value.id == f.params[0]):
        return False
    name = call_arg(c, 0, "name")
    value = literal_value(name, env) if name is not None else "params"
    return value is not UNKNOWN and value in streams


def _number(m, expr: Optional[ast.AST], env: dict):
    """A number known from ``env`` and literals, or a module-level name bound once to a literal."""
    if expr is None:
        return UNKNOWN
    value = literal_value(expr, env)
    if value is not UNKNOWN:
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else UNKNOWN
    if isinstance(expr, ast.Name):
        ev = m.binding(expr.id, m.scope_at(expr), _pos(expr))
        if (ev is not None and ev.scope.kind == "module" and ev.plain_assign
                and len(ev.scope.events.get(expr.id, ())) == 1 and isinstance(ev.value, ast.Constant)):
            value = ev.value.value
            return value if isinstance(value, (int, float)) and not isinstance(value, bool) else UNKNOWN
    return UNKNOWN
