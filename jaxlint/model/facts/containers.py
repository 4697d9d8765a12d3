"""Containers that outlive a trace: a Python list/dict/set of the module, of an enclosing
function, or of a caller (a parameter closed over by a compiled function), written from traced
code. A store there happens once, at trace time (JAX601). Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from ..python.records import FunctionInfo
from ..python.syntax import _pos

_CONTAINER_DISPLAYS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp)
_CONTAINER_TYPES = frozenset({"builtins.list", "builtins.dict", "builtins.set", "collections.defaultdict",
                              "collections.OrderedDict", "collections.deque", "collections.Counter"})


def outliving_container(m, f: FunctionInfo, name: ast.Name, scope) -> Optional[str]:
    """If ``name`` (used in traced ``f``) refers to a Python list/dict/set that outlives the trace,
    where it lives: "module" or "function" (an enclosing one), or "parameter" (a parameter of an
    enclosing function that is not traced, closed over by a compiled function: the caller's object).
    None for locals and the traced function's own parameters, and for
    anything not known to be a plain container (a Pallas/state Ref written in a kernel body, an
    optimizer object with an ``update`` method)."""
    ev = m.binding(name.id, scope, _pos(name))
    if ev is not None and ev.kind == "param" and ev.scope is not f.scope and ev.scope.func is not None \
            and not ev.scope.func.traced and f.jit_entry is not None:
        # ``def foo(tot): @jax.jit def inc(x): tot[0] += x``: the caller's object, closed over by a
        # compiled function; written once, at trace time
        return "parameter"
    if ev is None or not ev.plain_assign:
        return None
    if ev.scope is f.scope or ev.scope.kind == "class":
        return None
    value = ev.value
    if not (isinstance(value, _CONTAINER_DISPLAYS) or (
            isinstance(value, ast.Call) and m.resolve(value.func, ev.scope) in _CONTAINER_TYPES)):
        return None
    if ev.scope.kind == "module":
        return "module"
    g = ev.scope.func
    if g is not None and g.traced and f.traced_by_callers_only:
        return None  # a helper filling its traced caller's local: all within one trace
    return "function"
