"""Timer objects (jaxlint/model/facts/timerclasses.py): a project's timer class whose instance, or a
method of it, is a context manager reading the clock on entry and exit (octo's ``with timer("train"):``
on fresh set F, serl's ``with timer.context("train"):`` on fresh set E), read in this module or in
another module of the project; and the flat layout that lets ``scripts/train.py`` import the project's
own package (jaxlint/locate.py)."""

from __future__ import annotations

import ast
import textwrap

from jaxlint.locate import locate_from
from jaxlint.model import build_model
from jaxlint.model.facts import timerclasses, timing
from ruletools import make_project, path_default_codes

TIMERS = """
import time
from collections import defaultdict
from contextlib import contextmanager

import jax


class Timer:
    def __init__(self):
        self.times = defaultdict(float)
        self.start = {}

    @contextmanager
    def __call__(self, key):
        self.tick(key)
        try:
            yield None
        finally:
            self.tock(key)

    @contextmanager
    def context(self, key):
        t = time.time()
        yield
        self.times[key] += time.time() - t

    def tick(self, key):
        self.start[key] = time.time()

    def tock(self, key):
        self.times[key] += time.time() - self.start.pop(key)


class WaitingTimer(Timer):
    @contextmanager
    def __call__(self, key, value=None):
        t = time.time()
        yield
        jax.block_until_ready(value)
        self.times[key] += time.time() - t


class Counter:
    @contextmanager
    def __call__(self, key):
        yield
"""

LOOP = """
from functools import partial
import jax
from {src} import Timer, WaitingTimer, Counter


@jax.jit
def train_step(state, batch):
    return state + batch, state.sum()


def main(state, data, steps):
    timer = Timer()
    waiting = WaitingTimer()
    counter = Counter()
    for _ in range(steps):
        batch = next(data)
        with timer("train"):  # reported
            state, info = train_step(state, batch)
        with timer.context("train2"):  # reported
            state, info = train_step(state, batch)
        with waiting("train3", state):
            state, info = train_step(state, batch)
        with counter("train4"):
            state, info = train_step(state, batch)
    return state, timer.times
"""


def test_timer_methods_of_a_class():
    m = build_model(ast.parse(textwrap.dedent(TIMERS)))
    classes = {c.node.name: c for c in m.classes.values()}
    ops = (timing.is_clock, timing._calls_in, timing._device_role)
    assert timerclasses.timer_method(m, classes["Timer"], "__call__", ops)  # through self.tick / self.tock
    assert timerclasses.timer_method(m, classes["Timer"], "context", ops)  # the clock read in the method itself
    assert not timerclasses.timer_method(m, classes["WaitingTimer"], "__call__", ops)  # its exit waits
    assert not timerclasses.timer_method(m, classes["Counter"], "__call__", ops)  # reads no clock
    assert not timerclasses.timer_method(m, classes["Timer"], "tick", ops)  # not a context manager
    loop = build_model(ast.parse(textwrap.dedent(LOOP.format(src="proj.utils"))))
    assert [n.lineno for n in loop.with_nodes] == [i + 1 for i, t in enumerate(LOOP.split("\n")) if "with " in t]


def test_timer_objects_of_another_module_in_a_flat_layout(tmp_path):
    # octo: the package octo/ at the repository root, the training script in scripts/
    make_project(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='proj')\n",
                            "proj/__init__.py": "", "proj/utils.py": TIMERS,
                            "scripts/train.py": LOOP.format(src="proj.utils")})
    lines = [i + 1 for i, t in enumerate(LOOP.format(src="proj.utils").split("\n")) if t.endswith("# reported")]
    assert path_default_codes(tmp_path / "scripts/train.py") == [(n, "JAX204") for n in lines]


def test_timer_objects_of_this_module():
    from jaxlint.engine import check_source
    import jaxlint_rules

    loop = LOOP.format(src="os").replace("from os import Timer, WaitingTimer, Counter\n", "")
    src = textwrap.dedent(TIMERS) + loop
    found = [f for f in check_source(src, "t.py", [r() for r in jaxlint_rules.ALL_RULES]).findings
             if f.code == "JAX204" and f.opt_in is None]
    reported = [i + 1 for i, t in enumerate(src.split("\n")) if t.endswith("# reported")]
    assert [f.line for f in found] == reported and len(reported) == 2


def test_flat_layout_and_a_repository_folder_named_like_its_package(tmp_path):
    repo = tmp_path / "octo"
    make_project(repo, {"setup.py": "", "octo/__init__.py": "", "octo/utils/__init__.py": "",
                        "octo/utils/train_utils.py": "", "scripts/train.py": ""})
    here = str(repo / "scripts")
    assert locate_from(here, "octo.utils.train_utils", 0) == str(repo / "octo/utils/train_utils.py")
    assert locate_from(here, "octo.missing", 0) is None
    assert locate_from(here, "numpy", 0) is None  # not the project's package
    bare = tmp_path / "bare"  # no packaging file: no flat layout
    make_project(bare, {"octo/__init__.py": "", "octo/utils.py": "", "scripts/train.py": ""})
    assert locate_from(str(bare / "scripts"), "octo.utils", 0) is None


def test_flat_layout_of_a_namespace_package(tmp_path):
    """A package folder without ``__init__.py`` beside the scripts (fresh set M's minformer): a module
    inside it is found; the folder alone, or a module name that is only a file at the root, is not."""
    repo = tmp_path / "minformer"
    make_project(repo, {"pyproject.toml": "", "minformer/model.py": "", "utils.py": "",
                        "projects/charformer/train.py": ""})
    here = str(repo / "projects/charformer")
    assert locate_from(here, "minformer.model", 0) == str(repo / "minformer/model.py")
    assert locate_from(here, "minformer", 0) is None
    assert locate_from(here, "utils", 0) is None
    assert locate_from(here, "minformer.missing", 0) is None
