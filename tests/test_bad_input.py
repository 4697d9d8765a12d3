"""Hostile input: one clean line per broken file, the other files still checked, never a traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ruletools import without_closing_line
from jaxlint.engine import check_source
from jaxlint_rules import ALL_RULES

RULES = [r() for r in ALL_RULES]

GOOD_BAD = textwrap.dedent("""\
    import jax

    @jax.jit
    def step(x):
        return x * 2

    def run(x, n):
        for i in range(n):
            x = step(x)
            print(float(x))
        return x
""")

NESTED_100 = "import jax\nx = " + "(" * 100 + "1" + ")" * 100 + "\n"
NESTED_CALLS = "import jax.numpy as jnp\nx = " + "jnp.abs(" * 150 + "1" + ")" * 150 + "\n"
ELIF_2000 = "import jax\nif x == 0:\n    pass\n" + "".join(f"elif x == {i}:\n    pass\n" for i in range(1, 2000))
LONG_FUNCTION = "import jax\nimport jax.numpy as jnp\ndef f(x):\n" + "".join(
    f"    x = jnp.sin(x) + {i}\n" for i in range(5000)) + "    return x\n"

CASES = {
    "syntax_error": (b"import jax\ndef f(:\n    pass\n", "JAX000", 2),
    "undecodable": (b"import jax\nx = '\xff\xfe\xfa'\n", "JAX000", 1),
    "bad_coding_cookie": (b"# -*- coding: klingon -*-\nimport jax\n", "JAX000", 1),
    "null_byte": (b"import jax\nx = 1\x00\n", "JAX000", None),
    "deep_parens": (("import jax\nx = " + "(" * 1000 + "1" + ")" * 1000 + "\n").encode(), "JAX000", None),
    "unterminated_string": (b"import jax\nx = '''abc\n", "JAX000", None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_broken_file_gives_one_clean_jax000(name):
    data, code, line = CASES[name]
    res = check_source(data, f"{name}.py", RULES)
    assert [f.code for f in res.findings] == [code]
    f = res.findings[0]
    assert f.message.startswith("could not parse: ") and "\n" not in f.message
    if line is not None:
        assert f.line == line
    assert res.internal_errors == []


@pytest.mark.parametrize("src", [b"", b"\n\n", b"# just a comment\n", NESTED_100.encode(),
                                 NESTED_CALLS.encode(), ELIF_2000.encode(), LONG_FUNCTION.encode()],
                         ids=["empty", "blank", "comment", "nested100", "nested_calls", "elif2000", "long_function"])
def test_valid_but_unusual_files_are_checked_without_errors(src):
    res = check_source(src, "t.py", RULES)
    if sys.version_info < (3, 11) and src == ELIF_2000.encode():
        # 3.10 keeps its recursion limit (its C stack is not safe deeper): one clean JAX000
        assert [(f.code, f.message) for f in res.findings] == [("JAX000", "could not parse: too deeply nested to analyze")]
    else:
        assert res.findings == []
    assert res.internal_errors == []


@pytest.mark.parametrize("transform", [
    lambda s: b"\xef\xbb\xbf" + s,  # BOM
    lambda s: s.replace(b"\n", b"\r\n"),  # CRLF
    lambda s: b"# -*- coding: latin-1 -*-\n" + s.replace(b"x * 2", b"x * 2  # \xe9t\xe9"),
    lambda s: s.replace(b"    ", b"\t"),  # tabs
], ids=["bom", "crlf", "latin1", "tabs"])
def test_encodings_and_line_endings_still_find_the_pitfall(transform):
    src = transform(GOOD_BAD.encode())
    res = check_source(src, "t.py", RULES)
    codes = [f.code for f in res.findings if f.opt_in is None]  # the default ones
    assert codes == ["JAX201"], res.findings


def test_cli_checks_other_files_and_prints_no_traceback(tmp_path):
    for name, (data, _, _) in CASES.items():
        (tmp_path / f"{name}.py").write_bytes(data)
    (tmp_path / "zz_real.py").write_text(GOOD_BAD)
    (tmp_path / "long.py").write_text(LONG_FUNCTION)
    (tmp_path / "elif.py").write_text(ELIF_2000)
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", "-j2", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and without_closing_line(proc.stderr) == ""
    lines = proc.stdout.splitlines()
    deep = 1 if sys.version_info < (3, 11) else 0  # elif.py: too deeply nested for 3.10's limit
    assert sum(" JAX000 could not parse: " in line for line in lines) == len(CASES) + deep
    assert any(line.startswith(str(tmp_path / "zz_real.py") + ":10:") and "JAX201" in line for line in lines)
    assert len(lines) == len(CASES) + 1 + deep


def test_unreadable_path_is_reported_not_raised(tmp_path):
    d = tmp_path / "dir.py"
    d.mkdir()  # a folder named like a module is walked, not read
    (tmp_path / "x.py").write_text(GOOD_BAD)
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 1 and without_closing_line(proc.stderr) == ""


def test_a_syntax_error_names_the_python_grammar_that_rejected_it():
    # A file may be valid on a newer Python than the one jaxlint runs on (PEP 695 on 3.11): the
    # message says which grammar judged it, so the user knows to run jaxlint on a newer Python.
    import sys

    from jaxlint.engine import check_source

    res = check_source("def broken(:\n    pass\n", "x.py", [])
    (f,) = res.findings
    assert f.code == "JAX000"
    assert f.message.endswith(f"(Python {sys.version_info[0]}.{sys.version_info[1]} grammar)"), f.message


PERCENT = """\
# %%
%load_ext autoreload
%autoreload 2
!pip install jax

# %%
import jax
import jax.numpy as jnp

@jax.jit
def step(x):
    return x * 2

x = jnp.ones(3)
for i in range(int(input())):
    x = step(x)
    print(float(x))
"""


def test_percent_script_with_ipython_syntax_is_read_as_cells():
    """A ``# %%`` script (jupytext, VS Code) runs in IPython: its magics and shell escapes are read as a
    notebook's, line numbers kept, and its findings reported."""
    res = check_source(PERCENT, "explore.py", RULES)
    assert [(f.line, f.code) for f in res.findings if f.opt_in is None] == [(17, "JAX201")]


@pytest.mark.parametrize("src", [
    PERCENT.replace("# %%\n", ""),  # IPython syntax without a cell marker: not a percent script
    PERCENT + "\n# %%\ndef broken(:\n    pass\n",  # a real syntax error in a cell
])
def test_ipython_syntax_outside_percent_scripts_or_with_real_errors_stays_unparsable(src):
    res = check_source(src, "explore.py", RULES)
    assert [f.code for f in res.findings] == ["JAX000"]


def test_a_parse_error_under_an_older_python_than_the_project_declares_says_so(tmp_path):
    # fresh AC: `type X = ...` (Python 3.12) in a project requiring >=3.12, read by jaxlint on 3.11
    from jaxlint.engine import check_path
    from ruletools import make_project

    root = make_project(tmp_path, {"proj/pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=3.99"\n',
                                   "proj/m.py": "import jax\nx = = 1\n", "other/m.py": "import jax\nx = = 1\n"})
    (f,) = check_path(str(root / "proj/m.py"), []).findings
    assert f.code == "JAX000" and f.message.endswith(
        "; proj/pyproject.toml requires Python >=3.99: run jaxlint on that Python to check this file")
    assert f.opt_in is None  # `x = = 1` is no newer syntax: an error on every Python
    (g,) = check_path(str(root / "other/m.py"), []).findings
    assert g.code == "JAX000" and "requires Python" not in g.message and g.opt_in is None


@pytest.mark.parametrize("line, what", [
    ("type Batch = dict[str, int]", "a `type` alias statement"),
    ("def first[T](xs: list[T]) -> T:\n    return xs[0]", "a generic function"),
    ("class Box[T]:\n    pass", "a generic class"),
])
def test_syntax_of_a_newer_python_is_said_so_and_opt_in(line, what):
    # fresh AR: a project allowing Python ^3.11 whose module uses a 3.12 `type` alias: valid code, not checked here
    from jaxlint.engine import newer_syntax

    res = check_source(f"import jax\n{line}\n", "m.py", RULES)
    (f,) = res.findings
    if sys.version_info >= (3, 12):
        assert res.findings == [] or f.code != "JAX000"
        return
    assert f.code == "JAX000" and f.opt_in is not None and what in f.message
    assert f.message.endswith("run jaxlint on Python 3.12 or later to check this file")
    assert newer_syntax(f, f"import jax\n{line}\n", running=(3, 12)) is None


def test_newer_syntax_in_a_project_requiring_a_newer_python_is_opt_in(tmp_path):
    from jaxlint.engine import check_path
    from ruletools import make_project

    root = make_project(tmp_path, {"pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=3.99"\n',
                                   "m.py": "import jax\nx = f\"{'a'}{\"b\"}\"\n"})
    (f,) = check_path(str(root / "m.py"), []).findings
    if sys.version_info < (3, 12):
        assert f.code == "JAX000" and f.opt_in.startswith("valid Python 3.12 syntax (an f-string PEP 701 allows)")


def test_a_plain_syntax_error_stays_a_default_finding():
    (f,) = check_source("import jax\ntype = = 3\n", "m.py", RULES).findings
    assert f.code == "JAX000" and f.opt_in is None


def test_the_cli_says_on_stderr_that_a_newer_python_file_was_not_checked(tmp_path, capsys):
    from jaxlint.cli import main

    path = tmp_path / "m.py"
    path.write_text("import jax\ntype Batch = dict[str, int]\n")
    code = main(["check", "--no-cache", str(path)])
    err = capsys.readouterr().err
    if sys.version_info >= (3, 12):
        assert code == 0
        return
    assert code == 0 and f"{path}: not checked: could not parse" in err and "--pedantic reports it as JAX000" in err
    assert main(["check", "--no-cache", "--pedantic", str(path)]) == 1
