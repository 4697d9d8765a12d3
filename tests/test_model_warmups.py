"""Model fact: a function called once and then again inside a wall-clock measurement (a warm-up,
then a timed call) — jaxlint/model/facts/warmups.py."""

from __future__ import annotations

import pytest

from jaxlint.model.facts import frequency, warmups
from test_model import build, func

SRC = """
import time
import timeit

def solve(x):
    return x

def once(x):
    return x

def looped(x):
    return x

def before_only(x):
    return x

def nested(x):
    return x

def pair(x):
    return x

solve(1)
start = time.time()
solve(2)
elapsed = time.time() - start

before_only(1)
t0 = time.perf_counter()
print("no call of it here")
print(time.perf_counter() - t0)
before_only(2)

t0 = time.perf_counter()
once(1)
print(time.perf_counter() - t0)

for i in range(3):
    looped(i)
t0 = time.perf_counter()
looped(5)
dt = time.perf_counter() - t0

def bench():
    nested(1)
    t = time.time()
    nested(2)
    return time.time() - t

pair(1)
t1 = time.time()
pair(2)
t2 = time.time()
"""


def _rerun(name, magics=()):
    tree, m = build(SRC)
    m.timed_magics = list(magics)
    f = func(m, name)
    return warmups.timed_rerun(m, f, frequency.callers(m, f)), tree


def test_a_warm_up_then_a_call_between_a_clock_read_and_an_elapsed_time():
    found, _ = _rerun("solve")
    assert found is not None and found.warm.lineno == 23 and found.call.lineno == 25
    assert found.how == "the clock pair on lines 24-26"


def test_inside_a_function_the_warm_up_and_the_timed_call_share_its_body():
    found, _ = _rerun("nested")
    assert found is not None and (found.warm.lineno, found.call.lineno) == (45, 47)


@pytest.mark.parametrize("name", [
    "once",         # timed, but the only call: the figure includes the compile, as it says
    "before_only",  # two calls, neither between the clock reads
    "looped",       # a call in a loop: the loop is that evidence, not this one
    "pair",         # two clock reads but no elapsed time taken from the first
])
def test_no_timed_rerun(name):
    found, _ = _rerun(name)
    assert found is None


def test_timing_magics_of_a_notebook():
    # ``%time`` over the second call: a rerun after the first; ``%timeit`` runs its line again and again
    found, _ = _rerun("once", magics=[("%time", 35, 35)])
    assert found is None  # the only call of `once`: nothing before it to warm
    found, _ = _rerun("once", magics=[("%timeit", 35, 35)])
    assert found is not None and found.warm is None and found.how == "%timeit"
    found, _ = _rerun("before_only", magics=[("%%time", 32, 32)])
    assert found is not None and found.warm.lineno == 28 and found.how == "%time"


def test_as_a_repetition_record():
    tree, m = build(SRC)
    f = func(m, "solve")
    rep = warmups.repetition(m, f, frequency.callers(m, f))
    assert rep.kind == "timed" and rep.warm.lineno == 23 and rep.call.lineno == 25 and rep.func is f
    assert not frequency.per_step(rep)
