"""JAX8xx: memory and device set-up: settings that come too late to take effect."""

from __future__ import annotations

import os
from typing import Iterator

from jaxlint.model import ModuleModel
from jaxlint.model.facts import donation, eqxdonation, nnxdonation, setuporder, trainingstate
from jaxlint.model.policy import looprecord
from jaxlint.rule import Finding, Line, Rule, unparse

_CHILD = "the module starts another process, which may be what the setting is for"


class SettingAfterBackendStart(Rule):
    code = "JAX801"
    confirmed_by = "setup"
    short = "An environment setting assigned after JAX read it (at backend start or import): it does nothing."
    name = "setting-after-backend-start"
    summary = ("Finds assignments to `os.environ` (`os.environ[...] =`, `update`, `setdefault`, `os.putenv`) of a "
               "setting JAX reads once: `XLA_FLAGS`, `XLA_PYTHON_CLIENT_PREALLOCATE`/`MEM_FRACTION`/`ALLOCATOR`, "
               "`CUDA_VISIBLE_DEVICES`, `TPU_*` (read when the backend starts: the first device query, array or "
               "compiled call) after the program's flow started the backend, and `JAX_*` flags (read when `jax` "
               "is imported: `JAX_ENABLE_X64`, `JAX_PLATFORMS`, ...) after `import jax`, and `jax.config.update` of the "
               "flags read at backend start (`jax_platform_name`, `jax_platforms`, `jax_cuda_visible_devices`) after it "
               "started. The flow is the "
               "module's top level and the entry functions it calls, in order; only what certainly ran counts "
               "(not a start under an `if` or in a loop), and a call jaxlint cannot see into starts nothing. "
               "Not reported in a module that starts another process (the setting may be for it).")
    rationale = ("JAX reads these settings once. Set later, they are silently ignored: preallocation stays on and "
                 "a PyTorch model in the same process runs out of GPU memory, the wrong GPUs are used, "
                 "`XLA_FLAGS` do not apply (measured: `--xla_force_host_platform_device_count=4` set after the "
                 "first `jnp.zeros` leaves 1 device), `JAX_ENABLE_X64=1` after `import jax` leaves arrays float32. "
                 "Set them before `import jax` (or at least before the first device use), or use "
                 "`jax.config.update(...)` for JAX's own flags.")
    bad = """
        import os
        import jax
        import jax.numpy as jnp

        x = jnp.zeros(3)
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        os.environ["JAX_ENABLE_X64"] = "1"
    """
    good = """
        import os

        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        os.environ["JAX_ENABLE_X64"] = "1"

        import jax
        import jax.numpy as jnp

        x = jnp.zeros(3)
    """

    opt_in_cases = ("A late platform setting that asks for an accelerator (`JAX_PLATFORM_NAME=tpu`, "
                    "`jax.config.update('jax_platform_name', 'gpu')`): JAX starts a GPU or TPU before the CPU anyway "
                    "where the machine has one, so the ignored setting changes nothing there.")

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        flow = setuporder.setup_flow(model)
        if not flow.late or setuporder.starts_child_process(model):
            return
        for late in flow.late:
            start = late.started
            if late.kind == "backend":
                when = ["`", late.key, "` is read when JAX's backend starts, and it already started at ",
                        Line(start.lineno), f" (`{unparse(start, 40)}`)"]
                facts = [f"`{unparse(start, 40)}` on line {start.lineno} started the backend (it runs unconditionally "
                         "in the module's flow)", f"`{late.key}` is read once, when the backend starts"]
            else:
                when = ["`", late.key, "` is read when `jax` is imported, and it was imported on ", Line(start.lineno)]
                facts = [f"`import jax` on line {start.lineno} ran before this assignment",
                         f"`{late.key}` is one of JAX's flags, read from the environment when `jax` is imported"]
            fix = (", so this update does nothing; make it before the first device query, array or compiled call"
                   if late.config else ", so this setting does nothing; set it before `import jax` (or use "
                   "`jax.config.update` for JAX's own flags)")
            opt_in = (f"it asks for the platform `{late.value}`, an accelerator JAX starts first anyway where the "
                      "machine has one: ignored, it changes nothing there" if late.accelerator_default else None)
            yield self.finding(late.node, [*when, fix], evidence=facts, opt_in=opt_in)


class DistributedInitializeLate(Rule):
    code = "JAX802"
    fails_at_runtime = True  # RuntimeError once the backend has started
    confirmed_by = "setup"
    short = "A jax.distributed.initialize call after the backend started: JAX raises there, after the work before it ran."
    name = "distributed-initialize-late"
    summary = ("Finds `jax.distributed.initialize(...)` after the program's flow (the module's top level and the "
               "entry functions it calls, in order) certainly started JAX's backend: a device query, an array "
               "made, a compiled call.")
    rationale = ("A multi-host job must call `jax.distributed.initialize` before anything else touches the "
                 "backend: JAX raises `RuntimeError: jax.distributed.initialize() must be called before any JAX "
                 "computations are executed` (measured on 0.4.30 and 0.10.2), so the job fails on every host "
                 "after whatever ran before it; caught, each host runs as a separate single-host job. Call it "
                 "first thing in `main()`.")
    bad = """
        import jax

        def main():
            n = jax.device_count()
            jax.distributed.initialize()
            print(n)

        main()
    """
    good = """
        import jax

        def main():
            jax.distributed.initialize()
            n = jax.device_count()
            print(n)

        main()
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for call, start in setuporder.setup_flow(model).initialize_late:
            yield self.finding(call, ["`jax.distributed.initialize` runs after the backend started at ", Line(start.lineno),
                                      f" (`{unparse(start, 40)}`): JAX raises RuntimeError there (caught, each host "
                                      "runs alone); call it before anything touches the backend"],
                               evidence=[f"`{unparse(start, 40)}` on line {start.lineno} started the backend first"])


class MissingDonation(Rule):
    code = "JAX803"
    name = "missing-donation"
    needs = ("training-state", "old-unread")
    short = "A jitted training step whose results rebind its own parameters every iteration, with no donation."
    summary = ("Finds, in a step loop (the innermost loop that runs JAX work), an assignment whose value is a "
               "call of a `jax.jit`/`jax.pmap` function declaring no `donate_argnums`/`donate_argnames` (or an "
               "equinox `filter_jit` one declaring no `donate`) and whose "
               "targets rebind names passed to it (`state = train_step(state, batch)`, `params, opt_state, loss = "
               "update(params, opt_state, batch)`). Static arguments are not counted. Equinox donates all array "
               "arguments (`donate=\"all\"`) or all but the first's (`\"all-except-first\"`): the batch too, so "
               "an argument the loop reads after the call makes that finding opt-in. Reported by default when the "
               "step applies an optimizer update to a rebound argument (`state.apply_gradients`, "
               "`optax.apply_updates(params, ...)`, an optimizer's `update(grads, opt_state)`, `opt_update(i, grads, "
               "opt_state)` of JAX's example optimizers, a `jax.tree.map` "
               "gradient step; in the step, a helper it hands the gradient, or another module of the project) and "
               "nothing else keeps or reads the old values: the copies kept alive are a model's parameters and "
               "optimizer state. Attributes rebound the same way (`self.state = self.train_step(self.state, b)`) "
               "count; the finding is at the `jax.jit`/`jax.pmap` that makes the step, once per wrapper (at the call, naming "
               "that line, for a step another module's factory makes: `train_step = create_train_step(model)`). "
               "Also a flax "
               "NNX step (`nnx.jit`) that updates its model and `nnx.Optimizer` in place (`optimizer.update(model, "
               "grads)`), called with the same objects every iteration, in the loop or in a method the loop calls "
               "(a trainer's `train_step` running `self._step(self.model, self.optimizer, batch)`): NNX writes the "
               "new values back after the call.")
    rationale = ("Without donation, the call's outputs get new buffers while the inputs are still alive, so the "
                 "old and the new state are both in device memory at the peak: for a model's parameters and "
                 "optimizer state, twice their size, and on an accelerator one more copy for each step the host "
                 "has dispatched ahead (measured on a TPU v5e: 256 MiB of parameters stepped 20 times peaked at "
                 "5.12 GB undonated, 0.54 GB donated). Donating the arguments the call replaces lets XLA write the "
                 "results into their buffers. Only donate what nothing reads after the call (JAX804), and no "
                 "array that appears twice in the donated arguments: an optimizer whose `init` puts one zeros "
                 "tree into two state slots makes JAX refuse (\"Attempt to donate the same buffer twice\"); give "
                 "each slot its own `zeros_like`, or donate the parameters only.")
    opt_in_cases = ("The step is not a def of this module or of the project (read through its import or factory), "
                    "or applies no optimizer update to a rebound argument (a "
                    "PRNG key, a counter, an environment state: their size is not known, training-state unknown); "
                    "something may still need the old values (another name or a list keeps them, another call of "
                    "the step does not rebind them, a caller reads what it passed, a container rebuilt every iteration holds "
                    "a part the loop does not rebind and passes again, such as an evaluation set: old-unread "
                    "unknown); the loop is "
                    "in test code, or runs a literal count of at most 100 steps.")
    bad = """
        import jax
        import optax

        optimizer = optax.adam(1e-3)

        @jax.jit
        def train_step(params, opt_state, grads):
            updates, opt_state = optimizer.update(grads, opt_state)
            return optax.apply_updates(params, updates), opt_state

        def train(params, opt_state, batches):
            for grads in batches:
                params, opt_state = train_step(params, opt_state, grads)
            return params
    """
    good = """
        import functools
        import jax
        import optax

        optimizer = optax.adam(1e-3)

        @functools.partial(jax.jit, donate_argnums=(0, 1))
        def train_step(params, opt_state, grads):
            updates, opt_state = optimizer.update(grads, opt_state)
            return optax.apply_updates(params, updates), opt_state

        def train(params, opt_state, batches):
            for grads in batches:
                params, opt_state = train_step(params, opt_state, grads)
            return params
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        # One finding per jit wrapper of this module, at the line that makes it (where donation is declared);
        # a wrapper made elsewhere is reported at each call.
        own = {id(w) for w in model.jit_wraps}
        seen: dict = {}
        for r in donation.rebinding_without_donation(model):
            facts = [trainingstate.training_state(model, r.call, r.wrap, r.positions, r.keywords)]
            if facts[0].status == "proven":
                facts.append(donation.old_values_unread(model, r))
                if r.wrap.kind == "filter_jit" and facts[-1].status == "proven":
                    option, other_read = eqxdonation.donate_option(model, r)
                    facts[-1] = other_read or facts[-1]
            opt_in = self._short_or_test(model, r)
            key = id(r.wrap) if id(r.wrap) in own else id(r.call)
            rank = (any(f.status != "proven" for f in facts), opt_in is not None)
            if key not in seen or rank < seen[key][0]:
                seen[key] = (rank, r, facts, opt_in, key != id(r.call))
        for _, r, facts, opt_in, at_site in sorted(seen.values(), key=lambda v: (v[1].call.lineno, v[1].call.col_offset)):
            opts = []
            if r.wrap.kind == "filter_jit":  # equinox donates all array arguments, or all but the first's
                opts.append(f'donate="{eqxdonation.donate_option(model, r)[0]}"')
            elif r.positions:
                opts.append(f"donate_argnums={tuple(r.positions)!r}")
            if r.keywords and r.wrap.kind != "filter_jit":
                opts.append(f"donate_argnames={tuple(r.keywords)!r}")
            names = ", ".join(f"`{n}`" for n in r.names)
            where = ["here"] if at_site else [f"on its `{r.wrap.spelling}`{_origin(model, r.wrap)}"]
            called = [f"`{unparse(r.call.func, 40)}` is called every iteration (", Line(r.call.lineno), ")"] \
                if at_site else [f"`{unparse(r.call.func, 40)}` is called every iteration"]
            yield self.finding(r.wrap.site if at_site else r.call,
                               [*called, f" and its results rebind {names}, with no donation: the old and new values "
                                f"are in device memory together; declare `{', '.join(opts)}` ", *where,
                                " if nothing reads the old values after the call"],
                               opt_in=opt_in,
                               evidence=[f"the call on line {r.call.lineno} runs in every iteration of the loop on line "
                                         f"{r.loop.node.lineno}",
                                         f"the assignment binds {names}, which the call is given",
                                         f"its `{r.wrap.spelling}` declares no donate_argnums/donate_argnames",
                                         "the saving is the size of those values (one copy more per step in flight "
                                         "on an accelerator): `jaxlint trace` measures it"],
                               facts=facts)

        yield from self._inplace(model)

    def _inplace(self, model: ModuleModel) -> Iterator[Finding]:
        """A flax NNX step updating its model and optimizer in place (nnxdonation.py), once per wrapper."""
        seen: set = set()
        for r in nnxdonation.inplace_steps_without_donation(model):
            if id(r.wrap) in seen:
                continue
            seen.add(id(r.wrap))
            names = " and ".join(f"`{n}`" for n in r.names)
            opts = f"donate_argnums={tuple(r.positions)!r}"
            called = ["is called every iteration (", Line(r.call.lineno), ")"] if r.via is None else [
                "is called (", Line(r.call.lineno), f") at every call of `{r.via[0].name}`, which the loop on ",
                Line(r.loop.node.lineno), " makes (", Line(r.via[1].lineno), ")"]
            where = f"the call on line {r.call.lineno} runs " + (
                "" if r.via is None else f"at every call of `{r.via[0].name}`, made on line {r.via[1].lineno} ") + (
                f"in every iteration of the loop on line {r.loop.node.lineno}")
            yield self.finding(
                r.wrap.site, [f"`{r.func.name}` updates {names} in place (`", unparse(r.update, 40), "` on ",
                              Line(r.update.lineno), ") and ", *called,
                              ", with no donation: during each call the old and the new parameters and optimizer "
                              f"state are in device memory together; declare `{opts}` on its `{r.wrap.spelling}`"],
                opt_in=self._short_or_test(model, r),
                evidence=[where,
                          f"NNX writes the step's new values back into {names} after each call; its "
                          f"`{r.wrap.spelling}` declares no donate_argnums/donate_argnames",
                          "the saving is the size of those values (one copy more per step in flight on an "
                          "accelerator): `jaxlint trace` measures it"],
                facts=[r.fact])

    @staticmethod
    def _short_or_test(model: ModuleModel, r) -> "str | None":
        if model.in_test_code(r.call):
            return "test code: the loop steps a test's state"
        trips = looprecord.record(model, r.loop).trips
        if trips.count is not None and trips.count <= 100 and trips.source == "literal":
            return f"a short run: {trips.why}"
        return None


class UseAfterDonation(Rule):
    code = "JAX804"
    needs = ("donation-used",)
    fails_at_runtime = True  # reading a donated (deleted) array: RuntimeError, on every backend (CPU too)
    confirmed_by = "donation"
    short = "A variable read after a jitted call donated its buffer: the array has been deleted."
    name = "use-after-donation"
    summary = ("Finds a variable holding JAX arrays passed in a donated position (`donate_argnums`/"
               "`donate_argnames` of the `jax.jit`/`jax.pmap` that made the function) and read again after the "
               "call, in a later statement of the same block, before anything binds it again (`new = update(params, "
               "g)`, then `params[\"w\"]`). Not reported: a variable that may hold host data (a donated NumPy "
               "batch is copied to the device and the copy donated), and flax's `nnx.jit`, which writes the new "
               "state back into the objects passed in.")
    opt_in_cases = ("The donating function is not a def of the module (a library's `model.apply`), or none of its "
                    "outputs is computed from the donated argument: JAX deletes a donated array only when an output of "
                    "its shape and dtype can take the buffer, and otherwise warns \"Some donated buffers were not "
                    "usable\" and keeps it (donation-used unknown).")
    rationale = ("Donating an argument lets the compiled program reuse its buffer for an output; JAX then "
                 "deletes the argument, on every backend (measured on CPU too), and reading it raises "
                 "`RuntimeError: Array has been deleted`, or, where the donation could not be used, works on one "
                 "machine and fails on another. Bind the result to the same name "
                 "(`params = update(params, g)`), or keep a copy before the call if the old value is needed.")
    bad = """
        import functools
        import jax
        import jax.numpy as jnp

        @functools.partial(jax.jit, donate_argnums=0)
        def update(params, grads):
            return params - 0.1 * grads

        def step(grads):
            params = jnp.zeros(4)
            new = update(params, grads)
            change = jnp.abs(new - params).max()
            return new, change
    """
    good = """
        import functools
        import jax
        import jax.numpy as jnp

        @functools.partial(jax.jit, donate_argnums=0)
        def update(params, grads):
            return params - 0.1 * grads

        def step(grads):
            params = jnp.zeros(4)
            old = params.copy()
            params = update(params, grads)
            change = jnp.abs(params - old).max()
            return params, change
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for use in donation.uses_after_donation(model):
            call = use.call
            used = donation.donation_used(model, use.wrap, use.name, donation.donated_param(model, call, use.wrap,
                                                                                            use.name))
            yield self.finding(use.read, [f"`{use.name}` was donated to `{unparse(call.func, 40)}` on ", Line(call.lineno),
                                          " (donate_argnums/donate_argnames of its jit), which deletes its buffer: "
                                          "reading it here raises \"Array has been deleted\"; bind the result to the "
                                          "same name, or copy the value before the call"],
                               evidence=[f"`{unparse(call.func, 40)}` donates the argument `{use.name}` is passed as",
                                         f"nothing binds `{use.name}` again between the call and this read"],
                               facts=[used])


RULES = [SettingAfterBackendStart, DistributedInitializeLate, MissingDonation, UseAfterDonation]


def _origin(model: ModuleModel, wrap) -> str:
    """`` (src/utils.py, line 7)``: where a wrapper summarized from another module is made."""
    if wrap.origin is None or model.path is None:
        return ""
    path, line = wrap.origin
    return f" ({os.path.relpath(path, os.path.dirname(os.path.abspath(model.path)))}, line {line})"
