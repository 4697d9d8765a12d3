"""Eager-dispatch hotspots (issue 14 part 4): JAX operations dispatched one by one outside any
trace, counted per user source line; their report (text, JSON ``eager``, HTML, ``unpredicted``)."""

import os
import runpy
import sys

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from jaxlint.trace import audit, eager, frames  # noqa: E402
from jaxlint.trace.collector import Collector  # noqa: E402
from jaxlint.trace.report import build, text  # noqa: E402
from jaxlint.trace.userfiles import UserFiles  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEDULE = os.path.join(ROOT, "fixtures", "trace", "eager_schedule.py")
HERE = os.path.abspath(__file__)
# Before jnp.ufunc (jax 0.4.x), jax.numpy functions under eager grad are not counted (the report's
# partial note says so); the array operators (`x * y`) are counted on every version, at the array's
# operator methods. jax 0.4.30 is CI's oldest leg.
from jaxlint.trace.adapters import base as _base  # noqa: E402

UFUNCS_SEEN = "ufunc" in _base.eager_targets()[0]
needs_ufuncs = pytest.mark.skipif(not UFUNCS_SEEN,
                                  reason="this JAX has no jnp.ufunc: jax.numpy under eager grad is not counted")


def marked_lines(path):
    """{marker: line} for `# eager: NAME` comments."""
    out = {}
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            if "# eager: " in line:
                out[line.split("# eager: ", 1)[1].strip()] = n
    return out


def ops_at(a, file, line):
    return dict(a.collector.eager_ops.get((file, line), {}))


def here(a):
    """{line: {op: count}} for the lines of this test file."""
    return {n: dict(ops) for (f, n), ops in a.collector.eager_ops.items() if os.path.abspath(f) == HERE}


def test_schedule_fixture_counts_match_the_hand_count(capsys):
    with audit() as a:
        runpy.run_path(SCHEDULE, run_name="__main__")
    marks = marked_lines(SCHEDULE)
    steps = 40
    # hand count per iteration, explained in the fixture's docstring
    assert ops_at(a, SCHEDULE, marks["lr"]) == {"cos": steps, "multiply": steps}
    assert ops_at(a, SCHEDULE, marks["total"]) == {"add": steps}
    # `x / y` is JAX's true_divide (named divide on jax 0.4.x)
    assert ops_at(a, SCHEDULE, marks["avg"]) in ({"true_divide": steps}, {"divide": steps})
    assert a.collector.eager[(SCHEDULE, marks["lr"])] == 2 * steps
    assert ops_at(a, SCHEDULE, marks["first"]) == {"slice": steps, "squeeze": steps}
    # the jitted step's body is traced, never dispatched eagerly; its call is a compiled call
    lines = {n for (f, n) in a.collector.eager if f == SCHEDULE}
    step_line = marks["lr"] + 1
    assert step_line not in lines and not any(19 <= n <= 23 for n in lines), sorted(lines)
    assert all(s >= 0 for s in a.collector.eager_seconds.values())
    assert "mean loss" in capsys.readouterr().out


def test_traced_code_and_jitted_calls_are_not_eager_dispatches():
    def body(x):
        y = jnp.cos(x) * 2.0 + x[0]
        with jax.ensure_compile_time_eval():
            c = jnp.ones(3) * 2.0  # evaluated while tracing: not an eager dispatch of the program
        return y + c

    x = jnp.ones(3)
    with audit() as a:
        step = jax.jit(body)
        for _ in range(5):
            x = step(x)
        jax.make_jaxpr(lambda v: jnp.sin(v) * 3.0)(x)
        jax.eval_shape(lambda v: jnp.sin(v) + 1.0, x)
    assert here(a) == {}
    assert a.calls(step) == 5 and a.compiles(step) == 1


def test_jaxs_custom_jvp_functions_around_a_jit_count_one_dispatch_per_call():
    """`jax.nn.relu`/`relu6` are `custom_jvp(jit(f))`: each eager call is one compiled dispatch
    no other hook sees (0 of 20 were counted); under grad or jit they are not eager."""
    x = jnp.linspace(-1.0, 1.0, 8)
    with audit() as a:
        for _ in range(20):
            jax.nn.relu(x)
            jax.nn.relu6(x)
        jax.jit(lambda v: jax.nn.relu(v) * 2.0)(x)
    line = test_jaxs_custom_jvp_functions_around_a_jit_count_one_dispatch_per_call.__code__.co_firstlineno + 6
    got = here(a)
    assert got.get(line) == {"relu": 20} and got.get(line + 1) == {"relu6": 20}, got
    assert line + 2 not in got  # traced inside jit: not an eager dispatch
    assert jax.nn.relu.defjvp is not None and float(jax.grad(lambda v: jax.nn.relu(v))(1.0)) == 1.0


@needs_ufuncs
def test_eager_grad_and_vmap_outside_jit_are_counted():
    def loss(w):
        return jnp.sum(jnp.sin(w) * w)

    w = jnp.ones(3)
    with audit() as a:
        for _ in range(3):
            jax.grad(loss)(w)
    inside_loss = {n: ops for n, ops in here(a).items() if n == loss.__code__.co_firstlineno + 1}
    assert inside_loss and sum(sum(o.values()) for o in inside_loss.values()) >= 3 * 2


def test_dispatches_made_inside_a_library_count_for_the_users_line():
    optax = pytest.importorskip("optax")
    schedule = optax.cosine_decay_schedule(0.1, decay_steps=100)
    with audit() as a:
        for s in range(20):
            lr = schedule(s)  # optax computes the schedule with jnp, eagerly
    (ops,) = here(a).values()  # all of them on the user's line that called into optax
    assert "cos" in ops and sum(ops.values()) >= 20, ops
    assert float(lr) > 0


def test_python_arithmetic_and_numpy_are_not_dispatches():
    import numpy as np

    with audit() as a:
        for s in range(20):
            lr = 0.1 * np.cos(np.pi * s / 20)  # NumPy on the host
            k = jnp.pi * s / 20  # jnp.pi is a Python float
    assert here(a) == {} and lr is not None and k is not None


def test_errors_of_eager_operations_pass_through_without_jaxlint_frames():
    if sys.version_info < (3, 11) and not UFUNCS_SEEN:
        # jax 0.4.x on 3.10: `+` runs through the operator method jaxlint counts, and Python 3.10
        # re-raises with the traceback of the except clause (one jaxlint frame remains there, as
        # for the other audit() hooks: README, jaxlint trace's own report is clean)
        pytest.skip("Python 3.10 re-raises with the traceback of the except clause")
    with audit():
        with pytest.raises(TypeError) as info:
            jnp.ones(3) + jnp.ones(4)
    tb, names = info.value.__traceback__, []
    while tb is not None:
        names.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert not any(frames.own(n) for n in names), names


def test_jax_functions_behave_the_same_and_are_restored_after():
    from jax._src import core

    cos, process, pjit_type = jnp.cos, core.EvalTrace.__dict__["process_primitive"], type(jnp.cos)
    with audit() as a:
        assert jnp.cos == cos and hash(jnp.cos) == hash(cos) and jnp.cos.__name__ == "cos"
        assert jnp.cos.lower(1.0).compile()(2.0) == pytest.approx(float(cos(2.0)))  # attributes forward
        assert float(jax.jit(jnp.cos)(0.0)) == 1.0
        jnp.cos(0.0)
    assert jnp.cos is cos and type(jnp.cos) is pjit_type
    assert core.EvalTrace.__dict__["process_primitive"] is process
    assert list(here(a).values()) == [{"cos": 1}]  # only the bare jnp.cos(0.0); .lower and jax.jit are not eager


def test_nested_audits_both_count():
    x = jnp.ones(2)
    with audit() as outer:
        with audit() as inner:
            for _ in range(4):
                x = x * 2.0
    assert list(here(inner).values()) == [{"multiply": 4}]
    assert list(here(outer).values()) == [{"multiply": 4}]


def test_every_array_operator_counts_one_dispatch_on_every_jax():
    """`x == y` and `x / y` counted 0 of 20 on jax 0.6 and 0.4 (their operator methods hold a
    jitted function in a closure, which runs in C++), `-x` 0 of 20 on 0.10 (its method is a
    jitted function): each counts one dispatch per call now, on every version CI tests."""
    x, y = jnp.ones(8), jnp.ones(8) * 2.0
    with audit() as a:
        for _ in range(20):
            x * y
            x == y
            x / y
            x + y
            -x
            x > y
            x @ y
    first = test_every_array_operator_counts_one_dispatch_on_every_jax.__code__.co_firstlineno + 7
    got = here(a)
    assert [sum(got.get(first + i, {}).values()) for i in range(7)] == [20] * 7, got


def test_missing_routes_are_partial_notes_not_crashes(monkeypatch):
    from jaxlint.trace.adapters import base

    monkeypatch.setattr(base, "eager_targets", lambda: ({}, ["eager primitives not counted (test)"]))
    with audit() as a:
        y = jnp.ones(3) * 2.0
    assert "eager primitives not counted (test)" in a.collector.partial
    assert a.collector.eager == {} and float(y[0]) == 2.0


# -- the report, from hand-made records (no JAX needed) -----------------------------


def _collector(counts, calls=None):
    c = Collector(UserFiles(None))
    for (file, line), ops in counts.items():
        for name, n in ops.items():
            for _ in range(n):
                c.eager_dispatched(file, line, name, 0.001)
    if calls is not None:
        rec = c.record("step", lambda k: ("step", "step", "/p/train.py", 3))
        rec.calls, rec.traces, rec.compiles = calls, 1, 1
    return c


def test_rows_are_sorted_with_primitives_most_frequent_first():
    c = _collector({("/p/a.py", 5): {"add": 3, "mul": 7}, ("/p/a.py", 9): {"cos": 20}})
    rows = eager.rows(c)
    assert [(r["line"], r["count"]) for r in rows] == [(9, 20), (5, 10)]
    assert list(rows[1]["primitives"].items()) == [("mul", 7), ("add", 3)]
    assert rows[1]["seconds"] == pytest.approx(0.01)
    assert set(rows[0]) == {"file", "line", "count", "seconds", "primitives"}


def test_text_section_shows_only_lines_with_ten_dispatches_or_more():
    c = _collector({("/p/a.py", 5): {"add": 9}, ("/p/a.py", 9): {"cos": 10, "multiply": 10}}, calls=10)
    out = text(build(c))
    section = out.split("Eager dispatch hotspots (outside jit)", 1)[1]
    assert "/p/a.py:9" in section and "/p/a.py:5" not in section
    assert "cos×10 multiply×10" in section and "2.0" in section  # two dispatches per step
    assert "29 eager dispatches from 2 lines" in section
    assert max(len(line) for line in out.splitlines()) <= 80


def test_text_section_says_none_counted():
    assert "Eager dispatch hotspots (outside jit)\n  none counted" in text(build(_collector({})))


def test_unpredicted_eager_lines_dispatch_about_every_step():
    counts = {("/p/a.py", 5): {"add": 19}, ("/p/a.py", 6): {"add": 20}, ("/p/a.py", 7): {"mul": 80}}
    _, unpredicted = __import__("jaxlint.trace.report", fromlist=["cross_check"]).cross_check(
        [], [r for r in _collector(counts, calls=40).user_records()], _collector(counts, calls=40), ())
    flagged = [(u["kind"], u["line"], u["count"], u["detail"]) for u in unpredicted]
    assert flagged == [("eager", 7, 80, "mul×80"), ("eager", 6, 20, "add×20")]  # floor: half of 40 calls


def test_unpredicted_without_any_jitted_call_needs_a_hundred():
    from jaxlint.trace.report import cross_check

    c = _collector({("/p/a.py", 5): {"add": 99}, ("/p/a.py", 6): {"add": 100}})
    _, unpredicted = cross_check([], c.user_records(), c, ())
    assert [u["line"] for u in unpredicted] == [6]


def test_html_has_the_eager_section():
    from jaxlint.trace.html import render

    c = _collector({("/p/a.py", 9): {"cos": 12}}, calls=12)
    from jaxlint.trace.chrome_trace import timeline

    page = render(build(c), timeline(c)).replace("<wbr>", "")  # break points in paths are not text
    assert 'id="eager"' in page and "cos×12" in page and "/p/a.py:9" in page


# -- the fix names what can be jitted (issue 38) ----------------------------------------------

SCHEDULE = os.path.join(ROOT, "fixtures", "trace", "eager_schedule.py")


def _line(text):
    with open(SCHEDULE) as fh:
        return next(i for i, line in enumerate(fh, 1) if text in line)


def test_the_eager_fix_names_the_loop_body_and_the_values_it_carries():
    from jaxlint.trace import loopbody

    loop, lr, total, first = (_line("for step in range(STEPS)"), _line("# eager: lr"), _line("# eager: total"),
                              _line("# eager: first"))
    eager_lines = [lr, total, _line("# eager: avg"), first]
    # the jitted step's line between them splits the loop body into two runs of eager statements
    s = loopbody.suggestion(SCHEDULE, lr, eager_lines)
    assert s == {"kind": "loop", "loop_line": loop, "first": lr, "last": lr, "inputs": ["step"], "carried": ["step"],
                 "outputs": ["lr"]}
    s = loopbody.suggestion(SCHEDULE, total, eager_lines)
    assert (s["first"], s["last"]) == (total, first)
    assert s["inputs"] == ["total", "loss", "step", "w"]  # in the order the run first reads them
    assert s["outputs"] == ["total", "avg", "first"]  # each read again: next iteration, or after the loop
    text = loopbody.fix_text(s, 80, "eager_schedule.py", "train_step")
    assert f"the loop at eager_schedule.py:{loop}" in text
    assert "`total, avg, first = body(total, loss, step, w)`" in text and "`train_step`" in text
    assert "main" not in text and "the function this line is in" not in text


def test_the_eager_fix_names_a_function_called_again_and_again(tmp_path):
    from jaxlint.trace import loopbody

    path = tmp_path / "sched.py"
    path.write_text("import jax.numpy as jnp\n\n\ndef schedule(step):\n    return 0.1 * jnp.cos(step)\n\n\n"
                    "def main():\n    for i in range(3):\n        schedule(i)\n\n\nx = jnp.ones(2) * 2\n")
    assert loopbody.suggestion(str(path), 5) == {"kind": "function", "name": "schedule", "def_line": 4}
    assert "`jax.jit` `schedule` (sched.py:4" in loopbody.fix_text(loopbody.suggestion(str(path), 5), 30, "sched.py")
    assert loopbody.suggestion(str(path), 13) is None  # module level, no loop: the general fix stays


def test_the_run_report_uses_the_named_fix():
    import runpy as _runpy

    with audit() as a:
        _runpy.run_path(SCHEDULE, run_name="__main__")
    report = build(a.collector)
    row = next(e for e in report["eager"] if e["line"] == _line("# eager: lr"))
    assert "`lr = body(step)`" in row["fix"] and "train_step" in row["fix"]
