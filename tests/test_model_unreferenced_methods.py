"""Methods nothing in the project refers to (jaxlint/model/python/unreferenced.py,
``unreferenced_method``): a method of a class no framework can call by protocol is reached only by
attribute or by a string naming it, from files that can hold an instance (they import its module,
directly or through other files). Fresh set O: six syncs in a ``train`` method whose only call was
commented out were reported by default."""

from __future__ import annotations

import ast
import json

from jaxlint.cli import main
from jaxlint.model import build_model
from jaxlint.model.python.unreferenced import _program_files, enclosing_method, unreferenced_method
from jaxlint.project import ProjectResolver
from ruletools import make_project

MODELS = """
import jax

class Base:
    def inherited(self, x):
        return x

class Model(Base):
    fit_alias = None

    def train(self, x):
        return self.only_from_train(x)

    def only_from_train(self, x):
        return self.ping(x)

    def ping(self, x):
        return self.pong(x)

    def pong(self, x):
        return self.ping(x)

    def called(self, x):
        return self.helper(x)

    def helper(self, x):
        return x

    def by_string(self, x):
        return x

    def aliased(self, x):
        return x
    again = aliased

    def injected(self, x):
        return x

    def from_unrelated_folder(self, x):
        return x

    @property
    def size(self):
        return 1

    @register
    def registered(self, x):
        return x

    @jax.jit
    def jitted(self, x):
        return x

    def __call__(self, x):
        return x

    def test_thing(self):
        return 1

class Layer(nn.Module):
    def forward(self, x):
        return x

class Subclassed:
    def hook(self, x):
        return x
"""

TRAIN = """
from models import Model

m = Model()
# m.train(1)
m.called(1)
print(getattr(m, "by_string")(1))
"""

AGENT = """
from models import Model

def make():
    return Model()
"""

RUN = """
from agent import make

make().inherited(2)
"""

OTHER = """
# another folder of the repository: its own objects have a `.from_unrelated_folder` and a `.size`
class Other:
    pass

Other().from_unrelated_folder(1)
print(Other().size)
"""

RUNNER = """
def run(agent):
    return agent.injected(1)
"""

MAIN = """
from models import Model
from runner import run

run(Model())
"""

SUB = """
from models import Subclassed

class Mine(Subclassed, Framework):
    pass
"""


def _project(tmp_path, git=True):
    make_project(tmp_path, {"algo/models.py": MODELS, "algo/train.py": TRAIN, "algo/agent.py": AGENT,
                            "algo/run.py": RUN, "elsewhere/other.py": OTHER, "algo/sub.py": SUB,
                            "algo/runner.py": RUNNER, "algo/main.py": MAIN})
    if git:
        (tmp_path / ".git").mkdir()
    return tmp_path


def _states(root, rel="algo/models.py") -> dict:
    path = root / rel
    text = path.read_text()
    m = build_model(ast.parse(text))
    m.path, m.project, m.source_text = str(path), ProjectResolver(), text
    return {f"{f.cls.node.name}.{f.name}": unreferenced_method(m, f) is not None
            for f in m.functions if f.cls is not None and f.parent is None}


def test_which_methods_nothing_refers_to(tmp_path):
    assert _states(_project(tmp_path)) == {
        "Base.inherited": False,  # run.py calls it on an instance it gets through agent.py
        "Model.train": True,  # its only call is commented out
        "Model.only_from_train": True,  # only a method nothing refers to calls it
        "Model.ping": True, "Model.pong": True,  # only each other (and a dead method)
        "Model.called": False,  # another file that imports the module calls it
        "Model.helper": False,  # the class's own method calls it by attribute
        "Model.by_string": False,  # a string names it (getattr)
        "Model.aliased": False,  # the class body binds it to another name
        "Model.injected": False,  # runner.py imports no models, but main.py imports both and hands it one
        "Model.from_unrelated_folder": True,  # only a file that cannot hold a Model spells it
        "Model.size": True,  # a property is read by attribute too; only the unrelated file reads `.size`
        "Model.registered": False,  # a decorator may register it
        "Model.jitted": True,  # a JAX transform registers nothing
        "Model.__call__": False,  # protocol: calling an instance
        "Model.test_thing": True,  # named as a test, of a class no runner collects (not Test*, no TestCase) in models.py
        "Layer.forward": False,  # a framework base may call it by protocol
        "Subclassed.hook": False,  # another file derives a class with a framework base from it
    }


def test_outside_a_repository_nothing_is_known(tmp_path):
    assert not any(_states(_project(tmp_path, git=False)).values())


def test_a_computed_attribute_read_in_the_module_leaves_every_method_unknown(tmp_path):
    root = _project(tmp_path)
    models = root / "algo/models.py"
    models.write_text(models.read_text() + "\ndef dispatch(obj, name):\n    return getattr(obj, name)()\n")
    assert not any(_states(root).values())


def test_program_files_follow_imports_through_other_files_and_not_by_file_name_alone(tmp_path):
    root = _project(tmp_path)
    make_project(root, {"elsewhere/models.py": "x = 1\n", "elsewhere/use.py": "import models\n",
                        "pkg/deep/models.py": "y = 1\n", "tools/user.py": "from pkg.deep import models\n"})
    files = ProjectResolver()._project_texts(str(root), every_kind=True)
    names = lambda owner: sorted(p[len(str(root)) + 1:] for p in _program_files(str(root / owner), files))
    # importers (train, agent, sub, main; run through agent) and what they import (runner)
    assert names("algo/models.py") == ["algo/agent.py", "algo/main.py", "algo/run.py", "algo/runner.py",
                                       "algo/sub.py", "algo/train.py"]
    assert names("elsewhere/models.py") == ["elsewhere/use.py"]  # not algo's files that import their own models
    assert names("pkg/deep/models.py") == ["tools/user.py"]


def test_enclosing_method_is_the_method_around_a_line(tmp_path):
    root = _project(tmp_path)
    m = build_model(ast.parse((root / "algo/models.py").read_text()))
    src = (root / "algo/models.py").read_text().split("\n")
    line = next(i + 1 for i, t in enumerate(src) if "def train" in t) + 1
    assert enclosing_method(m, line).name == "train"
    assert enclosing_method(m, 2) is None  # `import jax`: no method


DEAD_TRAIN = """
import jax

class Dynamics:
    def __init__(self):
        self.step = jax.jit(lambda s: s * 2)

    def train(self, state, n):
        for _ in range(n):
            state = self.step(state)
            print(f"{state}")
        return state

    def fit(self, state, n):
        for _ in range(n):
            state = self.step(state)
            print(f"{state}")
        return state
"""

CALLER = """
import sys
from dynamics import Dynamics

d = Dynamics()
# d.train(1.0, 10)
d.fit(1.0, int(sys.argv[1]))
"""


def test_a_sync_in_a_method_nothing_calls_is_opt_in_and_says_why(tmp_path, capsys):
    make_project(tmp_path, {"dynamics.py": DEAD_TRAIN, "main.py": CALLER})
    (tmp_path / ".git").mkdir()
    path = str(tmp_path / "dynamics.py")
    main(["check", "--no-cache", "--select", "JAX201", "--pedantic", "--format", "json", path])
    found = {f["line"]: f.get("opt_in") for f in json.loads(capsys.readouterr().out)}
    assert set(found) == {11, 17}
    assert found[17] is None
    assert found[11].startswith("nothing in the project refers to the method `Dynamics.train`")
    main(["check", "--no-cache", "--select", "JAX201", "--format", "json", path])
    assert [f["line"] for f in json.loads(capsys.readouterr().out)] == [17]
