"""Step loops: how long the device sat idle waiting for the host, and which host lines filled
that time (issue 38). Plain data and report text; nothing here imports JAX (the watcher that
feeds it is :mod:`.steps`).

What is measured, per jitted call the program makes (``jax.jit``/``jax.pmap`` functions, the
user's and the libraries'):

* when its dispatch began and returned (the host's clock), whether it traced or compiled;
* when its result was ready: a watcher thread blocks on one of the call's output arrays
  (``block_until_ready``, which releases the GIL) and reads the clock when it returns, within
  about :data:`.steps.SWITCH_INTERVAL` (the interpreter's switch interval while jaxlint runs);
  a result that was ready when the call returned (a backend that dispatches synchronously) is
  ready at that return.

Calls run on the device one after another in the order they were dispatched, so the device is
idle from one call's ready time until the next call reaches it: the next dispatch's start, or,
when that call traced or compiled, its return (compiling keeps the device waiting too). Those
gaps are the **idle windows**; they are measured. What the host did during them is
**sampled**: while a window is open, the watcher looks at the dispatching thread's stack every
:data:`.steps.SAMPLE_SECONDS` and gives the time since its last look to the line it finds (the
statement of the loop's own frame, and the innermost line of the user's code under it). Line
seconds are therefore estimates whose sum is the measured idle time.

A **step loop** is the calls of one jitted function from one call site, at least
:data:`MIN_STEPS` of them; its wall time runs from its first call's return (after its first
compile) to its last call's result being ready, and its idle share is the idle time inside that
span. At :data:`HOST_BOUND_SHARE` or more it is **host-bound** (XProf's "highly input-bound").

Past a function's first :data:`.steps.WATCH_ALL` calls the watcher is given at most one call per
:data:`.steps.WATCH_GAP` (waking it costs the dispatching thread a GIL hand-off, about 10% of a
2 ms TPU step when every call woke it): a loop's idle time is then measured after its watched steps
and scaled to all of them, and the report says so (``watched_steps``).

Not seen: device work that is not a jitted call (eager operations' device time counts as host
time, as their dispatch is), and work of other processes on the device.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

MIN_STEPS = 10
HOST_BOUND_SHARE = 0.20
MAX_WINDOWS = 200_000  # idle windows kept per run; past it each one is added to its loop's totals only
MAX_LINES = 8  # host lines shown per loop in the text report (the JSON has every one)

# What a sample found the host doing (the innermost frame of the dispatching thread).
PYTHON, JIT, NUMPY, JAX, UNSAMPLED = "python", "jit", "numpy", "jax", "unsampled"
# Whether the watcher samples the dispatching thread's stack while the device waits (steps.py). Not on CPython
# 3.11: reading another running thread's frames there can crash the process (SIGSEGV; CPython issues 106092 and
# 111363, the last still open, and 3.11 takes security fixes only), and a `jaxlint trace` run must never crash
# the program. Seen in this project's CI: in the sampler's frame walk (a Python loop over `f_back`), and again,
# twice in one run under load, after the walk was made one call into C. There the main thread samples itself
# when the watcher signals it (ownstack.py); a loop run by another thread is measured all the same, but which
# host lines filled its idle time is not (one unsampled row per loop, and a note).
SAMPLES_STACKS = not (sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11))
# How a loop's idle windows were sampled (the report's ``step_loops.sampling``).
SAMPLED_BY_WATCHER, SAMPLED_BY_SIGNAL, NOT_SAMPLED_HERE = "watcher", "signal", "none"
NOT_SAMPLED = ("host lines are not sampled for step loops run by a thread other than the main one on CPython "
               "3.11, nor where the program handles SIGURG itself (reading another running thread's frames can "
               "crash it: CPython issue 111363); the idle time is measured, its lines are not; run on Python "
               "3.10 or 3.12+ to see them")


class Window:
    """One idle window: the device waited from ``start`` to ``end`` (host clock, seconds) for
    the call that ended it (``loop``: its loop key); ``lines``: {(loop line, file, line,
    what): seconds} from the samples taken in it."""

    __slots__ = ("start", "end", "loop", "lines")

    def __init__(self, start: float, end: float, loop: Any, lines: dict):
        self.start, self.end, self.loop, self.lines = start, end, loop, lines


class Loop:
    """Calls of one jitted function (``key``) from one call site (``site``: (file, line))."""

    __slots__ = ("key", "site", "steps", "unwatched", "first_return", "last_ready", "last_return", "unmeasured",
                 "compiled_steps", "overflow_idle", "overflow_lines")

    def __init__(self, key: Any, site: tuple):
        self.key, self.site = key, site
        self.steps = 0  # calls the watcher saw (the idle window after each is measured)
        self.unwatched = 0  # calls it was not given (steps.WATCH_GAP): counted, their windows not measured
        self.first_return: Optional[float] = None
        self.last_ready: Optional[float] = None
        self.last_return: Optional[float] = None
        self.unmeasured = 0  # calls whose result's ready time could not be read (donated before the read)
        self.compiled_steps = 0  # calls that traced or compiled (their compile time is idle time)
        self.overflow_idle = 0.0  # idle windows past MAX_WINDOWS, summed here
        self.overflow_lines: dict = {}


class Stretch:
    """One function's dispatches since the device last had none of its calls to compute: each call
    after the first found an earlier one still computing (the device busy with them throughout).

    Under jaxlint the host dispatches more slowly than the program alone (jaxlint's own work in
    each call), so fewer calls are in flight: the donation advice would describe the traced run,
    not the program's. Over a stretch the device finished ``n + depth0 - depth`` calls in the time
    between the stretch's first dispatch and this one (its rate, measured); without jaxlint's own
    ``own`` seconds the host would have reached this dispatch that much sooner, while the device
    had finished ``rate x own`` fewer calls: about that many more in flight. An estimate, and a low
    one: jaxlint's time outside this function's calls (eager hooks, the watcher thread) is not in
    ``own``."""

    __slots__ = ("t0", "depth0", "n", "own")

    def __init__(self, t0: float, depth0: int):
        self.t0, self.depth0 = t0, depth0
        self.n = 0  # calls dispatched since the first one (it included)
        self.own = 0.0  # jaxlint's own seconds in those calls (outside JAX's dispatch)

    def plain_depth(self, t: float, depth: int) -> Optional[float]:
        """The estimated depth without jaxlint at a dispatch at ``t`` that found ``depth`` earlier
        calls computing (``depth`` itself while no call of the stretch has finished: every call
        dispatched is in flight, as it would be without jaxlint); None without a time of jaxlint's."""
        if t <= self.t0 or self.own <= 0:
            return None
        done = self.n + self.depth0 - depth
        if done <= 0:
            return float(depth)
        return min(depth + done / (t - self.t0) * self.own, float(self.depth0 + self.n))


class StepLog:
    """What the watcher saw for one collector (a run or an ``audit()`` block)."""

    def __init__(self):
        self.loops: dict = {}  # (key, site) -> Loop
        self.windows: list = []  # [Window], in time order
        self.calls = 0
        self.unmeasured_windows = 0  # windows whose start (the previous result's ready time) is unknown
        self.in_flight: dict = {}  # function key -> the most earlier calls of it not done at one of its dispatches
        # function key -> (estimated depth without jaxlint, jaxlint's own seconds a call): Stretch
        self.in_flight_plain: dict = {}
        self.peak_before: dict = {}  # function key -> the device's peak_bytes_in_use before its first call
        self.peak_after: dict = {}  # function key -> the highest peak_bytes_in_use read after its calls
        self.in_use_after: dict = {}  # function key -> the most bytes_in_use read right after one of its dispatches
        self.peak_end: Optional[int] = None  # the device's peak_bytes_in_use when the run (or block) ended
        self.device_memory: Optional[bool] = None  # whether the device reports memory statistics
        self.sync_dispatch = 0  # calls whose result was ready when the call returned
        self.sync_checked = 0  # calls whose readiness was read when the call returned (not the quick ones)
        self.notes: list = []
        self.sampling: set = set()  # SAMPLED_BY_* of the calls the watcher was given

    def loop(self, key: Any, site: tuple) -> Loop:
        lp = self.loops.get((key, site))
        if lp is None:
            lp = self.loops[(key, site)] = Loop(key, site)
        return lp

    def add_window(self, w: Window) -> None:
        if len(self.windows) < MAX_WINDOWS:
            self.windows.append(w)
            return
        lp = self.loops.get(w.loop)
        if lp is not None:
            lp.overflow_idle += w.end - w.start
            for k, s in w.lines.items():
                lp.overflow_lines[k] = lp.overflow_lines.get(k, 0.0) + s


def attribute(samples: list, start: float, end: float, owed: float, last: Any) -> tuple:
    """``({line key: seconds}, owed, last key)`` of one window from its samples ``[(t, key)]`` (in
    time order). Samples are taken on one schedule across windows (one per
    :data:`.steps.SAMPLE_SECONDS` of idle time, whatever the windows' lengths), so each sample gets
    the idle time since the one before it, ``owed`` from earlier windows included; the idle time
    after the window's last sample is owed to the next sample. Samples after ``end`` are dropped
    (the host was already dispatching the next call)."""
    out: dict = {}
    prev = start
    for t, key in samples:
        if t > end:
            break
        if t > prev:
            out[key] = out.get(key, 0.0) + owed + (t - prev)
            owed, prev, last = 0.0, t, key
    return out, owed + max(0.0, end - prev), last


# -- the report (no JAX) ------------------------------------------------------------------


def section(collector, records_by_key: dict) -> dict:
    """The report's ``step_loops`` object: ``{loops: [...], note, backend_note}``;
    ``records_by_key``: record key -> (qualname, file, line) of the user's functions."""
    log: StepLog = getattr(collector, "steps", None)
    if log is None:
        return {"loops": [], "calls": 0}
    rows = []
    rows_by_call = getattr(collector, "call_rows", {})
    for lp in log.loops.values():
        steps = lp.steps + lp.unwatched
        if steps < MIN_STEPS or lp.first_return is None:
            continue
        key = rows_by_call.get(lp.key, lp.key)
        named = records_by_key.get(key)
        if named is None:
            continue
        end = max(lp.last_ready or 0.0, lp.last_return or 0.0) or None
        span = max(0.0, (end or 0.0) - lp.first_return)
        idle, lines = _idle_in(log.windows, lp.first_return, end)
        idle += lp.overflow_idle
        for k, s in lp.overflow_lines.items():
            lines[k] = lines.get(k, 0.0) + s
        if lp.unwatched and lp.steps:  # windows measured after the watched steps only: scaled to all
            scale = steps / lp.steps
            idle = min(span, idle * scale)
            lines = {k: s * scale for k, s in lines.items()}
        share = idle / span if span > 0 else 0.0
        qualname, file, line = named
        rows.append({
            "function": qualname, "file": file, "line": line, "call_file": lp.site[0], "call_line": lp.site[1],
            "steps": steps, "watched_steps": lp.steps, "seconds": round(span, 6), "idle_seconds": round(idle, 6),
            "idle_share": round(share, 4), "host_bound": share >= HOST_BOUND_SHARE,
            "compiled_steps": lp.compiled_steps, "unmeasured_steps": lp.unmeasured,
            "lines": _lines(lines, idle),
        })
    rows.sort(key=lambda r: (-r["idle_seconds"], r["function"]))
    for r in rows:
        r["fix"] = loop_fix(r)
    return {"loops": rows, "calls": log.calls, "host_bound_share": HOST_BOUND_SHARE, "min_steps": MIN_STEPS,
            "sync_dispatch_calls": log.sync_dispatch, "sync_checked_calls": log.sync_checked,
            "unmeasured_windows": log.unmeasured_windows,
            "sampling": sorted(log.sampling),
            "notes": list(log.notes)}


def _idle_in(windows: list, start: float, end: Optional[float]) -> tuple:
    """(seconds, {line key: seconds}) of the idle windows inside [start, end], clipped to it."""
    total, lines = 0.0, {}
    if end is None:
        return total, lines
    for w in windows:  # in time order
        if w.end <= start:
            continue
        if w.start >= end:
            break
        lo, hi = max(w.start, start), min(w.end, end)
        if hi <= lo:
            continue
        whole = w.end - w.start
        frac = (hi - lo) / whole if whole > 0 else 0.0
        total += hi - lo
        for k, s in w.lines.items():
            lines[k] = lines.get(k, 0.0) + s * frac
    return total, lines


def _lines(lines: dict, idle: float) -> list:
    """One row per host line, largest first: the loop's own statement (``loop_line``; None when
    the host was outside the loop's frame), the innermost line of the user's code under it, what
    ran there (``python``, ``numpy``, ``jax``: eager JAX, ``jit``: dispatching or compiling a
    jitted call, or a library's top-level package), seconds and share of the idle time."""
    merged: dict = {}
    for (loop_line, file, line, what), s in lines.items():
        k = (loop_line, file, line, what)
        merged[k] = merged.get(k, 0.0) + s
    sampled = sum(merged.values())
    if sampled > 0:  # the samples give the shares; the measured idle time is what they share
        merged = {k: s * idle / sampled for k, s in merged.items()}
    out = []
    for (loop_line, file, line, what), s in sorted(merged.items(), key=lambda kv: -kv[1]):
        out.append({"loop_line": loop_line, "file": file, "line": line, "what": what, "seconds": round(s, 6),
                    "share": round(s / idle, 4) if idle > 0 else 0.0, "fix": line_fix(what)})
    return out


def line_fix(what: str) -> Optional[str]:
    if what == UNSAMPLED:
        return None  # windows shorter than the sampling interval: nothing to say where the host was
    if what == JIT:
        return ("dispatching a jitted call: compiling it (see the recompilation hotspots) or copying its NumPy "
                "arguments to the device; `jax.device_put` the next batch ahead, from a background thread")
    if what == JAX:
        return "eager JAX operations on the host's dispatch path: move them into the jitted step"
    if what == NUMPY:
        return ("NumPy work on the host: do it in a background loader thread that prepares the next batch, "
                "or as jnp inside the jitted step")
    if what == PYTHON:
        return ("Python work on the host: prepare the next step's inputs in a background thread (a queue a "
                "few batches deep) while the device runs this one")
    return (f"work in {what} on the host: run it in a background loader that prefetches the next batches "
            "(and `jax.device_put` them) while the device computes")


def loop_fix(r: dict) -> Optional[str]:
    if not r["host_bound"]:
        return None
    return (f"the device waited {r['idle_share']:.0%} of this loop for the host: overlap the host's work with "
            "the device (prepare and `jax.device_put` the next batch in a background thread while this step "
            "runs; a prefetching loader such as flax's `prefetch_to_device` or grain), or move array work "
            "into the jitted step")


def backend_note(backend: Optional[str], sync_calls: int, calls: int, sampling=()) -> Optional[str]:
    """What this backend (or this Python) cannot tell (None when it can tell everything);
    ``sampling``: how the run's idle windows were sampled (``SAMPLED_BY_*``)."""
    notes = [NOT_SAMPLED] if NOT_SAMPLED_HERE in sampling else []
    if backend == "cpu":
        notes.append("on the cpu backend the device is this machine's own cores: the idle share is measured the "
                     "same way, but host work and XLA's computation share those cores, so moving host work to a "
                     "background thread overlaps only as far as cores are free; on a GPU/TPU the same host work "
                     "can run while the device computes")
    if calls and sync_calls >= 0.9 * calls:
        notes.append(f"{sync_calls} of {calls} calls' results were ready when the call returned: this backend ran "
                     "them synchronously (no asynchronous dispatch), so the device never ran ahead of the host")
    return "; ".join(notes) or None


def text_lines(report: dict, where, max_rows: int = 20) -> list:
    sl = report.get("step_loops")
    if not sl or not sl.get("loops"):
        return []
    how = sl.get("sampling") or []
    out = ["", "Step loops: device time waiting for the host (idle windows measured; host lines "
                   + ("not sampled on this Python)" if how == [NOT_SAMPLED_HERE] else "sampled)")]
    for r in sl["loops"][:max_rows]:
        verdict = "host-bound" if r["host_bound"] else "not host-bound"
        out.append(f"  {r['function']} called at {where(r['call_file'], r['call_line'])}: {r['steps']} steps in "
                   f"{r['seconds']:.2f} s, device idle {r['idle_seconds']:.2f} s ({r['idle_share']:.0%}): {verdict}")
        for ln in r["lines"][:MAX_LINES]:
            if ln["seconds"] < 0.0005:
                continue
            at = where(ln["file"], ln["line"])
            loop = f"loop line {ln['loop_line']}, " if ln["loop_line"] and ln["loop_line"] != ln["line"] else ""
            out.append(f"      {ln['seconds']:>7.3f} s {ln['share']:>4.0%}  {at} ({loop}{ln['what']})")
        if r["host_bound"]:
            top = r["lines"][0] if r["lines"] else None
            if top is not None and top["fix"]:
                out.append(f"      fix for {where(top['file'], top['line'])}: {top['fix']}")
            out.append(f"      fix: {r['fix']}")
        if r.get("watched_steps", r["steps"]) < r["steps"]:
            out.append(f"      idle measured after {r['watched_steps']} of {r['steps']} steps (all at first, then")
            out.append("      one per 10 ms), scaled to all of them: an estimate")
        if r["unmeasured_steps"]:
            out.append(f"      {r['unmeasured_steps']} step(s) whose result was donated before its ready time could "
                       "be read: the idle time before the next step is not counted")
    if sl.get("backend_note"):
        out.append(f"  note: {sl['backend_note']}")
    return out


def html_section(report: dict, escape, where, table) -> str:
    """The HTML section; ``where(file, line)`` gives a cell's HTML (escaped, with break points)."""
    sl = report.get("step_loops")
    if not sl or not sl.get("loops"):
        return ""
    rows = []
    for r in sl["loops"]:
        lines = "<br>".join(
            f"{ln['seconds']:.3f} s ({ln['share']:.0%}) {where(ln['file'], ln['line'])} {escape(ln['what'])}"
            for ln in r["lines"][:MAX_LINES] if ln["seconds"] >= 0.0005 or ln["share"] >= 0.01)
        verdict = '<span class="no">host-bound</span>' if r["host_bound"] else "not host-bound"
        rows.append([f"<code>{escape(r['function'])}</code>", where(r["call_file"], r["call_line"]),
                     str(r["steps"]), f"{r['seconds']:.3f}", f"{r['idle_seconds']:.3f}", f"{r['idle_share']:.0%}",
                     verdict, lines, escape(r["fix"] or "")])
    note = ('<p class="note">Idle windows are measured (each step\'s result ready time, read by a watcher thread, '
            'to the next dispatch); the host lines that filled them are sampled while the device waits, so their '
            f'seconds are estimates that add up to the measured idle time. Host-bound: idle at least '
            f'{sl["host_bound_share"]:.0%} of the loop.</p>')
    if sl.get("backend_note"):
        note += f'<p class="note">{escape(sl["backend_note"])}</p>'
    return ('<section id="step-loops"><h2>Step loops: device time waiting for the host</h2>' + note
            + table(["function", "called at", "steps", "loop s", "idle s", "idle", "verdict", "host lines (idle time)",
                     "fix"], rows, (2, 3, 4, 5)) + "</section>")
