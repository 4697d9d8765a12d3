"""Instances of a module's own classes: which class of the module an expression is an instance of
(``self``, ``Cls(...)``, a name bound to one, a parameter annotated with one, ``self.attr`` always
bound to one), and how a def in a class body is looked up. Python semantics; the facts layer's
callable queries (facts/callables.py) resolve ``obj.method`` with them.
"""

from __future__ import annotations

import ast
from typing import Optional

from . import limits as L
from .records import ClassInfo, FunctionInfo, Scope
from .syntax import _pos


def overridden(m, cls, name: str) -> bool:
    """Whether a class of this module derived from ``cls`` defines its own ``name`` (an instance
    may be of that class: the method called is not known)."""
    return any(name in c.methods and any(isinstance(b, ast.Name) and b.id == cls.node.name for b in c.node.bases)
               for c in m.classes.values() if c is not cls)


def instance_class(m, expr: ast.AST, scope: Scope, depth: int = 0) -> Optional[ClassInfo]:
    """The class of this module whose instance ``expr`` is: ``self`` in a method, ``Cls(...)``, a
    name bound to ``Cls(...)`` or a parameter annotated with ``Cls``, or ``self.attr`` every
    assignment of which is one of those. None when not
    known (a parameter, a factory's result, a class from another module)."""
    if depth > L.CALLABLE_CHAIN or not m.work.spend():
        return None
    if isinstance(expr, ast.Call):  # ``Trainer().step``: the instance made there
        return class_named(m, expr.func, scope)
    if isinstance(expr, ast.Name):
        if expr.id == "self":
            f = method_at(m, scope)
            return f.cls if f is not None else None
        ev = m.binding(expr.id, scope, _pos(expr))
        if ev is not None and ev.plain_assign and isinstance(ev.value, ast.Call):
            return class_named(m, ev.value.func, ev.scope) or _returned_instance(m, ev, depth)
        if ev is not None and ev.kind == "assign" and isinstance(ev.value, ast.Call) and ev.path is not None:
            return _returned_instance(m, ev, depth)
        if ev is not None and ev.kind == "param":
            return annotated_class(m, ev)
        return None
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        owner = instance_class(m, expr.value, scope, depth + 1)
        values = owner.self_attrs.get(expr.attr, ()) if owner is not None else ()
        found = {id(c): c for c in (class_named(m, v.func, m.scope_at(v)) if isinstance(v, ast.Call)
                                    else instance_class(m, v, m.scope_at(v), depth + 1)
                                    if isinstance(v, ast.Name) and v.id != "self" else None for v in values)}
        if len(found) == 1 and None not in found:
            return next(iter(found.values()))
    return None


def _returned_instance(m, ev, depth: int) -> Optional[ClassInfo]:
    """The class of the instance a def of this module returns (``def init_state(): ...; return
    updater, state``; ``updater, state = init_state(cfg)``), when every return agrees: the whole
    value for ``x = f()``, element ``i`` of a returned tuple display for an unpacking."""
    func = ev.value.func
    bound = m.binding(func.id, ev.scope, _pos(func)) if isinstance(func, ast.Name) else None
    f = m.func_of_node.get(id(bound.node)) if bound is not None and bound.kind == "def" else None
    if f is None or not f.returns or (ev.path is not None and len(ev.path) != 1):
        return None
    found: dict = {}
    for r in f.returns:
        if ev.path is not None:
            if not isinstance(r, ast.Tuple) or ev.path[0] >= len(r.elts) or any(
                    isinstance(e, ast.Starred) for e in r.elts):
                return None
            r = r.elts[ev.path[0]]
        cls = instance_class(m, r, m.scope_at(r), depth + 1)
        found[id(cls)] = cls
    return next(iter(found.values())) if len(found) == 1 else None


def annotated_class(m, ev, want_name: bool = False):
    """The class of this module a parameter's annotation names (``buffer: ReplayBuffer``,
    ``ReplayBuffer[S, T]``, ``Optional[Env]``, ``"Env"``): its value is an instance of that class
    or of a subclass (whose methods are methods too). None without such an annotation. With
    ``want_name``: the annotation's name and the scope it is read in (for a class of another module)."""
    fn = ev.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return None
    a = fn.args
    arg = next((p for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg == ev.value), None)
    ann = arg.annotation if arg is not None else None
    outer = ev.scope.parent
    for _ in range(3):
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str) and ann.value.isidentifier():
            ann = ast.Name(ann.value, ast.Load(), lineno=fn.lineno, col_offset=fn.col_offset)
        if isinstance(ann, ast.Subscript):
            if m.resolve(ann.value, outer) == "typing.Optional":
                ann = ann.slice
                continue
            ann = ann.value
        break
    if not isinstance(ann, ast.Name):
        return None
    return (ann, outer) if want_name else class_named(m, ann, outer)


def method_at(m, scope: Scope) -> Optional[FunctionInfo]:
    """The method whose ``self`` the code in ``scope`` sees (a closure inside a method sees its
    method's): a def in a class body that is neither a staticmethod nor a classmethod."""
    s: Optional[Scope] = scope
    while s is not None:
        f = s.func if s.kind == "function" else None
        if f is not None and f.cls is not None and not isinstance(f.node, ast.Lambda):
            return f if method_kind(f.node) in ("plain", "other") and f.params[:1] == ["self"] else None
        if s.kind == "class":
            return None
        s = s.parent
    return None


def class_named(m, expr: ast.AST, scope: Optional[Scope]) -> Optional[ClassInfo]:
    """The class of this module the name ``expr`` is bound to (``class Env: ...``)."""
    if not isinstance(expr, ast.Name) or scope is None:
        return None
    ev = m.binding(expr.id, scope, _pos(expr))
    if ev is not None and isinstance(ev.node, ast.ClassDef):
        return m.classes.get(id(ev.node))
    return None


def method_kind(node: ast.AST) -> str:
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
    if names <= _IDENTITY_DECORATORS:
        return "plain"
    return "other"


# Decorators of the standard library that return the function they decorate unchanged.
_IDENTITY_DECORATORS = frozenset({"abstractmethod", "override", "final"})
