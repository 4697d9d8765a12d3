"""Which source files belong to the user, as opposed to libraries and JAX."""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Iterable, Optional

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the jaxlint package


def _library_dirs() -> list:
    dirs = {_HERE}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            p = sysconfig.get_paths().get(key)
        except Exception:  # pragma: no cover - broken sysconfig
            p = None
        if p:
            dirs.add(os.path.realpath(p))
    for name in ("jax", "jaxlib", "numpy"):
        mod = sys.modules.get(name)
        f = getattr(mod, "__file__", None)
        if f:
            dirs.add(os.path.dirname(os.path.realpath(f)))
    return [d.rstrip(os.sep) + os.sep for d in dirs]


def _installed_files(entry: str) -> frozenset:
    """The files (real paths) that the wheels installed directly into the folder ``entry`` list in
    their ``*.dist-info/RECORD``: a library put on ``sys.path`` outside site-packages
    (``pip install --target DIR`` with ``DIR`` on ``PYTHONPATH``). An editable install's
    ``RECORD`` lists its path hooks, not the project's own files, and a project checkout has no
    ``.dist-info`` of its own, so neither makes the user's code a library."""
    files = set()
    try:
        names = os.listdir(entry)
    except OSError:
        return frozenset()
    for name in names:
        if not name.endswith(".dist-info"):
            continue
        try:
            with open(os.path.join(entry, name, "RECORD"), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    rel = line.split(",", 1)[0].strip()
                    if rel.endswith(".py"):
                        files.add(os.path.realpath(os.path.join(entry, rel)))
        except OSError:
            continue
    return frozenset(files)


class UserFiles:
    """Answers "is this file the user's code?" with a per-filename cache.

    With ``roots``, a file is the user's when it lies under one of them; in
    every case files of the standard library, site-packages, JAX, NumPy and
    jaxlint itself are not. Without ``roots``, interactive input counts as user
    code: ``<stdin>``, IPython's cells (``<ipython-input-N-...>``) and
    ipykernel's (Jupyter: ``/tmp/ipykernel_*/....py``, an ordinary file outside
    the library folders); other ``<...>`` names (``<string>`` from dataclasses
    and ``exec``, ``<frozen ...>``) do not.
    """

    def __init__(self, roots: Optional[Iterable[str]] = None):
        self.roots = [os.path.realpath(r).rstrip(os.sep) + os.sep for r in roots] if roots else None
        self._libs = _library_dirs()
        self._cache: dict = {}
        self.not_user: set = set()  # the file names decided not to be user code (a quick test in walks)
        self._installed: dict = {}  # sys.path entry -> _installed_files(entry)
        self._lines: dict = {}  # id(code) -> (code, {instruction offset: line}): see line()

    def __call__(self, filename: str) -> bool:
        hit = self._cache.get(filename)
        if hit is None:
            hit = self._cache[filename] = self._decide(filename)
            if not hit:
                self.not_user.add(filename)
        return hit

    def line(self, frame) -> int:
        """``frame.f_lineno`` of a user frame, kept per code object and instruction: Python finds a
        line by scanning the code's line table up to the instruction, a cost that grows with the
        length of the function (a long ``main()`` with the step loop in it) and is paid per event."""
        code = frame.f_code
        kept = self._lines.get(id(code))
        if kept is None or kept[0] is not code:  # kept holds the code object: its id stays its own
            kept = self._lines[id(code)] = (code, {})
        offset = frame.f_lasti
        line = kept[1].get(offset)
        if line is None:
            line = kept[1][offset] = frame.f_lineno
        return line

    def _decide(self, filename: str) -> bool:
        if not filename:
            return False
        if filename.startswith("<"):  # interactive input and notebooks, not generated code
            return self.roots is None and filename.startswith(("<stdin>", "<ipython-input"))
        path = os.path.realpath(filename)
        parts = path.split(os.sep)
        if "site-packages" in parts or "dist-packages" in parts:
            return False
        if self.roots is not None:
            if not any(path.startswith(r) for r in self.roots):
                return False
            if path.startswith(_HERE + os.sep):
                return False
        elif any(path.startswith(d) for d in self._libs):
            return False
        return not self._installed_by_pip(path)

    def _installed_by_pip(self, path: str) -> bool:
        """Whether ``path`` is a file a wheel installed into a ``sys.path`` folder outside
        site-packages (see :func:`_installed_files`)."""
        for entry in list(sys.path):
            if not entry or not isinstance(entry, str):
                continue
            real = os.path.realpath(entry)
            if not path.startswith(real.rstrip(os.sep) + os.sep):
                continue
            files = self._installed.get(real)
            if files is None:
                files = self._installed[real] = _installed_files(real)
            if path in files:
                return True
        return False

    def user_frame(self, frame):
        """The innermost frame, from ``frame`` outwards, in user code; None when there is none."""
        f, lib = frame, self.not_user
        while f is not None:
            try:  # past the files known not to be the user's, in few steps
                while f.f_code.co_filename in lib:
                    f = f.f_back
            except AttributeError:  # walked past the outermost frame
                return None
            if self(f.f_code.co_filename):
                return f
            f = f.f_back
        return None

    def site(self, frame) -> tuple:
        """(file, line) of the innermost frame, from ``frame`` outwards, in user code."""
        f = self.user_frame(frame)
        return (f.f_code.co_filename, self.line(f)) if f is not None else ("<outside user code>", 0)
