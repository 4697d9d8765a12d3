"""``[tool.jaxlint]`` in pyproject.toml, found by walking up from the checked path."""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from typing import Optional



def _toml():
    """The TOML reader, imported on the first pyproject.toml that mentions jaxlint (the flake8
    plugin loads this module in every editor; most projects never get that far)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    return tomllib


_AT = re.compile(r" \(at (?:line (\d+), column (\d+)|end of document)\)\Z")


def _parse_toml(raw: bytes, source: str) -> dict:
    """``raw`` parsed as TOML; a file that is not TOML is a ConfigError naming ``source``, the line
    and the column (``pyproject.toml:12:9: invalid TOML: Invalid value``), as a compiler would.
    tomli 2 gives the place as ``lineno``/``colno``; Python 3.11's tomllib only in its message,
    "(at line 12, column 9)", or "(at end of document)", which is computed here as tomli does."""
    tomllib = _toml()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{source}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        m = _AT.search(message)
        what = getattr(e, "msg", None) or (message[:m.start()] if m else message)
        line, col = getattr(e, "lineno", None), getattr(e, "colno", None)
        if (line is None or col is None) and m is not None:
            if m.group(1):
                line, col = int(m.group(1)), int(m.group(2))
            else:  # the end of the document: its last line, after its last character
                line = text.count("\n") + 1
                col = len(text) - text.rfind("\n")
        where = f"{source}:{line}:{col}" if line is not None and col is not None else source
        end = " (where the file ends)" if m is not None and not m.group(1) else ""
        raise ConfigError(f"{where}: invalid TOML: {what}{end}") from e


DEFAULT_EXCLUDE = (".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "env", ".env", "__pycache__",
                   "build", "dist", ".eggs", "*.egg-info", ".mypy_cache", ".pytest_cache", ".ruff_cache",
                   ".jaxlint_cache", "node_modules", "site-packages")
KEYS = {"select", "ignore", "extend-select", "extend-ignore", "per-file-ignores", "exclude", "extend-exclude",
        "pedantic", "fail-on-oversize", "trace", "conventions", "jax-version"}
# [tool.jaxlint.trace]: the compile budgets and CI gates of `jaxlint trace`
TRACE_KEYS = {"budget", "budget-memory", "donation-threshold", "fail-on-recompile", "max-compiles",
              "max-transfers-per-line"}


class ConfigError(Exception):
    pass


class TraceConfig:
    """``[tool.jaxlint.trace]``. A plain class, not a dataclass: the flake8 plugin loads this
    module in every editor, and ``dataclasses`` costs about 10 ms to import there."""

    def __init__(self, budget: Optional[dict] = None, fail_on_recompile: bool = False,
                 max_compiles: Optional[int] = None, max_transfers_per_line: Optional[int] = None,
                 budget_memory: Optional[dict] = None, donation_threshold: Optional[int] = None):
        self.budget = budget if budget is not None else {}  # glob on a function's (qualified) name -> most compiles
        self.fail_on_recompile = fail_on_recompile
        self.max_compiles = max_compiles
        self.max_transfers_per_line = max_transfers_per_line
        self.budget_memory = budget_memory if budget_memory is not None else {}  # glob -> bytes
        self.donation_threshold = donation_threshold  # bytes, or None: the default

    def __repr__(self) -> str:
        return f"TraceConfig({self.__dict__!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, TraceConfig) and self.__dict__ == other.__dict__


class Config:
    """``[tool.jaxlint]`` as the front ends use it (a plain class, as TraceConfig)."""

    def __init__(self, select: Optional[list] = None, ignore: Optional[list] = None,
                 per_file_ignores: Optional[dict] = None, exclude: Optional[list] = None, pedantic: bool = False,
                 root: str = ".", source: Optional[str] = None, trace: Optional[TraceConfig] = None,
                 conventions: Optional[dict] = None, fail_on_oversize: bool = False,
                 jax_version: Optional[tuple] = None):
        self.select = select if select is not None else ["JAX"]
        self.ignore = ignore if ignore is not None else []
        self.per_file_ignores = per_file_ignores if per_file_ignores is not None else {}  # glob -> [code prefixes]
        self.exclude = exclude if exclude is not None else list(DEFAULT_EXCLUDE)
        self.pedantic = pedantic  # also report the findings that are right but rarely worth changing
        self.root = root  # folder of the pyproject.toml the config came from
        self.source = source
        self.trace = trace if trace is not None else TraceConfig()
        self.conventions = conventions if conventions is not None else {}  # key -> words in force
        # A file over the size limit is a JAX000 finding (exit 1) instead of a notice on stderr
        self.fail_on_oversize = fail_on_oversize
        # The oldest JAX the project supports (jaxlint/jaxversion.py), a version tuple, or None
        self.jax_version = jax_version

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
                    raw = fh.read()
            except OSError as e:
                raise ConfigError(f"{candidate}: {e}") from e
            if b"jaxlint" in raw:  # a file that never says jaxlint has no [tool.jaxlint]: not parsed
                data = _parse_toml(raw, candidate)
                if "jaxlint" in data.get("tool", {}):
                    return candidate
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def known_codes() -> list:
    """Every code jaxlint reports: JAX000 (a file it cannot read or parse) and the rules' codes."""
    from . import registry
    from .source import PARSE_ERROR

    catalog = registry.__dict__.get("CATALOG")  # loaded (or replaced by a test): its codes
    if catalog is not None:
        return [r.code for r in catalog]
    return [PARSE_ERROR, *registry.RULE_CODES]  # the same codes, without loading the rules


def unknown_code_error(codes) -> Optional[str]:
    """None when every one of ``codes`` is a known code or a prefix of one (``J`` ... ``JAX201``,
    as in flake8); else the message naming the first bad value and the valid prefixes."""
    known = known_codes()
    for code in codes:
        if not code or not any(k.startswith(code) for k in known):
            families = ", ".join(["JAX"] + sorted({k[:4] for k in known}))
            return (f"unknown code or prefix {code!r}; valid: a code that `jaxlint rules` "
                    f"lists or a prefix of one ({families}, ...)")
    return None


def _strings(value, key: str, source: str, what: str) -> list:
    """Every list-valued key is checked alike: a TOML array of strings, nothing else."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    got = f"the string {value!r}" if isinstance(value, str) else f"{type(value).__name__} {value!r}"
    raise ConfigError(f"{source}: [tool.jaxlint] {key} must be a list of strings ({what}), not {got}")


def _codes(value, key: str, source: str) -> list:
    codes = [v.strip().upper() for v in _strings(value, key, source, "code prefixes")]
    error = unknown_code_error(codes)
    if error:
        raise ConfigError(f"{source}: [tool.jaxlint] {key}: {error}")
    return codes


def load_config(start: str = ".", pyproject: Optional[str] = None) -> Config:
    """The configuration for checking ``start``: ``[tool.jaxlint]`` of the nearest pyproject.toml
    above it that has one, or of the file given as ``pyproject``."""
    cfg = Config()
    source = pyproject if pyproject is not None else find_pyproject(start)
    if source is None:
        return cfg
    try:
        with open(source, "rb") as fh:
            raw = fh.read()
    except OSError as e:
        raise ConfigError(f"{source}: {e}") from e
    tool = _parse_toml(raw, source).get("tool", {})
    section = tool.get("jaxlint", {}) if isinstance(tool, dict) else None
    if not isinstance(section, dict):
        raise ConfigError(f"{source}: [tool.jaxlint] must be a table")
    cfg.source = source
    cfg.root = os.path.dirname(source)
    unknown = set(section) - KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown [tool.jaxlint] key(s): {', '.join(sorted(unknown))}"
                          f" (valid: {', '.join(sorted(KEYS))})")
    if "select" in section:
        cfg.select = _codes(section["select"], "select", source)
    cfg.select += _codes(section.get("extend-select", []), "extend-select", source)
    cfg.ignore = _codes(section.get("ignore", []), "ignore", source)
    cfg.ignore += _codes(section.get("extend-ignore", []), "extend-ignore", source)
    pfi = section.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"{source}: [tool.jaxlint] per-file-ignores must be a table of glob = [codes]")
    cfg.per_file_ignores = {k: _codes(v, f"per-file-ignores.{k!r}", source) for k, v in pfi.items()}
    if "exclude" in section:
        cfg.exclude = list(_strings(section["exclude"], "exclude", source, "globs"))
    cfg.exclude += _strings(section.get("extend-exclude", []), "extend-exclude", source, "globs")
    for key in ("pedantic", "fail-on-oversize"):
        if key in section:
            if not isinstance(section[key], bool):
                raise ConfigError(f"{source}: [tool.jaxlint] {key} must be true or false, not {section[key]!r}")
            setattr(cfg, key.replace("-", "_"), section[key])
    if "trace" in section:
        cfg.trace = _trace(section["trace"], source)
    if "jax-version" in section:
        from . import jaxversion

        try:
            cfg.jax_version = jaxversion.parse(section["jax-version"])
        except ValueError as e:
            raise ConfigError(f"{source}: [tool.jaxlint] {e}") from None
    if "conventions" in section:
        from . import conventions

        cfg.conventions = conventions.parse(section["conventions"], source, ConfigError)
    return cfg


def _count(value, what: str, source: str) -> int:
    """A compile or transfer limit: an integer >= 0 (not a bool, a float or a string)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{source}: [tool.jaxlint.trace] {what} must be an integer >= 0, not {value!r}")
    return value


def _size(value, what: str, source: str) -> int:
    """A size in bytes: an integer or a string such as "2 GB" (jaxlint/trace/sizes.py, no JAX)."""
    from .trace.sizes import parse_size

    try:
        return parse_size(value)
    except ValueError as e:
        raise ConfigError(f"{source}: [tool.jaxlint.trace] {what}: {e}") from None


def _pattern_table(section: dict, key: str, value: str, example: str, parse, source: str) -> dict:
    """``key = {"glob" = value, ...}`` of [tool.jaxlint.trace], each value through ``parse``."""
    table = section.get(key, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [tool.jaxlint.trace] {key} must be a table of \"pattern\" = {value} "
                          f"(e.g. {example}), not {table!r}")
    out = {}
    for pattern, v in table.items():
        if not pattern.strip():
            raise ConfigError(f"{source}: [tool.jaxlint.trace] {key}: empty function pattern")
        out[pattern] = parse(v, f"{key} {pattern!r}", source)
    return out


def _trace(section, source: str) -> TraceConfig:
    if not isinstance(section, dict):
        raise ConfigError(f"{source}: [tool.jaxlint] trace must be a table ([tool.jaxlint.trace])")
    unknown = set(section) - TRACE_KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown [tool.jaxlint.trace] key(s): {', '.join(sorted(unknown))}"
                          f" (valid: {', '.join(sorted(TRACE_KEYS))})")
    out = TraceConfig()
    out.budget = _pattern_table(section, "budget", "N", '{"train_step" = 1, "*" = 3}', _count, source)
    out.budget_memory = _pattern_table(section, "budget-memory", '"SIZE"', '{"train_step" = "2 GB"}', _size, source)
    if "donation-threshold" in section:
        out.donation_threshold = _size(section["donation-threshold"], "donation-threshold", source)
    if "fail-on-recompile" in section:
        if not isinstance(section["fail-on-recompile"], bool):
            raise ConfigError(f"{source}: [tool.jaxlint.trace] fail-on-recompile must be true or false, "
                              f"not {section['fail-on-recompile']!r}")
        out.fail_on_recompile = section["fail-on-recompile"]
    for key in ("max-compiles", "max-transfers-per-line"):
        if key in section:
            setattr(out, key.replace("-", "_"), _count(section[key], key, source))
    return out
