"""The pre-commit hook, run by the real `pre-commit` (from PyPI) against this checkout:
`pre-commit try-repo` installs jaxlint into pre-commit's own environment, as a user's
`.pre-commit-config.yaml` with `repo:` + `rev:` would."""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures", "JAX201_host_transfer_in_loop")


@pytest.fixture(scope="module")
def user_repo(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.skip("pre-commit is not installed (it is in the test extra)")
    repo = tmp_path_factory.mktemp("user_repo")
    shutil.copy(os.path.join(FIX, "bad.py"), repo / "train_bad.py")
    shutil.copy(os.path.join(FIX, "good.py"), repo / "train_good.py")
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path_factory.mktemp("pre_commit_home")))
    for cmd in (["git", "init", "-q"], ["git", "add", "."]):
        subprocess.run(cmd, cwd=repo, check=True)
    return repo, env


def try_repo(repo, env, filename):
    return subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", ROOT, "jaxlint", "--files", filename],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=900)


def test_hook_fails_on_the_bad_file_with_its_findings(user_repo):
    repo, env = user_repo
    proc = try_repo(repo, env, "train_bad.py")
    out = proc.stdout + proc.stderr
    print(out)
    assert proc.returncode == 1, out
    assert "jaxlint" in out and "Failed" in out
    assert "train_bad.py:" in out and "JAX201" in out


def test_hook_passes_on_the_good_file(user_repo):
    repo, env = user_repo
    proc = try_repo(repo, env, "train_good.py")
    out = proc.stdout + proc.stderr
    print(out)
    assert proc.returncode == 0, out
    assert "Passed" in out
