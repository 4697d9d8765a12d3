"""Keys that stay the same from one call of a function to the next: a module-level key or one
stored on ``self`` in set-up code, drawn from inside a function that runs more than once (JAX502's
fixed-key case), and whether a key made in a function is drawn there.

Functions of the model (``m``), not a mixin: they ask the model's Python-semantics queries and
the key flow (jaxlint/model/keys.py) explicitly.
"""

from __future__ import annotations

import ast
from typing import Optional

from . import flaxrng, frequency, keys
from . import values as V
from .frequency import called_once, setup_name
from .keys import DERIVERS, DIST_SAMPLE, FOLD_IN, KEY_FUNCS, KEY_MAKERS
from ...names import GRADIENT_TRANSFORMS
from ..python.branches import name_branches
from ..python.records import Scope
from ..python.syntax import _pos, call_arg, walk


class FixedKeyDraw:
    """A draw from a key that is the same on every call of the function ``func`` it is in
    (:func:`fixed_key_draws`). ``where``: "module" (a module-level name), "default" (a parameter whose
    default is a module-level key, passed by no call) or "instance" (``self.<attr>`` set in set-up
    methods only); ``made``: the statement storing the key;
    ``how``: why ``func`` runs more than once (:func:`runs_again`)."""

    __slots__ = ("call", "fn", "key", "where", "made", "func", "how", "via")

    def __init__(self, call, fn, key, where, made, func, how, via=None):
        self.call = call
        self.fn = fn
        self.key = key
        self.where = where
        self.made = made
        self.func = func
        self.how = how
        self.via = via  # a flax module's ``apply(rngs=...)``: the dropout (or make_rng) call that draws


def fixed_key_draws(m) -> list:
    """Draws (and splits) inside a function from a key that is the same on every call of that
    function, when the function runs more than once: :class:`FixedKeyDraw` records. The key
    is a module-level name bound once to a key (``KEY = jax.random.PRNGKey(0)``) and never
    rebound, or ``self.<attr>`` assigned a key in set-up methods only (``__init__``,
    ``setup``) and never replaced by another method. ``fold_in`` with data that may change
    makes a new key per call and is left out."""
    memo = m.facts.fixed_key_memo
    if memo is not None:
        return memo
    out: list = []
    m.facts.fixed_key_memo = out
    calls = list(m.calls_named(KEY_FUNCS))
    calls.extend(c for name in DIST_SAMPLE for c in m.calls_by_name.get(name, ()))
    calls.extend(c for name in flaxrng.APPLIES for c in m.calls_by_name.get(name, ())
                 if any(k.arg == "rngs" and isinstance(k.value, ast.Dict) for k in c.keywords))
    for call in calls:
        if not m.work.spend():
            break
        found = _fixed_key_draw(m, call)
        if found is not None:
            out.append(found)
    return out


def _fixed_key_draw(m, call: ast.Call) -> Optional["FixedKeyDraw"]:
    ctx = m.context(call)
    if ctx is None or ctx.scope.kind != "function" or ctx.scope.func is None:
        return None
    f = ctx.scope.func
    scope = ctx.scope
    fn = keys.random_function(m, call, scope)
    if fn in KEY_FUNCS:
        arg = call_arg(call, 0, "key")
    elif isinstance(call.func, ast.Attribute) and call.func.attr in DIST_SAMPLE:
        fn = call.func.attr
        arg = next((kw.value for kw in call.keywords if kw.arg == "seed"), None)
    elif isinstance(call.func, ast.Attribute) and call.func.attr in flaxrng.APPLIES:
        return _fixed_flax_draw(m, call, f, scope)
    else:
        return None
    if fn == FOLD_IN:
        data = call_arg(call, 1, "data")
        if data is None or not isinstance(data, ast.Constant):
            return None  # fold_in(KEY, step): a new key per call
    made, where = _fixed_key(m, f, arg, scope)
    if made is None or skipped_by_default(m, f, call):
        return None
    how = runs_again(m, f)
    if how is None:
        return None
    return FixedKeyDraw(call, fn, arg, where, made, f, how)


def _fixed_key(m, f, arg: Optional[ast.AST], scope: Scope) -> tuple:
    """``(statement making the key, "module" or "instance")`` when ``arg`` reads a key that is the same
    on every call of ``f``; ``(None, None)`` otherwise."""
    if isinstance(arg, ast.Name):
        made = _module_key(m, arg, scope)
        if made is None and arg.id in f.params + f.kwonly:
            made = _default_key(m, f, arg)
            return made, "default"
        return made, "module"
    if (isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and f.is_method
            and f.params and arg.value.id == f.params[0]):
        return _instance_key(m, f, arg.attr), "instance"
    return None, None


def _fixed_flax_draw(m, call: ast.Call, f, scope: Scope) -> Optional["FixedKeyDraw"]:
    """``model.apply(params, x, rngs={"dropout": KEY})`` with ``KEY`` the same on every call of ``f`` and
    a dropout (or ``make_rng``) of the module proven to draw from it (facts/flaxrng.py)."""
    rngs = next(k.value for k in call.keywords if k.arg == "rngs")
    for value in rngs.values:
        made, where = _fixed_key(m, f, value, scope)
        if made is None:
            continue
        drawn = flaxrng.apply_draw(m, call, scope, lambda v, value=value: v is value)
        if drawn is None or skipped_by_default(m, f, call):
            continue
        how = runs_again(m, f)
        if how is None:
            return None
        return FixedKeyDraw(call, "apply", value, where, made, f, how, via=drawn)
    return None


def _module_key(m, name: ast.Name, scope: Scope) -> Optional[ast.AST]:
    """The statement binding a module-level key ``name`` refers to, when it is bound once at
    module level to a key (made by a key constructor, or derived with split/fold_in) and no
    function declares it ``global``."""
    ev = m.binding(name.id, scope, _pos(name))
    if ev is None or ev.scope.kind != "module" or ev.kind != "assign":
        return None
    if len(ev.scope.events.get(name.id, ())) != 1 or any(
            name.id in s.globals for s in m.scopes if s.kind == "function"):
        return None
    return ev.node if _makes_key(m, ev.value, ev.scope) else None


def _default_key(m, f, arg: ast.Name) -> Optional[ast.AST]:
    """``def get_mask(n, key=KEY): ... jax.random.uniform(key, ...)`` with ``KEY`` a module-level key
    (:func:`_module_key`) and no call of ``f`` in this module passing that parameter: every call draws
    from the one default key (fresh set AR: a masking helper of a DiT, called in every training step).
    The statement making the key, or None (the parameter rebound in ``f``, a call that passes it or
    spreads ``*args``/``**kwargs``, no call at all)."""
    name = arg.id
    if isinstance(f.node, ast.Lambda) or len(f.scope.events.get(name, ())) > 1:
        return None  # rebound in the body: not the default where it is read
    a = f.node.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    if name in positional:
        i = positional.index(name)
        k = i - (len(positional) - len(a.defaults))
        default = a.defaults[k] if k >= 0 else None
    else:
        i = None
        names = [p.arg for p in a.kwonlyargs]
        default = a.kw_defaults[names.index(name)] if name in names else None
    if not isinstance(default, ast.Name):
        return None
    made = _module_key(m, default, m.module_scope)
    if made is None:
        return None
    sites = frequency.callers(m, f)
    if not sites:
        return None
    shift = 1 if f.is_method else 0  # ``self.get_mask(n)``: the instance is the first parameter
    for call, _ in sites:
        if not isinstance(call, ast.Call) or any(isinstance(x, ast.Starred) for x in call.args) or any(
                k.arg is None or k.arg == name for k in call.keywords):
            return None
        if i is not None and len(call.args) > i - shift:
            return None
    return made


def _makes_key(m, value: Optional[ast.AST], scope: Scope) -> bool:
    while isinstance(value, ast.Subscript):
        value = value.value
    if not isinstance(value, ast.Call):
        return False
    if m.resolve(value.func, scope) in KEY_MAKERS:
        return True
    return keys.random_function(m, value, scope) in DERIVERS


def _instance_key(m, f, attr: str) -> Optional[ast.AST]:
    """The assignment that stores a key in ``m.<attr>``, when every assignment to it in the
    class is in a set-up method (``__init__``, ``setup``, ...) and one of them makes a key."""
    cls = f.cls
    if cls is None or setup_name(f.name, m.conventions):
        return None
    memo = m.facts.instance_key_memo
    key = (id(cls), attr)
    if key not in memo:
        memo[key] = _instance_key_of(m, cls, attr)
    return memo[key]


def _instance_key_of(m, cls, attr: str) -> Optional[ast.AST]:
    stores = self_stores(m, cls)
    if stores is None:
        return None  # setattr(self, name, ...): unseen stores
    made = None
    for method, stmt, attrs in stores:
        if attr not in attrs:
            continue
        if not setup_name(method.name, m.conventions):
            return None  # replaced by a method that runs later: maybe split and stored back
    for method, stmt, attrs in stores:
        if attr in attrs and isinstance(stmt, ast.Assign) and _makes_key(m, stmt.value, method.scope):
            made = stmt
    return made


def self_stores(m, cls) -> Optional[list]:
    """``(method, statement, attribute names)`` for every assignment in the class's methods
    (nested code included) that stores attributes of the method's first parameter
    (``self.key = ...``), in the methods' order; None when a method calls ``setattr``. One
    walk of the class per module, whatever the attributes asked about."""
    memo = m.facts.self_stores_memo
    if id(cls) in memo:
        return memo[id(cls)]
    out: Optional[list] = []
    for method in cls.methods.values():
        node = method.node
        if isinstance(node, ast.Lambda) or not method.params:
            continue
        me = method.params[0]
        for stmt in walk(node):
            if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                attrs = {t.attr for tt in targets for t in walk(tt) if isinstance(t, ast.Attribute)
                         and isinstance(t.value, ast.Name) and t.value.id == me and isinstance(t.ctx, ast.Store)}
                if attrs:
                    out.append((method, stmt, attrs))
            elif isinstance(stmt, ast.Call) and isinstance(stmt.func, ast.Name) and stmt.func.id == "setattr":
                out = None
                break
        if out is None:
            break
    memo[id(cls)] = out
    return out


def runs_again(m, f) -> Optional[tuple]:
    """Why ``f`` runs more than once in this program: ``("sites", [call, call, ...])`` for two
    or more calls of it in this module, ``("loop", call, loop)`` for a call in any loop (a loop
    over a few literal names repeats it too), or ``("repeats", Repetition)`` for the evidence of
    :func:`~jaxlint.model.frequency.repeats` (a per-step name, a call from a function that repeats), or
    ``("via", outer, how)`` for a function nested in ``outer`` and differentiated there on every call
    of it. None otherwise, and for entry points and tests, which run once."""
    sites = frequency.callers(m, f)
    if not sites:
        outer = _differentiated_in(m, f)
        if outer is not None:  # ``jax.value_and_grad(loss_fn)(params)`` in the step that defines it
            how = runs_again(m, outer)
            return ("via", outer, how) if how is not None else None
    for call, _ in sites:
        ctx = m.context(call)
        if ctx is not None and ctx.loops:
            return ("loop", call, ctx.loops[-1])
    if len(sites) >= 2:
        return ("sites", [c for c, _ in sites])
    if called_once(f, m):
        return None
    rep = frequency.repeats(m, f)
    if rep is not None and rep.kind != "factory":
        return ("repeats", rep)
    return None


def drawn_in_place(m, maker: ast.Call) -> bool:
    """Whether the key a constructor call makes is drawn from (or split) by a ``jax.random``
    call of the same function: it is that call's key (``normal(PRNGKey(0), s)``), or it is
    bound to a name whose binding that call reads (``key = PRNGKey(0)``; ``normal(key, s)``).
    A key handed to other code (``model.apply(..., rngs={"dropout": PRNGKey(0)})``,
    ``cell.initialize_carry(PRNGKey(0), shape)``) may never be drawn from."""
    ctx = m.context(maker)
    if ctx is None:
        return False
    scope = ctx.scope
    for call in m.calls_named(KEY_FUNCS):
        if m.scope_at(call) is not scope or keys.random_function(m, call, scope) not in KEY_FUNCS:
            continue
        arg = call_arg(call, 0, "key")
        if arg is maker:
            return True
        if isinstance(arg, ast.Name):
            ev = m.binding(arg.id, scope, _pos(arg))
            if ev is not None and ev.plain_assign and ev.value is maker:
                return True
    return False


def constant_seed(m, use) -> Optional[ast.Call]:
    """The key constructor with a constant seed that fixes the key a :class:`~jaxlint.model.keys.KeyUse`
    reads, when every step from it to that key is fixed too: ``rng = jax.random.PRNGKey(0)``,
    ``k1, k2 = jax.random.split(jax.random.key(0))`` or ``fold_in(key(0), 3)``, none of it in a
    loop (a literal loop over names that keeps its draws is JAX502's loop case). The draws from such a
    key are the same numbers on every run, chosen by the author (fake batches, dummy inputs to an
    ``init``, fixtures). A key a parameter, a loop (``rng, k = split(rng)`` per step) or a
    non-constant ``fold_in`` brings in is not fixed. None otherwise."""
    ev = use.event
    if ev is None or ev.kind != "assign" or ev.loops or (use.ctx is not None and use.ctx.loops):
        return None  # a key threaded through a loop is a new key each iteration: not a fixture
    return _seeded(m, ev.value, ev.scope, 0)


def fixed_data(m, prev, use) -> Optional[ast.Call]:
    """For two uses of one key (:class:`~jaxlint.model.keys.KeyUse`) that are both ``jax.random``
    calls made right there (not the module's own functions that draw from the key, which make a
    model's random features), the constructor with a literal seed that fixes the key
    (:func:`constant_seed`): the draws are fixed data the author chose. None otherwise."""
    if not all(keys.random_function(m, u.call, u.ctx.scope if u.ctx else None) for u in (prev, use)):
        return None
    return constant_seed(m, use)


def _seeded(m, value: Optional[ast.AST], scope: Scope, depth: int) -> Optional[ast.Call]:
    if depth > 4 or not m.work.spend():
        return None
    while isinstance(value, ast.Subscript):
        if not isinstance(value.slice, ast.Constant):
            return None
        value = value.value
    if isinstance(value, ast.Name):
        ev = m.binding(value.id, scope, _pos(value))
        if ev is None or ev.kind != "assign" or ev.loops:
            return None
        return _seeded(m, ev.value, ev.scope, depth + 1)
    if not isinstance(value, ast.Call):
        return None
    if m.resolve(value.func, scope) in KEY_MAKERS:
        seed = call_arg(value, 0, "seed")
        return value if V.const_int(m, seed, scope, fold=False) is not None else None
    fn = keys.random_function(m, value, scope)
    if fn not in DERIVERS:
        return None
    if fn == FOLD_IN and V.const_int(m, call_arg(value, 1, "data"), scope) is None:
        return None
    return _seeded(m, call_arg(value, 0, "key"), scope, depth + 1)


def folded_per_call(m, maker: ast.Call, varying: Optional[set] = None) -> bool:
    """Whether every ``jax.random`` use of the key a constructor call makes, in its function, is
    ``fold_in(key, data)`` with data that is not a constant (``fold_in(key(0), state.step)``, the
    recommended fix): the key drawn from then differs from call to call. With ``varying`` (the
    names a loop around the constructor gives a new value each iteration), the data must read one
    of them (``fold_in(key(42), it)``): the key then differs from iteration to iteration."""
    ctx = m.context(maker)
    if ctx is None:
        return False
    scope = ctx.scope
    uses = 0
    for call in m.calls_named(KEY_FUNCS):
        if m.scope_at(call) is not scope or keys.random_function(m, call, scope) not in KEY_FUNCS:
            continue
        arg = call_arg(call, 0, "key")
        if arg is not maker:
            if not isinstance(arg, ast.Name):
                continue
            ev = m.binding(arg.id, scope, _pos(arg))
            if ev is None or not ev.plain_assign or ev.value is not maker:
                continue
        uses += 1
        data = call_arg(call, 1, "data")
        if keys.random_function(m, call, scope) != FOLD_IN or data is None or isinstance(data, ast.Constant) \
                or V.const_int(m, data, scope) is not None:
            return False
        if varying is not None and not any(isinstance(n, ast.Name) and n.id in varying for n in ast.walk(data)):
            return False
    return uses > 0


# -- dataflow facts


def skipped_by_default(m, f, node: ast.AST) -> bool:
    """Whether ``node`` is in a branch of ``if P:`` / ``if not P:`` on a parameter ``P`` of ``f`` with
    a literal default that skips the branch, and every call of ``f`` this module shows leaves ``P``
    at that default (``def show_mask(mask, ax, random_color=False)``, called as ``show_mask(m, ax)``):
    the branch never runs. A function with no call in the module, or one called with ``*args`` or
    ``**kwargs``, is not known to skip it."""
    if isinstance(f.node, ast.Lambda):
        return False
    defaults = _literal_defaults(f.node.args)
    if not defaults:
        return False
    for name, branch, negate in name_branches(m, f.node, node):
        if name not in defaults:
            continue
        position, default = defaults[name]
        if (branch == 0) == (bool(default) != negate):
            continue  # the default takes this branch
        calls = [c for c, _ in frequency.callers(m, f) if isinstance(c, ast.Call)]
        if calls and all(_leaves_default(c, name, position) for c in calls):
            return True
    return False


def _literal_defaults(args: ast.arguments) -> dict:
    """Parameter name -> (position or None for keyword-only, default value) for literal defaults."""
    out = {}
    positional = [*args.posonlyargs, *args.args]
    for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults):
        if isinstance(d, ast.Constant):
            out[a.arg] = (positional.index(a), d.value)
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        if isinstance(d, ast.Constant):
            out[a.arg] = (None, d.value)
    return out


def _leaves_default(call: ast.Call, name: str, position) -> bool:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return False
    if position is not None and len(call.args) > position:
        return False
    return all(k.arg != name for k in call.keywords)


def _differentiated_in(m, f):
    """The function ``f`` is nested in, when that function's body (outside any loop or ``if``)
    calls a gradient transform of ``f`` (``jax.value_and_grad(loss_fn)(params)``): ``f`` then runs
    (traced) on every call of it. None otherwise."""
    outer = m.function_at(f.node)
    if outer is None or outer is f or isinstance(f.node, ast.Lambda):
        return None
    for call in outer.calls:
        inner = call.func
        if not (isinstance(inner, ast.Call) and inner.args and isinstance(inner.args[0], ast.Name)
                and inner.args[0].id == f.name):
            continue
        ctx = m.context(call)
        if ctx is None or ctx.scope.func is not outer or ctx.loops or ctx.branches:
            continue
        if m.resolve(inner.func, ctx.scope) in GRADIENT_TRANSFORMS:
            return outer
    return None


def default_for_none(ctx, model=None) -> bool:
    """Under a test of what the caller passed (``if rng is None:``, ``if rng is not None: ...
    else:``, ``if isinstance(generator, jax.Array): ... else:``): a fallback key for an argument
    the caller left out or gave in another form, not a key made at every step."""
    tests = [test for test, _ in ctx.guards]
    if model is not None and any(branch == 1 for _, branch in ctx.branches):
        by_id = {id(n): n for n in model.ifs if isinstance(n, ast.If)}
        tests += [by_id[i].test for i, branch in ctx.branches if branch == 1 and i in by_id]
    for test in tests:
        while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.IsNot))
                and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
            return True
        if (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id in ("isinstance", "callable")
                and test.args and isinstance(test.args[0], ast.Name)):
            return True
    return False


def discarded_draw(model, maker: ast.Call) -> bool:
    """Whether the key ``maker`` makes goes straight into a draw whose result nothing reads: the draw is
    a statement of its own, or only waited on (``jax.random.normal(key(0), ()).block_until_ready()``, a
    device barrier): no random number it gives is used, so repeating them repeats nothing. Found from
    the module's indexes of calls and statements, not by walking the function."""
    for block in model.calls_by_name.get("block_until_ready", ()):
        draw = block.func.value if isinstance(block.func, ast.Attribute) else None
        if isinstance(draw, ast.Call) and call_arg(draw, 0, "key") is maker and not block.args \
                and isinstance(model.stmt_of.get(id(block)), ast.Expr) \
                and keys.random_function(model, draw) in keys.SAMPLERS:
            return True
    for draw in model.calls_named(keys.SAMPLERS):
        if call_arg(draw, 0, "key") is maker and isinstance(model.stmt_of.get(id(draw)), ast.Expr):
            return keys.random_function(model, draw) in keys.SAMPLERS
    return False


def only_to_undrawn_apply(m, maker: ast.Call) -> Optional[ast.Call]:
    """The flax ``apply`` call that gets the key ``maker`` makes, when that is all that happens to it: the
    key (the call itself, or a name bound once to it whose every read in the function is this) is a value of
    the ``rngs={...}`` of a module's ``apply``, and what the module's code shows does not prove a draw from
    that stream (``flaxrng.apply_draw``: dropout off with ``deterministic=True``/``training=False``, a rate
    of zero, or a module this file does not show). Whether anything draws from the key is then unknown
    (fresh AY: a ``dummy_rng = PRNGKey(0)`` per batch of an inference loop, ``training=False``, judged
    FALSE). None otherwise: the key is drawn, split or handed on elsewhere too."""
    ctx = m.context(maker)
    if ctx is None:
        return None
    scope = ctx.scope
    body = scope.node if scope.func is not None else m.tree
    stmt = next((n for n in walk(body) if isinstance(n, ast.Assign) and n.value is maker), None)
    name = None
    if stmt is not None:
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            return None
        name = stmt.targets[0].id
    reads = [maker] if name is None else [
        n for n in walk(body) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        and m.scope_at(n) is scope and _bound_to(m, n, scope, maker)]
    if not reads:
        return None
    found = None
    for read in reads:
        apply = _rngs_apply(m, read)
        if apply is None or found is not None and apply is not found:
            return None
        found = apply
    if flaxrng.apply_draw(m, found, scope, lambda v: any(v is r for r in reads)) is not None:
        return None
    return found


def _bound_to(m, read: ast.Name, scope: Scope, maker: ast.Call) -> bool:
    ev = m.binding(read.id, scope, _pos(read))
    return ev is not None and ev.plain_assign and ev.value is maker


def _rngs_apply(m, value: ast.AST) -> Optional[ast.Call]:
    """The ``apply`` call whose ``rngs={...}`` dict holds ``value`` as one of its values."""
    for call in (c for n in flaxrng.APPLIES for c in m.calls_by_name.get(n, ())):
        rngs = next((k.value for k in call.keywords if k.arg == "rngs"), None)
        if isinstance(rngs, ast.Dict) and any(v is value for v in rngs.values):
            return call
    return None
