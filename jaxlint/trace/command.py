"""Argument handling for ``jaxlint trace``; kept apart so ``--help`` needs no JAX."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

EXIT_ERROR = 2
_VALUED = {"--format", "--output", "-o", "--max-compiles", "--max-transfers-per-line", "--html", "--chrome-trace",
           "--inspect", "--arg", "--args", "--static", "--top", "--max-equations", "--budget", "--budget-memory",
           "--donation-threshold"}

USAGE = ("jaxlint trace [options] script.py [args ...]\n       jaxlint trace [options] -m module [args ...]\n"
         "       jaxlint trace --inspect module:function --arg SPEC ... [--args SPEC,SPEC ...]")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jaxlint trace", usage=USAGE,
        description="Run a program and report its compilations, retrace reasons, host transfers and "
                    "jaxpr facts, checked against the static findings. The program's output, exit code "
                    "and traceback pass through; the report goes to stderr.")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the report to FILE")
    p.add_argument("--html", metavar="FILE",
                   help="also write the report as one self-contained HTML page (timeline of compilations, "
                        "transfer chart, tables)")
    p.add_argument("--chrome-trace", metavar="FILE",
                   help="also write the compile/trace/transfer events as Trace Event JSON (Perfetto, "
                        "chrome://tracing)")
    from .budget import count_option, parse_option

    p.add_argument("--max-compiles", type=count_option, metavar="N",
                   help="exit 3 if any function compiled more than N times")
    p.add_argument("--max-transfers-per-line", type=count_option, metavar="N",
                   help="exit 3 if any source line made more than N host transfers")

    p.add_argument("--budget", action="append", type=parse_option, metavar="PATTERN=N",
                   help="exit 3 if a function whose (qualified) name matches the glob PATTERN compiled more "
                        "than N times; repeatable, the most specific pattern applies ('*=N': every function); "
                        "replaces the budget table of [tool.jaxlint.trace]")
    from .budget import memory_option, size_option

    p.add_argument("--budget-memory", action="append", type=memory_option, metavar="PATTERN=SIZE",
                   help="exit 3 if a compiled program of a function matching the glob PATTERN needs more than SIZE "
                        "('2 GB', '512 MiB'): XLA's peak, or arguments + outputs + temporaries - aliased where "
                        "this jaxlib reports no peak; repeatable, the most specific pattern applies; replaces "
                        "budget-memory of [tool.jaxlint.trace]")
    p.add_argument("--donation-threshold", type=size_option, metavar="SIZE",
                   help="show donation advice in the text report from this many bytes not donated (default 1 MiB; "
                        "the JSON has every candidate)")
    p.add_argument("--fail-on-recompile", action="store_true",
                   help="exit 3 if any function compiled more than once")
    p.add_argument("--no-static", action="store_true", help="skip the static cross-check")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module as `python -m` does")
    from .inspect_cli import add_arguments

    add_arguments(p)
    return p


def split(argv: Sequence[str]) -> tuple:
    """(jaxlint's options, script or None, the program's own arguments)."""
    argv = list(argv)
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return argv[:i], (argv[i + 1] if i + 1 < len(argv) else None), argv[i + 2:]
        if a == "-m":
            return argv[: i + 2], None, argv[i + 2:]
        if a.startswith("-"):
            i += 2 if a in _VALUED else 1
            continue
        return argv[:i], a, argv[i + 1:]
    return argv, None, []


def main(argv: Sequence[str]) -> int:
    own, script, rest = split(argv)
    p = parser()
    try:
        args = p.parse_args(own)
    except SystemExit as e:
        return int(e.code or 0)
    if args.inspect:
        from . import missing_jax
        from .inspect_cli import main as inspect_main

        return inspect_main(args, script, rest, missing_jax)
    if (script is None) == (args.module is None):
        p.print_usage(sys.stderr)
        print("jaxlint trace: give a script or -m MODULE", file=sys.stderr)
        return EXIT_ERROR
    from . import missing_jax

    missing = missing_jax()
    if missing:
        print(missing, file=sys.stderr)
        return EXIT_ERROR
    from . import runner
    from ..config import ConfigError, load_config

    try:  # [tool.jaxlint.trace] of the nearest pyproject.toml above the script (the cwd with -m)
        args.trace_config = load_config(os.path.dirname(os.path.abspath(script)) if script else os.getcwd()).trace
    except ConfigError as e:
        print(f"jaxlint trace: {e}", file=sys.stderr)
        return EXIT_ERROR
    label = script or f"-m {args.module}"
    args.report_stream = sys.stderr  # the stderr the run started with: the program may replace sys.stderr
    args.static_check = None
    if not args.no_static and script is not None and os.path.isfile(script):
        # the main file's static check runs in a child process while the program runs
        args.static_check = runner.StaticCheck([os.path.realpath(script)])

    def emit(code: int, collector, failures: list, files: list) -> int:
        return write_report(args, label, code, collector, failures, files)

    try:
        code, collector, failures, files = runner.run(script, args.module, rest, on_os_exit=emit)
    except FileNotFoundError as e:
        print(f"jaxlint trace: {e}", file=sys.stderr)
        return EXIT_ERROR
    try:
        sys.stdout.flush()
    except Exception:  # the program closed or replaced its stdout
        pass
    return emit(code, collector, failures, files)


def write_report(args: argparse.Namespace, label: str, code: int, collector, failures: list, files: list) -> int:
    """Build the report, write it to stderr (and ``--output``); return jaxlint's exit code.

    The one place a report is made: after the run, and from the program's ``os._exit``
    (see ``runner.run``), which never returns to ``main``. When the report cannot be made,
    one line says why and the program's exit code is kept.
    """
    from . import budget
    from . import report as rep
    from . import runner

    jax_imported = "jax" in sys.modules  # jaxlint imports it only when the program (or a library) does
    try:
        if not jax_imported and args.format == "text" and not getattr(args, "html", None):
            started = getattr(args, "static_check", None)
            if started is not None:
                started.cancel()
            out = (f"jaxlint trace: {rep._where(label, None) if not label.startswith('-m') else label} exited with "
                   f"{code}; it never imported jax, so there is nothing to report\n")
            return _write_out(args, out, code, None, collector, label, tripped=[])
        findings = None
        if not args.no_static:
            try:
                started = getattr(args, "static_check", None)
                findings = started.findings(files) if started is not None else runner.static_findings(files)
            except Exception as e:  # the static check must not cost the user the runtime report
                collector.partial.append(f"static cross-check failed: {type(e).__name__}: {e}")
        threshold = args.donation_threshold
        if threshold is None:
            threshold = getattr(getattr(args, "trace_config", None), "donation_threshold", None)
        env = runner.environment() if jax_imported else {"jax": None, "backend": None,
                                                           "python": sys.version.split()[0]}
        report = rep.build(collector, findings, code, failures, label, env,
                           **({} if threshold is None else {"donation_threshold": threshold}))
        report["jax_imported"] = jax_imported
        tripped, report["budgets"] = budget.evaluate(report, budget.settings(args, getattr(args, "trace_config", None)))
        report["gates"] = tripped
        out = rep.as_json(report) if args.format == "json" else rep.text(report)
        if args.format == "text":
            out += budget.unmatched_text(report) + budget.gate_text(report)
    except Exception as e:
        _say(f"jaxlint trace: no report ({type(e).__name__}: {e})")
        return code
    return _write_out(args, out, code, report, collector, label, tripped)


def _write_out(args: argparse.Namespace, out: str, code: int, report, collector, label: str, tripped: list) -> int:
    """Write the report text ``out`` (and --html/--chrome-trace from ``report``); the exit code."""
    from . import runner

    # to the stderr the run started with, not the program's replacement (``sys.stderr =
    # io.StringIO()`` would swallow it); if the program closed that one, to the process's own
    stream = getattr(args, "report_stream", None) or sys.stderr
    if getattr(stream, "closed", False):  # closing sys.stderr leaves file descriptor 2 open
        try:
            stream = open(2, "w", encoding=getattr(stream, "encoding", None) or "utf-8", errors="backslashreplace",
                          closefd=False)
        except OSError:
            stream = sys.__stderr__ or sys.stderr
    try:
        stream.write(out)
        stream.flush()
    except Exception as e:  # the program closed or broke its stderr
        _say(f"jaxlint trace: cannot write the report to stderr ({type(e).__name__}: {e})")
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(out)
        except OSError as e:
            _say(f"jaxlint trace: cannot write {args.output}: {e}")
            return code or EXIT_ERROR
    unwritten = False
    for path, kind in ((getattr(args, "html", None), "html"), (getattr(args, "chrome_trace", None), "chrome")):
        if not path or (kind == "html" and report is None):
            continue
        try:
            if kind == "html":
                from . import html

                html.write(path, report, collector, label)
            else:
                from . import chrome_trace

                chrome_trace.write(path, collector, label)
        except Exception as e:  # OSError, or a bug in the rendering: exit 2 (a failing program keeps its code)
            _say(f"jaxlint trace: cannot write {path}: {type(e).__name__}: {e}")
            unwritten = True
    if unwritten:
        return code or EXIT_ERROR
    if code == 0 and tripped:
        return runner.EXIT_GATE
    return code


def _say(message: str) -> None:
    """One line on the process's real stderr, whatever the program did to ``sys.stderr``."""
    try:
        print(message, file=sys.__stderr__ or sys.stderr, flush=True)
    except Exception:
        pass
