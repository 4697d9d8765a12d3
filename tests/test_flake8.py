"""The flake8 front end reports exactly what `jaxlint check` reports, and never imports jax."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>JAX\d+) (?P<msg>.*)$")


def parse(out: str) -> set:
    rows = set()
    for line in out.splitlines():
        m = LINE.match(line)
        assert m, f"unexpected output line: {line!r}"
        msg = m["msg"].removeprefix("[*] ")  # jaxlint check marks fixable findings; flake8 never does
        rows.add((str(Path(m["path"]).resolve()), int(m["line"]), int(m["col"]), m["code"], msg))
    return rows


def flake8(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8", "--select", "JAX", *args],
                          capture_output=True, text=True, cwd=cwd)


def test_flake8_and_jaxlint_check_agree_on_fixtures():
    f8 = flake8("-j1", str(FIXTURES))
    jl = subprocess.run([sys.executable, "-m", "jaxlint", "check", "-j1", str(FIXTURES)],
                        capture_output=True, text=True)
    assert f8.returncode == 1 and jl.returncode == 1, (f8.stderr, jl.stderr)
    # flake8 reads only .py files; notebook findings (`path:cell N:line L:...`) are jaxlint's own
    py_only = "".join(line + "\n" for line in jl.stdout.splitlines() if ".ipynb:" not in line)
    assert py_only != jl.stdout  # the fixtures do include a notebook finding
    from_flake8, from_cli = parse(f8.stdout), parse(py_only)
    assert len(from_cli) >= 10
    assert from_flake8 == from_cli


def test_plugin_is_registered():
    proc = subprocess.run([sys.executable, "-m", "flake8", "--version"], capture_output=True, text=True)
    assert "flake8-jax: " in proc.stdout  # flake8 names a plugin by its distribution


BAD = textwrap.dedent("""\
    import jax

    @jax.jit
    def step(x):
        return x * 2

    def run(x, n):
        for i in range(n):
            x = step(x)
            print(float(x)){noqa}
        return x
""")


@pytest.mark.parametrize("noqa, expected", [("", 1), ("  # noqa: JAX201", 0), ("  # noqa", 0),
                                             ("  # noqa: JAX202", 1)])
def test_flake8_honours_noqa_for_plugin_codes(tmp_path, noqa, expected):
    p = tmp_path / "t.py"
    p.write_text(BAD.format(noqa=noqa))
    out = flake8(str(p), cwd=tmp_path).stdout
    assert len(out.splitlines()) == expected
    if expected:
        assert ":10:15: JAX201 " in out


def test_flake8_extend_ignore_and_config(tmp_path):
    p = tmp_path / "t.py"
    p.write_text(BAD.format(noqa=""))
    assert flake8("--extend-ignore", "JAX201", str(p), cwd=tmp_path).stdout == ""
    (tmp_path / ".flake8").write_text("[flake8]\nextend-ignore = JAX2\n")
    assert flake8(str(p), cwd=tmp_path).stdout == ""


def test_flake8_jaxlint_pedantic_reports_opt_in_findings(tmp_path):
    """A sync in a test module is right but rarely worth changing (an opt-in finding): flake8
    reports it only with --jaxlint-pedantic, or ``jaxlint-pedantic = true`` in its config, and then
    as `jaxlint check --pedantic` does."""
    p = tmp_path / "test_rollout.py"
    p.write_text(BAD.format(noqa=""))
    assert flake8(str(p), cwd=tmp_path).stdout == ""
    proc = flake8("--jaxlint-pedantic", str(p), cwd=tmp_path)
    # the sync in the test's loop (JAX201), and its jitted step rebinding `x` undonated (JAX803)
    assert proc.returncode == 1 and sorted(line.split(" ", 2)[:2] for line in proc.stdout.splitlines()) == [
        [f"{p}:10:15:", "JAX201"], [f"{p}:3:2:", "JAX803"]], proc.stdout + proc.stderr
    jl = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", "--pedantic", str(p)],
                        capture_output=True, text=True, cwd=tmp_path)
    assert parse(proc.stdout) == parse(jl.stdout)
    assert subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", str(p)],
                          capture_output=True, text=True, cwd=tmp_path).stdout == ""
    (tmp_path / ".flake8").write_text("[flake8]\njaxlint-pedantic = true\n")
    assert ":10:15: JAX201 " in flake8(str(p), cwd=tmp_path).stdout


TWO = textwrap.dedent("""\
    import jax

    def run(params, batches, f):
        for b in batches:
            step = jax.jit(lambda p, x: p * x)
            params = step(params, b)
            print(float(params))
        return params
""")


def _both(tmp_path, *paths: str, flake8_args=()) -> tuple:
    """(flake8's rows, jaxlint check's rows) for ``paths`` under ``tmp_path``."""
    f8 = flake8(*flake8_args, *paths, cwd=tmp_path)
    jl = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", *paths], capture_output=True,
                        text=True, cwd=tmp_path)
    assert f8.returncode in (0, 1) and jl.returncode in (0, 1), f8.stderr + jl.stderr
    return parse(f8.stdout), parse(jl.stdout)


def test_flake8_reads_tool_jaxlint_like_the_cli(tmp_path):
    """The editor sees what the CLI reports: select, per-file-ignores, exclude and pedantic of
    the project's [tool.jaxlint] apply to the plugin's findings too."""
    (tmp_path / "t.py").write_text(TWO)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "u.py").write_text(TWO)
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "v.py").write_text(TWO)
    (tmp_path / "test_w.py").write_text(BAD.format(noqa=""))
    files = ["t.py", "sub/u.py", "gen/v.py", "test_w.py"]
    f8, jl = _both(tmp_path, *files)
    assert {r[3] for r in f8} == {"JAX101", "JAX201"} and f8 == jl  # no config: both report both codes

    (tmp_path / "pyproject.toml").write_text(
        '[tool.jaxlint]\nselect = ["JAX2"]\nextend-exclude = ["gen"]\npedantic = true\n'
        '[tool.jaxlint.per-file-ignores]\n"sub/*" = ["JAX201"]\n')
    f8, jl = _both(tmp_path, ".")  # a folder walk: both leave out what [tool.jaxlint] excludes
    assert f8 == jl, (f8, jl)
    got = sorted((Path(r[0]).name, r[3]) for r in f8)
    # JAX101 not selected; sub/ ignores JAX201; gen/ excluded; the test file's opt-in sync shown (pedantic)
    assert got == [("t.py", "JAX201"), ("test_w.py", "JAX201")], got


def test_flake8_options_narrow_tool_jaxlint_further(tmp_path):
    """flake8's own --select/--extend-ignore apply on top of [tool.jaxlint]: a finding is shown
    only when both allow it; [tool.jaxlint] cannot bring back what flake8 ignores."""
    (tmp_path / "t.py").write_text(TWO)
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint]\nselect = ["JAX1"]\n')
    f8, _ = _both(tmp_path, "t.py")
    assert {r[3] for r in f8} == {"JAX101"}
    f8, _ = _both(tmp_path, "t.py", flake8_args=("--extend-ignore", "JAX101"))
    assert f8 == set()


def test_flake8_with_a_bad_tool_jaxlint_says_so_on_the_file(tmp_path):
    """A bad [tool.jaxlint] is `jaxlint check`'s usage error (exit 2); flake8 has no such exit,
    so the plugin reports it as one JAX000 line on each file and checks nothing there."""
    (tmp_path / "t.py").write_text(TWO)
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint]\nselect = ["FOO"]\n')
    proc = flake8("t.py", cwd=tmp_path)
    (line,) = proc.stdout.splitlines()
    assert ":1:1: JAX000 jaxlint config error, nothing checked:" in line and "'FOO'" in line, proc.stdout
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", "t.py"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 2 and "'FOO'" in proc.stderr


def test_flake8_on_a_file_does_not_import_jax(tmp_path):
    p = tmp_path / "t.py"
    p.write_text(BAD.format(noqa=""))
    code = textwrap.dedent(f"""
        import sys
        from flake8.main.application import Application
        app = Application()
        app.run(["--select", "JAX", "-j1", {str(p)!r}])
        assert app.result_count == 1, app.result_count
        assert "jaxlint" in sys.modules, "the plugin did not run"
        leaked = sorted(m for m in sys.modules if m == "jax" or m.startswith(("jax.", "jaxlib")))
        assert not leaked, leaked
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr


def _generated(folder: Path) -> Path:
    """A 2 MB generated module (a serialized blob: flake8 itself takes 10 s on 2 MB of statements),
    over jaxlint's size limit."""
    from jaxlint.prefilter import MAX_SOURCE_CHARS

    path = folder / "big_pb2.py"
    path.write_text("import jax.numpy as jnp\n\nBLOB = jnp.asarray(b'" + "AQID" * 500_000 + "')\n")
    assert path.stat().st_size > 2 * MAX_SOURCE_CHARS
    return path


def test_flake8_says_nothing_on_a_generated_module_unless_asked(tmp_path):
    """Issue 40: the same as `jaxlint check` (tests/test_cli.py): no finding, so flake8 exits 0;
    `fail-on-oversize = true` in [tool.jaxlint] makes it a JAX000 finding."""
    big = _generated(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    proc = flake8(str(big), cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint]\nfail-on-oversize = true\n")
    proc = flake8(str(big), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.startswith(f"{big}:1:1: JAX000 not analyzed: the module has ") and proc.stdout.count("\n") == 1
