"""Safe autofix: ``jaxlint check --fix`` / ``--diff`` (jaxlint/fix.py).

Each ``fixtures/fix/<case>/before.py`` fixes to exactly its ``after.py``; the fix is idempotent,
keeps comments and formatting, and is never applied where its meaning is not certain.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

import jaxlint_rules
from ruletools import without_closing_line
from jaxlint import fix as fixmod
from jaxlint.cli import main
from jaxlint.engine import check_source
from jaxlint.flake8_plugin import JaxlintChecker

ROOT = Path(__file__).resolve().parent.parent
CASES = sorted(p for p in (ROOT / "fixtures" / "fix").iterdir() if p.is_dir())
RULE_FIXTURES = sorted((ROOT / "fixtures").glob("JAX40[123]_*/bad.py"))
RULES = [r() for r in jaxlint_rules.ALL_RULES]


def fixed(src: str | bytes, path: str = "t.py") -> str | bytes:
    """The fixed text (same type as ``src``); ``src`` itself when nothing is fixed."""
    data = src.encode() if isinstance(src, str) else src
    change = fixmod.fix_source(data, path, RULES)
    if change is None:
        return src
    return change.new_text if isinstance(src, str) else change.new_bytes


def findings(src: str, path: str = "t.py"):
    res = check_source(src, path, RULES)
    assert not res.internal_errors, res.internal_errors
    return res.findings


def run(capsys, *argv):
    """(exit code, stdout, stderr without the closing summary line: test_closing_line_* test it)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, without_closing_line(err)


# --------------------------------------------------------------------------- before/after pairs


def test_there_are_fix_cases():
    names = {p.name for p in CASES}
    assert {"jax401_assign", "jax401_augmented", "jax402_index_update", "jax403_discarded_update"} <= names
    for case in CASES:
        assert (case / "before.py").is_file() and (case / "after.py").is_file(), case


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_before_fixes_to_after(case: Path):
    before = (case / "before.py").read_bytes()
    after = (case / "after.py").read_bytes()
    assert before != after
    assert fixed(before, str(case / "before.py")) == after


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_after_is_clean_parses_and_is_a_fixed_point(case: Path):
    after = (case / "after.py").read_text(encoding="utf-8")
    ast.parse(after)
    assert [f for f in findings(after) if f.code in fixmod.FIXABLE_CODES] == []
    assert fixed(after) == after  # idempotent: a second run changes nothing


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_only_the_fixed_lines_change(case: Path):
    """Every line without a finding is byte-identical, comments included (but for the imports of
    removed jax.ops names, dropped once nothing uses them)."""
    before = (case / "before.py").read_text(encoding="utf-8")
    after = (case / "after.py").read_text(encoding="utf-8")
    touched = set()
    for f in findings(before):
        if f.fix is not None:
            for edit in f.fix.edits:
                touched.update(range(edit.start[0], edit.end[0] + 1))
    kept = [line for i, line in enumerate(before.splitlines(), 1)
            if i not in touched and not line.startswith("from jax.ops import")]
    assert all(line in after.splitlines() for line in kept)
    comments = [line[line.index("#"):] for line in before.splitlines() if "#" in line]
    assert all(c in after for c in comments)


@pytest.mark.parametrize("path", RULE_FIXTURES, ids=lambda p: p.parent.name)
def test_rule_fixtures_fix_to_parsing_idempotent_code(path: Path):
    src = path.read_text(encoding="utf-8")
    out = fixed(src, str(path))
    assert out != src
    ast.parse(out)
    assert fixed(out, str(path)) == out
    left = [f for f in findings(out, str(path)) if f.code in fixmod.FIXABLE_CODES]
    assert all(f.fix is None for f in left)
    # what is left is what cannot be fixed mechanically
    kinds = sorted(f.message.split("`")[1] for f in left)
    # (a dropped `jnp` result: assigning it back could change what the program computes, so no fix)
    assert kinds in ([], ["del cleaned[-1]"], ["jax.ops.index"], [".at[].add()", ".at[].max()", "jnp.nan_to_num(...)"]), kinds


def test_fixed_rule_fixtures_keep_their_expect_comments():
    src = (ROOT / "fixtures" / "JAX401_inplace_item_assignment" / "bad.py").read_text()
    out = fixed(src)
    assert "    logits = logits.at[0].set(-jnp.inf)  # expect: JAX401\n" in out
    assert "        scores = scores.at[pos].add(logits[best])  # expect: JAX401\n" in out
    assert "    del cleaned[-1]  # expect: JAX401\n" in out


# --------------------------------------------------------------------------- single rewrites


@pytest.mark.parametrize("op, method", [("+=", "add"), ("-=", "add"), ("*=", "multiply"), ("/=", "divide"),
                                        ("**=", "power")])
def test_each_augmented_operator(op, method):
    src = f"import jax.numpy as jnp\nx = jnp.zeros(3)\nx[1] {op} 2\n"
    value = "-2" if op == "-=" else "2"  # .at[].subtract is missing from jax 0.4.30
    assert fixed(src).splitlines()[-1] == f"x = x.at[1].{method}({value})"


@pytest.mark.parametrize("value, want", [("v", "-v"), ("a + b", "-(a + b)"), ("-3", "-(-3)"), ("f(x)[0]", "-f(x)[0]"),
                                         ("self.lr * g", "-(self.lr * g)")])
def test_minus_equals_adds_the_negated_value(value, want):
    src = f"import jax.numpy as jnp\nx = jnp.zeros(3)\nx[1] -= {value}\n"
    assert fixed(src).splitlines()[-1] == f"x = x.at[1].add({want})"


def test_at_methods_used_by_the_fixes_exist_on_this_jax():
    jax = pytest.importorskip("jax")
    ref = jax.numpy.zeros(3).at[0]
    for name in ("set", "add", "multiply", "divide", "power", "min", "max"):
        assert callable(getattr(ref, name)), name


@pytest.mark.parametrize("src, want", [
    ("x[f()] += 1", "x = x.at[f()].add(1)"),  # f() runs once, before the value: as before
    ("x[f()] = 1.0", "x = x.at[f()].set(1.0)"),
    ("x[: len(p)] = jnp.asarray(p)", "x = x.at[: len(p)].set(jnp.asarray(p))"),  # pure calls
    ("x[i] = v; x[j] = w", "x = x.at[i].set(v); x = x.at[j].set(w)"),
    ("x[i] = \\\n    v", "x = x.at[i].set(v)"),
    ("x[i] = (v)", "x = x.at[i].set(v)"),
    ("x[i] = ((v))", "x = x.at[i].set((v))"),
    ("x[i] = (  # note\n    v\n)", "x = x.at[i].set(  # note\n    v\n)"),
    ("x[i] = (a for a in r)", "x = x.at[i].set((a for a in r))"),
    ("x.at[i].set(v)", "x = x.at[i].set(v)"),
    ("(x.at[i].set(v))", "x = (x.at[i].set(v))"),
    ("x.at[i].set(v, mode='drop')", "x = x.at[i].set(v, mode='drop')"),
])
def test_jax401_jax403_spellings(src, want):
    head = "import jax.numpy as jnp\n\ndef g(f, i, j, v, w, p, r):\n    x = jnp.zeros(3)\n"
    body = textwrap.indent(src, "    ")
    out = fixed(head + body + "\n    return x\n")
    assert out == head + textwrap.indent(want, "    ") + "\n    return x\n"


@pytest.mark.parametrize("src, want", [
    ("jax.ops.index_update(x, jax.ops.index[0], v)", "x.at[0].set(v)"),
    ("jax.ops.index_add(x, jax.ops.index[1:3], v)", "x.at[1:3].add(v)"),
    ("jax.ops.index_mul(x, jax.ops.index[:, 0], v)", "x.at[:, 0].multiply(v)"),
    ("jax.ops.index_min(x, (0, 1), v)", "x.at[(0, 1)].min(v)"),
    ("jax.ops.index_max(x, i, v)", "x.at[i].max(v)"),
    ("jops.index_update(x, jops.index[0], v)", "x.at[0].set(v)"),
    ("upd(x, idx[2], v)", "x.at[2].set(v)"),
    ("jax.ops.index_update(x + 1, 0, v)", "(x + 1).at[0].set(v)"),
    ("jax.ops.index_update((x), (0), (v))", "x.at[0].set(v)"),
    ("jax.ops.index_update(\n        x,\n        0,\n        v,\n    )", "x.at[0].set(v)"),
    ("(jax.ops.index_update)(x, 0, v)", "x.at[0].set(v)"),
    ("jax.ops.index_add(upd(x, 0, v), 1, v)", "x.at[0].set(v).at[1].add(v)"),
    ("(lambda y: upd(y, 0, v))(x)", "(lambda y: y.at[0].set(v))(x)"),
    ("[upd(y, 0, v) for y in (x,)][0]", "[y.at[0].set(v) for y in (x,)][0]"),
])
def test_jax402_spellings(src, want):
    head = ("import jax\nimport jax.ops as jops\nfrom jax.ops import index_update as upd, index as idx\n\n"
            "def g(x, i, v):\n")
    out = fixed(head + f"    return {src}\n")
    assert out.endswith(f"\ndef g(x, i, v):\n    return {want}\n")
    assert "from jax.ops import" not in out  # nothing uses the removed names any more: gone


def test_jax402_imports_keep_what_is_still_used():
    src = textwrap.dedent("""\
        import jax
        from jax.ops import index_update, segment_sum  # old API
        from jax.ops import index_add
        from jax.ops import (
            index_max,
            segment_max,
        )

        __all__ = ["index_add"]

        def f(x, v, ids):
            x = index_update(x, 0, v)
            x = index_max(x, 1, v)
            return segment_sum(x, ids, num_segments=2), segment_max(x, ids, num_segments=2), index_add
    """)
    out = fixed(src)
    assert out.splitlines()[1:7] == [
        "from jax.ops import segment_sum  # old API",
        "from jax.ops import index_add",  # still used (and exported by name)
        "from jax.ops import (", "    index_max,", "    segment_max,", ")",  # multi-line: left alone
    ]
    assert "x = x.at[0].set(v)" in out and "x = x.at[1].max(v)" in out


def test_conflicting_fixes_in_one_statement_take_two_rounds():
    src = textwrap.dedent("""\
        import jax
        import jax.numpy as jnp

        def f(v):
            x = jnp.zeros(3)
            x[0] = jax.ops.index_update(x, 1, v)
            return x
    """)
    change = fixmod.fix_source(src.encode(), "t.py", RULES)
    assert change.fixed == 2
    assert "    x = x.at[0].set(x.at[1].set(v))\n" in change.new_text


# --------------------------------------------------------------------------- never fixes when unsure

NEVER = {
    "del": "del x[0]",
    "chained assignment": "a = x[0] = v",
    "several targets": "x[0], x[1] = v, v",
    "tuple value": "x[0] = 1.0, 2.0",
    "walrus in the index": "x[(k := 0)] = v",
    "walrus in the value": "x[0] = (k := v)",
    "effects on both sides": "x[f()] = g()",
    "floor division": "x[0] //= 2",
    "modulo": "x[0] %= 2",
    "matmul": "x[0] @= v",
    "nested subscript": "x[0][1] = v",
    "parenthesized target": "(x[0]) = v",
    "annotated": "x[0]: float = v",
    "noqa": "x[0] = v  # noqa: JAX401",
    "attribute receiver": "self.buf.at[0].set(v)",
    "subscript receiver": "bufs[0].at[1].set(v)",
}


@pytest.mark.parametrize("stmt", list(NEVER.values()), ids=list(NEVER))
def test_never_fixed(stmt):
    src = textwrap.dedent("""\
        import jax.numpy as jnp

        def h(self, bufs, f, g, v):
            x = jnp.zeros((3, 3))
            {stmt}
            return x
    """).format(stmt=stmt)
    if "noqa" not in stmt:
        assert [f for f in findings(src) if f.line == 5], "the rule must fire on the case"
    assert all(f.fix is None for f in findings(src))
    assert fixed(src) == src


NEVER_SCOPES = {
    "closure variable": """
        def make(n):
            buf = jnp.zeros(n)

            def push(i, v):
                buf[i] = v  # rebinding would make buf local to push
                buf.at[i].set(v)
            return push
    """,
    "global": """
        G = jnp.zeros(3)

        def reset():
            global G
            G[0] = 0.0
            G.at[1].set(0.0)
    """,
    "nonlocal": """
        def make():
            acc = jnp.zeros(3)

            def bump():
                nonlocal acc
                acc[0] += 1.0
            return bump
    """,
    "module global read in a function": """
        STATE = jnp.zeros(3)

        def touch():
            STATE[0] = 1.0
            STATE.at[0].set(1.0)
    """,
    "comprehension variable is not local": """
        def f(ys):
            [x for x in ys]
            x.at[0].set(1.0)
    """,
    "parameter never read again (meant to update the caller's array)": """
        @jax.jit
        def reset(state):
            state[:, 0] = 0.0
    """,
    "updates in a loop nobody reads": """
        def fill(n):
            x = jnp.zeros(n)
            for i in range(n):
                x[i] = i * 2.0

        def bump_all(x, n):
            x = jnp.asarray(x)
            for i in range(n):
                x.at[i].add(1.0)
    """,
    "result never read": """
        def bump(x):
            x = jnp.asarray(x)
            x.at[0].add(1.0)
    """,
    "set in a loop's else, read only in the loop body": """
        def f(xs):
            x = jnp.zeros(3)
            for v in xs:
                print(x)
            else:
                x[0] = 1.0
    """,
    "set in one branch, read only in the other": """
        def f(c):
            x = jnp.zeros(3)
            if c:
                x[0] = 1.0
            else:
                return x
    """,
    "class attribute read in a method": """
        class C:
            table = jnp.zeros(3)

            def m(self):
                table.at[0].set(1.0)
    """,
}


@pytest.mark.parametrize("body", list(NEVER_SCOPES.values()), ids=list(NEVER_SCOPES))
def test_never_fixed_when_rebinding_the_name_is_wrong_or_unseen(body):
    src = "import jax\nimport jax.numpy as jnp\n" + textwrap.dedent(body)
    found = [f for f in findings(src) if f.code in ("JAX401", "JAX403")]
    assert found, "the rule must fire on the case"
    assert all(f.fix is None for f in found)
    assert fixed(src) == src


@pytest.mark.parametrize("call", [
    "jax.ops.index_update(x, 0, v, indices_are_sorted=True)",
    "jax.ops.index_update(x, *args)",
    "jax.ops.index_update(x, 0)",
    "jax.ops.index_update(x, 0, v, True)",
    "jax.ops.index_update(  # old\n        x, 0, v)",  # the fix would drop the comment
])
def test_jax402_never_fixed(call):
    src = f"import jax\n\ndef f(x, v, args):\n    return {call}\n"
    found = [f for f in findings(src) if f.code == "JAX402"]
    assert found and all(f.fix is None or not fixmod.fixable(src, f.fix) for f in found)
    assert fixed(src) == src


def test_statements_inside_lambdas_and_comprehensions_are_not_findings():
    src = textwrap.dedent("""\
        import jax.numpy as jnp

        def f(xs, v):
            x = jnp.zeros(3)
            ys = [x.at[i].set(v) for i in range(3)]
            g = lambda: x.at[0].set(v)
            return ys, g
    """)
    assert findings(src) == [] and fixed(src) == src


def test_notebooks_are_never_fixed():
    src = "import jax.numpy as jnp\nx = jnp.zeros(3)\nx[0] = 1.0\n"
    assert fixmod.fix_source(src.encode(), "t.ipynb", RULES) is None
    assert not fixmod.can_fix_path("Analysis.IPYNB")


def test_notebooks_are_neither_marked_nor_rewritten_by_the_cli(tmp_path, capsys):
    nb = tmp_path / "analysis.ipynb"
    cell = {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
            "source": ["import jax.numpy as jnp\n", "x = jnp.zeros(3)\n", "x[0] = 1.0\n", "print(x)\n"]}
    nb.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    before = nb.read_bytes()
    for flags in ((), ("--fix",), ("--diff",)):
        code, out, err = run(capsys, "check", "--no-cache", *flags, str(nb))
        assert "[*]" not in out and "fix" not in err and "---" not in out
    assert nb.read_bytes() == before


# --------------------------------------------------------------------------- encodings and line ends


def test_crlf_bom_and_non_ascii_columns_are_kept():
    src = "import jax.numpy as jnp\r\nx = jnp.zeros(3)\r\nx[0] = 'é'  # é\r\nx[1] += 1\r\n"
    data = b"\xef\xbb\xbf" + src.encode("utf-8")
    out = fixed(data)
    assert out == b"\xef\xbb\xbf" + (
        "import jax.numpy as jnp\r\nx = jnp.zeros(3)\r\nx = x.at[0].set('é')  # é\r\nx = x.at[1].add(1)\r\n"
    ).encode("utf-8")


def test_a_coding_cookie_is_honoured():
    src = "# -*- coding: latin-1 -*-\nimport jax.numpy as jnp\nñ = 0\nx = jnp.zeros(3)\nx[ñ] = 1.0  # ñ\n"
    out = fixed(src.encode("latin-1"))
    assert out == src.replace("x[ñ] = 1.0", "x = x.at[ñ].set(1.0)").encode("latin-1")


def test_no_final_newline():
    src = "import jax.numpy as jnp\nx = jnp.zeros(3)\nx.at[0].set(1.0)"
    assert fixed(src) == "import jax.numpy as jnp\nx = jnp.zeros(3)\nx = x.at[0].set(1.0)"


# --------------------------------------------------------------------------- output marks

SRC = textwrap.dedent("""\
    import jax
    import jax.numpy as jnp

    def f(v, n):
        x = jnp.zeros(3)
        x[0] = v  # fixable
        del x[1]
        for i in range(n):
            x = jnp.tanh(x)
            print(float(x[i]))
        return x
""")


def test_text_output_marks_fixable_findings(tmp_path, capsys):
    p = tmp_path / "m.py"
    p.write_text(SRC)
    code, out, err = run(capsys, "check", "--no-cache", str(p))
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith(f"{p}:6:5: JAX401 [*] JAX arrays are immutable")
    assert lines[1].startswith(f"{p}:7:9: JAX401 JAX arrays are immutable")
    assert "[*]" not in lines[1] and "[*]" not in lines[2]


def test_json_output_has_fixable(tmp_path, capsys):
    p = tmp_path / "m.py"
    p.write_text(SRC)
    code, out, _ = run(capsys, "check", "--no-cache", "--format", "json", str(p))
    rows = json.loads(out)
    assert [(r["line"], r["code"], r["fixable"]) for r in rows] == [
        (6, "JAX401", True), (7, "JAX401", False), (10, "JAX201", False)]
    assert not any(r["message"].startswith("[*]") for r in rows)


def test_marks_survive_the_result_cache(tmp_path, capsys):
    p = tmp_path / "m.py"
    p.write_text(SRC)
    cache = str(tmp_path / "cache")
    first = run(capsys, "check", "--cache-dir", cache, str(p))
    second = run(capsys, "check", "--cache-dir", cache, str(p))
    assert first == second and "[*]" in first[1]


def test_only_cached_results_are_analysed_again_for_the_marks(tmp_path, capsys, monkeypatch):
    """A finding computed in this run carries its fix; one read from the cache carries none, so
    only its file is checked again to mark it."""
    import jaxlint.engine

    builds = []
    build = jaxlint.engine.build_model
    monkeypatch.setattr(jaxlint.engine, "build_model", lambda *a, **k: builds.append(1) or build(*a, **k))
    p = tmp_path / "m.py"
    p.write_text(SRC)
    cache = str(tmp_path / "cache")
    for argv in (["--no-cache"], ["--cache-dir", cache], ["--cache-dir", cache]):  # fresh, fresh, cached
        builds.clear()
        _, out, _ = run(capsys, "check", "-j", "1", *argv, str(p))
        assert out.count("[*]") == 1 and len(builds) == 1, argv
    tree = ast.parse(SRC)
    rows = list(JaxlintChecker(tree, "m.py").run())
    assert rows and not any("[*]" in text for _, _, text, _ in rows)


# --------------------------------------------------------------------------- --diff and --fix


def test_diff_prints_a_patch_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("m.py").write_text(SRC)
    before = Path("m.py").read_bytes()
    code, out, err = run(capsys, "check", "--no-cache", "--diff", "m.py")
    assert code == 1
    assert Path("m.py").read_bytes() == before
    assert out == (
        "--- a/m.py\n"
        "+++ b/m.py\n"
        "@@ -3,7 +3,7 @@\n"
        " \n"
        " def f(v, n):\n"
        "     x = jnp.zeros(3)\n"
        "-    x[0] = v  # fixable\n"
        "+    x = x.at[0].set(v)  # fixable\n"
        "     del x[1]\n"
        "     for i in range(n):\n"
        "         x = jnp.tanh(x)\n"
    )
    assert err == "jaxlint: would fix 1 finding in 1 file\n"
    if shutil.which("patch"):
        subprocess.run(["patch", "-p1", "--quiet"], input=out, text=True, check=True)
        assert Path("m.py").read_text() == fixed(SRC)
    assert run(capsys, "check", "--no-cache", "--diff", "--exit-zero", "m.py")[0] == 0


def test_fix_with_diff_is_a_usage_error_and_writes_nothing(tmp_path, capsys):
    p = tmp_path / "m.py"
    p.write_text(SRC)
    for argv in (["--fix", "--diff"], ["--diff", "--fix", "--exit-zero"]):
        code, out, err = run(capsys, "check", "--no-cache", *argv, str(p))
        assert (code, out) == (2, "")
        assert err == "jaxlint: --fix and --diff cannot be combined; --diff shows what --fix would write\n"
    assert p.read_text() == SRC


def test_diff_of_a_clean_or_unfixable_file_is_empty_and_exits_0(tmp_path, capsys):
    p = tmp_path / "m.py"
    p.write_text(SRC.replace("x[0] = v  # fixable\n", ""))
    assert run(capsys, "check", "--no-cache", "--diff", str(p)) == (0, "", "")


def test_diff_names_files_outside_the_current_folder_by_absolute_path(tmp_path, capsys, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    p = tmp_path / "b" / "m.py"
    p.write_text(SRC)
    monkeypatch.chdir(tmp_path / "a")
    _, out, _ = run(capsys, "check", "--no-cache", "--diff", str(p))
    assert out.splitlines()[:2] == [f"--- {p}", f"+++ {p}"]


def test_fix_on_a_copy_of_the_fixtures(tmp_path, capsys):
    """``--fix`` rewrites the files, reports what remains (recomputed, not from the cache), and
    a second run changes nothing."""
    work = tmp_path / "proj"
    work.mkdir()
    (work / "pyproject.toml").write_text("[tool.jaxlint]\n")
    for case in CASES:
        shutil.copy(case / "before.py", work / f"{case.name}.py")
    for bad in RULE_FIXTURES:
        shutil.copy(bad, work / f"{bad.parent.name}.py")
    cache = str(tmp_path / "cache")
    code, out, _ = run(capsys, "check", "--cache-dir", cache, str(work))  # fills the cache
    assert code == 1 and out.count("[*]") > 40

    code, out, err = run(capsys, "check", "--cache-dir", cache, "--fix", str(work))
    assert code == 1  # findings without a safe fix remain
    assert err.startswith("jaxlint: fixed ") and err.endswith(" findings in 7 files\n")
    assert "[*]" not in out
    left = sorted((Path(line.split(":")[0]).name, line.split()[1]) for line in out.splitlines())
    assert left == [
        ("JAX401_inplace_item_assignment.py", "JAX401"),  # del cleaned[-1]
        ("JAX402_removed_index_update_api.py", "JAX402"),  # FIRST_TWO = jax.ops.index[:2]
        ("JAX403_discarded_functional_update.py", "JAX403"),  # self.total.at[:].add(...)
        ("JAX403_discarded_functional_update.py", "JAX403"),  # self.peak.at[:].max(...)
        ("JAX403_discarded_functional_update.py", "JAX403"),  # jnp.nan_to_num(losses, copy=False)
    ]
    for case in CASES:
        assert (work / f"{case.name}.py").read_bytes() == (case / "after.py").read_bytes()

    again = run(capsys, "check", "--cache-dir", cache, "--fix", str(work))
    assert again == (1, out, "")
    assert run(capsys, "check", "--cache-dir", cache, "--diff", str(work)) == (0, "", "")


def test_fix_of_everything_exits_0(tmp_path, capsys):
    p = tmp_path / "m.py"
    p.write_text("import jax.numpy as jnp\nx = jnp.zeros(3)\nx[0] = 1.0\n")
    code, out, err = run(capsys, "check", "--no-cache", "--fix", str(p))
    assert (code, out, err) == (0, "", "jaxlint: fixed 1 finding in 1 file\n")
    assert p.read_text() == "import jax.numpy as jnp\nx = jnp.zeros(3)\nx = x.at[0].set(1.0)\n"


def test_fix_respects_selection_and_per_file_ignores(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint.per-file-ignores]\n"skip_*.py" = ["JAX403"]\n')
    src = "import jax.numpy as jnp\nx = jnp.zeros(3)\nx[0] = 1.0\nx.at[1].set(2.0)\n"
    a, b = tmp_path / "skip_me.py", tmp_path / "other.py"
    a.write_text(src)
    b.write_text(src)
    run(capsys, "check", "--no-cache", "--fix", str(tmp_path))
    assert a.read_text() == src.replace("x[0] = 1.0", "x = x.at[0].set(1.0)")
    assert b.read_text() == src.replace("x[0] = 1.0", "x = x.at[0].set(1.0)").replace("x.at[1]", "x = x.at[1]")
    b.write_text(src)
    run(capsys, "check", "--no-cache", "--fix", "--select", "JAX403", str(b))
    assert b.read_text() == src.replace("x.at[1]", "x = x.at[1]")


def test_a_file_changed_during_the_fix_is_not_overwritten(tmp_path):
    p = tmp_path / "m.py"
    p.write_text(SRC)
    change = fixmod.fix_source(p.read_bytes(), str(p), RULES)
    p.write_text(SRC + "\n# edited meanwhile\n")
    with pytest.raises(OSError):
        change.write()
    assert p.read_text().endswith("# edited meanwhile\n")


# --------------------------------------------------------------------------- the fixed code runs


@pytest.fixture(scope="module")
def jax():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    return pytest.importorskip("jax")


def _load(case: str) -> dict:
    import runpy

    return runpy.run_path(str(ROOT / "fixtures" / "fix" / case / "after.py"))


def test_runtime_fixed_files_compute_the_intended_values(jax):
    jnp = jax.numpy
    a = _load("jax401_assign")
    assert a["one_hot"](jnp.array([0, 2]), 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    assert a["tokens"]([1, 2], 5, 0).tolist() == [1, 2, 0, 0, 1]
    assert a["zero_first_column"](jnp.ones((2, 2))).tolist() == [[0.0, 1.0], [0.0, 1.0]]
    assert float(a["TABLE"][0, 0]) == 7.0 and a["Defaults"].scale.tolist() == [0.5, 1.0, 1.0]
    b = _load("jax401_augmented")
    assert b["update"](5, 1.0).tolist() == [1.0, -0.5, 0.5, 0.0, 0.0]
    assert b["penalize"](jnp.full(3, 2.0), jnp.array([1]), 2.0).tolist() == [2.0, 1.0, 2.0]
    c = _load("jax402_index_update")
    pos, vel = c["step"](jnp.ones((2, 2)), jnp.ones((2, 2)), 0.5)
    assert pos.tolist() == [[0.0, 0.0], [1.5, 1.5]] and vel.tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert c["nested"](jnp.ones(3), 5.0).tolist() == [12.0, 4.0, 5.0]
    d = _load("jax403_discarded_update")
    assert d["causal_mask"](2).tolist() == [[True, False], [True, True]]
    assert d["each_method"](jnp.full(3, 2.0), 0, 3.0).tolist() == [3.0, 2.0, 2.0]
    assert d["clip_rows"](jnp.ones((2, 2)), jnp.zeros(2)).tolist() == [[0.0, 0.0], [0.0, 0.0]]
