"""JAX502 through methods: a key handed to ``self.method(key)`` whose body draws from that parameter is
consumed there, as for a function of the module (fresh X's JaxGCRL maze: the goal and the ball drawn
from one key, so the ball's index is the goal's modulo 2)."""

from __future__ import annotations

import pytest

from ruletools import default_findings, expected

_ENV = """
import jax
import jax.numpy as jnp


class Maze:
    def _random_target(self, rng):
        return jax.random.randint(rng, (1,), 0, 4)

    def _random_ball(self, rng):
        return jax.random.randint(rng, (1,), 0, 2)

    def _next_keys(self, rng):
        rng, sub = jax.random.split(rng)
        return rng, sub

    @staticmethod
    def _noise(shape, rng):
        return jax.random.normal(rng, shape)
"""


@pytest.mark.parametrize("src", [
    _ENV + """
    def reset(self, rng):
        rng, rng1 = jax.random.split(rng)
        q = jax.random.uniform(rng1, (3,))
        target = self._random_target(rng)
        ball = self._random_ball(rng)  # expect: JAX502
        return q, target, ball
""",
    _ENV + """
    def reset(self, rng):
        noise = jax.random.normal(rng, (3,))
        target = self._random_target(rng)  # expect: JAX502
        return noise, target
""",
])
def test_jax502_a_key_drawn_from_twice_through_methods(src):
    assert default_findings(src, "JAX502") == expected(src)


def test_jax502_a_staticmethod_binds_no_self():
    src = _ENV + """
    def reset(self, rng):
        q = self._noise((3,), rng)
        target = self._random_target(rng)  # expect: JAX502
        return q, target
"""
    assert default_findings(src, "JAX502") == expected(src)


@pytest.mark.parametrize("src", [
    # each draw gets its own subkey
    _ENV + """
    def reset(self, rng):
        k1, k2 = jax.random.split(rng)
        return self._random_target(k1), self._random_ball(k2)
""",
    # a method that only derives keys from its parameter does not draw from it
    _ENV + """
    def reset(self, rng):
        rng, sub = self._next_keys(rng)
        return self._random_target(sub)
""",
    # another object's method of the same name: not this class's
    _ENV + """
    def reset(self, rng, other):
        target = self._random_target(rng)
        return target, other._random_ball(rng)
""",
    # overridden in a subclass of the module: which body runs is not shown
    _ENV + """
    def reset(self, rng):
        target = self._random_target(rng)
        return target, self._random_ball(rng)


class FixedBall(Maze):
    def _random_ball(self, rng):
        return jnp.zeros((1,), jnp.int32)
""",
])
def test_jax502_method_near_misses(src):
    assert default_findings(src, "JAX502") == []

