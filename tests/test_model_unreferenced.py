"""The unreferenced-function fact (jaxlint/model/python/unreferenced.py) and JAX404's use of it: a
removed JAX name fails only where its line runs, and a top-level function nothing in the repository
refers to is not shown to run (fresh sets E and F: vendored helpers and unused losses)."""

from __future__ import annotations

import ast
import json

import pytest

from jaxlint.cli import main
from jaxlint.model import build_model
from jaxlint.model.python.records import runs_as_test
from jaxlint.model.python.unreferenced import enclosing, unreferenced
from jaxlint.project import ProjectResolver
from ruletools import make_project

LIB = """
from functools import partial
import jax

def used(tree):
    return jax.tree_map(abs, tree)

def helper(tree):
    return jax.tree_map(abs, tree)

def only_from_dead(tree):
    return helper(tree)

def ping(n):
    return pong(n - 1) if n else jax.tree_map(abs, n)

def pong(n):
    return ping(n)

def by_string(tree):
    return jax.tree_map(abs, tree)

@register
def decorated(tree):
    return jax.tree_map(abs, tree)

@jax.jit
def jitted(tree):
    return jax.tree_map(abs, tree)

@partial(jax.jit, static_argnums=0)
def jitted_partial(n, tree):
    return jax.tree_map(abs, tree)

def main():
    return jax.tree_map(abs, [1])

if __name__ == "__main__":
    main()

def test_tree():
    return jax.tree_map(abs, [1])

REGISTRY = {"by_string": None}

def mentioned_in_a_notebook(tree):
    return jax.tree_map(abs, tree)

def imported_never_used(tree):
    return jax.tree_map(abs, tree)

def imported_and_used(tree):
    return jax.tree_map(abs, tree)

def imported_by_the_package(tree):
    return jax.tree_map(abs, tree)

def wrapped_unused(tree):
    return jax.tree_map(abs, tree)

def wrapped_used(n, tree):  # (`fast_used([1])` below passes `tree`: `n` is the partial's)
    return jax.tree_map(abs, tree)

def wrapped_used_elsewhere(tree):
    return jax.tree_map(abs, tree)

fast_unused = jax.jit(wrapped_unused)  # fresh AD: a jitted alias nothing calls keeps nothing alive
fast_used = partial(jax.jit(wrapped_used), 1)
fast_elsewhere = jax.vmap(wrapped_used_elsewhere)
print(fast_used([1]))

class Thing:
    def method(self, tree):
        return jax.tree_map(abs, tree)

def prefetch(tree):
    return jax.tree_map(abs, tree)

DATASET = make_dataset().prefetch(8)  # a dataset's method of the same name: no reference

"""

USER = """
from pkg.lib import used, imported_never_used
from pkg.lib import imported_and_used as iau

print(used([1]), iau([2]), fast_elsewhere)
"""


def _model(root, rel):
    path = root / rel
    m = build_model(ast.parse(path.read_text()))
    m.path, m.project = str(path), ProjectResolver()
    return m


def _states(m) -> dict:
    return {f.name: unreferenced(m, f) is not None for f in m.functions if f.parent is None}


def _project(tmp_path, git=True):
    files = {"pkg/__init__.py": "from .lib import imported_by_the_package\n", "pkg/lib.py": LIB, "run.py": USER,
             "demo.ipynb": json.dumps({"cells": [{"cell_type": "code", "source": "mentioned_in_a_notebook([1])"}],
                                       "nbformat": 4, "nbformat_minor": 5, "metadata": {}})}
    make_project(tmp_path, files)
    if git:
        (tmp_path / ".git").mkdir()
    return tmp_path


def test_which_top_level_functions_nothing_refers_to(tmp_path):
    m = _model(_project(tmp_path), "pkg/lib.py")
    assert _states(m) == {
        "used": False,  # another file of the repository calls it
        "helper": True,  # only a function nothing calls calls it
        "only_from_dead": True,
        "ping": True, "pong": True,  # only each other
        "by_string": False,  # a string names it
        "decorated": False,  # a decorator may register it
        "jitted": True, "jitted_partial": True,  # a JAX transform registers nothing
        "main": False,  # the module's own code calls it
        "test_tree": True,  # named as a test, in a file pytest does not collect (lib.py): nothing runs it
        "mentioned_in_a_notebook": False,
        "imported_never_used": True,  # run.py imports it and never uses it: no reference
        "imported_and_used": False,  # imported under another name, and used
        "imported_by_the_package": False,  # a package's __init__ imports it: its API
        "method": False,  # a method: `unreferenced_method` answers (test_model_unreferenced_methods.py)
        "prefetch": True,  # only an attribute of another object spells it (fresh Y's cvit)
        "wrapped_unused": True,  # only `fast_unused = jax.jit(wrapped_unused)`, and nothing uses `fast_unused`
        "wrapped_used": False,  # its alias is called at module level
        "wrapped_used_elsewhere": False,  # another file spells its alias
    }
    f = next(f for f in m.functions if f.name == "helper")
    assert "nothing in the project refers to `helper`" in unreferenced(m, f)


@pytest.mark.parametrize("files, referenced", [
    ({"pkg/lib.py": "def test_tree():\n    return 1\n"}, False),  # pytest collects only test_*.py, *_test.py
    ({"pkg/test_lib.py": "def test_tree():\n    return 1\n"}, True),
    ({"pkg/lib_test.py": "def test_tree():\n    return 1\n"}, True),
    # the project names its own test files: which ones is not read, so any file may be collected
    ({"pkg/lib.py": "def test_tree():\n    return 1\n", "pytest.ini": "[pytest]\npython_files = *.py\n"}, True),
    ({"pkg/lib.py": "def test_tree():\n    return 1\n", "pyproject.toml": "[tool.pytest.ini_options]\n"}, False),
    # a TestCase's test methods run from any module (unittest.main()); a trainer's `test_step` does not
    ({"pkg/lib.py": "import unittest\nclass T(unittest.TestCase):\n    def test_tree(self):\n        return 1\n"}, True),
    ({"pkg/lib.py": "class Trainer:\n    def test_step(self):\n        return 1\n"}, False),
])
def test_functions_named_as_tests_run_as_tests_only_where_a_runner_collects_them(tmp_path, files, referenced):
    make_project(tmp_path, files)
    (tmp_path / ".git").mkdir()
    rel = next(p for p in files if p.endswith(".py"))
    m = _model(tmp_path, rel)
    f = next(f for f in m.functions if f.name.startswith("test"))
    assert runs_as_test(f, m.tests_collected) is referenced
    if f.cls is None:
        assert (unreferenced(m, f) is None) is referenced


def test_outside_a_repository_nothing_is_known(tmp_path):
    m = _model(_project(tmp_path, git=False), "pkg/lib.py")
    assert not any(_states(m).values())


def test_enclosing_is_the_top_level_def_around_a_node(tmp_path):
    m = _model(_project(tmp_path), "pkg/lib.py")
    calls = [n for n in ast.walk(m.tree) if isinstance(n, ast.Attribute) and n.attr == "tree_map"]
    assert [enclosing(m, c).name if enclosing(m, c) else None for c in calls][:2] == ["used", "helper"]
    method_call = calls[-1]
    assert enclosing(m, method_call) is None  # inside a class, not a top-level def


def test_jax404_in_a_function_nothing_refers_to_is_opt_in_and_says_why(tmp_path, capsys):
    root = _project(tmp_path)
    main(["check", "--no-cache", "--select", "JAX404", "--pedantic", "--format", "json", str(root / "pkg/lib.py")])
    found = {f["line"]: f for f in json.loads(capsys.readouterr().out)}
    src = LIB.split("\n")  # the line of the tree_map in ``def fn``'s body
    line_of = lambda fn: next(i + 2 for i, t in enumerate(src) if t.startswith(f"def {fn}("))
    assert found[line_of("used")].get("opt_in") is None
    assert found[line_of("helper")]["opt_in"].startswith("whether it runs is unknown: nothing in the project")
    assert any(e.startswith("runs (unknown): ") for e in found[line_of("helper")]["evidence"])
    assert found[line_of("main")].get("opt_in") is None and found[line_of("decorated")].get("opt_in") is None
    # outside a repository the same code keeps every finding
    (root / ".git").rmdir()
    main(["check", "--no-cache", "--select", "JAX404", "--format", "json", str(root / "pkg/lib.py")])
    assert len(json.loads(capsys.readouterr().out)) == len(found)


SCRIPT_HELPERS = """
import sys
import jax

step = jax.jit(lambda x: x * 2)

def run(x, n):
    for _ in range(n):
        x = step(x)
        print(f"{x}")

def never_called(x, n):
    for _ in range(n):
        x = step(x)
        print(f"{x}")

run(1.0, int(sys.argv[1]))
"""


def test_any_rule_in_a_py_function_nothing_refers_to_is_opt_in(tmp_path, capsys):
    """A sync in a loop of a script's helper that nothing in the repository calls: not shown to run, so
    opt-in (fresh set L: eight f-strings in unused Blender helpers); the same loop in a called helper
    stays default, and outside a repository nothing is known, so both stay."""
    make_project(tmp_path, {"scripts/mesh.py": SCRIPT_HELPERS})
    (tmp_path / ".git").mkdir()
    path = str(tmp_path / "scripts/mesh.py")
    main(["check", "--no-cache", "--select", "JAX201", "--pedantic", "--format", "json", path])
    found = {f["line"]: f.get("opt_in") for f in json.loads(capsys.readouterr().out)}
    assert set(found) == {10, 15}
    assert found[10] is None and found[15].startswith("nothing in the project refers to `never_called`")
    (tmp_path / ".git").rmdir()
    main(["check", "--no-cache", "--select", "JAX201", "--format", "json", path])
    assert sorted(f["line"] for f in json.loads(capsys.readouterr().out)) == [10, 15]


def test_another_modules_function_of_the_same_name_is_no_reference(tmp_path):
    """``jax.random.uniform`` or ``from numpy.random import uniform`` in another file does not refer to
    ``init.py``'s ``uniform`` (fresh set L: a vendored initializer module nothing calls); the owner's
    module imported and used (``init.uniform``), or an attribute of an unknown object, does."""
    from jaxlint.model.python.unreferenced import only_imported

    owner = str(tmp_path / "pkg/init.py")
    other = str(tmp_path / "run.py")

    def refers(src: str) -> bool:
        return not only_imported(other, src.encode(), "uniform", owner)

    assert not refers("import jax\nx = jax.random.uniform(k, (2,))\n")
    assert not refers("from numpy.random import uniform\nx = uniform(0, 1)\n")
    assert not refers("import numpy as np\nfrom jax import random\nx = np.random.uniform() + random.uniform(k)\n")
    assert refers("from pkg import init\nw = init.uniform(k, (2,))\n")
    assert refers("import pkg.init as I\nw = I.uniform(k, (2,))\n")
    assert refers("from pkg.init import uniform\nw = uniform(k, (2,))\n")
    assert refers("w = layers.uniform(k, (2,))\n")  # an object we cannot tell from the owner's module
    assert refers("fn = 'uniform'\n")
    # a notebook's cells are read the same way
    nb = json.dumps({"cells": [{"cell_type": "code", "source": "%matplotlib inline\nimport jax\njax.random.uniform(k)"}],
                     "nbformat": 4, "nbformat_minor": 5, "metadata": {}})
    from jaxlint.notebook import join, read_cells

    assert only_imported(str(tmp_path / "demo.ipynb"), join(read_cells(nb.encode())).text.encode(), "uniform", owner)


def test_a_module_of_the_owners_own_package_is_not_foreign(tmp_path):
    """``import sbgm`` then ``sbgm.train.train_from_config(...)`` reaches ``sbgm/_train.py``'s function
    through the package's re-export (``from . import _train as train``): a reference (fresh set N:
    a package's training entry point that an example calls)."""
    from jaxlint.model.python.unreferenced import only_imported

    root = make_project(tmp_path, {"sbgm/__init__.py": "from . import _train as train\n",
                                   "sbgm/_train.py": "def train_from_config(c):\n    return c\n"})
    owner = str(root / "sbgm/_train.py")
    other = str(root / "examples/run.py")
    assert not only_imported(other, b"import sbgm\nsbgm.train.train_from_config(cfg)\n", "train_from_config", owner)
    assert not only_imported(other, b"from sbgm import train\ntrain.train_from_config(cfg)\n", "train_from_config",
                             owner)
    # another library's module is still foreign, beside an import of the owner's package too
    assert only_imported(other, b"import other\nother.train.train_from_config(cfg)\n", "train_from_config", owner)
    assert only_imported(other, b"import sbgm, other\nother.train.train_from_config(cfg)\n", "train_from_config",
                         owner)


def test_a_file_reading_its_own_function_of_the_name_does_not_refer_to_the_owners(tmp_path):
    """Fresh AK's JaxFEM: ``local_matrices.py``'s ``main`` is called by nothing, while every other script
    of the repository defines and calls a ``main`` of its own: those calls are not references."""
    from jaxlint.model.python.unreferenced import only_imported

    owner = str(tmp_path / "fem/local_matrices.py")
    other = str(tmp_path / "solve.py")

    def refers(src: str) -> bool:
        return not only_imported(other, src.encode(), "main", owner)

    assert not refers("def main():\n    pass\n\nif __name__ == '__main__':\n    main()\n")
    assert not refers("class main:\n    pass\n\nx = main()\n")
    assert refers("from fem.local_matrices import main\n\ndef main():\n    pass\n\nmain()\n")  # which one: not told
    assert refers("from fem.local_matrices import *\n\ndef main():\n    pass\n")
    assert refers("import fem.local_matrices as lm\n\ndef main():\n    lm.main()\n")  # the owner's, by attribute
    assert refers("def run():\n    def main():\n        pass\n    main()\n\nmain()\n")  # nested: not the module's own
    assert refers("def main():\n    pass\n\nhandlers = {'main': None}\n")  # a string with the name
    # fresh G's shortcut-models: the name imported from the owner in one branch, from another module in the
    # next; a read may be either (the other modules' own defs of the name are no references)
    owner = str(tmp_path / "targets_shortcut.py")
    assert not only_imported(other, b"if a:\n    from baselines.naive import main\n    main()\nelse:\n"
                                    b"    from targets_shortcut import main\n    main()\n", "main", owner)
    assert only_imported(other, b"from baselines.naive import main\nmain()\n", "main", owner)


def test_the_text_pass_finds_the_owners_the_tree_walk_finds(tmp_path):
    """The engine hands the module's text: one pass over it finds the same holders of each candidate's
    name as a walk of the tree, comments, ``def`` names and parked string statements skipped."""
    from jaxlint.model.python.unreferenced import _State

    src = LIB + '''
# helper(x) in a comment is no reference
"""
only_from_dead(x) in code parked in a string
"""
'''
    root = _project(tmp_path)
    (root / "pkg/lib.py").write_text(src)
    walked = _model(root, "pkg/lib.py")
    texted = _model(root, "pkg/lib.py")
    texted.source_text = src
    names = lambda st: {k: sorted((getattr(h, "name", None) or "=".join(h.names) if h else "") for h in v)
                        for k, v in st.owners.items()}
    assert names(_State(texted)) == names(_State(walked))
    assert _states(texted) == _states(walked)


def test_a_module_nothing_imports_runs_none_of_its_functions(tmp_path):
    """Fresh W's and X's dead modules: nothing in the repository imports `orphan.py` and it runs nothing
    as a script, so its functions are not shown to run, even where another file spells their names (its
    `rng.sample`); a module reached by `from .starred import *`, a script, a package's `__init__`, and a
    folder of stand-alone files none of which is imported (jaxlint's own fixtures) stay."""
    body = "import jax\n\ndef sample(key):\n    return jax.random.normal(key)\n"
    make_project(tmp_path, {
        "pkg/__init__.py": "from .starred import *\n",
        "pkg/orphan.py": body + "KEY = jax.random.key(0)\n",
        "pkg/starred.py": body,
        "pkg/script.py": body + "\nif __name__ == '__main__':\n    print(1)\n",
        "pkg/user.py": "import random\n\nrng = random.Random(0)\nprint(rng.sample([1, 2], 1))\n",
        "examples/bad.py": body, "examples/good.py": body,  # stand-alone files, none imported
    })
    (tmp_path / ".git").mkdir()
    from jaxlint.model.python.unreferenced import _State

    unimported = {name: _State(_model(tmp_path, f"{name}.py")).unimported()
                  for name in ("pkg/orphan", "pkg/starred", "pkg/script", "pkg/__init__", "pkg/user", "examples/bad")}
    assert unimported == {"pkg/orphan": True, "pkg/starred": False, "pkg/script": False, "pkg/__init__": False,
                          "pkg/user": False, "examples/bad": False}
    assert _states(_model(tmp_path, "pkg/orphan.py"))["sample"] is True
    m = _model(tmp_path, "pkg/orphan.py")
    f = next(f for f in m.functions if f.name == "sample")
    assert "nothing in the repository imports `orphan.py`" in unreferenced(m, f)


def test_imports_continued_over_lines_reach_their_modules(tmp_path):
    """Fresh Q's minimax: ``from .ppo import \\`` with the name on the next line was read as no import,
    and ppo.py as a module nothing imports; a parenthesized list over lines too."""
    body = "import jax\n\nclass Agent:\n    def update(self, p):\n        return jax.tree_map(abs, p)\n"
    make_project(tmp_path, {
        "pkg/__init__.py": "from .ppo import \\\n\tAgent\nfrom . import (\n    dqn,\n)\n",
        "pkg/ppo.py": body, "pkg/dqn.py": body, "pkg/orphan.py": body,
        "main.py": "import pkg\n",
    })
    (tmp_path / ".git").mkdir()
    from jaxlint.model.python.unreferenced import _State, unimported_method

    unimported = {name: _State(_model(tmp_path, f"pkg/{name}.py")).unimported() for name in ("ppo", "dqn", "orphan")}
    assert unimported == {"ppo": False, "dqn": False, "orphan": True}
    # the methods of a class in a module nothing imports never run, whatever its bases (fresh AA)
    for name, expected in (("ppo", None), ("orphan", "nothing in the repository imports `orphan.py`")):
        m = _model(tmp_path, f"pkg/{name}.py")
        why = unimported_method(m, next(f for f in m.functions if f.name == "update"))
        assert why == expected if expected is None else why.startswith(expected)


CLASSES = """
import jax
from flax import nnx
from dataclasses import dataclass

KEY = jax.random.key(0)

class Unused(nnx.Module):
    def __call__(self, x):
        return x + jax.random.normal(KEY, x.shape)

class Used(nnx.Module):
    def __call__(self, x):
        return x

class Base:
    pass

class Derived(Base):
    pass

@register
class Registered(nnx.Module):
    pass

@dataclass
class Config:
    lr: float = 0.1

class Named:
    pass

class Meta(metaclass=Registry):
    pass

model = Used()
name = "Named"  # a string spelling it
"""


def _class_states(root, rel):
    from jaxlint.model.python.unreferenced import unreferenced_class

    m = _model(root, rel)
    m.source_text = (root / rel).read_text()
    return {c.name: unreferenced_class(m, c.lineno + 1) is not None for c in m.tree.body
            if isinstance(c, ast.ClassDef)}


def test_which_classes_nothing_instantiates(tmp_path):
    """Fresh set AR: draws in `__call__` of `nnx.Module` classes nothing makes (judged FALSE: dead code)."""
    make_project(tmp_path, {"pkg/models.py": CLASSES, "run.py": "from pkg.models import Config\ncfg = Config()\n"})
    (tmp_path / ".git").mkdir()
    assert _class_states(tmp_path, "pkg/models.py") == {
        "Unused": True, "Used": False, "Base": False, "Derived": True, "Registered": False, "Config": False,
        "Named": False, "Meta": False}
    # another file spelling the name keeps it (a user of the package may instantiate it); outside a
    # repository nothing is known
    (tmp_path / "other.py").write_text("from pkg.models import Unused\nnet = Unused()\n")
    assert _class_states(tmp_path, "pkg/models.py")["Unused"] is False
    (tmp_path / "other.py").unlink()
    (tmp_path / ".git").rmdir()
    assert not any(_class_states(tmp_path, "pkg/models.py").values())


def test_findings_in_a_class_nothing_instantiates_are_opt_in(tmp_path, capsys):
    make_project(tmp_path, {"pkg/models.py": CLASSES})
    (tmp_path / ".git").mkdir()
    main(["check", "--no-cache", "--select", "JAX502", "--pedantic", "--format", "json", str(tmp_path / "pkg/models.py")])
    found = json.loads(capsys.readouterr().out)
    assert [f["line"] for f in found] == [10] and found[0]["opt_in"].startswith(
        "nothing in the project refers to the class `Unused`")
