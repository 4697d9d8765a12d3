"""Host arrays: values proven to be NumPy arrays in host memory, and the subscripts that index one
with a JAX array outside traced code (``images[p]`` with ``p`` a row of ``jax.random.permutation``).

NumPy cannot index with a JAX array as it is: it converts the index with ``__array__``, a copy to
the host that waits for the device to compute it. In a step loop the index is computed on the
device after the previous step (one stream runs them in order), so each such subscript waits for
the step before it: the host cannot queue the next step while the device runs this one (a TPU v5e
probe: 0.044 s, the length of the step, against 2e-5 s with a host index).

The proof that a value is a NumPy array follows its data flow: a NumPy array constructor or loader
(``np.load``, ``np.asarray``, ``np.zeros``, ...), ``tfds.as_numpy(...)`` and Keras's bundled datasets'
``load_data()`` (every leaf of what they return), a tensor's ``.numpy()``, a slice or ``.copy()`` of one,
arithmetic of one with numbers or other NumPy arrays (``x.astype("float32") / 255.``); through names, tuple unpacking,
dict displays read with their string keys and the returns of the module's own functions and of
the project's other modules' top-level functions. Anything
else (a parameter, an attribute, a library's return) is not proven, and the subscript is not reported.

Functions of the model (``m``), imported explicitly: JAX201 (jaxlint_rules/host_transfer.py) asks
:func:`numpy_index_reads`.
"""

from __future__ import annotations

import ast

from . import callables, keydraws
from . import values as V
from ..python import instances
from ..python.records import Scope
from ..python.syntax import walk
from ..python.syntax import _pos

MAX_DEPTH = 12  # names, unpackings, returns and keys followed from a subscript to where its array is made

# NumPy functions that return one new ndarray in host memory (not a scalar, a tuple, a dtype or a file).
_MAKERS = frozenset("numpy." + n for n in (
    "array", "asarray", "ascontiguousarray", "asfortranarray", "copy", "load", "loadtxt", "genfromtxt", "fromfile",
    "frombuffer", "memmap", "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
    "arange", "linspace", "eye", "identity", "concatenate", "stack", "vstack", "hstack", "reshape", "transpose",
    "squeeze", "expand_dims", "take", "sort", "argsort", "tile", "repeat", "float32", "float64", "int32", "int64",
    "uint8", "random.rand", "random.randn", "random.randint", "random.uniform", "random.normal", "random.permutation",
    "random.choice",
))
_TO_NUMPY = frozenset({"tensorflow_datasets.as_numpy", "tensorflow_datasets.public_api.as_numpy"} | {
    # Keras's bundled datasets: ``(x_train, y_train), (x_test, y_test) = fashion_mnist.load_data()``, NumPy arrays
    f"{pkg}.datasets.{name}.load_data" for pkg in ("keras", "tensorflow.keras")
    for name in ("mnist", "fashion_mnist", "cifar10", "cifar100", "boston_housing", "california_housing")})
_ARRAY_METHODS = frozenset({"copy", "reshape", "astype", "transpose", "squeeze", "ravel", "flatten"})


def numpy_array(m, e: ast.AST, scope: Scope) -> bool:
    """Whether ``e`` is proven to hold a NumPy array (module docstring: how)."""
    return _value(m, e, scope, (), 0)


def _value(m, e: ast.AST, scope: Scope, path: tuple, depth: int) -> bool:
    """Whether the part ``path`` (tuple indexes and dict keys, outermost first) of the value of ``e``
    is a NumPy array."""
    if depth > MAX_DEPTH or not m.work.spend():
        return False
    if isinstance(e, ast.Name):
        ev = m.binding(e.id, scope, _pos(e))
        if ev is None:
            return False
        # every binding of the name in its scope (``if``/``else`` branches, a loop's later rebinding); a
        # binding that reads the name itself (``x = x.astype("float32") / 255.``) is one when the others are
        events = ev.scope.events.get(e.id) or [ev]
        visiting = m.facts.hostarray_visiting
        if visiting is None:
            visiting = m.facts.hostarray_visiting = set()
        key = (id(ev.scope), e.id, path)
        if key in visiting:
            return True
        visiting.add(key)
        try:
            return all(b.kind == "assign" and b.value is not None
                       and _value(m, b.value, b.scope, tuple(b.path or ()) + path, depth + 1) for b in events)
        finally:
            visiting.discard(key)
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        return _self_attribute(m, e.attr, scope, path, depth)
    if isinstance(e, ast.BinOp) and not path and not isinstance(e.op, ast.MatMult):
        # ``x.astype("float32") / 255.``: a NumPy array and a number (or another NumPy array) give one
        sides = (e.left, e.right)
        return any(_value(m, x, scope, (), depth + 1) for x in sides) and all(
            _number(x) or _value(m, x, scope, (), depth + 1) for x in sides)
    if isinstance(e, ast.IfExp):
        return _value(m, e.body, scope, path, depth + 1) and _value(m, e.orelse, scope, path, depth + 1)
    if isinstance(e, (ast.Tuple, ast.List)):
        if not path or not isinstance(path[0], int) or any(isinstance(x, ast.Starred) for x in e.elts) \
                or path[0] >= len(e.elts):
            return False
        return _value(m, e.elts[path[0]], scope, path[1:], depth + 1)
    if isinstance(e, ast.Dict):
        if not path or not isinstance(path[0], str):
            return False
        entry = next((v for k, v in zip(e.keys, e.values) if isinstance(k, ast.Constant) and k.value == path[0]), None)
        return entry is not None and _value(m, entry, scope, path[1:], depth + 1)
    if isinstance(e, ast.Subscript):
        key = e.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, (str, int)) and not isinstance(key.value, bool):
            if _value(m, e.value, scope, (key.value,) + path, depth + 1):
                return True  # ``ds["image"]`` of a dict display, ``pair[0]`` of a tuple
        # any other subscript of an array (a slice, a row, a fancy index) is an array of the same kind
        return not path and _value(m, e.value, scope, (), depth + 1)
    if isinstance(e, ast.Call):
        qn = m.resolve(e.func, scope)
        if qn in _TO_NUMPY:
            return True  # every leaf of what it returns is a NumPy array
        if not path and qn in _MAKERS:
            return True
        func = e.func
        if isinstance(func, ast.Attribute) and qn is None and not path:
            if func.attr == "numpy" and not e.args:
                return True  # a TensorFlow or PyTorch tensor's ``.numpy()``
            if func.attr in _ARRAY_METHODS and _value(m, func.value, scope, (), depth + 1):
                return True
        local = [f for f in callables.local_functions(m, func, scope) if not f.traced]
        if local:
            return all(_returns(m, f, path, depth) for f in local)
        other = callables.imported_function(m, func, scope)
        if other is not None and m.project is not None and other[0].path is not None:
            name = other[1]
            return m.project.answer(other[0].path, ("numpy-result", name, path), lambda model: any(
                _returns(model, f, path, depth) for f in model.functions
                if f.name == name and f.parent is None and f.cls is None and not f.traced), False, (b"numpy",))
    return False


def _self_attribute(m, attr: str, scope: Scope, path: tuple, depth: int) -> bool:
    """``self.<attr>`` in a method: every store of it in the class's methods is ``self.<attr> = <NumPy array>``
    (``self.train_rays = np.stack(...)`` in ``__init__``), and nothing else in the module stores an attribute
    of that name (``trainer.train_rays = ...`` from outside, ``setattr``)."""
    method = instances.method_at(m, scope)
    if method is None:
        return False
    stores = keydraws.self_stores(m, method.cls)
    if not stores:
        return False
    mine = [(f, st) for f, st, attrs in stores if attr in attrs]
    counts = m.facts.attribute_store_counts
    if counts is None:
        counts = m.facts.attribute_store_counts = {}
        for n in walk(m.tree):
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)):
                counts[n.attr] = counts.get(n.attr, 0) + 1
    if not mine or counts.get(attr, 0) != len(mine):
        return False
    visiting = m.facts.hostarray_visiting
    if visiting is None:
        visiting = m.facts.hostarray_visiting = set()
    key = (id(method.cls), "self." + attr, path)
    if key in visiting:
        return True
    visiting.add(key)
    try:
        return all(isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Attribute)
                   and _value(m, st.value, f.scope, path, depth + 1) for f, st in mine)
    finally:
        visiting.discard(key)


def _number(e: ast.AST) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) in (int, float) or (
        isinstance(e, ast.UnaryOp) and isinstance(e.operand, ast.Constant) and type(e.operand.value) in (int, float))


def _returns(m, f, path: tuple, depth: int) -> bool:
    """Whether every ``return`` of the function ``f`` gives a value whose part ``path`` is a NumPy array."""
    return bool(f.returns) and all(r is not None and _value(m, r, f.scope, path, depth + 1) for r in f.returns)


def numpy_index_reads(m) -> list:
    """``(subscript, index)`` for each subscript in a loop outside traced code (a function's or a script's), of a
    NumPy array (:func:`numpy_array`) whose index, or a part of its index tuple, is a JAX value:
    NumPy copies the index to the host, waiting for the device. Memoized per module."""
    memo = m.facts.numpy_index_reads
    if memo is not None:
        return memo
    out: list = []
    seen: set = set()
    for scope, subscripts in untraced_subscripts(m):
        for sub in sorted(subscripts, key=_pos):
            parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
            index = next((p for p in parts if not isinstance(p, (ast.Slice, ast.Constant))
                          and V.is_jax(m, _unpacked(m, p, scope), scope)), None)
            if index is None or not numpy_array(m, sub.value, scope):  # the index first: asking for the array
                continue  # may model another module
            # the same index read again in the same loop body copies nothing new (the array keeps its host copy)
            ctx = m.context(sub)
            key = (id(scope), ast.dump(index), id(ctx.loops[-1]) if ctx is not None and ctx.loops else None)
            if key not in seen:
                seen.add(key)
                out.append((sub, index))
    m.facts.numpy_index_reads = out
    return out


def _unpacked(m, e: ast.AST, scope: Scope) -> ast.AST:
    """The array of ``tuple(a)``/``list(a)`` (its elements are the array's rows, JAX arrays when it
    is one: NumPy reads each with ``__index__`` or ``__array__``, a copy to the host); else ``e``."""
    if isinstance(e, ast.Call) and len(e.args) == 1 and not e.keywords and not isinstance(e.args[0], ast.Starred) \
            and m.resolve(e.func, scope) in ("builtins.tuple", "builtins.list"):
        return e.args[0]
    return e


def untraced_subscripts(m) -> list:
    """``(scope, subscripts)``: the subscripts read in a script's loops at module level, and in each
    function with loops that is not traced (the host-side reads a step loop can make)."""
    return [(m.module_scope, m.module_loop_subscripts)] + [
        (f.scope, f.subscripts) for f in m.functions if f.loops and not f.traced]


def numpy_store(m, node: ast.Assign) -> bool:
    """Whether the assignment stores a JAX value into a NumPy array by subscript (``samples[i] =
    params``): NumPy copies the value to the host, which waits for the device (a wait in a timed region)."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Subscript):
        return False
    scope = m.scope_at(node)
    return V.is_jax(m, node.value, scope) and numpy_array(m, node.targets[0].value, scope)
