"""What the engine decides before building a model: modules that cannot use JAX get none, and
modules too large to model are refused with one JAX000 finding (jaxlint/prefilter.py)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint import engine, prefilter
from jaxlint.engine import check_source
from jaxlint.flake8_plugin import JaxlintChecker
from jaxlint_rules import ALL_RULES
from ruletools import make_project as make
from ruletools import path_codes as codes

RULES = [r() for r in ALL_RULES]

MODEL = textwrap.dedent("""
    import jax

    @jax.jit
    def step(x):
        return x * 2
""")

LOOP = """
def run(x, steps):
    for i in range(steps):
        x = step(x)
        print(float(x))
    return x
"""


@pytest.fixture
def no_model(monkeypatch):
    """Fail the test if the engine builds a model."""
    def refuse(*a, **k):
        raise AssertionError("a model was built")

    monkeypatch.setattr(engine, "build_model", refuse)


# -- modules that never mention JAX

@pytest.mark.parametrize("src", [
    "def add(a, b):\n    return a + b\n",
    "import numpy as np\n\ndef run(xs):\n    for x in xs:\n        print(float(np.sum(x)))\n",
    "from .util import helper\n\nfor i in range(3):\n    helper(i)\n",  # no project: path unknown
])
def test_no_model_for_a_module_that_cannot_use_jax(no_model, src):
    assert check_source(src.encode(), "not/a/file.py", RULES).findings == []


def test_a_module_without_project_imports_gets_no_model_in_a_project(tmp_path, no_model):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": MODEL,
                    "pkg/util.py": "import os\n\ndef where():\n    return os.getcwd()\n"})
    assert codes(tmp_path / "pkg/util.py") == []


@pytest.mark.parametrize("head", [
    "from .model import step\n",
    "try:\n    from .model import step\nexcept ImportError:\n    step = None\n",
    "import sys\nif sys.version_info >= (3, 8):\n    from .model import step\n",
    "with open(__file__):\n    from .model import step\n",
])
def test_a_module_importing_jitted_code_of_the_project_is_still_checked(tmp_path, head):
    """Near misses of the filter: the text never says jax, but ``step`` is jitted in model.py."""
    make(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": MODEL, "pkg/train.py": head + LOOP})
    found = codes(tmp_path / "pkg/train.py")
    assert [c for _, c in found] == ["JAX201"]


def test_a_reexport_through_the_package_init_is_still_followed(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "from .model import step\n", "pkg/model.py": MODEL,
                    "train.py": "from pkg import step\n" + LOOP})
    assert [c for _, c in codes(tmp_path / "train.py")] == ["JAX201"]


def test_a_project_module_that_uses_no_jax_does_not_make_its_importer_checked(tmp_path, no_model):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/util.py": "def step(x):\n    return x\n",
                    "pkg/train.py": "from .util import step\n" + LOOP})
    assert codes(tmp_path / "pkg/train.py") == []


def test_nfkc_spellings_of_jax_count_as_jax():
    """Python reads ``ｊａｘ`` (full-width letters) as the identifier ``jax``."""
    assert prefilter.mentions_jax("import \uff4a\uff41\uff58\n")
    assert not prefilter.mentions_jax("import numpy\n")
    # non-ASCII text that names JAX plainly, or only once normalized, or not at all
    assert prefilter.mentions_jax('"""Adam \u2014 in JAX."""\nimport jax\n')
    assert prefilter.mentions_jax('"""\u2014"""\nimport \uff46\uff4c\uff41\uff58\n')
    assert not prefilter.mentions_jax('"""\u2014"""\nimport numpy\n')
    plain = "import jax\n" + MODEL.replace("import jax\n", "") + LOOP
    src = plain.replace("jax", "\uff4a\uff41\uff58")
    assert ast.dump(ast.parse(src)) == ast.dump(ast.parse(plain))
    got = [(f.line, f.code) for f in check_source(src.encode(), "t.py", RULES).findings]
    assert got == [(f.line, f.code) for f in check_source(plain.encode(), "t.py", RULES).findings]
    assert got  # the loop's sync is found through the full-width spelling


def test_may_use_jax():
    assert prefilter.may_use_jax("import jax\n", None)
    assert prefilter.may_use_jax("from flax import linen\n", None)
    assert prefilter.may_use_jax("import equinox as eqx\n", None)
    assert not prefilter.may_use_jax("from .model import step\n", None)  # no project to look in
    assert prefilter.may_use_jax("from .model import step\n", "pkg/train.py")
    assert not prefilter.may_use_jax("x = 1\n", "pkg/train.py")  # no import at all


# -- the size limit

def test_a_module_over_the_limit_is_not_analyzed_and_not_a_finding(monkeypatch):
    """Issue 40: a generated module over the limit was a JAX000 finding (exit 1, a failed CI run);
    the engine now says why it was not analyzed, and the front ends decide (tests/test_cli.py)."""
    big = "x = 1\n" * (prefilter.MAX_SOURCE_CHARS // 6 + 1)
    assert len(big) > prefilter.MAX_SOURCE_CHARS
    res = check_source(big.encode(), "big.py", RULES)
    assert res.findings == [] and res.internal_errors == []
    msg = res.not_analyzed
    assert msg.startswith("not analyzed: the module has ") and f"{prefilter.MAX_SOURCE_CHARS:,}" in msg
    assert check_source(b"x = 1\n", "small.py", RULES).not_analyzed is None


def test_the_limit_is_on_characters_and_the_boundary_is_checked(monkeypatch):
    monkeypatch.setattr(prefilter, "MAX_SOURCE_CHARS", 200)
    src = MODEL + LOOP
    padded = src + "#" * (200 - len(src) - 1) + "\n"
    assert len(padded) == 200
    res = check_source(padded.encode(), "t.py", RULES)
    assert [f.code for f in res.findings if f.opt_in is None] == ["JAX201"] and res.not_analyzed is None
    over = padded + "\n"
    res = check_source(over.encode(), "t.py", RULES)
    assert res.findings == [] and res.not_analyzed.startswith("not analyzed: the module has 201 characters")


def test_the_flake8_plugin_reports_an_oversize_module_only_when_asked(monkeypatch, tmp_path):
    """No finding for a module over the limit (an editor opening generated code stays quiet);
    `fail-on-oversize = true` in [tool.jaxlint] makes it the JAX000 line."""
    monkeypatch.setattr(prefilter, "MAX_SOURCE_CHARS", 50)
    monkeypatch.setattr(JaxlintChecker, "_configs", {})
    src = MODEL + LOOP
    lines = src.splitlines(keepends=True)
    path = tmp_path / "t.py"
    path.write_text(src)
    assert list(JaxlintChecker(ast.parse(src), str(path), lines).run()) == []
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint]\nfail-on-oversize = true\n")
    monkeypatch.setattr(JaxlintChecker, "_configs", {})
    out = list(JaxlintChecker(ast.parse(src), str(path), lines).run())
    assert len(out) == 1 and out[0][:2] == (1, 0) and out[0][2].startswith("JAX000 not analyzed: the module has ")
    monkeypatch.setattr(prefilter, "MAX_SOURCE_CHARS", 10_000)
    assert [m.split()[0] for _, _, m, _ in JaxlintChecker(ast.parse(src), str(path), lines).run()] == ["JAX201"]


def test_jax000_is_documented_with_the_limit():
    from jaxlint.source import ParseError

    assert f"{prefilter.MAX_SOURCE_CHARS:,} characters" in ParseError.summary


def test_statements_nested_too_deep_for_the_import_walk_are_left_to_the_model(no_model, monkeypatch):
    """A RecursionError in the module-level import walk is not a crash: the model decides (here
    it is not built, which the fixture turns into a failure, so the walk must have succeeded or
    fallen through; a lowered recursion limit forces the fall-through)."""
    import sys

    src = "import os\nif os:\n    pass\n" + "".join(f"elif os == {i}:\n    pass\n" for i in range(400))
    tree = ast.parse(src)
    monkeypatch.setattr(engine, "build_model", lambda *a, **k: (_ for _ in ()).throw(RecursionError()))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)
    try:
        out = engine.run_rules(tree, RULES, path="pkg/m.py", text=src)
    finally:
        sys.setrecursionlimit(limit)
    assert [(f.code, f.message) for f in out] == [("JAX000", "could not parse: too deeply nested to analyze")]


def test_the_flake8_plugin_gives_the_engine_the_text(tmp_path, no_model):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": MODEL,
                    "pkg/util.py": "import os\n\ndef where():\n    return os.getcwd()\n"})
    path = tmp_path / "pkg/util.py"
    src = path.read_text()
    assert list(JaxlintChecker(ast.parse(src), str(path), src.splitlines(True)).run()) == []
