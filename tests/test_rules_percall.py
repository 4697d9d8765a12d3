"""JAX102 jit-per-call: a wrapper built per call around a fresh callable that the function hands to a
lax loop (not calls), and the evidence that such a function runs again and again when the loop that
calls it is in a base class of another module of the project."""

from __future__ import annotations

import ast

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import deviceloops
from ruletools import default_findings, findings, line_of, make_project, opt_in_findings, path_codes, path_default_codes

# --------------------------------------------------------------------------- the model: what a lax call traces


def _bodies(src: str) -> list:
    model = build_model(ast.parse(src))
    call = next(c for c in model.calls if "loop" in ast.unparse(c.func) or "scan" in ast.unparse(c.func)
                or "cond" in ast.unparse(c.func))
    return [ast.unparse(b) for b in deviceloops.traced_bodies(model, call)]


def test_traced_bodies_are_the_function_arguments_of_lax_control_flow():
    assert _bodies("import jax\njax.lax.fori_loop(0, n, jax.jit(body), x)\n") == ["jax.jit(body)"]
    assert _bodies("from jax import lax\nlax.scan(f, c, xs)\n") == ["f"]
    assert _bodies("from jax import lax\nlax.while_loop(c, body_fun=b, init_val=x)\n") == ["c", "b"]
    assert _bodies("from jax import lax\nlax.cond(p, f, g, x)\n") == ["f", "g"]


def test_traced_bodies_of_other_calls_and_of_a_user_function_named_like_a_loop_are_empty():
    assert _bodies("def fori_loop(a, b, c, d): pass\nfori_loop(0, n, body, x)\n") == []
    assert _bodies("import numpy as np\nnp.fori_loop = None\nnp.fori_loop(0, n, body, x)\n") == []


# --------------------------------------------------------------------------- JAX102: a wrapper handed to a lax loop

SAMPLE = """
    import jax

    def sample(params, x, n):
        def loop(i, x):
            return x + params * i
        return jax.lax.fori_loop(0, n, jax.jit(loop), x)  # HERE

    def sample_all(params, batches, n):
        out = []
        for x in batches:
            out.append(sample(params, x, n))
        return out
"""


def test_jax102_a_fresh_closure_jitted_as_a_lax_loop_body_per_call_is_reported():
    assert default_findings(SAMPLE, "JAX102") == [(line_of(SAMPLE, "# HERE"), "JAX102")]


def test_jax102_the_finding_does_not_change_when_identifiers_are_renamed():
    renamed = SAMPLE.replace("sample", "q1").replace("def loop(", "def zz(").replace("(loop)", "(zz)").replace("params", "w")
    assert "loop" not in renamed.replace("fori_loop", "")
    assert default_findings(renamed, "JAX102") == [(line_of(renamed, "# HERE"), "JAX102")]


def test_jax102_a_lax_loop_body_bound_to_a_name_first_is_reported():
    src = """
        import jax

        def sample(params, x, n):
            def loop(i, x):
                return x + params * i
            body = jax.jit(loop)  # HERE
            return jax.lax.scan(body, x, None, length=n)

        def sample_all(params, batches, n):
            for x in batches:
                yield sample(params, x, n)
    """
    # the scan in the return runs `body`; it does not return it (not a factory's product)
    assert default_findings(src, "JAX102") == [(line_of(src, "# HERE"), "JAX102")]


LAX_NEAR_MISSES = {
    # the body is a module-level function: the same object every call, jit's cache hits
    "module_level_body": """
        import jax

        def loop(i, x):
            return x + i

        def sample(x, n):
            return jax.lax.fori_loop(0, n, jax.jit(loop), x)

        def sample_all(batches, n):
            return [sample(x, n) for x in batches]
    """,
    # the function is jitted itself: the fori_loop is traced once per compile of `sample`
    "inside_jit": """
        import jax

        @jax.jit
        def sample(params, x):
            def loop(i, x):
                return x + params * i
            return jax.lax.fori_loop(0, 8, jax.jit(loop), x)

        def sample_all(params, batches):
            return [sample(params, x) for x in batches]
    """,
    # the wrapper is handed to a call that is not a lax control-flow primitive: not known to run it
    "not_a_lax_call": """
        import jax

        def register(table, params):
            def loop(i, x):
                return x + params * i
            table.append(jax.jit(loop))

        def build(tables, params):
            for t in tables:
                register(t, params)
    """,
    # the wrapper is the loop's initial value, not its body
    "not_the_body": """
        import jax

        def sample(params, x, n, body):
            def loop(i, x):
                return x + params * i
            return jax.lax.fori_loop(0, n, body, (x, jax.jit(loop)))

        def sample_all(params, batches, n, body):
            return [sample(params, x, n, body) for x in batches]
    """,
}


@pytest.mark.parametrize("src", LAX_NEAR_MISSES.values(), ids=LAX_NEAR_MISSES.keys())
def test_jax102_near_misses_of_a_lax_loop_body_are_not_reported(src):
    assert findings(src, "JAX102") == []


def test_jax102_a_lax_loop_body_without_evidence_of_repetition_is_opt_in():
    src = """
        import jax

        def draw(params, x, n):
            def loop(i, x):
                return x + params * i
            return jax.lax.fori_loop(0, n, jax.jit(loop), x)  # HERE
    """
    assert default_findings(src, "JAX102") == []
    # its whole body is the compiled loop: the shape of a per-batch helper, but no caller is seen
    ((line, code, why),) = opt_in_findings(src, "JAX102")
    assert (line, code) == (line_of(src, "# HERE"), "JAX102")
    assert why.startswith("repeats unknown: `draw` does little but this compiled call")


# --------------------------------------------------------------------------- JAX102: the loop is in a base class

BASE = """
    class BaseWorkload:
        def evaluate(self, params, batches, n):
            total = 0.0
            for _ in range(n):
                total += self.eval_batch(params, next(batches))
            return total
"""

SUB = """
    import jax
    from {imp}

    class Workload({base}):
        def eval_batch(self, params, batch):
            @jax.jit
            def jitted(params, batch):
                return (params * batch).sum()
            return jitted(params, batch)  # the wrapper made at `@jax.jit` (line 7) is new at every call
"""


@pytest.mark.parametrize("imp, base", [("pkg.base import BaseWorkload", "BaseWorkload"),
                                       ("pkg import base", "base.BaseWorkload"),
                                       (".base import BaseWorkload", "BaseWorkload")])
def test_jax102_a_method_a_base_class_of_another_module_calls_in_a_loop_repeats(tmp_path, imp, base):
    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": BASE,
                            "pkg/sub.py": SUB.format(imp=imp, base=base)})
    assert path_default_codes(tmp_path / "pkg/sub.py") == [(7, "JAX102")]


def test_jax102_inherited_loop_in_a_namespace_package_without_init_files(tmp_path):
    make_project(tmp_path, {"proj/pkg/base.py": BASE,
                            "proj/pkg/impl/sub.py": SUB.format(imp="pkg.base import BaseWorkload",
                                                               base="BaseWorkload")})
    assert path_default_codes(tmp_path / "proj/pkg/impl/sub.py") == [(7, "JAX102")]


def test_jax102_the_evidence_names_the_base_class_loop(tmp_path, capsys):
    import json

    from jaxlint.cli import main

    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": BASE,
                            "pkg/sub.py": SUB.format(imp="pkg.base import BaseWorkload", base="BaseWorkload")})
    assert main(["check", "--no-cache", "--format", "json", "--select", "JAX102", str(tmp_path / "pkg/sub.py")]) == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert "(`eval_batch` is called in a loop of a base class in `base.py:6`)" in row["message"]
    assert [(f["fact"], f["status"]) for f in row["facts"]] == [("repeats", "proven")]


INHERITED_NEAR_MISSES = {
    # the subclass overrides the looping method: the base class's loop never runs for it
    "loop_overridden": ("pkg.base import BaseWorkload", "BaseWorkload",
                        "\n        def evaluate(self, params, batches, n):\n            return 0.0\n"),
    # the base class is not the one whose method loops
    "other_base": ("pkg.base import Other", "Other", ""),
}

BASE_WITH_OTHER = BASE + """
    class Other:
        def evaluate(self, params, batches, n):
            return self.eval_batch(params, next(batches))
"""


@pytest.mark.parametrize("imp, base, extra", INHERITED_NEAR_MISSES.values(), ids=INHERITED_NEAR_MISSES.keys())
def test_jax102_near_misses_of_an_inherited_loop_are_opt_in(tmp_path, imp, base, extra):
    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": BASE_WITH_OTHER,
                            "pkg/sub.py": SUB.format(imp=imp, base=base) + extra})
    assert path_default_codes(tmp_path / "pkg/sub.py") == []
    assert path_codes(tmp_path / "pkg/sub.py") == [(7, "JAX102")]  # opt-in: repeats unknown


def test_jax102_an_inherited_loop_over_a_few_literal_items_is_not_evidence(tmp_path):
    base = BASE.replace("for _ in range(n):", "for _ in (0, 1):")
    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": base,
                            "pkg/sub.py": SUB.format(imp="pkg.base import BaseWorkload", base="BaseWorkload")})
    assert path_default_codes(tmp_path / "pkg/sub.py") == []


def test_loop_calls_records_self_calls_by_class_and_method():
    from jaxlint.model.python.callgraph import LoopCalls

    index = LoopCalls.of("b.py", "class A:\n    def run(self, xs):\n        for x in xs:\n            self.f(x)\n"
                                 "        self.g()\n    class Inner:\n        def h(self, xs):\n"
                                 "            while True:\n                self.f(1)\n"
                                 "def free(self, xs):\n    for x in xs:\n        self.f(x)\n")
    assert index.inherited("A", "f", frozenset()) == (4, False)
    assert index.inherited("A", "f", frozenset({"run"})) is None  # the subclass has its own `run`
    assert index.inherited("A", "g", frozenset()) is None  # not in a loop
    assert index.inherited("Inner", "f", frozenset()) is None  # a nested class is not looked at
    assert len(index.self_calls["f"]) == 1  # `free` is not a method


# --------------------------------------------------------------------------- JAX102: called on an instance of a subclass

FIT = """
    import jax

    class Model:
        def fit(self, params, data, n):
            @jax.jit
            def step(params):
                return params - 0.1 * (params * data).sum()
            for _ in range(n):
                params = step(params)
            return params
"""

MIDDLE = """
    from pkg.base import Model

    class Middle(Model):
        pass
"""

LEAF = """
    from pkg.middle import Middle

    class Leaf(Middle):
        {body}
"""

DEMO = """
    from pkg.leaf import Leaf

    def sweep(params, data, n, repeats):
        for i in range(repeats):
            model = Leaf()
            params = model.fit(params, data, n)
        return params
"""


def test_jax102_a_method_called_in_a_loop_on_an_instance_of_a_subclass_two_levels_down_repeats(tmp_path):
    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": FIT, "pkg/middle.py": MIDDLE,
                            "pkg/leaf.py": LEAF.format(body="pass"), "demo.py": DEMO})
    assert path_default_codes(tmp_path / "pkg/base.py") == [(6, "JAX102")]  # at `@jax.jit`


def test_jax102_a_subclass_that_overrides_the_method_is_not_evidence(tmp_path):
    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": FIT, "pkg/middle.py": MIDDLE,
                            "pkg/leaf.py": LEAF.format(body="def fit(self, params, data, n):\n            return params"),
                            "demo.py": DEMO})
    assert path_default_codes(tmp_path / "pkg/base.py") == []
    assert (6, "JAX102") in path_codes(tmp_path / "pkg/base.py")  # opt-in: repeats unknown


def test_jax102_a_class_of_the_same_name_that_is_not_a_subclass_is_not_evidence(tmp_path):
    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": FIT,
                            "pkg/middle.py": "class Model:\n    pass\n\nclass Middle(Model):\n    pass\n",
                            "pkg/leaf.py": LEAF.format(body="pass"), "demo.py": DEMO})
    assert path_default_codes(tmp_path / "pkg/base.py") == []


def test_loop_calls_finds_the_subclasses_of_an_imported_class(tmp_path):
    from jaxlint.model.python.callgraph import LoopCalls
    from jaxlint.project import ProjectResolver

    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": "class A:\n    pass\n"})
    src = ("from pkg.base import A\nfrom pkg import base as b\nimport pkg.base as pb\n"
           "class B(A):\n    def f(self): pass\nclass C(b.A):\n    pass\nclass D(pb.A):\n    pass\n"
           "class E(B):\n    pass\nclass F(Other):\n    pass\n")
    path = str(tmp_path / "pkg/user.py")
    index = LoopCalls.of(path, src)
    got = index.subclasses_of(str(tmp_path / "pkg/base.py"), "A", ProjectResolver())
    assert sorted(got) == [("B", frozenset({"f"})), ("C", frozenset()), ("D", frozenset())]
    assert index.subclasses_of(path, "B", ProjectResolver()) == [("E", frozenset())]  # a base of the same file


# --------------------------------------------------------------------------- JAX102: a fresh body of an eager lax loop

FRESH_BODY = """
    import jax
    import jax.numpy as jnp

    def rollout(params, x):
        def body(c, _):
            return jnp.tanh(params @ c), c
        return jax.lax.scan(body, x, None, length=100)[0]  # SCAN

    def gate(p, x):
        return jax.lax.cond(x.sum() > 0, lambda v: v * p, lambda v: v - p, x)  # COND

    def body_once(c, _):
        return jnp.tanh(c), c

    def rollout_once(x):
        return jax.lax.scan(body_once, x, None, length=100)[0]

    @jax.jit
    def rollout_jitted(params, x):
        def body(c, _):
            return jnp.tanh(params @ c), c
        return jax.lax.scan(body, x, None, length=100)[0]

    def library_rollout(params, x):
        def body(c, _):
            return jnp.tanh(params @ c), c
        return jax.lax.scan(body, x, None, length=100)[0]  # LIBRARY

    def library_train(params, x, n):
        for _ in range(n):
            x = library_rollout(params, x)
        return x

    def unused(params, x):
        def body(c, _):
            return c, c
        return jax.lax.scan(body, x, None, length=100)[0]

    params, x = jnp.eye(4), jnp.ones(4)
    for step in range(1000):
        x = rollout(params, x)
        x = gate(2.0, x)
        x = rollout_once(x)
        x = rollout_jitted(params, x)
"""


def test_jax102_an_eager_lax_loop_over_a_body_defined_per_call_is_reported():
    """A function run from module-level code every step whose ``lax.scan``/``lax.cond`` body is defined
    inside it: the body is a new function object each call, so the loop is traced and compiled again
    (measured on CPU: 78 ms a call for a 100-step scan against 0.16 ms with the body defined once).
    Not reported: a body defined once at module level, a jitted function's loop (compiled once), a
    function not shown to run outside a trace (called in a loop of a function no code of the module
    calls: a caller may jit it, where its loop compiles once)."""
    src = FRESH_BODY
    assert default_findings(src, "JAX102") == sorted([(line_of(src, "# SCAN"), "JAX102"),
                                                      (line_of(src, "# COND"), "JAX102")])
    assert opt_in_findings(src, "JAX102") == []  # `library_rollout`: a caller may jit it


MAPPED_AND_SWEPT = """
    import jax
    import jax.numpy as jnp

    def rollout(params, x):
        def body(c, _):
            return jnp.tanh(params @ c), c
        return jax.lax.scan(body, x, None, length=100)[0]  # MAPPED

    def smooth(x, window):
        def step(c, _):
            return c, c
        return jax.lax.scan(step, x, None, length=window)[0]  # SWEPT

    params, xs = jnp.eye(4), jnp.ones((8, 4))
    for i in range(1000):
        ys = jax.vmap(rollout, in_axes=(None, 0))(params, xs)
        params = params - 0.1 * ys.sum()
    for window in [2, 500, 1000, 2000]:
        smooth(xs[0], window)
"""


def test_jax102_a_fresh_body_under_an_eager_vmap_every_step_and_a_sweep_of_shapes():
    """``jax.vmap(rollout)(x)`` outside jit, every step: the transform traces ``rollout`` again each
    call, its scan's body with it (reported at the scan). A function called once per configuration of
    a sweep (review3: a notebook timing 19 window sizes, whose carry shapes change every call, so each
    call compiles anyway) is not shown to run at the steps of a loop: opt-in."""
    src = MAPPED_AND_SWEPT
    assert default_findings(src, "JAX102") == [(line_of(src, "# MAPPED"), "JAX102")]
    [(line, _, why)] = opt_in_findings(src, "JAX102")
    assert line == line_of(src, "# SWEPT") and "no evidence that `smooth` runs" in why


FRESH_EACH_ITERATION = """
    import jax
    import jax.numpy as jnp

    def tail_sum(c, x):
        return c + x, c

    class Bandit:
        def __init__(self, n):
            self.N = jnp.zeros(n)
            self.Q = jnp.zeros(n)

        def _untried(self):
            return jnp.argmin(self.N)

        def _best(self):
            return jnp.argmax(self.Q)

        @staticmethod
        def _first(n, q):
            return jnp.argmin(n)

        def arm(self):
            return jax.lax.cond(jnp.any(self.N == 0), self._untried, self._best)  # BOUND

        def arm_static(self):
            return jax.lax.cond(jnp.any(self.N == 0), self._first, self._first, self.N, self.Q)

    def run(xs, steps):
        agent = Bandit(3)
        body = lambda c, x: (c + x, c)
        for t in range(steps):
            a = agent.arm()
            b = agent.arm_static()
            y = jax.lax.fori_loop(0, 10, lambda i, c: c + i, 0.0)  # LAMBDA
            z = jax.lax.scan(body, 0.0, xs)
            w = jax.lax.scan(tail_sum, 0.0, xs)

    run(jnp.arange(10.0), 2000)
"""


def test_jax102_a_body_made_every_iteration_or_a_bound_method_is_reported():
    """Fresh set AV (a UCB bandit): `lax.cond(pred, self._get_untried, self._select_ucb)` in a method called
    every step: each read of `self.method` is a new bound method, so every call traces and compiles the cond
    (measured on CPU: 48 ms a call against 0.3 ms with module-level branches); and a lambda made in every
    iteration of the step loop around the call (a `fori_loop` of a lambda: 54 ms a call). Not reported: a
    staticmethod (one function), a lambda bound once before the loop, a module-level body."""
    src = FRESH_EACH_ITERATION
    assert default_findings(src, "JAX102") == sorted([(line_of(src, "# BOUND"), "JAX102"),
                                                      (line_of(src, "# LAMBDA"), "JAX102")])
    assert opt_in_findings(src, "JAX102") == []


def test_jax102_a_bound_method_body_is_not_reported_where_the_project_pins_an_older_jax(tmp_path):
    """JAX before 0.4.31 reused one trace for equal bound methods: a project whose packaging files allow only
    those releases gets no finding for `self._best`; the lambda made every iteration still retraces there."""
    from ruletools import make_project, path_default_codes

    root = make_project(tmp_path, {"pyproject.toml": '[project]\nname = "b"\ndependencies = ["jax<0.4.31"]\n',
                                   "bandit.py": FRESH_EACH_ITERATION})
    src = FRESH_EACH_ITERATION
    assert path_default_codes(root / "bandit.py") == [(line_of(src, "# LAMBDA"), "JAX102")]
    newer = make_project(tmp_path / "newer", {"pyproject.toml": '[project]\nname = "b"\ndependencies = ["jax>=0.4"]\n',
                                              "bandit.py": FRESH_EACH_ITERATION})
    assert path_default_codes(newer / "bandit.py") == sorted([(line_of(src, "# BOUND"), "JAX102"),
                                                             (line_of(src, "# LAMBDA"), "JAX102")])


def test_jax102_a_bound_method_finding_names_the_jax_it_assumes(tmp_path):
    """The bound-method case holds from JAX 0.4.31 on: its evidence says which JAX the project runs on and how
    that is known (the declared range, or no declaration: current JAX assumed, an assumption it names)."""
    from jaxlint.engine import check_path
    import jaxlint_rules
    from ruletools import make_project

    def evidence(path):
        res = check_path(str(path), [r() for r in jaxlint_rules.ALL_RULES])
        (found,) = [f for f in res.findings if f.code == "JAX102" and f.line == line_of(FRESH_EACH_ITERATION, "# BOUND")]
        return found.evidence[-1]

    declared = make_project(tmp_path / "a", {"pyproject.toml": '[project]\nname = "b"\ndependencies = ["jax>=0.4"]\n',
                                             "bandit.py": FRESH_EACH_ITERATION})
    assert evidence(declared / "bandit.py") == (
        "JAX 0.4.31 and later trace a bound method anew at every call (earlier releases reuse one trace); "
        "a/pyproject.toml requires jax >=0.4: the declared range includes JAX 0.4.31 or later")
    bare = make_project(tmp_path / "b", {"bandit.py": FRESH_EACH_ITERATION})
    assert evidence(bare / "bandit.py").endswith("(earlier releases reuse one trace); no packaging file (pyproject.toml, "
                                                 "setup.cfg, setup.py, requirements*.txt, environment*.yml) in the "
                                                 "file's folder or above it: current JAX assumed")


def test_runtime_a_bound_method_branch_compiles_every_call_a_module_function_once():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    traced = []

    class Bandit:
        def __init__(self):
            self.N = jnp.zeros(3)

        def _untried(self):
            traced.append("bound")
            return jnp.argmin(self.N)

        def _best(self):
            traced.append("bound")
            return jnp.argmax(self.N)

    def untried(n):
        traced.append("module")
        return jnp.argmin(n)

    def best(n):
        traced.append("module")
        return jnp.argmax(n)

    agent = Bandit()
    for _ in range(3):
        jax.lax.cond(True, agent._untried, agent._best)
        jax.lax.cond(True, untried, best, agent.N)
    from jaxlint.model.policy.freshbodies import BOUND_METHOD_RETRACE

    release = tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())
    if release >= BOUND_METHOD_RETRACE:
        assert traced.count("bound") == 6  # both branches traced again at every call
    else:
        assert traced.count("bound") == 2  # older JAX: equal bound methods share one trace
    assert traced.count("module") == 2  # traced once, then cached by the function objects
