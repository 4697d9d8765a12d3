"""JAX304 on lists a loop fills until the data says stop (fresh set AV: a REINFORCE notebook hands each
episode's rewards, collected in ``while not done:``, to an ``nnx.jit`` function): the list's length is the
episode's, so the compiled function sees a new pytree (or, stacked, a new shape) per new length. The model
facts (``collected.ends_on_data``) and the rule, with a runtime check of the cost."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.engine import check_source
from jaxlint.model import build_model
from jaxlint.model.facts import collected
from jaxlint_rules.shape_churn import ShapeChurn
from ruletools import default_findings, expected, findings

_HEAD = """
import jax
import jax.numpy as jnp


@jax.jit
def returns_of(rewards):
    return jnp.cumsum(jnp.asarray(rewards)[::-1])[::-1]


@jax.jit
def loss(obs):
    return jnp.sum(obs ** 2)
"""

# --------------------------------------------------------------------------- the model: ends_on_data


def _while_loop(body: str):
    src = textwrap.dedent(_HEAD) + "\ndef run(env, policy, obs, n, t, dt):\n" + textwrap.indent(
        textwrap.dedent(body), "    ")
    tree = ast.parse(src)
    m = build_model(tree, src)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.While))
    call = next(n for n in ast.walk(node) if isinstance(n, ast.Call))
    ctx = m.context(call)
    loop = next(lp for lp in ctx.loops if lp.node is node)
    return m, loop, ctx.scope


@pytest.mark.parametrize("body, name", [
    ("done = False\nwhile not done:\n    obs, reward, done, info = env.step(policy(obs))\n", "done"),
    ("while True:\n    obs, reward, term, trunc = env.step(policy(obs))\n    if term or trunc:\n        break\n",
     "term"),
    ("finished = False\nwhile not finished:\n    obs = env.step(policy(obs))\n"
     "    finished = jnp.logical_or(obs[0] > 1, obs[1] > 1)\n", "finished"),
])
def test_ends_on_data_is_proven(body, name):
    m, loop, scope = _while_loop(body)
    assert collected.ends_on_data(m, loop, scope) == name


@pytest.mark.parametrize("body", [
    "while t < n:\n    obs = env.step(policy(obs))\n    t += dt\n",  # a counter
    "done = False\nwhile not done:\n    obs = env.step(policy(obs))\n    done = t >= n\n",  # no call decides it
    "while True:\n    obs = env.step(policy(obs))\n",  # no break: not ended by the data
    "while n > 0:\n    obs = env.step(policy(obs))\n    n = n - 1\n",
])
def test_ends_on_data_is_not_claimed(body):
    m, loop, scope = _while_loop(body)
    assert collected.ends_on_data(m, loop, scope) is None


# --------------------------------------------------------------------------- the rule

_POSITIVE = [
    _HEAD + """
def train(env, policy, episodes):
    for episode in range(episodes):
        rewards = []
        obs = env.reset()
        done = False
        while not done:
            obs, reward, done, info = env.step(policy(obs))
            rewards.append(reward)
        g = returns_of(rewards)  # expect: JAX304
""",
    _HEAD + """
def train(env, policy, episodes):
    for episode in range(episodes):
        observations = list()
        obs = env.reset()
        while True:
            observations.append(obs)
            obs, reward, terminated, truncated = env.step(policy(obs))
            if terminated or truncated:
                break
        value = loss(jnp.stack(observations))  # expect: JAX304
""",


    # a batch of episodes: each episode's list extends the batch's; the gradient of a jitted loss compiles per
    # shape (fresh set AV: `grad_func = nnx.value_and_grad(loss)` with `loss` under `nnx.jit`); one finding a call
    _HEAD + """
def train(env, policy, iterations):
    grad_fn = jax.value_and_grad(loss)
    for it in range(iterations):
        batch_obs, batch_act = [], []
        for _ in range(10):
            episode_obs, episode_act = [], []
            done = False
            obs = env.reset()
            while not done:
                act = policy(obs)
                episode_obs.append(obs)
                episode_act.append(act)
                obs, reward, done, info = env.step(act)
            batch_obs.extend(episode_obs)
            batch_act.extend(episode_act)
        value, grads = grad_fn(jnp.stack(batch_obs) + jnp.stack(batch_act))  # expect: JAX304
""",
]


@pytest.mark.parametrize("src", _POSITIVE)
def test_jax304_collected_list_reported(src):
    assert default_findings(src, "JAX304") == expected(src)


_NEAR_MISSES = [
    # a fixed number of steps per episode: one length, one compile
    _HEAD + """
def train(env, policy, episodes):
    for episode in range(episodes):
        rewards = []
        obs = env.reset()
        for t in range(200):
            obs, reward, done, info = env.step(policy(obs))
            rewards.append(reward)
        g = returns_of(rewards)
""",
    # a counter ends the loop, not the data
    _HEAD + """
def train(env, policy, episodes, horizon):
    for episode in range(episodes):
        rewards = []
        t = 0
        while t < horizon:
            obs, reward, done, info = env.step(policy(t))
            rewards.append(reward)
            t += 1
        g = returns_of(rewards)
""",
    # padded to a fixed length before the call
    _HEAD + """
def train(env, policy, episodes):
    for episode in range(episodes):
        rewards = []
        done = False
        while not done:
            obs, reward, done, info = env.step(policy(None))
            rewards.append(reward)
        g = returns_of(jnp.pad(jnp.asarray(rewards), (0, 500 - len(rewards))))
""",
    # the collected list goes to a plain function
    _HEAD + """
def plain_returns(rewards):
    return sum(rewards)

def train(env, policy, episodes):
    for episode in range(episodes):
        rewards = []
        done = False
        while not done:
            obs, reward, done, info = env.step(policy(None))
            rewards.append(reward)
        g = plain_returns(rewards)
""",
    # a list kept across episodes and trimmed to a window: not a new list per iteration
    _HEAD + """
def train(env, policy, episodes):
    for episode in range(episodes):
        rewards = []
        done = False
        while not done:
            obs, reward, done, info = env.step(policy(None))
            rewards.append(reward)
            if len(rewards) > 8:
                rewards.pop(0)
        g = returns_of(rewards)
""",
    # the gradient of a plain function: no compiled program to compile again (its eager ops are JAX701's)
    _HEAD + """
def plain_loss(obs):
    return jnp.sum(obs ** 2)

def train(env, policy, episodes):
    grad_fn = jax.grad(plain_loss)
    for episode in range(episodes):
        observations = []
        done = False
        obs = env.reset()
        while not done:
            observations.append(obs)
            obs, reward, done, info = env.step(policy(obs))
        g = grad_fn(jnp.stack(observations))
""",
]


@pytest.mark.parametrize("src", _NEAR_MISSES)
def test_jax304_collected_list_near_misses_not_reported(src):
    assert findings(src, "JAX304") == []


def test_jax304_collected_list_message_and_evidence():
    src = textwrap.dedent(_POSITIVE[0])
    result = check_source(src, "t.py", [ShapeChurn()])
    (f,) = [f for f in result.findings if f.code == "JAX304"]
    assert "is a list filled by a loop that `done` ends (a value that loop computes)" in f.message
    assert "once per distinct length of `rewards`" in f.message
    assert any("a new empty list in every iteration" in e and "stops when `done` says so" in e
               for e in f.evidence), f.evidence


def test_runtime_a_collected_list_compiles_once_per_length():
    """The cost, run: episodes of 3, 5, 3 and 7 steps give three compiles of the jitted function; padded
    to a fixed length, one."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    traces = []

    @jax.jit
    def returns_of(rewards):
        traces.append(len(rewards))
        return jnp.cumsum(jnp.stack(rewards))

    for length in (3, 5, 3, 7):
        rewards = []
        done, t = False, 0
        while not done:
            t += 1
            rewards.append(jnp.float32(t))
            done = t >= length
        returns_of(rewards)
    assert traces == [3, 5, 7]

    padded = []

    @jax.jit
    def padded_returns(rewards, n):
        padded.append(rewards.shape)
        return jnp.cumsum(jnp.where(jnp.arange(8) < n, rewards, 0.0))

    for length in (3, 5, 3, 7):
        r = jnp.zeros(8).at[:length].set(1.0)
        padded_returns(r, length)
    assert padded == [(8,)]
