"""JAX8xx: settings that come too late (JAX801) and jax.distributed.initialize after the backend
started (JAX802): the flow through the module's top level and its entry functions, in order."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ruletools import assert_marked, default_findings, findings, line_of, messages, opt_in_findings


def test_jax801_settings_after_the_backend_started_or_after_import_jax():
    assert_marked("""
    import os
    import jax
    import jax.numpy as jnp

    x = jnp.zeros(3)
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # expect: JAX801
    os.environ.update({"XLA_FLAGS": "--xla_force_host_platform_device_count=8"})  # expect: JAX801
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")  # expect: JAX801
    os.putenv("TPU_VISIBLE_CHIPS", "0")  # expect: JAX801
    os.environ["JAX_ENABLE_X64"] = "1"  # expect: JAX801
    """)


def test_jax801_a_config_update_of_a_flag_read_at_backend_start_after_it_started():
    # fresh set T: `jax.config.update("jax_platform_name", ...)` after `jax.devices()` is silently ignored
    src = """
    import os
    import jax

    jax.config.update("jax_platforms", "cpu,gpu")  # before the start: takes effect
    devices = jax.devices()
    jax.config.update("jax_platform_name", "cpu")  # expect: JAX801
    jax.config.update("jax_cuda_visible_devices", "0")  # expect: JAX801
    jax.config.update("jax_platform_name", "gpu")  # expect: JAX801 (opt-in)
    requested = "gpu"
    jax.config.update("jax_platform_name", requested)  # expect: JAX801 (opt-in)
    os.environ["JAX_PLATFORM_NAME"] = "tpu"  # expect: JAX801 (opt-in)
    os.environ["JAX_PLATFORMS"] = "cpu"  # expect: JAX801
    jax.config.update("jax_enable_x64", True)  # read when arrays are made: takes effect
    """
    assert_marked(src)
    msg = messages(src, "JAX801")[0]
    assert msg.startswith("`jax_platform_name` is read when JAX's backend starts, and it already started at line 6")
    assert msg.endswith("so this update does nothing; make it before the first device query, array or compiled call")
    reasons = [r for _, _, r in opt_in_findings(src, "JAX801")]
    assert reasons[0].startswith("it asks for the platform `gpu`, an accelerator JAX starts first anyway")


def test_jax801_follows_entry_functions_and_device_queries_and_compiled_calls():
    assert_marked("""
    import os
    import jax
    from absl import app

    @jax.jit
    def step(x):
        return x * 2

    def configure():
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".5"  # expect: JAX801

    def main(argv):
        print(jax.devices())
        configure()

    def other():
        step(1.0)
        os.environ["XLA_PYTHON_CLIENT_ALLOCATOR"] = "platform"  # expect: JAX801

    if __name__ == "__main__":
        other()
        app.run(main)
    """)


def test_jax801_near_misses_before_the_import_or_the_start_unknown_calls_branches_and_children():
    assert findings("""
    import os
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax
    import jax.numpy as jnp
    import mylib

    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # after the import, before any start
    jax.config.update("jax_enable_x64", True)  # a config update starts nothing
    mylib.setup()  # unknown: starts nothing
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    if os.environ.get("DEBUG"):
        x = jnp.zeros(3)  # may not run
    os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".5"
    os.environ["MY_OWN_SETTING"] = "1"
    os.environ["JAX_MY_TOOLS_OPTION"] = "1"  # not one of JAX's flags: not read at import

    def later():
        y = jnp.ones(2)  # defined, never called by the flow
    """, "JAX801") == []
    assert findings("""
    import os
    import subprocess
    import jax.numpy as jnp

    x = jnp.zeros(3)
    os.environ["XLA_FLAGS"] = "--xla_dump_to=/tmp/d"  # for the child below
    subprocess.run(["python", "child.py"])
    """, "JAX801") == []


def test_jax801_message_cites_the_start():
    (msg,) = messages("""
    import os
    import jax

    def main():
        n = jax.device_count()
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

    main()
    """, "JAX801")
    assert "`XLA_FLAGS` is read when JAX's backend starts, and it already started at line 6 (`jax.device_count()`)" in msg


def test_jax802_initialize_after_the_backend_started():
    assert_marked("""
    import jax

    def main():
        n = jax.device_count()
        jax.distributed.initialize()  # expect: JAX802
        print(n)

    main()
    """)
    assert findings("""
    import jax

    def main():
        jax.distributed.initialize()
        print(jax.device_count())

    main()
    """, "JAX802") == []


_RUN = """
import os, sys, json
{before}
import jax
import jax.numpy as jnp
{middle}
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_ENABLE_X64"] = "1"
print(json.dumps([jax.device_count(), str(jnp.zeros(1).dtype)]))
"""


def test_jax801_runs_as_it_says(tmp_path):
    """The pitfall under jax: settings after the first array do nothing (1 device, float32); the
    same settings before `import jax` apply (4 devices, float64)."""
    pytest.importorskip("jax")
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_ENABLE_X64")}

    def run(before, middle):
        p = tmp_path / "prog.py"
        p.write_text(_RUN.format(before=before, middle=middle))
        out = subprocess.run([sys.executable, str(p)], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert run("", "x = jnp.zeros(3)") == '[1, "float32"]'
    assert run('os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"\n'
               'os.environ["JAX_ENABLE_X64"] = "1"', "") == '[4, "float64"]'


def test_jax804_a_donated_variable_read_after_the_call():
    assert_marked("""
    import functools
    import jax
    import jax.numpy as jnp

    @functools.partial(jax.jit, donate_argnums=0)
    def update(params, grads):
        return params - 0.1 * grads

    apply = jax.jit(lambda s, x: s + x, donate_argnames=("s",))

    def step(grads):
        params = jnp.zeros(4)
        state = apply(s=jnp.ones(4), x=0.0)
        new = update(params, grads)
        change = jnp.abs(new - params).max()  # expect: JAX804
        out = apply(s=state, x=1.0)
        if out.sum() > 0:
            print(state)  # expect: JAX804
        return new, change, out
    """)


def test_jax804_near_misses_rebound_names_other_arguments_and_undonated_calls():
    assert findings("""
    import functools
    import jax
    import jax.numpy as jnp
    from flax import nnx

    @functools.partial(jax.jit, donate_argnums=(0,))
    def update(params, grads):
        return params - 0.1 * grads

    plain = jax.jit(lambda p, g: p - g)

    eval_step = jax.pmap(lambda s, b: s + b["x"], donate_argnums=(1,))
    nnx_step = nnx.jit(lambda m, b: m(b), donate_argnums=0)

    def evaluate(state, loader, model):
        for _ in range(3):
            eval_batch = next(loader)                 # host data: its device copy is donated
            out = eval_step(state, eval_batch)
            print(eval_batch["x"].shape, out)
        nnx_step(model, 1.0)                          # nnx writes the state back into the module
        print(model)
        batch = jnp.ones((2, 4))
        out = eval_step(state, batch)
        print(batch.shape, batch.dtype)               # metadata stays readable on a deleted array
        kept = jnp.ones((2, 4))
        out = eval_step(state, b=kept)                # pmap donates positional arguments only
        print(kept.sum(), out)

    def loop(params, grads, batches):
        params = jnp.zeros(4) + params
        for b in batches:
            params = update(params, grads)   # rebound at once
        print(grads)                          # not donated
        new = update(params * 1.0, grads)     # an expression: nothing named is deleted
        x = plain(params, grads)              # no donation
        print(params, x)
        old = params
        params = update(old, grads)
        old = None                            # bound again before any read
        print(params, old)

        def later():
            return params                     # runs later, if at all
        return new, later
    """, "JAX804") == []


def test_jax804_opt_in_when_no_output_can_take_the_donated_buffer():
    """JAX deletes a donated array only when an output of its shape and dtype takes the buffer: a
    library's apply donating parameters (it returns logits), or a def returning nothing computed
    from the donated argument, leaves it readable (issue 37, fresh set B)."""
    src = """
    import functools
    import jax
    import jax.numpy as jnp
    from some_lib import model

    apply_fn = jax.jit(model.apply, donate_argnums=(0,))

    @functools.partial(jax.jit, donate_argnums=0)
    def score(params, x):
        return jnp.sum(params) * x

    def run(tokens):
        parameters = jnp.ones(4)
        outs = apply_fn(parameters, tokens)
        return outs, apply_fn(parameters, tokens)  # HERE-1

    def total(x):
        params = jnp.ones(4)
        s = score(params, x)
        return s, params  # HERE-2
    """
    assert default_findings(src, "JAX804") == []
    got = opt_in_findings(src, "JAX804")
    assert [(line, code) for line, code, _ in got] == [(line_of(src, "# HERE-1"), "JAX804"),
                                                        (line_of(src, "# HERE-2"), "JAX804")]
    assert got[0][2].startswith("donation-used unknown: `model.apply` is not a function of this module")
    assert got[1][2].startswith("donation-used unknown: no output of `score` is computed from `params`")


def test_jax804_an_output_computed_from_the_donated_argument_proves_the_deletion():
    src = """
    import functools
    import jax

    @functools.partial(jax.jit, donate_argnums=0)
    def update(state, grads):
        new_params = state["w"] - 0.1 * grads
        out = {"w": new_params}
        return out, grads.sum()

    def step(grads):
        state = {"w": jax.numpy.zeros(4)}
        new = update(state, grads)
        return new, state["w"]  # HERE
    """
    assert default_findings(src, "JAX804") == [(line_of(src, "# HERE"), "JAX804")]


def test_jax804_an_unusable_donation_keeps_the_array():
    """Under jax (CPU too): no output of the donated argument's shape, nothing deleted."""
    jax = pytest.importorskip("jax")
    import functools
    import warnings

    import jax.numpy as jnp

    @functools.partial(jax.jit, donate_argnums=0)
    def score(params, x):
        return jnp.sum(params) * x

    params = jnp.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Some donated buffers were not usable"
        score(params, 2.0)
    assert not params.is_deleted() and float(params.sum()) == 6.0


def test_jax804_runs_as_it_says():
    """Under jax (CPU too): the donated argument is deleted, reading it raises; the rebound form runs."""
    jax = pytest.importorskip("jax")
    import functools

    import jax.numpy as jnp

    @functools.partial(jax.jit, donate_argnums=0)
    def update(params, grads):
        return params - 0.1 * grads

    params = jnp.ones(4)
    new = update(params, jnp.ones(4))
    assert params.is_deleted() and params.shape == (4,)  # metadata stays readable
    # RuntimeError from the Python path; ValueError ("Buffer has been deleted or donated") once a jitted
    # sum of this signature is in the C++ fast path (an earlier test summing an f32[4] puts it there)
    with pytest.raises((RuntimeError, ValueError), match="deleted"):
        float(params.sum())
    params = update(new, jnp.ones(4))
    assert float(params[0]) == pytest.approx(0.8)


def test_jax803_step_results_rebinding_their_arguments_without_donation_are_opt_in():
    """No optimizer update in the step: what the rebound values hold is not known (opt-in), and the
    finding is at the jit, where donation is declared."""
    assert_marked("""
    import functools
    import jax

    @jax.jit  # expect: JAX803 (opt-in)
    def train_step(state, batch):
        return state - 0.1 * batch

    @functools.partial(jax.pmap, axis_name="d")  # expect: JAX803 (opt-in)
    def pstep(params, opt, batch):
        return params, opt, 0.0

    def train(state, params, opt, batches):
        for batch in batches:
            state = train_step(state, batch)
            params, opt, loss = pstep(params, opt, batch)
        return state, params
    """)
    [msg] = [m for m in messages("""
    import jax

    step = jax.jit(lambda p, o, b: (p, o, 0.0))

    def train(p, o, batches):
        while True:
            p, o, loss = step(p, o, next(batches))
    """, "JAX803")]
    assert "`donate_argnums=(0, 1)` here" in msg and "`p`, `o`" in msg and "(line 8)" in msg


def test_jax803_training_steps_are_default():
    """A step that applies an optimizer update to what the loop rebinds: flax's apply_gradients,
    optax's apply_updates and an optimizer's update(grads, opt_state), a tree-map gradient step. An
    empty ``donate_argnums=()`` donates nothing (fresh set K's pmapped steps)."""
    assert_marked("""
    import functools
    import jax
    import optax

    tx = optax.adam(1e-3)

    @jax.jit  # expect: JAX803
    def train_step(state, batch):
        grads = jax.grad(lambda p: (state.apply_fn(p, batch) ** 2).mean())(state.params)
        return state.apply_gradients(grads=grads), 0.0

    def update(params, opt_state, batch):
        loss, grads = jax.value_and_grad(lambda p: (p * batch).sum())(params)
        updates, opt_state = tx.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    p_update = jax.pmap(update, axis_name="batch", donate_argnums=())  # expect: JAX803

    @jax.jit  # expect: JAX803
    def sgd(params, batch):
        grads = jax.grad(lambda p: (p * batch).sum())(params)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    def train(state, params, opt_state, batches):
        for batch in batches:
            state, loss = train_step(state, batch)
            params, opt_state, loss = p_update(params, opt_state, batch)
            params = sgd(params, batch)
        return state, params
    """)


def test_jax803_an_attribute_rebound_by_a_trainer_method():
    """``self.state, metrics = self.train_step(self.state, batch)`` in a trainer class (fresh set M's
    catalogue): the attribute is rebound like a variable; an attribute only read is not."""
    assert_marked("""
    import jax
    import optax

    class Trainer:
        def __init__(self, state):
            self.state = state
            self.train_step = jax.jit(self._step)  # expect: JAX803
            self.eval_step = jax.jit(self._eval)

        def _step(self, state, batch):
            grads = jax.grad(lambda p: (state.apply_fn(p, batch) ** 2).mean())(state.params)
            return state.apply_gradients(grads=grads), 0.0

        def _eval(self, state, batch):
            return state.apply_fn(state.params, batch)

        def fit(self, batches):
            for batch in batches:
                self.state, loss = self.train_step(self.state, batch)
                out = self.eval_step(self.state, batch)
            return self.state
    """)


def test_jax803_training_step_near_misses_are_opt_in():
    """Test code, a literal run of at most 100 steps, and an update of something the loop does not
    rebind: opt-in. A wrapper used in two loops is reported once, at its jit."""
    common = """
    import jax
    import optax

    @jax.jit  # expect: JAX803{mark}
    def sgd(params, batch):
        grads = jax.grad(lambda p: (p * batch).sum())(params)
        return optax.apply_updates(params, grads)
    """
    assert_marked(common.format(mark=" (opt-in)") + """
    def test_training(params, batches):
        for batch in batches:
            params = sgd(params, batch)
    """)
    assert_marked(common.format(mark=" (opt-in)") + """
    def demo(params, batch):
        for _ in range(50):
            params = sgd(params, batch)
    """)
    assert_marked(common.format(mark="") + """
    def demo(params, batch, batches):
        for _ in range(50):
            params = sgd(params, batch)
        for batch in batches:
            params = sgd(params, batch)
    """)
    assert_marked(common.format(mark=" (opt-in)") + """
    def train(params, batches):
        best = None
        for batch in batches:
            params = sgd(params, batch)
            if batch.sum() > 0:
                best = params  # an older step's value: donating at a later step deletes it
        return best
    """)
    assert_marked("""
    import jax
    import optax

    PARAMS = {"w": 1.0}

    @jax.jit  # expect: JAX803 (opt-in)
    def step(count, batch):
        grads = jax.grad(lambda p: (p["w"] * batch).sum())(PARAMS)
        return count + 1, optax.apply_updates(PARAMS, grads)

    def train(count, batches):
        for batch in batches:
            count, new = step(count, batch)
    """)


def test_jax803_near_misses_donated_static_not_rebound_once_bounded_and_library_jits():
    src = """
    import functools
    import jax
    import equinox as eqx
    from flax import nnx

    donated = jax.jit(lambda s, b: s + b, donate_argnums=0)
    named = jax.jit(lambda s, b: s + b, donate_argnames="s")
    options = {"donate_argnums": 0}
    via_options = jax.jit(lambda s, b: s + b, **options)
    step = jax.jit(lambda s, b: s + b)

    @functools.partial(jax.jit, static_argnums=1)
    def scaled(x, n):
        return x * n, n + 1

    @nnx.jit
    def nnx_step(model, batch):
        return model

    @jax.jit
    def rollout(s, batches):
        for b in batches:  # a Python loop in traced code: runs once, while tracing
            s = step(s, b)
        return s

    def train(s, batches, n, model):
        s = step(s, batches[0])  # once, before the loop
        for _ in range(3):
            s = step(s, batches[0])  # three known trips: not a step loop
        for b in batches:
            s = donated(s, b)
            s = named(s, b)
            s = via_options(s, b)
            out = step(s, b)  # the result does not rebind what was passed
            x, n = scaled(s, n)  # n is static
            model = nnx_step(model, b)
        return s, out, x
    """
    assert findings(src, "JAX803") == []


EQX_STEP = """
import equinox as eqx
import optax

optimizer = optax.adamw(1e-3)

@eqx.filter_jit{declared}
def make_step(model, opt_state, x, y):
    loss, grads = eqx.filter_value_and_grad(compute_loss)(model, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, model)
    model = eqx.apply_updates(model, updates)
    return model, opt_state, loss

def train(model, opt_state, loader, steps):
    for step in range(steps):
        x, y = next(loader)
        model, opt_state, loss = make_step(model, opt_state, x, y){after}
    return model
"""


def test_jax803_an_equinox_filter_jit_step_advises_its_donate_option():
    """Fresh AK's nanoJAXGPT and AA's `make_step`: a 124M-parameter GPT and its AdamW state kept twice."""
    src = EQX_STEP.format(declared="", after="")
    assert default_findings(src, "JAX803") == [(7, "JAX803")]
    assert 'declare `donate="all"` here' in messages(src, "JAX803")[0]


@pytest.mark.parametrize("declared, after, default, opt_in", [
    ('(donate="all")', "", [], []),  # donation declared
    ('(donate="none")', "", [], []),  # declared not to: the user's choice
    # the batch is read after the call: equinox's donate="all" would delete it too
    ("", "\n        print(evaluate(model, x, y))", [], [7]),
    ("", "\n        del x, y", [(7, "JAX803")], []),  # gone before any read: the old batch is not needed
    ("", "\n        x = augment(x)", [], [7]),  # a read of the old batch
    ("", "\n    print(evaluate(model, x, y))", [], [7]),  # the last batch, read after the loop
])
def test_jax803_near_misses_of_an_equinox_filter_jit_step(declared, after, default, opt_in):
    src = EQX_STEP.format(declared=declared, after=after)
    assert default_findings(src, "JAX803") == default
    assert [line for line, _, _ in opt_in_findings(src, "JAX803")] == opt_in


def test_jax803_renamed_identifiers_change_nothing():
    a = findings("""
    import jax
    train_step = jax.jit(lambda s, b: s - b)
    def train(state, batches):
        for batch in batches:
            state = train_step(state, batch)
    """, "JAX803")
    b = findings("""
    import jax
    q = jax.jit(lambda z, w: z - w)
    def r(v, u):
        for t in u:
            v = q(v, t)
    """, "JAX803")
    assert a == b == [(3, "JAX803")]


_RUNNER = """
import jax


def update(runner_state, task):
    x, y, x_eval, y_eval, state, rng = runner_state
    grads = jax.grad(lambda p: ((p * x).sum() - y.sum()) ** 2)(state.params)
    state = state.apply_gradients(grads=grads)
    return (x, y, state, rng), {{"eval": (state.params * x_eval).sum() - y_eval.sum()}}


def train(state, rng, x, y, x_eval, y_eval, num_epochs, task):
    step = jax.jit(update)
    for epoch in range(num_epochs):
        rng, sub = jax.random.split(rng)
        runner_state = ({parts})
        runner_state, info = step(runner_state, task)
        {unpack} = runner_state
    return state
"""


def test_jax803_a_container_with_a_part_the_loop_does_not_rebind_is_opt_in():
    """Fresh AY (four copies of one script): ``runner_state = (x, y, x_eval, y_eval, state, rng)`` rebuilt in
    every epoch and rebound from the jitted step's results. Donating it deletes ``x_eval``/``y_eval`` too, which
    the loop does not rebind and puts in again next epoch: JAX raises on the deleted buffer (the runtime test
    below), so the advice ``donate_argnums=(0,)`` is not proven safe: opt-in, the part named. Where every part
    is rebound from the results, or the part is a Python constant, the finding stays default."""
    kept = _RUNNER.format(parts="x, y, x_eval, y_eval, state, sub", unpack="x, y, state, rng")
    assert default_findings(kept, "JAX803") == []
    ((line, code, why),) = opt_in_findings(kept, "JAX803")
    assert (line, code) == (13, "JAX803")
    assert why.startswith("old-unread unknown: `runner_state = (x, y, x_eval, y_eval, state, sub)` on line 16 puts "
                          "`x_eval`, which the loop does not rebind")
    # near misses: every part rebound from the results; Python constants as the other parts
    rebound = _RUNNER.format(parts="x, y, state, sub", unpack="x, y, state, rng").replace(
        "x, y, x_eval, y_eval, state, rng = runner_state", "x, y, state, rng = runner_state\n    x_eval = y_eval = x")
    assert default_findings(rebound, "JAX803") == [(14, "JAX803")]  # one line more in `update`
    constants = _RUNNER.format(parts="x, y, 0.5, 2, state, sub", unpack="x, y, state, rng")
    assert default_findings(constants, "JAX803") == [(13, "JAX803")]


@pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")
def test_runtime_donating_a_container_deletes_the_part_passed_again():
    """Why the case above is not safe to donate: the part the loop puts in again is deleted by the first call,
    and the second call raises (jax 0.4.30 and 0.10.2, CPU)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    step = jax.jit(lambda rs: ((rs[0], rs[2] + rs[1].sum()), rs[2].sum()), donate_argnums=(0,))
    x, x_eval, w = jnp.ones(4), jnp.ones(4), jnp.zeros(4)
    (x, w), _ = step((x, x_eval, w))
    assert x_eval.is_deleted()
    with pytest.raises(Exception, match="deleted or donated"):
        step((x, x_eval, w))


def test_jax803_donating_lowers_what_the_compiled_program_needs():
    """memory_analysis of the same step with and without donate_argnums=0: the donated parameters
    are aliased to the outputs (jax 0.4.30 and 0.10.2, CPU), and XLA's own peak, where this jaxlib
    reports one, drops by their size."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def step(params, x):
        return params - 0.01 * (x.T @ jnp.tanh(x @ params)), x.sum()

    params, x = jnp.ones((256, 256)), jnp.ones((64, 256))
    plain = jax.jit(step).lower(params, x).compile().memory_analysis()
    donated = jax.jit(step, donate_argnums=0).lower(params, x).compile().memory_analysis()
    assert plain.alias_size_in_bytes == 0 and donated.alias_size_in_bytes == params.nbytes
    peak = getattr(plain, "peak_memory_in_bytes", None)
    if peak:
        assert peak - donated.peak_memory_in_bytes == params.nbytes


def test_runtime_jax802_initialize_after_the_backend_started_raises():
    """Why JAX802 is `fails_at_runtime` (SARIF level error): the call raises once the backend
    started (in a child process: it must not start this one's backend first)."""
    pytest.importorskip("jax")
    code = ("import jax, jax.numpy as jnp\n"
            "jnp.zeros(3)\n"
            "try:\n"
            "    jax.distributed.initialize(coordinator_address='localhost:1', num_processes=1, process_id=0)\n"
            "except RuntimeError as e:\n"
            "    print('RuntimeError', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.stdout.startswith("RuntimeError jax.distributed.initialize() must be called before any JAX"), \
        proc.stdout + proc.stderr


def test_an_ahead_of_time_compiled_step_is_the_jitted_step():
    """``step = jax.jit(update).lower(...).compile()`` (fresh set M's notebook): calling it runs the
    compiled step, so its loss is a device value (JAX201) and its rebinding undonated (JAX803)."""
    assert_marked("""
    import jax
    import optax

    def update(params, opt_state, batch):
        grads = jax.grad(lambda p: (p * batch).sum())(params)
        updates, opt_state = optax.sgd(0.1).update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, (params * batch).sum()

    def train(params, opt_state, batch, batches):
        step = jax.jit(update)  # expect: JAX803
        step = step.lower(params, opt_state, batch).compile()
        for b in batches:
            params, opt_state, loss = step(params, opt_state, b)
            print(loss)  # expect: JAX201
    """)


_NNX_STEP = """
import optax
from flax import nnx

@nnx.jit
def train_step(model, optimizer, batch):
    loss, grads = nnx.value_and_grad(lambda m: (m(batch) ** 2).mean())(model)
    optimizer.update(model, grads)
    return loss

def train(model, batches, max_steps):
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    step = 0
    while step < max_steps:
        loss = train_step(model, optimizer, next(batches))
        step += 1
"""


def test_jax803_a_flax_nnx_step_updating_its_model_and_optimizer_in_place():
    # fresh set T (MoE trainers): nnx.jit writes the new parameters and optimizer state back into the
    # objects after each call; without donation both copies are alive during it
    src = _NNX_STEP.replace("@nnx.jit\n", "@nnx.jit  # expect: JAX803\n")
    assert_marked(src)
    (msg,) = messages(src, "JAX803")
    assert msg.startswith("`train_step` updates `model` and `optimizer` in place (`optimizer.update(model, grads)` on "
                          "line 8) and is called every iteration (line 15)") and "donate_argnums=(0, 1)" in msg
    # the older API, the model held by the optimizer: the optimizer alone
    old = _NNX_STEP.replace("optimizer.update(model, grads)", "optimizer.update(grads)")
    (msg,) = messages(old, "JAX803")
    assert "updates `optimizer` in place" in msg and "donate_argnums=(1,)" in msg


@pytest.mark.parametrize("change, opt_in", [
    (("@nnx.jit\n", "@nnx.jit(donate_argnums=(0, 1))\n"), None),  # donated
    (("    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)\n", ""), True),  # made elsewhere
    (("        step += 1\n", "        step += 1\n        snapshot = nnx.state(model)\n"), None),  # old state kept
    (("    optimizer.update(model, grads)\n", "    optimizer.apply(model, grads)\n"), None),  # no update
    (("    while step < max_steps:\n", "    for step in range(50):\n"), True),  # a short literal run
])
def test_jax803_near_misses_of_a_flax_nnx_in_place_step(change, opt_in):
    src = _NNX_STEP.replace(*change)
    assert src != _NNX_STEP
    if change[0].startswith("    optimizer = "):
        src = src.replace("def train(model, batches, max_steps):", "def train(model, optimizer, batches, max_steps):")
    assert default_findings(src, "JAX803") == []
    assert bool(opt_in_findings(src, "JAX803")) is bool(opt_in)


_NNX_TRAINER = """
import optax
from flax import nnx

class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    @staticmethod
    @nnx.jit
    def _step(model, optimizer, batch):
        loss, grads = nnx.value_and_grad(lambda m: (m(batch) ** 2).mean())(model)
        optimizer.update(model, grads)
        return loss

    def train_step(self, batch):
        return self._step(self.model, self.optimizer, batch)

    def train(self, batches, max_steps):
        for step in range(max_steps):
            self.train_step(next(batches))
"""


def test_jax803_a_flax_nnx_step_run_by_a_method_that_a_loop_calls():
    # fresh AC's nanochat trainers: the step is called in `train_step`, which the training loop calls
    src = _NNX_TRAINER.replace("    @nnx.jit\n", "    @nnx.jit  # expect: JAX803\n")
    assert_marked(src)
    (msg,) = messages(src, "JAX803")
    assert "is called (line 18) at every call of `train_step`, which the loop on line 21 makes (line 22)" in msg
    # near misses: the method is called once, not in a loop; or nothing in the module calls it
    once = _NNX_TRAINER.replace("        for step in range(max_steps):\n            self.train_step(next(batches))",
                                "        self.train_step(next(batches))")
    assert findings(once, "JAX803") == []
    assert findings(_NNX_TRAINER.replace("            self.train_step(next(batches))", "            pass"),
                    "JAX803") == []


def test_jax801_a_fallback_in_the_handler_of_a_backend_query_after_the_backend_started_never_runs():
    # fresh set S: `try: jax.devices() except RuntimeError: os.environ[...] = "cpu"` after the module already
    # called jax.devices(): the backends are cached, the query cannot fail, the handler is dead
    src = """
    import os
    import jax

    devices = jax.devices()

    def initialize():
        try:
            jax.devices()
        except RuntimeError:
            os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"

    def other():
        try:
            jax.devices()
            run_something()
        except RuntimeError:
            os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".5"  # expect: JAX801

    if __name__ == "__main__":
        initialize()
        other()
    """
    assert_marked(src)


@pytest.mark.parametrize("call, option, unknown", [
    ("model, opt_state, loss = make_step(model, opt_state, x, y)", "all", False),
    ("model, opt_state, loss = make_step(x, model, opt_state, y)", "all-except-first", False),  # x kept
    ("model, opt_state, loss = make_step(x, model, opt_state, y)\n            log(y)", "all-except-first", True),
    ("model, opt_state, loss = make_step(x, model, opt_state, y)\n            log(x)", "all-except-first", False),
    ("model, opt_state, loss = make_step(model, opt_state, data, y)", "all", True),  # the whole data set, again
    ("model, opt_state, loss = make_step(model, opt_state, key, y)", "all", True),  # a key passed again
    ("model, opt_state, loss = make_step(model, opt_state, batch['x'], y)", "all", False),  # an item of a new batch
])
def test_the_donate_option_of_an_equinox_step(call, option, unknown):
    import ast
    import textwrap
    from jaxlint.model import build_model
    from jaxlint.model.facts import donation, eqxdonation

    src = textwrap.dedent(f"""
    import equinox as eqx

    @eqx.filter_jit
    def make_step(a, b, c, d):
        return a, b, c

    def train(model, opt_state, loader, data, key):
        for x, y in loader:
            batch = next(loader)
            {call}
    """)
    m = build_model(ast.parse(src))
    [r] = donation.rebinding_without_donation(m)
    chosen, fact = eqxdonation.donate_option(m, r)
    assert chosen == option and (fact is not None) is unknown
    if unknown:
        assert fact.status == "unknown" and ("`y`" in fact.why or "passes again" in fact.why)
