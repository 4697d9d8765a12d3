"""The rule base class and the finding record every front end reports."""

from __future__ import annotations

import ast
import textwrap
from typing import TYPE_CHECKING, ClassVar, Iterator, Optional, Sequence

if TYPE_CHECKING:  # annotations only: importing this module (the Finding record) loads no model
    from .model import ModuleModel


def __getattr__(name: str):
    """``unparse`` (jaxlint/model/syntax.py), re-exported for the rules, loaded on first use: the
    reporters and the result cache import :class:`Finding` from here without the model."""
    if name == "unparse":
        from .model.python.syntax import unparse

        return unparse
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Finding:
    """One finding. A value: compared, ordered and hashed by (line, col, code, message, name, path);
    treat it as immutable (:meth:`replace` makes a changed copy)."""

    __slots__ = ("line", "col", "code", "message", "name", "path", "cell", "cell_line", "fix", "cites", "opt_in",
                 "evidence", "facts")

    def __init__(self, line: int, col: int, code: str, message: str, name: str = "", path: str = "",
                 cell: Optional[int] = None, cell_line: Optional[int] = None, fix: Optional[object] = None,
                 cites: tuple = (), opt_in: Optional[str] = None, evidence: tuple = (), facts: tuple = ()):
        self.line = line
        self.col = col  # 0-based, as flake8 expects from a plugin
        self.code = code
        self.message = message
        self.name = name
        self.path = path
        # Notebooks only (jaxlint/notebook.py): the cell (1-based among all cells) and the line in
        # it; ``line`` is then the line in the code cells joined as one module, ``col`` is in the cell.
        self.cell = cell
        self.cell_line = cell_line
        # A safe automatic fix (a jaxlint.edits.Fix) when the rule offers one; never cached or compared.
        self.fix = fix
        # The lines the message cites (``Line``): ``(offset in message, line)`` for each ``line N``
        # in it, so that a notebook can say which cell and line that is (jaxlint/notebook.py).
        self.cites = cites
        # Right, but rarely worth changing (a sync in test code, a jit rebuilt in a function that runs
        # once): why, in a few words. Such findings are reported only on request (``--pedantic``,
        # ``pedantic = true``, flake8 ``--jaxlint-pedantic``); None for every default finding.
        self.opt_in = opt_in
        # Why the finding was made: the facts (and any naming convention, jaxlint/conventions.py)
        # the rule's decision rests on, one short sentence each (``--format json``,
        # ``jaxlint check --explain-finding``). Not compared.
        self.evidence = evidence
        # The facts of the rule's proof obligation (``Rule.needs``), each ``(name, status, why)``
        # with status "proven" or "unknown" (jaxlint/model/proof.py): a finding with an unknown
        # fact is opt-in. Not compared.
        self.facts = facts

    def _key(self) -> tuple:
        return (self.line, self.col, self.code, self.message, self.name, self.path)

    def __eq__(self, other):
        return self._key() == other._key() if isinstance(other, Finding) else NotImplemented

    def __ne__(self, other):
        return self._key() != other._key() if isinstance(other, Finding) else NotImplemented

    def __lt__(self, other):
        return self._key() < other._key() if isinstance(other, Finding) else NotImplemented

    def __le__(self, other):
        return self._key() <= other._key() if isinstance(other, Finding) else NotImplemented

    def __gt__(self, other):
        return self._key() > other._key() if isinstance(other, Finding) else NotImplemented

    def __ge__(self, other):
        return self._key() >= other._key() if isinstance(other, Finding) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Finding(line={self.line!r}, col={self.col!r}, code={self.code!r}, message={self.message!r}, "
                f"name={self.name!r}, path={self.path!r}, cell={self.cell!r}, cell_line={self.cell_line!r}, "
                f"opt_in={self.opt_in!r})")

    def replace(self, **changes) -> "Finding":
        """A copy with the given fields changed (like ``dataclasses.replace``)."""
        out = Finding(self.line, self.col, self.code, self.message, self.name, self.path, self.cell,
                      self.cell_line, self.fix, self.cites, self.opt_in, self.evidence, self.facts)
        for k, v in changes.items():
            setattr(out, k, v)
        return out

    def with_path(self, path: str) -> "Finding":
        return self.replace(path=path)


class Line:
    """A line of the checked file cited in a message (``... on line 20``), given to
    :meth:`Rule.finding` as a part of the message: it reads ``line 20`` in a ``.py`` file, and
    in a notebook as the cell and the line in it that the user sees."""

    __slots__ = ("number",)

    def __init__(self, number: int):
        self.number = number

    def __eq__(self, other):
        return self.number == other.number if isinstance(other, Line) else NotImplemented

    def __hash__(self) -> int:
        return hash(self.number)

    def __repr__(self) -> str:
        return f"Line(number={self.number!r})"

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
    short: ClassVar[str]  # the pitfall in one sentence of at most 110 characters (`jaxlint rules`, SARIF)
    summary: ClassVar[str]  # what it does, in full
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
    # The rule's proof obligation: the facts (keys of ``jaxlint.model.proof.FACTS``) a default
    # finding needs proven. A finding where one of them is unknown is reported only with
    # ``--pedantic``, and its evidence names the unknown; one where a fact is disproven is not made.
    needs: ClassVar[tuple] = ()
    # Every finding of the rule is code that raises an exception when it runs (JAX arrays are
    # immutable: ``x[i] = v`` raises TypeError), not code that only wastes time or computes something
    # unintended: reported at level "error" in SARIF and in GitHub annotations (:meth:`level`), where
    # the other rules' findings are warnings. False when some findings do not raise (JAX203's
    # ``.item()`` under autodiff alone makes a constant and runs).
    fails_at_runtime: ClassVar[bool] = False

    @classmethod
    def level(cls) -> str:
        """The severity of its findings for code-scanning services: "error" or "warning"."""
        return "error" if cls.fails_at_runtime else "warning"

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        raise NotImplementedError

    def finding(self, node: ast.AST, message, fix: Optional[object] = None, opt_in: Optional[str] = None,
                evidence: Sequence[str] = (), facts: Sequence = ()) -> Finding:
        """``message``: a string, or a sequence of strings and :class:`Line` citations.
        ``opt_in``: the finding is right but rarely worth acting on, for this reason; it is
        reported only when the user asks for such findings (see ``Finding.opt_in``).
        ``evidence``: the facts and conventions the decision rests on (``Finding.evidence``).
        ``facts``: the :class:`~jaxlint.model.proof.Fact` values of the rule's proof obligation
        (``needs``), each proven or unknown: an unknown one makes the finding opt-in, and the
        evidence starts with the facts, the unknown first."""
        if facts:
            for fact in facts:
                if fact.name not in self.needs or fact.status == "disproven":
                    raise ValueError(f"{self.code}: fact {fact.name!r} ({fact.status}) is not a proof of a finding "
                                     f"(the rule needs {self.needs})")
            facts = sorted(facts, key=lambda fact: fact.status != "unknown")  # the unknown first
            gap = next((fact for fact in facts if fact.status == "unknown"), None)
            if gap is not None and opt_in is None:
                opt_in = f"{gap.name} unknown: {gap.why}"
            evidence = [f"{fact.name} ({fact.status}): {fact.why}" for fact in facts] + list(evidence)
        row = tuple(fact.as_tuple() for fact in facts)
        if isinstance(message, str):
            return Finding(node.lineno, node.col_offset, self.code, message, self.name, fix=fix, opt_in=opt_in,
                           evidence=tuple(evidence), facts=row)
        text, cites = render(message)
        return Finding(node.lineno, node.col_offset, self.code, text, self.name, fix=fix, cites=cites,
                       opt_in=opt_in, evidence=tuple(evidence), facts=row)

    def proof(self, model: ModuleModel, node: ast.AST, *facts) -> Optional[list]:
        """The facts of a finding's proof obligation, in order (a fact, or a function of no
        arguments that makes one, asked only when the facts before it are not disproven): the list
        to hand to :meth:`finding` when none is disproven; None when one is, recording that fact as
        why the rule stayed quiet at ``node`` (:meth:`quiet`)."""
        out = []
        for fact in facts:
            if callable(fact):
                fact = fact()
            if fact.status == "disproven":
                self.quiet(model, node, fact)
                return None
            out.append(fact)
        return out

    def quiet(self, model: ModuleModel, node: ast.AST, reason) -> None:
        """Record that this rule looked at ``node`` and made no finding, and why: a disproven
        :class:`~jaxlint.model.proof.Fact` or a sentence. Kept only when the run asks why a line has
        no finding (``jaxlint check --explain-finding PATH:LINE``); otherwise a no-op."""
        log = model.facts.quiet
        if log is None or node is None or not hasattr(node, "lineno"):
            return
        text = reason if isinstance(reason, str) else f"{reason.name} ({reason.status}): {reason.why}"
        log.append(Finding(node.lineno, node.col_offset, self.code, text, self.name))

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
            + (f"Reported by default only when proven\n{_needs_text(cls.needs)}\n\n" if cls.needs else "")
            + (f"Reported only with --pedantic\n{textwrap.indent(textwrap.fill(cls.opt_in_cases, 76), '    ')}\n\n"
               if cls.opt_in_cases else "")
            + f"Suppress one line with `# noqa: {cls.code}`.\n"
        )


def _needs_text(needs: Sequence[str]) -> str:
    """The proof obligation of a rule, for ``jaxlint explain``: one line per fact."""
    from .model.facts.proof import FACTS

    return "\n".join(textwrap.fill(f"- {name}: {FACTS[name]}", 76, initial_indent="    ",
                                    subsequent_indent="      ") for name in needs)
