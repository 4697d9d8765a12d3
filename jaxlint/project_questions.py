"""The questions one module asks of another module of the project, answered from a full model of that
file on demand (:meth:`~jaxlint.project.ProjectResolver.answer`, memoized per process and recorded for the
result cache): whether a function runs a whole program, where it draws from a key it is given, applies an
optimizer update, computes a gradient outside jit, or is a timer's context manager."""

from __future__ import annotations

import ast
import os
from typing import Optional

from .source import content_hash, decode_source

OFFER_CHARS = 50_000  # modules this large are summarized while checked (ProjectResolver.offer)


class Questions:
    """A mixin of :class:`~jaxlint.project.ProjectResolver`: each method names its question and asks it with
    ``self.answer``/``self._full_answer``."""

    def runs_program(self, path: str, name: str) -> bool:
        """Whether calling the top-level function ``name`` of the project file ``path`` runs many
        steps on its own (:func:`~jaxlint.model.work.function_runs_program`: a jitted
        device loop, a Python loop of compiled steps, a library solve): asked only where a loop
        of the checking module calls it, so the file is read and fully modelled then, once per
        process. What that consults is recorded for the result cache."""
        from .model.facts.work import function_runs_program

        return self._full_answer(path, (name,), lambda model: function_runs_program(model, name), False)

    def key_draw(self, path: str, name: str, cls: Optional[str], index: Optional[int], kw: Optional[str]):
        """Where the function ``name`` (a method of the top-level class ``cls``) of the project file
        ``path`` draws from the key its argument ``index`` (or keyword ``kw``) binds:
        ``(fn, line, spelling, chain)`` (:func:`~jaxlint.model.keyhandoffs.remote_draw`), or None
        when it does not or it is unknown, as :meth:`answer`: a module that draws spells `random` (jax.random,
        however imported) or `sample` (a distribution's sample(seed=...)); one that spells neither is not modelled."""
        from .model.facts.keyhandoffs import remote_draw

        return self.answer(path, ("key", name, cls, index, kw), lambda model: remote_draw(model, name, cls, index, kw),
                           None, (b"random", b"sample"))

    def training_update(self, path: str, name: str, positions: tuple, keywords: tuple, grads: tuple = ()):
        """Where the top-level function ``name`` of the project file ``path`` applies an optimizer update to
        a value computed from its parameters at ``positions``/``keywords`` (``grads``: those given a gradient):
        ``(name, operand, update, line)`` (:func:`~jaxlint.model.facts.trainingstate.remote_update`), or None;
        as :meth:`answer`. A file that spells no update is not modelled."""
        from .model.facts.trainingstate import remote_update

        return self.answer(path, ("update", name, positions, keywords, grads), lambda model: remote_update(
            model, name, positions, keywords, grads), None, (b"update", b"apply_gradients"))

    def eager_gradient_step(self, path: str, name: str, plain: bool = False):
        """Where the top-level function ``name`` of the project file ``path``, plain Python, computes a
        gradient eagerly: ``(line, transform, target)`` (:func:`~jaxlint.model.facts.eagerwork.remote_eager_step`),
        or None; as :meth:`answer`. A file that spells no ``grad`` is not modelled; asked of a function whose
        summary shows no gradient transform on it (``plain``), nor one that calls no ``grad(``."""
        from .model.facts.eagerwork import remote_eager_step

        return self.answer(path, ("eager-step", name), lambda model: remote_eager_step(model, name), None,
                           (b"grad(",) if plain else (b"grad",))

    def timer_method(self, path: str, cls: str, method: str) -> bool:
        """Whether ``method`` of the top-level class ``cls`` of the project file ``path`` is a timer's context
        manager (:func:`~jaxlint.model.facts.timerclasses.timer_method`), as :meth:`answer`."""
        from .model.facts import timing
        from .model.facts.timerclasses import timer_method_named

        ops = (timing.is_clock, timing._calls_in, timing._device_role)
        return self.answer(path, ("timer", cls, method), lambda model: timer_method_named(model, cls, method, ops),
                           False, (b"contextmanager", b"__exit__"))

    def signature(self, path: str, name: str) -> Optional[tuple]:
        """The signature (:func:`~jaxlint.model.python.arity.signature`) of the top-level function ``name`` of the
        project file ``path`` when a call of it runs that ``def`` (:func:`~jaxlint.model.python.arity.
        tree_function_signature`: read from the file's syntax tree, no model built), or None; asked for a call's
        arity where a finding's line may never run, only of a file that spells ``def name`` and is not one of the
        large modules a check summarizes from its own tree (they are not read again)."""
        from .model.python.arity import tree_function_signature

        path = self._abspath(path)
        key = (path, "signature", name)
        if key in self._programs:
            found, deps = self._programs[key]
            self._note(deps)
            return found
        found, deps = None, set()
        try:
            small = os.path.getsize(path) <= OFFER_CHARS
        except OSError:
            small = False
        data = self._bytes(path) if small else None
        if data is not None:
            deps.add(("f", path, content_hash(data)))
            if f"def {name}".encode() in data:
                try:
                    found = tree_function_signature(ast.parse(decode_source(data), filename=path), name)
                except (SyntaxError, ValueError, UnicodeError, LookupError, RecursionError, MemoryError):
                    found = None
        self._programs[key] = (found, frozenset(deps))
        self._note(deps)
        return found
