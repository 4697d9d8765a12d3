"""Value kinds: which expressions hold JAX values, certain arrays, masks, int constants.

Functions of the model (``m``), not a mixin; modules that use ``values`` as a variable name
import this one as ``V``.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, containers, forwards, gradaux, libraryobjects
from ..python import limits as L
from .hostvalues import host_cpu_copy
from ..python.records import _DICT_VIEWS, Binding, FunctionInfo, Scope, _element
from ..python.syntax import _contains, _pos, call_arg, child_nodes, guarded_by_its_truth
from .apisyntax import at_update

# jnp functions that return a boolean array.
_MASK_FUNCS = frozenset("jax.numpy." + n for n in (
    "isnan", "isinf", "isfinite", "isneginf", "isposinf", "isreal", "iscomplex", "signbit", "isclose",
    "logical_and", "logical_or", "logical_not", "logical_xor", "equal", "not_equal", "greater",
    "greater_equal", "less", "less_equal", "isin", "in1d",
))

# Collectives that fold a non-tracer operand into a concrete value at trace time (jax 0.10.2,
# ``jax._src.lax.parallel._psum``: "handle the constant case specially").
_CONSTANT_FOLDING_COLLECTIVES = frozenset({"jax.lax.psum"})

_BOOL_DTYPES = frozenset({"builtins.bool", "jax.numpy.bool_", "jax.numpy.bool", "numpy.bool_", "numpy.bool"})


def is_jax(m, expr: Optional[ast.AST], scope: Optional[Scope] = None) -> bool:
    """Whether the expression certainly holds a JAX array (or a pytree of them).
    Inside traced code such a value is a tracer."""
    if expr is None:
        return False
    key = id(expr)
    memo = m.facts.kinds
    if key in memo:
        return memo[key]
    memo[key] = False  # cycle guard
    if scope is None:
        scope = m.scope_at(expr)
    result = _kind(m, expr, scope)
    memo[key] = result
    return result


def _kind(m, e: ast.AST, scope: Scope) -> bool:
    t = type(e)
    if t is ast.Name:
        return _name_kind(m, e.id, scope, _pos(e))
    if t is ast.Call:
        return _call_kind(m, e, scope)
    if t is ast.Attribute:
        if e.attr in N.METADATA_ATTRS:
            return False
        if e.attr in N.ARRAY_METHODS and m.arrays.certain(e.value, scope):
            return False  # ``x.sum`` without a call: a bound method (calls go through _call_kind)
        field = e.value if e.attr == "value" else e  # ``optimizer.step.value``, ``optimizer.step``
        if isinstance(field, ast.Attribute) and field.attr in N.DEVICE_FIELD_NAMES and \
                field.attr in N.LIBRARY_DEVICE_FIELDS.get(libraryobjects.library_maker(m, field.value, scope), ()):
            return True
        return is_jax(m, e.value, scope)
    if t is ast.Subscript:
        if type(e.value) is ast.Name and containers.stored_elements_unproven(m, e.value, scope, is_jax):
            return False  # ``n[l - 1]`` of a list whose elements are overwritten with Python ints
        return is_jax(m, e.value, scope)
    if t is ast.BinOp:
        if isinstance(e.op, ast.Mod) and isinstance(e.left, (ast.Constant, ast.JoinedStr)):
            return False  # "%s" % x is a string
        return is_jax(m, e.left, scope) or is_jax(m, e.right, scope)
    if t is ast.UnaryOp:
        return not isinstance(e.op, ast.Not) and is_jax(m, e.operand, scope)
    if t is ast.Compare:
        if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in e.ops):
            return False
        if _none_comparison(e):
            return False
        return is_jax(m, e.left, scope) or any(is_jax(m, c, scope) for c in e.comparators)
    if t is ast.IfExp:
        return is_jax(m, e.body, scope) or is_jax(m, e.orelse, scope)
    if t is ast.NamedExpr:
        return is_jax(m, e.value, scope)
    if t in (ast.Tuple, ast.List):
        return any(is_jax(m, x.value if isinstance(x, ast.Starred) else x, scope) for x in e.elts)
    if t is ast.Starred:
        return is_jax(m, e.value, scope)
    return False


def _call_kind(m, call: ast.Call, scope: Scope) -> bool:
    func = call.func
    qn = m.resolve(func, scope)
    if qn is not None:
        if qn in _CONSTANT_FOLDING_COLLECTIVES:
            # psum of a value that is not a tracer is folded at trace time into a concrete
            # number (``jax.lax.psum(1, "i")`` is the axis size): a JAX value only if its operand is
            operand = call_arg(call, 0, "x")
            return operand is not None and is_jax(m, operand, scope)
        if qn == N.DEVICE_PUT and host_cpu_copy(m, call, scope):
            return False  # a copy into host memory: reading it waits for no accelerator
        if N.produces_array(qn):
            return True
        if qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS or qn in N.HOST_BUILTINS or qn in N.FORMAT_BUILTINS:
            return False
        if qn in N.NUMPY_FORWARDING:
            # ``np.sum(x)`` calls ``x.sum()``: a JAX array in, a JAX array out (a pytree of
            # them would be converted by NumPy instead)
            first = call_arg(call, 0, "a")
            return first is not None and m.arrays.certain(first, scope)
        if qn.startswith(("builtins.", "numpy.", "math.")):
            return False
    if isinstance(func, ast.Attribute):
        # x.at[i].set(v)
        if at_update(func) is not None:
            return True
        if qn is None and is_jax(m, func.value, scope):
            return func.attr not in N.HOST_METHODS and func.attr not in N.NON_ARRAY_METHODS
    if _makes_jaxpr(m, func, scope):
        return False  # ``jax.make_jaxpr(f)(x)``: a ClosedJaxpr
    info = callables.callable_info(m, func, scope)
    if info is not None:
        return True
    if _local_result(m, call, scope, None):
        return True
    if callables.imported_result(m, func, scope):
        return True
    if isinstance(func, ast.Name) and _param_result(m, call, scope):
        return True
    if forwards.model_forward(m, call, scope) is not None:
        return True  # ``model.apply(variables, x)`` of a flax module, ``net.apply(params, rng, x)`` of haiku
    return _instance_result(m, call, scope)


def _makes_jaxpr(m, func: ast.AST, scope: Scope) -> bool:
    """``func`` is ``jax.make_jaxpr(f)``, or a name bound to it: calling it returns a program."""
    if isinstance(func, ast.Name):
        ev = m.binding(func.id, scope, _pos(func))
        if ev is None or not ev.plain_assign:
            return False
        func, scope = ev.value, ev.scope
    return isinstance(func, ast.Call) and m.resolve(func.func, scope) in N.JAXPR_MAKERS


def _param_result(m, call: ast.Call, scope: Scope) -> bool:
    """``loss = loss_fn(params, batch)`` with ``loss_fn`` a parameter: a JAX value when every call
    of the function in this module passes a function that returns one (a function of the module
    returning a JAX value for any input, or a ``jax.numpy``-style library function). Compiled
    callables are :func:`callables.callable_info`'s. As for the module's own helpers, one that
    returns an array only because it was traced with tracers must be given a JAX value here."""
    func = call.func
    ev = m.binding(func.id, scope, _pos(func))
    if ev is None or ev.kind != "param":
        return False
    args = callables.param_arguments(m, ev)
    if not args:
        return False
    for arg, s in args:
        qn = m.resolve(arg, s)
        if qn is not None and N.produces_array(qn):
            continue
        local = callables.local_functions(m, arg, s)
        if not local or not all(returns_jax(m, f) for f in local):
            return False
        if any(f.tracer_params for f in local) and not (
                any(is_jax(m, a, scope) for a in call.args) or any(is_jax(m, kw.value, scope) for kw in call.keywords)):
            return False
    return True

# -- instances of the module's own classes


def _instance_result(m, call: ast.Call, scope: Scope) -> bool:
    """``self.trainer.train_step(batch)``, ``trainer.evaluate(x)``: a method of an instance of
    this module's own class (:meth:`instance_class`) that returns a JAX value, or an attribute
    the class sets to a compiled callable (``self.p_step = jax.pmap(step)``)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or (isinstance(func.value, ast.Name) and func.value.id in ("self", "cls")):
        return False
    cls = callables.instance_class(m, func.value, scope)
    if cls is None:
        return False
    for value in cls.self_attrs.get(func.attr, ()):
        if callables.callable_info(m, value, m.scope_at(value)) is not None:
            return True
    meth = cls.methods.get(func.attr)
    if meth is None:
        return False
    if meth.jit_entry is not None and meth.jit_entry.decorator:
        return True
    return not meth.tracer_params and returns_jax(m, meth)


def _local_result(m, call: ast.Call, scope: Scope, index: Optional[int]) -> bool:
    """Whether a call of this module's own (not compiled) function returns a JAX value; with
    ``index``, element ``index`` of the tuple it returns (``arr, name = helper(x)``)."""
    local = callables.local_functions(m, call.func, scope)
    args_jax = None
    for f in local:
        if getattr(f, "jit_entry", None) is not None and f.jit_entry.decorator:
            return True  # ``self._inner.update(...)`` of a ``@jax.jit`` def: a compiled call returns device values
        if index is None:
            if not returns_jax(m, f):
                continue
        elif not any(is_jax(m, _element(r, index), f.scope) for r in f.returns):
            continue
        # A helper whose result is an array only because its parameters held tracers where it
        # was traced returns whatever it is given here: NumPy in, NumPy out.
        if not f.tracer_params:
            return True
        if args_jax is None:
            args_jax = any(is_jax(m, a, scope) for a in call.args) or any(
                is_jax(m, kw.value, scope) for kw in call.keywords)
        if args_jax:
            return True
    if index is None:
        for f in local:
            i = _passed_through(m, f)
            arg = call.args[i] if i is not None and i < len(call.args) else None
            if arg is not None and not isinstance(arg, ast.Starred) and is_jax(m, arg, scope):
                return True
    return False


def _passed_through(m, f) -> Optional[int]:
    """The position of the parameter a function of the module returns picked apart (``lambda tree:
    jax.tree.map(lambda x: x[0], tree)``, a hand-written ``unreplicate``; ``lambda x: x[0]``): given a
    JAX value there, the result is one. None for any other function, or a method."""
    if f.is_method or len(f.returns) != 1:
        return None
    expr = f.returns[0]
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Call) and len(expr.args) == 2 and not expr.keywords \
            and m.resolve(expr.func, f.scope) in N.TREE_MAPS:
        leaf = expr.args[0]
        if not (isinstance(leaf, ast.Lambda) and len(leaf.args.args) == 1 and isinstance(leaf.body, ast.Subscript)
                and _root_name(leaf.body) == leaf.args.args[0].arg):
            return None
        expr = expr.args[1]
    if isinstance(expr, ast.Name) and expr.id in f.params:
        return f.params.index(expr.id)
    return None


def _root_name(expr: ast.AST) -> Optional[str]:
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _name_kind(m, name: str, scope: Scope, pos: tuple) -> bool:
    found = m._lookup(name, scope, pos)
    if found is None:
        return False
    ev, later = found
    if _event_kind(m, ev):
        return True
    # A binding later in a loop that also holds this use reaches it on the next iteration:
    # ``while delta > tol: ...; delta = jnp.max(...)`` (not when the name is rebound in the
    # loop before the use, e.g. as the for target).
    for cand in later:
        for lp in cand.loops:
            if _contains(lp.node, pos) and ev.pos < _pos(lp.node) and _event_kind(m, cand) \
                    and not guarded_by_its_truth(lp.node, name, cand.pos):
                return True  # (one made under ``if name:`` exists only if the value before the loop was given)
    return False


def _event_kind(m, ev: Binding) -> bool:
    key = id(ev)
    memo = m.facts.events
    if key in memo:
        return memo[key]
    memo[key] = False  # cycle guard: ``x += 1`` seen through its own binding
    result = _event_kind_uncached(m, ev)
    memo[key] = result
    return result


def _event_kind_uncached(m, ev: Binding) -> bool:
    kind = ev.kind
    if kind == "param":
        f = ev.scope.func
        return f is not None and (ev.value in f.tracer_params or mapped_leaf(m, ev))
    if kind == "assign":
        value = ev.value
        path = list(ev.path or ())
        while path:
            if isinstance(value, ast.Call) and value.args and m.resolve(value.func, ev.scope) in N.PYTREE_MIRRORS:
                value = value.args[0]  # ``a, b = lax.optimization_barrier((a, b))``: each as it was
            if not (isinstance(value, (ast.Tuple, ast.List)) and path[0] < len(value.elts) and not any(
                    isinstance(x, ast.Starred) for x in value.elts)):
                break
            value = value.elts[path.pop(0)]
        if path and isinstance(value, ast.Call) and callables.callable_info(m, value.func, ev.scope) is None \
                and callables.local_functions(m, value.func, ev.scope):
            # ``arr, name = helper(x)``: each element has its own kind
            return _local_result(m, value, ev.scope, path[0])
        aux = gradaux.aux_part_kind(m, value, path, ev.scope, is_jax) if path else None
        return aux if aux is not None else is_jax(m, value, ev.scope)
    if kind == "aug":
        node = ev.node
        if is_jax(m, node.value, ev.scope):
            return True
        return _name_kind(m, node.target.id, ev.scope, _pos(node))
    if kind == "for":
        it = ev.value
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in _DICT_VIEWS:
            # for k, v in tree.items(): keys are Python values
            if it.func.attr == "keys" or (it.func.attr == "items" and ev.path and ev.path[0] == 0):
                return False
            return is_jax(m, it.func.value, ev.scope)
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate":
            if not it.args or (ev.path and ev.path[0] == 0):
                return False
            return is_jax(m, it.args[0], ev.scope)
        if isinstance(it, ast.Name) and _keys_of(m, ev, it):
            return False  # ``for k in tree: ... tree[k]``: iterating a dict of arrays gives its keys
        return is_jax(m, it, ev.scope)
    return False


def _keys_of(m, ev: Binding, it: ast.Name) -> bool:
    """Whether the loop binding ``ev`` (a ``for`` over the name ``it``) indexes ``it`` with its own
    target in the body (``for name in params: params[name]``): the iterable is a mapping and the
    target one of its keys, not an element of an array."""
    target = ev.node
    if not isinstance(target, ast.Name):
        return False
    loop = next((lp for lp in m.loops if getattr(lp.node, "target", None) is target), None)
    if loop is None:
        return False
    for stmt in loop.node.body:
        for n in ast.walk(stmt):
            if (isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == it.id
                    and isinstance(n.slice, ast.Name) and n.slice.id == target.id):
                return True
    return False

# -- functions mapped over the leaves of trees


def tree_map_sites(m, f: FunctionInfo) -> list:
    """The tree-map calls (``jax.tree.map(f, tree, ...)``, ``jax.tree_util.tree_map``) that
    call ``f`` (a lambda or def of this module, not traced) on the leaves of their trees."""
    table = m.facts.tree_map_sites
    if table is None:
        table = m.facts.tree_map_sites = {}
        for call in m.calls_named({"map", "tree_map"}):
            if not call.args or m.resolve(call.func, m.scope_at(call)) not in N.TREE_MAPS:
                continue
            for g in callables.local_functions(m, call.args[0], m.scope_at(call)):
                table.setdefault(id(g), []).append(call)
    return table.get(id(f), [])


def mapped_leaf(m, ev: Binding) -> bool:
    """A parameter of a function mapped over trees of JAX values: positional parameter ``i``
    of ``f`` in ``jax.tree.map(f, t0, t1, ...)`` receives the leaves of ``t<i>``, which are
    JAX arrays when the tree is a JAX value at every such call (and ``f`` is not traced)."""
    f = ev.scope.func
    if f is None or f.traced or ev.value not in f.params:
        return False
    sites = tree_map_sites(m, f)
    if not sites:
        return False
    i = f.params.index(ev.value)
    if f.is_method:
        return False
    for call in sites:
        trees = call.args[1:]
        if i >= len(trees) or isinstance(trees[i], ast.Starred) or any(
                isinstance(t, ast.Starred) for t in trees[:i]):
            return False
        if not _all_jax(m, trees[i], m.scope_at(call)):
            return False
    return True


def _all_jax(m, tree: ast.AST, scope: Scope) -> bool:
    """A JAX value, or a dict/tuple/list display whose every part is one (every leaf is JAX)."""
    if isinstance(tree, ast.Dict):
        return bool(tree.values) and all(k is not None and _all_jax(m, v, scope)
                                         for k, v in zip(tree.keys, tree.values))
    if isinstance(tree, (ast.Tuple, ast.List)):
        return bool(tree.elts) and all(not isinstance(e, ast.Starred) and _all_jax(m, e, scope)
                                       for e in tree.elts)
    return is_jax(m, tree, scope)


def _none_comparison(e: ast.Compare) -> bool:
    """``x != None``, ``x == None``: a JAX array defers to None's comparison, so the result is a
    Python bool (checked on jax 0.10.2: ``jnp.ones(3) != None`` is ``True``), no device value."""
    return any(isinstance(x, ast.Constant) and x.value is None for x in (e.left, *e.comparators))


def device_or_copy(m, expr: ast.AST, scope: Scope) -> bool:
    """Whether evaluating ``expr`` gives a JAX value or the host copy of one made right there:
    :func:`is_jax`, or ``np.sum(x)`` of a JAX value ``x`` (``x.sum()`` when ``x`` is one array,
    NumPy's copy when it is a pytree: either way a value read on the host syncs), and
    arithmetic or comparisons on one of these."""
    if is_jax(m, expr, scope):
        return True
    if isinstance(expr, ast.Call):
        if m.resolve(expr.func, scope) in N.NUMPY_FORWARDING:
            first = call_arg(expr, 0, "a")
            return first is not None and is_jax(m, first, scope)
        return False
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, ast.Mod) and isinstance(expr.left, (ast.Constant, ast.JoinedStr)):
            return False
        return device_or_copy(m, expr.left, scope) or device_or_copy(m, expr.right, scope)
    if isinstance(expr, ast.UnaryOp) and not isinstance(expr.op, ast.Not):
        return device_or_copy(m, expr.operand, scope)
    if isinstance(expr, ast.Compare):
        if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in expr.ops) or _none_comparison(expr):
            return False
        return any(device_or_copy(m, p, scope) for p in [expr.left, *expr.comparators])
    return False


def clear_value_memos(m) -> None:
    m.facts.kinds.clear()
    m.facts.returns.clear()
    m.facts.events.clear()
    m.facts.host_fetch = None  # fetches.host_fetch's answers rest on these


def formats_jax(m, value: ast.AST, scope: Scope, deep: bool = False) -> bool:
    """Whether formatting ``value`` as text (a print/log argument, an f-string, ``%``- or
    ``str.format``-formatting) formats a JAX value. ``deep`` also looks inside nested f-strings
    and through ``str()``/``repr()``/``format()``/``"...".format()`` calls."""
    if isinstance(value, ast.Starred):
        value = value.value
    if isinstance(value, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) and (
            formats_jax(m, v.value, scope, deep) if deep else is_jax(m, v.value, scope))
            for v in value.values)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mod) and isinstance(value.left, ast.Constant):
        return formats_jax(m, value.right, scope, deep)
    if isinstance(value, (ast.Tuple, ast.List)):
        return any(formats_jax(m, v, scope, deep) for v in value.elts)
    if isinstance(value, ast.Dict):
        return any(v is not None and formats_jax(m, v, scope, deep) for v in value.values)
    if deep and isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr == "format" and isinstance(func.value, ast.Constant):
            return any(formats_jax(m, a, scope, deep) for a in list(value.args) + [k.value for k in value.keywords])
        if m.resolve(func, scope) in ("builtins.str", "builtins.repr", "builtins.format"):
            return bool(value.args) and formats_jax(m, value.args[0], scope, deep)
    return is_jax(m, value, scope)


def returns_jax(m, f: FunctionInfo) -> bool:
    key = id(f)
    if key in m.facts.returns:
        return bool(m.facts.returns[key])
    m.facts.returns[key] = False
    result = any(is_jax(m, r, f.scope) for r in f.returns)
    m.facts.returns[key] = result
    return result

def is_mask(m, e: ast.AST, scope: Scope, depth: int = 0) -> bool:
    """Whether ``e`` is certainly a boolean JAX array: a comparison involving a JAX value, ``~m``,
    ``m1 & m2``, ``jnp.isnan(...)``/``logical_*``, ``.astype(bool)``, or a name bound to one."""
    if depth > L.MASK_CHAIN or not m.work.spend():
        return False
    if isinstance(e, ast.Compare):
        if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in e.ops):
            return False
        return is_jax(m, e, scope)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Invert):
        return is_mask(m, e.operand, scope, depth + 1)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return is_mask(m, e.left, scope, depth + 1) or is_mask(m, e.right, scope, depth + 1)
    if isinstance(e, ast.Call):
        qn = m.resolve(e.func, scope)
        if qn in _MASK_FUNCS:
            return True
        f = e.func
        if (qn is None and isinstance(f, ast.Attribute) and f.attr == "astype" and e.args
                and is_jax(m, f.value, scope) and m.resolve(e.args[0], scope) in _BOOL_DTYPES):
            return True
        return False
    if isinstance(e, ast.Name):
        ev = m.binding(e.id, scope, (e.lineno, e.col_offset))
        if ev is not None and ev.plain_assign:
            return is_mask(m, ev.value, ev.scope, depth + 1)
    return False


def const_int(m, e: ast.AST, scope: Scope, depth: int = 0, *, fold: bool = True,
              local: bool = True) -> Optional[int]:
    """An int literal, a foldable expression of them, or a name bound once to one (a module
    constant or a local literal). ``fold=False``: a literal or a negated one only, no
    arithmetic; ``local=False``: names count only when bound at module level."""
    if e is None or depth > L.CONST_CHAIN or not m.work.spend():
        return None
    if isinstance(e, ast.Constant):
        return e.value if isinstance(e.value, int) and not isinstance(e.value, bool) else None
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = const_int(m, e.operand, scope, depth + 1, fold=fold, local=local)
        return -v if v is not None else None
    if fold and isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Pow)):
        a = const_int(m, e.left, scope, depth + 1)
        b = const_int(m, e.right, scope, depth + 1)
        if a is None or b is None:
            return None
        try:
            if isinstance(e.op, ast.Pow):
                return a ** b if 0 <= b <= 64 else None
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}.get(type(e.op)) if not isinstance(
                e.op, ast.FloorDiv) else (a // b if b else None)
        except (OverflowError, ZeroDivisionError):
            return None
    if isinstance(e, ast.Name):
        ev = m.binding(e.id, scope, (e.lineno, e.col_offset))
        if ev is None or not ev.plain_assign or (not local and ev.scope is not m.module_scope):
            return None
        if len(ev.scope.events.get(e.id, ())) != 1:
            return None  # rebound somewhere: not a constant
        if not fold and not isinstance(ev.value, (ast.Constant, ast.UnaryOp)):
            return None
        return const_int(m, ev.value, ev.scope, depth + 1, fold=fold, local=local)
    return None


def truthy_tracer(m, e: ast.AST, scope: Scope) -> bool:
    if isinstance(e, (ast.Tuple, ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return False  # a container's truth is its length
    if isinstance(e, ast.Name):
        ev = m.binding(e.id, scope, (e.lineno, e.col_offset))
        if ev is not None and ev.kind == "param":
            args = ev.node.args
            if (args.vararg is not None and args.vararg.arg == e.id) or (
                    args.kwarg is not None and args.kwarg.arg == e.id):
                return False  # *args / **kwargs are a tuple / dict
    return is_jax(m, e, scope)


def holds_jax(m, expr: ast.AST, scope) -> bool:
    if isinstance(expr, ast.Starred):
        expr = expr.value
    if isinstance(expr, ast.Dict):
        return any(v is not None and holds_jax(m, v, scope) for v in expr.values)
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return any(holds_jax(m, e, scope) for e in expr.elts)
    return is_jax(m, expr, scope)


def _returned(node: ast.FunctionDef) -> Optional[tuple]:
    """``(returned expressions, names bound in the function)`` of a def, read from its syntax
    (nested defs, classes and lambdas are not its code, but their names are bound); None for a
    generator or a bare ``return``."""
    a = node.args
    local = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    local.update(p.arg for p in (a.vararg, a.kwarg) if p is not None)
    returns: list = []
    stack: list = list(node.body)
    while stack:
        n = stack.pop()
        t = type(n)
        if t in _SCOPES:
            if t is not ast.Lambda:
                local.add(n.name)
            continue
        if t is ast.Return:
            if n.value is None:
                return None
            returns.append(n.value)
        elif t in (ast.Yield, ast.YieldFrom):
            return None
        elif t is ast.Name:
            if not isinstance(n.ctx, ast.Load):
                local.add(n.id)
            continue
        elif t in (ast.Import, ast.ImportFrom):
            local.update((al.asname or al.name).split(".")[0] for al in n.names)
        elif t in (ast.Global, ast.Nonlocal):
            local.update(n.names)
        elif t is ast.ExceptHandler and n.name:
            local.add(n.name)
        stack.extend(child_nodes(n))
    return returns, local


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
