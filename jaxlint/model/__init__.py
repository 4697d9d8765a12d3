"""The module model: one walk over a module's AST that every rule reads, in three layers:

* ``python/``: Python semantics (the walk, the records, scopes, bindings, name resolution and the
  call graph); it imports nothing from the layers above;
* ``facts/``: JAX facts (what is traced, compiled, a JAX value, a tracer, a key, ...), with the
  model the rules see (``facts/model.py``: ``JaxModel``, ``build_model``);
* ``policy/``: the rules' policy (``roles``, the loop record, evidence sentences).

This package re-exports the names the rules use most; the rules import the fact modules from
their layer packages (``from jaxlint.model.facts import values``).


It answers the questions the rules need and nothing more:

* what a name means (imports and aliases, with local shadowing): :meth:`ModuleModel.resolve`;
* which functions are traced (jit/pmap, transforms, lax bodies, same-module callees),
  with static arguments and which parameters hold tracers: :class:`FunctionInfo`;
* where a node runs: its scope, the loops around it in its own function, and the ``if``
  tests guarding it: :class:`Context`, :func:`jaxlint.model.loops.hot_loop`;
* which expressions hold JAX values: :func:`jaxlint.model.values.is_jax`;
* which binding of a PRNG key each ``jax.random`` call consumes, and whether two uses of one
  key repeat randomness: :mod:`jaxlint.model.keys`;
* the jit wrappers created in the module: :attr:`ModuleModel.jit_wraps`.

The walk records contexts and bindings; everything that needs inference (value kinds,
callable lookups) is computed lazily and memoized, so rules only pay for what they ask.
``ModuleModel`` holds the records and the Python-semantics queries (names, bindings, scopes);
every other fact is a module of functions of the model (``values``, ``callables``, ``loops``,
``work``, ``roles``, ...) that its askers import explicitly: no mixins.
"""

from .facts.arrays import array_only_index, is_str_key
from .facts.model import JaxModel, build_model
from .facts.frequency import cached, called_once, per_step, setup_name, step_name
from .facts.keydraws import FixedKeyDraw
from .facts.keys import KEY_FUNCS, KEY_MAKERS, SAMPLERS, KeyUse, is_draw
from .facts.loops import loop_iterable, mentions, varying_names
from .python.module import ModuleModel
from .python.records import BOUNDED_TRIPS, STARRED, Binding, ClassInfo, Context, FunctionInfo, Loop, Scope
from .facts.jaxrecords import Churn, JitWrap, NewCallable, Repetition, TraceCause
from .facts.repetition import many_trips
from .facts.summary import ModuleSummary
from .facts.apisyntax import at_update
from .python.syntax import call_arg, last_name, unparse
from .facts.fetches import FETCH_OR_FORMAT_NAMES

__all__ = [
    "BOUNDED_TRIPS", "FETCH_OR_FORMAT_NAMES", "STARRED", "Binding", "Churn", "ClassInfo", "Context",
    "FunctionInfo", "JaxModel", "JitWrap", "Loop", "ModuleModel", "ModuleSummary", "NewCallable", "Repetition", "Scope",
    "TraceCause", "array_only_index", "at_update", "build_model", "cached", "call_arg", "called_once",
    "is_str_key", "last_name", "loop_iterable", "many_trips", "mentions", "per_step",
    "setup_name", "step_name", "unparse", "varying_names",
    "KEY_FUNCS", "KEY_MAKERS", "FixedKeyDraw", "KeyUse", "SAMPLERS", "is_draw",  # key flow (keys.py, keydraws.py)
]
