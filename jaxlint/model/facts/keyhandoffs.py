"""Keys handed unchanged to a callee on every iteration of a loop: ``train_epoch(state, rng, ...)``
per epoch with ``rng`` never advanced, ``negative_sampling(graph, n, key=key)`` per epoch.

JAX's random functions are pure in the key, so a callee that draws from a key it receives (after
any number of splits, in a loop of its own or through further calls) draws the same numbers every
time it gets the same key. Three facts make the finding:

* the key is the same object in every iteration: the argument is a name the loop never rebinds
  (a key split in the loop with the new key carried, or ``fold_in(key, i)``, is a new binding);
* the loop repeats (its role, asked by the rule);
* the callee draws from it (:func:`parameter_draw`): proven when the callee is a function of this
  module whose body passes the parameter, or a key derived from it by ``split``/``fold_in``, to a
  ``jax.random`` sampler or a distribution's ``sample(seed=...)``, directly or through more
  functions of the module; unknown when the key (or a key derived from it) reaches a function
  that is not the module's (a library's ``update_fn``, ``model.apply(rngs=...)``); a haiku
  transform's ``apply(params, rng, ...)`` draws where :func:`.haikurng.apply_draw` proves it, a flax
  module's ``apply(..., rngs={"dropout": rng})`` where :func:`.flaxrng.apply_draw` does. A callee that
  ignores the key, or only derives keys and returns them, does not draw (no finding).

For a callee of another module of the project, the same: its draw from the parameter is read
from that module (:func:`imported_draw`), and proves the argument a key. For any other callee (a
library's), the argument must be proven a key (:func:`proven_key`: made by
``jax.random.key``/``PRNGKey``/``split``/``fold_in``, stacked or indexed) and drawing stays unknown.

Functions of the model (``m``), not a mixin: JAX502 (jaxlint_rules/rng.py) asks them.
"""

from __future__ import annotations

import ast
import builtins
from typing import Optional

from . import callables, flaxrng, haikurng, keys
from .keys import DERIVERS, DIST_SAMPLE, SAMPLERS
from ...names import JIT_WRAPPERS
from ..python.branches import name_branches
from ..python.syntax import _pos, call_arg, unparse, walk

MAX_DEPTH = 3  # calls followed from the callee to the draw
_KEY_VALUES = DERIVERS | {"key_data", "wrap_key_data", "clone", "PRNGKey", "key"}
# Array functions that keep a key (or a list of keys) a key: ``keys = jnp.stack(keys)``.
_KEEPERS = frozenset({"jax.numpy.stack", "jax.numpy.array", "jax.numpy.asarray", "jax.numpy.concatenate",
                      "jax.device_put", "jax.device_put_replicated", "numpy.stack", "numpy.array"})
_BUILTINS = frozenset(dir(builtins))


class Draw:
    """How a callee uses a key parameter: ``proven`` True when it draws (``call`` is the draw,
    ``chain`` the functions of the module from the callee to it), False when the key reaches
    ``call``, a function outside the module, whose drawing is unknown."""

    __slots__ = ("proven", "call", "fn", "chain", "remote")

    def __init__(self, proven, call, fn, chain, remote=None):
        self.proven = proven
        self.call = call
        self.fn = fn
        self.chain = chain
        # a draw in another module of the project: ``(path, line, spelling, chain names)``; ``call`` is None
        self.remote = remote


class Handoff:
    """A key argument of a call in a loop: ``arg`` (a name), the binding it reads (``event``),
    the call's context, the callee's functions of the module (``callees``; empty when it is not
    one of them) and the :class:`Draw` (None for a callee outside the module)."""

    __slots__ = ("call", "arg", "event", "ctx", "callee", "_draw", "_ask", "key_proven")

    def __init__(self, call, arg, event, ctx, callee, draw, ask=None, key_proven=True):
        self.call = call
        self.arg = arg
        self.event = event
        self.ctx = ctx
        self.callee = callee
        self._draw = draw
        self._ask = ask  # for a callee of another module: reads that module when first asked
        self.key_proven = key_proven  # False: only the callee's draw would prove the argument a key

    @property
    def draw(self) -> Optional[Draw]:
        if self._ask is not None:
            self._draw, self._ask = self._ask(), None
        return self._draw


def key_handoffs(m) -> list:
    """:class:`Handoff` records for every call in a loop that passes a plain name where a callee
    of the module draws from it (:func:`parameter_draw`), or a proven key (:func:`proven_key`) to
    a callee outside the module. Calls that are ``jax.random`` functions, or whose key use the
    key flow already records (:func:`~jaxlint.model.keys.key_uses`), are left out."""
    memo = m.facts.key_handoffs_memo
    if memo is not None:
        return memo
    out: list = []
    if keys.may_call_jax_random(m):
        for calls in m.calls_by_name.values():
            for call in calls:
                if not m.work.spend():
                    break
                out.extend(_handoffs(m, call))
    out.sort(key=lambda h: _pos(h.call))
    m.facts.key_handoffs_memo = out
    return out


def _handoffs(m, call: ast.Call) -> list:
    ctx = m.context(call)
    if ctx is None or not ctx.loops:
        return []
    named = [(i, None, a) for i, a in enumerate(call.args) if isinstance(a, ast.Name)]
    if any(isinstance(a, ast.Starred) for a in call.args):
        named = [t for t in named if all(not isinstance(a, ast.Starred) for a in call.args[:t[0]])]
    named += [(None, kw.arg, kw.value) for kw in call.keywords if kw.arg and isinstance(kw.value, ast.Name)]
    if not named:
        return []
    scope = ctx.scope
    if keys.random_function(m, call, scope) is not None or any(not u.remote for u in keys.key_uses(m, call)):
        return []  # (a key handed to another module's drawing function is a hand-off here too)
    if isinstance(call.func, ast.Attribute) and call.func.attr in DIST_SAMPLE:
        return []
    callees = [g for g in callables.local_functions(m, call.func, scope) if g.node is not None]
    out = []
    for index, kw, arg in named:
        ev = m.binding(arg.id, scope, _pos(arg))
        if ev is None or ev.kind in ("def", "other", "for"):
            continue
        if any(lp.kind == "comprehension" and arg.id in lp.target_names() for lp in ctx.loops):
            continue
        if callees:
            draw = None
            shift = callables.bound_positionals(m, call.func, scope) if index is not None else 0
            if index is not None and not isinstance(call.func, ast.Attribute):  # (``_parameter`` reads ``obj.f(...)``)
                bound = callables.bound_self(m, call.func, scope)  # ``fn = jax.jit(obj.method)``: obj binds the first
                if bound is None:
                    continue
                shift += bound
            for g in callees:
                param = _parameter(g, call, None if index is None else index + shift, kw)
                found = parameter_draw(m, g, param, 0) if param else None
                if found is not None and (draw is None or (found.proven and not draw.proven)):
                    draw = found
            if draw is None or _switched_off(m, callees[0], draw, call):
                continue
            if not draw.proven and not proven_key(m, arg, scope, 0):
                continue  # reaches a library call: only a proven key is worth asking about
            out.append(Handoff(call, arg, ev, ctx, callees[0], draw))
        elif _outside(m, call, scope):
            # a callee of another module of the project that draws from the parameter proves the
            # argument a key, as a callee of this module does; any other callee needs a proven key.
            # That module is read only when the rule asks (after the cheaper facts of the loop).
            out.append(Handoff(call, arg, ev, ctx, None, None, key_proven=proven_key(m, arg, scope, 0),
                               ask=lambda c=call, s=scope, i=index, k=kw: imported_draw(m, c, s, i, k)))
    return out


def imported_draw(m, call: ast.Call, scope, index: Optional[int], kw: Optional[str]) -> Optional[Draw]:
    """A proven :class:`Draw` when the callee is a function of another module of the project that
    draws from the key the argument binds: an imported function, an instance of an imported class
    (its ``__call__``), either one jitted (``jit_sampler = jax.jit(Sampler(...))``); None otherwise."""
    target = _imported_callee(m, call.func, scope, 0)
    if target is None:
        return None
    summary, name, cls = target
    found = summary.key_draw(name, cls, index, kw)
    if found is None:
        return None
    fn, line, spelling, chain = found
    return Draw(True, None, fn, [], remote=(summary.path, line, spelling, chain))


def _imported_callee(m, func: ast.AST, scope, depth: int) -> Optional[tuple]:
    """``(summary, name, cls)``: what calling ``func`` runs in another module of the project."""
    if depth > 3 or not m.work.spend():
        return None
    found = callables.imported_function(m, func, scope)
    if found is not None:
        return found[0], found[1], None
    if isinstance(func, ast.Name):
        ev = m.binding(func.id, scope, _pos(func))
        if ev is None or not ev.plain_assign or not isinstance(ev.value, ast.Call):
            return None
        value, scope = ev.value, ev.scope
    elif isinstance(func, ast.Call):
        value = func
    else:
        return None
    if m.resolve(value.func, scope) in JIT_WRAPPERS:
        return _imported_callee(m, value.args[0], scope, depth + 1) if value.args else None
    made = callables.imported_function(m, value.func, scope)  # ``Sampler(...)``: an instance
    return (made[0], "__call__", made[1]) if made is not None else None


def remote_draw(m, name: str, cls: Optional[str], index: Optional[int], kw: Optional[str]) -> Optional[tuple]:
    """For another module's question (:meth:`~jaxlint.project.ProjectResolver.key_draw`): where this
    module's function ``name`` (a method of the top-level class ``cls``) draws from the parameter
    argument ``index`` (or keyword ``kw``) binds, as ``(fn, line, spelling, chain names)``."""
    for g in m.functions:
        if g.name != name or g.node is None or (g.cls.node.name if g.cls is not None else None) != cls:
            continue
        if (cls is None and g.parent is not None) or (cls is not None and g.cls.node not in m.tree.body):
            continue
        params = g.params[1:] if cls is not None and not _static(g) and g.params else g.params
        param = (kw if kw in params or kw in g.kwonly else None) if kw is not None else (
            params[index] if index is not None and index < len(params) else None)
        draw = parameter_draw(m, g, param, 0) if param else None
        if draw is not None and draw.proven and draw.call is not None:
            chain = tuple(f"{cls}.{f.name}" if f is g and cls else f.name for f in draw.chain)
            return draw.fn, draw.call.lineno, unparse(draw.call.func, 30), chain
    return None


def _parameter(g, call: ast.Call, index: Optional[int], kw: Optional[str]) -> Optional[str]:
    """The parameter of ``g`` that argument ``index`` (or keyword ``kw``) of ``call`` binds."""
    if isinstance(g.node, ast.Lambda) and g.node.args.vararg is not None:
        return None
    if kw is not None:
        return kw if kw in g.params or kw in g.kwonly else None
    params = g.params
    if g.cls is not None and params and isinstance(call.func, ast.Attribute) and not _static(g):
        params = params[1:]  # ``self.step(key)``: the key binds the second parameter
    return params[index] if index < len(params) else None


def _static(g) -> bool:
    return any(d.rsplit(".", 1)[-1] == "staticmethod" for d in g.decorators)


def _outside(m, call: ast.Call, scope) -> bool:
    """Whether the callee is a function that is neither the module's nor JAX's, NumPy's or a
    builtin (which do not draw unless they are ``jax.random``'s): a library's, or another
    module's."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in _BUILTINS and m.binding(func.id, scope, _pos(func)) is None:
        return False
    qn = m.resolve(func, scope)
    if qn and qn.split(".", 1)[0] in ("jax", "numpy", "builtins", "math", "functools", "operator"):
        return False
    if isinstance(func, ast.Attribute) and func.attr in ("append", "extend", "insert", "add", "update",
                                                         "format", "setdefault", "put", "get"):
        return False  # a container's method: the key is stored, not drawn from here
    return True


def proven_key(m, expr: ast.AST, scope, depth: int) -> bool:
    """Whether ``expr`` is a PRNG key (or an array or list of keys) by its data flow: made by a
    ``jax.random`` key constructor or deriver, or an item, a stack or an array of such keys."""
    if depth > 5 or not m.work.spend():
        return False
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Name):
        ev = m.binding(expr.id, scope, _pos(expr))
        if ev is None or ev.kind != "assign":
            return False
        if ev.path is not None and not _key_call(m, ev.value, ev.scope):
            return False  # one element of an unpacked tuple: only a split's elements are keys
        return proven_key(m, ev.value, ev.scope, depth + 1)
    if isinstance(expr, (ast.List, ast.Tuple)):
        return bool(expr.elts) and all(proven_key(m, e, scope, depth + 1) for e in expr.elts)
    if not isinstance(expr, ast.Call):
        return False
    if _key_call(m, expr, scope):
        return True
    if m.resolve(expr.func, scope) in _KEEPERS and expr.args:
        return proven_key(m, expr.args[0], scope, depth + 1)
    return False


def _key_call(m, expr: Optional[ast.AST], scope) -> bool:
    return isinstance(expr, ast.Call) and keys.random_function(m, expr, scope) in _KEY_VALUES


# -- the callee's side


def parameter_draw(m, f, param: str, depth: int) -> Optional[Draw]:
    """Whether ``f`` draws from its parameter ``param`` (:class:`Draw`; None when it ignores it
    or only derives keys from it that it returns). Keys derived from it with ``split``/``fold_in``
    (in a loop or not, carried or not) are followed; a nested function of ``f`` that reads them
    counts as ``f``'s code. Memoized per function and parameter."""
    memo = m.facts.parameter_draw_memo
    k = (id(f), param)
    if k in memo:
        return memo[k]
    memo[k] = None  # recursion guard
    found = _parameter_draw(m, f, param, depth) if depth <= MAX_DEPTH else None
    memo[k] = found
    return found


def _parameter_draw(m, f, param: str, depth: int) -> Optional[Draw]:
    if param not in f.params and param not in f.kwonly:
        return None
    nodes = _code(m, f.node, param)
    derived = _derived(m, f, nodes, param)
    if derived is None:
        return None
    unknown = None
    for call in (n for n in nodes if isinstance(n, ast.Call)):
        if not m.work.spend():
            break
        scope = m.scope_at(call)
        fn = keys.random_function(m, call, scope)
        if fn in SAMPLERS:
            if _reads(call_arg(call, 0, "key"), derived):
                return Draw(True, call, fn, [f])
            continue
        if fn is not None:
            continue  # split/fold_in (followed by _derived), key_data, ...
        if isinstance(call.func, ast.Attribute) and call.func.attr in DIST_SAMPLE:
            if any(kw.arg == "seed" and _reads(kw.value, derived) for kw in call.keywords):
                return Draw(True, call, call.func.attr, [f])
            continue
        args = [(i, None, a) for i, a in enumerate(call.args)] + [(None, kw.arg, kw.value) for kw in call.keywords]
        passed = [(i, kw) for i, kw, a in args if _carries(a, derived)]
        if not passed:
            continue
        callees = [g for g in callables.local_functions(m, call.func, scope) if g is not f]
        if not callees:
            drawn = haikurng.apply_draw(m, call, scope, passed)
            if drawn is not None:  # ``net.apply(params, rng, x)`` of a haiku transform that draws
                return Draw(True, drawn, "hk.next_rng_key", [f])
            drawn = flaxrng.apply_draw(m, call, scope, lambda v: _reads(v, derived))
            if drawn is not None:  # ``model.apply(params, x, rngs={"dropout": rng})`` that drops out
                return Draw(True, drawn, unparse(drawn.func, 30), [f])
            if unknown is None and _outside(m, call, scope):
                unknown = Draw(False, call, None, [f])
            continue
        for g in callees:
            for i, kw in passed:
                p = _parameter(g, call, i, kw) if (kw is not None or i is not None) else None
                sub = parameter_draw(m, g, p, depth + 1) if p else None
                if sub is None:
                    continue
                found = Draw(sub.proven, sub.call, sub.fn, [f] + sub.chain)
                if found.proven:
                    return found
                unknown = unknown or found
    return unknown


def _code(m, node: ast.AST, param: str) -> list:
    """The nodes of a function's body, nested functions included unless they rebind ``param``
    as a parameter of their own (the body is walked once per function: :func:`_body`)."""
    return [n for n, shadowing in _body(m, node) if param not in shadowing]


def _body(m, node: ast.AST) -> list:
    """``[(node, parameter names of the nested functions around it)]`` for a function's body in
    source order, nested functions' bodies included, classes left out; memoized per function."""
    memo = m.facts.body_nodes_memo
    found = memo.get(id(node))
    if found is not None:
        return found
    out: list = []
    stack = [(n, frozenset()) for n in (node.body if isinstance(node.body, list) else [node.body])]
    while stack:
        n, shadowing = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = n.args
            inner = shadowing | {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
            stack.extend((b, inner) for b in (n.body if isinstance(n.body, list) else [n.body]))
            continue
        if isinstance(n, ast.ClassDef):
            continue
        out.append((n, shadowing))
        stack.extend((c, shadowing) for c in ast.iter_child_nodes(n))
    out.sort(key=lambda t: (getattr(t[0], "lineno", 0), getattr(t[0], "col_offset", 0)))
    memo[id(node)] = out
    return out


def _derived(m, f, nodes: list, param: str) -> Optional[set]:
    """The names holding ``param`` or keys derived from it (``key, sub = split(key)``; ``ks =
    split(key, n)``; ``k = ks[0]``); None when ``param`` is rebound to anything else (it is then
    not only the argument)."""
    assigns = [n for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None]
    names = {param}
    changed = True
    while changed:
        changed = False
        for a in assigns:
            targets = {t.id for tt in (a.targets if isinstance(a, ast.Assign) else [a.target])
                       for t in walk(tt) if isinstance(t, ast.Name)}
            if targets and not targets <= names and _derives(m, a.value, names, f.scope):
                names |= targets
                changed = True
    for n in nodes:
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
            tgts = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(t, ast.Name) and t.id == param for tt in tgts for t in walk(tt)):
                value = getattr(n, "value", None)
                if isinstance(n, (ast.AugAssign, ast.For, ast.AsyncFor)) or not _derives(m, value, names, f.scope):
                    return None
    return names


def _derives(m, value: Optional[ast.AST], names: set, scope) -> bool:
    if _reads(value, names):
        return True
    if isinstance(value, ast.Call) and keys.random_function(m, value, scope) in DERIVERS:
        return _reads(call_arg(value, 0, "key"), names)
    return False


def _reads(expr: Optional[ast.AST], names: set) -> bool:
    """``expr`` is one of ``names`` or an item of one."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id in names


def _carries(expr: ast.AST, names: set) -> bool:
    """An argument that hands a derived key on: the key itself, an item of it, or an element or
    value of a literal tuple, list or dict (``rngs={"dropout": rng}``)."""
    if _reads(expr, names):
        return True
    if isinstance(expr, (ast.Tuple, ast.List)):
        return any(_reads(e, names) for e in expr.elts)
    if isinstance(expr, ast.Dict):
        return any(v is not None and _reads(v, names) for v in expr.values)
    return False


def _switched_off(m, g, draw: Draw, call: ast.Call) -> bool:
    """Whether the call passes a literal that skips the branch of ``g`` the draw is in (``if not
    deterministic: ... normal(key, ...)`` called with ``deterministic=True``), when the draw is
    in ``g`` itself."""
    if draw.chain[0] is not g or len(draw.chain) != 1:
        return False
    for name, branch, negate in name_branches(m, g.node, draw.call):
        value = _literal_argument(g, call, name)
        if value is None:
            continue
        if (branch == 0) != (bool(value.value) != negate):
            return True
    return False


def _literal_argument(g, call: ast.Call, name: str) -> Optional[ast.Constant]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value if isinstance(kw.value, ast.Constant) else None
    params = g.params
    if g.cls is not None and params and isinstance(call.func, ast.Attribute) and not _static(g):
        params = params[1:]
    if name in params:
        i = params.index(name)
        if i < len(call.args) and isinstance(call.args[i], ast.Constant):
            return call.args[i]
    return None
