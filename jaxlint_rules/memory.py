"""JAX8xx: memory and device set-up: settings that come too late to take effect."""

from __future__ import annotations

from typing import Iterator

from jaxlint.model import ModuleModel
from jaxlint.model.facts import donation, setuporder
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
               "is imported: `JAX_ENABLE_X64`, `JAX_PLATFORMS`, ...) after `import jax`. The flow is the "
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
            yield self.finding(late.node, [*when, ", so this setting does nothing; set it before `import jax` "
                                           "(or use `jax.config.update` for JAX's own flags)"], evidence=facts)


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
    short = "A jitted step whose results rebind its own arguments every iteration, with no donation."
    summary = ("Finds, in a step loop (the innermost loop that runs JAX work), an assignment whose value is a "
               "call of a `jax.jit`/`jax.pmap` function declaring no `donate_argnums`/`donate_argnames` and whose "
               "targets rebind names passed to it (`state = train_step(state, batch)`, `params, opt_state, loss = "
               "update(params, opt_state, batch)`). Static arguments are not counted. Reported only with "
               "`--pedantic`: whether the doubled memory matters depends on the state's size, which "
               "`jaxlint trace` measures (its donation advice gives the bytes).")
    rationale = ("Without donation, the call's outputs get new buffers while the inputs are still alive, so the "
                 "old and the new state are both in device memory at the peak: for a model's parameters and "
                 "optimizer state, twice their size. Donating the arguments the call replaces lets XLA write the "
                 "results into their buffers (measured with memory_analysis on jax 0.10.2: the peak of a step "
                 "with 256 KiB of parameters drops by 256 KiB). Only donate what nothing reads after the call "
                 "(JAX804).")
    opt_in_cases = "Every finding: the saving is the state's size, known only when the program runs."
    bad = """
        import jax

        @jax.jit
        def train_step(state, batch):
            return state - 0.1 * batch

        def train(state, batches):
            for batch in batches:
                state = train_step(state, batch)
            return state
    """
    good = """
        import functools
        import jax

        @functools.partial(jax.jit, donate_argnums=0)
        def train_step(state, batch):
            return state - 0.1 * batch

        def train(state, batches):
            for batch in batches:
                state = train_step(state, batch)
            return state
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for r in donation.rebinding_without_donation(model):
            opts = []
            if r.positions:
                opts.append(f"donate_argnums={tuple(r.positions)!r}")
            if r.keywords:
                opts.append(f"donate_argnames={tuple(r.keywords)!r}")
            names = ", ".join(f"`{n}`" for n in r.names)
            yield self.finding(r.call, [f"`{unparse(r.call.func, 40)}` is called every iteration and its results "
                                        f"rebind {names}, with no donation: the old and new values are in device "
                                        f"memory together; declare `{', '.join(opts)}` on its `{r.wrap.spelling}` "
                                        "if nothing reads the old values after the call"],
                               opt_in="the saving is the state's size: `jaxlint trace` reports it",
                               evidence=[f"the call runs in every iteration of the loop on line {r.loop.node.lineno}",
                                         f"the assignment binds {names}, which the call is given",
                                         f"its `{r.wrap.spelling}` declares no donate_argnums/donate_argnames"])


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
