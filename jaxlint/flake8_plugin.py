"""The flake8 front end: runs the shared engine on the tree flake8 already parsed.

The project's ``[tool.jaxlint]`` (the nearest ``pyproject.toml`` above the checked file that has
one, as ``jaxlint check`` finds it) applies first: ``select``/``ignore``, ``per-file-ignores``,
``exclude``, ``pedantic``, ``fail-on-oversize`` and the conventions, so an editor sees what the CLI
reports (a module too large to analyze gives no finding unless ``fail-on-oversize = true``). flake8's own
``--select/--ignore/--per-file-ignores`` and ``# noqa`` then apply on top: a finding is shown
only when both allow it. The plugin's option ``--jaxlint-pedantic`` (or ``jaxlint-pedantic = true``
in flake8's config) also reports the findings that are right but rarely worth changing
(``Finding.opt_in``), as ``pedantic = true`` does.

Importing this module loads nothing else of jaxlint (flake8 imports every plugin on every run,
an editor on every save): the engine, the model and the rules are imported by the first
:meth:`JaxlintChecker.run`, and not at all for a file that never mentions JAX
(:func:`jaxlint.prefilter.may_use_jax`). The fixer, notebooks, reporters, the CLI and the
dynamic mode are never imported under flake8 (``tests/test_architecture.py``).
"""

from __future__ import annotations

import ast
import gc
from typing import Iterator, Sequence

from . import __version__


class JaxlintChecker:
    name = "jaxlint"
    version = __version__
    _rules = None
    pedantic = False
    _configs: dict = {}  # folder of a checked file -> its Config, or the config error's message
    _configured = None  # the Config whose conventions are in force
    jax_version = None  # --jaxlint-jax-version (a version tuple): wins over the config's jax-version

    @classmethod
    def add_options(cls, parser) -> None:
        parser.add_option("--jaxlint-pedantic", action="store_true", parse_from_config=True, default=False,
                          help="jaxlint: also report findings that are right but rarely worth changing "
                               "(a sync in test code, a jit rebuilt in a function that runs once)")

        parser.add_option("--jaxlint-jax-version", parse_from_config=True, default=None, type=_jax_version,
                          metavar="VERSION",
                          help="jaxlint: the oldest JAX the project supports, such as 0.4.30 (jax-version in "
                               "[tool.jaxlint]): fixes and their advice name only what that version has")

    @classmethod
    def parse_options(cls, options) -> None:
        cls.pedantic = bool(getattr(options, "jaxlint_pedantic", False))
        cls.jax_version = getattr(options, "jaxlint_jax_version", None)

    def __init__(self, tree: ast.Module, filename: str = "", lines: Sequence[str] = ()) -> None:
        self.tree = tree
        self.filename = filename
        self.lines = lines

    @classmethod
    def rules(cls):
        if cls._rules is None:
            # The first file that may use JAX imports the engine, the model and the rules: with the
            # cyclic GC paused, as the engine pauses it while checking. The import makes thousands
            # of functions and classes that live as long as the process; collecting meanwhile
            # scans them and all that flake8 holds, for nothing: 1.1-1.7 ms of GC during a 15 ms first
            # check of flax/nnx/module.py, measured with gc.callbacks.
            was_enabled = gc.isenabled()
            gc.disable()
            try:
                from . import engine  # noqa: F401
                from .registry import ALL_RULES

                cls._rules = [r() for r in ALL_RULES]
            finally:
                if was_enabled:
                    gc.enable()
        return cls._rules

    @classmethod
    def config_for(cls, path):
        """The ``[tool.jaxlint]`` in force for ``path`` (a Config), or the error's message (a str);
        found once per folder. Without a path (stdin), the one of the working folder."""
        import os

        folder = os.path.dirname(os.path.abspath(path)) if path else os.getcwd()
        found = cls._configs.get(folder)
        if found is None:
            from .config import ConfigError, load_config

            try:
                found = load_config(folder)
            except ConfigError as e:
                found = str(e)
            cls._configs[folder] = found
        return found

    def run(self) -> Iterator[tuple]:
        path = self.filename if self.filename and self.filename not in ("-", "stdin") else None
        from .prefilter import may_use_jax, too_large

        text = "".join(self.lines) if self.lines else None
        big = too_large(text) if text is not None else None
        if text is not None and big is None and not may_use_jax(text, path):
            return
        cfg = self.config_for(path)
        if isinstance(cfg, str):
            from .source import PARSE_ERROR

            yield 1, 0, f"{PARSE_ERROR} jaxlint config error, nothing checked: {cfg}", type(self)
            return
        if path is not None and cfg.source is not None and _excluded(cfg, path):
            return
        if big is not None:  # not analyzed: no finding (generated code), unless fail-on-oversize asks for one
            if cfg.fail_on_oversize:
                yield 1, 0, f"{big.code} {big.message}", type(self)
            return
        from .registry import is_selected

        if JaxlintChecker._configured is not cfg:  # the conventions in force: once per config, not per file
            from . import conventions, jaxversion

            conventions.configure(cfg.conventions)
            jaxversion.configure(self.jax_version if self.jax_version is not None else cfg.jax_version)
            JaxlintChecker._configured = cfg
        pedantic = self.pedantic or cfg.pedantic
        rules = [r for r in self.rules() if is_selected(r.code, cfg.select, cfg.ignore)]
        from .engine import run_rules

        for f in run_rules(self.tree, rules, path=path, text=text):
            if f.opt_in is not None and not pedantic:
                continue
            if path is not None and not cfg.keeps(path, f):
                continue
            yield f.line, f.col, f"{f.code} {f.message}", type(self)


def _jax_version(value):
    """``--jaxlint-jax-version 0.4.30``: a JAX release; anything else is a usage error (flake8 exits 2)."""
    if value is None or isinstance(value, tuple):
        return value
    import argparse

    from .jaxversion import parse

    try:
        return parse(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _excluded(cfg, path: str) -> bool:
    """Whether ``[tool.jaxlint]`` excludes ``path`` or a folder it is in, below the config's root:
    the folders ``jaxlint check`` does not walk into."""
    import os

    path = os.path.abspath(path)
    root = os.path.abspath(cfg.root)
    while path.startswith(root + os.sep):
        if cfg.is_excluded(path):
            return True
        path = os.path.dirname(path)
    return False
