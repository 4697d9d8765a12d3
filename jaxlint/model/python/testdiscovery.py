"""Whether a test runner collects a module's top-level ``test*`` functions. Python semantics only.

pytest collects functions named ``test*`` only from the files its ``python_files`` setting names
(by default ``test_*.py`` and ``*_test.py``); unittest runs the ``test*`` methods of ``TestCase``
classes, in any module that calls ``unittest.main()`` (a class rule, not a file rule). So a
top-level ``def test(n):`` in ``local_matrices.py`` runs only where something calls it, and how
often is its callers' question, as for any function (fresh AK's first look: a timing in such a
``test`` that nothing calls was judged FALSE; the evaluation steps named ``test_step`` in training
scripts run once per batch, not once per test).

A module is taken as collected (the conservative answer) when its path is unknown, when it is test
code by the convention ``test-files`` (a ``tests/`` folder, ``conftest.py``, ...), when its file name
matches pytest's defaults, or when a pytest configuration file in a folder above it, up to its
repository's root, sets ``python_files`` (which files it names is not read: unknown). A notebook is
never collected.
"""

from __future__ import annotations

import fnmatch
import os
from typing import Optional

_DEFAULT_FILES = ("test_*.py", "*_test.py")
_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini")
_MAX_LEVELS = 12
_configured: dict = {}  # folder -> whether a pytest configuration there sets python_files


def collects_tests(path: Optional[str], test_code: bool) -> bool:
    """Whether pytest may collect the top-level ``test*`` functions of the module at ``path``
    (``test_code``: the module is test code by the convention ``test-files``)."""
    if path is None:
        return True
    if path.lower().endswith(".ipynb"):
        return False
    if test_code or any(fnmatch.fnmatch(os.path.basename(path), pat) for pat in _DEFAULT_FILES):
        return True
    return _sets_python_files(os.path.dirname(os.path.abspath(path)))


def _sets_python_files(folder: str) -> bool:
    """Whether a pytest configuration in ``folder`` or a folder above it (up to the repository's
    root: a folder with ``.git``/``.hg``) sets ``python_files``."""
    for _ in range(_MAX_LEVELS):
        found = _configured.get(folder)
        if found is None:
            found = _configured[folder] = any(_mentions(os.path.join(folder, name)) for name in _CONFIGS)
        if found:
            return True
        if any(os.path.exists(os.path.join(folder, vcs)) for vcs in (".git", ".hg")):
            return False
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent
    return False


def _mentions(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"python_files" in f.read(1_000_000)
    except OSError:
        return False
