"""What other modules of a project need to know of a module, without its syntax tree."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from . import callables, donation, namedtuples, nnxdonation, returnkinds, trainingstate
from .callables import _TRANSFORMED
from .jaxrecords import JitWrap

if TYPE_CHECKING:  # annotations only: the model imports this module
    from ..python.module import ModuleModel


class ModuleSummary:
    """What other modules need to know of a module, without its tree: whether it imports JAX,
    which top-level names are jitted/transformed callables, which top-level functions certainly
    return a JAX array (:attr:`array_results`: only the functions
    :func:`~jaxlint.project.array_candidates` finds are judged), and which names it re-exports."""

    __slots__ = ("path", "names", "imports_jax", "exports", "_array_results", "_pending", "reexports", "project",
                 "maybe_programs", "factories", "_factory_pending", "records", "_records_pending", "digest",
                 "_methods", "_tuples")

    def __init__(self, model: ModuleModel, candidates: frozenset = frozenset()):
        self.path = model.path
        self.project = model.project
        self.imports_jax = model.imports_jax
        self.exports: dict[str, JitWrap] = {}
        self.reexports: dict[str, tuple] = dict(model.module_scope.import_src)
        self._array_results: Optional[frozenset] = returnkinds.array_results(model, candidates)
        self._pending: tuple = ()
        self.maybe_programs: Optional[frozenset] = maybe_programs(model.tree)
        # top-level functions that return a compiled callable (``def make_step(lr): return jax.jit(...)``)
        self.factories: dict[str, JitWrap] = factories_of(model)
        self._factory_pending = None
        self.records: frozenset = namedtuples.record_classes_of(model)  # NamedTuple classes
        self._records_pending = None
        self.digest: Optional[str] = None  # the file's content hash, set by the resolver
        self._methods: Optional[dict] = None  # the classes' methods that end in unwaited JAX work
        self._tuples: Optional[dict] = None  # ``name[i]``: element i of the tuple a function returns, compiled
        self.names: Optional[frozenset] = _module_names(model)
        for name in model.module_scope.events:
            wrap = callables.exported_callable(model, name)
            if wrap is None:
                continue
            self.exports[name] = _portable(wrap, model)
        model.dispose()

    @classmethod
    def empty(cls, path: str, project, imports_jax: bool, pending: frozenset = frozenset(),
              digest: Optional[str] = None, factories_pending: bool = False,
              records_pending: bool = False) -> "ModuleSummary":
        """A module that exports nothing compiled (and whose imports do not matter). ``pending``:
        top-level functions that may return a JAX array, judged when first asked about
        (:meth:`~jaxlint.project.ProjectResolver.array_results`) from the file of content ``digest``."""
        self = cls.__new__(cls)
        self.path, self.project, self.imports_jax = path, project, imports_jax
        self.exports, self.reexports, self.factories = {}, {}, {}
        self.names = None  # not parsed: not known
        # a function that may return a compiled callable (``return jax.jit(...)``): judged when
        # first asked about, from the file of content ``digest``
        self._factory_pending = digest if factories_pending and project is not None and path is not None else None
        self.maybe_programs = None  # not parsed: read on demand
        # a module that mentions ``NamedTuple``: its record classes are read when first asked about
        self.records = frozenset()
        self._records_pending = digest if records_pending and project is not None and path is not None else None
        self.digest, self._methods, self._tuples = digest, None, None
        if pending and project is not None and path is not None and digest is not None:
            self._array_results, self._pending = None, (pending, digest)
        else:
            self._array_results, self._pending = frozenset(), ()
        return self

    @property
    def array_results(self) -> frozenset:
        """The module's top-level functions that certainly return one JAX array
        (:meth:`~jaxlint.model.ModuleModel.array_results`)."""
        if self._array_results is None:
            names, digest = self._pending
            self._array_results = frozenset()  # a cycle of lookups sees "none" meanwhile
            self._array_results = self.project.array_results(self.path, digest, names)
            self._pending = ()
        return self._array_results

    def exported_callable(self, name: str) -> Optional[JitWrap]:
        if name in self.exports:
            return self.exports[name]
        other = self._reexported(name)
        return other[0].exported_callable(other[1]) if other is not None else None

    def factory_callable(self, name: str) -> Optional[JitWrap]:
        """The compiled callable that calling the module's top-level function ``name`` returns, here
        or where this module re-exports it from; ``name[i]``: element i of the tuple it returns
        (``step, metrics = get_train_step(cfg)``), read from a full model of the file when first
        asked (the function's body binds the callable it returns)."""
        if name.endswith("]"):
            if self._tuples is None:
                self._tuples = {}
                if self.project is not None and self.path is not None and self.digest is not None:
                    self._tuples = self.project.tuple_factories(self.path, self.digest)
            if name in self._tuples:
                return self._tuples[name]
            base, _, index = name.partition("[")
            other = self._reexported(base)
            return other[0].factory_callable(f"{other[1]}[{index}") if other is not None else None
        if self._factory_pending is not None:
            digest, self._factory_pending = self._factory_pending, None
            self.factories = self.project.factories(self.path, digest)
        if name in self.factories:
            return self.factories[name]
        other = self._reexported(name)
        return other[0].factory_callable(other[1]) if other is not None else None

    def record_class(self, name: str) -> bool:
        """Whether the module's top-level ``name`` is a record class (a ``NamedTuple``: see
        :mod:`~jaxlint.model.facts.namedtuples`), here or where this module re-exports it from."""
        if self._records_pending is not None:
            digest, self._records_pending = self._records_pending, None
            self.records = self.project.records(self.path, digest)
        if name in self.records:
            return True
        other = self._reexported(name)
        return other is not None and other[0].record_class(other[1])

    def dispatching_method(self, cls: str, method: str) -> bool:
        """Whether ``method`` of the module's top-level class ``cls`` (defined in that class)
        dispatches JAX work and returns without waiting for it (``def train(self, batch): ...
        = self._train_step(...); return metrics``), here or where this module re-exports the
        class from. Read from a full model of the file when first asked."""
        if self._methods is None:
            self._methods = {}
            if self.imports_jax and self.project is not None and self.path is not None and self.digest is not None:
                self._methods = self.project.dispatching_methods(self.path, self.digest)
        if method in self._methods.get(cls, ()):
            return True
        other = self._reexported(cls)
        return other is not None and other[0].dispatching_method(other[1], method)

    def _reexported(self, name: str) -> Optional[tuple]:
        """``(summary, name)`` of the module and name this module re-exports ``name`` from."""
        src = self.reexports.get(name)
        if src is None or self.project is None or self.path is None:
            return None
        other = self.project.imported(self.path, *src)
        return other if other is not None and other[1] is not None else None

    def key_draw(self, name: str, cls: Optional[str], index: Optional[int], kw: Optional[str]) -> Optional[tuple]:
        """Where the module's function ``name`` (a method of its class ``cls``) draws from the key
        argument ``index`` (or keyword ``kw``) binds, here or where this module re-exports it from
        (:meth:`ProjectResolver.key_draw`); None when it does not or it is unknown."""
        if self.project is None or self.path is None or not self.imports_jax and (cls or name) not in self.reexports:
            return None
        other = self._reexported(cls or name)
        if other is not None:
            return (other[0].key_draw(name, other[1], index, kw) if cls else
                    other[0].key_draw(other[1], None, index, kw))
        return self.project.key_draw(self.path, name, cls, index, kw)

    def runs_program(self, name: str) -> bool:
        """Whether calling the module's top-level ``name`` runs a whole program (a loop of steps),
        here or where this module re-exports it from (:meth:`ProjectResolver.runs_program`)."""
        if self.project is None or self.path is None:
            return False
        src = self.reexports.get(name)
        if src is not None:
            other = self.project.imported(self.path, *src)
            return other is not None and other[1] is not None and other[0].runs_program(other[1])
        if self.maybe_programs is not None and name not in self.maybe_programs:
            return False  # its body has no loop and calls no device loop or solve: one step at most
        return self.project.runs_program(self.path, name)

    def returns_array(self, name: str) -> bool:
        """Whether calling the module's top-level ``name`` certainly returns one JAX array: a
        function of :attr:`array_results`, here or where this module re-exports it from."""
        pending = self._pending
        if (not pending or name in pending[0]) and name in self.array_results:
            return True
        src = self.reexports.get(name)
        if src is None or self.project is None or self.path is None:
            return False
        other = self.project.imported(self.path, *src)
        return other is not None and other[1] is not None and other[0].returns_array(other[1])


_SUMMARY_NODE = ast.Pass()


def factories_of(model: ModuleModel) -> dict:
    """``{name: wrapper}`` of the module's top-level functions that return a compiled callable
    (``def make_step(lr): return jax.jit(...)``), other modules' factories not followed."""
    out: dict = {}
    model.facts.summarizing = True
    for f in model.functions:
        if f.parent is None and f.cls is None and isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and _may_return_callable(f.node):
            wrap = callables.exported_factory(model, f.name)
            if wrap is not None:
                out[f.name] = _portable(wrap, model, step_facts=True)
    return out


def tuple_factories_of(model: ModuleModel) -> dict:
    """``{"name[i]": wrapper}``: element i of the tuple every ``return`` of the module's top-level
    function ``name`` gives is a compiled callable (``return train_step_fn, metrics``)."""
    out: dict = {}
    model.facts.summarizing = True
    for f in model.functions:
        if f.parent is None and f.cls is None and isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for i in _tuple_positions(f.node):
                wrap = callables.exported_factory(model, f.name, i)
                if wrap is not None:
                    out[f"{f.name}[{i}]"] = _portable(wrap)
    return out


def _may_return_callable(node: ast.AST) -> bool:
    """Every ``return`` gives a call, a name or an attribute (what a compiled callable can be)."""
    values = callables.returned_values(node)
    return bool(values) and all(isinstance(v, (ast.Call, ast.Name, ast.Attribute)) for v in values)


def _tuple_positions(node: ast.AST) -> range:
    """The positions of the tuples every ``return`` gives, when they are all tuples of one length."""
    values = callables.returned_values(node)
    sizes = {len(v.elts) if isinstance(v, ast.Tuple) else -1 for v in values}
    return range(sizes.pop()) if len(sizes) == 1 and min(sizes) > 0 else range(0)


def _portable(wrap: JitWrap, model: Optional[ModuleModel] = None, step_facts: bool = False) -> JitWrap:
    """A copy of ``wrap`` that keeps no syntax tree (summaries outlive their module's model), with
    the parameters it updates in place when it is an NNX step (read from ``model``); with
    ``step_facts`` (a factory's step, read on demand), also what JAX803 asks of it."""
    if wrap is _TRANSFORMED:
        return wrap
    out = JitWrap(node=_SUMMARY_NODE, kind=wrap.kind, spelling=wrap.spelling, target=None, func=None,
                  ctx=_TRANSFORMED.ctx, static_argnums=set(wrap.static_argnums),
                  static_argnames=set(wrap.static_argnames), decorator=False, inline=wrap.inline,
                  params=tuple(wrap.positional_params()))
    out.in_place = wrap.in_place if model is None else nnxdonation.in_place_positions(model, wrap)
    if step_facts and model is not None and wrap.func is not None and model.path is not None:
        # what JAX803 asks of a step, answered while its body is at hand (the summary keeps no tree)
        out.deletes_donated = donation.deletes_donated(model, wrap)
        out.updates = trainingstate.updates_by_position(model, wrap.func)
        out.origin = (model.path, getattr(wrap.site, "lineno", 0))
    return out

# Calls spelled like a device loop or a library solve (``lax.scan``, ``solver.run``): what a
# function that runs a whole program must contain, if it has no loop of its own.
_PROGRAM_CALLS = frozenset({"scan", "fori_loop", "while_loop", "map", "associative_scan", "diffeqsolve", "run",
                            "minimise", "root_find", "least_squares", "fixed_point"})


def maybe_programs(tree: ast.Module) -> frozenset:
    """The top-level functions whose body (nested functions included) has a ``for``/``while``
    loop or a call spelled like a device loop or a solve: the only ones that can run a whole
    program (:meth:`ModuleSummary.runs_program` reads the module again only for these)."""
    out = set()
    for stmt in tree.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for n in ast.walk(stmt):
            if isinstance(n, (ast.For, ast.AsyncFor, ast.While)) or (
                    isinstance(n, ast.Call) and (getattr(n.func, "attr", None) or getattr(n.func, "id", None))
                    in _PROGRAM_CALLS):
                out.add(stmt.name)
                break
    return frozenset(out)



def _module_names(model) -> Optional[frozenset]:
    """The names the module binds at module level (defs, classes, assignments, imports, in any
    branch), or None when it may bind others at run time: ``from m import *``, a module-level
    ``__getattr__``, or a module-level call of ``globals``/``vars``/``setattr``/``exec``."""
    scope = model.module_scope
    if "__getattr__" in scope.events or any(
            isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in model.import_nodes):
        return None
    if any(isinstance(c.func, ast.Name) and c.func.id in ("globals", "vars", "setattr", "exec") for c in model.calls
           if model.function_at(c) is None):
        return None
    return frozenset(scope.events) | frozenset(scope.imports) | frozenset(scope.import_src)
