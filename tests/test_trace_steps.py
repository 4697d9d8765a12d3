"""Step loops and the device watcher (issue 38): idle windows between a result and the next
dispatch, the host lines sampled in them, host-bound verdicts, in-flight depth, and donation advice
in the device's terms beside XLA's compiled figure.

The watcher is driven directly with stand-in arrays whose readiness the test controls (exact
windows, no device needed); the fixtures host_bound.py and device_bound.py are traced for real.
TPU figures (the device's peak with and without donation, the idle share against the hand
measurement) are measured by bench/trace_donation.py and bench/trace_hostbound.py and recorded in
docs/trace-on-tpu.md; CI has no accelerator.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("jax")

from jaxlint.trace import memory as M  # noqa: E402
from jaxlint.trace import memory_report as MR  # noqa: E402
from jaxlint.trace import ownstack  # noqa: E402
from jaxlint.trace import steploops as S  # noqa: E402
from jaxlint.trace import steps  # noqa: E402
from jaxlint.trace.collector import Collector  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures", "trace")


def line_of(path, text):
    with open(path) as fh:
        for i, line in enumerate(fh, 1):
            if text in line:
                return i
    raise AssertionError(text)


# -- the watcher, with arrays whose readiness the test decides ---------------------------------


class FakeArray:
    """What the watcher uses of a jax.Array: ``is_ready``, ``block_until_ready``, ``size``."""

    size = 1

    def __init__(self):
        self.event = threading.Event()

    def is_ready(self):
        return self.event.is_set()

    def block_until_ready(self):
        self.event.wait(10)
        return self


class Everything:
    """UserFiles for the test: every file is the user's."""

    def __call__(self, filename):
        return True

    def site(self, frame):
        return (frame.f_code.co_filename, frame.f_lineno)


class FakeInst:
    def __init__(self):
        self.collectors = [Collector(Everything())]
        self.compile_events = 0
        self.errors = []

    def _error(self, e):
        self.errors.append(e)


def _watcher():
    inst = FakeInst()
    w = steps.Watcher(inst)
    w._memory = False  # no device memory statistics here
    return inst, w


def _dispatch(w, key="step"):
    frame = sys._getframe(1)
    while frame.f_code.co_name == "<listcomp>":  # Python 3.10/3.11: the comprehension's own frame
        frame = frame.f_back
    call = w.before(key, frame)
    leaf = FakeArray()
    w.after(call, [leaf])
    return call, leaf


def _idle_window_with_the_host_sleeping():
    """One idle window of ~60 ms while this (main) thread sleeps; the window and the sleep's line."""
    inst, w = _watcher()
    try:
        call1, a = _dispatch(w)
        time.sleep(0.02)  # the device computes call 1
        a.event.set()
        time.sleep(0.06)  # the host works: the device waits ~60 ms (the line below is the host's)
        call2, b = _dispatch(w)
        b.event.set()
        assert w.flush(10)
    finally:
        w.stop()
    log = inst.collectors[0].steps
    assert len(log.windows) == 1, [(x.start, x.end) for x in log.windows]
    win = log.windows[0]
    assert 0.045 <= win.end - win.start <= 0.075, win.end - win.start
    assert win.end == call2.t_d  # no compile, no host data: the device got the call at its dispatch
    assert abs(sum(win.lines.values()) - (win.end - win.start)) < 1e-9  # what was owed went to the last sample
    assert inst.errors == []
    return log, win, line_of(__file__, "time.sleep(0.06)")


def test_an_idle_window_runs_from_a_result_being_ready_to_the_next_dispatch():
    # the samples found this test's sleeping line, and add up to the window: read by the watcher,
    # or on CPython 3.11 by this (main) thread itself when the watcher signals it
    log, win, sleep_line = _idle_window_with_the_host_sleeping()
    lines = {(k[2], k[3]): s for k, s in win.lines.items()}
    assert lines.get((sleep_line, S.PYTHON), 0) >= 0.8 * (win.end - win.start), win.lines
    assert log.sampling == {S.SAMPLED_BY_WATCHER if S.SAMPLES_STACKS else S.SAMPLED_BY_SIGNAL}


def test_the_main_thread_samples_itself_when_the_watcher_may_not_read_its_frames(monkeypatch):
    # what CPython 3.11 does, run on every Python: no frame of another thread is read
    monkeypatch.setattr(S, "SAMPLES_STACKS", False)
    monkeypatch.setattr(steps, "_stack", None)  # the watcher's own read would fail loudly
    before = signal.getsignal(ownstack.SIGNAL)
    log, win, sleep_line = _idle_window_with_the_host_sleeping()
    lines = {(k[2], k[3]): s for k, s in win.lines.items()}
    assert lines.get((sleep_line, S.PYTHON), 0) >= 0.8 * (win.end - win.start), win.lines
    assert log.sampling == {S.SAMPLED_BY_SIGNAL}
    assert signal.getsignal(ownstack.SIGNAL) == before  # the program's handler is back


def test_a_loop_on_another_thread_is_measured_but_not_sampled_where_frames_may_not_be_read(monkeypatch):
    monkeypatch.setattr(S, "SAMPLES_STACKS", False)
    monkeypatch.setattr(steps, "_stack", None)
    out = {}

    def run():
        try:
            out["r"] = _idle_window_with_the_host_sleeping()
        except BaseException as e:  # pragma: no cover - reported below
            out["e"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert "e" not in out, out.get("e")
    log, win, _ = out["r"]
    assert [k[3] for k in win.lines] == [S.UNSAMPLED], win.lines  # the window is measured, as one row
    assert log.sampling == {S.NOT_SAMPLED_HERE}
    note = S.backend_note("tpu", 0, 10, sorted(log.sampling))
    assert note is not None and "CPython 3.11" in note


def test_stacks_are_read_by_the_watcher_except_on_cpython_3_11():
    unsafe = sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11)
    assert S.SAMPLES_STACKS is not unsafe
    assert S.backend_note("tpu", 0, 10, [S.SAMPLED_BY_SIGNAL]) is None
    assert S.backend_note("tpu", 0, 10, [S.SAMPLED_BY_WATCHER]) is None


# -- ownstack: the main thread's samples of itself -------------------------------------------


@pytest.mark.skipif(ownstack.SIGNAL is None, reason="no SIGURG on this platform")
def test_own_sampler_leaves_a_handler_of_the_program_alone():
    mine = []
    saved = signal.signal(ownstack.SIGNAL, lambda *a: mine.append(a))
    try:
        o = ownstack.OwnSampler()
        assert not o.install() and not o.samples(threading.get_ident())
        assert not o.ask(threading.get_ident(), 1.0)
        assert mine == []  # nothing was sent to the program's handler
    finally:
        signal.signal(ownstack.SIGNAL, saved)


@pytest.mark.skipif(ownstack.SIGNAL is None, reason="no SIGURG on this platform")
def test_own_sampler_stops_asking_once_the_program_installs_its_own_handler():
    o = ownstack.OwnSampler()
    before = signal.getsignal(ownstack.SIGNAL)
    assert o.install() and o.samples(threading.get_ident())
    mine = []
    signal.signal(ownstack.SIGNAL, lambda *a: mine.append(a))
    try:
        assert not o.ask(threading.get_ident(), 1.0) and mine == [] and not o.installed
    finally:
        signal.signal(ownstack.SIGNAL, before)


@pytest.mark.skipif(ownstack.SIGNAL is None, reason="no SIGURG on this platform")
def test_own_sampler_takes_a_sample_of_the_main_thread_from_another_thread():
    o = ownstack.OwnSampler()
    before = signal.getsignal(ownstack.SIGNAL)
    assert o.install()
    main = threading.get_ident()
    asked = []
    try:
        other = threading.Thread(target=lambda: (time.sleep(0.02), asked.append(o.ask(main, 123.0))))
        other.start()
        deadline = time.perf_counter() + 5
        while not o.rows and time.perf_counter() < deadline:
            time.sleep(0.001)  # the handler runs in this thread, here
        other.join(10)
        got = o.drain()
    finally:
        o.uninstall()
    assert asked == [True]
    assert len(got) == 1 and got[0][0] == 123.0
    code, line, module = got[0][1][0]
    assert code.co_name == "test_own_sampler_takes_a_sample_of_the_main_thread_from_another_thread"
    assert line == line_of(__file__, "time.sleep(0.001)  # the handler runs") and module == __name__
    assert signal.getsignal(ownstack.SIGNAL) == before and not o.installed
    other_thread = []
    t = threading.Thread(target=lambda: other_thread.append(o.install()))
    t.start()
    t.join(10)
    assert other_thread == [False]  # handlers are installed from the main thread only


def test_no_window_when_the_next_call_comes_while_the_last_one_computes():
    inst, w = _watcher()
    try:
        calls = [_dispatch(w) for _ in range(3)]  # one call site; each call before the last is done
        assert [c.prev_ready for c, _ in calls[1:]] == [False, False]  # the host is ahead
        for _, leaf in calls:
            leaf.event.set()
        assert w.flush(10)
    finally:
        w.stop()
    log = inst.collectors[0].steps
    assert log.windows == []
    assert log.in_flight["step"] == 2  # two earlier calls were computing at the third dispatch
    lp = next(iter(log.loops.values()))
    assert lp.steps == 3 and lp.unmeasured == 0


def test_a_stretch_estimates_the_depth_the_host_would_reach_without_jaxlints_own_time():
    st = S.Stretch(0.0, 1)  # the stretch's first dispatch found one earlier call computing
    st.n, st.own = 1, 0.0004
    # nothing finished within the stretch: both calls in flight, as they would be without jaxlint
    assert st.plain_depth(0.001, 2) == 2.0
    st.n, st.own = 10, 0.004  # ten more dispatches over 10 ms, jaxlint's own time 0.4 ms each
    # the device finished 10 + 1 - 6 = 5 calls in 10 ms (500 a second); without jaxlint's 4 ms the
    # host would have reached this dispatch 4 ms sooner, with 2 fewer calls finished: 6 + 2 = 8
    assert st.plain_depth(0.010, 6) == pytest.approx(8.0)
    # never more calls in flight than were dispatched in the stretch (plus those it began with)
    st.own = 1.0
    assert st.plain_depth(0.010, 6) == 11.0
    st.own = 0.0  # no time of jaxlint's: nothing to estimate
    assert st.plain_depth(0.010, 6) is None


def test_the_watcher_keeps_the_highest_depth_estimated_without_jaxlint(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(steps, "_PERF", lambda: clock[0])
    inst, w = _watcher()
    leaves = []
    try:
        for i in range(6):  # one call every 2 ms, 0.5 ms of it jaxlint's own; the device takes 4 ms a call
            clock[0] = 100.0 + 0.002 * i
            for j, leaf in enumerate(leaves):  # the device finishes call j at 100.004 + 0.004 j
                if 100.004 + 0.004 * j <= clock[0]:
                    leaf.event.set()
            call, leaf = _dispatch(w)
            w.spent(call, 0.0005)
            leaves.append(leaf)
        for leaf in leaves:
            leaf.event.set()
        assert w.flush(10)
    finally:
        w.stop()
    log = inst.collectors[0].steps
    # at the sixth dispatch (t = 10 ms) calls 0 and 1 are done: 3 earlier calls in flight (measured)
    assert log.in_flight["step"] == 3
    # the stretch began at the first dispatch (depth 0); 2 calls done in 10 ms, and 5 x 0.5 ms of
    # jaxlint's: 3 + 2 / 0.010 x 0.0025 = 3.5
    est, own = log.in_flight_plain["step"]
    assert est == pytest.approx(3.5) and own == pytest.approx(0.0005)
    assert inst.errors == []


def test_a_compile_or_an_upload_keeps_the_window_open_to_the_end_of_the_dispatch():
    inst, w = _watcher()
    try:
        call1, a = _dispatch(w)
        a.event.set()
        time.sleep(0.01)
        frame = sys._getframe(0)
        call2 = w.before("step", frame)
        time.sleep(0.03)  # copying NumPy arguments inside the dispatch
        b = FakeArray()
        w.after(call2, [b], uploaded=True)
        b.event.set()
        assert w.flush(10)
    finally:
        w.stop()
    win = inst.collectors[0].steps.windows[0]
    assert win.end == call2.t_r and win.end - win.start >= 0.035


def test_past_the_first_calls_the_watcher_sees_one_call_per_gap_and_the_idle_time_is_scaled():
    """Waking the watcher for every call of a fast loop costs the dispatching thread a GIL hand-off
    each step (about 10% of a 2 ms TPU step); past WATCH_ALL calls it is given one call per
    WATCH_GAP, and the loop's idle time is scaled from the watched steps to all of them."""
    inst, w = _watcher()
    n = steps.WATCH_ALL + 200
    first = None
    try:
        for _ in range(n):
            call, leaf = _dispatch(w)
            leaf.event.set()  # the device is done at once: the host's 2 ms below are all idle
            first = first or call
            time.sleep(0.002)
        assert w.flush(10)
    finally:
        w.stop()
    c = inst.collectors[0]
    lp = next(iter(c.steps.loops.values()))
    assert lp.steps + lp.unwatched == n
    assert steps.WATCH_ALL <= lp.steps < n - 100, (lp.steps, lp.unwatched)  # most later calls not handed over
    row = S.section(c, {"step": ("step", __file__, 1)})["loops"][0]
    assert row["steps"] == n and row["watched_steps"] == lp.steps
    assert row["idle_share"] >= 0.8, row  # the host's sleep fills nearly every step; scaled, not cut to the watched
    text = "\n".join(S.text_lines({"step_loops": S.section(c, {"step": ("step", __file__, 1)})}, lambda f, ln: f"{f}:{ln}"))
    assert f"after {lp.steps} of {n} steps" in text and "an estimate" in text
    assert all(len(line) <= 80 for line in text.splitlines() if "an estimate" in line or "steps (all at" in line)
    assert inst.errors == []


def test_calls_between_two_handed_over_are_counted_on_the_quick_path_and_hold_nothing():
    """Past WATCH_ALL calls, a call within WATCH_GAP of the last one handed over, and not the one
    right after it (whose dispatch ends that call's idle window), is only counted: no readiness
    read, no output held. One that compiles takes the full path: its wait is part of the loop."""
    inst, w = _watcher()
    try:
        for _ in range(steps.WATCH_ALL):
            _, leaf = _dispatch(w)
            leaf.event.set()
        assert w.flush(10)
        time.sleep(steps.WATCH_GAP)
        handed, leaf = _dispatch(w)  # the gap since the last handed over has passed: handed over
        leaf.event.set()
        after_handed, leaf = _dispatch(w)  # ends the handed call's window: full path, not handed
        leaf.event.set()
        quick, quick_leaf = _dispatch(w)
        compiling = w.before("step", sys._getframe())  # decided before the call: quick
        inst.compile_events += 1  # the call compiled
        leaf = FakeArray()
        leaf.event.set()
        w.after(compiling, [leaf])
        last = w._last
        assert w.flush(10)
    finally:
        w.stop()
    assert isinstance(handed, steps.Call) and handed.handed
    assert isinstance(after_handed, steps.Call) and not after_handed.handed and after_handed.done
    assert isinstance(quick, steps.Quick) and id(quick_leaf) not in w.held
    assert isinstance(compiling, steps.Quick)  # what after() got; it was watched all the same
    assert last is not after_handed and last.handed and last.compiled
    loops = inst.collectors[0].steps.loops.values()  # one per calling line here
    assert sum(lp.steps for lp in loops) == steps.WATCH_ALL + 2  # the handed and the compiling
    assert sum(lp.unwatched for lp in loops) == 2  # the one after the handed, the quick one
    assert inst.errors == []


def test_the_quick_path_can_be_switched_off(monkeypatch):
    monkeypatch.setattr(steps, "QUICK", False)
    inst, w = _watcher()
    try:
        for _ in range(steps.WATCH_ALL + 3):
            call, leaf = _dispatch(w)
            leaf.event.set()
            assert isinstance(call, steps.Call)
    finally:
        w.stop()


def test_attribute_gives_each_sample_the_idle_time_since_the_last_across_windows():
    samples = [(1.0, "a"), (1.5, "b"), (1.6, "b"), (3.0, "late")]
    lines, owed, last = S.attribute(samples, 0.5, 2.0, 0.125, None)
    # "a" gets the 0.125 s owed by earlier windows and 0.5 s of this one; 0.4 s after the last
    # sample is owed to the next; the sample after the window's end is dropped
    assert lines == pytest.approx({"a": 0.625, "b": 0.6}) and owed == pytest.approx(0.4) and last == "b"
    lines, owed, last = S.attribute([], 0.0, 0.25, owed, last)  # a window with no sample of its own
    assert lines == {} and owed == pytest.approx(0.65) and last == "b"


def test_a_loop_under_the_minimum_steps_is_not_a_step_loop():
    c = Collector(Everything())
    lp = c.steps.loop("k", ("p.py", 3))
    lp.steps, lp.first_return, lp.last_ready = S.MIN_STEPS - 1, 0.0, 1.0
    assert S.section(c, {"k": ("f", "p.py", 1)})["loops"] == []
    lp.steps = S.MIN_STEPS
    c.steps.add_window(S.Window(0.1, 0.35, ("k", ("p.py", 3)), {(3, "p.py", 2, S.NUMPY): 0.25}))
    row = S.section(c, {"k": ("f", "p.py", 1)})["loops"][0]
    assert row["idle_share"] == 0.25 and row["host_bound"] and row["lines"][0]["what"] == S.NUMPY
    c.steps.windows[0].end = 0.29  # 19%: under the line
    assert not S.section(c, {"k": ("f", "p.py", 1)})["loops"][0]["host_bound"]


# -- the fixtures, traced for real -------------------------------------------------------------


def traced(name, *extra):
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"steps-{os.getpid()}-{name}.json")
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--no-static", "--format", "json", "-o", out,
                           *extra, os.path.join(FIX, name)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out) as fh:
        report = json.load(fh)
    os.remove(out)
    return proc, report


def test_the_host_bound_fixture_is_host_bound_and_its_file_read_fills_the_idle_time():
    proc, report = traced("host_bound.py")
    loops = report["step_loops"]["loops"]
    assert [(lp["function"], lp["call_line"]) for lp in loops] == [
        ("train_step", line_of(os.path.join(FIX, "host_bound.py"), "w, loss = train_step(w, batch)"))]
    lp = loops[0]
    assert lp["host_bound"] and lp["idle_share"] >= 0.5 and lp["steps"] == 30, lp
    path = os.path.join(FIX, "host_bound.py")
    top = lp["lines"][0]
    sleep = line_of(path, "time.sleep(0.010)")
    # sampled by the watcher, or on CPython 3.11 by the program's main thread itself
    assert report["step_loops"]["sampling"] == [S.SAMPLED_BY_WATCHER if S.SAMPLES_STACKS else S.SAMPLED_BY_SIGNAL]
    host_work = {sleep, line_of(path, "return rng.standard_normal"), line_of(path, "return np.clip")}
    if report["environment"].get("backend") == "cpu":
        # the 10 ms sleep "reading the next batch" is the largest (the NumPy work is small)
        assert top["line"] == sleep and top["what"] == S.PYTHON, lp["lines"][:3]
    else:
        # on an accelerator the batch is 16x larger: the device's step overlaps the start of the
        # sleep, and the sleep, the batch's random numbers and its augmentation share the idle time
        # (TPU v5e: 37%, 32%, 23%); each is named, and they fill most of it
        named = [x["line"] for x in lp["lines"][:4]]
        assert host_work <= set(named), lp["lines"][:4]
        share = sum(x["seconds"] for x in lp["lines"] if x["line"] in host_work) / lp["idle_seconds"]
        assert share >= 0.75, lp["lines"][:4]
    assert top["line"] in host_work and top["loop_line"] == line_of(path, "batch = augment(read_file(step))")
    assert lp["lines"] == sorted(lp["lines"], key=lambda x: -x["seconds"])
    assert abs(sum(x["seconds"] for x in lp["lines"]) - lp["idle_seconds"]) < 0.002
    assert "background" in lp["fix"] and "device_put" in lp["fix"]
    text = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--no-static", path], capture_output=True,
                          text=True, cwd=ROOT, timeout=300).stderr
    block = text[text.index("Step loops"):]
    assert "host-bound" in block and f"host_bound.py:{top['line']}" in block and "fix:" in block


def test_the_device_bound_fixture_is_not_host_bound():
    _, report = traced("device_bound.py")
    lp = report["step_loops"]["loops"][0]
    assert not lp["host_bound"] and lp["idle_share"] < S.HOST_BOUND_SHARE and lp["fix"] is None
    if report["environment"]["backend"] == "cpu":
        assert "cpu backend" in report["step_loops"]["backend_note"]


def test_the_html_report_has_the_step_loops(tmp_path):
    page = tmp_path / "r.html"
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--no-static", "--html", str(page),
                           os.path.join(FIX, "host_bound.py")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    section = html[html.index('<section id="step-loops">'):]
    section = section[:section.index("</section>")]
    assert "host-bound" in section and "train_step" in section and "host_bound.py:" in section


def test_the_program_output_is_unchanged_and_the_switch_interval_is_restored(tmp_path):
    script = tmp_path / "p.py"
    script.write_text("import sys, jax, jax.numpy as jnp\n"
                      "f = jax.jit(lambda x: x + 1)\n"
                      "x = jnp.zeros(3)\n"
                      "for _ in range(20):\n"
                      "    x = f(x)\n"
                      "print(x.tolist())\n"
                      "import atexit; atexit.register(lambda: print('interval', sys.getswitchinterval()))\n")
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    traced_ = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--no-static", str(script)],
                             capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert traced_.stdout == plain.stdout == "[20.0, 20.0, 20.0]\ninterval 0.005\n"


# -- donation in the device's terms -------------------------------------------------------------


def _candidate(nbytes=256 << 20):
    return {"argnums": [0], "argnames": [], "names": ["params"], "bytes": nbytes, "calls_observed": 4,
            "wrapper": "jax.jit"}


def test_donation_on_a_device_with_memory_uses_the_in_flight_depth_beside_xlas_figure():
    log = S.StepLog()
    log.device_memory, log.in_flight["k"] = True, 4
    log.peak_before["k"], log.peak_after["k"] = 1 << 20, (1 << 20) + (5 << 28)
    log.in_use_after["k"], log.peak_end = 5 << 28, 5 << 28

    class Rec:
        key, name = "k", "step"

    mem = M.Memory()
    mem.calls["k"] = M._Calls()
    c = mem.calls["k"]
    c.seen, c.links, c.fed, c.bytes, c.names = 4, 3, {0: 3}, {0: 256 << 20}, {0: "params"}
    d = MR.function_keys(mem, Rec(), steps=log)["donation"]
    assert d["figure"] == "device" and d["device_saving"] == 5 * (256 << 20) and d["compiled_saving"] == 256 << 20
    assert d["peak_in_calls"] is True and d["device_peak_saving"] == 5 * (256 << 20)
    assert "5 × 256.0 MiB = 1.2 GiB" in d["fix"] and "XLA's figure" in d["fix"] and "measured" in d["fix"]
    # the device's peak came from elsewhere in the run: donating does not lower it
    log.in_use_after["k"], log.peak_end = 100 << 20, 5 << 28
    d = MR.function_keys(mem, Rec(), steps=log)["donation"]
    assert d["peak_in_calls"] is False and d["device_peak_saving"] == 0 and "not lower this run's peak" in d["fix"]
    # a depth estimated without jaxlint's own time: the advice counts it, and says both
    log.in_use_after["k"] = 5 << 28
    log.in_flight_plain["k"] = (6.6, 60e-6)
    d = MR.function_keys(mem, Rec(), steps=log)["donation"]
    assert d["in_flight"] == 4 and d["in_flight_plain"] == 6.6 and d["device_saving"] == 8 * (256 << 20)
    assert "up to 4 earlier calls were still computing at a dispatch under jaxlint (measured)" in d["fix"]
    assert "without jaxlint's own 60 µs in each of its calls, about 7 (estimated" in d["fix"]
    assert "8 × 256.0 MiB = 2.0 GiB" in d["fix"]
    # an estimate below the measured depth is not used
    log.in_flight_plain["k"] = (2.0, 60e-6)
    d = MR.function_keys(mem, Rec(), steps=log)["donation"]
    assert d["device_saving"] == 5 * (256 << 20) and "without jaxlint" not in d["fix"]


def test_a_device_bound_run_reports_the_depth_measured_and_estimated_without_jaxlint():
    jax = pytest.importorskip("jax")
    if tuple(int(p) for p in jax.__version__.split(".")[:3]) < (0, 4, 31) and jax.default_backend() == "cpu":
        pytest.skip("this jax dispatches synchronously on CPU: no call is ever in flight")
    _, report = traced("device_bound.py")
    (row,) = [f for f in report["functions"] if f["qualname"] == "train_step"]
    mem = row["memory"]
    # the host runs ahead of the device between its loss reads: earlier steps are still computing
    assert mem["in_flight"] >= 2, mem
    assert mem["in_flight_plain"] is not None and mem["in_flight_plain"] >= mem["in_flight"], mem
    assert 0 < mem["own_per_call"] < 0.05, mem  # jaxlint's own time in a call: seconds, measured


def test_donation_without_device_memory_gives_xlas_figure_labelled():
    d = dict(_candidate(), device_memory=False, in_flight=3, device_saving=None)
    fix = MR.donation_fix("step", d)
    assert "XLA's compiled peak of one call drops 256.0 MiB (XLA's figure; this device reports no memory" in fix


def test_memory_gate_uses_the_devices_figure_when_it_is_larger():
    from jaxlint.trace import budget

    largest = {"temp": 1 << 20, "argument": 256 << 20, "output": 256 << 20, "alias": 0, "generated_code": 0,
               "footprint": 513 << 20, "footprint_exact": True}
    f = {"qualname": "step", "name": "step", "file": "p.py", "line": 3,
         "memory": {"largest": largest, "compiles": [largest], "device_peak_rise": 5 << 30, "in_flight": 19}}
    messages, results = [], []
    budget._evaluate_memory([f], [("step", 1 << 30, "--budget-memory step=1GiB")], messages, results)
    assert len(messages) == 1 and "the device's peak rose 5.0 GiB" in messages[0] and "XLA's compiled peak" in messages[0]
    assert results[0]["bytes"] == 5 << 30 and not results[0]["passed"]
    f["memory"]["device_peak_rise"] = None
    messages, results = [], []
    budget._evaluate_memory([f], [("step", 1 << 30, "--budget-memory step=1GiB")], messages, results)
    assert messages == [] and results[0]["passed"]


def test_the_output_waited_on_is_the_smallest_by_its_position_in_the_functions_first_call():
    inst, w = _watcher()

    def arrays(*sizes):
        out = []
        for s in sizes:
            a = FakeArray()
            a.size = s
            out.append(a)
        return out

    first = arrays(1000, 1, 500)
    assert w._smallest("step", first) is first[1]
    # the same structure again: the same position, without reading the sizes
    later = arrays(1000, 1, 500)
    later[1].size = 10**6  # a size the position does not read
    assert w._smallest("step", later) is later[1]
    # another number of outputs: the sizes are read again
    other = arrays(7, 3)
    assert w._smallest("step", other) is other[1]
    # another function keeps its own position
    e = arrays(2, 9, 9)
    assert w._smallest("eval", e) is e[0]
    assert w._smallest("step", []) is None


def _parked(ready: threading.Event, release: threading.Event) -> None:
    ready.set()
    release.wait(10)  # the line the sample must show


def test_a_sample_reads_another_threads_stack_innermost_first_in_one_call():
    ready, release = threading.Event(), threading.Event()
    t = threading.Thread(target=_parked, args=(ready, release))
    t.start()
    try:
        assert ready.wait(10)
        time.sleep(0.05)  # inside release.wait, in threading's own code
        stack = steps._stack(t.ident)
        names = [code.co_name for code, _, _ in stack]
        assert names.index("wait") < names.index("_parked") < names.index("run")
        code, line, module = stack[names.index("_parked")]
        assert module == __name__ and code is _parked.__code__
        assert line == _parked.__code__.co_firstlineno + 2
        assert stack[0][2] == "threading"
    finally:
        release.set()
        t.join()
    assert steps._stack(t.ident) == []  # a thread that has ended has no stack


def test_sampling_a_thread_that_churns_its_frames_never_breaks():
    # generators, context managers and exceptions come and go under the sampler: the frames it
    # reads are the thread's frames at one instant (a Python loop over f_back read popped frames:
    # CPython 3.11 crashed with SIGSEGV in CI)
    import contextlib

    @contextlib.contextmanager
    def managed():
        yield

    def gen():
        yield from range(3)

    def churn(depth):
        with managed():
            if depth == 0:
                try:
                    raise ValueError
                except ValueError:
                    return sum(gen())
            return churn(depth - 1)

    stop = threading.Event()

    def work():
        while not stop.is_set():
            churn(20)

    t = threading.Thread(target=work)
    t.start()
    saved = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        seen = 0
        deadline = time.perf_counter() + 1.0
        while time.perf_counter() < deadline:
            stack = steps._stack(t.ident)
            seen += any(code.co_name == "churn" for code, _, _ in stack)
            assert all(isinstance(line, (int, type(None))) for _, line, _ in stack)
    finally:
        sys.setswitchinterval(saved)
        stop.set()
        t.join()
    assert seen > 0
