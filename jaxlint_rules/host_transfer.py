"""JAX2xx: device-to-host transfers that stall the accelerator."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint import names as N
from jaxlint.model import FETCH_OR_FORMAT_NAMES, ModuleModel, last_name
from jaxlint.model.facts import callbacks, elementwise, fetches, hostarrays, hostneeds, timing, tracers
from jaxlint.model.policy import evidence, helpersyncs, looprecord, roles, stepfunctions, transfers
from jaxlint.model.facts import loops as loopfacts
from jaxlint.model.facts import values as V
from jaxlint.rule import Finding, Line, Rule, unparse


_TEST_CODE = "in test code, where checks must see the values"
_CHECK_FUNCTION = "an assert in a check/verify function, which must see the values"
_COLLECTED = ("collects each output of an evaluation-style loop (no state carried between iterations) on "
              "the host, in a container or a total over the pass; moving the fetch after the loop saves only "
              "each batch's stall, once per evaluation pass")

def _step_role(model: ModuleModel, ctx, rule: Optional[Rule] = None, node: Optional[ast.AST] = None, gate=None):
    """The loop role around a sync when it runs at every step (:func:`roles.sync_role`; ``gate``: the
    ``if`` whose test it is), else None; with ``rule`` and ``node``, a loop role that is not a step is
    recorded as why the rule stayed quiet there (``Rule.quiet``)."""
    role = roles.sync_role(model, ctx, gate=gate)
    if role.kind == roles.PER_STEP:
        return role
    if rule is not None and role.kind != roles.NO_STEPS:
        rule.quiet(model, node, f"per-step (disproven): {role.kind}: " + "; ".join(role.evidence))
    return None


class HostTransferInLoop(Rule):
    code = "JAX201"
    short = "A JAX value copied to the host (float, .item(), print, np.asarray, an if on it) every step of a loop."
    confirmed_by = "transfers"
    name = "host-transfer-in-loop"
    summary = ("Finds `float(x)`, `int(x)`, `bool(x)`, `if x:`/`if not x:`/`while x > tol:`, `x.item()`, "
               "`x.tolist()`, `np.asarray(x)` and other NumPy functions that copy `x` (`np.exp(x)`, `np.isnan(x)`; "
               "`np.sum(x)` calls `x.sum()`, so `np.sum(x).item()` is the sync), `jax.device_get(x)`, "
               "`jax.tree.map(lambda v: v.item(), x)`, `multihost_utils.assert_equal(x)`/`process_allgather(x)`, "
               "`x` as a slice bound (`idxes[start:start + n]`, read as a Python integer), `x` as the index of "
               "a NumPy array (`images[perm[i]]` with `images` from `np.load` or `tfds.as_numpy`: NumPy copies the "
               "index to the host, once per index and loop), an eager operation whose result's shape depends on "
               "`x`'s values (`jnp.unique(x)`, `jnp.nonzero(x)`, `y[x > 0]`, without `size=`), "
               "print/f-string/logging of `x`, and calls of this module's "
               "own helpers that convert or log `x` (`log_metrics(step, metrics)`; `if converged(epoch, x)`, a callable "
               "object of the project whose `__call__` reads `jnp.linalg.norm(x)` on the host), where `x` is a JAX value "
               "(results of jitted steps, also through methods of the module's own classes and jitted fields "
               "of a record copy: `buffer.replace(can_sample=jax.jit(buffer.can_sample))`), that run every "
               "iteration of a step loop: a loop whose iteration is one step of JAX work, or, for an `if` that "
               "gates the step a periodic `if step % train_every == 0` schedules, before every such step. Not reported: syncs "
               "under a periodic guard (`if step % N == 0`, `if should_log(step, every)`, a threshold the "
               "branch moves on), syncs once per iteration of a loop whose iteration runs a whole program "
               "(a jitted `lax.scan` epoch or rollout) or one point of a sweep, syncs in loops known to run at most "
               "100 times in all (`for step in range(100)`; `range(steps)` with a default `steps=20` no call "
               "overrides), and syncs the host needs "
               "anyway (a value handed to a host environment, tokenizer, torch or json; a loop paced by "
               "`input()`, rendering or plotting; parameters published to host-side actors; a generator that "
               "yields each step's state to its consumer).")
    rationale = ("JAX dispatches work asynchronously: the Python loop runs ahead while the accelerator computes. "
                 "Reading a value on the host waits for all queued work and copies it back, so the next step "
                 "cannot be queued until it arrives. Done every step, the accelerator idles between steps. "
                 "Fetch every N steps (`if step % 100 == 0:`), accumulate on device, or fetch after the loop.")
    opt_in_cases = ("Syncs in test code (test modules, test functions and test classes) and asserts in "
                    "check/verify functions, where the checks must see the values. Fetches that collect each "
                    "output of an evaluation-style loop (one that carries no state from one iteration to the "
                    "next) into a host list or dict (`preds.append(np.asarray(pred))`) or a total over the pass "
                    "(`ncorrect += int(c)`): moving the fetch after the loop saves only each batch's stall, "
                    "once per evaluation pass (a list kept on device also costs device memory). An `if` on the whole "
                    "result of a call not shown to be one array (`if metrics:`: a pytree's truth reads nothing).")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def train_step(params, batch):
            loss = jnp.mean((params - batch) ** 2)
            return params - 0.1 * loss, loss

        def train(params, batches):
            for batch in batches:
                params, loss = train_step(params, batch)
                print(f"loss {float(loss):.4f}")
            return params
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def train_step(params, batch):
            loss = jnp.mean((params - batch) ** 2)
            return params - 0.1 * loss, loss

        def train(params, batches):
            for step, batch in enumerate(batches):
                params, loss = train_step(params, batch)
                if step % 100 == 0:
                    print(f"loss {float(loss):.4f}")
            return params
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        reported: set = set()
        for call in model.loop_calls:
            ctx = model.context(call)
            if not fetches.may_sync(model, call):
                continue
            what, kind = transfers.fetch_spelling(model, call, fetches.host_fetch(model, call)), "fetch"
            if what is None and last_name(call.func) in FETCH_OR_FORMAT_NAMES and fetches.formats_jax_call(model, call):
                what, kind = f"`{unparse(call.func)}(...)` of a JAX value", "format"
                reported.update(id(n) for a in call.args for n in ast.walk(a))
            if what is None:
                helper = helpersyncs.helper_sync(model, call)
                if helper is None:
                    continue
                arg, where = helper
                what = f"`{unparse(call.func)}(...)`, which reads `{unparse(arg, 30)}` on the host ({where}),"
                reported.update(id(n) for a in call.args for n in ast.walk(a))
            role = _step_role(model, ctx, self, call)
            if role is not None:
                reported.update(id(n) for a in call.args for n in ast.walk(a))
                finding = self._report(model, call, role, what, kind)
                if finding is not None:
                    yield finding
        yield from self._library_loop_syncs(model)
        for sync in stepfunctions.step_function_syncs(model):
            loop, name = sync.role.loop, sync.func.name
            if id(sync.node) in reported or hostneeds.inherent_sync(model, sync.node, loop) is not None:
                continue
            why, fix = transfers.SYNC_FIX[sync.kind]
            facts = sync.role.evidence + [
                f"`{name}` runs at every iteration of it (called on line {sync.site.lineno}, by the call graph), and "
                "the sync at every call of it (no loop or `if` around it there)",
                f"the value is made in `{name}` and nothing keeps it on the host (a statement of its own, or a result "
                "the loop drops)"]
            yield self.finding(sync.node, [f"{sync.what} syncs with the device at every call of `{name}`, which the loop "
                                           "on ", Line(loop.node.lineno), f" runs in every iteration, {why}; {fix}"],
                               evidence=facts + evidence.logger(model, sync.node))
        for node in model.joined_strs:
            if id(node) in reported:
                continue
            scope = model.scope_at(node)
            role = _step_role(model, model.context(node))
            if role is not None and V.formats_jax(model, node, scope):
                finding = self._report(model, node, role, "an f-string of a JAX value", "format")
                if finding is not None:
                    yield finding
        for node in model.percent_formats:
            if id(node) in reported:
                continue
            scope = model.scope_at(node)
            role = _step_role(model, model.context(node))
            if role is not None and V.formats_jax(model, node.right, scope):
                finding = self._report(model, node, role, "`%`-formatting a JAX value", "format")
                if finding is not None:
                    yield finding
        for sub, bound in fetches.slice_bound_reads(model):
            role = _step_role(model, model.context(sub), self, sub)
            if role is not None:
                finding = self._report(model, sub, role, f"the slice bound `{unparse(bound, 30)}` of "
                                       f"`{unparse(sub, 40)}`, a JAX value read as a Python integer,", "slice")
                if finding is not None:
                    yield finding
        for sub, index in hostarrays.numpy_index_reads(model):
            role = _step_role(model, model.context(sub), self, sub)
            if role is not None:
                finding = self._report(model, sub, role, f"`{unparse(sub, 40)}`, a NumPy array indexed with the "
                                       f"JAX value `{unparse(index, 30)}` (NumPy copies the index to the host),",
                                       "index")
                if finding is not None:
                    yield finding
        for node, operand in fetches.shape_reads(model):
            role = _step_role(model, model.context(node), self, node)
            if role is not None:
                what = (f"`{unparse(node, 40)}`, whose result's shape depends on the values of the JAX array "
                        f"`{unparse(operand, 30)}` (JAX reads them on the host to size it outside jit),")
                finding = self._report(model, node, role, what, "shape")
                if finding is not None:
                    yield finding
        for node in model.ifs:
            test = node.test
            ctx = model.context(test) if isinstance(node, ast.While) else model.context(node)
            if ctx is None or not ctx.loops:
                continue  # in no loop: no per-iteration sync (per_iteration_loop says None)
            value = fetches.bool_sync(model, test, ctx.scope)
            if value is None:
                continue
            role = _step_role(model, ctx, self, test, gate=node if isinstance(node, ast.If) else None)
            if role is not None:
                kind = {ast.If: "if", ast.While: "while", ast.IfExp: "if", ast.Assert: "assert"}[type(node)]
                spelled = {ast.If: "`if`", ast.While: "`while`", ast.IfExp: "a conditional expression",
                           ast.Assert: "`assert`"}[type(node)]
                finding = self._report(model, test, role, f"{spelled} on the JAX value `{unparse(value, 30)}`",
                                       kind, statement=node, unknown=fetches.pytree_truth(model, value, ctx.scope))
                if finding is not None:
                    yield finding

    def _library_loop_syncs(self, model: ModuleModel) -> Iterator[Finding]:
        """Fetches outside loops of a method a library's training loop calls every step (``train()`` of an SB3 subclass)."""
        for f, library, call, what in transfers.library_loop_fetches(model):
            facts = [f"`{f.name}` is a method of a subclass of `{library}`, whose training loop calls it at "
                     "every training step (library data, jaxlint's names table)",
                     f"{what} reads a JAX value on the host at every call, outside any loop or `if`"]
            yield self.finding(call, [f"{what} syncs with the device at every call of `{f.name}`, which "
                                      f"`{library.rsplit('.', 1)[-1]}`'s training loop calls at every step, so the "
                                      "host waits for each step before the library can dispatch the next; log it "
                                      "every N calls, or keep the value on device"], evidence=facts)

    def _report(self, model: ModuleModel, node: ast.AST, role, what: str, kind: str,
                statement: Optional[ast.AST] = None, unknown: Optional[str] = None) -> Optional[Finding]:
        loop = role.loop
        needed = hostneeds.inherent_sync(model, node, loop)
        if needed is not None:  # the host needs it anyway
            self.quiet(model, node, f"a wait this sync adds (disproven): {needed}")
            return None
        guard = transfers.waited_by_guard(model, node, loop, statement)
        if guard is not None:  # an ``if`` around it already waited for what it reads
            self.quiet(model, node, f"a wait this sync adds (disproven): the `if` on line {guard.lineno} already "
                                    "read the same values on the host in this iteration")
            return None
        if elementwise.is_element_read(model, statement if statement is not None else node):
            return None  # one element of the same array per iteration: JAX702's, with its fix
        opt_in = unknown
        if model.in_test_code(node):
            opt_in = _TEST_CODE
        elif kind == "assert" and transfers.in_check_function(model, statement):
            opt_in = _CHECK_FUNCTION
        elif kind == "fetch" and isinstance(node, ast.Call) and transfers.collects_output(model, node, loop):
            opt_in = _COLLECTED
        why, fix = transfers.SYNC_FIX[kind]
        facts = role.evidence + [
            "it reads this iteration's values, and nothing shows the host needs them every iteration (no host "
            "consumer, pacing or hand-off)"] + evidence.logger(model, node)
        if role.schedule is not None:  # a test that gates each step a periodic ``if`` schedules
            return self.finding(node, [f"{what} syncs with the device before every step that the `if "
                                       f"{unparse(role.schedule, 40)}` on ", Line(role.schedule.lineno),
                                       " runs in the loop on ", Line(loop.node.lineno), f", {why}; {fix}"],
                                opt_in=opt_in, evidence=facts)
        return self.finding(node, [f"{what} syncs with the device in every iteration of the loop on ",
                                   Line(loop.node.lineno), f", {why}; {fix}"], opt_in=opt_in, evidence=facts)


class BlockUntilReadyInLoop(Rule):
    code = "JAX202"
    short = "A block_until_ready every step of a loop, which stops the host from queueing the next step."
    name = "block-until-ready-in-loop"
    summary = ("Finds `x.block_until_ready()`/`jax.block_until_ready(x)` every iteration of a step loop of JAX "
               "work, training loops that time their phases every step included, also inside a plain helper of "
               "the module given a JAX value (`synchronize_and_clock(params)`); a block on what a call of the loop makes "
               "anew every iteration proves that call JAX work, whatever it is (`state = updater.update(...)`). "
               "Not reported: benchmarks (a "
               "loop that times one call on the same inputs, or a function that returns the timing), blocks "
               "under a periodic guard, blocks once per iteration of a loop whose iteration runs a whole "
               "program (a jitted `lax.scan` epoch or rollout), and blocks in loops known to run at most 100 "
               "times in all.")
    rationale = ("Blocking every step empties JAX's asynchronous dispatch queue: the host waits for the device, "
                 "then the device waits for the host to dispatch the next step. Block once after the loop, or "
                 "every N steps to bound the queue; to time the phases of a training loop, time every N steps. "
                 "In a benchmark that times one call, blocking is the point.")
    opt_in_cases = "Blocks in test code (test modules, test functions and test classes)."
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x):
            return jnp.tanh(x) * 2.0

        def run(x, n):
            for _ in range(n):
                x = step(x)
                x.block_until_ready()
            return x
    """
    good = """
        import time
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x):
            return jnp.tanh(x) * 2.0

        def run(x, n):
            for _ in range(n):
                x = step(x)
            return x.block_until_ready()

        def benchmark(x, n):
            for _ in range(n):
                t0 = time.perf_counter()
                step(x).block_until_ready()
                print(time.perf_counter() - t0)
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for call in model.calls_by_name.get("block_until_ready", ()):
            func = call.func
            qn = model.resolve(func, model.scope_at(call))
            if not (qn == N.BLOCK_UNTIL_READY or (isinstance(func, ast.Attribute)
                                                   and func.attr == "block_until_ready" and qn is None)):
                continue
            ctx = model.context(call)
            role = roles.block_role(model, ctx)
            if role.kind != roles.PER_STEP:
                if role.kind != roles.NO_STEPS:
                    self.quiet(model, call, f"per-step (disproven): {role.kind}: " + "; ".join(role.evidence))
                continue
            loop = role.loop
            if transfers.lagged_sync(model, call, loop):
                continue  # blocks on step N-k after queuing step N: bounds the queue, keeps it full
            yield self.finding(call, ["`block_until_ready()` in every iteration of the loop on ",
                                      Line(loop.node.lineno), _EMPTIES],
                               opt_in=_TEST_CODE if model.in_test_code(call) else None, evidence=role.evidence)
        yield from self._helper_blocks(model)

    def _helper_blocks(self, model: ModuleModel) -> Iterator[Finding]:
        """A plain helper of this module blocking on what it is given, called every step."""
        for call in model.loop_calls:
            helper = None if last_name(call.func) == "block_until_ready" or not fetches.may_sync(model, call) \
                else helpersyncs.helper_sync(model, call, blocks=True)
            role = roles.block_role(model, model.context(call)) if helper is not None else None
            if role is None or role.kind != roles.PER_STEP or transfers.lagged_sync(model, call, role.loop):
                continue
            yield self.finding(call, [f"`{unparse(call.func)}(...)`, which blocks on `{unparse(helper[0], 30)}` "
                                      f"({helper[1]}), in every iteration of the loop on ", Line(role.loop.node.lineno),
                                      _EMPTIES], opt_in=_TEST_CODE if model.in_test_code(call) else None,
                               evidence=role.evidence)


_EMPTIES = " empties the dispatch queue: the device idles while the host dispatches the next step; block " \
    "once after the loop, or every N steps to bound the queue"

class TimingWithoutBlock(Rule):
    code = "JAX204"
    short = "A wall-clock measurement of JAX work that never waits for it, so it times only the dispatch."
    confirmed_by = "clock"
    name = "timing-without-block"
    summary = ("Finds wall-clock measurements of JAX work that never wait for it: `t0 = time.perf_counter()` "
               "... `time.perf_counter() - t0` (also `time.time()`, `time.monotonic()`, `timeit.default_timer()`), "
               "`timeit.timeit(lambda: f(x))` and `with Timer():` blocks (a timer of this module, or `mlxu.Timer`), "
               "where the timed code calls a jitted or transformed function, a JAX array operation (arithmetic "
               "on JAX arrays included), a helper or a method of a project class that ends in such work with "
               "nothing after it that may wait (a `lax.scan` whose result goes into a NamedTuple), or a library's compiled call (gymnax rollouts, QDax's "
               "distributed update), and nothing after that call blocks "
               "(`block_until_ready`), fetches a JAX value (`float`, `np.asarray`, `.item()`, "
               "`jax.device_get`, a store into a NumPy array: `samples[i] = x`), prints one, or calls a function "
               "of this module that does. Not reported: "
               "regions whose work jaxlint cannot see (`model.fit()`, an imported helper), regions where code it "
               "cannot see into is handed the result after the work (it may wait: `report(y)`), loops timed as a "
               "whole that wait in every iteration (at most the last steps go unmeasured), and timestamps never "
               "subtracted.")
    rationale = ("JAX dispatches asynchronously: `y = f(x)` returns once the work is queued, often in "
                 "microseconds, while the accelerator computes for milliseconds. A clock read right after it "
                 "measures the dispatch (and, on the first call, the compilation), not the computation, and "
                 "the number can be wrong by orders of magnitude. Wait for the result before reading the "
                 "clock: `jax.block_until_ready(y)` (or `y.block_until_ready()`). To time the steps of a "
                 "training loop, time every N steps and block only then: blocking every step costs throughput "
                 "(JAX202). (jax 0.4.30 still dispatched synchronously on CPU, where such timings happened to be "
                 "right; 0.4.38 and later dispatch asynchronously on CPU too, as JAX always has on GPU and TPU.)")
    bad = """
        import time
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x):
            return jnp.tanh(x @ x.T)

        def measure(x):
            t0 = time.perf_counter()
            y = step(x)
            return y, time.perf_counter() - t0
    """
    good = """
        import time
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x):
            return jnp.tanh(x @ x.T)

        def measure(x):
            t0 = time.perf_counter()
            y = jax.block_until_ready(step(x))
            return y, time.perf_counter() - t0
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for region in timing.unwaited_timings(model):
            work = region.work
            value = timing.work_result_name(model, work)
            if region.kind in ("timeit", "magic"):
                wait = f"`jax.block_until_ready({unparse(work, 40)})` in the timed code"
            elif value:
                wait = f"`jax.block_until_ready({value})`"
            else:
                wait = "`jax.block_until_ready(...)` on its result"
            if region.kind == "clock":
                what = f"`{unparse(region.node, 40)}` reads the clock"
            elif region.kind == "timeit":
                what = f"`{unparse(region.node.func, 30)}` times"
            elif region.kind == "magic":
                what = f"`{region.magic}` times this {'cell' if region.magic.startswith('%%') else 'line'}"
            else:
                what = f"the `{unparse(region.node.func, 30)}` block ends"
            ctx = model.context(region.node)
            loop = loopfacts.hot_loop(model, ctx) if ctx is not None else None
            every_n = ""
            if loop is not None and not looprecord.record(model, loop).measures:
                every_n = (" and, in a loop of steps, time only every N steps (blocking every step costs "
                           "throughput, JAX202)")
            facts = [f"the measurement covers `{unparse(work, 40)}` on line {work.lineno}, which dispatches compiled "
                     "or JAX work",
                     "nothing after it waits before the clock is read: no block, no fetch or print of a JAX value, "
                     "no call that jaxlint cannot see into handed its result"]
            yield self.finding(region.node, [
                f"{what} while `{unparse(work, 40)}` (", Line(work.lineno),
                ") may still be running: JAX dispatches asynchronously, so this measures the dispatch, not "
                f"the computation; wait first with {wait}{every_n}"], evidence=facts)


_SAFE_ON_TRACERS = N.NUMPY_TRACER_SAFE


class HostConversionInTracedCode(Rule):
    code = "JAX203"
    needs = ("tracer", "traced-path")
    short = "A host conversion (float, int, .item(), NumPy) of a tracer inside jitted or traced code."
    name = "host-conversion-in-traced-code"
    summary = ("Finds `float()`, `int()`, `bool()`, `.item()`, `.tolist()` and NumPy or `math` functions applied "
               "to a tracer inside jitted (or otherwise traced) code.")
    rationale = ("Inside `jax.jit` a value is an abstract tracer with no number in it yet. Converting it to a "
                 "Python or NumPy value raises a ConcretizationTypeError/TracerArrayConversionError, or, under "
                 "transforms that allow it, bakes a constant into the program. Use `jnp` functions, keep the value "
                 "as an array, or mark the argument static.")
    bad = """
        import jax
        import jax.numpy as jnp
        import numpy as np

        @jax.jit
        def normalize(x):
            scale = float(jnp.max(jnp.abs(x)))
            return x / np.maximum(scale, 1e-6)
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def normalize(x):
            scale = jnp.max(jnp.abs(x))
            return x / jnp.maximum(scale, 1e-6)
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        staging = model.staging
        for f, call in model.traced_calls():
            scope = f.scope
            func = call.func
            qn = model.resolve(func, scope)
            values = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
            values += [kw.value for kw in call.keywords]
            what = error = None
            operands: list = []
            if qn in N.HOST_BUILTINS:
                if values:
                    operands = values[:1]
                    what = f"`{unparse(func)}()`"
                    error = "TracerBoolConversionError" if qn == "builtins.bool" else "ConcretizationTypeError"
            elif qn is not None and (qn.startswith("numpy.") or qn.startswith("math.")):
                if qn not in _SAFE_ON_TRACERS and not qn.startswith(("numpy.random.", "numpy.testing.")):
                    operands = values
                    what = f"`{unparse(func)}()`"
                    error = "TracerArrayConversionError" if qn.startswith("numpy.") else "ConcretizationTypeError"
            elif isinstance(func, ast.Attribute) and func.attr in ("item", "tolist") and qn is None:
                operands = [func.value]
                what = f"`.{func.attr}()`"
                error = "ConcretizationTypeError"
            if what is None:
                continue
            fact = self._tracer(staging, f, operands, scope)
            facts = fact and self.proof(model, call, fact, lambda f=f, call=call: tracers.traced_path(staging, f, call))
            if not facts:
                continue
            if what == "`.item()`" and not staging.staged(f):  # autodiff alone: the value becomes a constant
                yield self.finding(call, "`.item()` on a tracer under autodiff turns it into a constant, so no "
                                         "gradient flows through it; keep it an array (use jax.numpy)", facts=facts)
                continue
            if not staging.staged(f):
                continue
            yield self.finding(call, f"{what} on a tracer raises {error} {staging.how_staged(f)}; use "
                                     "jax.numpy and keep it an array, or make the argument static", facts=facts)

    @staticmethod
    def _tracer(staging, f, operands: list, scope):
        """The tracer fact of the first operand proven a tracer, else of the first not known either
        way, else of the first (disproven); None for no operands."""
        gap = first = None
        for v in operands:
            fact = tracers.tracer(staging, f, v, scope, autodiff=True)
            if fact.proven:
                return fact
            if fact.unknown and gap is None:
                gap = fact
            if first is None:
                first = fact
        return gap or first


class HostCallbackInCompiledLoop(Rule):
    code = "JAX206"
    short = "A host callback (jax.debug.print, io_callback, ...) at every iteration of a compiled loop."
    confirmed_by = "callbacks"
    name = "host-callback-in-compiled-loop"
    summary = ("Finds host callbacks (`jax.debug.print`, `jax.debug.callback`, `jax.pure_callback`, "
               "`io_callback`, the old `host_callback` API) in the body of a `lax.scan`/`fori_loop`/`while_loop` "
               "(or `flax.nnx`'s), in a function a library solver calls at every step (a diffrax term's vector "
               "field, the objective given to `jax.scipy.optimize.minimize`, optimistix or a jaxopt solver), or in "
               "a function of the module that those call: every iteration of the "
               "compiled loop stops to run Python on the host. Not reported: callbacks in a branch of "
               "`lax.cond`/`lax.switch` (the way to call the host now and then), loops with a literal trip count "
               "of at most 100, and callbacks in nested functions the body does not call.")
    rationale = ("A compiled loop runs on the device without the host until it ends. A callback in its body "
                 "makes every iteration wait for the host: the device sends the values, Python runs, the result "
                 "comes back, and only then does the next iteration start; a loop of thousands of cheap "
                 "iterations becomes as slow as a Python loop. Call the host every N iterations "
                 "(`lax.cond(i % N == 0, log, lambda *_: None, ...)`), return the values from the loop (`scan`'s "
                 "stacked outputs) and read them once, or drop the debug print. `jaxlint trace` counts the "
                 "callbacks each line ran.")
    bad = """
        import jax
        from jax import lax

        def simulate(x, n):
            def body(i, x):
                x = x * 0.99 + 0.01
                jax.debug.print("step {i}: {x}", i=i, x=x)
                return x
            return lax.fori_loop(0, n, body, x)
    """
    good = """
        import jax
        from jax import lax

        def simulate(x, n):
            def body(i, x):
                x = x * 0.99 + 0.01
                lax.cond(i % 1000 == 0, lambda: jax.debug.print("step {i}: {x}", i=i, x=x), lambda: None)
                return x
            return lax.fori_loop(0, n, body, x)
    """
    opt_in_cases = ("A callback behind a Python `if` in the body (a debug flag: when it is off, no callback is "
                    "compiled in), and callbacks in test code.")

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for cb in callbacks.loop_callbacks(model):
            call = cb.call
            loop_name = unparse(cb.loop.func, 30)
            if cb.solver:
                runner = f"the solver that `{loop_name}` on line {cb.loop.lineno} gives `{cb.body.name}` to"
                how = (f"in `{cb.body.name}`, which {runner} calls at every step" if not cb.via else
                       f"in `{cb.via[-1].name}`, which `{cb.body.name}` calls; {runner} calls it at every step")
                where: list = [f"`{unparse(call.func, 40)}` runs at every step of the solver that `{loop_name}` on ",
                               Line(cb.loop.lineno), f" gives `{cb.body.name}` to"]
            else:
                how = (f"in `{cb.body.name}`, the body of the `{loop_name}` on line {cb.loop.lineno}" if not cb.via else
                       f"in `{cb.via[-1].name}`, which `{cb.body.name}`, the body of the `{loop_name}` on line "
                       f"{cb.loop.lineno}, calls")
                where = [f"`{unparse(call.func, 40)}` runs at every iteration of the compiled loop `{loop_name}` on ",
                         Line(cb.loop.lineno)]
            facts = [f"`{unparse(call.func, 40)}` is a host callback: the device stops and waits for Python",
                     f"it runs {how}: at every iteration of the compiled loop",
                     "no `lax.cond`/`lax.switch` branch limits it to some iterations"]
            ctx = model.context(call)
            if cb.inner_loop is not None:
                opt_in: Optional[str] = (f"each iteration runs a whole device loop (`{unparse(cb.inner_loop.func, 30)}` "
                                         f"on line {cb.inner_loop.lineno}): one callback per such program, as a sync "
                                         "per epoch or rollout")
            elif model.in_test_code(call):
                opt_in = _TEST_CODE
            elif ctx is not None and ctx.guards:
                opt_in = ("behind a Python `if`, which decides at trace time whether the callback is compiled in "
                          "(a debug switch)")
            else:
                opt_in = None
            yield self.finding(call, [*where, *((f" (through `{cb.via[-1].name}`)",) if cb.via else ()),
                                      ", so every iteration stops the device to call Python on the host; call it "
                                      "every N iterations under `lax.cond`, or return the values from the loop and "
                                      "read them once"], opt_in=opt_in, evidence=facts)


RULES = [HostTransferInLoop, BlockUntilReadyInLoop, HostConversionInTracedCode, TimingWithoutBlock, HostCallbackInCompiledLoop]
