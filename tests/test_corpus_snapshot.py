"""Real-library regression snapshot: jaxlint's findings on the pinned corpus (flax, optax, equinox,
numpyro, chex, dm-haiku, jax) must match bench/expected_findings.json.

Runs only where the corpus has been fetched (`python bench/corpus.py`; CI does it before the tests)
at its default location ($JAXLINT_CORPUS, else ${XDG_CACHE_HOME:-~/.cache}/jaxlint-corpus), and
skips otherwise. After an intended change in what jaxlint finds: `python bench/snapshot.py --write`.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"jaxlint_bench_{name}", os.path.join(BENCH, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


snapshot = _load("snapshot")


def test_findings_on_real_libraries_match_snapshot():
    if sys.version_info < (3, 11):
        pytest.skip("the snapshot is made on Python >= 3.11: jax 0.10.2 in the corpus uses 3.11 syntax "
                    "that Python 3.10's parser rejects (2 files)")
    found = snapshot.corpus.locate()
    if found is None:
        pytest.skip(f"real-library corpus not fetched at {snapshot.corpus.default_dest()} "
                    "(run `python bench/corpus.py`, or set JAXLINT_CORPUS)")
    root = os.path.dirname(found[0])
    try:
        text = snapshot.check(root)
    except snapshot.SnapshotError as e:
        pytest.fail(f"could not compute the snapshot on {root}: {e}", pytrace=False)
    if text:
        pytest.fail(text, pytrace=False)
