"""Syncs the host needs anyway: a fetched value that host code consumes (a host environment's
``step``, a tokenizer's ``decode``, torch, json), a loop's state handed to host-side consumers (an
actor's parameters), a loop paced by the host (``input()``, rendering, plotting), a generator that
yields each step's state, and further syncs in a loop that already waits for one of these.

Functions of the model (``m``), imported explicitly (jaxlint/model/transfers.py and the rules).
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, fetches, pipelining
from . import values as V
from .loops import mentions
from .periodicity import _every_iteration, periodic_test, small_literal_period
from ..python.records import Loop
from ..python.syntax import _pos, last_name, unparse, walk
from .work import carried_state, unconditional_calls, work_memo

# Host libraries that take the fetched value for their own computation (not a log or a record):
# another framework, serialisation, imaging and geometry, host simulators, NumPy's test asserts.
HOST_LIBRARIES = ("torch.", "json.", "pickle.", "PIL.", "shapely.", "cv2.", "imageio.", "pyspiel.",
                  "gym.", "gymnasium.", "envpool.", "numpy.testing.", "sentencepiece.")
# Calls that pace a loop by the host: a person typing, a frame drawn or shown, a real-time wait.
PACING_CALLS = frozenset({"builtins.input", "time.sleep"})
PACING_PREFIXES = ("matplotlib.", "IPython.display.", "mediapy.", "cv2.imshow", "cv2.waitKey")


def inherent_sync(m, node: ast.AST, loop: Loop) -> Optional[str]:
    """Why the host needs the value of this sync in every iteration of ``loop`` anyway, in a
    few words, or None: host code consumes the fetched value (:func:`host_consumer`), the loop
    hands its state to host-side consumers (:func:`hands_off`), the loop is paced by the host
    (:func:`host_paced`), or it already waits for the device every iteration for one of these
    reasons (:func:`loop_syncs_inherently`)."""
    if isinstance(node, ast.Call):
        consumer = host_consumer(m, node)
        if consumer is not None:
            return f"consumed by `{unparse(consumer.func, 30)}`"
        if hands_off(m, node, loop):
            return "hands the loop's state to host code"
        processing = host_processing(m, node, loop)
        if processing is not None:
            return f"processed on the host (line {processing.lineno})"
    stop = decides_exit(node, loop)
    if stop is not None:
        return f"the host stops the loop when it equals a value (line {stop.lineno}): an end token, nothing left"
    pacing = host_paced(m, loop)
    if pacing is not None:
        return f"the loop is paced by `{unparse(pacing.func, 30)}`"
    if pipelining.lagged_sync(m, node, loop):
        return "it reads an earlier step's value after queuing this step's"
    if streams_state(m, loop) is not None:
        return "the loop yields each step's state to its consumer"
    earlier = loop_syncs_inherently(m, loop)
    if earlier is not None and earlier is not node:
        return f"the loop already waits for the device on line {earlier.lineno}"
    return None


def decides_exit(node: ast.AST, loop: Loop) -> Optional[ast.If]:
    """The ``if`` of the loop's own body that compares the synced value (``node`` itself, or a name a
    statement of the body binds from it: ``pred = y.argmax().item()``) for equality or membership and
    whose body leaves the loop (``break``/``return``): host-driven decoding stopping at an end token
    (``if pred == eos: break``, ``if int(t) in stop_tokens``). The host needs each token to know
    whether to go on (reviewers: inherent to host-driven decoding). A threshold or a NaN test
    (``if loss < tol``, ``if isnan(loss)``) is a check that can run every N steps: not this."""
    body = getattr(loop.node, "body", None)
    if not isinstance(body, list):
        return None
    names: set = set()

    def ours(e: ast.AST) -> bool:
        return any(n is node or isinstance(n, ast.Name) and n.id in names for n in walk(e))

    for stmt in body:
        if isinstance(stmt, ast.Assign) and any(n is node for n in walk(stmt.value)):
            names |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        elif isinstance(stmt, ast.If) and any(isinstance(s, (ast.Break, ast.Return)) for s in stmt.body) and any(
                isinstance(c, ast.Compare) and all(isinstance(op, (ast.Eq, ast.In)) for op in c.ops)
                and ours(c) for c in walk(stmt.test)):
            return stmt
    return None


def host_processing(m, call: ast.Call, loop: Loop) -> Optional[ast.AST]:
    """Where Python code of the same iteration works through what the host fetch ``call`` returns
    (through names assigned from it in the loop body): a ``for`` loop over it (``for gt, pred in
    zip(out["gt"], out["y"]):``, per-example post-processing) or indexing by a mask taken from it
    (``out["y"][out["mask"]]``, a shape only the host data decides). The host needs the values
    element by element: the fetch is the host's input, not a stall to move."""
    body = getattr(loop.node, "body", None)
    if not isinstance(body, list):
        return None
    held = {id(call)}
    names: set = set()
    stmts = [sub for stmt in body for sub in walk(stmt) if isinstance(sub, ast.stmt)]

    def carries(expr: ast.AST) -> bool:
        return any(id(n) in held or (isinstance(n, ast.Name) and n.id in names) for n in walk(expr))

    for st in stmts:
        if isinstance(st, ast.Assign) and carries(st.value):
            names |= {n.id for t in st.targets for n in walk(t) if isinstance(n, ast.Name)}
    if not names:
        return None
    for st in stmts:
        if isinstance(st, (ast.For, ast.AsyncFor)) and st is not loop.node and carries(st.iter):
            return st
        for n in walk(st) if isinstance(st, (ast.Assign, ast.Expr)) else ():
            if isinstance(n, ast.Subscript) and isinstance(n.slice, (ast.Name, ast.Subscript)) \
                    and carries(n.slice) and carries(n.value):
                return n
    return None


def host_consumer(m, call: ast.Call) -> Optional[ast.Call]:
    """The host call that consumes what ``call`` (a host fetch) returns, when the value goes
    straight into it (as an argument, inside a literal tuple/list/dict argument, or through a
    name assigned in the same loop body): a host library (:data:`HOST_LIBRARIES`) or a method
    of a host object that takes values (the conventions' ``host-consumer-methods``: ``env.step``,
    ``tokenizer.decode``). Logging, printing and appending to a list are records, not consumers."""
    if fetches.host_fetch(m, call) is None:
        return None
    if _consumes(m, call):
        return call  # ``np.save(path, x)``: the fetch is the host's own use of the value
    ctx = m.context(call)
    if ctx is None or not ctx.loops:
        return None
    loop = ctx.loops[-1]
    targets: set = set()
    for sub in walk(loop.node):
        if isinstance(sub, ast.Assign) and sub.value is call:
            targets |= {t.id for t in sub.targets if isinstance(t, ast.Name)}
    for c in loop.all_calls():
        if c is call or not _consumes(m, c):
            continue
        for a in [*c.args, *(kw.value for kw in c.keywords)]:
            for part in _literal_parts(a):
                if part is call or (isinstance(part, ast.Name) and part.id in targets
                                    and _pos(part) > _pos(call)):
                    return c
    return None


def _consumes(m, c: ast.Call) -> bool:
    scope = m.scope_at(c)
    qn = m.resolve(c.func, scope)
    if qn is not None:
        return qn.startswith(HOST_LIBRARIES) or qn in N.NUMPY_HOST_IO
    f = c.func
    if not isinstance(f, ast.Attribute):
        return False
    if _host_object(m, f.value, scope):
        return True  # ``envs = gym.vector.SyncVectorEnv(...)``; ``envs.step(actions)``, whatever the method
    if not m.conventions.matches("host-consumer-methods", f.attr):
        return False
    if callables.callable_info(m, f, scope) is not None or callables.local_functions(m, f, scope):
        return False  # compiled, or code of this module
    return not V.is_jax(m, f.value, scope)


def _host_object(m, recv: ast.AST, scope) -> bool:
    """A name bound once in reach to an object a host library made (``envs =
    gym.vector.SyncVectorEnv(...)``, ``envs = envpool.make(...)``): its methods run on the host."""
    qn = callables.plain_maker(m, recv, scope)
    return qn is not None and qn.startswith(HOST_LIBRARIES)


def hands_off(m, call: ast.Call, loop: Loop) -> bool:
    """``m._params_for_actor = (n, jax.device_get(params))``: the loop fetches the state it
    threads through its steps (:meth:`carried_state`) and stores it on an object, where other
    host code (actors, an inference server) reads it. Recording a metric is not a hand-off."""
    value = fetches.host_fetch(m, call)
    if not isinstance(value, ast.Name) or value.id not in carried_state(m, loop):
        return False
    for sub in walk(loop.node):
        if isinstance(sub, ast.Assign) and any(isinstance(t, ast.Attribute) for t in sub.targets):
            if any(part is call for part in _literal_parts(sub.value)):
                return True
    return False


def streams_state(m, loop: Loop) -> Optional[ast.AST]:
    """A ``yield`` in every iteration of the loop of the state it threads through its steps
    (:meth:`carried_state`): a streaming generator (``state = sample_step(state); yield
    state``), whose consumer takes every step as it comes (a token decoded and shown), so the
    host waits for each step anyway."""
    node = loop.node
    if loop.kind == "comprehension":
        return None
    carried = carried_state(m, loop)
    if not carried:
        return None
    for stmt in _every_iteration(getattr(node, "body", [])):
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Yield, ast.YieldFrom)):
            value = stmt.value.value
            if value is not None and mentions(value, carried):
                return stmt.value
    return None


def host_paced(m, loop: Loop) -> Optional[ast.Call]:
    """A call that paces the loop by the host in (nearly) every iteration: ``input()``, a frame
    rendered, drawn or shown, a real-time ``sleep``. One under a periodic ``if`` counts only
    with a small literal period (``if step % 5 == 0: frames.append(env.render())``): a
    training loop that plots every 1000 steps is not paced by its plots."""
    memo = work_memo(m)
    key = ("paced", id(loop))
    if key in memo:
        return memo[key]
    found = None
    for c in loop.all_calls():
        scope = m.scope_at(c)
        qn = m.resolve(c.func, scope)
        pacing = (qn in PACING_CALLS or (qn is not None and qn.startswith(PACING_PREFIXES))
                  or m.conventions.matches("pacing-names", last_name(c.func)))
        if not pacing:
            continue
        ctx = m.context(c)
        rare = any(depth > loop.depth and periodic_test(m, test, depth, ctx, loop)
                   and not small_literal_period(test) for test, depth in ctx.guards)
        if not rare:
            found = c
            break
    memo[key] = found
    return found


def loop_syncs_inherently(m, loop: Loop) -> Optional[ast.Call]:
    """A host fetch made in every iteration of the loop that the host needs anyway (consumed
    by host code, or a hand-off): the loop already waits for the device there each iteration,
    so another sync in the same iteration adds no stall."""
    memo = work_memo(m)
    key = ("inherent", id(loop))
    if key in memo:
        return memo[key]
    memo[key] = None
    found = None
    for c in unconditional_calls(m, loop):
        if fetches.host_fetch(m, c) is not None and (host_consumer(m, c) is not None or hands_off(m, c, loop)):
            found = c
            break
    memo[key] = found
    return found


def _literal_parts(expr: ast.AST):
    """The expression and, through tuple/list/dict/set displays and starred items, its parts."""
    yield expr
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        for e in expr.elts:
            yield from _literal_parts(e.value if isinstance(e, ast.Starred) else e)
    elif isinstance(expr, ast.Dict):
        for v in expr.values:
            yield from _literal_parts(v)
