"""The flake8 front end: runs the shared engine on the tree flake8 already parsed.

flake8 handles selection (``--select/--extend-ignore``) and ``# noqa`` itself; the plugin's one
option, ``--jaxlint-pedantic`` (or ``jaxlint-pedantic = true`` in flake8's config), also reports
the findings that are right but rarely worth changing (``Finding.opt_in``).
"""

from __future__ import annotations

import ast
from typing import Iterator

from . import __version__
from .engine import run_rules


class JaxlintChecker:
    name = "jaxlint"
    version = __version__
    _rules = None
    pedantic = False

    @classmethod
    def add_options(cls, parser) -> None:
        parser.add_option("--jaxlint-pedantic", action="store_true", parse_from_config=True, default=False,
                          help="jaxlint: also report findings that are right but rarely worth changing "
                               "(a sync in test code, a jit rebuilt in a function that runs once)")

    @classmethod
    def parse_options(cls, options) -> None:
        cls.pedantic = bool(getattr(options, "jaxlint_pedantic", False))

    def __init__(self, tree: ast.Module, filename: str = "") -> None:
        self.tree = tree
        self.filename = filename

    @classmethod
    def rules(cls):
        if cls._rules is None:
            from .registry import ALL_RULES

            cls._rules = [r() for r in ALL_RULES]
        return cls._rules

    def run(self) -> Iterator[tuple]:
        path = self.filename if self.filename and self.filename not in ("-", "stdin") else None
        for f in run_rules(self.tree, self.rules(), path=path):
            if f.opt_in is not None and not self.pedantic:
                continue
            yield f.line, f.col, f"{f.code} {f.message}", type(self)
