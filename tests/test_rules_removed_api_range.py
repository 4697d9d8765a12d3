"""JAX404 and the project's declared JAX range: a reference to a name removed in a release the
declaration does not allow is opt-in (the code runs while the pin holds), with evidence naming the
file and the pin; a range that reaches the removal, no declaration or one that cannot be read keep
today's default finding. The result cache follows the packaging files, and every front end agrees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from jaxlint import jaxversion
from jaxlint.cli import main

# ``scale`` is exported (``__all__``): something may call it, so only the JAX range decides
SRC = "import jax\n\n__all__ = [\"scale\"]\n\ndef scale(p):\n    return jax.tree_map(lambda x: 2 * x, p)\n"


@pytest.fixture(autouse=True)
def _no_jax_version():
    jaxversion.configure(None)
    yield
    jaxversion.configure(None)


def _project(tmp_path, files: dict, src: str = SRC):
    (tmp_path / ".git").mkdir(exist_ok=True)  # the search for packaging files stops here
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "train.py").write_text(src)
    return tmp_path / "pkg" / "train.py"


def _check(capsys, path, *args) -> list:
    main(["check", "--format", "json", "--select", "JAX404", *args, str(path)])
    return json.loads(capsys.readouterr().out)


POETRY_OLD = '[tool.poetry.dependencies]\njax = "^0.4.8"\n'


def test_a_pin_older_than_the_removal_makes_the_finding_opt_in(tmp_path, capsys):
    path = _project(tmp_path, {"pyproject.toml": POETRY_OLD})
    assert _check(capsys, path, "--no-cache") == []
    [f] = _check(capsys, path, "--no-cache", "--pedantic")
    pin = f"{tmp_path.name}/pyproject.toml requires jax ^0.4.8: the removal in 0.6.0 does not reach it"
    assert f["opt_in"].startswith(pin)
    assert any(e.startswith("reaches (disproven): " + pin) for e in f["evidence"])
    # the oldest declared version decides the fix, as jax-version would: jax.tree.map is new in 0.4.25
    assert "the project supports JAX 0.4.8" in f["message"] and not f["fixable"]


@pytest.mark.parametrize("files", [
    {"pyproject.toml": '[project]\ndependencies = ["jax>=0.4.30"]\n'},
    {"pyproject.toml": '[project]\ndependencies = ["jax<0.6.1"]\n'},  # near miss: 0.6.0 is allowed
    {"requirements.txt": "jax==0.6.0\n"},
    {"requirements.txt": "jax==0.4.8\n", "requirements-dev.txt": "jax\n"},  # one way installs current JAX
    {"setup.py": "from setuptools import setup\nsetup(install_requires=['jax>=0.4.8'])\n"},
    {"pyproject.toml": '[project]\nname = "x"\n'},  # declares no JAX version
    {"setup.py": "from setuptools import setup\nsetup(install_requires=deps())\n",
     "requirements.txt": "jax==0.4.8\n"},  # cannot be read: today's finding
    {},  # no packaging file
])
def test_a_range_that_reaches_the_removal_or_none_keeps_the_default_finding(tmp_path, capsys, files):
    path = _project(tmp_path, files)
    [f] = _check(capsys, path, "--no-cache")
    assert f.get("opt_in") is None and any(e.startswith("reaches (proven): ") for e in f["evidence"])


@pytest.mark.parametrize("files", [
    {"pyproject.toml": '[project]\ndependencies = ["jax<0.6"]\n'},  # near miss the other way
    {"setup.cfg": "[options]\ninstall_requires =\n    jax~=0.5.0\n"},
    {"requirements.txt": "jax\njaxlib==0.4.7\n"},  # jaxlib stands in for an unconstrained jax
    {"environment.yml": "dependencies:\n  - jax=0.5.3\n"},
    # set I's manyfold: setup.py says nothing of JAX, its docker environments pin it
    {"setup.py": "from setuptools import setup\nsetup(name='p')\n",
     "docker/environment_tpu.yaml": "dependencies:\n  - pip:\n      - jax[tpu]==0.3.14\n"},
    {"pyproject.toml": '[project]\nname = "x"\n[project.optional-dependencies]\ngpu = ["jax[cuda12]==0.4.23"]\n'},
])
def test_other_old_pins_are_opt_in_too(tmp_path, capsys, files):
    path = _project(tmp_path, files)
    assert _check(capsys, path, "--no-cache") == []
    assert len(_check(capsys, path, "--no-cache", "--pedantic")) == 1


def test_an_old_python_caps_jax_so_a_later_removal_is_opt_in(tmp_path, capsys):
    """X's jax-influence: environment.yml pins python=3.7 and nothing pins JAX; the newest JAX on 3.7
    is 0.3.25, so `jax.tree_map` (removed in 0.6.0) works there; on Python 3.10, JAX 0.6.0 and later
    install (up to 0.6.2): the finding stays."""
    path = _project(tmp_path, {"environment.yml": "dependencies:\n  - python=3.7\n  - pip:\n    - jax\n"})
    assert _check(capsys, path, "--no-cache") == []
    [f] = _check(capsys, path, "--no-cache", "--pedantic")
    assert "JAX 0.3.25 is the newest release for it: the removal in 0.6.0 does not reach it" in f["opt_in"]
    path = _project(tmp_path, {"environment.yml": "dependencies:\n  - python=3.10\n  - pip:\n    - jax\n"})
    [f] = _check(capsys, path, "--no-cache")
    assert f.get("opt_in") is None


def test_the_configured_jax_version_is_the_users_word(tmp_path, capsys):
    path = _project(tmp_path, {"pyproject.toml": '[tool.jaxlint]\njax-version = "0.6.0"\n' + POETRY_OLD})
    [f] = _check(capsys, path, "--no-cache")
    assert "reaches (proven): jax-version 0.6.0" in " ".join(f["evidence"])
    # an oldest version before the removal says nothing of the newest: the pin still decides
    assert _check(capsys, path, "--no-cache", "--jax-version", "0.4.30") == []


def test_a_removal_inside_the_declared_range_is_reported(tmp_path, capsys):
    src = "import jax\nfrom jax.experimental import maps\n"  # removed in 0.4.31
    path = _project(tmp_path, {"pyproject.toml": POETRY_OLD}, src)
    assert [f["line"] for f in _check(capsys, path, "--no-cache")] == [2]


def _touch_later(path, text):
    path.write_text(text)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def test_the_result_cache_follows_the_packaging_files(tmp_path, capsys):
    path = _project(tmp_path, {"pyproject.toml": POETRY_OLD})
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert _check(capsys, path, *cache) == []
    _touch_later(tmp_path / "pyproject.toml", '[tool.poetry.dependencies]\njax = ">=0.4.8"\n')  # the pin lifted
    assert len(_check(capsys, path, *cache)) == 1
    assert len(_check(capsys, path, *cache)) == 1  # served from the cache now
    (tmp_path / "pkg" / "requirements.txt").write_text("jax==0.4.8\n")  # a nearer declaration
    assert _check(capsys, path, *cache) == []
    (tmp_path / "pkg" / "requirements.txt").unlink()
    assert len(_check(capsys, path, *cache)) == 1


def test_a_file_without_a_removed_name_reads_no_packaging_file(tmp_path):
    from jaxlint.engine import PROJECT, check_path
    from jaxlint.registry import ALL_RULES

    path = _project(tmp_path, {"pyproject.toml": POETRY_OLD}, "import jax\n\ndef f(p):\n    return jax.tree.map(abs, p)\n")
    PROJECT.clear()
    assert not [d for d in check_path(str(path), [r() for r in ALL_RULES]).deps if d[0] == "d"]
    path.write_text(SRC)
    deps = [d for d in check_path(str(path), [r() for r in ALL_RULES]).deps if d[0] == "d"]
    assert [d[2] for d in deps] == [str(tmp_path)]


def test_every_front_end_agrees(tmp_path, capsys):
    path = _project(tmp_path, {"pyproject.toml": POETRY_OLD})
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def flake8(*args):
        return subprocess.run([sys.executable, "-m", "flake8", "--select", "JAX404", *args, "pkg/train.py"],
                              capture_output=True, text=True, cwd=tmp_path, env=env).stdout

    assert flake8() == "" and _check(capsys, path, "--no-cache") == []
    pedantic = flake8("--jaxlint-pedantic")
    [f] = _check(capsys, path, "--no-cache", "--pedantic")
    assert pedantic == f"pkg/train.py:{f['line']}:{f['col']}: JAX404 {f['message']}\n"
    time.sleep(0.01)
    (tmp_path / "pyproject.toml").write_text('[tool.poetry.dependencies]\njax = "^0.6"\n')
    assert "JAX404" in flake8() and len(_check(capsys, path, "--no-cache")) == 1
