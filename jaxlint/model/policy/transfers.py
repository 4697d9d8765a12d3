"""Host transfers: in which loops the host fetches of jaxlint/model/fetches.py run every step,
uploads of unchanged host data, helpers that fetch their arguments, evaluation loops that collect
outputs, and which syncs the host needs anyway.

A per-step sync is worth removing only where it stalls a loop of device work for nothing.
:func:`per_iteration_loop` answers how often a node syncs: every iteration of a
step loop, or not per step at all (periodic, after the step loop, once per whole program, once
per sweep point; decided by :func:`jaxlint.model.roles.sync_role`).
:func:`jaxlint.model.hostneeds.inherent_sync` answers whether the host needs the value
there anyway: host code consumes it (a host environment's step, a tokenizer, torch, json,
``np.testing``), the loop is paced by the host (``input()``, rendering, plotting), the loop
publishes its state to host-side consumers, or it already waits for the device every iteration
for one of these reasons.

Functions of the model (``m``), not a mixin: JAX201/202/205 import them.
"""

from __future__ import annotations

import ast
from typing import Optional

from ..facts import callables, fetches, hostneeds, libraryloops, pipelining
from . import roles
from ..python import limits as L
from ..facts import loops as loopfacts
from ..facts import values as V
from ..python.records import Context, Loop
from ..python.syntax import _pos, last_name, unparse, walk
from ..facts.work import carried_state, work_memo

# Calls that copy host data to the device (``jnp.array`` also copies a device array, on device).
UPLOADS = frozenset({"jax.numpy.asarray", "jax.numpy.array", "jax.device_put"})
# NumPy calls whose result is metadata or a scalar type, not host array data.
_HOST_ARRAY_METHODS = frozenset({"astype", "reshape", "copy", "transpose", "ravel", "flatten", "squeeze",
                                 "view", "clip", "round"})
_NUMPY_NOT_DATA = frozenset({"numpy.shape", "numpy.ndim", "numpy.size", "numpy.dtype", "numpy.result_type",
                             "numpy.iinfo", "numpy.finfo", "numpy.random.default_rng", "numpy.random.RandomState",
                             "numpy.random.seed"})


# Methods that keep a value in a host container beyond the iteration.
_COLLECTING_METHODS = frozenset({"append", "extend", "appendleft", "insert", "add"})


def invariant_upload(m, call: ast.Call) -> Optional[tuple]:
    """``(loop, name, binding)`` when the call copies the same host data to the device in every
    iteration of a step loop: ``jnp.asarray(X)``, ``jnp.array(X)`` or ``jax.device_put(X)``
    where ``X`` is a name bound, before the loop and nowhere in it, to host data (a NumPy call's
    result, a list or tuple display, a comprehension) that the loop does not change in place
    (no item assignment, no method call on it, not passed as ``out=``). The loop is the one
    :func:`per_iteration_loop` gives: periodic, amortised and once-per-program code is not
    per step. None otherwise: a per-step batch (``X[i]``, a loop target, a name rebound in the
    loop), a JAX value, data of unknown kind (a parameter, an attribute)."""
    if not call.args or isinstance(call.args[0], ast.Starred):
        return None
    x = call.args[0]
    if not isinstance(x, ast.Name):
        return None
    scope = m.scope_at(call)
    if m.resolve(call.func, scope) not in UPLOADS:
        return None
    ctx = m.context(call)
    loop = per_iteration_loop(m, ctx, syncs=False)
    if loop is None:
        return None
    ev = m.binding(x.id, scope, _pos(x))
    if ev is None or loopfacts.rebound_each_iteration(m, x.id, ev, loop) or V.is_jax(m, x, scope):
        return None
    if not _host_data(m, ev):
        return None
    if _changed_in_loop(m, x.id, loop):
        return None
    if any(_varies_in_loop(m, a, loop) for a in [*call.args[1:], *(k.value for k in call.keywords)]):
        return None
    return loop, x, ev


# Calls that copy a value to every local device (a host array or a device array alike).
REPLICATES = frozenset({"flax.jax_utils.replicate", "jax.device_put_replicated"})


def invariant_replicate(m, call: ast.Call) -> Optional[tuple]:
    """``(loop, name, binding)`` when ``replicate(X)`` (``flax.jax_utils.replicate``,
    ``jax.device_put_replicated``) copies the same value to every device in every iteration of a step
    loop: ``X`` a name bound before the loop (a parameter included: whatever it holds, host data or
    a device array, each call copies all of it again), not rebound or changed in the loop."""
    if not call.args or not isinstance(call.args[0], ast.Name):
        return None
    x, scope = call.args[0], m.scope_at(call)
    if m.resolve(call.func, scope) not in REPLICATES:
        return None
    loop = per_iteration_loop(m, m.context(call), syncs=False)
    ev = m.binding(x.id, scope, _pos(x)) if loop is not None else None
    if ev is None or ev.kind not in ("param", "assign") or loopfacts.rebound_each_iteration(m, x.id, ev, loop) \
            or _changed_in_loop(m, x.id, loop):
        return None
    return loop, x, ev


def implicit_uploads(m) -> list:
    """``(call, argument, loop, binding, wrap)`` for each argument of a compiled call (a
    ``jax.jit``/``jax.pmap`` function of the module) that is host data bound before the step loop
    around the call and not changed in it (the conditions of :func:`invariant_upload`): jit copies
    a NumPy argument to the device on every call, so the same bytes travel every iteration
    (measured on a TPU v5e: 5,000 calls with NumPy inputs 2.04 s, with device arrays 1.26 s).
    Static arguments are hashed, not copied, and are left out; so are calls under a periodic
    guard, in loops that run a whole program per iteration, and data of unknown kind."""
    memo = m.facts.implicit_uploads
    if memo is not None:
        return memo
    out: list = []
    for call in m.loop_calls:
        named = [a for a in call.args if isinstance(a, ast.Name)] + \
                [k.value for k in call.keywords if k.arg is not None and isinstance(k.value, ast.Name)]
        if not named:
            continue
        scope = m.scope_at(call)
        wrap = callables.callable_info(m, call.func, scope)  # memoized per callee: the cheap question first
        if wrap is None or wrap.kind not in ("jit", "pmap", "filter_jit") or not any(
                _host_binding(m, a, scope, arrays_only=wrap.kind == "filter_jit") for a in named):
            continue
        loop = None
        _, shift, static_pos, static_names = wrap.static_layout(call)
        params = wrap.positional_params()
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                break
            p = i + shift
            if not isinstance(arg, ast.Name) or p in static_pos or (0 <= p < len(params) and params[p] in static_names):
                continue
            if loop is None:
                loop = per_iteration_loop(m, m.context(call), syncs=False) or False
            if loop is False:
                break
            ev = _invariant_host_data(m, arg, scope, loop)
            if ev is not None and not (wrap.kind == "filter_jit" and _display(ev)):
                out.append((call, arg, loop, ev, wrap))
        for kw in call.keywords:
            if kw.arg is None or kw.arg in static_names or not isinstance(kw.value, ast.Name) or loop is False:
                continue
            if loop is None:
                loop = per_iteration_loop(m, m.context(call), syncs=False) or False
                if loop is False:
                    break
            ev = _invariant_host_data(m, kw.value, scope, loop)
            if ev is not None and not (wrap.kind == "filter_jit" and _display(ev)):
                out.append((call, kw.value, loop, ev, wrap))
    m.facts.implicit_uploads = out
    return out


def _display(ev) -> bool:
    return isinstance(ev.value, (ast.List, ast.Tuple, ast.ListComp))


def _host_binding(m, x: ast.Name, scope, arrays_only: bool = False) -> bool:
    """``x`` is bound to host data (:func:`_host_data`); ``arrays_only``: to a NumPy array, not a list or
    tuple of Python values (equinox's ``filter_jit`` traces NumPy arrays, and holds other leaves static)."""
    ev = m.binding(x.id, scope, _pos(x))
    if ev is None or ev.kind != "assign" or ev.value is None or not _host_data(m, ev):
        return False
    return not (arrays_only and _display(ev))


def _invariant_host_data(m, x: ast.Name, scope, loop: Loop):
    """The binding of ``x`` when it is host data bound before ``loop`` and not changed in it."""
    ev = m.binding(x.id, scope, _pos(x))
    if ev is None or loopfacts.rebound_each_iteration(m, x.id, ev, loop) or V.is_jax(m, x, scope):
        return None
    if not _host_data(m, ev) or _changed_in_loop(m, x.id, loop):
        return None
    return ev


def _host_data(m, ev) -> bool:
    """The binding that reaches the upload binds host data: a NumPy call's result (and array
    methods of one: ``np.load(p).astype(np.float32)``), a NumPy random Generator's draw
    (``np.random.default_rng(0).normal(size=n)``, or ``rng.normal(...)`` with ``rng`` bound once to
    a generator), a list or tuple display, a list comprehension; a NumPy array made by
    scikit-learn's toy-data generators (``X, y = make_moons(n)``) and what NumPy's own indexing and
    arithmetic with a number make of one (``x = 0.13 * x[:, [0, 2]]``)."""
    if ev.kind == "assign" and ev.value is not None and _numpy_array(m, ev.value, ev.scope, 0):
        return True  # a NumPy array, whole or one of a tuple of them (``X, y = make_moons(...)``)
    if not ev.plain_assign or ev.value is None:
        return False
    v = ev.value
    for _ in range(L.CONST_CHAIN):
        if isinstance(v, (ast.List, ast.Tuple, ast.ListComp)):
            # what a display holds is known only as written: not empty, no JAX value in it, and not
            # filled later (``embeddings = []`` then ``embeddings.append(jitted(...))`` holds device arrays)
            if isinstance(v, (ast.List, ast.Tuple)) and not v.elts:
                return False
            return not V.holds_jax(m, v, ev.scope) and not _filled_later(m, ev)
        if not isinstance(v, ast.Call):
            return False
        if isinstance(v.func, ast.Attribute) and _numpy_generator(m, v.func.value, ev.scope):
            return True  # ``np.random.default_rng(0).normal(size=n)``: a NumPy Generator's draws
        qn = m.resolve(v.func, ev.scope)
        if qn is not None:
            return qn.startswith("numpy.") and qn not in _NUMPY_NOT_DATA
        if isinstance(v.func, ast.Attribute) and v.func.attr in _HOST_ARRAY_METHODS:
            v = v.func.value  # ``<numpy array>.astype(...)``
            continue
        return False
    return False


_NUMPY_GENERATORS = frozenset({"numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator"})
# scikit-learn's toy-data generators: each returns NumPy arrays (``X``, or a tuple ``(X, y)`` / ``(X, t)`` of
# them; scikit-learn's API reference, sklearn.datasets). Diffusion and score-matching tutorials train on them.
_SKLEARN_ARRAYS = frozenset("sklearn.datasets." + n for n in (
    "make_moons", "make_circles", "make_blobs", "make_swiss_roll", "make_s_curve", "make_classification",
    "make_regression", "make_gaussian_quantiles", "make_friedman1", "make_friedman2", "make_friedman3"))
_NUMBER_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod)


def _numpy_array(m, v: ast.AST, scope, depth: int) -> bool:
    """``v`` evaluates to NumPy arrays (or a tuple of them), on the host: a scikit-learn toy-data call, an
    index of one (NumPy indexing of a host array gives a host array), arithmetic of one with a Python
    number, or a name bound to one of these (followed through at most :data:`limits.CONST_CHAIN` bindings).
    A list, a tuple display or a NumPy call is :func:`_host_data`'s own case; anything else is unknown."""
    if depth > L.CONST_CHAIN:
        return False
    if isinstance(v, ast.Subscript):
        return _numpy_array(m, v.value, scope, depth + 1)
    if isinstance(v, ast.BinOp) and isinstance(v.op, _NUMBER_OPS):
        for this, other in ((v.left, v.right), (v.right, v.left)):
            if isinstance(other, ast.Constant) and type(other.value) in (int, float):
                return _numpy_array(m, this, scope, depth + 1)
        return False
    if isinstance(v, ast.Name):
        ev = m.binding(v.id, scope, _pos(v))
        if ev is None or ev.kind != "assign" or ev.value is None or ev.value is v:
            return False
        return (_numpy_array(m, ev.value, ev.scope, depth + 1)
                or (ev.plain_assign and isinstance(ev.value, ast.Call) and _host_data(m, ev)))  # a NumPy call
    if isinstance(v, ast.Call):
        return m.resolve(v.func, scope) in _SKLEARN_ARRAYS
    return False


def _numpy_generator(m, recv: ast.AST, scope) -> bool:
    """``np.random.default_rng(seed)`` (or ``RandomState``), or a name bound once to one."""
    if isinstance(recv, ast.Name):
        ev = m.binding(recv.id, scope, _pos(recv))
        if ev is None or not ev.plain_assign or len(ev.scope.events.get(recv.id, ())) != 1:
            return False
        recv, scope = ev.value, ev.scope
    return isinstance(recv, ast.Call) and m.resolve(recv.func, scope) in _NUMPY_GENERATORS


def _varies_in_loop(m, expr: ast.AST, loop: Loop) -> bool:
    """Whether a name the expression reads gets a new value in the loop (``d`` in
    ``for d in devices: jax.device_put(x, d)``: one copy per device, not the same copy)."""
    for n in walk(expr):
        if isinstance(n, ast.Name):
            ev = m.binding(n.id, m.scope_at(expr), _pos(n))
            if ev is not None and loopfacts.rebound_each_iteration(m, n.id, ev, loop):
                return True
    return False


def _filled_later(m, ev) -> bool:
    """Whether a method call on the name bound by ``ev`` follows the binding in its scope
    (``xs.append(...)``, ``xs.extend(...)``): the container's contents are then not the display's."""
    if not isinstance(ev.node, ast.Name):
        return True
    name = ev.node.id
    start = _pos(ev.node)
    for c in [c for attr in ("append", "extend", "insert") for c in m.calls_by_name.get(attr, ())]:
        f = c.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == name \
                and _pos(c) > start and m.scope_at(c) is ev.scope:
            return True
    return False


def _changed_in_loop(m, name: str, loop: Loop) -> bool:
    for target, _kind in m.stores:
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == name:
            ctx = m.context(target)
            if ctx is not None and loop in ctx.loops:
                return True
    for c in loop.all_calls():
        f = c.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == name:
            return True  # ``X.fill(0)``, ``X.sort()``
        for kw in c.keywords:
            if kw.arg == "out" and isinstance(kw.value, ast.Name) and kw.value.id == name:
                return True
        if last_name(f) == "copyto" and c.args and isinstance(c.args[0], ast.Name) and c.args[0].id == name:
            return True
    return False


def per_iteration_loop(m, ctx: Optional[Context], syncs: bool = True) -> Optional[Loop]:
    """The step loop a host-side node runs in every iteration of: the innermost loop of JAX
    work around it (:meth:`hot_loop`), unless a periodic ``if`` guards the node, one iteration
    of the loop runs a whole program (:meth:`iteration_program`: the sync is once per
    rollout or epoch), the loop walks the points of a sweep (:meth:`sweep_loop`), or its only
    JAX work converts the elements it walks (:meth:`converts_elements`), or, for a sync (``syncs``:
    a fixed cost each time, unlike a copy whose cost grows with its size), the node runs only a
    few times in all (:meth:`few_iterations`)."""
    role = roles.sync_role(m, ctx, syncs)  # the one place this is decided, with its evidence
    return role.loop if role.kind == roles.PER_STEP else None

# -- syncs the host needs anyway


def lagged_sync(m, node: ast.AST, loop: Loop) -> bool:
    """A sync on an earlier iteration's value after this iteration queued its step
    (:func:`~jaxlint.model.pipelining.lagged_sync`): it lags the queue, it does not stall it."""
    return pipelining.lagged_sync(m, node, loop)


def collects_output(m, call: ast.Call, loop: Loop) -> bool:
    """Whether ``call`` (a host fetch) collects each iteration's output of an evaluation-style
    loop on the host: the loop threads no state through its JAX calls (:meth:`carried_state`:
    every iteration computes from the same inputs, as an eval or inference loop over batches
    does), and the fetched value goes into a host container that outlives the iteration
    (``preds.append(np.asarray(pred))``, ``keys += [np.asarray(k)]``, ``out[name] = ...``, a
    total over the pass: ``ncorrect += batch_ncorrect``),
    directly or through names assigned from it in the loop body (``logits = jax.device_get(logits)``
    and then ``logits_list.append(np.array(logits)[mask])``; ``out = jax.device_get(out)``,
    ``scores = out["psnr"][mask]``, ``psnrs.extend(scores)``). Fetching after the loop instead
    keeps every output in device memory until then and saves only the stall of each batch."""
    if fetches.host_fetch(m, call) is None or carried_state(m, loop):
        return False
    memo = work_memo(m)
    key = ("collects", id(call), id(loop))
    if key in memo:
        return memo[key]
    memo[key] = False
    held = {id(call)}
    names: set = set()
    body = getattr(loop.node, "body", None)
    if not isinstance(body, list):
        return False
    stmts = [sub for stmt in body for sub in walk(stmt) if isinstance(sub, ast.stmt)]

    def carries(expr: ast.AST) -> bool:
        return any(id(n) in held or (isinstance(n, ast.Name) and n.id in names) for n in walk(expr))

    # the names the fetched value reaches in the iteration, in order: ``out = device_get(out)``,
    # ``batch = out["psnr"][mask]``, then ``psnrs.extend(batch)``
    for st in stmts:
        if isinstance(st, ast.Assign) and carries(st.value):
            names |= {n.id for t in st.targets if not isinstance(t, ast.Subscript)
                      for n in walk(t) if isinstance(n, ast.Name)}

    for st in stmts:
        stored = None
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            c = st.value
            if (isinstance(c.func, ast.Attribute) and c.func.attr in _COLLECTING_METHODS
                    and isinstance(c.func.value, (ast.Name, ast.Attribute, ast.Subscript))):
                stored = c.args
        elif isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) and isinstance(
                st.value, (ast.List, ast.Tuple)):
            stored = st.value.elts
        elif isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) and isinstance(st.target, ast.Name) \
                and st.target.id not in names and not _bound_in(st.target.id, stmts):
            # ``ncorrect += batch_ncorrect``: a host total over the pass, summed from each batch's
            # fetched output. Of the same class as a list of outputs (issue 27: 4 of 4 such findings
            # in evaluators judged harmless: the loop carries no state, the pass runs now and then)
            stored = [st.value]
        elif isinstance(st, ast.Assign) and all(isinstance(t, ast.Subscript) for t in st.targets):
            stored = [st.value]
        if stored and any(carries(a) for a in stored):
            memo[key] = True
            return True
    return False


def _bound_in(name: str, stmts: list) -> bool:
    """``name`` is assigned (``=``, not ``+=``) by one of the loop body's statements: a value of the
    iteration, not a total carried over the loop."""
    return any(isinstance(st, (ast.Assign, ast.AnnAssign)) and any(
        isinstance(n, ast.Name) and n.id == name for t in (st.targets if isinstance(st, ast.Assign) else [st.target])
        for n in walk(t)) for st in stmts)


def in_check_function(m, node: ast.AST) -> bool:
    """Whether the node runs in a function named ``check*``/``verify*`` (or nested in one): a
    cross-check of results, whose asserts must see the values."""
    f = m.function_at(node)
    while f is not None:
        if m.conventions.matches("check-functions", f.name):
            return True
        f = f.parent
    return False


def fetch_spelling(model, call: ast.Call, value: Optional[ast.AST]) -> Optional[str]:
    """How a message names a host fetch: ``float(loss)``, ``x.item()``, a tree map's fetch."""
    if value is None:
        return None
    if len(call.args) >= 2 and value is call.args[1] and last_name(call.func) in ("map", "tree_map"):
        inner = fetches.mapped_fetch(model, call)
        how = f"`{unparse(inner, 30)}`" if inner is not None else f"`{unparse(call.args[0], 30)}`"
        return f"`{unparse(call.func)}(...)` with {how} on every leaf of `{unparse(value, 30)}`"
    if isinstance(call.func, ast.Attribute) and call.func.value is value:
        return f"`{unparse(value, 30)}.{call.func.attr}()`"
    if len(call.args) + len(call.keywords) > 1 or call.keywords:  # ``writer.scalar("loss", loss, step)``
        return f"`{unparse(call.func)}(...)` of `{unparse(value, 30)}`"
    return f"`{unparse(call.func)}({unparse(value, 30)})`"


def library_loop_fetches(m) -> list:
    """``(method, library class, call, spelling)`` for each host fetch made outside any loop or
    ``if`` in a method that a library's training loop calls at every step (``train()`` of a
    stable-baselines3 subclass: ``self.logger.record("loss", loss.item())``), not in test code and
    not handed to a host consumer."""
    out = []
    for f in m.functions:
        if f.cls is None or f.traced:
            continue
        library = libraryloops.library_loop_method(m, f)
        if library is None:
            continue
        for call in f.calls:
            ctx = m.context(call)
            if ctx is None or ctx.loops or m.function_at(call) is not f or not fetches.may_sync(m, call):
                continue
            what = fetch_spelling(m, call, fetches.host_fetch(m, call))
            if what is None or m.in_test_code(call) or ctx.guards:
                continue  # under an ``if``: not known to run at every call
            if hostneeds.host_consumer(m, call) is not None:
                continue
            out.append((f, library, call, what))
    return out


def waited_by_guard(m, node: ast.AST, loop: Loop, statement: Optional[ast.AST] = None) -> Optional[ast.AST]:
    """The test of an ``if`` around ``node`` inside ``loop`` that already reads on the host every JAX value
    ``node`` reads (the same bindings): ``if loss <= 1e-8 or isnan(loss): print(f"... {loss}")``. The test
    waited for those values in this iteration, and a JAX array keeps its host copy, so reading them again
    waits for nothing (fresh AG: an abnormal-loss branch's prints and re-tests, judged FALSE). ``statement``:
    the ``if`` whose test ``node`` is (its context holds the guards around it). None otherwise."""
    ctx = m.context(statement if statement is not None else node)
    if ctx is None or loop not in ctx.loops:
        return None
    scope = ctx.scope
    read = _jax_names(m, node, scope)
    if not read:
        return None
    inside = len(ctx.loops) - ctx.loops.index(loop)  # the guards at this loop's depth or deeper
    for test, depth in ctx.guards:
        if depth < len(ctx.loops) - inside + 1 or test is node:
            continue
        value = fetches.bool_sync(m, test, scope)
        if value is not None and read <= _jax_names(m, value, scope):
            return test
    return None


def _jax_names(m, node: ast.AST, scope) -> set:
    """``(name, binding position)`` of each JAX value a node reads by name."""
    out = set()
    for n in walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and V.is_jax(m, n, scope):
            ev = m.binding(n.id, scope, _pos(n))
            out.add((n.id, ev.pos if ev is not None else None))
    return out


# What each kind of sync is for, and how to avoid it: (what the host waits for, the fix).
SYNC_FIX = {
    "fetch": ("so the host waits for each step before it can dispatch the next",
              "keep it on device and fetch every N steps or once after the loop"),
    "format": ("so the host waits for each step before it can dispatch the next",
               "print or log every N steps, or keep the values on device and report them after the loop"),
    "if": ("to pick a branch", "test it every N steps, or branch on device with `jnp.where`/`lax.cond`"),
    "while": ("to decide whether to go on",
              "test it every N iterations, or run the whole loop on device with `lax.while_loop`"),
    "slice": ("so the host waits for each value before it can dispatch the slice",
              "take the bounds from host integers (`range(0, n, size)`), or slice on device with "
              "`jax.lax.dynamic_slice`"),
    "index": ("so the host waits for the previous step to finish before it can index",
              "convert the index to NumPy once before the loop (`np.asarray(perm)`), or keep the data on the "
              "device and index it there"),
    "shape": ("so the host waits for each step before it can size the result",
              "give the operation a static `size=` (and a `fill_value`), or move it into the jitted step"),
    "assert": ("to check it", "check every N steps or after the loop, or inside the step with `checkify`"),
}
