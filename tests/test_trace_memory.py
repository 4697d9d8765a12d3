"""jaxlint trace: each compiled program's memory, donation, set-up order, the memory gates
(issue 30). Every figure is compared with what JAX itself says on the same run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from jaxlint.trace import audit  # noqa: E402
from jaxlint.trace import memory as M  # noqa: E402
from jaxlint.trace import memory_report as MR  # noqa: E402
from jaxlint.trace.sizes import format_size, parse_size  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures", "trace")
STATS = ("argument", "output", "temp", "alias", "generated_code")


def _hand(fn, *args):
    """What the user would write: jax.jit(f).lower(...).compile().memory_analysis()."""
    m = jax.jit(fn).lower(*args).compile().memory_analysis()
    return {k: getattr(m, f"{k}_size_in_bytes") for k in STATS}


def make_step():
    """A new function object each time: JAX caches compiles per function, across tests."""
    def mlp_step(p, x):
        h = jnp.tanh(x @ p["w1"])
        y = h @ p["w2"]
        loss = (y ** 2).mean()
        return {"w1": p["w1"] - 0.01 * (x.T @ h), "w2": p["w2"] - 0.01 * (h.T @ y)}, loss

    return mlp_step


def params(n=256):
    return {"w1": jnp.ones((n, n)), "w2": jnp.ones((n, 8))}


def test_each_compile_has_the_figures_memory_analysis_gives():
    x = jnp.ones((64, 256))
    with audit() as a:
        step = jax.jit(make_step())
        p, _ = step(params(), x)
        step(p, jnp.ones((32, 256)))  # a second shape: a second compile with its own figures
    got = a.memory(step)
    assert len(got) == 2
    assert {k: got[0][k] for k in STATS} == _hand(make_step(), params(), x)
    assert {k: got[1][k] for k in STATS} == _hand(make_step(), params(), jnp.ones((32, 256)))
    assert got[0]["argument"] == (256 * 256 + 256 * 8 + 64 * 256) * 4  # the arguments' own bytes
    for m in got:  # XLA's peak where this jaxlib reports one, else the labelled upper bound
        if m["peak"] is not None:
            assert m["footprint"] == m["peak"] and m["footprint_exact"]
        else:
            assert m["footprint"] == m["argument"] + m["output"] + m["temp"] - m["alias"]
            assert not m["footprint_exact"]


def test_report_lists_programs_largest_temporaries_first():
    def small(x):
        return x + 1

    def big(x):
        return jnp.sort(jnp.tanh(x @ x.T), axis=0).sum(0)

    with audit() as a:
        jax.jit(small)(jnp.ones(4))
        jax.jit(big)(jnp.ones((512, 64)))
    programs = a.report()["memory"]["programs"]
    assert [p["function"].rsplit(".", 1)[-1] for p in programs] == ["big", "small"]
    assert programs[0]["temp"] == _hand(big, jnp.ones((512, 64)))["temp"] > programs[1]["temp"]


def test_arguments_that_come_back_as_results_are_donation_candidates_with_their_bytes():
    x = jnp.ones((64, 256))
    with audit() as a:
        step = jax.jit(make_step())
        p = params()
        for _ in range(5):
            p, loss = step(p, x)
    row = next(f for f in a.report()["functions"] if f["name"] == "mlp_step")
    d = row["donation"]
    assert d["argnums"] == [0] and d["names"] == ["p"]  # x is the same array every call, not a result
    assert d["bytes"] == (256 * 256 + 256 * 8) * 4
    assert "donate_argnums=(0,)" in d["fix"] and d["shown"] is False  # 264 KiB: under the 1 MiB default


def test_donated_argument_or_one_the_program_keeps_is_not_advised():
    x = jnp.ones((64, 256))
    with audit() as a:
        donated = jax.jit(make_step(), donate_argnums=0)
        kept = jax.jit(make_step())
        p, q = params(), params()
        history = []
        for _ in range(4):
            p, _ = donated(p, x)  # JAX deletes the old p: already donated
            history.append(q)  # the old q is still needed: donating it would break the program
            q, _ = kept(q, x)
    rows = {f["qualname"]: f for f in a.report()["functions"]}
    assert all(r["donation"] is None for r in rows.values())
    assert len(history) == 4


def test_a_function_called_once_gives_no_advice():
    with audit() as a:
        step = jax.jit(make_step())
        step(params(), jnp.ones((8, 256)))
    assert next(f for f in a.report()["functions"] if f["name"] == "mlp_step")["donation"] is None


def test_donation_that_was_not_usable_is_counted_per_call_site_and_still_warned():
    def total(x):
        return x.sum()  # no output of x's shape: the donation cannot be used

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with audit() as a:
            f = jax.jit(total, donate_argnums=0)
            f(jnp.ones(3))  # line A
            f(jnp.ones(5))  # line B: another shape, another lowering
    ours = [w for w in seen if "donated buffers were not usable" in str(w.message)]
    assert len(ours) == 2  # JAX's warning still reaches the program, once per lowering as without jaxlint
    assert all("interpreters" in w.filename for w in ours)  # and from JAX's own line
    rows = a.report()["memory"]["donation_unusable"]
    assert len(rows) == 2 and [r["count"] for r in rows] == [1, 1]
    assert {r["file"] for r in rows} == {__file__} and rows[0]["line"] != rows[1]["line"]  # each call's own line
    assert {r["function"] for r in rows} == {total.__qualname__}
    assert sorted("[3]" in r["arguments"] or "[5]" in r["arguments"] for r in rows) == [True, True]


def test_assert_memory_passes_under_the_limit_and_fails_with_the_breakdown():
    x = jnp.ones((64, 256))
    with audit() as a:
        step = jax.jit(make_step())
        step(params(), x)
    total = a.memory(step)[0]["footprint"]
    a.assert_memory(step, at_most=total)
    a.assert_memory(step, at_most="1 GB")
    with pytest.raises(AssertionError) as e:
        a.assert_memory(step, at_most=total - 1)
    text = str(e.value)
    assert "mlp_step" in text and "temporaries" in text and "arguments" in text and format_size(total) in text
    with pytest.raises(TypeError):
        a.assert_memory(step, at_most="lots")


def test_assert_memory_fails_when_the_function_did_not_compile_in_the_block():
    step = jax.jit(make_step())
    step(params(), jnp.ones((4, 256)))
    with audit() as a:
        step(params(), jnp.ones((4, 256)))  # the cached executable: no compile here
    with pytest.raises(AssertionError, match="no compile of it"):
        a.assert_memory(step, at_most="1 GB")


@pytest.mark.parametrize("text, n", [("2 GB", 2 * 10 ** 9), ("512MiB", 512 << 20), ("1.5G", 3 << 29),
                                     ("1000", 1000), ("10 kB", 10000), (4096, 4096)])
def test_sizes_parse(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["2 GBs", "-1", "lots", "", True, -5])
def test_bad_sizes_are_refused(text):
    with pytest.raises(ValueError):
        parse_size(text)


# -- through `jaxlint trace` ---------------------------------------------------------------

from test_trace import trace, write  # noqa: E402  (the same runner as the other trace tests)


def test_trace_memory_fixture_matches_the_programs_own_memory_analysis():
    proc, report = trace(os.path.join(FIX, "memory.py"))
    assert proc.returncode == 0, proc.stderr
    hand = json.loads(proc.stdout.strip().splitlines()[-1])  # what the program printed itself
    rows = {p["function"]: p for p in report["memory"]["programs"]}
    for name, figures in hand.items():
        assert {k: rows[name][k] for k in STATS} == figures, name
    assert list(rows) == sorted(rows, key=lambda n: -rows[n]["temp"])
    d = report["memory"]["donation"]
    assert [x["function"] for x in d] == ["train_step"] and d[0]["shown"] and d[0]["bytes"] == hand["train_step"]["argument"] - 64 * 512 * 4


SETUP = """
import os
os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".5"   # before the import: not seen, in time
import jax
import jax.numpy as jnp
os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # after the import, before any array: in time
os.environ["JAX_ENABLE_X64"] = "1"                     # read at import jax: no effect
os.environ["MY_OWN_SETTING"] = "1"                     # not JAX's
x = jnp.zeros(3)                                        # the backend starts here
os.environ.update(XLA_FLAGS="--xla_force_host_platform_device_count=2")  # no effect
try:
    jax.distributed.initialize("localhost:1", 1, 0)
except RuntimeError as e:
    print("raised")
print(x.dtype, jax.device_count())
"""


def test_setting_order_as_the_run_shows_it(tmp_path):
    script = write(tmp_path, "setup.py", SETUP)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    plain = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=300)
    proc, report = trace(script, cwd=str(tmp_path), env=env)
    assert proc.stdout == plain.stdout == "raised\nfloat32 1\n"
    mem = report["memory"]
    got = [(s["name"], s["line"], s["effective"], (s["read_at"] or {}).get("line")) for s in mem["settings"]]
    assert got == [("XLA_PYTHON_CLIENT_PREALLOCATE", 6, True, None), ("JAX_ENABLE_X64", 7, False, 4),
                   ("XLA_FLAGS", 10, False, 9)]
    assert mem["jax_imported_at"]["line"] == 4 and mem["backend_started_at"]["line"] == 9
    assert [(i["line"], i["late"], i["backend_started_at"]["line"]) for i in mem["distributed_initialize"]] == [(12, True, 9)]
    findings = {(f["code"], f["line"]): f for f in report["findings"]}
    assert findings[("JAX801", 7)]["confirmed"] and findings[("JAX801", 10)]["confirmed"]
    assert findings[("JAX802", 12)]["confirmed"]
    assert ("JAX801", 6) not in findings  # before the first array: the static rule is quiet too
    if (report.get("environment") or {}).get("backend") == "cpu":
        assert mem["device"]["available"] is False and "cpu" in mem["device"]["why"]
    else:  # the program ran on an accelerator (its JAX_ settings were removed): it reports memory
        assert mem["device"]["available"] is True, mem["device"]


def test_memory_gate_exits_3_with_the_breakdown_and_passes_above(tmp_path):
    script = os.path.join(FIX, "memory.py")
    proc, report = trace("--budget-memory", "train_step=1 KiB", script)
    assert proc.returncode == 3
    gate = report["gates"][0]
    assert gate.startswith("train_step at ") and "over its budget of 1.0 KiB" in gate and "temporaries" in gate
    proc, report = trace("--budget-memory", "train_step=1 GB", "--budget-memory", "nothing_*=1", script)
    assert proc.returncode == 0 and report["gates"] == []
    results = {r["pattern"]: r for r in report["budgets"]}
    assert results["train_step"]["passed"] and results["train_step"]["bytes"] > 0
    assert results["nothing_*"]["function"] is None


@pytest.mark.parametrize("bad", ["train_step", "=1GB", "a=lots", "a=1=2", "a=-3"])
def test_memory_gate_values_are_refused_before_the_program_runs(bad, tmp_path):
    marker = tmp_path / "ran"
    script = write(tmp_path, "p.py", f"open({str(marker)!r}, 'w').close()\n")
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--budget-memory", bad, script],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--budget-memory" in proc.stderr
    assert not marker.exists()


def test_memory_gate_and_threshold_from_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.jaxlint.trace]\nbudget-memory = {"train_step" = "1 KiB"}\ndonation-threshold = "1 GB"\n')
    script = tmp_path / "prog.py"
    script.write_text(open(os.path.join(FIX, "memory.py")).read())
    proc, report = trace(str(script), cwd=str(tmp_path))
    assert proc.returncode == 3 and "[tool.jaxlint.trace] budget-memory 'train_step'" in report["gates"][0]
    assert report["memory"]["donation_threshold"] == 10 ** 9
    assert not any(d["shown"] for d in report["memory"]["donation"])


def test_text_report_has_the_memory_sections():
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", os.path.join(FIX, "memory.py")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    text = proc.stderr
    hand = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "Memory of each compiled program" in text
    block = text[text.index("Memory of each compiled program"):]
    first, second = sorted(hand, key=lambda n: -hand[n]["temp"])  # larger temporaries first
    assert block.index(f"{first} at") < block.index(f"{second} at")
    assert "fix: `jax.jit(train_step, donate_argnums=(0, 1))`" in " ".join(text.split())
    assert "Device memory: not available" in text


def test_html_report_has_the_memory_table(tmp_path):
    page = tmp_path / "r.html"
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--html", str(page),
                           os.path.join(FIX, "memory.py")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0
    html = page.read_text()
    section = html[html.index('<section id="memory">'):]
    section = section[:section.index("</section>")]
    assert "train_step" in section and "Donation" in section and "donate_argnums=(0, 1)" in section


def test_m_unit_setting_kinds():
    assert M.setting_kind("JAX_ENABLE_X64") == "import"
    assert M.setting_kind("XLA_FLAGS") == "backend" and M.setting_kind("TPU_NAME") == "backend"
    assert M.setting_kind("JAX_SOMETHING_ELSE") is None and M.setting_kind("PATH") is None


def test_donation_fix_names_keywords_and_the_wrapper():
    d = {"argnums": [0, 1], "argnames": ["opt"], "names": ["params", "state", "opt"], "bytes": 3 << 20,
         "wrapper": "jax.pmap"}
    fix = MR.donation_fix("update", d)
    assert fix.startswith("`jax.pmap(update, donate_argnums=(0, 1), donate_argnames=('opt',))`")
    assert "3.0 MiB" in fix



@pytest.mark.parametrize("table, error", [
    ('budget-memory = {"step" = "lots"}', "budget-memory 'step'"),
    ('budget-memory = "2 GB"', "budget-memory must be a table"),
    ('budget-memory = {" " = "1 GB"}', "empty function pattern"),
    ('donation-threshold = -1', "donation-threshold"),
])
def test_bad_memory_settings_in_pyproject_are_usage_errors(tmp_path, table, error):
    (tmp_path / "pyproject.toml").write_text(f"[tool.jaxlint.trace]\n{table}\n")
    script = write(tmp_path, "p.py", "print('ran')\n")
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", script], capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=120)
    assert proc.returncode == 2 and error in proc.stderr and "ran" not in proc.stdout
