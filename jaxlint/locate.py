"""Where an import's module file is: the folder searches of :mod:`jaxlint.project`, without
reading any file (``mod.py`` or ``mod/__init__.py`` next to the importing file, at its package's
root, or in a ``src/`` folder above it), with each folder's listing read once."""

from __future__ import annotations

import os
from typing import Optional


class FileListing:
    """``os.path.isfile`` answered from one read of each directory, remembered: locating one
    import asks for up to eight candidate files (``mod.py``, ``mod/__init__.py``, next to the file
    and at the package root), nearly all in folders that do not exist, and a check asks for
    thousands. Names match exactly, as Python's import system matches them, also where the file
    system ignores case."""

    __slots__ = ("_dirs",)

    def __init__(self) -> None:
        self._dirs: dict = {}  # folder -> names of the regular files in it (symlinks followed)

    def isfile(self, path: str) -> bool:
        folder, name = os.path.split(path)
        names = self._dirs.get(folder)
        if names is None:
            if len(self._dirs) > 50_000:
                self._dirs.clear()
            try:
                with os.scandir(folder or ".") as entries:
                    names = frozenset(e.name for e in entries if _is_file(e))
            except OSError:  # no such folder (the usual case), or unreadable
                names = frozenset()
            self._dirs[folder] = names
        return name in names


def _is_file(entry) -> bool:
    try:
        return entry.is_file()
    except OSError:  # a broken link, or one that cannot be followed
        return False


if os.sep == "/" and os.altsep is None:
    def _join(base: str, *parts: str) -> str:
        """``os.path.join`` for a base folder and module name parts (none empty or absolute): the
        same string, without its per-part checks (the result cache verifies thousands of imports)."""
        return (base if base.endswith("/") else base + "/") + "/".join(parts)
else:  # pragma: no cover - Windows
    _join = os.path.join


def _module_file(base: str, parts: list, isfile=os.path.isfile) -> Optional[str]:
    if not parts:
        init = _join(base, "__init__.py")
        return init if isfile(init) else None
    path = _join(base, *parts)
    if isfile(path + ".py"):
        return path + ".py"
    init = path + "/__init__.py" if _join is not os.path.join else os.path.join(path, "__init__.py")
    return init if isfile(init) else None


def locate_from(here: str, module: Optional[str], level: int, isfile=os.path.isfile) -> Optional[str]:
    """The file an import of ``module`` (with ``level`` leading dots) names, seen from the
    absolute folder ``here``; None when it is not a file of the project. ``isfile`` may be a
    memoized ``os.path.isfile`` when many lookups are checked at once (the result cache)."""
    parts = module.split(".") if module else []
    if level > 0:
        base = here
        for _ in range(level - 1):
            base = os.path.dirname(base)
        return _module_file(base, parts, isfile)
    if not parts:
        return None
    top = here
    while isfile(_join(top, "__init__.py")):
        top = os.path.dirname(top)
    for root in dict.fromkeys((here, top)):
        found = _module_file(root, parts, isfile)
        if found is not None:
            return found
    # a namespace package (PEP 420, no ``__init__.py``): ``import scenic.projects.x.evaluate``
    # seen from .../scenic/projects/x/ is rooted above the folder named like its first part
    folder = here
    while True:
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        if os.path.basename(folder) == parts[0] and parent not in (here, top):
            found = _module_file(parent, parts, isfile)
            if found is not None:
                return found
            break  # a repository folder named like its package (``octo/octo/``): the layouts below
        folder = parent
    return _src_layout(here, parts, isfile) or _flat_layout(here, parts, isfile) or _subproject(here, parts, isfile)


def _subproject(here: str, parts: list, isfile) -> Optional[str]:
    """A package the repository holds as a sub-project named like it (``serl_launcher/`` with its
    ``setup.py`` and its package ``serl_launcher/serl_launcher/``, installed with ``pip install -e
    serl_launcher``): ``from serl_launcher.utils import Timer`` in ``examples/`` runs that file.
    The repository is the nearest folder above ``here`` with ``.git`` or ``.hg``."""
    root = _repository(here)
    if root is None:
        return None
    sub = _join(root, parts[0])
    if not isfile(_join(sub, parts[0], "__init__.py")) or not any(
            isfile(_join(sub, marker)) for marker in ("pyproject.toml", "setup.py", "setup.cfg")):
        return None
    return _module_file(sub, parts, isfile)


_REPOSITORIES: dict = {}  # folder -> the nearest folder at or above it with .git or .hg (this process's)


def _repository(here: str) -> Optional[str]:
    if here not in _REPOSITORIES:
        if len(_REPOSITORIES) > 50_000:
            _REPOSITORIES.clear()
        _REPOSITORIES[here] = nearest_with(here, (".git", ".hg"))
    return _REPOSITORIES[here]


def _flat_layout(here: str, parts: list, isfile) -> Optional[str]:
    """The project's own package beside the script's folder: ``from octo.utils import Timer`` in
    ``scripts/train.py`` of a project whose package is ``octo/`` at its root (installed from the
    project, ``pip install -e .``, so the import runs that file). The root is the nearest folder
    above ``here`` with ``pyproject.toml``, ``setup.py`` or ``setup.cfg``; the module is looked up
    there only when the first part is a package folder of it, or, for a namespace package (a folder
    without ``__init__.py``, fresh set M's minformer), when a module inside that folder is named."""
    root = _packaging_root(here)
    if root is None or root == here:
        return None
    if not isfile(_join(root, parts[0], "__init__.py")) and len(parts) < 2:
        return None  # a namespace package (no ``__init__.py``) only by a module inside it: ``minformer.model``
    return _module_file(root, parts, isfile)


_PACKAGING_ROOTS: dict = {}  # folder -> the nearest folder at or above it with packaging metadata (this process's)


def _packaging_root(here: str) -> Optional[str]:
    if here not in _PACKAGING_ROOTS:
        if len(_PACKAGING_ROOTS) > 50_000:
            _PACKAGING_ROOTS.clear()
        _PACKAGING_ROOTS[here] = nearest_with(here, ("pyproject.toml", "setup.py", "setup.cfg"))
    return _PACKAGING_ROOTS[here]


def _src_layout(here: str, parts: list, isfile) -> Optional[str]:
    """The project's own package in a src layout: ``from rejax.evaluate import evaluate`` in
    ``examples/`` of a project whose package is ``src/rejax/`` (installed from the project, so the
    import runs that file). The nearest folder above ``here`` (``here`` included) whose ``src/``
    holds the module's first part as a package folder or module file."""
    for src in _src_folders(here):
        found = _module_file(src, parts, isfile)
        if found is None and len(parts) > 1 and isfile(_join(src, parts[0], "__init__.py")):
            return None  # the package is there, without this module: nothing further up
        if found is not None:
            return found
    return None


_SRC_FOLDERS: dict = {}  # folder -> the ``src`` folders at or above it, nearest first (this process's)


def _src_folders(here: str) -> tuple:
    """The ``src`` folders of ``here`` and the folders above it, nearest first. Most imports are of
    other packages and reach this search; asking each folder once per process (not once per
    import) keeps the result cache's check of a warm run cheap."""
    found = _SRC_FOLDERS.get(here)
    if found is None:
        parent = os.path.dirname(here)
        above = _src_folders(parent) if parent != here else ()
        src = _join(here, "src")
        found = ((src,) + above) if os.path.isdir(src) else above
        if len(_SRC_FOLDERS) > 50_000:
            _SRC_FOLDERS.clear()
        _SRC_FOLDERS[here] = found
    return found


def nearest_with(start: str, markers: tuple) -> Optional[str]:
    """The nearest folder at or above the folder ``start`` holding one of ``markers`` (files or
    folders: ``pyproject.toml``, ``.git``); None when there is none up to the file system's root."""
    path = start
    while True:
        if any(os.path.exists(os.path.join(path, m)) for m in markers):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _project_root(path: str) -> str:
    """The folder above the top package of ``path`` (its folder when it is in no package)."""
    folder = os.path.dirname(path)
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder
