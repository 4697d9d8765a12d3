"""Element-wise reads: a Python loop that reads a JAX array one element at a time on the host.

``for i in range(n): if z[i] <= z[i - 1]: ...`` outside traced code runs one device dispatch
(the indexing) and one sync (the host reads the element) per element: the array is copied back
piece by piece. Functions of the model (``m``), asked by JAX702.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import fetches
from .frequency import per_step, repeats
from . import loops as loopfacts
from . import values as V
from ..python.records import Loop, Scope, loop_iterable_of
from ..python.syntax import _pos, call_arg

# A loop known to run at most this many times reads a handful of elements: not reported.
FEW_ELEMENTS = 16


class ElementRead:
    """One host read of an element of a loop-invariant JAX array per iteration of ``loop``:
    ``node`` is the statement or call that makes the host wait (``x[i].item()``, the ``if``
    test, a tree map whose function reads ``x[i]``), ``subscript`` the element read
    (``z[j, i]``), ``array`` the array indexed (``z``), ``how`` a few words on the host read."""

    __slots__ = ("node", "subscript", "array", "loop", "how", "tree")

    def __init__(self, node: ast.AST, subscript: ast.AST, array: ast.AST, loop: Loop, how: str, tree: bool = False):
        self.tree = tree  # ``array`` is a pytree whose every leaf is read so (a tree map's function)
        self.node = node
        self.subscript = subscript
        self.array = array
        self.loop = loop
        self.how = how


def element_reads(m) -> list:
    """Every :class:`ElementRead` of the module, found once."""
    memo = m.facts.element_reads
    if memo is not None:
        return memo
    out: list = []
    for call in m.loop_calls:
        if not fetches.may_sync(m, call):
            continue
        ctx = m.context(call)
        if ctx is None or not ctx.loops or m.in_traced_code(call):
            continue
        value = fetches.host_fetch(m, call)
        if value is None:
            continue
        inner = fetches.mapped_fetch(m, call)
        if inner is not None:  # jax.tree.map(lambda x: x[i].item(), tree): the lambda reads x[i]
            fetched = inner.func.value if isinstance(inner.func, ast.Attribute) and not inner.args \
                else (inner.args[0] if inner.args else None)
            read = _element(m, fetched, ctx.loops, m.scope_at(inner), mapped=True)
            if read is not None:  # the array read is each leaf of the mapped tree
                out.append(ElementRead(call, read[0], value, read[1], "copies it to the host", tree=True))
            continue
        read = _element(m, value, ctx.loops, ctx.scope)
        if read is not None:
            out.append(ElementRead(call, read[0], _array(read), read[1], "copies it to the host"))
    for node in m.ifs:
        test = node.test
        if not isinstance(test, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Subscript, ast.Name)):
            continue  # a call's result (``if jnp.any(x):``) is not one element read
        ctx = m.context(test) if isinstance(node, ast.While) else m.context(node)
        if ctx is None or not ctx.loops or m.in_traced_code(node):
            continue
        for sub in _subscripts(test):
            read = _element(m, sub, ctx.loops, ctx.scope)
            if read is not None:
                out.append(ElementRead(node, read[0], _array(read), read[1], "reads its truth on the host"))
                break
    out.extend(_index_reads(m))
    m.facts.element_reads = out
    return out


def _index_reads(m) -> list:
    """``[data[i] for i in idx]``, ``data[i:i + n]`` and ``for i in idx: ... data[i]`` outside traced code, with ``idx``
    a JAX array: each element taken off the device array is used as an index, which reads it on
    the host (``__index__``: a device-to-host copy per element) when ``data`` is a host container,
    or dispatches a gather per element when ``data`` is a JAX array. One read per loop."""
    from .hostarrays import untraced_subscripts

    out: list = []
    seen: set = set()
    for _, subs in untraced_subscripts(m):
        for sub in subs:
            # the element itself, or in a slice's bounds (``data[i:i + n]``), or in an index tuple
            names = [n for n in ast.walk(sub.slice) if isinstance(n, ast.Name)]
            if not names:
                continue
            ctx = m.context(sub)
            if ctx is None or not ctx.loops or m.in_traced_code(sub):
                continue
            read = None
            for index in names:
                read = _iterated(m, index, ctx.loops, ctx.scope, comprehensions=True)
                if read is not None:
                    break
            if read is None or id(read[1]) in seen:
                continue
            seen.add(id(read[1]))
            size = _one_dimensional(m, loop_iterable_of(read[1].node), ctx.scope, 0)
            if size is None:
                continue  # rows of a matrix (a batch of indices each): one copy per row, not per element
            if 0 < size <= FEW_ELEMENTS:
                continue
            if not _repeated(m, read[1], ctx.loops, sub):
                continue  # a loop run once (a display cell, a set-up helper): a handful of reads
            out.append(ElementRead(sub, index, _array(read), read[1],
                                   "uses it as an index: a host read of it, or a device gather, per element"))
    return out


def is_element_read(m, node: ast.AST) -> bool:
    """``node`` (a call or an ``if``/``while`` statement) is one of :func:`element_reads`: JAX702
    reports it, with a fix for the whole loop, and the per-step sync rule leaves it alone."""
    ids = m.facts.element_read_ids
    if ids is None:
        ids = m.facts.element_read_ids = {id(r.node) for r in element_reads(m)}
    return id(node) in ids


def _array(read) -> ast.AST:
    sub, loop = read
    return sub.value if isinstance(sub, ast.Subscript) else loop_iterable_of(loop.node)


_READS = (ast.Subscript, ast.Name)


def _subscripts(test: ast.AST) -> list:
    """The subscripts (and names) a test compares or reads as a truth value (``z[i] <= z[i - 1]``,
    ``not m[i]``, ``a[i] and b``): through ``not``/``and``/``or`` and comparisons, not into calls."""
    out = []
    stack = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, _READS):
            out.append(node)
        elif isinstance(node, ast.Compare):
            stack.append(node.left)
            stack.extend(node.comparators)
        elif isinstance(node, ast.BoolOp):
            stack.extend(node.values)
        elif isinstance(node, ast.UnaryOp):
            stack.append(node.operand)
    return out


def _element(m, expr: Optional[ast.AST], loops: tuple, scope: Scope, mapped: bool = False):
    """``(subscript, loop)`` when ``expr`` is ``a[idx]`` (``a[idx].attr`` no) with ``a`` a JAX array
    that no iteration of ``loop`` rebinds and ``idx`` made from ``loop``'s counter or item; the
    innermost such loop. ``mapped``: ``a`` is a tree map's leaf parameter (a JAX leaf by
    construction, ``values.mapped_leaf``)."""
    if isinstance(expr, ast.Name) and not mapped:
        return _iterated(m, expr, loops, scope)
    if not isinstance(expr, ast.Subscript) or isinstance(expr.slice, ast.Slice):
        return None
    array = expr.value
    if not isinstance(array, (ast.Name, ast.Attribute)):
        return None
    if not mapped and not m.arrays.certain(array, scope):
        return None  # a tuple of arrays (``stats[layer]``) is indexed on the host
    index_names = {n.id for n in ast.walk(expr.slice) if isinstance(n, ast.Name)}
    for loop in reversed(loops):
        targets = loopfacts.varying_names(loop) if loop.kind == "while" else loop.target_names()
        if not index_names & targets:
            continue
        if loop.kind != "while" and not _index_loop(m, loop, scope):
            return None
        if _rebound_in(array, loop):
            return None  # a new array each iteration (``x = step(x)``): JAX201's per-step fetch
        trips = loopfacts.known_trips(m, loop.node.iter, scope) if isinstance(loop.node, ast.For) else None
        if trips is not None and trips <= FEW_ELEMENTS:
            return None
        return expr, loop
    return None


def _one_dimensional(m, e: ast.AST, scope: Scope, depth: int) -> Optional[int]:
    """How many elements ``e`` has (0: a number not known here) when it is a one-dimensional JAX
    array by how it is made, so that iterating it yields scalars: ``jnp.arange(...)``, a
    ``jax.random`` sampler given a shape of one size (``randint(key, (n,), ...)``),
    ``jax.random.permutation(key, n)`` of a number, a slice of one, or a name bound to one; None
    otherwise."""
    if depth > 4:
        return None
    if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Slice):
        return _one_dimensional(m, e.value, scope, depth + 1)
    if isinstance(e, ast.Name):
        ev = m.binding(e.id, scope, _pos(e))
        return _one_dimensional(m, ev.value, ev.scope, depth + 1) if ev is not None and ev.plain_assign else None
    if not isinstance(e, ast.Call):
        return None
    qn = m.resolve(e.func, scope) or ""
    if qn == "jax.numpy.arange":
        return 0
    if qn == "jax.random.permutation":
        x = call_arg(e, 1, "x")
        if x is None or isinstance(x, (ast.Tuple, ast.List)) or V.is_jax(m, x, scope):
            return None
        return V.const_int(m, x, scope) or 0
    if qn.startswith("jax.random.") and qn in N.SHAPE_ARGS:
        pos, kw = N.SHAPE_ARGS[qn][0]
        shape = call_arg(e, pos, kw)
        if isinstance(shape, (ast.Tuple, ast.List)) and len(shape.elts) == 1:
            return V.const_int(m, shape.elts[0], scope) or 0
    return None


def _repeated(m, loop: Loop, loops: tuple, node: ast.AST) -> bool:
    """The element loop runs again and again: inside a loop over steps, or in a function that
    runs at the steps of a loop (``get_batch`` called by the training loop)."""
    if any(outer is not loop and outer.ranged for outer in loops if outer.depth < loop.depth):
        return True
    f = m.function_at(node)
    if f is None or isinstance(f.node, ast.Lambda):
        return False
    return per_step(repeats(m, f))


def _iterated(m, name: ast.Name, loops: tuple, scope: Scope, comprehensions: bool = False):
    """``(name, loop)`` when ``name`` is the target of a ``for`` loop over a JAX array itself
    (``for v in x:``): each iteration slices one element off on the device. ``comprehensions``:
    also a comprehension's (``[data[i] for i in idx]``), asked where the array is shown to be one
    (``_one_dimensional``), not a list or tree of arrays."""
    for loop in reversed(loops):
        node = loop.node
        if isinstance(node, ast.For):
            target, it = node.target, node.iter
        elif comprehensions and loop.kind == "comprehension" and getattr(node, "generators", None):
            target, it = node.generators[0].target, node.generators[0].iter
        else:
            continue
        if isinstance(target, ast.Name) and target.id == name.id:
            if V.is_jax(m, it, scope) and not isinstance(it, ast.Call):
                trips = loopfacts.known_trips(m, it, scope)
                return (name, loop) if trips is None or trips > FEW_ELEMENTS else None
            return None
    return None


def _index_loop(m, loop: Loop, scope: Scope) -> bool:
    """The loop runs over indices (``range``, ``enumerate``, ``itertools.product`` of ranges), not
    the items of a host collection."""
    it = getattr(loop.node, "iter", None)
    if it is None:
        return False
    if loopfacts.range_call(m, it, scope) is not None:
        return True
    if isinstance(it, ast.Call):
        return m.resolve(it.func, scope) in ("builtins.enumerate", "itertools.product")
    return False


def _rebound_in(array: ast.AST, loop: Loop) -> bool:
    """Some statement of the loop's body assigns the array's name (its root name)."""
    root = array
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):
        return True
    spelled = ast.unparse(array)
    for node in ast.walk(loop.node):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(getattr(n, "ctx", None), ast.Store) \
                        and ast.unparse(n) in (spelled, root.id):
                    return True
    return False
