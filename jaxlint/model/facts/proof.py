"""Proof: the facts a finding rests on, each *proven*, *disproven* or *unknown*, with its evidence.

A rule reports a pitfall only when every fact it relies on holds: the value is a tracer, the code
runs at every step, the clock read does not wait, ... Each rule declares the facts it needs in one
place (``Rule.needs``, beside its examples) and hands the facts it established to
:meth:`jaxlint.rule.Rule.finding`:

* every fact proven: a default finding;
* a fact unknown: the finding is opt-in (``--pedantic``), and its evidence names the unknown;
* a fact disproven: no finding (the rule does not call ``finding``).

"Unknown" is the honest answer where the model cannot follow the value or the call: a configuration
object, a static field, a shape or a Python int is not a tracer until shown to be one.

This module decides nothing; the model's fact modules build :class:`Fact` values, the rules read
them. It imports nothing from the model.
"""

from __future__ import annotations

from typing import Iterable, Optional

PROVEN = "proven"
UNKNOWN = "unknown"
DISPROVEN = "disproven"

# The facts a rule can need, and what each one claims. ``Rule.needs`` names them; ``jaxlint
# explain CODE`` prints them as the rule's proof obligation.
FACTS = {
    "tracer": "the value is a tracer where it is used (an abstract array under staged tracing), not a "
              "Python value, a static field, a shape or a configuration object",
    "traced-path": "the code is on the path JAX traces: no `if` decided by a Python value at trace time (an "
                   "optional argument left None, a static flag) skips it",
    "immutable-array": "the object written to is a JAX array (immutable), not a Pallas or state ref, a "
                       "NumPy array or a container",
    "device-value": "the value is a JAX array on the device, so reading it on the host waits for the device",
    "per-step": "the code runs at every step of a loop whose trip count grows with the work",
    "runs-per-call": "the code runs every time the function is called, not once per trace",
    "trace-time": "the code runs only while JAX traces the function (once per compilation), not at every call",
    "leaks": "a tracer stored into state outside the traced function outlives its trace and is read after it",
    "abstract-values": "the values there are abstract tracers when its Python runs (staged by jit, vmap or a lax "
                       "primitive), not concrete numbers",
    "new-wrapper": "a new jit wrapper (a new cache entry) is made each time the code runs",
    "repeats": "the function around the code runs again and again",
    "same-callee": "a wrapper rebuilt each time wraps the same function object (for `jax.pmap`, an equal bound "
                   "method), so JAX's trace and compile caches hit: no recompile, only a new wrapper",
    "unblocked": "nothing between the dispatched work and the clock read waits for the device",
    "eager-update": "the work is an update of carried state, run op by op outside jit",
    "eager-gradient": "the call runs a gradient transform's product (`jax.grad`, `jax.value_and_grad`) in no "
                      "jitted or transformed function of the module, on a function that is not compiled itself: "
                      "run outside a trace, each call traces it again and runs its passes op by op",
    "eager": "the code runs op by op outside any trace (module-level code, or a loop that calls compiled "
             "functions), so each JAX operation is compiled for every new input shape",
    "training-state": "the rebound arguments are a model's training state: the compiled step applies an optimizer "
                      "update (or a gradient step) to one of them, so the copies the call keeps alive are parameters "
                      "and optimizer state",
    "old-unread": "nothing keeps or reads the values a call would donate once it returns: no other name or "
                  "container holds them, every call of the step rebinds them, and no caller reads what it passed",
    "donation-used": "the compiled function has an output the donated buffer can be reused for (computed from the "
                     "donated argument): only then does JAX delete the donated array",
    "compiled-once": "the compiled function is made once and its calls reuse the first trace (not a new "
                     "function or callable wrapped anew each time, which JAX traces again)",
    "rebound-after-call": "code rebinds the variable after a call of the compiled function and calls it again "
                          "(in the same loop, or later in the same scope)",
    "new-value": "the rebinding gives the variable a value other than the one traced (a loop's item, a value "
                 "computed from the step or from itself)",
    "removed": "the reference is to a name JAX has removed (jaxlint's table, from JAX's changelog), resolved "
               "through the module's imports, and no compatibility check (`hasattr`, a JAX version test, "
               "`try`/`except ImportError` or `AttributeError`) guards it",
}


class Fact:
    """One fact a finding rests on: ``name`` (a key of :data:`FACTS`), ``status`` (:data:`PROVEN`,
    :data:`UNKNOWN` or :data:`DISPROVEN`) and ``why`` (its evidence, one sentence)."""

    __slots__ = ("name", "status", "why")

    def __init__(self, name: str, status: str, why: str):
        self.name = name
        self.status = status
        self.why = why

    @property
    def proven(self) -> bool:
        return self.status == PROVEN

    @property
    def unknown(self) -> bool:
        return self.status == UNKNOWN

    @property
    def disproven(self) -> bool:
        return self.status == DISPROVEN

    def as_tuple(self) -> tuple:
        return (self.name, self.status, self.why)

    def __eq__(self, other):
        return self.as_tuple() == other.as_tuple() if isinstance(other, Fact) else NotImplemented

    def __hash__(self) -> int:
        return hash(self.as_tuple())

    def __repr__(self) -> str:
        return f"Fact({self.name!r}, {self.status!r}, {self.why!r})"


def proven(name: str, why: str) -> Fact:
    return Fact(name, PROVEN, why)


def unknown(name: str, why: str) -> Fact:
    return Fact(name, UNKNOWN, why)


def disproven(name: str, why: str) -> Fact:
    return Fact(name, DISPROVEN, why)


def first_unknown(facts: Iterable[Fact]) -> Optional[Fact]:
    return next((f for f in facts if f.status == UNKNOWN), None)


def sentence(fact: Fact) -> str:
    """How a finding's evidence states the fact: ``tracer (proven): ...``."""
    return f"{fact.name} ({fact.status}): {fact.why}"
