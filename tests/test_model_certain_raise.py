"""Lines that never run: after a statement of their block that always raises or ends it
(jaxlint/model/python/certainraise.py), and the engine making the findings there opt-in. Fresh X and
Z: per-step syncs in a loop whose step function reads a name defined nowhere, a key reuse after a
local read before its assignment, syncs after ``time.time()`` under ``from time import time``, an
eager update after a gradient of a loss that reads a misspelt ``self.`` attribute."""

from __future__ import annotations

import ast
import textwrap

import pytest

import jaxlint_rules
from jaxlint.engine import check_path
from jaxlint.model import build_model
from jaxlint.model.python.certainraise import never_runs
from jaxlint.project import ProjectResolver
from ruletools import make_project


def _model(root, rel: str):
    path = root / rel
    text = path.read_text()
    m = build_model(ast.parse(text), path=str(path), project=ProjectResolver())
    m.source_text = text
    return m


def _repo(tmp_path, files: dict):
    (tmp_path / ".git").mkdir(exist_ok=True)
    return make_project(tmp_path, files)


def _dead(tmp_path, source: str, mark: str = "# here", others: dict = None, notebook: bool = False):
    """never_runs() of the line marked ``mark`` in ``source`` (module ``pkg/m.py`` of a repository)."""
    source = textwrap.dedent(source)
    root = _repo(tmp_path, {"pkg/__init__.py": "", "pkg/m.py": source, **(others or {})})
    m = _model(root, "pkg/m.py")
    m.notebook = notebook
    line = next(i for i, t in enumerate(source.splitlines(), 1) if t.rstrip().endswith(mark))
    return never_runs(m, line)


# -- names


_TRAIN = textwrap.dedent("""
    def train(xs):
        for x in xs:
            loss = step(x, batch)
            print(float(loss))  # here
    def step(x, b):
        return x
    """)


def test_a_name_defined_nowhere_ends_its_block(tmp_path):
    why = _dead(tmp_path, "\nimport jax\n" + _TRAIN)
    assert why.startswith("line 6 always raises: `batch` is defined nowhere (NameError)")
    assert "never run" in why


@pytest.mark.parametrize("binding", [
    "batch = None\n",  # at module level, anywhere
    "def setup():\n    global batch\n    batch = 1\n",  # by a function that declares it global
    "from data import *\n",  # a star import may bind it
    "globals()['batch'] = 1\n",  # the module writes its namespace
    "try:\n    from data import batch\nexcept ImportError:\n    pass\n",
])
def test_names_that_may_be_bound_are_not_known_to_fail(tmp_path, binding):
    assert _dead(tmp_path, binding + _TRAIN) is None


def test_builtins_enclosing_functions_dunders_and_ipython_names_are_bound(tmp_path):
    src = """
    def outer(xs):
        scale = 2
        def inner():
            print(len(xs), scale, __file__, get_ipython, ExceptionGroup)
            return 1  # here
        return inner
    """
    assert _dead(tmp_path, src) is None


def test_a_notebook_kernel_may_hold_names_no_cell_binds(tmp_path):
    src = """
    def train(xs):
        loss = step(xs, batch)
        return float(loss)  # here
    """
    assert _dead(tmp_path, src, notebook=True) is None
    assert _dead(tmp_path, src) is not None


def test_a_name_bound_only_as_a_comprehension_target_is_not_the_functions(tmp_path):
    # `[u * u for u in us]` binds `u` in the comprehension; the function's earlier `u.get_mixup` reads the
    # module's import (review2's big_vision: read as a local before its assignment, UnboundLocalError)
    src = """
    import big_vision.utils as u

    def update_fn(state, us):
        mix = u.get_mixup(state)
        total = sum([x * x for x in us]) + sum([u * u for u in us])
        return mix, total  # here
    """
    assert _dead(tmp_path, src) is None


def test_a_local_read_before_its_assignment(tmp_path):
    src = """
    def loss_fn(params, image):
        latents = latents.reshape(-1, 4) * 2
        noise = draw(latents)  # here
        return noise
    """
    assert "`latents` is read before any assignment in `loss_fn` (UnboundLocalError)" in _dead(tmp_path, src)


@pytest.mark.parametrize("body", [
    # bound before, in an earlier branch
    "    if image is None:\n        latents = 1\n    else:\n        latents = 2\n    latents = latents + 1\n",
    # a parameter
    "    image = image.reshape(-1)\n",
    # in a loop a later binding may run first on a later pass
    "    for i in range(3):\n        if i:\n            print(latents)\n        latents = i\n",
    # a nested function may bind it
    "    def fill():\n        nonlocal latents\n        latents = 1\n    fill()\n    print(latents)\n    latents = 2\n",
    # a comprehension's target is its own: `image` below is the parameter (big_vision's `u * u for u in us`)
    "    print(image)\n    sizes = [image for image in params]\n",
])
def test_locals_bound_before_the_read_are_not_known_to_fail(tmp_path, body):
    src = "def loss_fn(params, image):\n" + body + "    noise = draw(image)  # here\n    return noise\n"
    assert _dead(tmp_path, src) is None


def test_an_attribute_of_a_function_imported_by_its_own_name(tmp_path):
    src = """
    from time import time

    def trainer(loader):
        start = time.time()
        for batch in loader:
            print(batch.item())  # here
    """
    assert "`time` is the function `time.time` (`from time import time`), which has no attribute `time`" \
        in _dead(tmp_path, src)
    assert _dead(tmp_path, src.replace("from time import time", "import time")) is None
    # a class has the attribute it is asked for
    assert _dead(tmp_path, src.replace("from time import time", "from datetime import datetime as time")
                 .replace("time.time()", "time.now()")) is None


# -- attributes of the class's own instances

_AGENT = """
import jax
from pkg.base import Base

class Agent(Base):
    def __init__(self, critic_params):
        self.critic_params = critic_params

    def train(self, s):
        loss, grads = jax.value_and_grad(self.actor_loss)(self.critic_params, s)
        self.params = update(grads)  # here
        return loss

    def actor_loss(self, params, s):
        return (self.ciritc_params * s).sum()
"""


@pytest.mark.parametrize("base", [
    "from abc import ABC\nclass Base(ABC):\n    pass\n",
    "class Base:\n    def __init__(self):\n        self.gamma = 0.9\n",
])
def test_a_misspelt_attribute_no_class_can_have(tmp_path, base):
    # the base class comes through the package's re-export, as in fresh Z's JAX-RL
    why = _dead(tmp_path, _AGENT.replace("from pkg.base import Base", "from pkg import Base"),
                others={"pkg/__init__.py": "from .base import Base\n", "pkg/base.py": base})
    assert why.startswith("line 10 always raises: it calls `self.actor_loss`, which always raises: on line 15, "
                          "`self.ciritc_params`: `Agent` and its bases")


@pytest.mark.parametrize("change, others", [
    # another file spells the attribute (it may assign it)
    ((), {"pkg/run.py": "agent.ciritc_params = 1\n"}),
    # a framework base may have any attribute
    (("from pkg.base import Base", "from flax.linen import Module as Base"), {}),
    # attributes set by computed names
    (("self.critic_params = critic_params", "setattr(self, 'critic_' + 'params', critic_params)"), {}),
    (("self.critic_params = critic_params", "self.__dict__.update(critic_params)"), {}),
    ((), {"pkg/run.py": "for k, v in cfg.items():\n    setattr(agent, k, v)\n"}),  # another file, any name
    # another class derives from it: the method called through self may be overridden
    (("return (self.ciritc_params * s).sum()\n", "return (self.ciritc_params * s).sum()\n\nclass Sub(Agent):\n    pass\n"),
     {}),
    ((), {"pkg/sub.py": "from pkg.m import Agent\nclass Sub(Agent):\n    pass\n"}),
    # a decorator that may not call it as it is
    (("    def actor_loss", "    @cached\n    def actor_loss"), {}),
])
def test_attributes_that_may_exist_are_not_known_to_fail(tmp_path, change, others):
    src = _AGENT.replace(*change) if change else _AGENT
    assert _dead(tmp_path, src, others={"pkg/base.py": "class Base:\n    pass\n", **others}) is None


def test_outside_a_repository_attributes_are_not_known(tmp_path):
    root = make_project(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": "class Base:\n    pass\n",
                                   "pkg/m.py": textwrap.dedent(_AGENT)})
    assert never_runs(_model(root, "pkg/m.py"), 11) is None


# -- calls, and what ends a block


_STEP = textwrap.dedent("""
    import functools
    import jax

    @functools.partial(jax.jit, static_argnums=1)
    def step(x, n):
        y = x * n
        return y + undefined_scale

    def train(xs):
        for x in xs:
            loss = step(x, 2)
            print(float(loss))  # here
    """)


def test_a_call_of_a_function_that_always_raises(tmp_path):
    why = _dead(tmp_path, _STEP)
    assert why.startswith("line 12 always raises: it calls `step`, which always raises: on line 8, "
                          "`undefined_scale` is defined nowhere (NameError)")


@pytest.mark.parametrize("change", [
    ("    y = x * n\n", "    if n:\n        return x\n"),  # may return first
    ("@functools.partial(jax.jit, static_argnums=1)", "@my_cache"),  # a decorator jaxlint does not know
    ("    return y + undefined_scale", "    yield y + undefined_scale"),  # a generator runs nothing when called
    ("def step(x, n):", "def step(x, n):\n    pass\nstep = jax.jit(print)\ndef other(x, n):"),  # rebound
])
def test_calls_not_known_to_raise(tmp_path, change):
    assert _dead(tmp_path, _STEP.replace(*change)) is None


_EXITS = """
import os
import sys
import jax

def main(xs):
    print(len(xs))
    {call}
    for x in xs:
        print(float(x))  # here
"""


@pytest.mark.parametrize("call", ["exit()", "quit()", "sys.exit(0)", "os._exit(1)", "os.abort()"])
def test_a_call_that_ends_the_program_ends_its_block(tmp_path, call):
    # fresh AD: a demo's ``__main__`` block calls ``exit()`` after opening a viewer; the loop after it never runs
    why = _dead(tmp_path, _EXITS.format(call=call))
    assert why == (f"line 8 always raises: `{call.split('(')[0]}()` ends the program; "
                   "the lines after it in its block never run")


@pytest.mark.parametrize("call", [
    "exit = print\n    exit()",  # a user's name shadows the builtin
    "if not xs:\n        sys.exit(0)",  # only in one arm
    "sys.exit",  # not called
    "sys.exc_info()",  # another function of sys
])
def test_calls_that_do_not_end_the_program(tmp_path, call):
    assert _dead(tmp_path, _EXITS.format(call=call)) is None


@pytest.mark.parametrize("stmt", ["return", "raise ValueError('old code')", "continue", "break"])
def test_what_ends_a_block(tmp_path, stmt):
    src = f"def train(xs):\n    for x in xs:\n        {stmt}\n        print(float(x))  # here\n"
    assert _dead(tmp_path, src).startswith(f"`{stmt.split()[0]}` on line 3 ends the block")


def test_only_the_block_of_the_statement_is_dead(tmp_path):
    src = """
    def train(xs, ok):
        try:
            y = missing_name
            print(y)  # in the try
        except NameError:
            pass
        print(float(xs))  # after the try
        if ok:
            raise ValueError
        print(float(xs))  # after the if
        with open("f") as fh:
            fh.write(missing_name)
        print(float(xs))  # after the with
        for x in xs:
            print(missing_name)
        print(float(xs))  # after the loop
    """
    assert _dead(tmp_path, src, "# in the try") is not None
    for mark in ("# after the try", "# after the if", "# after the with", "# after the loop"):
        assert _dead(tmp_path, src, mark) is None, mark


def test_a_conditional_part_of_a_statement_may_not_run(tmp_path):
    src = """
    def train(xs, flag):
        y = xs if flag else missing_name
        z = flag and missing_name
        w = [missing_name for _ in xs]
        f = lambda: missing_name
        print(float(xs))  # here
    """
    assert _dead(tmp_path, src) is None


# -- the engine


def test_findings_on_lines_that_never_run_are_opt_in(tmp_path):
    src = textwrap.dedent("""
    from time import time

    import jax

    @jax.jit
    def step(params, batch):
        return params, (params * batch).sum()

    def train(params, batches):
        start = time.time()
        for batch in batches:
            params, loss = step(params, batch)
            print(float(loss))
        return params
    """)
    root = _repo(tmp_path, {"train.py": src, "run.py": "from train import train\ntrain(None, [])\n"})
    res = check_path(str(root / "train.py"), [r() for r in jaxlint_rules.ALL_RULES])
    assert res.internal_errors == []
    (f,) = [f for f in res.findings if f.code == "JAX201"]
    assert f.line == 14 and f.opt_in.startswith("line 11 always raises: `time` is the function `time.time`")
    fixed = src.replace("from time import time", "import time")
    (root / "train.py").write_text(fixed)
    res = check_path(str(root / "train.py"), [r() for r in jaxlint_rules.ALL_RULES])
    assert [(f.line, f.opt_in) for f in res.findings if f.code == "JAX201"] == [(14, None)]


def test_a_method_referred_to_only_on_lines_that_never_run(tmp_path):
    from jaxlint.model.python.unreferenced import unreferenced_method

    src = textwrap.dedent("""
    import jax

    class Agent:
        def train(self, s):
            loss = self.loss(s)
            self.soft_update(0.5)
            return loss

        def loss(self, s):
            return self.critc * s

        def soft_update(self, tau):
            return jax.tree_map(lambda x: tau * x, self.params)
    """)
    root = _repo(tmp_path, {"agent.py": src, "run.py": "from agent import Agent\nAgent().train(1)\n"})
    m = _model(root, "agent.py")
    soft = next(f for f in m.functions if f.name == "soft_update")
    assert unreferenced_method(m, soft) is not None
    (root / "agent.py").write_text(src.replace("class Agent:\n", "class Agent:\n    def __init__(self):\n        self.critc = 1\n\n"))
    m = _model(root, "agent.py")
    soft = next(f for f in m.functions if f.name == "soft_update")
    assert unreferenced_method(m, soft) is None


# --------------------------------------------------------------------------- arms a constant test never takes


@pytest.mark.parametrize("source, expect", [
    # fresh AR: a flag set to True just above its `if`: the `else` (a per-step print of the loss) never runs
    ("""
     def train(step, xs):
         for i in range(1000):
             loss = step(xs)
             show_output = True
             if show_output:
                 print("ok")
             else:
                 print(float(loss))  # here
     """, "the test on line 6 is always true (`show_output` is only ever bound to `True`): its `else` never runs"),
    ("""
     DEBUG = False

     def train(step, xs):
         for i in range(1000):
             loss = step(xs)
             if DEBUG:
                 print(float(loss))  # here
     """, "the test on line 7 is always false (`DEBUG` is only ever bound to `False`): its body never runs"),
    ("""
     def train(step, xs):
         if not 1:
             print(step(xs))  # here
     """, "the test on line 3 is always false (`not 1` is a constant): its body never runs"),
])
def test_an_arm_a_constant_test_never_takes(tmp_path, source, expect):
    assert _dead(tmp_path, source) == expect


@pytest.mark.parametrize("source", [
    # bound to two truth values, a parameter, a loop target, declared global and rebound, an expression
    "import os\nFLAG = True\nif os.environ:\n    FLAG = False\nif FLAG:\n    pass\nelse:\n    print(1)  # here\n",
    "def f(show):\n    if show:\n        pass\n    else:\n        print(1)  # here\n",
    "for show in (True, False):\n    if show:\n        pass\n    else:\n        print(1)  # here\n",
    "SHOW = True\n\ndef off():\n    global SHOW\n    SHOW = False\n\nif SHOW:\n    pass\nelse:\n    print(1)  # here\n",
    "SHOW = bool(1)\nif SHOW:\n    pass\nelse:\n    print(1)  # here\n",
    "SHOW = True\nSHOW += 0\nif SHOW:\n    pass\nelse:\n    print(1)  # here\n",
    # the arm that does run
    "SHOW = True\nif SHOW:\n    print(1)  # here\n",
])
def test_arms_not_known_dead(tmp_path, source):
    assert _dead(tmp_path, source) is None


@pytest.mark.parametrize("decorator, dead", [
    ("@jax.jit", True),
    ("@partial(jax.jit, static_argnames=['vocab_size'])", True),
    ("@functools.partial(jax.jit, static_argnums=(1,))", True),
    ("@jax.vmap", True),
    ("@register", False),          # a decorator that may change the signature: not judged
    ("@partial(register, x=1)", False),
])
def test_a_call_of_a_jitted_function_without_a_required_argument_always_raises(tmp_path, decorator, dead):
    # fresh AR: a transformer's jitted `forward(key, params, x, vocab_size)` called without `vocab_size`: the
    # sampler's line after it never runs
    source = f"""
    import functools
    from functools import partial
    import jax

    {decorator}
    def forward(key, params, x, vocab_size):
        return x

    def sample(params, x):
        logits = forward(None, params, x)
        print(float(logits))  # here
    """
    why = _dead(tmp_path, source)
    assert (why is not None) == dead
    if dead:
        assert "without its required argument `vocab_size` (TypeError)" in why


@pytest.mark.parametrize("callee, args, dead", [
    ("def step(regrets, strategy, key, config):", "regrets, strategy, key, config, a, b, c", True),  # 7 for 4
    ("def step(regrets, strategy, key, config):", "regrets, strategy", True),  # `key` missing
    ("def step(regrets, strategy, key, config):", "regrets, strategy, key, config", False),
    ("def step(regrets, strategy, *rest):", "regrets, strategy, key, config, a, b, c", False),  # *args
    ("@register\ndef step(regrets, strategy, key, config):", "regrets, strategy", False),  # may change it
    ("@jax.jit\ndef step(regrets, strategy, key, config):", "regrets, strategy", True),
    # bound again in a module-level block: which `step` runs is not certain
    ("try:\n    from fast import step\nexcept ImportError:\n    pass\ndef step(regrets, strategy, key, config):",
     "regrets, strategy", False),
])
def test_a_call_of_another_modules_function_with_the_wrong_arguments_always_raises(tmp_path, callee, args, dead):
    """Fresh AZ: scripts time `_cfr_step_pure(...)`, imported from the project's trainer, with seven arguments
    for its four, inside a `try` that catches the TypeError: the clock read after it never runs. The callee's
    `def` is read from its module (a signature-keeping transform kept, other decorators not judged)."""
    trainer = f"import jax\n\n{callee}\n    return regrets, strategy\n"
    source = f"""
    import time
    import jax
    from pkg.trainer import step

    def bench(regrets, strategy, key, config, a, b, c):
        try:
            start = time.time()
            out = step({args})
            elapsed = time.time() - start  # here
        except Exception as e:
            print(e)
    """
    why = _dead(tmp_path, source, others={"pkg/trainer.py": trainer})
    assert (why is not None) == dead
    if dead:
        assert "(TypeError)" in why and "`step` calls `step`" in why
