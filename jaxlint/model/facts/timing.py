"""Timed regions: wall-clock measurements around JAX work, and whether they wait for it.

JAX dispatches asynchronously: ``y = f(x)`` returns as soon as the work is queued. A clock read
after it measures the dispatch, not the computation, unless something in between waits for the
device. :func:`unwaited_timings` (a function of the model, not a mixin) finds the measurements
that do not wait:

* **clock pairs**: ``t0 = time.perf_counter()`` and a later clock read in the same block, with
  an elapsed time taken (``dt = time.perf_counter() - t0``, or ``t1 = ...`` and ``t1 - t0`` later);
  the region is the statements between the two reads;
* **timeit**: ``timeit.timeit(lambda: f(x), number=n)`` (also ``timeit.repeat``, ``timeit.Timer``):
  the region is the lambda's body, or the body of a function of this module passed by name;
* **timing magics**: a notebook's ``%timeit STMT``/``%time STMT`` line, or the body of a
  ``%%timeit``/``%%time`` cell (``notebook.timed_lines``): the region is those statements;
* **timer contexts**: ``with Timer(...):``, a context manager of this module that reads a clock
  and whose exit waits for nothing (a context manager of another module cannot be read: its exit
  may wait); the region is the ``with`` body.

A region needs waiting when it dispatches JAX work: a call of a compiled or transformed function,
a JAX array operation or arithmetic on JAX arrays. It waits when, after its last such work, it blocks
(``block_until_ready``), fetches a JAX value (``float``, ``np.asarray``, ``.item()``, ``jax.device_get``, ``str`` of
what the work returned, ``samples[i] = x`` into a NumPy array), prints or logs one, or calls a function of this module
that does. Calls we cannot see into are neither work nor waits (handed a JAX value, they may wait).
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from ... import names as N
from . import callables, containers, fetches, hostarrays, keys, libraryobjects, namedtuples, setuporder, timerclasses
from ..python import instances, limits as L
from . import values as V
from .jaxrecords import _waits
from ..python.syntax import _end, child_nodes, reads_name, rebinds_name, statement_walk, subtracts_name, walk
from .work import called_functions
from .clocks import CLOCK_NAMES as _CLOCK_NAMES, CLOCKS, TIMEIT_CALLS, is_clock  # noqa: F401 (timing's API)

# Methods of arrays that dispatch an operation (not a fetch: ``item``/``tolist`` are waits).
ARRAY_METHODS = frozenset({
    "sum", "mean", "max", "min", "std", "var", "prod", "argmax", "argmin", "reshape", "astype", "transpose",
    "dot", "squeeze", "flatten", "ravel", "clip", "round", "all", "any", "cumsum", "take", "swapaxes",
    "conj", "sort", "argsort", "repeat", "T", "at", "set", "add", "multiply", "get", "min", "max"})
# Host modules whose functions do not wait for the device (``time``, ``logging`` of host values).
_HOST_MODULES = frozenset({"time", "math", "random", "os", "sys", "itertools", "collections", "json", "re"})
_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try, ast.Match) + \
    ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
_NOT_RUN = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)  # a timed cell with one holds host work whose waits are not all seen


class TimedRegion:
    """A measurement that reads the clock while JAX work it timed may still run.

    ``kind``: "clock" | "timeit" | "context" | "magic" (``%timeit``, ``%%time``...: ``magic``).
    ``node``: where the measurement ends (the second clock read, the ``timeit`` call, the timer
    context's call, a magic's work). ``start``: the first clock read (clock pairs only). ``work``:
    the last call in the region that dispatches JAX work."""

    __slots__ = ("kind", "node", "work", "start", "magic")

    def __init__(self, kind: str, node: ast.AST, work: ast.Call, start: Optional[ast.AST] = None,
                 magic: Optional[str] = None):
        self.kind, self.node, self.work, self.start, self.magic = kind, node, work, start, magic


def _only_names(e: ast.AST, names: set) -> bool:
    """``x`` or ``(a, b)``: the expression is made of these names only, unchanged."""
    if isinstance(e, ast.Name):
        return e.id in names
    return isinstance(e, (ast.Tuple, ast.List)) and bool(e.elts) and all(_only_names(x, names) for x in e.elts)


def unwaited_timings(m) -> list:
    """Every :class:`TimedRegion` of the module, in source order."""
    memo = m.facts.timings
    if memo is not None:
        return memo
    out: list = []
    m.facts.timings = out
    clocks = any(is_clock(m, c) for c in m.calls_named(_CLOCK_NAMES))
    if clocks:  # one walk for the clock pairs; a timer object or a library's timer is a with statement
        for node in statement_walk(m.tree):
            out.extend(r for block, loop_body in _blocks_of(node) for r in _clock_pairs(m, block, loop_body))
    for node in m.with_nodes:
        out.extend(_context_region(m, node))
    for name in ("timeit", "repeat", "Timer"):
        for call in m.calls_by_name.get(name, ()):
            region = _timeit_region(m, call)
            if region is not None:
                out.append(region)
    for magic, first, last in m.timed_magics:  # a notebook's %timeit / %%time lines, without a loop
        stmts = [s for s in m.tree.body if first <= s.lineno <= last]
        work = None if any(isinstance(n, _LOOPS) for s in stmts for n in ast.walk(s)) else _unwaited(m, stmts)
        if work is not None:
            out.append(TimedRegion("magic", work, work, magic=magic))
    checked = setuporder.host_checked_lines(m)  # ``jax_debug_nans`` on: every JAX call waits for its result
    out[:] = [r for r in out if not any(a <= r.node.lineno <= b for a, b in checked)]
    out.sort(key=lambda r: (r.node.lineno, r.node.col_offset))
    return out



def _clock_pairs(m, block: list, loop_body: bool) -> Iterator[TimedRegion]:
    """Clock pairs in one statement list. In a loop's body the measurement may wrap around:
    ``st = time.time()`` last in the body, ``tt += time.time() - st`` after the next
    iteration's step (the region is the rest of the body, then its start up to the read)."""
    n = len(block)
    for i, stmt in enumerate(block):
        start = clock_assignment(m, stmt)
        if start is None:
            continue
        (name, start_call), order = start, list(range(i + 1, n)) + (list(range(0, i)) if loop_body else [])
        for k, j in enumerate(order):
            later = block[j]
            end, after = _clock_read(m, later, name), [block[x] for x in order[k:]]
            if end is not None and not any(subtracts_name(s, name) for s in after):
                break  # a second timestamp, not an elapsed time
            own = clock_assignment(m, later) if end is not None else None  # ``t1 = time.time()``, ``t1 - t0`` later?
            if end is None or not (subtracts_name(later, name, end) if own is None
                                   else any(subtracts_name(s, name, own[0]) for s in after[1:])):
                if rebinds_name(later, name):  # a new start, or a clock read that ends another measurement
                    break
                continue
            work = _unwaited(m, [block[x] for x in order[:k]])
            if work is not None and not _waits_before(m, later, end) and not _read_in_waiting_loop(m, later, end):
                yield TimedRegion("clock", end, work, start_call)
            break


def _read_in_waiting_loop(m, stmt: ast.stmt, clock: ast.Call) -> bool:
    """The clock is read in a loop (within ``stmt``) whose body waits in every iteration: a time since a start
    before the loop, logged per iteration; only the first read can miss work dispatched before the loop."""
    return any(isinstance(n, _LOOPS) and _inside(clock, n) and _work_and_waits(m, n.body, 0)[1] for n in walk(stmt))


def _clock_read(m, stmt: ast.stmt, name: str) -> Optional[ast.Call]:
    """The clock read that ends a measurement started into ``name``: any clock call in a
    simple statement; in a compound one (``if verbose: print(time.time() - t0)``), one in a
    statement that reads ``name``."""
    if not isinstance(stmt, _COMPOUND):
        return next((c for c in _calls_in([stmt]) if is_clock(m, c)), None)
    for sub in walk(stmt):
        if isinstance(sub, ast.stmt) and not isinstance(sub, _COMPOUND) and reads_name(sub, name):
            found = next((c for c in _calls_in([sub]) if is_clock(m, c)), None)
            if found is not None:
                return found
    return None


def _waits_before(m, stmt: ast.stmt, clock: ast.Call) -> bool:
    """Whether the statement that reads the clock waits before it reads it: Python evaluates
    left to right, so ``print(f"{epoch} {test_loss} ({time.time() - t0:.2f} s)")`` formats
    ``test_loss`` (a fetch) first, and ``log(float(loss), time.time() - t0)`` converts it."""
    start = (clock.lineno, clock.col_offset)
    scope = m.scope_at(clock)
    for n in walk(stmt):
        if isinstance(n, ast.FormattedValue):
            if _end(n.value) <= start and V.is_jax(m, n.value, scope):
                return True
        elif isinstance(n, ast.Call) and n is not clock and _end(n) <= start:
            if _device_role(m, n, 0) in ("wait", "maybe"):
                return True
    return False


def _timeit_region(m, call: ast.Call) -> Optional[TimedRegion]:
    if m.resolve(call.func, m.scope_at(call)) not in TIMEIT_CALLS:
        return None
    stmt = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "stmt"), None)
    if isinstance(stmt, ast.Lambda):
        work = _unwaited(m, [ast.Expr(stmt.body)])
    elif isinstance(stmt, ast.Name):
        fs = [f for f, compiled in called_functions(m, stmt, m.scope_at(call)) if not compiled]
        if len(fs) != 1 or isinstance(fs[0].node, ast.Lambda):
            return None
        work = _unwaited(m, fs[0].node.body)
    else:
        return None  # a string statement: not parsed here
    return TimedRegion("timeit", call, work) if work is not None else None


def _context_region(m, node: ast.AST) -> Iterator[TimedRegion]:
    for item in node.items:
        ctx = item.context_expr
        if not isinstance(ctx, ast.Call) or not timer_context(m, ctx):
            continue
        work = _unwaited(m, node.body)
        if work is not None:
            yield TimedRegion("context", ctx, work)
        return


def timer_context(m, ctx: ast.Call) -> bool:
    """Whether ``with ctx:`` measures wall-clock time without waiting when it exits: the
    context manager is defined in this module and reads a clock (a class whose ``__enter__``
    and ``__exit__`` read one; a ``@contextmanager`` function that reads one around its
    ``yield``), and its exit waits for nothing. A context manager of another module or a
    library cannot be read: its exit may wait, so it is not taken as a timer, whatever its
    name, unless the library's own code is known (``names.LIBRARY_TIMER_CONTEXTS``)."""
    scope = m.scope_at(ctx)
    if m.resolve(ctx.func, scope) in N.LIBRARY_TIMER_CONTEXTS:
        return True  # a library's timer whose exit only reads the clock (``mlxu.Timer()``)
    cls = instances.class_named(m, ctx.func, scope)
    if cls is not None:
        enter, exit_ = cls.methods.get("__enter__"), cls.methods.get("__exit__")
        if enter is None or exit_ is None:
            return False
        body = list(enter.node.body) + list(exit_.node.body)
        return (any(is_clock(m, c) for c in _calls_in(body))
                and not _work_and_waits(m, exit_.node.body, 1)[1])
    for f in callables.local_functions(m, ctx.func, scope):
        if isinstance(f.node, ast.Lambda):
            continue
        body = f.node.body
        yields = [n for n in walk(f.node) if isinstance(n, (ast.Yield, ast.YieldFrom))]
        if not yields or not any(is_clock(m, c) for c in _calls_in(body)):
            continue
        after = [c for c in _calls_in(body) if (c.lineno, c.col_offset) > (yields[0].lineno, yields[0].col_offset)]
        if not any(_device_role(m, c, 1) in ("wait", "maybe") for c in after):
            return True
    return timerclasses.instance_timer(m, ctx, (is_clock, _calls_in, _device_role))  # ``timer("train")``


def work_result_name(m, call: ast.Call) -> Optional[str]:
    """What the timed call's result is bound to (``y`` in ``y = f(x)``, ``params`` in
    ``params, loss = step(...)``: the first name), for messages; None when it is not bound."""
    stmt = m.stmt_of.get(id(call))
    if stmt is None:
        for node in walk(m.tree):
            if isinstance(node, ast.Assign) and node.value is call:
                stmt = node
                break
    if isinstance(stmt, ast.Assign) and stmt.value is call:
        for t in stmt.targets:
            names = [n.id for n in walk(t) if isinstance(n, ast.Name) and n.id != "_"]
            if names:
                return names[0]  # the outputs of one compiled call are ready together
    return None

# -- work and waits


def _unwaited(m, stmts: list, depth: int = 0) -> Optional[ast.Call]:
    """The last call in ``stmts`` that dispatches JAX work, when nothing after it waits or may
    wait (:func:`_device_role`), and no loop around it in the region waits in each iteration
    (then at most the last iterations go unmeasured)."""
    last_work, waits = _work_and_waits(m, stmts, depth)
    if last_work is None:
        return None
    if any(_end(w) >= _end(last_work) for w in waits):
        return None
    for stmt in stmts:
        for loop in walk(stmt):
            if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) and _inside(last_work, loop) and any(
                    _inside(w, loop) for w in waits):
                return None
    return last_work


def _work_and_waits(m, stmts: list, depth: int) -> tuple:
    """The last call in ``stmts`` that dispatches JAX work (None if none), and every node that
    waits or may wait: ``bool()`` tests of device values and "wait"/"maybe" calls."""
    last_work: Optional[ast.Call] = None
    waits: list = list(_tests_on_device(m, stmts))
    waits += [a.value for a in _calls_in(stmts, ast.Assign) if hostarrays.numpy_store(m, a)]  # a NumPy store copies
    for c in _calls_in(stmts):
        kind = _device_role(m, c, depth)
        if kind == "work":
            if last_work is None or _end(c) > _end(last_work):
                last_work = c
        elif kind in ("wait", "maybe"):
            waits.append(c)
    results = {n.id for a in _calls_in(stmts, ast.Assign) if isinstance(a.value, ast.Call) and _device_role(
        m, a.value, depth) == "work" for t in a.targets for n in walk(t) if isinstance(n, ast.Name)}
    waits += fetches.host_reads(m, _calls_in(stmts), results)  # ``str(y)`` of a dispatched ``y = f(x)``
    for node in _calls_in(stmts, ast.BinOp):  # eager arithmetic on a JAX array (``O = A + B``): a dispatch
        if (last_work is None or _end(node) > _end(last_work)) and V.is_jax(m, node, m.scope_at(node)):
            last_work = node
    return last_work, waits


def _tests_on_device(m, stmts: list) -> Iterator[ast.AST]:
    """``if``/``while``/``assert`` tests and conditional expressions on a JAX value: ``bool()``
    of it waits for the device."""
    for stmt in stmts:
        for node in walk(stmt):
            if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)) and V.is_jax(m, node.test, m.scope_at(node)):
                yield node.test


def _device_role(m, c: ast.Call, depth: int) -> Optional[str]:
    """"work" (dispatches JAX work: a compiled or transformed call, a JAX array operation or
    array method), "wait" (waits for the device), "maybe" (code we cannot see into that is
    handed a JAX value, and may wait: ``unreplicate_and_get(metrics)``, ``state.save_svg()``),
    "upload" (an array made of host values: neither work to time nor a wait) or None (neither:
    host code on host values). Memoized per call and depth."""
    memo = m.facts.timing_roles
    key = (id(c), depth)
    if key in memo:
        return memo[key]
    memo[key] = "maybe"  # a cycle of helpers sees "may wait" meanwhile
    memo[key] = role = _role(m, c, depth)
    return role


def _role(m, c: ast.Call, depth: int) -> Optional[str]:
    if not m.work.spend():
        return "maybe"
    scope = m.scope_at(c)
    qn = m.resolve(c.func, scope)
    if _waits(c) or qn == N.BLOCK_UNTIL_READY:
        return "wait"
    if fetches.host_fetch(m, c) is not None or fetches.formats_jax_call(m, c):
        return "wait"
    if callables.callable_info(m, c.func, scope) is not None:
        if _compiles_nothing(m, c, scope):
            return None  # a jitted function with an empty body: no device work to wait for
        return "wait" if _calls_back(m, c, scope) else "work"
    f = c.func
    if isinstance(f, ast.Attribute) and qn is None and libraryobjects.imported_dispatching_method(m, c, scope):
        return "work"  # ``sac.train(batch)``, ``agent.update(batch)``: a method of a project class that only dispatches
    if isinstance(f, ast.Attribute) and qn is None and V.is_jax(m, f.value, scope):
        return "work" if f.attr in ARRAY_METHODS else "maybe"
    if (qn in _UPLOADS or qn in keys.KEY_MAKERS) and c.args and not V.is_jax(m, c.args[0], scope):
        return "upload"  # ``jnp.array(energies)``, ``PRNGKey(0)``: an array of host values, no work to time, no wait
    if qn is not None and qn.startswith("jax.") and V.is_jax(m, c, scope) or keys.keyed_apply(m, c, scope):
        return "work"  # a JAX call giving arrays, or a module's ``apply(params, x, rngs={"dropout": key})``
    if qn in _DISPATCHING_HELPERS:
        return "work"  # ``unreplicate(state)`` indexes the device axis, asynchronously: it waits for nothing
    if qn in N.TREE_MAPS and c.args and isinstance(c.args[0], ast.Lambda) and _indexes_only(m, c.args[0], depth):
        return None  # ``jax.tree.map(lambda x: x[0], metrics)``: an index of every leaf, dispatched, no wait
    if qn in N.LIBRARY_STORING_FUNCTIONS or (isinstance(f, (ast.Name, ast.Attribute))
                                             and namedtuples.constructs_record(m, c, scope)):
        return None  # ``Posterior(ll, probs)`` of a ``NamedTuple`` class: stores the values, reads nothing
    if depth < L.PROGRAM_HORIZON:
        # A Python function of this module counts as a wait when it waits after its own last
        # JAX work (it "itself blocks"). It never counts as unwaited work: what it calls after
        # its work may wait unseen.
        callees = called_functions(m, f, scope)
        for g, compiled in callees:
            if isinstance(g.node, ast.Lambda) and not (compiled or g.traced) and isinstance(g.node.body, ast.Call):
                inner = _device_role(m, g.node.body, depth + 1)  # ``lambda p, s: unpack(p, s, jit=True)``
                if inner in ("work", "wait"):
                    return inner
                continue
            if compiled or g.traced or isinstance(g.node, ast.Lambda):
                return "work"
            if _waits_last(m, g.node.body, depth + 1):
                return "wait"
        if len(callees) == 1 and not isinstance(callees[0][0].node, (ast.AsyncFunctionDef, ast.Lambda)) and (  # (a coroutine)
                _dispatches_only(m, callees[0][0].node.body, depth + 1) or _ends_in_work(m, callees[0][0].node, depth + 1)):
            return "work"  # a helper that dispatches JAX work and returns: ``render_image(params, x)``
        if callees:
            return "maybe" if _takes_jax(m, c, scope, depth) else None
    if _stores_only(m, c, scope):
        return None  # ``q.put(params)`` on a ``queue.Queue``: keeps the value, reads nothing
    if libraryobjects.dispatch_only_method(m, c, scope) or libraryobjects.compiled_factory_result(m, c, scope):
        return "work"  # ``strategy.tell(x, fitness, state)`` of an evosax strategy: jax.numpy work
    if qn is not None and (qn.startswith("builtins.") or qn.split(".", 1)[0] in _HOST_MODULES):
        return None
    return "maybe" if _takes_jax(m, c, scope, depth) else None


# Library helpers that dispatch JAX work and return at once (flax's pmap helpers: an index or a device_put
# of each leaf, measured on jax 0.10.2 CPU to return before the indexed value is ready).
_DISPATCHING_HELPERS = frozenset({"flax.jax_utils.unreplicate", "flax.jax_utils.replicate"})

# Arrays made from what they are given: of host values (not shown to be JAX values) they upload, compute nothing
# (fresh AE: a scan of SCF runs that each fetch their energy, ending in ``jnp.array(energies)``).
_UPLOADS = frozenset({"jax.numpy.array", "jax.numpy.asarray", "jax.device_put"})

# Array operations that only dispatch: a helper made of these and compiled calls waits for nothing.
_DISPATCH_PREFIXES = ("jax.numpy.", "jax.lax.", "jax.random.", "jax.nn.")


def _dispatches_only(m, stmts: list, depth: int) -> bool:
    """A helper's body whose every call is a compiled call that does not call back to the host or
    a ``jax.numpy``/``lax``/``random``/``nn`` array operation, with at least one compiled call:
    it dispatches work and returns (``def render_image(p, x): return step(p, x)``). Any other call
    (a method, another helper, NumPy, a library) may wait where this module cannot see: then the
    helper is not known to leave its work running (issue 27: two such helpers read more loosely
    were judged to wait inside their callees)."""
    compiled = False
    for c in _calls_in(stmts):
        scope = m.scope_at(c)
        if callables.callable_info(m, c.func, scope) is not None:
            if _calls_back(m, c, scope):
                return False
            compiled = True
            continue
        qn = m.resolve(c.func, scope)
        if qn is None or not qn.startswith(_DISPATCH_PREFIXES):
            return False
    return compiled


def _ends_in_work(m, func: ast.AST, depth: int) -> bool:
    """A helper (a def, not a generator) that dispatches JAX work and, from its first work on,
    runs only more JAX work and code proven not to wait: host builtins and host modules, record
    constructors (``Posterior(ll, probs)``: :mod:`.namedtuples`), thread-queue puts; no test on a
    device value, no call jaxlint cannot see into (even one handed no JAX value: it may read state
    that holds one). ``def smoother(...): ...; _, posts = lax.scan(step, carry, xs); return
    Posterior(...)`` returns while the scan runs. Some of the work runs on every path (in a simple
    statement of the body, no ``return`` before it). What runs before its first work may wait: it
    waits for nothing the helper dispatches."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    stmts = func.body
    calls = [(c, _device_role(m, c, depth)) for c in _calls_in(stmts)]
    works = [c for c, role in calls if role == "work"]
    if not works or any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in walk(func)):
        return False
    # work that runs on every path: in a simple statement of the body, with no return before it
    sure = [c for c in works if any(not isinstance(st, _COMPOUND) and _inside(c, st) for st in stmts)]
    if not sure or any(_end(r) < _end(sure[0]) for r in callables.returned_nodes(func)):
        return False
    first = min(_end(c) for c in works)
    loops = [lp for st in stmts for lp in walk(st) if isinstance(lp, (ast.For, ast.AsyncFor, ast.While))
             and any(_inside(c, lp) for c in works)]

    def after(node: ast.AST) -> bool:
        return _end(node) > first or any(_inside(node, lp) for lp in loops)

    if any(after(t) for t in _tests_on_device(m, stmts)):
        return False
    for c, role in calls:
        if role in ("work", "upload") or not after(c):
            continue
        scope = m.scope_at(c)
        qn = m.resolve(c.func, scope)
        if role is None and qn is not None and (qn.startswith("builtins.") or qn.split(".", 1)[0] in _HOST_MODULES):
            continue
        if _stores_only(m, c, scope) or namedtuples.constructs_record(m, c, scope):
            continue
        return False
    return True


def dispatching_methods_of(m) -> dict:
    """``{class: methods}``: the methods of this module's top-level classes, defined in the class
    itself, that run compiled code when called (a jitted method) or end in unwaited JAX work
    (:func:`_ends_in_work`), for other modules' timed regions (the summary asks on demand)."""
    out: dict = {}
    for stmt in m.tree.body:
        cls = m.classes.get(id(stmt)) if isinstance(stmt, ast.ClassDef) else None
        if cls is None:
            continue
        names = frozenset(name for name, meth in cls.methods.items()
                          if (meth.jit_entry is not None and meth.jit_entry.decorator)
                          or _ends_in_work(m, meth.node, 1))
        if names:
            out[stmt.name] = names
    return out


# Thread queues and deques of the standard library: ``put``/``append`` keeps a reference to the object in
# this process, reading nothing of it. Not ``multiprocessing``'s queues: they pickle what they are
# given (in a feeder thread, or at once for ``SimpleQueue``), and pickling a JAX array fetches it
# to the host.
_QUEUE_TYPES = frozenset({"queue.Queue", "queue.SimpleQueue", "queue.LifoQueue", "queue.PriorityQueue",
                          "collections.deque"})
_STORING_METHODS = frozenset({"put", "put_nowait", "append", "appendleft"})


def _stores_only(m, c: ast.Call, scope) -> bool:
    """``q.put(x)``/``d.append(x)`` on a standard-library thread queue or deque (a name bound to one,
    an element of a list of them: :func:`containers.element_maker`), or on a list display (``xs = []``)."""
    f = c.func
    if not (isinstance(f, ast.Attribute) and f.attr in _STORING_METHODS):
        return False
    receiver = f.value
    if isinstance(receiver, ast.Subscript) and isinstance(receiver.value, ast.Name):
        return containers.element_maker(m, receiver.value, scope) in _QUEUE_TYPES
    if not isinstance(receiver, ast.Name):
        return False
    ev = m.binding(receiver.id, scope, (receiver.lineno, receiver.col_offset))
    if ev is not None and ev.plain_assign and isinstance(ev.value, ast.List) and f.attr == "append":
        return True  # ``chunks.append(out)`` on a list: keeps a reference, reads nothing
    if ev is None or not ev.plain_assign or not isinstance(ev.value, ast.Call):
        return False
    return m.resolve(ev.value.func, ev.scope) in _QUEUE_TYPES


def _compiles_nothing(m, c: ast.Call, scope) -> bool:
    """Whether every function of this module the compiled call runs has an empty body (``pass``,
    a docstring, ``return`` of nothing, a constant, or its own parameters unchanged: ``return
    graphdef, state``): its program computes nothing (at most XLA copies the inputs to the
    outputs; measured on jax 0.10.2, the lowered program is ``return %arg0, %arg1``), so the
    call dispatches no device work worth waiting for (a benchmark of dispatch overhead)."""
    funcs = called_functions(m, c.func, scope)
    if not funcs:
        return False
    for g, _ in funcs:
        body = getattr(g.node, "body", None)
        if not isinstance(body, list):
            return False  # a lambda: its body is an expression
        params = set(g.params) | set(g.kwonly)
        for stmt in body:
            if isinstance(stmt, ast.Pass):
                continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # the docstring
            if isinstance(stmt, ast.Return) and (stmt.value is None or isinstance(stmt.value, ast.Constant)
                                                 or _only_names(stmt.value, params)):
                continue
            return False
    return True


def _calls_back(m, c: ast.Call, scope) -> bool:
    """Whether the compiled code this call runs (a function of this module) calls back to the
    host (``jax.debug.print``, ``io_callback``): the call then waits for the program on CPU
    (measured), and maybe elsewhere, so timing it is not a dispatch-only measurement."""
    for g, _ in called_functions(m, c.func, scope):
        if any(m.resolve(k.func, g.scope) in N.HOST_CALLBACKS for k in g.calls):
            return True
    return False


def _takes_jax(m, c: ast.Call, scope, depth: int = 0) -> bool:
    """Whether the call is handed a JAX value: an argument (or its receiver) that is one, or the
    direct result of a call that dispatches JAX work (``harness(postprocess(rgb))``)."""
    args = [a.value if isinstance(a, ast.Starred) else a for a in c.args] + [k.value for k in c.keywords]
    if isinstance(c.func, ast.Attribute):
        args.append(c.func.value)
    return any(V.is_jax(m, a, scope) or (isinstance(a, ast.Call) and _device_role(m, a, depth + 1) == "work")
               or _bound_to_work(m, a, scope, depth) for a in args)


def _indexes_only(m, fn: ast.Lambda, depth: int) -> bool:
    """A lambda whose body calls nothing but JAX work (``lambda x: x[0]``, ``lambda x: x * 2``):
    on a device array, it dispatches and waits for nothing (a fetch would be a call). Mapped over
    a tree it is neither a wait nor work worth naming (the timed work is what made the tree)."""
    return all(_device_role(m, c, depth + 1) == "work" for c in _calls_in([ast.Expr(fn.body)]))


def _bound_to_work(m, a: ast.AST, scope, depth: int) -> bool:
    """``metrics`` (or ``metrics["loss"]``, ``out.probs``) bound to the result of a call that
    dispatches JAX work that the value facts cannot type (a library's pmap, a helper): a device
    value, for what it is handed to."""
    while isinstance(a, (ast.Subscript, ast.Attribute)):
        a = a.value
    if not isinstance(a, ast.Name) or depth >= L.PROGRAM_HORIZON:
        return False
    ev = m.binding(a.id, scope, (a.lineno, a.col_offset))
    return (ev is not None and ev.kind == "assign" and isinstance(ev.value, ast.Call)
            and _device_role(m, ev.value, depth + 1) == "work")


def _waits_last(m, stmts: list, depth: int) -> bool:
    """Whether a function body (called in a timed region) waits for the device after its last
    JAX work."""
    last_work, waits = _work_and_waits(m, stmts, depth)
    if last_work is None:
        return bool(waits)
    return any(_end(w) >= _end(last_work) for w in waits)


def _blocks_of(node: ast.AST) -> Iterator[tuple]:
    """The statement lists of one node (body, ``else`` and ``finally`` clauses; a handler's body),
    with whether it is a loop's body (which runs again after its last statement)."""
    for field in ("body", "orelse", "finalbody"):
        stmts = getattr(node, field, None)
        if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
            yield stmts, field == "body" and isinstance(node, (ast.For, ast.AsyncFor, ast.While))


def clock_assignment(model, stmt: ast.stmt) -> Optional[tuple]:
    """``t0 = time.perf_counter()`` -> ("t0", the call)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target, value = stmt.target, stmt.value
    else:
        return None
    if isinstance(target, ast.Name) and isinstance(value, ast.Call) and is_clock(model, value):
        return target.id, value
    return None


def _calls_in(stmts: list, kind=ast.Call) -> Iterator[ast.Call]:
    """Calls (or nodes of ``kind``) run when the statements run (not in nested defs or lambdas), in order."""
    found: list = []
    todo = list(stmts)
    while todo:
        node = todo.pop()
        if isinstance(node, _NOT_RUN):
            continue
        if isinstance(node, kind):
            found.append(node)
        todo.extend(child_nodes(node))
    found.sort(key=lambda c: (c.lineno, c.col_offset))
    return iter(found)


def _inside(node: ast.AST, outer: ast.AST) -> bool:
    return (outer.lineno, outer.col_offset) <= (node.lineno, node.col_offset) and _end(node) <= _end(outer)
