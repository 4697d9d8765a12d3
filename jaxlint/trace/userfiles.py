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

    def __call__(self, filename: str) -> bool:
        hit = self._cache.get(filename)
        if hit is None:
            hit = self._cache[filename] = self._decide(filename)
        return hit

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
            return not path.startswith(_HERE + os.sep)
        return not any(path.startswith(d) for d in self._libs)

    def site(self, frame) -> tuple:
        """(file, line) of the innermost frame, from ``frame`` outwards, in user code."""
        f = frame
        while f is not None:
            if self(f.f_code.co_filename):
                return (f.f_code.co_filename, f.f_lineno)
            f = f.f_back
        return ("<outside user code>", 0)
