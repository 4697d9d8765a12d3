"""Classes from fresh set AM's first look (issue 39): timings made while `jax_debug_nans` is on (every JAX call
checks its outputs on the host before it returns, so the clock reads after the work)."""

from __future__ import annotations

import ast
import textwrap

from jaxlint.model import build_model
from jaxlint.model.facts import setuporder
from ruletools import assert_marked, default_findings, messages, path_default_codes

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


_ARITY = """
import functools
import jax
import jax.numpy as jnp
import optax

def compute_loss(net, params, batch):
    return jnp.mean((params * batch) ** 2)

def train_epoch(net, params, opt_state, batches):
    tx = optax.adam(1e-3)
    loss_fn = functools.partial(compute_loss, net)
    loss_fn = jax.jit(jax.value_and_grad(loss_fn))
    for batch, label in batches:
        loss, grads = loss_fn({args})
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates){mark}
    return params

if __name__ == "__main__":
    train_epoch(None, jnp.ones(3), None, [(jnp.ones(3), 0)] * 1000)
"""


def _arity_call(src):
    m = build_model(ast.parse(textwrap.dedent(src.replace("{mark}", ""))))
    call = next(n for n in ast.walk(m.tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "loss_fn")
    from jaxlint.model.python import arity
    return arity.arity_error(m, call)


def test_model_a_partial_called_with_too_many_or_too_few_arguments_raises_typeerror():
    # fresh AM's gnn-lspe: `partial(compute_loss, net)` jitted and called with (params, graph, label)
    assert "takes 3 positional arguments, with 4" in _arity_call(_ARITY.replace("{args}", "params, batch, label"))
    assert "required argument `batch`" in _arity_call(_ARITY.replace("{args}", "params"))
    assert _arity_call(_ARITY.replace("{args}", "params, batch")) is None
    assert _arity_call(_ARITY.replace("{args}", "params, batch=batch")) is None
    assert _arity_call(_ARITY.replace("{args}", "*xs")) is None


def test_jax701_after_a_call_that_always_raises_is_opt_in(tmp_path):
    # (dead code is judged for files on disk: the engine's certain-raise pass needs the module's path)
    dead, live = tmp_path / "dead.py", tmp_path / "live.py"
    dead.write_text(_ARITY.replace("{args}", "params, batch, label").replace("{mark}", ""))
    live.write_text(_ARITY.replace("{args}", "params, batch").replace("{mark}", ""))
    assert [c for _, c in path_default_codes(dead) if c == "JAX701"] == []
    assert [c for _, c in path_default_codes(live) if c == "JAX701"] == ["JAX701"]


_EVERY = """
import jax
import jax.numpy as jnp

log_interval = {every}

@jax.jit
def step(p, x):
    return p - 0.1 * x, jnp.sum(x)

def train(p, batches):
    for it, x in enumerate(batches):
        p, loss = step(p, x)
        if it % log_interval == 0:
            print(f"step {it}: {loss.item()}"){mark}
    return p

if __name__ == "__main__":
    train(jnp.ones(3), [jnp.ones(3)] * 100000)
"""


def test_jax201_a_periodic_guard_whose_period_is_1_runs_every_step():
    # fresh AK's nanoJAXGPT: `log_interval = 1` at module level, `if iter % log_interval == 0: loss.item()`
    assert_marked(_EVERY.replace("{every}", "1").replace("{mark}", "  # expect: JAX201"))


def test_jax201_a_periodic_guard_with_a_longer_period_stays_periodic():
    for every in ("10", "int(input())"):
        assert default_findings(_EVERY.replace("{every}", every).replace("{mark}", ""), "JAX201") == [], every
