"""The IPython/Jupyter extension: ``%load_ext jaxlint``.

* Every cell is checked statically before it runs, with the cells run before it as context (an
  import in an earlier cell counts), and its findings are printed to stderr above the cell's own
  output, one line each: ``jaxlint: line 4:col 12: JAX101 message`` (line and column in the
  cell). IPython syntax is handled as in ``jaxlint check`` on a notebook (jaxlint/notebook.py).
  The cells the session ran before ``%load_ext jaxlint`` count too (IPython's input history).
  ``%jaxlint off`` / ``%jaxlint on`` stop and resume it; ``%jaxlint reset`` forgets the earlier
  cells.
* ``%%jaxlint_trace`` runs its cell under the dynamic mode (``jaxlint.trace.audit()``) and prints
  the report of ``jaxlint trace`` for it to stdout: compilations and retrace reasons, host
  transfers per line, jaxpr facts, and the cell's static findings checked against the run.
  Cells appear in it as ``In [N]:line``. ``%%jaxlint_trace --format json`` prints the JSON report.

Nothing here imports IPython or JAX at import time; ``jaxlint/__init__.py`` forwards
``load_ipython_extension`` here only when IPython calls it.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Optional

from .rule import Finding

_LINTERS: dict = {}  # id(shell) -> its _Linter


def load_ipython_extension(ip) -> None:
    if id(ip) in _LINTERS:
        return
    linter = _Linter(ip)
    linter.history = earlier_cells(ip)
    _LINTERS[id(ip)] = linter
    ip.events.register("pre_run_cell", linter.pre_run_cell)
    ip.events.register("post_run_cell", linter.post_run_cell)
    ip.register_magic_function(linter.trace_magic, magic_kind="cell", magic_name="jaxlint_trace")
    ip.register_magic_function(linter.switch_magic, magic_kind="line", magic_name="jaxlint")


def unload_ipython_extension(ip) -> None:
    linter = _LINTERS.pop(id(ip), None)
    if linter is None:
        return
    for event, callback in (("pre_run_cell", linter.pre_run_cell), ("post_run_cell", linter.post_run_cell)):
        try:
            ip.events.unregister(event, callback)
        except ValueError:
            pass
    magics = getattr(getattr(ip, "magics_manager", None), "magics", {})
    magics.get("cell", {}).pop("jaxlint_trace", None)
    magics.get("line", {}).pop("jaxlint", None)


def check_cell(source: str, history: list, rules: list, line_offset: int = 0) -> tuple:
    """(findings of ``source`` located in it, whether it parsed). ``history``: the sources of
    the cells run before it, which give it context but whose own findings are not reported.
    A line a message cites reads ``line L`` in this cell (plus ``line_offset``, where the lines
    shown are numbered differently) and ``line L of an earlier cell`` in another."""
    from .engine import PROJECT, check_module
    from .notebook import join

    current = len(history) + 1
    cells = list(enumerate(history, 1)) + [(current, source)]
    mod = join(cells)
    mod.cite = lambda cell, line: f"line {line + line_offset}" if cell == current else f"line {line} of an earlier cell"
    project_path = os.path.join(os.getcwd(), "__jaxlint_cell__.py")  # the cwd's modules resolve
    PROJECT.clear()  # the user may have edited them since the last cell
    findings = [f for f in check_module(mod, "<cell>", rules, project_path=project_path)
                if f.cell == current and f.opt_in is None]
    return findings, not any(f.code == "JAX000" for f in findings)


def earlier_cells(ip) -> list:
    """The cells this session ran before the extension was loaded (or reloaded) that parse: an
    import run before ``%load_ext jaxlint`` still counts."""
    try:
        raw = list(ip.history_manager.input_hist_raw[1:])
    except Exception:
        return []
    return [s for s in raw if isinstance(s, str) and s.strip() and parses(s)]


def parses(source: str) -> bool:
    """Whether the cell is valid Python once its IPython syntax is blanked."""
    from .notebook import join, parse

    return parse(join([(1, source)]).text, "<cell>")[1] is None


def format_findings(findings: list) -> str:
    return "".join(f"jaxlint: line {f.cell_line}:col {f.col + 1}: {f.code} {f.message}\n" for f in findings)


class _Linter:
    def __init__(self, ip):
        self.ip = ip
        self.enabled = True
        self.history: list = []  # sources of the cells run so far that parse
        self._pending: Optional[str] = None  # the running cell, added to history once it ran
        self._nested = 0  # > 0 while %%jaxlint_trace runs its cell (its events are not a new cell)
        self._rules = None

    # -- static check of each cell -------------------------------------------------------------
    def rules(self) -> list:
        if self._rules is None:
            from .config import ConfigError, load_config
            from .registry import ALL_RULES, select_rules

            try:
                cfg = load_config(os.getcwd())
                self._rules = select_rules(ALL_RULES, cfg.select, cfg.ignore)
                from . import jaxversion

                jaxversion.configure(cfg.jax_version)
            except ConfigError as e:
                print(f"jaxlint: config error ({e}); checking with every rule", file=sys.stderr)
                self._rules = select_rules(ALL_RULES, ["JAX"])
        return self._rules

    def pre_run_cell(self, info=None) -> None:
        if self._nested:
            return
        self._pending = None
        raw = getattr(info, "raw_cell", None)
        if not raw or raw.isspace():
            return
        if not self.enabled:  # not checked, but still context for the cells checked later
            self._pending = raw if parses(raw) else None
            return
        try:
            findings, parsed = check_cell(raw, self.history, self.rules())
        except Exception as e:  # the linter must never stop the user's cell
            print(f"jaxlint: internal error (please report): {type(e).__name__}: {e}", file=sys.stderr)
            return
        if parsed:
            self._pending = raw
        # A cell that does not parse gets IPython's own SyntaxError; no second report of it.
        out = format_findings([f for f in findings if f.code != "JAX000"])
        if out:
            sys.stderr.write(out)
            sys.stderr.flush()

    def post_run_cell(self, result=None) -> None:
        if self._nested:
            return
        if self._pending is not None:
            self.history.append(self._pending)
            self._pending = None

    def switch_magic(self, line: str = "") -> None:
        """%jaxlint on | off | reset"""
        word = line.strip().lower()
        if word in ("on", "off"):
            self.enabled = word == "on"
        elif word == "reset":
            self.history.clear()
            self._rules = None
        else:
            print("usage: %jaxlint on | off | reset", file=sys.stderr)
            return
        print(f"jaxlint: cell checks {'on' if self.enabled else 'off'}"
              + (" (earlier cells forgotten)" if word == "reset" else ""))

    # -- %%jaxlint_trace -----------------------------------------------------------------------
    def trace_magic(self, line: str = "", cell: str = ""):
        fmt = _trace_format(line)
        if fmt is None:
            print("usage: %%jaxlint_trace [--format text|json]", file=sys.stderr)
            return None
        from .trace import missing_jax

        missing = missing_jax()
        if missing:
            print(missing, file=sys.stderr)
            return None
        from .trace import audit
        from .trace import report as rep
        from .trace.runner import environment

        body, offset = _numbered_like_the_cell(cell)
        names: list = []
        compiler = self.ip.compile
        own = "cache" in vars(compiler)
        saved = vars(compiler).get("cache")
        real_cache = compiler.cache

        def cache(*args, **kwargs):  # the file name IPython compiles the cell under
            name = real_cache(*args, **kwargs)
            names.append(name)
            return name

        self._nested += 1
        compiler.cache = cache
        try:
            with audit() as a:
                result = self.ip.run_cell(body, store_history=False)
        finally:
            if own:
                compiler.cache = saved
            else:
                try:
                    del compiler.cache
                except AttributeError:
                    pass
            self._nested -= 1
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        failures = []
        if error is not None and error.__traceback__ is not None:
            failures = [(fr.f_code.co_filename, ln, type(error).__name__) for fr, ln in traceback.walk_tb(error.__traceback__)]
        cell_name = names[0] if names else None
        count = getattr(self.ip, "execution_count", None)
        findings = None
        if cell_name is not None:
            try:
                found, _ = check_cell(cell, self.history, self.rules(), line_offset=offset)
                findings = [Finding(f.cell_line + offset, f.col, f.code, f.message, f.name, cell_name)
                            for f in found if f.code != "JAX000"]
            except Exception as e:
                a.collector.partial.append(f"static cross-check failed: {type(e).__name__}: {e}")
        try:
            report = rep.build(a.collector, findings, 0 if error is None else 1, failures,
                               f"In [{count}]", environment())
            labels = dict(_cell_labels(self.ip))
            if cell_name is not None:
                labels[cell_name] = f"In [{count}]"
            _relabel(report, labels)
            out = rep.as_json(report) if fmt == "json" else rep.text(report)
        except Exception as e:  # the cell ran; only the report is lost
            print(f"jaxlint trace: no report ({type(e).__name__}: {e})", file=sys.stderr)
            return None
        sys.stdout.write(out)
        sys.stdout.flush()
        return None


def _trace_format(line: str) -> Optional[str]:
    words = line.replace("=", " ").split()
    if not words:
        return "text"
    if len(words) == 2 and words[0] == "--format" and words[1] in ("text", "json"):
        return words[1]
    return None


def _numbered_like_the_cell(cell: str) -> tuple:
    """The body to run so that its line numbers are those of the cell (whose line 1 is
    ``%%jaxlint_trace``), and the offset from a line of ``cell`` to a line of that body."""
    lines = cell.split("\n")
    first = next((ln for ln in lines if ln.strip()), "")
    if first.startswith("%%"):  # another cell magic must stay on the first line; IPython then
        blank = len(lines) - len(cell.lstrip("\n").split("\n"))  # drops the empty lines above it
        return cell, -blank
    indent = first[: len(first) - len(first.lstrip(" \t"))]
    if indent:  # IPython dedents a cell indented as a whole; the comment line would stop that
        lines = [ln[len(indent):] if ln.startswith(indent) else ln for ln in lines]
    return "# %%jaxlint_trace\n" + "\n".join(lines), 1


def _cell_labels(ip):
    """``{file name: "In [N]"}`` for the cells IPython compiled (``<ipython-input-N-...>``, or
    ipykernel's ``/tmp/ipykernel_*/....py``)."""
    numbers = getattr(getattr(ip, "compile", None), "_filename_map", None)
    if isinstance(numbers, dict):
        for name, n in list(numbers.items()):
            yield name, f"In [{n}]"


def _relabel(obj, labels: dict) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "file" and isinstance(v, str):
                obj[k] = labels.get(v, v)
            else:
                _relabel(v, labels)
    elif isinstance(obj, list):
        for v in obj:
            _relabel(v, labels)
