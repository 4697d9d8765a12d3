"""JAX502: a key the loop never replaces, handed to a callee that draws from it (facts/keyhandoffs.py).

Cases from fresh sets catalogued blind: annotated-s4's ``train_epoch(state, train_rng, ...)`` per epoch
(the callee splits the key in its own loop and hands the subkeys on), indaba's
``negative_sampling(graph, n, key=key)`` per epoch (a keyword argument), QDax's ``update_fn(repertoire,
emitter_state, keys)`` (a callee outside the project: opt-in), and bonsai's ``jit_sampler(logits,
key=key)`` (``jax.jit(Sampler(...))``, a class of another module of the project that draws: default).
"""

from __future__ import annotations

import ast
import textwrap

from jaxlint.model import build_model
from jaxlint.model.facts import keyhandoffs
from ruletools import assert_marked, default_findings, expected, findings, make_project, opt_in_findings, path_codes, path_default_codes


def test_keyword_key_into_a_module_function_that_draws_every_epoch():
    src = """
    import jax

    def negative_sampling(graph, num, key):
        return jax.random.randint(key, (num,), 0, graph.n)

    def train(graph, epochs):
        key = jax.random.PRNGKey(42)
        for epoch in range(epochs):
            neg = negative_sampling(graph, num=10, key=key)  # expect: JAX502
            graph = graph.update(neg)
        return graph
    """
    assert default_findings(src, "JAX502") == expected(src)
    [f] = [f for f in _check(src) if f.code == "JAX502"]
    assert "negative_sampling" in f.message and "jax.random.randint` on line 5" in f.message
    assert any("line 5" in e and "randint" in e for e in f.evidence)  # names the draw


def test_callee_splits_in_its_own_loop_and_draws_through_a_nested_call():
    src = """
    import jax

    def train_step(state, rng, batch):
        noise = jax.random.bernoulli(rng, 0.9, batch.shape)
        return state + (batch * noise).sum()

    def train_epoch(state, rng, loader):
        for batch in loader:
            rng, drop_rng = jax.random.split(rng)
            state = train_step(state, drop_rng, batch)
        return state

    def example_train(state, loader, epochs, seed):
        key = jax.random.PRNGKey(seed)
        key, rng, train_rng = jax.random.split(key, num=3)
        for epoch in range(epochs):
            state = train_epoch(state, train_rng, loader)  # expect: JAX502
        return state

    def advanced(state, loader, epochs, train_rng):
        for epoch in range(epochs):
            train_rng, sub = jax.random.split(train_rng)
            state = train_epoch(state, sub, loader)
        return state

    def folded(state, loader, epochs, train_rng):
        for epoch in range(epochs):
            state = train_epoch(state, jax.random.fold_in(train_rng, epoch), loader)
        return state
    """
    assert findings(src, "JAX502") == expected(src)
    assert default_findings(src, "JAX502") == expected(src)


def test_callee_whose_draw_reaches_a_library_is_opt_in():
    # annotated-s4: the subkeys go to ``model.apply(rngs={"dropout": rng})``: flax may or may not draw
    src = """
    import jax

    def train_step(state, rng, batch, model):
        def loss_fn(params):
            return model.apply({"params": params}, batch, rngs={"dropout": rng}).mean()
        return jax.grad(loss_fn)(state)

    def train_epoch(state, rng, model, loader):
        for batch in prefetch(loader):  # `loader` reaches a library call too, but is no key
            rng, drop_rng = jax.random.split(rng)
            state = train_step(state, drop_rng, batch, model)
        return state

    def example_train(state, model, loader, epochs):
        key, train_rng = jax.random.split(jax.random.PRNGKey(0))
        for epoch in range(epochs):
            state = train_epoch(state, train_rng, model, loader)
        return state
    """
    assert default_findings(src, "JAX502") == []
    [(line, code, why)] = opt_in_findings(src, "JAX502")
    assert line == 18 and "unknown" in why
    [f] = [f for f in _check(src) if f.code == "JAX502"]
    assert any("model.apply" in e and "unknown" in e for e in f.evidence)


def test_library_callee_with_a_proven_key_is_opt_in():
    src = """
    import jax
    import jax.numpy as jnp
    from qdax.core import map_elites

    key = jax.random.key(0)
    key, *keys = jax.random.split(key, num=5)
    keys = jnp.stack(keys)
    update_fn = map_elites.get_update_fn()
    for i in range(100):
        repertoire, emitter_state, metrics = update_fn(repertoire, emitter_state, keys)
        params = other_fn(params, config)
    """
    assert default_findings(src, "JAX502") == []
    assert [line for line, _, _ in opt_in_findings(src, "JAX502")] == [11]  # not `params`, not a key


def test_near_misses_are_not_reported():
    assert findings("""
    import jax

    def next_key(key):
        return jax.random.split(key)[0]

    def ignores(state, key):
        return state + 1

    def dropout(x, key, deterministic):
        if not deterministic:
            x = x * jax.random.bernoulli(key, 0.9, x.shape)
        return x

    def draws(x, key):
        return x + jax.random.normal(key, x.shape)

    def loop(x, steps, seed):
        key = jax.random.PRNGKey(seed)
        for i in range(steps):
            k = next_key(key=key)                      # only splits and returns the new key
            x = ignores(x, key=key)                    # ignores it
            x = dropout(x, key=key, deterministic=True)  # the draw is switched off
        for i in range(steps):
            key, sub = jax.random.split(key)
            x = draws(x, sub)                      # a new key each iteration
        for name in ("a", "b"):
            print(key)
        return x, k

    def folded(x, steps, key):
        for i in range(steps):
            x = draws(x, jax.random.fold_in(key, i))
        return x

    def carried(x, steps, key):
        for i in range(steps):
            key = jax.random.fold_in(key, i)
            x = draws(x, key)                      # rebound in the loop
        return x
    """, "JAX502") == []


def test_findings_do_not_change_when_identifiers_are_renamed():
    src = """
    import jax

    def {f}(x, {k}):
        return x + jax.random.normal({k}, x.shape)

    def loop(x, steps):
        {r} = jax.random.PRNGKey(0)
        for i in range(steps):
            x = {f}(x, {r})
        return x
    """
    a = findings(src.format(f="draws", k="key", r="rng"), "JAX502")
    b = findings(src.format(f="zz", k="q", r="w"), "JAX502")
    assert a == b == [(10, "JAX502")]


SAMPLERS = """
import jax

class Sampler:
    def __init__(self, temperature):
        self.temperature = temperature

    def __call__(self, logits, *, key):
        return jax.random.categorical(key, logits / self.temperature)

class Greedy:
    def __call__(self, logits, *, key):
        return logits.argmax(-1)

def top1(logits, key):
    k1, k2 = jax.random.split(key)
    return jax.random.categorical(k2, logits)
"""

DECODE = """
import jax
from pkg{src} import {names}

def decode(model, tokens, steps):
    key = jax.random.key(0)
    sampler = jax.jit({make})
    for i in range(steps):
        logits = model(tokens)
        tokens = {call}
    return tokens
"""


def test_key_handed_to_a_sampler_of_another_module_of_the_project(tmp_path):
    # bonsai's qwen3 run_model.py: ``jit_sampler = jax.jit(Sampler(...))`` called with the same key per token
    for src, names, make, call in [(".samplers", "Sampler", "Sampler(1.0)", "sampler(logits, key=key)"),
                                   ("", "Sampler", "Sampler(1.0)", "sampler(logits, key=key)"),  # re-exported
                                   (".samplers", "top1", "top1", "sampler(logits, key)")]:
        make_project(tmp_path, {"pkg/__init__.py": "from .samplers import Sampler\n", "pkg/samplers.py": SAMPLERS,
                                "run.py": DECODE.format(src=src, names=names, make=make, call=call)})
        assert path_default_codes(tmp_path / "run.py") == [(10, "JAX502")], (src, names)


def test_an_imported_callee_that_ignores_the_key_is_not_proven(tmp_path):
    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/samplers.py": SAMPLERS,
                            "run.py": DECODE.format(src=".samplers", names="Greedy", make="Greedy()",
                                                    call="sampler(logits, key=key)")})
    assert path_default_codes(tmp_path / "run.py") == []  # Greedy.__call__ never draws: not even opt-in default
    make_project(tmp_path, {"run.py": DECODE.format(src=".missing", names="Sampler", make="Sampler(1.0)",
                                                    call="sampler(logits, key=key)")})
    assert path_default_codes(tmp_path / "run.py") == []  # the module is not in the project: unknown, opt-in


# -- model facts


def _model(src):
    tree = ast.parse(textwrap.dedent(src))
    return tree, build_model(tree)


def test_parameter_draw_follows_splits_loops_and_nested_calls():
    tree, m = _model("""
    import jax

    def inner(k):
        return jax.random.uniform(k)

    def outer(key, n):
        for _ in range(n):
            key, sub = jax.random.split(key)
            y = inner(sub)
        return y

    def returns_only(key):
        a, b = jax.random.split(key)
        return a

    def to_library(key, model):
        return model.apply({}, rngs={"dropout": key})

    def rebound(key):
        key = make()
        return jax.random.normal(key)
    """)
    fs = {f.name: f for f in m.functions}
    d = keyhandoffs.parameter_draw(m, fs["outer"], "key", 0)
    assert d.proven and d.fn == "uniform" and [f.name for f in d.chain] == ["outer", "inner"]
    assert keyhandoffs.parameter_draw(m, fs["outer"], "n", 0) is None
    assert keyhandoffs.parameter_draw(m, fs["returns_only"], "key", 0) is None
    d = keyhandoffs.parameter_draw(m, fs["to_library"], "key", 0)
    assert d is not None and not d.proven and ast.unparse(d.call.func) == "model.apply"
    assert keyhandoffs.parameter_draw(m, fs["rebound"], "key", 0) is None


def test_proven_key_follows_makers_splits_stacks_and_items():
    tree, m = _model("""
    import jax
    import jax.numpy as jnp
    key = jax.random.key(0)
    key, *keys = jax.random.split(key, 3)
    stacked = jnp.stack(keys)
    data = jax.random.key_data(stacked)
    first = stacked[0]
    a, b = something()
    arr = jnp.stack([a, b])
    use(key, keys, stacked, data, first, a, arr)
    """)
    call = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "use"][0]
    scope = m.scope_at(call)
    assert [keyhandoffs.proven_key(m, a, scope, 0) for a in call.args] == [True, True, True, True, True, False, False]


def _check(src):
    import jaxlint_rules
    from jaxlint.engine import check_source
    return check_source(textwrap.dedent(src), "t.py", [r() for r in jaxlint_rules.ALL_RULES]).findings


AUGMENT = """
import jax

def random_crop(img, rng, padding):
    shift = jax.random.randint(rng, (2,), 0, 2 * padding + 1)
    return jax.lax.dynamic_slice(img, (shift[0], shift[1]), (8, 8))

def batched_random_crop(img, rng, padding):
    rngs = jax.random.split(rng, img.shape[0])
    return jax.vmap(lambda i, r: random_crop(i, r, padding))(img, rngs)

def identity(img, rng, padding):
    return img
"""


def test_a_parameter_key_handed_to_a_drawing_function_of_another_module_is_proven_by_its_draw(tmp_path):
    # serl's DrQ (fresh set E): ``data_augmentation_fn(self, rng, observations)`` crops every camera with one
    # key, through ``batched_random_crop`` of another module that draws from it: every view gets the same crop
    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/augment.py": AUGMENT, "pkg/agent.py": """
        import jax
        from pkg.augment import batched_random_crop, identity

        class Agent:
            def augment(self, rng, observations):
                for pixel_key in self.config["image_keys"]:
                    observations = observations.copy(
                        add_or_replace={pixel_key: batched_random_crop(observations[pixel_key], rng, padding=4)})
                return observations

            def augment_in_place(self, rng, observations):
                for pixel_key in self.config["image_keys"]:
                    observations[pixel_key] = batched_random_crop(observations[pixel_key], rng, 4)
                return observations

        @jax.jit
        def step_fn(state, batch):
            return state + batch.mean()

        def train(state, batches, rng):
            for batch in batches:
                batch = batched_random_crop(batch, rng, 4)
                state = step_fn(state, batch)
            return state
        """})
    # the camera loops walk a configuration's keys: with one camera the key draws once (serl's reward
    # classifier, fresh set E, runs with `["front"]`), so they are opt-in, naming that unknown
    assert path_default_codes(tmp_path / "pkg/agent.py") == [(23, "JAX502")]
    assert [c for c in path_codes(tmp_path / "pkg/agent.py") if c[1] == "JAX502"] == [(9, "JAX502"), (14, "JAX502"), (23, "JAX502")]


def test_near_misses_of_a_key_handed_to_another_module(tmp_path):
    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/augment.py": AUGMENT, "pkg/agent.py": """
        import jax
        from pkg.augment import batched_random_crop, identity

        def ignores_the_key(rng, observations, names):
            for name in names:
                observations[name] = identity(observations[name], rng, 4)  # no draw: not a reuse
            return observations

        def split_per_view(rng, observations, names):
            for name in names:
                rng, sub = jax.random.split(rng)
                observations[name] = batched_random_crop(observations[name], sub, 4)
            return observations

        def used_within_the_iteration(rng, observations, names, score):
            total = 0.0
            for name in names:
                total += score(batched_random_crop(observations[name], rng, 4))  # not kept side by side
            return total
        """})
    assert path_default_codes(tmp_path / "pkg/agent.py") == []


def test_arguments_of_a_partial_bind_the_parameters_after_those_it_binds():
    """``vmap(partial(f, a))(keys, ts)``: ``keys`` binds ``f``'s second parameter, the one that draws,
    and ``ts`` the third (fresh set L: a time grid was taken for the key). Reversed, the time grid is
    what draws. (The first line's finding is the split of a key the loop never replaces.)"""
    src = """
    import sys
    from functools import partial
    import jax

    def scores(a, rng, t):
        return jax.random.normal(rng, (3,)) * t + a

    def main(rng, ts, n):
        for _ in range(int(sys.argv[1])):
            fixed = jax.vmap(partial(scores, 1.0))(jax.random.split(rng, n), ts)  # expect: JAX502
            swapped = jax.vmap(partial(scores, 1.0))(ts, rng)  # expect: JAX502
            bound = partial(scores, 2.0)
            again = bound(ts, rng)  # expect: JAX502
    """
    found = [f for f in _check(src) if f.code == "JAX502" and f.opt_in is None]
    assert sorted((f.line, f.code) for f in found) == sorted(expected(src))
    fixed, swapped, again = sorted(found, key=lambda f: f.line)
    assert "`rng`" in fixed.message and "`ts`" not in fixed.message
    assert "`ts`" in swapped.message and "`ts`" in again.message  # through a name bound to the partial


def test_a_callee_drawing_from_its_key_on_its_loops_first_iteration_counts_as_a_use():
    # custom_init draws from `rng2` before its loop advances it; the caller then draws from the
    # same `rng2`: the first layer's weights and the input share their random bits
    src = """
    import jax

    def custom_init(shapes, rng2):
        params = []
        for shape in shapes:
            params.append(jax.random.normal(rng2, shape))
            rng2 += 1
        return params

    def score(shapes, rng2, n):
        params = custom_init(shapes, rng2)
        x = jax.random.normal(rng2, (n, 4))  # expect: JAX502
        return params, x

    def score_split(shapes, key, n):
        init_key, data_key = jax.random.split(key)
        return custom_init(shapes, init_key), jax.random.normal(data_key, (n, 4))
    """
    assert default_findings(src, "JAX502") == expected(src)


_LOADERS = """
import jax
import numpy as np

def get_data_loader(rng, dataset, shuffle=True):
    if shuffle:
        idx = jax.random.permutation(rng, len(dataset))
        dataset = dataset[np.asarray(idx)]
    return dataset

def train(rng, train_ds, eval_ds, epochs):
    for epoch in range(epochs):
        rng, input_rng = jax.random.split(rng)
        for batch in get_data_loader(input_rng, train_ds):
            pass
        for batch in get_data_loader(input_rng, eval_ds, shuffle=False):
            pass
"""


def test_a_loader_told_not_to_shuffle_draws_nothing_from_its_key():
    # fresh Y's first look (distil-whisper): the evaluation loader, built with shuffle=False from the key
    # the training loader shuffled with, was reported as reusing it
    assert [f.code for f in findings(_LOADERS) if f.code == "JAX502"] == []
    # told to shuffle too, the second loader draws the same permutation
    assert_marked(_LOADERS.replace("eval_ds, shuffle=False):", "eval_ds, shuffle=True):  # expect: JAX502"))
    # a positional literal selects the arm the same way
    assert [f.code for f in findings(_LOADERS.replace("shuffle=False", "False")) if f.code == "JAX502"] == []


TIMES = """
import jax


def get_t_samples(key, n, law="uniform"):
    if law == "normal":
        return 0.3 * jax.random.normal(key, (n, 1)) + 0.5
    return jax.random.uniform(key, (n, 1))


def ignore_key(key, n):
    return jax.numpy.zeros((n, 1))
"""

FLOW = """
import jax
from pkg.times import {name}


def train_tuple(z0, z1, key):
    t = {name}({key}, z0.shape[0])
    noise = jax.random.normal(key, z0.shape)
    return z0 * (1 - t) + z1 * t + noise
"""


def test_a_key_drawn_again_after_a_function_of_another_module_drew_from_it(tmp_path):
    # fresh AO's flow matching: the times and the noise from one key, the first draw in another module
    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/times.py": TIMES,
                            "pkg/flow.py": FLOW.format(name="get_t_samples", key="key")})
    assert path_default_codes(tmp_path / "pkg/flow.py") == [(8, "JAX502")]


def test_near_misses_of_a_key_drawn_by_a_function_of_another_module(tmp_path):
    split = FLOW.replace("    t = ", "    key, t_key = jax.random.split(key)\n    t = ")
    make_project(tmp_path, {"pkg/__init__.py": "", "pkg/times.py": TIMES,
                            "pkg/a.py": FLOW.format(name="ignore_key", key="key"),  # draws nothing
                            "pkg/b.py": split.format(name="get_t_samples", key="t_key")})  # its own subkey
    assert path_default_codes(tmp_path / "pkg/a.py") == []
    assert path_default_codes(tmp_path / "pkg/b.py") == []
