"""A project's declared requirements on JAX, read from its packaging files (never run).

For a checked file, the declaration is in the nearest folder at or above it that holds any of:
``pyproject.toml`` (``[project].dependencies``, ``[project.optional-dependencies]``,
``[dependency-groups]``, ``[tool.poetry.dependencies]``, poetry's dev-dependencies and groups),
``setup.cfg`` (``install_requires``, ``extras_require``), ``setup.py`` (``install_requires`` and
``extras_require`` as literals, read with ``ast``: a name bound once to a literal counts too),
``requirements*.txt`` and ``requirements/*.txt`` (``-r`` includes followed), ``environment*.yml``
(conda dependencies and its ``pip:`` list). The search stops at the first folder holding one of
them that may require ``jax`` (requirements and environment files that neither spell it nor include
another file are a folder's own extras: such a folder is the answer only when none above it may), or
a ``.git``, or the file system's root. Conda environment files one
folder below that one (``docker/environment_tpu.yaml``) are part of the declaration too: they are
how such a project says which environment it runs in.

This module reads the requirement texts for ``jax`` and ``jaxlib`` (:class:`Requirement`), and the
Python the project declares (``requires-python``, ``python_requires``, poetry's ``python``, conda's
``python=3.8``): each JAX release supports a range of Pythons, so an old Python caps JAX. What
versions they allow is the facts layer's (jaxlint/model/facts/jaxrange.py). A file it cannot read
for them (not TOML, a computed ``install_requires``) is a *problem*: the declaration is then
unknown. It imports nothing of the model: the result cache checks a declaration with
:func:`locate` and file hashes alone (``ProjectResolver.declaration`` records what a check read).
"""

from __future__ import annotations

import ast
import configparser
import os
import re
import sys
from typing import Optional

from .source import content_hash

NAMES = ("jax", "jaxlib")
PYTHON = "python"  # the Python a project declares (``requires-python``, conda's ``python=3.8``): JAX's own cap
_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "environment.yml", "environment.yaml")
_MAX_INCLUDES = 8  # ``-r`` files followed from one requirements file, transitively


class Requirement:
    """One requirement on ``name`` (jax or jaxlib): ``spec`` (the version specifier text, empty for
    any version), ``style`` ("pep440", "poetry" or "conda") and ``file`` (where, for evidence:
    ``cleanba/pyproject.toml``)."""

    __slots__ = ("name", "spec", "style", "file")

    def __init__(self, name: str, spec: str, style: str, file: str):
        self.name = name
        self.spec = spec
        self.style = style
        self.file = file

    def __repr__(self) -> str:
        return f"Requirement({self.name!r}, {self.spec!r}, {self.style!r}, {self.file!r})"


class Declaration:
    """The packaging files of one folder (``root``): ``files`` (their names, for evidence),
    ``requirements`` (on jax and jaxlib), ``problems`` (``(file, why)`` for each file that could not
    be read for them) and ``read`` (``(path, content hash)`` of every file read, for the cache)."""

    __slots__ = ("root", "files", "requirements", "problems", "read")

    def __init__(self, root: str):
        self.root = root
        self.files: list = []
        self.requirements: list = []
        self.problems: list = []
        self.read: list = []

    def newer_python(self, running: tuple = sys.version_info[:2]) -> Optional[Requirement]:
        """The requirement on Python that the running one is older than (``requires-python =
        ">=3.13"`` read on 3.11), or None: a file that does not parse here may be valid there."""
        for r in self.requirements:
            least = re.match(r"\s*(?:>=|\^|~=|==|>)?\s*3\.(\d+)", r.spec) if r.name == PYTHON else None
            if least is not None and int(least.group(1)) > running[1]:
                return r
        return None


class Finder:
    """Declarations found from folders, each folder listed once and each declaration read once
    (per run: :meth:`jaxlint.project.ProjectResolver.clear` makes a new one)."""

    def __init__(self) -> None:
        self._listings: dict = {}  # folder -> (file names, folder names)
        self._located: dict = {}  # folder -> (root or None, candidate paths)
        self._read: dict = {}  # root -> Declaration

    def _listing(self, folder: str) -> tuple:
        found = self._listings.get(folder)
        if found is None:
            files, dirs = set(), set()
            try:
                with os.scandir(folder) as entries:
                    for e in entries:
                        try:
                            (dirs if e.is_dir() else files).add(e.name)
                        except OSError:
                            continue
            except OSError:
                pass
            found = self._listings[folder] = (frozenset(files), frozenset(dirs))
        return found

    def locate(self, folder: str) -> tuple:
        """``(root, candidate paths)`` of the declaration for a file in ``folder`` (absolute);
        ``(None, ())`` when there is none."""
        hit = self._located.get(folder)
        if hit is not None:
            return hit
        path, walked, fallback = folder, [], None
        while True:
            walked.append(path)
            files, dirs = self._listing(path)
            found = [os.path.join(path, n) for n in sorted(files)
                     if n in _FILES or _requirements_name(n) or _environment_name(n)]
            if "requirements" in dirs:
                sub, _ = self._listing(os.path.join(path, "requirements"))
                found += [os.path.join(path, "requirements", n) for n in sorted(sub) if n.endswith(".txt")]
            if found:
                # conda environments the project keeps one folder down (``docker/environment_tpu.yaml``)
                for d in sorted(dirs):
                    if not d.startswith("."):
                        sub, _ = self._listing(os.path.join(path, d))
                        found += [os.path.join(path, d, n) for n in sorted(sub) if _environment_name(n)]
                hit = (path, tuple(found))
                parent = os.path.dirname(path)
                if any(_mentions_jax(p) for p in found) or ".git" in files or ".git" in dirs or parent == path:
                    break
                # a folder's own extras (``model_validation/requirements.txt``: hydra, wandb) beside the
                # project's JAX requirement above it (fresh AA's first look): the JAX one is asked
                fallback, hit = fallback or hit, None
                path = parent
                continue
            parent = os.path.dirname(path)
            if ".git" in files or ".git" in dirs or parent == path:
                hit = fallback or (None, ())
                break
            path = parent
        for p in walked:
            self._located[p] = hit
        return hit

    def declaration(self, folder: str) -> tuple:
        """``(declaration or None, the cache dependency)`` for a file in ``folder``."""
        folder = os.path.abspath(folder)
        root, candidates = self.locate(folder)
        if root is None:
            return None, ("d", folder, None, (), ())
        decl = self._read.get(root)
        if decl is None:
            decl = self._read[root] = read(root, candidates)
        return decl, ("d", folder, root, candidates, tuple(decl.read))


def _mentions_jax(path: str) -> bool:
    """Whether a packaging file may require ``jax``: it spells it, includes another file (``-r``,
    ``-c``), is a package's own metadata (``pyproject.toml``, ``setup.py``, ``setup.cfg``, which
    may read other files), or cannot be read. Only requirements and environment files that do
    none of these are a folder's own extras."""
    if os.path.basename(path) in ("pyproject.toml", "setup.py", "setup.cfg"):
        return True
    try:
        with open(path, "rb") as fh:
            data = fh.read().lower()
    except OSError:
        return True
    return b"jax" in data or re.search(rb"(?m)^\s*(?:-r|-c|--requirement|--constraint)\b", data) is not None


def _environment_name(name: str) -> bool:
    """A conda environment file: ``environment.yml``, ``environment_tpu.yaml``, ``environment-gpu.yml``."""
    return name.startswith("environment") and name.endswith((".yml", ".yaml"))


def _requirements_name(name: str) -> bool:
    return name.startswith("requirements") and name.endswith(".txt")


def still_holds(dep, finder: Finder, hash_of) -> bool:
    """Whether a recorded declaration dependency ``("d", folder, root, candidates, read)`` holds:
    the same files found from the folder, each read file with the same content hash."""
    _, folder, root, candidates, files = dep
    here = finder.locate(folder)
    if here[0] != root or list(here[1]) != list(candidates):
        return False
    return all(hash_of(path) == digest for path, digest in files)


# ------------------------------------------------------------------ reading


def read(root: str, candidates) -> Declaration:
    decl = Declaration(root)
    label = os.path.basename(root.rstrip(os.sep)) or root
    decl.files = [os.path.relpath(path, root) for path in candidates]
    for path, rel in zip(candidates, decl.files):
        shown = f"{label}/{rel}" if label != root else path
        data = _bytes(decl, path)
        if data is None:
            decl.problems.append((shown, "not readable"))
            continue
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            decl.problems.append((shown, "not UTF-8 text"))
            continue
        name = os.path.basename(path)
        try:
            if name == "pyproject.toml":
                _pyproject(decl, text, shown)
            elif name == "setup.cfg":
                _setup_cfg(decl, text, shown, root)
            elif name == "setup.py":
                _setup_py(decl, text, shown)
            elif _environment_name(name):
                _environment(decl, text, shown)
            else:
                _requirements(decl, text, shown, path, set())
        except _Unreadable as e:
            decl.problems.append((shown, str(e)))
    return decl


class _Unreadable(Exception):
    pass


def _bytes(decl: Declaration, path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        decl.read.append((path, None))
        return None
    decl.read.append((path, content_hash(data)))
    return data


_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(\[[^\]]*\])?\s*(.*)", re.S)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pep508(decl: Declaration, line: str, shown: str) -> None:
    """One PEP 508 requirement (``jax[cuda12]>=0.4.8; python_version < "3.11"``): kept when it names
    jax or jaxlib. A direct reference (``jax @ git+...``) allows any version."""
    m = _NAME.fullmatch(line)
    if m is None:
        return
    name = _canonical(m.group(1))
    if name not in NAMES:
        return
    rest = m.group(3).split(";", 1)[0].strip()  # markers select among the requirements: all are kept
    decl.requirements.append(Requirement(name, "" if rest.startswith("@") else rest, "pep440", shown))


def _python(decl: Declaration, spec, style: str, shown: str) -> None:
    """A declared Python version (a string; anything else, a computed value, is no declaration)."""
    if isinstance(spec, str) and spec.strip():
        decl.requirements.append(Requirement(PYTHON, spec.strip(), style, shown))


def _toml_tables(text: str, shown: str) -> dict:
    from .config import _toml

    tomllib = _toml()
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _Unreadable(f"invalid TOML: {e}") from None


def _strings(value, what: str) -> list:
    if not isinstance(value, list) or not all(isinstance(v, (str, dict)) for v in value):
        raise _Unreadable(f"{what} is not a list of requirements")
    return [v for v in value if isinstance(v, str)]  # a dict: PEP 735's {include-group = ...}


def _pyproject(decl: Declaration, text: str, shown: str) -> None:
    data = _toml_tables(text, shown)
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    for line in _strings(project.get("dependencies", []), "[project].dependencies"):
        _pep508(decl, line, shown)
    _python(decl, project.get("requires-python"), "pep440", shown)
    extras = project.get("optional-dependencies", {})
    groups = data.get("dependency-groups", {})
    for what, table in (("[project.optional-dependencies]", extras), ("[dependency-groups]", groups)):
        if not isinstance(table, dict):
            raise _Unreadable(f"{what} is not a table")
        for key, lines in table.items():
            for line in _strings(lines, f"{what} {key}"):
                _pep508(decl, line, shown)
    poetry = data.get("tool", {}).get("poetry") if isinstance(data.get("tool"), dict) else None
    if not isinstance(poetry, dict):
        return
    tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    group = poetry.get("group")
    if isinstance(group, dict):
        tables += [g.get("dependencies") for g in group.values() if isinstance(g, dict)]
    for table in tables:
        if table is None:
            continue
        if not isinstance(table, dict):
            raise _Unreadable("a poetry dependency table is not a table")
        for key, value in table.items():
            name = _canonical(key)
            if name == PYTHON:
                _python(decl, value, "poetry", shown)
            if name not in NAMES:
                continue
            for one in value if isinstance(value, list) else [value]:  # several constraints, by marker
                if isinstance(one, dict):
                    one = one.get("version", "")  # git, path or url: any version
                if not isinstance(one, str):
                    raise _Unreadable(f"poetry's {key} is neither a version nor a table")
                decl.requirements.append(Requirement(name, one, "poetry", shown))


def _setup_cfg(decl: Declaration, text: str, shown: str, root: str) -> None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as e:
        raise _Unreadable(f"not an INI file: {type(e).__name__}") from None
    if parser.has_option("options", "python_requires"):
        _python(decl, parser.get("options", "python_requires"), "pep440", shown)
    values = []
    if parser.has_option("options", "install_requires"):
        values.append(parser.get("options", "install_requires"))
    if parser.has_section("options.extras_require"):
        values += [parser.get("options.extras_require", k) for k in parser.options("options.extras_require")]
    for value in values:
        value = value.strip()
        if value.startswith("file:"):  # install_requires = file: requirements.txt
            for name in value[5:].split(","):
                path = os.path.join(root, name.strip())
                data = _bytes(decl, path)
                if data is None:
                    raise _Unreadable(f"`{value}` names a file that cannot be read")
                _requirements(decl, data.decode("utf-8", "replace"), shown, path, set())
            continue
        for line in value.splitlines():
            _pep508(decl, line, shown)


def _literal(node, assigned: dict):
    """A literal list or dict, or a name bound once at module level to one; None otherwise."""
    if isinstance(node, ast.Name):
        node = assigned.get(node.id)
        if node is None:
            return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _setup_py(decl: Declaration, text: str, shown: str) -> None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise _Unreadable("not Python that parses") from None
    assigned: dict = {}
    counts: dict = {}
    for st in tree.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            counts[st.targets[0].id] = counts.get(st.targets[0].id, 0) + 1
            assigned[st.targets[0].id] = st.value
    assigned = {k: v for k, v in assigned.items() if counts[k] == 1}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and (getattr(node.func, "id", None) == "setup"
                                                or getattr(node.func, "attr", None) == "setup")):
            continue
        if any(kw.arg is None for kw in node.keywords):
            raise _Unreadable("setup() takes **keywords: its requirements are computed")
        for kw in node.keywords:
            if kw.arg == "python_requires":
                _python(decl, _literal(kw.value, assigned), "pep440", shown)
            if kw.arg not in ("install_requires", "extras_require"):
                continue
            value = _literal(kw.value, assigned)
            lists = list(value.values()) if isinstance(value, dict) else [value]
            for lst in lists:
                if isinstance(lst, str):
                    lst = lst.splitlines()
                if not isinstance(lst, (list, tuple)) or not all(isinstance(x, str) for x in lst):
                    if _reads_requirement_files(kw.value, assigned, decl.files):
                        break  # read_requirements("requirements.txt"): that file is read anyway
                    raise _Unreadable(f"{kw.arg} is computed, not a literal list")
                for line in lst:
                    _pep508(decl, line, shown)


def _reads_requirement_files(value, assigned: dict, files: list) -> bool:
    """Whether a computed ``install_requires`` names only requirement files the declaration reads
    itself: every ``.txt`` string in it (``_parse_requirements("requirements/requirements.txt")``)
    is the path of one of them, or the name of exactly one, and there is at least one."""
    if isinstance(value, ast.Name) and value.id in assigned:
        value = assigned[value.id]
    names = [n.value for n in ast.walk(value) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and n.value.endswith(".txt")]
    if not names:
        return False
    posix = [f.replace(os.sep, "/") for f in files]
    return all(n.lstrip("./") in posix or sum(f.rsplit("/", 1)[-1] == n for f in posix) == 1 for n in names)


def _requirements(decl: Declaration, text: str, shown: str, path: str, seen: set) -> None:
    seen.add(os.path.abspath(path))
    text = re.sub(r"\\\r?\n", " ", text)
    for raw in text.splitlines():
        line = re.split(r"(?:^|\s)#", raw, maxsplit=1)[0].strip()
        if not line:
            continue
        m = re.match(r"(?:-r|--requirement)(?:\s+|=)(\S+)", line)
        if m is not None:
            inc = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
            if inc not in seen and len(seen) <= _MAX_INCLUDES:
                data = _bytes(decl, inc)
                if data is None:
                    raise _Unreadable(f"`{line}` names a file that cannot be read")
                _requirements(decl, data.decode("utf-8", "replace"), shown, inc, seen)
            continue
        if line.startswith("-"):  # -c constraints, --find-links, -e: not a requirement on jax's version
            continue
        _pep508(decl, re.split(r"\s+--?[a-z]", line, maxsplit=1)[0], shown)


def _environment(decl: Declaration, text: str, shown: str) -> None:
    """conda's environment.yml, read by its lines: the items of ``dependencies:`` (conda match specs)
    and of its ``- pip:`` list (PEP 508)."""
    in_deps, pip_indent = False, None
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0 and not (in_deps and line.startswith("-")):  # YAML lets a list's items sit at its key's column
            in_deps = line.strip() == "dependencies:"
            pip_indent = None
            continue
        if not in_deps:
            continue
        item = line.strip()
        if not item.startswith("-"):
            continue
        item = item[1:].strip().strip("'\"")
        if pip_indent is not None and indent <= pip_indent:
            pip_indent = None
        if item in ("pip:", "\"pip\":"):
            pip_indent = indent
        elif pip_indent is not None:
            _pep508(decl, item, shown)
        else:
            _conda(decl, item, shown)


def _conda(decl: Declaration, item: str, shown: str) -> None:
    item = item.split("::", 1)[-1]  # conda-forge::jax=0.4.8
    m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)", item)
    if m is None or _canonical(m.group(1)) not in NAMES + (PYTHON,):
        return
    rest = m.group(2).strip()
    parts = rest.split()
    if len(parts) >= 2 and not re.match(r"[<>=!~]", parts[1]):
        rest = parts[0]  # ``jax 0.4.8 py_0``: the version, then a build string
    exact = re.fullmatch(r"(==?)([^=\s,|]+)=[^=\s,|]+", rest)
    if exact is not None:
        rest = exact.group(1) + exact.group(2)  # ``jax=0.3.14=pyhd8ed1ab_1`` (conda env export): the build string
    decl.requirements.append(Requirement(_canonical(m.group(1)), rest, "conda", shown))
