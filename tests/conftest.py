"""Shared pytest options.

``--fuzz-examples N`` scales the fuzz tests in ``test_fuzz.py``: N generated programs per
property test and N mutated files per mutation test (CI runs the small defaults).
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--fuzz-examples", type=int, default=None, metavar="N",
        help="jaxlint fuzz tests: generated programs per property and mutated files per mutation test "
             "(default: a small number that keeps CI fast)")


@pytest.fixture
def fuzz_examples(request):
    """The ``--fuzz-examples`` value, or None when not given (each test picks its own default)."""
    n = request.config.getoption("--fuzz-examples")
    if n is not None and n < 1:
        raise pytest.UsageError("--fuzz-examples must be at least 1")
    return n
