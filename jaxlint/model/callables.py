"""Callable queries: what calling an expression runs (jit wrappers, transforms, local functions)."""

from __future__ import annotations

import ast
from typing import Optional

from .. import names as N
from . import limits as L
from .records import Context, FunctionInfo, JitWrap, Scope
from .syntax import _pos


class CallableQueries:
    """What calling an expression runs: jit wrappers, transforms, this module's own functions.
    Mixed into :class:`~jaxlint.model.ModuleModel`."""

    def callable_info(self, func: ast.AST, scope: Optional[Scope] = None) -> Optional[JitWrap]:
        """If calling ``func`` runs compiled/transformed JAX code, the wrapper that made it.

        Recognises ``jax.jit(f)(x)``, names bound to ``jax.jit(...)``/``jax.grad(...)``, functions
        decorated with a jit wrapper or transform, ``partial`` of those, and ``self.attr`` set to a
        jit wrapper in any method of the class.
        """
        key = id(func)
        if key in self._callable_memo:
            return self._callable_memo[key]  # type: ignore[return-value]
        self._callable_memo[key] = None
        if scope is None:
            scope = self.scope_at(func)
        result = self._callable(func, scope, 0)
        self._callable_memo[key] = result
        return result

    def _callable(self, func: ast.AST, scope: Scope, depth: int) -> Optional[JitWrap]:
        if depth > L.CALLABLE_CHAIN or not self.work.spend():
            return None
        if isinstance(func, ast.Call):
            qn = self.resolve(func.func, scope)
            if qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS:
                return self._wrap_for_call(func)
            if qn == N.PARTIAL and func.args:
                return self._callable(func.args[0], scope, depth + 1)
            # partial(jax.jit, static_argnums=...)(f)
            if isinstance(func.func, ast.Call) and self._jit_factory(func.func, scope):
                return self._wrap_for_call(func)
            return None
        if isinstance(func, ast.Name):
            ev = self.binding(func.id, scope, _pos(func))
            if ev is None:
                other = self._imported(func.id, scope)
                if other is not None and other[1] is not None:
                    return other[0].exported_callable(other[1])
                return None
            if ev.kind == "def":
                # Only a decorator makes the name itself compiled: after ``g = jax.jit(f)``,
                # calling ``f`` still runs the Python function.
                f = self.func_of_node.get(id(ev.node))
                if f is not None and f.jit_entry is not None and f.jit_entry.decorator:
                    return f.jit_entry
                if f is not None and f.traced and any(c.decorator for c in f.trace_causes):
                    return _TRANSFORMED
                return None
            if ev.plain_assign:
                return self._callable(ev.value, ev.scope, depth + 1)
            return None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = self._class_of(scope)
            if cls is not None:
                for value in cls.self_attrs.get(func.attr, ()):
                    info = self._callable(value, self.scope_at(value), depth + 1)
                    if info is not None:
                        return info
                meth = cls.methods.get(func.attr)
                if meth is not None and meth.jit_entry is not None and meth.jit_entry.decorator:
                    return meth.jit_entry
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            # mod.train_step(...) with ``from . import mod`` / ``import pkg.mod as mod``
            other = self._imported(func.value.id, scope)
            if other is not None and other[1] is None:
                return other[0].exported_callable(func.attr)
        return None

    def exported_callable(self, name: str) -> Optional[JitWrap]:
        """What calling this module's top-level ``name`` runs (see :meth:`callable_info`)."""
        key = ("export", name)
        if key in self._callable_memo:
            return self._callable_memo[key]  # type: ignore[return-value]
        self._callable_memo[key] = None
        probe = ast.Name(id=name, ctx=ast.Load(), lineno=10 ** 9, col_offset=0)
        result = self._callable(probe, self.module_scope, 0)
        self._callable_memo[key] = result
        return result

    def _jit_factory(self, call: ast.Call, scope: Scope) -> Optional[str]:
        """``partial(jax.jit, ...)`` or ``jax.jit(static_argnums=...)``: a decorator that jits."""
        qn = self.resolve(call.func, scope)
        if qn == N.PARTIAL and call.args:
            inner = self.resolve(call.args[0], scope)
            if inner in N.JIT_WRAPPERS:
                return inner
        if qn in N.JIT_WRAPPERS and not call.args:
            return qn
        return None

    def _wrap_for_call(self, call: ast.Call) -> JitWrap:
        for w in self._wraps_by_call.get(id(call), ()):
            return w
        return _TRANSFORMED

    def local_functions(self, expr: ast.AST, scope: Scope, depth: int = 0) -> list[FunctionInfo]:
        """The functions of this module an expression names: a def in scope, ``self.method``,
        a lambda, ``partial(f, ...)``, or the function inside ``jax.jit(f)``/``jax.grad(f)``."""
        if depth > L.CALLABLE_CHAIN or not self.work.spend():
            return []
        if isinstance(expr, ast.Lambda):
            f = self.func_of_node.get(id(expr))
            return [f] if f else []
        if isinstance(expr, ast.Name):
            ev = self.binding(expr.id, scope, _pos(expr))
            if ev is None:
                return []
            if ev.kind == "def":
                f = self.func_of_node.get(id(ev.node))
                return [f] if f else []
            if ev.plain_assign:
                return self.local_functions(ev.value, ev.scope, depth + 1)
            return []
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
            cls = self._class_of(scope)
            if cls is not None and expr.attr in cls.methods:
                return [cls.methods[expr.attr]]
            return []
        if isinstance(expr, ast.Call):
            qn = self.resolve(expr.func, scope)
            if (qn == N.PARTIAL or qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS) and expr.args:
                return self.local_functions(expr.args[0], scope, depth + 1)
        return []

    def wrapper_qualname(self, wrap: JitWrap) -> Optional[str]:
        """The qualified name of the jit wrapper that made ``wrap`` (``jax.jit``, ``flax.nnx.jit``)."""
        def name_of(expr: ast.AST, scope) -> Optional[str]:
            if isinstance(expr, ast.Call):
                qn = self.resolve(expr.func, scope)
                if qn == N.PARTIAL and expr.args:
                    return self.resolve(expr.args[0], scope)
                return qn
            return self.resolve(expr, scope)

        if wrap.decorator and wrap.func is not None:
            scope = wrap.func.scope.parent
            for dec in wrap.func.node.decorator_list:
                qn = name_of(dec, scope)
                if qn in N.JIT_WRAPPERS:
                    return qn
            return None
        if isinstance(wrap.node, ast.Call):
            func = wrap.node.func
            scope = wrap.ctx.scope
            return name_of(func, scope) if isinstance(func, ast.Call) else self.resolve(func, scope)
        return None


class _Transformed(JitWrap):
    pass


# Stands for "a callable made by a transform whose wrapper we did not record" (e.g. jax.grad(f)).
_TRANSFORMED = _Transformed(node=ast.Pass(), kind="transform", spelling="", target=None, func=None,
                            ctx=Context(scope=Scope(ast.Module(body=[], type_ignores=[]), "module", None)))
