"""Host reads of device values that are not spelled as a conversion: a multi-host gather or
comparison (``multihost_utils.assert_equal``), and a JAX value used as a slice bound (read through
``__index__``). Model facts (jaxlint/model/facts/fetches.py) and JAX201's findings on them."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import fetches
from ruletools import assert_marked, default_findings, findings, line_of, messages


def _model(src: str):
    tree = ast.parse(textwrap.dedent(src))
    return tree, build_model(tree)


def _call(tree, attr: str) -> ast.Call:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == attr]
    assert len(found) == 1
    return found[0]


# --------------------------------------------------------------------------- model: multi-host gathers

_STEP = """
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils

    @jax.jit
    def step(state, batch):
        return state + batch, {"loss": jnp.mean(state)}
"""


def test_model_assert_equal_and_allgather_fetch_a_jax_tree():
    tree, m = _model(_STEP + """
    def train(state, batches):
        for batch in batches:
            state, info = step(state, batch)
            multihost_utils.assert_equal(info, "infos equal")
            gathered = multihost_utils.process_allgather(info)
        return state
    """)
    for attr in ("assert_equal", "process_allgather"):
        value = fetches.host_fetch(m, _call(tree, attr))
        assert isinstance(value, ast.Name) and value.id == "info", attr


def test_model_assert_equal_of_host_data_is_no_fetch():
    tree, m = _model(_STEP + """
    def train(state, batches, seed):
        for batch in batches:
            state, info = step(state, batch)
            multihost_utils.assert_equal(np.uint32(seed), "seeds equal")
        return state
    """)
    assert fetches.host_fetch(m, _call(tree, "assert_equal")) is None


def test_model_a_user_function_named_assert_equal_is_no_gather():
    # facts, not names: only JAX's own multihost_utils is known to copy its argument to the host
    tree, m = _model(_STEP + """
    class Checks:
        def assert_equal(self, tree, msg):
            pass

    def train(state, batches, checks: Checks):
        for batch in batches:
            state, info = step(state, batch)
            checks.assert_equal(info, "infos equal")
        return state
    """)
    assert fetches.host_fetch(m, _call(tree, "assert_equal")) is None


# --------------------------------------------------------------------------- model: slice bounds


def test_model_slice_bound_from_a_device_arange_is_a_host_read():
    tree, m = _model("""
    import jax.numpy as jnp

    def minibatches(idxes, size, n):
        for _ in range(3):
            parts = [idxes[start:start + size] for start in jnp.arange(0, n, size)]
            firsts = [idxes[:stop] for stop in range(0, n, size)]
        return parts, firsts
    """)
    reads = fetches.slice_bound_reads(m)
    assert [(ast.unparse(s), ast.unparse(b)) for s, b in reads] == [("idxes[start:start + size]", "start")]


def test_model_slice_bounds_of_python_ints_and_shapes_are_no_host_reads():
    tree, m = _model("""
    import jax
    import jax.numpy as jnp

    def batches(x, size):
        n = x.shape[0]
        out = []
        for i in range(0, n, size):
            out.append(x[i:i + size])
            out.append(x[:, : x.shape[1] // 2])
        return out
    """)
    assert fetches.slice_bound_reads(m) == []


def test_model_slice_bound_in_traced_code_is_not_a_host_read():
    # under jit the bound is a tracer: an error at trace time (another rule's), not a per-call sync
    tree, m = _model("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def f(x):
        out = 0.0
        for start in jnp.arange(0, 8, 2):
            out = out + x[start:start + 2].sum()
        return out
    """)
    assert fetches.slice_bound_reads(m) == []


# --------------------------------------------------------------------------- JAX201


def test_jax201_assert_equal_every_step():
    assert_marked(_STEP + """
    def train(state, batches):
        for batch in batches:
            state, info = step(state, batch)
            multihost_utils.assert_equal(info, "infos equal")  # expect: JAX201
        return state
    """)


def test_jax201_assert_equal_periodic_or_after_the_loop_is_quiet():
    src = _STEP + """
    def train(state, batches):
        for i, batch in enumerate(batches):
            state, info = step(state, batch)
            if i % 1000 == 0:
                multihost_utils.assert_equal(info, "infos equal")
        multihost_utils.assert_equal(state, "states equal")
        return state
    """
    assert findings(src, "JAX201") == []


def test_jax201_slice_bounds_from_a_device_array_every_step():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def update(state, idx):
        return state + idx.sum()

    def train(state, rng, n, size, epochs):
        idxes = jnp.arange(n)
        starts = jnp.arange(0, n, size)
        for _ in range(epochs):
            rng, sub = jax.random.split(rng)
            idxes = jax.random.permutation(sub, idxes)
            for i in range(n // size):
                part = idxes[starts[i]:starts[i] + size]  # expect: JAX201
                state = update(state, part)
        return state
    """)


_EPOCH_SLICES = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def update(state, idx):
        return state + idx.sum()

    def train(state, rng, n, size, epochs):
        idxes = jnp.arange(n)
        for _ in range(epochs):
            rng, sub = jax.random.split(rng)
            idxes = jax.random.permutation(sub, idxes)
            parts = [idxes[start:start + size] for start in {starts}]
            for part in parts:
                state = update(state, part)
        return state
"""


@pytest.mark.parametrize("starts", ["range(0, n, size)", "jnp.arange(0, n, size)"])
def test_jax201_slice_bounds_read_in_a_comprehension_before_the_steps_are_not_per_step(starts):
    # host integers copy nothing; the elements of one device array are read once per epoch, before the epoch's
    # steps (the policy's HARMLESS class; fresh B's gymnax-blines, judged so, is the case)
    assert default_findings(_EPOCH_SLICES.replace("{starts}", starts), "JAX201") == []


def test_jax201_slice_bound_message_names_the_bound_and_fix():
    src = """
    import jax.numpy as jnp

    def chunks(x, n, size, epochs):
        out = []
        for _ in range(epochs):
            out += [x[s:s + size] for s in jnp.arange(0, n, size)]
        return out
    """
    from ruletools import messages
    (msg,) = messages(src, "JAX201")
    assert "slice bound `s`" in msg and "dynamic_slice" in msg


# --------------------------------------------------------------------------- model: fields of record copies

_BUFFER = """
    import dataclasses
    import jax
    import jax.numpy as jnp
    import flashbax as fbx

    def can_sample(state):
        return state.count > 8

    buffer = fbx.make_flat_buffer(max_length=100, min_length=8, sample_batch_size=8)
"""


def _attr_call(tree, spelled: str) -> ast.Call:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == spelled
             and n.lineno > 12]
    assert len(found) == 1, spelled
    return found[0]


def test_model_a_field_given_a_jit_by_keyword_copy_is_compiled():
    from jaxlint.model.facts import callables
    for copy in ("buffer.replace(add=jax.jit(buffer.add), can_sample=jax.jit(buffer.can_sample))",
                 "buffer._replace(can_sample=jax.jit(can_sample))",
                 "dataclasses.replace(buffer, can_sample=jax.jit(can_sample))"):
        tree, m = _model(_BUFFER + f"""
    buffer = {copy}
    buffer = buffer.replace(init=jax.jit(buffer.init))

    def run(state):
        if buffer.can_sample(state):
            return 1
    """)
        call = _attr_call(tree, "buffer.can_sample")
        assert callables.callable_info(m, call.func, m.scope_at(call)) is not None, copy


def test_model_a_field_the_copies_did_not_give_is_not_compiled():
    from jaxlint.model.facts import callables
    for copy in ("buffer.replace(add=jax.jit(buffer.add))",       # another field given
                 "buffer.replace(can_sample=can_sample)",         # given, but not compiled
                 "buffer.replace(**fields)",                       # unknown fields
                 "fbx.make_flat_buffer(max_length=10)"):           # no copy at all
        tree, m = _model(_BUFFER + f"""
    fields = {{}}
    buffer = {copy}

    def run(state):
        if buffer.can_sample(state):
            return 1
    """)
        call = _attr_call(tree, "buffer.can_sample")
        assert callables.callable_info(m, call.func, m.scope_at(call)) is None, copy


def test_model_a_string_replace_is_no_record_copy():
    from jaxlint.model.facts import callables
    tree, m = _model("""
    import jax
    text = "a-b"
    text = text.replace("-", "_")

    def run():
        return text.upper()
    """)
    call = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "text.upper"][0]
    assert callables.callable_info(m, call.func, m.scope_at(call)) is None


# --------------------------------------------------------------------------- model: a test gating scheduled steps

_DQN = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def update(q_state, buffer_state, key):
        return q_state + buffer_state.sum(), q_state.sum()

    @jax.jit
    def add(buffer_state, x):
        return buffer_state.at[0].set(x)

    @jax.jit
    def can_sample(buffer_state):
        return buffer_state.sum() > 8

    @jax.jit
    def act(q_state, obs):
        return jnp.argmax(q_state * obs)
"""


def _gate_role(src: str, spelled: str = "can_sample(buffer_state)"):
    from jaxlint.model.policy import roles
    tree, m = _model(src)
    gate = [n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test) == spelled][0]
    return roles.sync_role(m, m.context(gate.test), gate=gate), roles.sync_role(m, m.context(gate.test))


def test_model_a_test_that_gates_the_scheduled_step_runs_before_every_step():
    gated, plain = _gate_role(_DQN + """
    def train(q_state, buffer_state, obs, key, steps, train_every):
        for step in range(steps):
            actions = act(q_state, obs)
            buffer_state = add(buffer_state, actions)
            if step % train_every == 0:
                if can_sample(buffer_state):
                    q_state, loss = update(q_state, buffer_state, key)
        return q_state
    """)
    assert plain.kind == "periodic"
    assert gated.kind == "per-step" and gated.schedule is not None
    assert any("schedules the steps themselves" in e and "`update`" in e for e in gated.evidence)


def test_model_a_gate_of_extra_work_under_a_periodic_guard_stays_periodic():
    # the state is also updated at every iteration outside the guard: the guard runs extra work now
    # and then (a reset, an evaluation), and its gate runs only then
    gated, _ = _gate_role(_DQN + """
    def train(q_state, buffer_state, obs, key, steps, every):
        for step in range(steps):
            q_state, loss = update(q_state, buffer_state, key)
            if step % every == 0:
                if can_sample(buffer_state):
                    q_state, loss = update(q_state, buffer_state, key)
        return q_state
    """)
    assert gated.kind == "periodic"


def test_model_a_gate_of_no_carried_state_stays_periodic():
    gated, _ = _gate_role(_DQN + """
    def train(q_state, buffer_state, obs, key, steps, every):
        for step in range(steps):
            q_state, loss = update(q_state, buffer_state, key)
            if step % every == 0:
                if can_sample(buffer_state):
                    report = act(q_state, obs)
        return q_state
    """)
    assert gated.kind == "periodic"


# --------------------------------------------------------------------------- JAX201 on both


def test_jax201_gate_of_a_jitted_field_of_a_replaced_buffer():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    import flashbax as fbx

    @jax.jit
    def update(q_state, batch):
        return q_state + batch.sum(), q_state.sum()

    @jax.jit
    def act(q_state, obs):
        return jnp.argmax(q_state * obs)

    def train(q_state, obs, steps, train_every, key):
        buffer = fbx.make_flat_buffer(max_length=1000, min_length=64, sample_batch_size=64)
        buffer = buffer.replace(add=jax.jit(buffer.add, donate_argnums=0), can_sample=jax.jit(buffer.can_sample),
                                sample=jax.jit(buffer.sample))
        buffer_state = buffer.init(obs)
        for step in range(steps):
            actions = act(q_state, obs)
            buffer_state = buffer.add(buffer_state, actions)
            if step % train_every == 0:
                if buffer.can_sample(buffer_state):  # expect: JAX201
                    key, sub = jax.random.split(key)
                    batch = buffer.sample(buffer_state, sub)
                    q_state, loss = update(q_state, batch)
                print(f"loss {loss}")
        return q_state
    """)


def test_jax201_gate_message_names_the_schedule():
    src = _DQN + """
    def train(q_state, buffer_state, obs, key, steps, train_every):
        for step in range(steps):
            buffer_state = add(buffer_state, act(q_state, obs))
            if step % train_every == 0:
                if can_sample(buffer_state):
                    q_state, loss = update(q_state, buffer_state, key)
        return q_state
    """
    from ruletools import messages
    (msg,) = messages(src, "JAX201")
    assert "before every step that the `if step % train_every == 0`" in msg


# --------------------------------------------------------------------------- the truth of a returned container

_METRICS = """
    import functools
    import jax
    import jax.numpy as jnp

    class Trainer:
        @functools.partial(jax.pmap, axis_name="d")
        def one_step(self, state, batch):
            loss = jnp.mean((state - batch) ** 2)
            metrics = {"loss": loss}
            metrics = {**metrics, "max": jnp.max(state)}
            return state - 0.1 * batch, metrics

        @functools.partial(jax.pmap, axis_name="d")
        def one_loss(self, state, batch):
            return state - 0.1 * batch, jnp.mean((state - batch) ** 2)

        def train(self, state, batches):
            kept = []
            for batch in batches:
                state, metrics = self.one_step(state, batch)
                if metrics:
                    kept.append(metrics)
                state, loss = self.one_loss(state, batch)
                if loss:  # expect: JAX201
                    kept.append(loss)
            return state, kept
"""


def test_model_a_container_a_compiled_function_returns_is_a_container_not_a_device_value():
    tree, m = _model(_METRICS)
    tests = [n.test for n in ast.walk(tree) if isinstance(n, ast.If)]
    by_name = {t.id: t for t in tests if isinstance(t, ast.Name)}
    scope = m.scope_at(by_name["metrics"])
    assert fetches.container_result(m, by_name["metrics"], scope)
    assert fetches.bool_sync(m, by_name["metrics"], scope) is None
    assert not fetches.container_result(m, by_name["loss"], scope)
    assert fetches.bool_sync(m, by_name["loss"], scope) is by_name["loss"]


def test_the_if_on_a_returned_dict_is_no_sync_the_if_on_a_returned_array_is():
    assert_marked(_METRICS)


# --------------------------------------------------------------------------- data-dependent shapes computed eagerly

_SHAPES = """
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def step(state, batch):
        return state + batch, jnp.argmax(state + batch, axis=-1)

    def train(state, loader, n):
        for i in range(n):
            state, codes = step(state, next(loader))
            used = jnp.unique(codes).size  # expect: JAX201
            hits = jnp.nonzero(codes)[0]  # expect: JAX201
            picked = state[codes > 3]  # expect: JAX201
            where = jnp.where(codes > 3)  # expect: JAX201
        return state, used, hits, picked, where
"""


def test_model_shape_reads_are_data_dependent_shapes_outside_jit():
    tree, m = _model(_SHAPES)
    assert [ast.unparse(n) for n, _ in fetches.shape_reads(m)] == [
        "jnp.unique(codes)", "jnp.nonzero(codes)", "state[codes > 3]", "jnp.where(codes > 3)"]


def test_jax201_data_dependent_shapes_computed_eagerly_every_step():
    assert_marked(_SHAPES)
    msg = messages(_SHAPES, "JAX201")[0]
    assert msg.startswith("`jnp.unique(codes)`, whose result's shape depends on the values of the JAX array `codes`")
    assert "give the operation a static `size=`" in msg


@pytest.mark.parametrize("change", [
    ("jnp.unique(codes).size  # expect: JAX201", "jnp.unique(codes, size=8).size"),  # a static size
    ("jnp.nonzero(codes)[0]  # expect: JAX201", "jnp.nonzero(codes, size=4, fill_value=0)[0]"),
    ("state[codes > 3]  # expect: JAX201", "state.at[codes > 3].set(0)"),  # a scatter: the shape is state's
    ("jnp.where(codes > 3)  # expect: JAX201", "jnp.where(codes > 3, state, 0)"),  # three arguments
    ("jnp.unique(codes).size  # expect: JAX201", "np.unique(np.arange(3)).size"),  # host data
])
def test_jax201_near_misses_of_data_dependent_shapes(change):
    src = _SHAPES.replace(*change)
    assert src != _SHAPES
    got = sorted(line for line, code in default_findings(src) if code == "JAX201")
    assert len(got) == 3


def test_jax201_data_dependent_shapes_inside_the_jitted_step_are_jax301s():
    src = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(state, batch):
        return state + batch, jnp.unique(batch).size

    def train(state, loader, n):
        for i in range(n):
            state, used = step(state, next(loader))
        return state
    """
    assert default_findings(src, "JAX201") == []


# --------------------------------------------------------------------------- library loggers made in a with statement

_TQDM = """
    import jax
    import jax.numpy as jnp
    import wandb
    from tqdm import tqdm

    @jax.jit
    def step(params, batch):
        loss = jnp.mean((params - batch) ** 2)
        return params - 0.1 * loss, loss

    def train(params, batches, n):
        with wandb.init(project="p") as run, tqdm(total=n) as bar:
            for i in range(n):
                params, loss = step(params, next(batches))
                bar.set_postfix(loss=loss)  # expect: JAX201
                run.log({"loss": loss})  # expect: JAX201
                bar.set_postfix(step=i)
        return params
"""


def test_jax201_tqdm_postfix_and_a_wandb_run_bound_by_with():
    assert_marked(_TQDM)
    assert "`bar.set_postfix(...)` of `loss`" in messages(_TQDM, "JAX201")[0]


def test_jax201_a_set_postfix_of_an_object_not_known_to_format_is_quiet():
    src = _TQDM.replace("tqdm(total=n) as bar", "open('log') as bar").replace(
        "                bar.set_postfix(loss=loss)  # expect: JAX201\n", "                bar.set_postfix(loss=loss)\n")
    assert [line for line, code in default_findings(src) if code == "JAX201"] == [line_of(src, "run.log")]


# --------------------------------------------------------------------------- a branch that leaves the loop


def test_jax201_a_sync_in_a_branch_that_leaves_the_loop_runs_once():
    # fresh set O: ``if change < tol: print(...); break`` in a solver loop
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return x * 0.5, jnp.sum(x)

    def solve(x, tol, n):
        for i in range(n):
            x, err = step(x)
            if err < tol:  # expect: JAX201
                print("converged", float(err))
                break
            print(float(err))  # expect: JAX201
        return x
    """)


@pytest.mark.parametrize("leave", ["break", "return x", "raise StopIteration"])
def test_model_a_branch_that_leaves_the_loop(leave):
    from jaxlint.model.policy import roles

    tree, m = _model(f"""
    import jax
    step = jax.jit(lambda x: (x, x.sum()))

    def solve(x, n):
        for i in range(n):
            x, err = step(x)
            if err < 1e-3:
                print(float(err))
                {leave}
            else:
                print(float(err))
            for j in range(3):
                if j == 1:
                    print(float(err))
                    break
        return x
    """)
    prints = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "float"),
                    key=lambda n: n.lineno)
    kinds = [roles.sync_role(m, m.context(p)).kind for p in prints]
    assert kinds[0] == roles.LEAVES and kinds[1] == roles.PER_STEP
    assert kinds[2] != roles.LEAVES  # the break leaves the inner loop only


def test_jax201_an_end_token_check_of_host_driven_decoding_is_inherent_but_a_nan_guard_is_not():
    """Reviewers judged the per-token end check of a host-driven decode loop inherent (HARMLESS on five
    sets: the host needs each token to know whether to stop); a NaN or threshold test that breaks out
    of a training loop can run every N steps (TRUE on fresh sets A and L): still reported."""
    from ruletools import findings, line_of
    src = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def decode_step(params, tokens):
        return jnp.argmax(params @ tokens[-1])

    @jax.jit
    def train_step(params, batch):
        return params - 0.1 * batch.mean(), jnp.sum(params)

    def greedy(params, tokens, eos, stop_ids, steps):
        out = []
        for _ in range(steps):
            pred = decode_step(params, tokens).item()
            if pred == eos:
                break
            out.append(pred)
        for _ in range(steps):
            nxt = decode_step(params, tokens)
            if int(nxt) in stop_ids:
                return out
            tokens = jnp.concatenate([tokens, nxt[None]])
        return out

    def train(params, batches):
        for batch in batches:
            params, loss = train_step(params, batch)
            if jnp.isnan(loss):  # NAN
                break
        return params
    """
    assert findings(src, "JAX201") == [(line_of(src, "# NAN"), "JAX201")]


def test_jax201_a_value_made_on_first_use_in_the_loop_runs_once():
    """Fresh set W (JAxtar's evaluation runner) and set I (indaba): ``if x is None: x = ...`` in a loop
    runs once per run of the loop (judged FALSE and HARMLESS when reported); one the loop sets back
    to None runs again."""
    from ruletools import findings, line_of
    src = """
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def step(x):
        return x * 2, jnp.sum(x)

    def run(x, batches, table):
        table = np.asarray(table)  # host data
        first = None
        cached = None
        for b in batches:
            x, loss = step(x)
            if first is None:
                first = loss.item()
            if cached is None and b:
                cached = np.asarray(jnp.asarray(table) * 2)
        return first, cached

    def rerun(x, batches):
        last = None
        for b in batches:
            x, loss = step(x)
            if last is None:
                last = float(loss)  # AGAIN
            last = None
        return x
    """
    assert findings(src, "JAX201") == [(line_of(src, "# AGAIN"), "JAX201")]
    assert findings(src, "JAX205") == []  # `jnp.asarray(table)` under the first-use guard: once
    assert findings(src.replace("if cached is None and b:", "if b:"), "JAX205") != []  # every iteration
