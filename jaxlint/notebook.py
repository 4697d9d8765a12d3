"""Jupyter notebooks: the Python code of an ``.ipynb`` file as one module, with a line map.

``jaxlint check`` reads a notebook's code cells, in order, as ONE module (an import in cell 1
counts in cell 5, as it does when the notebook runs top to bottom). IPython syntax that is not
Python is blanked out, one line for one line, so line numbers never move:

* line magics (``%matplotlib inline``), shell escapes (``!pip install jax``, ``!!ls``), help
  (``?obj``, ``obj?``, ``obj??``) and the autocall escapes (``/f x``, ``,f a b``, ``;f a``)
  become ``pass`` at their indentation (an empty line at the top level), continuation lines
  (a trailing backslash) included;
* ``x = !ls`` and ``x = %magic ...`` become ``x = None``, so ``x`` is still (re)bound;
* a line IPython's automagic runs as a magic (``cd /content/x``, ``pip install jax``: a magic or
  shell alias's name, and not Python) is blanked too;
* ``%time STMT`` and ``%timeit [options] STMT`` keep ``STMT``: it is Python that runs;
* a cell magic whose body is Python that runs in the notebook (``%%time``, ``%%timeit``,
  ``%%capture``, ``%%prun``, ``%%jaxlint_trace``) blanks only its ``%%`` line; any other cell magic
  (``%%bash``, ``%%writefile``, ``%%html``, ...) blanks the whole cell; comment lines before the
  ``%%`` line (Colab's ``#@title`` form lines) do not stop it being the cell's magic, as in Colab;
* a cell indented as a whole is dedented, as IPython does.

Cells are numbered from 1 among ALL cells (markdown and raw ones too), so "cell 3" is the
third cell of the notebook from the top, ``nb["cells"][2]``. A finding carries ``cell``,
``cell_line`` (1-based line in that cell's source) and ``col`` (in that line of the cell);
its ``line`` is the line in the module jaxlint checked (code cells joined in order, one
module line per cell line).

A notebook that is not valid UTF-8 JSON in nbformat 4 is one JAX000 finding. A code cell that
is not valid Python is one JAX000 finding at that cell, and the other cells are still checked.
A notebook whose ``metadata.language_info.name`` (or ``kernelspec.language``) says it is not
Python has nothing to check.

This module is a source adapter and knows nothing of rules: it turns a notebook's bytes into
module text and a line map (``read_cells``, ``join``) and maps findings back to their cells
(``Module.locate``). The engine (jaxlint/engine.py) parses, runs the rules and applies ``# noqa``,
as it does for a ``.py`` file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from .rule import Finding
from .source import TOP_LEVEL_AWAIT, parse_source

# Cell magics whose body is Python that runs in the user's namespace.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "jaxlint_trace"})
# Cell magics that run their body as a cell of its own (IPython's ``%%capture``: ``shell.run_cell(cell)``), so
# a cell magic on the body's first line is that cell's magic: ``%%capture cap`` then ``%%time`` times the rest.
_CELL_RUNNING_MAGICS = frozenset({"capture"})
# Line magics whose argument is a Python statement that runs.
PYTHON_LINE_MAGICS = frozenset({"time", "timeit"})

_NEWLINE = re.compile(r"\r\n|\r|\n")
_ASSIGN_ESCAPE = re.compile(r"([\w.]+(?:\s*,\s*[\w.]+)*)\s*=\s*[!%]")
_LINE_MAGIC = re.compile(r"%([A-Za-z_]\w*)\s*(.*)\Z", re.S)
_TIMEIT_OPTIONS = re.compile(r"(?:-(?:[nrp]\s*\d+|[tcqo]+)\s+)*")
_ESCAPES = ("!", "%", "?", "/", ",", ";")
# Line magics and shell aliases IPython runs without their ``%`` (automagic, on by default): a line
# that starts with one and is not Python (``cd /content/x``, ``pip install jax``) is the magic.
_AUTOMAGIC = re.compile(r"(?:cd|pwd|pip|conda|mamba|env|ls|cat|cp|mv|rm|mkdir|rmdir|load_ext|matplotlib|"
                        r"pushd|popd|alias|unalias|bookmark|autoreload|aimport|config|xmode|who|whos|reset)"
                        r"[ \t]+(?![=(\[.,:;]|[-+*/%<>!&|^@]=)")  # not ``env = make(`` (an assignment cut short)
FLAGS = TOP_LEVEL_AWAIT  # the compile flags of a notebook's code: a cell may ``await`` at the top level


class NotebookError(ValueError):
    """Not a notebook jaxlint can read; the message says why, ``line``/``col`` where (1-based)."""

    def __init__(self, message: str, line: int = 1, col: int = 1):
        super().__init__(message)
        self.line, self.col = line, col


# -- reading the file -------------------------------------------------------------------------


def read_cells(data: bytes | str) -> list:
    """``[(cell number, source)]`` for the code cells, numbered from 1 among all cells."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise NotebookError(f"not valid UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        nb = json.loads(data)
    except RecursionError:
        raise NotebookError("not a notebook (JSON nested too deeply)") from None
    except ValueError as e:
        line, col = getattr(e, "lineno", 1), getattr(e, "colno", 1)
        raise NotebookError(f"not a notebook (invalid JSON: {e})", line, col) from None
    if not isinstance(nb, dict):
        raise NotebookError("not a notebook (the JSON is not an object)")
    major = nb.get("nbformat")
    if major is not None and major != 4:
        raise NotebookError(f"unsupported notebook format {major!r} (nbformat 4 is read; "
                            "convert with `jupyter nbconvert --to notebook`)")
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise NotebookError("not a notebook (no 'cells' list)")
    if not _is_python(nb.get("metadata")):
        return []
    out = []
    for i, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise NotebookError(f"not a notebook (cell {i} has no 'cell_type')")
        if cell["cell_type"] != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotebookError(f"not a notebook (cell {i}: 'source' is not text)")
        out.append((i, source))
    return out


def _is_python(metadata) -> bool:
    if not isinstance(metadata, dict):
        return True
    names = []
    info = metadata.get("language_info")
    if isinstance(info, dict):
        names.append(info.get("name"))
    spec = metadata.get("kernelspec")
    if isinstance(spec, dict):
        names.append(spec.get("language"))
    return all(not isinstance(n, str) or n.strip().lower() in ("python", "python3", "ipython", "")
               for n in names)


# -- IPython syntax -> Python, line for line ----------------------------------------------------


def cell_lines(source: str) -> list:
    """The cell as Python: ``[(text, col_delta)]``, one entry per line of the cell's source;
    ``col_delta`` is what to add to a column of ``text`` to get the column in the cell."""
    lines = _source_lines(source)
    deltas = [0] * len(lines)
    first = _first_code_line(lines, 0)
    if first is None:
        return list(zip(lines, deltas))
    _dedent(lines, deltas, first)
    first = _cell_magic_after_comments(lines, first)
    while lines[first].startswith("%%"):
        name = re.match(r"%%(\S*)", lines[first]).group(1)
        if name not in PYTHON_CELL_MAGICS:
            return [("", 0)] * len(lines)
        lines[first] = ""
        body = _first_code_line(lines, first + 1)
        if body is None:
            return list(zip(lines, deltas))
        _dedent(lines, deltas, body)
        first = body
        if name not in _CELL_RUNNING_MAGICS:
            break
    _blank_escapes(lines, deltas, first)
    return list(zip(lines, deltas))


def _source_lines(source: str) -> list:
    """A cell's lines, split as IPython splits them; no line after its last newline."""
    lines = _NEWLINE.split(source)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _cell_magic_after_comments(lines: list, first: int) -> int:
    """Colab runs a cell magic that follows comment lines (its form annotations, ``#@title``)
    as the cell's magic; IPython alone would not. The ``%%`` line's index when only comments
    and blank lines come before it, else ``first``."""
    for i in range(first, len(lines)):
        stripped = lines[i].strip()
        if stripped.startswith("%%"):
            return i if lines[i].startswith("%%") else first
        if stripped and not stripped.startswith("#"):
            return first
    return first


def _first_code_line(lines: list, start: int) -> Optional[int]:
    for i in range(start, len(lines)):
        if lines[i] and not lines[i].isspace():
            return i
    return None


def _dedent(lines: list, deltas: list, first: int) -> None:
    """IPython's ``leading_indent``: the first line's indentation is removed wherever present."""
    prefix = lines[first][: len(lines[first]) - len(lines[first].lstrip(" \t"))]
    if not prefix:
        return
    for i in range(first, len(lines)):
        if lines[i].startswith(prefix):
            lines[i] = lines[i][len(prefix):]
            deltas[i] += len(prefix)


def _blank_escapes(lines: list, deltas: list, start: int) -> None:
    depth, quote, cont = 0, None, False
    i = start
    while i < len(lines):
        if depth == 0 and quote is None and not cont:
            line = lines[i]
            stripped = line.lstrip()
            indent = line[: len(line) - len(stripped)]
            replacement = _escape(stripped, indent)
            if replacement is not None:
                new, moved = replacement
                if new is None:  # not Python: blank it and its backslash continuations
                    lines[i] = indent + "pass" if indent else ""
                    j = i
                    while line.endswith("\\") and j + 1 < len(lines):
                        j += 1
                        line, lines[j] = lines[j], ""
                    i = j + 1
                    continue
                lines[i] = new
                deltas[i] += moved
            depth, quote, cont, last = _scan(lines[i], depth, quote)
            if last == "?" and depth == 0 and quote is None and not cont:
                lines[i] = indent + "pass" if indent else ""  # `obj?` / `obj??`: help
        else:
            depth, quote, cont, _ = _scan(lines[i], depth, quote)
        i += 1


def _escape(stripped: str, indent: str) -> Optional[tuple]:
    """For a logical line that starts with IPython syntax: (Python text or None to blank it,
    how far the kept text moved left). None for a Python line."""
    if not stripped:
        return None
    m = _ASSIGN_ESCAPE.match(stripped)
    if m:
        return f"{indent}{m.group(1)} = None", 0
    if not stripped.startswith(_ESCAPES):
        if _AUTOMAGIC.match(stripped) and not _parses(stripped):
            return None, 0  # ``cd /content/repo``, ``pip install x``: IPython's automagic, not Python
        return None
    m = _LINE_MAGIC.match(stripped)
    if m and m.group(1) in PYTHON_LINE_MAGICS:
        rest = m.group(2)
        if m.group(1) == "timeit":
            rest = rest[_TIMEIT_OPTIONS.match(rest).end():]
        stmt = rest.strip()
        if stmt and not stmt.endswith("?") and _parses(stmt):
            return indent + stmt, len(stripped) - len(rest.lstrip())
    return None, 0


def _parses(text: str) -> bool:
    return parse_source(text, "<magic>", FLAGS)[1] is None


def _scan(line: str, depth: int, quote: Optional[str]) -> tuple:
    """Carry (bracket depth, open string quote) across one physical line. Returns
    (depth, quote, continued with a backslash, last code character)."""
    i, n, last = 0, len(line), ""
    while i < n:
        if quote is not None:
            while i < n:
                c = line[i]
                if c == "\\":
                    i += 2
                    continue
                if line.startswith(quote, i):
                    break
                i += 1
            if i >= n:  # the string goes on: triple-quoted, or a backslash-newline
                if len(quote) == 1 and not line.endswith("\\"):
                    quote = None  # an unterminated string: a syntax error the parser reports
                return depth, quote, False, last
            i += len(quote)
            quote, last = None, "'"
            continue
        c = line[i]
        if c == "#":
            return depth, None, False, last
        if c == "'" or c == '"':
            quote = line[i:i + 3] if line.startswith(c * 3, i) else c
            i += len(quote)
            if i >= n:  # the line ends right after an opening triple quote
                return depth, quote if len(quote) == 3 else None, False, last
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        if not c.isspace():
            last = c
        i += 1
    return depth, None, line.endswith("\\"), last


# -- the module --------------------------------------------------------------------------------


def cite_in_cell(cell: int, line: int) -> str:
    """How a message cites a line of the notebook: the line in its cell, and the cell."""
    return f"line {line} of cell {cell}"


@dataclass
class Module:
    """Code cells joined into one module; ``lines[k]`` says where module line ``k + 1`` came
    from: ``(cell number, line in the cell, column delta)``."""

    text_lines: list = field(default_factory=list)
    lines: list = field(default_factory=list)
    spans: list = field(default_factory=list)  # (cell number, first module line, number of lines)
    timed: list = field(default_factory=list)  # (magic, first, last module line) that %time/%timeit time
    cite: Callable = cite_in_cell  # (cell, line in the cell) -> the words for a cited line

    @property
    def text(self) -> str:
        return "\n".join(self.text_lines) + "\n" if self.text_lines else ""

    def where(self, line: int) -> tuple:
        """(cell number, line in the cell, column delta) of module line ``line``."""
        return self.lines[min(max(line, 1), len(self.lines)) - 1]

    def locate(self, f: Finding) -> Finding:
        """``f`` (at a module line) with its cell, line in the cell and column in the cell; the
        module lines its message cites (``rule.Line``) become the cell and line they are in."""
        if not self.lines:
            return f
        cell, cell_line, delta = self.where(f.line)
        message = f.message
        for offset, line in reversed(f.cites):
            cited = f"line {line}"
            if message.startswith(cited, offset):  # as rule.render wrote it
                message = message[:offset] + self.cite(*self.where(line)[:2]) + message[offset + len(cited):]
        return f.replace(col=f.col + delta, cell=cell, cell_line=cell_line, message=message, cites=())

    def blank_broken_cells(self, path: str) -> list:
        """Once the joined cells failed to parse: each code cell that does not parse on its own
        is blanked (its lines left empty, so no line moves) and becomes one JAX000 finding at its
        module line. Empty when every cell parses alone (only the cells together fail: a cell
        continues into the next one)."""
        errors, broken = [], []
        for number, start, count in self.spans:
            _, cell_error = parse("\n".join(self.text_lines[start - 1:start - 1 + count]) + "\n", path)
            if cell_error is not None:
                broken.append((start, count))
                errors.append(cell_error.replace(line=start - 1 + cell_error.line))
        for start, count in broken:
            self.text_lines[start - 1:start - 1 + count] = [""] * count
        return errors


def join(cells: Iterable) -> Module:
    """``cells``: ``[(cell number, source)]`` in order."""
    mod = Module()
    for number, source in cells:
        start = len(mod.text_lines) + 1
        converted = cell_lines(source)
        for k, (text, delta) in enumerate(converted, 1):
            mod.text_lines.append(text)
            mod.lines.append((number, k, delta))
        mod.spans.append((number, start, len(converted)))
        mod.timed.extend((magic, start + first - 1, start + last - 1) for magic, first, last in timed_lines(source))
    return mod


def timed_lines(source: str) -> list:
    """``(magic, first, last)``: the lines of a cell (1-based) whose statements a timing magic
    (``"%timeit"``, ``"%%time"``, ...) runs and times, ``%time``/``%timeit`` on a line of its own at the top level (that line) or
    ``%%time``/``%%timeit`` (the cell's body after the magic's line)."""
    lines = _source_lines(source)
    first = _first_code_line(lines, 0)
    if first is None:
        return []
    first = _cell_magic_after_comments(lines, first)
    head = lines[first].strip()
    while head.startswith("%%"):
        name = re.match(r"%%(\S*)", head).group(1)
        body = _first_code_line(lines, first + 1)
        if name in _CELL_RUNNING_MAGICS and body is not None and lines[body].startswith("%%"):
            first, head = body, lines[body].strip()  # ``%%capture cap`` then ``%%time``: the inner magic times
            continue
        return [("%%" + name, body + 1, len(lines))] if name in ("time", "timeit") and body is not None else []
    return [(line.split(None, 1)[0], i + 1, i + 1) for i, line in enumerate(lines)
            if line.startswith(("%time ", "%timeit "))]


# A cell marker of a ``.py`` script in the percent format (jupytext, VS Code, Spyder, PyCharm): the
# script runs cell by cell in IPython, so its cells may hold IPython syntax (``%load_ext autoreload``).
_PERCENT_CELL = re.compile(r"^# ?%%", re.M)


def percent_script(text: str) -> Optional[str]:
    """A percent-format script's text with its IPython syntax made Python as in a notebook's cells
    (each cell between ``# %%`` markers read by :func:`cell_lines`), one line for each of its
    lines; None when the text has no cell marker or nothing changes."""
    if not _PERCENT_CELL.search(text):
        return None
    lines = _source_lines(text)
    out: list = []
    start = 0
    for i in range(len(lines) + 1):
        if i == len(lines) or (i > start and _PERCENT_CELL.match(lines[i])):
            cell = lines[start:i]
            out.extend(t for t, _ in cell_lines("\n".join(cell) + "\n")) if cell else None
            start = i
    new = "\n".join(out) + "\n"
    return None if new == text or len(out) != len(lines) else new


def parse(text: str, path: str):
    """(tree, None) or (None, JAX000 finding): ``source.parse_source`` with top-level ``await``."""
    return parse_source(text, path, FLAGS)

