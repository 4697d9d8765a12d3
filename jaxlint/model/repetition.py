"""Repetition: callables created anew each time code runs, where a jit wrapper is called, how
often a function runs (entry points, tests, cached factories, evidence that it runs again and
again) and which values take a new value on every iteration of a loop."""

from __future__ import annotations

import ast
from typing import Optional

from .. import conventions
from .. import names as N
from . import limits as L
from .records import BOUNDED_TRIPS, Churn, FunctionInfo, JitWrap, Loop, NewCallable, Repetition, Scope
from .syntax import _pos, statement_walk, walk
from .syntax import call_arg as _arg

_KNOWN_PURE = ("jax.", "builtins.", "numpy.", "math.", "functools.")


def _method_of(func: ast.AST, names: set) -> bool:
    """``model.apply`` where ``model`` is one of ``names``: the program is the same each call
    (``jax.jit(lambda x: model.apply(params, x))`` is the pitfall itself)."""
    while isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func.id in names


def called_once(f: Optional[FunctionInfo]) -> bool:
    """Entry points and tests (and functions nested in them) run once per process or test: pytest's
    and unittest's test names (``test*``, ``*_test``, ``setUp*``: the frameworks' own discovery
    rules), and the conventions' ``entry-points`` and ``demo-functions``."""
    cur = conventions.active()
    while f is not None:
        name = f.name
        if (name.startswith(("test", "setUp")) or name.endswith("_test") or cur.matches("entry-points", name)
                or cur.matches("demo-functions", name)):
            return True
        f = f.parent
    return False




# Python's and unittest's own constructors and fixtures: run once per object or test by the language
_CONSTRUCTORS = frozenset({"__init__", "__post_init__", "__new__", "__init_subclass__", "setUp", "setUpClass",
                           "setup_method", "setup_class"})


def step_name(name: str) -> bool:
    """``step``, ``update``, ``__call__``, ``train_step``, ``step_env``: a per-step method name
    (the ``step-methods`` convention)."""
    cur = conventions.active()
    return cur.matches("step-methods", name) or cur.matches("step-affixes", name)


def setup_name(name: str) -> bool:
    """``__init__``, ``setUp``, ``initialize_model``, ``load_params``, ``train``: a function that
    runs once per program or per run (per-step names excepted: ``train_step`` runs every step)."""
    if step_name(name):
        return False
    if name in ("__init__", "__post_init__", "setUp", "setUpClass", "set_up"):
        return True
    cur = conventions.active()
    return cur.matches("setup-exact", name) or cur.matches("setup-functions", name)


def per_step(rep: Optional[Repetition]) -> bool:
    """Whether the evidence says the function runs at the steps of a loop (a per-step name, the
    training step as a parameter, a call in a ``range``/``while`` loop, or a call from such a
    function), rather than once per item of a loop over configurations or datasets."""
    while rep is not None:
        if rep.kind in ("step_name", "step_param"):
            return True
        if rep.kind == "loop":
            return rep.loop is not None and rep.loop.ranged
        rep = rep.inner if rep.kind == "caller" else None
    return False


def many_trips(loops) -> Optional[Loop]:
    """The innermost of ``loops`` that iterates over steps or items: a ``range``/``while`` loop
    (however short), or a loop over anything but a few literal options or the parts of one
    structure (``for mode in ("train", "eval")``, ``for k, v in d.items()``), which runs a fixed
    few times per call of its function."""
    for loop in reversed(loops):
        if loop.ranged or (not loop.bounded and loop.steplike):
            return loop
    return None


def cached(f: FunctionInfo) -> bool:
    return any(d in N.CACHE_DECORATORS for d in f.decorators)


def escaping_names(f: FunctionInfo) -> frozenset:
    """The names that leave ``f``: read (not called) in what it returns, or assigned whole to an
    attribute or an item (``self.step = step``, ``fns[k] = step``), in its body or nested code.
    Found in one walk of ``f``, for all the functions nested in it (see ``escapes``)."""
    out = set()
    for r in f.returns:
        nodes = list(walk(r))
        called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
        out.update(n.id for n in nodes if isinstance(n, ast.Name) and id(n) not in called)
    for stmt in statement_walk(f.node):  # every statement of it, nested ones too
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and \
                any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in stmt.targets):
            out.add(stmt.value.id)
    return frozenset(out)


class RepetitionQueries:
    """Mixed into :class:`~jaxlint.model.ModuleModel`."""

    def new_callable(self, target: Optional[ast.AST], inside, scope: Scope) -> Optional[NewCallable]:
        """If ``target`` is a callable object created anew each time the code in ``inside`` runs
        (a lambda, partial, bound method, transformed function, or a def in that region), what
        it is. ``inside`` is a tuple of Loop records or a FunctionInfo: the region that repeats;
        ``scope`` is the scope the target expression is evaluated in."""
        if target is None:
            return None
        if isinstance(target, ast.Lambda):
            return NewCallable("lambda", target)
        if isinstance(target, ast.Call):
            qn = self.resolve(target.func, scope)
            if qn == N.PARTIAL:
                return NewCallable("partial", target)
            if qn in N.TRANSFORMS or qn in N.JIT_WRAPPERS:
                return NewCallable("transformed", target)
            return None
        if isinstance(target, ast.Attribute):
            # A method looked up on an instance is a new bound-method object at every evaluation.
            if self.attribute_callable(target, scope) == "bound_method":
                return NewCallable("bound_method", target)
            return None
        if isinstance(target, ast.Name):
            ev = self.binding(target.id, scope, (target.lineno, target.col_offset))
            if ev is None:
                return None
            if ev.kind == "def":
                created = ev.node
                what = NewCallable("def", ev.node, target.id)
            elif ev.plain_assign and isinstance(ev.value, (ast.Lambda, ast.Call, ast.Attribute)):
                created = ev.value
                desc = self.new_callable(ev.value, inside, ev.scope)
                if desc is None:
                    return None
                what = NewCallable("name", ev.value, target.id, desc)
            else:
                return None
            if isinstance(created, ast.Attribute):  # no context of its own: where the name is bound
                return what if self._bound_inside(ev, inside) else None
            return what if self.created_inside(created, inside) else None
        return None

    def _bound_inside(self, ev, inside) -> bool:
        if isinstance(inside, FunctionInfo):
            s = ev.scope
            while s is not None:
                if s.func is inside:
                    return True
                s = s.parent
            return False
        return any(loop in ev.loops for loop in inside)

    def rebuilt_callable(self, wrap: JitWrap, inside) -> Optional[NewCallable]:
        """What makes rebuilding the jit wrapper ``wrap`` each time the region ``inside`` runs (see
        :meth:`new_callable`) trace and compile again: the callable it wraps, created anew there,
        whose new object misses the wrapper's cache. A bound method misses only the caches of the
        wrappers keyed on the function object's identity (``jax.jit``): ``jax.pmap`` and
        equinox's ``filter_jit`` find the bound method equal to the last one and reuse the
        compiled program (``names.IDENTITY_KEYED_WRAPPERS``)."""
        new = self.new_callable(wrap.target, inside, wrap.ctx.scope)
        inner = new
        while inner is not None and inner.kind == "name":
            inner = inner.inner
        if inner is not None and inner.kind == "bound_method" \
                and self.wrapper_qualname(wrap) not in N.IDENTITY_KEYED_WRAPPERS:
            return None
        return new

    def compiled_once(self, f: FunctionInfo) -> bool:
        """Whether a function is traced only as the body of jit wrappers whose result the program
        calls once: each wrapper is bound to one name, read only by one call, and that call is in
        no loop, at module level or in a function that runs once (:func:`called_once`). Nothing
        compiled from it runs a second time, so what its Python body does at trace time happens
        once per run either way."""
        if not f.trace_causes or any(c.kind != "jit" for c in f.trace_causes):
            return False
        wraps = [w for w in self.jit_wraps if w.func is f or (
            w.func is None and w.target is not None and f in self.local_functions(w.target, w.ctx.scope))]
        if not wraps or len(wraps) != len(f.trace_causes):
            return False
        for wrap in wraps:
            name = self.bound_name(wrap)
            if name is None:
                return False
            scope = self.scope_at(wrap.node) if not wrap.decorator else (wrap.func.scope.parent or self.module_scope)
            calls = [c for c in self.calls_by_name.get(name, ()) if isinstance(c.func, ast.Name)]
            if len(calls) != 1 or len(self.name_reads(scope, name)) != 1:
                return False  # called twice, or handed on (returned, stored, passed)
            ctx = self.context(calls[0])
            if ctx is None or ctx.loops:
                return False
            outer = self.function_at(calls[0])
            if outer is not None and not called_once(outer):
                return False
        return True

    def traced_per_compilation(self, f: FunctionInfo) -> bool:
        """Whether a traced function's Python body runs only when a jit wrapper compiles: every
        reason it is traced is a jit wrapper, a traced caller that is itself traced per
        compilation, or a transform or lax primitive applied to it inside a function traced per
        compilation (a scan body defined in a jitted function). Later calls of the compiled
        function then skip the body's Python. Without a jit around it a transform traces anew on
        every call (``jax.vmap(f)(x)`` runs ``f``'s Python each time, with tracers)."""
        memo = self.__dict__.setdefault("_per_compilation_memo", {})
        key = id(f)
        if key in memo:
            return memo[key]
        memo[key] = False  # a cycle of callers proves nothing
        result = bool(f.trace_causes)
        for cause in f.trace_causes:
            if cause.kind == "jit":
                continue
            if cause.kind == "caller":
                outers = [cause.caller]
            else:  # where the transform or lax primitive is applied to f (else: where f is defined)
                outers = self._applied_in(f) or [f.parent]
            if not all(g is not None and g.traced and self.traced_per_compilation(g) for g in outers):
                result = False
                break
        memo[key] = result
        return result

    def _applied_in(self, f: FunctionInfo) -> list:
        """The functions (None: module level) whose code applies a transform or a lax primitive
        to ``f`` (``jax.vmap(f)``, ``lax.scan(f, ...)``)."""
        memo = self.__dict__.get("_applied_memo")
        if memo is None:
            memo = self.__dict__["_applied_memo"] = {}
            names = {q.rsplit(".", 1)[1] for q in list(N.TRANSFORMS) + list(N.LAX_BODIES)}
            for call in self.calls_named(names):
                scope = self.scope_at(call)
                qn = self.resolve(call.func, scope)
                if qn in N.TRANSFORMS:
                    slots = [(0, "fun")]
                else:
                    slots = N.LAX_BODIES.get(qn or "", [])
                for idx, kw in slots:
                    arg = _arg(call, idx, kw)
                    if arg is None:
                        continue
                    for elt in (arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]):
                        for g in self.local_functions(elt, scope):
                            memo.setdefault(id(g), []).append(self.function_at(call))
        return memo.get(id(f), [])

    def created_inside(self, node: ast.AST, inside) -> bool:
        ctx = self.context(node)
        if ctx is None:
            return False
        if isinstance(inside, FunctionInfo):
            f = self.function_at(node)
            while f is not None:
                if f is inside:
                    return True
                f = f.parent
            return False
        return any(loop in ctx.loops for loop in inside)

    def calls_wrapper(self, calls, made: ast.AST, name: Optional[str]) -> bool:
        """Whether one of ``calls`` calls the wrapper ``made`` directly or through the name bound to it."""
        for call in calls:
            func = call.func
            if func is made:
                return True
            if name is not None and isinstance(func, ast.Name) and func.id == name:
                ev = self.binding(name, self.scope_at(call), (call.lineno, call.col_offset))
                if ev is not None and (ev.node is made or ev.value is made):
                    return True
        return False

    def bound_name(self, wrap: JitWrap) -> Optional[str]:
        """The local name a jit wrapper is bound to (``f = jax.jit(g)`` or a decorated def)."""
        if wrap.decorator:
            return wrap.node.name  # type: ignore[attr-defined]
        scope = self.scope_at(wrap.node)
        for name, evs in scope.events.items():
            for ev in evs:
                if ev.plain_assign and ev.value is wrap.node:
                    return name
        return None

    def wraps_callable_param(self, wrap: JitWrap, outer: FunctionInfo) -> bool:
        """A higher-order helper that jits around a function it was given (``def check(fun): ...
        jax.jit(lambda *a: fun(*a))``): a new function each call, so there is no cache to reuse."""
        params = set(outer.params) | set(outer.kwonly)
        if wrap.decorator:
            body = wrap.node
        else:
            target = wrap.target
            funcs = self.local_functions(target, wrap.ctx.scope) if target is not None else []
            body = funcs[0].node if funcs else target
        if body is None:
            return False
        inner = self.func_of_node.get(id(body))
        if inner is not None:
            params -= set(inner.scope.events)  # the nested function's own names shadow the outer ones
        for node in walk(body):
            if isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Name) and f.id in params:
                    return True
                qn = self.resolve(f, wrap.ctx.scope)
                args = [a for a in node.args if isinstance(a, ast.Name)] + [
                    kw.value for kw in node.keywords if isinstance(kw.value, ast.Name)]
                if not any(a.id in params for a in args):
                    continue
                if qn == N.PARTIAL or qn in N.TRANSFORMS:
                    if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in params:
                        return True
                elif (qn is None or not qn.startswith(_KNOWN_PURE)) and not _method_of(f, params) \
                        and not self.local_functions(f, wrap.ctx.scope):
                    # An outer parameter handed to code from elsewhere (``condition(model, data)``,
                    # ``SVI(model, guide, ...)``): most likely a user-supplied model or callback.
                    return True
        return False

    # ------------------------------------------------------------------ how often a function runs

    def callers(self, f: FunctionInfo) -> list:
        """``(call, caller)`` for every call of ``f`` in this module (``caller`` the function the
        call is in, None at module or class level): ``f(...)``, ``self.f(...)``, a name bound to it."""
        memo = self.__dict__.setdefault("_callers_memo", {})
        if id(f) in memo:
            return memo[id(f)]
        out: list = []
        if not isinstance(f.node, ast.Lambda):
            for call in self.calls_by_name.get(f.name, ()):
                if any(g is f for g in self.local_functions(call.func, self.scope_at(call))):
                    out.append((call, self.function_at(call)))
        memo[id(f)] = out
        return out

    def repeats(self, f: FunctionInfo, depth: int = 0) -> Optional[Repetition]:
        """Evidence that ``f`` runs again and again, or None. In order: a per-step method name
        (``step``, ``update``, ``act``, ``__call__``, ``sample``, ``insert``, ``*_step``); a call
        of it in a loop of this module (a loop over a few literal options or over the parts of one
        structure does not count: it runs a fixed few times per call of its own function); a
        closure its enclosing function returns or stores (a factory's product, kept and called by
        its user); a call from a function that itself repeats; or, for functions not named like
        set-up code, a parameter that hands it the training step (``step``, ``global_step``).
        Without evidence the answer is None: a function whose callers live in other modules is
        not known to repeat."""
        memo = self.__dict__.setdefault("_repeats_memo", {})
        if id(f) in memo:
            return memo[id(f)]
        memo[id(f)] = None  # a cycle of calls is no evidence
        result = self._repeats(f, depth)
        memo[id(f)] = result
        return result

    def _repeats(self, f: FunctionInfo, depth: int) -> Optional[Repetition]:
        sites = self.callers(f)
        for call, _ in sites:
            ctx = self.context(call)
            for loop in reversed(ctx.loops if ctx is not None else ()):
                if not loop.bounded and loop.steplike:
                    return Repetition("loop", f, call=call, loop=loop)
        if f.parent is not None and not isinstance(f.node, ast.Lambda) and self.escapes(f.parent, f.name):
            return Repetition("factory", f, via=f.parent)
        if depth < L.REPETITION_CHAIN:
            for call, g in sites:
                if g is None or g is f or isinstance(g.node, ast.Lambda) or not self.work.spend():
                    continue
                inner = self.repeats(g, depth + 1)
                if inner is not None:
                    return Repetition("caller", f, call=call, via=g, inner=inner)
        if sites and depth < L.REPETITION_CHAIN and all(
                not self.context(call).loops and (g is None or (g is not f and self._runs_once(g, depth + 1)))
                for call, g in sites):
            return None  # the call graph shows every call, each made once: the name says nothing more
        if step_name(f.name):
            return Repetition("step_name", f)  # no caller in sight: the conventions' step-methods
        if setup_name(f.name) or called_once(f):
            return None
        called = {c.func.id for c in f.calls if isinstance(c.func, ast.Name)}
        for p in list(f.params) + list(f.kwonly):
            if conventions.active().matches("step-params", p) and p not in called:
                return Repetition("step_param", f, name=p)
        return None

    def escapes(self, f: FunctionInfo, name: str) -> bool:
        """Whether ``name`` (a wrapper or function made in ``f``) leaves ``f``: returned, stored on
        an object or in a container (:func:`escaping_names`, once per function)."""
        memo = self.__dict__.setdefault("_escaping_memo", {})
        found = memo.get(id(f))
        if found is None:
            found = memo[id(f)] = escaping_names(f)
        return name in found

    def runs_once(self, f: FunctionInfo) -> bool:
        """Whether ``f`` is known to run once per program, run or test: an entry point or test (or
        nested in one), a function named like set-up code (``__init__``, ``setup``,
        ``initialize_model``, ``load_params``, ``train``), a cached builder, or one whose every
        call in this module is made once (at module level or from a function that runs once,
        outside loops)."""
        return self._runs_once(f, 0)

    def runs_once_by_facts(self, f: FunctionInfo) -> bool:
        """:meth:`runs_once` without the names the conventions read (``setup-functions``,
        ``entry-points``, ``demo-functions``): a constructor (``__init__``, ``setUp``), a cached
        builder, or a function every call of which in this module is made once."""
        return self._runs_once(f, 0, names=False)

    def _runs_once(self, f: FunctionInfo, depth: int, names: bool = True) -> bool:
        if cached(f) or f.name in _CONSTRUCTORS:
            return True
        if names and (called_once(f) or setup_name(f.name)):
            return True
        if f.parent is not None and not isinstance(f.node, ast.Lambda) and self._runs_once(f.parent, depth + 1, names) \
                and not self.escapes(f.parent, f.name) and depth < L.REPETITION_CHAIN:
            return True  # a helper defined inside set-up code runs with it
        sites = self.callers(f)
        if not sites or depth >= L.REPETITION_CHAIN:
            return False
        for call, g in sites:
            ctx = self.context(call)
            if ctx is None or ctx.loops:
                return False
            if g is not None and (g is f or not self._runs_once(g, depth + 1, names)):
                return False
        return True

    def compute_helper(self, f: FunctionInfo, uses: list) -> bool:
        """Whether ``f`` is a small helper whose result is one of the calls ``uses`` (a compiled
        call): at most a few statements, no loop, the call in its ``return``, and a name not of
        set-up code. Such a helper is used like an array function, once per batch wherever its
        callers are, and every call of it pays for the compile. A primitive's eager rule
        (``p.def_impl``) runs only when the primitive is bound outside jit, and is not one."""
        if isinstance(f.node, ast.Lambda) or f.loops or setup_name(f.name) or called_once(f):
            return False
        if "def_impl" in _decorator_names(f):
            return False
        body = list(f.node.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # the docstring
        if not body or len(body) > L.HELPER_STATEMENTS or not isinstance(body[-1], ast.Return):
            return False
        ret = body[-1]
        inside = {id(n) for n in walk(ret)}
        return any(id(c) in inside for c in uses)

    def own_loop(self, f: FunctionInfo, uses: list) -> Optional[Loop]:
        """A loop of ``f``'s own, without any of the calls ``uses`` in it, that runs JAX work or steps
        (a ``for`` over ``range``/``count``, a ``while``): one call of ``f`` does a whole loop of
        work (an evaluation pass, a training run), so a compile once per call of ``f`` is small next
        to it. Loops over a few literal options or the parts of one structure do not count."""
        for loop in f.loops:
            if loop.bounded or not loop.steplike:
                continue
            if any(c is u for c in loop.all_calls() for u in uses):
                continue
            if (loop.ranged and loop.kind != "comprehension") or self.loop_runs_jax_work(loop):
                return loop
        return None

    # ------------------------------------------------------------------ what a loop's callable closes over

    def per_iteration_function(self, target: Optional[ast.AST], varying: set, scope: Scope,
                               depth: int = 0) -> Optional[str]:
        """The name of a value made anew each iteration (``varying``: the names rebound in every
        iteration) that the function ``target`` itself comes from: a method of it
        (``jax.vmap(env.step)``), a function built from its methods (``auto_reset(env.step,
        env.init)``), or a lambda or def calling its methods. Each iteration then compiles a
        different program, which hoisting the wrapper out of the loop cannot avoid (one compile per
        environment or per model). Values the callable only reads as data (``partial(f, lr=lr)``,
        ``lambda x: x * scale``) are not such a source: passed as arguments, they would not
        recompile."""
        if target is None or depth > L.CALLABLE_CHAIN or not self.work.spend():
            return None
        if isinstance(target, ast.Attribute):
            base = target
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in varying and base.id not in ("self", "cls"):
                return base.id
            return None
        if isinstance(target, ast.Name):
            if target.id not in varying:
                return None
            ev = self.binding(target.id, scope, _pos(target))
            if ev is not None and ev.plain_assign:
                return self.per_iteration_function(ev.value, varying, ev.scope, depth + 1)
            if ev is not None and ev.kind == "def":
                f = self.func_of_node.get(id(ev.node))
                return self._calls_methods_of(f, varying) if f is not None else None
            return None
        if isinstance(target, ast.Call):
            qn = self.resolve(target.func, scope)
            if qn == N.PARTIAL or qn in N.TRANSFORMS or qn in N.JIT_WRAPPERS:
                return self.per_iteration_function(target.args[0], varying, scope, depth + 1) if target.args else None
            for part in [target.func, *target.args, *(kw.value for kw in target.keywords)]:
                if isinstance(part, (ast.Attribute, ast.Name, ast.Call)):
                    found = self.per_iteration_function(part, varying, scope, depth + 1)
                    if found is not None:
                        return found
            return None
        if isinstance(target, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            f = self.func_of_node.get(id(target))
            return self._calls_methods_of(f, varying) if f is not None else None
        return None

    def _calls_methods_of(self, f: FunctionInfo, varying: set) -> Optional[str]:
        own = set(f.scope.events)
        for node in walk(f.node):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr not in _ARRAY_METHODS:
                base = node.func
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in varying and base.id not in own \
                        and base.id not in ("self", "cls") and not self.is_jax(base, f.scope):
                    return base.id
        return None

    def captured_per_iteration(self, target: Optional[ast.AST], varying: set, scope: Scope) -> list:
        """The names rebound every iteration (``varying``) that the callable ``target`` closes over
        or binds (a lambda's or def's free names, ``partial``'s arguments), in source order: passed
        as arguments instead, they would let one compiled program serve every iteration."""
        if target is None:
            return []
        if isinstance(target, ast.Name):
            ev = self.binding(target.id, scope, _pos(target))
            if ev is not None and ev.kind == "def":
                node: Optional[ast.AST] = ev.node
            elif ev is not None and ev.plain_assign and isinstance(ev.value, (ast.Lambda, ast.Call)):
                return self.captured_per_iteration(ev.value, varying, ev.scope)
            else:
                return []
        else:
            node = target
        f = self.func_of_node.get(id(node)) if node is not None else None
        own = set(f.scope.events) if f is not None else set()
        if f is not None:
            for sub in walk(node):  # names bound in functions nested in it are theirs
                inner = self.func_of_node.get(id(sub))
                if inner is not None:
                    own |= set(inner.scope.events)
        seen: list = []
        parts = [node] if f is not None else ([*node.args[1:], *(kw.value for kw in node.keywords)]
                                              if isinstance(node, ast.Call) else [])
        for part in parts:
            for n in walk(part):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in varying \
                        and n.id not in own and n.id not in seen:
                    seen.append(n.id)
        return seen

    # ------------------------------------------------------------------ values that change per iteration

    def churn(self, expr: ast.AST, loops: tuple, scope: Scope) -> Optional[Churn]:
        """Why ``expr`` (evaluated inside ``loops``, the loops around it, outermost first) takes a
        new value on every iteration of one of them, or None when it is not known to: a loop
        counter or a name incremented in the loop, the item of a loop over anything but a few
        literal options (``range`` of a small constant included), or a value computed from those
        by arithmetic, numeric builtins (``int``, ``len``, ``min``...), attributes or indexing.
        Values that take a few values only are not churn: comparisons and ``not``, ``x % k`` for a
        constant ``k``, a choice between constants (``"a" if c else "b"``), an index into a literal
        table. Values from calls of other functions (``task_of(step)``, ``next(it)``) are not known
        to change, nor are names computed in the loop from loop-invariant values."""
        return self._churn(expr, loops, scope, 0, set())

    def _churn(self, e: ast.AST, loops: tuple, scope: Scope, depth: int, seen: set) -> Optional[Churn]:
        if depth > L.CHURN_CHAIN or not self.work.spend():
            return None
        if isinstance(e, ast.Name):
            return self._name_churn(e, loops, scope, depth, seen)
        if isinstance(e, ast.Constant):
            return None
        if isinstance(e, (ast.Compare, ast.BoolOp)) or (isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not)):
            if isinstance(e, ast.BoolOp):  # ``a or b`` is one of its operands
                return self._first_churn(e.values, loops, scope, depth, seen)
            return None  # True or False
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, ast.Mod) and self.const_int(e.right, scope) is not None:
                return None  # one of k values
            return self._first_churn([e.left, e.right], loops, scope, depth, seen)
        if isinstance(e, ast.UnaryOp):
            return self._churn(e.operand, loops, scope, depth + 1, seen)
        if isinstance(e, ast.IfExp):
            return self._first_churn([e.body, e.orelse], loops, scope, depth, seen)
        if isinstance(e, (ast.Tuple, ast.List)):
            return self._first_churn(e.elts, loops, scope, depth, seen)
        if isinstance(e, ast.JoinedStr):
            return self._first_churn([v.value for v in e.values if isinstance(v, ast.FormattedValue)],
                                     loops, scope, depth, seen)
        if isinstance(e, ast.Attribute):
            return self._churn(e.value, loops, scope, depth + 1, seen)
        if isinstance(e, ast.Subscript):
            if isinstance(e.value, (ast.Tuple, ast.List, ast.Dict, ast.Constant)):
                return None  # an entry of a literal table
            return self._first_churn([e.value, e.slice], loops, scope, depth, seen)
        if isinstance(e, ast.Slice):
            return self._first_churn([p for p in (e.lower, e.upper, e.step) if p is not None], loops, scope, depth, seen)
        if isinstance(e, ast.Call):
            qn = self.resolve(e.func, scope) or ""
            if qn in _NUMERIC_BUILTINS or qn.startswith("math."):
                return self._first_churn([*e.args, *(kw.value for kw in e.keywords)], loops, scope, depth, seen)
            if isinstance(e.func, ast.Attribute) and e.func.attr == "item" and not e.args:
                return self._churn(e.func.value, loops, scope, depth + 1, seen)
            return None
        return None

    def _first_churn(self, parts, loops, scope, depth, seen) -> Optional[Churn]:
        for p in parts:
            found = self._churn(p, loops, scope, depth + 1, seen)
            if found is not None:
                return found
        return None

    def _name_churn(self, e: ast.Name, loops: tuple, scope: Scope, depth: int, seen: set) -> Optional[Churn]:
        name = e.id
        found = self._lookup(name, scope, _pos(e))
        if found is None:
            return None
        owner = found[0].scope
        events = owner.events.get(name, ())
        if (id(owner), name) in seen:
            # defined from itself in the loop (``width = width * 2 + 1``): it accumulates
            loop = next((lp for lp in reversed(loops) if any(lp in b.loops for b in events)), None)
            return Churn("accumulated", loop, name) if loop is not None else None
        seen = seen | {(id(owner), name)}

        def inside(b) -> bool:
            return _target_loop(loops, b) is not None or any(lp in b.loops for lp in loops)

        # The binding that reaches the expression, when it is made in the loops (it is this
        # iteration's value); otherwise every binding of the name inside the loops, since one later
        # in the body reaches the next iteration (``n = 1`` before the loop, ``n = n * 2`` after the use).
        reaching = found[0]
        candidates = [reaching] if inside(reaching) else [b for b in reversed(events) if inside(b)]
        for b in candidates:
            if b.kind == "for":
                own = _target_loop(loops, b)
                if own is not None:
                    if own.bounded or self._few_trips(own, owner):
                        continue  # a few literal options: each value compiles once, then hits the cache
                    return Churn("counter" if _counts(own, b) else "item", own, name)
            loop = next((lp for lp in reversed(loops) if lp in b.loops), None)
            if loop is None:
                continue  # bound before the loops: the same value in every iteration
            if b.kind in ("aug", "for"):
                return Churn("accumulated" if b.kind == "aug" else "item", loop, name)
            if b.kind == "assign" and b.value is not None:
                value = b.value if b.path is None else _element_at(b.value, b.path)
                if value is None:
                    continue  # unpacked from a value we cannot take apart: not known to change
                inner = self._churn(value, loops, b.scope, depth + 1, seen)
                if inner is not None:
                    return inner
        return None

    def _few_trips(self, loop: Loop, scope: Scope) -> bool:
        """A ``range`` loop with constant bounds (``range(num_viz)``, ``num_viz = 3``) and at most
        ``BOUNDED_TRIPS`` iterations."""
        it = loop_target_iterable(loop)
        if not (isinstance(it, ast.Call) and self.resolve(it.func, scope) == "builtins.range" and it.args
                and not it.keywords and len(it.args) <= 3):
            return False
        vals = [self.const_int(a, scope) for a in it.args]
        if any(v is None for v in vals):
            return False
        try:
            return len(range(*vals)) <= BOUNDED_TRIPS
        except (TypeError, ValueError):
            return False


# Methods of arrays: a lambda calling ``batch.sum()`` reads the batch as data.
_ARRAY_METHODS = frozenset({
    "sum", "mean", "max", "min", "std", "var", "prod", "argmax", "argmin", "reshape", "astype", "transpose",
    "dot", "squeeze", "flatten", "ravel", "clip", "round", "all", "any", "cumsum", "take", "item", "tolist",
    "swapaxes", "conj", "nonzero", "sort", "argsort", "repeat", "view"})
_NUMERIC_BUILTINS = frozenset({"builtins." + n for n in (
    "int", "float", "round", "len", "min", "max", "abs", "pow", "sum", "divmod", "str", "bool", "complex")})


def loop_target_iterable(loop: Loop) -> Optional[ast.AST]:
    node = loop.node
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return node.iter
    gens = getattr(node, "generators", None)
    return gens[0].iter if gens else None


def _target_loop(loops: tuple, b) -> Optional[Loop]:
    """The loop among ``loops`` whose target the ``for`` binding ``b`` binds."""
    for lp in loops:
        node = lp.node
        targets = [node.target] if isinstance(node, (ast.For, ast.AsyncFor)) else [
            g.target for g in getattr(node, "generators", ())]
        if any(n is b.node for t in targets for n in walk(t)):
            return lp
    return None


def _counts(loop: Loop, b) -> bool:
    """The binding is the loop's counter: the whole target of a ``range``/``count`` loop, or the
    index of ``enumerate``."""
    it = b.value
    if isinstance(it, ast.Call):
        name = it.func.attr if isinstance(it.func, ast.Attribute) else getattr(it.func, "id", "")
        if name == "enumerate":
            return b.path == (0,)
    return loop.ranged and not b.path


def _element_at(value: ast.AST, path: tuple) -> Optional[ast.AST]:
    """The part of a tuple/list literal an unpacking path picks, or None when it cannot be told."""
    for i in path:
        if not isinstance(value, (ast.Tuple, ast.List)) or any(isinstance(x, ast.Starred) for x in value.elts) \
                or i >= len(value.elts):
            return None
        value = value.elts[i]
    return value


def _decorator_names(f: FunctionInfo) -> list:
    out = []
    for dec in getattr(f.node, "decorator_list", ()):
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute):
            out.append(target.attr)
        elif isinstance(target, ast.Name):
            out.append(target.id)
    return out
