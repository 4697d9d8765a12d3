"""Time lost to compilation (issue 14, part 1): seconds per miss, per reason and per call site,
the first compile apart, the wall time spent compiling, and the hotspot order by time lost."""

import sys

import pytest

from jaxlint.trace import cost, report
from jaxlint.trace.collector import DTYPE, RECREATED, SHAPE, Collector
from jaxlint.trace.userfiles import UserFiles

A, B, C = ("prog.py", 10), ("prog.py", 11), ("prog.py", 12)
SHAPE_X = (SHAPE, "x", "f32[3]", "f32[4]")
DTYPE_X = (DTYPE, "x", "f32[4]", "i32[4]")


def _describe(key):
    return (key, key, "prog.py", 1)


def _collector(t0=100.0):
    c = Collector(UserFiles(None))
    c.t0 = t0
    return c


def _miss(c, rec, keys, site, start, trace_s, compile_s):
    """One cache miss as the hooks report it: the trace, then its compile."""
    rec.traces += 1
    rec.last_keys = tuple(keys)
    for k in keys:
        rec.miss_reasons[k] += 1
    rec.trace_seconds += trace_s
    c.spent(rec, start, trace_s, site, trace=True)
    rec.compiles += 1
    rec.compile_seconds += compile_s
    c.spent(rec, start + trace_s, compile_s)


def test_first_miss_is_apart_and_later_misses_are_lost_per_reason_and_site():
    c = _collector()
    rec = c.record("f", _describe)
    _miss(c, rec, (), A, 100.0, 0.1, 0.4)  # first call
    _miss(c, rec, (SHAPE_X,), B, 101.0, 0.05, 0.25)
    _miss(c, rec, (DTYPE_X,), C, 102.0, 0.02, 0.18)
    k = cost.function_keys(rec)
    assert k["first_compile_seconds"] == pytest.approx(0.5)
    assert k["lost_seconds"] == pytest.approx(0.5) and k["misses"] == 3
    assert cost.reason_seconds(rec, SHAPE_X) == pytest.approx(0.3)
    assert cost.reason_seconds(rec, DTYPE_X) == pytest.approx(0.2)
    sites = {(s["file"], s["line"]): (s["misses"], s["seconds"], s["lost_seconds"], s["first"]) for s in k["call_sites"]}
    assert sites == {A: (1, pytest.approx(0.5), 0.0, True), B: (1, pytest.approx(0.3), pytest.approx(0.3), False),
                     C: (1, pytest.approx(0.2), pytest.approx(0.2), False)}
    assert [(s["file"], s["line"]) for s in k["call_sites"]] == [B, C, A]  # most time lost first


def test_a_site_called_twice_sums_its_misses_and_a_compile_without_a_trace_joins_the_latest_miss():
    c = _collector()
    rec = c.record("f", _describe)
    _miss(c, rec, (), A, 100.0, 0.1, 0.2)
    _miss(c, rec, (SHAPE_X,), B, 101.0, 0.1, 0.2)
    _miss(c, rec, (SHAPE_X,), B, 102.0, 0.1, 0.2)
    c.spent(rec, 103.0, 0.3)  # a derived program (grad of the jitted function): no new trace
    k = cost.function_keys(rec)
    (site_b,) = [s for s in k["call_sites"] if s["line"] == B[1]]
    assert site_b["misses"] == 2 and site_b["lost_seconds"] == pytest.approx(0.9)
    assert k["lost_seconds"] == pytest.approx(0.9) and k["first_compile_seconds"] == pytest.approx(0.3)


def test_two_threads_first_traces_each_own_their_compile():
    """Two threads trace the same function at once (both first calls miss); each compile event
    arrives in the thread that traced and belongs to that thread's miss. Before, both compiles
    went to the latest miss: "first compile 0.002 s, lost 0.195 s"."""
    import threading

    c = _collector()
    rec = c.record("f", _describe)
    traced_b = threading.Event()
    compiled_b = threading.Event()

    def thread_b():
        c.spent(rec, 100.01, 0.001, B, trace=True)
        traced_b.set()
        compiled_b.wait(5)

    c.spent(rec, 100.0, 0.005, A, trace=True)  # thread A's first trace
    t = threading.Thread(target=thread_b)
    t.start()
    assert traced_b.wait(5)  # B's trace, the latest miss, recorded before A's compile ends
    c.spent(rec, 100.02, 0.19)  # A's compile, in A
    compiled_b.set()
    t.join()
    k = cost.function_keys(rec)
    assert k["misses"] == 2
    assert k["first_compile_seconds"] == pytest.approx(0.195)  # A's trace and compile
    assert k["lost_seconds"] == pytest.approx(0.001)  # B's duplicate trace


def test_a_miss_with_two_reasons_counts_its_seconds_under_both():
    c = _collector()
    rec = c.record("f", _describe)
    _miss(c, rec, (), A, 100.0, 0.1, 0.1)
    _miss(c, rec, (SHAPE_X, DTYPE_X), A, 101.0, 0.1, 0.3)
    assert cost.reason_seconds(rec, SHAPE_X) == cost.reason_seconds(rec, DTYPE_X) == pytest.approx(0.4)
    assert cost.function_keys(rec)["lost_seconds"] == pytest.approx(0.4)


def test_a_compile_before_any_trace_is_the_first_compile_and_by_name_seconds_are_labelled():
    c = _collector()
    rec = c.record("f", _describe)
    c.spent(rec, 100.0, 0.5, by_name=True)
    c.spent(rec, 101.0, 0.25, by_name=True)
    k = cost.function_keys(rec)
    assert k["first_compile_seconds"] == pytest.approx(0.75) and k["lost_seconds"] == 0.0
    assert k["seconds_matched_by_name"] == pytest.approx(0.75)


def test_a_classic_pmap_miss_owns_the_compile_reported_before_its_trace():
    c = _collector()
    rec = c.record("f", _describe)
    for site, keys in ((A, ()), (B, (SHAPE_X,))):
        rec.cost.begin(site)
        c.spent(rec, 100.0, 0.4)  # the compile arrives inside the pmap call, before the trace is recorded
        rec.last_keys = keys
        c.spent(rec, 100.0, 0.0, site, trace=True)
    k = cost.function_keys(rec)
    assert k["misses"] == 2 and k["first_compile_seconds"] == pytest.approx(0.4)
    assert k["lost_seconds"] == pytest.approx(0.4) and cost.reason_seconds(rec, SHAPE_X) == pytest.approx(0.4)


def test_wall_time_compiling_counts_nested_events_once_and_splits_user_from_internal():
    c = _collector(t0=100.0)
    rec = c.record("outer", _describe)
    inner = c.record("inner", _describe)
    # the inner function's trace (and a JAX-internal trace) end inside the outer one's trace
    c.spent(inner, 100.2, 0.1, A, trace=True)
    c.spent(None, 100.35, 0.05)
    c.spent(rec, 100.0, 0.5, A, trace=True)
    c.spent(rec, 100.5, 0.5)  # its compile
    c.spent(None, 102.0, 1.0)  # an eager op's compile, later
    c.t_end = 110.0
    keys = cost.run_keys(c)
    assert keys["wall_seconds"] == pytest.approx(10.0)
    assert keys["compiling_seconds"]["total"] == pytest.approx(2.0)
    assert keys["compiling_seconds"]["functions"] == pytest.approx(1.0)
    # the JAX-internal trace nested in the outer trace is the outer function's time: counted once,
    # so the two parts add up to the total (1.05 before: "functions 1.10 s, internal 1.13 s of 1.32 s")
    assert keys["compiling_seconds"]["internal"] == pytest.approx(1.0)
    assert keys["compiling_seconds"]["functions"] + keys["compiling_seconds"]["internal"] == pytest.approx(
        keys["compiling_seconds"]["total"])
    assert keys["compiling_seconds"]["lost"] == 0.0
    assert keys["compile_share"] == pytest.approx(0.2)


def test_busy_merges_partial_overlaps():
    b = cost.Busy()
    b.add(0.0, 1.0)
    b.add(2.0, 3.0)
    b.add(0.9, 2.5)  # overlaps both
    assert b.seconds == pytest.approx(3.0)
    b.add(5.0, 6.0)
    assert b.seconds == pytest.approx(4.0)


def test_hotspots_sort_by_time_lost_then_compiles_and_the_text_shows_it():
    c = _collector()
    many = c.record("many_cheap", _describe)
    few = c.record("few_costly", _describe)
    _miss(c, many, (), A, 100.0, 0.01, 0.01)
    for i in range(4):
        _miss(c, many, ((RECREATED, None, None, None),), A, 101.0 + i, 0.01, 0.01)
    _miss(c, few, (), A, 110.0, 0.1, 1.0)
    _miss(c, few, (SHAPE_X,), B, 112.0, 0.1, 1.0)
    _miss(c, few, (DTYPE_X,), C, 114.0, 0.1, 2.0)
    c.t_end = 120.0
    rep = report.build(c)
    assert [f["qualname"] for f in rep["functions"]] == ["few_costly", "many_cheap"]
    out = report.text(rep)
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    head = next(i for i, line in enumerate(lines) if "lost s" in line)
    row = lines[head + 1].split()
    assert row[:4] == ["3", "3", "-", "3.20"] and row[4] == "few_costly"
    assert "dtype of `x` changed 1× (2.10 s): f32[4] → i32[4]" in out
    # two call sites with misses: one sub-line each; the function called from one line has none
    assert "from prog.py:12: 1 miss, 2.10 s lost" in out and "from prog.py:11: 1 miss, 1.10 s lost" in out
    assert "from prog.py:10: 1 miss, 0.00 s lost (first compile 1.10 s)" in out
    assert out.count("from prog.py:") == 3
    assert "  compiling: " in out and "s of 20.00 s wall (" in out


def test_the_json_row_has_the_cost_keys():
    c = _collector()
    rec = c.record("f", _describe)
    _miss(c, rec, (), A, 100.0, 0.1, 0.1)
    _miss(c, rec, (SHAPE_X,), A, 101.0, 0.1, 0.1)
    rep = report.build(c)
    (f,) = rep["functions"]
    assert f["miss_reasons"][0]["seconds"] == pytest.approx(0.2)
    assert set(f) >= {"first_compile_seconds", "lost_seconds", "misses", "call_sites", "seconds_matched_by_name"}
    assert set(rep) >= {"wall_seconds", "compiling_seconds", "compile_share"}
    assert "from prog.py" not in report.text(rep)  # one call site: no sub-line


# -- a real run, in process ------------------------------------------------------------


def test_audit_three_shapes_from_three_lines_lose_two_misses_with_their_reasons_and_sites():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    from jaxlint.trace import audit

    durations = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            durations.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        with audit() as a:
            @jax.jit
            def cost_probe(x):
                return jnp.sin(x) * 3

            here = sys._getframe().f_lineno
            cost_probe(jnp.ones(3))                  # first compile
            cost_probe(jnp.ones(5))                  # shape of x changed
            cost_probe(jnp.ones(5, dtype=jnp.int32))  # dtype of x changed
            cost_probe(jnp.ones(3))                  # cache hit
            rep = a.report()
    finally:
        getattr(jax.monitoring, "unregister_event_duration_listener", lambda cb: None)(listener)
    (f,) = [g for g in rep["functions"] if g["name"] == "cost_probe"]
    assert (f["compiles"], f["misses"]) == (3, 3)
    lost = {r["reason"]: r["seconds"] for r in f["miss_reasons"]}
    assert set(lost) == {"shape", "dtype"} and all(s > 0 for s in lost.values())
    assert f["lost_seconds"] == pytest.approx(sum(lost.values()), abs=2e-6)
    total = f["trace_seconds"] + f["lower_seconds"] + f["compile_seconds"]
    assert f["first_compile_seconds"] + f["lost_seconds"] == pytest.approx(total, abs=5e-6)
    sites = {s["line"] - here: (s["misses"], s["first"], s["lost_seconds"] > 0) for s in f["call_sites"]}
    assert sites == {1: (1, True, False), 2: (1, False, True), 3: (1, False, True)}
    # every compile second JAX reported inside the block is someone's: the user's or JAX's own
    ours = sum(g["compile_seconds"] for g in rep["functions"]) + rep["internal_compile_seconds"]
    assert ours == pytest.approx(sum(durations), abs=1e-5)
    assert 0 < rep["compiling_seconds"]["lost"] <= rep["compiling_seconds"]["functions"] <= rep["compiling_seconds"]["total"]
    assert rep["compiling_seconds"]["total"] <= rep["wall_seconds"]
