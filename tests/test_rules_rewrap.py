"""JAX104 jit-rebuilt-per-step: a jax.jit/jax.pmap wrapper rebuilt every step around the same
function (no recompile, a slow dispatch each step); near misses; and, under jax, the measured effect."""

from __future__ import annotations

import time

import pytest

from ruletools import assert_marked, default_findings, findings, messages, opt_in_findings

LOOP = """
    import jax
    import jax.numpy as jnp
    from jax.random import split

    def train_step(params, batch):
        return params - 0.1 * jnp.mean(batch)

    def train(params, batches, key, n):
        for i in range(n):
            key, sub = jax.jit(jax.random.split)(key)  # expect: JAX104 (opt-in)
            key, sub = jax.jit(split)(key)  # expect: JAX104 (opt-in)
            step = jax.jit(train_step, out_shardings=REP)  # expect: JAX104
            params = step(params, batches[i])
        return params
"""


def test_rebuilt_in_a_loop_of_steps():
    assert_marked(LOOP)
    msgs = messages(LOOP, "JAX104")
    assert all("does not recompile (the trace cache hits)" in m and "create it once, before the loop" in m
               for m in msgs)
    assert sorted("about 0.1-1 ms (10 to 300 leaves) more per call" in m for m in msgs) == [False, False, True]
    assert findings(LOOP, "JAX101") == [] and findings(LOOP, "JAX102") == []
    # a plain jit has no donation or shardings to set up again: its cost hides behind most steps
    light = opt_in_findings(LOOP, "JAX104")
    assert [line for line, _, _ in light] == [11, 12]
    assert all(r.startswith("a `jax.jit` without shardings rebuilt costs about 0.05-0.2 ms more per call") for _, _, r in light)


def test_hoisted_wrapper_is_quiet():
    assert findings("""
        import jax

        def train(key, n):
            split = jax.jit(jax.random.split)
            for i in range(n):
                key, sub = split(key)
            return key
    """, "JAX104") == []


def test_cached_or_stored_wrapper_is_quiet():
    assert findings("""
        import functools
        import jax

        def f(x):
            return x * 2

        _cache = {}

        def run(xs, n):
            for i in range(n):
                if "f" not in _cache:
                    _cache["f"] = jax.jit(f)
                xs = _cache["f"](xs)
            return xs

        @functools.lru_cache
        def compiled(x):
            return jax.jit(f)(x)

        class Model:
            def step(self, x):
                self.fn = jax.jit(f)
                return x
    """, "JAX104") == []


def test_a_loop_of_a_few_literal_iterations_is_quiet():
    src = """
        import jax

        def f(x):
            return x * 2

        x = 1.0
        for i in range(20):
            x = jax.jit(f, in_shardings=REP)(x)
        for mode in ("a", "b"):
            x = jax.jit(f, in_shardings=REP)(x)
    """
    assert findings(src, "JAX104") == []
    assert default_findings(src.replace("range(20)", "range(n_steps)"), "JAX104") == [(9, "JAX104")]


def test_a_new_callable_stays_jax101_and_jax102():
    src = """
        import jax

        def f(x, a):
            return x * a

        class Env:
            def step(self, x):
                return x + 1

        def train(x, n, env: Env):
            for i in range(n):
                x = jax.jit(lambda v: f(v, 2.0))(x)  # expect: JAX101
                x = jax.jit(env.step)(x)  # expect: JAX101
            return x

        def update(x):
            g = jax.jit(lambda v: f(v, 3.0))  # expect: JAX102
            return g(x)
    """
    assert_marked(src)
    assert findings(src, "JAX104") == []


def test_stable_callee_in_a_function_that_runs_once_is_quiet():
    src = """
        import jax

        def f(x):
            return x * 2

        def evaluate(x):
            return jax.jit(f)(x)

        print(evaluate(1.0))
    """
    assert findings(src, "JAX104") == []  # its one call is made once, at module level
    # called only from `main`: only a name says it runs once, which decides at most opt-in
    named = src.replace("print(evaluate(1.0))", "def main():\n            print(evaluate(1.0))")
    assert named != src and default_findings(named, "JAX104") == [] and opt_in_findings(named, "JAX104")


def test_per_call_of_a_function_that_runs_every_step():
    src = """
        import jax

        def train_step(p, b):
            return p - b

        def update_params(p, b, global_step):
            fn = jax.jit(train_step, in_shardings=None, out_shardings=None)  # expect: JAX104
            return fn(p, b)

        def loop(p, batches, n):
            for i in range(n):
                p = update_params(p, batches[i], i)
            return p
    """
    assert_marked(src)
    (msg,) = messages(src, "JAX104")
    assert "rebuilt on every call of `update_params` (`update_params` is called in the loop on line 12)" in msg
    assert "about 0.1-1 ms (10 to 300 leaves) more per call" in msg  # with in_shardings: measured more


def test_unknown_repetition_or_stored_callee_is_opt_in():
    src = """
        import jax

        def f(x):
            return x * 2

        def helper_with_work(x):
            y = x + 1
            z = jax.jit(f, in_shardings=REP)(y)
            return z * 2

        class Holder:
            def __init__(self, fn):
                self.fn = fn

            def run(self, x, n):
                for i in range(n):
                    x = jax.jit(self.fn, in_shardings=REP)(x)
                return x
    """
    got = opt_in_findings(src, "JAX104")
    assert [line for line, _, _ in got] == [9, 18]
    assert got[0][2].startswith("per-step unknown") and got[1][2].startswith("same-callee unknown")
    assert default_findings(src, "JAX104") == []


def test_periodic_guard_reported_only_beside_the_carried_step():
    src = """
        import jax

        def update(s, k):
            return s + k

        def energy(s):
            return (s ** 2).sum()

        def train(s, key, n, every):
            logs = []
            for i in range(n):
                s = s * 0.9
                if i % every == 0:
                    key, sub = jax.jit(jax.random.split)(key)  # expect: JAX104 (opt-in)
                    s = jax.jit(update, out_shardings=REP)(s, sub)  # expect: JAX104
                if i % 100 == 0:
                    logs.append(jax.jit(energy)(s))
            return s, logs
    """
    assert_marked(src)


def test_in_test_code_is_opt_in():
    src = LOOP.replace("def train(", "def test_train(")
    assert default_findings(src, "JAX104") == [] and len(opt_in_findings(src, "JAX104")) == 3


# --------------------------------------------------------------------------- under jax: the effect


def test_a_rebuilt_wrapper_does_not_recompile_but_dispatches_slower():
    """The cost JAX104 states: rebuilding `jax.jit` around the same function compiles nothing
    again (counted with jax's own compile events) but each call is slower than a call of a wrapper
    made once (the minimum of several timed runs, a ratio with a wide margin: a loaded machine
    slows both)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    compiles = [0]

    def listen(event, _secs, **_kw):
        if "backend_compile" in event:
            compiles[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listen)

    def f(tree):
        return jax.tree_util.tree_map(lambda a: a * 0.5 + 1.0, tree)

    x = {f"w{i}": jnp.ones(8) for i in range(10)}
    hoisted = jax.jit(f)
    jax.block_until_ready(hoisted(x))
    start_compiles = compiles[0]

    def best(run, calls=200, repeats=5):
        out = []
        for _ in range(repeats):
            t = time.perf_counter()
            y = x
            for _ in range(calls):
                y = run(y)
            jax.block_until_ready(y)
            out.append(time.perf_counter() - t)
        return min(out)

    fast = min(best(hoisted), best(hoisted))
    slow = best(lambda y: jax.jit(f)(y))
    assert compiles[0] == start_compiles  # no recompile: the trace and compile caches hit
    assert slow > 1.3 * fast, (slow, fast)  # measured 2.5-3x on CPU (bench/jit_wrapper_cost.py)


# --------------------------------------------------------------------------- the model's facts


def test_model_same_callee_and_the_step_beside_a_periodic_if():
    import ast
    import textwrap

    from jaxlint.model import build_model
    from jaxlint.model.facts import rewrapping
    from jaxlint.model.policy import looprecord

    src = textwrap.dedent("""
        import jax

        def update(s, k):
            return s + k

        class Holder:
            def __init__(self, fn):
                self.fn = fn

            def run(self, s, key, n, every):
                logs = []
                for i in range(n):
                    if i % every == 0:
                        s = jax.jit(update)(s, key)
                        logs.append(jax.jit(self.fn)(s))
                        logs.append(jax.pmap(self.run)(s))
                return s
    """)
    tree = ast.parse(src)
    m = build_model(tree, "t.py")
    wraps = {ast.unparse(w.target): w for w in m.jit_wraps}
    loops = wraps["update"].ctx.loops
    what, fact = rewrapping.same_callee(m, wraps["update"], loops)
    assert what == "the function `update`" and fact.proven
    assert rewrapping.same_callee(m, wraps["self.fn"], loops)[1].unknown  # read from an object
    assert rewrapping.same_callee(m, wraps["self.run"], loops)[1].proven  # pmap: an equal bound method
    ctx, loop = wraps["update"].ctx, loops[-1]
    guard = ctx.guards[-1][0]
    # the guarded `s = jax.jit(update)(s, key)` is the carried step; for the wrapper of `self.fn`
    # (a value appended to a host list) it is the step beside it
    assert rewrapping.compiled_beside(m, ctx, loop, guard, wraps["update"].node) is None
    beside = rewrapping.compiled_beside(m, ctx, loop, guard, wraps["self.fn"].node)
    assert beside is not None and beside.func is wraps["update"].node
    steps = rewrapping.loop_steps(m, ctx, loop, wraps["self.fn"].node, looprecord.record(m, loop))
    assert steps.proven and "runs it with the compiled" in steps.why
