"""Fresh AE's first look: a clock read through a local alias (``from timeit import default_timer as
timer``) is a clock (facts/clocks.py); an array made from host values is an upload, not work to time
(facts/timing.py, role "upload"); a print guarded by ``i <= 5 or i % 10 == 0 or <the loop's break
test>`` runs in a bounded number of iterations (facts/periodicity.py, ``_rare_clause``)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import periodicity
from ruletools import assert_marked, default_findings

_ALIASED = """
import jax
from timeit import default_timer as timer
from time import perf_counter as clock


def profile(step, carry, n):
    start = timer()
    carry, _ = jax.lax.scan(step, carry, None, n)
    end = timer()  # expect: JAX204
    print(n / (end - start))


def run(f, x):
    t0 = clock()
    y = jax.jit(f)(x)
    print(clock() - t0)  # expect: JAX204
"""


def test_a_clock_read_through_a_local_alias_times_the_dispatch():
    assert_marked(_ALIASED)


def test_an_alias_of_something_else_is_no_clock():
    src = _ALIASED.replace("from timeit import default_timer as timer", "from mylib import default_timer as timer")
    assert [line for line, _ in default_findings(src, "JAX204")] == [17]


_UPLOADED = """
import time
import jax
import jax.numpy as jnp


@jax.jit
def energy(x):
    return jnp.sum(x ** 2)


def scan(points):
    energies = []
    for p in points:
        energies.append(float(energy(p)))  # each run fetched: waited for
    return {result}


def main(points):
    t0 = time.time()
    out = scan(points)
    print(time.time() - t0){mark}
"""


def test_an_array_of_fetched_host_values_is_an_upload_not_timed_work():
    assert default_findings(_UPLOADED.format(result="jnp.array(energies)", mark=""), "JAX204") == []


def test_an_array_made_from_a_device_value_is_still_unwaited_work():
    # the energy is dispatched and handed to jnp.array unwaited: the array is made on the device
    src = _UPLOADED.replace("""    energies = []
    for p in points:
        energies.append(float(energy(p)))  # each run fetched: waited for
""", "")
    assert_marked(src.format(result="jnp.array(energy(points) * 2)", mark="  # expect: JAX204"))
    assert default_findings(src.format(result="jnp.array([1.0, 2.0])", mark=""), "JAX204") == []


_SCF = """
import jax.numpy as jnp

def scf(step, d, max_iter, tol, verbose):
    e_old = 0.0
    for iteration in range(1, max_iter + 1):
        d, e = step(d)
        delta = e - e_old
        if verbose and ({guard}):
            sink(e)
        if abs(delta) < tol and iteration > 1:
            break
        e_old = e
    return d
"""


@pytest.mark.parametrize("guard, periodic", [
    ("iteration <= 5 or iteration % 10 == 0 or abs(delta) < tol", True),  # first five, every tenth, the last
    ("iteration % 10 == 0 or abs(delta) < tol", True),
    ("iteration <= 5 or iteration % 10 == 0", True),
    ("iteration % 10 == 0 or abs(delta) < 2 * tol", False),  # not the break's test: may hold every iteration
    ("iteration <= 500 or iteration % 10 == 0", False),  # not a few first iterations
    ("abs(delta) < tol", False),  # no schedule at all
])
def test_clauses_that_hold_in_a_bounded_number_of_iterations(guard, periodic):
    src = textwrap.dedent(_SCF.format(guard=guard))
    tree = ast.parse(src)
    m = build_model(tree)
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "sink")
    assert periodicity.periodic_guard(m, m.context(call)) is periodic


def test_the_break_test_counts_only_with_first_iteration_conjuncts():
    src = textwrap.dedent(_SCF.format(guard="iteration % 10 == 0 or abs(delta) < tol").replace(
        "iteration > 1:", "verbose:"))
    tree = ast.parse(src)
    m = build_model(tree)
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "sink")
    assert not periodicity.periodic_guard(m, m.context(call))  # ``tol`` may hold on every iteration without a break


# fresh AH (a transformer's training script): the time since a start before the epoch loop is read
# in every batch iteration, and the epoch loop prints the test loss every epoch (a wait): only the
# first read could miss the batch of test data stacked before the loop
_CUMULATIVE = """
import time
import jax
import jax.numpy as jnp


@jax.jit
def step(params, batch):
    return params - 0.1 * batch, jnp.sum(batch)


def train(params, batches, test_batches, epochs):
    start = time.time()
    test_data = jnp.hstack(test_batches)
    for epoch in range(epochs):
        for batch in batches:
            params, loss = step(params, batch)
            total = time.time() - start{mark}
            log(total)
        {tail}
    return params
"""


def test_a_time_since_before_a_loop_that_waits_every_iteration_is_not_reported():
    src = _CUMULATIVE.format(mark="", tail='print(f"test {jnp.sum(params * test_data):.3f}")')
    assert default_findings(src, "JAX204") == []


def test_a_time_since_before_a_loop_that_never_waits_is_reported():
    src = _CUMULATIVE.format(mark="  # expect: JAX204", tail="params = params * 1.0")
    assert_marked(src)
