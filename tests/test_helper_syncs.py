"""Blocks made inside plain helpers the step loop calls: JAX202 through a helper of the module that
blocks on what it is given (``synchronize_and_clock(params)``). Helpers of other modules are not read
for syncs or blocks (modelling those modules cost 30% more time on the pinned corpus for one finding
on the review sets: measured in issue 39's eighth session, left out); the one exception is a callable
object's ``__call__`` whose file spells a host conversion (tests/test_helper_sync_objects.py)."""

from __future__ import annotations

import pytest

from ruletools import assert_marked, default_findings

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
