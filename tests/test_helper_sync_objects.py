"""Helpers that copy what they are given to the host (model/policy/helpersyncs.py), fresh AH's first
look: a convergence check object whose ``__call__`` fetches ``jnp.abs(start - jnp.linalg.norm(coeffs))``
with ``.item()``, imported from another module of the project and tested by an ``if`` in every step of a
10,000-step loop. A helper that returns what it read counts where the caller branches on the result; a
host read of a JAX computation of a parameter waits for the device whatever the argument was."""

from __future__ import annotations

from ruletools import assert_marked, default_findings
from ruletools import make_project as make
from ruletools import path_default_codes

_HELPERS = """
import jax
import jax.numpy as jnp


@jax.jit
def update(params, batch):
    return params * 0.9, jnp.sum(params * batch)


def close_to(value, target):
    return jnp.abs(value - target).item() < 1e-3


def close_norm(coeffs, last):
    norm = jnp.linalg.norm(coeffs)
    return jnp.abs(norm - last).item() < 1e-3


def as_float(value):
    return float(value)


def every(step, value, n):
    if step % n == 0:
        return float(jnp.abs(value))
    return None


class Convergence:
    def __init__(self, delta):
        self.delta = delta
        self.start = None

    def __call__(self, coeffs):
        norm = jnp.linalg.norm(coeffs)
        if self.start is None:
            self.start = norm
            return False
        return jnp.abs(self.start - norm).item() < self.delta


def train(params, batches, fetch_outputs):
    converged = Convergence(1e-3)
    for step, batch in enumerate(batches):
        params, loss = update(params, batch)
        if close_to(loss, 0.0):  # expect: JAX201
            break
        if converged(fetch_outputs(params)):  # expect: JAX201
            break
        if close_norm(fetch_outputs(params), 1.0):  # expect: JAX201
            break
        value = as_float(loss)
        if as_float(fetch_outputs(params)) > 1.0:
            break
        every(step, loss, 100)
    return params, value
"""


def test_a_helper_whose_result_an_if_tests_and_a_callable_object_sync_every_step():
    # `as_float(loss)` assigned: a conversion whose result the caller needs (not reported); `as_float` of an
    # unknown value: `float` of a host value waits for nothing; `every(...)`: the read is under an `if` on
    # another parameter, a schedule kept inside the helper
    assert_marked(_HELPERS)


def test_the_same_helpers_outside_a_step_loop_are_not_reported():
    src = _HELPERS.replace("    for step, batch in enumerate(batches):\n", "    for step, batch in [(0, batches)]:\n")
    assert default_findings(src.replace("  # expect: JAX201", ""), "JAX201") == []


_CONVERGENCE = """
import jax.numpy as jnp


class Convergence:
    def __init__(self, patience=200, delta=1e-3):
        self.patience, self.delta = patience, delta
        self.start_norm = None

    def __call__(self, iteration, coeffs):
        coeff_norm = jnp.linalg.norm(coeffs)
        if self.start_norm is None:
            self.start_norm, self.start_iteration = coeff_norm, iteration
            return False
        elif jnp.abs(self.start_norm - coeff_norm).item() < self.delta:
            return (iteration - self.start_iteration) >= self.patience
        self.start_norm, self.start_iteration = coeff_norm, iteration
        return False
"""

_TRAINING = """
import jax

from .schedulers.convergence import Convergence


def train_full(update_fn, optimizer, state, max_epochs=10000):
    step = jax.jit(update_fn)
    converged = Convergence(patience=200, delta=1e-3)
    for epoch in range(max_epochs):
        (optimizer, state), metrics, output = step(optimizer, state)
        prediction, coeffs = output
        if converged(epoch, coeffs):
            break
    return optimizer, state
"""


def test_a_callable_object_of_another_module_of_the_project(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/schedulers/__init__.py": "",
                    "pkg/schedulers/convergence.py": _CONVERGENCE, "pkg/training.py": _TRAINING})
    assert path_default_codes(tmp_path / "pkg/training.py") == [(13, "JAX201")]


def test_a_callable_object_that_only_converts_a_plain_parameter_needs_a_jax_argument(tmp_path):
    # `float(coeffs)` of a Python number waits for nothing; of the jitted step's output it syncs
    other = _CONVERGENCE.replace("coeff_norm = jnp.linalg.norm(coeffs)", "coeff_norm = float(coeffs)").replace(
        "jnp.abs(self.start_norm - coeff_norm).item()", "abs(self.start_norm - coeff_norm)")
    make(tmp_path, {"pkg/__init__.py": "", "pkg/schedulers/__init__.py": "",
                    "pkg/schedulers/convergence.py": other,
                    "pkg/training.py": _TRAINING.replace("converged(epoch, coeffs)", "converged(epoch, len(prediction))")})
    assert path_default_codes(tmp_path / "pkg/training.py") == []
    make(tmp_path, {"pkg/training.py": _TRAINING})
    assert path_default_codes(tmp_path / "pkg/training.py") == [(13, "JAX201")]
