"""The rule catalog as the rest of jaxlint sees it, and the only module that imports ``jaxlint_rules``.

What is known of a rule is declared on its class (jaxlint/rule.py): its code and name, whether it
offers safe fixes (``fixable``), and what ``jaxlint trace`` counts to confirm one of its findings
(``confirmed_by``). This module collects them:

* ``ALL_RULES``: every rule class, sorted by code; ``RULES_BY_CODE``, ``RULES_BY_NAME``;
* ``CATALOG``: what ``jaxlint rules`` lists and ``jaxlint explain`` explains: JAX000 (a file that
  cannot be parsed, reported by the engine itself: ``source.ParseError``) and every rule;
* ``FIXABLE_CODES``: the codes ``jaxlint check --fix`` fixes;
* ``CONFIRMED_BY``: code -> ``"compiles"``, ``"transfers"``, ``"trace_time"`` or ``"unroll"``, for
  the rules whose findings a traced run can confirm (see ``confirmed_by``);
* ``select_rules`` / ``is_selected``: which rules ``select``/``ignore`` code prefixes choose.

Importing this module is cheap: the rule modules are imported on the first use of one of the
names above (``jaxlint.flake8_plugin`` and ``jaxlint.engine`` import it, and neither may load the
rules before they run).
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

# The codes of ``ALL_RULES`` and of its rules that offer safe fixes, spelled out so that a run
# served from the result cache (and the ``--select`` check) needs no rule module; a test
# (tests/test_architecture.py) keeps them equal to what the rule classes declare.
RULE_CODES = ("JAX101", "JAX102", "JAX103", "JAX104", "JAX201", "JAX202", "JAX203", "JAX204", "JAX205", "JAX206", "JAX301", "JAX302",
              "JAX303", "JAX304", "JAX305", "JAX401", "JAX402", "JAX403", "JAX404", "JAX501", "JAX502", "JAX503",
              "JAX601", "JAX602", "JAX603", "JAX701", "JAX702", "JAX801", "JAX802", "JAX803", "JAX804")
FIXABLE_RULE_CODES = frozenset({"JAX401", "JAX402", "JAX403", "JAX404"})

_CATALOG = ("ALL_RULES", "RULES_BY_CODE", "RULES_BY_NAME", "FIXABLE_CODES", "CONFIRMED_BY", "CATALOG")
_loaded: Optional[dict] = None


def _catalog() -> dict:
    """The names of ``_CATALOG``, built once; they then are plain globals of this module."""
    global _loaded
    if _loaded is None:
        import jaxlint_rules  # the one import of the rule modules

        from .source import ParseError

        rules = jaxlint_rules.ALL_RULES
        catalog = {
            "ALL_RULES": rules,  # the very list and dict jaxlint_rules builds
            "RULES_BY_CODE": jaxlint_rules.RULES_BY_CODE,
            "RULES_BY_NAME": {r.name: r for r in rules},
            "FIXABLE_CODES": frozenset(r.code for r in rules if r.fixable),
            "CONFIRMED_BY": {r.code: r.confirmed_by for r in rules if r.confirmed_by is not None},
            "CATALOG": [ParseError, *rules],
        }
        globals().update(catalog)
        _loaded = catalog
    return _loaded


def __getattr__(name: str):
    if name in _CATALOG:
        return _catalog()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def rule_codes() -> tuple:
    """The codes of ``ALL_RULES``, without loading the rules when they are not loaded yet
    (``RULE_CODES``, the same codes)."""
    rules = globals().get("ALL_RULES")
    return tuple(r.code for r in rules) if rules is not None else RULE_CODES


def fixable_rule_codes() -> frozenset:
    """``FIXABLE_CODES``, without loading the rules when they are not loaded yet."""
    rules = globals().get("ALL_RULES")
    return frozenset(r.code for r in rules if r.fixable) if rules is not None else FIXABLE_RULE_CODES


def confirmed_by(code: str) -> Optional[str]:
    """What a traced run counts to confirm a finding of ``code`` (``Rule.confirmed_by``); None when
    it cannot (and for JAX000 or an unknown code)."""
    return _catalog()["CONFIRMED_BY"].get(code)


def select_rules(all_rules: Iterable[type], select: Sequence[str] = (), ignore: Sequence[str] = ()) -> list:
    """Instances of the rules whose codes match a ``select`` prefix and no ``ignore`` prefix
    (the longer matching prefix wins, as in flake8)."""
    chosen = []
    for cls in all_rules:
        if is_selected(cls.code, select, ignore):
            chosen.append(cls())
    return chosen


def is_selected(code: str, select: Sequence[str], ignore: Sequence[str]) -> bool:
    sel = max((len(p) for p in select if code.startswith(p)), default=-1) if select else 0
    ign = max((len(p) for p in ignore if code.startswith(p)), default=-1)
    if sel < 0:
        return False
    return ign < 0 or sel > ign
