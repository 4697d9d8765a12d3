"""docs/rules.md is generated from the rule classes, is up to date, and shows each rule's own
bad and good example (the ones test_rule_examples.py runs), not copies; and every command and
sample output of the README is run and compared (below)."""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from jaxlint.docs import DOCS, render
from jaxlint.engine import check_source
from jaxlint_rules import ALL_RULES
from ruletools import EVERYWHERE_OPT_IN


def test_committed_rules_md_is_up_to_date():
    with open(DOCS, encoding="utf-8") as fh:
        committed = fh.read()
    assert committed == render(), "docs/rules.md is out of date: run `python -m jaxlint.docs --write`"


def test_every_rule_is_documented_with_its_own_examples():
    text = render()
    for rule in ALL_RULES:
        section = text.split(f"## {rule.code} {rule.name}\n", 1)[1].split("\n## ", 1)[0]
        for heading in ("What it does", "Why it is slow or wrong", "Example", "Use instead", "Suppressing it"):
            assert f"### {heading}" in section, (rule.code, heading)
        assert textwrap.dedent(rule.bad).strip("\n") in section
        assert textwrap.dedent(rule.good).strip("\n") in section
        assert f"# noqa: {rule.code}" in section


def test_documented_examples_trigger_exactly_their_rule():
    rules = [cls() for cls in ALL_RULES]
    text = render()
    for rule in ALL_RULES:
        section = text.split(f"## {rule.code} {rule.name}\n", 1)[1].split("\n## ", 1)[0]
        bad = section.split("### Example\n\n```python\n", 1)[1].split("```", 1)[0]
        good = section.split("### Use instead\n\n```python\n", 1)[1].split("```", 1)[0]
        others = EVERYWHERE_OPT_IN - {rule.code}  # opt-in rules that fire on any step loop (ruletools)
        assert {f.code for f in check_source(bad, "example.py", rules).findings} - others == {rule.code}, rule.code
        assert [f for f in check_source(good, "example.py", rules).findings if f.code not in others] == [], rule.code


def test_opt_in_cases_are_documented():
    from jaxlint.docs import render
    from jaxlint.registry import ALL_RULES

    text = render()
    with_cases = [r for r in ALL_RULES if r.opt_in_cases]
    assert with_cases, "some rules have opt-in cases (issue 11's policy)"
    for r in with_cases:
        section = text.split(f"## {r.code} {r.name}\n", 1)[1].split("\n## ", 1)[0]
        assert f"### Reported only with --pedantic\n\n{r.opt_in_cases}\n" in section, r.code


# --------------------------------------------------------------------------- the README

# Every fenced block of the README is checked (issue 40), so that it cannot go stale: each shell
# command is run in a copy of fixtures/ or listed in NOT_RUN with the reason; each `console` block
# (`$ command`, then what it prints, `...` for lines left out) is run and compared with what it
# prints now; each TOML block is loaded as configuration; YAML blocks are parsed and their `run:`
# commands classified like the others (the pre-commit snippet is tested by test_precommit.py).

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_PATH = os.path.join(ROOT, "README.md")
with open(README_PATH, encoding="utf-8") as _fh:
    README = _fh.read()

FENCE = re.compile(r"^```(\S*)\n(.*?)^```\n", re.S | re.M)
LANGUAGES = {"sh", "console", "toml", "yaml"}

# The two commands a newcomer runs on a fresh machine (issue 40: kept exactly, .ci/run calls the second)
TRY_IT = "pip install -e . && jaxlint check fixtures/"
TEST_COMMAND = "pip install -e '.[test]' && pytest -q"

_INSTALLS = ("installs into the environment that runs this suite, which has it already; .ci/run does it in a "
             "fresh virtualenv of a fresh clone, and so did the README walk-through of issue 40")
NOT_RUN = {
    "git clone <this repository> jaxlint": "a placeholder: the project has no public home yet",
    "cd jaxlint": "the folder the clone above makes",
    "pip install -e .": _INSTALLS,
    "pip install -e '.[test]'": _INSTALLS,
    "pytest -q": "the suite itself, which runs this test; .ci/run runs exactly the README's line",
    'pip install "flake8-jax @ git+https://git.example.org/you/jaxlint@baf2a8798cd05d96addcdf78bbdda7987f420e09"':
        "a placeholder URL, to replace with where a user hosts a clone",
}
# Shell commands that run, with the exit code each must give
RUN = {
    "jaxlint check fixtures/": 1,
    "jaxlint check .                     # .py and .ipynb files, folders walked recursively": 1,
    "jaxlint explain JAX201              # what a rule finds, why it costs time, an example, the fix": 0,
    "jaxlint check --diff fixtures/fix/  # the safe automatic fixes as a diff (--fix applies them)": 1,
    "jaxlint check --format sarif --exit-zero . > jaxlint.sarif": 0,
}
# console commands whose output holds seconds and versions, which vary from run to run: numbers
# with a decimal point and percentages are compared as placeholders, and runs of spaces as one
VARYING = {"jaxlint trace fixtures/trace/jit_in_loop.py": "compile seconds and the jax version vary"}
NEEDS_JAX = {"jaxlint trace fixtures/trace/jit_in_loop.py"}


def readme_blocks() -> list:
    """(language, body, line) of each fenced block, in order."""
    out = []
    for m in FENCE.finditer(README):
        out.append((m.group(1), m.group(2), README.count("\n", 0, m.start()) + 1))
    return out


def _yaml_runs(body: str) -> list:
    """The `run:` commands of a GitHub Actions workflow block."""
    return re.findall(r"^\s*- run: (.+)$", body, re.M)


def shell_commands() -> list:
    """Each command of the `sh` blocks and of workflow `run:` steps, a `&&` chain split in parts."""
    lines = []
    for lang, body, _ in readme_blocks():
        if lang == "sh":
            lines += [line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        elif lang == "yaml":
            lines += _yaml_runs(body)
    return [part.strip() for line in lines for part in line.split(" && ")]


def console_samples() -> list:
    """(command, expected output lines) of each `console` block."""
    out = []
    for lang, body, _ in readme_blocks():
        if lang != "console":
            continue
        for chunk in re.split(r"^\$ ", body, flags=re.M)[1:]:
            command, _, output = chunk.partition("\n")
            out.append((command, output.splitlines()))
    return out


def test_every_block_has_a_known_language_and_every_command_is_classified():
    blocks = readme_blocks()
    assert README.count("```") == 2 * len(blocks), "a fence the parser did not pair"
    assert {lang for lang, _, _ in blocks} <= LANGUAGES, [lang for lang, _, _ in blocks]
    commands = shell_commands()
    unclassified = [c for c in commands if c not in RUN and c not in NOT_RUN]
    assert not unclassified, f"README commands neither run nor listed as not runnable: {unclassified}"
    stale = [c for c in list(RUN) + list(NOT_RUN) if c not in commands]
    assert not stale, f"listed here but not in the README any more: {stale}"
    assert all(reason.strip() for reason in NOT_RUN.values())
    assert console_samples() and all(cmd.split()[0] in ("jaxlint", "flake8", "cat") for cmd, _ in console_samples())


def test_the_newcomers_two_commands_are_there_exactly_and_ci_runs_the_second():
    lines = {line.strip() for lang, body, _ in readme_blocks() if lang == "sh" for line in body.splitlines()}
    assert TRY_IT in lines and TEST_COMMAND in lines
    if not os.path.exists(os.path.join(ROOT, ".ci", "run")):
        pytest.skip("not a checkout: .ci/ is not in the sdist")
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as fh:
        assert TEST_COMMAND in fh.read().splitlines()
    assert "pip install jaxlint" not in README  # another project's name on PyPI


def test_readme_is_a_short_page_with_the_quick_start_first():
    lines = README.splitlines()
    assert len(lines) <= 400, len(lines)
    start = lines.index("## Quick start") + 1
    trace_out = next(i for i, line in enumerate(lines, 1) if line == "$ jaxlint trace fixtures/trace/jit_in_loop.py")
    end = next(i for i, line in enumerate(lines[trace_out:], trace_out + 1) if line == "```")
    assert start < end <= 100, (start, end)
    quick = "\n".join(lines[start:end])
    for needed in ("pip install -e .", "jaxlint check", "flake8", "pre-commit", "jaxlint trace"):
        assert needed in quick, needed


@pytest.fixture
def sandbox(tmp_path):
    """A copy of what the README's commands read (fixtures/ and the project's pyproject.toml), so
    that a command's cache or --fix never touches the checkout; this interpreter's scripts first
    on PATH."""
    shutil.copytree(os.path.join(ROOT, "fixtures"), tmp_path / "fixtures")
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path / "pyproject.toml")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    env.pop("COLUMNS", None)
    env["JAX_PLATFORMS"] = "cpu"  # the trace sample shows a CPU run (CI has no accelerator)
    return tmp_path, env


def _run(command: str, sandbox) -> subprocess.CompletedProcess:
    folder, env = sandbox
    return subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("command", sorted(RUN))
def test_readme_command_runs(command, sandbox):
    proc = _run(command, sandbox)
    assert proc.returncode == RUN[command], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "usage:" not in proc.stderr, proc.stderr[-2000:]
    if "--format sarif" in command:
        with open(sandbox[0] / "jaxlint.sarif", encoding="utf-8") as fh:
            doc = json.load(fh)
        assert doc["version"] == "2.1.0" and doc["runs"][0]["results"]


def _normalize(lines: list, varying: bool) -> list:
    if not varying:
        return lines
    out = []
    for line in lines:
        line = re.sub(r"\d+(?:\.\d+)+", "N.N", line)
        line = re.sub(r"\d+%", "N%", line)
        out.append(" ".join(line.split()))
    return out


def matches(expected: list, actual: list) -> bool:
    """Whether ``actual`` is ``expected`` with each `...` line standing for any lines (none too)."""
    parts, part = [], []
    for line in expected:
        if line == "...":
            parts.append(part)
            part = []
        else:
            part.append(line)
    parts.append(part)
    if len(parts) == 1:
        return actual == expected
    first, *middle, last = parts
    if actual[:len(first)] != first or (last and actual[-len(last):] != last):
        return False
    i, stop = len(first), len(actual) - len(last)
    if stop < i:
        return False
    for part in middle:
        while i + len(part) <= stop and actual[i:i + len(part)] != part:
            i += 1
        if i + len(part) > stop:
            return False
        i += len(part)
    return True


def test_the_matcher_honours_elisions():
    assert matches(["a", "...", "z"], ["a", "b", "c", "z"]) and matches(["a", "...", "z"], ["a", "z"])
    assert matches(["a", "...", "m", "...", "z"], ["a", "b", "m", "n", "z"])
    assert not matches(["a", "...", "z"], ["a", "b"]) and not matches(["a", "b"], ["a", "b", "c"])
    assert not matches(["a", "...", "m", "...", "z"], ["a", "b", "z"])
    assert matches(["a", "..."], ["a", "b"]) and not matches(["b", "..."], ["a", "b"])


@pytest.mark.parametrize("command, expected", console_samples(), ids=[c for c, _ in console_samples()])
def test_readme_sample_output_is_what_the_command_prints_now(command, expected, sandbox):
    """stdout, then stderr: what a terminal shows when the report or closing line comes last."""
    if command in NEEDS_JAX:
        pytest.importorskip("jax")
    proc = _run(command, sandbox)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    actual = (proc.stdout + proc.stderr).splitlines()
    varying = command in VARYING
    assert matches(_normalize(expected, varying), _normalize(actual, varying)), (
        f"the README's sample of `{command}` is out of date; it prints now:\n" + "\n".join(actual[:60]))


def test_readme_configuration_blocks_load(tmp_path):
    from jaxlint.config import load_config

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    toml = [body for lang, body, _ in readme_blocks() if lang == "toml"]
    assert toml
    for i, body in enumerate(toml):
        data = tomllib.loads(body)
        assert "jaxlint" in data["tool"]
        (tmp_path / f"c{i}").mkdir()
        (tmp_path / f"c{i}" / "pyproject.toml").write_text(body, encoding="utf-8")
        load_config(str(tmp_path / f"c{i}"))  # a ConfigError (an unknown key, a bad value) fails the test


def test_readme_yaml_blocks_parse_and_the_workflow_runs_jaxlint():
    yaml = pytest.importorskip("yaml")
    bodies = [body for lang, body, _ in readme_blocks() if lang == "yaml"]
    docs = [yaml.safe_load(b) for b in bodies]
    assert any("repos" in d for d in docs)  # the pre-commit snippet: tests/test_precommit.py runs it
    (workflow,) = [d for d in docs if "jobs" in d]
    steps = workflow["jobs"]["jaxlint"]["steps"]
    runs = [s["run"] for s in steps if "run" in s]
    assert runs == _yaml_runs(next(b for b in bodies if "jobs:" in b))
    assert any(s.get("uses", "").startswith("github/codeql-action/upload-sarif") for s in steps)


def test_readme_names_exactly_the_rules_that_fail_at_run_time():
    from jaxlint.registry import ALL_RULES

    sentence = README[README.index("The findings of JAX3"):].split("\n\n", 1)[0]
    named = set(re.findall(r"JAX\d{3}", sentence)) - {"JAX000"}
    assert named == {r.code for r in ALL_RULES if r.fails_at_runtime}


def test_readme_counts_the_rules_it_has():
    from jaxlint.registry import ALL_RULES

    assert f"({len(ALL_RULES)} rules)" in README
    assert len([row for row in README.splitlines() if row.startswith("| JAX")]) == len(ALL_RULES) + 1  # + JAX000


def test_the_readme_lists_every_finding_a_traced_run_can_confirm():
    from jaxlint.registry import _catalog

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    start = readme.index("A run can confirm these static findings")
    paragraph = readme[start:readme.index("not observable", start)]
    listed = set(re.findall(r"\bJAX\d{3}\b", paragraph))
    assert listed == set(_catalog()["CONFIRMED_BY"])
