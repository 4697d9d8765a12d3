"""The `jaxlint` command: output formats, exit codes, selection, config, noqa, discovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ruletools import without_closing_line
from jaxlint import cli
from jaxlint.cli import main
from jaxlint.config import ConfigError, load_config
from jaxlint.source import content_hash

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BAD = textwrap.dedent("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return x * 2

    def run(x, n):
        for i in range(n):
            x = step(x)
            print(float(x))
            x.block_until_ready()
        return x
""")
GOOD = textwrap.dedent("""
    import jax

    @jax.jit
    def step(x):
        return x * 2

    def run(x, n):
        for i in range(n):
            x = step(x)
        return float(x)
""")


def write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return path


def run(capsys, *argv):
    """(exit code, stdout, stderr without the closing summary line: test_closing_line_* test it)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, without_closing_line(err)


def test_text_output_is_flake8_format_and_exit_1(tmp_path, capsys):
    p = write(tmp_path, "bad.py", BAD)
    code, out, _ = run(capsys, "check", str(p))
    assert code == 1
    assert out.splitlines() == [
        f"{p}:12:15: JAX201 `float(x)` syncs with the device in every iteration of the loop on line 10, so the "
        "host waits for each step before it can dispatch the next; keep it on device and fetch every N steps or "
        "once after the loop",
        f"{p}:13:9: JAX202 `block_until_ready()` in every iteration of the loop on line 10 empties the dispatch "
        "queue: the device idles while the host dispatches the next step; block once after the loop, or every N "
        "steps to bound the queue",
    ]


def test_clean_file_exits_0_and_prints_nothing(tmp_path, capsys):
    p = write(tmp_path, "good.py", GOOD)
    assert run(capsys, "check", str(p)) == (0, "", "")


def test_json_output(tmp_path, capsys):
    p = write(tmp_path, "bad.py", BAD)
    code, out, _ = run(capsys, "check", "--format", "json", str(p))
    rows = json.loads(out)
    assert code == 1
    assert [(r["line"], r["col"], r["code"], r["name"]) for r in rows] == [
        (12, 15, "JAX201", "host-transfer-in-loop"), (13, 9, "JAX202", "block-until-ready-in-loop")]
    assert all(r["path"] == str(p) and r["message"] for r in rows)


def test_select_and_ignore_prefixes(tmp_path, capsys):
    p = write(tmp_path, "bad.py", BAD)
    _, out, _ = run(capsys, "check", "--select", "JAX202", str(p))
    assert [line.split()[1] for line in out.splitlines()] == ["JAX202"]
    _, out, _ = run(capsys, "check", "--ignore", "JAX20", str(p))
    assert out == ""
    _, out, _ = run(capsys, "check", "--extend-ignore", "JAX201", str(p))
    assert [line.split()[1] for line in out.splitlines()] == ["JAX202"]


def test_exit_zero_and_statistics(tmp_path, capsys):
    p = write(tmp_path, "bad.py", BAD)
    code, out, _ = run(capsys, "check", "--exit-zero", "--statistics", str(p))
    assert code == 0
    stats = [line for line in out.splitlines() if not line.startswith(str(p))]
    assert [s.split()[:2] for s in stats] == [["1", "JAX201"], ["1", "JAX202"]]


def test_noqa_bare_and_with_codes(tmp_path, capsys):
    src = BAD.replace("print(float(x))", "print(float(x))  # noqa: JAX201").replace(
        "x.block_until_ready()", "x.block_until_ready()  # noqa")
    p = write(tmp_path, "bad.py", src)
    assert run(capsys, "check", str(p))[:2] == (0, "")


def test_noqa_for_another_code_does_not_suppress(tmp_path, capsys):
    p = write(tmp_path, "bad.py", BAD.replace("print(float(x))", "print(float(x))  # noqa: JAX202,E501"))
    _, out, _ = run(capsys, "check", "--select", "JAX201", str(p))
    assert ":12:" in out


def test_noqa_on_any_line_of_a_multiline_statement(tmp_path, capsys):
    src = BAD.replace("print(float(x))", "print(\n                float(x),\n            )  # noqa: JAX201")
    p = write(tmp_path, "bad.py", src)
    _, out, _ = run(capsys, "check", "--select", "JAX201", str(p))
    assert out == ""


def test_folder_walk_skips_venv_git_build_and_pycache(tmp_path, capsys):
    write(tmp_path, "pkg/train.py", BAD)
    write(tmp_path, "pkg/main.py", "from pkg.train import run\nrun(1.0, 3)\n")  # a function nothing calls is opt-in
    for skipped in (".git/x.py", "venv/lib/x.py", "build/x.py", "pkg/__pycache__/x.py", "env2/x.py"):
        write(tmp_path, skipped, BAD)
    write(tmp_path, "env2/pyvenv.cfg", "home = /usr\n")  # a virtualenv with an unusual name
    write(tmp_path, "pkg/notes.txt", BAD)
    _, out, _ = run(capsys, "check", str(tmp_path))
    assert {line.split(":")[0] for line in out.splitlines()} == {str(tmp_path / "pkg/train.py")}


def test_pyproject_config_select_ignore_per_file_and_exclude(tmp_path, capsys):
    write(tmp_path, "pyproject.toml", textwrap.dedent("""
        [tool.jaxlint]
        ignore = ["JAX202"]
        exclude = ["generated"]
        [tool.jaxlint.per-file-ignores]
        "scripts/*.py" = ["JAX201"]
    """))
    write(tmp_path, "src/a.py", BAD)
    write(tmp_path, "scripts/b.py", BAD)
    write(tmp_path, "generated/c.py", BAD)
    _, out, _ = run(capsys, "check", str(tmp_path))
    assert [(os.path.relpath(line.split(":")[0], tmp_path), line.split()[1]) for line in out.splitlines()] == [
        ("src/a.py", "JAX201")]
    # the command line replaces the config's ignore list
    _, out, _ = run(capsys, "check", "--ignore", "JAX201", str(tmp_path / "src"))
    assert [line.split()[1] for line in out.splitlines()] == ["JAX202"]


def test_per_file_ignores_are_the_same_for_check_and_the_trace_cross_check(tmp_path, capsys):
    from jaxlint.trace.runner import static_findings  # the static findings `jaxlint trace` checks

    write(tmp_path, "pyproject.toml", '[tool.jaxlint.per-file-ignores]\n"scripts/*.py" = ["JAX201"]\n')
    files = [str(write(tmp_path, "src/a.py", BAD)), str(write(tmp_path, "scripts/b.py", BAD))]
    _, out, _ = run(capsys, "check", "--no-cache", *files)
    reported = [(os.path.relpath(line.split(":")[0], tmp_path), line.split()[1]) for line in out.splitlines()]
    assert reported == [("scripts/b.py", "JAX202"), ("src/a.py", "JAX201"), ("src/a.py", "JAX202")]
    assert [(os.path.relpath(f.path, tmp_path), f.code) for f in static_findings(files)] == reported


def test_config_found_by_walking_up(tmp_path, capsys):
    write(tmp_path, "pyproject.toml", "[tool.jaxlint]\nselect = [\"JAX202\"]\n")
    p = write(tmp_path, "a/b/c/bad.py", BAD)
    _, out, _ = run(capsys, "check", str(p))
    assert [line.split()[1] for line in out.splitlines()] == ["JAX202"]


def test_bad_config_is_a_usage_error(tmp_path, capsys):
    write(tmp_path, "pyproject.toml", "[tool.jaxlint]\nselekt = [\"JAX2\"]\n")
    p = write(tmp_path, "bad.py", BAD)
    code, out, err = run(capsys, "check", str(p))
    assert code == 2 and out == ""
    assert "unknown [tool.jaxlint] key(s): selekt" in err and "(valid: conventions, exclude, " in err


BROKEN_TOML = [
    # (pyproject.toml, line, column, what): the place counted by hand (columns from 1)
    ('[tool.jaxlint]\nselect = ', 2, 10, "Invalid value (where the file ends)"),  # after `select = `
    ('[tool.jaxlint]\nselect = ["JAX2"\n', 3, 1, "Unclosed array (where the file ends)"),
    ('[tool.jaxlint]\nselect = [\n  "JAX2",\n  JAX3,\n]\n', 4, 3, "Invalid value"),  # the bare JAX3
]


@pytest.mark.parametrize("text, line, col, what", BROKEN_TOML)
def test_a_broken_pyproject_names_the_file_line_and_column(tmp_path, capsys, text, line, col, what):
    """Issue 40: `Invalid value (at end of document)` said neither which file nor where. Python
    3.11's tomllib and tomli 2 (Python 3.10) report the place differently; both give this."""
    cfg = write(tmp_path, "pyproject.toml", text)
    p = write(tmp_path, "bad.py", BAD)
    code, out, err = run(capsys, "check", "--no-cache", str(p))
    assert (code, out) == (2, "")
    assert err == f"jaxlint: config error: {cfg}:{line}:{col}: invalid TOML: {what}\n"
    code, out, err = run(capsys, "check", "--no-cache", "--config", str(cfg), str(p))
    assert (code, err) == (2, f"jaxlint: config error: {cfg}:{line}:{col}: invalid TOML: {what}\n")
    # the flake8 plugin says the same on its one JAX000 line
    from jaxlint.flake8_plugin import JaxlintChecker

    assert JaxlintChecker.config_for(str(p)) == f"{cfg}:{line}:{col}: invalid TOML: {what}"


def test_a_pyproject_that_is_not_utf8_is_a_config_error(tmp_path, capsys):
    cfg = write(tmp_path, "pyproject.toml", b'[tool.jaxlint]\nselect = ["\xff"]\n')
    p = write(tmp_path, "bad.py", BAD)
    for argv in (["check", str(p)], ["check", "--config", str(cfg), str(p)]):  # the second was a traceback
        code, out, err = run(capsys, *argv)
        assert (code, out, err) == (2, "", f"jaxlint: config error: {cfg}: not UTF-8 text (invalid start byte "
                                           "at byte 26)\n"), argv


@pytest.mark.parametrize("style", ["tomli 2 (lineno, colno, msg)", "tomllib 3.11 (the message only)"])
def test_the_place_of_a_toml_error_from_either_parser(monkeypatch, style):
    """Each way a parser reports the place, on whichever Python runs this: tomli 2 sets
    ``lineno``/``colno``/``msg``; Python 3.11's tomllib only says "(at line L, column C)" or "(at
    end of document)" in its message."""
    from jaxlint import config

    class TOMLDecodeError(ValueError):
        pass

    def parser(message, **attrs):
        def loads(text):
            e = TOMLDecodeError(message)
            e.__dict__.update(attrs)
            raise e
        return type("toml", (), {"TOMLDecodeError": TOMLDecodeError, "loads": staticmethod(loads)})

    doc = b"[tool.jaxlint]\nselect = ["
    cases = [("Unclosed array (at end of document)", dict(lineno=2, colno=11, msg="Unclosed array")),
             ("Invalid value (at line 1, column 3)", dict(lineno=1, colno=3, msg="Invalid value"))]
    for message, attrs in cases:
        fake = parser(message, **attrs) if style.startswith("tomli") else parser(message)
        monkeypatch.setattr(config, "_toml", lambda fake=fake: fake)
        with pytest.raises(ConfigError) as e:
            config._parse_toml(doc, "p/pyproject.toml")
        place = f"{attrs['lineno']}:{attrs['colno']}"
        ends = " (where the file ends)" if "end of document" in message else ""
        assert str(e.value) == f"p/pyproject.toml:{place}: invalid TOML: {attrs['msg']}{ends}", style


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select", "--extend-ignore"])
@pytest.mark.parametrize("value", ["FOO", "JAX999", "JAX2,JAX9", "JAX1010"])
def test_unknown_code_on_the_command_line_is_a_usage_error(tmp_path, capsys, option, value):
    p = write(tmp_path, "bad.py", BAD)
    code, out, err = run(capsys, "check", option, value, str(p))
    bad = value.split(",")[-1]
    assert code == 2 and out == ""
    assert f"argument {option}: unknown code or prefix {bad!r}" in err
    assert "JAX, JAX0, JAX1, JAX2, JAX3, JAX4, JAX5, JAX6" in err  # the valid prefixes


@pytest.mark.parametrize("value", ["J", "JA", "JAX", "jax2", "JAX20", "JAX201", "JAX0", "JAX000", "JAX2,JAX6"])
def test_every_prefix_of_a_known_code_is_accepted(tmp_path, capsys, value):
    p = write(tmp_path, "bad.py", BAD)
    code, _, err = run(capsys, "check", "--select", value, str(p))
    assert code in (0, 1) and err == ""
    assert run(capsys, "check", "--extend-ignore", value, str(p))[0] in (0, 1)


def test_known_codes_are_jax000_and_the_rules():
    from jaxlint_rules import ALL_RULES

    from jaxlint.config import known_codes

    assert known_codes() == ["JAX000"] + [r.code for r in ALL_RULES]


@pytest.mark.parametrize("section, key", [
    ('select = ["FOO"]', "select"),
    ('select = ["JAX2", "JAX999"]', "select"),
    ('ignore = ["JAX9"]', "ignore"),
    ('extend-select = ["X"]', "extend-select"),
    ('extend-ignore = ["JAX2O1"]', "extend-ignore"),
    ('[tool.jaxlint.per-file-ignores]\n"tests/*.py" = ["JAX1", "JXA"]', "per-file-ignores.'tests/*.py'"),
])
def test_unknown_code_in_the_config_is_a_usage_error(tmp_path, capsys, section, key):
    write(tmp_path, "pyproject.toml", f"[tool.jaxlint]\n{section}\n")
    p = write(tmp_path, "bad.py", BAD)
    code, out, err = run(capsys, "check", str(p))
    assert code == 2 and out == ""
    assert f"[tool.jaxlint] {key}: unknown code or prefix" in err
    assert "JAX, JAX0, JAX1" in err


@pytest.mark.parametrize("section, key", [
    ('select = "JAX2"', "select"),
    ('ignore = "JAX202"', "ignore"),
    ('extend-select = ["JAX2", 3]', "extend-select"),
    ("extend-ignore = true", "extend-ignore"),
    ('exclude = "x.py"', "exclude"),
    ('extend-exclude = "x.py"', "extend-exclude"),
    ('[tool.jaxlint.per-file-ignores]\n"x.py" = "JAX2"', "per-file-ignores.'x.py'"),
])
def test_config_values_are_type_checked_alike(tmp_path, capsys, section, key):
    """A list of strings, for codes and for globs alike (a string used to pass for codes only)."""
    write(tmp_path, "pyproject.toml", f"[tool.jaxlint]\n{section}\n")
    p = write(tmp_path, "bad.py", BAD)
    code, out, err = run(capsys, "check", str(p))
    assert code == 2 and out == ""
    assert f"[tool.jaxlint] {key} must be a list of strings" in err
    # and the section itself must be a table
    cfg = write(tmp_path, "other.toml", 'tool = {jaxlint = "JAX2"}\n')
    code, _, err = run(capsys, "check", "--config", str(cfg), str(p))
    assert code == 2 and "[tool.jaxlint] must be a table" in err


def test_a_path_with_nothing_to_check_is_said_not_silent(tmp_path, capsys):
    write(tmp_path, "empty/notes.txt", "not python\n")
    write(tmp_path, "empty/.venv/pyvenv.cfg", "")
    write(tmp_path, "empty/.venv/lib/m.py", BAD)  # skipped: a virtualenv
    empty = str(tmp_path / "empty")
    code, out, err = run(capsys, "check", empty)
    assert (code, out) == (0, "")
    assert err == f"jaxlint: no Python files or notebooks found under {empty}\n"
    code, out, err = run(capsys, "check", "--format", "json", empty)
    assert (code, out) == (0, "[]\n") and "no Python files or notebooks found" in err
    # named per path; the other paths are still checked
    src = write(tmp_path, "src/bad.py", BAD).parent
    code, out, err = run(capsys, "check", str(src), empty)
    assert code == 1 and out.count("JAX20") == 2
    assert err == f"jaxlint: no Python files or notebooks found under {empty}\n"
    # everything excluded by the config counts as nothing found
    write(tmp_path, "src/pyproject.toml", '[tool.jaxlint]\nextend-exclude = ["bad.py"]\n')
    code, out, err = run(capsys, "check", str(src))
    assert (code, out) == (0, "") and f"found under {src}" in err


def test_a_missing_path_beside_a_real_one_is_named_and_the_real_one_checked(tmp_path, capsys):
    """`jaxlint check train.py nonexistent.py`: the findings of train.py, the missing path said on
    stderr, exit 2 at the end (one missing path must not hide the others)."""
    p = write(tmp_path, "train.py", BAD)
    code, out, err = run(capsys, "check", str(p), str(tmp_path / "nonexistent.py"))
    assert code == 2
    assert [line.split(": ")[1].split()[0] for line in out.splitlines()] == ["JAX201", "JAX202"]
    assert err == f"jaxlint: no such file or folder: {tmp_path / 'nonexistent.py'}\n"


def test_closing_line_of_text_output_counts_findings_files_and_fixes(tmp_path, capsys):
    """Text output ends with one summary line on stderr; stdout stays flake8's format, and the
    machine formats carry no such line."""
    bad = write(tmp_path, "bad.py", BAD)
    write(tmp_path, "good.py", GOOD)
    main(["check", "--no-cache", str(tmp_path)])
    out, err = capsys.readouterr()
    assert all(line.startswith(str(tmp_path)) for line in out.splitlines())
    assert err == "jaxlint: 2 findings in 1 file of 2 checked; `jaxlint explain CODE` explains a rule.\n"
    main(["check", "--no-cache", str(write(tmp_path, "g2.py", GOOD))])
    assert capsys.readouterr()[1] == "jaxlint: no findings in 1 file checked.\n"
    for fmt in ("json", "github", "sarif"):
        main(["check", "--no-cache", "--format", fmt, str(bad)])
        assert capsys.readouterr()[1] == "", fmt


def test_closing_line_counts_the_fixable_findings_marked_with_a_star(capsys):
    fixtures = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "fix")
    main(["check", "--no-cache", "-j1", fixtures])  # in-process: no fork of a process that may hold jax
    out, err = capsys.readouterr()
    starred = sum(" [*] " in line for line in out.splitlines())
    files = len({line.split(":")[0] for line in out.splitlines()})
    assert starred > 0
    assert err.endswith(f"jaxlint: {len(out.splitlines())} findings in {files} files of "
                        f"{err.split(' of ')[1].split()[0]} checked, {starred} fixable with --fix (marked [*]); "
                        "`jaxlint explain CODE` explains a rule.\n"), err


def test_check_reads_stdin_with_a_display_name_and_its_project_config(tmp_path):
    """`jaxlint check - --stdin-display-name PATH` (editors that do not go through flake8): the
    findings carry PATH, and [tool.jaxlint] is the one above PATH."""
    (tmp_path / "src").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint]\n[tool.jaxlint.per-file-ignores]\n"src/ignored.py" = ["JAX2"]\n')

    def stdin_check(*argv):
        return subprocess.run([sys.executable, "-m", "jaxlint", "check", "-", *argv], input=BAD, capture_output=True,
                              text=True, cwd=tmp_path)

    proc = stdin_check("--stdin-display-name", "src/train.py")
    assert proc.returncode == 1
    assert [line.split(" ")[0:2] for line in proc.stdout.splitlines()] == [["src/train.py:12:15:", "JAX201"],
                                                                            ["src/train.py:13:9:", "JAX202"]]
    proc = stdin_check("--stdin-display-name", "src/ignored.py")
    assert (proc.returncode, proc.stdout) == (0, "")
    proc = stdin_check()
    assert proc.stdout.splitlines()[0].startswith("stdin:12:15: JAX201 ")
    proc = stdin_check("other.py")
    assert proc.returncode == 2 and "`-` (read the source from stdin) is the only path" in proc.stderr


def test_only_missing_paths_give_the_error_and_no_closing_line(tmp_path, capsys):
    """Issue 40: after `no such file or folder`, a closing line "no findings in 0 files checked"
    only repeated it. With a real path beside the missing one, the closing line stays."""
    code = main(["check", "--no-cache", str(tmp_path / "nope.py"), str(tmp_path / "gone")])
    err = capsys.readouterr()[1]
    assert code == 2
    assert err == (f"jaxlint: no such file or folder: {tmp_path / 'nope.py'}\n"
                   f"jaxlint: no such file or folder: {tmp_path / 'gone'}\n")
    p = write(tmp_path, "good.py", GOOD)
    code = main(["check", "--no-cache", str(p), str(tmp_path / "nope.py")])
    err = capsys.readouterr()[1]
    assert code == 2
    assert err == (f"jaxlint: no such file or folder: {tmp_path / 'nope.py'}\n"
                   "jaxlint: no findings in 1 file checked.\n")


def _generated(folder) -> tuple:
    """A 2 MB generated module (protobuf-style constants), over jaxlint's size limit: (path, its
    length in characters as jaxlint prints it)."""
    from jaxlint.prefilter import MAX_SOURCE_CHARS

    text = "import jax.numpy as jnp\n" + "".join(f"FIELD_{i} = jnp.int32({i})\n" for i in range(80_000))
    path = write(folder, "gen/big_pb2.py", text)
    assert path.stat().st_size > 2 * MAX_SOURCE_CHARS
    return str(path), f"{len(text):,}"


def test_a_generated_module_over_the_size_limit_is_a_notice_not_a_failure(tmp_path, capsys):
    """Issue 40: a 2 MB generated file was a JAX000 finding with exit 1, failing CI on generated
    code. It is named on stderr, the exit code is the other files' (here 0); the cache keeps it so."""
    big, chars = _generated(tmp_path)
    write(tmp_path, "pyproject.toml", "[project]\nname = 'demo'\n")
    write(tmp_path, "good.py", GOOD)
    notice = (f"jaxlint: {big}: not analyzed: the module has {chars} characters, over jaxlint's limit of "
              "1,000,000 per file")
    for run_ in ("cold", "from the cache"):
        code = main(["check", str(tmp_path)])
        out, err = capsys.readouterr()
        assert (code, out) == (0, ""), run_
        first, closing = err.splitlines()
        assert first.startswith(notice) and first.endswith(
            "; the exit code is unaffected (--fail-on-oversize reports it as JAX000)"), (run_, first)
        assert closing == "jaxlint: no findings in 2 files checked.", run_
    code = main(["check", "--format", "json", str(big)])
    out, err = capsys.readouterr()
    assert (code, json.loads(out)) == (0, []) and err.startswith(notice)


def test_fail_on_oversize_makes_it_a_jax000_finding(tmp_path, capsys):
    big, chars = _generated(tmp_path)
    write(tmp_path, "pyproject.toml", "[project]\nname = 'demo'\n")
    for argv in (["check", "--fail-on-oversize", big], ["check", "--no-cache", "--fail-on-oversize", big]):
        code, out, err = run(capsys, *argv)
        assert (code, err) == (1, "")
        assert out.startswith(f"{big}:1:1: JAX000 not analyzed: the module has {chars} characters, over")
        assert out.count("\n") == 1
    write(tmp_path, "pyproject.toml", "[tool.jaxlint]\nfail-on-oversize = true\n")
    code, out, _ = run(capsys, "check", big)
    assert code == 1 and out.startswith(f"{big}:1:1: JAX000 not analyzed")
    # ignoring JAX000 still leaves the notice: the file is never silently skipped
    code, out, err = run(capsys, "check", "--extend-ignore", "JAX000", big)
    assert (code, out) == (0, "") and err.startswith(f"jaxlint: {big}: not analyzed")
    assert err.endswith("; the exit code is unaffected (JAX000 is not selected here)\n")
    # a value that is not a boolean would silently keep the default: a usage error
    write(tmp_path, "pyproject.toml", '[tool.jaxlint]\nfail-on-oversize = "yes"\n')
    code, out, err = run(capsys, "check", big)
    assert (code, out) == (2, "")
    assert err == (f"jaxlint: config error: {tmp_path / 'pyproject.toml'}: [tool.jaxlint] fail-on-oversize must "
                   "be true or false, not 'yes'\n")


def test_a_notebook_over_the_size_limit_is_a_notice_too(tmp_path, capsys):
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": "x = 1\n" * 200_000}]
    nb = write(tmp_path, "big.ipynb", json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    code = main(["check", "--no-cache", str(nb)])
    out, err = capsys.readouterr()
    assert (code, out) == (0, "") and err.startswith(f"jaxlint: {nb}: not analyzed: the module has ")


def test_missing_path_and_bad_option_exit_2(tmp_path, capsys):
    code, _, err = run(capsys, "check", str(tmp_path / "nope.py"))
    assert code == 2 and "no such file or folder" in err
    assert run(capsys, "check", "--format", "xml", str(tmp_path))[0] == 2


def test_parallel_and_serial_runs_agree(tmp_path, capsys):
    for i in range(12):
        write(tmp_path, f"m{i:02}.py", BAD if i % 2 else GOOD)
    _, serial, _ = run(capsys, "check", "-j", "1", str(tmp_path))
    _, parallel, _ = run(capsys, "check", "-j", "2", str(tmp_path))
    assert serial == parallel
    assert len(serial.splitlines()) == 12


def test_parallel_results_come_back_in_the_order_of_the_files(tmp_path, capsys):
    """Runs check the largest files first, -j1 too; the results must still come back in the
    order of the files asked for (the caller pairs them with its files: the result cache)."""
    files = []
    for i in range(12):  # sizes in no particular order, so largest-first reorders them
        write(tmp_path, f"m{i:02}.py", (BAD if i % 3 else GOOD) + "# pad\n" * ((i * 7) % 12 * 40))
        files.append(str(tmp_path / f"m{i:02}.py"))
    # in a fresh interpreter: forking this test process (which may have imported jax) could hang
    code = ("import json, sys\n"
            "from jaxlint.cli import run_files\n"
            "from jaxlint.registry import RULE_CODES\n"
            "files = sys.argv[1:]\n"
            "out = [[[r.path, [(f.line, f.code) for f in r.findings if f.opt_in is None]]\n"
            "        for r in run_files(files, RULE_CODES, jobs)]\n"
            "       for jobs in (2, 1)]\n"
            "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", code, *files], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    parallel, serial = json.loads(proc.stdout)
    assert [path for path, _ in parallel] == files
    assert parallel == serial
    assert sum(len(found) for _, found in serial) == 16  # two default findings in each of the 8 BAD files


def test_rules_and_explain(capsys):
    code, out, _ = run(capsys, "rules")
    assert code == 0
    codes = [line.split()[0] for line in out.splitlines()]
    assert codes == sorted(codes) and {"JAX101", "JAX102", "JAX103", "JAX201", "JAX202", "JAX203"} <= set(codes)
    code, out, _ = run(capsys, "explain", "jax101")
    assert code == 0
    assert out.startswith("JAX101 jit-in-loop")
    for heading in ("What it does", "Why it is slow or wrong", "Example", "Use instead", "# noqa: JAX101"):
        assert heading in out
    assert run(capsys, "explain", "JAX999")[0] == 2


def test_rules_prints_each_rules_whole_one_sentence_short_description(capsys):
    """`jaxlint rules` and SARIF's shortDescription give each rule's ``short``: one whole sentence
    written for the purpose (a split of the summary at ". " cut JAX204 mid-sentence)."""
    from jaxlint.registry import CATALOG
    from jaxlint.reporters import sarif as format_sarif

    _, out, _ = run(capsys, "rules")
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert set(lines) == {r.code for r in CATALOG}
    for r in CATALOG:
        short = r.short
        assert short.endswith(".") and ". " not in short and short[0].isupper(), (r.code, short)
        assert 20 <= len(short) <= 110, (r.code, len(short))
        assert lines[r.code].endswith(" " + short), lines[r.code]
    sarif = json.loads(format_sarif([], root="."))
    got = {rule["id"]: rule["shortDescription"]["text"] for rule in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert got == {r.code: r.short for r in CATALOG}


def test_explain_accepts_every_listed_code_and_every_rule_name(capsys):
    """Whatever `jaxlint rules` and the README's rule table list, JAX000 included, by code or name."""
    _, out, _ = run(capsys, "rules")
    listed = [line.split()[:2] for line in out.splitlines()]
    assert listed[0] == ["JAX000", "parse-error"]
    readme = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md"),
                  encoding="utf-8").read()
    table = [row.split("|")[1:3] for row in readme.splitlines() if row.startswith("| JAX")]
    assert sorted([c.strip(), n.strip()] for c, n in table) == sorted(listed)
    for code, name in listed:
        for spelling in (code, code.lower(), name):
            rc, text, err = run(capsys, "explain", spelling)
            assert rc == 0 and err == "" and text.startswith(f"{code} {name}\n"), spelling
    _, text, _ = run(capsys, "explain", "JAX000")
    assert "What it does" in text and "--extend-ignore JAX000" in text and "# noqa: JAX000" not in text
    rc, _, err = run(capsys, "explain", "host-transfer")
    assert rc == 2 and "unknown rule 'host-transfer'" in err


def test_console_script_runs_as_module(tmp_path):
    p = write(tmp_path, "bad.py", BAD)
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", str(p)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stdout.count("JAX20") == 2
    assert proc.stderr == "jaxlint: 2 findings in 1 file of 1 checked; `jaxlint explain CODE` explains a rule.\n"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_static_path_never_imports_jax(tmp_path, jobs):
    for i in range(10):
        write(tmp_path, f"m{i}.py", BAD)
    code = ("import sys; from jaxlint.cli import main; rc = main(['check', '-j', %r, %r]); "
            "assert 'jax' not in sys.modules and 'jaxlib' not in sys.modules, 'jax imported'; "
            "print('rc', rc)") % (jobs, str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip().endswith("rc 1"), proc.stderr


def test_config_option_reads_that_file(tmp_path, capsys):
    cfg = write(tmp_path, "conf/pyproject.toml", "[tool.jaxlint]\nselect = [\"JAX202\"]\n")
    p = write(tmp_path, "src/bad.py", BAD)
    _, out, _ = run(capsys, "check", "--config", str(cfg), str(p))
    assert [line.split()[1] for line in out.splitlines()] == ["JAX202"]
    code, _, err = run(capsys, "check", "--config", str(tmp_path / "missing.toml"), str(p))
    assert code == 2 and "config error" in err


# --------------------------------------------------------------------------- opt-in findings


def _opt_in_rule():
    """A rule that reports one default and one opt-in finding, to test the front ends' filtering."""
    import ast as _ast

    from jaxlint.rule import Rule

    class Both(Rule):
        code, name = "JAX201", "host-transfer-in-loop"

        def check(self, model):
            for node in _ast.walk(model.tree):
                if isinstance(node, _ast.Assign):
                    target = node.targets[0].id
                    yield self.finding(node, f"assign {target}", opt_in="test code" if target == "b" else None)

    return Both


def test_opt_in_findings_only_with_pedantic(tmp_path, capsys, monkeypatch):
    import jaxlint.registry as registry

    path = tmp_path / "m.py"
    path.write_text("import jax\na = 1\nb = 2\n")
    monkeypatch.setattr(registry, "ALL_RULES", [_opt_in_rule()], raising=False)
    monkeypatch.setattr(registry, "RULES_BY_CODE", {"JAX201": _opt_in_rule()}, raising=False)
    assert cli.main(["check", "--no-cache", "--format", "json", str(path)]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [r["message"] for r in rows] == ["assign a"]
    assert cli.main(["check", "--no-cache", "--format", "json", "--pedantic", str(path)]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [(r["message"], r.get("opt_in")) for r in rows] == [("assign a", None), ("assign b", "test code")]


def test_pedantic_in_the_config_and_its_type(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint]\npedantic = true\n")
    cfg = load_config(str(tmp_path))
    assert cfg.pedantic is True
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint]\npedantic = "yes"\n')
    with pytest.raises(ConfigError, match="pedantic must be true or false"):
        load_config(str(tmp_path))


def test_opt_in_findings_survive_the_cache(tmp_path):
    from jaxlint.cache import ResultCache
    from jaxlint.engine import FileResult
    from jaxlint.rule import Finding

    src = tmp_path / "m.py"
    src.write_text("x = 1\n")
    res = FileResult(str(src), findings=[Finding(1, 0, "JAX201", "m", "n", str(src), opt_in="test code")])
    res.content_hash = content_hash(src.read_bytes())
    cache = ResultCache(str(tmp_path / "c"), "k")
    cache.put(res)
    cache.save()
    again = ResultCache(str(tmp_path / "c"), "k").get(str(src))
    assert again is not None and again.findings[0].opt_in == "test code"


# --------------------------------------------------------------------------- conventions (issue 26)

_PERTURB = textwrap.dedent("""
    import jax

    def perturb(x):
        key = jax.random.PRNGKey(0)
        return x + jax.random.normal(key, x.shape)
""")


@pytest.fixture
def _default_conventions():
    from jaxlint import conventions

    yield
    conventions.configure(None)


def test_conventions_in_the_config_extend_and_replace(tmp_path, capsys, _default_conventions):
    (tmp_path / "m.py").write_text(_PERTURB)
    assert main(["check", "--no-cache", str(tmp_path / "m.py")]) == 0  # `perturb` is no step method by default
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint.conventions]\nextend-step-methods = ["Perturb"]\n')
    assert main(["check", "--no-cache", "-j1", str(tmp_path / "m.py")]) == 1
    assert "JAX503" in capsys.readouterr().out
    cfg = load_config(str(tmp_path))
    assert "perturb" in cfg.conventions["step-methods"] and "step" in cfg.conventions["step-methods"]
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint.conventions]\nstep-methods = ["perturb"]\n')
    assert load_config(str(tmp_path)).conventions == {"step-methods": ["perturb"]}


def test_conventions_change_the_cache_key(tmp_path, capsys, _default_conventions):
    (tmp_path / "m.py").write_text(_PERTURB)
    assert main(["check", str(tmp_path / "m.py")]) == 0
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint.conventions]\nextend-step-methods = ["perturb"]\n')
    assert main(["check", str(tmp_path / "m.py")]) == 1  # not served from the first run's cache


@pytest.mark.parametrize("body, message", [
    ('step-method = ["x"]', "unknown [tool.jaxlint.conventions] key 'step-method' (valid: benchmark-names, check-calls, check-functions"),
    ('step-methods = "step"', "must be a list of non-empty strings"),
    ('extend-step-methods = [""]', "must be a list of non-empty strings"),
    ('step-methods = [1]', "must be a list of non-empty strings"),
])
def test_bad_conventions_are_a_usage_error(tmp_path, capsys, body, message, _default_conventions):
    (tmp_path / "pyproject.toml").write_text(f"[tool.jaxlint.conventions]\n{body}\n")
    (tmp_path / "m.py").write_text(_PERTURB)
    assert main(["check", "--no-cache", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_the_conventions_command_lists_the_words_in_force(tmp_path, capsys, _default_conventions):
    assert main(["conventions", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    from jaxlint.conventions import CONVENTIONS

    for c in CONVENTIONS:
        assert out.count(f"\n{c.key} (") + out.startswith(f"{c.key} (") == 1
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint.conventions]\nextend-pacing-names = ["blit"]\n')
    assert main(["conventions", str(tmp_path)]) == 0
    assert "pacing-names (exact): blit, clear_output" in capsys.readouterr().out


# --------------------------------------------------------------------------- evidence (issue 26)

_STEP_LOOP = textwrap.dedent("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return x * 2, jnp.sum(x)

    def run(x, n):
        for i in range(n):
            x, loss = step(x)
            print(float(loss))
        return x

    def forward(x):
        key = jax.random.PRNGKey(0)
        return x + jax.random.normal(key, x.shape)
""")


def test_json_findings_carry_their_evidence(tmp_path, capsys):
    (tmp_path / "m.py").write_text(_STEP_LOOP)
    assert main(["check", "--no-cache", "--format", "json", str(tmp_path / "m.py")]) == 1
    rows = {r["code"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["JAX201"]["evidence"][0] == "the loop on line 10 calls compiled code every iteration (`step` on line 11)"
    assert rows["JAX503"]["evidence"] == [
        "`forward` is called nowhere in this module; its name matches the convention `step-methods` (a method "
        "called once per step)"]


def test_evidence_survives_the_result_cache(tmp_path, capsys):
    (tmp_path / "m.py").write_text(_STEP_LOOP)
    args = ["check", "--cache-dir", str(tmp_path / "c"), "--format", "json", str(tmp_path / "m.py")]
    assert main(args) == 1
    first = capsys.readouterr().out
    assert main(args) == 1
    assert capsys.readouterr().out == first


def test_explain_finding_prints_the_rule_the_evidence_and_opt_in_reason(tmp_path, capsys):
    (tmp_path / "m.py").write_text(_STEP_LOOP)
    assert main(["check", "--no-cache", "--explain-finding", f"{tmp_path / 'm.py'}:12"]) == 1
    out = capsys.readouterr().out
    assert ":12:15: JAX201 host-transfer-in-loop" in out  # `float(` after 8 spaces and `print(`
    assert "  rule: Finds `float(x)`" in out
    assert "    - the loop on line 10 calls compiled code every iteration (`step` on line 11)" in out
    assert main(["check", "--no-cache", "--explain-finding", f"{tmp_path / 'm.py'}:3"]) == 0
    assert "no finding on line 3" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["m.py", "m.py:0", "m.py:x", ":3"])
def test_explain_finding_needs_a_path_and_a_line(tmp_path, capsys, value):
    assert main(["check", "--explain-finding", value]) == 2
    assert "--explain-finding takes PATH:LINE" in capsys.readouterr().err


def test_every_kind_of_loop_and_key_finding_carries_evidence(tmp_path, capsys):
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import time
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x):
            return x * 2

        def run(x, n, key):
            for i in range(n):
                f = jax.jit(lambda v: v * 2.0)
                x = f(x)
            a = jax.random.normal(key, (3,))
            b = jax.random.uniform(key, (3,))
            return a, b, x

        def timed(x):
            t0 = time.perf_counter()
            y = step(x)
            return y, time.perf_counter() - t0
    """))
    assert main(["check", "--no-cache", "--format", "json", str(tmp_path / "m.py")]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert {r["code"] for r in rows} == {"JAX101", "JAX502", "JAX204"}
    for r in rows:
        assert r["evidence"] and all(isinstance(e, str) and e for e in r["evidence"]), r
    by = {r["code"]: r["evidence"] for r in rows}
    assert "inside the loop on line 11" in by["JAX101"][0]
    assert "read the same binding of `key`" in by["JAX502"][0]
    assert "`step(x)` on line 20" in by["JAX204"][0]


def test_findings_in_traced_code_say_how_the_function_is_traced(tmp_path, capsys):
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import jax

        def body(i, x):
            print(x)
            return x

        def run(x):
            return jax.lax.fori_loop(0, 10, body, x)
    """))
    assert main(["check", "--no-cache", "--format", "json", str(tmp_path / "m.py")]) == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert row["code"] == "JAX602"
    assert row["evidence"] == ["abstract-values (proven): `body` runs in a jax.lax.fori_loop body, on abstract values"]
    assert row["facts"] == [{"fact": "abstract-values", "status": "proven",
                             "why": "`body` runs in a jax.lax.fori_loop body, on abstract values"}]


@pytest.mark.parametrize("folder", ["JAX103_static_arg_churn", "JAX205_loop_invariant_upload", "JAX304_shape_churn",
                                    "JAX101_jit_in_loop", "JAX201_host_transfer_in_loop", "JAX502_key_reuse"])
def test_the_loop_rules_fixture_findings_all_carry_evidence(folder, capsys):
    path = os.path.join(ROOT, "fixtures", folder, "bad.py")
    main(["check", "--no-cache", "--pedantic", "--format", "json", path])
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r.get("evidence") for r in rows), [r for r in rows if not r.get("evidence")]


def test_explain_finding_says_why_a_line_has_no_finding(tmp_path, capsys):
    # issue 37 ("why not"): on a line with no finding, the rules that looked at it and the fact that
    # kept each quiet; a line no rule looked at says so
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x):
            return x * 2

        def train(x, n):
            for i in range(n):
                x = step(x)
                if i % 100 == 0:
                    print(float(x.sum()))
            return x

        @jax.jit
        def pad(x, mask=None):
            if mask is not None:
                return jnp.zeros(x.shape[0])
            return x[x > 0]
    """))
    assert main(["check", "--no-cache", "--explain-finding", f"{path}:13"]) == 0
    out = capsys.readouterr().out
    assert out == (f"{path}:13: rules that looked at this line and made no finding, and why:\n"
                   "  JAX201 host-transfer-in-loop: per-step (disproven): periodic: the `if i % 100 == 0` on line 12 "
                   "runs it only now and then in the loop on line 10\n")
    assert main(["check", "--no-cache", "--explain-finding", f"{path}:2"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no finding on line 2" in captured.err and "no rule looked at it" in captured.err


def test_explain_finding_names_the_wait_a_loop_already_has(tmp_path, capsys):
    # a fetch in a loop that already waits for the device every iteration (the action a host environment
    # needs) adds no wait: JAX201 stays quiet, and "why not" says so instead of "no rule looked at it"
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp

        @jax.jit
        def policy(p, obs):
            return jnp.argmax(p @ obs)

        @jax.jit
        def train_step(p, obs):
            loss = jnp.sum(p @ obs)
            return p - 0.1 * loss, loss

        def run(env, p, obs, n):
            losses = []
            for i in range(n):
                action = policy(p, obs)
                obs = env.step(int(action))
                p, loss = train_step(p, obs)
                losses.append(float(loss))
            return losses
    """))
    assert main(["check", "--no-cache", "--explain-finding", f"{path}:20"]) == 0
    out = capsys.readouterr().out
    assert out == (f"{path}:20: rules that looked at this line and made no finding, and why:\n"
                   "  JAX201 host-transfer-in-loop: a wait this sync adds (disproven): the loop already waits for "
                   "the device on line 18\n")
