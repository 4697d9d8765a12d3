"""The rule base class and the finding record every front end reports."""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar, Iterator, Optional, Sequence

if TYPE_CHECKING:  # annotations only: importing this module (the Finding record) loads no model
    from .model import ModuleModel


def __getattr__(name: str):
    """``unparse`` (jaxlint/model/syntax.py), re-exported for the rules, loaded on first use: the
    reporters and the result cache import :class:`Finding` from here without the model."""
    if name == "unparse":
        from .model.syntax import unparse

        return unparse
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True, order=True)
class Finding:
    line: int
    col: int  # 0-based, as flake8 expects from a plugin
    code: str
    message: str
    name: str = ""
    path: str = ""
    # Notebooks only (jaxlint/notebook.py): the cell (1-based among all cells) and the line in
    # it; ``line`` is then the line in the code cells joined as one module, ``col`` is in the cell.
    cell: Optional[int] = field(default=None, compare=False)
    cell_line: Optional[int] = field(default=None, compare=False)
    # A safe automatic fix (a jaxlint.edits.Fix) when the rule offers one; never cached or compared.
    fix: Optional[object] = field(default=None, compare=False, repr=False)
    # The lines the message cites (``Line``): ``(offset in message, line)`` for each ``line N``
    # in it, so that a notebook can say which cell and line that is (jaxlint/notebook.py).
    cites: tuple = field(default=(), compare=False, repr=False)
    # Right, but rarely worth changing (a sync in test code, a jit rebuilt in a function that runs
    # once): why, in a few words. Such findings are reported only on request (``--pedantic``,
    # ``pedantic = true``, flake8 ``--jaxlint-pedantic``); None for every default finding.
    opt_in: Optional[str] = field(default=None, compare=False)

    def with_path(self, path: str) -> "Finding":
        return replace(self, path=path)


@dataclass(frozen=True)
class Line:
    """A line of the checked file cited in a message (``... on line 20``), given to
    :meth:`Rule.finding` as a part of the message: it reads ``line 20`` in a ``.py`` file, and
    in a notebook as the cell and the line in it that the user sees."""

    number: int

    def __str__(self) -> str:
        return f"line {self.number}"


def render(parts: Sequence) -> tuple:
    """(message, cites) for a message given as parts: strings and :class:`Line` citations."""
    text, cites = "", []
    for part in parts:
        if isinstance(part, Line):
            cites.append((len(text), part.number))
        text += str(part)
    return text, tuple(cites)


class Rule:
    """One check. Subclasses set the class attributes and implement :meth:`check`.

    ``bad`` must trigger exactly this rule and ``good`` must trigger nothing; the test suite
    runs both, and ``jaxlint explain`` prints them.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]  # what it does, one sentence
    rationale: ClassVar[str]  # why it costs accelerator time (or fails)
    bad: ClassVar[str]
    good: ClassVar[str]
    # Offers safe automatic fixes (``Finding.fix``) that ``jaxlint check --fix`` applies.
    fixable: ClassVar[bool] = False
    # What ``jaxlint trace`` counts to confirm a finding (jaxlint/trace/report.py), or None when a
    # run cannot confirm it: "compiles" (two or more compilations or traces started from the
    # finding's line), "transfers" (two or more host transfers from it), "uploads" (two or more
    # host-to-device copies from it), "clock" (a clock read on the line while the last jitted call's
    # result was not ready), "trace_time" (the
    # enclosing function was traced fewer times than called: the line ran at trace time only),
    # "unroll" (the enclosing function's jaxpr is very large).
    confirmed_by: ClassVar[Optional[str]] = None
    # What the rule reports only on request (``--pedantic``): the cases that are right but rarely
    # worth changing, in a sentence for ``jaxlint explain``; empty when it has none.
    opt_in_cases: ClassVar[str] = ""

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        raise NotImplementedError

    def finding(self, node: ast.AST, message, fix: Optional[object] = None, opt_in: Optional[str] = None) -> Finding:
        """``message``: a string, or a sequence of strings and :class:`Line` citations.
        ``opt_in``: the finding is right but rarely worth acting on, for this reason; it is
        reported only when the user asks for such findings (see ``Finding.opt_in``)."""
        if isinstance(message, str):
            return Finding(node.lineno, node.col_offset, self.code, message, self.name, fix=fix, opt_in=opt_in)
        text, cites = render(message)
        return Finding(node.lineno, node.col_offset, self.code, text, self.name, fix=fix, cites=cites,
                       opt_in=opt_in)

    @classmethod
    def explain(cls) -> str:
        def block(text: str) -> str:
            return textwrap.indent(textwrap.dedent(text).strip("\n"), "    ")

        return (
            f"{cls.code} {cls.name}\n\n"
            f"What it does\n{textwrap.indent(textwrap.fill(cls.summary, 76), '    ')}\n\n"
            f"Why it is slow or wrong\n{textwrap.indent(textwrap.fill(cls.rationale, 76), '    ')}\n\n"
            f"Example\n{block(cls.bad)}\n\n"
            f"Use instead\n{block(cls.good)}\n\n"
            + (f"Reported only with --pedantic\n{textwrap.indent(textwrap.fill(cls.opt_in_cases, 76), '    ')}\n\n"
               if cls.opt_in_cases else "")
            + f"Suppress one line with `# noqa: {cls.code}`.\n"
        )
