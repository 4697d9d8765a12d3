"""Roles: what one iteration of a loop is, and how often a function runs, each decided in one place
with the evidence that decided it.

A rule that asks "does this sync run at every step?" asks :func:`sync_role` and nothing else; one
that asks "does this function run again and again?" asks :func:`frequency`. The facts behind them
live in their own modules (loops, periodicity, work, transfers, repetition, timing); this module
only puts them in order and says which one decided, so that a finding's evidence
(``Finding.evidence``) names it.

A component of the model, used through explicit imports (not a mixin of ``ModuleModel``).
"""

from __future__ import annotations

import ast
from typing import Optional

from ..facts import callables, hostneeds, periodicity, work
from . import evidence as E
from ..facts import frequency as F
from . import looprecord
from ..facts import loops as loopfacts
from ..python.records import Context, FunctionInfo, Loop
from ..python.syntax import unparse, walk

# What one iteration of the loop around a sync is.
PER_STEP = "per-step"  # one step of JAX work: a sync here stalls every step
PROGRAM = "program"  # one iteration runs a whole program (a scanned epoch, a rollout, a solve)
SWEEP = "sweep"  # one point of a sweep over configurations
CONVERSION = "conversion"  # its only JAX work converts the elements it walks
FEW = "few"  # the node runs at most FEW_ITERATIONS times in all
PERIODIC = "periodic"  # a periodic ``if`` guards the node inside the loop
BENCHMARK = "benchmark"  # a timing loop: blocking is the point
HOST_PACED = "host-paced"  # the host paces the loop (input, rendering): a sync costs nothing that matters
NO_STEPS = "no-steps"  # no loop of JAX work around the node, or the node is traced
ITEMS = "items"  # a loop over items or configurations, not steps (one key or seed per case is deliberate)
PARTS = "parts"  # the loop walks the entries of one mapping (a checkpoint's weights), not steps
LEAVES = "leaves"  # in a branch that leaves the loop (``if converged: print(loss); break``): runs at most once


class LoopRole:
    """The role of the loop around a node for a rule's question: ``kind`` (one of the constants
    above), ``loop`` (the loop it is about, or None) and ``evidence`` (why, in sentences: made on
    first read, as most roles decide a sync that is then not reported)."""

    __slots__ = ("kind", "loop", "_why", "_evidence", "schedule")

    def __init__(self, kind: str, loop: Optional[Loop], why, schedule=None):
        self.kind = kind
        self.loop = loop
        self.schedule = schedule  # the periodic test that schedules the steps a per-step gate runs before
        self._why = why  # a list of sentences, or a function of no arguments that makes it
        self._evidence: Optional[list] = None

    @property
    def evidence(self) -> list:
        if self._evidence is None:
            self._evidence = self._why() if callable(self._why) else list(self._why)
        return self._evidence

    def __repr__(self) -> str:
        return f"LoopRole({self.kind!r}, line {getattr(getattr(self.loop, 'node', None), 'lineno', '-')})"


def sync_role(model, ctx: Optional[Context], syncs: bool = True, gate=None) -> LoopRole:
    """The role of the step loop a host-side node runs in (a fetch, a format, a test on a device
    value): :data:`PER_STEP` when it runs at every step of the innermost loop of JAX work around
    it; otherwise why not. ``syncs``: a fixed-cost sync (not a copy whose cost grows with its
    size), which a loop of a few iterations in all makes negligible. ``gate``: the ``if`` whose
    test is the node; a periodic guard around it that schedules the very step it gates
    (:func:`~jaxlint.model.facts.work.gated_step`) does not make it periodic: it runs before
    every step."""
    if ctx is None or not ctx.loops:
        return LoopRole(NO_STEPS, None, ["not in a loop"])
    f = ctx.scope.func
    if f is not None and f.traced:
        return LoopRole(NO_STEPS, None, ["in traced code, which runs once per trace"])
    loop = loopfacts.hot_loop(model, ctx)
    if loop is None:
        return LoopRole(NO_STEPS, None, ["no loop around it runs JAX work"])
    line = loop.node.lineno
    leaving = _leaving_branch(model, ctx, loop)
    if leaving is not None:
        return LoopRole(LEAVES, loop, [f"the branch of the `if` on line {leaving.lineno} leaves the loop on line {line} "
                                       "(`break`, `return` or `raise`): it runs at most once per run of the loop"])
    once = _lazy_init(model, ctx, loop)
    if once is not None:
        return LoopRole(LEAVES, loop, [f"the `if` on line {once[0].lineno} runs only while `{once[1]}` is None, and its "
                                       f"body sets `{once[1]}`: it runs once per run of the loop on line {line}"])
    first = periodicity.first_iterations(ctx, loop)
    if first is not None:
        return LoopRole(FEW, loop, [f"the `if {unparse(first[0], 40)}` on line {first[0].lineno} runs it only in the "
                                    f"first {first[1]} iteration{'s' if first[1] != 1 else ''} of the loop on line {line}"])
    guard = periodicity.periodic_guard_test(model, ctx, loop)
    if guard is not None and _outside_a_loop_of_steps(model, ctx, loop, guard):
        guard = None  # ``if step % every == 0: for _ in range(every): update()``: every step of the inner loop
    step = _gated_step(model, loop, guard, gate) if guard is not None and gate is not None else None
    if guard is not None and step is None:
        return LoopRole(PERIODIC, loop, lambda: [f"the `if {unparse(guard, 40)}` on line {guard.lineno} runs it only "
                                                 f"now and then in the loop on line {line}"])
    walked = work.walked_mapping(model, loop)
    if walked is not None and not (f is not None and F.per_step(F.repeats(model, f))):
        return LoopRole(PARTS, loop, [f"the loop on line {line} walks the entries of `{walked}`, reading it by each key: "
                                      "one pass over the parts of one structure, in code not shown to run at the "
                                      "steps of a loop"])
    rec = looprecord.record(model, loop)
    program = rec.program
    if program is not None:
        return LoopRole(PROGRAM, loop, lambda: [f"one iteration of the loop on line {line} runs a whole program "
                                                f"(`{unparse(program.func, 40)}` on line {program.lineno})"])
    if rec.sweep:
        return LoopRole(SWEEP, loop, [f"the loop on line {line} walks the points of a sweep"])
    if rec.converts:
        return LoopRole(CONVERSION, loop, [f"the loop on line {line} only converts the elements it walks"])
    if syncs and loopfacts.few_iterations(model, ctx):
        return LoopRole(FEW, loop, ["the loops around it run a few known times in all (at most 100)"])
    if step is not None:
        return LoopRole(PER_STEP, loop, lambda: _per_step_evidence(model, loop)[:2] + [
            f"the `if {unparse(guard, 40)}` on line {guard.lineno} schedules the steps themselves: it holds "
            f"every compiled update of the state `{unparse(step.func, 40)}` (line {step.lineno}) rebinds, and "
            "this test gates that step, so it runs before every step"], schedule=guard)
    return LoopRole(PER_STEP, loop, lambda: _per_step_evidence(model, loop))


def _outside_a_loop_of_steps(model, ctx: Context, loop: Loop, guard: ast.AST) -> bool:
    """The periodic ``guard`` sits outside ``loop`` (the innermost loop of JAX work around the node), and
    that loop threads JAX state from one iteration to the next: a burst of training steps every so often
    (SAC's ``update_every`` gradient steps every ``update_every`` environment steps), each of which runs the
    node. An evaluation pass under such a guard (it carries no state: each batch on its own) stays periodic."""
    depth = next((d for t, d in ctx.guards if t is guard), None)
    if depth is None or loop not in ctx.loops or depth > ctx.loops.index(loop) or loop.kind == "comprehension":
        return False
    return bool(work.carried_state(model, loop))


def _leaving_branch(model, ctx: Context, loop: Loop) -> Optional[ast.If]:
    """The ``if`` inside ``loop`` (not inside a loop nested in it) whose branch holding the node ends
    the loop at its own level (a ``break``, ``return`` or ``raise`` statement in that branch's block)."""
    if not ctx.branches:
        return None
    by_id = work.ifs_by_id(model)
    deeper = ctx.loops[ctx.loops.index(loop) + 1:] if loop in ctx.loops else ()
    for if_id, branch in ctx.branches:
        node = by_id.get(if_id)
        block = (node.body if branch == 0 else node.orelse) if node is not None else ()
        if not any(isinstance(st, (ast.Break, ast.Return, ast.Raise)) for st in block):
            continue
        if _within(node, loop.node) and not any(_within(node, lp.node) for lp in deeper):
            return node
    return None


def _lazy_init(model, ctx: Context, loop: Loop) -> Optional[tuple]:
    """``(the if, name)`` of an ``if name is None (and ...):`` inside ``loop`` around the node whose body
    binds ``name`` to something other than None, with no statement of the loop setting it back to
    None: a value made on first use, once per run of the loop."""
    by_id = work.ifs_by_id(model)
    for if_id, branch in ctx.branches:
        node = by_id.get(if_id)
        if node is None or branch != 0 or not _within(node, loop.node):
            continue
        parts = node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And) else [node.test]
        for t in parts:
            if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Is)
                    and isinstance(t.left, ast.Name) and isinstance(t.comparators[0], ast.Constant)
                    and t.comparators[0].value is None):
                continue
            name = t.left.id
            sets = [a for a in walk(loop.node) if isinstance(a, ast.Assign)
                    and any(isinstance(x, ast.Name) and x.id == name for tg in a.targets for x in walk(tg))]
            if any(_within(a, node) for a in sets) and not any(
                    isinstance(a.value, ast.Constant) and a.value.value is None for a in sets):
                return node, name
    return None


def _within(node: ast.AST, outer: ast.AST) -> bool:
    return (outer.lineno, outer.col_offset) < (node.lineno, node.col_offset) and \
        node.end_lineno <= (outer.end_lineno or outer.lineno)


def _gated_step(model, loop: Loop, guard, gate):
    """The step ``gate`` (an ``if``) gates when the ``if`` statement of the periodic test ``guard``
    schedules the loop's steps (:func:`work.gated_step`), else None."""
    guard_if = next((n for n in walk(loop.node) if isinstance(n, ast.If) and n.test is guard), None)
    return work.gated_step(model, loop, guard_if, gate) if guard_if is not None else None


def _per_step_evidence(model, loop: Loop) -> list:
    line = loop.node.lineno
    work = next((c for c in loop.all_calls() if callables.callable_info(model, c.func, model.scope_at(c)) is not None), None)
    return [f"the loop on line {line} calls compiled code every iteration "
            f"(`{unparse(work.func, 40)}` on line {work.lineno})" if work is not None else
            f"the loop on line {line} runs JAX operations every iteration",
            "its trip count is not known to be small, and one iteration runs no whole program "
            "(no device loop, epoch or solve)",
            "no periodic `if` guards it"]


def loop_role(model, loop: Loop, ctx: Context) -> LoopRole:
    """The role of one loop around a node, for the rules about what repeats from one iteration
    to the next (a key, a constant seed, a compile, a shape): :data:`BENCHMARK` when the loop
    measures time (its loop record's ``benchmark``: compiling or drawing the same numbers per
    configuration may be the point), :data:`PER_STEP` for a loop over steps (the record's ``steps``
    proven: ``while``, ``range``/``count``, or JAX state threaded through its iterations), else
    :data:`ITEMS` (items or configurations). Decided here, once, for all of them."""
    rec = looprecord.record(model, loop)
    if rec.benchmark is not None:
        return LoopRole(BENCHMARK, loop, [rec.benchmark])
    steps = rec.steps
    if steps.proven:
        return LoopRole(PER_STEP, loop, [steps.why])
    return LoopRole(ITEMS, loop, [steps.why])


def block_role(model, ctx: Optional[Context]) -> LoopRole:
    """:func:`sync_role` for a ``block_until_ready``, which a benchmark or a host-paced loop needs."""
    role = sync_role(model, ctx)
    if role.kind != PER_STEP:
        return role
    loop = role.loop
    if looprecord.record(model, loop).measures:
        return LoopRole(BENCHMARK, loop, [f"the loop on line {loop.node.lineno} measures time: blocking is the point"])
    pacing = hostneeds.host_paced(model, loop)
    if pacing is not None:
        return LoopRole(HOST_PACED, loop, lambda: [f"the loop on line {loop.node.lineno} is paced by "
                                                   f"`{unparse(pacing.func, 30)}` on line {pacing.lineno}"])
    return role


# How often a function runs.
PER_STEP_CALLS = "per-step"  # at the steps of a loop (a ``range``/``while`` loop, a step method)
REPEATS = "repeats"  # again and again, not known to be per step (per item of a loop, a factory's product)
ONCE = "once"  # once per program, run or test, by the call graph or the language (``__init__``, cached)
ONCE_BY_NAME = "once-by-name"  # once, but only names say so (the conventions' set-up and entry-point names)
UNKNOWN = "unknown"  # no evidence either way


class Frequency:
    """How often a function runs: ``kind`` (one of the constants above), ``rep`` (the
    ``Repetition`` evidence when it repeats) and ``evidence`` (sentences)."""

    __slots__ = ("kind", "rep", "evidence")

    def __init__(self, kind: str, rep, evidence: list):
        self.kind = kind
        self.rep = rep
        self.evidence = evidence

    @property
    def repeats(self) -> bool:
        return self.kind in (PER_STEP_CALLS, REPEATS)

    def __repr__(self) -> str:
        return f"Frequency({self.kind!r})"


def frequency(model, f: FunctionInfo, project: bool = True) -> Frequency:
    """How often ``f`` runs: the module's call graph first (a call in a loop, a caller that
    repeats, every call made once), then what the language says (constructors, cached builders),
    then, where the module shows no call, the naming conventions (step methods and parameters
    repeat; set-up and entry-point names run once)."""
    rep = F.repeats(model, f, project=project)  # project=False: not the project's other modules
    if rep is not None:
        return Frequency(PER_STEP_CALLS if F.per_step(rep) else REPEATS, rep, E.repetition(rep, model.conventions))
    if F.runs_once_by_facts(model, f):
        return Frequency(ONCE, None, [f"every call of `{f.name}` in this module is made once, or it is a "
                                      "constructor or a cached builder"])
    if F.runs_once(model, f):
        keys = [k for k in ("setup-functions", "setup-exact", "entry-points", "demo-functions")
                if model.conventions.matches(k, f.name)]
        named = f"`{f.name}` matches the convention {', '.join(f'`{k}`' for k in keys)}" if keys else \
            f"`{f.name}` is nested in or called from code so named"
        return Frequency(ONCE_BY_NAME, None, [f"only names say `{f.name}` runs once: {named}"])
    return Frequency(UNKNOWN, None, [f"no call of `{f.name}` in this module shows how often it runs"])
