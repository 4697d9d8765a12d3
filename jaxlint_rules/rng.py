"""JAX5xx: random numbers that are not random: host RNGs frozen by tracing, reused PRNG keys."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint.model import (
    FunctionInfo,
    Loop,
    ModuleModel,
    call_arg,
)
from jaxlint.rule import Finding, Line, Rule, unparse

JAX_RANDOM = "jax.random."

# jax.random functions that draw from a key (consume it). Key constructors and converters
# (PRNGKey, key, key_data, wrap_key_data, key_impl, clone) only derive or inspect a key and are
# not in this list; split and fold_in are handled on their own below.
SAMPLERS = frozenset({
    "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy", "chisquare", "choice",
    "dirichlet", "double_sided_maxwell", "exponential", "f", "gamma", "generalized_normal", "geometric",
    "gumbel", "laplace", "loggamma", "logistic", "lognormal", "maxwell", "multinomial", "multivariate_normal",
    "normal", "orthogonal", "pareto", "permutation", "poisson", "rademacher", "randint", "rayleigh", "shuffle",
    "t", "triangular", "truncated_normal", "uniform", "wald", "weibull_min",
})
SPLIT = "split"
FOLD_IN = "fold_in"
_KEY_FUNCS = SAMPLERS | {SPLIT, FOLD_IN}  # spellings checked before resolving a call
KEY_MAKERS = ("jax.random.PRNGKey", "jax.random.key")

# Host RNG entry points that build a generator object rather than draw a value.
_NP_CONSTRUCTORS = frozenset({"default_rng", "RandomState", "Generator", "SeedSequence", "BitGenerator", "PCG64",
                              "PCG64DXSM", "MT19937", "Philox", "SFC64"})
_PY_CONSTRUCTORS = frozenset({"Random", "SystemRandom"})
# Calls that set or read the generator state rather than draw from it.
_STATE_CALLS = frozenset({"seed", "get_state", "set_state", "getstate", "setstate", "spawn", "bit_generator",
                          "jumped", "get_bit_generator", "set_bit_generator"})


def _pos(node: ast.AST) -> tuple:
    return (node.lineno, node.col_offset)


def _host_rng(qn: Optional[str]) -> Optional[tuple]:
    """``("numpy.random", "rand")`` / ``("random", "random")`` for a host RNG function, else None."""
    if not qn:
        return None
    if qn.startswith("numpy.random."):
        return "numpy.random", qn[len("numpy.random."):]
    if qn.startswith("random.") and qn.count(".") == 1:
        return "random", qn[len("random."):]
    return None


def _is_constructor(qn: Optional[str]) -> bool:
    found = _host_rng(qn)
    if found is None:
        return False
    mod, name = found
    return name in (_NP_CONSTRUCTORS if mod == "numpy.random" else _PY_CONSTRUCTORS)


class GlobalRngInTracedCode(Rule):
    code = "JAX501"
    confirmed_by = "trace_time"
    name = "global-rng-in-traced-code"
    summary = ("Finds NumPy (`np.random.*`) and Python (`random.*`) random number calls, and methods of host "
               "generators created outside, inside jitted (or otherwise traced) code.")
    rationale = ("Host random number generators run in Python, once, while JAX traces the function. The value "
                 "drawn then is baked into the compiled program as a constant, so every later call reuses the "
                 "same \"random\" numbers (and every row of a vmap or every step of a scan gets the same ones). "
                 "Pass a `jax.random` key into the function and draw with `jax.random.*` instead.")
    bad = """
        import jax
        import jax.numpy as jnp
        import numpy as np

        @jax.jit
        def dropout(x, rate):
            keep = np.random.rand(*x.shape) > rate
            return jnp.where(keep, x / (1.0 - rate), 0.0)
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def dropout(key, x, rate):
            keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
            return jnp.where(keep, x / (1.0 - rate), 0.0)
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for f, call in model.traced_calls():
            scope = f.scope
            func = call.func
            qn = model.resolve(func, scope)
            found = _host_rng(qn)
            if found is not None:
                name = found[1]
                if _is_constructor(qn) or name in _STATE_CALLS or name[:1] == "_":
                    continue
                yield self._report(call, f"`{unparse(func)}()`")
                continue
            if qn is None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                if func.attr in _STATE_CALLS:
                    continue
                made = self._generator_from_outside(model, func.value, scope, f)
                if made is not None:
                    yield self._report(call, f"`{unparse(func)}()` of the host generator made by `{made}`")

    def _generator_from_outside(self, model: ModuleModel, name: ast.Name, scope, f: FunctionInfo) -> Optional[str]:
        """If ``name`` holds a NumPy/Python generator object that was created outside ``f`` (or
        without a seed), the constructor's spelling."""
        ev = model.binding(name.id, scope, _pos(name))
        if ev is None or not ev.plain_assign or not isinstance(ev.value, ast.Call):
            return None
        value = ev.value
        if not _is_constructor(model.resolve(value.func, ev.scope)):
            return None
        if ev.scope is f.scope and (value.args or value.keywords):
            return None  # seeded inside the function: the same numbers every call with or without jit
        return unparse(value.func)

    def _report(self, call: ast.Call, what: str) -> Finding:
        return self.finding(call, f"{what} runs once at trace time and its value is frozen into the compiled "
                                  "function; pass a key and use jax.random")


class _KeyUse:
    __slots__ = ("call", "name", "fn", "ctx", "event", "data")

    def __init__(self, call, name, fn, ctx, event, data):
        self.call = call
        self.name = name
        self.fn = fn  # the jax.random function: a sampler, "split" or "fold_in"
        self.ctx = ctx
        self.event = event
        self.data = data  # fold_in's data argument


def _may_vary(expr: Optional[ast.AST]) -> bool:
    """Whether fold_in's data can differ between iterations: anything but a literal may."""
    return expr is None or not isinstance(expr, ast.Constant)


class KeyReuse(Rule):
    code = "JAX502"
    name = "key-reuse"
    summary = ("Finds a PRNG key passed to two `jax.random` sampling calls (or to `split`/`fold_in` and a "
               "sampler) without a new key in between, or to one inside a loop when the key is never replaced "
               "in the loop.")
    rationale = ("JAX's random functions are deterministic in the key: the same key gives the same bits. Reusing "
                 "it makes two draws that should be independent identical or correlated (the same dropout mask, "
                 "the same noise every step). Split the key and use each subkey once: "
                 "`key, sub = jax.random.split(key)`, or derive per-step keys with `jax.random.fold_in(key, step)`.")
    bad = """
        import jax

        def init_params(key, n_in, n_out):
            w = jax.random.normal(key, (n_in, n_out)) * 0.02
            b = jax.random.normal(key, (n_out,)) * 0.02
            return w, b
    """
    good = """
        import jax

        def init_params(key, n_in, n_out):
            k_w, k_b = jax.random.split(key)
            w = jax.random.normal(k_w, (n_in, n_out)) * 0.02
            b = jax.random.normal(k_b, (n_out,)) * 0.02
            return w, b
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        groups: dict = {}
        order: list = []
        for call in model.calls_named(_KEY_FUNCS):
            use = self._use(model, call)
            if use is None:
                continue
            key = (id(use.event), id(use.ctx.scope))
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(use)
        if not order:
            return
        ifs = {id(n): n for n in model.ifs if isinstance(n, ast.If)}
        arms: Optional[dict] = None
        for key in order:
            uses = sorted(groups[key], key=lambda u: _pos(u.call))
            for j, use in enumerate(uses):
                loop = self._loop_reuse(model, use)
                if loop is not None:
                    yield self.finding(use.call, (f"PRNG key `{use.name}` is reused in every iteration of the loop "
                                                  "on ", Line(loop.node.lineno), "; split it inside the loop "
                                                  f"(`{use.name}, sub = jax.random.split({use.name})`) or "
                                                  "fold in the step"))
                    continue
                for prev in uses[:j]:
                    if self._compatible(prev, use):
                        continue
                    if model.exclusive(prev.ctx, use.ctx, ifs):
                        continue
                    if arms is None:
                        arms = model.ifexp_arms()
                    a, b = dict(arms.get(id(prev.call), ())), dict(arms.get(id(use.call), ()))
                    if any(k in b and b[k] != side for k, side in a.items()):
                        continue
                    yield self.finding(use.call, (f"PRNG key `{use.name}` was already used by `jax.random.{prev.fn}` "
                                                  "on ", Line(prev.call.lineno), "; split it "
                                                  f"(`{use.name}, sub = jax.random.split({use.name})`) and use "
                                                  "each key once"))
                    break

    def _use(self, model: ModuleModel, call: ast.Call) -> Optional[_KeyUse]:
        ctx = model.context(call)
        if ctx is None:
            return None
        scope = ctx.scope
        qn = model.resolve(call.func, scope)
        if not qn or not qn.startswith(JAX_RANDOM):
            return None
        fn = qn[len(JAX_RANDOM):]
        if fn not in SAMPLERS and fn not in (SPLIT, FOLD_IN):
            return None
        arg = call_arg(call, 0, "key")
        if not isinstance(arg, ast.Name):
            return None
        ev = model.binding(arg.id, scope, _pos(arg))
        if ev is None or ev.kind in ("def", "other"):
            return None
        if ev.scope is not scope:
            # A key from an enclosing scope: only when this scope cannot rebind it.
            if scope.kind != "function" or arg.id in scope.globals or ev.scope.kind == "class":
                return None
        data = call_arg(call, 1, "data") if fn == FOLD_IN else None
        return _KeyUse(call, arg.id, fn, ctx, ev, data)

    def _compatible(self, prev: _KeyUse, use: _KeyUse) -> bool:
        """fold_in with different data derives independent keys from one key: the documented idiom."""
        if prev.fn == FOLD_IN and use.fn == FOLD_IN:
            if prev.data is None or use.data is None:
                return True
            return ast.dump(prev.data) != ast.dump(use.data)
        return False

    def _loop_reuse(self, model: ModuleModel, use: _KeyUse) -> Optional[Loop]:
        for loop in use.ctx.loops:
            if not model.step_loop(loop, use.ctx):
                continue
            if use.event.scope is use.ctx.scope and model.rebound_each_iteration(use.name, use.event, loop):
                continue
            if use.fn == FOLD_IN and _may_vary(use.data):
                continue  # fold_in(key, step): a different key each iteration
            return loop
        return None


class ConstantKeyInLoop(Rule):
    code = "JAX503"
    name = "constant-key-in-loop"
    summary = ("Finds `jax.random.PRNGKey(c)`/`jax.random.key(c)` with a constant seed created inside a loop body.")
    rationale = ("A key made from the same seed is the same key, so every iteration draws the same numbers: the "
                 "same noise, dropout mask or minibatch order each step. Create the key once before the loop and "
                 "split it in the loop, or derive a per-iteration key with `jax.random.fold_in(key, step)`.")
    bad = """
        import jax

        def sample_noise(shape, num_steps):
            noises = []
            for step in range(num_steps):
                key = jax.random.PRNGKey(0)
                noises.append(jax.random.normal(key, shape))
            return noises
    """
    good = """
        import jax

        def sample_noise(shape, num_steps):
            base = jax.random.PRNGKey(0)
            noises = []
            for step in range(num_steps):
                key = jax.random.fold_in(base, step)
                noises.append(jax.random.normal(key, shape))
            return noises
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for call in model.calls:
            ctx = model.context(call)
            if ctx is None or not ctx.loops:
                continue
            qn = model.resolve(call.func, ctx.scope)
            if qn not in KEY_MAKERS:
                continue
            seed = call_arg(call, 0, "seed")
            # a literal int seed, or a module-level name bound once to one
            if model.const_int(seed, ctx.scope, fold=False, local=False) is None:
                continue
            loops = [lp for lp in ctx.loops if model.step_loop(lp, ctx)]
            if not loops:
                continue
            loop = loops[-1]
            yield self.finding(call, (f"`{unparse(call, 30)}` with a constant seed inside the loop on ",
                                      Line(loop.node.lineno), " gives the same randomness every iteration; create the "
                                      "key before the loop and split or fold_in per iteration"))


RULES = [GlobalRngInTracedCode, KeyReuse, ConstantKeyInLoop]
