"""Tests of the host-transfer rules: JAX201, JAX202, JAX203.

Positive cases mark every line where a finding is expected with ``# expect: CODE`` (as the
fixtures do) and compare the engine's findings of *all* rules with those marks, so a case
also fails when another rule fires on it.
"""

from __future__ import annotations

import pytest

import textwrap

import jaxlint_rules
from jaxlint.engine import check_source
from ruletools import (EVERYWHERE_OPT_IN, assert_marked, default_findings, findings, line_of, messages,
                       opt_in_findings)


# --------------------------------------------------------------------------- the rules' own examples


# --------------------------------------------------------------------------- JAX201 positives

_TRAIN_STEP = """
    import logging

    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def train_step(params, batch):
        loss = jnp.mean((params - batch) ** 2)
        return params - 0.1 * loss, {"loss": loss, "norm": jnp.linalg.norm(params)}
"""


def test_jax201_fetches_of_a_tuple_unpacked_jit_result():
    assert_marked(_TRAIN_STEP + """
    def train(params, batches, history):
        for batch in batches:
            params, metrics = train_step(params, batch)
            history.append(metrics["loss"].item())  # expect: JAX201
            norm = float(metrics["norm"])  # expect: JAX201
            host = jax.device_get(metrics)  # expect: JAX201
            snapshot = np.asarray(params)  # expect: JAX201
        return params
    """)


def test_jax201_value_and_grad_result_in_loop():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def loss_fn(w, x, y):
        return jnp.mean((x @ w - y) ** 2)

    def fit(w, data, lr=1e-2):
        losses = []
        for x, y in data:
            loss, grad = jax.value_and_grad(loss_fn)(w, x, y)  # expect: JAX701 (opt-in)
            w = w - lr * grad
            losses.append(loss.item())  # expect: JAX201
            print(grad.tolist())  # expect: JAX201
        return w, losses
    """)


def test_jax201_formatting_jax_values_every_step():
    assert_marked(_TRAIN_STEP + """
    log = logging.getLogger(__name__)

    def train(params, batches, pbar):
        for step, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            print(f"step {step} loss {metrics['loss']:.4f}")  # expect: JAX201
            pbar.set_description("loss %.4f" % metrics["loss"])  # expect: JAX201
            msg = "norm {:.3f}".format(metrics["norm"])  # expect: JAX201
            log.info("step %d loss %s", step, metrics["loss"])  # expect: JAX201
            logging.warning("norm %s", metrics["norm"])  # expect: JAX201
        return params
    """)


def test_jax201_branching_on_a_jax_value():
    assert_marked(_TRAIN_STEP + """
    def train(params, batches):
        for batch in batches:
            params, metrics = train_step(params, batch)
            if jnp.isnan(metrics["loss"]):  # expect: JAX201
                raise FloatingPointError("loss is NaN")
            stop = bool(metrics["norm"] > 1e3)  # expect: JAX201
            if stop:
                break
        return params
    """)


def test_jax201_while_test_on_a_jax_value():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def sweep(x):
        return 0.5 * (x + 2.0 / x)

    def newton_sqrt2(x, tol=1e-6):
        err = jnp.abs(x * x - 2.0)
        while err > tol:  # expect: JAX201
            x = sweep(x)
            err = jnp.abs(x * x - 2.0)
        return x
    """)


def test_jax201_while_test_on_value_rebound_in_the_loop():
    # The first test sees a Python float, but every later one sees the JAX array assigned at
    # the end of the previous iteration: this is a per-iteration sync all the same.
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def relax(x):
        return 0.5 * x

    def solve(x, tol):
        delta = float("inf")
        while delta > tol:  # expect: JAX201
            new = relax(x)
            delta = jnp.max(jnp.abs(new - x))
            x = new
        return x
    """)


def test_jax201_eager_evaluation_loop_over_batches():
    # No jit here, but every batch dispatches jnp work and int() waits for it before the next
    # batch can be queued; accumulating on device and converting once after the loop avoids that.
    # A total over an evaluation pass (no state carried between batches) is opt-in since issue 27:
    # judged harmless on real evaluators, like collecting each batch's output.
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def accuracy(w, batches):
        correct = 0
        for x, y in batches:
            logits = jnp.dot(jnp.asarray(x), w)
            correct += int(jnp.sum(jnp.argmax(logits, axis=-1) == y))  # expect: JAX201 (opt-in)
        return correct
    """)


def test_jax201_loop_over_a_few_prompts_fixed_by_the_module_is_not_per_step():
    # A literal list of three prompts, iterated by name or by index: the loop runs three times,
    # so its syncs are three, not one per step.
    assert findings(_TRAIN_STEP + """
    PROMPTS = ["I love to", "Today is a", "What is the"]

    def export(params):
        rows = []
        for i in range(len(PROMPTS)):
            params, metrics = train_step(params, jnp.asarray([i]))
            print(f"{metrics['loss']=}")
            rows.append({"prompt": PROMPTS[i], "loss": float(metrics["loss"])})
        for p in PROMPTS:
            params, metrics = train_step(params, jnp.asarray([len(p)]))
            print(p, metrics["loss"])
        return rows
    """, "JAX201") == []


def test_jax201_loop_over_an_array_made_from_a_literal_runs_its_length():
    # iterating a 1-D array yields its rows: three here, however the values are spelled
    assert findings(_TRAIN_STEP + """
    def print_row(values, name):
        quantiles = jnp.array([0.2, 0.5, 0.8])
        columns = ["(p{})".format(int(q * 100)) for q in quantiles]
        q_values = jnp.quantile(values, quantiles, axis=0)
        print(name, columns, q_values)
    """, "JAX201") == []
    # of any length: a comprehension over the elements of one array reads the parts of one value, once per
    # call; a step loop around it decides whether that is per step (test_first_look_am.py)
    assert findings(_TRAIN_STEP + """
    def print_rows(values, qs):
        quantiles = jnp.array(qs)
        columns = ["(p{})".format(int(q * 100)) for q in quantiles]
        print(columns)
    """, "JAX201") == []


def test_jax201_a_named_list_that_grows_is_not_a_few_trips():
    assert_marked(_TRAIN_STEP + """
    PROMPTS = ["I love to", "Today is a"]

    def export(params, more):
        PROMPTS.extend(more)
        for i in range(len(PROMPTS)):
            params, metrics = train_step(params, jnp.asarray([i]))
            print(f"{metrics['loss']=}")  # expect: JAX201
        for step in range(len(more)):
            params, metrics = train_step(params, jnp.asarray([step]))
            print(metrics["loss"])  # expect: JAX201
    """)


def test_jax201_small_host_loop_inside_the_step_loop():
    assert_marked(_TRAIN_STEP + """
    def train(params, batches, history):
        for batch in batches:
            params, metrics = train_step(params, batch)
            for name, value in metrics.items():
                history[name].append(float(value))  # expect: JAX201
        return params
    """)


def test_jax201_jitted_method_of_a_trainer_class():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    class Trainer:
        def __init__(self, lr):
            self.lr = lr
            self._step = jax.jit(self.step)

        def step(self, params, batch):
            loss = jnp.mean((params - batch) ** 2)
            return params - self.lr * loss, loss

        def fit(self, params, batches):
            for batch in batches:
                params, loss = self._step(params, batch)
                print("loss", loss)  # expect: JAX201
            return params
    """)


def test_jax201_innermost_jax_loop_of_a_nest():
    assert_marked(_TRAIN_STEP + """
    def train(params, epochs, batches):
        for epoch in range(epochs):
            for batch in batches:
                params, metrics = train_step(params, batch)
                print(epoch, float(metrics["loss"]))  # expect: JAX201
        return params
    """)


# --------------------------------------------------------------------------- JAX201 negatives


def test_jax201_periodic_guards_are_not_reported():
    assert findings(_TRAIN_STEP + """
    def train(params, batches, num_steps, log_every):
        for step, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            if step % 100 == 0:
                print(f"step {step} loss {float(metrics['loss']):.4f}")
            if step == num_steps - 1:
                print("final norm", metrics["norm"].item())
            if (step + 1) % log_every == 0 and step > 0:
                logging.info("loss %s", metrics["loss"])
        return params
    """) == []


def test_jax201_periodic_guard_on_a_counter_in_a_while_loop():
    assert findings(_TRAIN_STEP + """
    def train(params, it):
        step = 0
        while True:
            batch = next(it, None)
            if batch is None:
                break
            params, metrics = train_step(params, batch)
            step += 1
            if step % 50 == 0:
                print(float(metrics["loss"]))
        return params
    """) == []


def test_jax201_guard_through_a_helper_decided_by_its_body_not_its_name():
    # a project's schedule helper with no schedule word in its name; an imported one (unreadable:
    # presumed periodic); an `or` with a flag the loop never sets
    assert findings(_TRAIN_STEP + """
    import utils

    def now(step, n, total):
        return step % n == 0 or step == total

    def train(params, batches, n, total, verbose):
        for step, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            if now(step, n, total):
                print(float(metrics["loss"]))
            if utils.q(step, n) or verbose and jax.process_index() == 0:
                print(float(metrics["norm"]))
        return params
    """) == []


def test_jax201_guard_through_a_helper_that_holds_every_step_after_warmup():
    assert_marked(_TRAIN_STEP + """
    def past(step, n):
        return step > n

    def train(params, batches, n):
        for step, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            if past(step, n):
                print(float(metrics["loss"]))  # expect: JAX201
        return params
    """)


def test_jax201_check_after_an_eager_device_loop_chunk_is_once_per_program():
    # the jax_md pattern: lax.fori_loop of many steps, then an overflow check on the host
    assert findings(_TRAIN_STEP + """
    from jax import lax

    def simulate(state, nbrs, body, n_chunks, inner):
        for i in range(n_chunks):
            new_state, nbrs = lax.fori_loop(0, inner, body, (state, nbrs))
            if nbrs.did_buffer_overflow:
                nbrs = nbrs.allocate(state)
            else:
                state = new_state
        return state
    """) == []


def test_jax201_check_after_a_short_literal_device_loop_is_per_step():
    assert_marked(_TRAIN_STEP + """
    from jax import lax

    def simulate(state, nbrs, body, n_chunks):
        for i in range(n_chunks):
            new_state, nbrs = lax.fori_loop(0, 2, body, (state, nbrs))
            if nbrs.did_buffer_overflow:  # expect: JAX201
                nbrs = nbrs.allocate(state)
            else:
                state = new_state
        return state
    """)


def test_jax201_jax202_a_sync_on_an_earlier_step_after_queuing_the_next_is_not_reported():
    # one step of lag keeps the queue full; blocking on step N-2 bounds the steps in flight
    assert findings(_TRAIN_STEP + """
    def train(params, batches):
        prev = None
        for batch in batches:
            params, metrics = train_step(params, batch)
            if prev is not None:
                print(float(prev["loss"]))
            prev = metrics
        outs = []
        for i, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            outs.append(metrics)
            if i >= 2:
                outs[i - 2]["loss"].block_until_ready()
            if len(outs) > 2:
                jax.block_until_ready(outs[-2])
        return params
    """) == []


def test_jax201_jax202_a_sync_on_this_step_or_before_queuing_is_still_reported():
    assert_marked(_TRAIN_STEP + """
    def train(params, batches):
        prev = None
        for batch in batches:
            if prev is not None:
                print(float(prev["loss"]))  # expect: JAX201
            params, metrics = train_step(params, batch)
            prev = metrics
        outs = []
        for i, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            outs.append(metrics)
            outs[i]["loss"].block_until_ready()  # expect: JAX202
            jax.block_until_ready(outs[-1])  # expect: JAX202
        return params
    """)


def test_jax201_epoch_level_fetch_after_step_loop_is_not_reported():
    assert findings(_TRAIN_STEP + """
    def train(params, epochs, batches):
        for epoch in range(epochs):
            for batch in batches:
                params, metrics = train_step(params, batch)
            print(f"epoch {epoch} loss {float(metrics['loss']):.4f}")
            if jnp.isnan(metrics["loss"]):
                raise FloatingPointError(epoch)
        return params
    """) == []


def test_jax201_fetch_after_the_loop_and_in_its_else_is_not_reported():
    assert findings(_TRAIN_STEP + """
    def train(params, batches):
        losses = []
        for batch in batches:
            params, metrics = train_step(params, batch)
            losses.append(metrics["loss"])
        else:
            print("last loss", float(metrics["loss"]))
        history = np.asarray(jnp.stack(losses))
        print(history.tolist())
        return params, history
    """) == []


def test_jax201_python_and_numpy_values_are_not_reported():
    assert findings(_TRAIN_STEP + """
    import math

    def lr_at(step, total):
        return 0.5 * (1 + math.cos(math.pi * step / total))

    def train(params, batches, total):
        seen = 0
        for step, raw in enumerate(batches):
            batch = np.asarray(raw, dtype=np.float32)
            params, metrics = train_step(params, batch)
            seen += batch.shape[0]
            lr = lr_at(step, total)
            print(f"lr {lr:.5f} seen {seen} mean {float(batch.mean()):.3f}")
            if lr < 1e-4:
                break
        return params
    """) == []


def test_jax201_unknown_library_results_are_not_reported():
    assert findings(_TRAIN_STEP + """
    from sklearn.metrics import accuracy_score

    def train(params, batches, labels):
        for batch, y in zip(batches, labels):
            params, metrics = train_step(params, batch)
            acc = accuracy_score(y, y)
            print(float(acc), int(len(y)))
        return params
    """) == []


def test_jax201_loop_without_jax_work_is_not_reported():
    assert findings("""
    import jax.numpy as jnp

    def report(x, names):
        total = jnp.sum(x)
        for name in names:
            print(name, total)
    """) == []


def test_jax201_loop_inside_traced_code_is_not_reported():
    # Python loops inside jit unroll at trace time; print there shows the tracer, no transfer.
    assert findings("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def rollout(x):
        for _ in range(4):
            x = jnp.tanh(x)
            print(x)
        return x
    """, "JAX201") == []  # (JAX602 reports the print itself)


# --------------------------------------------------------------------------- JAX202 positives

_STEP = """
    import time
    import timeit

    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(params, batch):
        return jax.tree_util.tree_map(lambda p: p - 0.1 * jnp.mean(batch), params)
"""


def test_jax202_method_and_function_forms_in_a_for_loop():
    assert_marked(_STEP + """
    def train(params, batches):
        for batch in batches:
            params = step(params, batch)
            jax.block_until_ready(params)  # expect: JAX202
        return params

    def decode(params, x, n):
        for _ in range(n):
            x = step(params, x)
            x.block_until_ready()  # expect: JAX202
        return x
    """)


def test_jax202_from_import_and_chained_call():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    from jax import block_until_ready

    @jax.jit
    def step(x):
        return jnp.tanh(x) * 2.0

    def run(x, n):
        for _ in range(n):
            x = block_until_ready(step(x))  # expect: JAX202
            step(x).block_until_ready()  # expect: JAX202
        return x
    """)


def test_jax202_while_loop():
    assert_marked(_STEP + """
    def train(params, it, max_steps):
        i = 0
        while i < max_steps:
            params = step(params, next(it))
            params = jax.block_until_ready(params)  # expect: JAX202
            i += 1
        return params
    """)


def test_jax202_small_host_loop_inside_the_step_loop():
    assert_marked(_STEP + """
    def train(params, batches):
        for batch in batches:
            params = step(params, batch)
            for leaf in jax.tree_util.tree_leaves(params):
                leaf.block_until_ready()  # expect: JAX202
        return params
    """)


def test_jax202_jitted_method_in_a_class():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    class Simulator:
        def __init__(self, dt):
            self.dt = dt
            self._advance = jax.jit(self.advance)

        def advance(self, state):
            return state + self.dt * jnp.sin(state)

        def run(self, state, steps):
            for _ in range(steps):
                state = self._advance(state)
                state.block_until_ready()  # expect: JAX202
            return state
    """)


# --------------------------------------------------------------------------- JAX202 negatives


def test_jax202_timing_harness_in_the_loop_body_is_not_reported():
    assert findings(_STEP + """
    def bench(params, batch, iters):
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            step(params, batch)["w"].block_until_ready()
            times.append(time.perf_counter() - t0)
        return min(times)
    """) == []


def test_jax202_timing_harness_around_the_loop_is_not_reported():
    assert findings(_STEP + """
    def throughput(params, batches):
        start = timeit.default_timer()
        for batch in batches:
            params = step(params, batch)
            jax.block_until_ready(params)
        return len(batches) / (timeit.default_timer() - start)

    def wall(params, batches):
        t0 = time.time()
        for batch in batches:
            jax.block_until_ready(step(params, batch))
        return time.time() - t0
    """) == []


def test_jax202_periodic_guard_is_not_reported():
    assert findings(_STEP + """
    def train(params, batches, sync_every):
        for i, batch in enumerate(batches):
            params = step(params, batch)
            if i % sync_every == 0:
                jax.block_until_ready(params)
            if i == len(batches) - 1:
                params = jax.block_until_ready(params)
        return params
    """) == []


def test_jax202_block_after_the_loop_is_not_reported():
    assert findings(_STEP + """
    def train(params, epochs, batches):
        for epoch in range(epochs):
            for batch in batches:
                params = step(params, batch)
            jax.block_until_ready(params)  # once per epoch
        return params.block_until_ready()
    """) == []


def test_jax202_waiting_for_all_dispatched_results_is_not_reported():
    # Dispatch everything first, then wait: the waiting loop runs no JAX work of its own.
    assert findings(_STEP + """
    def evaluate(params, batches):
        outs = [step(params, b) for b in batches]
        for out in outs:
            jax.block_until_ready(out)
        return outs
    """) == []


# --------------------------------------------------------------------------- JAX201/JAX202: how often, and whether the host needs it


def _all(src: str, path: str = "t.py") -> list:
    """(line, code, opt_in) of every finding, the opt-in ones (reported only with --pedantic) included.
    ``path`` must name an existing file for the path-based facts (test modules, notebooks)."""
    result = check_source(textwrap.dedent(src) if not path.endswith(".ipynb") else src, path,
                          [r() for r in jaxlint_rules.ALL_RULES])
    assert not result.internal_errors, result.internal_errors
    return sorted((f.line, f.code, f.opt_in) for f in result.findings if f.code not in EVERYWHERE_OPT_IN)


def test_jax201_every_n_helper_predicates_are_periodic():
    assert findings(_TRAIN_STEP + """
    import train_utils as u
    from train_utils import should_log

    def log_step(step, every):
        return (step + 1) % every == 0

    class Trainer:
        def is_eval_step(self, step):
            return step % self.eval_every == 0

        def fit(self, params, batches, every, total):
            for step, batch in enumerate(batches):
                params, metrics = train_step(params, batch)
                if should_log(step, every):
                    print(float(metrics["loss"]))
                if u.every_n(step, every, total):
                    logging.info("norm %s", metrics["norm"])
                if log_step(step, every):
                    print(f"{metrics['loss']}")
                if self.is_eval_step(step):
                    np.asarray(params)
            return params
    """, "JAX201") == []


def test_jax201_modulo_on_attributes_is_periodic():
    assert findings(_TRAIN_STEP + """
    class Agent:
        def run(self, batches):
            for batch in batches:
                self.params, metrics = train_step(self.params, batch)
                self.training_steps += 1
                if self.training_steps % self.summary_every == 0:
                    print(float(metrics["loss"]))
                if not self.training_steps % self.config.log_every:
                    logging.info("norm %s", metrics["norm"])
    """, "JAX201") == []


def test_jax201_threshold_schedule_is_periodic_but_its_own_test_still_syncs():
    # The branch runs once per eval_every env steps; reading the device counter in the test
    # is itself a sync every iteration.
    assert_marked(_TRAIN_STEP + """
    def train(state, batches, eval_every):
        next_eval_step = eval_every
        for batch in batches:
            state, metrics = train_step(state, batch)
            if int(state[0]) >= next_eval_step:  # expect: JAX201
                print(float(metrics["loss"]))
                next_eval_step += eval_every
    """)


def test_jax201_modulo_guard_on_a_device_counter_is_periodic():
    # `step` comes back from the jitted step (a device value): the `while` test syncs, and so
    # does the guard's own test (its first operand is read every step), while the guarded print
    # runs every print_every steps or at the last.
    assert_marked(_TRAIN_STEP + """
    def train(params, batch, steps, print_every):
        step = 0
        while step < steps:  # expect: JAX201
            params, step = train_step(params, batch)
            if (step % print_every) == 0 or step == steps - 1:  # expect: JAX201
                print(f"step {step}")
        return params
    """)


def test_jax201_membership_over_the_inner_loops_keys_is_not_periodic():
    assert_marked(_TRAIN_STEP + """
    def train(params, batches, stats):
        for batch in batches:
            params, aux = train_step(params, batch)
            for k, v in aux.items():
                if k in stats:
                    stats[k].append(v.item())  # expect: JAX201
                if k == "loss":
                    print(float(v))  # expect: JAX201
        return params
    """)


def test_jax201_guards_that_hold_most_steps_are_not_periodic():
    assert_marked(_TRAIN_STEP + """
    from train_utils import should_log

    def train(params, batches, every, best):
        for step, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            if step % every != 0:
                print(float(metrics["loss"]))  # expect: JAX201
            if not should_log(step, every):
                print(float(metrics["norm"]))  # expect: JAX201
            if batch.dtype == np.float32:
                print(np.asarray(params))  # expect: JAX201
            if metrics["loss"] < best:  # expect: JAX201
                best = metrics["loss"]
                print(float(best))  # expect: JAX201
        return params
    """)


_PROGRAMS = """
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from jax import lax

    tx = optax.adam(1e-3)

    @jax.jit
    def train_step(params, batch):
        loss = jnp.mean((params - batch) ** 2)
        return params - 0.1 * loss, loss

    @jax.jit
    def train_epoch(params, batches):
        return lax.scan(train_step, params, batches)

    def make_update(env, num_steps):
        def update(state):
            def env_step(s, _):
                s = env.step(s)
                return s, jnp.sum(s)
            return lax.scan(env_step, state, None, length=num_steps)
        return update
"""


def test_jax201_jax202_once_per_whole_program_is_not_reported():
    assert findings(_PROGRAMS + """
    def fit(params, data, epochs, env, n):
        for epoch in range(epochs):
            params, losses = train_epoch(params, data)
            jax.block_until_ready(params)
            print(f"epoch {epoch} loss {float(losses[-1]):.4f}")
        update = jax.jit(make_update(env, 500))
        state = params
        for i in range(n):
            state, rewards = update(state)
            state.block_until_ready()
            print("mean reward", float(jnp.mean(rewards)))
        return params

    def python_epoch(params, batches):
        for b in batches:
            params, loss = train_step(params, b)
        return params, loss

    def fit_python(params, batches, epochs):
        for epoch in range(epochs):
            params, loss = python_epoch(params, batches)
            print(epoch, loss.item())
        return params
    """) == []


def test_jax201_step_loop_stays_reported_beside_programs():
    # A program run now and then (a periodic evaluation) does not make the step loop an epoch
    # loop; a step that accumulates micro-batches with a device loop is still one step.
    assert_marked(_PROGRAMS + """
    @jax.jit
    def accumulated_step(params, opt_state, micro):
        def body(i, g):
            return g + jax.grad(lambda p: jnp.sum((p - micro[i]) ** 2))(params)
        grads = lax.fori_loop(0, micro.shape[0], body, jnp.zeros_like(params))
        updates, opt_state = tx.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, jnp.sum(grads)

    def fit(params, batches, eval_data, every, opt_state):
        for step, batch in enumerate(batches):
            params, loss = train_step(params, batch)
            if step % every == 0:
                params, eval_losses = train_epoch(params, eval_data)
            print(float(loss))  # expect: JAX201
        for micro in batches:
            params, opt_state, gnorm = accumulated_step(params, opt_state, micro)
            print(float(gnorm))  # expect: JAX201
        return params
    """)


def test_jax201_once_per_call_of_an_unrolled_loop_of_updates_is_not_reported():
    # One call of `update` makes epochs x minibatches optimizer updates (a Python loop unrolled in
    # the jitted body, as cleanrl's PPO does): a fetch per call is once per many steps.
    assert findings(_PROGRAMS + """
    import functools

    @functools.partial(jax.jit, static_argnames="epochs")  # `range(epochs)` needs a Python int
    def update(state, batches, epochs):
        for _ in range(epochs):
            for b in batches:
                grads = jax.grad(lambda p: jnp.sum((p - b) ** 2))(state.params)
                state = state.apply_gradients(grads=grads)
        return state, jnp.sum(state.params)

    def fit(state, batches, epochs, iterations):
        for it in range(iterations):
            state, total = update(state, batches, epochs)
            print(it, total.item())
        return state
    """) == []


def test_jax201_an_unrolled_loop_of_gradients_with_one_update_is_still_a_step():
    assert_marked(_PROGRAMS + """
    import functools

    @functools.partial(jax.jit, static_argnames="k")  # `range(k)` needs a Python int
    def accumulate(params, opt_state, micro, k):
        grads = jnp.zeros_like(params)
        for i in range(k):
            grads = grads + jax.grad(lambda p: jnp.sum((p - micro[i]) ** 2))(params)
        updates, opt_state = tx.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, jnp.sum(grads)

    def fit(params, opt_state, batches, k):
        for micro in batches:
            params, opt_state, gnorm = accumulate(params, opt_state, micro, k)
            print(gnorm.item())  # expect: JAX201
        return params
    """)


def test_jax201_once_per_sweep_point_is_not_reported():
    assert findings(_PROGRAMS + """
    @jax.jit
    def fewshot_acc(x, y, reg):
        return jnp.mean((x * reg - y) ** 2)

    def evaluate(x, y, shots_list, regs):
        results = {}
        for shots in shots_list:
            for reg in regs:
                acc = fewshot_acc(x[:shots], y[:shots], reg)
                results[shots, reg] = np.array(acc)
        return results
    """, "JAX201") == []


def test_jax201_loop_that_only_converts_its_elements_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def to_bits(weights):
        bits = []
        for w in weights:
            if w.dtype == jnp.bfloat16:
                converted = jax.lax.bitcast_convert_type(w, np.uint16)
                bits.append(np.asarray(converted.astype(np.uint16)))
            else:
                bits.append(np.asarray(w))
        return bits
    """) == []


def test_jax201_values_the_host_consumes_are_not_reported():
    # A host environment steps on the action, a tokenizer decodes the tokens, torch and json
    # take the values: the host needs them every iteration, and the loop already waits for the
    # device there, so a further fetch in the same iteration adds no stall.
    assert findings(_TRAIN_STEP + """
    import json
    import torch

    @jax.jit
    def policy(params, obs):
        return jnp.argmax(obs @ params), jnp.max(obs @ params)

    def act(params, env, obs, episodes):
        for t in range(episodes):
            action, value = policy(params, obs)
            obs, reward, done, info = env.step(np.asarray(action))
            values = float(value)
            if done:
                break

    def generate(params, prompt, tokenizer, n):
        tokens = prompt
        for _ in range(n):
            tokens, _ = policy(params, tokens)
            print(tokenizer.decode(tokens.tolist()))

    def export(params, layers, out):
        for i in layers:
            w = jnp.transpose(params[i])
            out[f"layer{i}"] = torch.tensor(np.asarray(w))
            json.dumps({"norm": jnp.linalg.norm(w).tolist()})
    """, "JAX201") == []


def test_jax201_an_object_a_host_library_made_consumes_values_whatever_its_method_is_called():
    # the receiver's type comes from the import, not from the method's name: `vec.advance` of a
    # gymnasium vector env needs the actions on the host; `sim.advance` of an unknown object does not say
    src = _TRAIN_STEP + """
    import gymnasium as gym

    @jax.jit
    def policy(params, obs):
        return jnp.argmax(obs @ params), jnp.max(obs @ params)

    def play(params, obs, n, make_env, sim):
        vec = gym.vector.SyncVectorEnv([make_env() for _ in range(4)])
        for t in range(n):
            action, value = policy(params, obs)
            obs, reward, term, trunc, info = vec.advance(jax.device_get(action))
        for t in range(n):
            action, value = policy(params, obs)
            sim.advance(np.asarray(action))  # expect: JAX201
    """
    assert_marked(src)


def test_jax201_records_are_not_host_consumers():
    assert_marked(_TRAIN_STEP + """
    import wandb

    def train(params, batches, history, writer):
        for step, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            wandb.log({"loss": float(metrics["loss"])})  # expect: JAX201
            history.append(np.asarray(metrics["norm"]))  # expect: JAX201
            writer.add_scalar("loss", metrics["loss"].item(), step)  # expect: JAX201
        return params
    """)


def test_jax201_params_published_to_host_actors_are_not_reported():
    assert findings(_TRAIN_STEP + """
    class Learner:
        def __init__(self):
            self._update = jax.jit(self.update)

        def update(self, params, batch):
            return params - batch, {"loss": jnp.sum(batch)}

        def run(self, params, queue, logger):
            while True:
                batch = queue.get()
                params, logs = self._update(params, batch)
                self._params_for_actor = (self.frames, jax.device_get(params))
                logs = jax.device_get(logs)
                logger.write(logs)
    """, "JAX201") == []


def test_jax201_jax202_host_paced_loops_are_not_reported():
    assert findings(_STEP + """
    import matplotlib.pyplot as plt
    import numpy as np

    def play(params, state):
        while True:
            state = step(state, params)
            if bool(state["w"][0]):
                break
            move = int(input("your move: "))

    def render_rollout(params, state, env):
        frames, done, t = [], False, 0
        while not done:
            state = step(state, params)
            done = bool(state["w"][0])
            t += 1
            if t % 3 == 0:
                frames.append(env.render(state))
        return frames

    def show(params, batches):
        for b in batches:
            out = step(params, b)
            out["w"].block_until_ready()
            print("pred", out["w"].argmax())
            plt.bar(np.arange(10), np.asarray(out["w"]))
            plt.show()
    """) == []


def test_jax201_training_loop_that_plots_now_and_then_is_still_reported():
    assert_marked(_TRAIN_STEP + """
    import matplotlib.pyplot as plt

    def train(params, batches, plot_every):
        losses = []
        for step, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            losses.append(float(metrics["loss"]))  # expect: JAX201
            if step % plot_every == 0:
                plt.plot(losses)
                plt.savefig("loss.png")
        return params
    """)


def test_jax201_messages_say_how_often_and_the_fix():
    src = _TRAIN_STEP + """
    def train(params, batches, tol):
        for batch in batches:
            params, metrics = train_step(params, batch)
            loss = float(metrics["loss"])
            print(f"{metrics['norm']}")
            if metrics["loss"] > tol:
                break
            assert jnp.isfinite(metrics["loss"])
        err = jnp.abs(params).max()
        while err > tol:
            params, metrics = train_step(params, params)
            err = metrics["norm"]
        return params
    """
    loop, inner = line_of(src, "for batch in batches"), line_of(src, "while err > tol")
    msgs = messages(src, "JAX201")
    assert msgs == [
        f"`float(metrics['loss'])` syncs with the device in every iteration of the loop on line {loop}, so the "
        "host waits for each step before it can dispatch the next; keep it on device and fetch every N steps "
        "or once after the loop",
        f"`print(...)` of a JAX value syncs with the device in every iteration of the loop on line {loop}, so the "
        "host waits for each step before it can dispatch the next; print or log every N steps, or keep the "
        "values on device and report them after the loop",
        f"`if` on the JAX value `metrics['loss'] > tol` syncs with the device in every iteration of the loop on "
        f"line {loop}, to pick a branch; test it every N steps, or branch on device with `jnp.where`/`lax.cond`",
        f"`assert` on the JAX value `jnp.isfinite(metrics['loss'])` syncs with the device in every iteration of "
        f"the loop on line {loop}, to check it; check every N steps or after the loop, or inside the step with "
        "`checkify`",
        f"`while` on the JAX value `err > tol` syncs with the device in every iteration of the loop on line "
        f"{inner}, to decide whether to go on; test it every N iterations, or run the whole loop on device with "
        "`lax.while_loop`",
    ]


def test_jax201_jax202_in_test_code_are_opt_in(tmp_path):
    src = textwrap.dedent(_STEP + """
    def run(params, batches):
        for b in batches:
            params = step(params, b)
            params["w"].block_until_ready()
            assert jnp.all(params["w"] > -1)
        return params
    """)
    test_module = tmp_path / "tests" / "test_rollout.py"
    test_module.parent.mkdir()
    test_module.write_text(src)
    got = _all(src, str(test_module))
    why = "in test code, where checks must see the values"
    assert got == [(line_of(src, "block_until_ready"), "JAX202", why), (line_of(src, "assert "), "JAX201", why)]
    # a test function in any module
    fn = src.replace("def run(", "def test_run(")
    assert [opt_in for _, _, opt_in in _all(fn)] == [why, why]
    # and an assert in a check function: opt-in too; elsewhere it is a default finding
    check = src.replace("def run(", "def check_rollout(").replace('        params["w"].block_until_ready()\n', "")
    assert _all(check) == [(line_of(check, "assert "), "JAX201",
                            "an assert in a check/verify function, which must see the values")]
    assert [opt_in for *_, opt_in in _all(src)] == [None, None]


def test_jax201_prints_in_a_notebook_loop_are_reported(tmp_path):
    # Printing every step costs the same in a notebook as in a script.
    import json as _json

    cells = [textwrap.dedent(_TRAIN_STEP), textwrap.dedent("""
    for batch in batches:
        params, metrics = train_step(params, batch)
        print(f"loss {metrics['loss']}")
        losses.append(float(metrics["loss"]))
    """)]
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None}
                    for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "demo.ipynb"
    path.write_text(_json.dumps(nb))
    assert [(code, opt_in) for _, code, opt_in in _all(path.read_text(), str(path))] == [("JAX201", None)] * 2


def test_jax202_training_loop_that_times_its_phases_is_reported():
    # Timing every step of a training loop blocks every step: a real cost, unlike a benchmark
    # that times one call on the same inputs (or returns the timing).
    assert_marked(_STEP + """
    def train(params, batches, log):
        for batch in batches:
            t0 = time.perf_counter()
            params = step(params, batch)
            jax.block_until_ready(params)  # expect: JAX202
            log(step_time=time.perf_counter() - t0)
        return params

    def fit(params, batches):
        start = time.time()
        for batch in batches:
            params = step(params, batch)
            params["w"].block_until_ready()  # expect: JAX202
        print("took", time.time() - start)
        return params
    """)


def test_jax202_a_block_proves_the_unknown_call_it_waits_for_is_jax_work():
    """``updater.update`` is an object handed in (fresh set P: a graph-network trainer timing every
    step): nothing shows its work, but only a JAX array has ``block_until_ready``, so the call that
    makes the blocked value anew every iteration dispatched JAX work and the loop is a step loop.
    A block on a value made once before the loop, made in the loop by no call, or read before the
    iteration's call rebinds it (JAX's own token sharding), proves nothing."""
    assert_marked("""
    import time

    import jax

    def train(config, updater, state, reader, log):
        for step in range(1, config.num_steps + 1):
            t0 = time.time()
            batch = next(reader)
            state, metrics = updater.update(state, batch)
            state["step"].block_until_ready()  # expect: JAX202
            log(time.time() - t0)
        return state

    def evaluate(model, weights, reader, log):
        for batch in reader:
            out = model.predict(batch)
            weights.block_until_ready()
            log(out)

    def first_rows(rows, log):
        for table in rows:
            head = table[:2]
            head.block_until_ready()
            log(head)

    def shard_tokens(xs, put, out):
        for x in xs:
            x.block_until_ready()  # the loop's own element: the call below rebinds it after the block
            x = put(x)
            out.append(x)
    """)


def test_jax201_a_log_of_what_a_hand_written_unreplicate_returns():
    """``unreplicate = lambda tree: jax.tree_util.tree_map(lambda x: x[0], tree)`` on the loss a
    pmapped step returned is still a JAX value: logging it every step syncs (fresh sets K and O:
    diffusion trainers logging to wandb). The same helper on the epoch number is a host value."""
    assert_marked("""
    import jax
    import wandb

    def main(loss_fn, params, loader, epochs):
        run = wandb.init(project="sde")
        unreplicate = lambda tree: jax.tree_util.tree_map(lambda x: x[0], tree)
        update = jax.pmap(jax.value_and_grad(loss_fn), axis_name="batch")
        for epoch in range(epochs):
            for batch in loader:
                loss, grads = update(params, batch)
                run.log({"loss": unreplicate(loss)})  # expect: JAX201
                run.log({"epoch": unreplicate([epoch])})
        return params
    """)


def test_jax201_a_metric_from_a_wrapper_object_made_by_a_set_up_function():
    """The loop's ``updater`` comes from ``init_state`` (a wrapper class whose ``update`` calls an
    inner ``@jax.jit`` method): its metrics are JAX values, and a NaN test on them every step syncs
    (fresh set P). An updater of either of two classes (an unknown one among them) proves nothing."""
    assert_marked("""
    import functools
    import jax
    import numpy as np

    class Updater:
        @functools.partial(jax.jit, static_argnums=0)
        def update(self, state, data):
            return state, {"loss": data.sum()}

    class Checkpointing:
        def __init__(self, inner: Updater):
            self._inner = inner

        def update(self, state, data):
            return self._inner.update(state, data)

    def init_state(cfg):
        return Checkpointing(Updater()), cfg

    def either(cfg, plugin):
        if cfg:
            return plugin, cfg
        return Checkpointing(Updater()), cfg

    def train(cfg, reader, n):
        updater, state = init_state(cfg)
        for step in range(n):
            state, metrics = updater.update(state, next(reader))
            if np.isnan(metrics["loss"]):  # expect: JAX201
                break
        return state

    def train_plugin(cfg, plugin, reader, n):
        updater, state = either(cfg, plugin)
        for step in range(n):
            state, metrics = updater.update(state, next(reader))
            if np.isnan(metrics["loss"]):
                break
        return state
    """)


# --------------------------------------------------------------------------- JAX203 positives


def test_jax203_builtins_on_tracers_in_jit():
    assert_marked("""
    from functools import partial

    import jax
    import jax.numpy as jnp

    @jax.jit
    def clip_grad(g, max_norm):
        norm = float(jnp.linalg.norm(g))  # expect: JAX203
        return g * jnp.minimum(1.0, max_norm / norm)

    @partial(jax.jit, static_argnums=1)
    def top_k(logits, k):
        best = int(jnp.argmax(logits))  # expect: JAX203
        return logits[best], bool(logits[best] > 0)  # expect: JAX203
    """)


def test_jax203_numpy_and_math_in_lax_bodies():
    assert_marked("""
    import math

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    def cumulative(xs):
        def body(carry, x):
            carry = carry + np.dot(x, x)  # expect: JAX203
            return carry, carry
        return lax.scan(body, 0.0, xs)

    def decay(x, steps):
        def body(i, x):
            return x * math.exp(-0.1 * i)  # expect: JAX203
        return lax.fori_loop(0, steps, body, x)

    def safe_log(x):
        return lax.cond(x > 0, lambda v: np.log(v), lambda v: jnp.zeros_like(v), x)  # expect: JAX203
    """)


def test_jax203_np_flip_indexes_its_argument_and_works_on_tracers():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def symmetric(x):
        return jnp.logaddexp(x, np.flip(x))  # NumPy 2 indexes it: `x[::-1]`, traced

    @jax.jit
    def mirrored(x):
        return x + np.fliplr(x)  # expect: JAX203
    """)


def test_jax203_item_and_tolist_under_grad_and_vmap():
    # Under grad alone .item() does not raise: it freezes `scale` as a constant, so its gradient
    # is silently dropped. Under vmap .tolist() raises a ConcretizationTypeError.
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def loss(w, x):
        scale = w.sum().item()  # expect: JAX203
        return jnp.sum((x @ w) ** 2) / scale

    def featurize(x):
        feats = x.tolist()  # expect: JAX203
        return jnp.asarray(feats)

    grad_fn = jax.grad(loss)
    batched = jax.vmap(featurize)
    """)


def test_jax203_same_module_helper_called_with_a_tracer():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def standardize(x, eps):
        return (x - x.mean()) / np.sqrt(x.var() + eps)  # expect: JAX203

    @jax.jit
    def forward(params, x):
        h = standardize(x @ params, 1e-5)
        return jnp.tanh(h)
    """)


def test_jax203_jit_wrapped_function_and_method():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def energy(x):
        return np.asarray(x).sum()  # expect: JAX203

    fast_energy = jax.jit(energy)

    class Model:
        def __init__(self):
            self.apply = jax.jit(self.forward)

        def forward(self, x):
            return jnp.tanh(x) * float(x.max())  # expect: JAX203
    """)


def test_jax203_pmap_and_while_loop():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    @jax.pmap
    def normalize_shard(x):
        return x / np.linalg.norm(x)  # expect: JAX203

    def iterate(x):
        def cond(state):
            return float(state[0]) > 1e-3  # expect: JAX203
        def body(state):
            return state[0] / 2, state[1] + 1
        return lax.while_loop(cond, body, (x, 0))
    """)


# --------------------------------------------------------------------------- JAX203 negatives


def test_jax203_static_arguments_are_not_reported():
    assert findings("""
    from functools import partial

    import jax
    import jax.numpy as jnp
    import numpy as np

    @partial(jax.jit, static_argnums=1)
    def pad_to(x, n):
        return jnp.pad(x, (0, int(n) - x.shape[0]))

    @partial(jax.jit, static_argnames=("num_heads",))
    def split_heads(x, num_heads):
        return x.reshape(x.shape[0], int(num_heads), -1) * np.float32(1.0 / np.sqrt(num_heads))
    """) == []


def test_jax203_shapes_and_dtypes_are_not_reported():
    assert findings("""
    import math

    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def attention(q, k):
        batch = int(q.shape[0])
        size = np.prod(q.shape)
        dt = np.dtype(q.dtype)
        scale = 1.0 / math.sqrt(q.shape[-1])
        scores = (q @ k.T).reshape(batch, -1) * scale
        return scores.astype(dt) / size
    """) == []


def test_jax203_numpy_metadata_functions_are_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def cast_like(x, y):
        if np.ndim(x) != len(np.shape(y)):
            raise ValueError("rank mismatch")
        dt = np.result_type(x, y)
        if np.issubdtype(dt, np.floating):
            return x.astype(dt) + y
        return x + y
    """) == []


def test_jax203_helper_only_called_with_constants_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def causal_mask(n):
        return np.tril(np.ones((n, n), dtype=bool))

    @jax.jit
    def masked_scores(q, k):
        scores = q @ k.T
        return jnp.where(causal_mask(8), scores, -jnp.inf)
    """) == []


def test_jax203_pure_callback_host_function_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def host_percentile(x):
        return np.asarray(np.percentile(np.asarray(x), 95.0), dtype=np.float32)

    @jax.jit
    def clip_outliers(x):
        p95 = jax.pure_callback(host_percentile, jax.ShapeDtypeStruct((), jnp.float32), x)
        return jnp.minimum(x, p95)
    """) == []


def test_jax203_untraced_code_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def predict(w, x):
        return jnp.tanh(x @ w)

    def evaluate(w, x, y):
        pred = predict(w, x)
        return float(np.mean(np.asarray(pred) == y)), int(jnp.argmax(pred))
    """) == []


def test_jax203_config_bound_by_partial_before_jit_is_not_reported():
    # The config and the flags functools.partial fixes before jax.jit/pmap are Python values
    # closed over; shapes and sizes built from them, and from .shape, are static.
    assert findings("""
    import functools
    import jax
    import jax.numpy as jnp
    import numpy as np

    def init_state(model, config, key):
        shape = (config.batch_size, config.max_len)
        return model.init(key, np.ones(shape, dtype=jnp.int32))

    def train_step(state, batch, config):
        n_tokens = batch.shape[-1]
        k = int(config.model.get("keep_ratio", 0.5) * n_tokens)
        return jax.lax.top_k(batch, k)

    def setup(model, config, key):
        state = jax.jit(functools.partial(init_state, model, config))(key)
        step = jax.pmap(functools.partial(train_step, config=config), axis_name="batch")
        return state, step
    """, "JAX203") == []


def test_jax203_messages_name_the_error_and_where_it_is_traced():
    from ruletools import messages

    msgs = messages("""
    import math
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def f(x):
        a = float(x.sum())
        b = np.sqrt(x)
        c = bool(x.any())
        return helper(x) + a + b + c

    def helper(y):
        return math.exp(y.mean())

    def loss(w):
        return w.sum().item() * w

    g = jax.grad(loss)
    """, "JAX203")
    assert len(msgs) == 5
    a, b, c, d, e = msgs
    assert "raises ConcretizationTypeError under jax.jit" in a
    assert "raises TracerArrayConversionError under jax.jit" in b
    assert "raises TracerBoolConversionError under jax.jit" in c
    assert "raises ConcretizationTypeError when called from `f` under jax.jit" in d
    assert "turns it into a constant, so no gradient flows through it" in e


# --------------------------------------------------------------------------- JAX204

_MATMUL_STEP = """
    import time
    import timeit

    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def step(x):
        return jnp.tanh(x @ x.T)
"""


def test_jax204_a_fetch_formatted_before_the_clock_read_in_the_same_statement_waits():
    # f-strings and arguments are evaluated left to right: `{y}` is formatted (a fetch) first
    assert findings(_MATMUL_STEP + """
    def run(x, epochs):
        for epoch in range(epochs):
            t0 = time.time()
            y = step(x)
            print(f"{epoch} {y} ({time.time() - t0:.3f} s)")
        for epoch in range(epochs):
            t0 = time.time()
            y = step(x)
            print(epoch, float(y.sum()), time.time() - t0)
    """, "JAX204") == []


def test_jax204_a_clock_read_that_starts_another_measurement_does_not_end_this_one():
    # `t_sched` starts (and `time.time() - t_sched` ends) the dispatch-only measurement; the step's own
    # time ends at `t_end`, after a block: neither read ends the measurement started at `t_step`
    assert_marked(_MATMUL_STEP + """
    def run(x, epochs):
        for epoch in range(epochs):
            t_step = time.time()
            lr = jnp.array(0.1 * epoch)
            t_sched = time.time()
            y = step(x * lr)
            sched = time.time() - t_sched  # expect: JAX204
            y.block_until_ready()
            t_end = time.time()
            print(epoch, t_end - t_step, sched)
    """)


def test_jax204_a_clock_read_assigned_and_subtracted_later_ends_the_measurement():
    assert_marked(_MATMUL_STEP + """
    def run(x, epochs):
        for epoch in range(epochs):
            t0 = time.time()
            y = step(x)
            t1 = time.time()  # expect: JAX204
            print(epoch, t1 - t0)
            y.block_until_ready()
    """)


def test_jax204_a_fetch_formatted_after_the_clock_read_does_not_wait_for_it():
    assert_marked(_MATMUL_STEP + """
    def run(x, epochs):
        for epoch in range(epochs):
            t0 = time.time()
            y = step(x)
            print(f"{epoch} ({time.time() - t0:.3f} s) {y}")  # expect: JAX201, JAX204
    """)


def test_jax204_timer_contexts_are_known_by_their_body_not_their_name():
    assert_marked(_MATMUL_STEP + """
    import contextlib
    import utils

    class Q:  # a timer by what it does: it reads a clock on entry and exit
        def __enter__(self):
            self.t0 = time.perf_counter()
        def __exit__(self, *exc):
            self.elapsed = time.perf_counter() - self.t0

    @contextlib.contextmanager
    def waits_on_exit(y):
        t0 = time.perf_counter()
        yield
        jax.block_until_ready(y)
        print(time.perf_counter() - t0)

    def run(x, y):
        with Q():  # expect: JAX204
            x = step(x)
        with utils.log_timing("step"):  # another module's context: its exit may wait
            x = step(x)
        with waits_on_exit(y):
            y = step(y)
        return x, y
    """)


def test_jax204_timing_a_jitted_function_with_an_empty_body_is_not_reported():
    # a benchmark of dispatch overhead: the compiled program has no operation to wait for
    assert findings(_MATMUL_STEP + """
    @jax.jit
    def noop(x):
        pass

    def overhead(x, n):
        t0 = time.perf_counter()
        for _ in range(n):
            noop(x)
        return (time.perf_counter() - t0) / n

    @jax.jit
    def identity(graphdef, state):
        return graphdef, state

    def split_overhead(graphdef, state, n):
        t0 = time.perf_counter()
        for _ in range(n):
            graphdef, state = identity(graphdef, state)
        return (time.perf_counter() - t0) / n
    """, "JAX204") == []
    # returning a parameter changed is work: the clock reads before it is done
    assert_marked(_MATMUL_STEP + """
    @jax.jit
    def scaled(graphdef, state):
        return graphdef, state * 2

    def work(graphdef, state, n):
        t0 = time.perf_counter()
        for _ in range(n):
            graphdef, state = scaled(graphdef, state)
        return (time.perf_counter() - t0) / n  # expect: JAX204
    """)


def test_jax204_spellings_of_an_unwaited_measurement():
    assert_marked(_MATMUL_STEP + """
    class Timer:
        def __enter__(self):
            self.t0 = time.perf_counter()
        def __exit__(self, *exc):
            self.elapsed = time.perf_counter() - self.t0

    def eager_op(a, b):
        t0 = time.perf_counter()
        c = jnp.dot(a, b)
        return c, time.perf_counter() - t0  # expect: JAX204

    def verbose_timing(x, verbose):
        t0 = time.time()
        y = step(x)
        if verbose:
            print("took", time.time() - t0)  # expect: JAX204
        return y

    def timeit_by_name(x):
        def run():
            step(x)
        return timeit.timeit(run, number=10)  # expect: JAX204

    def context(x):
        with Timer():  # expect: JAX204
            y = step(x)
        return y

    def train(x, n):
        tt = 0.0
        st = time.time()
        for _ in range(n):
            x = step(x)
            tt += time.time() - st  # expect: JAX204
            print(tt)
            st = time.time()
        return x

    def wall_clock(x, n):
        import datetime
        s = datetime.datetime.now()
        for _ in range(n):
            y = step(x)
        e = datetime.datetime.now()  # expect: JAX204
        return (e - s).total_seconds() / n
    """)


def test_jax204_message_names_the_value_and_the_fix():
    src = _MATMUL_STEP + """
    def measure(x):
        t0 = time.perf_counter()
        y, aux = step(x), None
        params, _ = step(x)
        return time.perf_counter() - t0
    """
    (msg,) = messages(src, "JAX204")
    assert f"`step(x)` (line {line_of(src, 'params, _ = step(x)')}) may still be running" in msg
    assert "measures the dispatch, not the computation" in msg
    assert "wait first with `jax.block_until_ready(params)`" in msg


def test_jax204_in_a_training_loop_says_to_time_every_n_steps():
    (msg,) = messages(_MATMUL_STEP + """
    def train(x, batches):
        for b in batches:
            t0 = time.perf_counter()
            x = step(x + b)
            dt = time.perf_counter() - t0
            print(dt)
        return x
    """, "JAX204")
    assert "time only every N steps" in msg and "JAX202" in msg


def test_jax204_waited_or_unseen_measurements_are_not_reported():
    assert findings(_MATMUL_STEP + """
    def nan_check(x):
        t0 = time.perf_counter()
        y = step(x)
        if jnp.isnan(y).any():  # bool() of a device value waits for it
            raise FloatingPointError
        return time.perf_counter() - t0

    def run_blocked(x):
        y = step(x)
        return y.block_until_ready()

    def helper_blocks(x):
        t0 = time.perf_counter()
        run_blocked(x)  # a function of this module that itself blocks
        return time.perf_counter() - t0

    def helper_unseen(x, trainer):
        t0 = time.perf_counter()
        trainer.fit(x)  # code we cannot see into: not known to be JAX work
        return time.perf_counter() - t0

    def syncs_every_few_steps(s, n, frames):
        st = time.time()
        for i in range(n):
            if i % 5 == 0:
                frames.append(np.asarray(s))  # waits for the previous steps
            s = step(s)
        return s, time.time() - st

    def host_only(batches):
        t0 = time.perf_counter()
        data = np.stack([np.asarray(b) for b in batches])
        return data, time.perf_counter() - t0

    def timestamps(x):
        started = time.time()
        y = step(x)
        finished = time.time()
        return y, started, finished

    def logged(x, log):
        t0 = time.perf_counter()
        loss = step(x)
        log.info("loss %s", loss)  # logging a device value waits for it
        return time.perf_counter() - t0

    def two_regions(x):
        t0 = time.perf_counter()
        x = jax.block_until_ready(step(x))
        t1 = time.perf_counter()
        y = np.asarray(step(x))
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1
    """, "JAX204") == []


# --------------------------------------------------------------------------- JAX205


def test_jax205_same_host_data_every_step():
    assert_marked(_TRAIN_STEP + """
    LOOKUP = np.arange(1000, dtype=np.float32)

    def train(params, n, path):
        table = np.load(path).reshape(-1, 8).astype(np.float32)
        ids = [3, 1, 4]
        for i in range(n):
            params, _ = train_step(params, jnp.asarray(table))  # expect: JAX205
            params = params + jax.device_put(LOOKUP)[i]  # expect: JAX205
            params = params + jnp.array(ids, dtype=jnp.int32).sum()  # expect: JAX205
        return params
    """)


def test_jax201_a_numpy_function_on_an_array_the_loop_updates_in_place_from_it():
    # fresh set T (hands_on_jax's Lanczos re-orthogonalisation): `np.dot(w, tau)` fetches both vectors
    # each inner step, and `w += -coef * tau` feeds the next step: a sync per step of a sequential chain
    assert_marked("""
    import numpy as np
    import jax.numpy as jnp

    def reorthogonalize(w, vecs, i):
        w, vecs = jnp.asarray(w), jnp.asarray(vecs)
        for j in range(i):
            tau = vecs[j, :]
            coef = np.dot(w, tau)  # expect: JAX201
            w += -coef * tau
        return w

    def accumulate(xs, vecs, i):
        vecs = jnp.asarray(vecs)
        total = jnp.zeros(())
        for j in range(i):
            total += vecs[j].sum()
        return float(np.dot(total, total))
    """)


def test_jax205_the_same_value_replicated_to_every_device_every_batch():
    # fresh set T (hands_on_jax's Lanczos): `replicate(v)` per batch of a Hessian-vector product, `v`
    # fixed for the whole pass: the same copy to every device each batch
    assert_marked("""
    import jax
    from flax.jax_utils import replicate

    hvp_p = jax.pmap(lambda v, batch: (v * batch).sum())

    def hvp(v, dataset):
        res = 0.0
        for batch in dataset:
            res += hvp_p(replicate(v), batch)  # expect: JAX205
        return res

    def per_step(state, dataset):
        for batch in dataset:
            state = hvp_p(replicate(state), batch)   # rebound each iteration: a new value
        return state

    def once(v, dataset):
        rv = replicate(v)
        return [hvp_p(rv, batch) for batch in dataset]
    """)


def test_jax205_draws_of_a_numpy_generator_are_host_data():
    # issue 27, small gap: a table drawn once from a NumPy Generator and uploaded every step
    assert_marked(_TRAIN_STEP + """
    TABLE = np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32)
    RNG = np.random.default_rng(1)
    NOISE = RNG.uniform(size=8)

    def train(params, n):
        for i in range(n):
            params, _ = train_step(params, jnp.asarray(TABLE))  # expect: JAX205
            params = params + jax.device_put(NOISE)[0]  # expect: JAX205
        return params

    def fresh(params, n):
        rng = np.random.default_rng(0)
        for i in range(n):
            noise = rng.normal(size=8)
            params, _ = train_step(params, jnp.asarray(noise))  # a new draw every iteration
        return params
    """)


def test_jax205_message_says_what_is_copied_and_the_fix():
    (msg,) = messages(_TRAIN_STEP + """
    def train(params, n):
        table = np.ones((10, 8))
        for i in range(n):
            params, _ = train_step(params, jnp.asarray(table))
        return params
    """, "JAX205")
    assert msg.startswith("`jnp.asarray(table)` copies the same host data to the device in every iteration")
    assert "`table = jnp.asarray(table)`" in msg


def test_jax205_per_step_data_and_device_values_are_not_reported():
    assert findings(_TRAIN_STEP + """
    def per_step(params, data, loader, n, rng, devices, stats, bs):
        buf = np.zeros(8)
        on_device = jnp.ones(8)
        host = np.ones(8)
        for i in range(n):
            params, _ = train_step(params, jnp.asarray(data[i * bs:(i + 1) * bs]))  # a new slice
            noise = rng.normal(size=8)
            params, _ = train_step(params, jnp.asarray(noise))  # rebound every iteration
            buf[i % 8] = 1.0
            params, _ = train_step(params, jnp.asarray(buf))  # changed in place every iteration
            params, _ = train_step(params, jnp.asarray(on_device))  # already a JAX array
            params, _ = train_step(params, jnp.asarray(stats))  # a parameter: kind unknown
            if i % 100 == 0:
                params, _ = train_step(params, jnp.asarray(host))  # periodic
        for x in loader:
            params, _ = train_step(params, jnp.asarray(x))  # the loop's own items
        copies = [jax.device_put(host, d) for d in devices]  # one per device, not the same copy
        return params, copies

    @jax.jit
    def traced(x):
        table = np.ones(8)
        for i in range(100):
            x = x + jnp.asarray(table)  # a constant of the program, copied once at compile time
        return x
    """, "JAX205") == []


def test_jax205_host_data_passed_straight_to_a_compiled_function_every_step():
    """Issue 39: jit copies a NumPy argument to the device at every call (a whole data set, every
    step): the same upload as an explicit `jnp.asarray` in the loop."""
    assert_marked(_TRAIN_STEP + """
    from functools import partial

    @partial(jax.jit, static_argnums=2)
    def fit(params, xs, n):
        return params + xs[:n].sum()

    def train(params, steps, path):
        xs = np.load(path)
        for i in range(steps):
            params, _ = train_step(params, xs)  # expect: JAX205
            params = fit(params, xs=xs, n=4)  # expect: JAX205
        return params
    """)


def test_jax205_near_misses_of_host_data_passed_to_compiled_functions():
    assert findings(_TRAIN_STEP + """
    from functools import partial

    SHAPE = (3, 4)

    @partial(jax.jit, static_argnums=1)
    def make(params, shape):
        return params + jnp.zeros(shape)

    def plain(params, xs):
        return params + xs.sum()

    def train(params, steps, data, loader):
        xs = np.ones((10, 8))
        on_device = jax.device_put(np.ones(8))
        embedded = []                                  # a display filled later, with device arrays
        for q in data:
            embedded.append(make(params, SHAPE))
        for i in range(steps):
            params, _ = train_step(params, embedded)
        for i in range(steps):
            params, _ = train_step(params, on_device)  # a device array
            params = plain(params, xs)  # not compiled
            params, _ = train_step(params, data)  # a parameter: kind unknown
            params = make(params, SHAPE)  # a static argument: hashed, not copied
            if i % 100 == 0:
                params, _ = train_step(params, xs)  # periodic
        for batch in loader:
            params, _ = train_step(params, np.asarray(batch))  # a new batch each iteration
        params, _ = train_step(params, xs)  # once, after the loop
        return params
    """, "JAX205") == []


def test_jax205_toy_data_and_equinox_filter_jit():
    """Fresh AU's diffusion notebook: scikit-learn's toy data (NumPy arrays), scaled and indexed with NumPy,
    passed to an `eqx.filter_jit` step every iteration: filter_jit traces NumPy arrays, so each call copies
    them (CPU probe, 8 MB: 1,313 us a call against 360 us with a device array)."""
    assert_marked("""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    from sklearn.datasets import make_moons, make_swiss_roll

    @eqx.filter_jit
    def make_step(model, x):
        return model + x.sum()

    @jax.jit
    def step(w, x, y):
        return w + x.sum() + y.sum()

    def train(model, n):
        x = make_swiss_roll(n_samples=1000, noise=0.1)[0]
        x = 0.13 * x[:, [0, 2]]
        X, y = make_moons(200)
        for i in range(n):
            model = make_step(model, x)  # expect: JAX205
            model = step(model, X, y)  # expect: JAX205, JAX205
        return model
    """)


def test_jax205_near_misses_of_toy_data_and_filter_jit():
    assert findings("""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    from sklearn.datasets import make_moons

    @eqx.filter_jit
    def make_step(model, x, sizes):
        return model + x.sum() + len(sizes)

    def train(model, n, other):
        sizes = [1, 2, 3]                         # a list of numbers: filter_jit holds it static
        x = jnp.asarray(make_moons(200)[0])        # converted once
        z = other * make_moons(200)[0]             # arithmetic with a value of unknown kind
        for i in range(n):
            model = make_step(model, x, sizes)
            model = make_step(model, z, sizes)
        return model
    """, "JAX205") == []


def test_jax205_a_numpy_argument_of_a_jitted_function_is_copied_at_every_call():
    """Under jax: a NumPy argument of a jitted function is copied to the device at every call (the
    transfer guard refuses each call), a device array passed again is not."""
    jax = pytest.importorskip("jax")
    import numpy as np

    f = jax.jit(lambda x: x + 1)
    host = np.ones(4, np.float32)
    dev = jax.device_put(host)
    f(host).block_until_ready()  # compiled once, outside the guard
    copied = []
    for arg in (host, host, dev, dev):
        try:
            with jax.transfer_guard_host_to_device("disallow"):
                f(arg).block_until_ready()
            copied.append(False)
        except Exception as e:  # "Disallowed host-to-device transfer"
            assert "host-to-device" in str(e)
            copied.append(True)
    assert copied == [True, True, False, False]


# --------------------------------------------------------------------------- JAX201: NumPy, tree maps, `not`,
# own classes and logging helpers (issue 12, gaps 2 and 5)


def test_jax201_numpy_functions_that_copy_a_jax_value():
    assert_marked(_TRAIN_STEP + """
    def train(params, batches, history):
        for batch in batches:
            params, metrics = train_step(params, batch)
            history.append(np.exp(metrics["loss"]))  # expect: JAX201
            if np.isnan(metrics["norm"]):  # expect: JAX201
                break
            stacked = np.stack([metrics["loss"], metrics["norm"]])  # expect: JAX201
        return params, stacked
    """)


def test_jax201_numpy_reduction_then_item_or_float():
    # np.sum(x) calls x.sum(): no copy yet, but reading the result on the host syncs
    assert_marked(_TRAIN_STEP + """
    def train(params, batches, history):
        for batch in batches:
            params, metrics = train_step(params, batch)
            history.append(np.sum(metrics["loss"]).item())  # expect: JAX201
            history.append(float(np.mean(metrics["norm"])))  # expect: JAX201
        return params
    """)


def test_jax201_numpy_reduction_of_a_jax_array_alone_does_not_sync():
    # np.sum / np.mean / np.argmax of one jax.Array return a jax.Array (they call its methods)
    assert findings(_TRAIN_STEP + """
    def train(params, batches, totals):
        for batch in batches:
            params, metrics = train_step(params, batch)
            loss = jnp.asarray(metrics["loss"])
            totals.append(np.sum(loss))
            totals.append(np.mean(loss))
            totals.append(np.argmax(loss))
            totals.append(np.shape(params))
        return params
    """, "JAX201") == []


def test_jax201_numpy_on_host_arrays_is_not_a_sync():
    assert findings(_TRAIN_STEP + """
    def train(params, batches, labels, stats):
        for batch in batches:
            x = np.asarray(batch)
            params, metrics = train_step(params, x)
            stats.append(np.exp(x))
            stats.append(np.sum(x).item())
            host = jax.device_get(metrics)
            stats.append(np.isnan(host["loss"]))
            np.save("ckpt.npy", params)
            stats.append(np.random.choice(4, p=np.ones(4) / 4))
        return params
    """, "JAX201") == []


def test_jax201_numpy_with_host_data_beside_the_jax_value_is_quiet():
    # the host indexes its own data with the value: it needs it there
    assert findings(_TRAIN_STEP + """
    def train(params, batches, table):
        for batch in batches:
            params, metrics = train_step(params, batch)
            idx = jnp.argmax(metrics["norm"])
            row = np.take(table, idx, axis=0)
        return params
    """, "JAX201") == []


def test_jax201_tree_map_that_fetches_each_leaf():
    assert_marked(_TRAIN_STEP + """
    def train(params, batches, history):
        for batch in batches:
            params, metrics = train_step(params, batch)
            history.append(jax.tree.map(lambda v: v.item(), metrics))  # expect: JAX201
            history.append(jax.tree_util.tree_map(float, metrics))  # expect: JAX201
            history.append(jax.tree_map(lambda v: np.asarray(v), metrics))  # expect: JAX201, JAX404
        return params
    """)


def test_jax201_tree_map_through_a_def_names_the_fetch():
    src = _TRAIN_STEP + """
    def to_host(v):
        return float(v)

    def train(params, batches, history):
        for batch in batches:
            params, metrics = train_step(params, batch)
            history.append(jax.tree.map(to_host, metrics))  # expect: JAX201
        return params
    """
    assert_marked(src)
    assert "with `float(v)` on every leaf of `metrics`" in messages(src, "JAX201")[0]


def test_jax201_tree_maps_that_stay_on_device_or_run_periodically():
    assert findings(_TRAIN_STEP + """
    def train(params, batches, history, batch_np):
        for step, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            metrics = jax.tree.map(lambda v: v.mean(), metrics)
            batch = jax.tree.map(lambda v: np.asarray(v), batch_np)
            if step % 100 == 0:
                history.append(jax.tree.map(lambda v: v.item(), metrics))
        history.append(jax.tree.map(float, metrics))
        return params
    """, "JAX201") == []


def test_jax201_not_and_boolean_operators_on_device_values():
    assert_marked(_TRAIN_STEP + """
    def train(params, batches, target, tol):
        for batch in batches:
            params, metrics = train_step(params, batch)
            if not jnp.allclose(params, target):  # expect: JAX201
                continue
            if metrics["loss"] < tol and batch is not None:  # expect: JAX201
                break
        return params

    def solve(params, batch, tol):
        done = False
        while not done:  # expect: JAX201
            params, metrics = train_step(params, batch)
            done = metrics["loss"] < tol
        return params
    """)


def test_jax201_not_and_boolean_operators_on_host_values_are_quiet():
    assert findings(_TRAIN_STEP + """
    def train(params, batches, verbose, tol):
        for step, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            if not verbose:
                continue
            if verbose and metrics["loss"] < tol:  # only when verbose: not every step
                break
            if step % 10 == 0 and metrics["loss"] < tol:
                break
        return params
    """, "JAX201") == []


def test_jax201_device_step_counter_in_a_guard_or_loop_test_syncs():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def train_step(state, batch):
        return state.apply_gradients(grads=jnp.mean(batch)), jnp.mean(batch)

    def train(state, batches, log_every, total, history):
        for batch in batches:
            state, loss = train_step(state, batch)
            if state.step % log_every == 0:  # expect: JAX201
                history.append(loss)
        while state.step < total:  # expect: JAX201
            state, loss = train_step(state, batches[0])
        return state
    """)


def test_jax201_host_step_counter_guard_is_quiet():
    assert findings("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def train_step(state, batch):
        return state.apply_gradients(grads=jnp.mean(batch)), jnp.mean(batch)

    def train(state, batches, log_every, total, history):
        step = 0
        for batch in batches:
            state, loss = train_step(state, batch)
            step += 1
            if step % log_every == 0:
                history.append(float(loss))
        return state
    """, "JAX201") == []


_TRAINER = """
    import logging

    import jax
    import jax.numpy as jnp

    class Trainer:
        def __init__(self, lr):
            self.lr = lr
            self._step = jax.jit(self._update)
            self.p_step = jax.pmap(self._update)

        def _update(self, params, batch):
            loss = jnp.mean((params - batch) ** 2)
            return params - self.lr * loss, loss

        def train_step(self, params, batch):
            return self._step(params, batch)

        def describe(self):
            return "trainer"
"""


def test_jax201_methods_of_the_projects_own_classes_return_jax_values():
    assert_marked(_TRAINER + """
    class Runner:
        def __init__(self, lr):
            self.trainer = Trainer(lr)

        def run(self, params, batches, history):
            for batch in batches:
                params, loss = self.trainer.train_step(params, batch)
                history.append(float(loss))  # expect: JAX201
            return params

    def run(params, batches, history):
        trainer = Trainer(0.1)
        for batch in batches:
            params, loss = trainer.p_step(params, batch)
            history.append(loss.item())  # expect: JAX201
        return params
    """)


def test_jax201_methods_of_own_classes_near_misses():
    assert findings(_TRAINER + """
    class Runner:
        def __init__(self, lr, other):
            self.trainer = Trainer(lr) if other is None else other

        def run(self, params, batches, history):
            for batch in batches:
                params, loss = self.trainer.train_step(params, batch)
                history.append(float(loss))  # the trainer may be another object
            return params

    def run(params, batches, history, make):
        trainer = Trainer(0.1)
        for batch in batches:
            params, loss = trainer.train_step(params, batch)
            history.append(trainer.describe())
            other = make()
            params, loss2 = other.train_step(params, batch)
            history.append(float(loss2))
        return params
    """, "JAX201") == []


def test_jax201_logging_helper_that_converts_its_argument():
    src = _TRAIN_STEP + """
    def log_metrics(step, metrics):
        for k, v in metrics.items():
            logging.info("%d %s %.3f", step, k, float(v))

    def print_loss(metrics):
        print(f"loss {metrics['loss']}")

    def train(params, batches):
        for step, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            log_metrics(step, metrics)  # expect: JAX201
            print_loss(metrics=metrics)  # expect: JAX201
        return params
    """
    assert_marked(src)
    first = messages(src, "JAX201")[0]
    assert "`log_metrics(...)`, which reads `metrics` on the host (`float(v)` on line" in first


def test_jax201_logging_helper_near_misses():
    assert findings(_TRAIN_STEP + """
    def log_scheduled(step, metrics, every):
        if step % every == 0:
            print(float(metrics["loss"]))

    def log_shapes(metrics):
        for k, v in metrics.items():
            print(k, v.shape)

    def check(metrics):
        assert metrics["loss"].ndim == 0, f"bad loss {metrics['loss']}"

    def to_float(x):
        return float(x)

    def log_host(step, metrics):
        print(step, float(metrics["loss"]))

    def train(params, batches, host_metrics):
        for step, batch in enumerate(batches):
            params, metrics = train_step(params, batch)
            log_scheduled(step, metrics, 100)
            log_shapes(metrics)
            log_host(step, host_metrics)
            if step % 50 == 0:
                log_host(step, metrics)
        return params
    """, "JAX201") == []


def test_jax201_streaming_generator_that_yields_its_state_is_quiet():
    assert findings(_TRAIN_STEP + """
    def stream(params, batch, n):
        for _ in range(n):
            if jnp.all(params > 10.0):
                break
            params, metrics = train_step(params, batch)
            yield params
    """, "JAX201") == []


def test_jax202_two_identical_loops_in_one_function_are_both_reported():
    # Issue 12: a per-step block_until_ready was said to be missed in one of two identical loops;
    # every spelling tried reports both (the loops share nothing in the model).
    assert_marked("""
    import jax

    step = jax.jit(lambda x: x * 2.0)

    def run(x, batches, n):
        for i in range(n):
            x = step(x)
            x.block_until_ready()  # expect: JAX202
        for i in range(n):
            x = step(x)
            x.block_until_ready()  # expect: JAX202
        for batch in batches:
            x = jax.block_until_ready(step(x + batch))  # expect: JAX202
        for batch in batches:
            x = jax.block_until_ready(step(x + batch))  # expect: JAX202
        return x
    """)


# -- issue 11: loops that sync only a few times in all, and evaluation loops collecting outputs


def test_jax201_quiet_in_loops_known_to_run_a_few_times_in_all():
    # A docs example: `range(100)` or a default of 20 steps nobody overrides syncs at most 100
    # times per program, less than the compile of its step costs.
    assert findings(_TRAIN_STEP + """
    def main(params, batch, steps=20):
        for step in range(steps):
            params, metrics = train_step(params, batch)
            print(f"step {step} loss {metrics['loss']}")
        return params

    def toy(params, batch):
        for step in range(100):
            params, metrics = train_step(params, batch)
            print(step, float(metrics["loss"]))
        return params

    main(0.0, 1.0)
    """, "JAX201") == []


def test_jax201_reported_where_the_step_count_can_be_large():
    assert_marked(_TRAIN_STEP + """
    import sys

    def main(params, batch, steps=20):
        for step in range(steps):
            params, metrics = train_step(params, batch)
            print(f"step {step} loss {metrics['loss']}")  # expect: JAX201
        return params

    def long(params, batch):
        for step in range(101):
            params, metrics = train_step(params, batch)
            print(step, float(metrics["loss"]))  # expect: JAX201
        return params

    def epochs(params, batch):
        for epoch in range(20):
            for step in range(20):  # 400 syncs in all
                params, metrics = train_step(params, batch)
                print(step, float(metrics["loss"]))  # expect: JAX201
        return params

    def update(params, batch):  # runs every step: its short loop repeats
        for k in range(20):
            params, metrics = train_step(params, batch)
            print(k, float(metrics["loss"]))  # expect: JAX201
        return params

    main(0.0, 1.0, steps=int(sys.argv[1]))
    """)


def test_jax205_copies_are_reported_even_in_short_loops():
    # An upload costs its size each time, not a fixed latency: a few iterations still copy it again.
    assert_marked(_TRAIN_STEP + """
    def train(params):
        table = np.random.rand(4096, 4096)
        for step in range(10 * 5):
            params, _ = train_step(params, jnp.asarray(table))  # expect: JAX205
        return params
    """)


def test_jax201_evaluation_loops_collecting_outputs_are_opt_in():
    src = _TRAIN_STEP + """
    predict = jax.jit(lambda p, x: p * x)

    def evaluate(params, batches):
        preds, total = [], 0.0
        for x in batches:
            pred = predict(params, x)
            total += float(pred.sum())
            preds.append(np.asarray(pred))
        return np.concatenate(preds), total
    """
    assert default_findings(src, "JAX201") == []
    opts = opt_in_findings(src, "JAX201")
    assert [o[0] for o in opts] == [line_of(src, "total += float"), line_of(src, "preds.append")]
    assert all("evaluation-style loop" in o[2] for o in opts)


def test_jax201_training_loops_collecting_metrics_stay_reported():
    assert_marked(_TRAIN_STEP + """
    def train(params, batches):
        history, last = [], {}
        for batch in batches:
            params, metrics = train_step(params, batch)
            history.append(np.asarray(metrics["loss"]))  # expect: JAX201
            last["norm"] = float(metrics["norm"])  # expect: JAX201
        return params, history
    """)


def test_jax202_blocks_in_a_short_loop_are_quiet_and_in_a_long_one_reported():
    assert_marked(_TRAIN_STEP + """
    import sys

    def demo(params, batch):
        for step in range(50):  # 50 blocks in all
            params, metrics = train_step(params, batch)
            params.block_until_ready()
        return params

    def train(params, batch, steps):
        for step in range(steps):
            params, metrics = train_step(params, batch)
            params.block_until_ready()  # expect: JAX202
        return params

    train(0.0, 1.0, int(sys.argv[1]))
    """)


# --------------------------------------------------------------------------- JAX206


def test_jax206_debug_print_and_callbacks_in_loop_bodies():
    assert_marked("""
    import jax
    from jax import lax
    from jax.experimental import io_callback

    def log(x):
        jax.debug.callback(print, x)  # expect: JAX206

    def simulate(x, n):
        def body(i, x):
            jax.debug.print("{i} {x}", i=i, x=x)  # expect: JAX206
            log(x)
            return x * 0.5
        return lax.fori_loop(0, n, body, x)

    def scan_it(xs):
        def step(c, x):
            io_callback(print, None, x)  # expect: JAX206
            return c + x, x
        return lax.scan(step, 0.0, xs)

    def wait(x):
        def body(x):
            jax.pure_callback(lambda v: v, x, x)  # expect: JAX206
            return x - 1
        return lax.while_loop(lambda x: x > 0, body, x)
    """)


def test_jax206_message_names_the_loop_and_the_helper():
    src = """
    import jax
    from jax import lax

    def log(x):
        jax.debug.print("{x}", x=x)

    def simulate(x, n):
        def body(i, x):
            log(x)
            return x
        return lax.fori_loop(0, n, body, x)
    """
    (msg,) = messages(src, "JAX206")
    assert "`lax.fori_loop` on line 12" in msg and "(through `log`)" in msg and "lax.cond" in msg


def test_jax206_near_misses_cond_branch_short_loop_uncalled_closure_and_outside_loops():
    assert findings("""
    import jax
    from jax import lax

    def show(x):
        jax.debug.print("{x}", x=x)

    def periodic(x, n):
        def body(i, x):
            lax.cond(i % 100 == 0, show, lambda x: None, x)
            return x
        return lax.fori_loop(0, n, body, x)

    def short(x):
        def body(i, x):
            jax.debug.print("{x}", x=x)
            return x
        return lax.fori_loop(0, 8, body, x)

    def unused(x, n):
        def body(i, x):
            def never(v):
                jax.debug.print("{v}", v=v)
            return x
        return lax.fori_loop(0, n, body, x)

    @jax.jit
    def once(x):
        jax.debug.print("{x}", x=x)
        return x
    """, "JAX206") == []


def test_jax206_opt_in_behind_a_flag_or_around_an_inner_loop():
    assert_marked("""
    import jax
    from jax import lax

    def simulate(x, n, verbose):
        def body(i, x):
            if verbose:
                jax.debug.print("{x}", x=x)  # expect: JAX206 (opt-in)
            return x
        return lax.fori_loop(0, n, body, x)

    def train(state, n, m):
        def update(state, _):
            state = lax.fori_loop(0, m, lambda i, s: s * 0.5, state)
            jax.debug.print("{s}", s=state)  # expect: JAX206 (opt-in)
            return state, None
        return lax.scan(update, state, None, length=n)
    """)


def test_jax206_functions_a_library_solver_calls_every_step():
    assert_marked("""
    import jax
    import diffrax
    import jaxopt
    import optimistix as optx
    from jax.scipy.optimize import minimize

    def vector_field(t, y, args):
        jax.debug.print("t={t}", t=t)  # expect: JAX206
        return -y

    def report(x):
        jax.debug.callback(print, x)  # expect: JAX206

    def objective(x):
        report(x)
        return (x ** 2).sum()

    def residual(y, args):
        jax.debug.print("{y}", y=y)  # expect: JAX206
        return y - 1.0

    def solve(y0):
        term = diffrax.ODETerm(vector_field)
        return diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.01, y0)

    def fit(x0):
        return minimize(objective, x0, method="BFGS")

    def root(y0):
        return optx.root_find(residual, optx.Newton(1e-5, 1e-5), y0)

    def lbfgs(x0):
        return jaxopt.LBFGS(fun=lambda x: (x ** 2).sum()).run(x0)
    """)


def test_jax206_solver_near_misses_host_loop_solvers_unknown_callees_and_branches():
    assert findings("""
    import jax
    from jax import lax
    import diffrax
    import jaxopt
    import mylib

    def objective(x):
        jax.debug.print("{x}", x=x)
        return (x ** 2).sum()

    def field(t, y, args):
        lax.cond(t > 0.5, lambda: jax.debug.print("{t}", t=t), lambda: None)
        return -y

    def run(x0):
        jaxopt.ScipyMinimize(fun=objective).run(x0)
        mylib.solve(objective, x0)
        return diffrax.ODETerm(field)
    """, "JAX206") == []


def test_jax206_solver_message_names_the_solver_call():
    src = """
    import jax
    import diffrax

    def field(t, y, args):
        jax.debug.print("{t}", t=t)
        return -y

    term = diffrax.ODETerm(field)
    """
    (msg,) = messages(src, "JAX206")
    assert "every step of the solver that `diffrax.ODETerm` on line 9 gives `field` to" in msg, msg


def test_jax201_functions_passed_in_as_parameters_by_every_caller():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def loss(params, batch):
        return jnp.mean((batch @ params) ** 2)

    step = jax.jit(lambda p, b: p - 0.1 * jax.grad(loss)(p, b))

    def train(params, loader, loss_fn, step_fn):
        total = 0.0
        for batch in loader:
            params = step_fn(params, batch)
            total += loss_fn(params, batch).item()  # expect: JAX201
        return params

    def fit(params, loader, update):
        for batch in loader:
            params = update(params, batch)
            print(float(params.sum()))  # expect: JAX201
        return params

    def main(loader):
        p = jnp.zeros(3)
        train(p, loader, loss, step)
        train(p, loader, loss_fn=jax.jit(loss), step_fn=step)
        fit(p, loader, step)
    """)


def test_jax201_parameter_callables_near_misses_host_callers_defaults_and_no_callers():
    assert findings("""
    import jax
    import jax.numpy as jnp

    def jax_loss(params, batch):
        return jnp.mean(batch @ params)

    def host_loss(params, batch):
        return 0.0

    def mixed(params, loader, loss_fn):
        for batch in loader:
            print(loss_fn(params, batch).item())

    def defaulted(params, loader, loss_fn=host_loss):
        for batch in loader:
            print(float(loss_fn(params, batch)))

    def uncalled(params, loader, loss_fn):
        for batch in loader:
            print(float(loss_fn(params, batch)))

    def main(p, loader):
        mixed(p, loader, jax_loss)
        mixed(p, loader, host_loss)
        defaulted(p, loader, jax_loss)
        defaulted(p, loader)
    """, "JAX201") == []


# --------------------------------------------------------------------------- issue 27: values through factories


def test_jax201_step_functions_from_factories_and_methods_are_compiled():
    assert_marked("""
    import jax

    def make_step(lr):
        return jax.jit(lambda s, b: s - lr * b.mean())

    def compile_train_step(lr):
        @jax.jit
        def step(s, b):
            return s - lr * b.mean()
        return step

    class Trainer:
        def get_train_step(self, lr):
            return jax.jit(lambda s, b: s - lr * b.mean())

    def main(state, batches, lr):
        a = make_step(lr)
        b = compile_train_step(lr)
        c = Trainer().get_train_step(lr)
        for batch in batches:
            state = a(state, batch)
            print(float(state))  # expect: JAX201
        for batch in batches:
            state = b(state, batch)
            print(float(state))  # expect: JAX201
        for batch in batches:
            state = c(state, batch)
            print(float(state))  # expect: JAX201

    class Runner:
        def __init__(self, lr):
            self.trainer = Trainer()
            self.p_train_step = self.trainer.get_train_step(lr)

        def run(self, state, batches):
            for batch in batches:
                state = self.p_train_step(state, batch)
                print(float(state))  # expect: JAX201
    """)


def test_jax201_a_factory_that_may_return_a_plain_function_is_not_compiled():
    assert findings("""
    import jax

    def make_step(lr, compiled):
        def step(s, b):
            return s - lr * b
        if compiled:
            return jax.jit(step)
        return step

    def main(state, batches):
        step = make_step(0.1, False)
        for batch in batches:
            state = step(state, batch)
            print(float(state))
    """, "JAX201") == []


def test_jax201_factory_of_another_module_of_the_project(tmp_path):
    from ruletools import make_project, path_default_codes

    root = make_project(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/steps.py": """
            import jax

            def make_step(lr):
                return jax.jit(lambda s, b: s - lr * b.mean())
        """,
        "pkg/train.py": """
            from .steps import make_step

            def main(state, batches):
                step = make_step(0.1)
                for batch in batches:
                    state = step(state, batch)
                    print(float(state))
        """,
    })
    # (and, opt-in, JAX803: the factory's step rebinds `state` undonated, with no optimizer update shown)
    assert path_default_codes(root / "pkg" / "train.py") == [(8, "JAX201")]


def test_jax201_an_nnx_step_made_by_another_modules_factory_carries_its_objects(tmp_path):
    """flaxdocs (fresh set U): ``create_train_step()`` of a shared module returns a nested ``@nnx.jit``
    def that updates the model and optimizer in place; the loop that calls it carries them from one
    step to the next, so ``float(loss)`` there is a per-step sync. An evaluation step of the same
    factory module updates nothing: its loop is an evaluation pass (opt-in)."""
    from ruletools import make_project, path_codes, path_default_codes

    root = make_project(tmp_path, {
        "shared/__init__.py": "",
        "shared/utils.py": """
            import jax.numpy as jnp
            from flax import nnx

            def create_train_step():
                @nnx.jit
                def train_step(model, optimizer, batch):
                    loss, grads = nnx.value_and_grad(lambda m: jnp.mean(m(batch["x"]) ** 2))(model)
                    optimizer.update(model, grads)
                    return loss
                return train_step

            def create_eval_step():
                @nnx.jit
                def eval_step(model, batch):
                    return jnp.mean(model(batch["x"]) ** 2)
                return eval_step
        """,
        "train.py": """
            from shared.utils import create_eval_step, create_train_step

            def train_epoch(model, optimizer, batches, train_step_fn):
                total = 0.0
                for batch in batches:
                    total += float(train_step_fn(model, optimizer, batch))
                return total

            def evaluate(model, batches, eval_step_fn):
                total = 0.0
                for batch in batches:
                    total += float(eval_step_fn(model, batch))
                return total

            def main(model, optimizer, batches, epochs):
                train_step = create_train_step()
                eval_step = create_eval_step()
                for epoch in range(epochs):
                    print(train_epoch(model, optimizer, batches, train_step), evaluate(model, batches, eval_step))
        """,
    })
    assert path_default_codes(root / "train.py") == [(7, "JAX201")]
    assert (13, "JAX201") in path_codes(root / "train.py")  # the evaluation pass: opt-in


def test_jax201_an_element_of_the_tuple_a_factory_returns(tmp_path):
    """``step, metrics = get_train_step(cfg)``: element 0 of the tuple every ``return`` of the
    factory gives is a compiled callable, in this module or another of the project."""
    assert_marked("""
    import jax

    def get_train_step(lr):
        train_step_fn = jax.jit(lambda s, b: s - lr * b.mean())
        return train_step_fn, {}

    def maybe_compiled(lr, compiled):
        f = lambda s, b: s - lr * b.mean()
        if compiled:
            return jax.jit(f), {}
        return f, {}

    def main(state, batches, lr):
        step, metrics = get_train_step(lr)
        for batch in batches:
            state = step(state, batch)
            print(float(state))  # expect: JAX201
        plain, metrics = maybe_compiled(lr, False)
        for batch in batches:
            state = plain(state, batch)
            print(float(state))  # one return gives a plain function: not known compiled
        metrics, step = get_train_step(lr)
        for batch in batches:
            state = step(state, batch)  # element 1 is the dict
            print(float(state))
    """)
    from ruletools import make_project, path_codes

    root = make_project(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/training.py": """
            import jax

            def get_train_step_fn(model):
                def step(state, batch):
                    return state + batch, batch.sum()
                train_step_fn = jax.jit(step, donate_argnums=(0,))
                return train_step_fn, {}
        """,
        "pkg/bench.py": """
            import time
            from .training import get_train_step_fn

            def bench(state, batch, n):
                train_step_fn, metrics = get_train_step_fn(None)
                times = []
                for i in range(n):
                    t0 = time.time()
                    state, metrics = train_step_fn(state, batch)
                    times.append(time.time() - t0)
                return times
        """,
    })
    assert path_codes(root / "pkg" / "bench.py") == [(11, "JAX204")]


def test_jax201_an_annotated_parameter_of_a_module_class_gives_its_method_results():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def _train_step(params, batch):
        loss = jnp.mean((params - batch) ** 2)
        return params - 0.1 * loss, loss

    class Model:
        def __init__(self, params):
            self.params = params

        def feedback(self, batch):
            self.params, loss = _train_step(self.params, batch)
            return loss

    def train(model: Model, batches, log):
        for batch in batches:
            cur_loss = model.feedback(batch)
            log.info("loss %f", cur_loss.item())  # expect: JAX201

    def train_unknown(model, batches, log):
        for batch in batches:
            log.info("loss %f", model.feedback(batch).item())
    """)


def test_jax201_eval_totals_and_host_processing_of_each_batch_are_not_per_step_stalls():
    src = """
    import jax
    import numpy as np

    predict = jax.jit(lambda p, b: (b.sum(), b.mean(), b))

    def evaluate(params, batches):
        ncorrect, nseen = 0, 0
        for batch in batches:
            c, n, _ = jax.device_get(predict(params, batch))  # expect: JAX201 (opt-in)
            ncorrect += c  # a total over an evaluation pass (no state carried): opt-in
            nseen += n
        return ncorrect / nseen

    def per_example(params, batches, out_dir):
        for batch in batches:
            out = jax.device_get(predict(params, batch))
            for row in out[2]:
                np.save(out_dir, row)

    def masked(params, batches, results):
        for batch in batches:
            out = jax.device_get(predict(params, batch)[2])
            mask = out > 0
            results.append(out[mask].sum())

    def to_cpu(params, batches):
        cpu = jax.devices("cpu")[0]
        total = []
        for batch in batches:
            params = predict(params, batch)[2]
            host = jax.device_put(params, jax.devices("cpu")[0])
            print(float(np.asarray(host).sum()))
        return total
    """
    assert_marked(src)


def test_jax201_a_training_loop_summing_its_loss_on_the_host_stays_reported():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    step = jax.jit(lambda p, b: (p - 0.1 * b, jnp.mean(b)))

    def train(params, batches):
        total = 0.0
        for batch in batches:
            params, loss = step(params, batch)
            total += float(loss)  # expect: JAX201
        return params, total
    """)


# --------------------------------------------------------------------------- issue 27: library loops, timing


def test_jax201_a_sync_in_train_of_a_stable_baselines3_subclass_runs_every_step():
    src = """
    import jax
    import jax.numpy as jnp
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
    from sbx import SAC

    class MySAC(OffPolicyAlgorithm):
        def __init__(self):
            self._train = jax.jit(lambda s, b: (s, {"loss": jnp.mean(b)}))

        def train(self, gradient_steps, batch_size=64):
            for _ in range(gradient_steps):
                self.state, info = self._train(self.state, self.replay_buffer.sample(batch_size))
            self.logger.record("train/loss", info["loss"].item())  # expect: JAX201

        def evaluate(self, batch):
            _, info = self._train(self.state, batch)
            return info["loss"].item()

    class Derived(MySAC):
        def train(self, gradient_steps, batch_size=64):
            self.state, info = self._train(self.state, self.replay_buffer.sample(batch_size))
            if self.num_timesteps % 1000 == 0:
                print(float(info["loss"]))
            self.logger.record("train/loss", float(info["loss"]))  # expect: JAX201

    class FromSbx(SAC):
        def train(self, gradient_steps, batch_size=64):
            state, info = self._train_fn(self.state)
            self.logger.record("train/loss", info.item())
    """
    assert_marked(src)
    assert "`OffPolicyAlgorithm`'s training loop calls at every step" in messages(src, "JAX201")[0]


def test_jax201_train_of_a_class_with_no_library_base_is_not_a_library_loop():
    assert findings("""
    import jax
    import jax.numpy as jnp

    class Trainer:
        def __init__(self):
            self._train = jax.jit(lambda s, b: (s, {"loss": jnp.mean(b)}))

        def train(self, batch):
            self.state, info = self._train(self.state, batch)
            self.logger.record("train/loss", info["loss"].item())
    """, "JAX201") == []


def test_jax204_a_helper_that_only_dispatches_and_a_queue_put_are_not_waits():
    assert_marked("""
    import queue
    import time
    import jax

    step = jax.jit(lambda p, x: p - 0.01 * x.mean())

    def render_image(params, x):
        return step(params, x)

    def render_and_show(params, x):
        out = step(params, x)
        print(float(out))
        return out

    def bench(params, x):
        t0 = time.perf_counter()
        out = render_image(params, x)
        print(time.perf_counter() - t0)  # expect: JAX204
        t0 = time.perf_counter()
        out = render_and_show(params, x)
        print(time.perf_counter() - t0)
        q = queue.Queue()
        t0 = time.perf_counter()
        q.put(step(params, x))
        print(time.perf_counter() - t0)  # expect: JAX204
        return out

    def unknown(params, x, sink):
        t0 = time.perf_counter()
        sink.put(step(params, x))
        print(time.perf_counter() - t0)

    class Agent:
        def act(self, params, x):
            return self.choose(step(params, x))

        def run_phase(self, params, x):
            return self.act(params, x)

    def phases(params, x):
        # helpers that call other code (a method that may copy the action to the host): not known
        # to leave the work running (issue 27: such helpers were judged to wait in their callees)
        agent = Agent()
        t0 = time.perf_counter()
        agent.run_phase(params, x)
        print(time.perf_counter() - t0)
    """)


def test_jax204_methods_of_library_objects_that_only_dispatch_are_work_not_waits():
    assert_marked("""
    import time
    import jax
    import optax
    import mylib
    from evosax import CMA_ES

    fitness_fn = jax.jit(lambda x: (x ** 2).sum(-1))

    class Search:
        def __init__(self):
            self.strategy = CMA_ES(popsize=16, num_dims=4)

        def generation(self, key, state, params):
            t0 = time.perf_counter()
            x, state = self.strategy.ask(key, state, params)
            state = self.strategy.tell(x, fitness_fn(x), state, params)
            return state, time.perf_counter() - t0  # expect: JAX204

    def train(params, grads_fn, batches):
        tx = optax.adam(1e-3)
        opt_state = tx.init(params)
        for batch in batches:
            t0 = time.perf_counter()
            updates, opt_state = tx.update(grads_fn(params, batch), opt_state)
            print(time.perf_counter() - t0)  # expect: JAX204
        return opt_state

    def unknown(key, state, params):
        es = mylib.ES(popsize=16)
        t0 = time.perf_counter()
        es.tell(fitness_fn(state), state)
        return time.perf_counter() - t0

    def other_method(key, state, params):
        es = CMA_ES(popsize=16, num_dims=4)
        t0 = time.perf_counter()
        es.report(fitness_fn(state), state)
        return time.perf_counter() - t0
    """)


def test_jax201_library_loggers_that_copy_their_values_to_the_host():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    import wandb
    import tensorboardX
    from flax.metrics import tensorboard

    step = jax.jit(lambda p, b: (p - 0.1 * b, jnp.mean(b)))

    def train(p, batches, logdir):
        writer = tensorboard.SummaryWriter(logdir)
        run = wandb.init(project="x")
        tbx = tensorboardX.SummaryWriter(logdir)  # converts with np.array on this thread (x2num.make_np)
        for i, b in enumerate(batches):
            p, loss = step(p, b)
            wandb.log({"loss": loss})  # expect: JAX201
            run.log({"loss": loss}, step=i)  # expect: JAX201
            writer.scalar("loss", loss, i)  # expect: JAX201
            tbx.add_scalar("train/loss", loss, i)  # expect: JAX201
        return p
    """)


def test_jax201_library_logger_near_misses_host_values_periodic_and_unknown_writers():
    assert findings("""
    import jax
    import jax.numpy as jnp
    import wandb
    from clu import metric_writers
    from torch.utils.tensorboard import SummaryWriter

    step = jax.jit(lambda p, b: (p - 0.1 * b, jnp.mean(b)))

    def train(p, batches, logdir, lr):
        writer = metric_writers.create_default_writer(logdir)
        tw = SummaryWriter(logdir)
        for i, b in enumerate(batches):
            p, loss = step(p, b)
            wandb.log({"lr": lr, "step": i})
            writer.write_scalars(i, {"loss": loss})
            tw.add_scalar("loss", loss, i)
            if i % 100 == 0:
                wandb.log({"loss": loss})
        return p
    """, "JAX201") == []


def test_jax201_library_logger_message_names_the_value():
    (msg,) = messages("""
    import jax
    import jax.numpy as jnp
    from flax.metrics import tensorboard

    step = jax.jit(lambda p, b: (p - 0.1 * b, jnp.mean(b)))

    def train(p, batches):
        writer = tensorboard.SummaryWriter("/tmp/x")
        for i, b in enumerate(batches):
            p, loss = step(p, b)
            writer.scalar("loss", loss, i)
        return p
    """, "JAX201")
    assert msg.startswith("`writer.scalar(...)` of `loss` syncs"), msg


def test_jax201_a_logger_method_of_a_module_class_that_converts_its_argument():
    src = """
    import jax
    import jax.numpy as jnp
    import numpy as np

    step = jax.jit(lambda p, b: (p - 0.1 * b, jnp.mean(b)))

    class Writer:
        def scalar(self, name, value, step):
            self.rows.append((name, np.asarray(value), step))

        def every(self, name, value, step, period):
            if step % period == 0:
                self.rows.append((name, float(value), step))

        def convert(self, value):
            return float(value)

    def train(params, batches, sink, writer: Writer):
        own = Writer()
        for i, b in enumerate(batches):
            params, loss = step(params, b)
            own.scalar("loss", loss, i)  # expect: JAX201
            writer.scalar("loss", loss, i)  # expect: JAX201
            own.every("loss", loss, i, 100)
            sink.scalar("loss", loss, i)
        return params
    """
    assert_marked(src)
    assert "which reads `loss` on the host (`np.asarray(value)` on line" in messages(src, "JAX201")[0]


def test_jax201_a_comparison_with_none_is_a_python_bool():
    # issue 37: `x != None` on a JAX array defers to None's comparison and gives a Python bool (jax
    # 0.10.2: `jnp.ones(3) != None` is `True`): no sync, unlike `x != 0`
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return x * 2

    def train(x, n):
        for i in range(n):
            x = step(x)
            if x != None:
                pass
            if x == None:
                break
            if x.sum() != 0:  # expect: JAX201
                pass
        return x
    """)


def test_jax201_the_keys_of_a_dict_of_arrays_are_python_strings():
    # issue 37: `for name in params: ... params[name]` walks the keys of a mapping; a count of
    # sizes (`.size` is metadata) formatted with the key syncs nothing, a printed subtree does, where
    # the report runs at the steps of a loop (once, it is one pass over the parts of one structure)
    src = """
    import jax

    identity = jax.jit(lambda p: p)

    def report(params):
        params = identity(params)
        for name in params:
            n = sum(x.size for x in jax.tree_util.tree_leaves(params[name]))
            print(f"{name}: {n:,} parameters")
            print(name, params[name])  # expect: JAX201

    def train(params, steps):
        for step in range(steps):
            report(params)
    """
    assert_marked(src)
    once = src.replace("        for step in range(steps):\n            report(params)", "        report(params)")
    assert once != src and findings(once, "JAX201") == []


def test_jax204_the_work_handed_straight_to_code_it_cannot_see_may_wait():
    # issue 37: `harness(post(rgb))` hands the result of the timed work to code this module cannot
    # read (an object of another module): it may fetch (MetricHarness returns floats), so the clock
    # read after it is not known to measure dispatch only; with nothing in between it is
    assert_marked("""
    import time
    import jax
    import jax.numpy as jnp

    @jax.jit
    def post(x):
        return jnp.clip(x, 0, 1)

    def evaluate(rgb, harness):
        t0 = time.time()
        metric = harness(post(rgb))
        print(f"metrics in {time.time() - t0:.3f}s")
        t1 = time.time()
        out = post(rgb)
        print(f"post in {time.time() - t1:.3f}s")  # expect: JAX204
        return metric, out
    """)


# --------------------------------------------------------------------------- JAX204: flax's pmap helpers (issue 39)


def test_jax204_unreplicate_before_the_clock_read_does_not_wait():
    assert_marked("""
    import time
    import jax
    from flax import jax_utils

    p_step = jax.pmap(lambda s: s * 2)

    def run(state, n):
        for i in range(n):
            t0 = time.perf_counter()
            state = p_step(state)
            host_state = jax_utils.unreplicate(state)
            print("step", i, time.perf_counter() - t0)  # expect: JAX204
        return host_state
    """)


def test_unreplicate_copies_nothing_to_the_host():
    """Under jax and flax: unreplicate indexes the device axis and returns a device array (a
    dispatched operation, like any eager index), where np.asarray copies to a host array. (The
    CPU backend does not guard device-to-host copies, so the transfer guard cannot show it here.)"""
    jax = pytest.importorskip("jax")
    jax_utils = pytest.importorskip("flax.jax_utils")

    x = jax.pmap(lambda v: v * 2)(jax.numpy.ones((jax.local_device_count(), 3)))
    y = jax_utils.unreplicate(x)
    assert isinstance(y, jax.Array) and y.shape == (3,)


def test_jax202_at_the_listed_profile_steps_of_a_while_loop_is_not_every_step():
    """Set I's FALSE: `steps`, re-read from the state each iteration and ordered against the bound in
    the `while` test, counts the loop; `if steps in config.profile_steps:` runs at the listed steps only.
    The per-step read of `steps` itself stays reported."""
    assert_marked("""
        import jax

        @jax.jit
        def train_step(state, batch):
            return {"steps": state["steps"] + 1, "w": state["w"] - batch}, 0.0

        def train(state, batches, config):
            steps = 0
            while steps <= config.num_train_steps:
                batch = next(batches)
                if config.profile_steps and steps in config.profile_steps:
                    jax.block_until_ready(state)
                state, loss = train_step(state, batch)
                steps = int(state["steps"])  # expect: JAX201
    """)


def test_jax201_absl_logging_formats_at_its_default_verbosity():
    """absl's `logging.info` shows (and so formats) its arguments at the default verbosity: a device
    array logged every step is copied to the host every step. Its `debug` and `vlog` format only under a
    raised verbosity (set I's catalogue: simply logs the batch with absl at every train step)."""
    assert_marked("""
        import jax
        import jax.numpy as jnp
        from absl import logging

        @jax.jit
        def train_step(params, batch):
            return params - 0.1 * jnp.mean(batch), jnp.mean(batch)

        def train(params, batches, num_steps):
            for step in range(num_steps):
                params, loss = train_step(params, next(batches))
                logging.info("loss=%s", loss)  # expect: JAX201
                logging.debug("loss=%s", loss)
            return params
    """)


def test_jax201_a_helper_method_that_converts_its_varargs_element_by_element():
    """Set H's catalogue (d2l's `Accumulator.add(self, *args)`: `[a + float(b) for a, b in
    zip(self.data, args)]`, ten notebooks): each JAX value passed is copied to the host in the
    helper. Near misses: a helper that keeps the values on device, and host numbers passed in."""
    assert_marked("""
        import jax
        import jax.numpy as jnp

        class Accumulator:
            def __init__(self, n):
                self.data = [0.0] * n

            def add(self, *args):
                self.data = [a + float(b) for a, b in zip(self.data, args)]

        class Keeper:
            def __init__(self):
                self.data = []

            def add(self, *args):
                self.data.extend(args)

        @jax.jit
        def train_step(params, x):
            return params - 0.1 * jnp.mean(x), jnp.mean(x)

        def train(params, xs, num_steps):
            metric = Accumulator(2)
            kept = Keeper()
            for step in range(num_steps):
                params, loss = train_step(params, xs)
                metric.add(loss * xs.size, xs.size)  # expect: JAX201
                kept.add(loss, xs.size)
                metric.add(float(step), 1.0)
            return params, metric.data[0] / metric.data[1], kept
    """)



def test_jax201_a_mask_grown_only_under_its_own_if_is_not_shown_to_be_a_jax_value():
    # fresh set T: `attn_mask` defaults to None and is concatenated only under `if attn_mask:`; the
    # loop-carried JAX binding exists only when a mask was given, which no call shows
    src = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return x[:, -1:] + 1

    def generate(x, attn_mask=None, max_length=64):
        while x.shape[1] < max_length:
            x = jnp.concatenate((x, step(x)), axis=1)
            if attn_mask:
                attn_mask = jnp.concatenate((attn_mask, attn_mask[:, -1:]), axis=1)
        return x

    def generate_given(x, max_length=64):
        attn_mask = jnp.ones_like(x)
        while x.shape[1] < max_length:
            x = jnp.concatenate((x, step(x)), axis=1)
            if attn_mask is not None:
                attn_mask = jnp.concatenate((attn_mask, attn_mask[:, -1:]), axis=1)
            if attn_mask.any():  # expect: JAX201
                pass
        return x
    """
    assert [line for line, code in findings(src, "JAX201")] == [line_of(src, "if attn_mask.any():")]


def test_jax201_a_pass_over_a_checkpoints_entries_is_not_a_loop_of_steps():
    # fresh set T: weights copied from a state dict key by key, each checked with an assert on the device,
    # threading the model's state through the loop: one pass over the parts of one structure
    src = """
    import jax.numpy as jnp

    def load(sd_hf, sd, update_param):
        hf_keys = [k for k in sd_hf]
        for k in hf_keys:
            value = jnp.array(sd_hf[k])
            sd = update_param(sd, k, value)
            assert jnp.sum(sd[k]) == jnp.sum(value)
        return sd

    def train(state, batches, step):
        for b in batches:
            state = step(state, batches[b])
            assert jnp.isfinite(state).all()
        return state
    """
    # the second loop walks `batches` by key too: also one pass over a structure's entries; a list of batches
    # (no reading by key) stays a loop of steps; and a pass that itself runs at the steps of a loop repeats
    assert findings(src, "JAX201") == []
    per_step = src + "\n    def fit(sd_hf, sd, update_param, steps):\n        for i in range(steps):\n" \
                     "            sd = load(sd_hf, sd, update_param)\n"
    assert [line for line, _ in findings(per_step, "JAX201")] == [line_of(per_step, "assert jnp.sum(sd[k])")]
    steps = src.replace("for b in batches:\n            state = step(state, batches[b])",
                        "for b in batches:\n            state = step(state, b)")
    assert len(findings(steps, "JAX201")) == 1



def test_jax201_reading_a_flax_nnx_optimizers_step_counter_every_step():
    # fresh set T (six MoE trainers): `while optimizer.step.value.item() < max_steps:` reads the counter the
    # jitted step advances, so the host waits for every step before dispatching the next
    src = """
    import optax
    from flax import nnx

    @nnx.jit
    def train_step(model, optimizer, batch):
        grads = nnx.grad(lambda m: (m(batch) ** 2).mean())(model)
        optimizer.update(model, grads)

    def train(model, batches, max_steps, schedule):
        optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
        while optimizer.step.value.item() < max_steps:  # expect: JAX201
            train_step(model, optimizer, next(batches))
        for i in range(max_steps):
            train_step(model, optimizer, next(batches))
            lr = schedule.step.value.item()  # an object of unknown make: not shown to be on the device
    """
    assert_marked(src)



def test_jax201_a_loop_of_flax_nnx_steps_updating_in_place_is_a_loop_of_steps():
    # fresh set U (flax NNX examples): `loss = train_step(model, optimizer, xb)` rebinds nothing, but NNX
    # carries the model and optimizer from one step to the next; `total += float(loss)` syncs every step
    # (an evaluation pass over the same batches, which carries no state, stays opt-in)
    src = """
    import optax
    from flax import nnx

    @nnx.jit
    def train_step(model, optimizer, batch):
        loss, grads = nnx.value_and_grad(lambda m: (m(batch) ** 2).mean())(model)
        optimizer.update(model, grads)
        return loss

    @nnx.jit
    def eval_step(model, batch):
        return (model(batch) ** 2).mean()

    def train(model, batches, epochs):
        optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
        for epoch in range(epochs):
            total = 0.0
            for xb in batches:
                loss = train_step(model, optimizer, xb)
                total += float(loss)  # expect: JAX201
            evaluated = 0.0
            for xb in batches:
                evaluated += float(eval_step(model, xb))  # expect: JAX201 (opt-in)
    """
    assert_marked(src)
