"""Cross-module inference: the modules of the user's own project that a module imports from.

``from .model import train_step`` or ``from mypkg.model import train_step`` is resolved to a file
next to (or in the package of) the importing file, that file's model is built once per process,
and the rules learn what they would know had the function been defined locally: that calling
``train_step`` runs compiled code, its static arguments, that it returns JAX arrays.

Only files of the project are read (the importing file's folder, the folder above its top package,
a ``src/`` folder for a src-layout package); installed libraries are not analysed. A large module
``jaxlint check`` checks anyway is summarized from the tree the check parsed (:meth:`ProjectResolver.offer`).
Models are cached per process (LRU), and resolve their own imports only a few levels deep.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import functools
import os
import re
from collections import OrderedDict
from typing import Optional

from .declaration import Finder
from .project_callers import Callers, _repository_root
from .project_questions import OFFER_CHARS, Questions
from .locate import FileListing, locate_from
from .source import content_hash, decode_source

MAX_MODELS = 4096  # module summaries kept per process (a few KiB each: no syntax trees)
MAX_DEPTH = 2  # how many import hops a query may follow
FULL_MODELS = 4  # full models of project files kept for their next question (ProjectResolver._full_answer)
MAX_PROJECT_FILES = 5_000  # files a search for a function's callers in the project reads at most
_SKIP_DIRS = frozenset({"__pycache__", "build", "dist", "node_modules", "site-packages", "venv", "env"})
_PROJECT_KINDS = (".py", ".ipynb", "pyproject.toml", "setup.cfg")  # files that may refer to a project's function


class ProjectResolver(Questions, Callers):
    def __init__(self) -> None:
        self._models: "OrderedDict[str, object]" = OrderedDict()
        self._files: dict = {}
        self._abs: dict = {}  # absolute path as given -> os.path.abspath of it (asked thousands of times)
        self._listing = FileListing()  # os.path.isfile for locating imports, one directory read per folder
        self._deps: dict = {}  # path -> what building its summary consulted
        self._recorders: list = []  # sets collecting what the current check consults
        self._programs: dict = {}  # (path, question...) -> (answer of a full model, what deciding it consulted)
        self._full_models: "OrderedDict[str, tuple]" = OrderedDict()  # path -> (digest, full model, what it consulted)
        self._loop_callers: dict = {}  # (path, name, cls) -> ((file, line) or None, what it consulted)
        self._loop_indexes: dict = {}  # project file -> its LoopCalls (None when it does not parse)
        self._notebook_lines: dict = {}  # a notebook indexed there -> notebook.Module.lines
        self._notebook_modules: dict = {}  # (notebook, content hash) -> its joined cells (or None)
        self._project_listing: dict = {}  # project root -> (its files, its .py files), with their bytes
        self._file_bytes: dict = {}  # path -> bytes of a project file a key question read
        self._declarations = Finder()  # packaging files declaring the JAX version, per folder
        self.depth = 0

    def clear(self) -> None:
        """Forget every file and summary (a new run in the same process sees current files)."""
        self._models.clear()
        self._files.clear()
        self._abs.clear()
        self._listing = FileListing()
        for memo in (self._deps, self._programs, self._full_models, self._loop_callers, self._loop_indexes,
                     self._notebook_lines, self._notebook_modules, self._project_listing, self._file_bytes):
            memo.clear()
        self._declarations = Finder()

    # ----------------------------------------------------------- dependencies

    @contextlib.contextmanager
    def recording(self):
        """Collect everything the project lookups consult while checking one file, for the
        result cache: ``("q", folder, module, level, found)`` for each import resolved and
        ``("f", path, content hash)`` for each module read (transitively)."""
        deps: set = set()
        self._recorders.append(deps)
        try:
            yield deps
        finally:  # by identity: two recorders may hold equal sets
            del self._recorders[next(i for i, r in enumerate(self._recorders) if r is deps)]

    def _note(self, entries) -> None:
        for r in self._recorders:
            r.update(entries)

    # ----------------------------------------------------------- files

    def locate(self, from_path: str, module: Optional[str], level: int) -> Optional[str]:
        """The project file for an import seen in ``from_path`` (None when not in the project)."""
        key = (os.path.dirname(self._abspath(from_path)), module, level)
        if key in self._files:
            found = self._files[key]
        else:
            found = self._files[key] = locate_from(*key, isfile=self._listing.isfile)
        if self._recorders:
            self._note((("q", *key, found),))
        return found

    def _abspath(self, path: str) -> str:
        """``os.path.abspath``, remembered for absolute paths (a relative one follows the current directory)."""
        found = self._abs.get(path)
        if found is None:
            found = os.path.abspath(path)
            if os.path.isabs(path):
                if len(self._abs) > 100_000:
                    self._abs.clear()
                self._abs[path] = found
        return found

    def declaration(self, path: str):
        """The packaging files that declare the JAX version for the file ``path``
        (:class:`~jaxlint.declaration.Declaration`), or None; read once per folder and run, and
        recorded for the result cache (``("d", ...)``: the files found, their content hashes)."""
        found, dep = self._declarations.declaration(os.path.dirname(self._abspath(path)))
        if self._recorders:
            self._note((dep,))
        return found

    # ----------------------------------------------------------- models

    def model(self, path: str):
        """The summary (:class:`~jaxlint.model.ModuleSummary`) of a project file, built once from a shallow
        model (module and class level only); None when it cannot be read or parsed."""
        path = self._abspath(path)
        if path in self._models:
            self._models.move_to_end(path)
            if self._recorders:
                self._note(self._deps.get(path, ()))
            return self._models[path]
        self._models[path] = None  # a cycle of imports sees "unknown" while it is being built
        model = None
        with self.recording() as deps:
            try:
                from .model import ModuleSummary

                with open(path, "rb") as fh:
                    data = fh.read()
                digest = content_hash(data)
                deps.add(("f", path, digest))
                text = decode_source(data)
                candidates = array_candidates(text)
                if _may_export_compiled(text, path):
                    tree = ast.parse(text, filename=path)
                    model = self._summary(tree, path, candidates)
                    model.digest = digest
                else:
                    # judged on demand: most such modules are never asked what a function returns
                    model = ModuleSummary.empty(path, self, imports_jax="jax" in text, pending=candidates,
                                                digest=digest,
                                                factories_pending=_FACTORY_RETURN.search(text) is not None,
                                                records_pending="NamedTuple" in text)
            except OSError:
                deps.add(("f", path, None))
            except (SyntaxError, ValueError, UnicodeError, LookupError, RecursionError, MemoryError):
                model = None
        self._deps[path] = frozenset(deps)
        self._note(deps)
        self._keep(path, model)
        return model

    def _summary(self, tree: ast.Module, path: str, candidates: frozenset):
        """The summary of a module that may export a compiled callable: from a shallow model of
        its tree (module and class level only); the one place :meth:`model` and :meth:`offer`
        make it."""
        from .model import ModuleSummary, build_model

        return ModuleSummary(build_model(tree, path=path, project=self, shallow=True), candidates)

    def _keep(self, path: str, model) -> None:
        self._models[path] = model
        while len(self._models) > MAX_MODELS:
            old, _ = self._models.popitem(last=False)
            self._deps.pop(old, None)

    def offer(self, path: str, tree: ast.Module, text: str, digest: Optional[str] = None) -> None:
        """Summarize a large module being checked from its tree, while it is at hand, so that a module
        checked later that imports it need not parse it again (5% of a ``-j1`` check of the pinned jax
        corpus): the summary :meth:`model` builds, only for a module that may export a compiled callable.
        ``digest``: the content hash of the file's bytes, for the result cache."""
        if len(text) < OFFER_CHARS:
            return
        path = self._abspath(path)
        if path in self._models or not path.endswith(".py") or not _may_export_compiled(text, path):
            return
        self._models[path] = None
        deps: set = {("f", path, digest)}
        recorders, self._recorders = self._recorders, [deps]  # what it consults is its own, not the check's
        self.depth += 1
        try:
            model = self._summary(tree, path, array_candidates(text))
            model.digest = digest
        except RecursionError:
            model = None
        finally:
            self.depth -= 1
            self._recorders = recorders
        self._deps[path] = frozenset(deps)
        self._keep(path, model)

    def array_results(self, path: str, digest: str, names: frozenset) -> frozenset:
        """Which of ``names`` (top-level functions of the project file ``path``) certainly return
        a JAX array, for a summary that left them to be judged on demand (:meth:`_on_demand`)."""
        from .model.facts import returnkinds

        return self._on_demand(path, digest, lambda model: returnkinds.array_results(model, names), frozenset())

    def factories(self, path: str, digest: str) -> dict:
        """The factories of compiled callables of the project file ``path`` (see
        :func:`~jaxlint.model.summary.factories_of`), for a summary that left them to be read on
        demand (:meth:`_on_demand`)."""
        from .model.facts.summary import factories_of

        return self._on_demand(path, digest, factories_of, {}, shallow=False)

    def tuple_factories(self, path: str, digest: str) -> dict:
        """:func:`~jaxlint.model.facts.summary.tuple_factories_of` of the project file ``path``, from
        a full model (the function bodies bind what they return), when first asked."""
        from .model.facts.summary import tuple_factories_of

        return self._on_demand(path, digest, tuple_factories_of, {}, shallow=False)

    def records(self, path: str, digest: str) -> frozenset:
        """The record classes (``NamedTuple``) of the project file ``path``, for a summary that left
        them to be read on demand (:meth:`_on_demand`)."""
        from .model.facts.namedtuples import record_classes_of

        return self._on_demand(path, digest, record_classes_of, frozenset())

    def dispatching_methods(self, path: str, digest: str) -> dict:
        """``{class: methods}`` of the project file ``path`` whose methods end in unwaited JAX work
        (:func:`~jaxlint.model.facts.timing.dispatching_methods_of`), from a full model of the file
        (method bodies are needed), built only when a timed region calls such a method."""
        from .model.facts.timing import dispatching_methods_of

        return self._on_demand(path, digest, dispatching_methods_of, {}, shallow=False)

    def _on_demand(self, path: str, digest: str, ask, default, shallow: bool = True):
        """``ask`` of a shallow model of the project file ``path`` (a full one with ``shallow``
        false), read again for a question its summary left open: the file must still have the
        content ``digest`` (else ``default``). What that consults is added to what the file's
        summary depends on, for the result cache."""
        found = default
        with self.recording() as deps:
            try:
                from .model import build_model

                with open(path, "rb") as fh:
                    data = fh.read()
                if content_hash(data) == digest:
                    tree = ast.parse(decode_source(data), filename=path)
                    model = build_model(tree, path=path, project=self, shallow=shallow)
                    try:
                        found = ask(model)
                    finally:
                        model.dispose()
            except (OSError, SyntaxError, ValueError, UnicodeError, LookupError, RecursionError, MemoryError):
                found = default
        if path in self._deps:
            self._deps[path] = self._deps[path] | deps
        self._note(deps)
        return found

    def answer(self, path: str, key: tuple, ask, default, needles: tuple = ()):
        """``ask`` of a full model of the project file ``path``, memoized per process by ``key`` (as
        :meth:`runs_program`); ``default``, with no model built, for a file that spells none of the
        byte strings ``needles`` (what the question needs to find there)."""
        data = self._bytes(path) if needles else None
        if data is not None and not any(n in data for n in needles):
            self._note([("f", self._abspath(path), content_hash(data))])
            return default
        return self._full_answer(path, key, ask, default)

    def read(self, path: str) -> Optional[bytes]:
        """A project file's bytes (None: unreadable), recorded for the result cache as read."""
        data = self._bytes(path)
        if data is not None:
            self._note([("f", self._abspath(path), content_hash(data))])
        return data

    def _bytes(self, path: str) -> Optional[bytes]:
        """A project file's bytes, read once per process (None: unreadable)."""
        path = self._abspath(path)
        if path not in self._file_bytes:
            try:
                with open(path, "rb") as fh:
                    self._file_bytes[path] = fh.read()
            except OSError:
                self._file_bytes[path] = None
        return self._file_bytes[path]

    def _full_answer(self, path: str, key: tuple, ask, default):
        """``ask`` of a full model of the project file ``path``, memoized per process by ``key``; the last
        few full models are kept (:data:`FULL_MODELS`): one file is asked many questions in a row."""
        path = self._abspath(path)
        memo = self._programs
        key = (path, *key)
        if key in memo:
            if self._recorders:
                self._note(memo[key][1])
            return memo[key][0]
        memo[key] = (default, frozenset())  # a cycle of lookups sees the default meanwhile
        found = default
        self.depth += 1
        with self.recording() as deps:
            try:
                kept = self._full_models.pop(path, None)
                with open(path, "rb") as fh:
                    data = fh.read()
                if kept is not None and kept[0] == content_hash(data):
                    digest, model, built = kept
                    deps.update(built)
                else:
                    from .model import build_model

                    digest = content_hash(data)
                    with self.recording() as built:
                        model = build_model(ast.parse(decode_source(data), filename=path), path=path, project=self)
                    deps.update(built)
                    built = frozenset(built)
                deps.add(("f", path, digest))
                self._full_models[path] = (digest, model, built)
                while len(self._full_models) > FULL_MODELS:
                    self._full_models.popitem(last=False)[1][1].dispose()
                found = ask(model)
            except (OSError, SyntaxError, ValueError, UnicodeError, LookupError, RecursionError, MemoryError):
                found = default
            finally:
                self.depth -= 1
        memo[key] = (found, frozenset(deps))
        self._note(deps)
        return found

    def repository_files(self, path: str) -> Optional[list]:
        """``_project_texts`` (every kind) of the repository around ``path``; None outside one."""
        return None if (root := _repository_root(self._abspath(path))) is None else self._project_texts(root, True)

    def _project_texts(self, root: str, every_kind: bool = False) -> list:
        """``(path, bytes)`` of the project's ``.py`` files (``every_kind``: also notebooks, pyproject.toml
        and setup.cfg, which may name an entry point), read once per process and root (at most
        MAX_PROJECT_FILES files, virtualenvs and build folders skipped)."""
        files = self._project_listing.get(root)
        if files is None:
            files = []
            for folder, dirs, names in os.walk(root):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS
                                 and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg")))
                for n in sorted(names):
                    if n.endswith(_PROJECT_KINDS) and len(files) < MAX_PROJECT_FILES:
                        full = os.path.abspath(os.path.join(folder, n))
                        try:
                            with open(full, "rb") as fh:
                                files.append((full, fh.read()))
                        except OSError:
                            continue
            self._project_listing[root] = (files, [f for f in files if f[0].endswith(".py")])
            files = self._project_listing[root]
        return files[0] if every_kind else files[1]

    def mentioned_elsewhere(self, path: str, name: str, spells=None) -> Optional[bool]:
        """Whether a file of the repository around ``path`` other than it spells ``name`` as a word
        (code, comments, a notebook, an entry point); None in no repository (no ``.git``/``.hg``
        above it): what else may refer to it is not known. :mod:`.model.python.unreferenced` asks it.
        The files that spell it are recorded for the result cache, as :meth:`loop_caller` does.
        ``spells(file, text, name, path, files)``: whether a file that spells it refers to it (a method's)."""
        from .model.python.unreferenced import not_only_imported as _not_only_imported

        path = self._abspath(path)
        root = _repository_root(path)
        if root is None:
            return None
        word = re.compile(rb"(?<![A-Za-z0-9_])" + re.escape(name.encode()) + rb"(?![A-Za-z0-9_])")
        needle = name.encode()
        texts = self._project_texts(root, every_kind=True)
        for other, data in texts:
            if other != path and needle in data and word.search(data):
                self._note([("f", other, content_hash(data))])
                if other.endswith(".ipynb"):
                    module = self._notebook_module(other, data)
                    data = module.text.encode() if module is not None else None
                if data is None or (spells or _not_only_imported)(other, data, name, path, texts):
                    return True
        return False

    def imported(self, from_path: str, module: Optional[str], name: Optional[str], level: int):
        """What an import binds: ``(model, None)`` for a module of the project, ``(model, name)``
        for a name defined in one, or None."""
        if self.depth >= MAX_DEPTH:
            return None
        if name is not None:
            sub = f"{module}.{name}" if module else name
            path = self.locate(from_path, sub, level)
            if path is not None:
                return self._enter(path, None)
        path = self.locate(from_path, module, level)
        if path is None or self._abspath(path) == self._abspath(from_path):
            return None
        return self._enter(path, name)

    def _enter(self, path: str, name: Optional[str]):
        self.depth += 1
        try:
            model = self.model(path)
        finally:
            self.depth -= 1
        return (model, name) if model is not None else None


# A module-level decorator or assignment that mentions a compiling transform. Only such modules
# (and package __init__ files, for their re-exports) can export a jitted or transformed callable.
# The line's start is matched as the text's start or a newline, not as ``^`` with re.MULTILINE:
# the regex engine tries ``^`` at every character, but finds a literal newline at C speed (3.5x
# faster on the pinned corpus, with the same answer for each of its 1,192 files).
_EXPORT_LINE = r"(?:@|[A-Za-z_][\w, ]*=)[^\n]*\b(?:jit|pmap|vmap|grad|value_and_grad|checkpoint|remat|shard_map|filter_\w+)\b"
_COMPILED_EXPORT_FIRST = re.compile(_EXPORT_LINE)
_COMPILED_EXPORT = re.compile("\n" + _EXPORT_LINE)
# ``return jax.jit(...)``/``return pmap(...)``, or a nested def decorated with one (``@nnx.jit``
# ``def train_step(...)`` returned by name): a factory of a compiled callable, read on demand from a
# full model of the file (``ProjectResolver.factories``: summaries skip function bodies).
_FACTORY_RETURN = re.compile(r"\n[ \t]+(?:return[ \t]+[\w.]*\b(?:jit|pmap|filter_jit|filter_pmap)\(|@[^\n]*\b(?:jit|pmap|filter_jit|filter_pmap)\b)")


def _may_export_compiled(text: str, path: str) -> bool:
    """Whether a module can define or re-export a jitted or transformed callable at module level;
    most modules of a large project cannot, and skipping their parse is most of the cost of
    cross-module lookups. (A module whose functions may return one, ``return jax.jit(step)``, is
    parsed when another module first asks for such a factory: ``ProjectResolver.factories``.)"""
    return (path.endswith("__init__.py") or _COMPILED_EXPORT.search(text) is not None
            or _COMPILED_EXPORT_FIRST.match(text) is not None)


# A top-level def or class, a ``return`` of a JAX call (``return jnp.mean(...)``), and another name
# of jax.numpy (``import jax.numpy as np``). Each starts with a literal, for a fast scan.
_TOP_DEF = re.compile(r"\n(?:(?:async[ \t]+)?def[ \t]+(\w+)|class\b)")
_NUMPY_ALIAS = re.compile(r"jax\.numpy[ \t]+as[ \t]+(\w+)|jax[ \t]+import[ \t]+numpy[ \t]+as[ \t]+(\w+)")


@functools.lru_cache(maxsize=64)
def _array_return(aliases: tuple):
    return re.compile(r"return\b[^\n#]*?\b(?:%s)\." % "|".join(("jnp", "jax", "lax") + aliases))


def array_candidates(text: str) -> frozenset:
    """The top-level functions of a module that may return a JAX array, read from its text: a
    ``return`` line in the function's block mentions ``jnp.``, ``jax.``, ``lax.`` (or another name
    the module imports ``jax.numpy`` as). A cheap filter: only these are judged
    (:meth:`~jaxlint.model.ModuleModel.array_results`), and only they can make parsing a module
    that exports nothing compiled worth it."""
    if "return" not in text or "jax" not in text:
        return frozenset()
    aliases = tuple(sorted({a for pair in _NUMPY_ALIAS.findall(text) for a in pair if a and a != "jnp"}))
    returns = []
    for m in _array_return(aliases).finditer(text):
        pos = m.start()
        line = text.rfind("\n", 0, pos) + 1
        if line < pos and not text[line:pos].strip(" \t"):  # an indented ``return`` statement
            returns.append(pos)
    if not returns:
        return frozenset()
    marks = [(m.start(), m.group(1)) for m in _TOP_DEF.finditer(text)]
    first = re.match(r"(?:async[ \t]+)?def[ \t]+(\w+)", text)
    if first:
        marks.insert(0, (0, first.group(1)))
    starts = [pos for pos, _ in marks]
    out = set()
    for pos in returns:
        i = bisect.bisect(starts, pos) - 1
        if i >= 0 and marks[i][1]:
            out.add(marks[i][1])
    return frozenset(out)
