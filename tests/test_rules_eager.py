"""Tests of the eager-work rules: JAX701 (the per-step update outside jit) and JAX702 (a Python
loop reading a JAX array element by element). Positive cases mark every expected finding with
``# expect: CODE`` and compare with the findings of all rules."""

from __future__ import annotations

import pytest

from ruletools import assert_marked, findings, line_of, messages

_GRADS = """
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    @jax.jit
    def grads_of(params, batch):
        return jax.grad(lambda p: jnp.mean((p["w"] * batch) ** 2))(params)
"""

# --------------------------------------------------------------------------- JAX701


def test_jax701_optax_update_and_apply_updates_are_one_finding_per_loop():
    src = _GRADS + """
    def train(params, batches):
        tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
        opt_state = tx.init(params)
        for batch in batches:
            grads = grads_of(params, batch)
            updates, opt_state = tx.update(grads, opt_state, params)  # expect: JAX701
            params = optax.apply_updates(params, updates)
        return params
    """
    assert_marked(src)
    (msg,) = messages(src, "JAX701")
    assert "`optax.chain` optimizer" in msg and "optax.apply_updates(...)` on line" in msg
    assert "`grads_of`" in msg


def test_jax701_optimizer_stored_on_self_and_inject_hyperparams():
    assert_marked(_GRADS + """
    class Trainer:
        def __init__(self, lr):
            self.tx = optax.inject_hyperparams(optax.adam)(learning_rate=lr)

        def fit(self, params, batches):
            opt_state = self.tx.init(params)
            for batch in batches:
                grads = grads_of(params, batch)
                updates, opt_state = self.tx.update(grads, opt_state, params)  # expect: JAX701
                params = optax.apply_updates(params, updates)
            return params
    """)


def test_jax701_hand_written_sgd_tree_map():
    assert_marked(_GRADS + """
    def train(params, batches, lr):
        for batch in batches:
            grads = grads_of(params, batch)
            params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)  # expect: JAX701
        return params
    """)


def test_jax701_nnx_optimizer_update_outside_nnx_jit():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    @nnx.jit
    def grads_of(model, x):
        return nnx.grad(lambda m: jnp.mean(m(x) ** 2))(model)

    def train(model, data):
        optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
        for x in data:
            grads = grads_of(model, x)
            optimizer.update(model, grads)  # expect: JAX701
    """)


def test_jax701_near_miss_update_inside_the_jitted_step():
    assert findings(_GRADS + """
    tx = optax.adam(1e-3)

    @jax.jit
    def step(params, opt_state, batch):
        grads = jax.grad(lambda p: jnp.mean(p["w"] * batch))(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    def train(params, batches):
        opt_state = tx.init(params)
        for batch in batches:
            params, opt_state = step(params, opt_state, batch)
        return params
    """, "JAX701") == []


def test_jax701_near_miss_a_few_steps():
    # (a loop with no compiled call whose gradient is eager is reported on the gradient: see
    # tests/test_rules_eager_grad.py)
    assert findings(_GRADS + """
    def three_steps(params, batch):
        tx = optax.sgd(0.1)
        opt_state = tx.init(params)
        for _ in range(3):
            grads = grads_of(params, batch)
            updates, opt_state = tx.update(grads, opt_state, params)
        return updates
    """, "JAX701") == []


def test_jax701_near_miss_unknown_optimizer_and_non_arithmetic_tree_map():
    # an optimizer this module did not make: unknown is not evidence; a tree map that is no update rule
    assert findings(_GRADS + """
    def train(params, batches, tx, opt_state):
        for batch in batches:
            grads = grads_of(params, batch)
            updates, opt_state = tx.update(grads, opt_state, params)
            norms = jax.tree.map(lambda g: jnp.linalg.norm(g), grads)
        return updates, norms
    """, "JAX701") == []


def test_jax701_in_test_code_is_opt_in():
    assert_marked(_GRADS + """
    def test_training_converges(params, batches):
        tx = optax.adam(1e-3)
        opt_state = tx.init(params)
        for batch in batches:
            grads = grads_of(params, batch)
            updates, opt_state = tx.update(grads, opt_state, params)  # expect: JAX701 (opt-in)
        assert updates
    """)


# --------------------------------------------------------------------------- JAX702


def test_jax702_nested_index_loops_compare_elements():
    src = """
    import jax.numpy as jnp

    def rises(z):
        z = jnp.cumsum(z, axis=0)
        n = 0
        for i in range(z.shape[1]):
            for j in range(1, z.shape[0]):
                if z[j, i] <= z[j - 1, i]:  # expect: JAX702
                    n += 1
        return n
    """
    assert_marked(src)
    (msg,) = messages(src, "JAX702")
    assert "np.asarray(z)" in msg and "loop on line 8" in msg


def test_jax702_item_float_and_tree_map_reads_of_a_jitted_result():
    src = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def run(x):
        return {"loss": jnp.cumsum(x)}, jnp.cumsum(x)

    def report(x, n, log):
        history, losses = run(x)
        for i in range(n):
            log(jax.tree.map(lambda v: v[i].item(), history))  # expect: JAX702
            log(float(losses[i]))  # expect: JAX702
    """
    assert_marked(src)
    assert any("jax.device_get(history)" in m for m in messages(src, "JAX702"))


def test_jax702_iterating_a_jax_array_and_branching_on_each_element():
    assert_marked("""
    import jax.numpy as jnp

    def count(x):
        x = jnp.sin(x)
        n = 0
        for v in x:
            if v > 0:  # expect: JAX702
                n += 1
        return n
    """)


def test_jax702_elements_of_a_device_index_array_used_to_index_every_step():
    # fresh set S (LLM trainers): `get_batch` draws the batch's indices with jax.random and builds the
    # batch from a host dataset one index at a time, at every training step
    src = """
    import jax
    import jax.numpy as jnp

    def get_batch(key, data, batch_size, seq_len):
        k1, k2 = jax.random.split(key)
        indices = jax.random.randint(k1, (batch_size,), 0, len(data))
        x = jnp.stack([data[i] for i in indices])  # expect: JAX702
        starts = jax.random.randint(k2, (batch_size,), 0, len(data) - seq_len)
        y = jnp.stack([jnp.array(data[s:s + seq_len]) for s in starts])  # expect: JAX702
        return x, y

    def train(key, data, steps):
        for step in range(steps):
            key, sub = jax.random.split(key)
            x, y = get_batch(sub, data, 32, 128)
        return x, y

    if __name__ == "__main__":
        train(jax.random.PRNGKey(0), list(range(10000)), 1000)
    """
    assert_marked(src)
    msg = messages(src, "JAX702")[0]
    assert msg.startswith("iterating the JAX array `indices` takes one element per iteration of the loop on line 8, and "
                          "`data[i]` indexes with it") and "np.asarray(indices)" in msg


def test_jax702_near_misses_of_elements_used_as_indices():
    assert findings("""
    import jax
    import jax.numpy as jnp

    def rows(key, data, steps_per_epoch, batch_size):
        perms = jax.random.permutation(key, len(data)).reshape((steps_per_epoch, batch_size))
        return [data[perm] for perm in perms]  # a row of indices each: one copy per row

    def once(key, names):
        inds = jax.random.randint(key, (64,), 0, len(names))
        return [names[i] for i in inds]  # a display helper nobody calls per step

    def few(key, data):
        inds = jax.random.randint(key, (4,), 0, len(data))
        return [data[i] for i in inds]

    def table(stats, steps):
        for step in range(steps):
            print([stats[k] for k in stats])  # a dict's keys

    def train(key, data, steps):
        for step in range(steps):
            rows(key, data, 10, 8)
            few(key, data)
    """, "JAX702") == []


def test_jax702_near_misses():
    assert findings("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def step(x):
        return x * 0.5

    def host_copy(z):
        z = np.asarray(jnp.cumsum(z))
        return [float(z[i]) for i in range(z.shape[0])]

    def few(z):
        z = jnp.cumsum(z)
        return [float(z[i]) for i in range(4)]

    def rebound(x, n):
        out = []
        for i in range(n):
            x = step(x)
            out.append(float(x[i]))
        return out

    def slices(z, n):
        z = jnp.cumsum(z)
        return [z[i:i + 2] for i in range(n)]

    def unknown(z, n):
        return [float(z[i]) for i in range(n)]

    @jax.jit
    def traced(z):
        return sum(z[i] for i in range(10))
    """, "JAX702") == []


def test_jax702_wins_over_jax201_on_the_same_read():
    src = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return x * 0.5

    def train(x, table, n):
        table = jnp.asarray(table)
        for i in range(n):
            x = step(x)
            if table[i] > 0:  # expect: JAX702
                x = x + 1
        return x
    """
    assert_marked(src)


def test_jax701_metric_sums_are_no_update_of_the_step_state():
    # issue 37: summing the step's metrics with a tree map each step updates nothing the compiled
    # step computes with (the eager-update fact is disproven); a tree map whose result the step
    # takes next iteration is an update
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def train_step(params, batch):
        grads = jax.grad(lambda p: jnp.mean((p * batch) ** 2))(params)
        return grads, {"loss": jnp.mean(batch)}

    def train(params, batches, lr):
        totals = None
        for batch in batches:
            grads, metrics = train_step(params, batch)
            totals = metrics if totals is None else jax.tree.map(lambda a, b: a + b, totals, metrics)
            params = jax.tree.map(lambda p, g: p - lr * g, params, grads)  # expect: JAX701
        return params, totals
    """)


def test_jax702_iterating_a_programs_variables_or_a_mirrored_container_is_not_an_array():
    """Set I's two FALSE: `jax.make_jaxpr(f)(x).jaxpr.outvars` is a list of the program's variables,
    and `lax.optimization_barrier((args, payloads))` gives back `payloads` as it was (a tuple of
    parameters); the near positive, a jnp array through the barrier, is still reported."""
    assert findings("""
        import jax

        def unused_inputs(func, argtree):
            closed = jax.make_jaxpr(func)(argtree)
            invars = set(closed.jaxpr.invars)
            used = set()
            for var in closed.jaxpr.outvars:
                if var in invars:
                    used.add(var)
            return used

        def fn(payloads, args):
            args, payloads = jax.lax.optimization_barrier((args, payloads))
            outs = []
            for payload in payloads:
                if payload is None:
                    outs.append(None)
            return outs
    """, "JAX702") == []
    assert_marked("""
        import jax
        import jax.numpy as jnp

        def count(n):
            x, y = jax.lax.optimization_barrier((jnp.arange(n), jnp.ones(n)))
            total = 0
            for v in x:
                if v > 0:  # expect: JAX702
                    total += 1
            return total
    """)


def test_jax701_an_eager_update_beside_the_gradient_of_a_jitted_loss():
    """Set H's catalogue (six probml notebooks): `jax.value_and_grad(loss_fn)(params, x)` with `loss_fn`
    jitted runs compiled programs, so the optax update beside it is the eager part of the step. With a
    plain `loss_fn` the whole step is eager: the gradient is reported, not the update."""
    jitted = """
        import jax
        import jax.numpy as jnp
        import optax

        params = {"w": jnp.ones(3)}
        loss_fn = jax.jit(lambda params, x: -jnp.mean(params["w"] * x))
        optimizer = optax.adam(1e-3)
        opt_state = optimizer.init(params)
        key = jax.random.PRNGKey(0)

        for i in range(5000):
            key, sub = jax.random.split(key)
            data = jax.random.normal(sub, (100, 3))
            loss, g = jax.value_and_grad(loss_fn)(params, data)
            updates, opt_state = optimizer.update(g, opt_state)  # expect: JAX701
            params = optax.apply_updates(params, updates)
    """
    assert_marked(jitted)
    plain = jitted.replace('jax.jit(lambda params, x: -jnp.mean(params["w"] * x))',
                           'lambda params, x: -jnp.mean(params["w"] * x)')
    assert plain != jitted
    got = findings(plain, "JAX701")
    assert [line for line, _ in got] == [line_of(plain, "jax.value_and_grad(loss_fn)")]


def test_jax702_indexing_a_tuple_of_arrays_a_jitted_step_returns_is_host_indexing():
    """Set K's FALSE (ttt-lm-jax): `ttt_stats`, a tuple of per-layer arrays the jitted step returns, read
    by `ttt_stats[layer]` in a loop over the layers: plain tuple indexing, no device work per element.
    A `jnp` array read the same way is still reported."""
    src = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def train_step(state, batch):
            stats = tuple(jnp.mean(batch * k) for k in range(4))
            return state - 0.1 * jnp.mean(batch), stats

        def train(state, batches, log):
            for batch in batches:
                state, stats = train_step(state, batch)
                for layer in range(len(stats)):
                    log(float(stats[layer]))
                table = jnp.arange(64.0)
                for i in range(table.shape[0]):
                    log(float(table[i]))  # expect: JAX702
            return state
    """
    assert findings(src, "JAX702") == [(line_of(src, "# expect: JAX702"), "JAX702")]


def test_jax701_hand_written_sgd_comprehension_over_zipped_leaves():
    assert_marked(_GRADS + """
    def train(params, batches, lr):
        for batch in batches:
            grads = grads_of(params, batch)
            params = [p - lr * g for p, g in zip(params, grads)]  # expect: JAX701
        return params

    def train_pairs(params, batches, lr):
        while True:
            grads = grads_of(params, next(batches))
            params = [(w - lr * dw, b - lr * db) for (w, b), (dw, db) in zip(params, grads)]  # expect: JAX701
    """)
    (msg, _) = messages(_GRADS + """
    def train(params, batches, lr):
        for batch in batches:
            grads = grads_of(params, batch)
            params = [p - lr * g for p, g in zip(params, grads)]
        return params

    def other(params, batches, lr):
        for batch in batches:
            grads = grads_of(params, batch)
            params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return params
    """, "JAX701")
    assert msg.startswith("a comprehension of an update rule over `zip(...)` runs outside jit in every iteration")


def test_jax701_near_misses_of_a_comprehension():
    src = _GRADS + """
    def train(params, batches, lr, names):
        total = []
        for batch in batches:
            grads = grads_of(params, batch)
            labels = [f"{n}={g}" for n, g in zip(names, grads)]  # no arithmetic update
            scaled = [g * lr for n, g in zip(names, grads)]  # one sequence's leaves only
            kept = [p - lr * g for p, g in zip(params, grads) if g is not None]  # filtered
            clipped = [jnp.clip(p - lr * g, -1, 1) for p, g in zip(params, grads)]  # calls in it
            total = [t + g for t, g in zip(total, grads)]  # a running sum no compiled call reads
        return labels, scaled, kept, clipped, total
    """
    assert findings(src, "JAX701") == []


def test_jax701_train_state_apply_gradients_outside_jit():
    assert_marked(_GRADS + """
    class Trainer:
        def __init__(self, state, loader):
            self.state = state
            self.loader = loader

        def fit_epoch(self):
            for batch in self.loader:
                grads = grads_of(self.state.params, batch)
                self.state = self.state.apply_gradients(grads=grads)  # expect: JAX701

    def fit(state, loader):
        for batch in loader:
            grads = grads_of(state.params, batch)
            state = state.apply_gradients(grads=grads)  # expect: JAX701
        return state
    """)


def test_jax701_near_misses_of_apply_gradients():
    inside = _GRADS + """
    @jax.jit
    def step(state, batch):
        return state.apply_gradients(grads=grads_of(state.params, batch))

    def fit(state, loader):
        for batch in loader:
            state = step(state, batch)
        return state
    """
    assert findings(inside, "JAX701") == []
    own_class = _GRADS + """
    class Averager:
        def apply_gradients(self, grads):
            return grads

    def fit(avg, params, loader):
        for batch in loader:
            avg = avg.apply_gradients(grads_of(params, batch))
        return avg
    """
    assert findings(own_class, "JAX701") == []


_EXAMPLE_OPT = """
    import jax
    import jax.numpy as jnp
    from jax import grad, jit
    from jax.example_libraries import optimizers

    def loss(params, batch):
        x, y = batch
        return jnp.mean((x @ params["w"] - y) ** 2)

    opt_init, opt_update, get_params = optimizers.adam(1e-3)
    grad_fn = jit(grad(loss))

    def train(params, batches, num_steps):
        opt_state = opt_init(params)
        for i in range(num_steps):
            g = grad_fn(get_params(opt_state), next(batches))
            opt_state = opt_update(i, g, opt_state)  # expect: JAX701
        return get_params(opt_state)
"""


def test_jax701_an_example_libraries_optimizer_update_outside_jit():
    assert_marked(_EXAMPLE_OPT)
    assert "`opt_update(...)` of the `jax.example_libraries.optimizers.adam` optimizer" in messages(
        _EXAMPLE_OPT, "JAX701")[0]


@pytest.mark.parametrize("change", [
    ("opt_init, opt_update, get_params = optimizers.adam(1e-3)",
     "opt_init, opt_update, get_params = make_optimizer(1e-3)"),  # not JAX's example optimizers
    ("from jax.example_libraries import optimizers", "import my_optimizers as optimizers"),
    ("opt_state = opt_update(i, g, opt_state)  # expect: JAX701", "opt_state = get_params(opt_state)"),
])
def test_jax701_near_misses_of_an_example_optimizer(change):
    src = _EXAMPLE_OPT.replace(*change)
    assert src != _EXAMPLE_OPT
    assert findings(src, "JAX701") == []

