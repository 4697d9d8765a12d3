"""The loop record: everything the rules ask of one loop, computed once per loop (each field on first
read) with the evidence of each. The rules' policy (jaxlint/model/roles.py) reads these fields and
nothing else about a loop.

Fields:

* ``trips``: how many iterations, and where that number comes from (a literal, a default no call
  overrides, a slice with literal bounds), or unknown (data, configuration, arguments);
* ``steps``: a fact (proven, disproven, unknown): a loop over steps (``while``, ``range``/``count``,
  or one that threads JAX state from one iteration to the next: ``state = step(state, batch)``), or
  over items (the parts of one structure, the points of a sweep), or not known (a loop over data
  that carries no state);
* ``works``: one iteration dispatches JAX work;
* ``program``: the call that makes one iteration a whole program (a scanned epoch, a rollout);
* ``benchmark``: why the loop measures time (a clock read or a timing call in its iterations, or a
  function that returns a timing or is named so), or None. A clock read elsewhere in the function
  (a run's total time), or one under a periodic ``if`` of the loop (throughput logged every N
  steps), does not make its loops benchmarks;
* ``host_paced``: the call by which the host paces the loop (input, rendering), or None;
* ``sweep``, ``converts``: one iteration is a point of a sweep, or converts the element it walks.

A function of the model (``record(m, loop)``), memoized in the model's fact caches.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from ..facts import callables, hostneeds
from ..facts import loops as loopfacts
from ..facts import periodicity
from ..facts import work as W
from ..facts.proof import Fact, disproven, proven, unknown
from ..python.records import Loop
from ..facts.jaxrecords import _is_structural

_UNSET = object()


class Trips:
    """How many times a loop runs: ``count`` (an int, or None when not known) and ``source``
    ("literal", "default", "unknown") with ``why``."""

    __slots__ = ("count", "source", "why")

    def __init__(self, count: Optional[int], source: str, why: str):
        self.count = count
        self.source = source
        self.why = why


class LoopRecord:
    """One loop's facts (see the module docstring). Build with :func:`record`."""

    __slots__ = ("m", "loop", "_trips", "_steps", "_works", "_program", "_benchmark", "_host_paced", "_sweep",
                 "_converts")

    def __init__(self, m, loop: Loop):
        self.m = m
        self.loop = loop
        self._trips = self._steps = self._works = self._program = self._benchmark = _UNSET
        self._host_paced = self._sweep = self._converts = _UNSET

    @property
    def line(self) -> int:
        return self.loop.node.lineno

    @property
    def trips(self) -> Trips:
        if self._trips is _UNSET:
            m, it = self.m, loopfacts.loop_iterable(self.loop.node)
            scope = m.scope_at(it) if it is not None else None
            n = None if it is None else loopfacts.known_trips(m, it, scope)
            if n is not None:
                self._trips = Trips(n, "literal", f"the loop on line {self.line} runs {n} times, by its literals")
            else:
                n = None if it is None else loopfacts.known_trips(m, it, scope, defaults=True)
                self._trips = Trips(n, "default", f"the loop on line {self.line} runs {n} times, by a default no call "
                                                  "overrides") if n is not None else Trips(
                    None, "unknown", f"the trip count of the loop on line {self.line} comes from data, configuration "
                                     "or arguments")
        return self._trips

    @property
    def steps(self) -> Fact:
        if self._steps is _UNSET:
            self._steps = self._steps_fact()
        return self._steps

    def _steps_fact(self) -> Fact:
        loop, line = self.loop, self.line
        if loop.kind == "while":
            return proven("steps", f"the loop on line {line} is a `while` loop")
        if loop.ranged:
            return proven("steps", f"the loop on line {line} counts steps (`range`, `count`)")
        walked = W.walked_mapping(self.m, loop)
        if walked is not None:
            return disproven("steps", f"the loop on line {line} walks the entries of `{walked}`, reading it by each "
                                      "key: the parts of one structure")
        carried = W.carried_state(self.m, loop) if loop.kind != "comprehension" else set()
        if carried:
            names = ", ".join(f"`{n}`" for n in sorted(carried)[:3])
            return proven("steps", f"the loop on line {line} threads {names} from one iteration to the next through "
                                   "JAX calls")
        it = loopfacts.loop_iterable(loop.node)
        if it is not None and _is_structural(it):
            return disproven("steps", f"the loop on line {line} walks the parts of one structure")
        if loop.bounded:
            return disproven("steps", f"the loop on line {line} walks a few literal options")
        if self.sweep:
            return disproven("steps", f"the loop on line {line} walks the points of a sweep")
        return unknown("steps", f"the loop on line {line} walks items and carries no JAX state from one iteration to "
                                "the next: steps of work, or one item each")

    @property
    def works(self) -> bool:
        if self._works is _UNSET:
            self._works = loopfacts.loop_runs_jax_work(self.m, self.loop)
        return self._works

    @property
    def program(self) -> Optional[ast.Call]:
        if self._program is _UNSET:
            self._program = W.iteration_program(self.m, self.loop)
        return self._program

    @property
    def benchmark(self) -> Optional[str]:
        if self._benchmark is _UNSET:
            self._benchmark = self._benchmark_why()
        return self._benchmark

    def _benchmark_why(self) -> Optional[str]:
        m, loop, line = self.m, self.loop, self.line
        for c in loop.all_calls():
            if m.resolve(c.func, m.scope_at(c)) in N.TIMERS:
                if periodicity.periodic_guard(m, m.context(c), loop):
                    continue  # ``if step % 100 == 0: print(step / (time.time() - t0))``: throughput logged now and then
                return f"the loop on line {line} reads the clock in its iterations (line {c.lineno})"
            name = c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
            if m.conventions.matches("benchmark-names", name):
                if periodicity.periodic_guard(m, m.context(c), loop):
                    continue  # ``if step % 1000 == 0: measure_performance(params)``: an evaluation now and then
                own = callables.local_functions(m, c.func, m.scope_at(c))
                if own and not any(_reads_clock(m, g) for g in own):
                    continue  # the module's own helper reads no clock: it measures something else (accuracy)
                return (f"the loop on line {line} calls `{name}` in its iterations, a timing helper by its name "
                        "(convention `benchmark-names`)")
        return self._benchmark_function()

    def _benchmark_function(self) -> Optional[str]:
        """Why the function around the loop is a benchmark (named so, or it returns a timing)."""
        m = self.m
        ctx = m.context(self.loop.node)
        f = ctx.scope.func if ctx is not None else None
        g = f
        while g is not None:
            if m.conventions.matches("benchmark-names", g.name):
                return f"the loop is in `{g.name}`, a benchmark by its name (convention `benchmark-names`)"
            g = g.parent
        if f is not None and _reads_clock(m, f) and W.returns_timing(m, f):
            return f"the loop is in `{f.name}`, which returns a timing"
        return None

    @property
    def measures(self) -> bool:
        """A benchmark rather than a training loop that times itself: the loop measures time
        (``benchmark``) and either threads no state from one iteration to the next (``for _ in
        range(n): t0 = time.perf_counter(); step(x).block_until_ready()``), or its function is a
        benchmark (named so, or it returns the timing). A loop that carries training state and
        times its phases every step is not one."""
        if self.benchmark is None:
            return False
        return not W.carried_state(self.m, self.loop) or self._benchmark_function() is not None

    @property
    def host_paced(self) -> Optional[ast.Call]:
        if self._host_paced is _UNSET:
            self._host_paced = hostneeds.host_paced(self.m, self.loop)
        return self._host_paced

    @property
    def sweep(self) -> bool:
        if self._sweep is _UNSET:
            self._sweep = W.sweep_loop(self.m, self.loop)
        return self._sweep

    @property
    def converts(self) -> bool:
        if self._converts is _UNSET:
            self._converts = W.converts_elements(self.m, self.loop)
        return self._converts

    def evidence(self) -> list:
        """Every field computed so far, in sentences (``--explain-finding``)."""
        out = []
        if self._trips is not _UNSET:
            out.append(self._trips.why)
        if self._steps is not _UNSET:
            out.append(f"steps ({self._steps.status}): {self._steps.why}")
        if self._benchmark not in (_UNSET, None):
            out.append(self._benchmark)
        return out


def _reads_clock(m, f) -> bool:
    """Whether a clock call (``time.perf_counter()``...) is spelled anywhere inside ``f``: a cheap
    test before reading what ``f`` returns."""
    clocks = m.facts.clock_calls
    if clocks is None:
        names = {q.rsplit(".", 1)[1] for q in N.TIMERS}
        clocks = m.facts.clock_calls = sorted(c.lineno for c in m.calls_named(names))  # aliases (``timer()``) too
    node = f.node
    return any(node.lineno <= line <= node.end_lineno for line in clocks)


def record(m, loop: Loop) -> LoopRecord:
    """The record of ``loop``, made on first use and kept with the model's facts."""
    table = m.facts.loop_records
    if table is None:
        table = m.facts.loop_records = {}
    rec = table.get(id(loop))
    if rec is None:
        rec = table[id(loop)] = LoopRecord(m, loop)
    return rec


def timed_loop(m, loop: Optional[Loop]) -> bool:
    """Whether ``loop`` measures time (``record(m, loop).benchmark``)."""
    return loop is not None and record(m, loop).benchmark is not None
