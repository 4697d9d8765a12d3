"""What compilation cost: seconds per cache miss, attributed to the miss's reasons and to the
user line whose call caused it, and the share of the run's wall time spent compiling.

Plain data, no JAX imports. The definitions (README, "Dynamic mode", documents them too):

* A **miss** is one trace of a function (one trace-cache miss). Its **seconds** are its trace
  plus every lowering and compilation attributed to the function after it, until the function's
  next trace (a compilation with no trace before it, such as the derived programs of
  ``jax.grad`` of a jitted function or a compile-cache miss on a trace-cache hit, counts with the
  latest miss, as the timeline's reason does).
* The **first compile** of a function is its first miss: unavoidable, shown apart. **Time lost**
  is the seconds of all its later misses (``lost_seconds``), each also counted under every reason
  of that miss (a miss where two arguments changed counts under both, so per-reason seconds can
  add up to more than ``lost_seconds``) and under its **call site**: the innermost user frame
  calling into the trace (the line that called the jitted function, the library call a library's
  jit came from).
* The **wall time compiling** is the time covered by at least one trace, lowering or
  compilation (the union of their intervals: a trace of a jitted function inside another's trace
  is counted once), for the user's functions, for JAX's own eager operations, and for both.
  Per-function seconds are each function's own and are not disjoint across rows (an inner jitted
  function's trace is also part of the outer one's).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Optional

# recent intervals a new one is merged with; older ones are only summed (an event spans only
# the events that ended during it, which are the most recent ones)
MAX_INTERVALS = 4096


class Cost:
    """One function's trace/lower/compile seconds, miss by miss."""

    __slots__ = ("misses", "first_seconds", "lost_seconds", "by_reason", "sites", "guessed_seconds",
                 "first_site", "_current", "_open", "_pending")

    def __init__(self):
        self.misses = 0
        self.first_seconds = 0.0
        self.lost_seconds = 0.0
        self.by_reason: Counter = Counter()  # miss reason key -> lost seconds of the misses it was a reason of
        self.sites: dict = {}  # (file, line) -> [misses, seconds, lost seconds]
        self.guessed_seconds = 0.0  # seconds of compiles attributed to this function by name only
        self.first_site: Optional[tuple] = None  # the call site of the first miss
        # thread -> (reason keys, site entry, first) of that thread's latest miss: a compile event
        # comes in the thread that traced, so two threads' concurrent first traces each get their own
        self._current: dict = {}
        self._open = False  # a miss begun before its trace was explained (the classic jax.pmap)
        self._pending = 0.0  # the seconds of that miss so far, for its reasons once they are known

    def begin(self, site: tuple) -> None:
        """Start a miss whose lowering and compile arrive before its trace is recorded (the classic
        ``jax.pmap`` traces, lowers and compiles in one call); :meth:`missed` then explains it."""
        self._new((), site)
        self._open, self._pending = True, 0.0

    def missed(self, keys: tuple, site: tuple, seconds: float) -> bool:
        """One trace of ``seconds`` called from ``site`` (file, line), with the miss reason keys
        ``keys`` (``Record.last_keys``); True when it counts as time lost."""
        if self._open:
            self._open = False
            me = threading.get_ident()
            _, entry, first = self._current[me]
            self._current[me] = (tuple(keys), entry, first)
            if not first:
                for k in keys:
                    self.by_reason[k] += self._pending
        else:
            self._new(keys, site)
        return self.spent(seconds)

    def _new(self, keys: tuple, site: tuple) -> None:
        first = self.misses == 0
        if first:
            self.first_site = site
        self.misses += 1
        entry = self.sites.get(site)
        if entry is None:
            entry = self.sites[site] = [0, 0.0, 0.0]
        entry[0] += 1
        self._current[threading.get_ident()] = (tuple(keys), entry, first)

    def spent(self, seconds: float, by_name: bool = False) -> bool:
        """A lowering or compile (or the trace itself) of ``seconds`` for the latest miss; True
        when it counts as time lost."""
        current = self._current.get(threading.get_ident())
        if current is None:  # a compile with no trace recorded before it (in this thread): a new miss
            self._new((), (None, None))
            current = self._current[threading.get_ident()]
        keys, entry, first = current
        entry[1] += seconds
        if self._open:
            self._pending += seconds
        if by_name:
            self.guessed_seconds += seconds
        if first:
            self.first_seconds += seconds
            return False
        self.lost_seconds += seconds
        entry[2] += seconds
        for k in keys:
            self.by_reason[k] += seconds
        return True


class Busy:
    """The time covered by a set of intervals that are reported when they end."""

    __slots__ = ("seconds", "_recent")

    def __init__(self):
        self.seconds = 0.0
        self._recent: list = []  # [[start, end]], disjoint, by time

    def add(self, start: float, end: float) -> None:
        recent = self._recent
        while recent and recent[-1][1] > start:
            s, e = recent.pop()
            self.seconds -= e - s
            start, end = min(start, s), max(end, e)
        recent.append([start, end])
        self.seconds += end - start
        if len(recent) > MAX_INTERVALS:
            del recent[: len(recent) - MAX_INTERVALS]


class Clock:
    """The run's wall time covered by traces, lowerings and compiles: all of them, the user
    functions', the user functions' after their first compile (time lost), JAX's internal ones."""

    __slots__ = ("total", "functions", "lost", "internal")

    def __init__(self):
        self.total, self.functions, self.lost, self.internal = Busy(), Busy(), Busy(), Busy()

    def add(self, start: float, seconds: float, user: bool, lost: bool = False) -> None:
        end = start + max(0.0, seconds)
        self.total.add(start, end)
        (self.functions if user else self.internal).add(start, end)
        if lost:
            self.lost.add(start, end)


def spend(collector, rec, start: float, seconds: float, site: Optional[tuple] = None, trace: bool = False,
          by_name: bool = False) -> None:
    """Account one trace (``trace``: a new miss from ``site``), lowering or compile of ``rec``
    (None: JAX's own) that began at ``start`` (``time.perf_counter()``)."""
    if rec is None:
        collector.clock.add(start, seconds, user=False)
        return
    if trace:
        lost = rec.cost.missed(rec.last_keys, site, seconds)
    else:
        lost = rec.cost.spent(seconds, by_name)
    collector.clock.add(start, seconds, user=True, lost=lost)


# -- the report ---------------------------------------------------------------


def function_keys(rec) -> dict:
    """The JSON keys a ``functions`` row gets from its cost."""
    c = rec.cost
    sites = sorted(c.sites.items(), key=lambda kv: (-kv[1][2], -kv[1][0], str(kv[0][0]), kv[0][1] or 0))
    return {
        "first_compile_seconds": round(c.first_seconds, 6),
        "lost_seconds": round(c.lost_seconds, 6),
        "misses": c.misses,
        "call_sites": [{"file": f, "line": l, "misses": n, "seconds": round(s, 6), "lost_seconds": round(lost, 6),
                        "first": (f, l) == c.first_site}
                       for (f, l), (n, s, lost) in sites],
        "seconds_matched_by_name": round(c.guessed_seconds, 6),
    }


def reason_seconds(rec, key: tuple) -> float:
    return round(rec.cost.by_reason.get(key, 0.0), 6)


def run_keys(collector, now: Optional[float] = None) -> dict:
    """The top-level JSON keys: the run's wall time and the part of it spent compiling."""
    end = collector.t_end if collector.t_end is not None else (now if now is not None else time.perf_counter())
    wall = max(0.0, end - collector.t0)
    clock = collector.clock
    return {
        "wall_seconds": round(wall, 6),
        "compiling_seconds": {"total": round(clock.total.seconds, 6), "functions": round(clock.functions.seconds, 6),
                              "lost": round(clock.lost.seconds, 6),
                              # outside the user functions' own intervals: an internal compile nested
                              # in a user function's trace (a library jit traced inside it) is that
                              # function's time, so functions + internal = total
                              "internal": round(max(0.0, clock.total.seconds - clock.functions.seconds), 6)},
        "compile_share": round(clock.total.seconds / wall, 4) if wall > 0 else 0.0,
    }


def sort_key(f: dict) -> tuple:
    """The hotspot order: time lost as shown (hundredths of a second), then compiles, then traces."""
    return (-round(f.get("lost_seconds", 0.0), 2), -f["compiles"], -f["traces"])


def site_lines(f: dict, where, max_sites: int = 3) -> list:
    """Per-call-site sub-lines of a hotspot row, when its misses came from more than one line."""
    sites = f.get("call_sites") or []
    if len(sites) < 2:
        return []
    out = []
    for s in sites[:max_sites]:
        n = s["misses"]
        first = (f" (first compile {s['seconds'] - s['lost_seconds']:.2f} s)" if s.get("first") else "")
        out.append(f"      from {where(s['file'], s['line'])}: {n} miss{'es' if n != 1 else ''}, "
                   f"{s['lost_seconds']:.2f} s lost{first}")
    if len(sites) > max_sites:
        out.append(f"      … {len(sites) - max_sites} more call sites (see --format json)")
    return out


def summary_lines(report: dict) -> list:
    """``compiling: 1.23 s of 4.56 s wall (27%)`` and its parts (none for a report without the keys)."""
    wall, c = report.get("wall_seconds"), report.get("compiling_seconds")
    if wall is None or not c:
        return []
    first = max(0.0, c["functions"] - c["lost"])
    return [f"  compiling: {c['total']:.2f} s of {wall:.2f} s wall ({report['compile_share']:.0%})",
            f"    functions {c['functions']:.2f} s (lost {c['lost']:.2f}, first compiles {first:.2f}), "
            f"JAX internal {c['internal']:.2f} s"]
