"""`jaxlint trace` on programs whose jit lives in a library: numpyro (the sampler jitted around the
user's model), equinox (`eqx.filter_jit`), flax (`nnx.jit`, `nnx.scan`) and optax.

Each program counts JAX's backend compiles itself with a `jax.monitoring` listener and prints the
total; the report must account for exactly that many (user rows + eager operations).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax")

COUNT = """
import collections
import jax
from jax._src import dispatch

COMPILES = collections.Counter()
jax.monitoring.register_event_duration_secs_listener(
    lambda e, d, **kw: COMPILES.update([kw.get("fun_name")]) if e == dispatch.BACKEND_COMPILE_EVENT else None)
"""


def run(tmp_path, body):
    script = tmp_path / "prog.py"
    script.write_text(COUNT + textwrap.dedent(body) + '\nprint("compiles", sum(COMPILES.values()))\n')
    out = tmp_path / "report.json"
    # numpyro turns its progress bar off when CI or PYTEST_XDIST_WORKER is set (MCMC.run): the
    # programs here run as a user runs them
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--no-static", "--format", "json",
                           "-o", str(out), str(script)], capture_output=True, text=True, cwd=str(tmp_path),
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    plain = int(proc.stdout.split("compiles ")[-1])
    assert sum(f["compiles"] for f in report["functions"]) + report["internal_compiles"] == plain
    lines = script.read_text().splitlines()
    return report, proc, (lambda text: lines.index(next(l for l in lines if text in l)) + 1)


def rows(report):
    return {(f["qualname"], f["line"]): (f["compiles"], f["traces"]) for f in report["functions"]}


def test_numpyro_sampler_is_the_row_of_the_mcmc_run_call(tmp_path):
    pytest.importorskip("numpyro")
    report, proc, line = run(tmp_path, """
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from numpyro.infer import MCMC, NUTS


        def nonlin(x):
            return jnp.tanh(x)


        def model(x, y=None):
            w = numpyro.sample("w", dist.Normal(0, 1))
            numpyro.sample("y", dist.Normal(nonlin(w * x), 0.1), obs=y)


        x = jnp.linspace(-1, 1, 20)
        mcmc = MCMC(NUTS(model), num_warmup=30, num_samples=30, progress_bar=False)
        mcmc.run(jax.random.PRNGKey(1), x, jnp.tanh(0.5 * x))
        print("w", mcmc.get_samples()["w"].shape)
    """)
    assert "w (30,)" in proc.stdout
    # one sampler program, the user's `mcmc.run` line; not the model nor its one-line helper
    assert rows(report) == {("mcmc.run", line("mcmc.run(")): (1, 1)}
    row = report["functions"][0]
    assert row["via"].startswith("numpyro.")
    assert next(j for j in report["jaxpr"])["equations"] > 100
    assert report["internal_compiles"] > 10  # numpyro's eager setup stays JAX's own count


def test_numpyro_progress_bar_transfers_name_the_library_frame(tmp_path):
    pytest.importorskip("numpyro")
    report, proc, line = run(tmp_path, """
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from numpyro.infer import MCMC, NUTS


        def model():
            numpyro.sample("y", dist.Normal(0, 3))


        quiet = MCMC(NUTS(model), num_warmup=20, num_samples=20, progress_bar=False)
        quiet.run(jax.random.PRNGKey(0))
        loud = MCMC(NUTS(model), num_warmup=20, num_samples=20, progress_bar=True)
        loud.run(jax.random.PRNGKey(0))
    """)
    at = {}
    for t in report["transfers"]:
        at.setdefault(t["line"], []).append(t)
    bar = [t for t in at[line("loud.run(")] if t["kind"] == "format"]
    assert len(bar) == 1 and bar[0]["count"] >= 40, at
    assert bar[0]["via"]["module"].startswith("numpyro.") and bar[0]["via"]["count"] == bar[0]["count"]
    assert not [t for t in at.get(line("quiet.run("), []) if t["kind"] == "format"]
    # the user's own conversions name no library frame
    assert {(f["qualname"], f["line"]) for f in report["functions"]} == {
        ("quiet.run", line("quiet.run(")), ("loud.run", line("loud.run("))}


def test_equinox_filter_jit_with_optax_is_the_users_step(tmp_path):
    pytest.importorskip("equinox")
    pytest.importorskip("optax")
    report, proc, line = run(tmp_path, """
        import equinox as eqx
        import jax.numpy as jnp
        import optax


        def loss(model, x, y):
            return jnp.mean((jax.vmap(model)(x) - y) ** 2)


        @eqx.filter_jit
        def step(model, opt_state, x, y):
            l, grads = eqx.filter_value_and_grad(loss)(model, x, y)
            updates, opt_state = optim.update(grads, opt_state, model)
            return eqx.apply_updates(model, updates), opt_state, l


        key = jax.random.PRNGKey(0)
        model = eqx.nn.MLP(4, 1, 16, 2, key=key)
        optim = optax.adam(1e-2)
        opt_state = optim.init(eqx.filter(model, eqx.is_array))
        x = jax.random.normal(key, (32, 4))
        for i in range(5):
            model, opt_state, l = step(model, opt_state, x, x.sum(axis=1, keepdims=True))
        print("loss", float(l) >= 0)
    """)
    # JAX's eager operations (random, MLP init, optax init) are not rows: only the jitted step (its
    # row is at its first line, the decorator)
    assert rows(report) == {("step", line("def step(") - 1): (1, 1)}
    assert report["internal_compiles"] > 5


def test_equinox_filter_jit_python_floats_name_the_users_argument_and_the_fix(tmp_path):
    """`eqx.filter_jit` makes every non-array argument static: a Python float that changes is a
    compile per value. The reason names the user's argument and each value, and the fix is an
    array, not equinox's packed static tuple hashed by identity (issue 28, point 1)."""
    pytest.importorskip("equinox")
    report, proc, line = run(tmp_path, """
        import equinox as eqx
        import jax.numpy as jnp


        @eqx.filter_jit
        def solve(y0, t1, rate, *, mode="exp"):
            return y0 * jnp.exp(-rate * t1)


        for t1 in [1.0, 2.0, 3.0, 4.0]:
            solve(jnp.ones(3), t1, jnp.asarray(0.5))
        solve(jnp.ones(3), 4.0, jnp.asarray(0.5), mode="lin")
    """)
    (row,) = report["functions"]
    assert (row["qualname"], row["compiles"], row["via"]) == ("solve", 5, "equinox.filter_jit")
    reasons = {(g["reason"], g["argument"]): g["values"] for g in row["reasons"]}
    assert reasons == {("static value", "t1"): ["1.0", "2.0", "3.0", "4.0"],
                       ("static value", "mode"): ["(not given)", "'lin'"]}, reasons
    assert "treats Python numbers as static" in row["fix"] and "`jnp.asarray(t1)`" in row["fix"]
    assert "hashed by identity" not in row["fix"]


def test_a_library_jitted_method_is_one_row_with_its_call_sites_and_calls(tmp_path):
    """A library's `Env.step` jitted with `partial(jax.jit, static_argnames=("self",))`, compiled 3
    times from three lines: one row (not one per line), the retraces explained and lost, every
    call counted, named from the user's call and the library function (never JAX's wrapper)."""
    # fixtures/trace/library_rows.py imports fixtures/trace_lib/envlib, outside the script's folder:
    # library code for the run
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "trace",
                          "library_rows.py")
    app = tmp_path
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--no-static", "--format", "json", "-o", str(out),
                           "--max-compiles", "2", str(script)], capture_output=True, text=True, cwd=str(app),
                          timeout=600)
    assert proc.returncode == 3, proc.stderr  # the gate sees all 3 compiles of the one function
    report = json.loads(out.read_text())
    (row,) = report["functions"]
    # named by the call as written (Python 3.11+ gives the column positions to read it), else by
    # the library function
    name = "env.step" if sys.version_info >= (3, 11) else "envlib.Env.step"
    assert (row["qualname"], row["line"], row["compiles"], row["calls"]) == (name, 14, 3, 5)
    assert row["via"] == "envlib.Env.step" and row["misses"] == 3 and row["lost_seconds"] > 0
    assert {(s["line"], s["misses"], s["first"]) for s in row["call_sites"]} == {(14, 1, True), (15, 1, False),
                                                                                   (16, 1, False)}
    assert {g["reason"] for g in row["reasons"]} == {"shape"}
    assert "api_boundary" not in proc.stderr and "reraise_with_filtered_traceback" not in proc.stderr


def test_flax_nnx_jit_and_scan_are_the_users_functions(tmp_path):
    pytest.importorskip("flax")
    pytest.importorskip("optax")
    report, proc, line = run(tmp_path, """
        import jax.numpy as jnp
        import optax
        from flax import nnx


        class Block(nnx.Module):
            def __init__(self, rngs):
                self.lin = nnx.Linear(8, 8, rngs=rngs)

            def __call__(self, x):
                return jax.nn.relu(self.lin(x))


        @nnx.jit
        def train_step(model, optimizer, x, y):
            def loss_fn(m):
                return jnp.mean((m(x) - y) ** 2)

            l, grads = nnx.value_and_grad(loss_fn)(model)
            optimizer.update(model, grads)
            return l


        @nnx.jit
        def rollout(cell, xs):
            def body(cell, x):
                return cell, cell(x)

            return nnx.scan(body, in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0))(cell, xs)[1]


        model = Block(nnx.Rngs(0))
        optimizer = nnx.Optimizer(model, optax.sgd(1e-2), wrt=nnx.Param)
        for _ in range(4):
            l = train_step(model, optimizer, jnp.ones((4, 8)), jnp.zeros((4, 8)))
        for n in (5, 5, 7):
            rollout(model, jnp.ones((n, 8)))
        print("loss", float(l) >= 0)
    """)
    assert rows(report) == {("train_step", line("def train_step(") - 1): (1, 1),
                            ("rollout", line("def rollout(") - 1): (2, 2)}
