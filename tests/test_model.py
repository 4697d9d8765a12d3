"""Unit tests of the module model (jaxlint.model.build_model): name resolution, traced
functions, loop contexts and JAX-value inference."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import ModuleModel, build_model


def build(src: str) -> tuple[ast.Module, ModuleModel]:
    tree = ast.parse(textwrap.dedent(src))
    return tree, build_model(tree)


def loads(tree: ast.AST, spelled: str) -> list[ast.AST]:
    """Name/Attribute nodes read in the tree whose source is ``spelled``, in source order."""
    out = [n for n in ast.walk(tree)
           if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load) and ast.unparse(n) == spelled]
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def call_to(tree: ast.AST, name: str) -> ast.Call:
    """The (only) call of a plain name ``name(...)``."""
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name]
    assert len(found) == 1, f"{len(found)} calls to {name}"
    return found[0]


def func(model: ModuleModel, name: str):
    found = [f for f in model.functions if f.name == name]
    assert len(found) == 1, f"{len(found)} functions named {name}"
    return found[0]


# --------------------------------------------------------------------------- resolve


@pytest.mark.parametrize("imports, spelled, qualname", [
    ("import jax", "jax.jit", "jax.jit"),
    ("import jax", "jax.numpy.zeros", "jax.numpy.zeros"),
    ("import jax as J", "J.jit", "jax.jit"),
    ("from jax import jit", "jit", "jax.jit"),
    ("from jax import jit as J", "J", "jax.jit"),
    ("from jax import numpy as jnp", "jnp.zeros", "jax.numpy.zeros"),
    ("import jax.numpy as jnp", "jnp.zeros", "jax.numpy.zeros"),
    ("import jax.numpy as np", "np.zeros", "jax.numpy.zeros"),
    ("import numpy as np", "np.zeros", "numpy.zeros"),
    ("from functools import partial", "partial", "functools.partial"),
    ("from jax import lax", "lax.scan", "jax.lax.scan"),
    ("import jax", "float", "builtins.float"),
    ("import jax", "print", "builtins.print"),
])
def test_resolve_import_spellings(imports, spelled, qualname):
    tree, m = build(f"""
    {imports}
    value = {spelled}
    """)
    (node,) = loads(tree, spelled)
    assert m.resolve(node) == qualname


def test_resolve_import_spellings_inside_a_function():
    tree, m = build("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def f(x):
        return jax.jit(jnp.sin), np.zeros(3), float(x)
    """)
    assert [m.resolve(n) for n in loads(tree, "jax.jit")] == ["jax.jit"]
    assert [m.resolve(n) for n in loads(tree, "jnp.sin")] == ["jax.numpy.sin"]
    assert [m.resolve(n) for n in loads(tree, "np.zeros")] == ["numpy.zeros"]
    assert [m.resolve(n) for n in loads(tree, "float")] == ["builtins.float"]


def test_resolve_parameter_shadowing_an_import():
    tree, m = build("""
    import jax.numpy as jnp

    def f(jnp):
        return jnp.zeros(3)

    y = jnp.zeros(3)
    """)
    inner, outer = loads(tree, "jnp.zeros")
    assert m.resolve(inner) is None
    assert m.resolve(outer) == "jax.numpy.zeros"


def test_resolve_local_variable_shadowing_an_import():
    tree, m = build("""
    import jax.numpy as jnp

    def f():
        jnp = load_backend()
        return jnp.zeros(3)
    """)
    (node,) = loads(tree, "jnp.zeros")
    assert m.resolve(node) is None


def test_resolve_local_shadowing_outside_a_call():
    # Same as above, but the attribute is not the callee of a call, so no rule resolved it while
    # the model was built: resolve() must still see the function's scope.
    tree, m = build("""
    import jax.numpy as jnp

    def f():
        jnp = load_backend()
        zeros = jnp.zeros
        return zeros(3)
    """)
    (node,) = loads(tree, "jnp.zeros")
    assert m.resolve(node) is None


def test_resolve_user_defined_print_shadows_the_builtin():
    tree, m = build("""
    import jax

    def print(*args):
        pass

    print("hello")
    float("1.5")
    """)
    (p,) = loads(tree, "print")
    (f,) = loads(tree, "float")
    assert m.resolve(p) is None
    assert m.resolve(f) == "builtins.float"


# --------------------------------------------------------------------------- traced functions


def test_decorators_jit_and_pmap():
    _, m = build("""
    import jax
    from jax import jit

    @jax.jit
    def a(x, y):
        return x + y

    @jit
    def b(x):
        return x

    @jax.pmap
    def c(x):
        return x
    """)
    for name, params in [("a", {"x", "y"}), ("b", {"x"}), ("c", {"x"})]:
        f = func(m, name)
        assert f.traced, name
        assert f.static_names() == set(), name
        assert f.tracer_params == params, name


def test_partial_jit_with_static_argnums_and_argnames():
    _, m = build("""
    from functools import partial
    import jax

    @partial(jax.jit, static_argnums=1)
    def by_num(x, n):
        return x

    @partial(jax.jit, static_argnames=("n",))
    def by_name(x, n):
        return x

    @partial(jax.jit, static_argnums=(1, 2))
    def several(x, n, mode):
        return x
    """)
    for name in ("by_num", "by_name"):
        f = func(m, name)
        assert f.traced
        assert f.static_names() == {"n"}
        assert f.tracer_params == {"x"}
    several = func(m, "several")
    assert several.static_names() == {"n", "mode"}
    assert several.tracer_params == {"x"}


def test_equinox_and_flax_nnx_jit():
    _, m = build("""
    import equinox as eqx
    from flax import nnx

    @eqx.filter_jit
    def e(model, x):
        return model(x)

    @nnx.jit
    def n(model, x):
        return model(x)
    """)
    e, n = func(m, "e"), func(m, "n")
    assert e.traced and n.traced
    # filter_jit decides per value which arguments are traced: none is assumed to be a tracer.
    assert e.tracer_params == set()
    assert n.tracer_params == {"model", "x"}


def test_jit_call_binding_a_new_name_and_rebinding_the_same_name():
    _, m = build("""
    import jax

    def f(x):
        return x * 2

    f2 = jax.jit(f)

    def g(x, k):
        return x

    g = jax.jit(g, static_argnums=1)
    """)
    f, g = func(m, "f"), func(m, "g")
    assert f.traced and f.tracer_params == {"x"}
    assert g.traced and g.static_names() == {"k"} and g.tracer_params == {"x"}


def test_jit_of_a_bound_method():
    _, m = build("""
    import jax

    class Model:
        def __init__(self):
            self.fast = jax.jit(self.apply, static_argnums=1)

        def apply(self, x, training):
            return x
    """)
    apply = func(m, "apply")
    assert apply.traced
    # static_argnums of a bound method count from the parameter after self
    assert "training" in apply.static_names()
    assert apply.tracer_params == {"x"}
    assert not func(m, "__init__").traced


@pytest.mark.parametrize("call, bodies", [
    ("lax.scan(body, 0.0, xs)", ["body"]),
    ("lax.fori_loop(0, 10, body, xs)", ["body"]),
    ("lax.while_loop(cond, body, xs)", ["cond", "body"]),
    ("lax.cond(xs.sum() > 0, body, other, xs)", ["body", "other"]),
    ("lax.switch(1, [body, other], xs)", ["body", "other"]),
    ("lax.map(body, xs)", ["body"]),
])
def test_lax_control_flow_bodies_are_traced(call, bodies):
    _, m = build(f"""
    import jax
    from jax import lax

    def body(a, b=None):
        return a

    def cond(a):
        return a

    def other(a):
        return a

    def run(xs):
        return {call}
    """)
    for name in ("body", "cond", "other"):
        f = func(m, name)
        assert f.traced == (name in bodies), name
        if name in bodies:
            assert "a" in f.tracer_params
    assert not func(m, "run").traced


def test_lax_scan_lambda_body_is_traced():
    _, m = build("""
    from jax import lax

    def run(xs):
        return lax.scan(lambda c, x: (c + x, x), 0.0, xs)
    """)
    (lam,) = [f for f in m.functions if f.name == "<lambda>"]
    assert lam.traced and lam.tracer_params == {"c", "x"}


def test_transforms_grad_and_vmap():
    _, m = build("""
    import jax

    def loss(w, x):
        return (w * x).sum()

    def per_example(x, scale):
        return x * scale

    def by_argnums(a, b, c):
        return a * b * c

    def jitted_loss(w, x):
        return (w * x).sum()

    grad_fn = jax.grad(loss)
    batched = jax.vmap(per_example, in_axes=(0, None))
    g2 = jax.grad(by_argnums, argnums=(0, 2))
    jit_grad = jax.jit(jax.grad(jitted_loss))
    """)
    loss = func(m, "loss")
    assert loss.traced and loss.tracer_params == {"w"}  # grad alone traces only the argnums
    jitted = func(m, "jitted_loss")
    assert jitted.traced and jitted.tracer_params == {"w", "x"}  # under jit every argument is a tracer
    per_example = func(m, "per_example")
    assert per_example.traced and per_example.tracer_params == {"x"}
    by_argnums = func(m, "by_argnums")
    assert by_argnums.traced and by_argnums.tracer_params == {"a", "c"}


def test_vmap_decorator_and_plain_vmap():
    _, m = build("""
    import jax

    @jax.vmap
    def dist(a, b):
        return ((a - b) ** 2).sum()

    def norm(v):
        return (v ** 2).sum()

    norms = jax.vmap(norm)
    """)
    assert func(m, "dist").tracer_params == {"a", "b"}
    assert func(m, "norm").traced and func(m, "norm").tracer_params == {"v"}


def test_same_module_callees_are_traced_with_their_tracer_params():
    _, m = build("""
    import jax
    import jax.numpy as jnp

    def dense(x, w, activation):
        return activation_fn(x @ w, activation)

    def activation_fn(h, activation):
        return jnp.tanh(h) if activation == "tanh" else h

    def make_mask(n):
        return n

    @jax.jit
    def forward(x, w):
        mask = make_mask(8)
        return dense(x, w, "tanh") * mask
    """)
    dense = func(m, "dense")
    assert dense.traced and dense.tracer_params == {"x", "w"}
    act = func(m, "activation_fn")
    assert act.traced and act.tracer_params == {"h"}
    mask = func(m, "make_mask")
    assert mask.tracer_params == set()


def test_untraced_functions_stay_untraced():
    _, m = build("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return jnp.sin(x)

    def train(x, n):
        for _ in range(n):
            x = step(x)
        return x

    def helper(y):
        return y + 1

    value = helper(3)
    """)
    for name in ("train", "helper"):
        f = func(m, name)
        assert not f.traced, name
        assert f.tracer_params == set(), name
    assert func(m, "step").traced


def test_pure_callback_host_function_is_not_traced():
    _, m = build("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def host_fn(x):
        return np.asarray(x) * 2

    @jax.jit
    def f(x):
        return jax.pure_callback(host_fn, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    """)
    assert func(m, "f").traced
    assert not func(m, "host_fn").traced


# --------------------------------------------------------------------------- loop contexts


_LOOPS = """
import jax
import jax.numpy as jnp

def f(xs, n, verbose, log_every):
    for x in body_iter(xs):
        in_body(x)
    else:
        in_else()
    while in_test(n):
        pass
    ys = [in_comp(x) for x in xs]
    for step in range(n):
        if step % 100 == 0:
            g_mod()
        if step == n - 1:
            g_last()
        if (step + 1) % log_every == 0 and step > 0:
            g_every()
        if verbose:
            g_verbose()
        unguarded()
    i = 0
    while i < n:
        if i % 10 == 0:
            g_counter()
        i += 1
"""


def _loop_kinds(m: ModuleModel, call: ast.Call) -> list[tuple[str, int]]:
    return [(lp.kind, lp.node.lineno) for lp in m.context(call).loops]


def test_context_loops():
    tree, m = build(_LOOPS)
    assert _loop_kinds(m, call_to(tree, "in_body")) == [("for", 6)]
    assert _loop_kinds(m, call_to(tree, "body_iter")) == []  # the iterable is evaluated once
    assert _loop_kinds(m, call_to(tree, "in_else")) == []  # the else clause runs once
    assert _loop_kinds(m, call_to(tree, "in_test")) == [("while", 10)]  # the test runs every iteration
    assert _loop_kinds(m, call_to(tree, "in_comp")) == [("comprehension", 12)]


@pytest.mark.parametrize("name, periodic", [
    ("g_mod", True),
    ("g_last", True),
    ("g_every", True),
    ("g_verbose", False),
    ("unguarded", False),
    ("g_counter", True),
])
def test_periodic_guard(name, periodic):
    tree, m = build(_LOOPS)
    ctx = m.context(call_to(tree, name))
    (loop,) = ctx.loops
    assert m.periodic_guard(ctx, loop) is periodic


_NEST = """
import jax
import jax.numpy as jnp

@jax.jit
def train_step(p, b):
    return p - b, jnp.sum(b)

def train(p, epochs, batches, metrics):
    for epoch in range(epochs):
        for b in batches:
            p, loss = train_step(p, b)
            in_step(loss)
            for k, v in metrics.items():
                in_small(v)
        after_steps(loss)
    for name in metrics:
        no_jax(name)
    return p
"""


def test_hot_loop_is_the_innermost_loop_running_jax_work():
    tree, m = build(_NEST)
    step_loop = m.context(call_to(tree, "train_step")).loops[-1]
    assert step_loop.node.lineno == 11
    assert m.hot_loop(m.context(call_to(tree, "in_step"))) is step_loop
    # A small host-side loop inside the step loop: the step loop is still the one that counts.
    assert m.hot_loop(m.context(call_to(tree, "in_small"))) is step_loop
    # In the epoch loop after the step loop: runs once per epoch.
    assert m.hot_loop(m.context(call_to(tree, "after_steps"))) is None
    # A loop with no JAX work at all.
    assert m.hot_loop(m.context(call_to(tree, "no_jax"))) is None


def test_loop_runs_jax_work():
    tree, m = build(_NEST)
    epoch_loop, step_loop = m.context(call_to(tree, "train_step")).loops
    small = m.context(call_to(tree, "in_small")).loops[-1]
    other = m.context(call_to(tree, "no_jax")).loops[-1]
    assert m.loop_runs_jax_work(step_loop)
    assert m.loop_runs_jax_work(epoch_loop)  # through the nested step loop
    assert not m.loop_runs_jax_work(small)
    assert not m.loop_runs_jax_work(other)


# --------------------------------------------------------------------------- JAX values


_VALUES = """
import jax
import jax.numpy as jnp
import numpy as np

@jax.jit
def train_step(params, batch):
    loss = jnp.mean((params - batch) ** 2)
    return params - 0.1 * loss, loss

def loss_fn(w, x):
    return jnp.sum((x @ w) ** 2)

def run(params, batch, key, w, x):
    a = jnp.zeros(3)
    k1, k2 = jax.random.split(key)
    r = jax.random.normal(k1, (3,))
    s = a.shape
    n = a.shape[0]
    params, loss = train_step(params, batch)
    val, grads = jax.value_and_grad(loss_fn)(w, x)
    c = jnp.sum(a)
    before = sink(c)
    c = float(c)
    lr = 0.1 * 3
    h = np.asarray(a)
    u = some_lib.compute(a)
    t = a.tolist()
    return sink(a, k1, r, s, n, params, loss, val, grads, c, lr, h, u, t, batch)
"""

_JAX = {"a", "k1", "r", "params", "loss", "val", "grads"}
_NOT_JAX = {"s", "n", "c", "lr", "h", "u", "t", "batch"}


def _sink_args(tree: ast.AST) -> tuple[ast.Call, list[ast.Name]]:
    sinks = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "sink"]
    last = max(sinks, key=lambda c: c.lineno)
    return last, last.args


@pytest.mark.parametrize("name", sorted(_JAX | _NOT_JAX))
def test_is_jax(name):
    tree, m = build(_VALUES)
    call, args = _sink_args(tree)
    (arg,) = [a for a in args if a.id == name]
    assert m.is_jax(arg, m.scope_at(call)) is (name in _JAX)


def test_is_jax_follows_rebinding_by_position():
    tree, m = build(_VALUES)
    first = min((n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "sink"),
                key=lambda c: c.lineno)
    # ``c`` is still the jnp.sum result here; it becomes a Python float only on the next line.
    assert m.is_jax(first.args[0], m.scope_at(first))


def test_is_jax_on_expressions():
    tree, m = build("""
    import jax
    import jax.numpy as jnp

    def f(x):
        y = jnp.ones(3)
        return sink(jnp.ones(3) + 1, y * 2.0, y[0], y.shape, y.T, y.at[0].set(1.0), 3.0 * 2)
    """)
    call = call_to(tree, "sink")
    got = [m.is_jax(a, m.scope_at(call)) for a in call.args]
    assert got == [True, True, True, False, True, True, False]


def test_is_jax_without_explicit_scope():
    # is_jax(expr) documents scope as optional; a name read inside a function must still be
    # looked up in that function, not at module level.
    tree, m = build("""
    import jax.numpy as jnp

    def f():
        a = jnp.zeros(3)
        return sink(a)
    """)
    (arg,) = call_to(tree, "sink").args
    assert m.is_jax(arg)


# --------------------------------------------------------------------------- limits


def test_inference_work_budget_answers_unknown_once_spent():
    from jaxlint.model.limits import Work

    src = "import jax\nj1 = jax.jit\nj2 = j1\n\ndef f(x):\n    return x\n\ng = j2(f)\n"
    tree = ast.parse(src)
    call = tree.body[-1].value
    model = build_model(tree)
    assert model.resolve(call.func) == "jax.jit"  # the alias chain j2 -> j1 -> jax.jit
    probe = ast.Name(id="j2", ctx=ast.Load(), lineno=9, col_offset=0)  # a use the analysis has not memoized
    assert model.resolve(probe, model.module_scope) == "jax.jit"
    model.work = Work()
    model.work.left = 0  # nothing left: every chain step answers "unknown"
    probe2 = ast.Name(id="j2", ctx=ast.Load(), lineno=9, col_offset=0)
    assert model.resolve(probe2, model.module_scope) is None


def test_inference_work_budget_grows_with_the_file():
    from jaxlint.model import limits

    small, large = limits.Work(10), limits.Work(10_000)
    assert large.left - small.left == limits.WORK_PER_LINE * 9_990


def test_a_callers_trace_cause_is_that_function_not_every_function_of_its_name():
    # Two functions named ``step``: the first only differentiated (concrete values), the second
    # jitted. ``helper`` is called from the first only, so it is not staged.
    src = textwrap.dedent("""
        import jax

        def helper(x):
            if x > 0:
                return x
            return -x

        def step(x):
            return helper(x)

        g = jax.grad(step)

        def step(y):
            return y * 2

        fast = jax.jit(step)
    """)
    m = build_model(ast.parse(src))
    helper, first, second = (f for f in m.functions if f.name in ("helper", "step"))
    assert [c.caller for c in helper.trace_causes] == [first]
    assert not m.staging.staged(first) and m.staging.staged(second)
    assert not m.staging.staged(helper)


# --------------------------------------------------------------------------- test code


@pytest.mark.parametrize("path, is_test", [
    ("pkg/tests/foo.py", True), ("pkg/tests/sub/foo.py", True), ("proj/test/x.py", True),
    ("pkg/test_foo.py", True), ("foo_test.py", True), ("a/b/conftest.py", True), ("tests.py", True),
    ("/home/u/test/proj/train.py", False),  # a folder named test far above is not a test module
    ("contest.py", False), ("latest.py", False), ("pkg/testing_utils.py", False), ("attest/x.py", False),
    (None, False),
])
def test_test_modules_by_path(path, is_test):
    assert build_model(ast.parse("x = 1"), path=path).is_test_module is is_test


def test_test_code_by_function_and_class_name():
    src = textwrap.dedent("""
        import jax

        def test_step():
            def helper():
                a = 1
            b = 2

        class TestTrainer:
            def check(self):
                c = 3

        def train():
            d = 4
    """)
    m = build_model(ast.parse(src), path="train.py")
    by_name = {n.targets[0].id: n for n in ast.walk(m.tree) if isinstance(n, ast.Assign)}
    assert m.in_test_code(by_name["a"]) and m.in_test_code(by_name["b"]) and m.in_test_code(by_name["c"])
    assert not m.in_test_code(by_name["d"])


# --------------------------------------------------------------------------- repetition: how often a function runs


def repetition(src: str, name: str):
    _, m = build(src)
    return m, m.repeats(func(m, name))


def test_repeats_when_called_in_a_loop_of_the_module():
    m, rep = repetition("""
        import jax

        def gather(x):
            return jax.pmap(lambda v: jax.lax.all_gather(v, "b"), "b")(x)

        def evaluate(batches):
            for batch in batches:
                gather(batch)
    """, "gather")
    assert rep.kind == "loop" and rep.loop.node.lineno == 8 and rep.call.lineno == 9


@pytest.mark.parametrize("loop", ['for mode in ("train", "eval"):', "for k, v in tree.items():"])
def test_a_loop_over_a_few_options_or_a_structure_is_no_evidence(loop):
    _, rep = repetition(f"""
        import jax

        def gather(x):
            return jax.pmap(lambda v: v, "b")(x)

        def report(tree):
            {loop}
                gather(tree)
    """, "gather")
    assert rep is None


@pytest.mark.parametrize("name", ["step", "update", "act", "__call__", "sample", "insert", "train_step", "step_env"])
def test_per_step_method_names_repeat(name):
    m, rep = repetition(f"""
        class Agent:
            def {name}(self, x):
                return x
    """, name)
    assert rep.kind == "step_name"


def test_repeats_through_a_caller_that_repeats():
    m, rep = repetition("""
        class Learner:
            def update(self, batch):
                return self._gather(batch)

            def _gather(self, x):
                return x
    """, "_gather")
    assert rep.kind == "caller" and rep.via.name == "update" and rep.inner.kind == "step_name"


def test_a_closure_its_factory_returns_repeats():
    m, rep = repetition("""
        import functools

        def fake_pmap(fn):
            @functools.wraps(fn)
            def wrapped(*args):
                return fn(*args)
            return wrapped
    """, "wrapped")
    assert rep.kind == "factory" and rep.via.name == "fake_pmap"


def test_a_training_step_parameter_is_evidence_unless_it_is_the_step_function():
    _, rep = repetition("""
        def evaluate(self, state, step, writer):
            writer.write(step)
    """, "evaluate")
    assert rep.kind == "step_param" and rep.name == "step"
    _, rep = repetition("""
        def loop(step, state, n):
            for _ in range(n):
                state = step(state)
            return state
    """, "loop")
    assert rep is None


@pytest.mark.parametrize("name", ["initialize_model", "setup", "init", "load_params", "train", "run"])
def test_set_up_names_take_no_step_parameter_evidence(name):
    _, rep = repetition(f"""
        def {name}(config, step):
            return config
    """, name)
    assert rep is None


def test_no_evidence_for_a_function_called_once_or_not_at_all():
    m, rep = repetition("""
        def init(cfg):
            return cfg

        def run_experiment(cfg):
            state = init(cfg)
            return state
    """, "init")
    assert rep is None
    assert m.repeats(func(m, "run_experiment")) is None


def test_a_recursive_cycle_is_no_evidence():
    _, rep = repetition("""
        def a(x):
            return b(x)

        def b(x):
            return a(x)
    """, "a")
    assert rep is None


def test_per_step_evidence():
    from jaxlint.model import per_step
    m, rep = repetition("""
        def evaluate(state, step):
            return state

        def sweep(configs):
            for cfg in configs:
                trial(cfg)

        def trial(cfg):
            return cfg

        def train(n):
            for i in range(n):
                log(i)

        def log(i):
            return i
    """, "evaluate")
    assert per_step(rep)
    assert not per_step(m.repeats(func(m, "trial")))  # once per configuration
    assert per_step(m.repeats(func(m, "log")))  # every step of a range loop
    assert not per_step(None)


def test_runs_once():
    _, m = build("""
        def main():
            helper()

        def helper():
            pass

        def initialize_model(rng):
            def inner():
                pass
            return inner()

        def gather(x):
            return x

        def loop_caller(xs):
            for x in xs:
                gather(x)

        def unknown(x):
            return x
    """)
    assert m.runs_once(func(m, "main")) and m.runs_once(func(m, "helper"))
    assert m.runs_once(func(m, "initialize_model")) and m.runs_once(func(m, "inner"))
    assert not m.runs_once(func(m, "gather"))  # called in a loop
    assert not m.runs_once(func(m, "unknown"))  # no caller here: its callers may be anywhere


def test_compute_helper_is_a_small_function_returning_the_compiled_call():
    tree, m = build('''
        import jax

        def gather(x):
            """All-gather."""
            return unreplicate(jax.pmap(lambda v: v, "b")(x))

        def accuracy(params, x, labels):
            score = jax.jit(lambda p, x: p @ x)
            return (score(params, x) == labels).mean()

        def long_one(x):
            a = 1
            b = 2
            c = 3
            return jax.jit(lambda v: v)(x)

        def init_state(rng):
            return jax.jit(lambda r: r)(rng)

        def looping(xs):
            for x in xs:
                pass
            return jax.jit(lambda v: v)(xs)

        def not_returned(x):
            jax.jit(lambda v: v)(x)
            return None
    ''')

    def uses(name):
        f = func(m, name)
        return f, [c for c in f.calls if isinstance(c.func, ast.Call) or (isinstance(c.func, ast.Name) and c.func.id == "score")]

    assert m.compute_helper(*uses("gather"))
    assert m.compute_helper(*uses("accuracy"))
    for name in ("long_one", "init_state", "looping", "not_returned"):
        assert not m.compute_helper(*uses(name)), name


def test_a_primitive_eager_rule_is_not_a_compute_helper():
    _, m = build("""
        import jax

        @p.def_impl
        def _impl(*args, **params):
            return jax.jit(functools.partial(p.bind, **params))(*args)
    """)
    f = func(m, "_impl")
    assert not m.compute_helper(f, [c for c in f.calls if isinstance(c.func, ast.Call)])


def test_own_loop_of_work_that_does_not_run_the_wrapper():
    _, m = build("""
        import jax

        def evaluate(state, it, n):
            for step in range(n):
                batch = next(it)
                eval_step(state, batch)
            out = jax.pmap(lambda v: v, "b")(state)
            return out

        def per_batch(xs):
            g = jax.jit(lambda v: v)
            for x in xs:
                g(x)

        def options(x):
            for mode in ("a", "b"):
                print(mode)
            return jax.jit(lambda v: v)(x)
    """)
    f = func(m, "evaluate")
    pm = [c for c in f.calls if isinstance(c.func, ast.Call)]
    assert m.own_loop(f, pm).node.lineno == 5
    g = func(m, "per_batch")
    assert m.own_loop(g, [c for c in g.calls if isinstance(c.func, ast.Name) and c.func.id == "g"]) is None
    h = func(m, "options")
    assert m.own_loop(h, [c for c in h.calls if isinstance(c.func, ast.Call)]) is None


# --------------------------------------------------------------------------- repetition: what a loop's callable closes over


def jit_target(m, line):
    (wrap,) = [w for w in m.jit_wraps if w.node.lineno == line]
    return (wrap.node if wrap.decorator else wrap.target), wrap.ctx


def test_per_iteration_function_from_an_object_made_in_the_loop():
    from jaxlint.model import varying_names
    _, m = build("""
        import jax
        import functools

        def figures(games, lrs, scale):
            for game in games:
                env = make(game)
                init = jax.jit(jax.vmap(env.init))
                step = jax.jit(jax.vmap(auto_reset(env.step, env.init)))
                act = jax.jit(lambda s: env.step(s, 0))
                upd = jax.jit(functools.partial(update, lr=game))
                scaled = jax.jit(lambda x: x * scale)
                own = jax.jit(lambda e, s: e.step(s))
    """)
    loop = m.loops[0]
    varying = varying_names(loop)
    for line, want in ((8, "env"), (9, "env"), (10, "env"), (11, None), (12, None), (13, None)):
        target, ctx = jit_target(m, line)
        assert m.per_iteration_function(target, varying, ctx.scope) == want, line


def test_captured_per_iteration_names():
    from jaxlint.model import varying_names
    _, m = build("""
        import jax
        import functools

        def unroll(layers, cfg, lr):
            for i in range(layers):
                def slice_ith(x):
                    return jax.numpy.take(x, i, axis=cfg.axis)
                a = jax.jit(slice_ith)
                b = jax.jit(functools.partial(update, lr=lr * i))
                c = jax.jit(lambda x, i=0: x + i)
                @jax.jit
                def d(x):
                    j = 2
                    return x * j
    """)
    varying = varying_names(m.loops[0])
    got = {}
    for line in (9, 10, 11, 13):
        target, ctx = jit_target(m, line)
        got[line] = m.captured_per_iteration(target, varying, ctx.scope)
    assert got == {9: ["i"], 10: ["i"], 11: [], 13: []}


# --------------------------------------------------------------------------- repetition: values that change per iteration


def churn_of(body: str, callee: str = "f", arg: int = 0):
    """The churn of the first argument of the call of ``callee`` in ``body``, the body of a function
    (its lines indented relative to the body), which starts on line 3."""
    src = "\ndef run(self, n, xs, temps, bs, tasks, ds):\n" + "".join(f"    {ln}\n" for ln in body.split("\n"))
    src += "\nNUM = 3\n"
    tree, m = build(src)
    call = call_to(tree, callee)
    ctx = m.context(call)
    return m.churn(call.args[arg], ctx.loops, ctx.scope)


@pytest.mark.parametrize("body, kind, name, line", [
    ("for step in range(n):\n    f(step)", "counter", "step", 3),
    ("for i, x in enumerate(xs):\n    f(i)", "counter", "i", 3),
    ("for i, x in enumerate(xs):\n    f(x)", "item", "x", 3),
    ("for t in temps:\n    f(t)", "item", "t", 3),
    ("for t in temps:\n    f(t * 2 + 1)", "item", "t", 3),
    ("for t in reversed(range(n)):\n    f(float(t) / n)", "counter", "t", 3),
    ("k = 1\nfor _ in range(n):\n    k *= 2\n    f(k)", "accumulated", "k", 4),
    ("w = 1\nwhile n:\n    w = w * 2 + 1\n    f(w)", "accumulated", "w", 4),
    ("k = 1\nfor _ in range(n):\n    f(k)\n    k = k * 2", "accumulated", "k", 4),
    ("for e in range(n):\n    r = 0.5 * (1 - e / n)\n    for b in bs:\n        f(r)", "counter", "e", 3),
    ("for x in xs:\n    f(x.shape[0])", "item", "x", 3),
    ("for step in range(n):\n    f(f'{step}')", "counter", "step", 3),
])
def test_churn(body, kind, name, line):
    churn = churn_of(body)
    assert churn is not None and (churn.kind, churn.name, churn.loop.node.lineno) == (kind, name, line)


@pytest.mark.parametrize("body", [
    "for step in range(n):\n    f(10)",
    "for step in range(n):\n    f(n)",
    "for step in range(n):\n    task = ds.meta['task']\n    f(task)",
    "for step in range(n):\n    size = 32\n    f(size)",
    "for mode in ('train', 'eval'):\n    f(mode)",
    "for i in range(3):\n    f(i)",
    "for i in range(NUM):\n    f(i)",
    "for step in range(n):\n    f(step % 2)",
    "for step in range(n):\n    f(step > 10)",
    "for step in range(n):\n    f(not step)",
    "for step in range(n):\n    f('a' if step % 3 else 'b')",
    "for step in range(n):\n    f(('a', 'b')[step % 2])",
    "for step in range(n):\n    f(task_of(step))",
    "for step in range(n):\n    batch, task = next_batch(step)\n    f(task)",
    "for step in range(n):\n    task = pick(step)\n    f(task)\n    for task in tasks:\n        pass",
    "for x in xs:\n    f(self.mode)",
])
def test_no_churn(body):
    assert churn_of(body) is None


def test_many_trips_is_the_innermost_loop_over_steps_or_items():
    from jaxlint.model import many_trips
    _, m = build("""
        def run(xs, d, n):
            for step in range(n):
                for mode in ("a", "b"):
                    for k, v in d.items():
                        pass
            for x in xs:
                for i in range(3):
                    pass
    """)
    outer, modes, items, xs, short = m.loops
    assert many_trips((outer, modes, items)) is outer  # options and a dict's entries are a few per step
    assert many_trips((modes, items)) is None
    assert many_trips((xs, short)) is short  # a range is steps, however short
    assert many_trips((xs,)) is xs
