"""A repository whose package is a sub-project named like it (serl: ``serl_launcher/setup.py`` and
``serl_launcher/serl_launcher/``), seen from its examples (fresh set E): the import resolves
(jaxlint/locate.py), a timer whose method returns a context-manager object of the same module
times the block, and a parameter annotated with a class of that package is an instance whose
jitted methods dispatch work (jaxlint/model/facts/libraryobjects.py)."""

from __future__ import annotations

import ast

from jaxlint.locate import locate_from
from jaxlint.model import build_model
from jaxlint.model.facts import work
from jaxlint.project import ProjectResolver
from ruletools import make_project, path_codes

TIMER = """
import time


class _Context:
    def __init__(self, timer, key):
        self.timer, self.key = timer, key

    def __enter__(self):
        self.timer.tick(self.key)

    def __exit__(self, *exc):
        self.timer.tock(self.key)


class Timer:
    def __init__(self):
        self.start, self.times = {}, {}

    def tick(self, key):
        self.start[key] = time.time()

    def tock(self, key):
        self.times[key] = time.time() - self.start.pop(key)

    def context(self, key):
        return _Context(self, key)
"""

AGENT = """
from functools import partial

import jax
from flax import struct


class Agent(struct.PyTreeNode):
    params: jax.Array

    @partial(jax.jit, static_argnames=("n",))
    def update(self, batch, n=1):
        return self.replace(params=self.params + batch), {"loss": batch.sum()}
"""

LEARNER = """
import jax

from launcher.agent import Agent
from launcher.timer import Timer


def learner(agent: Agent, batches):
    timer = Timer()
    for batch in batches:
        with timer.context("train"):
            agent, info = agent.update(batch)
    agent = jax.block_until_ready(agent)
    return agent


def unannotated(agent, batches):
    timer = Timer()
    for batch in batches:
        with timer.context("train"):
            agent, info = agent.update(batch)
    return agent
"""


def _repo(tmp_path, git=True, setup=True):
    files = {"launcher/launcher/__init__.py": "", "launcher/launcher/timer.py": TIMER,
             "launcher/launcher/agent.py": AGENT, "examples/sim/learner.py": LEARNER}
    if setup:
        files["launcher/setup.py"] = "from setuptools import setup\nsetup(name='launcher')\n"
    root = make_project(tmp_path, files)
    if git:
        (root / ".git").mkdir()
    return root


def test_a_sub_project_named_like_its_package_is_found_from_the_repositorys_examples(tmp_path):
    root = _repo(tmp_path)
    here = str(root / "examples" / "sim")
    assert locate_from(here, "launcher.timer", 0) == str(root / "launcher" / "launcher" / "timer.py")
    assert locate_from(here, "launcher", 0) == str(root / "launcher" / "launcher" / "__init__.py")
    assert locate_from(here, "numpy", 0) is None


def test_without_packaging_metadata_or_a_repository_the_sub_folder_is_not_a_package(tmp_path):
    assert locate_from(str(_repo(tmp_path / "a", setup=False) / "examples" / "sim"), "launcher.timer", 0) is None
    assert locate_from(str(_repo(tmp_path / "b", git=False) / "examples" / "sim"), "launcher.timer", 0) is None


def test_a_timer_context_object_around_a_jitted_method_of_an_annotated_agent(tmp_path):
    root = _repo(tmp_path)
    lines = LEARNER.splitlines()
    with_line = next(i for i, t in enumerate(lines, 1) if 'with timer.context("train")' in t)
    # the annotated agent is reported; the unannotated one is not known to be an Agent
    assert path_codes(root / "examples" / "sim" / "learner.py") == [(with_line, "JAX204")]


def test_a_loop_over_the_keys_of_a_structure_is_not_a_loop_of_steps():
    tree = ast.parse(
        "import jax\n"
        "crop = jax.jit(lambda x, k: x)\n"
        "def augment(obs, rng, keys, n):\n"
        "    for k in keys:\n"
        "        obs = obs.copy({k: crop(obs[k], rng)})\n"
        "    for i in range(n):\n"
        "        obs = crop(obs, rng)\n"
        "    for k in keys:\n"
        "        obs = crop(obs, k)\n"
        "    return obs\n")
    m = build_model(tree, path=None, project=ProjectResolver())
    got = [work._dispatches_steps(m, lp) for lp in m.loops]
    assert got == [False, True, True]  # the last uses `k` as a value, not only as a key
