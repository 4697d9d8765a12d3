"""Calls that certainly raise ``TypeError`` for their number of arguments: a call of a function of this
module, directly or through names bound to ``functools.partial`` of it and to JAX transforms that keep its
signature (``jax.jit``, ``jax.grad``, ``jax.value_and_grad``, ``jax.vmap``), given more positional arguments
than it takes (and no ``*args``) or leaving a required parameter without a value (fresh AM:
``partial(compute_loss, net)`` of ``compute_loss(net, params, batch)`` called with three arguments; fresh AE:
a step called with one argument of three). Python semantics (and those transforms' signatures) only.

A function imported from another module of the project (``from .mod import f``) is judged from that module's
``def`` (``ProjectResolver.signature``). Not judged: calls with ``*args`` or ``**kwargs``, functions with decorators
other than those transforms
(``@jax.jit``, ``@partial(jax.jit, static_argnames=...)``), methods, names bound more than
once where the call reads them in a loop (a later binding may reach it), and anything the bindings do not
show.
"""

from __future__ import annotations

import ast
from typing import Optional

# Transforms whose product takes the arguments of the function they are given.
_SAME_SIGNATURE = frozenset({"jax.jit", "jax.grad", "jax.value_and_grad", "jax.vmap", "jax.checkpoint",
                             "jax.remat"})
_PARTIAL = frozenset({"functools.partial"})
_DEPTH = 6


def arity_error(m, call: ast.Call) -> Optional[str]:
    """Why ``call`` raises ``TypeError`` for its arguments, or None."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    found = _target(m, call.func, m.scope_at(call), (call.lineno, call.col_offset), 0)
    if found is None:
        return None
    sig, bound_pos, bound_kw = found
    name, positional, n_defaults, vararg, required_kw = sig
    given = bound_pos + len(call.args)
    named = bound_kw | {k.arg for k in call.keywords}
    spelled = ast.unparse(call.func)[:40]
    if not vararg and given > len(positional):
        return (f"`{spelled}` calls `{name}`, which takes {len(positional)} positional arguments, with {given} "
                "(TypeError)")
    required = positional[:len(positional) - n_defaults]
    missing = [p for p in required[given:] if p not in named] + [p for p in required_kw if p not in named]
    if missing:
        return f"`{spelled}` calls `{name}` without its required argument `{missing[0]}` (TypeError)"
    return None


def signature(node: ast.FunctionDef) -> tuple:
    """``(name, positional parameter names, how many have defaults, whether it takes *args, required
    keyword-only names)``: what decides whether a call's arguments fit (a tuple of plain values, so that
    another module's answer outlives its model)."""
    a = node.args
    return (node.name, tuple(p.arg for p in a.posonlyargs + a.args), len(a.defaults), a.vararg is not None,
            tuple(p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None))


def tree_function_signature(tree: ast.Module, name: str) -> Optional[tuple]:
    """The :func:`signature` of the top-level function ``name`` of a module's tree when a call of that name runs it
    as written: no other top-level statement binds the name, and its decorators are only transforms that keep its
    signature, spelled through the module's own top-level imports (``@jax.jit``, ``@jit`` after ``from jax import
    jit``, ``@partial(jax.jit, ...)``). Asked of another module of the project (``ProjectResolver.signature``)."""
    found, binds, imports = None, 0, {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for a in stmt.names:
                local = a.asname or a.name.split(".")[0]
                full = a.name if isinstance(stmt, ast.Import) and a.asname else (
                    a.name.split(".")[0] if isinstance(stmt, ast.Import) else f"{stmt.module}.{a.name}")
                imports[local] = full
                binds += local == name
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.name == name:
                binds += 1
                found = stmt if isinstance(stmt, ast.FunctionDef) else None
        else:  # ``if``/``try`` blocks at module level: an assignment, import or def of the name there binds it too
            binds += any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del))
                         or isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name
                         or isinstance(n, ast.alias) and (n.asname or n.name.split(".")[0]) == name
                         for n in ast.walk(stmt))
    if found is None or binds != 1:
        return None

    def resolved(e: ast.AST) -> Optional[str]:
        parts = []
        while isinstance(e, ast.Attribute):
            parts.append(e.attr)
            e = e.value
        if not isinstance(e, ast.Name) or e.id not in imports:
            return None
        return ".".join([imports[e.id], *reversed(parts)])

    for dec in found.decorator_list:
        if isinstance(dec, ast.Call):
            if resolved(dec.func) not in _PARTIAL or not dec.args:
                return None
            dec = dec.args[0]
        if resolved(dec) not in _SAME_SIGNATURE:
            return None
    return signature(found)


def _target(m, func: ast.AST, scope, pos: tuple, depth: int) -> Optional[tuple]:
    """``(def, positional arguments bound, keywords bound)`` of the function a call of ``func`` runs."""
    if depth > _DEPTH:
        return None
    if isinstance(func, ast.Call):  # ``jax.jit(jax.value_and_grad(f))``
        return _made_by(m, func, scope, depth)
    if not isinstance(func, ast.Name):
        return None
    ev = m.binding(func.id, scope, pos)
    if ev is None:
        return _imported_target(m, func.id, scope)
    if ev.kind == "def":
        node = ev.node
        if not isinstance(node, ast.FunctionDef) or _is_method(m, node) or not all(
                _keeps_signature(m, d, ev.scope) for d in node.decorator_list):
            return None
        if len(ev.scope.events.get(func.id) or ()) != 1:
            return None  # bound again elsewhere (another def, an assignment): not certain which runs
        return signature(node), 0, frozenset()
    if not ev.plain_assign or not isinstance(ev.value, ast.Call) or ev.loops:
        return None
    return _made_by(m, ev.value, ev.scope, depth)


def _imported_target(m, name: str, scope) -> Optional[tuple]:
    """A function ``from .mod import name`` brings from another module of the project (fresh AZ: scripts calling
    an imported step with seven arguments for its four, inside a ``try`` that catches the TypeError and skips
    the timing after it)."""
    other = m._imported(name, scope)
    path = getattr(other[0], "path", None) if other is not None and other[1] is not None else None
    if path is None or m.project is None:
        return None
    sig = m.project.signature(path, other[1])
    return (sig, 0, frozenset()) if sig is not None else None


def _made_by(m, value: ast.Call, scope, depth: int) -> Optional[tuple]:
    if not value.args or isinstance(value.args[0], ast.Starred):
        return None
    qn = m.resolve(value.func, scope)
    inner_pos = (value.lineno, value.col_offset)
    if qn in _PARTIAL:
        if any(isinstance(x, ast.Starred) for x in value.args) or any(k.arg is None for k in value.keywords):
            return None
        inner = _target(m, value.args[0], scope, inner_pos, depth + 1)
        if inner is None:
            return None
        return inner[0], inner[1] + len(value.args) - 1, inner[2] | {k.arg for k in value.keywords}
    if qn in _SAME_SIGNATURE:
        return _target(m, value.args[0], scope, inner_pos, depth + 1)
    return None


def _keeps_signature(m, dec: ast.AST, scope) -> bool:
    """A decorator whose product takes the function's own arguments: ``@jax.jit``, ``@jax.vmap``, or
    ``@partial(jax.jit, static_argnames=...)`` (static arguments and donation change no signature;
    fresh AR: a jitted ``forward`` called without its required ``vocab_size``)."""
    if isinstance(dec, ast.Call):
        if m.resolve(dec.func, scope) not in _PARTIAL or not dec.args:
            return False
        dec = dec.args[0]
    return m.resolve(dec, scope) in _SAME_SIGNATURE


def _is_method(m, node: ast.FunctionDef) -> bool:
    f = m.func_of_node.get(id(node))
    return f is not None and f.cls is not None
