"""Jupyter notebooks: `jaxlint check` on .ipynb files (cells as one module, IPython syntax blanked,
findings mapped back to `cell N:line L`), and the IPython extension (`%load_ext jaxlint`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import jaxlint.cli as cli
from ruletools import without_closing_line
from jaxlint.notebook import cell_lines, join, read_cells, timed_lines, NotebookError
from jaxlint.trace.userfiles import UserFiles

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NB = os.path.join(ROOT, "fixtures", "notebooks")
BAD_NB = os.path.join(NB, "training_bad.ipynb")


def notebook(*cells, language="python") -> dict:
    """nbformat 4 JSON; a cell is code, or ("markdown", text) / ("raw", text)."""
    out = []
    for i, cell in enumerate(cells):
        kind, src = ("code", cell) if isinstance(cell, str) else cell
        src = textwrap.dedent(src).lstrip("\n")
        c = {"cell_type": kind, "id": f"c{i}", "metadata": {}, "source": src.splitlines(keepends=True)}
        if kind == "code":
            c.update(execution_count=None, outputs=[])
        out.append(c)
    return {"cells": out, "metadata": {"kernelspec": {"name": "k", "language": language, "display_name": "K"},
                                       "language_info": {"name": language}},
            "nbformat": 4, "nbformat_minor": 5}


def write(tmp_path, name, content):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, dict):
        content = json.dumps(content, indent=1)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


def check(capsys, *argv):
    """(exit code, stdout, stderr without the text format's closing summary line)."""
    code = cli.main(["check", "--no-cache", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, without_closing_line(err)


def rows(capsys, *argv):
    code, out, err = check(capsys, "--format", "json", *argv)
    assert err == ""
    return code, json.loads(out)


IMPORTS = """
    import jax
    import jax.numpy as jnp
"""
LOOP = """
    def fit(x, batches):
        for b in batches:
            x = x + jnp.sum(b)
            print(float(x))
        return x
    fit(0.0, [])
"""


# -- cells as one module ------------------------------------------------------------------------


def test_an_import_in_cell_1_counts_in_cell_5(tmp_path, capsys):
    nb = notebook(IMPORTS, ("markdown", "# Training"), "x = 1\n", ("raw", "raw text"), LOOP)
    code, found = rows(capsys, write(tmp_path, "a.ipynb", nb))
    assert code == 1
    assert [(f["code"], f["cell"], f["cell_line"], f["col"]) for f in found] == [("JAX201", 5, 4, 15)]
    # line: the line in the module of the code cells joined (2 + 1 + the 4th line of the loop cell)
    assert found[0]["line"] == 7
    # without cell 1 nothing imports jax: the same cell alone is not JAX code
    code, found = rows(capsys, write(tmp_path, "b.ipynb", notebook(("markdown", "x"), LOOP)))
    assert (code, found) == (0, [])


def test_a_cell_that_does_not_parse_is_one_JAX000_and_the_others_are_checked(tmp_path, capsys):
    nb = notebook(IMPORTS, "def broken(:\n    pass\n", LOOP)
    code, out, _ = check(capsys, write(tmp_path, "a.ipynb", nb))
    lines = out.splitlines()
    assert code == 1 and len(lines) == 2
    assert ".ipynb:cell 2:line 1:col " in lines[0] and ": JAX000 could not parse: " in lines[0]
    assert ":cell 3:line 4:col 15: JAX201 " in lines[1]


# The key in cell 2 comes from a config seed: two draws from a literal seed outside a loop are fixed
# data, opt-in since issue 26, and this test is about how messages cite cells.
KEY_CELLS = (
    "import config, jax\n",
    "key = jax.random.PRNGKey(config.seed)\nx = jax.random.normal(key, (3,))\n",
    ("markdown", "# Sampling again"),
    "print(x, jax.random.uniform(key, (3,)))\n",  # read: a notebook's unread names are dead
    "def loop(n, key):\n    for i in range(n):\n        k = jax.random.PRNGKey(0)\n"
    "        x = jax.random.normal(k, (3,))\n        y = jax.random.normal(key, (3,))\n",
    "loop(10, key)\n",  # a notebook's function no cell calls is not shown to run
)


def test_messages_cite_the_cell_and_line_the_user_sees(tmp_path, capsys):
    """A message that cites another line names that line's cell and its line in it, not the
    line in the module of the joined cells; the same code as a .py file keeps `line N`."""
    code, found = rows(capsys, write(tmp_path, "keys.ipynb", notebook(*KEY_CELLS)))
    assert code == 1
    got = [(f["code"], f["cell"], f["cell_line"], f["message"].split("; ")[0]) for f in found]
    assert got == [
        ("JAX502", 4, 1, "PRNG key `key` was already used by `jax.random.normal` on line 2 of cell 2"),
        ("JAX503", 5, 3, "`jax.random.PRNGKey(0)` with a constant seed inside the loop on line 2 of cell 5 "
                         "makes the same key every iteration, so every iteration draws the same random numbers"),
        ("JAX502", 5, 5, "PRNG key `key` is never replaced in the loop on line 2 of cell 5, so every iteration "
                         "draws the same random numbers"),
    ]
    _, out, _ = check(capsys, "--format", "sarif", tmp_path / "keys.ipynb")
    texts = [r["message"]["text"] for r in json.loads(out)["runs"][0]["results"]]
    assert "on line 2 of cell 2;" in texts[0] and "line 3" not in texts[0]
    # the same cells as one .py file: the messages cite module lines, byte for byte as before
    py = tmp_path / "keys.py"
    py.write_text("".join(textwrap.dedent(c) for c in KEY_CELLS if isinstance(c, str)))
    code, out, _ = check(capsys, py)
    assert [line.split(": ", 1)[1] for line in out.splitlines()] == [
        "JAX502 PRNG key `key` was already used by `jax.random.normal` on line 3; both draws get the same "
        "random bits, so their results are identical or correlated; split the key "
        "(`k1, k2 = jax.random.split(key)`) and draw from each subkey once",
        "JAX503 `jax.random.PRNGKey(0)` with a constant seed inside the loop on line 6 makes the same key every "
        "iteration, so every iteration draws the same random numbers; create the key once before the loop and "
        "split it per iteration, or derive one with `jax.random.fold_in(key, step)`",
        "JAX502 PRNG key `key` is never replaced in the loop on line 6, so every iteration draws the same "
        "random numbers; split it in the loop (`key, sub = jax.random.split(key)`) and use `sub`, or derive a "
        "key per step (`jax.random.fold_in(key, step)`)",
    ]


def test_cited_lines_survive_the_cache(tmp_path, capsys):
    path = write(tmp_path, "keys.ipynb", notebook(*KEY_CELLS))
    argv = ["check", "--format", "json", "--cache-dir", str(tmp_path / "cache"), path]
    results = []
    for _ in range(2):  # written, then read back
        cli.main(argv)
        results.append(capsys.readouterr().out)
    assert results[0] == results[1] and "on line 2 of cell 2;" in results[1]


def test_the_extension_cites_lines_in_this_cell_or_an_earlier_one():
    from jaxlint_rules import ALL_RULES

    from jaxlint.engine import select_rules
    from jaxlint.ipython import check_cell

    rules = select_rules(ALL_RULES, ["JAX"])
    # the key comes from a seed in a variable: a literal seed would make the reuse opt-in (fixed data)
    history = [GUARDED_IMPORT, "if typing.TYPE_CHECKING:\n    key = jax.random.PRNGKey(seed)\n"
                               "    a = jax.random.normal(key, (3,))\n"]
    found, _ = check_cell("if typing.TYPE_CHECKING:\n    b = jax.random.uniform(key, (3,))\n", history, rules)
    assert [(f.cell_line, f.message.split(";")[0]) for f in found] == [
        (2, "PRNG key `key` was already used by `jax.random.normal` on line 3 of an earlier cell")]
    here = ("def sample(key):\n    a = jax.random.normal(key, (3,))\n    b = jax.random.uniform(key, (3,))\n"
            "    return a, b\n")
    found, _ = check_cell(here, history, rules)
    assert [(f.cell_line, f.message.split(";")[0]) for f in found] == [
        (3, "PRNG key `key` was already used by `jax.random.normal` on line 2")]
    # %%jaxlint_trace checks the cell without its first line: shown lines are one further down
    found, _ = check_cell(here, history, rules, line_offset=1)
    assert found[0].message.split(";")[0].endswith("on line 3")


# -- IPython syntax -------------------------------------------------------------------------------


def test_magics_and_shell_escapes_are_blanked_line_for_line():
    source = textwrap.dedent("""\
        %matplotlib inline
        !pip install --quiet jax \\
            optax
        !!ls
        files = !ls *.ipynb
        out, err = %sx echo hi
        ?jnp.sum
        jnp.sum??
        jax.jit?  # help
        /print 1 2
        if files:
            !echo "inside a block"
        s = '''
        %not a magic: inside a string
        '''
        t = (10
             % 3)
        %time y = f(x)
        %timeit -n 10 -r 3 f(x)
        %time not python (
    """)
    got = cell_lines(source)
    assert [t for t, _ in got] == [
        "", "", "", "", "files = None", "out, err = None", "", "", "", "",
        "if files:", "    pass",
        "s = '''", "%not a magic: inside a string", "'''", "t = (10", "     % 3)",
        "y = f(x)", "f(x)", "",
    ]
    assert [d for _, d in got][17:19] == [6, 19]  # `%time ` and `%timeit -n 10 -r 3 ` moved left
    compile("\n".join(t for t, _ in got), "<cell>", "exec")


@pytest.mark.parametrize("magic,checked", [
    ("%%time", True), ("%%timeit -n 3", True), ("%%capture out", True), ("%%jaxlint_trace", True),
    ("%%bash", False), ("%%writefile model.py", False), ("%%html", False),
])
def test_cell_magics(magic, checked):
    got = [t for t, _ in cell_lines(f"\n{magic}\nfor i in range(3):\n    x = !bad python in bash (\n")]
    if checked:
        assert got == ["", "", "for i in range(3):", "    x = None"]
    else:
        assert got == ["", "", "", ""]


@pytest.mark.parametrize("magic,checked", [("%%bash", False), ("%%time", True)])
def test_a_cell_magic_after_colab_form_lines_is_the_cells_magic(magic, checked):
    got = [t for t, _ in cell_lines(f"#@title setup\n# get code\n{magic}\nfor i in (1, 2):\n  x = 1\n")]
    if checked:
        assert got == ["#@title setup", "# get code", "", "for i in (1, 2):", "  x = 1"]
    else:
        assert got == ["", "", "", "", ""]


def test_a_magic_after_code_is_not_the_cells_magic():
    # only comments may come before it: after a statement, `%%bash` is not a cell magic (a line
    # magic escape, blanked to `pass`-like emptiness, and the rest stays Python)
    got = [t for t, _ in cell_lines("x = 1\n%%bash\ny = 2\n")]
    assert got[0] == "x = 1" and got[2] == "y = 2"


def test_timed_lines_of_timing_magics():
    assert timed_lines("x = 1\n%timeit f(x)[0]\n  %time g()\n%prun h()\n") == [("%timeit", 2, 2)]
    assert timed_lines("#@title t\n%%timeit -n 3 setup()\ny = f(x)\nz = g(y)\n") == [("%%timeit", 3, 4)]
    assert timed_lines("%%time\n\ny = f(x)\n") == [("%%time", 3, 3)]
    assert timed_lines("%%bash\nls\n") == [] and timed_lines("%%capture\ny = f(x)\n") == []


def test_a_timing_magic_inside_capture_times_the_rest_of_the_cell():
    """``%%capture cap`` runs its body as a cell of its own (IPython: ``shell.run_cell``), so a ``%%time`` on the
    body's first line is that cell's magic: it times the rest (fresh AZ: 84 such cells whose captured times a
    project writes to a file). Other cell magics take their body as their input, not as a cell."""
    src = "%%capture cap --no-stderr\n%%time\nparams = init(key)\ny = f(params, x)\n"
    assert timed_lines(src) == [("%%time", 3, 4)]
    assert [t for t, _ in cell_lines(src)] == ["", "", "params = init(key)", "y = f(params, x)"]
    assert timed_lines("%%time\n%%capture cap\ny = f(x)\n") == [("%%time", 2, 3)]
    assert timed_lines("%%capture cap\n%%bash\nls\n") == []
    assert [t for t, _ in cell_lines("%%capture cap\n%%bash\nls -la\n")] == ["", "", ""]


STEP = """
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def step(x):
        return jnp.tanh(x @ x.T)

    x = jnp.ones((512, 512))
    a = np.ones(3)
"""


@pytest.mark.parametrize("cell, reported", [
    ("%timeit step(x)\n", True),
    ("%time y = step(x)\n", True),
    ("%%timeit\ny = step(x)\n", True),
    ("#@title timing\n%%timeit -n 10 z = x + 1\nstep(x)[0]\n", True),
    ("%timeit step(x).block_until_ready()\n", False),
    ("%timeit jax.block_until_ready(step(x))\n", False),
    ("%%time\ny = step(x)\nprint(float(y.sum()))\n", False),  # the fetch waits
    ("%%time\nfor i in range(3):\n    y = step(x)\n", False),  # a loop: its host work's waits are not all seen
    ("%timeit np.sum(a)\n", False),  # no JAX work
    ("y = step(x)\n", False),  # not timed
    # ``%%capture`` runs its body as a cell: the ``%%time`` under it times the rest (fresh AZ)
    ("%%capture cap --no-stderr\n%%time\ny = step(x)\n", True),
    # a module's apply given PRNG keys as rngs (flax's signature) runs JAX work, whatever the module (fresh AZ:
    # one its notebook imports from a folder jaxlint does not resolve); a key made of a seed alone is an array of
    # host values, not work to time (fresh AZ's first reading named the key as the work)
    ("%%capture cap\n%%time\ny = model.apply(params, x, rngs={'dropout': jax.random.PRNGKey(0)})\n", True),
    ("%%time\nk = jax.random.PRNGKey(0)\n", False),
    ("%%time\ny = model.apply(params, x)\n", False),  # no keys given: nothing shows it is a JAX module's apply
])
def test_a_timing_magic_around_compiled_work_that_nothing_waits_for(tmp_path, capsys, cell, reported):
    code, found = rows(capsys, write(tmp_path, "a.ipynb", notebook(STEP, cell)))
    got = [(f["code"], f["cell"]) for f in found if f["code"] == "JAX204"]
    assert got == ([("JAX204", 2)] if reported else [])
    if reported:
        magic = next(w for w in (ln.split()[0] for ln in cell.splitlines() if ln and not ln.startswith("#"))
                     if w != "%%capture")
        assert found[0]["message"].startswith(f"`{magic}` times this {'cell' if magic.startswith('%%') else 'line'}")


def test_automagic_lines_that_are_not_python_are_blanked():
    got = [t for t, _ in cell_lines("cd ~/repo\npip install ftfy regex\nls\ncd = 3\nenv\ncd /content\n"
                                    "env = make(\n    env_name=1,\n)\nx = 1\n")]
    # `ls`, `cd = 3`, `env`, `cd /content` (a division) and a statement over several lines are Python
    assert got == ["", "", "ls", "cd = 3", "env", "cd /content", "env = make(", "    env_name=1,", ")", "x = 1"]


UNCALLED = """
    def split_data(key, x):
        train = jax.random.permutation(key, x)
        test = jax.random.permutation(key, x)
        return train, test

    def fit(x, batches):
        for b in batches:
            x = x + jnp.sum(b)
            print(float(x))
        return x
"""


@pytest.mark.parametrize("calls, default", [
    ("", []),  # no cell refers to either function: whether they run is not shown
    ("fit(jnp.zeros(()), [jnp.ones(3)] * 5)\n", ["JAX201"]),
    ("train, test = split_data(jax.random.PRNGKey(0), jnp.arange(4))\n", ["JAX502"]),
])
def test_a_finding_in_a_function_no_cell_refers_to_is_opt_in(tmp_path, capsys, calls, default):
    nb = notebook(IMPORTS, UNCALLED, *([calls] if calls else []))
    code, found = rows(capsys, write(tmp_path, "a.ipynb", nb))
    assert sorted(f["code"] for f in found) == default
    code, found = rows(capsys, "--pedantic", write(tmp_path, "a.ipynb", nb))
    opt_in = {f["code"]: f["opt_in"] for f in found if f.get("opt_in")}
    assert {"JAX201", "JAX502"} - set(default) <= set(opt_in)
    assert all(v.startswith("no cell of the notebook refers to") for k, v in opt_in.items() if k in ("JAX201", "JAX502"))


@pytest.mark.parametrize("leftover_first, reported", [
    # a leftover cell above the one that binds the key: in cell order it reads an unbound name, so which
    # key it drew from (the kernel's) is unknown: no reuse is proven (fresh AK's nanoJAXGPT notebook)
    (True, False),
    # the same cell after the binding: both draws read one binding
    (False, True),
])
def test_a_draw_above_the_cell_that_binds_its_key_is_not_tied_to_it(tmp_path, capsys, leftover_first, reported):
    leftover = "early = jax.random.normal(key, (5,))\nprint(early)\n"
    cells = ["import jax\n", "key = jax.random.PRNGKey(0)\n", "sample = jax.random.normal(key, (5,))\nprint(sample)\n"]
    cells.insert(1 if leftover_first else 3, leftover)
    code, found = rows(capsys, write(tmp_path, "a.ipynb", notebook(*cells)))
    assert ("JAX502" in [f["code"] for f in found]) is reported


def test_a_py_module_keeps_its_findings_in_functions_nothing_calls(tmp_path, capsys):
    path = write(tmp_path, "lib.py", textwrap.dedent(IMPORTS + UNCALLED))
    code, found = rows(capsys, path)
    assert sorted(f["code"] for f in found) == ["JAX201", "JAX502"]  # a package's API may be called by users


def test_top_level_await_is_valid_in_a_cell(tmp_path, capsys):
    nb = notebook(IMPORTS + "    import asyncio\n", "await asyncio.sleep(0)\n", LOOP)
    code, found = rows(capsys, write(tmp_path, "a.ipynb", nb))
    assert [(f["code"], f["cell"], f["cell_line"]) for f in found] == [("JAX201", 3, 4)]


def test_a_cell_indented_as_a_whole_is_dedented_as_ipython_does():
    assert cell_lines("    x = 1\n    if x:\n        y = 2\n") == [("x = 1", 4), ("if x:", 4), ("    y = 2", 4)]


def test_notebook_with_every_kind_of_ipython_syntax_has_no_parse_error(tmp_path, capsys):
    nb = notebook(IMPORTS, "!pip install jax\n%load_ext autoreload\n%autoreload 2\nfiles = !ls\njnp.sum?\n",
                  "%%bash\nfor f in *; do echo $f; done\n", "%%time\n" + textwrap.dedent(LOOP).lstrip())
    code, found = rows(capsys, write(tmp_path, "a.ipynb", nb))
    assert [(f["code"], f["cell"], f["cell_line"]) for f in found] == [("JAX201", 4, 5)]


# -- the fixture, text and JSON ------------------------------------------------------------------


def test_fixture_text_output(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, err = check(capsys, os.path.join("fixtures", "notebooks", "training_bad.ipynb"))
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert len(lines) == 3
    # `%time loss_fn(w, x, y)` times the dispatch only (the good notebook blocks in the timed line)
    assert lines[0].startswith("fixtures/notebooks/training_bad.ipynb:cell 6:line 8:col 7: JAX204 `%time` ")
    assert lines[1].startswith("fixtures/notebooks/training_bad.ipynb:cell 8:line 3:col 15: JAX101 `jax.jit` ")
    assert lines[2].startswith("fixtures/notebooks/training_bad.ipynb:cell 8:line 6:col 17: JAX201 `float(loss)` ")


def test_fixture_json_output(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, found = rows(capsys, os.path.join("fixtures", "notebooks", "training_bad.ipynb"))
    assert code == 1
    assert [{k: f[k] for k in ("path", "line", "col", "code", "name", "cell", "cell_line")} for f in found] == [
        {"path": "fixtures/notebooks/training_bad.ipynb", "line": 17, "col": 7, "code": "JAX204",
         "name": "timing-without-block", "cell": 6, "cell_line": 8},
        {"path": "fixtures/notebooks/training_bad.ipynb", "line": 20, "col": 15, "code": "JAX101",
         "name": "jit-in-loop", "cell": 8, "cell_line": 3},
        {"path": "fixtures/notebooks/training_bad.ipynb", "line": 23, "col": 17, "code": "JAX201",
         "name": "host-transfer-in-loop", "cell": 8, "cell_line": 6},
    ]
    # the cell and its line are those of the file, counting markdown cells
    cells = json.load(open(BAD_NB))["cells"]
    assert "jax.jit(" in cells[7]["source"][2] and "float(loss)" in cells[7]["source"][5]
    assert cells[7]["source"][2].index("jax.jit") == 14


def test_good_notebook_is_clean(capsys):
    assert check(capsys, os.path.join(NB, "training_good.ipynb")) == (0, "", "")


def test_python_files_keep_flake8_format_and_json_has_no_cell_fields(tmp_path, capsys):
    path = write(tmp_path, "a.py", textwrap.dedent(IMPORTS + LOOP))
    code, out, _ = check(capsys, path)
    assert out == f"{path}:8:15: JAX201 " + out.split(" JAX201 ", 1)[1]
    code, found = rows(capsys, path)
    assert {"path", "line", "col", "code", "name", "message"} <= set(found[0])
    assert "cell" not in found[0] and "cell_line" not in found[0]


# -- malformed notebooks ---------------------------------------------------------------------------


@pytest.mark.parametrize("content,why", [
    pytest.param(None, "invalid JSON: Unterminated string", id="fixture"),  # a save cut short
    (b"", "invalid JSON: Expecting value"),
    (b'{"cells": [', "invalid JSON"),
    (b"\xff\xfe{}", "not valid UTF-8"),
    (b"[1, 2]", "the JSON is not an object"),
    (b'{"metadata": {}}', "no 'cells' list"),
    (b'{"cells": [{"source": "x"}], "nbformat": 4}', "cell 1 has no 'cell_type'"),
    (b'{"cells": [{"cell_type": "code", "source": 3}]}', "cell 1: 'source' is not text"),
    (b'{"cells": [], "nbformat": 3, "worksheets": []}', "unsupported notebook format 3"),
    pytest.param(b"[" * 100000, "JSON nested too deeply", id="deep"),
])
def test_malformed_notebook_is_one_JAX000_and_the_other_files_are_checked(tmp_path, capsys, content, why):
    if content is None:
        content = open(os.path.join(NB, "broken.ipynb"), "rb").read()
    write(tmp_path, "broken.ipynb", content)
    write(tmp_path, "good.ipynb", notebook(IMPORTS, LOOP))
    write(tmp_path, "train.py", textwrap.dedent(IMPORTS + LOOP))
    code, out, err = check(capsys, tmp_path)
    lines = out.splitlines()
    assert code == 1 and err == ""
    assert len(lines) == 3
    assert lines[0].startswith(f"{tmp_path}/broken.ipynb:") and " JAX000 could not parse: " in lines[0]
    assert why in lines[0]
    assert lines[1].startswith(f"{tmp_path}/good.ipynb:cell 2:line 4:col 15: JAX201 ")
    assert lines[2].startswith(f"{tmp_path}/train.py:8:15: JAX201 ")


def test_read_cells_errors_say_where():
    with pytest.raises(NotebookError) as e:
        read_cells('{\n "cells": [\n  1,\n')
    assert (e.value.line, e.value.col) == (4, 1)


def test_a_notebook_in_another_language_has_nothing_to_check(tmp_path, capsys):
    path = write(tmp_path, "r.ipynb", notebook("library(ggplot2)\nx <- c(1, 2)\n", language="R"))
    assert check(capsys, path) == (0, "", "")


# -- noqa, discovery, cache ------------------------------------------------------------------------


def test_noqa_in_a_cell(tmp_path, capsys):
    silenced = LOOP.replace("print(float(x))", "print(float(x))  # noqa: JAX201")
    code, found = rows(capsys, write(tmp_path, "a.ipynb", notebook(IMPORTS, silenced, LOOP)))
    assert [(f["cell"], f["cell_line"]) for f in found] == [(3, 4)]
    multi = LOOP.replace("print(float(x))", "print(\n            float(x),  # noqa\n        )")
    assert rows(capsys, write(tmp_path, "b.ipynb", notebook(IMPORTS, multi))) == (0, [])


def test_folders_find_notebooks_but_not_checkpoints(tmp_path, capsys):
    write(tmp_path, "nb/a.ipynb", notebook(IMPORTS, LOOP))
    write(tmp_path, "nb/.ipynb_checkpoints/a-checkpoint.ipynb", notebook(IMPORTS, LOOP))
    write(tmp_path, "nb/notes.txt", "x")
    code, found = rows(capsys, tmp_path)
    assert [os.path.relpath(f["path"], tmp_path) for f in found] == [os.path.join("nb", "a.ipynb")]
    # named on the command line, a checkpoint is checked like any file
    _, found = rows(capsys, tmp_path / "nb" / ".ipynb_checkpoints" / "a-checkpoint.ipynb")
    assert len(found) == 1


def test_cache_round_trip_keeps_the_cell_mapping(tmp_path, capsys, monkeypatch):
    write(tmp_path, "pyproject.toml", "[project]\nname = 'demo'\n")
    path = write(tmp_path, "a.ipynb", notebook(IMPORTS, ("markdown", "m"), LOOP))
    write(tmp_path, "b.ipynb", b"not json")
    checked = []
    real = cli.run_files

    def spy(files, codes, jobs):
        checked[:] = list(files)
        return real(files, codes, jobs)

    monkeypatch.setattr(cli, "run_files", spy)
    outputs = []
    for fmt in ("text", "text", "json", "json"):
        code = cli.main(["check", "--format", fmt, str(tmp_path)])
        outputs.append((code, capsys.readouterr()))
        if len(outputs) % 2 == 0:
            assert checked == []  # the second run of each format came from the cache
        checked.clear()
    assert outputs[0] == outputs[1] and outputs[2] == outputs[3]
    assert f"{path}:cell 3:line 4:col 15: JAX201 " in outputs[1][1].out
    found = json.loads(outputs[3][1].out)
    assert [(f.get("cell"), f.get("cell_line"), f["line"]) for f in found] == [(3, 4, 6), (None, None, 1)]
    assert list((tmp_path / ".jaxlint_cache").glob("results-*.json"))


def test_join_maps_each_module_line_to_its_cell():
    mod = join([(2, "import jax\n"), (4, "%%bash\nls\n"), (5, "  x = 1\n  y = 2")])
    assert mod.text == "import jax\n\n\nx = 1\ny = 2\n"
    assert mod.lines == [(2, 1, 0), (4, 1, 0), (4, 2, 0), (5, 1, 2), (5, 2, 2)]


# -- notebook code counts as the user's code in the dynamic mode ------------------------------------


def test_ipython_cells_are_user_code():
    user = UserFiles()
    assert user("<ipython-input-3-0123abcd>")
    assert user("/tmp/ipykernel_1234/2745306427.py")
    assert not user("<string>")


# -- the IPython extension -------------------------------------------------------------------------

DRIVER = r"""
import contextlib, io, json, sys
from traitlets.config import Config
from IPython.core.interactiveshell import InteractiveShell

config = Config()
config.HistoryManager.hist_file = ":memory:"
config.InteractiveShell.colors = "NoColor"
ip = InteractiveShell.instance(config=config)
results = []
for cell in json.load(sys.stdin):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        ip.run_cell(cell, store_history=True)
    results.append({"out": out.getvalue(), "err": err.getvalue()})
print(json.dumps(results))
"""


def ipython(tmp_path, cells: list) -> list:
    """Run ``cells`` in a real IPython InteractiveShell (in a fresh process: IPython takes over
    process-wide state); returns each cell's captured ``{"out", "err"}``."""
    pytest.importorskip("IPython", reason="the IPython extension is tested with IPython installed "
                                          "(pip install ipython)")
    env = dict(os.environ, IPYTHONDIR=str(tmp_path / "ipython"),
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(cells), capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def jaxlint_lines(text: str) -> list:
    return [ln for ln in text.splitlines() if ln.startswith("jaxlint")]


# The cells are only defined, never called, and jax is never imported: the hook is static.
GUARDED_IMPORT = "import typing\nif typing.TYPE_CHECKING:\n    import jax\n    import jax.numpy as jnp\n"
JIT_LOOP = "def train(x, n):\n    for i in range(n):\n        f = jax.jit(lambda v: v + 1)\n        x = f(x)\n    return x\n"


def test_extension_checks_each_cell_with_the_earlier_cells_as_context(tmp_path):
    cells = [
        "%load_ext jaxlint",
        GUARDED_IMPORT,
        "!echo from the shell\nx = !echo captured\n%who_ls\n",
        JIT_LOOP,  # 4
        JIT_LOOP.replace("v + 1)", "v + 1)  # noqa: JAX101"),
        "def broken(:\n    pass\n",
        "%%bash\necho not python (\n",
        "%%time\n" + JIT_LOOP,
        "%jaxlint off",
        JIT_LOOP,
        "%jaxlint on",
        "%reload_ext jaxlint",
        textwrap.dedent(LOOP),  # float(x) per step: needs the import of cell 2
    ]
    res = ipython(tmp_path, cells)
    found = [[ln.split(" `")[0] for ln in jaxlint_lines(r["err"])] for r in res]
    assert found == [
        [], [], [],
        ["jaxlint: line 3:col 13: JAX101"],
        [],  # noqa
        [],  # IPython reports the SyntaxError itself
        [],  # %%bash: not Python
        ["jaxlint: line 4:col 13: JAX101"],  # the %%time line is line 1
        [], [], [], [],  # off, then on again, then reloaded
        ["jaxlint: line 5:col 15: JAX201"],  # registered once, not twice
    ]
    assert jaxlint_lines(res[3]["err"]) == [
        "jaxlint: line 3:col 13: JAX101 `jax.jit` of a lambda is rebuilt on every iteration of the loop on "
        "line 2, so every iteration traces and compiles it again; create the jitted function once, before the loop"]
    assert "SyntaxError" in res[5]["out"] + res[5]["err"]
    assert "cell checks off" in res[8]["out"] and "cell checks on" in res[10]["out"]


def test_cells_run_before_load_ext_or_while_off_are_context_too(tmp_path):
    res = ipython(tmp_path, [
        "import json",
        GUARDED_IMPORT.replace("    import jax.numpy as jnp\n", ""),
        "%load_ext jaxlint",
        "%jaxlint off",
        "if typing.TYPE_CHECKING:\n    import jax.numpy as jnp",
        "%jaxlint on",
        textwrap.dedent(LOOP),
    ])
    assert [[ln.split(" `")[0] for ln in jaxlint_lines(r["err"])] for r in res][-1] == [
        "jaxlint: line 5:col 15: JAX201"]


def test_extension_does_not_make_import_jaxlint_heavier():
    code = "import sys, jaxlint; print(sorted(m for m in sys.modules if m.split('.')[0] in ('IPython', 'jax')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT).stdout
    assert out.strip() == "[]"
    import jaxlint

    assert callable(jaxlint.load_ipython_extension) and callable(jaxlint.unload_ipython_extension)


TRACE_CELL = ("%%jaxlint_trace\n"
              "for i in range(5):\n"
              "    g = jax.jit(lambda v: v * 2)\n"
              "    y = g(x)\n"
              "    print(float(y.sum()))\n")


def test_jaxlint_trace_cell_magic(tmp_path):
    pytest.importorskip("jax", reason="%%jaxlint_trace runs the cell under jax")
    cells = [
        "%load_ext jaxlint",  # 1 (run_cell of a magic counts as In [1])
        "import jax\nimport jax.numpy as jnp\nx = jnp.ones(3)\n",  # 2
        TRACE_CELL,  # 3
        "print(float(y.sum()))",  # 4: the traced cell ran in the user's namespace
        TRACE_CELL.replace("%%jaxlint_trace", "%%jaxlint_trace --format json"),  # 5
        "%%jaxlint_trace\nz = jnp.ones(2)\nfloat(z.sum())\nraise ValueError('boom')\n",  # 6
    ]
    res = ipython(tmp_path, cells)
    out = res[2]["out"]
    assert out.count("6.0") == 5
    # IPython numbers cells itself (8.x counts the %load_ext cell as In [1], 9.x may not match it)
    n = int(re.search(r"jaxlint trace: In \[(\d+)\] exited with 0 \(jax ", out).group(1))
    assert n in (3, 4)
    assert f"<lambda> at In [{n}]:3" in out and "function object re-created 4×" in out
    assert f"5  float       In [{n}]:5" in out
    assert f"JAX101 In [{n}]:3 confirmed: 5 compilations of" in out
    # the static check of the cell ran before it, on its own lines
    assert jaxlint_lines(res[2]["err"]) == [
        "jaxlint: line 3:col 9: JAX101 `jax.jit` of a lambda is rebuilt on every iteration of the loop on "
        "line 2, so every iteration traces and compiles it again; create the jitted function once, before the loop"]
    assert res[3]["out"].strip() == "6.0"
    report = json.loads(res[4]["out"][res[4]["out"].index("{"):])
    (fn,) = report["functions"]
    assert (fn["file"], fn["line"], fn["compiles"], fn["calls"]) == (f"In [{n + 2}]", 3, 5, 5)
    assert report["transfers"] == [{"file": f"In [{n + 2}]", "line": 5, "kind": "float", "count": 5,
                                  "via": None, "fix": None}]  # 5 syncs: under the hotspot count
    assert [(f["code"], f["file"], f["line"], f["confirmed"]) for f in report["findings"]] == [
        ("JAX101", f"In [{n + 2}]", 3, True)]
    assert "ValueError: boom" in res[5]["out"] + res[5]["err"]
    assert f"jaxlint trace: In [{n + 3}] exited with 1" in res[5]["out"]


def test_a_notebooks_names_are_not_importable_so_a_split_never_read_is_dead(tmp_path, capsys):
    """A notebook is run, not imported: a key split into names no cell reads is not a use of the
    key, so a later split of the same key repeats nothing (issue 37, fresh set A). The same code
    in a module stays a finding: another module may import those names."""
    cells = ["import jax", "key = jax.random.PRNGKey(0)\nunused_a, unused_b = jax.random.split(key)",
             "used_a, used_b = jax.random.split(key)\nx = jax.random.normal(used_b, (3,))"]
    code, found = rows(capsys, write(tmp_path, "nb.ipynb", notebook(*cells)))
    assert [f["code"] for f in found] == []
    as_module = write(tmp_path, "mod.py", "\n".join(cells) + "\n")
    code, found = rows(capsys, as_module)
    assert [(f["line"], f["code"]) for f in found] == [(4, "JAX502")]


def test_a_warm_up_cell_then_a_timed_cell_that_compiles_again(tmp_path, capsys):
    """Fresh set AQ (a lecture's Newton solver): `%%time` over a second call of a function that jits a
    function it defines around the callable it is given: the "without compile" figure is a compile."""
    nb = notebook("""
        import jax
        import jax.numpy as jnp

        def newton(f, x_0):
            f_jac = jax.jacobian(f)
            @jax.jit
            def q(x):
                return x - jnp.linalg.solve(f_jac(x), f(x))
            x = x_0
            for _ in range(20):
                x = q(x)
            return x
    """, """
        %%time
        p = newton(lambda p: p ** 2 - 2.0, jnp.ones(3)).block_until_ready()
    """, """
        # Now time it without compile
        %time p = newton(lambda p: p ** 2 - 2.0, jnp.ones(3)).block_until_ready()
    """)
    code, found = rows(capsys, "--select", "JAX102", write(tmp_path, "n.ipynb", nb))
    assert code == 1 and len(found) == 1 and "opt_in" not in found[0]
    assert "cell 1" in found[0]["message"] and "then again on line 2 of cell 3 under %time" in found[0]["message"]
    # without the timed rerun (one call): the helper jits around a function it is given, no cache to reuse
    nb["cells"] = nb["cells"][:2]
    code, found = rows(capsys, "--select", "JAX102", "--pedantic", write(tmp_path, "one.ipynb", nb))
    assert code == 0 and found == []


def test_a_functional_update_a_cell_shows_is_no_discarded_update(tmp_path, capsys):
    """Fresh set AS (a sharding notebook): `x.at[...].set(1)` as a cell's last expression is displayed, not
    thrown away (judged FALSE); the same update inside a function of the notebook is still a finding."""
    nb = notebook("""
        import jax.numpy as jnp
        x = jnp.zeros((4, 4))
        x.at[0, :].set(1)
    """, """
        def pad(y):
            y.at[0].set(0.0)
            return y
        pad(x)
    """)
    code, found = rows(capsys, "--select", "JAX403", write(tmp_path, "n.ipynb", nb))
    assert [(f["code"], f["line"]) for f in found] == [("JAX403", 5)]
