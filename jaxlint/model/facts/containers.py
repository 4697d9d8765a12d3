"""Containers that outlive a trace: a Python list/dict/set of the module, of an enclosing
function, or of a caller (a parameter closed over by a compiled function), written from traced
code. A store there happens once, at trace time (JAX601). Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from ..python.records import FunctionInfo
from ..python.syntax import _pos, child_nodes, walk

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


def element_maker(m, name: ast.Name, scope) -> Optional[str]:
    """The qualified name of the callable that made every element of the list ``name`` reads
    (``"queue.Queue"`` for ``qs = []`` then only ``qs.append(queue.Queue(maxsize=1))``, or
    ``qs = [queue.Queue() for _ in range(n)]``); None when it is not proven. Proven only for a
    name bound once in its scope to a list display or comprehension whose elements are all calls
    of one resolved callable, and whose every other use in that scope (nested functions included)
    appends such a call, reads an element (``qs[i]``), iterates it or takes its ``len``: a store
    into it, any other method, or the list handed to any other call (which may put anything in
    it) leaves it unknown."""
    ev = m.binding(name.id, scope, _pos(name))
    if ev is None or not ev.plain_assign or len(ev.scope.events.get(name.id, ())) != 1:
        return None
    memo = m.facts.element_makers
    key = id(ev.node)
    if key not in memo:
        memo[key] = _element_maker(m, name.id, ev)
    return memo[key]


def _element_maker(m, name: str, ev) -> Optional[str]:
    value = ev.value
    if isinstance(value, ast.List):
        elements = list(value.elts)
    elif isinstance(value, ast.ListComp):
        elements = [value.elt]
    else:
        return None
    parents: dict = {}
    uses: list = []
    for node in walk(ev.scope.node):
        for child in child_nodes(node):
            parents[id(child)] = node
        if isinstance(node, ast.Name) and node.id == name:
            uses.append(node)
    for use in uses:
        parent = parents.get(id(use))
        if isinstance(use.ctx, ast.Store):
            if use is not ev.node:
                return None
            continue
        if isinstance(parent, ast.Subscript) and parent.value is use and isinstance(parent.ctx, ast.Load):
            continue  # qs[i]
        if isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is use:
            continue  # for q in qs
        if isinstance(parent, ast.Call) and parent.args == [use] and not parent.keywords and \
                m.resolve(parent.func, m.scope_at(parent)) == "builtins.len":
            continue
        if isinstance(parent, ast.Attribute) and parent.attr == "append":
            call = parents.get(id(parent))
            if isinstance(call, ast.Call) and call.func is parent and len(call.args) == 1 and not call.keywords:
                elements.append(call.args[0])
                continue
        return None
    if not elements:
        return None
    made = set()
    for e in elements:
        if not isinstance(e, ast.Call):
            return None
        made.add(m.resolve(e.func, m.scope_at(e)))
    return made.pop() if len(made) == 1 and None not in made else None


def _is_container_display(m, value, scope) -> bool:
    """``[...]``, ``{...}``, comprehensions, ``[x] * n``, ``list(...)``/``dict(...)``: a Python container."""
    if isinstance(value, _CONTAINER_DISPLAYS):
        return True
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Mult, ast.Add)):
        return isinstance(value.left, ast.List) or isinstance(value.right, ast.List)
    return isinstance(value, ast.Call) and m.resolve(value.func, scope) in _CONTAINER_TYPES


def item_stores(m) -> dict:
    """``{(id(scope), name): [stored value, ...]}`` for every ``name[...] = value`` of the module
    (``None`` for a tuple-unpacked store, whose value is not one expression), built once."""
    index = m.facts.item_stores
    if index is None:
        index = {}
        for target, kind in m.stores:
            if kind != "assign" or not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)):
                continue  # ``del n[i]`` stores nothing; ``n[i] += 1`` keeps the element's kind
            stmt = m.stmt_of.get(id(target))
            value = stmt.value if isinstance(stmt, ast.Assign) and target in stmt.targets else None
            scope = m.binding_scope(target.value.id, m.scope_at(target))
            if scope is not None:
                index.setdefault((id(scope), target.value.id), []).append(value)
        m.facts.item_stores = index
    return index


def stored_elements_unproven(m, name: ast.Name, scope, is_jax) -> bool:
    """Whether an element read ``name[i]`` of a Python container may hold a value not shown to be
    a JAX value because code stores one into it: ``n = [jnp.array(1.)] * k`` then
    ``n[l] = x.shape[0]`` (a Python int) in a loop, so ``n[l - 1]`` read on the next iteration is
    that int. True when the name's binding is a container display or constructor and some
    ``name[...] = v`` of its scope stores a ``v`` that ``is_jax`` does not prove (or a store that is
    not one expression); False otherwise (no stores, or every stored value a JAX value)."""
    home = m.binding_scope(name.id, scope)
    if home is None:
        return False
    stores = item_stores(m).get((id(home), name.id))
    if not stores:
        return False
    evs = home.events.get(name.id, ())
    if not any(ev.kind == "assign" and _is_container_display(m, ev.value, ev.scope) for ev in evs):
        return False
    return any(v is None or not is_jax(m, v, m.scope_at(v)) for v in stores)
