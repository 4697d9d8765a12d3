"""JAX5xx: random numbers that are not random: host RNGs frozen by tracing, reused PRNG keys."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint.model import (KEY_MAKERS, FixedKeyDraw, FunctionInfo, KeyUse, Loop, ModuleModel, call_arg, called_once,
    is_draw)
from jaxlint.model.facts import (clocks, defaultkeys, frequency, keydraws, keyhandoffs, keypairs, keptdraws, keyrows, keys, periodicity, repetition,
                                 mappedkeys, seedkeys, singleiteration)
from jaxlint.model.policy import keymessages, roles
from jaxlint.model.facts import loops as loopfacts
from jaxlint.model.facts import values as V
from jaxlint.rule import Finding, Line, Rule, unparse

SPLIT = "split"
FOLD_IN = "fold_in"

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
    short = "NumPy or Python global random numbers inside traced code, frozen into the compiled program."
    confirmed_by = "trace_time"
    name = "global-rng-in-traced-code"
    summary = ("Finds NumPy (`np.random.*`) and Python (`random.*`) random number calls, and methods of host "
               "generators created outside, inside jitted (or otherwise traced) code; and a `jax.random` key "
               "seeded there from the clock (`jax.random.PRNGKey(int(time.time()))`), read once at trace.")
    rationale = ("Host random number generators run in Python, once, while JAX traces the function. The value "
                 "drawn then is baked into the compiled program as a constant, so every later call reuses the "
                 "same \"random\" numbers (and every row of a vmap or every step of a scan gets the same ones). "
                 "Pass a `jax.random` key into the function and draw with `jax.random.*` instead. Not reported "
                 "when the function is compiled and the program calls it once (outside loops, at module level or "
                 "in `main()`/a test): the one draw is then one random value per run, as without jit.")
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
        once: dict = {}
        for f, call in model.traced_calls():
            scope = f.scope
            func = call.func
            qn = model.resolve(func, scope)
            found = _host_rng(qn)
            if found is not None:
                name = found[1]
                if _is_constructor(qn) or name in _STATE_CALLS or name[:1] == "_":
                    continue
                what = f"`{unparse(func)}()`"
            elif qn in KEY_MAKERS or qn == "jax.random.fold_in":
                # ``jax.random.PRNGKey(int(time.time()))`` in traced code: the clock is read once, at trace
                seed = call.args[-1] if call.args else None
                clock = next((n for n in ast.walk(seed) if isinstance(n, ast.Call) and clocks.is_clock(model, n)),
                             None) if seed is not None else None
                if clock is None:
                    continue
                what = f"the key's seed `{unparse(seed, 40)}` reads the clock (`{unparse(clock.func)}()`): it"
            elif qn is None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                if func.attr in _STATE_CALLS:
                    continue
                made = self._generator_from_outside(model, func.value, scope, f)
                if made is None:
                    continue
                what = f"`{unparse(func)}()` of the host generator made by `{made}`"
            else:
                continue
            if id(f) not in once:  # asked only about a host draw: the costlier question
                once[id(f)] = repetition.compiled_once(model, f)
            if once[id(f)]:
                continue  # compiled and called once: one draw per run, as without jit
            yield self._report(call, what, f)

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

    def _report(self, call: ast.Call, what: str, f: FunctionInfo) -> Finding:
        return self.finding(call, f"{what} runs in Python while JAX traces the function, so its value is a "
                                  f"constant of the traced program: {_frozen_for(f)}; pass a `jax.random` key in "
                                  "and draw with `jax.random`")


_LOOP_BODIES = ("scan", "fori_loop", "while_loop", "map", "associative_scan")


def _frozen_for(f: FunctionInfo) -> str:
    """Who sees the same number, by why the function is traced (the first cause, followed through
    traced callers)."""
    seen = set()
    while f is not None and f.trace_causes and id(f) not in seen:
        seen.add(id(f))
        cause = f.trace_causes[0]
        if cause.kind == "caller":
            f = cause.caller
            continue
        last = cause.name.rsplit(".", 1)[-1]
        if cause.kind == "jit":
            return "every call of the compiled function gets the same number"
        if cause.kind == "transform" and last in ("vmap", "filter_vmap"):
            return "every row of the vmap gets the same number"
        if cause.kind == "lax" and last in _LOOP_BODIES:
            return f"every step of the `{last}` gets the same number"
        break
    return "every use of the traced computation gets the same number"


def _may_vary(expr: Optional[ast.AST]) -> bool:
    """Whether fold_in's data can differ between iterations: anything but a literal may."""
    return expr is None or not isinstance(expr, ast.Constant)


def _draws(fn: str) -> bool:
    return is_draw(fn)


_TEST_INPUTS, _TEST_LOOP_VARIES, _SAME_CASE = keymessages.TEST_INPUTS, keymessages.TEST_LOOP_VARIES, keymessages.SAME_CASE


class KeyReuse(Rule):
    code = "JAX502"
    short = "A PRNG key used twice, so two draws give the same random numbers."
    name = "key-reuse"
    summary = ("Finds a PRNG key passed to two `jax.random` sampling calls (or to `split`/`fold_in` and a "
               "sampler; an initializer a random `jax.nn.initializers` factory made, `glorot_normal()(key, "
               "shape)`, is a sampler) without a new key in between, or to one inside a loop when the key is never "
               "replaced "
               "in the loop; also a key made once (at module level, or stored on `self` in `__init__`) that a "
               "function draws from on every call when it runs more than once, and the key passed to the "
               "caller's own lambdas and defs, to functions of the module that draw from that parameter "
               "(`init_layer(key, shape)` twice gives two identical layers; also the class's own methods called "
               "through `self` that no subclass of the module overrides: `self._random_goal(rng)`; one that only "
               "splits it counts "
               "when it gets the same key on every iteration of a loop: `jax.jit(run_mcts)(key, state)` per "
               "move), to a distribution's `sample(seed=key)` (an rlax one's `sample(key, x)`), to the `init(key, x)` of two "
               "flax modules of one class (`gen.init(key, z)`, `disc.init(key, x)`: the same weights where the shapes agree), or "
               "to the `apply(..., rngs={'dropout': key})` of a flax module whose dropout is proven to run (the same masks); "
               "and a key the loop never replaces handed (as an "
               "argument or a keyword) to a function of the module that draws from it, after splits in a loop of its "
               "own or through more calls (`train_epoch(state, train_rng, ...)` per epoch), or to a function, "
               "or an instance of a class, of another module of the project whose code draws from it "
               "(`jax.jit(Sampler(...))(logits, key=key)` per token); to a library's function it is opt-in; "
               "and a key every row of a `jax.vmap` shares (closed over by the mapped function, or given with "
               "`in_axes` None) that the mapped function draws from: every row gets the same noise; and, outside loops, "
               "a key made again from the literal seed of a key the same function (or module-level code) already "
               "drew from (`normal(PRNGKey(0), ...)` twice: a key depends only on its seed); and a key the function "
               "a `jax.tree.map` calls per leaf closes over (`lambda p: p + normal(key, p.shape)`: every leaf draws "
               "the same bits; index draws such as a batch's shared `permutation` excepted).")
    rationale = ("JAX's random functions are deterministic in the key: the same key gives the same bits. Reusing "
                 "it makes two draws that should be independent identical or correlated (the same dropout mask, "
                 "the same noise every step; `bernoulli(key, 0.5, s)` is True exactly where `normal(key, s)` is "
                 "negative), and splitting one key twice gives the same subkeys (`split(key)` returns the first "
                 "two of `split(key, 5)`). Split the key and use each subkey once: "
                 "`key, sub = jax.random.split(key)`, or derive per-step keys with `jax.random.fold_in(key, step)`. "
                 "Not reported: a use whose result is never read, a split that only advances the key after a "
                 "draw (`perm = permutation(key, n); key, = split(key, 1)`), `fold_in(key, n)` beside "
                 "`split(key, n)` (a different key), and index draws that pair two arrays on purpose "
                 "(`choice(key, x, (n,))`, `choice(key, y, (n,))`). A loop over a few names repeats its draws too "
                 "when it keeps them side by side (`for name in (\"w1\", \"w2\"): params[name] = normal(key, s)`); "
                 "a loop over configurations that uses one key's draw within each iteration (comparable inputs) "
                 "is not reported.")
    opt_in_cases = ("A key never replaced in a loop and handed to a function outside the module (a library's "
                    "`update_fn`, a module the import does not lead to in the project), or to one of the module's that hands it on to such a "
                    "function (`model.apply(..., rngs={\"dropout\": rng})`): whether it draws from the key is "
                    "unknown. "
                    "In test code (test modules, `test*` functions, `Test*` classes): two draws from one key outside "
                    "a loop, and a key not advanced in a loop whose iterations differ anyway (the loop variable or "
                    "state from the previous iteration is used). A test's inputs only need to exist; their "
                    "correlation rarely changes what it checks. A key never advanced in a test loop whose "
                    "iterations are otherwise the same is reported by default: the loop checks one case over and "
                    "over. Two draws from a key made from a literal seed (`key = jax.random.PRNGKey(0)`, the commonest "
                    "way the bug is written) are reported by default outside tests: they are correlated whatever the "
                    "seed. "
                    "Two `init` calls given one key of one flax module spelled alike (`q.init(key, x)` twice: the same weights, as a "
                    "target network's copy is made on purpose), or of modules of different classes (flax derives each parameter's key from its path: shared weights only where the paths coincide).")
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
        reported: set = set()
        for found in self._check_groups(model):
            reported.add((found.line, found.col))
            yield found
        for draw in keydraws.fixed_key_draws(model):
            if (draw.call.lineno, draw.call.col_offset) in reported:
                continue
            yield self._fixed_finding(model, draw)
        for handoff in keyhandoffs.key_handoffs(model):
            if (handoff.call.lineno, handoff.call.col_offset) not in reported:
                yield from self._handoff_finding(model, handoff)
        for mapped in mappedkeys.mapped_key_draws(model):
            if (mapped.call.lineno, mapped.call.col_offset) not in reported:
                yield self._mapped_finding(model, mapped)
        for draw in seedkeys.seed_key_draws(model):
            if (draw.call.lineno, draw.call.col_offset) not in reported:
                yield self._seed_finding(model, draw)
        for row in keyrows.row_key_draws(model):
            if (row.call.lineno, row.call.col_offset) not in reported:
                message, facts = keymessages.row_key(row)
                yield self.finding(row.call, message, opt_in=_TEST_INPUTS if model.in_test_code(row.call) else None,
                                   evidence=facts)

    def _handoff_finding(self, model: ModuleModel, h) -> Iterator[Finding]:
        """A key the loop never replaces, handed to a callee that draws from it (proven by the
        callee's body in this module) or may (a callee outside it: opt-in)."""
        k = h.arg.id
        for loop in h.ctx.loops:
            role = roles.loop_role(model, loop, h.ctx).kind
            if h.event.scope is h.ctx.scope and loopfacts.rebound_each_iteration(model, k, h.event, loop):
                continue
            if role not in (roles.PER_STEP, roles.BENCHMARK) and not keptdraws.kept_per_iteration(model, h.call, loop):
                continue  # (before the callee's draw is read: that may read another module)
            if singleiteration.single_iteration_guard(model, h.ctx, loop) is not None:
                continue  # ``if n == 1:`` around it: one iteration hands the key over
            proven = h.draw is not None and h.draw.proven
            if not h.key_proven and not proven:
                return  # neither the argument's data flow nor the callee shows a key
            # a timed loop whose iterations carry state repeats its draws too; asked only where the draw is unknown
            kept = proven and role != roles.BENCHMARK and keptdraws.kept_per_iteration(model, h.call, loop)
            if role != roles.PER_STEP and not kept and (
                    proven or role != roles.BENCHMARK or loopfacts.iterations_alike(model, loop)):
                continue
            opt_in = None if proven else "whether the callee draws from the key is unknown"
            if role != roles.PER_STEP and opt_in is None:
                opt_in = _items_unknown(model, loop, h.ctx)
            tail = ""
            if model.in_test_code(h.call):
                if loopfacts.iterations_alike(model, loop):
                    tail = _SAME_CASE
                else:
                    opt_in = opt_in or _TEST_LOOP_VARIES
            message, facts = keymessages.handoff(h, loop, role == roles.PER_STEP, tail)
            yield self.finding(h.call, message, opt_in=opt_in, evidence=facts)
            return

    def _mapped_finding(self, model: ModuleModel, d) -> Finding:
        """A draw from a key the function a tree map calls per leaf closes over."""
        name = getattr(d.func, "name", "<lambda>")
        spelled = "the lambda" if name == "<lambda>" else f"`{name}`"
        facts = [f"`{unparse(d.mapper.func, 30)}` on line {d.mapper.lineno} calls {spelled} once per leaf",
                 f"`{d.key}` is not {spelled}'s own (no parameter or binding of it): the same key at every leaf"]
        return self.finding(d.call, [f"PRNG key `{d.key}` is the same for every leaf `{unparse(d.mapper.func, 30)}` on ",
                                     Line(d.mapper.lineno), f" maps {spelled} over: each leaf's `{d.fn}` draws the same "
                                     "random bits (leaves of one shape get the same values); split the key into one "
                                     "per leaf (`jax.random.split(key, n)` unflattened into the tree's structure) and "
                                     "map over it too"],
                            opt_in=_TEST_INPUTS if model.in_test_code(d.call) else None, evidence=facts)

    def _seed_finding(self, model: ModuleModel, draw) -> Finding:
        """A key made again from the literal seed of a key an earlier draw of the function used."""
        first = draw.first
        maker = unparse(draw.maker, 40)
        what = ("the keys derived here repeat the ones derived there" if draw.fn in keys.DERIVERS else
                "both draws get the same random bits, so their results are identical or correlated")
        facts = [f"`{maker}` (line {draw.maker.lineno}) and `{unparse(first.maker, 40)}` (line {first.maker.lineno}) "
                 f"make the same key: a key depends only on its seed ({draw.seed})",
                 f"`{first.fn}` on line {first.call.lineno} already drew from that key, and no `if` runs one draw "
                 "without the other"]
        meet = seedkeys.results_meet(model, draw)
        if draw.loop is not None:  # ``PRNGKey(step)`` twice in one iteration: that step's key, used twice
            facts[0] = (f"`{maker}` (line {draw.maker.lineno}) and `{unparse(first.maker, 40)}` (line "
                        f"{first.maker.lineno}) read the same value of `{draw.seed}`: nothing stores it between them")
            opt_in = _TEST_INPUTS if model.in_test_code(draw.call) else None
        elif meet is not None:
            facts.append(f"line {meet.lineno} computes with both draws' results: the shared bits change what it computes")
            opt_in = _TEST_INPUTS if model.in_test_code(draw.call) else None
        else:
            opt_in = ("the two draws' results are never used together in this code: whether the shared bits change "
                      "what it computes (two inputs of one computation, or two unrelated demos) is not shown")
        return self.finding(draw.call, [f"PRNG key `{maker}` is the key `{first.fn}` drew from on ",
                                        Line(first.call.lineno), f" (made from the same seed `{draw.seed}`); {what}; "
                                        "make one key and split it into a subkey for each draw"],
                            opt_in=opt_in, evidence=facts)

    def _fixed_finding(self, model: ModuleModel, draw: FixedKeyDraw) -> Finding:
        message, facts = keymessages.fixed_key(draw, _method_name(model, draw.made))
        return self.finding(draw.call, message, opt_in=_TEST_INPUTS if model.in_test_code(draw.call) else None,
                            evidence=facts)

    def _check_groups(self, model: ModuleModel) -> Iterator[Finding]:
        groups = keys.key_use_groups(model)
        if not groups:
            return
        ifs = {id(n): n for n in model.ifs if isinstance(n, ast.If)}
        arms: Optional[dict] = None
        for uses in groups:
            for j, use in enumerate(uses):
                loop = self._loop_reuse(model, use)
                if loop is not None:
                    yield self._loop_finding(model, use, loop)
                    continue
                for prev in uses[:j]:
                    init = keypairs.init_pair(model, prev, use)
                    if not (prev.pairwise and use.pairwise) or init == "skip":
                        continue
                    if keypairs.distinct_derivations(model, prev, use) or loopfacts.exclusive(model, prev.ctx, use.ctx, ifs):
                        continue
                    if arms is None:
                        arms = loopfacts.ifexp_arms(model)
                    a, b = dict(arms.get(id(prev.call), ())), dict(arms.get(id(use.call), ()))
                    if any(k in b and b[k] != side for k, side in a.items()):
                        continue
                    if not self._repeats(model, prev, use):
                        continue
                    bound = use.event.pos[0] if use.event is not None and use.event.pos else None
                    opt_in = _TEST_INPUTS if model.in_test_code(use.call) else None
                    opt_in = opt_in or keymessages.MODULE_INITS.get(init)  # flax inits: "same"/"other" pairs
                    # issue 37: a literal seed is how the bug is most often written; the two draws
                    # are identical or correlated whatever the seed, so it is a default finding
                    message, facts = keymessages.pair(prev, use, bound, keydraws.fixed_data(model, prev, use), init)
                    yield self.finding(use.call, message, opt_in=opt_in, evidence=facts)
                    break

    @staticmethod
    def _repeats(model: ModuleModel, prev: KeyUse, use: KeyUse) -> bool:
        """Whether the two uses make the program see repeated randomness: both results are read,
        the later one does more than advance the key after a draw, and they are not index draws
        pairing two arrays."""
        if _draws(prev.fn) and keys.advances_key(model, use):
            return False
        if keypairs.paired_draws(model, prev, use):
            return False
        return not (keys.result_dead(model, prev.call) or keys.result_dead(model, use.call))

    def _loop_finding(self, model: ModuleModel, use: KeyUse, loop: Loop) -> Finding:
        tail, opt_in = "", None
        if model.in_test_code(use.call):
            if loopfacts.iterations_alike(model, loop):
                tail = _SAME_CASE
            else:
                opt_in = _TEST_LOOP_VARIES
        stepping = roles.loop_role(model, loop, use.ctx).kind == roles.PER_STEP
        if not stepping and opt_in is None:
            opt_in = _items_unknown(model, loop, use.ctx)
        message, facts = keymessages.loop_reuse(use, loop, stepping, tail)
        return self.finding(use.call, message, opt_in=opt_in, evidence=facts)

    def _loop_reuse(self, model: ModuleModel, use: KeyUse) -> Optional[Loop]:
        if use.remote:
            return None  # handed to another module's function in a loop: the hand-off check's (keyhandoffs)
        for loop in use.ctx.loops:
            if roles.loop_role(model, loop, use.ctx).kind != roles.PER_STEP and not self._kept_draws(model, use, loop):
                continue
            if use.event.scope is use.ctx.scope and loopfacts.rebound_each_iteration(model, use.name, use.event, loop):
                continue
            if use.fn == FOLD_IN and _may_vary(use.data):
                continue  # fold_in(key, step): a different key each iteration
            if singleiteration.single_iteration_guard(model, use.ctx, loop) is not None:
                continue  # ``if n == 1:`` around it: one iteration uses the key
            return loop
        return None


    @staticmethod
    def _kept_draws(model: ModuleModel, use: KeyUse, loop: Loop) -> bool:
        """A loop over items (a few literal names included) whose iterations keep their draws side
        by side: ``for name in ("w1", "w2"): params[name] = normal(key, shape)``. The draws are
        equal; in a loop over configurations whose draws are only used within the iteration, one
        key for comparable inputs is deliberate."""
        return (_draws(use.fn) and keptdraws.kept_per_iteration(model, use.call, loop)
                and roles.loop_role(model, loop, use.ctx).kind != roles.BENCHMARK)


def _items_unknown(model: ModuleModel, loop: Loop, ctx) -> Optional[str]:
    """For draws kept side by side in a loop over items (not steps): why it is not known that two
    items draw (the reason that makes the finding opt-in), or None when the loop is known to walk
    at least two (a literal of two items or more, ``range(2)``...). A loop over a configuration's
    camera keys may walk one (serl's reward classifier, fresh set E: `["front"]`)."""
    it = loopfacts.loop_iterable(loop.node)
    trips = loopfacts.known_trips(model, it, ctx.scope) if it is not None else None
    if trips is not None and trips >= 2:
        return None
    return f"how many items the loop on line {loop.node.lineno} walks is unknown: with one, the key draws once"


def _method_name(model: ModuleModel, stmt: ast.AST) -> str:
    f = model.function_at(stmt)
    return f.name if f is not None else "the class"


_MAKER_NAMES = frozenset(q.rsplit(".", 1)[1] for q in KEY_MAKERS)


class ConstantKeyInLoop(Rule):
    code = "JAX503"
    short = "A PRNG key with a constant seed made in a loop or per-step helper, so every step draws the same numbers."
    name = "constant-key-in-loop"
    summary = ("Finds `jax.random.PRNGKey(c)`/`jax.random.key(c)` with a constant seed created inside a loop body, "
               "or in a helper that runs at every step (called in a step loop, or a per-step method); and a key made "
               "once as a parameter's default (`def dropout(x, key=jax.random.PRNGKey(0))`) that the function draws "
               "from, when two calls, or one in a loop or a function that runs again and again, do not pass it.")
    rationale = ("A key made from the same seed is the same key, so every iteration draws the same numbers: the "
                 "same noise, dropout mask or minibatch order each step. Create the key once before the loop and "
                 "split it in the loop, or derive a per-iteration key with `jax.random.fold_in(key, step)`.")
    opt_in_cases = ("In test code, a constant key in a loop whose iterations differ anyway (the loop variable or "
                    "state from the previous iteration is used): a fixed key per step keeps such a test "
                    "deterministic. Where the iterations are otherwise the same it is reported by default: the "
                    "loop checks one case over and over. A key that goes only to the `rngs` of a flax module's "
                    "`apply` whose draw from that stream the module does not show (dropout off with "
                    "`training=False`/`deterministic=True`, or a module defined elsewhere): nothing may draw.")
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
        if not keys.may_call_jax_random(model):  # no call can be a KEY_MAKERS one
            return
        yield from self._default_keys(model)
        for call in model.calls_named(_MAKER_NAMES):  # spelled PRNGKey/key or a local alias of one
            ctx = model.context(call)
            if ctx is None:
                continue
            if not ctx.loops and ctx.scope.func is None:
                continue
            qn = model.resolve(call.func, ctx.scope)
            if qn not in KEY_MAKERS:
                continue
            seed = call_arg(call, 0, "seed")
            # a literal int seed, or a module-level name bound once to one
            if V.const_int(model, seed, ctx.scope, fold=False, local=False) is None:
                continue
            if keydraws.discarded_draw(model, call):
                self.quiet(model, call, "same numbers each step (disproven): the one draw from this key is thrown away "
                                        "(a statement of its own, or only waited on: a device barrier)")
                continue
            role_of = [roles.loop_role(model, lp, ctx) for lp in ctx.loops]
            loops = [r.loop for r in role_of if r.kind == roles.PER_STEP]
            if role_of and not loops:
                self.quiet(model, call, f"per-step (disproven): {role_of[-1].kind}: " + "; ".join(role_of[-1].evidence))
            if not loops:
                found = self._per_step_helper(model, call, ctx)
                if found is not None:
                    yield found
                continue
            loop = loops[-1]
            if keydraws.folded_per_call(model, call, loopfacts.varying_names(loop)):
                self.quiet(model, call, "same key each iteration (disproven): every use folds in a value the loop "
                                        "changes (`jax.random.fold_in(key, it)`), so each iteration draws from its "
                                        "own key")
                continue
            tail, opt_in = "", None
            if model.in_test_code(call):
                if loopfacts.iterations_alike(model, loop):
                    tail = _SAME_CASE
                else:
                    opt_in = _TEST_LOOP_VARIES
            apply = keydraws.only_to_undrawn_apply(model, call)
            if apply is not None and opt_in is None:
                opt_in = (f"draws (unknown): the key goes only to the `rngs` of `{unparse(apply.func, 30)}(...)` on "
                          f"line {apply.lineno}, and this module does not show the applied module drawing from it "
                          "(its dropout may be off: `deterministic=True`, `training=False`, a rate of 0)")
            role = next(r for r in role_of if r.loop is loop)
            facts = [f"the seed `{unparse(seed, 30)}` is a constant (a literal, or a module-level name bound once to "
                     "one): a key depends only on its seed, so the key is the same every time it is made",
                     *role.evidence,
                     "a `jax.random` call in the same function draws from it or splits it" if
                     keydraws.drawn_in_place(model, call) else "it is handed to other code (where it is drawn from "
                     "is not followed)"]
            yield self.finding(call, keymessages.constant_key_in_loop(call, loop, tail), opt_in=opt_in, evidence=facts)

    def _default_keys(self, model: ModuleModel) -> Iterator[Finding]:
        """A key made once as a parameter's default and drawn from by calls that do not pass it."""
        for d in defaultkeys.default_key_draws(model):
            where = f"`{unparse(d.draw.call.func, 30)}` on line {d.draw.call.lineno}" if d.draw.call is not None else "it"
            yield self.finding(d.default, [
                f"the default `{d.param}={unparse(d.default, 30)}` of `{d.func.name}` is made once, when the `def` "
                f"runs: {d.why}, so they draw the same random numbers ({where}); give `{d.param}` no default and "
                "pass a fresh key (split) at each call"],
                opt_in=_TEST_INPUTS if model.in_test_code(d.default) else (
                    "only a naming convention (jaxlint's step-method names) says the one caller that omits the key "
                    "runs again and again" if d.named else None),
                evidence=[f"`{d.func.name}` draws from `{d.param}` ({where})", d.why])

    def _per_step_helper(self, model: ModuleModel, call: ast.Call, ctx) -> Optional[Finding]:
        """A constant-seed key made in a function that runs at every step of a loop (called in a
        ``range``/``while`` loop, from such a function, or named/parametrized like a step)."""
        f = ctx.scope.func
        if f is None or ctx.loops:
            return None  # in a loop over configurations of its own: one key per case on purpose
        if called_once(f, model) or not keydraws.drawn_in_place(model, call):
            return None  # a test or entry point; a key handed to other code (a dummy init key)
        if keydraws.folded_per_call(model, call):
            return None  # ``fold_in(key(0), step)``: a different key on every call
        if keydraws.default_for_none(ctx, model):
            return None  # ``if rng is None: rng = PRNGKey(42)``: a default when the caller gives none
        via = frequency.loop_running_via(model, f)
        if via is not None:
            device_loop, chain = via
            why, evidence = keymessages.device_loop_why(f, device_loop, chain)
        else:
            freq = roles.frequency(model, f)
            if freq.kind != roles.PER_STEP_CALLS:
                return None
            guard = periodicity.periodic_repetition(model, freq.rep)
            if guard is not None:
                # an evaluation every N steps with the same noise each time: how checkpoints are compared
                self.quiet(model, call, f"per-step (disproven): `{f.name}` runs only when the `if "
                                        f"{unparse(guard, 40)}` on line {guard.lineno} holds")
                return None
            why, evidence = keymessages.why_repeats(freq.rep), freq.evidence
        return self.finding(call, keymessages.constant_key_per_step(call, f, why),
                            opt_in=_TEST_INPUTS if model.in_test_code(call) else None,
                            evidence=evidence)


RULES = [GlobalRngInTracedCode, KeyReuse, ConstantKeyInLoop]
