"""Callable queries: what calling an expression runs (jit wrappers, transforms, local functions)."""

from __future__ import annotations

import ast
from typing import Optional

from .. import names as N
from . import limits as L
from .records import ClassInfo, Context, FunctionInfo, JitWrap, Scope
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

    def imported_result(self, func: ast.AST, scope: Scope) -> bool:
        """Whether calling ``func`` calls a function of another module of the project that
        certainly returns one JAX array (:meth:`~jaxlint.model.ModuleSummary.returns_array`):
        ``accuracy(logits, y)`` after ``from .metrics import accuracy``, or ``metrics.accuracy(...)``
        after ``from . import metrics``."""
        if self.project is None or not self.work.spend():
            return False
        found = self.imported_function(func, scope)
        return found is not None and found[0].returns_array(found[1])

    def imported_function(self, func: ast.AST, scope: Scope) -> Optional[tuple]:
        """``(summary, name)`` when calling ``func`` calls the top-level function ``name`` of another
        module of the project: ``f(...)`` after ``from .mod import f``, ``mod.f(...)`` after ``from .
        import mod``; None otherwise (a local name, a library, no project resolver)."""
        if self.project is None or self.path is None:
            return None
        if isinstance(func, ast.Name):
            if self.binding(func.id, scope, _pos(func)) is not None:
                return None
            other = self._imported(func.id, scope)
            return other if other is not None and other[1] is not None else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if self.binding(func.value.id, scope, _pos(func.value)) is not None:
                return None
            other = self._imported(func.value.id, scope)
            return (other[0], func.attr) if other is not None and other[1] is None else None
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

    # ------------------------------------------------------------------ bound methods vs stored functions

    def attribute_callable(self, expr: ast.AST, scope: Scope) -> Optional[str]:
        """What evaluating the attribute ``expr`` gives: "bound_method" when it looks a function up
        on an instance through its class (``self.step``, ``self.env.step`` with ``self.env =
        Env(...)``, ``env.step`` with ``env = Env(...)``, ``super().update``; a classmethod, on an
        instance or its class): Python makes a new bound-method object at every evaluation, equal
        to the last one but not the same object. "stored" when it returns a function object kept
        somewhere, the same one each time: an instance attribute assigned in a method
        (``self.loss_fn = loss_fn``), a dataclass or NamedTuple field, a staticmethod, a function
        looked up on its class (``Cls.f``) or on an imported module (``mod.func``). None when this
        module cannot tell: an object made elsewhere (``self.env = make_env()``, a parameter), a
        property, a class attribute of unknown kind, a method a base class from another module may
        define."""
        if not isinstance(expr, ast.Attribute) or not self.work.spend():
            return None
        base, attr = expr.value, expr.attr
        if isinstance(base, ast.Name) and self._module_import(base.id, scope):
            return "stored"
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super" \
                and self.binding("super", scope, _pos(base)) is None:
            cls = self._class_of(scope)
            if cls is None:
                return None
            return self._bases_member(cls, attr, True, 0)
        cls = self._class_named(base, scope)
        if cls is not None:
            return self._member(cls, attr, False, 0)
        cls = self.instance_class(base, scope)
        if cls is not None:
            return self._member(cls, attr, True, 0)
        return None

    def instance_class(self, expr: ast.AST, scope: Scope, depth: int = 0) -> Optional[ClassInfo]:
        """The class of this module whose instance ``expr`` is: ``self`` in a method, a name bound
        to ``Cls(...)``, or ``self.attr`` every assignment of which is ``Cls(...)``. None when not
        known (a parameter, a factory's result, a class from another module)."""
        if depth > L.CALLABLE_CHAIN or not self.work.spend():
            return None
        if isinstance(expr, ast.Name):
            if expr.id == "self":
                f = self._method_at(scope)
                return f.cls if f is not None else None
            ev = self.binding(expr.id, scope, _pos(expr))
            if ev is not None and ev.plain_assign and isinstance(ev.value, ast.Call):
                return self._class_named(ev.value.func, ev.scope)
            return None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            owner = self.instance_class(expr.value, scope, depth + 1)
            values = owner.self_attrs.get(expr.attr, ()) if owner is not None else ()
            found = {id(c): c for c in (self._class_named(v.func, self.scope_at(v)) if isinstance(v, ast.Call)
                                        else None for v in values)}
            if len(found) == 1 and None not in found:
                return next(iter(found.values()))
        return None

    def _method_at(self, scope: Scope) -> Optional[FunctionInfo]:
        """The method whose ``self`` the code in ``scope`` sees (a closure inside a method sees its
        method's): a def in a class body that is neither a staticmethod nor a classmethod."""
        s: Optional[Scope] = scope
        while s is not None:
            f = s.func if s.kind == "function" else None
            if f is not None and f.cls is not None and not isinstance(f.node, ast.Lambda):
                return f if _method_kind(f.node) in ("plain", "other") and f.params[:1] == ["self"] else None
            if s.kind == "class":
                return None
            s = s.parent
        return None

    def _class_named(self, expr: ast.AST, scope: Optional[Scope]) -> Optional[ClassInfo]:
        """The class of this module the name ``expr`` is bound to (``class Env: ...``)."""
        if not isinstance(expr, ast.Name) or scope is None:
            return None
        ev = self.binding(expr.id, scope, _pos(expr))
        if ev is not None and isinstance(ev.node, ast.ClassDef):
            return self.classes.get(id(ev.node))
        return None

    def _module_import(self, name: str, scope: Scope) -> bool:
        """``name`` is a module: ``import mod`` / ``import pkg.mod as mod``, or ``from pkg import
        mod`` naming a module of the project."""
        s: Optional[Scope] = scope
        while s is not None:
            if name in s.events and s.kind != "class":
                return False
            if name in s.import_src:
                if s.import_src[name][1] is None:
                    return True
                other = self._imported(name, scope)
                return other is not None and other[1] is None
            s = s.parent
        return False

    def _member(self, cls: ClassInfo, attr: str, on_instance: bool, depth: int) -> Optional[str]:
        """``attr`` looked up on an instance of ``cls`` (``on_instance``) or on ``cls`` itself."""
        if depth > L.CALLABLE_CHAIN or not self.work.spend():
            return None
        if on_instance and attr in cls.self_attrs:
            return "stored"  # an instance attribute: the instance's dict comes before the class's
        evs = cls.scope.events.get(attr) if cls.scope is not None else None
        if evs:
            ev = evs[-1]
            if isinstance(ev.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                kind = _method_kind(ev.node)
                if kind == "static":
                    return "stored"
                if kind == "class":
                    return "bound_method"
                if kind == "plain":
                    return "bound_method" if on_instance else "stored"
                return None  # a property or a decorated method: whatever its decorator returns
            if ev.plain_assign and isinstance(ev.value, ast.Call) and isinstance(ev.value.func, ast.Name) \
                    and ev.value.func.id == "staticmethod":
                return "stored"
            return "stored" if on_instance and _annotated(cls, attr) else None
        if on_instance and _annotated(cls, attr):
            return "stored"  # a dataclass or NamedTuple field declared without a default
        return self._bases_member(cls, attr, on_instance, depth)

    def _bases_member(self, cls: ClassInfo, attr: str, on_instance: bool, depth: int) -> Optional[str]:
        """``attr`` looked up on the bases of ``cls``, in order: None as soon as a base is not a
        class of this module (it may define ``attr``)."""
        outer = cls.scope.parent if cls.scope is not None else None
        for b in cls.node.bases:
            base = self._class_named(b, outer)
            if base is None:
                return None
            found = self._member(base, attr, on_instance, depth + 1)
            if found is not None:
                return found
        return None

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


def _method_kind(node: ast.AST) -> str:
    """How a def in a class body is looked up: "static" (``@staticmethod``), "class"
    (``@classmethod``), "plain" (no decorator: bound on an instance) or "other" (any other
    decorator: a property, a jit wrapper, ... whatever the decorator returns)."""
    decs = getattr(node, "decorator_list", ())
    if not decs:
        return "plain"
    names = {d.id if isinstance(d, ast.Name) else d.attr if isinstance(d, ast.Attribute) else "" for d in decs}
    if "staticmethod" in names:
        return "static"
    if "classmethod" in names:
        return "class"
    return "other"


def _annotated(cls: ClassInfo, attr: str) -> bool:
    """``attr: T`` (with or without a default) in the class body: a dataclass, NamedTuple or
    struct field, set per instance."""
    return any(isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id == attr
               for st in cls.node.body)


class _Transformed(JitWrap):
    pass


# Stands for "a callable made by a transform whose wrapper we did not record" (e.g. jax.grad(f)).
_TRANSFORMED = _Transformed(node=ast.Pass(), kind="transform", spelling="", target=None, func=None,
                            ctx=Context(scope=Scope(ast.Module(body=[], type_ignores=[]), "module", None)))
