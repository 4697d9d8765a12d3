"""Classes from fresh set AM's first look (issue 39): timings made while `jax_debug_nans` is on (every JAX call
checks its outputs on the host before it returns, so the clock reads after the work)."""

from __future__ import annotations

import ast
import textwrap

from jaxlint.model import build_model
from jaxlint.model.facts import setuporder
from ruletools import assert_marked, default_findings, messages

_TIMED = """
import time
import jax
import jax.numpy as jnp

{flag}

@jax.jit
def diffuse(x):
    return jnp.tanh(x) * 2

x = jnp.ones((1000, 1000))
t0 = time.perf_counter()
y = diffuse(x)
print(time.perf_counter() - t0){mark}
"""


def test_jax204_not_reported_while_debug_nans_makes_every_call_wait():
    for flag in ('jax.config.update("jax_debug_nans", True)', 'jax.config.update("jax_debug_infs", True)'):
        src = _TIMED.replace("{flag}", flag).replace("{mark}", "")
        assert default_findings(src, "JAX204") == [], flag


def test_jax204_reported_without_debug_nans_or_after_it_is_turned_off():
    for flag in ("", 'jax.config.update("jax_debug_nans", True)\njax.config.update("jax_debug_nans", False)',
                 'jax.config.update("jax_enable_x64", True)'):
        assert_marked(_TIMED.replace("{flag}", flag).replace("{mark}", "  # expect: JAX204"))


def test_model_host_checked_lines_are_the_spans_where_debug_nans_is_on():
    src = textwrap.dedent("""
    import jax
    a = 1
    jax.config.update("jax_debug_nans", True)
    b = 2
    jax.config.update("jax_debug_nans", False)
    c = 3
    """)
    m = build_model(ast.parse(src))
    assert setuporder.host_checked_lines(m) == [(5, 6)]


_PARTS = """
import jax
import jax.numpy as jnp

@jax.jit
def update(state):
    return {"x": state["x"] * 0.5, "t": state["t"] + 1.0}

def run(state, frames, xs):
    out = []
    for frame in range(frames):
        state = update(state)
        {line}
    return out

if __name__ == "__main__":
    run({"x": jnp.ones(3), "t": jnp.zeros(())}, 1000, [jnp.ones(3)] * 10)
"""


def test_jax201_a_comprehension_over_the_elements_of_one_array_is_not_a_step_loop():
    # fresh AM's `bx, by, bz = [float(v) for v in st["x_bh"]]`: the parts of one value, read once per
    # iteration of the enclosing loop (which is that loop's question: here a per-step read, reported once there)
    src = _PARTS.replace("{line}", "out.append([float(v) for v in state['x']])  # expect: JAX201")
    assert_marked(src)
    (msg,) = [f for f in messages(src, "JAX201")]
    assert "loop on line 11" in msg, msg  # the frame loop, not the comprehension


def test_jax201_a_comprehension_over_batches_that_runs_a_step_each_is_a_step_loop():
    src = _PARTS.replace("{line}", "out.append([float(update({'x': x, 't': 0.0})['t']) for x in xs])  # expect: JAX201")
    assert_marked(src)
