"""jaxlint.trace.inspect and `jaxlint trace --inspect`: jaxpr audits of one function, in-process.

The equation counts below were checked by hand against ``print(jax.make_jaxpr(...))`` on jax
0.10.2: `unrolled` is 1,000 x (tanh, mul, add) on one line; `rolled` is one scan with the loop
counter's add and the body's tanh, mul, add inside.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from jaxlint.trace import Args, inspect  # noqa: E402
from jaxlint.trace import audit_fn  # noqa: E402
from jaxlint.trace import command  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "fixtures", "trace", "unrolled.py")
sys.path.insert(0, os.path.dirname(FIXTURE))
import unrolled as fx  # noqa: E402

S = jax.ShapeDtypeStruct
X = S((8,), jnp.float32)
R = S((), jnp.float32)
TABLE = jnp.ones((600_000,), jnp.float32)  # 2.4 MB, captured by `lookup`


def line_of(path: str, text: str) -> int:
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if text in line:
                return i
    raise AssertionError(text)


LOOP_LINE = line_of(FIXTURE, "x = x + rate * jnp.tanh(x)")
FORI_LINE = line_of(FIXTURE, "lax.fori_loop(0, STEPS")
ROLLED_DEF = line_of(FIXTURE, "def rolled(")


# -- equations per line ---------------------------------------------------------------------

def test_unrolled_loop_is_one_line_with_3000_equations():
    r = inspect(fx.unrolled, X, R)
    assert r.equations == 3000
    assert r.equations_by_line == [(FIXTURE, LOOP_LINE, 3000)]
    assert r.as_dict()["equations_by_line"][0]["primitives"] == {"tanh": 1000, "mul": 1000, "add": 1000}
    assert r.compilations == 1 and r.reasons == ["first call"]


def test_fori_loop_twin_is_a_handful_on_its_line():
    r = inspect(fx.rolled, X, R)
    assert r.equations == 5  # scan + (counter add, tanh, mul, add) in its body
    assert r.equations_by_line == [(FIXTURE, FORI_LINE, 5)]
    assert r.line_equations("unrolled.py", FORI_LINE) == 5
    assert r.line_equations("unrolled.py", LOOP_LINE) == 0


def test_weak_python_scalar_adds_a_convert_per_step_and_is_listed():
    r = inspect(fx.unrolled, X, 0.01)
    assert r.equations == 4000  # + 1,000 convert_element_type of the weak f32 scalar
    assert r.weak_inputs == [("rate", "f32[]{weak}")]
    assert inspect(fx.unrolled, X, R).weak_inputs == []


def test_jitted_function_its_jit_equation_is_at_the_definition():
    r = inspect(fx.step, X, R)
    assert r.equations == 6
    assert sorted(r.equations_by_line) == sorted([(FIXTURE, FORI_LINE, 5), (FIXTURE, ROLLED_DEF, 1)])


def test_top_limits_the_lines():
    def two_lines(x):
        y = jnp.sin(x) + 1.0
        return jnp.cos(y)

    r = inspect(two_lines, X, top=1)
    assert len(r.equations_by_line) == 1 and r.equations_by_line[0][2] == 2
    assert r.as_dict()["lines"] == 2


# -- constants, callbacks, float64 ----------------------------------------------------------

def lookup(i, x):
    y = x * 2.0
    jax.debug.print("y={y}", y=y)
    return TABLE[i] + y


def test_constant_callback_and_their_lines():
    r = inspect(lookup, S((), jnp.int32), R)
    here = os.path.abspath(__file__)
    assert r.large_constants == [(2_400_000, here, line_of(here, "return TABLE[i] + y"))]
    assert r.callbacks == [(r.callbacks[0][0], here, line_of(here, 'jax.debug.print("y={y}"'))]
    assert r.callbacks[0][0] in ("debug_print", "debug_callback")
    assert r.constant_bytes >= 2_400_000


def test_small_constant_is_not_large():
    small = jnp.ones((4,), jnp.float32)
    r = inspect(lambda x: x + small, S((4,), jnp.float32))
    assert r.large_constants == [] and r.constant_bytes == 16
    assert r.large_constants == inspect(lambda x: x * 2.0, S((4,), jnp.float32)).large_constants


def test_constant_captured_inside_cond_branch():
    def f(p, x):
        return jax.lax.cond(p, lambda x: x + TABLE[:8].sum(), lambda x: x, x)

    r = inspect(f, S((), jnp.bool_), X)
    assert len(r.large_constants) == 1 and r.large_constants[0][0] == 2_400_000
    assert r.large_constants[0][1] == os.path.abspath(__file__)


def test_float64_operations_need_x64():
    def widen(x):
        return x.astype(jnp.float64) * 2

    enable_x64 = getattr(jax, "enable_x64", None)
    if enable_x64 is None:  # before jax 0.8
        from jax.experimental import enable_x64
    with enable_x64(True):
        r = inspect(widen, S((3,), jnp.float32))
    with pytest.warns(UserWarning):
        off = inspect(widen, S((3,), jnp.float64))
    assert r.float64_ops == 2 and r.float64_lines[0][2] == 2
    assert off.float64_ops == 0 and any("jax_enable_x64 is off" in n for n in off.notes)


# -- compilations over argument sets --------------------------------------------------------

def test_three_sets_two_compilations():
    big = S((32, 784), jnp.float32)
    r = inspect(fx.step, argsets=[(big, R), (big, R), (S((17, 784), jnp.float32), R)])
    assert r.compilations == 2
    assert r.reasons == ["first call", "shape of `x` changed: f32[32,784] → f32[17,784]"]
    rows = r.as_dict()["argsets"]
    assert [row["compilation"] for row in rows] == [1, None, 2]
    assert rows[1]["same_as"] == 1


def test_concrete_array_and_its_struct_are_one_signature():
    r = inspect(fx.rolled, jnp.zeros(8), jnp.float32(0.1), argsets=[(X, R), Args(X, rate=R)])
    assert r.compilations == 1  # a keyword is no new trace here: the same leaves, same names


def test_weak_type_change_is_a_compilation():
    r = inspect(fx.rolled, X, 0.01, argsets=[(X, R)])
    assert r.compilations == 2
    assert r.reasons[1] == "weak type of `rate` changed: f32[]{weak} → f32[]"


def test_static_argnames_values():
    def scaled(x, n):
        return x * n

    r = inspect(scaled, argsets=[Args(X, n=2), Args(X, n=2), Args(X, n=3)], static_argnames="n")
    assert r.compilations == 2
    assert r.reasons[1] == "static value of `n` changed: 2 → 3"
    assert r.weak_inputs == []


def test_static_positional_before_arrays():
    def first(n, x):
        return x * n

    r = inspect(first, 2, X, argsets=[(3, X)], static_argnums=0)
    assert r.compilations == 2 and "static value of `n`" in r.reasons[1]
    r = inspect(first, 2, X, argsets=[(2, X)], static_argnames="n")
    assert r.compilations == 1


def test_nothing_is_compiled_or_executed():
    from jaxlint.trace.adapters.base import events

    compiles = []
    on = [False]
    compile_event = events()[2]

    def listener(event, seconds, **kw):
        if on[0] and event == compile_event:
            compiles.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    on[0] = True
    try:
        inspect(fx.unrolled, X, 0.01, argsets=[(S((4,), jnp.float32), R)])
        inspect(lookup, S((), jnp.int32), R)
        inspected = len(compiles)
        jax.jit(lambda x: x * 3.0 + 1.0)(jnp.ones(5)).block_until_ready()  # the listener sees compiles
    finally:
        on[0] = False
    assert inspected == 0
    assert len(compiles) >= 1


def test_raises_what_the_function_raises():
    def bad(x):
        return x.reshape(3)

    with pytest.raises(TypeError):
        inspect(bad, X)
    with pytest.raises(TypeError):
        inspect(fx.rolled, argsets=["f32[8]"])


# -- argument specs -------------------------------------------------------------------------

def test_parse_spec():
    assert audit_fn.parse_spec("f32[32,784]") == ("array", (32, 784), "float32", False)
    assert audit_fn.parse_spec(" i32[] ") == ("array", (), "int32", False)
    assert audit_fn.parse_spec("f32[]{weak}") == ("array", (), "float32", True)
    assert audit_fn.parse_spec("bf16[2, 3]") == ("array", (2, 3), "bfloat16", False)
    assert audit_fn.parse_spec("bool") == ("array", (), "bool", False)
    assert audit_fn.parse_spec("float16[4]") == ("array", (4,), "float16", False)
    assert audit_fn.parse_spec("3") == ("value", 3)
    assert audit_fn.parse_spec("'relu'") == ("value", "relu")
    for bad in ("f32[3,x]", "float7[3]", "f32[-1]", "relu", ""):
        with pytest.raises(audit_fn.SpecError):
            audit_fn.parse_spec(bad)


def test_weak_spec_traces_weak_on_every_jax():
    weak = audit_fn.materialize(audit_fn.parse_spec("f32[]{weak}"))
    assert inspect(fx.rolled, X, weak).weak_inputs == [("rate", "f32[]{weak}")]
    assert inspect(fx.rolled, X, audit_fn.materialize(audit_fn.parse_spec("f32[]"))).weak_inputs == []


def test_split_items_and_argsets():
    assert audit_fn.split_items("f32[32,8], n=3, s='a,b'") == ["f32[32,8]", "n=3", "s='a,b'"]
    assert audit_fn.split_items("") == []
    with pytest.raises(audit_fn.SpecError):
        audit_fn.split_items("f32[8],,i32[]")
    args, kw = audit_fn.parse_argset(["f32[8]", "rate=f32[]"])
    assert args == [("array", (8,), "float32", False)] and kw == {"rate": ("array", (), "float32", False)}
    with pytest.raises(audit_fn.SpecError):
        audit_fn.parse_argset(["rate=0.1", "f32[8]"])


# -- command line ---------------------------------------------------------------------------

def cli(capsys, *argv):
    code = command.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_text_and_json(capsys):
    code, out, _ = cli(capsys, "--inspect", f"{FIXTURE}:unrolled", "--arg", "f32[8]", "--arg", "f32[]")
    assert code == 0
    assert f"3,000  {os.path.relpath(FIXTURE)}:{LOOP_LINE}" in out
    code, out, _ = cli(capsys, "--inspect", f"{FIXTURE}:step", "--format", "json",
                       "--args", "f32[32,784], f32[]", "--args", "f32[32,784], f32[]", "--args", "f32[17,784], f32[]")
    assert code == 0
    d = json.loads(out)
    assert d["compilations"] == 2 and d["equations"] == 6 and d["gates"] == []
    assert {"function", "argsets", "equations_by_line", "callbacks", "large_constants", "constant_bytes",
            "float64_ops", "float64_lines", "weak_inputs", "reasons", "miss_reasons", "notes", "lines"} <= set(d)


def test_cli_static_and_gates(capsys):
    code, out, _ = cli(capsys, "--inspect", f"{FIXTURE}:unrolled", "--arg", "f32[8]", "--arg", "0.5",
                       "--max-equations", "3999")
    assert code == 3 and "GATE: --max-equations 3999: the jaxpr has 4000 equations" in out
    code, out, _ = cli(capsys, "--inspect", f"{FIXTURE}:rolled", "--args", "f32[8], rate=0.5",
                       "--args", "f32[8], rate=f32[]", "--max-compiles", "1")
    assert code == 3 and "weak type of `rate` changed" in out
    code, out, _ = cli(capsys, "--inspect", f"{FIXTURE}:rolled", "--arg", "f32[8]", "--static", "rate=0.5")
    assert code == 0 and "rate=0.5 (static)" in out


def test_cli_usage_errors_exit_2(capsys):
    for argv in (["--inspect", f"{FIXTURE}:nope", "--arg", "f32[8]"],
                 ["--inspect", "no_such_module_xyz:f", "--arg", "f32[8]"],
                 ["--inspect", "unrolled", "--arg", "f32[8]"],
                 ["--inspect", f"{FIXTURE}:unrolled", "--arg", "f32[8,x]"],
                 ["--inspect", f"{FIXTURE}:unrolled", "--arg", "f32[8]", "--args", "f32[8]"],
                 ["--inspect", f"{FIXTURE}:unrolled", "--arg", "f32[8]", "script.py"],
                 ["--inspect", f"{FIXTURE}:unrolled", "--static", "1x=2"]):
        code, out, err = cli(capsys, *argv)
        assert code == 2, argv
        assert err.startswith("jaxlint trace --inspect: ") and err.count("\n") == 1, (argv, err)


def test_cli_function_raising_exits_1(capsys):
    code, out, err = cli(capsys, "--inspect", f"{FIXTURE}:unrolled", "--arg", "f32[8]")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "raised TypeError while traced" in err


def test_module_colon_function_from_cwd(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, _ = cli(capsys, "--inspect", "fixtures.trace.unrolled:rolled", "--arg", "f32[8]", "--arg", "f32[]")
    assert code == 0 and "5 equations on 1 source line," in out


def test_importing_the_cli_needs_no_jax():
    code = ("import sys; import jaxlint.trace, jaxlint.trace.audit_fn, jaxlint.trace.command as c; "
            "c.parser(); audit_fn = jaxlint.trace.audit_fn; audit_fn.parse_spec('f32[2]'); "
            "assert 'jax' not in sys.modules, 'jax imported'")
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)


def test_cli_inspect_refuses_run_gates_it_would_ignore():
    # a gate that --inspect cannot evaluate must not pass silently
    for extra in (["--budget", "*=1"], ["--fail-on-recompile"], ["--max-transfers-per-line", "3"]):
        proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--inspect",
                               "fixtures/trace/unrolled.py:rolled", "--arg", "f32[8]", "--arg", "f32[]", *extra],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert proc.returncode == 2, (extra, proc.stderr)
        assert "are for runs" in proc.stderr


# -- pytrees of specs (issue 38) ------------------------------------------------------------

MLP = """
import jax.numpy as jnp

def mlp(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return x

def scaled(tree, scale):
    return tree["w"] * scale + tree["b"][0]
"""


def test_parse_spec_reads_pytrees_of_specs():
    A = audit_fn.ArraySpec
    assert audit_fn.parse_spec("[(f32[8,32], f32[32])]") == (
        "tree", [(A((8, 32), "float32", False), A((32,), "float32", False))])
    assert audit_fn.parse_spec("{'w': bf16[4], 'b': (i32[], 3, 'relu'), 'r': f32[]{weak}}") == (
        "tree", {"w": A((4,), "bfloat16", False), "b": (A((), "int32", False), 3, "relu"),
                 "r": A((), "float32", True)})
    # a dtype name inside a string is text, not a spec; containers without a spec stay literals
    assert audit_fn.parse_spec("('f32[8]', 2)") == ("value", ("f32[8]", 2))
    assert audit_fn.parse_spec("[float32[2], [bool]]") == (
        "tree", [A((2,), "float32", False), [A((), "bool", False)]])
    for bad in ("[f32[8], relu]", "[f32[8,x]]", "[(f32[8], f32[2]]", "{**x, 'a': f32[2]}", "[f7[2], f32[1]]"):
        with pytest.raises(audit_fn.SpecError):
            audit_fn.parse_spec(bad)


def test_cli_accepts_a_pytree_argument(capsys, tmp_path):
    path = tmp_path / "mlp_mod.py"
    path.write_text(MLP)
    code, out, err = cli(capsys, "--inspect", f"{path}:mlp", "--format", "json",
                         "--arg", "[(f32[8,32], f32[32]), (f32[32,4], f32[4])]", "--arg", "f32[5,8]")
    assert code == 0, err
    d = json.loads(out)
    # the pytree reached the function as two (w, b) pairs: five leaves, and two layers of
    # dot_general, broadcast_in_dim (of b), add, tanh (print(jax.make_jaxpr(mlp)(...)))
    assert d["argsets"][0]["args"] == ("params[0][0]: f32[8,32], params[0][1]: f32[32], params[1][0]: f32[32,4], "
                                       "params[1][1]: f32[4], x: f32[5,8]")
    assert d["equations"] == 8 and d["compilations"] == 1
    code, out, err = cli(capsys, "--inspect", f"{path}:scaled", "--args", "{'w': f32[3], 'b': [f32[]]}, 0.5",
                         "--args", "{'w': f32[4], 'b': [f32[]]}, 0.5")
    assert code == 0, err
    assert "Compilations: 2 for 2 argument sets" in out and "f32[3] → f32[4]" in out
