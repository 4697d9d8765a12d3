"""Classes from fresh set AJ's first look (issue 39): a target network made from the step's parameters by a
call that keeps their leaves (JAX803 must not advise donating them)."""

from __future__ import annotations

import pytest

from ruletools import default_findings

_TARGET = """
import jax
import jax.numpy as jnp
import haiku as hk
from flax.core import freeze


@jax.jit
def update(params, target, batch):
    grads = jax.grad(lambda p: jnp.sum((p["w"] - target["w"]) * batch))(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


params = {"w": jnp.zeros(3)}
target = {make}
for batch in range(1000):
    params = update(params, target, batch)
"""


@pytest.mark.parametrize("make", ["hk.data_structures.to_immutable_dict(params)", "freeze(params)", "dict(params)",
                                  "params.copy()"])
def test_jax803_a_target_made_from_the_parameters_keeps_their_buffers(make):
    # the first call would donate `params`, whose leaves `target` holds and passes in the same call
    assert default_findings(_TARGET.replace("{make}", make), "JAX803") == []


def test_jax803_a_target_made_afresh_is_not_an_alias():
    src = _TARGET.replace("{make}", '{"w": jnp.ones(3)}')
    assert [code for _, code in default_findings(src, "JAX803")] == ["JAX803"]
