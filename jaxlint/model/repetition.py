"""Repetition: callables created anew each time code runs, where a jit wrapper is called, and
how often a function runs (entry points, tests, cached factories)."""

from __future__ import annotations

import ast
from typing import Optional

from .. import names as N
from .records import FunctionInfo, JitWrap, NewCallable, Scope
from .syntax import call_arg as _arg

_KNOWN_PURE = ("jax.", "builtins.", "numpy.", "math.", "functools.")


def _method_of(func: ast.AST, names: set) -> bool:
    """``model.apply`` where ``model`` is one of ``names``: the program is the same each call
    (``jax.jit(lambda x: model.apply(params, x))`` is the pitfall itself)."""
    while isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func.id in names


_RUN_ONCE = ("main", "_main")


def called_once(f: Optional[FunctionInfo]) -> bool:
    """Entry points and tests (and functions nested in them) run once per process or test."""
    while f is not None:
        name = f.name
        if (name in _RUN_ONCE or name.startswith(("test", "setUp")) or name.endswith("_test")
                or "example" in name or "benchmark" in name):
            return True
        f = f.parent
    return False


def cached(f: FunctionInfo) -> bool:
    return any(d in N.CACHE_DECORATORS for d in f.decorators)


def escapes(f: FunctionInfo, name: str) -> bool:
    """The wrapper leaves the function (returned, stored on an object or in a container)."""
    for r in f.returns:
        called = {id(n.func) for n in ast.walk(r) if isinstance(n, ast.Call)}
        if any(isinstance(n, ast.Name) and n.id == name and id(n) not in called for n in ast.walk(r)):
            return True
    for stmt in ast.walk(f.node):
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and stmt.value.id == name:
            if any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in stmt.targets):
                return True
    return False


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
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            funcs = self.local_functions(target, scope)
            if funcs and funcs[0].is_method:
                return NewCallable("bound_method", target)
            return None
        if isinstance(target, ast.Name):
            ev = self.binding(target.id, scope, (target.lineno, target.col_offset))
            if ev is None:
                return None
            if ev.kind == "def":
                created = ev.node
                what = NewCallable("def", ev.node, target.id)
            elif ev.plain_assign and isinstance(ev.value, (ast.Lambda, ast.Call)):
                created = ev.value
                desc = self.new_callable(ev.value, inside, ev.scope)
                if desc is None:
                    return None
                what = NewCallable("name", ev.value, target.id, desc)
            else:
                return None
            return what if self.created_inside(created, inside) else None
        return None

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
        for node in ast.walk(body):
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
