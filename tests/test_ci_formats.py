"""`--format sarif` (validated against the SARIF 2.1.0 schema) and `--format github`."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BAD = os.path.join("fixtures", "JAX201_host_transfer_in_loop", "bad.py")


def check(*args):
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    return proc


def text_findings(path):
    out = check(path).stdout
    return [tuple(line.split(":")[1:3]) + (line.split(" ")[1],) for line in out.splitlines()]


def test_sarif_is_valid_sarif_2_1_0():
    # pydantic-sarif's models are generated (datamodel-codegen) from the OASIS
    # sarif-schema-2.1.0.json with additionalProperties forbidden: validating against them is
    # validating against the schema, without a network fetch.
    schema = pytest.importorskip("pydantic_sarif.model").StaticAnalysisResultsFormatSarifVersion210JsonSchema
    from pydantic import ValidationError

    proc = check("--format", "sarif", "fixtures/")
    assert proc.returncode == 1 and proc.stderr == ""
    doc = json.loads(proc.stdout)
    schema.model_validate(doc)
    for damage in (
        lambda d: d.update(version="2.0.0"),
        lambda d: d["runs"][0]["results"][0].update(unknownProperty=1),
        lambda d: d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"].update(startLine="x"),
    ):
        broken = json.loads(proc.stdout)
        damage(broken)
        with pytest.raises(ValidationError):
            schema.model_validate(broken)


def test_sarif_rules_and_results_match_the_text_output():
    doc = json.loads(check("--format", "sarif", BAD).stdout)
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules][:3] == ["JAX000", "JAX101", "JAX102"] and len(rules) == 32  # JAX000 + 31 rules
    jax201 = rules[[r["id"] for r in rules].index("JAX201")]
    assert jax201["name"] == "host-transfer-in-loop"
    assert jax201["defaultConfiguration"] == {"level": "warning"}
    assert "float(" in jax201["help"]["text"] and "```python" in jax201["help"]["markdown"]
    assert jax201["shortDescription"]["text"] and jax201["fullDescription"]["text"]
    got = []
    for res in run["results"]:
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"] == {"uri": "fixtures/JAX201_host_transfer_in_loop/bad.py",
                                           "uriBaseId": "%SRCROOT%"}
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        got.append((str(loc["region"]["startLine"]), str(loc["region"]["startColumn"]), res["ruleId"]))
    assert got == text_findings(BAD) and got


# Issue 40: the rules whose findings are code that raises when it runs, decided rule by rule from
# each rule's rationale and its runtime tests (JAX203 is not among them: its `.item()` under
# autodiff alone runs, baking a constant). JAX000: the file was not checked.
FAILS_AT_RUNTIME = {"JAX000", "JAX301", "JAX302", "JAX303", "JAX401", "JAX402", "JAX404", "JAX802", "JAX804"}
LEVEL_MIX = [os.path.join("fixtures", "JAX401_inplace_item_assignment", "bad.py"), BAD]


def test_sarif_level_is_error_for_findings_that_fail_at_run_time():
    doc = json.loads(check("--format", "sarif", *LEVEL_MIX).stdout)
    run = doc["runs"][0]
    levels = {r["id"]: r["defaultConfiguration"]["level"] for r in run["tool"]["driver"]["rules"]}
    assert {code for code, level in levels.items() if level == "error"} == FAILS_AT_RUNTIME
    assert set(levels.values()) == {"error", "warning"}
    got = {(res["ruleId"], res["level"]) for res in run["results"]}
    assert got == {("JAX401", "error"), ("JAX201", "warning")}, got


def test_github_annotations_are_errors_for_findings_that_fail_at_run_time():
    lines = check("--format", "github", *LEVEL_MIX).stdout.splitlines()
    kinds = {(line.split(" ")[0], line.rsplit("title=", 1)[1].split("::")[0]) for line in lines}
    assert kinds == {("::error", "JAX401"), ("::warning", "JAX201")}, kinds


def test_a_rule_that_fails_at_run_time_says_so_in_every_finding():
    """Each finding of a `fails_at_runtime` rule on its fixtures and its own example names the
    exception it raises; a rule whose findings do not all say so must not be marked."""
    from jaxlint.engine import check_path, check_source
    from jaxlint.registry import ALL_RULES

    marked = [r for r in ALL_RULES if r.fails_at_runtime]
    assert {r.code for r in marked} == FAILS_AT_RUNTIME - {"JAX000"}
    for rule in marked:
        (folder,) = [d for d in os.listdir(os.path.join(ROOT, "fixtures")) if d.startswith(rule.code + "_")]
        found = check_path(os.path.join(ROOT, "fixtures", folder, "bad.py"), [rule()]).findings
        found += check_source(textwrap.dedent(rule.bad), "example.py", [rule()]).findings
        assert found, rule.code
        for f in found:
            assert re.search(r"\braises?\b", f.message), (rule.code, f.message)


def test_github_annotations():
    proc = check("--format", "github", BAD)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    pattern = re.compile(r"^::warning file=([^,]+),line=(\d+),col=(\d+),title=(JAX\d{3})::(JAX\d{3}) .+$")
    parsed = [pattern.match(line) for line in lines]
    assert all(parsed) and lines
    assert [(m.group(2), m.group(3), m.group(4)) for m in parsed] == text_findings(BAD)
    assert all(m.group(1) == BAD.replace(os.sep, "/") for m in parsed)


def test_github_escapes_workflow_command_syntax():
    from jaxlint.reporters import github
    from jaxlint.rule import Finding

    out = github([Finding(3, 0, "JAX201", "100% sync\nnext", "x", "dir,a:b/f.py")], root=os.getcwd())
    assert out == "::warning file=dir%2Ca%3Ab/f.py,line=3,col=1,title=JAX201::JAX201 100%25 sync%0Anext\n"
    assert github([Finding(1, 0, "JAX000", "cannot parse", "parse-error", "f.py")]).startswith("::error ")


def test_github_paths_are_relative_to_the_repository_root_from_a_subfolder(tmp_path):
    """GitHub attaches an annotation only to a path relative to the repository root (as SARIF's
    are): from a subfolder, `sub/bad.py` must be reported as `pkg/sub/bad.py`."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)  # what marks the checkout's root
    sub = repo / "pkg" / "sub"
    sub.mkdir(parents=True)
    with open(os.path.join(ROOT, BAD), encoding="utf-8") as fh:
        (sub / "bad.py").write_text(fh.read(), encoding="utf-8")
    outside = tmp_path / "elsewhere.py"
    outside.write_text((sub / "bad.py").read_text(encoding="utf-8"), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=ROOT)
    for target in ("sub/bad.py", str(sub / "bad.py"), "sub"):
        proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", "--format", "github", target],
                              capture_output=True, text=True, cwd=repo / "pkg", env=env, timeout=120)
        assert proc.returncode == 1, proc.stderr
        files = {re.match(r"::warning file=([^,]+),", line).group(1) for line in proc.stdout.splitlines()}
        assert files == {"pkg/sub/bad.py"}, (target, proc.stdout)
        sarif = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", "--format", "sarif", target],
                               capture_output=True, text=True, cwd=repo / "pkg", env=env, timeout=120)
        uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                for r in json.loads(sarif.stdout)["runs"][0]["results"]}
        assert uris == files  # the same paths as SARIF's
    # a file outside the repository keeps its absolute path
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", "--format", "github", str(outside)],
                          capture_output=True, text=True, cwd=repo / "pkg", env=env, timeout=120)
    assert proc.stdout and all(f"file={outside.as_posix()}," in line for line in proc.stdout.splitlines())


def test_clean_files_give_empty_valid_output():
    good = os.path.join("fixtures", "JAX201_host_transfer_in_loop", "good.py")
    assert check("--format", "github", good).stdout == ""
    doc = json.loads(check("--format", "sarif", good).stdout)
    assert doc["runs"][0]["results"] == [] and doc["version"] == "2.1.0"


def test_notebook_findings_carry_their_cell_in_sarif_and_github():
    nb = os.path.join("fixtures", "notebooks", "training_bad.ipynb")
    doc = json.loads(check("--format", "sarif", nb).stdout)
    results = doc["runs"][0]["results"]
    assert results and all("region" not in r["locations"][0]["physicalLocation"] for r in results)
    assert {(r["ruleId"], r["properties"]["cell"], r["properties"]["cellLine"]) for r in results} == {
        ("JAX204", 6, 8), ("JAX101", 8, 3), ("JAX201", 8, 6)}
    assert results[0]["message"]["text"].startswith("cell 6, line ")
    schema = pytest.importorskip("pydantic_sarif.model").StaticAnalysisResultsFormatSarifVersion210JsonSchema
    schema.model_validate(doc)
    lines = check("--format", "github", nb).stdout.splitlines()
    assert lines and all(line.startswith(f"::warning file={nb},title=JAX") and "::JAX" in line for line in lines)
    assert any("cell 8, line 3: " in line for line in lines)


def test_paths_are_relative_to_the_checked_files_repository_when_run_from_outside_it(tmp_path):
    """Run from a folder outside the checkout (a CI step in another working directory), GitHub
    annotations and SARIF URIs are still relative to the checked files' own repository."""
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with open(os.path.join(ROOT, BAD), encoding="utf-8") as fh:
        (repo / "src" / "train.py").write_text(fh.read())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = str(repo / "src" / "train.py")
    gh = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", "--format", "github", target],
                        capture_output=True, text=True, cwd=elsewhere, timeout=120)
    assert gh.returncode == 1 and gh.stdout.startswith("::warning file=src/train.py,line="), gh.stdout[:300]
    sarif = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", "--format", "sarif", target],
                           capture_output=True, text=True, cwd=elsewhere, timeout=120)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(sarif.stdout)["runs"][0]["results"]}
    assert uris == {"src/train.py"}, uris
