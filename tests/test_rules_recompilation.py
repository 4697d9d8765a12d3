"""JAX101 jit-in-loop, JAX102 jit-per-call, JAX103 static-arg-churn: the rules' own examples,
positive variants in many spellings, and near-miss negatives that must stay quiet."""

from __future__ import annotations


import pytest

import jaxlint_rules
from ruletools import assert_marked, compile_counter, default_findings, findings, line_of, messages, opt_in_findings

RULES = [r() for r in jaxlint_rules.ALL_RULES]


# --------------------------------------------------------------------------- own examples


# --------------------------------------------------------------------------- JAX101 positives

JAX101_POSITIVE = {
    "from_jax_import_jit_lambda": """
        import jax.numpy as jnp
        from jax import jit

        def train(params, batches, lr):
            for batch in batches:
                step = jit(lambda p, b: p - lr * jnp.mean(b))  # HERE
                params = step(params, batch)
            return params
    """,
    "import_jax_as_J_partial_while": """
        import functools
        import jax as J
        import jax.numpy as jnp

        def update(p, g, lr):
            return p - lr * g

        def descend(p, grad_fn, lr, max_steps):
            step = 0
            while step < max_steps:
                g = grad_fn(p)
                p = J.jit(functools.partial(update, lr=lr))(p, g)  # HERE
                step += 1
            return p
    """,
    "equinox_filter_jit_lambda": """
        import equinox as eqx
        import jax.numpy as jnp

        def evaluate(model, loader):
            losses = []
            for x, y in loader:
                loss = eqx.filter_jit(lambda m, x, y: jnp.mean((m(x) - y) ** 2))(model, x, y)  # HERE
                losses.append(loss)
            return losses
    """,
    "flax_nnx_jit_lambda": """
        from flax import nnx

        def fit(model, optimizer, batches, loss_fn):
            for batch in batches:
                step = nnx.jit(lambda m, o, b: o.update(nnx.grad(loss_fn)(m, b)))  # HERE
                step(model, optimizer, batch)
    """,
    "partial_jax_jit_factory_lambda": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        def run(xs, n):
            out = []
            for x in xs:
                f = partial(jax.jit, static_argnums=1)(lambda x, k: jnp.roll(x, k))  # HERE
                out.append(f(x, n))
            return out
    """,
    "list_comprehension_lambda": """
        import jax
        import jax.numpy as jnp

        def shifted(x, shifts):
            return [jax.jit(lambda v: jnp.roll(v, s))(x) for s in shifts]  # HERE
    """,
    "jit_of_grad_in_loop": """
        import jax
        import jax.numpy as jnp

        def loss(w, x):
            return jnp.sum((x @ w) ** 2)

        def train(w, xs):
            for x in xs:
                w = w - 0.1 * jax.jit(jax.grad(loss))(w, x)  # HERE
            return w
    """,
    "jit_of_vmap_in_loop": """
        import jax
        import jax.numpy as jnp

        def score(w, x):
            return jnp.dot(w, x)

        def scores(ws, batches):
            out = []
            for x in batches:
                out.append(jax.jit(jax.vmap(score, in_axes=(0, None)))(ws, x))  # HERE
            return out
    """,
    "decorated_def_in_loop_body": """
        import jax
        import jax.numpy as jnp

        def anneal(x, temperatures):
            for t in temperatures:
                @jax.jit  # HERE
                def relax(x):
                    return jnp.tanh(x / t)
                x = relax(x)
            return x
    """,
    "pmap_of_lambda_in_loop": """
        import jax

        def replicate_steps(xs, scale):
            for x in xs:
                x = jax.pmap(lambda v: v * scale)(x)  # HERE
            return x
    """,
    "bound_method_in_loop": """
        import jax
        import jax.numpy as jnp

        class Trainer:
            def __init__(self, lr):
                self.lr = lr

            def step(self, params, batch):
                return params - self.lr * jnp.mean(batch)

            def fit(self, params, batches):
                for batch in batches:
                    params = jax.jit(self.step)(params, batch)  # HERE
                return params
    """,
    "named_lambda_in_loop": """
        import jax
        import jax.numpy as jnp

        def train(params, batches, lr):
            for batch in batches:
                update = lambda p, b: p - lr * jnp.mean(b)
                params = jax.jit(update)(params, batch)  # HERE
            return params
    """,
    "def_in_loop_then_jit_by_name": """
        import jax
        import jax.numpy as jnp

        def sweep(x, alphas):
            out = []
            for a in alphas:
                def leaky(v):
                    return jnp.where(v > 0, v, a * v)
                out.append(jax.jit(leaky)(x))  # HERE
            return out
    """,
}


@pytest.mark.parametrize("src", JAX101_POSITIVE.values(), ids=JAX101_POSITIVE.keys())
def test_jax101_reported(src):
    assert findings(src) == [(line_of(src, "# HERE"), "JAX101")]


# --------------------------------------------------------------------------- JAX101 near misses

JAX101_NEGATIVE = {
    "module_level_fn_rewrapped_in_a_few_literal_items": """
        import jax
        import jax.numpy as jnp

        def step(p, b):
            return p - 0.1 * jnp.mean(b)

        def train(params, batch):
            for lr in (0.1, 0.01):
                params = jax.jit(step)(params, batch)
            return params
    """,
    "parameter_function_rewrapped_in_loop": """
        import jax

        def train(step, params, batches):
            for batch in batches:
                params = jax.jit(step)(params, batch)
            return params
    """,
    "lambdas_stored_in_dict_in_loop": """
        import jax
        import jax.numpy as jnp

        ACTIVATIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "gelu": jax.nn.gelu}

        def build_table():
            table = {}
            for name, act in ACTIVATIONS.items():
                table[name] = jax.jit(lambda x, act=act: act(x) * 2.0)
            return table
    """,
    "partials_built_in_list_comprehension": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        def power(x, k):
            return x ** k

        def make_powers(max_k):
            return [jax.jit(partial(power, k=k)) for k in range(max_k)]
    """,
    "wrapper_created_before_loop": """
        import jax
        import jax.numpy as jnp

        def train(params, batches, lr):
            step = jax.jit(lambda p, b: p - lr * jnp.mean(b))
            for batch in batches:
                params = step(params, batch)
            return params
    """,
    "inside_traced_function": """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def unrolled(x):
            for k in range(3):
                x = jax.jit(lambda v: jnp.sin(v) * k)(x)
            return x
    """,
}


@pytest.mark.parametrize("src", JAX101_NEGATIVE.values(), ids=JAX101_NEGATIVE.keys())
def test_jax101_near_miss_not_reported(src):
    assert findings(src, "JAX101") == []


def test_jax101_dict_table_with_calls_after_loop_is_quiet():
    src = """
        import jax
        import jax.numpy as jnp

        def apply_all(x, scales):
            table = {}
            for s in scales:
                table[s] = jax.jit(lambda v, s=s: v * s)
            return [table[s](x) for s in scales]
    """
    assert findings(src) == []


# --------------------------------------------------------------------------- JAX102 positives

JAX102_POSITIVE = {
    "nested_decorated_def_mapped_by_vmap": """
        import jax
        import jax.numpy as jnp

        def rollout(params, observations):
            @jax.jit  # HERE
            def rollout_fn(o):
                return jnp.tanh(params @ o)
            return jax.vmap(rollout_fn)(observations)

        def collect(params, observations, horizon):
            for _ in range(horizon):
                observations = rollout(params, observations)
            return observations
    """,
    "nested_decorated_def_called": """
        import jax
        import jax.numpy as jnp

        def predict(params, x):
            @jax.jit  # HERE
            def forward(x):
                return jnp.tanh(params @ x)
            return forward(x)
    """,
    "from_jax_import_jit_partial_bound_then_called": """
        from functools import partial
        import jax.numpy as jnp
        from jax import jit

        def normalize(x, axis):
            return x / jnp.linalg.norm(x, axis=axis, keepdims=True)

        def embed(table, ids):
            f = jit(partial(normalize, axis=-1))  # HERE
            return f(table[ids])
    """,
    "import_jax_as_J_lambda_called_inline": """
        import jax as J
        import jax.numpy as jnp

        def mse(pred, target):
            return J.jit(lambda a, b: jnp.mean((a - b) ** 2))(pred, target)  # HERE
    """,
    "equinox_filter_jit_lambda": """
        import equinox as eqx

        def infer(model, x):
            return eqx.filter_jit(lambda m, x: m(x))(model, x)  # HERE
    """,
    "flax_nnx_jit_nested_decorated_def": """
        from flax import nnx

        def evaluate(model, batch):
            @nnx.jit  # HERE
            def eval_step(model, batch):
                return model(batch["x"])
            return eval_step(model, batch)
    """,
    "jit_of_grad_called": """
        import jax
        import jax.numpy as jnp

        def loss(w, x):
            return jnp.sum((x @ w) ** 2)

        def gradient(w, x):
            return jax.jit(jax.grad(loss))(w, x)  # HERE
    """,
    "partial_jax_jit_decorated_nested_def": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        def pad_batch(x, size):
            @partial(jax.jit, static_argnums=1)  # HERE
            def pad(x, n):
                return jnp.pad(x, ((0, n - x.shape[0]), (0, 0)))
            return pad(x, size)
    """,
    "nested_def_jitted_by_name": """
        import jax
        import jax.numpy as jnp

        def predict(params, x):
            def forward(x):
                return jnp.tanh(params @ x)
            f = jax.jit(forward)  # HERE
            return f(x)
    """,
    "bound_method_called": """
        import jax
        import jax.numpy as jnp

        class Model:
            def __init__(self, w):
                self.w = w

            def forward(self, x):
                return jnp.tanh(self.w @ x)

            def __call__(self, x):
                return jax.jit(self.forward)(x)  # HERE
    """,
}


def test_jax101_and_jax102_under_stacked_decorators_name_the_jit_decorators_line():
    """`@jax.jit` over `@jax.vmap`: the wrapper is made at the `@jax.jit` line, two lines above the
    `def`; the finding is there, and so a `noqa` there silences it (H's catalogue named that line)."""
    src = """
        import jax
        import jax.numpy as jnp

        def rollout(params, obs, keys):
            @jax.jit  # HERE
            @jax.vmap
            def policy(key, o):
                return jax.random.categorical(key, params @ o)
            return policy(keys, obs)

        def anneal(x, temperatures):
            for t in temperatures:
                @jax.vmap
                @jax.jit  # LOOP
                def relax(x):
                    return jnp.tanh(x / t)
                x = relax(x)
            return x
    """
    assert findings(src, "JAX102") == [(line_of(src, "# HERE"), "JAX102")]
    assert findings(src, "JAX101") == [(line_of(src, "# LOOP"), "JAX101")]
    silenced = src.replace("@jax.jit  # HERE", "@jax.jit  # noqa: JAX102").replace(
        "@jax.jit  # LOOP", "@jax.jit  # noqa: JAX101")
    assert findings(silenced, "JAX102") == [] and findings(silenced, "JAX101") == []


@pytest.mark.parametrize("src", JAX102_POSITIVE.values(), ids=JAX102_POSITIVE.keys())
def test_jax102_reported(src):
    assert findings(src) == [(line_of(src, "# HERE"), "JAX102")]


# --------------------------------------------------------------------------- JAX102 near misses

JAX102_NEGATIVE = {
    "nested_jitted_def_handed_out_mapped": """
        import jax
        import jax.numpy as jnp

        def make_rollout(params):
            @jax.jit
            def rollout_fn(o):
                return jnp.tanh(params @ o)
            return jax.vmap(rollout_fn)

        def collect(params, observations, horizon):
            step = make_rollout(params)
            for _ in range(horizon):
                observations = step(observations)
            return observations
    """,
    "module_level_code": """
        import jax
        import jax.numpy as jnp

        square = jax.jit(lambda x: x * x)
        y = square(jnp.arange(4.0))
    """,
    "factory_returning_jitted_inner": """
        import jax
        import jax.numpy as jnp

        def make_predict(params):
            def predict(x):
                return jnp.tanh(params @ x)
            return jax.jit(predict)
    """,
    "factory_returning_name_bound_wrapper": """
        import jax
        import jax.numpy as jnp

        def make_step(lr):
            step = jax.jit(lambda p, g: p - lr * g)
            return step
    """,
    "self_attr_in_init": """
        import jax
        import jax.numpy as jnp

        class Model:
            def __init__(self, w):
                self.w = w
                self._forward = jax.jit(self.forward)

            def forward(self, w, x):
                return jnp.tanh(w @ x)

            def __call__(self, x):
                return self._forward(self.w, x)
    """,
    "lru_cache_builder_called_inside": """
        import functools
        import jax
        import jax.numpy as jnp

        @functools.lru_cache(maxsize=None)
        def window(n):
            hann = jax.jit(lambda k: 0.5 - 0.5 * jnp.cos(2 * jnp.pi * k / (n - 1)))
            return hann(jnp.arange(n))
    """,
    "functools_cache_builder": """
        from functools import cache, partial
        import jax
        import jax.numpy as jnp

        def topk_mask(x, k):
            return x >= jnp.sort(x)[-k]

        @cache
        def masker(k):
            return jax.jit(partial(topk_mask, k=k))
    """,
    "stored_in_dict_cache": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        def resize(x, size):
            return jax.image.resize(x, size, "linear")

        class Resizer:
            def __init__(self):
                self._cache = {}

            def __call__(self, x, size):
                if size not in self._cache:
                    self._cache[size] = jax.jit(partial(resize, size=size))
                return self._cache[size](x)
    """,
    "run_once_main": """
        import jax
        import jax.numpy as jnp

        def main():
            f = jax.jit(lambda x: jnp.sin(x) ** 2)
            return f(jnp.linspace(0.0, 1.0, 8))
    """,
    "test_function": """
        import jax
        import jax.numpy as jnp

        def test_square():
            f = jax.jit(lambda x: x * x)
            assert f(jnp.float32(3.0)) == 9.0
    """,
    "outer_function_is_traced": """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def outer(x):
            inner = jax.jit(lambda v: jnp.cos(v))
            return inner(x) + 1.0
    """,
}


_ONCE_BY_NAME = {"run_once_main": "`main` matches the convention `entry-points`: taken to run once per program",
                 "test_function": "`test_square` runs as a test (pytest's and unittest's discovery rules)"}


@pytest.mark.parametrize("src", JAX102_NEGATIVE.values(), ids=JAX102_NEGATIVE.keys())
def test_jax102_near_miss_not_reported(src):
    assert default_findings(src, "JAX102") == []
    # issue 37: where only a name (an entry point's, a test's) says the function runs once, the
    # finding is opt-in and says so, not silent; elsewhere there is none at all
    reason = next((why for key, why in _ONCE_BY_NAME.items() if JAX102_NEGATIVE[key] is src), None)
    assert [why for _, _, why in opt_in_findings(src, "JAX102")] == ([reason] if reason else [])


def test_jax102_defers_to_jax101_in_loops():
    src = """
        import jax
        import jax.numpy as jnp

        def train(params, batches, lr):
            for batch in batches:
                params = jax.jit(lambda p, b: p - lr * jnp.mean(b))(params, batch)  # HERE
            return params
    """
    assert findings(src) == [(line_of(src, "# HERE"), "JAX101")]


# --------------------------------------------------------------------------- JAX103 positives

JAX103_POSITIVE = {
    "decorated_static_argnums_range_loop": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnums=1)
        def decay(x, step):
            return x * (0.99 ** step)

        def run(x, n):
            for step in range(n):
                x = decay(x, step)  # HERE
            return x
    """,
    "static_argnames_keyword_reassigned_in_while": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnames=("width",))
        def blur(img, width):
            k = jnp.ones(width) / width
            return jnp.convolve(img, k, mode="same")

        def progressive(img, rounds):
            width = 1
            while rounds > 0:
                width = width * 2 + 1
                img = blur(img, width=width)  # HERE
                rounds -= 1
            return img
    """,
    "from_jax_import_jit_binding_static_argnums": """
        import jax.numpy as jnp
        from jax import jit

        def head(x, n):
            return x[:n]

        head_jit = jit(head, static_argnums=(1,))

        def prefixes(x, lengths):
            out = []
            for n in lengths:
                out.append(head_jit(x, n))  # HERE
            return out
    """,
    "import_jax_as_J_static_argnames_keyword": """
        import jax as J
        import jax.numpy as jnp

        def topk(x, k):
            return J.lax.top_k(x, k)[0]

        topk_jit = J.jit(topk, static_argnames="k")

        def sweep(x, ks):
            return [topk_jit(x, k=k) for k in ks]  # HERE
    """,
    "decorated_method_static_self_and_step": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        class Sampler:
            def __init__(self, betas):
                self.betas = betas

            @partial(jax.jit, static_argnums=(0, 2))
            def denoise(self, x, t):
                return x * (1.0 - 0.01 * t)

            def sample(self, x, steps):
                for t in reversed(range(steps)):
                    x = self.denoise(x, t)  # HERE
                return x
    """,
    "static_argnames_passed_positionally": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnames=("n",))
        def tile(x, n):
            return jnp.tile(x, n)

        def doublings(x, levels):
            out = []
            n = 1
            for _ in range(levels):
                n *= 2
                out.append(tile(x, n))  # HERE
            return out
    """,
    "bound_method_jit_in_init_static_after_self": """
        import jax
        import jax.numpy as jnp

        class Pooler:
            def __init__(self):
                self._pool = jax.jit(self.pool, static_argnums=1)

            def pool(self, x, size):
                return jnp.mean(x.reshape(-1, size), axis=1)

            def pyramid(self, x, levels):
                out = []
                for level in range(1, levels):
                    out.append(self._pool(x, 2 ** level))  # HERE
                return out
    """,
}


@pytest.mark.parametrize("src", JAX103_POSITIVE.values(), ids=JAX103_POSITIVE.keys())
def test_jax103_reported(src):
    assert findings(src) == [(line_of(src, "# HERE"), "JAX103")]


# --------------------------------------------------------------------------- JAX103 near misses

JAX103_NEGATIVE = {
    "literal_tuple_of_modes": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnames=("mode",))
        def forward(params, x, mode):
            h = x @ params
            return h * 0.5 if mode == "train" else h

        def both(params, x):
            return {mode: forward(params, x, mode=mode) for mode in ("train", "eval")}
    """,
    "literal_list_loop_positional": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnums=1)
        def pool(x, size):
            return jnp.mean(x.reshape(-1, size), axis=1)

        def multi_scale(x):
            out = []
            for size in [2, 4, 8]:
                out.append(pool(x, size))
            return out
    """,
    "loop_invariant_constant_static": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnums=2)
        def step(params, batch, num_classes):
            return params - 0.1 * jnp.mean(jax.nn.one_hot(batch, num_classes))

        def train(params, batches, num_classes):
            for batch in batches:
                params = step(params, batch, num_classes)
                params = step(params, batch, 10)
            return params
    """,
    "loop_variable_in_non_static_arg": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnames=("training",))
        def step(params, batch, lr, training):
            return params - lr * jnp.mean(batch) if training else params

        def train(params, batches, lr):
            for batch in batches:
                lr = lr * 0.99
                params = step(params, batch, lr, training=True)
            return params
    """,
    "constant_reassigned_in_loop": """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnums=1)
        def crop(x, size):
            return x[:size]

        def crops(xs):
            out = []
            for x in xs:
                size = 32
                out.append(crop(x, size))
            return out
    """,
}


@pytest.mark.parametrize("src", JAX103_NEGATIVE.values(), ids=JAX103_NEGATIVE.keys())
def test_jax103_near_miss_not_reported(src):
    assert findings(src, "JAX103") == []


def test_jax103_an_index_over_the_parts_of_a_collection_is_opt_in():
    """``for idx in range(len(self.other_agents))`` with ``idx`` static (fresh set P's LOLA agent):
    each index compiles once, and every later run of the loop hits the cache, so the cost is one
    compile per part, not per step; how many parts there are is not known: opt-in. A step counter
    stays reported."""
    src = """
        from functools import partial
        import jax

        @partial(jax.jit, static_argnums=1)
        def grad_inner(params, idx):
            return params * idx

        class Agent:
            def lookahead(self, params):
                grads = []
                for idx in range(len(self.other_agents)):
                    grads.append(grad_inner(params, idx))  # PARTS
                return grads

        def run(params, n):
            for step in range(n):
                params = grad_inner(params, step)  # STEPS
            return params
    """
    assert default_findings(src, "JAX103") == [(line_of(src, "# STEPS"), "JAX103")]
    [(line, _, why)] = opt_in_findings(src, "JAX103")
    assert line == line_of(src, "# PARTS") and "walks the indices of `self.other_agents`" in why


def test_jax103_reports_only_the_static_argument_line():
    src = """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnums=2)
        def step(params, batch, epoch):
            return params - 0.1 / (epoch + 1) * jnp.mean(batch)

        def train(params, batches, epochs):
            for epoch in range(epochs):
                for batch in batches:
                    params = step(
                        params,
                        batch,
                        epoch,  # HERE
                    )
            return params
    """
    assert findings(src) == [(line_of(src, "# HERE"), "JAX103")]


def test_jax102_quiet_for_higher_order_helpers_around_user_callables():
    # The closure hands the caller's model and guide to unknown code: a different program per
    # call is inherent, there is no cache to reuse.
    src = """
        import jax

        def diagnose(model, guide, data):
            def one_fit(key):
                fitted = fit(condition(model, data), guide, key)
                return summarize(fitted)
            return jax.pmap(one_fit)(jax.random.split(jax.random.PRNGKey(0), 8))
    """
    assert findings(src, "JAX102") == []


@pytest.mark.parametrize("ann", ["chex.ArrayTree", "Optional[chex.ArrayTree]", "omegaconf.DictConfig",
                                 "Dict[str, jax.Array]", "jax.Array | None"])
def test_jax102_a_parameter_annotated_as_data_handed_to_other_code_is_no_user_callable(ann):
    # the closure hands ``params`` to a rollout of another module; annotated as data, it is no model
    # or callback the caller supplies, so the wrapper is the same program rebuilt per call
    src = f"""
        from typing import Dict, Optional
        import chex
        import jax
        import omegaconf
        from agents import trainer

        def validate(cfg, params: {ann} = None):
            @jax.pmap  # HERE
            def run(problems):
                return trainer.rollout(cfg=cfg.rollout, params=params, problems=problems)
            return run(cfg.problems)

        def main(cfg, params, n):
            for step in range(n):
                if step % 100 == 0:
                    validate(cfg, params)
    """
    assert findings(src, "JAX102") == [(line_of(src, "# HERE"), "JAX102")]
    unannotated = src.replace(f"params: {ann} = None", "params=None")
    assert findings(unannotated, "JAX102") == []
    callable_param = src.replace(f"params: {ann} = None", "params: Callable = None")
    assert findings(callable_param, "JAX102") == []


def test_jax102_still_reports_a_closure_over_a_model_method():
    src = """
        import jax

        def predict(model, params, x):
            return jax.jit(lambda v: model.apply(params, v))(x)  # HERE
    """
    assert findings(src, "JAX102") == [(line_of(src, "# HERE"), "JAX102")]


# --------------------------------------------------------------------------- JAX102: evidence that the function repeats


JAX102_REPEATED = {
    "helper_called_in_an_eval_loop": ("""
        import jax
        from flax import jax_utils

        def all_gather_and_unreplicate(inputs):
            return jax_utils.unreplicate(
                jax.pmap(lambda x: jax.lax.all_gather(x, "batch"), "batch")(inputs))  # HERE

        def evaluate(state, it, eval_step, n):
            logs = []
            for step in range(n):
                batch = next(it)
                out = eval_step(state, batch)
                logs.append(all_gather_and_unreplicate(out))
                print(len(logs))
            return logs
    """, "is called in the loop on line 11"),
    "closure_returned_by_a_factory": ("""
        import functools
        import jax

        def fake_pmap(fn, jit_result):
            @functools.wraps(fn)
            def wrapped_fn(*args):
                vmapped = jax.vmap(fn)
                if jit_result:
                    vmapped = jax.jit(vmapped)  # HERE
                out = vmapped(*args)
                return out
            return wrapped_fn
    """, "is the function `fake_pmap` returns"),
    "called_from_a_per_step_method": ("""
        import jax
        import jax.numpy as jnp

        class Learner:
            def update(self, params, batch):
                grads = self._grads(params, batch)
                return params - 0.1 * grads

            def _grads(self, params, batch):
                loss = lambda p: jnp.mean((batch @ p) ** 2)
                g = jax.jit(jax.grad(loss))  # HERE
                out = g(params)
                return out
    """, "`_grads` is called from `update`, and `update` is a per-step method"),
    "takes_the_training_step": ("""
        import jax

        def log_gathered(state, step, writer):
            values = jax.pmap(lambda x: jax.lax.all_gather(x, "b"), "b")(state)  # HERE
            writer.write(step, values)
            writer.flush()
    """, "takes the training step `step`"),
    "eval_step_rebuilt_per_evaluation_reused_in_its_loop": ("""
        import functools
        import jax

        def inference_on_dataset(model, state, it, n, step):
            eval_pmapped = jax.pmap(functools.partial(eval_step, model=model), "batch")  # HERE
            metrics = []
            for i in range(n):
                metrics.append(eval_pmapped(state, next(it)))
            return metrics
    """, "compiles again the program its loop on line 8 runs"),
}


def test_jax102_a_function_called_now_and_then_in_a_zip_of_range_and_batches_loop_repeats():
    # flax's examples loop ``for step, batch in zip(range(start, n), train_iter)``: steps, not a structure's parts
    src = """
        import jax
        from jax import lax

        def sync_batch_stats(state):
            avg = jax.pmap(lambda x: lax.pmean(x, "x"), "x")  # HERE
            return avg(state)

        def train(state, train_iter, start, n, per_epoch, p_step):
            for step, batch in zip(range(start, n), train_iter):
                state = p_step(state, batch)
                if (step + 1) % per_epoch == 0:
                    state = sync_batch_stats(state)
            return state
    """
    assert default_findings(src) == [(line_of(src, "# HERE"), "JAX102")]
    (msg,) = messages(src, "JAX102")
    assert "is called in the loop" in msg
    near = src.replace("zip(range(start, n), train_iter)", "zip(state, train_iter)")
    assert default_findings(near) == []


@pytest.mark.parametrize("src, why", JAX102_REPEATED.values(), ids=JAX102_REPEATED.keys())
def test_jax102_reported_with_evidence_of_repetition(src, why):
    assert default_findings(src) == [(line_of(src, "# HERE"), "JAX102")]
    (msg,) = messages(src, "JAX102")
    assert why in msg and "so every call" in msg and "create the jitted function once" in msg


JAX102_RUNS_ONCE = {
    "initialize_model_called_from_train": """
        import functools
        import jax

        def initialize_model(model_def, input_shape, rngs):
            @functools.partial(jax.jit, backend="cpu")
            def _initialize_model(rngs):
                return model_def.init(rngs, jax.numpy.ones(input_shape))
            init_params = _initialize_model(rngs)
            count = sum(x.size for x in jax.tree_util.tree_leaves(init_params))
            print(count)
            return init_params

        def train(rng, model_def):
            params = initialize_model(model_def, (1, 8), rng)
            for step in range(100):
                params = sgd(params)
            return params
    """,
    "init_of_an_experiment": """
        import jax

        def init(cfg, env):
            keys = jax.random.split(jax.random.PRNGKey(cfg.seed), 8)
            reset = jax.pmap(jax.vmap(env.reset))
            state = reset(keys)
            return state

        def run_experiment(cfg, env):
            state = init(cfg, env)
            return state
    """,
    "helper_nested_in_set_up_code": """
        import jax

        def setup_state(model, rng, shape):
            def make(rng):
                return model.init(rng, jax.numpy.ones(shape))
            return jax.jit(make)(rng)
    """,
    "nested_jit_in_a_method_only_called_from_a_jitted_method": """
        from functools import partial
        import jax

        class Strategy:
            @partial(jax.jit, static_argnames=("self",))
            def tell(self, state, fitness):
                return self._tell(state, fitness)

            def _tell(self, state, fitness):
                @jax.jit
                def infer_step(ctx):
                    return self.model.apply(state.params, ctx)
                pred = infer_step(fitness)
                return state.mean + pred
    """,
}


# Issue 26: where only a name says a function runs once (set-up and entry-point names: the
# conventions' setup-functions), the finding is quiet by default and shown with --pedantic, with
# the reason; facts (traced once, a constructor, every call made once) keep it quiet altogether.
_NAMED_ONCE = {"initialize_model_called_from_train", "init_of_an_experiment", "helper_nested_in_set_up_code"}


@pytest.mark.parametrize("name", sorted(JAX102_RUNS_ONCE))
def test_jax102_quiet_for_functions_that_run_once(name):
    src = JAX102_RUNS_ONCE[name]
    assert default_findings(src, "JAX102") == []
    if name in _NAMED_ONCE:
        (opt,) = opt_in_findings(src, "JAX102")
        assert "named like code that runs once" in opt[2]
    else:
        assert findings(src, "JAX102") == []  # not even with --pedantic


def test_jax102_a_call_graph_that_shows_one_call_from_code_that_runs_once_is_quiet():
    # facts, not names: `sample` (a per-step name) is called once, from an __init__
    src = """
        import jax

        class Sampler:
            def __init__(self, model, params, x):
                self.out = self.sample(model, params, x)

            def sample(self, model, params, x):
                f = jax.jit(lambda p: model.apply(p, x))
                return f(params)
    """
    assert findings(src, "JAX102") == []


JAX102_OPT_IN = {
    "no_evidence_either_way": ("""
        import jax

        def quantile_summary(params, xs, q):
            scale = params["scale"]
            offset = params["offset"]
            summarize = jax.jit(lambda v: jax.numpy.quantile(v * scale + offset, q))  # HERE
            result = summarize(xs)
            return result
    """, "no evidence that `quantile_summary` runs more than once"),
    "primitive_eager_rule": ("""
        import functools
        import jax

        @mpmd_map_p.def_impl
        def _mpmd_map_impl(*args, **params):
            jit_impl = jax.jit(functools.partial(mpmd_map_p.bind, **params))  # HERE
            return jit_impl(*args)
    """, "no evidence that `_mpmd_map_impl` runs more than once"),
    "a_tiny_gather_after_a_whole_evaluation_pass": ("""
        import jax

        def eval_and_log_summary(state, it, eval_step_fn, n):
            preds = []
            for step in range(n):
                preds.append(eval_step_fn(state, next(it)))
            res = jax.pmap(lambda x: jax.lax.all_gather(x, "batch"), "batch")(preds[-1])  # HERE
            return res

        def train(state, it, eval_step_fn, datasets, steps):
            for step in range(steps):
                if step % 1000 == 0:
                    for name in datasets:
                        eval_and_log_summary(state, it, eval_step_fn, 10)
    """, "`eval_and_log_summary` also runs a loop of its own; one compile per call is small next to it"),
    "a_per_trial_sweep_function_compiling_its_step_once": ("""
        import jax

        def run_trial(cfg, params, batches):
            step = jax.jit(lambda p, b: p - cfg.lr * jax.numpy.mean(b))  # HERE
            for b in batches:
                params = step(params, b)
            return params

        def sweep(configs, params, batches):
            return [run_trial(cfg, params, batches) for cfg in configs]
    """, "one compile per call of `run_trial`, reused in its loop, and `run_trial` is not known to run at every step"),
    # the shape of a per-batch helper is no proof that anything calls it per batch (issue 37, fresh set B:
    # a library helper nothing in its project calls)
    "a_thin_helper_nothing_calls_in_a_loop": ("""
        import jax

        def replicate(tree, devices):
            return jax.pmap(lambda x: x, devices=devices)(tree)  # HERE
    """, "repeats unknown: `replicate` does little but this compiled call (the kind of helper called per batch), "
         "but no call of it in a loop is seen in the project"),
}


def test_jax102_a_thin_helper_called_in_a_loop_is_proven_to_repeat():
    src = """
        import jax

        def replicate(tree, devices):
            return jax.pmap(lambda x: x, devices=devices)(tree)  # HERE

        def train(state, batches, devices):
            for batch in batches:
                state = replicate(state, devices)
            return state
    """
    assert default_findings(src, "JAX102") == [(line_of(src, "# HERE"), "JAX102")]


@pytest.mark.parametrize("src, reason", JAX102_OPT_IN.values(), ids=JAX102_OPT_IN.keys())
def test_jax102_opt_in_without_evidence_or_when_amortised(src, reason):
    assert default_findings(src, "JAX102") == []
    assert opt_in_findings(src, "JAX102") == [(line_of(src, "# HERE"), "JAX102", reason)]


# --------------------------------------------------------------------------- JAX101: what repeats, and what cannot be hoisted


def test_jax101_in_a_loop_over_a_dict_reports_the_repeated_function():
    src = """
        import functools
        import jax

        class EvalManager:
            def _evaluate(self, state, step, dataset):
                for name, it in dataset.valid_iter.items():
                    pmapped = jax.pmap(functools.partial(eval_step, model=self.model), "batch")  # HERE
                    for i in range(100):
                        pmapped(state, next(it))
    """
    assert default_findings(src) == [(line_of(src, "# HERE"), "JAX101")]
    (msg,) = messages(src, "JAX101")
    assert msg.startswith("`jax.pmap` of a functools.partial object is rebuilt for each item of the loop on line 7 "
                          "on every call of `_evaluate` (`_evaluate` takes the training step `step`")
    assert "so every call traces and compiles it again" in msg


def test_jax101_in_a_loop_over_a_dict_of_a_function_run_per_configuration_is_opt_in():
    src = """
        import functools
        import jax

        def evaluate_all(state, datasets):
            for name, it in datasets.items():
                pmapped = jax.pmap(functools.partial(eval_step, name=name), "batch")  # HERE
                for i in range(100):
                    pmapped(state, next(it))

        def compare(states, datasets):
            for state in states:
                evaluate_all(state, datasets)
    """
    assert default_findings(src) == []
    assert opt_in_findings(src, "JAX101") == [(line_of(src, "# HERE"), "JAX101", (
        "one compile per item and call of `evaluate_all`, reused in a loop, and `evaluate_all` is not known to "
        "run at every step"))]


def test_jax101_in_a_loop_over_options_without_evidence_is_opt_in_and_in_a_test_quiet():
    src = """
        import jax

        def compare(x):
            out = {}
            for mode in ("fast", "exact"):
                f = jax.jit(lambda v: solve(v, mode))  # HERE
                out[mode] = f(x)
            return out
    """
    assert default_findings(src) == []
    assert opt_in_findings(src, "JAX101") == [(line_of(src, "# HERE"), "JAX101",
                                               "no evidence that `compare` runs more than once")]
    test = src.replace("def compare(x)", "def test_compare(x)")
    assert findings(test, "JAX101") == []


def test_jax101_under_a_periodic_guard_is_opt_in_and_says_when_it_compiles():
    src = """
        import jax

        def train(state, batches, max_steps, sections):
            for i, b in enumerate(batches):
                state = step(state, b)
                if i % (max_steps // sections) == 0:
                    teacher = jax.jit(lambda x: x)(state)  # PERIODIC
                other = jax.jit(lambda x: x + 1)(state)  # EVERY
            return state, teacher, other
    """
    assert default_findings(src) == [(line_of(src, "# EVERY"), "JAX101")]
    got = opt_in_findings(src, "JAX101")
    assert [(line, why) for line, _, why in got] == [
        (line_of(src, "# PERIODIC"), f"built only when the periodic `if` on line {line_of(src, 'if i %')} runs, "
                                     "so it compiles once per period, not every iteration")]
    assert sorted("whenever the periodic `if`" in m for m in messages(src, "JAX101")) == [False, True]


def test_jax101_quiet_when_each_iteration_compiles_a_different_function():
    src = """
        import jax

        for game in available_games():
            env = make(game)
            init = jax.jit(jax.vmap(env.init))
            step = jax.jit(jax.vmap(auto_reset(env.step, env.init)))
            s = init(keys)
            for i in range(100):
                s = step(s, act(s))
    """
    assert findings(src, "JAX101") == []


def test_jax101_still_reports_a_closure_over_loop_data_and_says_to_pass_it():
    src = """
        import jax

        def unroll(layers, cfg, n):
            out = []
            for i in range(n):
                def slice_ith(x):
                    return jax.tree_util.tree_map(lambda a: jax.numpy.take(a, i, axis=cfg.axis), x)
                out.append(jax.jit(slice_ith)(layers))  # HERE
            return out
    """
    assert default_findings(src) == [(line_of(src, "# HERE"), "JAX101")]
    (msg,) = messages(src, "JAX101")
    assert msg == ("`jax.jit` of the function `slice_ith` defined there is rebuilt on every iteration of the loop "
                   "on line 6, so every iteration traces and compiles it again; pass `i` as an argument and create "
                   "the jitted function once, before the loop")


def test_jax101_a_lambda_reading_the_batch_through_array_methods_is_still_reported():
    src = """
        import jax

        def losses(params, batches):
            out = []
            for batch in batches:
                out.append(jax.jit(lambda p: (p * batch.mean()).sum())(params))  # HERE
            return out
    """
    assert default_findings(src) == [(line_of(src, "# HERE"), "JAX101")]
    assert "pass `batch` as an argument" in messages(src, "JAX101")[0]


def test_jax101_a_short_range_loop_is_still_every_iteration():
    src = """
        import jax
        import jax.numpy as jnp

        params = jnp.ones(16)
        for step in range(5):
            update = jax.jit(lambda p: p - 0.1 * jnp.sin(p))  # HERE
            params = update(params)
    """
    assert default_findings(src) == [(line_of(src, "# HERE"), "JAX101")]


# --------------------------------------------------------------------------- JAX103: values that do not churn


JAX103_NO_CHURN = {
    "loop_invariant_value_recomputed_in_the_loop": """
        import jax

        eval_step_pmapped = jax.pmap(eval_step, static_broadcasted_argnums=(2,))

        def evaluate(state, dataset_dict, ds_name, steps):
            for eval_step_i in range(steps):
                task = dataset_dict[ds_name].meta_data["task_name"]
                batch = next(dataset_dict[ds_name].valid_iter)
                eval_step_pmapped(state, batch, task)
    """,
    "values_of_a_small_constant_range": """
        from functools import partial
        import jax

        @partial(jax.jit, static_argnums=(1,))
        def get_qp(state, ix):
            return state[ix]

        def visualize(state, max_steps):
            num_viz = 3
            rollouts = []
            for step in range(max_steps):
                for i in range(num_viz):
                    rollouts.append(get_qp(state, i))
            return rollouts
    """,
    "co_training_task_from_a_helper": """
        from functools import partial
        import jax

        @partial(jax.jit, static_argnums=(0, 1))
        def train_step(task, dataset, state, batch):
            return state

        def train(state, total_steps, get_next_train_batch, metrics):
            for step in range(total_steps):
                batch, task, ds = get_next_train_batch(step)
                state = train_step(task, ds, state, batch)
                if step % 100 == 0:
                    for task, ds in metrics.keys():
                        print(task, ds)
            return state
    """,
    "a_value_from_a_few_options": """
        from functools import partial
        import jax

        @partial(jax.jit, static_argnames=("train",))
        def forward(x, train):
            return x

        def run(x, n):
            for step in range(n):
                x = forward(x, train=step % 10 != 0)
                x = forward(x, train="dropout" if step % 2 else "none")
            return x
    """,
    "an_entry_picked_by_the_counter_modulo_a_loop_invariant_size": """
        from functools import partial
        import jax

        @partial(jax.jit, static_argnames=("task",))
        def step_fn(x, task):
            return x

        def run(x, n, tasks, order):
            for step in range(n):
                task = tasks[order[step % len(order)]]
                x = step_fn(x, task)
            return x
    """,
}


@pytest.mark.parametrize("src", JAX103_NO_CHURN.values(), ids=JAX103_NO_CHURN.keys())
def test_jax103_quiet_for_values_that_do_not_churn(src):
    assert findings(src, "JAX103") == []


def test_jax103_message_names_the_loop_whose_iterations_change_it():
    src = """
        from functools import partial
        import jax

        @partial(jax.jit, static_argnames=("rate",))
        def train_step(params, batch, rate):
            return params

        def finetune(params, batches, num_epochs):
            for epoch in range(num_epochs):
                rate = 0.5 * (1.0 - epoch / num_epochs)
                for batch in batches:
                    params = train_step(params, batch, rate=rate)
            return params
    """
    assert messages(src, "JAX103") == [
        "static argument `rate` of `train_step` is computed from the loop counter `epoch`: it takes a new value on "
        "every iteration of the loop on line 10, so every iteration compiles a new program; pass it as a traced "
        "argument (not static), or keep it to a few fixed values"]


# --------------------------------------------------------------------------- bound methods of any instance

BOUND_METHOD_POSITIVE = {
    "method_of_an_attribute_in_a_per_step_method": """
        import jax
        import jax.numpy as jnp

        class Env:
            def __init__(self, gravity):
                self.gravity = gravity

            def step(self, state, action):
                return state + action - self.gravity

        class Agent:
            def __init__(self):
                self.env = Env(9.8)

            def act(self, state, action):
                return jax.jit(self.env.step)(state, action)  # expect: JAX102
    """,
    "method_of_a_local_instance_in_a_loop": """
        import jax
        import jax.numpy as jnp

        class Env:
            def get_obs(self, state):
                return jnp.tanh(state)

        def rollout(states):
            env = Env()
            obs = []
            for s in states:
                obs.append(jax.jit(env.get_obs)(s))  # expect: JAX101
            return obs
    """,
    "method_of_a_module_level_instance_per_call": """
        import jax
        import jax.numpy as jnp

        class Scorer:
            def score(self, x):
                return jnp.sum(x ** 2)

        SCORER = Scorer()

        def train_step(x):
            return jax.jit(SCORER.score)(x)  # expect: JAX102
    """,
    "name_bound_to_a_method_in_the_loop": """
        import jax

        class Buffer:
            def insert(self, data, item):
                return data.at[0].set(item)

        def fill(data, items):
            buf = Buffer()
            for item in items:
                insert = buf.insert
                data = jax.jit(insert)(data, item)  # expect: JAX101
            return data
    """,
    "inherited_method_and_super": """
        import jax

        class Base:
            def apply(self, x):
                return x * 2

        class Net(Base):
            def __call__(self, x):
                return jax.jit(super().apply)(x)  # expect: JAX102

        class Wrapper:
            def __init__(self):
                self.net = Net()

            def update(self, x):
                return jax.jit(self.net.apply)(x)  # expect: JAX102
    """,
    "classmethod_on_the_class": """
        import jax

        class Norm:
            @classmethod
            def apply(cls, x):
                return x / 2

        def normalize(xs):
            return [jax.jit(Norm.apply)(x) for x in xs]  # expect: JAX101
    """,
}


@pytest.mark.parametrize("src", BOUND_METHOD_POSITIVE.values(), ids=BOUND_METHOD_POSITIVE.keys())
def test_jit_of_a_bound_method_of_any_instance_is_reported(src):
    assert_marked(src)


BOUND_METHOD_STORED = {
    "train_state_apply_fn_field": """
        import jax
        from flax import struct

        @struct.dataclass
        class TrainState:
            apply_fn: object = struct.field(pytree_node=False)
            params: object = None

        def train_step(state: TrainState, x):
            return jax.jit(state.apply_fn)(state.params, x)

        def train(state, xs):
            for x in xs:
                y = jax.jit(state.apply_fn)(state.params, x)
            return y
    """,
    "loss_fn_stored_in_init": """
        import jax

        def mse(p, x):
            return ((p - x) ** 2).mean()

        class Trainer:
            def __init__(self, loss_fn=mse):
                self.loss_fn = loss_fn

            def step(self, p, x):
                return jax.jit(self.loss_fn)(p, x)

        class Runner:
            def __init__(self):
                self.trainer = Trainer()

            def update(self, p, x):
                return jax.jit(self.trainer.loss_fn)(p, x)
    """,
    "module_attribute_function": """
        import jax
        import losses
        import pkg.metrics as metrics

        def train_step(p, x):
            return jax.jit(losses.mse)(p, x) + jax.jit(metrics.acc)(p, x)

        def evaluate(p, xs):
            return [jax.jit(losses.mse)(p, x) for x in xs]
    """,
    "function_on_its_class": """
        import jax

        class Losses:
            def mse(p, x):
                return ((p - x) ** 2).mean()

        def train_step(p, x):
            return jax.jit(Losses.mse)(p, x)

        def evaluate(p, xs):
            return [jax.jit(Losses.mse)(p, x) for x in xs]
    """,
    "staticmethods": """
        import jax

        class Model:
            @staticmethod
            def forward(p, x):
                return p * x

            def step(self, p, x):
                return jax.jit(self.forward)(p, x)

        MODEL = Model()

        def evaluate(p, xs):
            return [jax.jit(MODEL.forward)(p, x) + jax.jit(Model.forward)(p, x) for x in xs]
    """,
    "functions_in_a_dict": """
        import jax

        def relu(x):
            return x * (x > 0)

        class Net:
            def __init__(self):
                self.acts = {"relu": relu}

            def __call__(self, x, name):
                return jax.jit(self.acts[name])(x)

        ACTS = {"relu": relu}

        def evaluate(xs):
            return [jax.jit(ACTS["relu"])(x) for x in xs]
    """,
    "optax_transformation_fields": """
        import jax
        import optax

        class Learner:
            def __init__(self):
                self.tx = optax.adam(1e-3)

            def update(self, grads, opt_state, params):
                return jax.jit(self.tx.update)(grads, opt_state, params)
    """,
    "pmap_and_filter_jit_reuse_equal_bound_methods": """
        import jax
        import equinox as eqx

        class Buffer:
            def insert(self, data, item):
                return data + item

        class Learner:
            def __init__(self):
                self._buffer = Buffer()

            def update(self, data, item):
                data = jax.pmap(self._buffer.insert)(data, item)
                return eqx.filter_jit(self._buffer.insert)(data, item)

            def step(self, data, item):
                return jax.pmap(self.update)(data, item)
    """,
    "a_different_instance_each_iteration_or_call": """
        import jax

        class Env:
            def step(self, s):
                return s + 1

        def rollout_all(states):
            for cfg in range(3):
                env = Env()
                states = jax.jit(env.step)(states)
            return states

        def train_step(env, s):
            return jax.jit(env.step)(s)
    """,
    "instance_from_another_module": """
        import jax
        from envs import make_env

        class Agent:
            def __init__(self, name):
                self.env = make_env(name)

            def act(self, s):
                return jax.jit(self.env.step)(s)
    """,
    "wrapper_kept_once": """
        import jax

        class Env:
            def step(self, s):
                return s + 1

        class Agent:
            def __init__(self):
                self.env = Env()
                self._step = jax.jit(self.env.step)

            def act(self, s):
                return self._step(s)
    """,
}


@pytest.mark.parametrize("src", BOUND_METHOD_STORED.values(), ids=BOUND_METHOD_STORED.keys())
def test_jit_of_a_stored_function_or_an_equal_bound_method_never_claims_a_recompile(src):
    """The wrapped function is the same object each time (or, for pmap, an equal bound method):
    the cache hits. Issue 27: a wrapper rebuilt per step is still reported, for its cost, with a
    message that says it does not recompile; nothing here may say it compiles again."""
    msgs = messages(src, "JAX101") + messages(src, "JAX102")
    assert all("does not recompile" in m and "compiles it again" not in m for m in msgs), msgs


# Of those, the ones that stay quiet: a function looked up in a dict, an object this module did
# not make (unknown), a different instance each iteration, a wrapper built once.
QUIET = ("functions_in_a_dict", "optax_transformation_fields", "a_different_instance_each_iteration_or_call",
         "instance_from_another_module", "wrapper_kept_once")


@pytest.mark.parametrize("name", QUIET)
def test_jit_of_an_unknown_or_kept_callable_is_quiet(name):
    src = BOUND_METHOD_STORED[name]
    assert findings(src, "JAX101") == [] and findings(src, "JAX102") == []


def test_rewrapped_same_function_per_call_is_jax104s_not_jax102s():
    # the same function (or, for jax.pmap, an equal bound method) rewrapped per call does not
    # recompile: JAX104 reports it (tests/test_rules_rewrap.py), JAX102 no longer does
    assert messages(BOUND_METHOD_STORED["train_state_apply_fn_field"], "JAX102") == []
    src = BOUND_METHOD_STORED["pmap_and_filter_jit_reuse_equal_bound_methods"]
    assert messages(src, "JAX102") == []
    msgs = messages(src, "JAX104")
    assert msgs and all("does not recompile" in m for m in msgs)


def test_bound_method_message_says_a_new_object_is_made_each_access():
    [msg] = messages(BOUND_METHOD_POSITIVE["method_of_an_attribute_in_a_per_step_method"], "JAX102")
    assert "the bound method `self.env.step` (a new object at every attribute access)" in msg
    assert "`act` is a per-step method" in msg


def test_jax102_closure_defined_before_a_loop_in_a_repeated_function():
    """Issue 12 gap 6: a closure defined before the loop is one new function per call of the outer
    function: its jit compiles once per call, in the loop or outside it."""
    src = """
        import jax
        import jax.numpy as jnp

        def evaluate(params, batches):
            def body_fn(p, b):
                return jnp.mean(p * b)
            total = 0.0
            for b in batches:
                total += jax.jit(body_fn)(params, b)  # expect: JAX102
            return total

        def train(params, data, n):
            for i in range(n):
                evaluate(params, data)
    """
    assert_marked(src)
    assert "compiles again the program its loop on line 9 runs" in messages(src, "JAX102")[0]
    once = src.replace("    for i in range(n):\n                evaluate(params, data)",
                       "    evaluate(params, data)")
    assert once != src and default_findings(once, "JAX102") == []
    # only `train`'s name says it runs once (issue 26: a name decides at most opt-in, not silence)
    assert [o[2] for o in opt_in_findings(once, "JAX102")] == [
        "only names say that `evaluate` runs once per program: it is named like code that runs once, or called "
        "only from such code (jaxlint's conventions on set-up and entry-point names)"]


# --------------------------------------------------------------------------- issue 27: wrappers rebuilt


def test_the_same_function_rewrapped_every_step_is_jax104_not_jax101():
    """No recompile: JAX104's (issue 39), with the measured cost; JAX101 stays quiet."""
    src = """
        import jax
        import jax.numpy as jnp

        def step(p, b):
            return p - 0.1 * jnp.mean(b)

        def train(params, batches, key):
            for batch in batches:
                params = jax.jit(step)(params, batch)  # expect: JAX104 (opt-in)
                key, sub = jax.jit(jax.random.split)(key)  # expect: JAX104 (opt-in)
            return params
    """
    assert_marked(src)
    assert findings(src, "JAX101") == []
    msgs = messages(src, "JAX104")
    assert all("does not recompile" in m and "about 0.05-0.2 ms more per call" in m for m in msgs)
    assert any("`jax.random.split`" in m for m in msgs) and any("the function `step`" in m for m in msgs)


def test_jax101_jit_of_a_library_environment_method_in_a_loop():
    src = """
        import jax
        import gymnax

        def check(state, n):
            env, params = gymnax.make("Asterix-MinAtar")
            for _ in range(n):
                obs = jax.jit(env.get_obs)(state)  # expect: JAX101
                print(obs.shape)
    """
    assert_marked(src)
    (msg,) = messages(src, "JAX101")
    assert "bound method `env.get_obs`" in msg and "compiles it again" in msg


def test_jax101_params_of_the_factory_tuple_are_not_an_environment():
    assert findings("""
        import jax
        import gymnax

        def check(state, n):
            env, params = gymnax.make("Asterix-MinAtar")
            for _ in range(n):
                out = jax.jit(params.fn)(state)
    """, "JAX101") == []


def test_jax102_jit_of_a_method_of_an_attribute_made_by_a_library_factory():
    assert_marked("""
        import jax
        from brax import envs

        class BraxEnv:
            def __init__(self, name):
                self.env = envs.create(env_name=name)

            def step(self, state, action):
                return jax.jit(self.env.step)(state, action)  # expect: JAX102
    """)


def test_pmap_of_a_method_of_an_annotated_parameter_does_not_recompile_but_costs():
    # the annotation makes `self._buffer` a ReplayBuffer: `insert_internal` (abstract) is a method
    src = """
        import abc
        import jax

        class ReplayBuffer(abc.ABC):
            @abc.abstractmethod
            def insert_internal(self, state, samples):
                ...

        class PmapWrapper:
            def __init__(self, buffer: ReplayBuffer):
                self._buffer = buffer

            def insert(self, state, samples):
                return jax.pmap(self._buffer.insert_internal)(state, samples)  # expect: JAX104 (opt-in)
    """
    assert_marked(src)
    assert findings(src, "JAX102") == []
    (msg,) = messages(src, "JAX104")
    assert "does not recompile" in msg and "about 0.03-0.07 ms more per call" in msg


def test_jax102_unannotated_parameter_object_stays_unknown():
    assert findings("""
        import jax

        class PmapWrapper:
            def __init__(self, buffer):
                self._buffer = buffer

            def insert(self, state, samples):
                return jax.pmap(self._buffer.insert_internal)(state, samples)

            def step(self, state, samples):
                return jax.jit(self._buffer.insert_internal)(state, samples)
    """, "JAX102") == []


def test_jax102_same_function_rewrapped_only_where_the_caller_runs_per_step():
    # a function not known to run at steps: no report of a wrapper that does not recompile
    assert findings("""
        import jax
        import jax.numpy as jnp

        def f(x):
            return x * 2

        def helper(x):
            y = jax.jit(f)(x)
            return y + 1

        def evaluate(xs):
            return [helper(x) for x in xs]
    """, "JAX102") == []


def test_rewrap_under_a_periodic_guard_is_not_reported():
    src = """
        import jax

        def kinetic(x):
            return (x ** 2).sum()

        def simulate(x, n, every):
            for step in range(n):
                x = x * 0.99
                if step % every == 0:
                    print(jax.jit(kinetic)(x))
            return x
    """
    assert findings(src, "JAX101") == [] and findings(src, "JAX104") == []


def test_jax103_a_static_count_read_from_each_batch_changes_with_the_data():
    src = """
        from functools import partial
        import jax
        import numpy as np

        @partial(jax.jit, static_argnames="n_valid")
        def loss(x, n_valid):
            return x[:n_valid].sum()

        def train(x, batches):
            for batch in batches:
                n_valid = int(batch["mask"].sum())
                x = loss(x, n_valid=n_valid)  # expect: JAX103
                x = loss(x, n_valid=int(np.count_nonzero(batch["m"])))  # expect: JAX103
            return x
    """
    assert_marked(src)
    assert all("changes with the data of each iteration" in m for m in messages(src, "JAX103"))


def test_jax103_static_count_from_loop_invariant_data_is_quiet():
    assert findings("""
        from functools import partial
        import jax

        @partial(jax.jit, static_argnames="n_valid")
        def loss(x, n_valid):
            return x[:n_valid].sum()

        def train(x, batches, mask):
            n_valid = int(mask.sum())
            for batch in batches:
                x = loss(x, n_valid=n_valid)
                x = loss(x, n_valid=int(mask.sum()))
            return x
    """, "JAX103") == []


def test_jax103_a_new_closure_passed_to_a_filter_jit_function():
    src = """
        import equinox as eqx
        import jax

        @eqx.filter_jit
        def apply(f, x):
            return f(x)

        def train(x, n, scale):
            for i in range(n):
                x = apply(lambda v: v * scale, x)  # expect: JAX103
                x = eqx.filter_jit(jax.tree.map)(lambda v: v + i, x)  # expect: JAX103
            return x

        class Model:
            def step(self, x, s):
                return eqx.filter_jit(jax.tree.map)(lambda v: v * s, x)  # expect: JAX103
    """
    assert_marked(src)
    assert all("is static (not an array)" in m for m in messages(src, "JAX103"))


def test_jax103_filter_jit_near_misses_same_function_jax_jit_and_a_one_shot_function():
    assert findings("""
        import equinox as eqx
        import jax
        import jax.numpy as jnp

        @eqx.filter_jit
        def apply(f, x):
            return f(x)

        def double(v):
            return v * 2

        def train(x, n):
            for i in range(n):
                x = apply(double, x)
                x = apply(jnp.tanh, x)
            return x

        @jax.jit
        def plain(x):
            return x

        def once(x, s):
            return apply(lambda v: v * s, x)
    """, "JAX103") == []


def test_jax101_a_jit_per_number_of_a_short_literal_list_compiles_per_number():
    """Issue 27: a few iterations make a sync cheap, never a compile. Each number bound into the
    wrapped lambda (as a default or a closure) is its own program; traced, one program serves all."""
    src = """
        import jax
        import jax.numpy as jnp

        def f(x, s):
            return jnp.tanh(x * s)

        def run(x):
            scales = [0.5, 1.0, 2.0]
            outs = [jax.jit(lambda x, s=s: f(x, s))(x) for s in scales]  # expect: JAX101
            for s in (0.1, -0.2):
                outs.append(jax.jit(lambda v: f(v, s))(x))  # expect: JAX101
            return outs
    """
    assert_marked(src)
    msgs = messages(src, "JAX101")
    assert "each of the 3 numbers" in msgs[0] and "pass `s` as an argument" in msgs[0]


def test_jax101_a_literal_list_of_functions_or_a_lambda_not_binding_the_number_is_quiet():
    assert default_findings("""
        import jax
        import jax.numpy as jnp

        def run(x, n):
            outs = []
            for act in (jnp.tanh, jax.nn.relu):
                outs.append(jax.jit(lambda v: act(v))(x))
            for s in (0.5, 1.0):
                outs.append(jax.jit(lambda v: v * n)(x))
            return outs
    """, "JAX101") == []


def test_jax101_a_clock_read_elsewhere_in_the_function_does_not_silence_it():
    # issue 37: main() timing its whole run is no benchmark of each iteration; the jit rebuilt in
    # each of its 200 iterations compiles 200 times (22 s under `jaxlint trace`)
    assert_marked("""
    import time
    import jax
    import jax.numpy as jnp

    def main():
        t0 = time.perf_counter()
        x = jnp.ones(3)
        for i in range(200):
            f = jax.jit(lambda v: v * i)  # expect: JAX101
            x = f(x)
        print(time.perf_counter() - t0, x)  # expect: JAX204
    """)


def test_jax101_in_a_loop_that_times_its_iterations_is_opt_in():
    # a loop that reads the clock in every iteration may be measuring a compile per configuration:
    # reported with --pedantic, and the reason names the loop record's benchmark evidence
    src = """
    import time
    import jax
    import jax.numpy as jnp

    def sweep(x, scales):
        times = []
        for s in scales:
            t0 = time.perf_counter()
            f = jax.jit(lambda v: v * s)  # expect: JAX101 (opt-in)
            f(x).block_until_ready()
            times.append(time.perf_counter() - t0)
        return times
    """
    assert_marked(src)
    (why,) = [why for _, _, why in opt_in_findings(src)]
    assert why.startswith("the loop on line 8 reads the clock in its iterations")


_NESTED_IN_MAIN = """
    import jax
    import jax.numpy as jnp

    def main(data, n):
        def apply(x):
            return jax.jit(lambda y: jnp.tanh(y) * 2)(x)  # HERE
        for i in range(n):
            data = apply(data)
        return data
"""


def test_jax102_a_function_nested_in_main_and_called_in_its_loop_rebuilds_its_jit_every_iteration():
    # issue 39: `main` runs once, but each of its iterations calls `apply`, which builds a new lambda and jit
    assert default_findings(_NESTED_IN_MAIN, "JAX102") == [(line_of(_NESTED_IN_MAIN, "# HERE"), "JAX102")]


def test_jax102_a_function_nested_in_main_and_called_once_is_still_taken_to_run_once():
    src = _NESTED_IN_MAIN.replace("        for i in range(n):\n            data = apply(data)\n",
                                  "        data = apply(data)\n")
    assert src != _NESTED_IN_MAIN
    assert default_findings(src, "JAX102") == []
    assert [why for _, _, why in opt_in_findings(src, "JAX102")] == [
        "`main` matches the convention `entry-points`: taken to run once per program"]


def test_model_a_nested_function_called_in_its_parents_loop_is_looped_by_its_parent():
    import ast
    import textwrap

    from jaxlint.model import build_model
    from jaxlint.model.facts import frequency
    from jaxlint.model.policy import roles

    for src, looped in ((_NESTED_IN_MAIN, True),
                        (_NESTED_IN_MAIN.replace("        for i in range(n):\n            data = apply(data)\n",
                                                 "        data = apply(data)\n"), False)):
        m = build_model(ast.parse(textwrap.dedent(src)))
        apply = next(f for f in m.functions if f.name == "apply")
        assert frequency.looped_by_parent(m, apply, roles.frequency(m, apply).rep) is looped


LIBRARY_METHOD = """
import jax
import optax
from evosax import OpenES

strategy = OpenES(popsize=8, num_dims=4)
tx = optax.adam(1e-3)
state = strategy.initialize(jax.random.PRNGKey(0))
for gen in range(100):
    x, state = jax.jit({wrapped})(jax.random.PRNGKey(gen), state)
"""


def test_jax101_jit_of_a_library_objects_method_rebuilt_every_generation():
    # an evosax strategy is a class instance: ``strategy.ask`` is a new bound method at every lookup
    src = LIBRARY_METHOD.format(wrapped="strategy.ask")
    found = [(line, code) for line, code in default_findings(src) if code.startswith("JAX10")]
    assert found == [(10, "JAX101")]


def test_jax101_near_miss_optax_update_is_a_stored_function():
    # an optax GradientTransformation is a NamedTuple of functions: the same object at every lookup
    src = LIBRARY_METHOD.format(wrapped="tx.update")
    assert [(line, code) for line, code in findings(src) if code.startswith("JAX10")] == []


# --------------------------------------------------------------------------- a warm-up, then a timed call
# (fresh set AQ: lecture notebooks that time a solver "without compile time" after a first call, where every
# call builds a new compiled program, so the second figure is a compile again)


def test_jax102_nested_jit_called_again_under_a_clock_pair():
    src = """
        import time
        import jax
        import jax.numpy as jnp

        def newton(f, x0):
            f_prime = jax.grad(f)
            @jax.jit  # expect: JAX102
            def q(x):
                return x - f(x) / f_prime(x)
            x = x0
            for _ in range(50):
                x = q(x)
            return x

        newton(lambda x: jnp.sin(x) - 0.5, 0.2)
        start = time.time()
        r = newton(lambda x: jnp.sin(x) - 0.5, 0.2).block_until_ready()
        print(time.time() - start)
    """
    assert_marked(src)
    msg = messages(src, "JAX102")[0]
    assert "`newton` is called on line 16, then again on line 18 under the clock pair on lines 17-19" in msg
    assert "the measured call on line 18 times a compile" in msg


def test_jax102_nested_jit_near_misses_without_a_measured_rerun():
    once = """
        import time
        import jax

        def newton(f, x0):
            @jax.jit
            def q(x):
                return x - f(x)
            return q(x0)

        start = time.time()
        newton(lambda x: x * 2.0, 0.2).block_until_ready()
        print(time.time() - start)
    """
    assert default_findings(once) == []  # timed, but the only call: the figure says "with compile"
    untimed = once.replace("start = time.time()", "newton(lambda x: x * 3.0, 0.1)").replace(
        "print(time.time() - start)", "")
    assert default_findings(untimed) == []  # two calls, nothing measured: one compile each, by design


def test_jax102_fresh_lax_body_then_timed_call():
    src = """
        import time
        import jax
        import jax.numpy as jnp

        def train(theta, epochs):
            def update(i, t):
                return t - 0.1 * jax.grad(lambda u: jnp.sum(u ** 2))(t)
            return jax.lax.fori_loop(0, epochs, update, theta)  # expect: JAX102

        train(jnp.ones(3), 10)  # warm-up
        t0 = time.perf_counter()
        out = train(jnp.ones(3), 10)
        out.block_until_ready()
        elapsed = time.perf_counter() - t0
    """
    assert_marked(src)
    assert "the measured call on line 13 times a compile" in messages(src, "JAX102")[0]


def test_jax103_fresh_lambda_as_a_static_argument_timed_after_a_warm_up():
    src = """
        import time
        import jax
        import jax.numpy as jnp

        def successive(T, x0):
            return jax.lax.fori_loop(0, 100, lambda i, x: T(x), x0)

        successive = jax.jit(successive, static_argnums=(0,))

        def solve(a, b):
            _T = lambda v: a * v + b
            return successive(_T, jnp.zeros(3))  # expect: JAX103

        solve(0.5, 1.0)
        start = time.time()
        solve(0.5, 1.0).block_until_ready()
        print(f"without compile: {time.time() - start}")
    """
    assert_marked(src)
    msg = messages(src, "JAX103")[0]
    assert msg.startswith("static argument `T` of `successive` is `_T`")
    assert "a function equals only itself" in msg and "times a compile" in msg


def test_jax103_fresh_callable_as_a_static_argument_every_step():
    src = """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnums=(1,))
        def apply(x, fn):
            return fn(x)

        def train(x, steps):
            for step in range(steps):
                x = apply(x, lambda v: v * 0.99)  # expect: JAX103
                x = apply(x, partial(jnp.multiply, 0.5))  # expect: JAX103
            return x
    """
    assert_marked(src)


@pytest.mark.parametrize("src", [
    # the same module-level function object every time: equal, the cache hits
    """
    from functools import partial
    import jax

    def double(v):
        return v * 2

    @partial(jax.jit, static_argnums=(1,))
    def apply(x, fn):
        return fn(x)

    def train(x, steps):
        for step in range(steps):
            x = apply(x, double)
        return x
    """,
    # a bound method of one instance: equal to the next one, the cache hits
    """
    from functools import partial
    import jax

    class Model:
        def f(self, v):
            return v * 2

    @partial(jax.jit, static_argnums=(1,))
    def apply(x, fn):
        return fn(x)

    def train(model, x, steps):
        for step in range(steps):
            x = apply(x, model.f)
        return x
    """,
    # the lambda at a traced (non-static) position: not a static argument at all
    """
    import jax

    @jax.jit
    def apply(x, y):
        return x + y

    def train(x, steps):
        for step in range(steps):
            x = apply(x, (lambda: 1.0)())
        return x
    """,
    # made once, outside the loop
    """
    from functools import partial
    import jax

    @partial(jax.jit, static_argnums=(1,))
    def apply(x, fn):
        return fn(x)

    def train(x, steps):
        fn = lambda v: v * 2
        for step in range(steps):
            x = apply(x, fn)
        return x
    """,
])
def test_jax103_fresh_static_callable_near_misses(src):
    assert default_findings(src, "JAX103") == []


def test_jax103_fresh_lambda_in_a_function_of_a_few_configurations_is_opt_in():
    src = """
        import jax
        import jax.numpy as jnp

        def successive(T, x0):
            return T(x0)

        successive = jax.jit(successive, static_argnums=(0,))

        def solve(a):
            return successive(lambda v: a * v, jnp.zeros(3))

        for a in (0.5, 0.7):
            solve(a)
    """
    assert default_findings(src, "JAX103") == []
    assert [(line, why) for line, _, why in opt_in_findings(src, "JAX103")] == [
        (11, "no evidence that `solve` runs at the steps of a loop, or again after a first call")]


# --------------------------------------------------------------------------- jax.clear_caches() every step


def test_jax101_clear_caches_in_every_iteration_of_a_loop_that_calls_a_compiled_step():
    # fresh set AR: a DiT trainer clears the caches after every step "to save memory"
    src = """
        import gc
        import jax
        import jax.numpy as jnp
        from flax import nnx

        @nnx.jit
        def train_step(model, batch):
            return jnp.mean(batch)

        def train(model, loader, epochs):
            for epoch in range(epochs):
                for step, batch in enumerate(loader):
                    loss = train_step(model, batch)
                    if step % 5000 == 0:
                        print("checkpoint")
                    jax.clear_caches()  # expect: JAX101
                    gc.collect()
    """
    assert_marked(src)
    msg = messages(src, "JAX101")[0]
    assert msg.startswith("`jax.clear_caches()` runs in every iteration of the loop on line 13, which calls the "
                          "compiled `train_step` (line 14)")


@pytest.mark.parametrize("src", [
    # periodic, under an ``if``
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return x * 2

    def train(x, steps):
        for i in range(steps):
            x = step(x)
            if i % 1000 == 0:
                jax.clear_caches()
        return x
    """,
    # after the loop
    """
    import jax

    @jax.jit
    def step(x):
        return x * 2

    def train(x, steps):
        for i in range(steps):
            x = step(x)
        jax.clear_caches()
        return x
    """,
    # nothing compiled in the loop (one eager op, a host function)
    """
    import jax
    import jax.numpy as jnp

    def sweep(configs):
        for c in configs:
            print(jnp.ones(3) * c)
            jax.clear_caches()
    """,
    # a loop over a few literal items
    """
    import jax

    @jax.jit
    def step(x):
        return x * 2

    def run(x):
        for scale in (1, 2, 3):
            x = step(x * scale)
            jax.clear_caches()
        return x
    """,
    # another object's clear_caches
    """
    import jax

    @jax.jit
    def step(x):
        return x * 2

    def train(x, steps, cache):
        for i in range(steps):
            x = step(x)
            cache.clear_caches()
        return x
    """,
])
def test_jax101_clear_caches_near_misses(src):
    assert default_findings(src, "JAX101") == []


def test_jax101_clear_caches_drops_the_compiled_program_at_runtime():
    """What the finding states, under the installed jax: after `jax.clear_caches()` the next call
    of a jitted function compiles again (counted with jax's own compile events)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    with compile_counter(jax) as compiles:
        @jax.jit
        def step(x):
            return x * 2.0 + 1.0

        x = jnp.ones(4)
        x = step(x)
        start = compiles[0]
        for _ in range(3):
            x = step(x)
        assert compiles[0] == start  # the cache hits
        for _ in range(3):
            jax.clear_caches()
            x = step(x)
        assert compiles[0] - start == 3  # one compile per iteration


def test_jax103_a_new_lambda_as_a_static_argument_compiles_again_at_runtime():
    """What JAX103 states of a callable made anew (fresh AQ's solvers): static arguments are keyed by hash and
    equality, and a lambda equals only itself, so each new one compiles; the same function object does not."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def successive(T, x0):
        return jax.lax.fori_loop(0, 10, lambda i, x: T(x), x0)

    solve = jax.jit(successive, static_argnums=(0,))

    def half(v):
        return 0.5 * v + 1.0

    with compile_counter(jax) as compiles:
        x = jnp.zeros(3)
        solve(half, x).block_until_ready()
        first = compiles[0]
        for _ in range(3):
            solve(half, x).block_until_ready()
        assert compiles[0] == first  # the same function object: the cache hits
        for a in (0.5, 0.5, 0.5):
            solve(lambda v, a=a: a * v + 1.0, x).block_until_ready()
        assert compiles[0] - first == 3  # a new lambda each time: a compile each time
