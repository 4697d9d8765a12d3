"""Which functions are traced (jit/pmap, transforms, lax bodies, same-module callees), with
static arguments and which parameters hold tracers."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from ... import names as N
from . import callables
from ..python import limits as L
from . import values as V
from ..python.records import FunctionInfo, Scope
from .jaxrecords import JitWrap, TraceCause
from ..python.syntax import _int_set, _kw, _pos, _str_set, call_arg, last_name

if TYPE_CHECKING:  # annotations only: the model imports this module
    from ..python.module import ModuleModel


# The names a call of a jit wrapper, transform or lax primitive ends in (``jax.jit`` -> ``jit``): only
# calls ending in one of these (or a local alias), or whose callee is itself a call, are resolved;
# the walk lists them (``ModuleModel.watched_calls``), so that a module without aliases is not scanned again.
API_LAST_NAMES = frozenset(q.rsplit(".", 1)[1] for q in (*N.JIT_WRAPPERS, *N.TRANSFORMS, *N.LAX_BODIES))


class _TraceAnalysis:
    """Which functions are traced, with static arguments and tracer parameters."""

    def __init__(self, model: ModuleModel):
        self.m = model
        self._assigns: dict = {}  # id of a def (None: the module) -> {id(value): the Assign}
        self._loaded: dict = {}  # id of a def (None: the module) -> names read in it

    def run(self) -> None:
        m = self.m
        if not m.imports_jax:
            return
        for fi in m.functions:
            if not isinstance(fi.node, ast.Lambda):
                self._decorators(fi)
        names = self._spellings()
        if names <= API_LAST_NAMES:  # no local alias: the walk listed exactly these calls, in its order
            calls = m.watched_calls
        else:
            calls = [c for c in m.calls if last_name(c.func) in names or isinstance(c.func, ast.Call)]
        for call in calls:
            self._call(call)
        for fi in m.functions:  # a static argument is static whatever else traces the function
            fi.tracer_params -= fi.static_names()
        self._propagate()

    def _spellings(self) -> set:
        """Names a call of a jit wrapper, transform or lax primitive can end in here (the API's own
        names plus local aliases). Calls ending otherwise are not resolved at all."""
        return self.m.spellings(API_LAST_NAMES)

    # -- marking

    def _mark(self, fi: FunctionInfo, cause: TraceCause, tracers) -> bool:
        changed = not fi.traced
        fi.traced = True
        if cause not in fi.trace_causes:
            fi.trace_causes.append(cause)
        new = set(tracers) - fi.tracer_params - fi.static_names()
        if new:
            fi.tracer_params |= new
            changed = True
        return changed

    def _all_params(self, fi: FunctionInfo, static: set) -> set:
        a = fi.node.args
        names = list(fi.params) + list(fi.kwonly)
        if a.vararg:
            names.append(a.vararg.arg)
        if a.kwarg:
            names.append(a.kwarg.arg)
        if fi.is_method and fi.params and fi.params[0] in ("self", "cls"):
            names = names[1:] if names and names[0] == fi.params[0] else names
        return {n for n in names if n not in static}

    def _policy_params(self, fi: FunctionInfo, policy: str, call: Optional[ast.Call], bound: bool) -> set:
        if policy == "unknown":
            return set()
        params = fi.params[1:] if bound and fi.params else fi.params
        if policy == "argnums":
            nums = {0}
            if call is not None:
                given = _kw(call, "argnums")
                if given is not None:
                    nums = _int_set(given)
            return {params[i] for i in nums if -len(params) <= i < len(params)}
        if policy == "vmap" and call is not None:
            axes = call_arg(call, 1, "in_axes")
            if isinstance(axes, ast.Constant) and axes.value is None:
                return set()
            if isinstance(axes, (ast.Tuple, ast.List)):
                return {params[i] for i, ax in enumerate(axes.elts)
                        if i < len(params) and not (isinstance(ax, ast.Constant) and ax.value is None)}
        return self._all_params(fi, set())

    # -- decorators

    def _decorators(self, fi: FunctionInfo) -> None:
        m = self.m
        scope = fi.scope.parent or m.module_scope
        for dec in fi.node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            qn = m.resolve(target, scope)
            if qn:
                fi.decorators.append(qn)
            factory = callables._jit_factory(m, dec, scope) if isinstance(dec, ast.Call) else None
            if qn in N.JIT_WRAPPERS and not isinstance(dec, ast.Call):
                self._jit_entry(fi, JitWrap(node=fi.node, kind=N.JIT_WRAPPERS[qn], spelling=ast.unparse(dec),
                                            target=None, func=fi, ctx=m.ctx[id(fi.node)], decorator=True,
                                            site=dec))
            elif factory is not None:
                wrap = JitWrap(node=fi.node, kind=N.JIT_WRAPPERS[factory], spelling=_spelling(dec, m, scope),
                               target=None, func=fi, ctx=m.ctx[id(fi.node)], decorator=True, site=dec)
                _statics(wrap, dec)
                self._jit_entry(fi, wrap)
            elif qn in N.TRANSFORMS:
                self._mark(fi, TraceCause("transform", qn, True), self._policy_params(fi, N.TRANSFORMS[qn],
                                                              dec if isinstance(dec, ast.Call) else None, False))
            elif qn == N.PARTIAL and isinstance(dec, ast.Call) and dec.args:
                inner = m.resolve(dec.args[0], scope)
                if inner in N.TRANSFORMS:
                    self._mark(fi, TraceCause("transform", inner, True), self._policy_params(fi, N.TRANSFORMS[inner], dec, False))
                elif inner:
                    fi.decorators.append(inner)

    def _jit_entry(self, fi: FunctionInfo, wrap: JitWrap, bound: bool = False, closed: frozenset = frozenset()) -> None:
        """``closed``: parameters a ``functools.partial`` inside the wrapper fixes (``jax.pmap(partial(step,
        config=config))``): Python values closed over, not arguments of the compiled function, so not
        tracers."""
        self.m.jit_wraps.append(wrap)
        if fi.jit_entry is None:
            fi.jit_entry = wrap
        fi.static_argnames |= wrap.static_argnames
        if bound and fi.params:
            # static_argnums of a bound method count from the first parameter after self:
            # record them by name, since FunctionInfo.static_argnums count self
            after_self = fi.params[1:]
            fi.static_argnames |= {after_self[i] for i in wrap.static_argnums
                                   if -len(after_self) <= i < len(after_self)}
        else:
            fi.static_argnums |= wrap.static_argnums
        static = set(fi.static_names())
        tracers = set() if wrap.kind == "filter_jit" else self._all_params(fi, static) - closed
        self._mark(fi, TraceCause("jit", wrap.spelling, wrap.decorator), tracers)

    # -- calls

    def _call(self, call: ast.Call) -> None:
        m = self.m
        scope = m.scope_at(call)
        qn = m.resolve(call.func, scope)
        factory = callables._jit_factory(m, call.func, scope) if isinstance(call.func, ast.Call) else None
        if (qn in N.JIT_WRAPPERS and (call.args or _kw(call, "fun") is not None)) or factory is not None:
            kind = N.JIT_WRAPPERS[factory or qn]
            target = call_arg(call, 0, "fun") if call.args or _kw(call, "fun") is not None else None
            if target is None and call.args:
                target = call.args[0]
            spelling = _spelling(call.func, m, scope) if factory is None else _spelling(call.func, m, scope)
            wrap = JitWrap(node=call, kind=kind, spelling=spelling, target=target, func=None, ctx=m.ctx[id(call)])
            _statics(wrap, call)
            if factory is not None:
                _statics(wrap, call.func)
            targets = callables.local_functions(m, target, scope, instances=False) if target is not None else []
            if len(targets) == 1:
                wrap.func = targets[0]
            m.facts.wraps_by_call.setdefault(id(call), []).append(wrap)
            if targets and self._bound_unread(call, scope):
                m.jit_wraps.append(wrap)  # ``fast = jax.jit(f)`` and ``fast`` never read: it traces nothing
            elif targets:
                bound = isinstance(target, ast.Attribute)
                for fi in targets:
                    self._jit_entry(fi, wrap, bound=bound and fi.is_method,
                                    closed=frozenset(self._bound_by_partial(target, fi, scope)))
            else:
                m.jit_wraps.append(wrap)
            return
        if qn in N.TRANSFORMS:
            target = call_arg(call, 0, "fun")
            if target is None:
                return
            bound = isinstance(target, ast.Attribute)
            for fi in callables.local_functions(m, target, scope, instances=False):
                tracers = self._policy_params(fi, N.TRANSFORMS[qn], call, bound and fi.is_method)
                self._mark(fi, TraceCause("transform", qn), tracers - self._bound_by_partial(target, fi, scope))
            return
        bodies = N.LAX_BODIES.get(qn or "")
        if bodies:
            for idx, kw in bodies:
                arg = call_arg(call, idx, kw)
                if arg is None:
                    continue
                elts = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
                arity = _lax_arity(qn, call)
                for elt in elts:
                    for fi in callables.local_functions(m, elt, scope, instances=False):
                        partial_bound = self._bound_by_partial(elt, fi, scope)
                        free = [p for p in fi.params if p not in partial_bound]
                        if fi.is_method and free and free[0] in ("self", "cls") and isinstance(elt, ast.Attribute):
                            free = free[1:]
                        tracers = set(free if arity is None else free[:arity])
                        if fi.node.args.vararg is not None and (arity is None or arity > len(free)):
                            tracers.add(fi.node.args.vararg.arg)
                        self._mark(fi, TraceCause("lax", qn), tracers)

    def _bound_unread(self, call: ast.Call, scope: Scope) -> bool:
        """Whether ``call`` is the value of an assignment to plain names that nothing reads: in a
        function (its locals are read nowhere else), or at a notebook's top level (no other file
        imports a notebook's names). Such a wrapper is never called, so it traces nothing (fresh AD:
        ``fast_sample = jit(sample)``, never used, made a shape argument a traced caller passes as a
        Python int look like a tracer). A module-level name of a ``.py`` file may be imported elsewhere: not asked."""
        f = scope.func if scope.kind == "function" else None
        if f is None and not (scope.kind == "module" and (self.m.path or "").endswith(".ipynb")):
            return False
        key = id(f.node) if f is not None else None
        if key not in self._assigns:
            assigns, loaded = self._assigns[key], self._loaded[key] = {}, set()
            for n in ast.walk(f.node if f is not None else self.m.tree):  # one walk for both
                if isinstance(n, ast.Assign):
                    assigns[id(n.value)] = n
                elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store):
                    loaded.add(n.id)
        stmt = self._assigns[key].get(id(call))
        if stmt is None or not all(isinstance(t, ast.Name) for t in stmt.targets):
            return False
        return not any(t.id in self._loaded[key] for t in stmt.targets)

    def _bound_by_partial(self, expr: ast.AST, fi: FunctionInfo, scope: Scope) -> set:
        """Parameters of ``fi`` fixed by ``functools.partial`` in ``expr`` (constants closed over,
        not tracers): ``partial(f, eq)`` binds f's first parameter, ``partial(f, n=3)`` binds n."""
        m = self.m
        n_pos, names = 0, set()
        depth = 0
        while isinstance(expr, ast.Call) and expr.args and depth < L.PARTIAL_CHAIN:
            depth += 1
            qn = m.resolve(expr.func, scope)
            if qn == N.PARTIAL:
                if any(isinstance(a, ast.Starred) for a in expr.args):
                    return set(fi.params)
                n_pos += len(expr.args) - 1
                names |= {kw.arg for kw in expr.keywords if kw.arg}
            elif not (qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS):
                break
            expr = expr.args[0]
        if isinstance(expr, ast.Name):  # f = partial(g, x) bound to a name
            ev = m.binding(expr.id, scope, _pos(expr))
            if ev is not None and ev.plain_assign and isinstance(ev.value, ast.Call) \
                    and depth < L.PARTIAL_CHAIN:
                return self._bound_by_partial(ev.value, fi, ev.scope) | names
        params = fi.params[1:] if fi.is_method and isinstance(expr, ast.Attribute) else fi.params
        return set(params[:n_pos]) | names

    # -- same-module callees of traced code

    def _propagate(self) -> None:
        m = self.m
        work = [f for f in m.functions if f.traced]
        budget = L.PROPAGATION_ROUNDS_PER_FUNCTION * (len(m.functions) + 1)
        while work and budget > 0:
            budget -= 1
            f = work.pop()
            for call in f.calls:
                func = call.func
                if type(func) is ast.Attribute and not (type(func.value) is ast.Name and func.value.id in ("self", "cls")):
                    continue  # ``jnp.sum(x)``, ``obj.method(x)``: no function of this module (local_functions)
                qn = m.resolve(func, f.scope)
                if qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS or qn in N.LAX_BODIES or qn == N.PARTIAL:
                    continue
                targets = callables.local_functions(m, call.func, f.scope, instances=False)
                if not targets:
                    continue
                via_attr = isinstance(call.func, ast.Attribute)
                for g in targets:
                    if g is f:
                        continue
                    params = g.params[1:] if via_attr and g.is_method else g.params
                    tracers = set()
                    star = False
                    for i, arg in enumerate(call.args):
                        if isinstance(arg, ast.Starred):
                            star = True
                            break
                        if i < len(params) and V.is_jax(m, arg, f.scope):
                            tracers.add(params[i])
                    for kw in call.keywords:
                        if kw.arg and V.is_jax(m, kw.value, f.scope):
                            tracers.add(kw.arg)
                    if star and g.node.args.vararg is not None and any(V.is_jax(m, a, f.scope) for a in call.args):
                        tracers.add(g.node.args.vararg.arg)
                    tracers -= g.static_names()
                    if self._mark(g, TraceCause("caller", f.qualname, caller=f), tracers):
                        V.clear_value_memos(m)
                        work.append(g)


_LAX_ARITY = {"jax.lax.scan": 2, "jax.lax.fori_loop": 2, "jax.lax.while_loop": 1, "jax.lax.map": 1,
              "jax.lax.associative_scan": 2, "flax.nnx.scan": 2, "flax.nnx.fori_loop": 2,
              "flax.nnx.while_loop": 1}


def _lax_arity(qn: str, call: ast.Call) -> Optional[int]:
    """How many positional arguments the primitive passes its body (None: all of them)."""
    if qn in _LAX_ARITY:
        return _LAX_ARITY[qn]
    if any(isinstance(a, ast.Starred) for a in call.args) or call.keywords:
        return None
    if qn.endswith(".cond"):
        return max(len(call.args) - 3, 0)
    if qn.endswith(".switch"):
        return max(len(call.args) - 2, 0)
    return None


def _statics(wrap: JitWrap, call: ast.Call) -> None:
    for kw in call.keywords:
        if kw.arg is None or (kw.arg in ("donate_argnums", "donate_argnames", "donate") and not _empty(kw.value)):
            wrap.donation_declared = True  # ``donate_argnums=()`` (a literal empty tuple or list) donates nothing
        if kw.arg == "inline" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
            wrap.inline = True
        if kw.arg in ("static_argnums", "static_broadcasted_argnums"):
            wrap.static_argnums |= _int_set(kw.value)
        elif kw.arg == "static_argnames":
            wrap.static_argnames |= _str_set(kw.value)
        elif kw.arg == "donate_argnums":
            wrap.donate_argnums |= _int_set(kw.value)
        elif kw.arg == "donate_argnames":
            wrap.donate_argnames |= _str_set(kw.value)


def _empty(value: ast.AST) -> bool:
    return isinstance(value, (ast.Tuple, ast.List)) and not value.elts


def _spelling(func: ast.AST, m: ModuleModel, scope: Scope) -> str:
    """How the user wrote a jit wrapper: ``jax.jit``, ``jit``, ``eqx.filter_jit``."""
    if isinstance(func, ast.Call):
        qn = m.resolve(func.func, scope)
        if qn == N.PARTIAL and func.args:
            return ast.unparse(func.args[0])
        return ast.unparse(func.func)
    return ast.unparse(func)
