"""Shared pytest options.

``--fuzz-examples N`` scales the fuzz tests in ``test_fuzz.py``: N generated programs per
property test and N mutated files per mutation test (CI runs the small defaults).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_ENV = ("XDG_CACHE_HOME", "PIP_CACHE_DIR", "JAXLINT_CORPUS")
_saved: dict = {}


def pytest_configure(config):
    """`jaxlint check` outside any project (no pyproject.toml, setup.cfg or .git above the checked
    path: the tests' temporary folders) keeps its result cache in the user's cache folder
    (jaxlint/cache.py). For this run that is a temporary folder (subprocesses inherit it), so the
    suite leaves nothing in ~/.cache/jaxlint. What else reads $XDG_CACHE_HOME keeps the folder it
    had: pip's cache, and the real-library corpus of tests/test_corpus_snapshot.py (bench/corpus.py
    puts it in $XDG_CACHE_HOME/jaxlint-corpus unless $JAXLINT_CORPUS says otherwise)."""
    _saved.update({k: os.environ.get(k) for k in _ENV})
    real = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    os.environ.setdefault("PIP_CACHE_DIR", os.path.join(real, "pip"))
    os.environ.setdefault("JAXLINT_CORPUS", os.path.join(real, "jaxlint-corpus"))
    os.environ["XDG_CACHE_HOME"] = _saved["folder"] = tempfile.mkdtemp(prefix="jaxlint-tests-cache-")


def pytest_unconfigure(config):
    folder = _saved.pop("folder", None)
    if folder is None:
        return
    for k in _ENV:
        if _saved.get(k) is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = _saved[k]
    shutil.rmtree(folder, ignore_errors=True)


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
