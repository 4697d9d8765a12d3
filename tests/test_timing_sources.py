"""JAX204 (issue 39, review3 misses A-M2 and A-M4): what a timed region's work and waits are
made of across lists of queues and the project's src layout, with the model facts they need."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import containers
from jaxlint.project import ProjectResolver
from ruletools import assert_marked, findings
from ruletools import make_project as make
from ruletools import path_default_codes


def _maker(src: str, name: str = "qs"):
    """``element_maker`` of the last read ``qs[...]`` in ``src``."""
    tree = ast.parse(textwrap.dedent(src))
    m = build_model(tree)
    reads = [n for n in ast.walk(tree) if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
             and n.value.id == name and isinstance(n.ctx, ast.Load)]
    read = max(reads, key=lambda n: (n.lineno, n.col_offset))
    return containers.element_maker(m, read.value, m.scope_at(read))


@pytest.mark.parametrize("src, maker", [
    ("import queue\nqs = []\nfor i in range(4):\n    qs.append(queue.Queue(maxsize=1))\nqs[0].put(1)\n",
     "queue.Queue"),
    ("import queue\nqs = [queue.SimpleQueue() for _ in range(3)]\nfor q in qs:\n    pass\nqs[len(qs) - 1].put(1)\n",
     "queue.SimpleQueue"),
    ("from queue import Queue\ndef f(n):\n    qs = []\n    qs.append(Queue())\n    qs.append(Queue(2))\n"
     "    return qs[-1]\n", "queue.Queue"),
    # near misses: anything else may have put another object in the list
    ("import queue\nqs = []\nqs.append(queue.Queue())\nqs.append(make())\nqs[0]\n", None),
    ("import queue\nqs = []\nqs.append(queue.Queue())\nfill(qs)\nqs[0]\n", None),
    ("import queue\nqs = []\nqs.append(queue.Queue())\nqs[0] = other\nqs[0]\n", None),
    ("import queue\nqs = []\nqs.append(queue.Queue())\nqs.extend(others)\nqs[0]\n", None),
    ("import queue\nqs = [queue.Queue()]\nqs = qs + others\nqs[0]\n", None),
    ("import queue\nqs = []\nqs.append(queue.Queue())\ndef g():\n    qs.insert(0, 1)\nqs[0]\n", None),
    ("qs = []\nqs[0]\n", None),
    ("qs = make_queues()\nqs[0]\n", None),
])
def test_the_maker_of_every_element_of_a_list(src, maker):
    assert _maker(src) == maker


QUEUE_TIMING = """
import multiprocessing
import queue
import time
import jax

update = jax.pmap(lambda p: p * 0.9)

def learner(params, n_actors, report):
    params_queues = []
    for _ in range(n_actors):
        params_queues.append(queue.Queue(maxsize=1))
    while True:
        t0 = time.time()
        params = update(params)
        for i in range(n_actors):
            params_queues[i].put(params)
        report(time.time() - t0)  # expect: JAX204
"""


def test_jax204_a_put_on_an_element_of_a_list_of_thread_queues_is_not_a_wait():
    assert_marked(QUEUE_TIMING)


@pytest.mark.parametrize("change", [
    # multiprocessing queues pickle what they are given, which fetches a JAX array to the host
    ("queue.Queue(maxsize=1)", "multiprocessing.Queue(maxsize=1)"),
    ("queue.Queue(maxsize=1)", "multiprocessing.SimpleQueue()"),
    # the list escapes to code that may put anything in it
    ("    while True:", "    register(params_queues)\n    while True:"),
    # an element replaced by an unknown object
    ("    while True:", "    params_queues[0] = make_sink()\n    while True:"),
])
def test_jax204_a_put_that_may_wait_is_not_taken_for_a_queue_put(change):
    assert findings(QUEUE_TIMING.replace(*change), "JAX204") == []


def test_jax204_a_multiprocessing_queue_put_may_wait():
    src = """
    import multiprocessing
    import time
    import jax

    step = jax.jit(lambda p: p * 2)

    def run(p):
        q = multiprocessing.Queue()
        t0 = time.perf_counter()
        q.put(step(p))
        return time.perf_counter() - t0
    """
    assert findings(src, "JAX204") == []
    assert findings(src.replace("multiprocessing.Queue()", "queue.Queue()").replace(
        "import multiprocessing", "import queue"), "JAX204") == [(12, "JAX204")]


EVALUATE = """
from functools import partial
import jax
import jax.numpy as jnp

@partial(jax.jit, static_argnames=("n",))
def evaluate(x, n):
    return jnp.sin(x) * n
"""

TOUR = """
import time
import jax.numpy as jnp
from rejax.evaluate import evaluate

x = jnp.ones(3)
start = time.time()
r = evaluate(x, 3)
elapsed = time.time() - start
print(f"took {elapsed}")
"""


def test_jax204_a_jitted_function_of_the_projects_src_layout_package(tmp_path):
    # rejax: the package lives in src/rejax/ (namespace or regular), the examples import it by name
    make(tmp_path, {"src/rejax/evaluate.py": EVALUATE, "examples/tour.py": TOUR})
    assert path_default_codes(tmp_path / "examples/tour.py") == [(9, "JAX204")]
    make(tmp_path, {"src/rejax/__init__.py": ""})
    assert path_default_codes(tmp_path / "examples/tour.py") == [(9, "JAX204")]


def test_jax204_an_unjitted_function_of_the_src_layout_package_is_not_work(tmp_path):
    make(tmp_path, {"src/rejax/evaluate.py": EVALUATE.replace('@partial(jax.jit, static_argnames=("n",))\n', ""),
                    "examples/tour.py": TOUR})
    assert path_default_codes(tmp_path / "examples/tour.py") == []


def test_the_resolver_finds_src_layout_modules_and_nothing_else(tmp_path):
    make(tmp_path, {"src/rejax/__init__.py": "", "src/rejax/evaluate.py": "", "src/single.py": "",
                    "examples/deep/tour.py": "", "other/src/numpy/__init__.py": ""})
    r = ProjectResolver()
    here = str(tmp_path / "examples/deep/tour.py")
    assert r.locate(here, "rejax.evaluate", 0) == str(tmp_path / "src/rejax/evaluate.py")
    assert r.locate(here, "rejax", 0) == str(tmp_path / "src/rejax/__init__.py")
    assert r.locate(here, "single", 0) == str(tmp_path / "src/single.py")
    assert r.locate(here, "rejax.missing", 0) is None
    assert r.locate(here, "numpy", 0) is None  # another folder's src/ is not this file's project
    assert r.locate(here, "evaluate", 1) is None  # relative imports never look in src/
