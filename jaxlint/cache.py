"""The result cache of ``jaxlint check``: unchanged files are not checked again.

A file's cached findings are reused only when all of these still hold:

* the file's bytes hash to the same value (content, not modification time: but a file whose size
  and modification time in ns are those recorded when it was last hashed is not read again, when
  that modification time was at least ``SETTLED_S`` seconds before the run that recorded it, so
  a write racing that run is never taken for the content it hashed);
* the settings are the same: jaxlint's version and its own source files, the Python
  version, and the selected rules (one cache file per combination, so switching back
  and forth stays warm);
* every cross-module lookup the check made resolves to the same file, and every module
  it read (transitively) still has the same content hash;
* where the check read the project's declared JAX version (JAX404, jaxlint/declaration.py), the
  same packaging files are found from the file's folder, with the same content hashes.

The cache is one JSON file per settings combination under ``.jaxlint_cache/`` at the project
root (outside any project, in the user's cache folder: :func:`default_folder`), written atomically (a temporary file, then ``os.replace``). A missing, corrupted,
foreign or concurrently replaced cache is treated as empty and rebuilt; a damaged entry is a
miss. Results with internal errors are never cached, so they are reported every run.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from typing import Optional, Sequence

from . import __version__
from .declaration import Finder
from .declaration import still_holds as declaration_holds
from .locate import FileListing, locate_from, nearest_with
from .rule import Finding
from .source import FileResult, content_hash

# 2: findings also keep a notebook finding's cell and cell_line; 3: and opt_in; 4: stats; 5: evidence;
# 6: not_analyzed (a file over the size limit is no longer a JAX000 finding); 7: each finding's facts;
# 8: a dependency on the project's declared JAX version ("d")
FORMAT = 8
DIRNAME = ".jaxlint_cache"
SETTLED_S = 2  # a file modified less than this before a run gets no stat record from that run


ROOT_MARKERS = ("pyproject.toml", "setup.cfg", ".git")


def find_project_root(start: str) -> Optional[str]:
    """The nearest folder at or above ``start`` holding a pyproject.toml, setup.cfg or .git; None
    when there is none up to the file system's root."""
    path = os.path.abspath(start)
    return nearest_with(path if os.path.isdir(path) else os.path.dirname(path), ROOT_MARKERS)


def project_root(start: str) -> str:
    """:func:`find_project_root`, else the cwd (the root SARIF paths are relative to)."""
    return find_project_root(start) or os.getcwd()


def user_cache_dir() -> str:
    """jaxlint's folder in the user's cache directory: ``$XDG_CACHE_HOME/jaxlint`` (an absolute
    path, as the XDG spec requires; else ``~/.cache/jaxlint``), ``~/Library/Caches/jaxlint`` on
    macOS, ``%LOCALAPPDATA%\\jaxlint`` on Windows."""
    home = os.path.expanduser("~")
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
    elif sys.platform == "darwin":
        base = os.path.join(home, "Library", "Caches")
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        base = xdg if os.path.isabs(xdg) else os.path.join(home, ".cache")
    return os.path.join(base, "jaxlint")


def default_folder(start: str) -> str:
    """Where ``jaxlint check`` keeps its results when no ``--cache-dir`` is given: ``.jaxlint_cache``
    at the project root of ``start``; outside any project (a script in a home or download folder),
    not in whatever folder the user stands in but in the user's cache directory, one folder per
    checked folder (named by a hash of its absolute path)."""
    root = find_project_root(start)
    if root is not None:
        return os.path.join(root, DIRNAME)
    folder = os.path.abspath(start)
    if not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    name = hashlib.blake2b(folder.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()
    return os.path.join(user_cache_dir(), "folders", name)


def _own_sources() -> list:
    """(folder, name, size, mtime) of the modules the static check runs (jaxlint/ and its
    subpackages but trace/, which only the dynamic mode imports, and jaxlint_rules/): a changed
    rule or model module invalidates the cache even when the version number did not move (a
    development checkout)."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    out = []
    for top in (here, os.path.join(root, "jaxlint_rules")):
        for folder, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not (folder == here and d == "trace"))
            for n in sorted(names):
                if not n.endswith(".py"):
                    continue
                try:
                    st = os.stat(os.path.join(folder, n))
                except OSError:
                    continue
                out.append([os.path.relpath(folder, root), n, st.st_size, st.st_mtime_ns])
    return out


def settings_key(codes: Sequence[str], noqa: bool = True) -> str:
    from . import conventions, jaxversion  # a project's conventions and jax-version change what is found

    blob = json.dumps([FORMAT, __version__, sys.version_info[:2], sorted(codes), noqa, _own_sources(),
                       conventions.active().changed(), jaxversion.active()])
    return hashlib.blake2b(blob.encode(), digest_size=12).hexdigest()


class ResultCache:
    def __init__(self, folder: str, key: str):
        self.folder = folder
        self.key = key
        self.file = os.path.join(folder, f"results-{key}.json")
        self.entries: dict = {}
        self.stats: dict = {}  # path -> [size, mtime_ns, content hash], for files that had settled
        self.dirty = False
        self._settled_before = time.time_ns() - SETTLED_S * 1_000_000_000
        self._hashes: dict = {}  # path -> content hash (None: unreadable), memo for this run
        self._located: dict = {}
        self._listing = FileListing()  # isfile, from one directory read per folder for this run
        self._declarations = Finder()  # the packaging files found from each folder, for this run
        self.hits = 0
        self._load()

    def _load(self) -> None:
        try:
            with open(self.file, "rb") as fh:
                data = json.load(fh)
            if data.get("format") == FORMAT and data.get("key") == self.key and isinstance(data.get("entries"), dict):
                self.entries = data["entries"]
                stats = data.get("stats")
                self.stats = stats if isinstance(stats, dict) else {}
        except (OSError, ValueError, AttributeError, TypeError):
            self.entries, self.stats = {}, {}

    # -- lookups ---------------------------------------------------------------
    def _hash_of(self, path: str) -> Optional[str]:
        if path not in self._hashes:
            try:
                st = os.stat(path)
                rec = self.stats.get(path)
                if (isinstance(rec, list) and len(rec) == 3 and rec[0] == st.st_size and rec[1] == st.st_mtime_ns
                        and isinstance(rec[2], str)):
                    self._hashes[path] = rec[2]  # unchanged since it was hashed: not read again
                else:
                    with open(path, "rb") as fh:
                        self._hashes[path] = digest = content_hash(fh.read())
                    self._record_stat(path, st, digest)
            except OSError:
                self._hashes[path] = None
        return self._hashes[path]

    def _record_stat(self, path: str, st, digest: str) -> None:
        """Remember ``digest`` for the file's size and modification time, if it had settled."""
        if st.st_mtime_ns < self._settled_before:
            self.stats[path] = [st.st_size, st.st_mtime_ns, digest]
            self.dirty = True
        elif self.stats.pop(path, None) is not None:
            self.dirty = True

    def _deps_hold(self, deps: list) -> bool:
        for dep in deps:
            if dep[0] == "f":
                if self._hash_of(dep[1]) != dep[2]:
                    return False
            elif dep[0] == "d":  # the JAX version a project declares (jaxlint/declaration.py)
                if not declaration_holds(dep, self._declarations, self._hash_of):
                    return False
            elif dep[0] == "q":
                key = (dep[1], dep[2], dep[3])
                if key not in self._located:
                    self._located[key] = locate_from(*key, isfile=self._listing.isfile)
                if self._located[key] != dep[4]:
                    return False
            else:
                return False
        return True

    def get(self, path: str) -> Optional[FileResult]:
        """The cached result for ``path`` if it is still valid, else None."""
        entry = self.entries.get(os.path.abspath(path))
        if entry is None:
            return None
        try:
            if self._hash_of(os.path.abspath(path)) != entry["hash"] or not self._deps_hold(entry["deps"]):
                return None
            result = FileResult(path)
            result.findings = [Finding(line, col, code, msg, name, path, cell, cell_line, opt_in=opt_in,
                                       evidence=tuple(evidence), facts=tuple(tuple(x) for x in facts))
                               for line, col, code, msg, name, cell, cell_line, opt_in, evidence, facts
                               in entry["findings"]]
            result.content_hash = entry["hash"]
            result.not_analyzed = entry.get("not_analyzed")
            result.cached = True
        except (KeyError, TypeError, ValueError, IndexError):
            return None
        self.hits += 1
        return result

    def put(self, result: FileResult) -> None:
        if result.internal_errors or result.content_hash is None:
            return
        path = os.path.abspath(result.path)
        try:  # stat after the check: a write since the run began is newer than _settled_before
            self._record_stat(path, os.stat(path), result.content_hash)
        except OSError:
            pass
        self.entries[path] = {
            "hash": result.content_hash,
            "deps": [list(d) for d in result.deps],
            "findings": [[f.line, f.col, f.code, f.message, f.name, f.cell, f.cell_line, f.opt_in, list(f.evidence),
                          [list(x) for x in f.facts]]
                         for f in result.findings],
        }
        if result.not_analyzed is not None:
            self.entries[path]["not_analyzed"] = result.not_analyzed
        self.dirty = True

    # -- writing ---------------------------------------------------------------
    def save(self) -> None:
        """Write atomically; a cache that cannot be written is skipped silently (it is only a cache)."""
        if not self.dirty:
            return
        try:
            os.makedirs(self.folder, exist_ok=True)
            ignore = os.path.join(self.folder, ".gitignore")
            if not os.path.exists(ignore):
                with open(ignore, "w") as fh:
                    fh.write("# created by jaxlint\n*\n")
            fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".tmp", dir=self.folder)
            try:
                with os.fdopen(fd, "w") as fh:
                    json.dump({"format": FORMAT, "key": self.key, "entries": self.entries, "stats": self.stats}, fh,
                              separators=(",", ":"))
                os.replace(tmp, self.file)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError:
            pass
