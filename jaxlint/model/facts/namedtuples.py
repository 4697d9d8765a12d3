"""Record classes: ``typing.NamedTuple`` classes, whose construction only stores its arguments.

``HMMPosterior(marginal_loglik=ll, filtered_probs=probs)`` of ``class HMMPosterior(NamedTuple)``
builds a tuple of the values it is handed: it reads nothing of them, so it never waits for the
device (a class statement deriving from ``NamedTuple`` may not override ``__new__``; an
``__init__`` it defines runs after the tuple is built, and is taken to read anything). The
class may be this module's or a top-level class of another module of the project (through the
module's summary). Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from ..python.records import Scope

_NAMEDTUPLE = frozenset({"typing.NamedTuple", "typing_extensions.NamedTuple"})


def is_record_class(m, node: ast.ClassDef, scope: Scope) -> bool:
    """A class statement deriving from ``NamedTuple`` only, with no ``__init__`` of its own."""
    if len(node.bases) != 1 or node.keywords or m.resolve(node.bases[0], scope) not in _NAMEDTUPLE:
        return False
    return not any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__init__"
                   for s in node.body)


def record_classes_of(m) -> frozenset:
    """The names of this module's top-level record classes, for other modules (the summary)."""
    scope = m.module_scope
    return frozenset(s.name for s in m.tree.body if isinstance(s, ast.ClassDef) and is_record_class(m, s, scope)
                     and len(scope.events.get(s.name, ())) == 1)


def constructs_record(m, call: ast.Call, scope: Scope) -> bool:
    """Whether ``call`` constructs a record class: ``Posterior(...)`` of this module's class,
    ``core.Posterior(...)`` after ``import pkg.core as core``, ``Posterior(...)`` after ``from
    .core import Posterior`` (a project module's top-level class)."""
    f = call.func
    if isinstance(f, ast.Name):
        ev = m.binding(f.id, scope, (f.lineno, f.col_offset))
        if ev is not None:
            if not isinstance(ev.node, ast.ClassDef) or len(ev.scope.events.get(f.id, ())) != 1:
                return False
            return is_record_class(m, ev.node, ev.scope)
        other = m._imported(f.id, scope)
        return other is not None and other[1] is not None and other[0].record_class(other[1])
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        if m.binding(f.value.id, scope, (f.value.lineno, f.value.col_offset)) is not None:
            return False
        other: Optional[tuple] = m._imported(f.value.id, scope)
        return other is not None and other[1] is None and other[0].record_class(f.attr)
    return False
