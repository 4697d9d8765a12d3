"""jaxlint trace: exact counts on the scripts in fixtures/trace, and the user's run kept whole.

Each run is a real subprocess (`python -m jaxlint trace ...`), the way users run it.
"""

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("jax")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures", "trace")


def trace(*args, cwd=None, env=None):
    """Run `jaxlint trace --format json -o FILE ...`; return (process, report)."""
    out = os.path.join(cwd or os.environ.get("TMPDIR", "/tmp"), f"report-{os.getpid()}.json")
    cmd = [sys.executable, "-m", "jaxlint", "trace", "--format", "json", "-o", out, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd or ROOT, env=env, timeout=300)
    report = None
    if os.path.exists(out):
        with open(out) as fh:
            report = json.load(fh)
        os.remove(out)
    return proc, report


def text_report(script, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", script],
                          capture_output=True, text=True, cwd=cwd or ROOT, timeout=300)
    return proc.stderr


def fixture(name):
    return os.path.join(FIX, name)


def function(report, qualname, line=None):
    rows = [f for f in report["functions"] if f["qualname"] == qualname and (line is None or f["line"] == line)]
    assert len(rows) == 1, [(f["qualname"], f["line"]) for f in report["functions"]]
    return rows[0]


def reasons(row):
    """Miss counts summed per (reason, argument)."""
    out = {}
    for r in row["miss_reasons"]:
        out[(r["reason"], r["argument"])] = out.get((r["reason"], r["argument"]), 0) + r["count"]
    return out


# -- exact counts ------------------------------------------------------------


def test_three_shapes_compile_three_times_with_shape_reasons():
    proc, report = trace(fixture("three_shapes.py"))
    assert proc.returncode == 0, proc.stderr
    row = function(report, "predict")
    assert (row["calls"], row["traces"], row["compiles"]) == (5, 3, 3)
    assert reasons(row) == {("shape", "batch"): 2}
    seen = {(r["before"], r["after"]) for r in row["miss_reasons"]}
    assert seen == {("f32[32,8]", "f32[17,8]"), ("f32[17,8]", "f32[5,8]")}
    # the reason line carries the seconds its misses lost (tests/test_trace_cost.py checks them)
    assert re.search(r"shape of `batch` changed 2× \(\d+\.\d\d s\): f32\[32,8\] → f32\[17,8\] → f32\[5,8\]",
                     text_report(fixture("three_shapes.py")))


def test_static_argument_with_four_values_compiles_four_times():
    proc, report = trace(fixture("static_churn.py"))
    row = function(report, "moment")
    assert (row["calls"], row["compiles"]) == (6, 4)
    assert reasons(row) == {("static value", "power"): 3}
    assert [(r["before"], r["after"]) for r in row["miss_reasons"]] == [("1", "2"), ("2", "3"), ("3", "4")]


def test_lambda_jitted_in_loop_is_one_row_recreated_five_times():
    proc, report = trace(fixture("jit_in_loop.py"))
    rows = [f for f in report["functions"] if f["qualname"] == "<lambda>"]
    assert len(rows) == 1
    assert (rows[0]["line"], rows[0]["calls"], rows[0]["compiles"]) == (7, 5, 5)
    assert reasons(rows[0]) == {("function object re-created", None): 4}
    jax101 = [f for f in report["findings"] if f["code"] == "JAX101"]
    assert len(jax101) == 1 and jax101[0]["line"] == 7
    assert jax101[0]["confirmed"] is True and jax101[0]["evidence"].startswith("5 compilations of `<lambda>`")


def test_a_stacked_decorator_jit_in_a_loop_is_reported_and_confirmed_at_its_decorator_line(tmp_path):
    """The static finding names `@jax.jit` (two lines above `def`); the run makes the wrapper at that
    line on Python 3.11+ and at the `def` line on 3.10: both confirm it."""
    script = tmp_path / "stacked.py"
    script.write_text(textwrap.dedent("""\
        import jax
        import jax.numpy as jnp


        def anneal(x, temperatures):
            for t in temperatures:
                @jax.jit
                @jax.vmap
                def relax(x):
                    return jnp.tanh(x / t)
                x = relax(x)
            return x


        print(anneal(jnp.ones((2, 3)), [1.0, 2.0, 3.0]).sum())
    """))
    proc, report = trace(str(script), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    jax101 = [f for f in report["findings"] if f["code"] == "JAX101"]
    assert [f["line"] for f in jax101] == [7]
    assert jax101[0]["confirmed"] is True
    assert jax101[0]["evidence"].startswith("3 compilations of `anneal.<locals>.relax`")


def test_hoisted_jit_compiles_once():
    proc, report = trace(fixture("hoisted_jit.py"))
    row = function(report, "<lambda>")
    assert (row["calls"], row["traces"], row["compiles"], row["miss_reasons"]) == (5, 1, 1, [])
    assert report["findings"] == [] and report["unpredicted"] == []


def test_float_every_step_is_fifty_transfers_on_that_line():
    proc, report = trace(fixture("float_every_step.py"))
    got = {(os.path.basename(t["file"]), t["line"], t["kind"]): t["count"] for t in report["transfers"]}
    assert got == {("float_every_step.py", 21, "float"): 50, ("float_every_step.py", 22, "numpy"): 1}
    jax201 = [f for f in report["findings"] if f["code"] == "JAX201"]
    assert [(f["line"], f["confirmed"], f["evidence"]) for f in jax201] == [(21, True, "50 transfers (float)")]
    assert function(report, "step")["compiles"] == 1


def test_closure_captured_ten_mib_array_is_a_large_constant():
    proc, report = trace(fixture("large_constant.py"))
    (entry,) = [j for j in report["jaxpr"] if j["qualname"] == "lookup"]
    assert entry["large_constants"] == [{"bytes": 10 * 1024 * 1024, "shape": [2621440], "dtype": "float32"}]
    assert "constant float32[2621440] 10.0 MiB" in " ".join(text_report(fixture("large_constant.py")).split())


def test_debug_print_inside_jit_is_a_callback_with_its_line():
    proc, report = trace(fixture("debug_print.py"))
    (entry,) = [j for j in report["jaxpr"] if j["qualname"] == "normalize"]
    from jax._src import debugging  # jax.debug.print: its own primitive on newer JAX

    primitive = "debug_print" if hasattr(debugging, "debug_print_p") else "debug_callback"
    assert [(c["primitive"], os.path.basename(c["file"]), c["line"]) for c in entry["callbacks"]] == [
        (primitive, "debug_print.py", 8)]
    assert proc.stdout.startswith("norm = ")  # the program's own output is untouched


def test_instrumentation_does_not_change_compile_counts_for_any_spelling():
    script = fixture("spellings.py")
    plain = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300)
    proc, report = trace("--no-static", script)
    assert plain.returncode == 0 and proc.returncode == 0, proc.stderr
    before, after = json.loads(plain.stdout), json.loads(proc.stdout)
    assert before == after  # the script's own compile counts, measured by itself
    total = sum(f["compiles"] for f in report["functions"]) + report["internal_compiles"]
    assert total == before["total"]
    by_name = {}
    for f in report["functions"]:
        by_name[f["name"]] = by_name.get(f["name"], 0) + f["compiles"]
    per = before["per_function"]  # counted by the script around each call
    assert {name: by_name.get(name) for name in per} == per  # "<lambda>": jit lambdas + the pmap lambda
    assert per["<lambda>"] == 4 and per["plain"] == 1  # 3 re-made jit lambdas + 1 pmap; one cache
    assert not any(f["matched_by_name"] for f in report["functions"]) and report["compiles_matched_by_name"] == 0
    assert reasons(function(report, "Model.scale_by")) == {("function object re-created", None): 2}
    assert function(report, "plain")["compiles"] == 1  # jax.jit(plain) re-made each step shares the cache


# -- the user's run is never lost --------------------------------------------


def write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


JITTED = """
import sys
import jax
import jax.numpy as jnp

@jax.jit
def f(x):
    return x * 2

f(jnp.ones(3))
print("out", sys.argv[1:])
print("err", file=sys.stderr)
"""


def _shape(line):
    """A stderr line with its numbers blanked (a platform's log lines carry times and ids)."""
    return re.sub(r"\d+", "#", line)


def test_stdout_stderr_and_argv_pass_through(tmp_path):
    script = write(tmp_path, "prog.py", JITTED)
    proc, report = trace(script, "--lr", "3", cwd=str(tmp_path))
    assert proc.returncode == 0
    assert proc.stdout == "out ['--lr', '3']\n"
    # what the program printed comes before the report, unchanged; any other line there is the
    # platform's own (a TPU runtime's warning), which the plain run prints too
    before = proc.stderr[:proc.stderr.index('{\n  "schema"')].splitlines()
    assert before.count("err") == 1, proc.stderr
    plain = subprocess.run([sys.executable, script, "--lr", "3"], capture_output=True, text=True,
                           cwd=str(tmp_path), timeout=300)
    assert plain.stderr.splitlines().count("err") == 1
    platform = {_shape(line) for line in plain.stderr.splitlines() if line != "err"}
    assert all(_shape(line) in platform for line in before if line != "err"), (before, plain.stderr)
    assert function(report, "f")["compiles"] == 1 and report["script_exit_code"] == 0


SETS_BEFORE_IMPORT = """
import os
os.environ["JAX_ENABLE_X64"] = "1"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=3"
import jax
import jax.numpy as jnp

@jax.jit
def f(x):
    return x + 1

print(f(jnp.zeros(2)).dtype, len(jax.devices("cpu")))
"""


def test_settings_the_program_makes_before_its_import_of_jax_take_effect(tmp_path):
    # jaxlint imports jax only when the program does: JAX reads JAX_ENABLE_X64 at import,
    # XLA_FLAGS when its backend starts (the CPU devices it makes, on any platform); the output is
    # the plain run's
    script = write(tmp_path, "prog.py", SETS_BEFORE_IMPORT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    plain = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=300)
    assert plain.stdout == "float64 3\n"
    proc, report = trace(script, cwd=str(tmp_path), env=env)
    assert proc.stdout == plain.stdout and proc.returncode == 0
    assert function(report, "f")["compiles"] == 1


LIBRARY_IMPORTS_JAX = """
import helper  # imports jax; the program itself never does
print(helper.run())
"""


def test_a_program_whose_library_imports_jax_is_still_instrumented(tmp_path):
    write(tmp_path, "helper.py", """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def g(x):
            return x * 2

        def run():
            return [float(g(jnp.ones(2) * i)[0]) for i in range(3)]
        """)
    script = write(tmp_path, "prog.py", LIBRARY_IMPORTS_JAX)
    proc, report = trace(script, cwd=str(tmp_path))
    assert proc.returncode == 0 and proc.stdout == "[0.0, 2.0, 4.0]\n"
    assert function(report, "g")["compiles"] == 1 and function(report, "g")["calls"] == 3


@pytest.mark.parametrize("ending, code, expect", [
    ("sys.exit(7)", 7, None),
    ("raise ValueError('broken step')", 1, "ValueError: broken step"),
    ("raise KeyboardInterrupt", 130, "KeyboardInterrupt"),
    ("sys.exit('fatal: no data')", 1, "fatal: no data"),
])
def test_failing_scripts_keep_their_exit_code_and_still_get_a_report(tmp_path, ending, code, expect):
    script = write(tmp_path, "prog.py", JITTED + ending + "\n")
    proc, report = trace(script, cwd=str(tmp_path))
    assert proc.returncode == code
    assert report["script_exit_code"] == code
    assert function(report, "f")["compiles"] == 1
    if expect:
        assert expect in proc.stderr
    if "raise" in ending and "Keyboard" not in ending:
        tb = proc.stderr[proc.stderr.index("Traceback"):proc.stderr.index(expect)]
        assert "prog.py\", line 13" in tb and "jaxlint" not in tb and "runpy" not in tb


def test_threads_finish_before_the_report(tmp_path):
    script = write(tmp_path, "threads.py", """
        import threading, time
        import jax, jax.numpy as jnp

        @jax.jit
        def work(x):
            return x + 1

        def worker():
            time.sleep(0.5)
            for n in (2, 3):
                float(work(jnp.ones(n))[0])

        threading.Thread(target=worker).start()
    """)
    proc, report = trace(script, cwd=str(tmp_path))
    assert proc.returncode == 0
    assert function(report, "work")["compiles"] == 2
    assert [(t["line"], t["kind"], t["count"]) for t in report["transfers"]] == [(12, "float", 2)]


def test_run_as_module_with_arguments(tmp_path):
    pkg = tmp_path / "app"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(JITTED)
    proc, report = trace("-m", "app.train", "a", "-b", cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "out ['a', '-b']\n"
    assert function(report, "f")["compiles"] == 1


def test_gates_exit_3_after_the_report():
    proc, report = trace("--max-compiles", "2", fixture("jit_in_loop.py"))
    assert proc.returncode == 3 and report["gates"] and report["functions"]
    proc, report = trace("--max-transfers-per-line", "10", fixture("float_every_step.py"))
    assert proc.returncode == 3 and "made 50 host transfers" in report["gates"][0]
    proc, report = trace("--max-compiles", "5", fixture("jit_in_loop.py"))
    assert proc.returncode == 0 and report["gates"] == []


AOT = """
import jax
import jax.numpy as jnp

def f(x):
    return x * 2

compiled = jax.jit(f).lower(jnp.ones(3)).compile()  # ahead of time: no jit call to attribute it by
print(compiled(jnp.ones(3))[0])
"""


def test_max_compiles_refuses_to_pass_on_counts_matched_by_name(tmp_path):
    script = write(tmp_path, "aot.py", AOT)
    proc, report = trace("--max-compiles", "5", script, cwd=str(tmp_path))
    assert proc.returncode == 3 and proc.stdout == "2.0\n"
    assert report["compiles_matched_by_name"] >= 1
    assert len(report["gates"]) == 1 and "--max-compiles 5 cannot pass" in report["gates"][0]
    proc, report = trace("--max-transfers-per-line", "5", script, cwd=str(tmp_path))
    assert proc.returncode == 0 and report["gates"] == []  # transfers are counted exactly: that gate passes


def test_gate_messages_use_the_reports_relative_paths():
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--max-transfers-per-line", "10",
                           os.path.join("fixtures", "trace", "float_every_step.py")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 3, proc.stderr
    where = os.path.join("fixtures", "trace", "float_every_step.py") + ":21"
    gates = [line for line in proc.stderr.splitlines() if line.startswith("GATE: ")]
    assert gates == [f"GATE: {where} made 50 host transfers (--max-transfers-per-line 10)"]
    report = proc.stderr[:proc.stderr.index("GATE: ")]
    assert f"{where}" in report and os.path.abspath(where) not in proc.stderr


def test_script_failure_wins_over_a_gate(tmp_path):
    script = write(tmp_path, "prog.py", JITTED + "f(jnp.ones(4))\nsys.exit(5)\n")
    proc, report = trace("--max-compiles", "1", script, cwd=str(tmp_path))
    assert proc.returncode == 5 and report["gates"]


def test_text_report_fits_80_columns():
    stderr = text_report(fixture("jit_in_loop.py"), cwd=FIX)
    # jaxlint's report, not what the platform printed before it (a TPU runtime's start-up warning)
    report = stderr[stderr.index("jaxlint trace: "):]
    assert "Recompilation hotspots" in report and "Host transfers" in report
    assert max(len(line) for line in report.splitlines()) <= 80, report


def test_json_report_has_the_documented_keys():
    proc, report = trace(fixture("float_every_step.py"))
    assert {"functions", "transfers", "uploads", "jaxpr", "findings", "internal_compiles",
            "script_exit_code"} <= set(report)
    assert set(report["functions"][0]) >= {"name", "qualname", "file", "line", "calls", "traces", "compiles",
                                           "trace_seconds", "compile_seconds", "miss_reasons"}
    assert set(report["transfers"][0]) == {"file", "line", "kind", "count", "via", "fix"}
    assert report["transfers"][0]["via"] is None  # made by the user's line itself, not a library
    assert set(report["jaxpr"][0]) >= {"name", "file", "line", "equations", "callbacks", "large_constants",
                                       "float64_ops"}
    assert set(report["findings"][0]) >= {"code", "file", "line", "confirmed", "evidence"}


def test_usage_errors_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace"], capture_output=True, text=True)
    assert proc.returncode == 2 and "give a script" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", str(tmp_path / "missing.py")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_without_jax_trace_says_so_in_one_line_and_exits_2(tmp_path):
    # a Python environment without jax (jaxlint from this checkout); `jaxlint trace` looks for
    # jax without importing it (the program imports it), so only an absent jax is "missing"
    import venv

    venv.EnvBuilder(with_pip=False).create(tmp_path / "bare")
    python = tmp_path / "bare" / ("Scripts" if os.name == "nt" else "bin") / "python"
    env = dict(os.environ, PYTHONPATH=ROOT)
    assert subprocess.run([str(python), "-c", "import jax"], capture_output=True, env=env).returncode != 0
    proc = subprocess.run([str(python), "-m", "jaxlint", "trace", fixture("hoisted_jit.py")],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "`pip install jax`" in proc.stderr and "flake8-jax[" not in proc.stderr


def test_uploads_made_while_tracing_are_constants_not_copies():
    """`jnp.array(table)` inside a jitted function runs once per trace and makes a constant of
    the program: no copy runs per call, so none is counted (diffrax's solve showed 176 phantom
    copies on the user's line); a real upload after it is."""
    proc, report = trace(fixture("traced_upload.py"))
    assert proc.returncode == 0, proc.stderr
    assert sum(fn["traces"] for fn in report["functions"] if fn["qualname"] == "f") == 4
    assert [(u["line"], u["kind"], u["count"]) for u in report["uploads"]] == [(17, "jnp.asarray", 1)]


def test_every_hotspot_row_has_a_fix_with_its_numbers():
    """Syncs, uploads, eager dispatches and callbacks get a fix line, not only recompiles; rows
    below the hotspot counts get none."""
    _, report = trace(fixture("float_every_step.py"))
    fixes = {(t["line"], t["kind"]): t["fix"] for t in report["transfers"]}
    assert fixes[(22, "numpy")] is None  # one read after the loop
    assert fixes[(21, "float")].startswith("50 syncs in 50 steps, each waiting for the device:")
    assert "`lax.scan`" in fixes[(21, "float")]
    _, report = trace(fixture("uploads.py"))
    fixes = {(u["line"], u["kind"]): u["fix"] for u in report["uploads"]}
    assert fixes[(18, "jnp.asarray")].startswith("50 copies (3.1 MiB): if it is the same data every time, upload")
    assert fixes[(18, "jit argument")].startswith("50 copies of NumPy arguments (400.0 KiB)")
    text = text_report(fixture("uploads.py"))
    assert "      fix: 50 copies (3.1 MiB): if it is the same data every time" in text
    from jaxlint.trace import advice

    assert advice.eager_fix({"count": 45}).startswith("45 dispatches, one per operation: `jax.jit`")
    assert advice.eager_fix({"count": 9}) is None
    assert advice.callback_fix({"count": 200}).startswith("200 host callbacks")


def test_a_numpy_table_closed_over_is_a_large_constant_on_every_version():
    """jax 0.8 holds a NumPy constant in a TypedNdArray (no `nbytes`) while tracing: its size is
    read from size and dtype, so the fact holds there as on 0.6 and 0.10 (bench/trace_matrix.py
    runs this fixture on each version)."""
    proc, report = trace(fixture("numpy_constant.py"))
    assert proc.returncode == 0, proc.stderr
    (row,) = [j for j in report["jaxpr"] if j["qualname"] == "lookup"]
    assert row["large_constants"] == [{"bytes": 10 << 20, "shape": [2621440], "dtype": "float32"}]
    from jaxlint.trace.jaxpr_facts import _constant

    class Typed:  # what jax 0.8's TypedNdArray offers: no nbytes
        size, dtype, shape = 2_621_440, np.dtype("float32"), (2_621_440,)

    assert _constant(Typed()) == {"bytes": 10 << 20, "shape": [2621440], "dtype": "float32"}


def test_importing_the_trace_package_and_plugin_does_not_import_jax():
    code = ("import sys, jaxlint.trace, jaxlint.trace.pytest_plugin, jaxlint.trace.adapters; "
            "print('jax' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "False"


def test_host_to_device_copies_are_counted_per_line_with_bytes():
    proc, report = trace(fixture("uploads.py"))
    assert proc.returncode == 0
    got = {(os.path.basename(u["file"]), u["line"], u["kind"]): (u["count"], u["bytes"]) for u in report["uploads"]}
    assert got == {
        ("uploads.py", 18, "jnp.asarray"): (50, 50 * 256 * 64 * 4),  # the same table every step
        ("uploads.py", 18, "jit argument"): (50, 50 * 32 * 64 * 4),  # a NumPy batch passed to jit
        ("uploads.py", 19, "device_put"): (50, 50 * 4),  # a NumPy float32 scalar
        ("uploads.py", 20, "jnp.array"): (50, 50 * 2 * 8),  # a Python list, as NumPy float64 on the host
    }  # jnp.asarray of a JAX array (line 21) copies nothing and is not counted
    jax205 = [(f["line"], f["confirmed"], f["evidence"]) for f in report["findings"] if f["code"] == "JAX205"]
    # JAX205 reports only names of host data bound before the loop (not a literal display)
    assert jax205 == [(18, True, "50 host-to-device copies of 3.1 MiB in all (jnp.asarray)")]
    assert "Host-to-device copies" in text_report(fixture("uploads.py"))


def test_unblocked_timing_is_confirmed_by_clock_reads_while_the_result_is_computed():
    proc, report = trace(fixture("unblocked_timing.py"))
    assert proc.returncode == 0
    jax204 = [(f["line"], f["confirmed"], f["evidence"]) for f in report["findings"] if f["code"] == "JAX204"]
    # The script measures both ways itself. Where the backend dispatches asynchronously (CPU on
    # jax 0.4.38 and later, measured; GPU and TPU always) the unblocked read (line 26) comes while
    # `chain` still runs; where it does not (CPU on jax 0.4.30), the result is ready by then.
    unblocked, blocked = (float(v) for v in re.findall(r"([0-9.]+) ms", proc.stdout))
    if unblocked < blocked / 10:
        assert jax204 == [(26, True, "20 of 20 clock reads here came while the last jitted call's result "
                                     "was still being computed")]
    else:
        assert unblocked > blocked / 2, proc.stdout  # not a measurement in between
        assert jax204 == [(26, False, "0 of 20 clock reads here came while the last jitted call's result "
                                      "was still being computed")]


# -- nothing of jaxlint in the user's program ----------------------------------

FAILING = {
    # an error while tracing a jitted function: JAX filters its frames, jaxlint's must go too
    "reshape_in_jit": """
        import jax
        import jax.numpy as jnp


        @jax.jit
        def f(x):
            return jnp.reshape(x, (3, 5))


        def main():
            return f(jnp.ones(4))


        main()
    """,
    # nested jits, a scan body, and an exception chained from it (`raise ... from e`)
    "chained_from_nested_jit": """
        import functools
        import jax
        import jax.numpy as jnp


        @functools.partial(jax.jit, static_argnums=1)
        def inner(x, n):
            return jax.lax.scan(lambda c, _: (c + float(c), None), x, None, length=n)[0]


        @jax.jit
        def outer(x):
            return inner(x, 3) * 2


        try:
            outer(jnp.ones(()))
        except Exception as e:
            raise RuntimeError("wrapped") from e
    """,
    # an error raised by a conversion jaxlint counts (its transfer hook is on the stack)
    "float_of_vector": """
        import jax.numpy as jnp

        x = jnp.ones(3)
        print(float(x))
    """,
}


@pytest.mark.parametrize("name, filtering", [
    ("reshape_in_jit", "auto"), ("reshape_in_jit", "off"), ("chained_from_nested_jit", "auto"),
    ("float_of_vector", "auto"),
])
def test_traceback_is_the_one_plain_python_prints(tmp_path, name, filtering):
    script = write(tmp_path, f"{name}.py", FAILING[name])
    env = dict(os.environ, JAX_TRACEBACK_FILTERING=filtering)
    plain = subprocess.run([sys.executable, script], capture_output=True, text=True, cwd=str(tmp_path),
                           env=env, timeout=300)
    traced = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--no-static", script],
                            capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=300)
    assert plain.returncode == traced.returncode == 1
    assert traced.stdout == plain.stdout
    shown = traced.stderr[:traced.stderr.index("jaxlint trace: ")]
    # Python 3.10 with JAX's "auto" filtering starts with the jax.errors.SimplifiedTraceback it chains;
    # what the platform printed before it (a TPU runtime's start-up warning) is the plain run's too
    start = re.search(r"^(Traceback \(most recent call last\):$|jax\.errors\.SimplifiedTraceback)", shown, re.M)
    assert start is not None, shown
    assert shown[:start.start()] == plain.stderr[:start.start()]
    files = re.findall(r'^\s*File "([^"]+)", line (\d+), in (\S+)$', shown, re.M)
    assert files == re.findall(r'^\s*File "([^"]+)", line (\d+), in (\S+)$', plain.stderr, re.M)
    assert not any("jaxlint" in f for f, _, _ in files)
    assert shown == plain.stderr  # every line: source, carets, chained causes, JAX's note


def test_program_sees_argv_and_file_as_typed(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    (real / "show.py").write_text(textwrap.dedent("""
        import sys
        print(sys.argv)
        print(__file__, sys.modules["__main__"].__file__, sys._getframe().f_code.co_filename)
        print(sys.path[0], type(__loader__).__name__, __spec__ and (__spec__.name, __spec__.origin), __package__, __name__)
    """))
    for typed in ("./link/../link/show.py", "link/show.py", str(tmp_path / "link" / "show.py")):
        plain = subprocess.run([sys.executable, typed, "--lr", "3"], capture_output=True, text=True,
                               cwd=str(tmp_path), timeout=300)
        traced = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--no-static", typed, "--lr", "3"],
                                capture_output=True, text=True, cwd=str(tmp_path), timeout=300)
        assert plain.returncode == traced.returncode == 0, traced.stderr
        assert plain.stdout.splitlines()[0] == repr([typed, "--lr", "3"])
        assert traced.stdout == plain.stdout
    modular = [subprocess.run([*pre, "-m", "show"], capture_output=True, text=True, cwd=str(tmp_path / "link"),
                              timeout=300).stdout for pre in ([sys.executable], [sys.executable, "-m", "jaxlint",
                                                                                 "trace", "--no-static"])]
    assert modular[0] == modular[1] and "show.py" in modular[0]


def test_a_program_that_never_imports_jax_gets_one_line(tmp_path):
    script = write(tmp_path, "plain.py", "import sys\nprint('hi')\nprint('warn', file=sys.stderr)\nsys.exit(3)\n")
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", script], capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 3 and proc.stdout == "hi\n"
    assert proc.stderr == "warn\njaxlint trace: plain.py exited with 3; it never imported jax, so there is nothing to report\n"
    # the JSON keeps its keys (a tool reading it needs no special case) and says so
    proc, report = trace(script, cwd=str(tmp_path))
    assert report["jax_imported"] is False and report["functions"] == [] and report["environment"]["jax"] is None
    proc, report = trace(fixture("hoisted_jit.py"))
    assert report["jax_imported"] is True
