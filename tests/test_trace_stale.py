"""JAX603 at runtime: `jaxlint trace` records what each trace of a user function read from globals,
closure cells and `self`, and counts the calls that ran from JAX's cache after one of those names was
rebound (jaxlint/trace/stale.py); the report confirms JAX603 findings from those counts."""

import gc
import os
import runpy
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax")

from jaxlint.trace import audit  # noqa: E402
from jaxlint.trace import report as report_mod  # noqa: E402
from test_trace import FIX, trace  # noqa: E402


def run(tmp_path, body, name="prog.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    with audit() as a:
        ns = runpy.run_path(str(path), run_name="__main__")
    return a.collector, ns


def row(collector, qualname):
    recs = [r for r in collector.records.values() if r.qualname == qualname]
    assert len(recs) == 1, [r.qualname for r in collector.records.values()]
    return recs[0]


# -- what the hooks count ------------------------------------------------------------------


def test_a_global_rebound_in_the_loop_counts_every_call_after_the_first(tmp_path):
    c, ns = run(tmp_path, """
        import jax
        import jax.numpy as jnp

        lr = 0.1

        @jax.jit
        def step(w):
            return w - lr

        def train(w):
            global lr
            for i in range(6):
                lr = 0.1 / (1 + i)
                w = step(w)
            return w

        w = train(jnp.ones(2))
    """)
    rec = row(c, "step")
    assert rec.traces == 1 and rec.calls == 6
    n, traced, now, seen = rec.stale["lr"]
    assert (n, traced, seen) == (5, "0.1", 1)  # the first call's rate equals the traced one
    assert now == repr(0.1 / 6)
    assert float(ns["w"][0]) == pytest.approx(1 - 6 * 0.1)  # the program really kept the first rate


def test_an_argument_is_not_a_stale_read(tmp_path):
    c, _ = run(tmp_path, """
        import jax
        import jax.numpy as jnp

        lr = 0.1

        @jax.jit
        def step(w, lr):
            return w - lr

        w = jnp.ones(2)
        for i in range(6):
            lr = 0.1 / (1 + i)
            w = step(w, lr)
    """)
    rec = row(c, "step")
    assert rec.calls == 6 and rec.stale == {}


def test_a_global_rebound_to_an_equal_value_is_not_stale(tmp_path):
    c, _ = run(tmp_path, """
        import jax
        import jax.numpy as jnp

        lr = 0.1
        axes = (0,)

        @jax.jit
        def step(w):
            return w - lr * w.sum(axes)

        w = jnp.ones(2)
        for i in range(6):
            lr = float("0.1")  # a new float object, equal to the traced one
            axes = tuple([0])  # a new tuple, equal to the traced one
            w = step(w)
    """)
    rec = row(c, "step")
    assert {s.name for s in rec.watch.slots} == {"lr", "axes"}
    assert rec.stale == {}


def test_a_retrace_reads_the_new_value_so_its_call_is_not_stale(tmp_path):
    # every call has a new shape: JAX retraces and reads the rate of that step
    c, _ = run(tmp_path, """
        import jax
        import jax.numpy as jnp

        lr = 0.1

        @jax.jit
        def step(w):
            return w - lr

        for i in range(4):
            lr = 0.1 / (1 + i)
            step(jnp.ones(i + 1))
    """)
    rec = row(c, "step")
    assert rec.traces == 4 and rec.stale == {}


def test_an_enclosing_functions_variable_and_a_helpers_global(tmp_path):
    c, _ = run(tmp_path, """
        import jax
        import jax.numpy as jnp

        scale = 2.0

        def scaled(x):
            return x * scale

        def make():
            decay = 0.5

            @jax.jit
            def step(w):
                return scaled(w) * decay

            def train(w):
                nonlocal decay
                global scale
                for i in range(5):
                    decay = 0.5 ** (i + 1)
                    scale = 2.0 + i
                    w = step(w)
                return w
            return train

        make()(jnp.ones(2))
    """)
    rec = row(c, "make.<locals>.step")
    assert rec.stale["decay"][0] == 4
    assert rec.stale["scale"][0] == 4  # read by `scaled`, which the trace of `step` runs


def test_a_self_attribute_read_by_a_method_jitted_in_init(tmp_path):
    c, _ = run(tmp_path, """
        import jax
        import jax.numpy as jnp

        class Trainer:
            def __init__(self):
                self.lr = 0.1
                self._step = jax.jit(self._update)

            def _update(self, w):
                return w - self.lr

            def fit(self, w):
                for i in range(4):
                    self.lr = 0.1 / (i + 1)
                    w = self._step(w)
                return w

        Trainer().fit(jnp.ones(2))
    """)
    assert row(c, "Trainer._update").stale["self.lr"][0] == 3


def test_an_array_global_is_watched_by_identity_and_not_kept_alive(tmp_path):
    c, _ = run(tmp_path, """
        import jax
        import jax.numpy as jnp
        import numpy as np

        table = np.ones(1000)

        @jax.jit
        def step(w):
            return w + table.sum()

        w = step(jnp.ones(2))
        table = np.zeros(1000)
        w = step(w)
        w = step(w)
    """)
    rec = row(c, "step")
    assert rec.stale["table"][:3] == [2, "a `ndarray`", "a `ndarray`"]
    gc.collect()
    (slot,) = [s for s in rec.watch.slots if s.name == "table"]
    (token,) = slot.seen
    assert token[0] == 1 and token[1]() is None  # a weak reference: the traced array was freed


def test_the_watch_does_not_change_what_the_program_computes(tmp_path):
    c, ns = run(tmp_path, """
        import jax
        import jax.numpy as jnp

        lr = 0.5

        @jax.jit
        def step(w):
            return w * lr

        out = [float(step(jnp.ones(()))) for lr in (0.5, 0.25)]
    """)
    # a comprehension's `lr` is its own: the global stays 0.5, nothing is stale
    assert ns["out"] == [0.5, 0.5] and row(c, "step").stale == {}


# -- the report ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stale_global(tmp_path_factory):
    page = tmp_path_factory.mktemp("stale") / "report.html"
    proc, report = trace("--html", str(page), os.path.join(FIX, "stale_global.py"))
    return proc, report, page.read_text()


def test_trace_confirms_the_stale_global_in_json_text_and_html(stale_global):
    proc, report, page = stale_global
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "0.5\n"  # the program's own output: ten steps at the first rate
    rows = [f for f in report["findings"] if f["code"] == "JAX603"]
    assert len(rows) == 1 and rows[0]["confirmed"], report["findings"]
    evidence = rows[0]["evidence"]
    assert evidence.startswith("`lr` was rebound after `step` was traced; `step` then ran 9 more times from its "
                               "cache with the value of its trace (0.1)"), evidence
    step = next(f for f in report["functions"] if f["qualname"] == "step")
    assert step["stale_reads"] == [{"name": "lr", "calls": 9, "traced_value": "0.1", "value": "0.01",
                                    "traced_values": 1}]
    text = report_mod.text(report)
    assert "JAX603 fixtures/trace/stale_global.py:11 confirmed: `lr` was rebound" in text.replace("\n      ", " ")
    assert "`lr` rebound after the trace: 9 calls ran from the cache" in text.replace("\n          ", " ")
    assert "`lr` was rebound after `step` was traced" in page


def test_trace_keeps_the_output_of_the_stale_program(stale_global):
    plain = subprocess.run([sys.executable, os.path.join(FIX, "stale_global.py")], capture_output=True, text=True,
                           timeout=300)
    assert plain.returncode == 0 and plain.stdout == stale_global[0].stdout


def test_the_near_miss_passes_the_rate_and_nothing_is_stale():
    proc, report = trace(os.path.join(FIX, "stale_argument.py"))
    assert proc.returncode == 0, proc.stderr
    assert not [f for f in report["findings"] if f["code"] == "JAX603"]
    step = next(f for f in report["functions"] if f["qualname"] == "step")
    assert step["calls"] == 10 and step["stale_reads"] == []


class _Finding:
    def __init__(self, path, line, message):
        self.path, self.line, self.col, self.code, self.message = path, line, 0, "JAX603", message


def test_a_finding_whose_variable_was_never_rebound_while_cached_is_not_confirmed(tmp_path):
    body = """
        import jax
        import jax.numpy as jnp

        lr = 0.1

        @jax.jit
        def step(w):
            return w - lr

        for i in range(3):
            w = step(jnp.ones(2))
        lr = 0.2
    """
    c, _ = run(tmp_path, body)
    path = str(tmp_path / "prog.py")
    line = textwrap.dedent(body).splitlines().index("    return w - lr") + 1
    found = [_Finding(path, line, "`lr` is the module-level variable read at trace time by the compiled `step`"),
             _Finding(path, line, "`other` is the module-level variable read at trace time by the compiled `step`")]
    out, _ = report_mod.cross_check(found, c.user_records(), c, ())
    assert [f["confirmed"] for f in out] == [False, False]
    assert out[0]["evidence"] == ("not observed: `step` read `lr` at its trace, and none of its 3 calls ran from "
                                  "its cache after `lr` was rebound")
    assert out[1]["evidence"] == "not observed: no traced function read `other` on this line"
