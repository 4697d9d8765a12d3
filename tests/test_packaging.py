"""Packaging: the distribution's name (`flake8-jax`; the PyPI name `jaxlint` is another project)
in every install hint jaxlint prints or the README shows, and the license metadata."""

import ast
import os
import re
import shlex
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pyproject() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)


DIST = pyproject()["project"]["name"]


def install_targets(text: str) -> list:
    """The requirements of every ``pip install ...`` command in ``text`` (options dropped)."""
    out = []
    for m in re.finditer(r"pip install ([^\n`#&)]*)", text):
        try:
            words = shlex.split(m.group(1))
        except ValueError:
            words = m.group(1).split()
        out.extend(w for w in words if not w.startswith("-"))
    return out


def assert_uses_dist(targets: list, where: str) -> None:
    """Each target installs the distribution: by name (with extras), from a path (``.``,
    ``./dist/...whl``) or as a direct reference (``flake8-jax @ git+...``); ``build`` (PyPA's
    tool, to make the wheel) and ``jax`` (what `jaxlint trace` needs, on PyPI) are the other
    packages jaxlint tells a user to install."""
    allowed = re.compile(rf"{re.escape(DIST)}(\[[\w,]+\])?(\Z| @ )")
    for t in targets:
        assert t.startswith(".") or t in ("build", "jax") or allowed.match(t), \
            f"{where}: `pip install {t}` does not install {DIST}"


def test_the_distribution_is_flake8_jax():
    assert DIST == "flake8-jax"
    # the command, the flake8 plugin and the pytest plugin keep their names
    project = pyproject()["project"]
    assert project["scripts"] == {"jaxlint": "jaxlint.cli:main"}
    assert project["entry-points"]["flake8.extension"] == {"JAX": "jaxlint.flake8_plugin:JaxlintChecker"}


def test_every_install_hint_in_the_readme_uses_the_distribution_name():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    targets = install_targets(readme)
    assert_uses_dist(targets, "README.md")
    assert DIST in targets and f"{DIST}[trace]" in targets  # the PyPI commands are there at all
    assert "jaxlint[" not in readme  # an extra is named after the distribution


def _printed_strings(path: str):
    """The string literals of a module that are not docstrings (what the code can print)."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.value


def test_every_install_hint_the_code_prints_uses_the_distribution_name(monkeypatch):
    found = []
    for package in ("jaxlint", "jaxlint_rules"):
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    for s in _printed_strings(path):
                        targets = install_targets(s)
                        assert_uses_dist(targets, os.path.relpath(path, ROOT))
                        found.extend(targets)
    assert ".[trace]" in found and "jax" in found
    # and the message itself, as `jaxlint trace` and %%jaxlint_trace print it without jax
    from jaxlint.trace import missing_jax

    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` raises ImportError
    message = missing_jax()
    assert_uses_dist(install_targets(message), "missing_jax()")
    assert install_targets(message) == ["jax", ".[trace]"], message


def test_trace_without_jax_says_an_install_command_that_works(tmp_path):
    """Issue 40: `pip install 'flake8-jax[trace]'` fails while the distribution is not on an index;
    `jaxlint trace` without jax names what works today: jax from PyPI, or the extra from a clone."""
    import subprocess

    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    hide = ("import sys; sys.modules['jax'] = None; sys.modules['jaxlib'] = None; "
            "from jaxlint.cli import main; sys.exit(main(['trace', sys.argv[1]]))")
    proc = subprocess.run([sys.executable, "-c", hide, str(script)], capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr == ("jaxlint trace: needs jax (it is not installed); install it with `pip install jax` "
                           "(or, in a clone of jaxlint, `pip install '.[trace]'`)\n")
    assert f"{DIST}[" not in proc.stderr  # not published yet: that command finds no distribution


def test_license_is_an_spdx_expression_with_its_file():
    data = pyproject()
    project = data["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as fh:
        assert "Apache License" in fh.read(500)
    # SPDX strings and license-files need setuptools >= 77
    assert "setuptools>=77" in data["build-system"]["requires"]


def test_wheel_ships_py_typed_for_the_typed_api():
    data = pyproject()
    assert data["tool"]["setuptools"]["package-data"]["jaxlint"] == ["py.typed"]
    assert os.path.isfile(os.path.join(ROOT, "jaxlint", "py.typed"))
    assert "Typing :: Typed" in data["project"]["classifiers"]


def test_index_metadata_classifiers_name_the_versions_ci_tests():
    project = pyproject()["project"]
    classifiers = project["classifiers"]
    assert "Framework :: Flake8" in classifiers and "Topic :: Software Development :: Quality Assurance" in classifiers
    versions = sorted(c.rsplit(" ", 1)[1] for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    with open(os.path.join(ROOT, ".ci", "trace_oldest"), encoding="utf-8") as fh:
        oldest = re.search(r"python3\.(\d+)", fh.read())
    assert versions[0] == f"3.{oldest.group(1)}" and project["requires-python"] == ">=3.10"
    assert project["keywords"]


def test_readme_renders_on_an_index_without_relative_links():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    links = re.findall(r"\]\(([^)]+)\)", readme)
    assert all(re.match(r"https?://", link) for link in links), links


def test_the_sdist_ships_a_test_suite_that_collects(tmp_path):
    """The built sdist carries what its tests need: `pytest --co` in the unpacked sdist, with
    its own package on the path, collects every test without an error."""
    import subprocess
    import tarfile

    import pytest

    pytest.importorskip("build")
    proc = subprocess.run([sys.executable, "-m", "build", "--sdist", "-o", str(tmp_path), ROOT],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "Could not find a version" in proc.stdout + proc.stderr:
        pytest.skip("the isolated build environment cannot be installed (offline)")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "x")
    (root,) = (tmp_path / "x").iterdir()
    for needed in ("tests/conftest.py", "tests/ruletools.py", "fixtures", "docs/rules.md", "jaxlint/py.typed"):
        assert (root / needed).exists(), needed
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"], cwd=root,
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"^\d+ tests collected", proc.stdout, re.M) and " error" not in proc.stdout.lower(), \
        proc.stdout[-2000:]
