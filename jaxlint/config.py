"""``[tool.jaxlint]`` in pyproject.toml, found by walking up from the checked path."""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_EXCLUDE = (".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "env", ".env", "__pycache__",
                   "build", "dist", ".eggs", "*.egg-info", ".mypy_cache", ".pytest_cache", ".ruff_cache",
                   ".jaxlint_cache", "node_modules", "site-packages")
KEYS = {"select", "ignore", "extend-select", "extend-ignore", "per-file-ignores", "exclude", "extend-exclude"}


class ConfigError(Exception):
    pass


@dataclass
class Config:
    select: list = field(default_factory=lambda: ["JAX"])
    ignore: list = field(default_factory=list)
    per_file_ignores: dict = field(default_factory=dict)  # glob -> [code prefixes]
    exclude: list = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    root: str = "."  # folder of the pyproject.toml the config came from
    source: Optional[str] = None

    def ignored_for(self, path: str) -> list:
        rel = os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")
        out = []
        for pattern, codes in self.per_file_ignores.items():
            if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(os.path.basename(path), pattern):
                out.extend(codes)
        return out

    def keeps(self, path: str, finding) -> bool:
        """False when a ``per-file-ignores`` entry for ``path`` silences ``finding``'s code. The one
        place per-file ignores are applied: ``jaxlint check``'s report and ``--fix``/``--diff``, and
        the static findings ``jaxlint trace`` cross-checks."""
        if not self.per_file_ignores:
            return True
        return not any(finding.code.startswith(p) for p in self.ignored_for(path))

    def is_excluded(self, path: str) -> bool:
        name = os.path.normcase(os.path.basename(os.path.normpath(path)))
        rel = os.path.normcase(os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/"))
        matcher = self._exclude_matcher()
        return matcher(name) is not None or matcher(rel) is not None

    def _exclude_matcher(self):
        """One compiled regex for all exclude globs (fnmatch semantics), built once per list."""
        key = tuple(self.exclude)
        cached = self.__dict__.get("_matcher")
        if cached is None or cached[0] != key:
            pattern = "|".join(f"(?:{fnmatch.translate(os.path.normcase(p))})" for p in key) or "(?!)"
            cached = self.__dict__["_matcher"] = (key, re.compile(pattern).match)
        return cached[1]


def find_pyproject(start: str) -> Optional[str]:
    path = os.path.abspath(start)
    if not os.path.isdir(path):
        path = os.path.dirname(path)
    while True:
        candidate = os.path.join(path, "pyproject.toml")
        if os.path.isfile(candidate):
            try:
                with open(candidate, "rb") as fh:
                    data = tomllib.load(fh)
            except (OSError, tomllib.TOMLDecodeError) as e:
                raise ConfigError(f"{candidate}: {e}") from e
            if "jaxlint" in data.get("tool", {}):
                return candidate
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _codes(value, key: str, source: str) -> list:
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{source}: [tool.jaxlint] {key} must be a list of codes")
    return [v.strip().upper() for v in value]


def load_config(start: str = ".", pyproject: Optional[str] = None) -> Config:
    """The configuration for checking ``start``: ``[tool.jaxlint]`` of the nearest pyproject.toml
    above it that has one, or of the file given as ``pyproject``."""
    cfg = Config()
    source = pyproject if pyproject is not None else find_pyproject(start)
    if source is None:
        return cfg
    try:
        with open(source, "rb") as fh:
            section = tomllib.load(fh).get("tool", {}).get("jaxlint", {})
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{source}: {e}") from e
    cfg.source = source
    cfg.root = os.path.dirname(source)
    unknown = set(section) - KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown [tool.jaxlint] key(s): {', '.join(sorted(unknown))}")
    if "select" in section:
        cfg.select = _codes(section["select"], "select", source)
    cfg.select += _codes(section.get("extend-select", []), "extend-select", source)
    cfg.ignore = _codes(section.get("ignore", []), "ignore", source)
    cfg.ignore += _codes(section.get("extend-ignore", []), "extend-ignore", source)
    pfi = section.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"{source}: [tool.jaxlint] per-file-ignores must be a table of glob = [codes]")
    cfg.per_file_ignores = {k: _codes(v, "per-file-ignores", source) for k, v in pfi.items()}
    for key in ("exclude", "extend-exclude"):
        value = section.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{source}: [tool.jaxlint] {key} must be a list of globs")
    if "exclude" in section:
        cfg.exclude = list(section["exclude"])
    cfg.exclude += list(section.get("extend-exclude", []))
    return cfg
