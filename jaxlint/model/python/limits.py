"""Every limit the model's inference works within, in one place.

Queries that follow chains (an alias of an alias, a name bound to a ``partial`` of a name bound to
a lambda, ``x = y * 2`` back to where ``y`` came from) stop somewhere. Two kinds of limit:

* **Chain limits** bound how far one query follows one chain before it answers "unknown". They
  exist for adversarial input (generated code, alias cycles); real code stays far below them.
  "Unknown" is always the conservative answer for the rules: not a JAX value, not compiled, not a
  constant, not varying -- so a limit can hide a finding, never make one.
* **Horizons** are how far a heuristic looks on purpose (a precision choice, not a work guard):
  beyond them the answer is a deliberate default.

On top of the chain limits, every module has **one work budget** (:class:`Work`), shared by all
chain-following queries on it: each chain step spends one unit, and once a module has spent
``WORK_PER_LINE`` units per line of source (plus ``WORK_BASE``), every further chain step
answers "unknown". It bounds the total inference work on one file, whatever the rules ask
(``bench/inference_work.py`` measures what real code spends).
"""

from __future__ import annotations

# -- chain limits (work guards)
ALIAS_CHAIN = 20  # resolve(): ``jit = jax.jit`` / ``fast = jit`` ...
CALLABLE_CHAIN = 8  # callable_info() / local_functions(): names bound to partials of jit wrappers ...
PARTIAL_CHAIN = 8  # the tracer analysis: parameters bound by nested ``functools.partial`` calls
ARRAY_CHAIN = 12  # arrays.certain(): "certainly one array" through names, calls and operators
MASK_CHAIN = 8  # is_mask(): boolean arrays through ``~``, ``&``, ``|`` and names
CONST_CHAIN = 6  # const_int(): int constants through names and arithmetic
SITE_CHAIN = 6  # staging: where the callable made by a transform call runs (``g = jax.grad(f)`` ...)
VARIANCE_CHAIN = 6  # shape variance: names recomputed in the loop from names recomputed in the loop
KIND_CHAIN = 10  # staging.array_valued(): known arrays through names, calls, operators and callers
REPETITION_CHAIN = 6  # repeats(): a function called from a function called from ... that repeats
CHURN_CHAIN = 6  # churn(): a static value computed in the loop from names computed in the loop

# -- horizons (precision choices)
TRACER_SOURCE_HORIZON = 4  # staging.suspect(): assignments followed back to a parameter
RANK_HORIZON = 3  # rank_derived(): ``n = x.ndim`` followed through names
INTERNAL_HELPER_HORIZON = 1  # reads_internal_helper(): one name back to a library helper's result
PROPAGATION_ROUNDS_PER_FUNCTION = 50  # tracing: re-visits of callees per function of the module
HELPER_STATEMENTS = 3  # repetition: a helper whose whole work is one compiled call has at most this many
PERIODIC_HELPER_HORIZON = 3  # periodicity: names bound to a guard's test, helpers' definitions followed
PROGRAM_HORIZON = 3  # work: calls followed from a loop's iteration into a function that runs a program

# -- the per-module work budget
WORK_BASE = 20_000
WORK_PER_LINE = 20


class Work:
    """One module's inference work budget (see the module docstring)."""

    __slots__ = ("left", "spent")

    def __init__(self, lines: int = 0):
        self.left = WORK_BASE + WORK_PER_LINE * lines
        self.spent = 0

    def spend(self) -> bool:
        """Spend one unit; False (answer "unknown") once the budget is gone."""
        self.spent += 1
        self.left -= 1
        return self.left >= 0

# Levels of subclassing followed from a method of a base class to the instances the project makes
# of its subclasses (``SSM.fit_em`` run on a ``PoissonHMM``, through ``HMM``): the dynamax models
# of the review sets are two levels down.
SUBCLASS_DEPTH = 3
