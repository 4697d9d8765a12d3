"""Key flow: which binding of a PRNG key each ``jax.random`` call consumes, and the dataflow facts
that decide whether two uses of one key give the program repeated randomness.

JAX's random functions are pure functions of the key: the same key gives the same bits, and with
the default (partitionable) threefry ``split(key, n)[i]`` equals ``split(key, m)[i]`` and
``fold_in(key, i)``. Two uses of one binding of a key therefore repeat randomness, unless:

* one of the results is never read (:meth:`KeyQueries.result_dead`: ``eval_keys = split(k, n)``
  overwritten before any use);
* the later use only advances the key after a draw (:meth:`KeyQueries.advances_key`:
  ``perm = permutation(key, idx); (key,) = split(key, 1)``): the new key is derived, no draw repeats;
* the two derivations give different keys (:meth:`KeyQueries.distinct_derivations`:
  ``fold_in(key, n)`` beside ``split(key, n)``, ``fold_in`` with different data);
* the repetition is the point (:meth:`KeyQueries.paired_draws`: ``choice(key, x)`` and
  ``choice(key, y)`` draw the same indices, to keep ``x`` and ``y`` paired).

Reads and bindings are followed per scope with a small reaching-definitions check: a later binding
hides an earlier one from a read when it runs on every path to that read (it is in the read's own
block or an enclosing one, after the earlier binding; inside a loop, the back edge counts).
"""

from __future__ import annotations

import ast
from typing import Optional

from .records import Context, Scope
from .syntax import _end, _pos, call_arg

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
# Draws of indices: with one key they pick the same indices for arrays of the same length, which
# is how a dataset's inputs and labels are shuffled or subsampled together. Name of the data argument.
_INDEX_DRAWS = {"choice": "a", "permutation": "x", "shuffle": "x"}

_SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class KeyUse:
    """One ``jax.random`` call and the binding of the key it consumes.

    ``fn``: the jax.random function (a sampler, "split" or "fold_in"); ``name``: the key's variable;
    ``event``: the :class:`~jaxlint.model.Binding` of that variable the call reads; ``ctx``: the
    call's context; ``data``: fold_in's data argument; ``num``: split's count argument (None when
    left to its default of 2)."""

    __slots__ = ("call", "name", "fn", "ctx", "event", "data", "num")

    def __init__(self, call, name, fn, ctx, event, data=None, num=None):
        self.call = call
        self.name = name
        self.fn = fn
        self.ctx = ctx
        self.event = event
        self.data = data
        self.num = num


class _NameEvent:
    __slots__ = ("name", "store", "definite", "pos", "ctx", "nested", "stmt")

    def __init__(self, name, store, definite, pos, ctx, nested, stmt):
        self.name = name
        self.store = store  # a binding (else a read)
        self.definite = definite  # ``name = ...``: the binding certainly happens when the statement runs
        self.pos = pos  # reads: where the name is; bindings: the end of the statement (after the value)
        self.ctx = ctx
        self.nested = nested  # a read inside a nested function or class: runs at an unknown time
        self.stmt = stmt


def _prefix(short: tuple, long: tuple) -> bool:
    return len(short) <= len(long) and long[:len(short)] == short


class _ScopeNames:
    """Every read and binding of a name in one scope's own code, in source order, with contexts."""

    def __init__(self, model, scope: Scope):
        self.model = model
        self.by_name: dict = {}
        self.simple: list = []  # (start, end, stmt): the simple statements of the scope
        node = scope.node
        body = node.body if not isinstance(node, ast.Lambda) else []
        self._body(body, None)

    def _add(self, name, store, definite, pos, ctx, nested, stmt):
        self.by_name.setdefault(name, []).append(_NameEvent(name, store, definite, pos, ctx, nested, stmt))

    def _body(self, stmts, fallback: Optional[Context]) -> None:
        for stmt in stmts:
            ctx = self.model.ctx.get(id(stmt), fallback)
            if ctx is None:
                continue
            self._stmt(stmt, ctx)

    def _stmt(self, stmt: ast.stmt, ctx: Context) -> None:
        if isinstance(stmt, _SIMPLE):
            self.simple.append((_pos(stmt), _end(stmt), stmt))
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            if stmt.value is not None:
                self._reads(stmt.value, ctx, stmt)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                self._target(t, ctx, stmt, definite=stmt.value is not None)
            return
        if isinstance(stmt, ast.AugAssign):
            self._reads(stmt.value, ctx, stmt)
            if isinstance(stmt.target, ast.Name):
                self._add(stmt.target.id, False, False, _pos(stmt.target), ctx, False, stmt)
                self._add(stmt.target.id, True, False, _end(stmt), ctx, False, stmt)
            else:
                self._reads(stmt.target, ctx, stmt)
            return
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for part in stmt.decorator_list:
                self._reads(part, ctx, stmt)
            self._nested(stmt, ctx)
            self._add(stmt.name, True, False, _end(stmt), ctx, False, stmt)
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            self._reads(stmt.iter, ctx, stmt)
            inner = self.model.ctx.get(id(stmt.body[0]), ctx) if stmt.body else ctx
            self._target(stmt.target, inner, stmt, definite=False)
            self._body(stmt.body, inner)
            self._body(stmt.orelse, ctx)
            return
        if isinstance(stmt, ast.While):
            self._reads(stmt.test, self.model.ctx.get(id(stmt.test), ctx), stmt)
            self._body(stmt.body, ctx)
            self._body(stmt.orelse, ctx)
            return
        if isinstance(stmt, ast.If):
            self._reads(stmt.test, ctx, stmt)
            self._body(stmt.body, ctx)
            self._body(stmt.orelse, ctx)
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self._reads(item.context_expr, ctx, stmt)
                if item.optional_vars is not None:
                    self._target(item.optional_vars, ctx, stmt, definite=False)
            self._body(stmt.body, ctx)
            return
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self._body(stmt.body, ctx)
            for h in stmt.handlers:
                if h.type is not None:
                    self._reads(h.type, ctx, stmt)
                if h.name:
                    self._add(h.name, True, False, _pos(h), ctx, False, stmt)
                self._body(h.body, ctx)
            self._body(stmt.orelse, ctx)
            self._body(stmt.finalbody, ctx)
            return
        # Return, Raise, Assert, Delete, Match, Global, ...: read every name in it; ``match`` arms
        # and their captures are read conservatively (a capture is not a definite binding).
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name):
                self._add(n.id, not isinstance(n.ctx, ast.Load), False, _pos(n), ctx, False, stmt)
            elif isinstance(n, _NESTED):
                self._nested(n, ctx)

    def _target(self, t: ast.AST, ctx: Context, stmt, definite: bool) -> None:
        if isinstance(t, ast.Name):
            self._add(t.id, True, definite, _end(stmt) if definite else _pos(t), ctx, False, stmt)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for elt in t.elts:
                self._target(elt, ctx, stmt, definite)
        elif isinstance(t, ast.Starred):
            self._target(t.value, ctx, stmt, definite)
        else:  # x.attr = ..., x[i] = ...: reads x (and the index)
            self._reads(t, ctx, stmt)

    def _reads(self, expr: ast.AST, ctx: Context, stmt) -> None:
        stack = [expr]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Name):
                if isinstance(n.ctx, ast.Load):
                    self._add(n.id, False, False, _pos(n), ctx, False, stmt)
                else:  # a walrus: a binding that may not run (``a and (x := f())``)
                    self._add(n.id, True, False, _pos(n), ctx, False, stmt)
                continue
            if isinstance(n, _NESTED):
                self._nested(n, ctx)
                continue
            stack.extend(ast.iter_child_nodes(n))

    def _nested(self, node: ast.AST, ctx: Context) -> None:
        """Names a nested function or class reads: it may run at any time, so each read may see
        any binding of the enclosing scope."""
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                self._add(n.id, False, False, _pos(n), ctx, True, None)

    def statement(self, node: ast.AST) -> Optional[ast.stmt]:
        """The simple statement of this scope ``node`` is part of."""
        pos = _pos(node)
        best = None
        for start, end, stmt in self.simple:
            if start <= pos <= end and (best is None or start >= _pos(best)):
                best = stmt
        return best


class KeyQueries:
    """Key flow queries. Mixed into :class:`~jaxlint.model.ModuleModel`."""

    def _key_names(self, scope: Scope) -> _ScopeNames:
        memo = self.__dict__.setdefault("_key_names_memo", {})
        found = memo.get(id(scope))
        if found is None:
            found = memo[id(scope)] = _ScopeNames(self, scope)
        return found

    def random_function(self, call: ast.Call, scope: Optional[Scope] = None) -> Optional[str]:
        """The ``jax.random`` function a call calls (``"normal"``, ``"split"``, ...), or None."""
        qn = self.resolve(call.func, scope)
        if not qn or not qn.startswith(JAX_RANDOM):
            return None
        return qn[len(JAX_RANDOM):]

    def key_use(self, call: ast.Call) -> Optional[KeyUse]:
        """The key a sampler, ``split`` or ``fold_in`` call consumes, when it is a variable whose
        binding is known (a parameter or an assignment; a closure variable only when the calling
        scope cannot rebind it)."""
        ctx = self.context(call)
        if ctx is None:
            return None
        scope = ctx.scope
        fn = self.random_function(call, scope)
        if fn not in KEY_FUNCS:
            return None
        arg = call_arg(call, 0, "key")
        if not isinstance(arg, ast.Name):
            return None
        ev = self.binding(arg.id, scope, _pos(arg))
        if ev is None or ev.kind in ("def", "other"):
            return None
        if ev.scope is not scope:
            # A key from an enclosing scope: only when this scope cannot rebind it.
            if scope.kind != "function" or arg.id in scope.globals or ev.scope.kind == "class":
                return None
        data = call_arg(call, 1, "data") if fn == FOLD_IN else None
        num = call_arg(call, 1, "num") if fn == SPLIT else None
        return KeyUse(call, arg.id, fn, ctx, ev, data, num)

    def key_use_groups(self) -> list:
        """The key uses of the module grouped by the binding they consume (and the scope they run
        in), each group in source order; groups in the order of their first use."""
        groups: dict = {}
        for call in self.calls_named(KEY_FUNCS):
            use = self.key_use(call)
            if use is None:
                continue
            groups.setdefault((id(use.event), id(use.ctx.scope)), []).append(use)
        return [sorted(g, key=lambda u: _pos(u.call)) for g in groups.values()]

    # -- dataflow facts

    def result_dead(self, call: ast.Call) -> bool:
        """Whether the value ``call`` returns is never read: the call is a statement of its own, or
        its statement binds only plain names and every one of them is rebound before any read
        (``eval_keys = split(key, n)`` overwritten by the next ``eval_keys = ...``). A name read by
        a nested function, declared global, or bound at module level and never rebound (another
        module may import it) is read."""
        ctx = self.context(call)
        if ctx is None:
            return False
        scope = ctx.scope
        if scope.kind == "class":
            return False
        names = self._key_names(scope)
        stmt = names.statement(call)
        if stmt is None:
            return False
        if isinstance(stmt, ast.Expr):
            return stmt.value is call
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
            return False
        if not _within(call, stmt.value):
            return False
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        bound: list = []
        for t in targets:
            if not _plain_names(t, bound):
                return False  # x.attr = ..., x[i] = ...: stored in an object, read elsewhere
        if not bound:
            return False
        return all(self._binding_dead(names, scope, name, stmt) for name in bound)

    def _binding_dead(self, names: _ScopeNames, scope: Scope, name: str, stmt: ast.stmt) -> bool:
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
            if not any(self._hides(b, r, lower) for b in events if b.store and b.definite and b.stmt is not stmt):
                return False
        if scope.kind == "module" and not rebound_later:
            return False  # a module's name may be imported elsewhere
        return True

    @staticmethod
    def _hides(b: _NameEvent, r: _NameEvent, lower: tuple) -> bool:
        """Whether binding ``b`` runs on every path from position ``lower`` to the read ``r``."""
        if not (lower < b.pos < r.pos):
            return False
        if not _prefix(b.ctx.loops, r.ctx.loops):
            return False
        return set(b.ctx.branches) <= set(r.ctx.branches)

    def advances_key(self, use: KeyUse) -> bool:
        """A ``split``/``fold_in`` whose result rebinds the key it consumes: ``key, sub =
        split(key)``, ``(key,) = split(key, 1)``, ``key = split(key)[0]``. After a draw from the key
        this is the idiom that moves on to a new key: nothing drawn repeats."""
        if use.fn not in DERIVERS:
            return False
        names = self._key_names(use.ctx.scope)
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
            _plain_names(t, bound)
        return use.name in bound

    def distinct_derivations(self, a: KeyUse, b: KeyUse) -> bool:
        """Whether two derivations from one key give different keys: ``fold_in`` with different
        data, or ``fold_in(key, n)`` beside ``split(key, n)`` (``fold_in(key, i)`` equals
        ``split(key, n)[i]`` for ``i < n`` under the default threefry, so only ``i >= n`` is apart)."""
        if a.fn == FOLD_IN and b.fn == FOLD_IN:
            if a.data is None or b.data is None:
                return True
            return ast.dump(a.data) != ast.dump(b.data)
        pair = {a.fn: a, b.fn: b}
        if set(pair) != {FOLD_IN, SPLIT}:
            return False
        fold, split = pair[FOLD_IN], pair[SPLIT]
        if fold.data is None:
            return False
        if split.num is not None and ast.dump(fold.data) == ast.dump(split.num):
            return True
        d = fold.data.value if isinstance(fold.data, ast.Constant) else None
        if split.num is None:
            n = 2
        else:
            n = split.num.value if isinstance(split.num, ast.Constant) else None
        return (isinstance(d, int) and isinstance(n, int) and not isinstance(d, bool)
                and not isinstance(n, bool) and d >= n)

    def paired_draws(self, a: KeyUse, b: KeyUse) -> bool:
        """Two draws of indices with one key and the same arguments but the data
        (``choice(key, x, (n,))`` and ``choice(key, y, (n,))``): the same indices on purpose, to
        keep two arrays paired."""
        if a.fn != b.fn or a.fn not in _INDEX_DRAWS:
            return False
        ca, cb = a.call, b.call
        if len(ca.args) != len(cb.args) or sorted(k.arg or "" for k in ca.keywords) != \
                sorted(k.arg or "" for k in cb.keywords):
            return False
        data = _INDEX_DRAWS[a.fn]
        da, db = call_arg(ca, 1, data), call_arg(cb, 1, data)
        if da is None or db is None or ast.dump(da) == ast.dump(db):
            return False
        rest_a = [ast.dump(x) for x in ca.args[2:]] + sorted(
            (k.arg or "", ast.dump(k.value)) for k in ca.keywords if k.arg not in (data, "key"))
        rest_b = [ast.dump(x) for x in cb.args[2:]] + sorted(
            (k.arg or "", ast.dump(k.value)) for k in cb.keywords if k.arg not in (data, "key"))
        return rest_a == rest_b


def _within(node: ast.AST, outer: ast.AST) -> bool:
    return _pos(outer) <= _pos(node) and _end(node) <= _end(outer)


def _plain_names(t: ast.AST, out: list) -> bool:
    """Append the names a target binds; False when part of it is not a plain name."""
    if isinstance(t, ast.Name):
        out.append(t.id)
        return True
    if isinstance(t, (ast.Tuple, ast.List)):
        ok = True
        for elt in t.elts:
            ok = _plain_names(elt, out) and ok
        return ok
    if isinstance(t, ast.Starred):
        return _plain_names(t.value, out)
    return False
