"""Cross-module inference: jitted functions imported from the project's own modules."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from jaxlint.locate import FileListing
from jaxlint.project import ProjectResolver, _may_export_compiled
from ruletools import make_project as make
from ruletools import path_codes as codes
from ruletools import path_default_codes

MODEL = textwrap.dedent("""
    from functools import partial
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return x * 2

    @partial(jax.jit, static_argnums=1)
    def power(x, n):
        return x ** n

    def plain(x):
        return x + 1

    fast_plain = jax.jit(plain)
""")

LOOP = """
def run(x, steps):
    for i in range(steps):
        x = {call}
        print(float(x))
    return x
"""


def test_relative_import_of_a_jitted_function(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": MODEL,
                    "pkg/train.py": "from .model import step\n" + LOOP.format(call="step(x)")})
    assert codes(tmp_path / "pkg/train.py") == [(6, "JAX201")]


def test_absolute_import_and_module_alias_and_static_args(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": MODEL,
                    "pkg/train.py": "import pkg.model as M\n" + LOOP.format(call="M.power(x, i)")})
    assert codes(tmp_path / "pkg/train.py") == [(5, "JAX103"), (6, "JAX201")]


def test_jit_of_a_function_assigned_at_module_level(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": MODEL,
                    "pkg/train.py": "from pkg.model import fast_plain\n" + LOOP.format(call="fast_plain(x)")})
    assert codes(tmp_path / "pkg/train.py") == [(6, "JAX201")]


def test_reexport_through_package_init(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "from .model import step\n", "pkg/model.py": MODEL,
                    "train.py": "from pkg import step\n" + LOOP.format(call="step(x)")})
    assert codes(tmp_path / "train.py") == [(6, "JAX201")]


def test_sibling_script_import_without_package(tmp_path):
    make(tmp_path, {"model.py": MODEL, "train.py": "from model import step\n" + LOOP.format(call="step(x)")})
    assert codes(tmp_path / "train.py") == [(6, "JAX201")]


def test_plain_imported_function_is_not_jax(tmp_path):
    # plain() is not jitted: its result is whatever it is given, so float() of it is not a transfer
    make(tmp_path, {"model.py": MODEL, "train.py": "from model import plain\n" + LOOP.format(call="plain(x)")})
    assert codes(tmp_path / "train.py") == []


def test_missing_module_and_import_cycle_are_harmless(tmp_path):
    make(tmp_path, {"a.py": "from b import f\nimport jax\ng = jax.jit(f)\n",
                    "b.py": "from a import g\nimport jax\nf = jax.jit(g)\n",
                    "c.py": "from nowhere import step\n" + LOOP.format(call="step(x)")})
    assert codes(tmp_path / "a.py") == []
    assert codes(tmp_path / "c.py") == []


def test_resolver_locates_files(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/sub/m.py": "",
                    "pkg/n.py": "", "top.py": ""})
    r = ProjectResolver()
    here = str(tmp_path / "pkg/sub/m.py")
    assert r.locate(here, "n", 2) == str(tmp_path / "pkg/n.py")
    assert r.locate(here, None, 1) == str(tmp_path / "pkg/sub/__init__.py")
    assert r.locate(here, "pkg.n", 0) == str(tmp_path / "pkg/n.py")
    assert r.locate(here, "top", 0) == str(tmp_path / "top.py")
    assert r.locate(here, "numpy", 0) is None


def test_file_listing_answers_as_isfile(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/mod.py": ""})
    (tmp_path / "pkg" / "dir.py").mkdir()  # a folder named like a module is not a file
    (tmp_path / "pkg" / "link.py").symlink_to(tmp_path / "pkg" / "mod.py")
    (tmp_path / "pkg" / "broken.py").symlink_to(tmp_path / "pkg" / "gone.py")
    listing = FileListing()
    for name in ("__init__.py", "mod.py", "dir.py", "link.py", "broken.py", "gone.py", "MOD.py"):
        path = str(tmp_path / "pkg" / name)
        expected = name in ("__init__.py", "mod.py", "link.py")  # names match exactly, as imports do
        assert listing.isfile(path) is expected, name
    assert listing.isfile(str(tmp_path / "nowhere" / "mod.py")) is False


def test_which_modules_may_export_a_compiled_callable():
    """A decorator or an assignment at module level that names a compiling transform, on any line
    (the first one too, and after CRLF line ends); not indented, not in a longer word."""
    def may(text, path="m.py"):
        return _may_export_compiled(text, path)

    assert may("@jax.jit\ndef f(x):\n    return x\n")  # the first line
    assert may("x = 1\n@partial(jax.jit, static_argnums=0)\ndef f(x, n): ...\n")
    assert may("import jax\r\nstep = jax.jit(_step)\r\n")
    assert may("a, b = vmap(f), grad(g)\n")
    assert may("import equinox as eqx\n@eqx.filter_jit\ndef f(x): ...\n")
    assert may("x = 1\nloss_fn = jax.value_and_grad(loss)  # at module level\n")
    assert not may("def f(x):\n    g = jax.jit(h)\n    return g(x)\n")  # in a function
    assert not may("class M:\n    @jax.jit\n    def f(self, x): ...\n")  # a method
    assert not may("jitted = make()\nregrad = 2\n")  # the words are parts of names
    assert not may("import jax\n# step = jax.jit(f)\n")  # a comment line starts with #
    assert not may("x = (\n    jax.jit(f))\n")  # on a continuation line: not seen (as before)
    assert may("", "pkg/__init__.py")  # a package's __init__ may re-export one


def test_a_new_resolver_sees_files_created_since_the_last(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/m.py": ""})
    here = str(tmp_path / "pkg/m.py")
    r = ProjectResolver()
    assert r.locate(here, "n", 1) is None
    make(tmp_path, {"pkg/n.py": ""})
    r.clear()  # a new run: the CLI clears the resolver before each
    assert r.locate(here, "n", 1) == str(tmp_path / "pkg/n.py")


BIG = MODEL + textwrap.dedent("""
    from .other import helper, fast_other

    def total(x):
        return jnp.sum(x)

    def host(x):
        return len(x)
""") + "\n".join(f"CONSTANT_{i} = {i}  # padding to make the module large" for i in range(1500)) + "\n"


def _summary_facts(s):
    exports = {n: (w.kind, w.spelling, sorted(w.static_argnums), sorted(w.static_argnames), w.inline,
                   tuple(w.params or ())) for n, w in s.exports.items()}
    return s.imports_jax, exports, s.reexports, s.array_results


def test_a_large_module_checked_is_summarized_from_its_tree_as_a_lookup_would(tmp_path, monkeypatch):
    from jaxlint import engine, project
    from jaxlint_rules import ALL_RULES

    assert len(BIG) > project.OFFER_CHARS
    make(tmp_path, {"pkg/__init__.py": "", "pkg/big.py": BIG, "pkg/other.py": MODEL.replace("step", "fast_other"),
                    "pkg/train.py": "from .big import step\n" + LOOP.format(call="step(x)")})
    big = str(tmp_path / "pkg/big.py")
    looked_up = ProjectResolver()
    expected = _summary_facts(looked_up.model(big))
    assert expected[1]["step"][0] == "jit" and expected[1]["power"][3] == [] and expected[1]["power"][2] == [1]
    assert expected[3] == frozenset({"total"})

    offered = ProjectResolver()
    monkeypatch.setattr(engine, "PROJECT", offered)
    engine.check_path(big, [r() for r in ALL_RULES])
    assert _summary_facts(offered._models[big]) == expected

    reads = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda f, *a, **k: reads.append(str(f)) or real_open(f, *a, **k))
    assert codes(tmp_path / "pkg/train.py") == [(6, "JAX201")]  # step found jitted through the offer
    assert big not in reads  # ... and big.py not read again


def test_flake8_resolves_imports_too(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": MODEL,
                    "pkg/train.py": "from .model import step\n" + LOOP.format(call="step(x)")})
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "JAX", str(tmp_path / "pkg/train.py")],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.stdout.count(" JAX201 ") == 1 and ":6:" in proc.stdout, proc.stdout + proc.stderr


METRICS = textwrap.dedent("""
    import jax.numpy as jnp
    import numpy as np

    def accuracy(logits, labels):
        return jnp.mean(jnp.argmax(logits, -1) == labels)

    def scaled(x):
        return x * 2

    def summary(x):
        return jnp.mean(x), jnp.max(x)

    def host_mean(x):
        return np.mean(x)

    def either(x, on_device):
        if on_device:
            return jnp.mean(x)
        return np.mean(x)
""")

EVAL_LOOP = """
def run(step, params, batches):
    for x, y in batches:
        params, logits = step(params, x)
        {use}
    return params
"""


def test_result_of_an_imported_function_that_returns_a_jax_array(tmp_path):
    uses = {
        "print(float(accuracy(logits, y)))": "from .metrics import accuracy",
        "acc = metrics.accuracy(logits, y).item()": "from . import metrics",
        "print(f'acc {accuracy(logits, y)}')": "from .metrics import accuracy",
        "if accuracy(logits, y) > 0.99: break": "from pkg.metrics import accuracy",
    }
    for i, (use, imp) in enumerate(uses.items()):
        make(tmp_path, {"pkg/__init__.py": "", "pkg/metrics.py": METRICS,
                        f"pkg/t{i}.py": imp + "\n" + EVAL_LOOP.format(use=use)})
        assert codes(tmp_path / f"pkg/t{i}.py") == [(6, "JAX201")], use


def test_result_of_an_imported_array_function_through_a_package_reexport(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "from .metrics import accuracy\n", "pkg/metrics.py": METRICS,
                    "train.py": "from pkg import accuracy\n" + EVAL_LOOP.format(use="print(float(accuracy(logits, y)))")})
    assert codes(tmp_path / "train.py") == [(6, "JAX201")]


def test_imported_functions_that_may_not_return_a_jax_array_are_not_jax(tmp_path):
    # scaled() returns what it is given, summary() a tuple (its truth is its length), host_mean() a
    # NumPy value, either() a JAX value on one path only
    uses = ["print(float(scaled(logits)))", "if summary(logits): break", "print(float(host_mean(y)))",
            "print(float(either(y, False)))", "print(float(metrics.scaled(y)))"]
    for i, use in enumerate(uses):
        make(tmp_path, {"pkg/__init__.py": "", "pkg/metrics.py": METRICS,
                        f"pkg/t{i}.py": "from . import metrics\nfrom .metrics import scaled, summary, host_mean, either\n"
                        + EVAL_LOOP.format(use=use)})
        assert codes(tmp_path / f"pkg/t{i}.py") == [], use


def test_imported_array_function_shadowed_by_a_local_name_is_not_followed(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/metrics.py": METRICS,
                    "pkg/train.py": "from .metrics import accuracy\n" + EVAL_LOOP.format(
                        use="accuracy = lambda a, b: 0.5\n        print(float(accuracy(logits, y)))")})
    assert codes(tmp_path / "pkg/train.py") == []


def test_array_candidates_are_top_level_defs_with_a_jax_return_line():
    from jaxlint.project import array_candidates

    text = textwrap.dedent("""
        import jax
        import jax.numpy as np
        from jax import lax

        def a(x):
            y = x + 1
            return np.sum(y)  # the module's name of jax.numpy

        @jax.jit
        def b(x):
            def inner(z):
                return lax.neg(z)
            return inner(x)

        class C:
            def m(self, x):
                return jax.nn.relu(x)

        async def d(x):
            return jax.numpy.abs(x)

        def e(x):
            return x  # jax. in a comment does not count

        def f(x):
            return float(x)
    """)
    assert array_candidates(text) == {"a", "b", "d"}
    assert array_candidates("def g(x):\n    return jnp.sum(x)\n") == set()  # no jax in the module
    assert array_candidates("import numpy as np\ndef g(x):\n    return np.sum(x)\n") == set()


# --------------------------------------------------------------------------- whole programs across modules (issue 26)

TRAINER = textwrap.dedent("""
    import jax
    import jax.numpy as jnp
    from jax import lax

    @jax.jit
    def step(x, b):
        return x - b, jnp.sum(b)

    def train_epoch(x, batches):
        for b in batches:
            x, loss = step(x, b)
        return x, loss

    @jax.jit
    def scanned_epoch(x, batches):
        return lax.scan(step, x, batches)

    def one_step(x, b):
        return step(x, b)
""")

EPOCHS = """
def run(x, data, epochs):
    for e in range(epochs):
        x, loss = {call}
        print(float(loss))
    return x
"""


def test_a_function_of_another_module_that_runs_a_whole_epoch(tmp_path):
    # once per epoch: each iteration runs a whole program (a scanned epoch); `step` in its place is
    # reported (the next test), so the program fact is what keeps these quiet
    for call in ("scanned_epoch(x, data)", "T.scanned_epoch(x, data)"):
        make(tmp_path, {"pkg/__init__.py": "", "pkg/trainer.py": TRAINER,
                        "pkg/main.py": "from .trainer import train_epoch, scanned_epoch, one_step\n"
                                       "from . import trainer as T\n" + EPOCHS.format(call=call)})
        assert codes(tmp_path / "pkg/main.py") == [], call


def test_a_function_of_another_module_that_runs_one_step(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/trainer.py": TRAINER,
                    "pkg/main.py": "from .trainer import step\n" + EPOCHS.format(call="step(x, data)")})
    assert codes(tmp_path / "pkg/main.py") == [(6, "JAX201")]


def test_the_result_cache_sees_a_change_to_the_module_that_runs_the_program(tmp_path, capsys):
    from jaxlint.cli import main

    make(tmp_path, {"pkg/__init__.py": "", "pkg/trainer.py": TRAINER,
                    "pkg/main.py": "from .trainer import scanned_epoch\n" + EPOCHS.format(call="scanned_epoch(x, data)")})
    args = ["check", "--cache-dir", str(tmp_path / "cache"), "-j1", str(tmp_path / "pkg")]
    assert main(args) == 0
    # scanned_epoch becomes one step: main.py's cached result depended on trainer.py's content
    changed = TRAINER.replace("return lax.scan(step, x, batches)", "return step(x, batches)")
    assert changed != TRAINER
    (tmp_path / "pkg/trainer.py").write_text(changed)
    assert main(args) == 1
    assert "main.py:6:15: JAX201" in capsys.readouterr().out


# --------------------------------------------------------------------------- callers in other modules (issue 26)

HELPERS = textwrap.dedent("""
    import jax
    import jax.numpy as jnp

    def q7(params, x):
        f = jax.jit(lambda p: jnp.tanh(p * x))
        return f(params)

    def z9(x):
        key = jax.random.PRNGKey(0)
        return x + jax.random.normal(key, x.shape)
""")


def test_a_function_called_in_a_loop_of_another_module_repeats_whatever_its_name(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/helpers.py": HELPERS,
                    "pkg/main.py": "from .helpers import q7\nfrom . import helpers as H\n"
                                   "def run(p, x, n):\n    for i in range(n):\n        p = q7(p, x)\n"
                                   "        x = H.z9(x)\n    return p\n"})
    assert codes(tmp_path / "pkg/helpers.py") == [(6, "JAX102"), (10, "JAX503")]


def test_a_function_called_once_elsewhere_or_nowhere_is_not_per_step(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/helpers.py": HELPERS,
                    "pkg/main.py": "from .helpers import q7, z9\ndef run(p, x):\n    return q7(p, z9(x))\n"})
    # no loop anywhere: z9's constant key is not per-step; q7 is still reported, on JAX102's own
    # evidence that a function doing nothing but one compiled call is called per batch
    assert codes(tmp_path / "pkg/helpers.py") == [(6, "JAX102")]


def test_the_evidence_names_the_loop_in_the_other_module(tmp_path, capsys):
    import json

    from jaxlint.cli import main

    make(tmp_path, {"pkg/__init__.py": "", "pkg/helpers.py": HELPERS,
                    "pkg/main.py": "from .helpers import q7\ndef run(p, x, n):\n    for i in range(n):\n"
                                   "        p = q7(p, x)\n    return p\n"})
    assert main(["check", "--no-cache", "--format", "json", str(tmp_path / "pkg/helpers.py")]) == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert row["code"] == "JAX102" and "(`q7` is called in a loop in `main.py:4`)" in row["message"]
    # the proof obligation first (facts with three values), its evidence the loop in the other module
    assert row["evidence"] == [f"repeats (proven): `q7` is called in a loop in another module of the project "
                               f"({tmp_path / 'pkg' / 'main.py'}:4)"]
    assert [(f["fact"], f["status"]) for f in row["facts"]] == [("repeats", "proven")]


EVAL_MODULE = textwrap.dedent("""
    import jax

    def evaluate(params, batches):
        @jax.jit
        def loss(p, b):
            return (p * b).sum()
        return [loss(params, b) for b in batches]
""")


def _notebook(*cells: str) -> str:
    import json

    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {"language_info": {"name": "python"}},
                       "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                  "source": textwrap.dedent(c).lstrip("\n")} for c in cells]})


def test_a_notebook_of_the_repository_that_calls_the_function_in_a_loop_makes_it_repeat(tmp_path, capsys):
    import json

    from jaxlint.cli import main

    # a folder of modules without __init__.py (a namespace package) that a notebook beside it drives:
    # the callers are looked for in the whole repository, notebooks' code cells included
    make(tmp_path, {".git/HEAD": "", "modular/evaluation.py": EVAL_MODULE,
                    "run.ipynb": _notebook("from modular.evaluation import evaluate\n",
                                           """
                                           for epoch in range(num_epochs):
                                               params = train(params)
                                               print(evaluate(params, batches))
                                           """)})
    assert main(["check", "--no-cache", "--format", "json", str(tmp_path / "modular/evaluation.py")]) == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["line"], row["code"]) == (5, "JAX102")
    assert "(`evaluate` is called in a loop in `run.ipynb, line 3 of cell 2`)" in row["message"]
    assert row["evidence"] == [f"repeats (proven): `evaluate` is called in a loop in another module of the project "
                               f"({tmp_path / 'run.ipynb'}, line 3 of cell 2)"]


def test_a_notebook_that_calls_the_function_once_or_no_repository_around_it_proves_nothing(tmp_path):
    once = _notebook("from modular.evaluation import evaluate\n", "print(evaluate(params, batches))\n")
    looped = _notebook("from modular.evaluation import evaluate\n",
                       "for epoch in range(n):\n    print(evaluate(params, batches))\n")
    make(tmp_path / "a", {".git/HEAD": "", "modular/evaluation.py": EVAL_MODULE, "run.ipynb": once})
    assert path_default_codes(tmp_path / "a/modular/evaluation.py") == []
    # no repository: the folder above the module's top package (here its own folder) is the project
    make(tmp_path / "b", {"modular/evaluation.py": EVAL_MODULE, "run.ipynb": looped})
    assert path_default_codes(tmp_path / "b/modular/evaluation.py") == []
    # a notebook that is not one (broken JSON) is no caller, and nothing fails
    make(tmp_path / "c", {".git/HEAD": "", "modular/evaluation.py": EVAL_MODULE, "run.ipynb": looped[:-9]})
    assert path_default_codes(tmp_path / "c/modular/evaluation.py") == []
    make(tmp_path / "d", {".git/HEAD": "", "modular/evaluation.py": EVAL_MODULE, "run.ipynb": looped})
    assert path_default_codes(tmp_path / "d/modular/evaluation.py") == [(5, "JAX102")]


EVALS = textwrap.dedent("""
    import functools
    import jax

    def _eval_step(p, x):
        return p * x

    def inference(p, xs):
        f = jax.pmap(functools.partial(_eval_step, p))
        return [f(x) for x in xs]

    def final_report(p, xs):
        return inference(p, xs)

    class Evaluator:
        def __init__(self, p):
            self.p = p

        def run(self, xs):
            g = jax.pmap(functools.partial(_eval_step, self.p))
            return [g(x) for x in xs]
""")


def test_a_function_also_called_in_its_own_module_asks_the_project_for_loops(tmp_path):
    # `inference` is called once in its own module (by a function nothing says how often runs)
    # and in the training loop of another: the project's call graph decides
    make(tmp_path, {"pkg/__init__.py": "", "pkg/evals.py": EVALS,
                    "pkg/train.py": "from . import evals\n"
                                    "def train(p, xs, n):\n    for step in range(n):\n"
                                    "        evals.inference(p, xs)\n    return p\n"})
    assert path_default_codes(tmp_path / "pkg/evals.py") == [(9, "JAX102")]


@pytest.mark.parametrize("train, expected", [
    ("from . import evals\ndef train(p, xs, n):\n    ev = evals.Evaluator(p)\n    for i in range(n):\n"
     "        ev.run(xs)\n", [(20, "JAX102")]),
    ("from .evals import Evaluator\ndef train(p, xs, n):\n    ev = Evaluator(p)\n    for i in range(n):\n"
     "        ev.run(xs)\n", [(20, "JAX102")]),
    # stored on self in one method and called in a loop of another
    ("from .evals import Evaluator\nclass T:\n    def __init__(self, p):\n        self.ev = Evaluator(p)\n"
     "    def fit(self, xs, n):\n        while n:\n            self.ev.run(xs)\n            n -= 1\n",
     [(20, "JAX102")]),
    # a method of the same name on an object of another class is not a call of it
    ("from .evals import Evaluator\nclass Other:\n    def run(self, xs): pass\n"
     "def train(p, xs, n):\n    ev = Other()\n    for i in range(n):\n        ev.run(xs)\n", []),
])
def test_a_method_called_on_an_instance_in_a_loop_of_another_module(tmp_path, train, expected):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/evals.py": EVALS, "pkg/train.py": train})
    assert path_default_codes(tmp_path / "pkg/evals.py") == expected


def test_an_absolute_import_of_a_namespace_package_finds_the_project_file(tmp_path):
    # no __init__.py anywhere (PEP 420): `from proj.sub import evals` seen from proj/sub/train.py
    make(tmp_path, {"proj/sub/evals.py": EVALS,
                    "proj/sub/train.py": "from proj.sub import evals\n"
                                         "def train(p, xs, n):\n    for step in range(n):\n"
                                         "        evals.inference(p, xs)\n    return p\n"})
    assert path_default_codes(tmp_path / "proj/sub/evals.py") == [(9, "JAX102")]


def test_a_factory_of_a_nested_nnx_step_is_summarized_with_what_it_updates_in_place(tmp_path):
    make(tmp_path, {"steps.py": """
        import jax
        from flax import nnx

        def create_train_step():
            @nnx.jit
            def train_step(model, optimizer, batch):
                grads = nnx.grad(lambda m: m(batch).mean())(model)
                optimizer.update(model, grads)
            return train_step

        def create_plain_step():
            @jax.jit
            def plain(params, batch):
                return params - batch.mean()
            return plain

        def not_a_factory():
            return 3
    """})
    summary = ProjectResolver().model(str(tmp_path / "steps.py"))
    train = summary.factory_callable("create_train_step")
    plain = summary.factory_callable("create_plain_step")
    assert (train.spelling, train.in_place) == ("nnx.jit", (0, 1))  # the model and the optimizer
    assert (plain.spelling, plain.in_place) == ("jax.jit", ())
    assert summary.factory_callable("not_a_factory") is None


def test_a_star_import_brings_in_a_compiled_function_of_the_project(tmp_path):
    """Fresh set AR (a LoRA trainer): `from forward_training import *` brings in `@jax.jit def loss_fn`;
    `jax.value_and_grad(loss_fn)(...)` in the loop runs the compiled passes (no eager-gradient finding), and
    the hand-written update after it is the eager work of the step."""
    root = make(tmp_path, {
        "forward_training.py": """
            import jax
            import jax.numpy as jnp

            @jax.jit
            def loss_fn(base, lora, x):
                return jnp.sum((x @ base + x @ lora) ** 2)

            def helper(x):
                return x
        """,
        "train.py": """
            import jax
            import jax.numpy as jnp
            from forward_training import *

            base, lora, x = jnp.ones((4, 4)), jnp.zeros((4, 4)), jnp.ones((2, 4))
            for i in range(1000):
                loss, grads = jax.value_and_grad(loss_fn, argnums=1)(base, lora, x)
                lora = jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, lora, grads)
        """,
    })
    assert path_default_codes(root / "train.py") == [(9, "JAX701")]
    # the same loop with the loss defined without jit: the gradient is eager, reported first (one per loop)
    plain = make(tmp_path / "plain", {
        "forward_training.py": (root / "forward_training.py").read_text().replace("@jax.jit\n", ""),
        "train.py": (root / "train.py").read_text()})
    assert path_default_codes(plain / "train.py") == [(8, "JAX701")]


def test_a_star_import_of_a_library_leaves_the_gradient_unknown(tmp_path):
    root = make(tmp_path, {"train.py": """
        import jax
        import jax.numpy as jnp
        from somelib.losses import *

        x = jnp.ones(3)
        for i in range(1000):
            g = jax.grad(loss_fn)(x)
            x = x - 0.1 * g
    """})
    assert (8, "JAX701") not in path_default_codes(root / "train.py")
    assert (8, "JAX701") in codes(root / "train.py")  # opt-in: whether `loss_fn` is compiled is unknown


_LOSSES = """
import jax
import jax.numpy as jnp
import equinox as eqx

@eqx.filter_value_and_grad
def compute_loss(model, x):
    return jnp.mean(model(x) ** 2)

def loss_and_grads(params, x):
    return jax.value_and_grad(lambda p: jnp.sum((p * x) ** 2))(params)

@jax.jit
def jitted_loss_and_grads(params, x):
    return jax.value_and_grad(lambda p: jnp.sum((p * x) ** 2))(params)
"""

_TRAIN = """
import click
import jax.numpy as jnp
import optax
import pkg.losses as losses
from pkg.losses import loss_and_grads, jitted_loss_and_grads

@click.group()
def cli():
    pass

@cli.command()
@click.option("--steps", default=1000)
def train(steps):
    model, params, x = None, jnp.ones(3), jnp.ones(3)
    for step in range(steps):
        loss, grads = losses.compute_loss(model, x)
        loss, grads = loss_and_grads(params, x)
        params = params - 0.1 * grads
    for step in range(steps):
        loss, grads = jitted_loss_and_grads(params, x)
        params = params - 0.1 * grads

if __name__ == "__main__":
    cli()
"""


def test_an_eager_gradient_of_another_modules_function_in_a_click_command(tmp_path):
    """Fresh set AT (a diffusion trainer): `image.compute_loss(...)`, decorated with `@eqx.filter_value_and_grad`
    in another module, called every step of a click command's loop: the gradient runs outside jit. The command
    is run by click, outside any trace. A function of the other module that is jitted is no finding."""
    root = make(tmp_path, {"pkg/__init__.py": "", "pkg/losses.py": _LOSSES, "train.py": _TRAIN})
    assert [c for c in path_default_codes(root / "train.py") if c[1] == "JAX701"] == [(17, "JAX701")]
    # the same loop without the click decorators: nothing calls `train` in the module, so eager is unknown
    plain = make(tmp_path / "plain", {"pkg/__init__.py": "", "pkg/losses.py": _LOSSES,
                                      "train.py": _TRAIN.replace("@cli.command()\n", "").replace(
                                          '@click.option("--steps", default=1000)\n', "")})
    assert [c for c in path_default_codes(plain / "train.py") if c[1] == "JAX701"] == []
    assert (15, "JAX701") in codes(plain / "train.py")  # opt-in (two decorator lines fewer)


def test_cli_commands_are_entry_points():
    import ast

    from jaxlint.model import build_model
    from jaxlint.model.facts.eagerwork import cli_command

    src = ("import click\nimport typer\n\napp = typer.Typer()\n\n@click.group()\ndef cli():\n    pass\n\n"
           "@cli.command()\ndef a():\n    pass\n\n@app.command()\ndef b():\n    pass\n\n@click.command()\ndef c():\n"
           "    pass\n\n@other.command()\ndef d():\n    pass\n\ndef e():\n    pass\n")
    m = build_model(ast.parse(src))
    found = {f.name: cli_command(m, f) for f in m.functions}
    assert found == {"cli": "`@click.group()`", "a": "`@cli.command()`", "b": "`@app.command()`",
                     "c": "`@click.command()`", "d": None, "e": None}


_SARSA_UTILS = """
import jax
from flax import nnx

def loss(model, obs, target):
    return (model(obs) - target) ** 2

def update(model, obs, target, optimizer):
    grads = nnx.grad(loss)(model, obs, target)
    optimizer.update(model, grads)

@nnx.jit
def jitted_update(model, obs, target, optimizer):
    grads = nnx.grad(loss)(model, obs, target)
    optimizer.update(model, grads)

@jax.jit
def compiled_loss(params, x):
    return (params * x).sum()

def update_of_compiled(params, x):
    return jax.grad(compiled_loss)(params, x)

def act(model, obs):
    return model(obs)
"""

_SARSA_TRAIN = """
import jax
from utils import update, jitted_update, update_of_compiled, act

def train(model, optimizer, env, episodes):
    for episode in range(episodes):
        obs = env.reset()
        for t in range(500):
            target = act(model, obs)
            update(model, obs, target, optimizer)
        for t in range(500):
            jitted_update(model, obs, target, optimizer)
        step = jax.jit(update)
        for t in range(500):
            step(model, obs, target, optimizer)
        for t in range(500):
            update_of_compiled(model, obs)

train(None, None, None, 1000)
"""


def test_a_plain_helper_of_another_module_that_computes_a_gradient_runs_eagerly_in_the_loop(tmp_path):
    """Fresh set AV (SARSA): `update(...)` of a sibling `utils.py`, a plain function whose body runs
    `nnx.grad(loss)(...)` and the optimizer's update, called every environment step: the whole step runs op
    by op. Near misses in the same loop: the helper compiled there (`@nnx.jit`), or wrapped where it is
    called (`jax.jit(update)`), a helper whose gradient is of a jitted function, and a helper with no
    gradient at all."""
    root = make(tmp_path, {"utils.py": _SARSA_UTILS, "train.py": _SARSA_TRAIN})
    got = path_default_codes(root / "train.py")
    assert [c for c in got if c[1] == "JAX701"] == [(10, "JAX701")]
    # without the gradient call the helper is not modelled, and nothing is reported
    plain = make(tmp_path / "nograd", {
        "utils.py": _SARSA_UTILS.replace("nnx.grad(loss)(model, obs, target)", "model"),
        "train.py": _SARSA_TRAIN})
    assert [c for c in path_default_codes(plain / "train.py") if c[1] == "JAX701"] == []


def test_a_file_that_calls_no_gradient_transform_is_not_modelled_for_a_plain_helper(tmp_path):
    root = make(tmp_path, {"helpers.py": """
        import jax
        def step(params, grads):
            return jax.tree_util.tree_map(lambda p, g: p - g, params, grads)  # no gradient transform called here
    """})
    resolver = ProjectResolver()
    assert resolver.eager_gradient_step(str(root / "helpers.py"), "step", plain=True) is None
    assert not resolver._full_models  # answered from the bytes: no full model built
