"""The result cache of `jaxlint check`: each invalidation path, and a damaged cache never
yields stale findings or a crash."""

import json
import os
import time

import pytest

import jaxlint.cache as cache_mod
import jaxlint.cli as cli

TRAIN = """\
import jax

from .model import step


def fit(params, batches):
    for x in batches:
        params, loss = step(params, x)
        print(float(loss))
    return params
"""

MODEL_JIT = """\
import jax
import jax.numpy as jnp


@jax.jit
def step(params, x):
    return params, jnp.sum(x)
"""

MODEL_PLAIN = MODEL_JIT.replace("@jax.jit\n", "")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(TRAIN)
    (pkg / "model.py").write_text(MODEL_JIT)
    return tmp_path


@pytest.fixture
def checked(monkeypatch):
    """Files the engine really checked in the last run (the rest came from the cache)."""
    seen = []
    real = cli.run_files

    def spy(files, codes, jobs):
        seen[:] = list(files)
        return real(files, codes, jobs)

    monkeypatch.setattr(cli, "run_files", spy)
    return seen


def run(capsys, *args):
    code = cli.main(["check", "--format", "json", "-j1", *map(str, args)])
    out = capsys.readouterr().out
    return code, sorted((os.path.basename(f["path"]), f["line"], f["code"]) for f in json.loads(out))


def names(paths):
    return sorted(os.path.basename(p) for p in paths)


def test_second_run_reuses_every_result_and_reports_the_same(project, capsys, checked):
    first = run(capsys, project / "pkg")
    assert first == (1, [("train.py", 9, "JAX201")])
    assert names(checked) == ["__init__.py", "model.py", "train.py"]
    assert run(capsys, project / "pkg") == first
    assert checked == []
    cache_dir = project / ".jaxlint_cache"
    assert (cache_dir / ".gitignore").read_text().strip().endswith("*")


def test_changed_file_is_checked_again(project, capsys, checked):
    run(capsys, project / "pkg")
    (project / "pkg" / "train.py").write_text(TRAIN.replace("print(float(loss))", "print('step')"))
    assert run(capsys, project / "pkg") == (0, [])
    assert names(checked) == ["train.py"]


def test_changed_imported_module_rechecks_its_importers(project, capsys, checked):
    run(capsys, project / "pkg")
    (project / "pkg" / "model.py").write_text(MODEL_PLAIN)  # step is no longer jitted
    assert run(capsys, project / "pkg") == (0, [])
    assert names(checked) == ["model.py", "train.py"]


def test_changed_large_imported_module_rechecks_its_importers(project, capsys, checked):
    """A module over OFFER_CHARS is summarized while it is checked (ProjectResolver.offer): what
    its importers depend on is its content all the same."""
    from jaxlint.project import OFFER_CHARS

    pad = "".join(f"PAD_{i} = {i}\n" for i in range(OFFER_CHARS // 10))
    (project / "pkg" / "model.py").write_text(MODEL_JIT + pad)
    assert run(capsys, project / "pkg") == (1, [("train.py", 9, "JAX201")])
    (project / "pkg" / "model.py").write_text(MODEL_PLAIN + pad)
    assert run(capsys, project / "pkg") == (0, [])
    assert names(checked) == ["model.py", "train.py"]
    (project / "pkg" / "model.py").write_text(MODEL_JIT + pad)
    assert run(capsys, project / "pkg") == (1, [("train.py", 9, "JAX201")])


def test_a_new_module_that_an_import_now_resolves_to_rechecks_the_importer(project, capsys, checked):
    (project / "pkg" / "model.py").unlink()
    assert run(capsys, project / "pkg") == (0, [])
    (project / "pkg" / "model.py").write_text(MODEL_JIT)
    assert run(capsys, project / "pkg") == (1, [("train.py", 9, "JAX201")])
    assert names(checked) == ["model.py", "train.py"]


EVALUATE = """\
from .metrics import error


def evaluate(predict, batches):
    for x, y in batches:
        print(float(error(predict(x), y)))
"""

METRICS_HOST = """\
import numpy as np


def error(pred, y):
    return np.mean((pred - y) ** 2)
"""

METRICS_DEVICE = METRICS_HOST.replace("numpy as np", "jax.numpy as np")


def test_an_imported_function_that_now_returns_a_jax_array_rechecks_its_importers(project, capsys, checked):
    """What a module summary says a function returns (no jit involved) is part of what the
    importer's result depends on: it is recomputed when the imported module changes."""
    (project / "pkg" / "evaluate.py").write_text(EVALUATE)
    (project / "pkg" / "metrics.py").write_text(METRICS_HOST)
    assert run(capsys, project / "pkg") == (1, [("train.py", 9, "JAX201")])
    (project / "pkg" / "metrics.py").write_text(METRICS_DEVICE)
    assert run(capsys, project / "pkg") == (1, [("evaluate.py", 6, "JAX201"), ("train.py", 9, "JAX201")])
    assert names(checked) == ["evaluate.py", "metrics.py"]
    (project / "pkg" / "metrics.py").write_text(METRICS_HOST)
    assert run(capsys, project / "pkg") == (1, [("train.py", 9, "JAX201")])
    assert names(checked) == ["evaluate.py", "metrics.py"]


HELPERS = """\
import jax.numpy as jnp

from .model import step


def loss_or_zero(params, x, warm):
    return step(params, x)[1] if warm else jnp.zeros(())
"""

WATCH = """\
from .helpers import loss_or_zero


def watch(params, batches):
    for x in batches:
        print(float(loss_or_zero(params, x, True)))
"""


def test_what_a_function_returns_through_a_third_module_is_a_dependency_of_every_importer(
        project, capsys, checked):
    """helpers.py exports nothing compiled, so what loss_or_zero returns is judged on demand, and
    it depends on model.py (is step jitted?): both importers depend on model.py, also the one
    checked after the judgement was made."""
    (project / "pkg" / "helpers.py").write_text(HELPERS)
    (project / "pkg" / "a_watch.py").write_text(WATCH)
    (project / "pkg" / "b_watch.py").write_text(WATCH)
    assert run(capsys, project / "pkg") == (1, [("a_watch.py", 6, "JAX201"), ("b_watch.py", 6, "JAX201"),
                                                ("train.py", 9, "JAX201")])
    (project / "pkg" / "model.py").write_text(MODEL_PLAIN)  # step is no longer jitted
    assert run(capsys, project / "pkg") == (0, [])
    assert {"a_watch.py", "b_watch.py", "train.py"} <= set(names(checked))


def test_changed_selection_uses_other_results(project, capsys, checked):
    run(capsys, project / "pkg")
    assert run(capsys, "--select", "JAX1", project / "pkg") == (0, [])
    assert names(checked) == ["__init__.py", "model.py", "train.py"]
    run(capsys, project / "pkg")
    assert checked == []  # the first selection's results are still there


def test_changed_jaxlint_version_invalidates(project, capsys, checked, monkeypatch):
    run(capsys, project / "pkg")
    monkeypatch.setattr(cache_mod, "__version__", "999.0")
    run(capsys, project / "pkg")
    assert names(checked) == ["__init__.py", "model.py", "train.py"]


@pytest.mark.parametrize("damage", [
    b"\x00garbage\xff",
    b'{"format": 1, "key": "',  # a write cut short
    b'{"format": 1, "key": "KEY", "entries": {"PATH": {"hash": 3, "findings": "x"}}}',
    b'{"format": 1, "key": "KEY", "entries": []}',
])
def test_damaged_cache_is_ignored_and_rebuilt(project, capsys, checked, damage):
    expected = run(capsys, project / "pkg")
    (cache_file,) = (project / ".jaxlint_cache").glob("results-*.json")
    key = json.loads(cache_file.read_text())["key"]
    train = str(project / "pkg" / "train.py")
    cache_file.write_bytes(damage.replace(b"KEY", key.encode()).replace(b"PATH", train.encode()))
    assert run(capsys, project / "pkg") == expected
    assert "train.py" in names(checked)
    assert json.loads(cache_file.read_text())["key"] == key  # rewritten whole


def test_stale_entry_with_a_matching_hash_for_another_file_is_not_used(project, capsys, checked):
    """An entry is tied to its own path: renaming a file makes it a miss."""
    run(capsys, project / "pkg")
    os.rename(project / "pkg" / "train.py", project / "pkg" / "fit.py")
    assert run(capsys, project / "pkg") == (1, [("fit.py", 9, "JAX201")])
    assert names(checked) == ["fit.py"]


def test_no_cache_reads_and_writes_nothing(project, capsys, checked):
    assert run(capsys, "--no-cache", project / "pkg")[0] == 1
    assert not (project / ".jaxlint_cache").exists()
    run(capsys, "--no-cache", project / "pkg")
    assert names(checked) == ["__init__.py", "model.py", "train.py"]


def test_cache_dir_option_and_unwritable_cache(project, capsys, checked, tmp_path_factory):
    where = tmp_path_factory.mktemp("elsewhere") / "c"
    run(capsys, "--cache-dir", where, project / "pkg")
    assert list(where.glob("results-*.json")) and not (project / ".jaxlint_cache").exists()
    blocker = tmp_path_factory.mktemp("ro") / "file"
    blocker.write_text("not a folder")
    assert run(capsys, "--cache-dir", blocker, project / "pkg") == (1, [("train.py", 9, "JAX201")])


def test_the_settings_key_covers_the_model_package_and_the_rules_not_trace():
    sources = {(folder, name) for folder, name, _, _ in cache_mod._own_sources()}
    assert ("jaxlint/model/facts", "values.py") in sources  # a changed model module invalidates the cache
    assert ("jaxlint_rules", "shapes.py") in sources
    assert ("jaxlint", "engine.py") in sources
    assert not any(folder.startswith("jaxlint/trace") for folder, _ in sources)  # dynamic mode only


def _settle(root, seconds=60):
    """Make every file under ``root`` look last modified ``seconds`` ago."""
    old = time.time() - seconds
    for p in root.rglob("*.py"):
        os.utime(p, (old, old))


def test_a_settled_unchanged_file_is_not_read_again(project, capsys, checked, monkeypatch):
    from jaxlint import cache

    _settle(project)
    first = run(capsys, project / "pkg")
    hashed = []
    real = cache.content_hash
    monkeypatch.setattr(cache, "content_hash", lambda data: hashed.append(1) or real(data))
    assert run(capsys, project / "pkg") == first
    assert checked == [] and hashed == []  # size and mtime matched what the first run recorded
    (project / "pkg" / "train.py").write_text(TRAIN.replace("print(float(loss))", "print('step')"))
    assert run(capsys, project / "pkg") == (0, [])
    assert names(checked) == ["train.py"] and len(hashed) == 1  # a new mtime: read and hashed


def test_a_file_written_just_before_the_run_gets_no_stat_record(project, capsys, checked):
    from jaxlint import cache

    run(capsys, project / "pkg")  # the fixture's files were written just now: not settled
    folder = project / ".jaxlint_cache"
    data = json.loads(next(folder.glob("results-*.json")).read_text())
    assert data["format"] == cache.FORMAT and data["stats"] == {}
    _settle(project)
    run(capsys, project / "pkg")
    data = json.loads(next(folder.glob("results-*.json")).read_text())
    assert sorted(os.path.basename(p) for p in data["stats"]) == ["__init__.py", "model.py", "train.py"]


# -- where the cache lives outside a project (issue 40)

def _no_project_above(folder) -> None:
    if cache_mod.find_project_root(str(folder)) is not None:
        pytest.skip(f"{folder} is inside a project ({cache_mod.find_project_root(str(folder))})")


def test_outside_a_project_the_cache_goes_to_the_user_cache_folder_not_the_cwd(tmp_path, monkeypatch, capsys,
                                                                               checked):
    """No pyproject.toml, setup.cfg or .git above the checked file: `jaxlint check` used to write
    `.jaxlint_cache/` into whatever folder the user stood in."""
    work = tmp_path / "downloads"
    work.mkdir()
    _no_project_above(work)
    (work / "train.py").write_text(TRAIN.replace("from .model import step", "step = jax.jit(lambda p, x: (p, x))"))
    monkeypatch.chdir(work)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    first = run(capsys, "train.py")
    assert first == (1, [("train.py", 9, "JAX201")])
    assert names(checked) == ["train.py"]
    assert not (work / ".jaxlint_cache").exists() and os.listdir(work) == ["train.py"]
    (results,) = (tmp_path / "xdg" / "jaxlint").glob("folders/*/results-*.json")
    assert str(work / "train.py") in json.loads(results.read_text())["entries"]
    assert run(capsys, "train.py") == first and checked == []  # the second run is served from there
    # the same folder named another way is the same cache; another folder gets its own
    assert cache_mod.default_folder(str(work / "train.py")) == cache_mod.default_folder(".") == str(results.parent)
    assert cache_mod.default_folder(str(tmp_path)) != str(results.parent)


def test_a_project_root_is_a_pyproject_setup_cfg_or_git(tmp_path):
    for marker in ("pyproject.toml", "setup.cfg", ".git"):
        root = tmp_path / marker.strip(".")
        (root / "src").mkdir(parents=True)
        (root / marker).write_text("")
        assert cache_mod.default_folder(str(root / "src" / "train.py")) == str(root / ".jaxlint_cache"), marker


@pytest.mark.parametrize("platform, env, expected", [
    ("linux", {"XDG_CACHE_HOME": "/var/cache/me"}, "/var/cache/me/jaxlint"),
    ("linux", {"XDG_CACHE_HOME": ""}, "HOME/.cache/jaxlint"),
    ("linux", {"XDG_CACHE_HOME": "relative/cache"}, "HOME/.cache/jaxlint"),  # the XDG spec: ignore a relative path
    ("darwin", {"XDG_CACHE_HOME": "/var/cache/me"}, "HOME/Library/Caches/jaxlint"),
    ("win32", {"LOCALAPPDATA": "/users/me/AppData/Local"}, "/users/me/AppData/Local/jaxlint"),
    ("win32", {"LOCALAPPDATA": ""}, "HOME/AppData/Local/jaxlint"),
])
def test_the_user_cache_folder_per_platform(tmp_path, monkeypatch, platform, env, expected):
    monkeypatch.setattr(cache_mod.sys, "platform", platform)
    monkeypatch.setenv("HOME", str(tmp_path))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert cache_mod.user_cache_dir() == os.path.normpath(expected.replace("HOME", str(tmp_path)))
