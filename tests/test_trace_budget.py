"""Issue 14 parts 2-3: every retrace reason with its fix (jaxlint/trace/advice.py), compile budgets
and gates (jaxlint/trace/budget.py, [tool.jaxlint.trace]), and Audit.assert_compiles.

Pure functions are tested on hand-made records; three small subprocess runs check the CLI.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from jaxlint.config import ConfigError, load_config
from jaxlint.trace import advice, budget
from jaxlint.trace import report as rep
from jaxlint.trace.collector import RECREATED, SAME, Collector, Record
from jaxlint.trace.userfiles import UserFiles

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures", "trace")


def record(*changes, name="predict", created_at=None, compiles=None):
    """A Record whose retraces were ``changes`` ((reason, argument, before, after), in order)."""
    rec = Record(object(), name, name, "/tmp/prog.py", 6)
    for c in changes:
        rec.miss_reasons[c] += 1
    rec.traces = len(changes) + 1
    rec.compiles = rec.traces if compiles is None else compiles
    rec.calls = rec.traces
    if created_at:
        rec.created_at[created_at] += rec.traces
    return rec


THREE_SHAPES = [("shape", "batch", "f32[32,8]", "f32[17,8]"), ("shape", "batch", "f32[17,8]", "f32[5,8]")]


# -- every reason, compactly ----------------------------------------------------


def test_transitions_chain_every_value_in_the_order_seen():
    gs = advice.groups(record(*THREE_SHAPES).miss_reasons)
    assert gs == [{"reason": "shape", "argument": "batch", "count": 2,
                   "values": ["f32[32,8]", "f32[17,8]", "f32[5,8]"]}]
    assert advice.lines(gs) == ["shape of `batch` changed 2×: f32[32,8] → f32[17,8] → f32[5,8]"]


def test_transitions_that_do_not_chain_still_list_each_value_once():
    # the closest earlier signature of the third trace was the first one (32 -> 17, then 32 -> 5)
    rec = record(("shape", "x", "f32[32]", "f32[17]"), ("shape", "x", "f32[32]", "f32[5]"),
                 ("shape", "x", "f32[5]", "f32[32]"))
    assert advice.groups(rec.miss_reasons)[0]["values"] == ["f32[32]", "f32[17]", "f32[5]"]


def test_groups_sorted_by_retraces_ties_first_seen_first():
    rec = record(("dtype", "a", "f32[3]", "i32[3]"), ("shape", "b", "f32[1]", "f32[2]"),
                 ("shape", "b", "f32[2]", "f32[3]"), ("weak type", "c", "f32[]{weak}", "f32[]"))
    assert [(g["reason"], g["argument"]) for g in advice.groups(rec.miss_reasons)] == [
        ("shape", "b"), ("dtype", "a"), ("weak type", "c")]


def test_a_long_chain_is_shortened_with_its_count_and_many_groups_are_summed_not_dropped():
    values = [f"f32[{n}]" for n in range(1, 21)]
    line = advice.group_text({"reason": "shape", "argument": "x", "count": 19, "values": values})
    assert line.endswith("→ … → f32[20] (20 values)") and "f32[6]" in line and "f32[7]" not in line
    gs = [{"reason": "dtype", "argument": f"p{i}", "count": 1, "values": ["f32[2]", "f64[2]"]} for i in range(12)]
    out = advice.lines(gs)
    assert len(out) == advice.MAX_GROUPS_SHOWN + 1
    assert out[-1] == "dtype of 4 more arguments changed 4×: `p8`, `p9`, `p10`, `p11`"


def test_recreated_and_same_signature_have_no_chain():
    rec = record((RECREATED, None, None, None), (RECREATED, None, None, None), (SAME, None, None, None))
    assert advice.lines(advice.groups(rec.miss_reasons)) == [
        "function object re-created 2×", f"{SAME} 1×"]


# -- fixes ---------------------------------------------------------------------


def test_buckets_pad_to_the_max_and_offer_power_of_two_buckets_only_when_they_save_compiles():
    assert advice.buckets([32, 17, 5]) == {"pad": 32, "buckets": [8, 32]}
    assert advice.buckets([32, 30, 17]) == {"pad": 32, "buckets": None}  # at most 2x padding already
    assert advice.buckets([3, 100]) == {"pad": 100, "buckets": None}  # 2 buckets for 2 sizes: no saving
    assert advice.buckets([3, 4, 5, 100, 120]) == {"pad": 120, "buckets": [4, 8, 120]}


def test_shape_fix_names_the_dimension_and_the_sizes_seen():
    fix = advice.fix(advice.groups(record(*THREE_SHAPES).miss_reasons))
    assert fix.startswith("pad dim 0 of `batch` to 32: one compile for the 3 shapes traced ([32,8], [17,8], [5,8])")
    assert "pad dim 0 to buckets 8/32 (2 compiles" in fix
    two = record(("shape", "x", "f32[4,10]", "f32[8,20]"))
    assert advice.fix(advice.groups(two.miss_reasons)).startswith("pad `x` (dim 0 to 8, dim 1 to 20)")
    rank = record(("shape", "x", "f32[4]", "f32[4,4]"))
    assert "changes rank (1/2)" in advice.fix(advice.groups(rank.miss_reasons))


def test_dtype_and_weak_type_fixes_cast_at_the_boundary():
    dtype = advice.fix(advice.groups(record(("dtype", "x", "f32[3]", "f64[3]")).miss_reasons))
    assert "`x` arrives as f32/f64: cast it once at the boundary" in dtype
    weak = advice.fix(advice.groups(record(("weak type", "lr", "f32[]{weak}", "f32[]")).miss_reasons))
    assert "`jnp.asarray(lr, dtype=jnp.float32)`" in weak


def test_static_fix_depends_on_the_values():
    numeric = record(("static value", "power", "1", "2"), ("static value", "power", "2", "3"))
    fix = advice.fix(advice.groups(numeric.miss_reasons))
    assert fix.startswith("static `power` took 3 values (1, 2, 3): if it is only used as a number, drop it "
                          "from static_argnames")
    names = record(("static value", "act", "'relu'", "'gelu'"))
    fix = advice.fix(advice.groups(names.miss_reasons))
    assert "took 2 values ('relu', 'gelu')" in fix and "drop it from" not in fix and "lax.switch" in fix
    flags = record(("static value", "train", "True", "False"))  # a bool steers Python control flow
    assert "drop it from" not in advice.fix(advice.groups(flags.miss_reasons))
    identity = record(("static value", "cfg", "<Config object>", "<Config object> (not equal)"))
    assert "__eq__/__hash__" in advice.fix(advice.groups(identity.miss_reasons))


def test_recreated_fix_hoists_the_jit_and_names_where_it_was_made():
    rec = record((RECREATED, None, None, None), created_at=("/nowhere/loop.py", 7))
    assert advice.describe(rec)["fix"].startswith("hoist the jit (`jax.jit` at /nowhere/loop.py:7) out of the loop")
    assert "hoist the jit out" in advice.fix(advice.groups(rec.miss_reasons))  # no site known


def test_structure_sharding_and_same_signature_fixes():
    assert "pass zeros instead of None" in advice.fix(advice.groups(
        record(("pytree structure", "mask", "(*)", "(None)")).miss_reasons))
    assert "jax.device_put" in advice.fix(advice.groups(
        record(("sharding", "x", "SingleDeviceSharding", "NamedSharding")).miss_reasons))
    assert "jax.clear_caches" in advice.fix(advice.groups(record((SAME, None, None, None)).miss_reasons))


def test_one_fix_line_per_function_joins_distinct_fixes_most_retraces_first():
    rec = record(*THREE_SHAPES, ("dtype", "w", "f32[8,4]", "f64[8,4]"))
    fix = advice.describe(rec)["fix"]
    assert fix.index("pad dim 0 of `batch`") < fix.index("; also, `w` arrives as f32/f64")
    assert advice.describe(record())["fix"] is None  # compiled once: nothing to fix


# -- the text report --------------------------------------------------------------


def hand_report(rec, findings=None, script="prog.py", partial=()):
    c = Collector(UserFiles(None))
    c.records = {rec.key: rec}
    c.partial = list(partial)
    c.user_records = lambda: [rec]
    return rep.build(c, findings, 0, (), script, {})


def test_text_report_shows_every_transition_and_the_fix():
    out = rep.text(hand_report(record(*THREE_SHAPES), findings=[]))
    # the hotspot row also carries the seconds the misses lost (tests/test_trace_cost.py)
    assert re.search(r"      shape of `batch` changed 2× \(\d+\.\d\d s\): f32\[32,8\] → f32\[17,8\] → f32\[5,8\]\n", out)
    assert "      fix: pad dim 0 of `batch` to 32: one compile" in out
    assert "…" not in out


def test_static_findings_section_is_always_there():
    rec = record(*THREE_SHAPES)
    assert "Static findings, checked against the run\n  none\n" in rep.text(hand_report(rec, findings=[]))
    assert "Static findings, checked against the run\n  not run (--no-static)\n" in rep.text(hand_report(rec))
    assert "not run (audit() runs no static check)" in rep.text(hand_report(rec, script=None))
    failed = hand_report(rec, partial=["static cross-check failed: OSError: x"])
    assert "not run: the static check failed" in rep.text(failed)
    assert hand_report(rec)["static_checked"] is False and hand_report(rec, [])["static_checked"] is True


def test_json_rows_carry_the_reasons_and_the_fix():
    row = hand_report(record(*THREE_SHAPES))["functions"][0]
    assert row["reasons"][0]["values"] == ["f32[32,8]", "f32[17,8]", "f32[5,8]"]
    assert row["fix"].startswith("pad dim 0 of `batch` to 32")
    json.dumps(row)


# -- budgets -------------------------------------------------------------------


def test_budget_option_parsing_is_strict():
    assert budget.parse_option("train_step=1") == ("train_step", 1)
    assert budget.parse_option("*=3") == ("*", 3)
    assert budget.parse_option("Model.__call__ = 2") == ("Model.__call__", 2)
    for bad in ("train_step", "=2", "f=x", "f=-1", "f=1.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            budget.parse_option(bad)


def test_the_most_specific_budget_pattern_applies():
    b = [("*", 3, "a"), ("eval_*", 5, "b"), ("train_step", 1, "c"), ("*.__call__", 2, "d")]
    assert budget.match(b, "train_step")[1] == 1
    assert budget.match(b, "eval_model")[1] == 5
    assert budget.match(b, "other")[1] == 3
    assert budget.match(b, "Model.__call__", "__call__")[1] == 2
    assert budget.match(b, "main.<locals>.train_step", "train_step")[1] == 1  # the plain name counts too
    assert budget.match([("eval_*", 5, "b")], "train_step") is None
    assert budget.match([("Train_step", 1, "x")], "train_step") is None  # case-sensitive everywhere


def fake_report(*rows, by_name=0):
    funcs = [{"name": q.rsplit(".", 1)[-1], "qualname": q, "file": "/tmp/p.py", "line": i + 1, "compiles": n,
              "miss_reasons": [], "matched_by_name": False} for i, (q, n) in enumerate(rows)]
    return {"functions": funcs, "transfers": [], "compiles_matched_by_name": by_name}


def test_budgets_pass_and_fail_with_their_details():
    s = budget.Settings(budget=[("train_step", 1, "--budget train_step=1"), ("*", 3, "--budget *=3"),
                                ("nope*", 1, "--budget nope*=1")])
    messages, results = budget.evaluate(fake_report(("train_step", 2), ("eval", 3)), s)
    assert messages == ["train_step at /tmp/p.py:1 compiled 2 times, over its budget of 1 (--budget train_step=1)"]
    assert [(r["pattern"], r["function"], r["compiles"], r["passed"]) for r in results] == [
        ("train_step", "train_step", 2, False), ("*", "eval", 3, True), ("nope*", None, None, True)]
    assert results[0]["gate"] == messages[0] and results[1]["gate"] is None


def test_fail_on_recompile_and_guessed_counts():
    s = budget.Settings(fail_on_recompile="--fail-on-recompile")
    assert budget.evaluate(fake_report(("f", 1), ("g", 1)), s)[0] == []
    assert budget.evaluate(fake_report(("f", 2)), s)[0] == ["f at /tmp/p.py:1 compiled 2 times (--fail-on-recompile)"]
    messages, results = budget.evaluate(fake_report(("f", 1), by_name=1), s)
    assert messages and messages[0].startswith("--fail-on-recompile cannot pass: 1 compilation(s)")
    assert results[0]["passed"] is False
    guessed = budget.Settings(budget=[("*", 5, "x")])
    assert budget.evaluate(fake_report(("f", 1), by_name=2), guessed)[0][0].startswith("--budget cannot pass")


def test_command_line_overrides_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.jaxlint.trace]
        budget = {"train_step" = 1, "*" = 3}
        fail-on-recompile = true
        max-compiles = 9
    """))
    cfg = load_config(str(tmp_path)).trace
    args = argparse.Namespace(budget=None, fail_on_recompile=False, max_compiles=None, max_transfers_per_line=None)
    s = budget.settings(args, cfg)
    assert [(p, n) for p, n, _ in s.budget] == [("train_step", 1), ("*", 3)]
    assert s.fail_on_recompile == "[tool.jaxlint.trace] fail-on-recompile = true" and s.max_compiles == 9
    args = argparse.Namespace(budget=[("step", 2)], fail_on_recompile=True, max_compiles=4, max_transfers_per_line=7)
    s = budget.settings(args, cfg)
    assert [(p, n) for p, n, _ in s.budget] == [("step", 2)]  # any --budget replaces the table
    assert (s.fail_on_recompile, s.max_compiles, s.max_transfers_per_line) == ("--fail-on-recompile", 4, 7)


@pytest.mark.parametrize("section, message", [
    ("[tool.jaxlint.trace]\nbudgets = {}", "unknown [tool.jaxlint.trace] key(s): budgets"),
    ("[tool.jaxlint.trace]\nbudget = 3", "budget must be a table"),
    ('[tool.jaxlint.trace]\nbudget = {"f" = "1"}', "budget 'f' must be an integer >= 0"),
    ('[tool.jaxlint.trace]\nbudget = {"f" = -1}', "budget 'f' must be an integer >= 0"),
    ('[tool.jaxlint.trace]\nbudget = {"f" = true}', "budget 'f' must be an integer >= 0"),
    ("[tool.jaxlint.trace]\nfail-on-recompile = 1", "fail-on-recompile must be true or false"),
    ("[tool.jaxlint.trace]\nmax-compiles = 1.5", "max-compiles must be an integer >= 0"),
    ("[tool.jaxlint]\ntrace = 3", "trace must be a table"),
])
def test_bad_trace_config_is_an_error(tmp_path, section, message):
    (tmp_path / "pyproject.toml").write_text(section + "\n")
    with pytest.raises(ConfigError, match=None) as e:
        load_config(str(tmp_path))
    assert message in str(e.value)


def test_trace_table_does_not_disturb_the_static_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint]\nignore = ["JAX2"]\n[tool.jaxlint.trace]\nbudget = {"*" = 1}\n')
    cfg = load_config(str(tmp_path))
    assert cfg.ignore == ["JAX2"] and cfg.trace.budget == {"*": 1}


# -- Audit.assert_compiles (in-process) ------------------------------------------


def test_assert_compiles_message_has_the_count_the_reasons_and_the_fix():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from jaxlint.trace import audit

    with audit() as a:
        @jax.jit
        def predict(w, batch):
            return jnp.tanh(batch @ w)

        w = jnp.ones((8, 4))
        for n in (32, 32, 17, 32, 5):
            predict(w, jnp.ones((n, 8)))
    a.assert_compiles(predict, at_most=3)
    a.assert_compiles(predict, exactly=3)
    with pytest.raises(AssertionError) as e:
        a.assert_no_recompile(predict)
    message = str(e.value)
    assert message.startswith("`test_assert_compiles_message_has_the_count_the_reasons_and_the_fix.<locals>.predict` (")
    assert "compiled 3 times inside this audit() block, expected at most 1 (5 calls, 3 traces):" in message
    assert "\n  shape of `batch` changed 2×: f32[32,8] → f32[17,8] → f32[5,8]\n" in message
    assert "\n  fix: pad dim 0 of `batch` to 32" in message
    with pytest.raises(AssertionError, match="expected exactly 2"):
        a.assert_compiles(predict, exactly=2)
    with pytest.raises(TypeError):
        a.assert_compiles(predict)


def test_assert_compiles_of_a_function_not_run_in_the_block():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from jaxlint.trace import audit

    @jax.jit
    def g(x):
        return x + 1

    g(jnp.ones(3))  # compiled before the block: the calls inside reuse it
    with audit() as a:
        g(jnp.ones(3))
    a.assert_no_recompile(g)
    a.assert_compiles(g, at_most=0)
    with pytest.raises(AssertionError) as e:
        a.assert_compiles(g, exactly=1)
    assert "compiled 0 times inside this audit() block, expected exactly 1: it was not called" in str(e.value)


def test_assert_no_recompile_names_the_jit_in_the_loop():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from jaxlint.trace import audit

    with audit() as a:
        for _ in range(3):
            f = jax.jit(lambda x: x * 2)
            f(jnp.ones(2))
    with pytest.raises(AssertionError) as e:
        a.assert_no_recompile(f)
    message = str(e.value)
    assert "function object re-created 2×" in message
    assert f"fix: hoist the jit (`jax.jit` at {os.path.relpath(__file__)}:" in message


# -- the command line (subprocesses: few and small) -----------------------------------


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "jaxlint", "trace", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_cli_budget_fails_with_reasons_and_fix_then_passes():
    proc = run("--no-static", "--budget", "predict=1", "--budget", "*=5", os.path.join(FIX, "three_shapes.py"))
    assert proc.returncode == 3, proc.stderr
    tail = proc.stderr[proc.stderr.index("GATE: "):].splitlines()
    assert tail[0] == ("GATE: predict at fixtures/trace/three_shapes.py:6 compiled 3 times, over its budget of 1 "
                       "(--budget predict=1)")
    assert re.fullmatch(r"      shape of `batch` changed 2× \(\d+\.\d\d s\): f32\[32,8\] → f32\[17,8\] → f32\[5,8\]", tail[1])
    assert tail[2].startswith("      fix: pad dim 0 of `batch` to 32")
    assert "Static findings, checked against the run\n  not run (--no-static)\n" in proc.stderr
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"budget-{os.getpid()}.json")
    proc = run("--format", "json", "-o", out, "--no-static", "--budget", "predict=3", "--budget", "nothing*=1",
               os.path.join(FIX, "three_shapes.py"))
    # the exit status first: a run that fails says why (once, in a full CI run, no report was written)
    assert proc.returncode == 0, proc.stderr
    with open(out) as fh:
        report = json.load(fh)
    os.remove(out)
    assert report["gates"] == []
    assert [(r["pattern"], r["function"], r["compiles"], r["passed"]) for r in report["budgets"]] == [
        ("predict", "predict", 3, True), ("nothing*", None, None, True)]


def test_cli_reads_pyproject_and_rejects_bad_values(tmp_path):
    shutil.copy(os.path.join(FIX, "static_churn.py"), tmp_path / "static_churn.py")
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint.trace]\nfail-on-recompile = true\n")
    proc = run("static_churn.py", cwd=str(tmp_path))
    assert proc.returncode == 3, proc.stderr
    assert "GATE: moment at static_churn.py:8 compiled 4 times ([tool.jaxlint.trace] fail-on-recompile = true)" in proc.stderr
    assert re.search(r"      static value of `power` changed 3× \(\d+\.\d\d s\): 1 → 2 → 3 → 4\n", proc.stderr)
    assert "      fix: static `power` took 4 values (1, 2, 3, 4)" in proc.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint.trace]\nfail-on-recompile = \"yes\"\n")
    proc = run("static_churn.py", cwd=str(tmp_path))
    assert proc.returncode == 2 and "fail-on-recompile must be true or false" in proc.stderr
    assert "Recompilation hotspots" not in proc.stderr  # refused before the program ran
    proc = run("--budget", "moment", "static_churn.py", cwd=str(tmp_path))
    assert proc.returncode == 2 and "expected PATTERN=N" in proc.stderr


@pytest.mark.parametrize("option", [("--max-compiles", "-1"), ("--max-transfers-per-line", "-3"),
                                    ("--max-compiles", "two"), ("--budget", "a=1=2"), ("--budget", "a=-1")])
def test_cli_refuses_gate_values_that_would_fail_or_pass_everything_before_the_program_runs(tmp_path, option):
    script = tmp_path / "prog.py"
    script.write_text("print('the program ran')\n")
    proc = run(*option, str(script), cwd=str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert "the program ran" not in proc.stdout and "usage:" in proc.stderr
    assert option[1] in proc.stderr


def test_gate_lines_name_the_place_and_count_in_words():
    s = budget.Settings(max_compiles=0, max_transfers_per_line=0)
    report = fake_report(("f", 1))
    report["transfers"] = [{"file": "/tmp/p.py", "line": 7, "count": 1}]
    assert budget.evaluate(report, s)[0] == ["f at /tmp/p.py:1 compiled 1 time (--max-compiles 0)",
                                             "/tmp/p.py:7 made 1 host transfer (--max-transfers-per-line 0)"]


def test_jax_audit_fixture_counts_calls_of_the_test_modules_own_jitted_functions(tmp_path):
    """Every module-level `@jax.jit` in a test was made before the fixture: `calls()` counts the
    calls the test makes through the module's name for it (it said None)."""
    test = tmp_path / "test_calls.py"
    test.write_text(textwrap.dedent("""
        import jax, jax.numpy as jnp

        @jax.jit
        def step(x):
            return x + 1.0

        def test_counts(jax_audit):
            x = jnp.zeros(3)
            for _ in range(5):
                x = step(x)
            assert jax_audit.calls(step) == 5, jax_audit.calls(step)
            jax_audit.assert_compiles(step, at_most=1)
    """))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
                          capture_output=True, text=True, cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_jax_audit_fixture_asserts_with_the_reasons_in_pytest_output(tmp_path):
    test = tmp_path / "test_user.py"
    test.write_text(textwrap.dedent("""
        import jax, jax.numpy as jnp

        def test_fixed_batch(jax_audit):
            predict = jax.jit(lambda w, b: jnp.tanh(b @ w))
            for _ in range(3):
                predict(jnp.ones((8, 4)), jnp.ones((32, 8)))
            jax_audit.assert_no_recompile(predict)

        def test_tail_batch(jax_audit):
            @jax.jit
            def predict(w, batch):
                return jnp.tanh(batch @ w)

            for n in (32, 32, 17, 32, 5):
                predict(jnp.ones((8, 4)), jnp.ones((n, 8)))
            jax_audit.assert_compiles(predict, at_most=1)
    """))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
                          capture_output=True, text=True, cwd=str(tmp_path), timeout=300)
    out = proc.stdout
    assert proc.returncode == 1 and "1 failed, 1 passed" in out, out + proc.stderr
    errors = [line[1:].strip() for line in out.splitlines() if line.startswith("E ")]
    assert errors[:3] == [
        "AssertionError: `test_tail_batch.<locals>.predict` (test_user.py:11) compiled 3 times inside this "
        "audit() block, expected at most 1 (5 calls, 3 traces):",
        "shape of `batch` changed 2×: f32[32,8] → f32[17,8] → f32[5,8]",
        "fix: pad dim 0 of `batch` to 32: one compile for the 3 shapes traced ([32,8], [17,8], [5,8]); mask or "
        "slice off the padding; or, to waste less work, pad dim 0 to buckets 8/32 (2 compiles, at most 2× "
        "padding per call)"], out
    # the frame shown is the user's assertion, not jaxlint's raise
    assert "> " + " " * 6 + "jax_audit.assert_compiles(predict, at_most=1)" in out and "raise AssertionError" not in out


def test_gate_text_gives_each_of_two_same_named_functions_its_own_reasons():
    report = fake_report(("step", 3), ("step", 3))  # the same gate message twice
    report["functions"][0]["reasons"] = [{"reason": "shape", "argument": "a", "count": 1, "values": ["f32[1]", "f32[2]"]}]
    report["functions"][1]["reasons"] = [{"reason": "dtype", "argument": "b", "count": 2,
                                          "values": ["f32[1]", "f64[1]", "i32[1]"]}]
    for f in report["functions"]:
        f["fix"] = advice.fix(f["reasons"])
    report["gates"], report["budgets"] = budget.evaluate(report, budget.Settings(max_compiles=1))
    text = budget.gate_text(report)
    first, second = text.split("GATE: ")[1:]
    assert "shape of `a`" in first and "dtype of `b`" not in first
    assert "dtype of `b`" in second and "shape of `a`" not in second


def test_fix_of_a_function_a_library_traces_says_where_the_traces_come_from():
    rec = record(("pytree structure", "dynamic", "(*, *)", "(*, *, *)"))
    assert advice.describe(rec)["fix"].startswith("keep the pytree structure of `dynamic` fixed: pass zeros")
    rec.via = "filter_eval_shape.<locals>._fn"
    fix = advice.describe(rec)["fix"]
    assert fix.startswith("these traces are made inside `filter_eval_shape.<locals>._fn`, from what your code")
    assert "(*, *)" not in fix  # the structures are on the reason line, not repeated in the fix
