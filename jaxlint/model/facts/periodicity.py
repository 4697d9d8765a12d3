"""Periodicity: whether an ``if`` around a node makes it run only now and then in a loop.

A guard is periodic when its test has the shape of a schedule, whatever the kind of its values
(a device step counter makes the guard itself sync, which is another finding, but the guarded
work still runs only now and then):

* a modulo test that holds once per period: ``step % every == 0``, ``not self.steps % self.every``;
* an equality or membership test on a step counter: ``step == n - 1``, ``step in eval_steps``;
* a threshold the guarded branch moves on: ``if env_steps >= next_eval: ...; next_eval += every``,
  ``if now - last_log > 60: ...; last_log = now``;
* a helper given the loop's counter (``should_log(step, every)``, ``u.itstime(step, n, total)``),
  decided by its body where this module defines it and presumed periodic where it cannot be read;
* a name bound to one of these: ``is_log_step = step % every == 0`` ... ``if is_log_step:``.

A test on the variables of a loop nested inside the loop that counts (``for k, v in aux.items():
if k in stats:``) picks items within one step, not steps, and is not periodic.

Functions of the model (``m``), not a mixin: :func:`periodic_guard`, :func:`periodic_guard_test`
and :func:`periodic_test` ask the model's Python-semantics queries (``m.binding``, ``m.resolve``,
``m.local_functions``) explicitly.
"""

from __future__ import annotations

import ast
from typing import Optional

from . import callables
from . import values as V
from ..python import limits as L
from ..python.records import BOUNDED_TRIPS, Context, Loop, Scope
from ..python.syntax import _pos, last_name, walk

# Comparisons whose true side is a small part of a period: ``step % n == 0``, ``step % n < 10``.
_ONCE_PER_PERIOD = (ast.Eq, ast.In, ast.Lt, ast.LtE)


# JAX's values that are constant for the whole process (which host this is, how many there are)
_PER_PROCESS = frozenset({"jax.process_index", "jax.process_count", "jax.device_count", "jax.local_device_count"})


def _spelled(node: ast.AST) -> Optional[str]:
    """``step``, ``self.training_steps``: a name or an attribute chain on a name, as written."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _spellings(expr: ast.AST) -> set:
    return {s for n in walk(expr) if isinstance(n, (ast.Name, ast.Attribute)) for s in [_spelled(n)] if s}


def _mods(node: ast.AST) -> list:
    return [n for n in walk(node) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)
            and not isinstance(n.left, (ast.Constant, ast.JoinedStr))]


def small_literal_period(test: ast.AST) -> bool:
    """``step % 5 == 0``: a modulo by an int literal of at most BOUNDED_TRIPS."""
    for m in _mods(test):
        r = m.right
        if isinstance(r, ast.Constant) and isinstance(r.value, int) and not isinstance(r.value, bool):
            if 0 < r.value <= BOUNDED_TRIPS:
                return True
    return False


class _Names:
    """What a guard's test is read against: what the loops up to the one that counts count
    (``step``, ``self.steps``), their targets, and the targets of loops nested inside it."""

    __slots__ = ("counters", "elements", "inner", "loop")

    def __init__(self, counters: set, elements: set, inner: set, loop: Optional[Loop] = None):
        self.counters = counters
        self.elements = elements
        self.inner = inner
        self.loop = loop  # the loop that counts (None inside a helper's body)

    def _replace(self, **changes) -> "_Names":
        out = _Names(self.counters, self.elements, self.inner, self.loop)
        for k, v in changes.items():
            setattr(out, k, v)
        return out


def _atoms(expr: ast.AST) -> Optional[list]:
    """The names and attribute chains ``expr`` does arithmetic on (``step``, ``i + 1``,
    ``self.steps - 1``), or None when it is more than arithmetic (a call, a subscript)."""
    if isinstance(expr, ast.Constant):
        return []
    if isinstance(expr, (ast.Name, ast.Attribute)):
        s = _spelled(expr)
        return [s] if s else None
    if isinstance(expr, ast.UnaryOp):
        return _atoms(expr.operand)
    if isinstance(expr, ast.BinOp):
        left, right = _atoms(expr.left), _atoms(expr.right)
        return None if left is None or right is None else left + right
    return None


def _counted(expr: ast.AST, names: "_Names") -> bool:
    """Arithmetic on a counter (``step``, ``self.steps + 1``) or on an element of a loop
    (``name``); ``w.dtype`` reads a property of the element instead."""
    atoms = _atoms(expr)
    return bool(atoms) and any(a in names.counters or a in names.elements for a in atoms)


def _every_iteration(stmts: list):
    """The statements that run in every iteration of a loop body: not those under an ``if`` or
    in a nested loop (``with`` and ``try`` bodies are seen through)."""
    for stmt in stmts:
        yield stmt
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            yield from _every_iteration(stmt.body)
        elif isinstance(stmt, ast.Try):
            yield from _every_iteration(stmt.body)
            yield from _every_iteration(stmt.finalbody)


_COUNTING = frozenset({"range", "count", "arange", "trange"})  # builtins/itertools/numpy/tqdm counting iterables


def _ordered_names(test: ast.AST) -> set:
    """The names and attributes a ``while`` test orders against something (``steps <= total``,
    ``self.t < T and not done``): not those it only tests for truth."""
    out: set = set()
    for sub in walk(test):
        if isinstance(sub, ast.Compare) and all(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in sub.ops):
            for part in (sub.left, *sub.comparators):
                s = _spelled(part)
                if s:
                    out.add(s)
    return out


def loop_counters(loop: Loop) -> set:
    """What counts the iterations of a loop, as spelled: the target of a loop over steps
    (``range``, ``count``, ``trange``, ``arange``), the index of ``enumerate``, and names or
    attributes advanced in every iteration (``step += 1``, ``self.steps += 1``, ``i = i + 1``)."""
    out: set = set()
    node = loop.node
    if isinstance(node, (ast.For, ast.AsyncFor)):
        it, target = node.iter, node.target
        if loop.ranged or (isinstance(it, ast.Call) and last_name(it.func) in ("arange", "trange")):
            out |= loop.target_names()
        while isinstance(it, ast.Call) and last_name(it.func) in ("tqdm", "iter") and it.args:
            it = it.args[0]
        if (isinstance(it, ast.Call) and last_name(it.func) == "enumerate" and isinstance(target, ast.Tuple)
                and target.elts and isinstance(target.elts[0], ast.Name)):
            out.add(target.elts[0].id)
        if (isinstance(it, ast.Call) and last_name(it.func) == "zip" and isinstance(target, ast.Tuple)
                and len(target.elts) == len(it.args)):
            # ``for step, batch in zip(range(first, total), batches)``: the element from the range counts
            for arg, elt in zip(it.args, target.elts):
                if (isinstance(arg, ast.Call) and last_name(arg.func) in _COUNTING and isinstance(elt, ast.Name)):
                    out.add(elt.id)
    # ``while steps <= total: ... steps = int(state["steps"])``: a variable the loop's test
    # orders against a bound and every iteration rebinds is the loop's progress
    progress = _ordered_names(node.test) if isinstance(node, ast.While) else set()
    for sub in _every_iteration(getattr(node, "body", [])):
        if progress and isinstance(sub, ast.Assign) and len(sub.targets) == 1:
            s = _spelled(sub.targets[0])
            if s in progress:
                out.add(s)
        if isinstance(sub, ast.AugAssign) and isinstance(sub.op, (ast.Add, ast.Sub)):
            s = _spelled(sub.target)
            if s:
                out.add(s)
        elif (isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.value, ast.BinOp)
              and isinstance(sub.value.op, ast.Add)):
            s = _spelled(sub.targets[0])
            if s and s in _spellings(sub.value):
                out.add(s)
    return out


def _if_of_test(m, test: ast.AST) -> Optional[ast.If]:
    table = m.facts.if_tests
    if table is None:
        # the test, and each part of an ``and``/``or`` test (``done - saved >= every or ...``)
        table = m.facts.if_tests = {}
        for n in m.ifs:
            if isinstance(n, ast.If):
                table[id(n.test)] = n
                if isinstance(n.test, ast.BoolOp):
                    for v in n.test.values:
                        table.setdefault(id(v), n)
    return table.get(id(test))


def periodic_guard(m, ctx: Context, loop: Optional[Loop] = None) -> bool:
    """Whether an ``if`` inside a loop around the node makes it run only now and then in
    ``loop`` (by default the innermost loop around the node): see the module docstring. A guard
    in an outer loop counts too: a periodic evaluation loop runs only periodically."""
    return periodic_guard_test(m, ctx, loop) is not None


def periodic_guard_test(m, ctx: Optional[Context], loop: Optional[Loop] = None) -> Optional[ast.AST]:
    """The test of the periodic guard around a node with this context (see
    :func:`periodic_guard`), or None."""
    if ctx is None or not ctx.guards or not ctx.loops:
        return None
    for test, depth in ctx.guards:
        if depth and periodic_test(m, test, depth, ctx, loop):
            return test
    return None


def periodic_test(m, test: ast.AST, depth: int, ctx: Context, loop: Optional[Loop] = None) -> bool:
    """Whether one guard of a node with this context (``(test, depth)`` from ``ctx.guards``)
    is periodic in ``loop`` (by default the innermost loop around the node)."""
    loops = ctx.loops
    hot = loops.index(loop) if loop is not None and loop in loops else len(loops) - 1
    outer = loops[:min(depth, hot + 1)]
    # what the loops count, and what the test itself takes a modulo of (``step`` in
    # ``step % every == 0 or step == total - 1``, where ``step`` comes back from the step)
    counters: set = {s for mod in _mods(test) for s in _spellings(mod.left)}
    elements: set = set()
    for lp in outer:
        counters |= loop_counters(lp)
        elements |= lp.target_names()
    inner: set = set()
    for lp in loops[hot + 1:depth]:
        inner |= lp.target_names()
    names = _Names(counters, elements - inner, inner, loops[hot] if loops else None)
    return _periodic_test(m, test, names, m.scope_at(test), 0)


def _periodic_test(m, test: ast.AST, names: "_Names", scope: Scope, depth: int) -> bool:
    if isinstance(test, ast.BoolOp):
        parts = [_periodic_test(m, v, names, scope, depth) for v in test.values]
        if isinstance(test.op, ast.And):
            return any(parts)
        # ``itstime(step, n) or warmup and jax.process_index() == 0``: a switch the loop never
        # sets turns the schedule off or on for the whole run, not every step
        # ``done - saved >= every or done >= total``: the end of the run, on the schedule's own counter
        periodic = [v for p, v in zip(parts, test.values) if p]
        return any(parts) and all(p or _run_switch(m, v, names, scope) or _final_clause(v, periodic)
                                  or _rare_clause(v, names) for p, v in zip(parts, test.values))
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        # ``not step % every``: true once per period (``not should_log(...)`` is the opposite)
        return _counting_mod(m, test.operand, names.inner) and not isinstance(test.operand, ast.Call)
    if isinstance(test, ast.Compare):
        return _periodic_compare(m, test, names)
    if isinstance(test, ast.Call):
        return _periodic_helper(m, test, names, scope, depth)
    if isinstance(test, ast.Name) and depth < L.PERIODIC_HELPER_HORIZON:
        if _rearmed_flag(m, test, names):
            return True
        ev = m.binding(test.id, scope, _pos(test))
        if ev is not None and ev.plain_assign and ev.value is not None:
            return _periodic_test(m, ev.value, names, ev.scope, depth + 1)
    return False


_FEW_FIRST = 100  # ``step <= 5``: a clause true in the first few iterations only, up to this bound


def _prefix(test: ast.AST, names: "_Names", after: bool = False) -> bool:
    """``step <= 5`` (``after``: ``step > 1``, whose negation is such a prefix): a loop counter ordered
    against a small non-negative literal."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, (ast.Gt, ast.GtE)):
        left, right, below = right, left, False
    elif isinstance(op, (ast.Lt, ast.LtE)):
        below = True
    else:
        return False
    if after:  # ``step > 1`` is ``1 < step``: the counter on the right of a ``<``
        left, right, below = right, left, not below
    return (below and _spelled(left) in names.counters and isinstance(right, ast.Constant)
            and type(right.value) is int and 0 <= right.value <= _FEW_FIRST)


def _rare_clause(test: ast.AST, names: "_Names") -> bool:
    """A clause of an ``or`` beside a schedule that holds in a bounded number of iterations: the first
    few (``iteration <= 5``), or the test that ends the loop: ``abs(delta) < tol`` where the loop's body
    has ``if abs(delta) < tol and iteration > 1: break`` (true once, and in the first few iterations).
    Fresh AE: an SCF loop printing ``if iteration <= 5 or iteration % 10 == 0 or abs(delta_E) < tol``."""
    if _prefix(test, names):
        return True
    body = getattr(names.loop.node, "body", ()) if names.loop is not None else ()
    want = ast.dump(test)
    for stmt in body:
        if isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], ast.Break):
            t = stmt.test
            parts = t.values if isinstance(t, ast.BoolOp) and isinstance(t.op, ast.And) else [t]
            dumps = [ast.dump(p) for p in parts]
            if want in dumps and all(d == want or _prefix(p, names, after=True) for d, p in zip(dumps, parts)):
                return True
    return False


def _final_clause(test: ast.AST, periodic: list) -> bool:
    """``step >= total`` beside a schedule on ``step`` (``step % every == 0 or step >= total``): an
    ordering of a variable the schedule itself reads, which holds once the run reaches its end."""
    if not (isinstance(test, ast.Compare) and all(isinstance(op, (ast.Gt, ast.GtE)) for op in test.ops)):
        return False
    left = _spelled(test.left)
    return left is not None and any(left in _spellings(p) for p in periodic)


def _rearmed_flag(m, test: ast.Name, names: "_Names") -> bool:
    """``if need_compile: ...; need_compile = False``, the flag set back to ``True`` (or to any value
    but ``False``) in the loop only under another ``if`` (an event: a split, a resize): the branch
    runs once per event, not every step."""
    node, loop = _if_of_test(m, test), names.loop
    if node is None or loop is None:
        return False

    def sets(stmts, value) -> list:
        return [n for s in stmts for n in walk(s) if isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name) and n.targets[0].id == test.id
                and isinstance(n.value, ast.Constant) and n.value.value is value]
    if not sets(node.body, False):
        return False
    # set back anywhere in the loop (to True, or to a value computed each step: ``hot = loss > x``)
    assigned = [n for s in loop.node.body for n in walk(s) if isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name) and n.targets[0].id == test.id
                and not (isinstance(n.value, ast.Constant) and n.value.value is False)]
    for a in assigned:
        ctx = m.context(a)
        inside = [g for g, d in (ctx.guards if ctx is not None else ()) if d > loop.depth]
        if not inside:
            return False  # set back every iteration
    return True


def _run_switch(m, expr: ast.AST, names: "_Names", scope: Scope) -> bool:
    """A test that the loop does not change: it reads no counter or element of the loop and no
    name or attribute the loop body assigns, and calls nothing but JAX's per-process constants
    (``jax.process_index()``). Beside a schedule in an ``or`` it turns extra runs on for the
    whole run (a verbose flag, a warm-up phase kept by another object), not every step."""
    loop = names.loop
    if loop is None:
        return False
    assigned = _assigned_in(m, loop)
    # an element of a loop around this one is the same in every iteration of this one
    # (``for n in sizes: for t in range(n): if n <= 8 or t % (n // 8) == 0:``)
    own = loop.target_names()
    for n in walk(expr):
        if isinstance(n, ast.Call):
            if m.resolve(n.func, scope) not in _PER_PROCESS:
                return False
        elif isinstance(n, (ast.Name, ast.Attribute)):
            s = _spelled(n)
            if s is not None and (s in names.counters or (s in names.elements and s in own) or s in assigned):
                return False
        elif isinstance(n, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
    return True


def _assigned_in(m, loop: Loop) -> set:
    """What the loop's body and target bind, as spelled (``x``, ``m.count``)."""
    memo = m.facts.loop_assigned
    out = memo.get(id(loop.node))
    if out is None:
        out = set()
        for n in walk(loop.node):
            if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Store):
                s = _spelled(n)
                if s:
                    out.add(s)
            elif isinstance(n, (ast.Subscript,)) and isinstance(n.ctx, ast.Store):
                s = _spelled(n.value)
                if s:
                    out.add(s)
        memo[id(loop.node)] = out
    return out


def _counting_mod(m, expr: ast.AST, inner: set) -> bool:
    """A modulo in ``expr`` whose operands are not only the variables of loops nested inside
    the loop that counts."""
    for mod in _mods(expr):
        names = {n.id for n in walk(mod) if isinstance(n, ast.Name)}
        if not names or not names <= inner:
            return True
    return False


def _periodic_compare(m, test: ast.Compare, names: "_Names") -> bool:
    ops = test.ops
    if _mods(test):
        scope = m.scope_at(test)
        if all(V.const_int(m, mod.right, scope) == 1 for mod in _mods(test)):
            return False  # ``step % log_interval == 0`` with ``log_interval = 1``: true at every step
        return all(isinstance(op, _ONCE_PER_PERIOD) for op in ops) and _counting_mod(m, test, names.inner)
    parts = [test.left, *test.comparators]
    if all(isinstance(op, ast.Eq) for op in ops):
        # ``step == total - 1``, ``name == "final"``: one side is a counter or an element of
        # the loop, or arithmetic on one (``w.dtype == bf16`` filters by a property instead)
        return any(_counted(p, names) for p in parts)
    if all(isinstance(op, ast.In) for op in ops):  # ``step in eval_steps``; not ``key in stats``
        return _counted(test.left, names._replace(elements=set()))
    if all(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in ops):
        return _advanced_threshold(m, test)
    return False


def _advanced_threshold(m, test: ast.Compare) -> bool:
    """``if x >= next_eval: ...; next_eval += every`` (or ``next_eval = x + every``), and the
    elapsed form ``if now - last >= every: ...; last = now``: the branch moves the threshold on."""
    node = _if_of_test(m, test)
    if node is None:
        return False
    compared = _spellings(test)
    subtracted = {s for n in walk(test) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub)
                  for s in [_spelled(n.right)] if s}
    for stmt in node.body:
        for sub in walk(stmt):
            if isinstance(sub, ast.AugAssign) and isinstance(sub.op, (ast.Add, ast.Mult)):
                if _spelled(sub.target) in compared:
                    return True
            elif isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                target = _spelled(sub.targets[0])
                if target is None or target not in compared:
                    continue
                grows = isinstance(sub.value, ast.BinOp) and isinstance(sub.value.op, (ast.Add, ast.Mult))
                if grows or target in subtracted:
                    return True
    return False


def _periodic_helper(m, call: ast.Call, names: "_Names", scope: Scope, depth: int) -> bool:
    """``should_log(step, every)``, ``u.itstime(step, n, total)``, ``m.is_eval_step(step)``:
    a helper given the loop's counter. Where its definition can be read (this module), it is
    periodic when one of its returned expressions is a periodic test of the parameter the
    counter is passed to (``return step % every == 0 or step == total``); ``return step <
    warmup`` is not. Where the definition cannot be read (another module, a library, an
    object's method), the guard is presumed periodic: a call we cannot see into is not
    evidence that the guarded work runs every step."""
    qn = m.resolve(call.func, scope)
    if qn is not None and qn.startswith(("builtins.", "jax.", "numpy.", "math.")):
        return False
    cur = m.conventions
    positions = [i for i, a in enumerate(call.args) if _is_counter_arg(a, names, cur)]
    keywords = [kw.arg for kw in call.keywords if kw.arg is not None and _is_counter_arg(kw.value, names, cur)]
    if not positions and not keywords:
        return False
    if depth >= L.PERIODIC_HELPER_HORIZON:
        return True
    funcs = callables.local_functions(m, call.func, scope)
    if not funcs:
        return True  # unknown: presumed periodic
    bound = isinstance(call.func, ast.Attribute)
    for f in funcs:
        params = list(f.params)
        if bound and f.is_method and params and params[0] in ("self", "cls"):
            params = params[1:]
        got = {params[i] for i in positions if i < len(params)}
        got |= {k for k in keywords if k in params or k in f.kwonly}
        if not got:
            continue
        inner = _Names(got, set(), set())
        if any(_periodic_test(m, r, inner, f.scope, depth + 1) for r in f.returns):
            return True
    return False


def _is_counter_arg(arg: ast.AST, names: "_Names", cur) -> bool:
    """An argument that carries the loop's count (``step``, ``step + 1``, ``int(state.step)``):
    it reads a counter of the loop, or a name the conventions call a step counter
    (``state.step`` returned by the step every iteration: ``counter-names``), and not only
    the variables of a loop nested inside the one that counts."""
    spelled = [s for s in _spellings(arg)
               if s in names.counters or cur.matches("counter-names", s.rsplit(".", 1)[-1])]
    return bool(spelled) and not all(s.split(".")[0] in names.inner for s in spelled)


def periodic_repetition(m, rep) -> Optional[ast.AST]:
    """The periodic guard that makes a repeating function run only now and then: the test of
    the ``if`` around the call in a loop that the repetition evidence ``rep`` (a
    :class:`~jaxlint.model.facts.jaxrecords.Repetition`) rests on, directly or through the
    callers it names (``if step % every == 0: evaluate(...)``). None when no such guard is seen."""
    while rep is not None:
        if rep.kind == "loop" and rep.call is not None:
            test = periodic_guard_test(m, m.context(rep.call), rep.loop)
            if test is not None:
                return test
        rep = rep.inner if rep.kind == "caller" else None
    return None


def first_iterations(ctx: Context, loop: Loop) -> Optional[tuple]:
    """``(test, n)``: an ``if`` inside ``loop`` whose test (or a conjunct of it) holds only in the loop's first
    ``n`` iterations (at most 100): ``i < 3``, ``i <= 2``, ``i == 0`` on the counter of ``for i in range(n)`` or
    ``for i, x in enumerate(xs)``, which starts at 0 (a timing print for the first tokens)."""
    counter = _zero_based_counter(loop, ctx.scope)
    if counter is None or loop not in ctx.loops:
        return None
    inside = ctx.loops.index(loop) + 1
    for test, depth in ctx.guards:
        if depth < inside:
            continue
        for part in (test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]):
            if not (isinstance(part, ast.Compare) and len(part.ops) == 1):
                continue
            left, op, right = part.left, part.ops[0], part.comparators[0]
            if isinstance(left, ast.Constant):  # ``3 > i``
                left, right = right, left
                op = {ast.Gt: ast.Lt(), ast.GtE: ast.LtE(), ast.Lt: ast.Gt(), ast.LtE: ast.GtE()}.get(type(op), op)
            if not (isinstance(left, ast.Name) and left.id == counter and isinstance(right, ast.Constant)
                    and type(right.value) is int and 0 <= right.value <= 100):
                continue
            n = {ast.Lt: right.value, ast.LtE: right.value + 1, ast.Eq: 1}.get(type(op))
            if n:
                return test, n
    return None


def _zero_based_counter(loop: Loop, scope) -> Optional[str]:
    """The name counting ``loop``'s iterations from 0: ``for i in range(n)`` (``range(0, n)``, ``trange``,
    through ``tqdm(...)`` and a name every binding of which is one of these), or the index of ``enumerate(xs)``
    with no start."""
    node = loop.node
    if not isinstance(node, ast.For):
        return None
    target = node.target
    if isinstance(target, ast.Name) and _counts_from_zero(node.iter, scope, 0):
        return target.id
    it = node.iter
    if (isinstance(it, ast.Call) and getattr(it.func, "id", None) == "enumerate" and len(it.args) == 1
            and not it.keywords and isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name)):
        return target.elts[0].id
    return None


def _counts_from_zero(it: ast.AST, scope, depth: int, seen: frozenset = frozenset()) -> bool:
    if depth > 4:
        return False
    if isinstance(it, ast.Name) and scope is not None:
        if it.id in seen:
            return True  # ``iterator = tqdm(iterator, desc=...)``: the same sequence, wrapped
        events = scope.events.get(it.id) or []
        return bool(events) and all(ev.plain_assign and ev.value is not None and _counts_from_zero(
            ev.value, scope, depth + 1, seen | {it.id}) for ev in events)
    if not isinstance(it, ast.Call):
        return False
    name = it.func.attr if isinstance(it.func, ast.Attribute) else getattr(it.func, "id", None)
    if name in ("tqdm", "iter") and len(it.args) == 1:
        return _counts_from_zero(it.args[0], scope, depth + 1, seen)
    return name in ("range", "trange") and not it.keywords and (len(it.args) == 1 or (
        len(it.args) == 2 and isinstance(it.args[0], ast.Constant) and it.args[0].value == 0))
