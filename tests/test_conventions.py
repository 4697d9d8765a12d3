"""The conventions module: every decision made from a user-chosen name, how its words match, and
that a project's [tool.jaxlint.conventions] changes them."""

from __future__ import annotations

import pytest

from jaxlint import conventions
from jaxlint.conventions import BY_KEY, CONVENTIONS, Conventions


@pytest.mark.parametrize("key, name, hit", [
    ("step-methods", "step", True), ("step-methods", "__call__", True), ("step-methods", "Sample", True),
    ("step-methods", "sample_batch", False),  # exact words only
    ("step-affixes", "train_step", True), ("step-affixes", "step_env", True), ("step-affixes", "_step", True),
    ("step-affixes", "stepper", False), ("step-affixes", "steps_fn", False),
    ("counter-names", "global_step", True), ("counter-names", "num_updates", True), ("counter-names", "epoch", True),
    ("counter-names", "step_size", False),
    ("setup-functions", "load_params", True), ("setup-functions", "_init", True), ("setup-functions", "train", True),
    ("setup-functions", "preload", False), ("setup-functions", "train_step", True),  # step names win in step_name()
    ("setup-exact", "run", True), ("setup-exact", "run_episode", False),
    ("check-functions", "checkpoint", True), ("check-functions", "verify_grads", True), ("check-functions", "recheck", False),
    ("demo-functions", "run_example", True), ("demo-functions", "my_benchmark_2", True),
    ("ref-names", "o_ref", True), ("ref-names", "x_refs", True), ("ref-names", "refine", False),
    ("dtype-params", "param_dtype", True), ("dtype-params", "dtype", True), ("dtype-params", "dtypes", False),
    ("logger-receivers", "self.logger", True), ("optimizer-receivers", "opt_state", True),
])
def test_how_a_convention_matches(key, name, hit):
    assert Conventions().matches(key, name) is hit


def test_every_convention_says_what_it_decides_and_why():
    assert len(BY_KEY) == len(CONVENTIONS)
    for c in CONVENTIONS:
        assert c.words and c.decides and c.rationale and c.measured, c.key
        assert c.how in (conventions.EXACT, conventions.LAST_PART, conventions.FIRST_PART, conventions.AFFIX,
                         conventions.SUBSTRING, conventions.SUFFIX, conventions.PREFIX, conventions.PATH)


def test_test_files_match_the_paths_test_runners_collect_and_a_project_can_change_them():
    c = conventions.Conventions()
    for path in ("pkg/tests/helpers.py", "test_model.py", "pkg/model_test.py", "tests.py", "conftest.py",
                 "pkg/test/a.py"):
        assert c.matches("test-files", path), path
    for path in ("pkg/testing/a.py", "pkg/latest.py", "contest.py", "pkg/model.py"):
        assert not c.matches("test-files", path), path
    mine = conventions.Conventions({"test-files": ["checks/**"]})
    assert mine.matches("test-files", "pkg/checks/a.py") and not mine.matches("test-files", "pkg/tests/a.py")


def test_a_notebook_under_tests_is_not_test_code():
    import ast

    from jaxlint.model import build_model

    tree = ast.parse("import jax\n")
    assert build_model(tree, path="pkg/tests/test_a.py").is_test_module
    assert not build_model(tree, path="pkg/tests/demo.ipynb").is_test_module


def test_configure_replaces_and_resets():
    try:
        conventions.configure({"step-methods": ["advance"]})
        assert conventions.active().matches("step-methods", "advance")
        assert not conventions.active().matches("step-methods", "step")
        assert conventions.active().changed() == {"step-methods": ["advance"]}
    finally:
        conventions.configure(None)
    assert conventions.active().matches("step-methods", "step")
    assert conventions.active().changed() == {}


def test_an_emptied_convention_matches_nothing():
    cur = Conventions({k: [] for k in BY_KEY})
    assert not any(cur.matches(k, w) for k in BY_KEY for w in BY_KEY[k].words)
