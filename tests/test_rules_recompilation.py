"""JAX101 jit-in-loop, JAX102 jit-per-call, JAX103 static-arg-churn: the rules' own examples,
positive variants in many spellings, and near-miss negatives that must stay quiet."""

from __future__ import annotations


import pytest

import jaxlint_rules
from ruletools import findings, line_of

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
                @jax.jit
                def relax(x):  # HERE
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
    "module_level_fn_rewrapped_in_loop": """
        import jax
        import jax.numpy as jnp

        def step(p, b):
            return p - 0.1 * jnp.mean(b)

        def train(params, batches):
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
    "nested_decorated_def_called": """
        import jax
        import jax.numpy as jnp

        def predict(params, x):
            @jax.jit
            def forward(x):  # HERE
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
            @nnx.jit
            def eval_step(model, batch):  # HERE
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
            @partial(jax.jit, static_argnums=1)
            def pad(x, n):  # HERE
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


@pytest.mark.parametrize("src", JAX102_POSITIVE.values(), ids=JAX102_POSITIVE.keys())
def test_jax102_reported(src):
    assert findings(src) == [(line_of(src, "# HERE"), "JAX102")]


# --------------------------------------------------------------------------- JAX102 near misses

JAX102_NEGATIVE = {
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


@pytest.mark.parametrize("src", JAX102_NEGATIVE.values(), ids=JAX102_NEGATIVE.keys())
def test_jax102_near_miss_not_reported(src):
    assert findings(src, "JAX102") == []


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


def test_jax102_still_reports_a_closure_over_a_model_method():
    src = """
        import jax

        def predict(model, params, x):
            return jax.jit(lambda v: model.apply(params, v))(x)  # HERE
    """
    assert findings(src, "JAX102") == [(line_of(src, "# HERE"), "JAX102")]
