"""Imports of the project's own code that certainly fail (jaxlint/model/python/brokenimports.py), and
the engine making the findings below them opt-in: that code never runs (fresh sets L and M: a script
importing functions its package no longer defines, a test importing a file that is not valid Python)."""

from __future__ import annotations

import ast

import pytest

import jaxlint_rules
from jaxlint.engine import check_path
from jaxlint.model import build_model
from jaxlint.model.python.brokenimports import failing_import
from jaxlint.project import ProjectResolver
from ruletools import make_project

_BODY = """
import jax

def helper(tree):
    return jax.tree_map(abs, tree)

helper([1])
"""


def _failing(root, rel: str):
    path = str(root / rel)
    with open(path) as fh:
        tree = ast.parse(fh.read())
    return failing_import(build_model(tree, path=path, project=ProjectResolver()))


def _findings(root, rel: str) -> list:
    res = check_path(str(root / rel), [r() for r in jaxlint_rules.ALL_RULES])
    assert res.internal_errors == []
    return [(f.line, f.code, f.opt_in is not None) for f in res.findings]


def test_a_name_the_projects_module_does_not_define_fails(tmp_path):
    # ``pip install -e .`` of a project whose package is ``pkg/`` at its root: the script imports that file
    root = make_project(tmp_path, {"setup.py": "", "pkg/__init__.py": "", "pkg/losses.py": "def get_loss():\n    return 1\n",
                                   "scripts/run.py": "from pkg.losses import get_step_fn\n" + _BODY})
    line, why = _failing(root, "scripts/run.py")
    assert line == 1 and "defines no `get_step_fn`: ImportError" in why
    assert _findings(root, "scripts/run.py") == [(6, "JAX404", True)]
    (f,) = check_path(str(root / "scripts/run.py"), [r() for r in jaxlint_rules.ALL_RULES]).findings
    assert f.opt_in.startswith("`from pkg.losses import get_step_fn` on line 1 fails")


def test_a_module_that_is_not_valid_python_fails(tmp_path):
    # a module that may export a compiled callable is parsed by the resolver, which fails; one it only
    # scans (no compiled export) is not parsed again for this: not known
    broken = 'import jax\nstep = jax.jit(f)\ndef f():\n    """open\n'
    root = make_project(tmp_path, {"pkg/__init__.py": "", "pkg/training.py": broken, "pkg/plain.py": broken[29:],
                                   "pkg/training_test.py": "import jax\nfrom pkg import training\n" + _BODY,
                                   "pkg/plain_test.py": "import jax\nfrom pkg import plain\n" + _BODY})
    line, why = _failing(root, "pkg/training_test.py")
    assert line == 2 and "`training.py` is not valid Python" in why
    assert _failing(root, "pkg/plain_test.py") is None


@pytest.mark.parametrize("target, script", [
    # defined under a module-level ``if`` or ``try``
    ("try:\n    from fast import get_step_fn\nexcept ImportError:\n    def get_step_fn():\n        pass\n",
     "from pkg.losses import get_step_fn\n"),
    # a module that may bind any name
    ("from .base import *\n", "from pkg.losses import get_step_fn\n"),
    ("def __getattr__(name):\n    return name\n", "from pkg.losses import get_step_fn\n"),
    ("globals()['get_step_fn'] = print\n", "from pkg.losses import get_step_fn\n"),
    # the import itself is guarded
    ("def get_loss():\n    return 1\n", "try:\n    from pkg.losses import get_step_fn\nexcept ImportError:\n    pass\n"),
    # a library, not the project's code
    ("def get_loss():\n    return 1\n", "from optax import get_step_fn\n"),
    # a submodule of the package
    ("def get_loss():\n    return 1\n", "from pkg import losses\n"),
])
def test_imports_not_known_to_fail(tmp_path, target, script):
    root = make_project(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": "", "pkg/losses.py": target,
                                   "scripts/run.py": script + _BODY})
    assert _failing(root, "scripts/run.py") is None


def test_an_absolute_import_in_a_package_names_the_library_not_a_sibling(tmp_path):
    # ``from typing import Mapping`` inside a package with its own ``typing.py``; ``from brax import envs``
    # inside a package folder named ``brax``: Python 3 imports the standard library's and the installed one
    root = make_project(tmp_path, {"lib/__init__.py": "", "lib/common/__init__.py": "",
                                   "lib/common/typing.py": "Params = dict\n",
                                   "lib/common/common.py": "from typing import Any, Mapping\n" + _BODY,
                                   "lib/envs/__init__.py": "", "lib/envs/brax/__init__.py": "",
                                   "lib/envs/brax/brax_lib.py": "from brax import envs\n" + _BODY})
    assert _failing(root, "lib/common/common.py") is None
    assert _failing(root, "lib/envs/brax/brax_lib.py") is None


def test_findings_above_the_failing_import_stay(tmp_path):
    root = make_project(tmp_path, {"pkg/__init__.py": "", "pkg/losses.py": "x = 1\n",
                                   "run.py": "import jax\nprint(jax.tree_map(abs, [1]))\nfrom pkg.losses import y\n"
                                             "print(jax.tree_map(abs, [2]))\n"})
    assert _findings(root, "run.py") == [(2, "JAX404", False), (4, "JAX404", True)]


def test_a_module_unparsable_here_but_written_for_the_newer_python_its_project_requires(tmp_path):
    """Fresh set AR (a Pixtral inference script): `forward_common.py` uses Python 3.12's f-strings and its
    project requires Python >= 3.13; read on an older Python it does not parse, but the import is not known
    to fail where the project runs, so the findings below it stay default."""
    newer = 'import jax\nstep = jax.jit(f)\nx = f"{"nested"}"\n'
    files = {"pkg/__init__.py": "", "pkg/training.py": newer,
             "pkg/training_test.py": "import jax\nfrom pkg import training\n" + _BODY}
    root = make_project(tmp_path, {**files, "pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=3.99"\n'})
    assert _failing(root, "pkg/training_test.py") is None
    older = make_project(tmp_path / "older", {**files, "pyproject.toml": '[project]\nname = "p"\n'
                                                                           'requires-python = ">=3.8"\n'})
    assert "`training.py` is not valid Python" in _failing(older, "pkg/training_test.py")[1]
    # a plain error in a project requiring a newer Python fails on every Python: still a failing import
    plain = make_project(tmp_path / "plain", {**files, "pkg/training.py": "import jax\nstep = jax.jit(f)\nx = = 1\n",
                                              "pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=3.99"\n'})
    assert "`training.py` is not valid Python" in _failing(plain, "pkg/training_test.py")[1]
