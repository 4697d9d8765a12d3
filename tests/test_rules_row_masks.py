"""JAX304 on boolean row selections: an argument of a jitted function selected by a boolean mask the
loop recomputes (``obs = next_obs[~dones]`` in a model rollout) has as many rows as the mask has True
entries, so the function compiles once per count. The model facts (``rowmasks``) and the rule."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import rowmasks
from jaxlint.engine import check_source
from jaxlint_rules.shape_churn import ShapeChurn
from ruletools import default_findings, expected, findings

_HEAD = """
import functools
import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def policy(params, obs):
    return jnp.tanh(obs @ params)
"""

# --------------------------------------------------------------------------- the model: boolean_index


def _index_of(body: str):
    """(model, the index of the last subscript ``x[...]`` in ``body``, its scope)."""
    src = textwrap.dedent(_HEAD) + "\ndef run(x, obs, dones, env, ids, k, flag):\n" + textwrap.indent(
        textwrap.dedent(body), "    ")
    tree = ast.parse(src)
    m = build_model(tree, src)
    subs = [n for n in ast.walk(tree) if isinstance(n, ast.Subscript) and getattr(n.value, "id", "") == "x"]
    sub = max(subs, key=lambda n: (n.lineno, n.col_offset))
    return m, sub.slice, m.context(sub).scope


@pytest.mark.parametrize("body", [
    "return x[obs[:, 0] > 0.8]",  # a comparison with an array subscript (a tuple index with a slice)
    "keep = jnp.abs(obs) < 1.0\nreturn x[keep]",  # with a JAX value
    "keep = np.isfinite(obs).all(axis=-1)\nreturn x[keep]",  # an axis reduction of a mask
    "alive = np.abs(obs).max(axis=1) < 10\nreturn x[alive]",
    "return x[np.logical_not(obs)]",
    "return x[obs.astype(bool)]",
    "keep = ~dones\nif keep.sum() == 0:\n    return None\nreturn x[keep]",  # ~ of an array (its .sum())
    "keep = ~dones\nreturn x[keep & (dones[:, 0] == 0)]",  # & of two masks; dones is indexed: an array
    "return x[(obs[:, 0] > 0) | (obs[:, 1] > 0)]",
])
def test_boolean_index_is_proven(body):
    m, index, scope = _index_of(body)
    assert rowmasks.boolean_index(m, index, scope) is not None


@pytest.mark.parametrize("body", [
    "return x[ids]",  # an integer index array: a fixed number of rows
    "return x[~dones]",  # ~ of a value nothing shows is an array (a Python bool gives -2 or -1)
    "return x[k > 3]",  # two Python numbers compared: a Python bool
    "return x[flag is None]",
    "return x[env.alive()]",  # a method's result: dtype unknown
    "keep = ~dones\nreturn x[keep & (obs[:, 0] > 0)]",  # & with one unproven side may be integer
    "return x[np.nonzero(obs)[0]]",  # integer positions (JAX304's "sized" source, not a mask)
])
def test_boolean_index_is_not_claimed(body):
    m, index, scope = _index_of(body)
    assert rowmasks.boolean_index(m, index, scope) is None


# --------------------------------------------------------------------------- the rule


_POSITIVE = [
    _HEAD + """
class Agent:
    @functools.partial(jax.jit, static_argnames=("self",))
    def sample_action(self, params, observations):
        return jnp.tanh(observations @ params)

    def rollout(self, params, model, buffer, horizon):
        observations = buffer.sample(10000)
        for _ in range(horizon):
            actions = self.sample_action(params, observations)  # expect: JAX304
            next_observations, rewards, dones = model.step(observations, actions)
            nonterminal_mask = ~dones
            buffer.add(observations, actions, next_observations, rewards, dones)
            if nonterminal_mask.sum() == 0:
                break
            observations = next_observations[nonterminal_mask]
""",
    _HEAD + """
def evaluate(params, env, obs, steps):
    for t in range(steps):
        alive = np.abs(obs).max(axis=1) < 10
        act = policy(params, obs[alive])  # expect: JAX304
        obs = env.step(act)
""",
    _HEAD + """
def evaluate(params, env, obs, steps):
    while True:
        keep = obs[:, 0] > 0.8
        live = obs[keep]
        act = policy(params, live)  # expect: JAX304
        obs = env.step(act)
""",
]


@pytest.mark.parametrize("src", _POSITIVE)
def test_jax304_boolean_selection_reported(src):
    assert default_findings(src, "JAX304") == expected(src)


_NEAR_MISSES = [
    # the mask does not change in the loop: one count, one compile
    _HEAD + """
def evaluate(params, env, obs, steps, valid):
    keep = valid > 0
    for t in range(steps):
        act = policy(params, obs[keep])
        obs = env.step(act)
""",
    # an integer index array keeps its own number of rows
    _HEAD + """
def evaluate(params, env, obs, steps):
    for t in range(steps):
        idx = env.sample_indices(64)
        act = policy(params, obs[idx])
        obs = env.step(act)
""",
    # the selection is padded back to a fixed size before the next call
    _HEAD + """
def evaluate(params, env, obs, steps):
    for t in range(steps):
        act = policy(params, obs)
        next_obs, dones = env.step(act)
        keep = ~dones
        if keep.sum() == 0:
            break
        obs = next_obs[keep]
        obs = env.pad(obs)
""",
    # the masked rows go to a plain function, not a compiled one
    _HEAD + """
def log_alive(obs):
    return obs.mean()

def evaluate(params, env, obs, steps):
    for t in range(steps):
        alive = np.abs(obs).max(axis=1) < 10
        log_alive(obs[alive])
        obs = env.step(policy(params, obs))
""",
    # the mask's dtype is not shown (a Python bool from a method would index one row)
    _HEAD + """
def evaluate(params, env, obs, steps):
    for t in range(steps):
        act = policy(params, obs)
        obs, dones = env.step(act)
        obs = obs[~dones]
""",
]


@pytest.mark.parametrize("src", _NEAR_MISSES)
def test_jax304_boolean_selection_near_misses_not_reported(src):
    assert findings(src, "JAX304") == []


def test_jax304_boolean_selection_message_and_evidence():
    src = _POSITIVE[0]
    lines = textwrap.dedent(src).splitlines()
    rebind = 1 + next(i for i, ln in enumerate(lines) if "observations = next_observations[" in ln)
    result = check_source(textwrap.dedent(src), "t.py", [ShapeChurn()])
    (f,) = [f for f in result.findings if f.code == "JAX304"]
    assert f"rebound on line {rebind} to `next_observations[nonterminal_mask]`" in f.message
    assert "once per distinct count of selected rows" in f.message
    assert "pass the mask into the jitted function" in f.message
    # the evidence names why the mask is boolean: `~` of an array (``nonterminal_mask.sum()``)
    assert any("`~dones` negates an array" in e for e in f.evidence), f.evidence
