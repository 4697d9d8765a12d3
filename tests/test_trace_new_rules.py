"""Issue 27's new rules, run for real: each pitfall's fixture under jax shows its cost as counts
(host callbacks per iteration, eager dispatches per step or per element), and `jaxlint trace`
confirms each static finding from those counts. Counts, not seconds: exact on any machine."""

import os
import runpy

import pytest

pytest.importorskip("jax")
pytest.importorskip("optax")

from jaxlint.trace import audit  # noqa: E402
from test_trace import trace  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures")
JAX206 = os.path.join(FIX, "JAX206_host_callback_in_compiled_loop")
JAX701 = os.path.join(FIX, "JAX701_eager_update_in_loop")
JAX702 = os.path.join(FIX, "JAX702_element_wise_loop_over_array")


def line_of(path, text):
    with open(path) as fh:
        return next(n for n, line in enumerate(fh, 1) if text in line)


def run(path):
    with audit() as a:
        runpy.run_path(path, run_name="__main__")
    return a.collector


def at(counter, path, line):
    return sum(n for (f, l), n in counter.items() if os.path.realpath(f) == os.path.realpath(path) and l == line)


# -- the cost, counted --------------------------------------------------------------


def test_jax206_a_callback_in_a_fori_loop_runs_once_per_iteration(capsys):
    bad = os.path.join(JAX206, "bad.py")
    c = run(bad)
    # 200 iterations of the compiled loop: 200 stops for the print, 200 for the callback
    assert at(c.callbacks, bad, line_of(bad, 'jax.debug.print("step')) == 200
    assert at(c.callbacks, bad, line_of(bad, "jax.debug.callback(record")) == 200


def test_jax206_the_fix_calls_the_host_every_50th_iteration(capsys):
    good = os.path.join(JAX206, "good.py")
    c = run(good)
    assert at(c.callbacks, good, line_of(good, "lax.cond(i % 50")) == 4  # iterations 0, 50, 100, 150


def test_jax701_an_eager_optax_update_dispatches_per_leaf_every_step(capsys):
    bad = os.path.join(JAX701, "bad.py")
    c = run(bad)
    steps, leaves = 20, 4
    update = at(c.eager, bad, line_of(bad, "tx.update(grads"))
    sgd = at(c.eager, bad, line_of(bad, "jax.tree.map(lambda p, g"))
    # Adam: several operations per leaf per step (optax's own jnp calls, counted on every jax)
    assert update >= steps * leaves * 3
    # the hand-written rule: a multiply and a subtract per leaf per step (array operators, counted
    # on every jax)
    assert sgd == steps * leaves * 2


def test_jax701_the_fixed_loop_dispatches_nothing_eagerly(capsys):
    good = os.path.join(JAX701, "good.py")
    c = run(good)
    assert at(c.eager, good, line_of(good, "params, opt_state = train_step(")) == 0


def test_jax702_an_element_wise_loop_dispatches_per_element(capsys):
    bad = os.path.join(JAX702, "bad.py")
    c = run(bad)
    line = line_of(bad, "if z[j, i] <= z[j - 1, i]")
    elements = 3 * 19  # z is 20 x 3; j from 1
    bools = sum(n for (f, l, k), n in c.transfers.items()
                if os.path.realpath(f) == os.path.realpath(bad) and l == line and k == "bool")
    assert bools == elements  # the host waits once per element
    assert at(c.eager, bad, line) >= 2 * elements  # at least one gather per side per element
    good = os.path.join(JAX702, "good.py")
    g = run(good)
    assert at(g.eager, good, line_of(good, "if z[j, i] <= z[j - 1, i]")) == 0


# -- jaxlint trace confirms the static findings -------------------------------------------


@pytest.mark.parametrize("folder,code", [(JAX206, "JAX206"), (JAX701, "JAX701"), (JAX702, "JAX702")])
def test_trace_confirms_the_fixture_findings(folder, code):
    proc, report = trace(os.path.join(folder, "bad.py"))
    assert proc.returncode == 0, proc.stderr
    rows = [f for f in report["findings"] if f["code"] == code]
    assert rows, report["findings"]
    assert all(f["confirmed"] for f in rows), rows


def test_trace_lists_callbacks_per_line_in_json_and_text():
    bad = os.path.join(JAX206, "bad.py")
    proc, report = trace(bad)
    lines = {(os.path.basename(r["file"]), r["line"]): r["count"] for r in report["callbacks"]}
    assert lines[("bad.py", line_of(bad, 'jax.debug.print("step'))] == 200
    # the opt-in finding's print runs once per iteration of the outer scan: 30
    assert lines[("bad.py", line_of(bad, 'jax.debug.print("carry'))] == 30


def test_trace_keeps_the_output_of_a_program_with_callbacks():
    import subprocess
    import sys

    bad = os.path.join(JAX206, "bad.py")
    plain = subprocess.run([sys.executable, bad], capture_output=True, text=True, timeout=300)
    traced = subprocess.run([sys.executable, "-m", "jaxlint", "trace", bad], capture_output=True, text=True,
                            timeout=300)
    assert plain.returncode == traced.returncode == 0
    assert plain.stdout == traced.stdout
