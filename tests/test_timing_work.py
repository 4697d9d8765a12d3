"""JAX204 (session 3, the timings the model missed): timed work the model now proves unwaited, with
the model facts it needs: record (NamedTuple) constructors, helpers that end in unwaited work,
library rollouts, pmap factories and timers, and methods of other modules' classes."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import namedtuples, timing
from jaxlint.project import ProjectResolver
from ruletools import assert_marked, findings
from ruletools import make_project as make
from ruletools import path_default_codes


def _last_call(src: str, name: str):
    tree = ast.parse(textwrap.dedent(src))
    m = build_model(tree)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == name]
    return m, max(calls, key=lambda c: (c.lineno, c.col_offset))


# -- the record fact

@pytest.mark.parametrize("src, record", [
    ("from typing import NamedTuple\nclass P(NamedTuple):\n    a: int\nP(1)\n", True),
    ("import typing\nclass P(typing.NamedTuple):\n    a: int\n    def total(self):\n        return self.a\nP(1)\n",
     True),
    # near misses: a constructor that runs code of its own, another base, a name bound twice
    ("from typing import NamedTuple\nclass P(NamedTuple):\n    a: int\n    def __init__(self, *a):\n"
     "        print(a)\nP(1)\n", False),
    ("class P(tuple):\n    pass\nP(1)\n", False),
    ("from typing import NamedTuple\nclass P(NamedTuple):\n    a: int\nP = make()\nP(1)\n", False),
    ("from dataclasses import dataclass\n@dataclass\nclass P:\n    a: int\nP(1)\n", False),
])
def test_a_namedtuple_constructor_only_stores(src, record):
    m, call = _last_call(src, "P")
    assert namedtuples.constructs_record(m, call, m.scope_at(call)) is record


def test_a_namedtuple_of_another_module_is_a_record(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": "from typing import NamedTuple\n"
                    "class Post(NamedTuple):\n    a: int\nclass Other:\n    pass\n",
                    "main.py": "import pkg.core as core\nfrom pkg.core import Post, Other\n"
                    "core.Post(1)\nPost(1)\ncore.Other()\nOther()\n"})
    path = str(tmp_path / "main.py")
    tree = ast.parse((tmp_path / "main.py").read_text())
    m = build_model(tree, path=path, project=ProjectResolver())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    calls.sort(key=lambda c: c.lineno)
    assert [namedtuples.constructs_record(m, c, m.scope_at(c)) for c in calls] == [True, True, False, False]


# -- helpers that end in unwaited work

SMOOTHER = """
import time
from typing import NamedTuple
import jax.numpy as jnp
from jax import lax

class Posterior(NamedTuple):
    loglik: float
    probs: float

def smoother(probs, lls):
    n = lls.shape[0]
    def step(carry, ll):
        return carry * jnp.exp(ll), carry
    _, posts = lax.scan(step, probs, lls)
    return Posterior(loglik=posts.sum(), probs=jnp.concatenate([probs[None], posts]))

def compare(probs, lls):
    start = time.time()
    _ = smoother(probs, lls)
    took = time.time() - start  # expect: JAX204
    print(f"took {took} s")
"""


def test_jax204_a_helper_ending_in_a_scan_and_a_record_is_unwaited_work():
    assert_marked(SMOOTHER)


@pytest.mark.parametrize("change", [
    # after the scan, code jaxlint cannot see into (it may wait)
    ("    return Posterior(", "    report(posts)\n    return Posterior("),
    ("    return Posterior(", "    log_progress()\n    return Posterior("),
    # a fetch or a block after the scan
    ("    return Posterior(", "    print(float(posts.sum()))\n    return Posterior("),
    ("    return Posterior(", "    posts.block_until_ready()\n    return Posterior("),
    # a record that may run code of its own
    ("    probs: float\n", "    probs: float\n    def __init__(self, *a):\n        check(a)\n"),
    # the caller waits
    ("    _ = smoother(probs, lls)", "    _ = smoother(probs, lls).probs.block_until_ready()"),
    # the work runs on one path only: in a branch, or after an early return
    ("    _, posts = lax.scan(step, probs, lls)\n    return Posterior(",
     "    if n > 1:\n        _, posts = lax.scan(step, probs, lls)\n        return Posterior("),
    ("    _, posts = lax.scan(", "    if n == 0:\n        return probs\n    _, posts = lax.scan("),
    # an async def: calling it makes a coroutine, nothing runs until it is awaited (fresh set T)
    ("def smoother(probs, lls):", "async def smoother(probs, lls):"),
])
def test_jax204_a_helper_that_may_wait_after_its_work_is_not_unwaited(change):
    assert findings(SMOOTHER.replace(*change), "JAX204") == []


def test_jax204_host_code_after_the_helpers_work_waits_for_nothing():
    src = SMOOTHER.replace("    return Posterior(", "    print('done', n)\n    return Posterior(")
    assert findings(src, "JAX204") == [(22, "JAX204")]


def test_jax204_the_helper_fact_does_not_depend_on_names():
    renamed = (SMOOTHER.replace("smoother", "run_it").replace("Posterior", "Out").replace("posts", "zs")
               .replace("compare", "bench"))
    assert findings(renamed, "JAX204") == findings(SMOOTHER, "JAX204") == [(21, "JAX204")]


# -- library objects (their APIs as data: names.py)

GYMNAX = """
import time
import jax
from gymnax.experimental import RolloutWrapper

def speed(rng, num_envs, steps):
    manager = RolloutWrapper(None, env_name="CartPole-v1")
    if num_envs == 1:
        rollout_fn = manager.single_rollout
    else:
        rollout_fn = manager.batch_rollout
    start_t = time.time()
    for _ in range(steps):
        rng, key = jax.random.split(rng)
        _ = rollout_fn(jax.random.split(key, num_envs), None)
    return time.time() - start_t  # expect: JAX204
"""


def test_jax204_a_gymnax_rollout_bound_to_a_name_only_dispatches():
    assert_marked(GYMNAX)


@pytest.mark.parametrize("change", [
    # one branch binds something else: the name may be a function that waits
    ("        rollout_fn = manager.batch_rollout", "        rollout_fn = make_rollout(manager)"),
    # a method not listed as compiled
    ("        rollout_fn = manager.batch_rollout", "        rollout_fn = manager.evaluate"),
    # another library's wrapper
    ("from gymnax.experimental import RolloutWrapper", "from mylib import RolloutWrapper"),
    ("        _ = rollout_fn(", "        _ = jax.block_until_ready(rollout_fn("),
])
def test_jax204_a_rollout_that_may_wait_is_not_unwaited(change):
    src = GYMNAX.replace(*change)
    if "block_until_ready" in src:
        src = src.replace("num_envs), None)", "num_envs), None))")
    assert findings(src, "JAX204") == []


QDAX = """
import time
import jax
import numpy as np
from qdax.core.distributed_map_elites import DistributedMAPElites

def run(emitter, scoring, repertoire, state, keys, devices, loops):
    map_elites = DistributedMAPElites(scoring_function=scoring, emitter=emitter, metrics_function=None)
    update_fn = map_elites.get_distributed_update_fn(num_iterations=10, devices=devices)
    times = []
    for i in range(loops):
        start_time = time.time()
        repertoire, state, metrics = update_fn(repertoire, state, keys)
        metrics = jax.tree.map(lambda x: x[0], metrics)
        times.append(time.time() - start_time)  # expect: JAX204
    return times
"""


def test_jax204_qdax_distributed_update_fn_is_a_pmap():
    assert_marked(QDAX)


@pytest.mark.parametrize("change", [
    ("map_elites.get_distributed_update_fn(", "map_elites.get_update_fn("),
    # the result handed to code jaxlint cannot see into, or fetched leaf by leaf
    ("        repertoire, state, metrics = update_fn(repertoire, state, keys)\n",
     "        repertoire, state, metrics = update_fn(repertoire, state, keys)\n        log(metrics)\n"),
    ("lambda x: x[0]", "lambda x: float(x[0])"),
    ("lambda x: x[0]", "lambda x: np.asarray(x)[0]"),
])
def test_jax204_qdax_near_misses(change):
    assert findings(QDAX.replace(*change), "JAX204") == []


MLXU = """
import jax
import mlxu

step = jax.jit(lambda p, b: (p - 0.1 * b, {"loss": (p * b).sum()}))

def train(params, batches, epochs):
    for epoch in range(epochs):
        metrics = {"epoch": epoch}
        with mlxu.Timer() as train_timer:  # expect: JAX204
            for batch in batches:
                params, m = step(params, batch)
                metrics.update(mlxu.prefix_metrics(m, "sac"))
        metrics["train_time"] = train_timer()
    return params
"""


def test_jax204_an_mlxu_timer_around_dispatched_steps():
    assert_marked(MLXU)


@pytest.mark.parametrize("change", [
    ("mlxu.Timer()", "othertools.Timer()"),  # a timer whose exit may wait
    ('metrics.update(mlxu.prefix_metrics(m, "sac"))', 'metrics.update(summarize(m))'),  # may fetch m
    ("                metrics.update(", "                jax.block_until_ready(params)\n                metrics.update("),
])
def test_jax204_mlxu_near_misses(change):
    src = MLXU.replace(*change)
    if "othertools" in src:
        src = src.replace("import mlxu\n", "import mlxu\nimport othertools\n")
    assert findings(src, "JAX204") == []


# -- a method of a class of another module

AGENT = """
from functools import partial
import jax

class Agent:
    def __init__(self, params):
        self._params = params
        self._steps = 0

    def train(self, batch):
        self._steps += 1
        self._params, metrics = self._train_step(self._params, batch)
        return metrics

    @partial(jax.jit, static_argnames=("self",))
    def _train_step(self, params, batch):
        return params - 0.1 * batch, {"loss": (params * batch).sum()}
"""

MAIN = """
import time
import jax.numpy as jnp
from .agent import Agent

def main(batches):
    agent = Agent(jnp.zeros(3))
    t0 = time.perf_counter()
    for b in batches:
        metrics = agent.train(b)
    return time.perf_counter() - t0
"""


def test_jax204_a_method_of_another_modules_class_that_only_dispatches(tmp_path):
    make(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": AGENT, "pkg/main.py": MAIN})
    assert path_default_codes(tmp_path / "pkg/main.py") == [(11, "JAX204")]


@pytest.mark.parametrize("agent_change, main_change", [
    # the method logs after its step (code jaxlint cannot see into may wait)
    (("        return metrics", "        self.logger.log(metrics)\n        return metrics"), None),
    # the method fetches
    (("        return metrics", "        return float(metrics['loss'])"), None),
    # another method, not defined in the class
    (None, ("agent.train(b)", "agent.fit(b)")),
    # the instance may be of another class
    (None, ("    agent = Agent(jnp.zeros(3))", "    agent = Agent(jnp.zeros(3)) if batches else make()")),
])
def test_jax204_a_method_of_another_module_that_may_wait(tmp_path, agent_change, main_change):
    agent = AGENT.replace(*agent_change) if agent_change else AGENT
    main = MAIN.replace(*main_change) if main_change else MAIN
    make(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": agent, "pkg/main.py": main})
    assert path_default_codes(tmp_path / "pkg/main.py") == []


def test_dispatching_methods_of_a_module():
    m = build_model(ast.parse(textwrap.dedent(AGENT)))
    assert timing.dispatching_methods_of(m) == {"Agent": frozenset({"train", "_train_step"})}


# -- eager arithmetic on JAX arrays in a timed region (fresh sets J and K: ``O = A + B`` timed per step)

_ADD = """
import datetime
import jax.numpy as jnp

A = jnp.ones((4096, 4096))
B = jnp.ones((4096, 4096))
s = datetime.datetime.now()
for i in range(10):
    O = A + B
e = datetime.datetime.now()  # expect: JAX204
print(f"addition takes {(e - s).total_seconds() / 10:.4f}")
"""


def test_jax204_eager_arithmetic_on_jax_arrays_is_unwaited_work():
    assert_marked(_ADD)
    m, clock = _last_call(_ADD, "datetime.datetime.now")
    (region,) = timing.unwaited_timings(m)
    assert isinstance(region.work, ast.BinOp) and ast.unparse(region.work) == "A + B"


@pytest.mark.parametrize("change", [
    ("    O = A + B\n", "    O = (A + B).block_until_ready()\n"),  # waited
    ("A = jnp.ones((4096, 4096))\nB = jnp.ones((4096, 4096))\n", "A = 1.0\nB = 2.0\n"),  # host numbers
    ("    O = A + B\n", "    O = A + B\n    print(O)\n"),  # printed: a fetch
])
def test_jax204_near_misses_of_eager_arithmetic(change):
    src = _ADD.replace(*change).replace("  # expect: JAX204", "")
    assert src != _ADD.replace("  # expect: JAX204", "")
    assert findings(src, "JAX204") == []


def test_jax204_a_result_stored_into_a_numpy_array_in_the_loop_is_waited_for():
    """Fresh Z's MALA benchmark: `samples[i] = param` copies each kernel result to the host, so the loop
    waits for the device at every step and the clock after it measures the work; without the store it
    measures only the dispatch."""
    src = """
        import time
        import jax
        import jax.numpy as jnp
        import numpy as np

        @jax.jit
        def kernel(x):
            return jnp.tanh(x) + 1.0

        def run(x, n):
            samples = np.zeros((n, 3))
            start = time.time()
            for i in range(n):
                x = kernel(x)
                samples[i] = x
            end = time.time()
            return samples, end - start

        def run_unwaited(x, n):
            start = time.time()
            for i in range(n):
                x = kernel(x)
            end = time.time()  # expect: JAX204
            return x, end - start
    """
    assert_marked(src)


# -- what the timed work returned, converted on the host (fresh AA's first look: a DNS optimiser)

_OPTIMISER = """
import time

import jax

class Optimiser:
    def __init__(self, flip):
        if flip:
            self.inv_fn = lambda x: -x
        else:
            self.inv_fn = lambda x: x

    def iterate(self, state):
        start = time.time()
        new_value = self.inv_fn(state.value)
        self.value = new_value
        log("objective: " + str(new_value))
        took = time.time() - start  # expect: JAX204
        return took
"""


def test_jax204_str_of_what_the_timed_work_returned_waits_for_it():
    src = _OPTIMISER.replace("  # expect: JAX204", "")
    assert [f.code for f in findings(src)] == []
    # the same measurement with nothing that reads the result on the host: unwaited
    assert_marked(_OPTIMISER.replace('        log("objective: " + str(new_value))\n', ""))
    # a conversion of another name waits for nothing
    assert_marked(_OPTIMISER.replace("str(new_value)", "str(self.name)"))


RENDER = """
import time
import jax
import jax.numpy as jnp


@jax.jit
def render_fn(rng, rays):
    return jnp.sin(rays) * 2


def render_image(parts, rng):
    chunks = {made}
    for part in parts:
        chunks.append(render_fn(rng, part))
    return jnp.concatenate(chunks)


def evaluate(parts, rng):
    t0 = time.time()
    img = render_image(parts, rng)
    eval_time = time.time() - t0{marker}
    return img, eval_time
"""


def test_jax204_a_helper_that_collects_dispatched_chunks_in_a_list_and_concatenates_them():
    # review3's multinerf: the render time is read right after render_image, which only dispatches
    assert_marked(RENDER.format(made="[]", marker="  # expect: JAX204"))


def test_jax204_near_miss_chunks_collected_in_an_object_it_cannot_see_into():
    # ``chunks`` made by a call of unknown code: its ``append`` may read (and wait for) what it is given
    assert findings(RENDER.format(made="make_buffer()", marker=""), "JAX204") == []
