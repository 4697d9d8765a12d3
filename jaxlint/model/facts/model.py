"""The module model as the rules see it: the Python core (python/module.py) with the JAX facts'
records and caches, and :func:`build_model`, which walks a module and works out what JAX does with it.

``JaxModel`` adds to :class:`~jaxlint.model.python.module.ModuleModel` what only the facts layer
knows: the jit wrappers made in the module, whether it imports JAX, which functions are traced
(:class:`~jaxlint.model.facts.jaxrecords.TracedFunction` records), the per-module analyses
(``staging``, ``arrays``, ``shape_variance``) and the facts' memo tables (``facts``, a
:class:`~jaxlint.model.facts.factcache.FactCache`).
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from ... import conventions, jaxversion
from ..python.builder import walk_module
from ..python.module import ModuleModel, module_import_sources
from ..python.records import Scope
from . import loops as loopfacts
from . import removedapi
from .arrays import ArrayKinds
from .factcache import FactCache
from .jaxrecords import JitWrap, StepLoop, TracedFunction
from .staging import Staging
from .tracing import API_LAST_NAMES, _TraceAnalysis
from .variance import ShapeVariance

# The top-level packages whose import makes a module JAX code (prefilter.py reads the same words).
JAX_PACKAGES = frozenset({"jax", "equinox", "flax"})


class JaxModel(ModuleModel):
    """Everything the rules know about one module. Build with :func:`build_model`."""

    def __init__(self, tree: ast.Module):
        super().__init__(tree)
        self.jit_wraps: list[JitWrap] = []
        self.facts = FactCache()  # the facts' memo tables
        self.conventions = conventions.active()  # the naming conventions in force, set by build_model()
        self.jax_version = jaxversion.active()  # the oldest JAX the project supports (a tuple), or None
        self._staging: Optional[Staging] = None
        self._arrays: Optional[ArrayKinds] = None
        self._bounded_iters: Optional[set] = None  # ids of the iterables of bounded loops

    @property
    def imports_jax(self) -> bool:
        """Whether the module imports JAX, equinox or flax itself (in any scope)."""
        return not self.import_roots.isdisjoint(JAX_PACKAGES)

    @property
    def arrays(self) -> ArrayKinds:
        """The narrower value kind "certainly one array, not a pytree" (facts/arrays.py)."""
        if self._arrays is None:
            self._arrays = ArrayKinds(self)
        return self._arrays

    def shape_variance(self, scope: Scope, loops: tuple) -> ShapeVariance:
        """What varies per iteration of ``loops`` (unbounded loops around a call in ``scope``)."""
        if self._bounded_iters is None:
            self._bounded_iters = {id(loopfacts.loop_iterable(lp.node)) for lp in self.loops if lp.bounded}
        return ShapeVariance(self, scope, loops, self._bounded_iters)

    @property
    def staging(self) -> Staging:
        """Which traced functions see abstract tracers (facts/staging.py); one analysis per module,
        built on first use and shared by every rule."""
        if self._staging is None:
            self._staging = Staging(self)
        return self._staging

    def uses_jax(self) -> bool:
        """Whether any rule can fire: the module imports JAX, or imports from a module of the
        project that does (a training script importing its jitted step from ``model.py``), or a
        name such a module exports (through a package's ``__init__``)."""
        if self.imports_jax:
            return True
        return _sources_use_jax(self.module_scope.import_src.values(), self.project, self.path)

    def traced_calls(self) -> Iterator[tuple]:
        """``(function, call)`` for every call made directly in a traced function's body."""
        for f in self.functions:
            if f.traced:
                for call in f.calls:
                    yield f, call

    def in_traced_code(self, node: ast.AST) -> bool:
        f = self.function_at(node)
        return f is not None and f.traced



def build_model(tree: ast.Module, path: Optional[str] = None, project=None, shallow: bool = False,
                conventions_in_force=None) -> JaxModel:
    """Walk the tree once, then work out which functions are traced. With ``path`` and a
    :class:`~jaxlint.project.ProjectResolver`, names imported from the project's own modules are
    looked up there. ``shallow`` skips function bodies (for summaries of imported modules).
    ``conventions_in_force``: the naming conventions (jaxlint/conventions.py) the facts may read;
    the run's configured ones when not given."""
    model = JaxModel(tree)
    if conventions_in_force is not None:
        model.conventions = conventions_in_force
    model.path = path
    model.project = project
    walk_module(model, shallow, TracedFunction, StepLoop, API_LAST_NAMES, removedapi.WORDS, removedapi.TYPE_WORDS)
    loopfacts.refine_bounds(model)
    _TraceAnalysis(model).run()
    return model


def imports_use_jax(tree: ast.Module, project, path: Optional[str]) -> bool:
    """For a module that imports no JAX package itself: whether it imports from a module of the
    project that does, or a name such a module exports, so that a rule can fire on it
    (:meth:`ModuleModel.uses_jax` once the model is built; the same answer, from the tree)."""
    return _sources_use_jax(module_import_sources(tree).values(), project, path)


def _sources_use_jax(sources, project, path: Optional[str]) -> bool:
    if project is None or path is None:
        return False
    for module, attr, level in sources:
        other = project.imported(path, module, attr, level)
        if other is not None and (other[0].imports_jax or (other[1] is not None and (
                other[0].exported_callable(other[1]) is not None or other[0].returns_array(other[1])))):
            return True
    return False
