"""Classes from fresh AG's and AF's first looks (every one a finding judged FALSE there):
a jitted bound method's instance binds its first parameter (JAX-CORL's ``jax.jit(algo.update_n_times)``
read one argument off, taking ``config`` for the key); a traced function's ``if not for_jit:`` that every
traced call switches off with a literal; the truth of a whole call result not shown to be one array;
state aliased with another name through a common source (a target network bound to the same parameters)."""

from __future__ import annotations

from ruletools import assert_marked, default_findings, opt_in_findings

_CLASSMETHOD = """
import jax


class Algo:
    @classmethod
    def update_n_times(self, state, data, rng, config):
        for _ in range(config.n):
            rng, sub = jax.random.split(rng)
            idx = jax.random.randint(sub, (4,), 0, 10)
            state = state + data[idx].sum()
        return state


def train(state, data, rng, config, steps):
    algo = Algo()
    update_fn = jax.jit(algo.update_n_times, static_argnums=(3,))
    for _ in range(steps):
        {split}
        state = update_fn(state, data, {key}, config){mark}
    return state
"""


def test_a_jitted_classmethod_binds_its_first_parameter():
    # the key is the third argument of the call, the fourth parameter: split every iteration, no reuse
    assert default_findings(_CLASSMETHOD.format(split="rng, sub = jax.random.split(rng)", key="sub", mark=""),
                            "JAX502") == []
    # the same key every iteration is still found, at the right parameter
    assert default_findings(_CLASSMETHOD.format(split="pass", key="rng", mark=""), "JAX502") == [(20, "JAX502")]


_SWITCHED = """
import jax
import jax.numpy as jnp


def fit(y, *, for_jit=False):
    slope = jnp.polyfit(jnp.arange(y.shape[0]), y, 1)[0]
    if not for_jit:
        print(float(slope)){mark}
    return slope


@jax.jit
def rate(y):
    return fit(y, for_jit={flag})
"""


def test_a_branch_every_traced_call_switches_off_is_not_traced():
    assert default_findings(_SWITCHED.format(flag="True", mark=""), "JAX203") == []
    assert_marked(_SWITCHED.format(flag="False", mark="  # expect: JAX203"))


_TRUTH = """
import jax
import jax.numpy as jnp


from mylib import evaluate_fn

val_step = jax.jit(evaluate_fn)  # what it returns (an array, a dict, a train state) is not shown


def evaluate(state, batches):
    for batch in batches:
        metrics = val_step(state, batch)
        if metrics:  # expect: JAX201 (opt-in)
            print("ok")
        done = jnp.all(batch < 0)
        if done:  # expect: JAX201
            break
"""


def test_the_truth_of_a_call_result_not_shown_to_be_an_array_is_opt_in():
    assert_marked(_TRUTH)
    ((_, _, why),) = opt_in_findings(_TRUTH, "JAX201")
    assert "`metrics` (the result of `val_step(...)`) is one array, or a pytree" in why


_ALIASED = """
import jax
import jax.numpy as jnp


@jax.jit
def update(params, target, batch):
    grads = jax.grad(lambda p: jnp.sum((p["w"] - target["w"]) * batch))(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


def train(batches):
    params = {"w": jnp.zeros(3)}
    model_params = params
    {target}
    for batch in batches:
        model_params = update(model_params, target_params, batch)
        target_params = jax.tree.map(lambda t: 0.99 * t, target_params)
    return model_params
"""


def test_state_aliased_through_a_common_source_is_not_proven_unread():
    aliased = _ALIASED.replace("{target}", "target_params = params")
    assert default_findings(aliased, "JAX803") == []
    copied = _ALIASED.replace("{target}", 'target_params = {"w": jnp.ones(3)}')
    assert [code for _, code in default_findings(copied, "JAX803")] == ["JAX803"]


_GUARDED = """
import jax
import jax.numpy as jnp


@jax.jit
def step(state, batch):
    loss = jnp.mean((state - batch) ** 2)
    return state - 0.1 * loss, loss


def train(state, batches):
    for batch in batches:
        state, loss = step(state, batch)
        if loss <= 1e-8 or jnp.isnan(loss):  # expect: JAX201
            print(f"abnormal loss {loss}")  # waited for by the test around it
            if loss <= 1e-8:
                loss = 1.0
            print(f"state {state}"){mark}
    return state
"""


def test_a_value_the_if_around_it_already_waited_for_is_no_new_sync():
    # fresh AG: an abnormal-loss branch's prints and re-tests of the loss its `if` already read
    assert_marked(_GUARDED.replace("{mark}", "  # expect: JAX201"))  # `state` was not read by the test
