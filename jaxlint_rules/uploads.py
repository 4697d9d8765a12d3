"""JAX205: host-to-device copies of the same data every step (the JAX2xx family's uploads; its
syncs, blocks, timing and callbacks are in host_transfer.py)."""

from __future__ import annotations

from typing import Iterator

from jaxlint.model import ModuleModel
from jaxlint.model.policy import transfers
from jaxlint.rule import Finding, Line, Rule, unparse


class LoopInvariantUpload(Rule):
    code = "JAX205"
    short = "The same host data uploaded to the device again every step of a loop."
    confirmed_by = "uploads"
    name = "loop-invariant-upload"
    summary = ("Finds `jnp.asarray(X)`, `jnp.array(X)` and `jax.device_put(X)` every iteration of a step loop, "
               "where `X` is host data (a NumPy array, a list or tuple) bound before the loop and not changed in "
               "it: a dataset, a mask or a lookup table converted again every step; and such host data passed "
               "straight to a compiled function (`jax.jit`/`jax.pmap` of the module; a NumPy array to equinox's "
               "`filter_jit`, which traces NumPy arrays and holds other leaves static) every iteration, which "
               "copies it at every call (host data includes scikit-learn's toy-data arrays, `make_moons` and "
               "the like, and what NumPy indexing or arithmetic with a number makes of them); and "
               "`flax.jax_utils.replicate(X)`/`jax.device_put_replicated(X, ...)` "
               "of a value the loop does not change (host data or a device array: each call copies all of it to "
               "every device). Not reported: per-step batches (`X[i]`, loop targets, names rebound in "
               "the loop), conversions of values that are already JAX arrays, static arguments, data of unknown "
               "kind (parameters, attributes), and conversions under a periodic guard.")
    rationale = ("Converting host data to a JAX array copies it to the accelerator (over PCIe or the host "
                 "interconnect) and allocates device memory for it; done in the loop, the same bytes travel "
                 "every iteration and the step waits for them. Convert once before the loop and reuse the "
                 "device array.")
    bad = """
        import jax
        import jax.numpy as jnp
        import numpy as np

        @jax.jit
        def step(w, table, i):
            return w + table[i]

        def train(w, n):
            table = np.random.rand(10_000, 128).astype(np.float32)
            for i in range(n):
                w = step(w, jnp.asarray(table), i)
            return w
    """
    good = """
        import jax
        import jax.numpy as jnp
        import numpy as np

        @jax.jit
        def step(w, table, i):
            return w + table[i]

        def train(w, n):
            table = jnp.asarray(np.random.rand(10_000, 128).astype(np.float32))
            for i in range(n):
                w = step(w, table, i)
            return w
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for names, fact, describe in ((("asarray", "array", "device_put"), transfers.invariant_upload, _upload),
                                      (("replicate", "device_put_replicated"), transfers.invariant_replicate,
                                       _replicate)):
            for call in (c for name in names for c in model.calls_by_name.get(name, ())):
                found = fact(model, call)
                if found is not None:
                    message, facts = describe(call, *found)
                    yield self.finding(call, message, evidence=facts)
        for call, x, loop, ev, wrap in transfers.implicit_uploads(model):
            fn = unparse(call.func, 30)
            facts = [f"`{x.id}` is host data (bound on line {ev.node.lineno}) that no statement of the loop on "
                     f"line {loop.node.lineno} changes",
                     f"`{fn}` is compiled (`{wrap.spelling}`), and `{x.id}` is not one of its static arguments: "
                     "a host array passed to a compiled function is copied to the device at every call"]
            yield self.finding(x, [
                f"`{x.id}` (host data bound on ", Line(ev.node.lineno), f") is passed to the compiled `{fn}` in every "
                "iteration of the loop on ", Line(loop.node.lineno), ": each call copies the same bytes to the device "
                f"again; convert it once before the loop (`{x.id} = jax.device_put({x.id})`) and pass the device "
                "array"], evidence=facts)


def _upload(call, loop, x, ev) -> tuple:
    """The message and evidence of ``jnp.asarray(X)`` of unchanged host data in every iteration."""
    facts = [f"`{x.id}` is host data (bound on line {ev.node.lineno}) that no statement of the loop on "
             f"line {loop.node.lineno} changes",
             f"`{unparse(call.func, 30)}` runs in every iteration of that loop, which runs JAX work: one "
             "host-to-device copy each time"]
    return [f"`{unparse(call, 40)}` copies the same host data to the device in every iteration of the "
            "loop on ", Line(loop.node.lineno), f": `{x.id}` (bound on ", Line(ev.node.lineno),
            f") does not change in the loop; convert it once before the loop "
            f"(`{x.id} = {unparse(call.func, 30)}({x.id})`) and reuse the device array"], facts


def _replicate(call, loop, x, ev) -> tuple:
    """The message and evidence of ``replicate(X)`` of an unchanged value in every iteration."""
    facts = [f"`{x.id}` (bound on line {ev.node.lineno}) is not rebound or changed in the loop on line "
             f"{loop.node.lineno}",
             f"`{unparse(call.func, 30)}` runs in every iteration of that loop, which runs JAX work: a "
             "copy of all of it to every device each time"]
    return [f"`{unparse(call, 40)}` copies the same value to every device in every iteration of the loop "
            "on ", Line(loop.node.lineno), f": `{x.id}` (bound on ", Line(ev.node.lineno), ") does not "
            "change in the loop; replicate it once before the loop and pass the replicated value"], facts


RULES = [LoopInvariantUpload]
