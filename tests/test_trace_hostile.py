"""jaxlint trace against programs that fight back: `os._exit`, wiped globals and builtins,
their own `jax.jit`/`numpy.asarray`, failing atexit handlers, `SystemExit` in odd places.

Each one still ends with the report (or one line saying why not), its own exit code and no
jaxlint traceback. Runs are real subprocesses, as in test_trace.py.
"""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from jaxlint.trace import audit  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OWN_CODE = f'File "{os.path.join(ROOT, "jaxlint")}{os.sep}'  # a traceback line in jaxlint's code

PROLOGUE = """
import os, sys
import jax
import jax.numpy as jnp

@jax.jit
def f(x):
    return x * 2

f(jnp.ones(3)); f(jnp.ones(4))
print("out")
"""


def run(tmp_path, body, *options):
    """`jaxlint trace --format json -o FILE [options] prog.py` on PROLOGUE + body: (process, report)."""
    script = tmp_path / "prog.py"
    script.write_text(PROLOGUE + textwrap.dedent(body))
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "jaxlint", "trace", "--format", "json", "-o", str(out), *options, str(script)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(tmp_path), timeout=300)
    assert OWN_CODE not in proc.stderr, proc.stderr
    report = json.loads(out.read_text()) if out.exists() else None
    return proc, report


def plain(tmp_path):
    """The same program under plain `python`: its exit code."""
    return subprocess.run([sys.executable, str(tmp_path / "prog.py")], capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=300).returncode


def row(report, qualname):
    (r,) = [f for f in report["functions"] if f["qualname"] == qualname]
    return r


# -- os._exit ------------------------------------------------------------------


def test_os_exit_still_reports_and_exits_with_its_code(tmp_path):
    proc, report = run(tmp_path, "os._exit(4)\n")
    assert proc.returncode == 4 == plain(tmp_path)
    assert proc.stdout == "out\n"
    assert report["script_exit_code"] == 4
    assert (row(report, "f")["calls"], row(report, "f")["compiles"]) == (2, 2)
    # the report on stderr too, exactly once; what the platform printed before it (a TPU runtime's start-up
    # warning) is not jaxlint's
    start = re.search(r"^\{", proc.stderr, re.M)
    assert start is not None and json.loads(proc.stderr[start.start():]) == report


def test_os_exit_text_report_and_gate_go_through_the_same_path(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PROLOGUE + "os._exit(0)\n")
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--max-compiles", "1", str(script)],
                          capture_output=True, text=True, cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 3  # the program succeeded, the gate did not
    assert proc.stderr.count("exited with 0") == 1 and "Recompilation hotspots" in proc.stderr
    assert re.search(r"GATE: f at prog\.py:\d+ compiled 2 times \(--max-compiles 1\)", proc.stderr), proc.stderr


@pytest.mark.parametrize("how", ["sys.stderr = io.StringIO()", "sys.stderr = open(os.devnull, 'w')",
                                 "sys.stderr.close()"])
def test_a_program_that_replaces_or_closes_sys_stderr_still_gets_its_report(tmp_path, how):
    """The report goes to the stderr the run started with, not to what the program put in its
    place; the program's exit code and stdout are its own."""
    script = tmp_path / "prog.py"
    script.write_text(PROLOGUE + f"import io\n{how}\nprint('still here')\n")
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", str(script)], capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0 == plain(tmp_path)
    assert proc.stdout == "out\nstill here\n"
    assert proc.stderr.count("Recompilation hotspots") == 1, proc.stderr


def test_os_exit_from_a_thread_while_main_waits(tmp_path):
    proc, report = run(tmp_path, """
        import threading, time
        def worker():
            time.sleep(0.3)
            f(jnp.ones(5))
            os._exit(9)
        threading.Thread(target=worker).start()
    """)
    assert proc.returncode == 9
    assert report["script_exit_code"] == 9 and row(report, "f")["compiles"] == 3


def test_forked_children_that_os_exit_do_not_report(tmp_path):
    proc, report = run(tmp_path, """
        import multiprocessing
        def child(n):
            return n * n
        if __name__ == "__main__":
            ctx = multiprocessing.get_context("fork")
            p = ctx.Process(target=child, args=(3,))
            p.start(); p.join()
            print("child", p.exitcode)
    """)
    assert proc.returncode == 0 and proc.stdout == "out\nchild 0\n"
    assert proc.stderr.count('"schema"') == 1  # one report, not one per process
    assert report["script_exit_code"] == 0


# -- the program wipes its own state -----------------------------------------


@pytest.mark.parametrize("ending", [
    "globals().clear()\n",
    "del sys.modules['__main__']\n",
    # builtins cut down to a minimal set: jaxlint puts them back before it needs them
    "import builtins\n_drop = delattr\n"
    "for _k in list(vars(builtins)):\n"
    "    if _k not in ('print', '__import__', '__name__', '__build_class__'):\n"
    "        _drop(builtins, _k)\n"
    "builtins.print = lambda *a, **k: None\n",
], ids=["globals-cleared", "main-module-deleted", "builtins-minimal"])
def test_program_that_wipes_its_globals_or_builtins_still_reports(tmp_path, ending):
    proc, report = run(tmp_path, ending)
    assert proc.returncode == 0 and proc.stdout == "out\n"
    assert report["script_exit_code"] == 0 and row(report, "f")["compiles"] == 2
    assert "Traceback" not in proc.stderr


def test_builtins_wiped_before_raising_still_show_the_programs_traceback(tmp_path):
    proc, report = run(tmp_path, """
        import builtins
        _err = ValueError
        del builtins.ValueError, builtins.SystemExit, builtins.KeyboardInterrupt, builtins.BaseException
        raise _err("after the wipe")
    """)
    assert proc.returncode == 1 and "ValueError: after the wipe" in proc.stderr
    assert report["script_exit_code"] == 1


# -- the program patches what jaxlint patches --------------------------------


def test_program_with_its_own_jax_jit(tmp_path):
    proc, report = run(tmp_path, """
        import atexit
        _jit = jax.jit
        def my_jit(fun, *args, **kwargs):
            return _jit(fun, *args, **kwargs)
        jax.jit = my_jit
        g = jax.jit(lambda x: x + 1)
        g(jnp.ones(2)); g(jnp.ones(2)); g(jnp.ones(5))
        atexit.register(lambda: print("after:", jax.jit is my_jit, type(os._exit).__name__, file=sys.stderr))
    """)
    assert proc.returncode == 0
    lam = row(report, "<lambda>")
    assert (lam["calls"], lam["traces"], lam["compiles"]) == (3, 2, 2)
    assert row(report, "f")["compiles"] == 2
    # after the run the program's own jax.jit is still there, and os._exit is Python's again
    assert "after: True builtin_function_or_method" in proc.stderr


@pytest.mark.parametrize("replace, counted", [
    ("np.asarray = getattr(np.asarray, '__wrapped__', np.asarray)", 0),  # NumPy's own set back
    ("_prev = np.asarray\nnp.asarray = lambda a, *k, **kw: _prev(a, *k, **kw)", 1),  # wraps jaxlint's
], ids=["restored", "wrapped"])
def test_program_that_replaces_numpy_and_jnp_asarray(tmp_path, replace, counted):
    proc, report = run(tmp_path, f"""
import atexit
import numpy as np
_real_jnp = jnp.asarray
jnp.asarray = lambda *a, **k: _real_jnp(*a, **k)
{replace}
mine = np.asarray
print(np.asarray(f(jnp.asarray([1.0, 2.0]))))
atexit.register(lambda: print("kept:", np.asarray is mine, file=sys.stderr))
""")
    assert proc.returncode == 0 and proc.stdout == "out\n[2. 4.]\n"
    assert row(report, "f")["compiles"] == 3
    if not counted and (report.get("environment") or {}).get("backend") != "cpu":
        # off CPU, NumPy's own asarray reads the array through its __array__, which jaxlint also
        # counts; on CPU it reads the buffer directly, seen only through the wrapper just removed
        counted = 1
    assert sum(t["count"] for t in report["transfers"] if t["kind"] == "numpy") == counted
    assert "kept: True" in proc.stderr


def test_uninstall_keeps_the_programs_replacements_and_leaves_inert_wrappers():
    import numpy as np
    from jax._src import pjit

    from jaxlint.trace.adapters import select
    from jaxlint.trace.hooks import INSTRUMENTATION

    hooked = select()[0].PATCHED  # the pjit function this JAX's trace hook replaces
    real_jit, real_asarray, real_trace = jax.jit, np.asarray, getattr(pjit, hooked)
    try:
        with audit() as a:
            inner = jax.jit  # jaxlint's

            def my_jit(fun, **kwargs):
                return inner(fun, **kwargs)

            jax.jit = my_jit
            np.asarray = getattr(np.asarray, "__wrapped__", np.asarray)
            assert np.asarray is real_asarray
            stale_trace = getattr(pjit, hooked)  # jaxlint's, as pytest's monkeypatch would save it
            step = jax.jit(lambda x: x + 1)
            step(jnp.ones(2)); step(jnp.ones(3))
        assert (a.calls(step), a.compiles(step)) == (2, 2)
        assert jax.jit is my_jit and np.asarray is real_asarray  # the program's values stay
        assert getattr(pjit, hooked) is real_trace and INSTRUMENTATION._saved == []  # the rest is JAX's

        setattr(pjit, hooked, stale_trace)  # an old jaxlint wrapper put back from outside
        with audit() as b:
            again = jax.jit(lambda x: x - 1)  # my_jit -> the old jaxlint jit: passes through
            again(jnp.ones(2)); again(jnp.ones(2))
        assert (b.calls(again), b.traces(again), b.compiles(again)) == (2, 1, 1)  # counted once
    finally:
        jax.jit, np.asarray = real_jit, real_asarray
        setattr(pjit, hooked, real_trace)


# -- exits from unusual places --------------------------------------------------


def test_atexit_handler_that_raises(tmp_path):
    proc, report = run(tmp_path, """
        import atexit
        def boom():
            raise RuntimeError("handler failed")
        atexit.register(boom)
    """)
    assert proc.returncode == 0 == plain(tmp_path)
    assert report["script_exit_code"] == 0 and row(report, "f")["compiles"] == 2
    assert "Exception ignored in atexit callback" in proc.stderr or "Error in atexit._run_exitfuncs" in proc.stderr
    # printed by Python after the report, as without jaxlint
    assert proc.stderr.index("RuntimeError: handler failed") > proc.stderr.index('"schema"')


def test_system_exit_in_a_non_daemon_thread(tmp_path):
    proc, report = run(tmp_path, """
        import threading, time
        def worker():
            time.sleep(0.3)
            f(jnp.ones(7))
            raise SystemExit(3)
        threading.Thread(target=worker).start()
    """)
    assert proc.returncode == 0 == plain(tmp_path)  # SystemExit only ends that thread
    assert report["script_exit_code"] == 0 and row(report, "f")["compiles"] == 3


def test_sys_exit_while_jax_traces(tmp_path):
    proc, report = run(tmp_path, """
        @jax.jit
        def bad(x):
            sys.exit(6)
        bad(jnp.ones(2))
    """)
    assert proc.returncode == 6 == plain(tmp_path)
    assert report["script_exit_code"] == 6
    assert row(report, "f")["compiles"] == 2 and row(report, "bad")["calls"] == 1
