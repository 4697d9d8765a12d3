"""Key flow: which binding of a PRNG key each ``jax.random`` call consumes, and the dataflow facts
that decide whether two uses of one key give the program repeated randomness.

JAX's random functions are pure functions of the key: the same key gives the same bits, and with
the default (partitionable) threefry ``split(key, n)[i]`` equals ``split(key, m)[i]`` and
``fold_in(key, i)``. Two uses of one binding of a key therefore repeat randomness, unless:

* one of the results is never read (:func:`result_dead`: ``eval_keys = split(k, n)``
  overwritten before any use);
* the later use only advances the key after a draw (:func:`advances_key`:
  ``perm = permutation(key, idx); (key,) = split(key, 1)``): the new key is derived, no draw repeats;
* the two derivations give different keys (``keypairs.distinct_derivations``:
  ``fold_in(key, n)`` beside ``split(key, n)``, ``fold_in`` with different data);
* the repetition is the point (``keypairs.paired_draws``: ``choice(key, x)`` and
  ``choice(key, y)`` draw the same indices, to keep ``x`` and ``y`` paired).

Reads and bindings are followed per scope with a small reaching-definitions check: a later binding
hides an earlier one from a read when it runs on every path to that read (it is in the read's own
block or an enclosing one, after the earlier binding; inside a loop, the back edge counts).

Functions of the model (``m``), not a mixin: the RNG rules and keydraws import them.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, flaxmodules, flaxrng, initializers
from ..python.branches import name_branches
from ..python.instances import overridden
from ..python.keyflow import ScopeNames, hides
from ..python.records import Scope
from ..python.syntax import _end, _pos, call_arg, plain_target_names, walk, within

JAX_RANDOM = "jax.random."
# jax.random functions that draw from a key (consume it). Key constructors and converters
# (PRNGKey, key, key_data, wrap_key_data, key_impl, clone) only derive or inspect a key and are
# not in this list; split and fold_in derive new keys from one.
SAMPLERS = frozenset({
    "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy", "chisquare", "choice",
    "dirichlet", "double_sided_maxwell", "exponential", "f", "gamma", "generalized_normal", "geometric",
    "gumbel", "laplace", "loggamma", "logistic", "lognormal", "maxwell", "multinomial", "multivariate_normal",
    "normal", "orthogonal", "pareto", "permutation", "poisson", "rademacher", "randint", "rayleigh", "shuffle",
    "t", "triangular", "truncated_normal", "uniform", "wald", "weibull_min",
})
SPLIT = "split"
FOLD_IN = "fold_in"
DERIVERS = frozenset({SPLIT, FOLD_IN})
KEY_FUNCS = SAMPLERS | DERIVERS  # spellings checked before resolving a call
KEY_MAKERS = ("jax.random.PRNGKey", "jax.random.key")
# Methods of distribution objects (distrax, TFP, numpyro-style APIs) that draw with a key passed as
# ``seed=``: ``pi.sample(seed=key)`` is a draw from ``key`` like ``jax.random.normal(key, ...)``.
DIST_SAMPLE = frozenset({"sample", "sample_and_log_prob"})

_SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def is_draw(fn: str) -> bool:
    """Whether a key use's function draws from the key (a sampler, or a distribution's
    ``sample(seed=key)``) rather than deriving keys from it."""
    return fn in SAMPLERS or fn in DIST_SAMPLE or fn in (flaxmodules.INIT, flaxrng.APPLY)


class KeyUse:
    """One ``jax.random`` call (or a call that forwards its key to one) and the binding of the key
    it consumes.

    ``fn``: the jax.random function (a sampler, "split" or "fold_in"; "sample" for a distribution's
    ``sample(seed=key)``); ``name``: the key's variable; ``event``: the
    :class:`~jaxlint.model.Binding` of that variable the call reads; ``ctx``: the call's context;
    ``data``: fold_in's data argument; ``num``: split's count argument (None when left to its
    default of 2); ``spelling``: how the consuming call reads in a message (``jax.random.normal``,
    ``pi.sample``, ``functor``); ``via``: the local lambda or
    def the key was passed to, when the call forwards it; ``pairwise``: whether the use counts
    against another use of the same key (False for a function of the module that only derives
    keys from its parameter: ``_, k = split(key); choice(k, ...)`` there and ``uniform`` of the
    caller's own ``split(key)`` draw different bits, as ``choice``/``randint`` split their key
    again; the same key handed to it on every iteration of a loop still repeats its draws);
    ``remote``: the call hands the key to a function of another module of the project that draws
    from it (counted against other uses; a loop handing it on is facts/keyhandoffs.py's)."""

    __slots__ = ("call", "name", "fn", "ctx", "event", "data", "num", "spelling", "via", "pairwise", "index",
                 "remote")

    def __init__(self, call, name, fn, ctx, event, data=None, num=None, spelling=None, via=None,
                 pairwise=True, index=None, remote=False):
        self.call = call
        self.remote = remote  # handed to a function of another module of the project that draws from it
        self.name = name
        self.index = index  # ``rng[0]``: the constant row of the key array ``name`` the call reads
        self.fn = fn
        self.ctx = ctx
        self.event = event
        self.data = data
        self.num = num
        self.spelling = spelling or f"{JAX_RANDOM}{fn}"
        self.via = via
        self.pairwise = pairwise

    @property
    def shown(self) -> str:
        """The key as the code spells it: ``rng`` or ``rng[0]``."""
        return self.name if self.index is None else f"{self.name}[{self.index}]"


def _key_names(m, scope: Scope) -> ScopeNames:
    memo = m.facts.key_names_memo
    found = memo.get(id(scope))
    if found is None:
        found = memo[id(scope)] = ScopeNames(m, scope)
    return found


def may_call_jax_random(m) -> bool:
    """Whether any name of the module can resolve to a ``jax.random`` function; when not,
    :func:`random_function` is None for every call, and key queries need not look. A name
    resolves to ``jax.random.*`` only through an import whose name mentions ``random`` (``from
    jax import random``, ``import jax.random as jr``, ``from jax._src.random import split``)
    or an attribute ``random`` (``jax.random.normal`` after ``import jax``)."""
    memo = m.facts.may_call_random
    if memo is None:
        memo = "random" in m.attr_names or any(
            "random" in qn for s in m.scopes for qn in s.imports.values())
        m.facts.may_call_random = memo
    return memo


def random_function(m, call: ast.Call, scope: Optional[Scope] = None) -> Optional[str]:
    """The ``jax.random`` function a call calls (``"normal"``, ``"split"``, ...), or None."""
    if not may_call_jax_random(m):
        return None
    qn = m.resolve(call.func, scope)
    if not qn or not qn.startswith(JAX_RANDOM):
        return None
    return qn[len(JAX_RANDOM):]


def key_use(m, call: ast.Call) -> Optional[KeyUse]:
    """The key a sampler, ``split`` or ``fold_in`` call consumes, when it is a variable whose
    binding is known (a parameter or an assignment; a closure variable only when the calling
    scope cannot rebind it). For a call that forwards several keys, the first
    (:func:`key_uses`)."""
    uses = key_uses(m, call)
    return uses[0] if uses else None


def key_uses(m, call: ast.Call) -> list:
    """Every key a call consumes (:func:`key_use`): one for a ``jax.random`` call; for a call
    of the caller's own lambda or def, each key it passes where the helper draws from it,
    as an argument or as an element of a tuple argument (``setup((key, init_key), cfg)``); for
    a call of a top-level function of the module, each key passed in a tuple argument."""
    ctx = m.context(call)
    if ctx is None:
        return []
    scope = ctx.scope
    fn = random_function(m, call, scope)
    init = None if fn in KEY_FUNCS else initializers.draw_spelling(m, call, scope)
    if fn in KEY_FUNCS:
        found = [(fn, call_arg(call, 0, "key"), None, None, True)]
    elif init is not None:  # ``init(key, shape)`` of ``init = jax.nn.initializers.glorot_normal()``: a draw
        found = [("normal", call_arg(call, 0, "key"), init, None, True)]
    else:
        found = _forwarded_keys(m, call, scope)
    out = []
    for fn, arg, spelling, via, direct, *remote in found:
        index = None  # ``normal(rng[0], ...)``: a constant row of a key array, the same key at every read
        if isinstance(arg, ast.Subscript) and isinstance(arg.slice, ast.Constant) and type(arg.slice.value) is int:
            index, arg = arg.slice.value, arg.value
        if not isinstance(arg, ast.Name):
            continue
        if any(lp.kind == "comprehension" and arg.id in lp.target_names() for lp in ctx.loops):
            continue  # ``[draw(k) for k in keys]``: the element, bound (and scoped) per item
        ev = m.binding(arg.id, scope, _pos(arg)) or m.imported_binding(arg.id, scope)
        if ev is None or ev.kind in ("def", "other"):
            continue
        if ev.scope is scope and ev.pos > _pos(arg) and not any(within(ev.node, lp.node) for lp in ctx.loops):
            continue  # read before any binding, outside a loop round to one: unbound (a notebook: the kernel's)
        if ev.scope is not scope:
            # A key from an enclosing scope: only when this scope cannot rebind it.
            if scope.kind != "function" or arg.id in scope.globals or ev.scope.kind == "class":
                continue
        data = call_arg(call, 1, "data") if fn == FOLD_IN and direct else None
        num = call_arg(call, 1, "num") if fn == SPLIT and direct else None
        module_fn = via is not None and via.parent is None and not isinstance(via.node, ast.Lambda)
        out.append(KeyUse(call, arg.id, fn, ctx, ev, data, num, spelling, via,
                          pairwise=not (module_fn and direct and not is_draw(fn)), index=index, remote=bool(remote)))
    return out


def _forwarded_keys(m, call: ast.Call, scope: Scope) -> list:
    """``(fn, key expression, spelling, via, direct)`` for each key a call draws from without
    being a ``jax.random`` call: a distribution's ``pi.sample(seed=key)``, or a lambda or def
    of the calling function's own that passes the parameter given ``key`` to a ``jax.random``
    function (``functor = lambda *a: jax.random.normal(*a) - 4``; ``functor(key, shape)``), or
    an element of a tuple parameter (:func:`tuple_key_parameters`: ``setup((key, k2))``) of
    such a helper or of a top-level function of the module.
    ``direct``: the key is the argument itself, and the call's own arguments read as a
    ``split``'s count or ``fold_in``'s data (as the existing forwarding does)."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in flaxrng.APPLIES:  # ``net.apply(p, x, rngs={"dropout": k})``
        key = flaxrng.apply_key(m, call, scope)
        return [(flaxrng.APPLY, key, _spell(func), None, True)] if key is not None else []
    if isinstance(func, ast.Attribute) and func.attr == flaxmodules.INIT:  # ``Net().init(key, x)``: a draw of weights
        key = call_arg(call, 0, "rngs")
        return [(func.attr, key, _spell(func), None, True)] if key is not None and flaxmodules.module_instance(
            m, func.value, scope) else []
    if isinstance(func, ast.Attribute) and func.attr in DIST_SAMPLE:
        for kw in call.keywords:
            if kw.arg == "seed":
                return [(func.attr, kw.value, _spell(func), None, True)]
        return []
    remote = _imported_draw(m, call, scope) if m.project is not None and id(call) in _imported_calls(m) else None
    if remote:
        return remote  # ``get_t_samples(key, n)`` of another module of the project, which draws from ``key``
    if (isinstance(func, ast.Call) and len(func.args) == 1 and isinstance(func.args[0], ast.Name)
            and m.resolve(func.func, scope) in N.JIT_WRAPPERS):
        func = func.args[0]  # ``jax.jit(run_mcts)(key, state)``: the key goes to ``run_mcts``
    # ``self.f(...)`` in a method: the attribute of the method's own first parameter (whatever its name)
    own_f = scope.func
    method = (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and own_f is not None
              and own_f.is_method and bool(own_f.params) and func.value.id == own_f.params[0])
    if not (isinstance(func, (ast.Name, ast.Lambda)) or method) or scope.kind != "function":
        return []
    if (isinstance(func, ast.Name) and func.id not in _forwarder_names(m)) or (
            method and func.attr not in _forwarder_names(m)):
        return []
    candidates = callables.local_functions(m, func, scope)
    if method and (len(candidates) != 1 or candidates[0].cls is None or overridden(m, candidates[0].cls, func.attr)):
        return []  # overridden in a subclass of the module: which one runs is not shown
    for f in candidates:
        own = scope.within_parent_of(f)
        if not own and f.parent is not None or f.cls is not None and not method:
            continue
        # A key passed to a function of the module is consumed where the function passes that
        # parameter straight to ``jax.random`` (``def init_layer(key, shape): return
        # normal(key, shape)``); a tuple of keys handed to one is a bundle of RNG state it
        # unpacks and consumes: its elements are followed too.
        forwards = key_parameters(m, f)
        in_tuples = tuple_key_parameters(m, f)
        out = []
        direct = False
        # partial(f, a) binds the first parameters; ``self.f(...)`` binds ``self`` (a staticmethod, none)
        bound = callables.bound_positionals(m, func, scope) + (method and f.is_method)
        for i, arg in enumerate(call.args, start=bound):
            if isinstance(arg, ast.Starred):
                break
            if i in forwards and _skipped(m, f, i, call, bound):
                continue  # ``get_data_loader(rng, ds, shuffle=False)``: its draw is under ``if shuffle:``
            if i in forwards:
                if not direct:  # the first key passed as an argument, as the forwarding always did
                    out.append((forwards[i], arg, _spell(func), f, True))
                    direct = True
            elif isinstance(arg, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in arg.elts):
                for j, elt in enumerate(arg.elts):
                    if (i, j) in in_tuples:
                        out.append((in_tuples[(i, j)], elt, _spell(func), f, False))
        if out:
            return out
    return []


def _imported_draw(m, call: ast.Call, scope: Scope) -> list:
    """The first name argument a top-level function of another module of the project draws from, as a forwarded key."""
    target = callables.imported_function(m, call.func, scope)
    if target is None:
        return []
    summary, name = target
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            break
        found = summary.key_draw(name, None, i, None) if isinstance(arg, ast.Name) else None
        if found is not None:
            return [(found[0], arg, _spell(call.func), None, True, True)]
    return []


def _imported_calls(m) -> dict:
    """``{id: call}`` for the calls that may hand a key to another module's function: a call of a plain or
    dotted name with a name argument that reads the binding a ``jax.random`` call of the same scope reads
    as its key (only those ask the other module, when their key uses are asked: two such calls with no
    draw of their own between them are not asked, a cost measured on the pinned corpus). Memoized."""
    memo = m.facts.imported_key_calls_memo
    if memo is not None:
        return memo
    memo = m.facts.imported_key_calls_memo = {}
    if m.project is None:
        return memo
    keyed = [(c, a) for c in m.calls_named(KEY_FUNCS) for a in [call_arg(c, 0, "key")] if isinstance(a, ast.Name)]
    drawn = {(id(m.scope_at(c)), a.id) for c, a in keyed}
    candidates = [c for c in m.calls if isinstance(c.func, (ast.Name, ast.Attribute)) and any(
        isinstance(a, ast.Name) and (id(m.scope_at(c)), a.id) in drawn for a in c.args)] if drawn else []
    if candidates:
        events = {id(m.binding(a.id, m.scope_at(c), _pos(a))) for c, a in keyed}
        memo.update((id(c), c) for c in candidates if any(
            isinstance(a, ast.Name) and id(m.binding(a.id, m.scope_at(c), _pos(a))) in events for a in c.args))
    return memo


def _skipped(m, f, index: int, call: ast.Call, bound: int) -> bool:
    """Whether every draw ``f`` makes from its parameter ``index`` is in the arm of an ``if P:`` that
    ``call`` skips by passing a literal for ``P`` (fresh Y's first look: an evaluation loader built with
    ``shuffle=False`` from a key the training loader had drawn from was reported as reusing it)."""
    draws = [c for i, c in m.facts.key_params_memo.get((id(f), "draws"), ()) if i == index]
    for d in draws:
        off = False
        for name, branch, negate in name_branches(m, f.node, d):
            value = next((k.value for k in call.keywords if k.arg == name), None)
            if value is None and name in f.params and 0 <= f.params.index(name) - bound < len(call.args):
                value = call.args[f.params.index(name) - bound]
            if isinstance(value, ast.Constant) and (branch == 0) != (bool(value.value) != negate):
                off = True
        if not off:
            return False
    return bool(draws)


def tuple_key_parameters(m, f) -> dict:
    """``(parameter index, element index)`` -> the ``jax.random`` function the body of ``f``
    passes that element of a tuple parameter to as the key: unpacked first (``def
    setup(keys): key, init_key = keys``; ``jax.random.split(key)``) or indexed
    (``lambda ks, n: jax.random.normal(ks[0], (n,))``). The parameter is never rebound; the
    unpacking has no starred target and is the binding the draw reads, outside any loop of
    ``f``. Only the function's own calls count."""
    memo = m.facts.tuple_key_params_memo
    found = memo.get(id(f))
    if found is not None:
        return found
    out: dict = {}
    memo[id(f)] = out
    params = f.params
    spelled = _key_func_calls(m)
    for call in f.calls:
        if not m.work.spend():
            break
        if id(call) not in spelled:
            continue
        fn = random_function(m, call, f.scope)
        if fn not in KEY_FUNCS:
            continue
        first = call_arg(call, 0, "key")
        where = None
        if isinstance(first, ast.Subscript) and isinstance(first.value, ast.Name) and \
                isinstance(first.slice, ast.Constant) and type(first.slice.value) is int and first.slice.value >= 0:
            where = (first.value.id, first.slice.value)
        elif isinstance(first, ast.Name):
            ev = m.binding(first.id, f.scope, _pos(first))
            ctx = m.context(call)
            if ev is None or ev.kind != "assign" or ev.scope is not f.scope or ctx is None or ctx.loops:
                continue
            path = ev.path or ()
            if len(path) != 1 or not isinstance(path[0], int) or not isinstance(ev.value, ast.Name):
                continue
            if not _plain_unpacking(f, ev.value):
                continue
            where = (ev.value.id, path[0])
        if where is None or where[0] not in params:
            continue
        if len(f.scope.events.get(where[0], ())) != 1:
            continue  # the parameter is rebound in the body: not the argument any more
        out.setdefault((params.index(where[0]), where[1]), fn)
    return out


def _plain_unpacking(f, value: ast.Name) -> bool:
    """Whether ``value`` is the whole right side of a ``a, b = value`` statement of ``f`` whose
    targets are plain names, none starred."""
    for stmt in walk(f.node):
        if isinstance(stmt, ast.Assign) and stmt.value is value:
            return len(stmt.targets) == 1 and isinstance(stmt.targets[0], (ast.Tuple, ast.List)) and all(
                isinstance(e, ast.Name) for e in stmt.targets[0].elts)
    return False


def _forwarder_names(m) -> set:
    """Names bound to a nested lambda or def that forwards a key parameter, and of module
    functions that draw from an element of a tuple parameter (a cheap filter)."""
    memo = m.facts.forwarder_names_memo
    if memo is None:
        memo = set()
        for f in m.functions if may_call_jax_random(m) else ():  # else no key parameters
            if f.parent is None:  # a top-level function, or a method (``self._random_goal(rng)``)
                if not isinstance(f.node, ast.Lambda) and (key_parameters(m, f) or tuple_key_parameters(m, f)):
                    memo.add(f.name)
                continue
            if not (key_parameters(m, f) or tuple_key_parameters(m, f)):
                continue
            if isinstance(f.node, ast.Lambda):
                stmt = _lambda_stmt(m, f)
                if isinstance(stmt, ast.Assign):
                    out: list = []
                    for t in stmt.targets:
                        plain_target_names(t, out)
                    memo.update(out)
            else:
                memo.add(f.name)
        m.facts.forwarder_names_memo = memo
    return memo


def _lambda_stmt(m, f) -> Optional[ast.stmt]:
    parent = f.scope.parent
    if parent is None or parent.kind != "function":
        return None
    for stmt in walk(parent.node):
        if isinstance(stmt, ast.Assign) and stmt.value is f.node:
            return stmt
    return None


def key_parameters(m, f) -> dict:
    """Positional parameter index -> the ``jax.random`` function the body of ``f`` passes that
    parameter to as the key, directly (``jax.random.normal(key, shape)``) or as the first of
    its ``*args`` (``lambda *a: jax.random.normal(*a)``). Only the function's own calls count
    (not those of functions nested in it)."""
    memo = m.facts.key_params_memo
    found = memo.get(id(f))
    if found is not None:
        return found
    out: dict = {}
    memo[id(f)] = out
    node = f.node
    vararg = node.args.vararg.arg if node.args.vararg is not None else None
    spelled = _key_func_calls(m)
    for call in f.calls:
        if id(call) not in spelled:
            continue
        fn = random_function(m, call, f.scope)
        if fn not in KEY_FUNCS:
            continue
        first = call.args[0] if call.args else None
        if first is None:
            for kw in call.keywords:
                if kw.arg == "key":
                    first = kw.value
        if isinstance(first, ast.Name) and first.id in f.params:
            ev, ctx, events = m.binding(first.id, f.scope, _pos(first)), m.context(call), f.scope.events[first.id]
            if ev is None or ctx is None or len(events) > 1 and (ev.kind != "param" or ctx.loops) and not (
                    is_draw(fn) and all(e.kind == "param" or e.pos > _pos(call) for e in events)):
                # rebound before the call: not the argument; a draw that every binding but the
                # parameter's follows reads it (in a loop, on its first iteration: ``normal(rng, s);
                # rng += 1``); a split there hands on keys whose draws keyhandoffs proves or not
                continue
            out.setdefault(f.params.index(first.id), fn)
            memo.setdefault((id(f), "draws"), []).append((f.params.index(first.id), call))
        elif isinstance(first, ast.Starred) and isinstance(first.value, ast.Name) and first.value.id == vararg:
            out.setdefault(len(f.params), fn)
    return out


def _key_func_calls(m) -> frozenset:
    """Ids of the calls spelled as a KEY_FUNCS function or a local alias of one
    (:meth:`~jaxlint.model.ModuleModel.calls_named`), the calls :func:`key_use_groups` groups:
    the only ones resolved when looking for the key parameters of a function."""
    memo = m.facts.key_func_calls_memo
    if memo is None:
        memo = m.facts.key_func_calls_memo = frozenset(map(id, m.calls_named(KEY_FUNCS)))
    return memo


def key_use_groups(m) -> list:
    """The key uses of the module grouped by the binding they consume (and the scope they run
    in), each group in source order; groups in the order of their first use."""
    groups: dict = {}
    calls = list(m.calls_named(KEY_FUNCS))
    calls.extend(c for name in (*DIST_SAMPLE, flaxmodules.INIT) for c in m.calls_by_name.get(name, ()))
    calls.extend(c for name in flaxrng.APPLIES for c in m.calls_by_name.get(name, ())
                 if any(k.arg == "rngs" and isinstance(k.value, ast.Dict) for k in c.keywords))
    names = _forwarder_names(m)
    calls.extend(c for name in names for c in m.calls_by_name.get(name, ()))
    calls.extend(_imported_calls(m).values())
    calls.extend(initializers.calls(m))
    calls.extend(c for c in m.calls_by_name.get("", ()) if isinstance(c.func, ast.Call)
                 and len(c.func.args) == 1 and isinstance(c.func.args[0], ast.Name)
                 and c.func.args[0].id in names)  # ``jax.jit(helper)(key, ...)``
    seen: set = set()
    for call in calls:
        if id(call) in seen:
            continue
        seen.add(id(call))
        for use in key_uses(m, call):
            groups.setdefault((id(use.event), id(use.ctx.scope), use.index), []).append(use)
    return [sorted(g, key=lambda u: _pos(u.call)) for g in groups.values()]

# -- keys that stay the same from one call to the next


def result_dead(m, call: ast.Call) -> bool:
    """Whether the value ``call`` returns is never read: the call is a statement of its own, or
    its statement binds only plain names and every one of them is rebound before any read
    (``eval_keys = split(key, n)`` overwritten by the next ``eval_keys = ...``). A name read by
    a nested function, declared global, or bound at module level and never rebound (another
    module may import it) is read."""
    ctx = m.context(call)
    if ctx is None:
        return False
    scope = ctx.scope
    if scope.kind == "class":
        return False
    names = _key_names(m, scope)
    stmt = names.statement(call)
    if stmt is None:
        return False
    if isinstance(stmt, ast.Expr):
        return stmt.value is call
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
        return False
    if not within(call, stmt.value):
        return False
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    bound: list = []
    for t in targets:
        if not plain_target_names(t, bound):
            return False  # x.attr = ..., x[i] = ...: stored in an object, read elsewhere
    if not bound:
        return False
    return all(_binding_dead(m, names, scope, name, stmt) for name in bound)


def _binding_dead(m, names: ScopeNames, scope: Scope, name: str, stmt: ast.stmt) -> bool:
    if name in scope.globals or name == "__all__":
        return False
    events = names.by_name.get(name, ())
    mine = [e for e in events if e.stmt is stmt and e.store]
    if not mine:
        return False
    ctx = mine[0].ctx
    end = _end(stmt)
    loop_starts = [_pos(lp.node) for lp in ctx.loops]
    rebound_later = False
    for r in events:
        if r.store:
            if r.definite and r.pos > end:
                rebound_later = True
            continue
        if r.nested:
            return False
        if r.pos > end:
            lower = end
        elif any(lp in r.ctx.loops for lp in ctx.loops):
            # read earlier in a loop around the binding (or by the binding's own value): it
            # sees the binding on the next iteration, unless rebound since the innermost
            # loop they share began
            lower = max(s for lp, s in zip(ctx.loops, loop_starts) if lp in r.ctx.loops)
        else:
            continue
        if not any(hides(b, r, lower) for b in events if b.store and b.definite and b.stmt is not stmt):
            return False
    if scope.kind == "module" and not rebound_later and m.importable:
        return False  # a module's name may be imported elsewhere (a notebook's: not)
    return True


def advances_key(m, use: KeyUse) -> bool:
    """A ``split``/``fold_in`` whose result rebinds the key it consumes: ``key, sub =
    split(key)``, ``(key,) = split(key, 1)``, ``key = split(key)[0]``. After a draw from the key
    this is the idiom that moves on to a new key: nothing drawn repeats."""
    if use.fn not in DERIVERS:
        return False
    names = _key_names(m, use.ctx.scope)
    stmt = names.statement(use.call)
    if not isinstance(stmt, ast.Assign):
        return False
    value = stmt.value
    while isinstance(value, ast.Subscript):
        value = value.value
    if value is not use.call:
        return False
    bound: list = []
    for t in stmt.targets:
        plain_target_names(t, bound)
    return use.name in bound


def _spell(expr: ast.AST) -> str:
    try:
        text = ast.unparse(expr)
    except Exception:  # pragma: no cover - unparse of a parsed tree does not fail
        return "the call"
    return text if len(text) <= 40 else text[:37] + "..."


def keyed_apply(m, call: ast.Call, scope: Scope) -> bool:
    """``model.apply(params, x, rngs={"dropout": key})``: a module's ``apply`` given a dict of PRNG keys as ``rngs``
    (a JAX key, or one made in place), flax's signature: it runs the module's JAX operations and returns JAX
    arrays, whatever module it is (one defined in a module this file does not resolve)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in flaxrng.APPLIES:
        return False
    rngs = next((k.value for k in call.keywords if k.arg == "rngs"), None)
    if not isinstance(rngs, ast.Dict) or not rngs.values:
        return False
    from . import values as V  # values reads key facts: imported when asked

    return all(isinstance(v, ast.Call) and m.resolve(v.func, scope) in KEY_MAKERS or V.is_jax(m, v, scope)
               for v in rngs.values if v is not None)
