"""Host fetches: which calls copy a JAX value to the host (``float(x)``, ``x.item()``,
``np.asarray(x)``, ``jax.device_get(x)``, a tree map of these), which tests read a JAX value's
truth on the host, and which calls format one as text (print, f-strings, logging, including a
logger bound to ``logging.getLogger()``).

The value-level layer under jaxlint/model/transfers.py (which of these run every step of a loop)
and jaxlint/model/hostneeds.py (which the host needs anyway). Functions of the model (``m``), not a
mixin; they ask only the model's value and name queries, so every fact module can import them.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, hostarrays, libraryobjects, returnkinds
from ..python import limits as L
from . import values as V
from ..python.syntax import _pos, last_name, unparse

# Every spelling host_fetch or formats_jax can accept ends in one of these (aliases such as
# ``from numpy import asarray as A`` are rarer than the cost of resolving every call is high).
FETCH_OR_FORMAT_NAMES = frozenset(
    {q.rsplit(".", 1)[1] for q in N.HOST_BUILTINS | N.NUMPY_FETCH | N.FORMAT_BUILTINS | N.HOST_GATHERS | {N.DEVICE_GET}}
    | {"item", "tolist", "format"} | N.LOG_METHODS
    | {q.rsplit(".", 1)[1] for q in N.HOST_LOGGER_FUNCTIONS} | frozenset().union(*N.HOST_LOGGER_METHODS.values()))


def may_sync(m, call: ast.Call) -> bool:
    """A cheap pre-filter for :func:`host_fetch` and :func:`formats_jax_call`: the callee is
    spelled with a name they can accept, a name bound to a NumPy import, or a function of
    this module (a helper that converts its argument, :func:`helper_sync`). Asked once per call
    (JAX201 and the element-wise reads of JAX702 both ask)."""
    memo = m.facts.may_sync
    if memo is None:
        memo = m.facts.may_sync = {}
    key = id(call)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _may_sync(m, call)
    return found


def _may_sync(m, call: ast.Call) -> bool:
    func = call.func
    name = last_name(func)
    if name in FETCH_OR_FORMAT_NAMES or name in ("map", "tree_map"):
        return True
    if isinstance(func, ast.Attribute) and func.attr in _method_names(m):
        return True  # a method of a class of this module, which may convert what it is given
    root = func
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name):
        if root.id in _numpy_names(m):
            return True
        if isinstance(func, ast.Name):
            scope = m.scope_at(call)
            return bool(callables.local_functions(m, func, scope)) or _object_made_by_class(m, func, scope)
    return False


def _object_made_by_class(m, func: ast.Name, scope) -> bool:
    """``converged`` bound once to ``Convergence(...)``, a class of this module with a ``__call__`` or a name
    imported from a module (its ``__call__`` may convert what it is given: ``helpersyncs.helper_sync``)."""
    ev = m.binding(func.id, scope, _pos(func))
    if ev is None or not ev.plain_assign or not isinstance(ev.value, ast.Call) or not isinstance(ev.value.func, ast.Name):
        return False
    made = m.binding(ev.value.func.id, ev.scope, _pos(ev.value.func))
    if made is not None and isinstance(made.node, ast.ClassDef):
        return any(isinstance(s, ast.FunctionDef) and s.name == "__call__" for s in made.node.body)
    if made is not None:
        return False
    found = m._imported(ev.value.func.id, ev.scope)  # a class imported from another module of the project
    return found is not None and found[1] is not None



def _method_names(m) -> frozenset:
    """Names of the methods of this module's classes whose own body calls something spelled like a
    host fetch or a format (``np.asarray``, ``float``, ``print``, ``.item()``): the only methods a
    call of which may copy its argument to the host (``helpersyncs.helper_sync``)."""
    names = m.facts.method_names
    if names is None:
        np_names = _numpy_names(m)
        names = m.facts.method_names = frozenset(
            n for c in m.classes.values() for n, f in c.methods.items()
            if any(last_name(k.func) in FETCH_OR_FORMAT_NAMES or _root_name(k.func) in np_names for k in f.calls))
    return names


def _root_name(func: ast.AST) -> Optional[str]:
    while isinstance(func, ast.Attribute):
        func = func.value
    return func.id if isinstance(func, ast.Name) else None


def _numpy_names(m) -> set:
    names = m.facts.np_names
    if names is None:
        names = m.facts.np_names = set()
        for scope in [m.module_scope] + [f.scope for f in m.functions]:
            for local, qn in scope.imports.items():
                if qn and (qn == "numpy" or qn.startswith("numpy.")):
                    names.add(local)
    return names



def host_reads(m, calls, names: set) -> list:
    """The calls among ``calls`` that convert or format one of ``names`` on the host (``str(y)``,
    ``float(y)``, ``print(y)``): fetches, where the names hold what a call that dispatched JAX work
    returned (the timing facts ask; fresh AA's first look: ``str(new_value)`` after ``new_value =
    self.inv_fn(x)`` waited for it, and the measurement was reported unwaited)."""
    if not names:
        return []
    return [c for c in calls if any(isinstance(a, ast.Name) and a.id in names for a in c.args)
            and m.resolve(c.func, m.scope_at(c)) in _HOST_READS]


def host_fetch(m, call: ast.Call) -> Optional[ast.AST]:
    """:func:`_host_fetch`, once per call (JAX201, JAX702 and the timing rules all ask)."""
    memo = m.facts.host_fetch
    if memo is None:
        memo = m.facts.host_fetch = {}
    key = id(call)
    if key not in memo:
        memo[key] = _host_fetch(m, call)
    return memo[key]


def _host_fetch(m, call: ast.Call) -> Optional[ast.AST]:
    """If the call copies a JAX value to the host, that value: the argument of
    ``float(x)``/``np.asarray(x)``/``jax.device_get(x)``, the receiver of ``x.item()``/``x.tolist()``,
    a JAX argument of any other NumPy function that converts its arguments (``np.exp(x)``,
    ``np.isnan(x)``, ``np.concatenate([a, b])``: not metadata reads like ``np.shape``, not
    ``np.sum(x)``, which calls ``x.sum()``), or the tree of a tree map whose function fetches
    each leaf (``jax.tree.map(float, metrics)``, ``jax.tree.map(lambda v: v.item(), m)``).
    ``float(np.sum(x))`` and ``np.sum(x).item()`` fetch ``np.sum(x)``: one array or a pytree,
    the value read on the host syncs."""
    scope = m.scope_at(call)
    func = call.func
    qn = m.resolve(func, scope)
    args = [a for a in call.args if not isinstance(a, ast.Starred)]
    if qn in N.HOST_BUILTINS or qn in N.NUMPY_FETCH or qn == N.DEVICE_GET:
        if args and V.device_or_copy(m, args[0], scope):
            return args[0]
        return None
    if qn in N.HOST_GATHERS:
        # ``multihost_utils.assert_equal(metrics)``: every leaf gathered from each process and
        # compared on the host (``N.HOST_GATHERS``)
        return args[0] if args and V.holds_jax(m, args[0], scope) else None
    if qn is not None and qn in N.TREE_MAPS:
        return _tree_map_fetch(m, call, scope)
    if qn is not None and qn.startswith("numpy."):
        if (qn in N.NUMPY_METADATA or qn in N.NUMPY_FORWARDING
                or qn.startswith(("numpy.random.", "numpy.testing.", "numpy.dtypes."))):
            return None
        # NumPy computing on device values alone (``np.exp(loss)``, ``np.isnan(x)``); with host
        # data beside them (``np.take(host_list, idx)``) the host needs the value for its own data
        if not args or not all(_device_or_literal(m, a, scope) for a in args):
            return None
        return next((a for a in args if V.is_jax(m, a, scope)), None)
    if isinstance(func, ast.Attribute) and func.attr in ("item", "tolist") and qn is None:
        if V.device_or_copy(m, func.value, scope):
            return func.value
    if qn in N.HOST_LOGGER_FUNCTIONS or (isinstance(func, ast.Attribute) and qn is None and _logger_method(m, func, scope)):
        # ``wandb.log({"loss": loss})``: a library logger that copies what it is given to the host
        return next((a for a in list(args) + [kw.value for kw in call.keywords] if V.holds_jax(m, a, scope)), None)
    return None


_HOST_READS = frozenset(N.HOST_BUILTINS | N.FORMAT_BUILTINS)
_LOGGER_METHOD_NAMES = frozenset().union(*N.HOST_LOGGER_METHODS.values())


def _logger_method(m, func: ast.Attribute, scope) -> bool:
    """``writer.scalar("loss", loss, step)`` on ``writer = flax...tensorboard.SummaryWriter(dir)``,
    ``run.log(metrics)`` on ``run = wandb.init(...)``: ``names.HOST_LOGGER_METHODS``."""
    if func.attr not in _LOGGER_METHOD_NAMES:
        return False
    maker = libraryobjects.library_maker(m, func.value, scope)
    return maker is not None and func.attr in N.HOST_LOGGER_METHODS.get(maker, ())



def _device_or_literal(m, e: ast.AST, scope) -> bool:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        e = e.operand
    if isinstance(e, ast.Constant):
        return True
    if isinstance(e, (ast.Tuple, ast.List)):
        return all(_device_or_literal(m, x, scope) for x in e.elts)
    return V.is_jax(m, e, scope)



def _tree_map_fetch(m, call: ast.Call, scope) -> Optional[ast.AST]:
    """The first tree of ``jax.tree.map(f, tree, ...)`` when ``f`` fetches each leaf: a host
    conversion itself (``float``, ``np.asarray``, ``jax.device_get``), or a lambda or def of
    this module that makes a host fetch (``lambda v: v.item()``; its parameters are the JAX
    leaves, :meth:`mapped_leaf`)."""
    if len(call.args) < 2 or isinstance(call.args[1], ast.Starred):
        return None
    fn, tree = call.args[0], call.args[1]
    if not V.holds_jax(m, tree, scope):
        return None
    qn = m.resolve(fn, scope)
    if qn is not None:
        if qn in N.HOST_BUILTINS or qn in N.NUMPY_FETCH or qn == N.DEVICE_GET or (
                qn.startswith("numpy.") and qn not in N.NUMPY_METADATA and qn not in N.NUMPY_FORWARDING
                and not qn.startswith(("numpy.random.", "numpy.testing."))):
            return tree
        return None
    for f in callables.local_functions(m, fn, scope):
        if f.traced or call not in V.tree_map_sites(m, f):
            continue
        if any(host_fetch(m, c) is not None for c in f.calls):
            return tree
    return None



def mapped_fetch(m, call: ast.Call) -> Optional[ast.Call]:
    """For a tree map that fetches each leaf (:func:`host_fetch`) through a lambda or def,
    the fetch inside it (``v.item()``); None when the function is a conversion itself."""
    scope = m.scope_at(call)
    if m.resolve(call.func, scope) not in N.TREE_MAPS or not call.args:
        return None
    for f in callables.local_functions(m, call.args[0], scope):
        for c in f.calls:
            if host_fetch(m, c) is not None:
                return c
    return None



def bool_sync(m, test: ast.AST, scope) -> Optional[ast.AST]:
    """The JAX value whose truth an ``if``/``while``/``assert`` test reads on the host every
    time it runs: the test itself when it is a JAX value (or a host copy made in it, see
    :meth:`device_or_copy`), the operand of ``not``, or the first operand of ``and``/``or``
    (the later ones run only sometimes)."""
    for _ in range(L.MASK_CHAIN):
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
        elif isinstance(test, ast.BoolOp) and test.values:
            test = test.values[0]
        else:
            break
    if isinstance(test, ast.Name) and container_result(m, test, scope):
        return None
    return test if V.device_or_copy(m, test, scope) else None


def pytree_truth(m, value: ast.AST, scope) -> Optional[str]:
    """Why the truth of ``value`` (what :func:`bool_sync` found) may read no device value, or None: a name
    holding the whole result of a call (not an element unpacked from it) not shown to be one array. A compiled
    step returns a pytree as often as an array, and the truth of a dict, a tuple or a train state is its length
    or ``True`` (fresh AG: a trainer's ``if metrics and type(metrics) == dict:`` after its validation step)."""
    if not isinstance(value, ast.Name):
        return None
    ev = m.binding(value.id, scope, _pos(value))
    if ev is None or ev.kind != "assign" or ev.path or not isinstance(ev.value, ast.Call) \
            or m.arrays.certain(value, scope):
        return None
    return (f"whether `{value.id}` (the result of `{unparse(ev.value.func, 30)}(...)`) is one array, or a pytree "
            "whose truth reads nothing on the device, is not shown")


_DISPLAYS = (ast.Dict, ast.List, ast.Set, ast.Tuple, ast.DictComp, ast.ListComp, ast.SetComp)


def container_result(m, name: ast.Name, scope) -> bool:
    """Whether ``name`` holds a Python container a function of this module built and returned:
    bound (``state, metrics = step(state, batch)``) to element ``i`` of a call of a function whose
    every ``return`` gives a dict/list/tuple/set display there, or a local name the function binds
    only to one (``metrics = {**metrics, "loss": loss}; return state, metrics``). Jitted or not, the
    result is that container of arrays: its truth is its length, read on the host with no device
    value (``if metrics:``)."""
    ev = m.binding(name.id, scope, _pos(name))
    if ev is None or ev.kind != "assign" or not isinstance(ev.value, ast.Call):
        return False
    path = list(ev.path or ())
    if len(path) > 1:
        return False
    found = returnkinds.returned_elements(m, ev.value.func, ev.scope, path[0] if path else None)
    return found is not None and all(_display_in(m, e, f) for f, e in found)


def _display_in(m, e: ast.AST, f) -> bool:
    """``e`` is a container display, or a name whose binding reaching ``e`` in ``f`` (the only
    one: none later in a loop that holds it) assigns one."""
    if isinstance(e, _DISPLAYS):
        return True
    if not isinstance(e, ast.Name):
        return False
    found = m._lookup(e.id, f.scope, _pos(e))
    if found is None:
        return False
    ev, later = found
    return not later and ev.scope is f.scope and ev.plain_assign and isinstance(ev.value, _DISPLAYS)



def formats_jax_call(m, call: ast.Call) -> bool:
    """print/str/repr/format/logging/str.format calls that format a JAX value."""
    if not _prints(m, call):
        return False
    scope = m.scope_at(call)
    values = list(call.args) + [kw.value for kw in call.keywords if kw.arg not in ("sep", "end", "file", "flush")]
    return any(V.formats_jax(m, v, scope) for v in values)



def _prints(m, c: ast.Call) -> bool:
    func = c.func
    qn = m.resolve(func, m.scope_at(c))
    if qn in N.FORMAT_BUILTINS or qn in N.ABSL_SHOWN_LOG_FUNCTIONS:
        return True
    if isinstance(func, ast.Attribute):
        if func.attr == "format" and isinstance(func.value, ast.Constant) and isinstance(func.value.value, str):
            return True
        if func.attr in N.LOG_METHODS:
            if bound_logger(m, func.value):
                return True
            return (qn is not None and qn.startswith("logging.")) or (
                qn is None and m.conventions.matches(
                    "logger-receivers", unparse(func.value, 80).rsplit(".", 1)[-1]))
    return False



def bound_logger(m, receiver: ast.AST) -> bool:
    """A name bound to ``logging.getLogger(...)`` (or absl's): a logger, whatever it is called."""
    if not isinstance(receiver, ast.Name):
        return False
    ev = m.binding(receiver.id, m.scope_at(receiver), (receiver.lineno, receiver.col_offset))
    if ev is None or not ev.plain_assign or not isinstance(ev.value, ast.Call):
        return False
    qn = m.resolve(ev.value.func, ev.scope)
    return qn is not None and qn.startswith(("logging.", "absl.logging."))


def slice_bound_reads(m) -> list:
    """``(subscript, bound)`` for each slice outside traced code whose start, stop or step is a JAX
    value (``idxes[start:start + n]`` with ``start`` taken from ``jnp.arange(...)``): a slice bound
    must be a Python integer, so Python calls the value's ``__index__``, which copies it to the host
    and waits for it (a TPU v5e run under ``jax.transfer_guard_device_to_host("disallow")`` reports a
    device-to-host transfer of the scalar for each such slice of a device array). Functions' bodies
    only (their subscripts are collected as the model is built); memoized per module."""
    memo = m.facts.slice_bounds
    if memo is not None:
        return memo
    out: list = []
    for f in m.functions:
        if f.traced or not f.loops:
            continue
        for sub in f.subscripts:
            parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
            for part in parts:
                if not isinstance(part, ast.Slice):
                    continue
                bound = next((b for b in (part.lower, part.upper, part.step)
                              if b is not None and V.is_jax(m, b, f.scope)), None)
                if bound is not None:
                    out.append((sub, bound))
                    break
    m.facts.slice_bounds = out
    return out


# ``jax.numpy`` functions whose output shape depends on the values of their input (without ``size=``):
# outside jit they read the input on the host to size the result.
_DATA_SHAPED = frozenset("jax.numpy." + n for n in (
    "unique", "unique_values", "unique_counts", "unique_inverse", "unique_all", "nonzero", "flatnonzero",
    "argwhere", "compress", "extract"))


def shape_reads(m) -> list:
    """``(node, operand)`` for each operation outside traced code, in a loop, whose result's shape
    depends on a JAX array's values: ``jnp.unique(codes)``, ``jnp.nonzero(x)``, one-argument
    ``jnp.where(mask)`` (none given ``size=``), and ``x[mask]`` with a boolean JAX mask. Eagerly, JAX must
    know the size, so it waits for the array and copies what decides it to the host (measured on
    CPU, jax 0.10.2: ``jnp.unique`` of a jitted step's output took the step's 2.8 s, ``y.sum()`` 0.08 s).
    Memoized per module."""
    memo = m.facts.shape_reads
    if memo is not None:
        return memo
    out: list = []
    for call in m.loop_calls:
        name = last_name(call.func)
        if name not in ("unique", "unique_values", "unique_counts", "unique_inverse", "unique_all", "nonzero",
                        "flatnonzero", "argwhere", "compress", "extract", "where") or m.in_traced_code(call):
            continue
        if any(k.arg in ("size", "fill_value") for k in call.keywords) or not call.args:
            continue
        scope = m.scope_at(call)
        qn = m.resolve(call.func, scope)
        operand = call.args[-1] if qn in ("jax.numpy.compress", "jax.numpy.extract") else call.args[0]
        if (qn in _DATA_SHAPED or (qn == "jax.numpy.where" and len(call.args) == 1)) and V.is_jax(m, operand, scope):
            out.append((call, operand))
    for scope, subscripts in hostarrays.untraced_subscripts(m):
        for sub in subscripts:
            ctx = m.context(sub)
            if ctx is None or not ctx.loops or isinstance(sub.slice, (ast.Tuple, ast.Slice, ast.Constant)) or (
                    isinstance(sub.value, ast.Attribute) and sub.value.attr == "at"):
                continue  # ``x.at[mask].set(v)``: a scatter, its shape is ``x``'s
            if V.is_jax(m, sub.value, scope) and V.is_mask(m, sub.slice, scope):
                out.append((sub, sub.slice))
    out.sort(key=lambda n: (n[0].lineno, n[0].col_offset))
    m.facts.shape_reads = out
    return out
