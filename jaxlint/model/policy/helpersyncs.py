"""Helpers that copy what they are given to the host: ``log_metrics(step, metrics)``, a plain function
(or a method of a class of this module) whose body converts or formats a parameter (``float(v)``,
``v.item()``, ``print(f"{v}")``), called in a loop with a JAX value there, syncs with the device in
every iteration as if the conversion were written in the loop. Asked by JAX201 (a fetch) and JAX202
(``blocks``: a ``block_until_ready`` inside the helper). Functions of the model (``m``).
"""

from __future__ import annotations

import ast
import os
from typing import Optional

from ... import names as N
from ..facts import callables, fetches
from ..facts import values as V
from ..facts.loops import mentions
from ..facts.work import work_memo
from ..python.instances import class_named
from ..python.records import FunctionInfo
from ..python.syntax import _pos, last_name, statement_walk, unparse, walk


def helper_sync(m, call: ast.Call, blocks: bool = False) -> Optional[tuple]:
    """``log_metrics(step, metrics)`` where ``log_metrics`` is a plain (not compiled) function
    of this module, called for its effect (it returns nothing: a helper that returns what
    it converted, ``four_dig(x)``, is a conversion whose result the caller needs on the
    host), whose body copies a parameter to the host or formats it (``float(v)``,
    ``v.item()``, ``print(f"{v}")``, ``logging.info("%s", v)``, on the parameter or on values
    taken from it: ``for k, v in metrics.items()``, ``metrics["loss"]``), and the call passes
    a JAX value there: ``(argument, where the helper syncs it, in words)``; with ``blocks``, one that
    blocks on it (``jax.block_until_ready(x)``), whatever it returns. A sync under an
    ``if`` on another parameter of the helper (``if step % every == 0:``) is a schedule kept
    inside the helper, and does not count. A helper that returns a value counts where the call is
    the test of an ``if`` or ``while`` (``if converged(epoch, coeffs):``): the branch needs what the
    helper read, as an ``if`` on the value itself would. Also an object's ``__call__`` (``converged =
    Convergence(...)`` then ``converged(epoch, coeffs)``), its class of this module or imported from
    another module of the project."""
    if blocks and not m.calls_by_name.get("block_until_ready"):
        return None  # no helper of this module blocks
    scope = m.scope_at(call)
    if isinstance(call.func, ast.Name) and not blocks:
        found = _object_call_sync(m, call, scope)
        if found is not None:
            return found
    if isinstance(call.func, ast.Attribute):
        # ``writer.scalar("loss", loss, step)``: a plain method of an instance of a class of this
        # module (``writer = Writer()``, an annotated parameter), called for its effect
        cls = callables.instance_class(m, call.func.value, scope) \
            if not (isinstance(call.func.value, ast.Name) and call.func.value.id == "self") else None
        meth = cls.methods.get(call.func.attr) if cls is not None else None
        funcs = [meth] if meth is not None and not meth.node.decorator_list else []
        shift = 1
    elif callables.callable_info(m, call.func, scope) is not None:
        return None
    else:
        funcs, shift = [f for f in callables.local_functions(m, call.func, scope) if not f.is_method], 0
    for f in funcs:
        if f.traced or isinstance(f.node, ast.Lambda):
            continue
        if f.returns and not (blocks or _branch_test(m, call)):
            continue  # a conversion whose result the caller needs on the host, unless an ``if`` tests it
        bound = _bind_params(m, call, f, shift)
        for param, arg in bound:
            jax_arg = V.holds_jax(m, arg, scope)
            if not jax_arg and (blocks or not _computes(m, f)):
                continue
            inner = _param_sync(m, f, param, blocks)
            if inner is not None and (jax_arg or (id(f), param) in _computed_syncs(m)):
                return arg, f"`{unparse(inner, 30)}` on line {inner.lineno}"
    return None


def _computes(m, f: FunctionInfo) -> bool:
    """Whether ``f`` calls a JAX function (``jnp.*``, ``lax.*``, ``jax.nn.*``): only then can it read a JAX
    computation of a parameter whatever the argument was. Memoized per function."""
    memo = work_memo(m)
    key = ("computes", id(f))
    if key not in memo:
        memo[key] = any((m.resolve(c.func, m.scope_at(c)) or "").startswith(_JAX_FUNCTIONS) for c in f.calls)
    return memo[key]


def _branch_test(m, call: ast.Call) -> bool:
    """Whether ``call`` is the test of an ``if`` or ``while`` (``if converged(...)``, ``while not done(...)``);
    the tests of the function the call is in are collected once."""
    f = m.function_at(call)
    memo = work_memo(m)
    key = ("branch_tests", id(f))
    tests = memo.get(key)
    if tests is None:  # statements only: no expression is walked
        tests = memo[key] = {
            id(t.operand if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not) else t)
            for t in (n.test for n in statement_walk(f.node if f is not None else m.tree)
                      if isinstance(n, (ast.If, ast.While)))}
    return id(call) in tests


def _object_call_sync(m, call: ast.Call, scope) -> Optional[tuple]:
    """``converged(epoch, coeffs)`` where ``converged = Convergence(...)`` (bound once): the sync of a
    parameter by the class's plain ``__call__``, the class of this module or imported from another
    module of the project (asked of that module's model, once per class)."""
    ev = m.binding(call.func.id, scope, _pos(call.func))
    if ev is None or not ev.plain_assign or not isinstance(ev.value, ast.Call) or len(
            ev.scope.events.get(call.func.id, ())) != 1 or not isinstance(ev.value.func, ast.Name):
        return None
    cls = class_named(m, ev.value.func, ev.scope)
    if cls is not None:
        syncs, where = _call_syncs(m, cls), ""
    else:
        found = m._imported(ev.value.func.id, ev.scope)
        if found is None or found[1] is None:
            return None
        summary, name = found
        data = summary.project.read(summary.path)
        if data is None or b"def __call__" not in data:
            return None
        syncs = summary.project.answer(summary.path, ("call-syncs", name), lambda model: _class_call_syncs(model, name),
                                       None, _CONVERSION_SPELLINGS)
        where = f" of {os.path.relpath(os.path.abspath(summary.path), os.path.dirname(os.path.abspath(m.path)))}"
    if not syncs or (syncs[0] and not _branch_test(m, call)):
        return None
    for param, arg in _bind_call(call, syncs[1]):
        if param in syncs[2] and (syncs[2][param][2] or V.holds_jax(m, arg, scope)):
            line, text, _ = syncs[2][param]
            return arg, f"`{text}` on line {line}{where}"
    return None


# Another module's class is modelled only when its file spells one of these (a ``__call__`` that only prints
# what it is given is not looked for there): most classes with a ``__call__`` in a JAX project are models,
# whose files spell none of them, and a full model of each cost 14% more time on fresh sets U and T.
_CONVERSION_SPELLINGS = (b".item(", b"float(", b"int(", b".tolist(", b"np.asarray(", b"np.array(", b"device_get(")


def _bind_call(call: ast.Call, params: tuple) -> list:
    """``(parameter, argument)`` of a call of ``__call__`` whose parameters after ``self`` are ``params``."""
    out = [(p, a) for p, a in zip(params, call.args) if not isinstance(a, ast.Starred)]
    return out + [(kw.arg, kw.value) for kw in call.keywords if kw.arg in params]


def _class_call_syncs(m, name: str) -> Optional[tuple]:
    """For the project resolver: :func:`_call_syncs` of the top-level class ``name`` of this module."""
    node = next((s for s in m.tree.body if isinstance(s, ast.ClassDef) and s.name == name), None)
    cls = m.classes.get(id(node)) if node is not None else None
    return _call_syncs(m, cls) if cls is not None else None


def _call_syncs(m, cls) -> Optional[tuple]:
    """``(returns a value, its parameters after self, {parameter: (line, text)} of those it copies to the host)``
    of the class's plain ``__call__``; None when it has none or it syncs none."""
    f = cls.methods.get("__call__")
    if f is None or f.node.decorator_list or f.traced or f.params[:1] != ["self"]:
        return None
    syncs = {}
    for param in f.params[1:]:
        inner = _param_sync(m, f, param)
        if inner is not None:
            syncs[param] = (inner.lineno, unparse(inner, 30), (id(f), param) in _computed_syncs(m))
    return (bool(f.returns), tuple(f.params[1:]), syncs) if syncs else None


def _bind_params(m, call: ast.Call, f: FunctionInfo, shift: int = 0) -> list:
    """``(parameter, argument)`` pairs of a call of ``f`` (``shift``: 1 for a method called on an
    instance, whose first parameter is ``self``)."""
    out = []
    vararg = f.vararg
    for i, a in enumerate(call.args):
        if isinstance(a, ast.Starred):
            break
        if i + shift < len(f.params):
            out.append((f.params[i + shift], a))
        elif vararg is not None:  # ``def add(self, *args)``: every further positional argument
            out.append((vararg, a))
    names = set(f.params) | set(f.kwonly)
    out += [(kw.arg, kw.value) for kw in call.keywords if kw.arg in names]
    return out


def _param_sync(m, f: FunctionInfo, param: str, blocks: bool = False) -> Optional[ast.AST]:
    """The first host fetch or format (``blocks``: ``block_until_ready``) in ``f``'s body of a value
    taken from ``param`` (see :func:`helper_sync`), memoized per function and parameter."""
    memo = work_memo(m)
    key = ("param_sync", id(f), param, blocks)
    if key in memo:
        return memo[key]
    memo[key] = None
    derived, computed = {param}, set()  # computed: names a JAX function computed from the parameter
    vararg = f.vararg
    for _ in range(3):  # names taken from the parameter, and names taken from those
        for sub in walk(f.node):
            if not m.work.spend():
                return None
            how = _derived(m, sub.value, derived, computed) if isinstance(sub, ast.Assign) else None
            if how is not None:
                for t in sub.targets:
                    if isinstance(t, ast.Name):
                        (computed if how == _COMPUTED else derived).add(t.id)
            elif isinstance(sub, (ast.For, ast.comprehension)):
                it, target = sub.iter, sub.target
                # ``def add(self, *args)``: the tuple holds exactly the values passed, so its elements
                # are the arguments (``for b in args``, ``for a, b in zip(self.data, args)``); the
                # elements of another parameter may be a dict's keys
                if param == vararg and isinstance(it, ast.Name) and it.id == param and isinstance(target, ast.Name):
                    derived.add(target.id)
                elif (param == vararg and isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                        and it.func.id == "zip" and isinstance(target, ast.Tuple) and len(target.elts) == len(it.args)):
                    for arg, elt in zip(it.args, target.elts):
                        if isinstance(elt, ast.Name) and isinstance(arg, ast.Name) and arg.id == param:
                            derived.add(elt.id)
                elif (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                        and it.func.attr in ("items", "values") and _taken_from(it.func.value, derived)):
                    if it.func.attr == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                        target = target.elts[1]
                    if isinstance(target, ast.Name):
                        derived.add(target.id)
    others = (set(f.params) | set(f.kwonly)) - {param}
    found = None
    for c in f.calls:
        ctx = m.context(c)
        if ctx is None or ctx.raising or any(mentions(test, others) for test, _ in ctx.guards):
            continue
        values = _blocked_values(m, c) if blocks else _synced_values(m, c)
        hows = {_derived(m, v, derived, computed) for v in values} - {None}
        if hows:
            found = c
            if hows == {_COMPUTED}:  # only through a JAX computation: it waits whatever the argument is
                _computed_syncs(m).add((id(f), param))
            break
    if found is None and not blocks:
        for node in m.joined_strs:
            ctx = m.context(node)
            if ctx is None or ctx.raising or ctx.scope is not f.scope or any(
                    mentions(t, others) for t, _ in ctx.guards):
                continue
            if any(isinstance(v, ast.FormattedValue) and _taken_from(v.value, derived) for v in node.values):
                found = node
                break
    memo[key] = found
    return found


def _blocked_values(m, c: ast.Call) -> list:
    """What a call in a helper blocks on: ``jax.block_until_ready(x)``, ``x.block_until_ready()``."""
    func = c.func
    if last_name(func) != "block_until_ready":
        return []
    qn = m.resolve(func, m.scope_at(c))
    if qn == N.BLOCK_UNTIL_READY:
        return c.args[:1]
    return [func.value] if qn is None and isinstance(func, ast.Attribute) else []


def _synced_values(m, c: ast.Call) -> list:
    """What a call in a helper would copy to the host or format, were it a JAX value."""
    func = c.func
    qn = m.resolve(func, m.scope_at(c))
    args = [a for a in c.args if not isinstance(a, ast.Starred)]
    if qn in N.HOST_BUILTINS or qn in N.NUMPY_FETCH or qn in N.HOST_GATHERS or qn == N.DEVICE_GET:
        return args[:1]
    if isinstance(func, ast.Attribute) and func.attr in ("item", "tolist") and qn is None:
        return [func.value]
    if fetches._prints(m, c):
        return [v for v in [*args, *(kw.value for kw in c.keywords
                                     if kw.arg not in ("sep", "end", "file", "flush"))]
                if not isinstance(v, ast.JoinedStr)]
    return []


def _derived(m, expr: ast.AST, names: set, computed: set) -> Optional[str]:
    """:data:`_TAKEN` when ``expr`` is taken from ``names`` (:func:`_taken_from`); :data:`_COMPUTED` when it is
    a JAX computation of such a value or read from a name in ``computed`` (``jnp.linalg.norm(v)``, ``jnp.abs(a -
    v)``): the device computes it after everything dispatched before, so a host read of it waits for all of that,
    whether ``v`` was a JAX value or not; None otherwise."""
    if _taken_from(expr, names):
        return _TAKEN
    if _taken_from(expr, computed):
        return _COMPUTED
    if isinstance(expr, ast.BinOp):
        hows = {_derived(m, expr.left, names, computed), _derived(m, expr.right, names, computed)} - {None}
        return None if not hows else _COMPUTED if _COMPUTED in hows else _TAKEN
    if isinstance(expr, ast.UnaryOp) and not isinstance(expr.op, ast.Not):
        return _derived(m, expr.operand, names, computed)
    if isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in _REDUCING_METHODS:
            return _derived(m, expr.func.value, names, computed)
        qn = m.resolve(expr.func, m.scope_at(expr)) or ""
        if qn.startswith(_JAX_FUNCTIONS) and qn not in _NOT_COMPUTATIONS and any(
                _derived(m, a, names, computed) for a in expr.args):
            return _COMPUTED
    return None


_TAKEN, _COMPUTED = "taken", "computed"
# Uploads, not computations: the copy is not queued behind the device's work.
_NOT_COMPUTATIONS = frozenset({"jax.numpy.array", "jax.numpy.asarray"})


def _computed_syncs(m) -> set:
    """``(id of a helper, parameter)`` whose only sync of the parameter is of a JAX computation of it."""
    memo = work_memo(m)
    return memo.setdefault(("computed_syncs",), set())


_JAX_FUNCTIONS = ("jax.numpy.", "jax.lax.", "jax.nn.")


def _taken_from(expr: ast.AST, names: set) -> bool:
    """``v``, ``metrics["loss"]``, ``aux.loss``, ``v.mean()``, ``-v``, ``v * 100``: the expression
    is one of ``names`` or read from one (not a metadata attribute, not through another call)."""
    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, ast.Attribute):
        return expr.attr not in N.METADATA_ATTRS and _taken_from(expr.value, names)
    if isinstance(expr, ast.Subscript):
        return _taken_from(expr.value, names)
    if isinstance(expr, ast.UnaryOp) and not isinstance(expr.op, ast.Not):
        return _taken_from(expr.operand, names)
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, ast.Mod) and isinstance(expr.left, (ast.Constant, ast.JoinedStr)):
            return _taken_from(expr.right, names)
        return _taken_from(expr.left, names) or _taken_from(expr.right, names)
    if isinstance(expr, (ast.Tuple, ast.List)):
        return any(_taken_from(e, names) for e in expr.elts)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        return expr.func.attr in _REDUCING_METHODS and _taken_from(expr.func.value, names)
    return False


# Array methods whose result is still the array's data (``v.mean()``): a fetch of it fetches ``v``.
_REDUCING_METHODS = frozenset({"mean", "sum", "max", "min", "squeeze", "reshape", "astype", "ravel", "flatten"})
