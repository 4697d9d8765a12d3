"""Syncs made inside plain helpers the step loop calls: JAX201 through a helper of another module of
the project (``log_metrics(step, metrics)`` imported from ``utils``) and JAX202 through a helper that
blocks on what it is given (``synchronize_and_clock(params)``), in this module or another one."""

from __future__ import annotations

import pytest

from ruletools import assert_marked, default_findings, make_project, messages, path_default_codes

_HELPERS = """
import time
import jax
import numpy as np

def synchronize_and_clock(x):
    jax.block_until_ready(x)
    return time.time()

def log_metrics(step, metrics, every=1):
    for k, v in metrics.items():
        print(k, float(v))

def log_now_and_then(step, metrics, every=100):
    if step % every == 0:
        print(float(metrics["loss"]))

def to_host(metrics):
    return jax.device_get(metrics)
"""

_TRAIN = """
import jax
import jax.numpy as jnp
from utils.helpers import synchronize_and_clock, log_metrics, log_now_and_then, to_host
from utils import helpers

@jax.jit
def step(params, batch):
    loss = jnp.mean((params - batch) ** 2)
    return params - 0.1 * loss, {"loss": loss}

def train(params, batches, stamps):
    for i, batch in enumerate(batches):
        params, metrics = step(params, batch)
        stamps.append(synchronize_and_clock(params))
        log_metrics(i, metrics)
        helpers.log_now_and_then(i, metrics)
        host = to_host(metrics)
        log_metrics(i, {"step": i})
    return params, host

if __name__ == "__main__":
    train(jnp.zeros(3), [jnp.ones(3)] * 1000, [])
"""


def test_helpers_of_another_module_that_sync_or_block_every_step(tmp_path):
    root = make_project(tmp_path, {"pyproject.toml": "", "utils/__init__.py": "", "utils/helpers.py": _HELPERS,
                                   "train.py": _TRAIN})
    # the block (JAX202) and the log (JAX201); not the periodic log, the conversion whose result the loop
    # keeps, nor the log of host values
    assert path_default_codes(root / "train.py") == [(15, "JAX202"), (16, "JAX201")]


def test_the_helpers_messages_name_the_other_modules_line(tmp_path):
    from jaxlint.engine import check_path
    import jaxlint_rules

    root = make_project(tmp_path, {"pyproject.toml": "", "utils/__init__.py": "", "utils/helpers.py": _HELPERS,
                                   "train.py": _TRAIN})
    res = check_path(str(root / "train.py"), [r() for r in jaxlint_rules.ALL_RULES])
    msgs = {f.code: f.message for f in res.findings if f.opt_in is None}
    assert "which blocks on `params` (`jax.block_until_ready(x)` on line 7 of `utils/helpers.py`)" in msgs["JAX202"]
    assert "which reads `metrics` on the host (`float(v)` on line 12 of `utils/helpers.py`)" in msgs["JAX201"]


_BLOCKING = """
    import time
    import jax
    import jax.numpy as jnp

    def synchronize_and_clock(x):
        x.block_until_ready()
        return time.time()

    @jax.jit
    def step(params, batch):
        return params - 0.1 * jnp.mean((params - batch) ** 2)

    def train(params, batches):
        times = []
        for batch in batches:
            params = step(params, batch)
            times.append(synchronize_and_clock(params))  # expect: JAX202
        return params, times
    """


def test_jax202_a_helper_of_this_module_that_blocks_every_step():
    assert_marked(_BLOCKING)


@pytest.mark.parametrize("change", [
    ("            times.append(synchronize_and_clock(params))  # expect: JAX202\n",
     "            if len(times) % 100 == 0:\n                times.append(synchronize_and_clock(params))\n"),
    ("synchronize_and_clock(params)", "synchronize_and_clock(len(times))"),  # no JAX value given
    ("        x.block_until_ready()\n", "        print(x)\n"),  # no block inside
])
def test_jax202_near_misses_of_a_blocking_helper(change):
    src = _BLOCKING
    changed = src.replace(*change)
    assert changed != src
    assert default_findings(changed, "JAX202") == []
