"""The pre-commit hook, run by the real `pre-commit` (from PyPI) with the README's own
`.pre-commit-config.yaml` snippet: `repo:` becomes this checkout's path and `rev:` its HEAD
commit (the committed state is what pre-commit installs), so the snippet a user copies is the one
tested. The README's own `rev:` is checked to be a commit of this repository's history, and is
run too."""

import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures", "JAX201_host_transfer_in_loop")


def readme_snippet() -> str:
    """The ```yaml block of the README's pre-commit section, exactly as written."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    section = readme[readme.index("### pre-commit"):]
    block = re.search(r"```yaml\n(repos:\n.*?)```", section, re.S)
    assert block, "no `repos:` yaml block in the README's pre-commit section"
    return block.group(1)


def substituted(snippet: str, repo: str, rev: str) -> str:
    """The snippet with only the values of `repo:` and `rev:` replaced (comments and all else kept)."""
    out, n = re.subn(r"(- repo: )\S+", lambda m: m.group(1) + repo, snippet)
    assert n == 1, snippet
    out, n = re.subn(r"(\n\s+rev: )\S+", lambda m: m.group(1) + rev, out)
    assert n == 1, snippet
    return out


def git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def head() -> str:
    proc = git("rev-parse", "HEAD")
    if proc.returncode != 0:
        pytest.skip("not a git checkout: pre-commit installs a hook from a commit")
    return proc.stdout.strip()


def test_readme_rev_is_a_commit_of_this_repository():
    rev = re.search(r"\n\s+rev: (\S+)", readme_snippet()).group(1)
    assert re.fullmatch(r"[0-9a-f]{40}", rev), f"rev: {rev} is not a full commit hash (there are no tags yet)"
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    head()
    if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("a shallow clone does not hold the history the README's rev: names")
    assert git("cat-file", "-e", f"{rev}^{{commit}}").returncode == 0, f"{rev} is not a commit of this repository"
    assert git("merge-base", "--is-ancestor", rev, "HEAD").returncode == 0, f"{rev} is not in HEAD's history"


@pytest.fixture(scope="module")
def user_repo(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.skip("pre-commit is not installed (it is in the test extra)")
    rev = head()
    repo = tmp_path_factory.mktemp("user_repo")
    shutil.copy(os.path.join(FIX, "bad.py"), repo / "train_bad.py")
    shutil.copy(os.path.join(FIX, "good.py"), repo / "train_good.py")
    shutil.copy(os.path.join(ROOT, "fixtures", "notebooks", "training_bad.ipynb"), repo / "explore.ipynb")
    (repo / ".pre-commit-config.yaml").write_text(substituted(readme_snippet(), ROOT, rev))
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path_factory.mktemp("pre_commit_home")))
    for cmd in (["git", "init", "-q"], ["git", "add", "."]):
        subprocess.run(cmd, cwd=repo, check=True)
    return repo, env


def run_hook(repo, env, filename, config=".pre-commit-config.yaml"):
    return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--config", config, "--files", filename],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=900)


def test_hook_fails_on_the_bad_file_with_its_findings(user_repo):
    repo, env = user_repo
    proc = run_hook(repo, env, "train_bad.py")
    out = proc.stdout + proc.stderr
    print(out)
    assert proc.returncode == 1, out
    assert "jaxlint" in out and "Failed" in out
    assert "train_bad.py:" in out and "JAX201" in out


def test_hook_passes_on_the_good_file(user_repo):
    repo, env = user_repo
    proc = run_hook(repo, env, "train_good.py")
    out = proc.stdout + proc.stderr
    print(out)
    assert proc.returncode == 0, out
    assert "Passed" in out


def test_hook_checks_notebooks(user_repo):
    """`types_or: [python, jupyter]`: pre-commit hands the hook notebooks too (with `types:
    [python]` it said "(no files to check) Skipped" on one with findings)."""
    repo, env = user_repo
    proc = run_hook(repo, env, "explore.ipynb")
    out = proc.stdout + proc.stderr
    print(out)
    assert proc.returncode == 1, out
    assert "Skipped" not in out and "explore.ipynb:cell 8:line 6:col 17: JAX201" in out, out


def test_the_readmes_own_rev_works(user_repo):
    """The commit the README names, unchanged, installs a hook that runs (only `repo:` is local)."""
    repo, env = user_repo
    rev = re.search(r"\n\s+rev: (\S+)", readme_snippet()).group(1)
    if git("cat-file", "-e", f"{rev}^{{commit}}").returncode != 0:
        pytest.skip(f"{rev} is not in this clone (shallow?)")
    config = repo / "readme-rev.yaml"
    config.write_text(substituted(readme_snippet(), ROOT, rev))
    proc = run_hook(repo, env, "train_bad.py", config=str(config))
    out = proc.stdout + proc.stderr
    print(out)
    assert proc.returncode == 1 and "JAX201" in out, out
