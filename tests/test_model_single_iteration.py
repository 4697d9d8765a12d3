"""Model fact: work under ``if i == k:`` inside a loop whose ``i`` differs each iteration runs in one
iteration at most (jaxlint/model/facts/singleiteration.py)."""

from __future__ import annotations

import pytest

from jaxlint.model.facts import singleiteration
from test_model import build, call_to

SRC = """
def f(xs, key, steps, k, total):
    for n in [0, 1]:
        if n == 1:
            literal_distinct()
    for n in [1, 1]:
        if n == 1:
            literal_repeated()
    for i in range(steps):
        if i == 0:
            range_first()
        if i == total - 1:
            range_last()
        if 0 == i and k:
            range_first_and_flag()
        if i == 0 or k:
            range_first_or_flag()
        j = i // 2
        if i == j:
            other_side_varies()
        if i != 0:
            not_equal()
    for i, x in enumerate(xs):
        if i == 3:
            enumerate_count()
        if x == 3:
            enumerate_element()
    for x in xs:
        if x == 3:
            unknown_iterable()
    for i in reversed(range(steps)):
        if i == 0:
            reversed_range()
    while True:
        if k == 1:
            while_loop()
"""


@pytest.mark.parametrize("name, once", [
    ("literal_distinct", True),
    ("literal_repeated", False),        # [1, 1]: both iterations pass the test
    ("range_first", True),
    ("range_last", True),               # total - 1 is the same in every iteration
    ("range_first_and_flag", True),
    ("range_first_or_flag", False),     # the flag may hold in every iteration
    ("other_side_varies", False),       # j changes with i
    ("not_equal", False),
    ("enumerate_count", True),
    ("enumerate_element", False),       # the elements need not differ
    ("unknown_iterable", False),
    ("reversed_range", True),
    ("while_loop", False),
])
def test_single_iteration_guard(name, once):
    tree, m = build(SRC)
    ctx = m.context(call_to(tree, name))
    assert (singleiteration.single_iteration_guard(m, ctx, ctx.loops[-1]) is not None) is once
