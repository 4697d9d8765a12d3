"""Model fact: a compiled step's rebound arguments are a model's training state when its body applies
an optimizer update or a gradient step to one of them (jaxlint/model/facts/trainingstate.py)."""

from __future__ import annotations

import ast

import pytest

import jaxlint_rules
from jaxlint.engine import check_path
from jaxlint.model.facts import donation
from test_model import build

HEAD = """
import functools
import jax
import jax.numpy as jnp
import optax
from optax import apply_updates as au

tx = optax.sgd(0.1)

def loss(p, b):
    return jnp.sum(p * b)
"""

CASES = {
    # a flax TrainState: apply_gradients on the argument
    "train_state": ("""
@jax.jit
def step(state, batch):
    grads = jax.grad(loss)(state.params, batch)
    return state.apply_gradients(grads=grads)
""", "state = step(state, b)", "proven"),
    # optax.apply_updates on a name computed from the argument, imported under another name
    "apply_updates_alias": ("""
@jax.jit
def step(params, batch):
    p = params
    updates = jax.tree.map(jnp.negative, batch)
    return au(p, updates)
""", "params = step(params, b)", "proven"),
    # an optimizer's update(grads, opt_state): the second argument is optimizer state
    "opt_state_update": ("""
@jax.jit
def step(opt_state, params, batch):
    fn = jax.value_and_grad(loss)
    value, grads = fn(params, batch)
    updates, opt_state = tx.update(grads, opt_state)
    return opt_state, value
""", "opt_state, value = step(opt_state, params, b)", "proven"),
    # a hand-written gradient step with a tree map
    "tree_map_sgd": ("""
@jax.jit
def step(params, batch):
    grads = jax.grad(loss)(params, batch)
    grads = jax.lax.pmean(grads, "i")
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
""", "params = step(params, b)", "proven"),
    # the step jitted by a call: jax.pmap(f)
    "pmap_of_def": ("""
def _step(params, batch):
    grads = jax.grad(loss)(params, batch)
    return optax.apply_updates(params, grads)
step = jax.pmap(_step, axis_name="i")
""", "params = step(params, b)", "proven"),
    # a partial binds the first parameter: the call's first argument is the state
    "pmap_of_partial": ("""
def _step(apply_fn, state, batch):
    grads = jax.grad(lambda p: apply_fn(p, batch).sum())(state.params)
    return state.apply_gradients(grads=grads)
step = jax.pmap(functools.partial(_step, None), axis_name="i")
""", "state = step(state, b)", "proven"),
    # a call of the project's own optimizer, given the parameters and their gradient, in a lax.cond
    # that skips non-finite steps: its result rebinds the parameters (fresh AA's course)
    "own_optimizer_in_cond": ("""
def make_step(optimizer):
    @jax.jit
    def step(params, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        def do_update(args):
            p, s, g = args
            return optimizer(p, g, s)
        def skip(args):
            return args[0], args[1]
        params, opt_state = jax.lax.cond(jnp.isfinite(value), do_update, skip, (params, opt_state, grads))
        return params, opt_state, value
    return step
step = make_step(None)
""", "params, opt_state, value = step(params, opt_state, b)", "proven"),
    # near misses: a call given the parameters and a gradient whose result is not the parameters
    "grad_norm_only": ("""
@jax.jit
def step(params, scale, batch):
    grads = jax.grad(loss)(params, batch)
    norm = optax.global_norm((params, grads))
    return params, scale * norm
""", "params, scale = step(params, scale, b)", "unknown"),
    # near misses: a key and noise rebound, no update
    "key_only": ("""
@jax.jit
def step(key, x):
    key, sub = jax.random.split(key)
    return key, x + jax.random.normal(sub, x.shape)
""", "key, x = step(key, x)", "unknown"),
    # the update is applied to a global, not to the rebound argument (a counter)
    "update_of_other": ("""
PARAMS = jnp.ones(3)
@jax.jit
def step(count, batch):
    grads = jax.grad(loss)(PARAMS, batch)
    return count + 1, optax.apply_updates(PARAMS, grads)
""", "count, new = step(count, b)", "unknown"),
    # an `update` method whose first argument is no gradient (a dict's, a buffer's)
    "update_not_optimizer": ("""
@jax.jit
def step(buf, batch):
    stats = {}
    stats.update(batch, buf)
    return buf + 1
""", "buf = step(buf, b)", "unknown"),
    # a tree map of the argument with no gradient among its trees
    "tree_map_no_grad": ("""
@jax.jit
def step(params, batch):
    return jax.tree.map(lambda p, q: p + q, params, batch)
""", "params = step(params, b)", "unknown"),
    # the step is a lambda, not a def: what it does is not read
    "lambda": ("""
step = jax.jit(lambda s, b: s - b)
""", "s = step(s, b)", "unknown"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_training_state_fact(case):
    body, assign, status = CASES[case]
    names = assign.split(" = ")[1].split("(")[1].rstrip(")").replace(" ", "")
    src = HEAD + body + f"\ndef train({names}, batches):\n    for b in batches:\n        {assign}\n"
    _, m = build(src)
    [r] = donation.rebinding_without_donation(m)
    from jaxlint.model.facts import trainingstate

    fact = trainingstate.training_state(m, r.call, r.wrap, r.positions, r.keywords)
    assert fact.name == "training-state"
    assert fact.status == status, fact.why
    if status == "proven":
        assert "optimizer update" in fact.why


STEP = """
import jax
import optax

@jax.jit
def step(params, batch):
    grads = jax.grad(lambda p: (p * batch).sum())(params)
    return optax.apply_updates(params, grads)
"""

UNREAD = {
    "plain": ("""
def train(params, batches):
    for b in batches:
        params = step(params, b)
    return params
""", "proven"),
    # another name keeps an older step's output (when the loss improved): the next step deletes it
    "alias": ("""
def train(params, batches):
    best = None
    for b in batches:
        params = step(params, b)
        if b.sum() > 0:
            best = params
    return best
""", "unknown"),
    # bound anew after every step and read after the loop: the last step's value, never donated
    "alias_every_step": ("""
def train(params, batches):
    for b in batches:
        params = step(params, b)
        last = params
    return last
""", "proven"),
    # stored on an object after the loop: the last value, never donated
    "stored_after": ("""
class Trainer:
    def fit(self, params, batches):
        for b in batches:
            params = step(params, b)
        self.params = params
""", "proven"),
    # a checkpoint's copy taken by a tuple assignment in an outer loop and read at once, before the
    # inner step loop donates again (pgx's AlphaZero)
    "tuple_copy_before_inner_loop": ("""
def train(params, opt, epochs, batches, save):
    for e in range(epochs):
        p0, o0 = jax.tree_util.tree_map(lambda x: x[0], (params, opt))
        save(p0, o0)
        for b in batches:
            params = step(params, b)
    return params
""", "proven"),
    # read in the next iteration before it is bound again, after the step donated it
    "alias_read_next_iteration": ("""
def train(params, batches):
    last = params
    for b in batches:
        params = step(params, b)
        print(last)
        last = params
    return last
""", "unknown"),
    # a checkpoint's copy taken now and then in the loop, and a new copy taken after the loop before the
    # read there (bart-base-jax): the read after the loop sees the new binding, not the loop's alias
    "alias_rebound_after_the_loop": ("""
def train(params, batches, every, save):
    for i, b in enumerate(batches):
        params = step(params, b)
        if i % every == 0:
            host = jax.tree_util.tree_map(lambda x: x[0], params)
            save(host)
    host = jax.tree_util.tree_map(lambda x: x[0], params)
    save(host)
    return params
""", "proven"),
    "chained": ("""
def train(init, batches):
    params = average = init()
    for b in batches:
        params = step(params, b)
    return average
""", "unknown"),
    "kept_in_a_list": ("""
def train(params, batches):
    history = []
    for b in batches:
        params = step(params, b)
        history.append(params)
    return history
""", "unknown"),
    # a value computed from it handed to another thread (cleanba: the learner's params for the actors)
    "queued_copy": ("""
def train(params, batches, queue):
    for b in batches:
        params = step(params, b)
        queue.put(jax.device_put(params["w"], None))
    return params
""", "unknown"),
    # a value computed from it (new arrays) kept in a list: nothing shares the donated buffers
    "computed_kept": ("""
def train(params, batches):
    losses = []
    for b in batches:
        params = step(params, b)
        losses.append(jax.numpy.sum(params["w"] * b))
    return losses
""", "proven"),
    # the same arrays twice in the state: donating it fails ("donate the same buffer twice")
    "same_arrays_twice": ("""
def train(init, batches, State):
    p = init()
    params = State(p, p)
    for b in batches:
        params = step(params, b)
    return params
""", "unknown"),
    # an evaluation call of the same step that does not rebind its argument
    "other_call": ("""
def train(params, batches, val):
    for b in batches:
        params = step(params, b)
    return step(params, val)
""", "unknown"),
    # the loop's function is called twice with the same value by a caller of the module
    "caller_reads": ("""
def train(params, batches):
    for b in batches:
        params = step(params, b)
    return params

def main(params, batches):
    a = train(params, batches)
    b = train(params, batches)
    return a, b
""", "unknown"),
    "caller_rebinds": ("""
def train(params, batches):
    for b in batches:
        params = step(params, b)
    return params

def main(params, batches):
    params = train(params, batches)
    params = train(params, batches)
    return params
""", "proven"),
}


# the same without the new copy: after the loop it reads an older step's value, which a call donated
UNREAD["alias_read_after_the_loop"] = (UNREAD["alias_rebound_after_the_loop"][0].replace(
    "    host = jax.tree_util.tree_map(lambda x: x[0], params)\n    save(host)\n    return", "    save(host)\n    return"),
    "unknown")


# fresh set W (RIQL): the best epoch's parameters kept after the step loop, inside the epoch loop, and
# read after it: the next epoch's calls would donate them
UNREAD["alias_per_epoch_read_after_the_epochs"] = ("""
def train(params, epochs, batches, val):
    best, best_params = 1e9, None
    for epoch in range(epochs):
        for b in batches:
            params = step(params, b)
        if (params * val).sum() < best:
            best = (params * val).sum()
            best_params = params
    return (best_params * val).sum()
""", "unknown")
# a checkpoint's copy made per epoch and read at once (saved) is never read after a later call
UNREAD["copy_per_epoch_read_at_once"] = ("""
def train(params, epochs, batches, save):
    for epoch in range(epochs):
        for b in batches:
            params = step(params, b)
        if epoch % 10 == 0:
            host = jax.device_get(params)
            save(host)
    return params
""", "proven")

# a target network given the step's parameters by a struct's `replace` now and then, and passed to the same
# step (fresh set AX's DQN notebooks): the next call would donate buffers the target also passes
UNREAD["target_replaced_from_the_state"] = ("""
def train(params, target, batches):
    for i, b in enumerate(batches):
        params = step(params, b + target.params.sum())
        if i % 100 == 0:
            target = target.replace(params=params)
    return params
""", "unknown")
# `replace` given a value computed from the state (a new array) keeps nothing of it
UNREAD["target_replaced_from_a_computation"] = ("""
def train(params, target, batches):
    for i, b in enumerate(batches):
        params = step(params, b + target.params.sum())
        if i % 100 == 0:
            target = target.replace(params=params * 0.5)
    return params
""", "proven")


@pytest.mark.parametrize("case", sorted(UNREAD))
def test_old_values_unread_fact(case):
    body, status = UNREAD[case]
    _, m = build(STEP + body)
    rs = [r for r in donation.rebinding_without_donation(m)]
    assert rs
    fact = donation.old_values_unread(m, rs[0])
    assert fact.name == "old-unread"
    assert fact.status == status, fact.why


HELPER = """
import jax
import jax.numpy as jnp

def update_weights(weights, grads, state, lr):
    def one(p, g, s):
        return p - lr * g, s
    updated = jax.tree_map(one, weights, grads, state)
    return jax.tree.map(lambda _, u: u[0], weights, updated), jax.tree.map(lambda _, u: u[1], weights, updated)

def loss(w, x):
    return jnp.sum(w * x)

def update_step(weights, x, opt_state, lr):
    value, grads = jax.value_and_grad(loss)(weights, x)
    weights, opt_state = update_weights(weights, grads, opt_state, lr)
    return value, weights, opt_state

def evaluate(weights, x, counter):
    return loss(weights, x), counter + 1
"""


def test_an_update_made_by_a_helper_the_step_hands_the_gradient():
    """``weights, opt = update_weights(weights, grads, opt)``: the helper's tree map of the gradient
    updates the state (fresh set M's minformer); the gradient is not state, and state computed by
    the helper is not a gradient."""
    from jaxlint.model.facts import trainingstate

    _, m = build(HELPER)
    [f] = [g for g in m.functions if g.name == "update_step"]
    operand, update = trainingstate.update_of(m, f, {"weights", "opt_state"})
    assert ast.unparse(operand) == "weights" and ast.unparse(update.func) == "jax.tree_map"
    [e] = [g for g in m.functions if g.name == "evaluate"]
    assert trainingstate.update_of(m, e, {"counter"}) is None


def test_a_step_of_another_module_of_the_project_is_read_there(tmp_path):
    """``jax.jit(model.update_step)`` with ``import minformer.model as model`` (a namespace package
    of the repository): the update is read in that module; a step there that updates nothing stays
    unknown."""
    from jaxlint.model import build_model as _build
    from jaxlint.model.facts import trainingstate
    from jaxlint.project import ProjectResolver
    from ruletools import make_project

    make_project(tmp_path, {"pyproject.toml": "", "minformer/model.py": HELPER, "scripts/train.py": """
        import jax
        import minformer.model as model

        step = jax.jit(model.update_step)
        count = jax.jit(model.evaluate)

        def train(weights, opt_state, batches, c):
            for x in batches:
                loss, weights, opt_state = step(weights, x, opt_state, 0.1)
                value, c = count(weights, x, c)
    """})
    path = tmp_path / "scripts/train.py"
    m = _build(ast.parse(path.read_text()), path=str(path), project=ProjectResolver())
    found = {r.call.lineno: trainingstate.training_state(m, r.call, r.wrap, r.positions, r.keywords)
             for r in donation.rebinding_without_donation(m)}
    step_line, count_line = sorted(found)
    assert found[step_line].status == "proven" and "another module of the project" in found[step_line].why
    assert found[count_line].status == "unknown"


TRAINER = """
import jax
import optax

class Trainer:
    def __init__(self, tx):
        self.tx = tx

    def update_fn(self, state, grad):
        updates, opt_state = self.tx.update(grad, state.opt_state, state.params)
        return state.replace(params=optax.apply_updates(state.params, updates), opt_state=opt_state)

    def count_fn(self, state, counter):
        return state, counter + 1

def update_fn(counter, state):
    return counter + 1, state
"""


def test_a_pmapped_method_of_an_instance_of_another_modules_class_is_read_there(tmp_path):
    """``update_func = jax.pmap(trainer.update_fn)`` with ``trainer = Trainer(config)`` of another
    module (fresh set I's jax-ddpm): the method is read there, its parameters counted after ``self``;
    a method there that updates nothing, or a top-level function of the same name, stays unknown."""
    from jaxlint.model import build_model as _build
    from jaxlint.model.facts import trainingstate
    from jaxlint.project import ProjectResolver
    from ruletools import make_project

    make_project(tmp_path, {"pyproject.toml": "", "modules/__init__.py": "", "modules/train_util.py": TRAINER,
                            "scripts/train.py": """
        import jax
        from modules.train_util import Trainer, update_fn

        def main(tx, state, grads, c):
            trainer = Trainer(tx)
            update = jax.pmap(trainer.update_fn, axis_name="d")
            count = jax.pmap(trainer.count_fn, axis_name="d")
            plain = jax.pmap(update_fn, axis_name="d")
            for g in grads:
                state = update(state, g)
                state, c = count(state, c)
                c, state = plain(c, state)
    """})
    path = tmp_path / "scripts/train.py"
    m = _build(ast.parse(path.read_text()), path=str(path), project=ProjectResolver())
    found = {r.call.lineno: trainingstate.training_state(m, r.call, r.wrap, r.positions, r.keywords)
             for r in donation.rebinding_without_donation(m)}
    update_line, count_line, plain_line = sorted(found)
    assert found[update_line].status == "proven" and "`Trainer.update_fn` (another module" in found[update_line].why
    assert found[count_line].status == "unknown"
    assert found[plain_line].status == "unknown"  # the top-level `update_fn`, not the method of that name


def test_a_step_of_this_module_handing_the_gradient_to_another_modules_helper(tmp_path):
    """``update_step`` of a notebook or script calls ``model.update_weights(weights, grads, opt_state)``
    of a module of the project (fresh set M's minformer notebooks): the update is read there, given
    which arguments hold the gradient; a helper there that updates nothing stays unknown."""
    from jaxlint.model import build_model as _build
    from jaxlint.model.facts import trainingstate
    from jaxlint.project import ProjectResolver
    from ruletools import make_project

    make_project(tmp_path, {"pyproject.toml": "", "modelling/__init__.py": "", "modelling/model.py": HELPER,
                            "finetune.py": """
        import jax
        from modelling import model

        def update_step(weights, x, opt_state, lr):
            value, grads = jax.value_and_grad(model.loss)(weights, x)
            weights, opt_state = model.update_weights(weights, grads, opt_state, lr)
            return value, weights, opt_state

        def count_step(weights, x, counter):
            value, grads = jax.value_and_grad(model.loss)(weights, x)
            value, counter = model.evaluate(weights, grads, counter)
            return value, weights, counter

        step = jax.jit(update_step)
        count = jax.jit(count_step)

        def train(weights, opt_state, batches, c):
            for x in batches:
                loss, weights, opt_state = step(weights, x, opt_state, 0.1)
                value, weights, c = count(weights, x, c)
    """})
    path = tmp_path / "finetune.py"
    m = _build(ast.parse(path.read_text()), path=str(path), project=ProjectResolver())
    found = {r.call.lineno: trainingstate.training_state(m, r.call, r.wrap, r.positions, r.keywords)
             for r in donation.rebinding_without_donation(m)}
    step_line, count_line = sorted(found)
    assert found[step_line].status == "proven" and "`model.update_weights` on line 7" in found[step_line].why
    assert found[count_line].status == "unknown"


def test_an_example_libraries_optimizer_update_is_a_training_update():
    """``opt_update(i, g, opt_state)`` of ``opt_init, opt_update, get_params = optimizers.adam(...)``
    (JAX's example optimizers): the state it is given is the optimizer's; a function of the same
    spelling made by something else is not known to update anything."""
    from jaxlint.model.facts import trainingstate

    src = """
import jax
from jax import grad
from jax.example_libraries import optimizers

opt_init, opt_update, get_params = optimizers.adam(1e-3)

def step(i, opt_state, batch):
    g = grad(lambda p: (p * batch).sum())(get_params(opt_state))
    return opt_update(i, g, opt_state)
"""
    _, m = build(src)
    [f] = [g for g in m.functions if g.name == "step"]
    operand, update = trainingstate.update_of(m, f, {"opt_state"})
    assert ast.unparse(operand) == "opt_state" and ast.unparse(update.func) == "opt_update"
    _, other = build(src.replace("optimizers.adam(1e-3)", "make_optimizer(1e-3)"))
    [g] = [h for h in other.functions if h.name == "step"]
    assert trainingstate.update_of(other, g, {"opt_state"}) is None


FACTORY = """
import jax
import jax.numpy as jnp
from jax import jit
from flax import nnx


def create_train_step(model):
    @jit
    def train_step(state, batch):
        def loss_fn(params):
            x, y = batch
            return jnp.mean((y - model.apply(params, x)) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        state = state.apply_gradients(grads=grads)
        return state, loss

    return train_step


def create_count_step():
    @jit
    def count_step(state, n):
        return state, n + 1

    return count_step


def create_nnx_step():
    @nnx.jit
    def nnx_step(state, batch):
        return state, batch

    return nnx_step
"""


def test_a_step_made_by_another_modules_factory_is_read_there(tmp_path):
    """Fresh Y's cvit: `train_step_fn = create_train_step(model)` imported from `src/utils.py`, whose
    nested `@jit` step applies `state.apply_gradients`: the summary keeps what the step updates and
    whether its wrapper deletes donated arrays; JAX803 reports the call, naming where to declare."""
    from jaxlint.model import build_model as _build
    from jaxlint.model.facts import trainingstate
    from jaxlint.project import ProjectResolver
    from ruletools import make_project, path_default_codes

    make_project(tmp_path, {"pyproject.toml": "", "src/__init__.py": "", "src/utils.py": FACTORY,
                            "train.py": """
        from src.utils import create_train_step, create_count_step, create_nnx_step

        def main(model, state, batches, n):
            train_step_fn = create_train_step(model)
            count = create_count_step()
            other = create_nnx_step()
            for batch in batches:
                state, loss = train_step_fn(state, batch)
                state, n = count(state, n)
                state, batch = other(state, batch)

        if __name__ == "__main__":
            main(None, None, [], 0)
    """})
    path = tmp_path / "train.py"
    m = _build(ast.parse(path.read_text()), path=str(path), project=ProjectResolver())
    found = {r.call.lineno: trainingstate.training_state(m, r.call, r.wrap, r.positions, r.keywords)
             for r in donation.rebinding_without_donation(m)}
    lines = path.read_text().splitlines()
    step, count = (1 + next(i for i, ln in enumerate(lines) if s in ln) for s in ("= train_step_fn(", "= count("))
    assert sorted(found) == [step, count]  # nnx.jit writes state back in place: not a rebinding of a deleting jit
    assert found[step].status == "proven" and "made by a factory in another module" in found[step].why
    src = FACTORY.splitlines()
    update, site = (1 + next(i for i, ln in enumerate(src) if s in ln) for s in ("state.apply_gradients", "@jit"))
    assert f"`state.apply_gradients` on line {update} there" in found[step].why
    assert found[count].status == "unknown"  # no optimizer update: a counter
    assert path_default_codes(path) == [(step, "JAX803")]
    res = check_path(str(path), [r() for r in jaxlint_rules.ALL_RULES])
    (f,) = [f for f in res.findings if f.code == "JAX803" and f.opt_in is None]
    assert f"declare `donate_argnums=(0,)` on its `jit` (src/utils.py, line {site})" in f.message
