"""How much JAX work one iteration of a loop does.

A per-iteration sync costs the time the accelerator idles while the host dispatches the next
iteration: much next to a small jitted step, nothing next to a whole program. The queries here
tell the kinds of iteration apart:

* a **step**: one small computation (a jitted train step, an eager batch of ``jnp`` ops);
* a **program**: an unconditional call that runs many steps on its own -- a compiled function
  whose body is a device loop (``lax.scan``/``fori_loop``/``while_loop`` over a rollout or an
  epoch), or a Python function of this module with a loop of jitted steps inside (``train_epoch()``);
* a **sweep point**: one configuration of a sweep (``for l2 in l2_regs: results[shots, l2] = ...``),
  whose elements are hashable keys, not data.

It also says which names a loop threads through its JAX calls (``params = step(params, batch)``):
a training or simulation loop carries state, a benchmark repeats one call on the same inputs.

Functions of the model (``m``), not a mixin: roles, hostneeds, transfers, timing, the project
resolver and JAX201/JAX202 import them; ``work_memo(m)`` is the per-model memo these facts share.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from ... import names as N
from . import callables, nnxdonation
from ..python import limits as L
from . import values as V
from .deviceloops import DEVICE_LOOPS, small_trip_count
from .jaxrecords import blocked_names
from ..python.records import FunctionInfo, Loop, Scope
from ..python.syntax import _pos, last_name, walk

# An optimizer update in the body of a compiled function makes it one training step, even
# with a device loop beside it (gradient accumulation over micro-batches).
_UPDATE_CALLS = frozenset({"apply_updates", "apply_gradients"})
# A differentiated function is the forward pass of one step, whatever loops it runs.
_DIFFERENTIATING = frozenset({q for q, policy in N.TRANSFORMS.items() if policy == "argnums"} | {
    "jax.vjp", "jax.jvp", "jax.linearize", "equinox.filter_grad", "equinox.filter_value_and_grad",
    "flax.nnx.grad", "flax.nnx.value_and_grad"})


def _is_update(call: ast.Call, cur) -> bool:
    f = call.func
    name = last_name(f)
    if name in _UPDATE_CALLS:
        return True
    if name == "update" and isinstance(f, ast.Attribute):
        recv = last_name(f.value).lower() if isinstance(f.value, (ast.Name, ast.Attribute)) else ""
        return cur.matches("optimizer-receivers", recv)
    return False


def _updates_per_iteration(m, loop) -> bool:
    """A Python loop, not a short literal one, that makes an optimizer update in every iteration
    (nested loops included)."""
    if loop.kind == "comprehension" or loop.bounded:
        return False
    return any(_is_update(c, m.conventions) for c in loop.all_calls())


def work_memo(m) -> dict:
    memo = m.facts.work_memo
    if memo is None:
        memo = m.facts.work_memo = {}
    return memo

# -- what a call runs


def called_functions(m, func: ast.AST, scope: Scope) -> list:
    """``(function, compiled)`` for the functions of this module that calling ``func`` runs:
    a def, a method, a lambda, through ``jax.jit``/``pmap``/transforms and ``partial``, names
    bound to them, and functions returned by a factory of this module (``step = make_step()``,
    ``learn, net, state = setup(...)``). ``compiled``: the call runs it under jit/pmap or a
    transform rather than as Python. Differentiated functions (``jax.grad(loss)``) are left
    out: they are the forward pass of one step."""
    return _callees(m, func, scope, 0, False)


def _callees(m, expr: ast.AST, scope: Scope, depth: int, compiled: bool) -> list:
    if depth > L.CALLABLE_CHAIN or not m.work.spend():
        return []
    if isinstance(expr, ast.Lambda):
        f = m.func_of_node.get(id(expr))
        return [(f, compiled)] if f is not None else []
    if isinstance(expr, ast.Name):
        ev = m.binding(expr.id, scope, _pos(expr))
        if ev is None:
            return []
        if ev.kind == "def":
            f = m.func_of_node.get(id(ev.node))
            if f is None:
                return []
            by_decorator = f.jit_entry is not None or any(c.decorator for c in f.trace_causes)
            return [(f, compiled or by_decorator)]
        if ev.kind != "assign" or ev.value is None:
            return []
        if ev.path is None:
            return _callees(m, ev.value, ev.scope, depth + 1, compiled)
        if len(ev.path) == 1:
            if isinstance(ev.value, (ast.Tuple, ast.List)) and ev.path[0] < len(ev.value.elts):
                return _callees(m, ev.value.elts[ev.path[0]], ev.scope, depth + 1, compiled)
            if isinstance(ev.value, ast.Call):
                return _factory_results(m, ev.value, ev.scope, depth, compiled, ev.path[0])
        return []
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
        cls = m._class_of(scope)
        if cls is None:
            return []
        out = []
        for value in cls.self_attrs.get(expr.attr, ()):
            out += _callees(m, value, m.scope_at(value), depth + 1, compiled)
        meth = cls.methods.get(expr.attr)
        if meth is not None:
            by_decorator = meth.jit_entry is not None or any(c.decorator for c in meth.trace_causes)
            out.append((meth, compiled or by_decorator))
        return out
    if isinstance(expr, ast.Call):
        qn = m.resolve(expr.func, scope)
        if qn in _DIFFERENTIATING:
            return []
        if (qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS) and expr.args:
            return _callees(m, expr.args[0], scope, depth + 1, True)
        if qn == N.PARTIAL and expr.args:
            return _callees(m, expr.args[0], scope, depth + 1, compiled)
        if isinstance(expr.func, ast.Call) and callables._jit_factory(m, expr.func, scope) and expr.args:
            return _callees(m, expr.args[0], scope, depth + 1, True)  # partial(jax.jit, ...)(f)
        return _factory_results(m, expr, scope, depth, compiled, None)
    return []


def _factory_results(m, call: ast.Call, scope: Scope, depth: int, compiled: bool,
                     index: Optional[int]) -> list:
    """The functions a call of a factory of this module returns (element ``index`` of a
    returned tuple)."""
    out = []
    for g, _ in _callees(m, call.func, scope, depth + 1, False):
        for r in g.returns:
            if index is not None:
                if not isinstance(r, (ast.Tuple, ast.List)) or index >= len(r.elts):
                    continue
                r = r.elts[index]
            if isinstance(r, (ast.Name, ast.Attribute, ast.Call, ast.Lambda)):
                out += _callees(m, r, g.scope, depth + 1, compiled)
    return out


def runs_program(m, call: ast.Call) -> bool:
    """Whether the call runs many steps on its own: a compiled function whose body is a
    device loop (not one training step with a short loop inside), or a Python function of
    this module with a loop of calls of compiled code."""
    memo = work_memo(m)
    key = ("call", id(call))
    if key not in memo:
        memo[key] = False
        scope = m.scope_at(call)
        qn = m.resolve(call.func, scope)
        if qn in DEVICE_LOOPS:
            # ``lax.fori_loop(0, n, body, state)`` called outside jit: one compiled device loop
            memo[key] = not small_trip_count(call, qn)
        elif qn in N.LIBRARY_PROGRAMS or qn in N.SEARCH_PROGRAMS or _solver_run(m, call, scope):
            memo[key] = True
        elif _imported_program(m, call.func, scope):
            memo[key] = True
        else:
            memo[key] = any(_function_runs_program(m, f, compiled, 0)
                            for f, compiled in called_functions(m, call.func, scope))
    return memo[key]


def _function_runs_program(m, f: FunctionInfo, compiled: bool, depth: int) -> bool:
    if depth > L.PROGRAM_HORIZON or not m.work.spend():
        return False
    memo = work_memo(m)
    key = ("func", id(f), compiled)
    if key in memo:
        return memo[key]
    memo[key] = False  # cycle guard
    result = False
    if compiled or f.traced:
        loops = [c for c in f.calls if ((qn := m.resolve(c.func, f.scope)) in DEVICE_LOOPS
                                        and not small_trip_count(c, qn)) or qn in N.SEARCH_PROGRAMS]
        if loops:
            result = not any(_is_update(c, m.conventions) for c in f.calls)
        elif any(_updates_per_iteration(m, lp) for lp in f.loops):
            # ``for _ in range(epochs): for mb in ...: state = state.apply_gradients(...)`` unrolled
            # in one compiled function: every call makes many optimizer updates, not one step
            result = True
        else:
            # a compiled function that hands its work to a helper: ``return rollout(state)``
            result = any(_function_runs_program(m, g, True, depth + 1)
                         for c in f.calls for g, _ in _callees(m, c.func, f.scope, 0, True))
    else:
        # a Python function that loops over compiled steps, calls a device loop outside jit
        # (``return lax.fori_loop(0, n, body, state)``), or calls a function that does
        result = any(_dispatches_steps(m, lp) for lp in f.loops) or any(
            ((qn := m.resolve(c.func, f.scope)) in DEVICE_LOOPS and not small_trip_count(c, qn))
            or qn in N.LIBRARY_PROGRAMS or qn in N.SEARCH_PROGRAMS or _solver_run(m, c, f.scope)
            for c in f.calls) or any(
            _function_runs_program(m, g, c2, depth + 1)
            for c in f.calls for g, c2 in _callees(m, c.func, f.scope, 0, False))
    memo[key] = result
    return result


def function_runs_program(m, name: str) -> bool:
    """Whether this module's top-level function ``name`` runs many steps on its own (asked by
    other modules of the project through :meth:`~jaxlint.project.ProjectResolver.runs_program`)."""
    ev = m.module_scope.events.get(name)
    if not ev or len(ev) != 1 or ev[0].kind != "def":
        return False
    f = m.func_of_node.get(id(ev[0].node))
    if f is None:
        return False
    compiled = f.jit_entry is not None or any(c.decorator for c in f.trace_causes)
    return _function_runs_program(m, f, compiled, 0)


def _imported_program(m, func: ast.AST, scope: Scope) -> bool:
    """``train_epoch(...)`` after ``from .trainer import train_epoch`` (or ``trainer.train_epoch``
    after ``from . import trainer``): a function of another module of the project that runs a
    whole program."""
    found = callables.imported_function(m, func, scope)
    return found is not None and found[0].runs_program(found[1])


def _solver_run(m, call: ast.Call, scope: Scope) -> bool:
    """``solver.run(init, ...)`` where ``solver`` is bound to an instance of a library solver
    class (``jaxopt.BlockCoordinateDescent(...)``): the whole solve, a program of its own."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in N.SOLVER_RUN_METHODS):
        return False
    recv = func.value
    if isinstance(recv, ast.Call):
        made = recv
    elif isinstance(recv, ast.Name):
        ev = m.binding(recv.id, scope, _pos(recv))
        if ev is None or not ev.plain_assign or not isinstance(ev.value, ast.Call):
            return False
        made, scope = ev.value, ev.scope
    else:
        return False
    qn = m.resolve(made.func, scope)
    return qn is not None and qn.startswith(N.SOLVER_CLASS_PREFIXES)


def _dispatches_steps(m, loop: Loop) -> bool:
    """A ``for``/``while`` loop (not a comprehension building one batch, not a short literal
    loop) whose iterations call compiled or transformed code: a loop of steps."""
    if loop.kind == "comprehension" or loop.bounded or _walks_keys(loop):
        return False
    return any(callables.callable_info(m, c.func, m.scope_at(c)) is not None for c in loop.all_calls())


def _walks_keys(loop: Loop) -> bool:
    """``for k in image_keys: obs = obs.copy({k: crop(obs[k], rng)})``: the loop's target is used
    only to index a structure or as a key of one, so the loop walks the parts of one structure (a
    camera per key), not steps."""
    node = loop.node
    if not isinstance(node, (ast.For, ast.AsyncFor)) or not isinstance(node.target, ast.Name):
        return False
    name, keys, uses = node.target.id, set(), 0
    for stmt in node.body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Name) and n.slice.id == name:
                keys.add(id(n.slice))
            elif isinstance(n, ast.Dict):
                keys.update(id(k) for k in n.keys if isinstance(k, ast.Name) and k.id == name)
            elif isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
                uses += 1
    return uses > 0 and uses == len(keys)

# -- what one iteration does


def unconditional_calls(m, loop: Loop) -> Iterator[ast.Call]:
    """Calls made in every iteration of the loop: not under an ``if`` inside it, nor in a
    nested loop (except bounded ones, which are seen through)."""
    def conditional(call: ast.Call) -> bool:
        ctx = m.context(call)
        return ctx is None or any(depth > loop.depth for _, depth in ctx.guards) or any(
            _branch_in(m, if_id, loop) for if_id, _ in ctx.branches)

    for call in loop.calls:
        if not conditional(call):
            yield call
    for ch in loop.children:
        if ch.bounded:
            yield from (c for c in unconditional_calls(m, ch) if not conditional(c))


def ifs_by_id(m) -> dict:
    """The module's ``if`` statements by id (what ``Context.branches`` names), made once."""
    table = m.facts.ifs_by_id
    if table is None:
        table = m.facts.ifs_by_id = {id(n): n for n in m.ifs if isinstance(n, ast.If)}
    return table


def _branch_in(m, if_id: int, loop: Loop) -> bool:
    node = ifs_by_id(m).get(if_id)
    ctx = m.context(node) if node is not None else None
    return ctx is not None and loop in ctx.loops


def iteration_program(m, loop: Loop) -> Optional[ast.Call]:
    """The call that makes one iteration of the loop a whole program (see :func:`runs_program`),
    made in every iteration; None when the iteration is a step."""
    memo = work_memo(m)
    key = ("loop", id(loop))
    if key not in memo:
        memo[key] = None
        memo[key] = next((c for c in unconditional_calls(m, loop) if runs_program(m, c)), None)
    return memo[key]


def walked_mapping(m, loop: Loop) -> Optional[str]:
    """The mapping a ``for`` loop walks entry by entry: it iterates the mapping's keys (``for k in
    keys`` with ``keys = [k for k in sd]``, ``list(sd)``, ``sorted(sd)``, ``sd.keys()``) and its body
    reads the mapping by each key (``sd[k]``): a pass over the parts of one structure (copying a
    checkpoint's weights into a model), whatever state it threads through, not a loop of steps.
    Memoized per loop (the sync role of every host read in the loop asks)."""
    memo = work_memo(m)
    key = ("walked", id(loop))
    if key not in memo:
        memo[key] = _walked_mapping(m, loop)
    return memo[key]


def _walked_mapping(m, loop: Loop) -> Optional[str]:
    node = loop.node
    if not isinstance(node, (ast.For, ast.AsyncFor)) or not isinstance(node.target, ast.Name):
        return None
    ctx = m.context(node)
    source = _keys_source(m, node.iter, ctx.scope if ctx is not None else m.module_scope, 0)
    if source is None:
        return None
    spelled, key = ast.unparse(source), node.target.id
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Name) and n.slice.id == key \
                and ast.unparse(n.value) == spelled:
            return spelled
    return None


def _keys_source(m, it: ast.AST, scope: Scope, depth: int) -> Optional[ast.AST]:
    """The collection whose keys (elements) ``it`` lists: ``d`` for ``d``, ``d.keys()``, ``list(d)``,
    ``sorted(d)``, ``[k for k in d]`` or a name bound to one of these."""
    if depth > 3:
        return None
    if isinstance(it, ast.Name):
        ev = m.binding(it.id, scope, _pos(it))
        if ev is not None and ev.plain_assign and isinstance(ev.value, (ast.Call, ast.ListComp, ast.GeneratorExp)):
            listed = _keys_source(m, ev.value, ev.scope, depth + 1)  # ``keys = list(d)``: d's keys
            if listed is not None:
                return listed
        return it
    if isinstance(it, ast.Attribute):
        return it
    if isinstance(it, ast.Call):
        f = it.func
        if isinstance(f, ast.Attribute) and f.attr == "keys" and not it.args:
            return f.value
        if isinstance(f, ast.Name) and f.id in ("list", "sorted", "tuple") and len(it.args) == 1:
            return _keys_source(m, it.args[0], scope, depth + 1)
        return None
    if isinstance(it, (ast.ListComp, ast.GeneratorExp)) and len(it.generators) == 1:
        gen = it.generators[0]
        if isinstance(gen.target, ast.Name) and isinstance(it.elt, ast.Name) and it.elt.id == gen.target.id \
                and not gen.ifs:
            return _keys_source(m, gen.iter, scope, depth + 1)
    return None


def carried_state(m, loop: Loop) -> set:
    """Names the loop threads through its JAX calls: assigned in the body from a call of
    compiled or JAX code that takes them (``params, loss = train_step(params, batch)``), or from
    an optimizer update of them (``state = state.apply_gradients(grads=g)``)."""
    memo = work_memo(m)
    key = ("carried", id(loop))
    if key in memo:
        return memo[key]
    out: set = set()
    inputs: dict = {}  # a name bound from a JAX call -> the names that call took
    updates: list = []  # (targets, names read) of other assignments of JAX values
    # names bound earlier in the iteration: rebinding one (``x = unreplicate(x)`` after ``x =
    # step(...)``) transforms this iteration's value, it carries nothing from the last iteration
    bound: set = set()
    for stmt in getattr(loop.node, "body", []):
        for sub in walk(stmt):
            if not isinstance(sub, ast.Assign):
                continue
            targets = {n.id for t in sub.targets for n in walk(t) if isinstance(n, ast.Name)}
            before = set(bound)
            bound |= targets
            if not isinstance(sub.value, ast.Call):
                updates.append((targets, sub.value))
                continue
            call = sub.value
            scope = m.scope_at(call)
            update = _is_update(call, m.conventions)  # ``state = state.apply_gradients(grads=g)``: the receiver too
            if not update and callables.callable_info(m, call.func, scope) is None and not V.is_jax(m, call, scope) \
                    and targets.isdisjoint(blocked_names(loop)):  # the loop blocks on what it returns: JAX work
                continue
            parts = [*call.args, *(k.value for k in call.keywords)]
            if update and isinstance(call.func, ast.Attribute):
                parts.append(call.func.value)
            args = {n.id for a in parts for n in walk(a) if isinstance(n, ast.Name)}
            out |= (targets & args) - before
            for t in targets:
                inputs.setdefault(t, set()).update(args)
    # ``loss = train_step(model, optimizer, batch)`` of a flax NNX step that updates them in place
    for call in (loop.calls if m.jit_wraps or m.project is not None else ()):
        out |= set(nnxdonation.updated_in_place(m, call))
    # ``loss, grad = value_and_grad(loss_fn)(w, x); w = w - lr * grad``: ``w`` is updated from
    # what a JAX call computed from it (a hand-written optimizer step)
    for targets, value in updates:
        read = {n.id for n in walk(value) if isinstance(n, ast.Name)}
        for t in targets & read:
            if any(t in inputs.get(g, ()) for g in read) and V.is_jax(m, value, m.scope_at(value)):
                out.add(t)
    # ``coef = np.dot(w, tau); w += -coef * tau``: a JAX array the iteration does not bind anew,
    # updated in place from what it computed from it (a Lanczos or Gram-Schmidt step)
    made: dict = {}
    for sub in (n for stmt in getattr(loop.node, "body", []) for n in walk(stmt)):
        if isinstance(sub, ast.Assign):
            read = {n.id for n in walk(sub.value) if isinstance(n, ast.Name)}
            made.update({n.id: read for t in sub.targets for n in walk(t) if isinstance(n, ast.Name)})
        elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name) and sub.target.id not in made \
                and any(isinstance(n, ast.Name) and sub.target.id in made.get(n.id, ()) for n in walk(sub.value)) \
                and V.is_jax(m, sub.target, m.scope_at(sub.target)):
            out.add(sub.target.id)
    memo[key] = out
    return out


def sweep_loop(m, loop: Loop) -> bool:
    """A loop over the points of a sweep rather than over steps or data: its elements key the
    results (``for l2 in self.l2_regs: results[shots, l2] = ...``) -- a dict key is hashable, so
    not an array or a batch -- and it threads no state from one iteration to the next."""
    node = loop.node
    if loop.ranged or not isinstance(node, (ast.For, ast.AsyncFor)):
        return False
    target = node.target
    if (isinstance(target, ast.Tuple) and target.elts and isinstance(node.iter, ast.Call)
            and last_name(node.iter.func) == "enumerate"):
        target = ast.Tuple(elts=target.elts[1:], ctx=ast.Store())  # the elements, not the index
    elements = {n.id for n in walk(target) if isinstance(n, ast.Name)}
    if not elements or carried_state(m, loop):
        return False
    for stmt in node.body:
        for sub in walk(stmt):
            if not isinstance(sub, ast.Assign):
                continue
            for k in (t.slice for t in sub.targets if isinstance(t, ast.Subscript)):
                if any(isinstance(n, ast.Name) and n.id in elements for n in walk(k)):
                    return True
    return False


def converts_elements(m, loop: Loop) -> bool:
    """A loop whose only JAX work converts the elements it walks (``for w in weights:
    bits.append(np.asarray(lax.bitcast_convert_type(w, np.uint16)))``): no compiled call, and
    every array operation in it reads only the loop's elements (and the targets of loops
    nested in it), values computed from them in the iteration, constants and module attributes. It dispatches no work that a sync would
    stall, like a loop that only fetches its elements; ``jnp.dot(x, w)`` with weights from
    outside the loop is real work."""
    memo = work_memo(m)
    key = ("elements", id(loop))
    if key in memo:
        return memo[key]
    memo[key] = False
    derived = set(loop.target_names())
    if derived:  # the targets of loops nested in it are taken per element too (``for i in range(6)``)
        stack = list(loop.children)
        while stack:
            inner = stack.pop()
            derived |= inner.target_names()
            stack.extend(inner.children)
    if not derived or any(callables.callable_info(m, c.func, m.scope_at(c)) is not None for c in loop.all_calls()):
        return False

    def local(expr: ast.AST, scope: Scope) -> bool:
        for n in walk(expr):
            if isinstance(n, ast.Name) and n.id not in derived and m.resolve(n, scope) is None:
                return False
        return True

    for stmt in getattr(loop.node, "body", []):
        scope = m.scope_at(stmt)
        for sub in walk(stmt):
            if isinstance(sub, (ast.Assign, ast.AugAssign)):
                value = sub.value if isinstance(sub, ast.Assign) else ast.BinOp(sub.target, sub.op, sub.value)
                if local(value, scope):
                    for t in (sub.targets if isinstance(sub, ast.Assign) else [sub.target]):
                        derived |= {n.id for n in walk(t) if isinstance(n, ast.Name)}
                elif V.is_jax(m, sub.value, scope):
                    return False  # ``x = x + jnp.sum(b)``: device work on state from outside
    works = False
    for c in loop.all_calls():
        scope = m.scope_at(c)
        if not V.is_jax(m, c, scope):
            continue
        works = True
        inputs = [*c.args, *(kw.value for kw in c.keywords)]
        if isinstance(c.func, ast.Attribute):
            inputs.append(c.func.value)
        if not all(local(a, scope) for a in inputs):
            return False
    memo[key] = works
    return works


def returns_timing(m, f: FunctionInfo) -> bool:
    """Whether what ``f`` returns is computed from timer readings (``return n / (time.time() - t0)``,
    ``times.append(time.perf_counter() - t0)`` ... ``return min(times)``)."""
    def timed(expr: ast.AST, names: set) -> bool:
        for n in walk(expr):
            if isinstance(n, ast.Call) and m.resolve(n.func, f.scope) in N.TIMERS:
                return True
            if isinstance(n, ast.Name) and n.id in names:
                return True
        return False

    names: set = set()
    for _ in range(3):  # names from timer readings, and names computed from those
        for sub in walk(f.node):
            if isinstance(sub, ast.Assign) and timed(sub.value, names):
                names |= {t.id for t in sub.targets if isinstance(t, ast.Name)}
            elif (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                  and sub.func.attr == "append" and isinstance(sub.func.value, ast.Name)
                  and any(timed(a, names) for a in sub.args)):
                names.add(sub.func.value.id)
    return any(timed(r, names) for r in f.returns)


def gated_step(m, loop: Loop, guard: ast.AST, gate: ast.AST) -> Optional[ast.Call]:
    """A compiled call in the body of ``gate`` (an ``if`` in ``loop``, under the ``if`` statement
    ``guard``) that rebinds state the loop carries (:func:`carried_state`), when every compiled
    call that rebinds that state in the loop lies under ``guard``: the guard then schedules the loop's
    steps (``if global_step % train_frequency == 0:`` around ``q_state = update(q_state, ...)``),
    and ``gate``'s test runs before every one of them (``if buffer.can_sample(state):``). None when
    the state is also updated outside the guard (the guard runs extra work now and then)."""
    carried = carried_state(m, loop)
    if not carried or not isinstance(gate, ast.If):
        return None
    updates: dict = {}  # carried name -> the assignments from compiled calls that rebind it in the loop
    for stmt in getattr(loop.node, "body", []):
        for sub in walk(stmt):
            if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call):
                if callables.callable_info(m, sub.value.func, m.scope_at(sub.value)) is None:
                    continue
                for t in sub.targets:
                    for n in walk(t):
                        if isinstance(n, ast.Name) and n.id in carried:
                            updates.setdefault(n.id, []).append(sub)
    found = None
    for stmt in gate.body:
        for sub in walk(stmt):
            if not (isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call)):
                continue
            if callables.callable_info(m, sub.value.func, m.scope_at(sub.value)) is None:
                continue
            names = {n.id for t in sub.targets for n in walk(t) if isinstance(n, ast.Name)} & carried
            if names and all(_inside(guard, a) for n in names for a in updates.get(n, ())):
                found = sub.value  # the last one: a step comes after what prepares it (a key split)
    return found


def _inside(outer: ast.AST, node: ast.AST) -> bool:
    end = (getattr(outer, "end_lineno", outer.lineno), getattr(outer, "end_col_offset", 0))
    return _pos(outer) <= _pos(node) <= end
