"""The device watcher: when each jitted call's result is ready, how many calls of a function are
in flight at once, the device's memory peak around a function's first calls, and samples of the
host's stack while the device waits (issue 38). What it feeds, and what is measured or sampled,
is described in :mod:`.steploops` (step loops) and :mod:`.memory` (donation).

One watcher thread per process (``jaxlint-device-watch``, a daemon), started at the first jitted
call made while jaxlint listens. For each call the dispatching thread hands it one output array
(the smallest of the first and last few); the watcher blocks on it with ``block_until_ready``
(the GIL is released meanwhile) and reads the clock when it returns. While it has nothing to
wait for, the device is idle, and it samples the dispatching thread's stack every
:data:`SAMPLE_SECONDS`. The interpreter's switch interval is lowered to :data:`SWITCH_INTERVAL`
while the host is behind the device (a dispatch found the last result ready: the device may be
waiting), so that the watcher gets the GIL back within about that long after a result is ready;
while the host runs ahead of the device it is the program's own (Python's default: 5 ms), so that
the watcher does not slow the dispatches down; it is restored when jaxlint stops (unless the
program changed it meanwhile). The watcher holds one output array of each call (the smallest) until it
knows that call is done: no buffer lives longer than its computation, and the donation advice
does not count those references as the program's (``held``).
"""

from __future__ import annotations

import collections
import os
import queue
import sys
import threading
import time
from typing import Any, Optional

from . import steploops as S
from .ownstack import OwnSampler
from .ownstack import other_thread_stack as _stack

SAMPLE_SECONDS = 0.005  # one sample of the host's stack per this much idle time (carried across windows)
SWITCH_INTERVAL = 0.0002
PEAK_CALLS = 64  # calls of each function after which the device's peak is read
WATCH_ALL = 64  # the first calls of each function: every one is handed to the watcher
WATCH_GAP = 0.01  # after them, a call is handed over only this long after the last one handed over
# Past a function's first WATCH_ALL calls, a call dispatched within WATCH_GAP of the last one handed
# over, and not right after it, is counted and nothing more (``Quick``): the watcher would not be
# given it, no idle window ends at it, and reading readiness or the stack for it costs the
# dispatching thread more than anything it could tell (bench/trace_overhead_parts.py ``noquick``).
QUICK = True
_LEAVES_LOOKED_AT = 8  # from each end of a call's outputs, for the smallest array to wait on
_PERF = time.perf_counter  # bound before jaxlint wraps the clocks
_STOP = object()

# How many times this process is a forked child of the one that imported this module. A watcher
# belongs to the process it was made in; a child made by ``os.fork`` has no watcher thread. The
# dispatching thread compares this counter at every call instead of calling ``os.getpid()``: on
# the TPU machine we measured, that system call cost about 20 us, a tenth of a jitted call's dispatch.
_FORKS = [0]


def _forked() -> None:
    _FORKS[0] += 1


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork
    os.register_at_fork(after_in_child=_forked)


class Quick:
    """A call on the quick path (see ``QUICK``): what its return needs to count it, or to take the
    full path after all (it compiled, was given host data, or came later than the gap)."""

    __slots__ = ("key", "caller", "events", "t_d")

    def __init__(self, key: Any, caller, events: int, t_d: float):
        self.key, self.caller, self.events, self.t_d = key, caller, events, t_d


class Call:
    __slots__ = ("key", "logs", "code", "thread", "t_d", "t_r", "events", "compiled", "leaf", "ready", "prev",
                 "prev_ready", "next", "done", "uploaded", "handed")

    def __init__(self, key: Any, logs: list, code: Any, thread: int, t_d: float, events: int):
        self.key, self.logs, self.code, self.thread, self.t_d, self.events = key, logs, code, thread, t_d, events
        self.t_r: float = t_d
        self.compiled = False
        self.uploaded = False  # given host data, copied to the device inside the dispatch
        self.leaf: Any = None  # the output array to wait on, until it is known to be ready
        self.ready: Optional[float] = None  # when the result was ready (host clock)
        self.prev: Optional["Call"] = None
        self.prev_ready: Optional[bool] = None  # whether the previous call's result was ready at this dispatch
        self.next: Optional["Call"] = None  # the call dispatched after it
        self.done = False  # the watcher has finished with it
        self.handed = False  # given to the watcher thread


class Watcher:
    """Fed by :class:`.hooks.Counted` through :meth:`before` and :meth:`after` (the dispatching
    thread); everything it learns goes to the ``steps`` log of each collector listening."""

    def __init__(self, inst):
        self.inst = inst
        self._q: "queue.SimpleQueue" = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None
        self._pid = os.getpid()
        self._fork = _FORKS[0]  # the process it belongs to (see _FORKS)
        self._last: Optional[Call] = None
        self._pending: dict = {}  # function key -> deque of its calls not known to be done
        self._observed: dict = {}  # function key -> calls whose device peak was read
        self._handed: dict = {}  # function key -> its calls handed to the watcher thread
        self._pick: dict = {}  # function key -> (number of outputs, position of the one waited on)
        self._loops_kept: dict = {}  # (id(key), id(code), instruction) -> what _quick_loops found there
        self._stretch: dict = {}  # function key -> its steploops.Stretch (the device busy with its calls)
        self._handed_at = float("-inf")  # when the last call was handed over (its return)
        self._memory: Optional[bool] = None  # whether the device reports memory statistics
        self._device = None
        self._saved_interval: Optional[float] = None  # the program's switch interval
        self._interval: Optional[float] = None  # the one jaxlint set last
        self._interval_read: Optional[float] = None  # that one, as sys.getswitchinterval() gives it back
        self._lock = threading.Lock()
        self.counted_code = None  # Counted.__call__'s code: a sample inside it is a dispatch or compile
        self.held: set = set()  # id() of every output array held now (each until it is known to be ready)
        self._owed = 0.0  # idle seconds since the last sample, for the next one (the watcher thread's)
        self._last_key: Any = None  # what the last sample found
        self._last_window: Any = None
        self._last_window_tail: Any = None
        # CPython 3.11: samples taken by the main thread itself, on the watcher's signal (ownstack.py)
        self._own: Optional[OwnSampler] = None if S.SAMPLES_STACKS else OwnSampler()
        self._asked_at = float("-inf")  # when the watcher last asked it for one

    # -- the dispatching thread ---------------------------------------------------------
    def settled(self, key: Any) -> bool:
        """Whether ``key``'s first calls, each handed to the watcher, are over (for good)."""
        return self._observed.get(key, 0) >= WATCH_ALL

    def before(self, key: Any, caller, settled: bool = False) -> Any:
        """What :meth:`after` is given back: a ``Call``, a ``Quick`` one, or None (no watcher).
        ``settled``: the caller knows :meth:`settled` is true for ``key``."""
        if _FORKS[0] != self._fork:  # a forked child: no watcher there
            return None
        if QUICK and (settled or self._observed.get(key, 0) >= WATCH_ALL):
            last = self._last
            now = _PERF()
            if last is not None and last.done and not last.handed and now - self._handed_at < WATCH_GAP:
                return Quick(key, caller, self.inst.compile_events, now)
        return self._begin(key, caller, self.inst.compile_events, None)

    def _begin(self, key: Any, caller, events: int, t_d: Optional[float]) -> Call:
        """A call on the full path; ``t_d`` is its dispatch time when it was taken late (a ``Quick``
        one that must be watched after all), else now, once the rest is done."""
        collectors = self.inst.collectors
        logs = [(c.steps, c.user_files.site(caller)) for c in collectors]
        call = Call(key, logs, caller.f_code, threading.get_ident(), 0.0, events)
        prev = self._last
        if prev is not None and not prev.done:
            call.prev = prev
            call.prev_ready = prev.ready is not None or _ready(prev.leaf)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = collections.deque()
        while pending and (pending[0].ready is not None or _ready(pending[0].leaf)):
            self._drop(pending.popleft())
        depth = len(pending)
        for log, _ in logs:
            if depth > log.in_flight.get(key, -1):
                log.in_flight[key] = depth
        self._stretched(key, depth, logs)
        n = self._observed.get(key, 0)
        if n < PEAK_CALLS:
            read = self._peak(logs)
            if read is not None:
                for log, _ in logs:
                    log.peak_before.setdefault(key, read[0])
        # The watcher needs the GIL back quickly only when the device may sit idle: the host was
        # behind (the last result was ready at this dispatch). While the host runs ahead, Python's
        # own switch interval stays, so that the watcher does not slow the dispatches down.
        if self._saved_interval is None:  # the program's own, to go back to
            self._saved_interval = self._interval = self._interval_read = sys.getswitchinterval()
        want = SWITCH_INTERVAL if call.prev_ready is not False else self._saved_interval
        if want is not None and want != self._interval:
            sys.setswitchinterval(want)
            self._interval = want
            self._interval_read = sys.getswitchinterval()  # as Python stores it (rounded)
        call.t_d = _PERF() if t_d is None else t_d
        return call

    def _stretched(self, key: Any, depth: int, logs: list) -> None:
        """Carry ``key``'s :class:`.steploops.Stretch` to this dispatch (or start one) and keep
        the highest depth it estimates without jaxlint."""
        now = _PERF()
        st = self._stretch.get(key)
        if st is None or depth == 0:
            self._stretch[key] = S.Stretch(now, depth)
            return
        st.n += 1
        est = st.plain_depth(now, depth)
        if est is None:
            return
        for log, _ in logs:
            if est > log.in_flight_plain.get(key, (-1.0, 0.0))[0]:
                log.in_flight_plain[key] = (est, st.own / st.n)

    def spent(self, call: Call, seconds: float) -> None:
        """jaxlint's own ``seconds`` in a call on the full path (its hooks before and after JAX's
        dispatch), added to its function's stretch."""
        st = self._stretch.get(call.key)
        if st is not None:
            st.own += seconds

    def after(self, call: Any, leaves: list, uploaded: bool = False) -> None:
        """``uploaded``: the call was given host data (NumPy arrays), copied to the device inside
        the dispatch, so the device waited for the whole dispatch, as for a compile."""
        t_r = _PERF()
        if type(call) is Quick:
            if self.inst.compile_events == call.events and not uploaded and t_r - self._handed_at < WATCH_GAP:
                for log, lp in self._quick_loops(call.key, call.caller):
                    log.calls += 1
                    lp.unwatched += 1
                    if t_r > (lp.last_return or 0.0):
                        lp.last_return = t_r
                return
            call = self._begin(call.key, call.caller, call.events, call.t_d)
        call.t_r = t_r
        call.compiled = self.inst.compile_events != call.events
        if call.compiled:  # the device had nothing of it while it compiled: a new stretch begins after it
            self._stretch.pop(call.key, None)
        call.uploaded = uploaded
        leaf = self._smallest(call.key, leaves)
        if leaf is None:  # nothing on the device to wait for: the call is done when it returns
            call.ready = call.t_r
        else:
            call.leaf = leaf
            self.held.add(id(leaf))
            ready = _ready(leaf)
            if ready:  # computed before the call returned: a synchronous dispatch, or a tiny one
                call.ready = call.t_r
            for log, _ in call.logs:
                log.sync_checked += 1
                log.sync_dispatch += ready
        for log, _ in call.logs:
            log.calls += 1
        self._pending[call.key].append(call)
        n = self._observed.get(call.key, 0)
        if n < PEAK_CALLS:
            self._observed[call.key] = n + 1
            read = self._peak(call.logs)
            if read is not None:
                for log, _ in call.logs:
                    if read[0] > log.peak_after.get(call.key, -1):
                        log.peak_after[call.key] = read[0]
                    if read[1] > log.in_use_after.get(call.key, -1):
                        log.in_use_after[call.key] = read[1]
        prev = self._last
        if prev is not None:
            prev.next = call
        self._last = call
        # Waking the watcher costs the dispatching thread a GIL hand-off. Past a function's first
        # calls, a call is handed over at most once per WATCH_GAP (a compile or an upload always):
        # the idle window after each call handed over is measured, and a loop's idle time is
        # scaled from its watched steps to all of them (steploops.section says so in the report).
        if n >= WATCH_ALL and not call.compiled and not uploaded and call.t_r - self._handed_at < WATCH_GAP:
            self._unwatched(call)
            return
        self._handed[call.key] = n + 1
        self._handed_at = call.t_r
        call.handed = True
        self._start()
        self._q.put(call)

    def _smallest(self, key: Any, leaves: list) -> Any:
        """:func:`_smallest` of a call's outputs, by the position it had in this function's first
        call with as many outputs (a function returns the same structure call after call; the
        position saves reading the sizes of every output again at each call)."""
        got = self._pick.get(key)
        if got is not None and got[0] == len(leaves):
            return leaves[got[1]] if leaves else None
        leaf = _smallest(leaves)
        if leaf is not None:
            self._pick[key] = (len(leaves), next(i for i, a in enumerate(leaves) if a is leaf))
        return leaf

    def _unwatched(self, call: Call) -> None:
        """A call the watcher does not see: counted in its loop by the dispatching thread (its own
        counter, so that the two threads never update one field)."""
        call.done = True
        for log, site in call.logs:
            lp = log.loop(call.key, site)
            lp.unwatched += 1
            if call.t_r > (lp.last_return or 0.0):
                lp.last_return = call.t_r

    def _quick_loops(self, key: Any, caller) -> list:
        """``[(log, loop)]``: each collector's step log and the loop of ``key`` called from
        ``caller``. Where ``caller`` is itself in every collector's user files, the answer depends
        only on its code and the instruction it is at, and is kept (for the collectors of now): a
        quick call then costs two small lookups instead of a walk and a line number per collector."""
        collectors = self.inst.collectors
        code = caller.f_code
        where = (id(key), id(code), caller.f_lasti)
        kept = self._loops_kept.get(where)
        if kept is not None and kept[0] is collectors and kept[1] is key and kept[2] is code:
            return kept[3]
        out = [(c.steps, c.steps.loop(key, c.user_files.site(caller))) for c in collectors]
        if all(c.user_files(code.co_filename) for c in collectors):
            self._loops_kept[where] = (collectors, key, code, out)  # holds key and code: their ids stay theirs
        return out

    def _drop(self, call: Call) -> None:
        leaf, call.leaf = call.leaf, None
        if leaf is not None:
            self.held.discard(id(leaf))

    def _peak(self, logs: list) -> Optional[tuple]:
        """The device's (``peak_bytes_in_use``, ``bytes_in_use``) now ((0, 0) before the backend
        started: nothing was allocated), or None where the device reports no memory statistics."""
        if self._memory is False:
            return None
        try:
            from .memory import _backend_started

            if not _backend_started():
                return (0, 0)
            if self._device is None:
                import jax

                self._device = jax.local_devices()[0]
            stats = self._device.memory_stats()
        except Exception:
            stats = None
        if not stats or "peak_bytes_in_use" not in stats:
            self._memory = False
            for log, _ in logs:
                log.device_memory = False
            return None
        self._memory = True
        for log, _ in logs:
            log.device_memory = True
        return int(stats["peak_bytes_in_use"]), int(stats.get("bytes_in_use", 0))

    # -- the watcher thread ---------------------------------------------------------------
    def _start(self) -> None:
        if self._thread is not None:
            return
        if self._own is not None:  # from the dispatching thread: installs only from the main one
            self._own.install()
        with self._lock:
            if self._thread is not None:
                return
            t = threading.Thread(target=self._run, name="jaxlint-device-watch", daemon=True)
            t.start()
            self._thread = t

    def flush(self, timeout: float = 60.0) -> bool:
        """Wait until every call handed over so far is done (its result ready); False on timeout."""
        if self._thread is None or os.getpid() != self._pid:
            return True
        done = threading.Event()
        self._q.put(done)
        ok = done.wait(timeout)
        if ok:  # every call handed over is done: nothing needs holding any more
            for pending in self._pending.values():
                while pending:
                    self._drop(pending.popleft())
        collectors = self.inst.collectors
        read = self._peak([(c.steps, None) for c in collectors]) if self._memory else None
        if read is not None:  # the device's peak over the whole run so far
            for c in collectors:
                c.steps.peak_end = read[0]
        return ok

    def stop(self, timeout: float = 60.0) -> None:
        thread, self._thread = self._thread, None
        if thread is None or os.getpid() != self._pid:
            return
        self._q.put(_STOP)
        thread.join(timeout)
        if self._own is not None:
            self._own.uninstall()
        if self._saved_interval is not None and sys.getswitchinterval() == self._interval_read:
            sys.setswitchinterval(self._saved_interval)  # unless the program set its own meanwhile
        self._saved_interval = None
        self._last = None
        self._pending.clear()
        self._observed.clear()
        self._pick.clear()
        self._loops_kept.clear()
        self._stretch.clear()
        self._q = queue.SimpleQueue()
        self._owed, self._last_key, self._last_window = 0.0, None, None

    def _run(self) -> None:
        q = self._q
        last: Optional[Call] = None
        samples: list = []
        unconfirmed: list = []  # calls passed over (still computing when the next was dispatched)
        own = self._own
        sampling = False  # whether idle windows after ``last`` are sampled
        while True:
            # the device is idle from last's result until the next call (which ends the window, and
            # the sampling: a call the watcher is not given would otherwise leave it sampling on)
            # (where stacks are not sampled, CPython 3.11, it sleeps until the next call instead: no wake-ups)
            if sampling and last is not None and last.ready is not None and last.next is None:
                since = max(samples[-1][0] if samples else max(last.ready, last.t_r), self._asked_at)
                due = SAMPLE_SECONDS - self._owed - (_PERF() - since)  # the schedule runs across windows
                try:
                    item = q.get(timeout=max(0.0002, due))
                except queue.Empty:
                    try:
                        self._sample(samples, last)
                    except Exception:  # a sample is never worth breaking the watcher
                        pass
                    continue
            else:
                item = q.get()
            if item is _STOP:
                return
            if isinstance(item, threading.Event):
                self._settle()
                item.set()
                continue
            try:
                if own is not None and last is not None:
                    self._arrived(samples, last)
                self._window(last, item, samples)
            except Exception as e:
                self.inst._error(e)
            samples = []
            self._wait(item, unconfirmed)
            last = item
            sampling = S.SAMPLES_STACKS or (own is not None and own.samples(last.thread))
            for log, _ in last.logs:
                log.sampling.add(S.SAMPLED_BY_WATCHER if S.SAMPLES_STACKS else
                                 S.SAMPLED_BY_SIGNAL if sampling else S.NOT_SAMPLED_HERE)

    def _settle(self) -> None:
        """Give the idle time owed to a sample not taken yet to the last sample's line, in the
        last window (a run's end comes before its next sample)."""
        if self._owed <= 0 or self._last_window is None:
            return
        lines = self._last_window.lines
        key = self._last_key or self._last_window_tail
        lines[key] = lines.get(key, 0.0) + self._owed
        self._owed = 0.0

    def _window(self, last: Optional[Call], item: Call, samples: list) -> None:
        """The idle window between ``last``'s result and the arrival on the device of the call
        dispatched next (``item``, the next call handed over, or one the watcher was not given)."""
        if last is None:
            return
        call = last.next or item
        # a compile, or a copy of the call's host arguments, keeps the device waiting too
        end = call.t_r if call.compiled or call.uploaded else call.t_d
        start = last.ready
        if call.prev is last and call.prev_ready is False:
            return  # still computing when this call was dispatched: no idle window
        if start is None:
            for log, _ in call.logs:
                log.unmeasured_windows += 1
            return
        if call.prev is last and call.prev_ready:
            start = min(start, call.t_d)  # the watcher read it late (GIL): it was ready by then
        if end <= start:
            return
        lines, self._owed, self._last_key = S.attribute(samples, start, end, self._owed, self._last_key)
        window = None
        for log, site in call.logs:
            window = S.Window(start, end, (call.key, site), lines)
            log.add_window(window)
        self._last_window = window
        self._last_window_tail = (None, *call.logs[0][1], S.UNSAMPLED) if call.logs else None

    def _wait(self, call: Call, unconfirmed: list) -> None:
        """Read when ``call``'s result is ready, unless the next call was dispatched while it was
        still computing: then no idle window follows it, and its ready time is not needed (the
        watcher does not wake for it; that is most calls of a device-bound loop)."""
        nxt = call.next
        skip = call.ready is None and nxt is not None and nxt.prev_ready is False
        if call.ready is None and not skip:
            try:
                call.leaf.block_until_ready()
                call.ready = _PERF()
            except Exception:  # deleted (donated to a later call) before this read: unknown
                call.ready = None
        if skip:
            unconfirmed.append(call)  # its array is dropped once a later result is ready
        else:
            self._drop(call)
            for c in unconfirmed:  # calls run in order: every earlier one is done too
                self._drop(c)
            unconfirmed.clear()
        call.done = True
        for log, site in call.logs:
            lp = log.loop(call.key, site)
            lp.steps += 1
            lp.last_return = call.t_r
            if lp.first_return is None:
                lp.first_return = call.t_r
            if skip:  # ready after the next dispatch began: the loop ran at least that long
                lp.last_ready = max(lp.last_ready or 0.0, nxt.t_d)
            elif call.ready is None:
                lp.unmeasured += 1
            else:
                lp.last_ready = call.ready
            if call.compiled:
                lp.compiled_steps += 1

    def _sample(self, samples: list, last: Call) -> None:
        if not last.logs:
            return
        if not S.SAMPLES_STACKS:  # CPython 3.11: the main thread samples itself, when asked
            if self._own is not None:
                self._arrived(samples, last)
                self._asked_at = _PERF()
                self._own.ask(last.thread, self._asked_at)
            return
        stack = _stack(last.thread)
        if not stack:
            return
        t = _PERF()
        samples.append((t, self._classify(stack, last.code, self._user_files(last))))

    def _arrived(self, samples: list, last: Call) -> None:
        """The samples the main thread took since the last look (ownstack.py), in time order."""
        files = self._user_files(last)
        for t, stack in self._own.drain():
            if stack and (not samples or t >= samples[-1][0]):
                samples.append((t, self._classify(stack, last.code, files)))

    def _user_files(self, call: Call):
        for c in self.inst.collectors:
            if c.steps is call.logs[0][0]:
                return c.user_files
        return None

    def _classify(self, stack, loop_code, user_files) -> tuple:
        """(loop line, file, line, what) of one sample of the dispatching thread's stack (rows of
        :func:`_stack`, innermost first)."""
        if user_files is None:
            return (None, "<outside user code>", 0, S.PYTHON)
        inner = loop_line = None
        in_jit = False
        for code, lineno, _ in stack:
            if inner is None:
                if code is self.counted_code:
                    in_jit = True
                elif user_files(code.co_filename):
                    inner = (code.co_filename, lineno)
            if loop_line is None and code is loop_code:
                loop_line = lineno
                if inner is not None:
                    break
        if inner is None:
            inner = ("<outside user code>", 0)
        code, _, module = stack[0]
        if in_jit:
            what = S.JIT
        elif user_files(code.co_filename):
            what = S.PYTHON
        else:
            top = str(module).split(".", 1)[0]
            what = {"jax": S.JAX, "jaxlib": S.JAX, "numpy": S.NUMPY, "jaxlint": S.JAX}.get(top, top)
        return (loop_line, inner[0], inner[1], what)


def _ready(leaf: Any) -> bool:
    """Whether ``leaf`` is ready (None: no longer held, known ready)."""
    if leaf is None:
        return True
    try:
        return bool(leaf.is_ready())
    except Exception:  # deleted (donated): no longer anything to wait for
        return True


def _smallest(leaves: list) -> Any:
    """The smallest of the first and last few output arrays (a loss rather than the parameters:
    it is read, not donated, and all outputs of one call are ready together)."""
    if not leaves:
        return None
    n = _LEAVES_LOOKED_AT
    look = leaves if len(leaves) <= 2 * n else leaves[:n] + leaves[-n:]
    best, size = None, None
    for a in look:
        try:
            s = a.size
        except Exception:
            continue
        if best is None or s < size:
            best, size = a, s
    return best
