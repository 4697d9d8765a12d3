"""The ``jaxlint`` command: ``check``, ``rules``, ``explain``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from . import __version__, reporters
from .config import ConfigError, load_config, unknown_code_error
from .files import discover
from .registry import fixable_rule_codes, is_selected, rule_codes
from .rule import Finding
from .source import PARSE_ERROR, FileResult

# The engine (and with it the model and the rules) is imported when a file is checked, not
# before: a run whose every file is served by the result cache never loads it.

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

_worker_rules = None


def _codes(value: str) -> list:
    """``--select JAX1,JAX201``: the codes, each a known code or a prefix of one (else a usage error)."""
    codes = [c.strip().upper() for c in value.replace(" ", ",").split(",") if c.strip()]
    error = unknown_code_error(codes)
    if error:
        raise argparse.ArgumentTypeError(error)
    return codes


def _jax_version(value: str) -> tuple:
    """``--jax-version 0.4.30``: a JAX release (else a usage error)."""
    from . import jaxversion

    try:
        return jaxversion.parse(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jaxlint", description="Find code that wastes accelerator time in JAX programs.")
    p.add_argument("--version", action="version", version=f"jaxlint {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    c = sub.add_parser("check", help="check Python files, Jupyter notebooks and folders (default: .)")
    c.add_argument("paths", nargs="*", default=["."], metavar="PATH")
    c.add_argument("--select", type=_codes, help="comma-separated code prefixes to report (replaces config)")
    c.add_argument("--ignore", type=_codes, help="comma-separated code prefixes to skip (replaces config)")
    c.add_argument("--extend-select", type=_codes, default=[], help="add to the selected prefixes")
    c.add_argument("--extend-ignore", type=_codes, default=[], help="add to the ignored prefixes")
    c.add_argument("--format", choices=sorted(reporters.FORMATS), default="text",
                   help="text: flake8's path:line:col: CODE message (default); json: one object per finding, "
                        "with its evidence; github: workflow annotations; sarif: SARIF 2.1.0 for code scanning")
    c.add_argument("-j", "--jobs", type=int, default=0, help="worker processes (default: all cores)")
    c.add_argument("--statistics", action="store_true", help="print a count per code at the end")
    c.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    c.add_argument("--pedantic", action="store_true",
                   help="also report findings that are right but rarely worth changing (a sync in test code, "
                        "a jit rebuilt in a function that runs once); the JSON output says why each is opt-in")
    c.add_argument("--fail-on-oversize", action="store_true",
                   help="report a file too large to analyze (over 1,000,000 characters, such as generated code) "
                        "as a JAX000 finding, which fails the run; by default it is named on stderr and the exit "
                        "code is unaffected (fail-on-oversize = true in [tool.jaxlint])")
    c.add_argument("--config", metavar="PYPROJECT", help="read [tool.jaxlint] from this file")
    c.add_argument("--jax-version", type=_jax_version, metavar="VERSION",
                   help="the oldest JAX the project supports, such as 0.4.30 (jax-version in [tool.jaxlint]): "
                        "fixes rewrite only to names that version has")
    c.add_argument("--stdin-display-name", metavar="PATH", default="stdin",
                   help="with PATH `-` (source read from stdin, as editors send it): the path to report and to "
                        "find [tool.jaxlint] and the project's other modules from (default: stdin)")
    c.add_argument("--explain-finding", metavar="PATH:LINE",
                   help="say why each finding on that line was made: the rule, the facts and the naming "
                        "conventions it rests on (opt-in findings included)")
    c.add_argument("--cache-dir", metavar="DIR",
                   help="where to keep results of unchanged files (default: .jaxlint_cache at the project root; "
                        "outside a project, the user's cache folder, such as ~/.cache/jaxlint)")
    c.add_argument("--no-cache", action="store_true", help="check every file, read and write no cache")
    c.add_argument("--fix", action="store_true",
                   help="apply the safe fixes (findings marked [*]) in place, then report what remains")
    c.add_argument("--diff", action="store_true",
                   help="print the safe fixes as a unified diff, write nothing; exit 1 when there is one (not with --fix)")
    sub.add_parser("trace", help="run a program and report what JAX did (jaxlint trace --help)", add_help=False)
    sub.add_parser("rules", help="list the rules")
    cv = sub.add_parser("conventions", help="list the decisions made from names, with the words in force")
    cv.add_argument("path", nargs="?", default=".", help="read [tool.jaxlint.conventions] for this path")
    cv.add_argument("--config", metavar="PYPROJECT", help="read [tool.jaxlint] from this file")
    e = sub.add_parser("explain", help="explain a rule, with a bad and a good example")
    e.add_argument("code", help="a code (JAX201) or a rule name (host-transfer-in-loop)")
    return p


def _init_worker(codes: Sequence[str], words: Optional[dict] = None, jax_version: Optional[tuple] = None) -> None:
    global _worker_rules
    from . import conventions, jaxversion
    from .registry import RULES_BY_CODE

    conventions.configure(words)
    jaxversion.configure(jax_version)
    _worker_rules = [RULES_BY_CODE[c]() for c in codes]


def _check_one(path: str) -> FileResult:
    from .engine import check_path

    return check_path(path, _worker_rules)


def run_files(files: Sequence[str], codes: Sequence[str], jobs: int) -> list:
    """Check files with the selected rule codes, in parallel when it pays."""
    if not files:  # every file served by the result cache: load no rule
        return []
    if jobs <= 0:
        jobs = os.cpu_count() or 1
    # Largest files first: a 10,000-line module taken last would leave the other workers idle
    # while it is checked, and a large module checked before its importers is summarized for
    # them from its tree (ProjectResolver.offer). Results come back in the order of ``files``.
    order = sorted(range(len(files)), key=lambda i: -_size(files[i]))
    out: list = [None] * len(files)
    from . import conventions, jaxversion

    words = conventions.active().changed()
    oldest = jaxversion.active()
    if jobs == 1 or len(files) < 8:
        _init_worker(codes, words, oldest)
        for i in order:
            out[i] = _check_one(files[i])
        return out
    import multiprocessing  # only when files are checked in parallel

    methods = multiprocessing.get_all_start_methods()
    mp = multiprocessing.get_context("fork" if "fork" in methods else None)
    if "fork" in methods:  # loaded once here, shared by the forked workers instead of loaded in each
        from . import engine, registry  # noqa: F401

        registry._catalog()
    chunk = max(1, min(4, len(files) // (jobs * 8)))  # small chunks, for the same reason
    with mp.Pool(jobs, initializer=_init_worker, initargs=(list(codes), words, oldest)) as pool:
        for i, res in zip(order, pool.imap(_check_one, [files[i] for i in order], chunksize=chunk)):
            out[i] = res
    return out


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _check_files(files: Sequence[str], codes: Sequence[str], args) -> list:
    """Results for ``files`` in order: from the cache where still valid, checked otherwise."""
    engine = sys.modules.get(__package__ + ".engine")
    if engine is not None:  # files may have changed since an earlier run in this process
        engine.PROJECT.clear()
    if args.no_cache:
        return run_files(files, codes, args.jobs)
    from .cache import ResultCache, default_folder, settings_key

    folder = args.cache_dir or default_folder(args.paths[0] if args.paths else ".")
    cache = ResultCache(folder, settings_key(codes))
    results: list = [cache.get(f) for f in files]
    missing = [i for i, r in enumerate(results) if r is None]
    for i, res in zip(missing, run_files([files[i] for i in missing], codes, args.jobs)):
        results[i] = res
        cache.put(res)
    cache.save()
    return results


def _explain_target(value: str):
    path, sep, line = value.rpartition(":")
    if not sep or not path or not line.isdigit() or int(line) < 1:
        return None
    return path, int(line)


def explain_findings(findings, line: int) -> str:
    """The text of ``--explain-finding``: each finding on ``line`` with its rule's summary, why it
    is opt-in (if it is), the evidence it rests on and the conventions in force that it names."""
    from .registry import RULES_BY_CODE

    out = []
    for f in findings:
        if f.line != line:
            continue
        out.append(f"{reporters.location(f)}: {f.code} {f.name}")
        out.append(f"  message: {f.message}")
        rule = RULES_BY_CODE.get(f.code)
        if rule is not None:
            out.append(f"  rule: {rule.summary}")
        if f.opt_in is not None:
            out.append(f"  reported only with --pedantic: {f.opt_in}")
        if f.evidence:
            out.append("  why:")
            out.extend(f"    - {e}" for e in f.evidence)
        else:
            out.append("  why: the rule's own test of this line (no further facts recorded); see "
                       f"`jaxlint explain {f.code}`")
        out.append("")
    return "\n".join(out)


def explain_quiet(path: str, line: int, codes, select, ignore, reported: set) -> str:
    """The "why not" part of ``--explain-finding``: the rules that looked at ``line`` and made no
    finding there, each with the fact (or convention) that kept it quiet (``Rule.quiet``)."""
    from .engine import check_path
    from .registry import ALL_RULES, select_rules

    rules = [r for r in select_rules(ALL_RULES, select, ignore) if r.code in codes]
    result = check_path(path, rules, why_not=True)
    seen: set = set()
    out = []
    for q in result.quiet or ():
        if q.line != line or (q.line, q.code) in reported or (q.code, q.message) in seen:
            continue
        seen.add((q.code, q.message))
        out.append(f"  {q.code} {q.name}: {q.message}")
    if not out:
        return ""
    return f"{path}:{line}: rules that looked at this line and made no finding, and why:\n" + "\n".join(out) + "\n"


def cmd_check(args) -> int:
    if args.fix and args.diff:
        print("jaxlint: --fix and --diff cannot be combined; --diff shows what --fix would write", file=sys.stderr)
        return EXIT_ERROR
    explain_line = None
    if args.explain_finding is not None:
        target = _explain_target(args.explain_finding)
        if target is None:
            print(f"jaxlint: --explain-finding takes PATH:LINE (a file and a line number >= 1), not "
                  f"{args.explain_finding!r}", file=sys.stderr)
            return EXIT_ERROR
        if args.fix or args.diff:
            print("jaxlint: --explain-finding cannot be combined with --fix or --diff", file=sys.stderr)
            return EXIT_ERROR
        args.paths = [target[0]]
        explain_line = target[1]
        args.pedantic = True
    stdin = "-" in args.paths
    if stdin and (len(args.paths) > 1 or args.fix or args.diff):
        print("jaxlint: `-` (read the source from stdin) is the only path, without --fix or --diff", file=sys.stderr)
        return EXIT_ERROR
    if stdin:
        args.paths = [args.stdin_display_name]
    try:
        if args.config:
            cfg = load_config(pyproject=args.config)
        elif stdin:
            shown = args.stdin_display_name
            cfg = load_config(shown if os.path.exists(os.path.dirname(os.path.abspath(shown))) else ".")
        else:
            cfg = load_config(args.paths[0] if args.paths else ".")
    except ConfigError as e:
        print(f"jaxlint: config error: {e}", file=sys.stderr)
        return EXIT_ERROR
    from . import conventions, jaxversion

    conventions.configure(cfg.conventions)  # [tool.jaxlint.conventions], for this run and its workers
    jaxversion.configure(args.jax_version if args.jax_version is not None else cfg.jax_version)
    # a missing path is said and makes the exit 2, after the others are checked and reported
    missing = [] if stdin else [p for p in args.paths if not os.path.exists(p)]
    for p in missing:
        print(f"jaxlint: no such file or folder: {p}", file=sys.stderr)
    args.paths = [p for p in args.paths if p not in missing]
    select = (args.select if args.select is not None else cfg.select) + args.extend_select
    ignore = (args.ignore if args.ignore is not None else cfg.ignore) + args.extend_ignore
    codes = [c for c in rule_codes() if is_selected(c, select, ignore)]  # = select_rules(ALL_RULES, ...)
    files: list = []
    seen: set = set()
    for path in [] if stdin else args.paths:  # each path on its own, so that one with nothing to check is named
        found = list(discover([path], cfg))
        if not found:  # said, not silent (as ruff does); nothing to check is not an error
            print(f"jaxlint: no Python files or notebooks found under {path}", file=sys.stderr)
        for f in found:
            if f not in seen:
                seen.add(f)
                files.append(f)
    if stdin:
        from .engine import check_source

        _init_worker(codes, conventions.active().changed(), jaxversion.active())
        files = [args.stdin_display_name]
        results = [check_source(sys.stdin.buffer.read(), args.stdin_display_name, _worker_rules)]
    else:
        results = _check_files(files, codes, args)
    fix_errors: list = []
    if args.fix or args.diff:
        from . import fix as fixmod

        changes, fix_errors = fixmod.fix_results(results, codes, cfg.keeps, write=not args.diff)
        sys.stderr.write(fixmod.summary(changes, fix_errors, write=not args.diff))
        if args.diff:
            sys.stdout.write("".join(c.diff() for c in changes))
            for msg in (f"{res.path}: {m}" for res in results for m in res.internal_errors):
                print(f"jaxlint: internal error (please report): {msg}", file=sys.stderr)
                fix_errors.append(msg)
            return EXIT_ERROR if fix_errors else EXIT_FINDINGS if changes and not args.exit_zero else EXIT_CLEAN
        if changes:  # the fixed files hash differently: checked again, not read from the cache
            results = _check_files(files, codes, args)
    findings = []
    internal = []
    fail_on_oversize = args.fail_on_oversize or cfg.fail_on_oversize
    for res in results:
        if res.not_analyzed is not None:  # too large: a notice, or JAX000 when the user asks for it to fail
            oversize = Finding(1, 0, PARSE_ERROR, res.not_analyzed, "parse-error", res.path)
            if (fail_on_oversize and is_selected(PARSE_ERROR, ["JAX"] + list(select), ignore)
                    and cfg.keeps(res.path, oversize)):
                res.findings = [oversize]
            else:  # never skipped in silence, JAX000 ignored or not
                why = "JAX000 is not selected here" if fail_on_oversize else "--fail-on-oversize reports it as JAX000"
                print(f"jaxlint: {res.path}: {res.not_analyzed}; the exit code is unaffected ({why})",
                      file=sys.stderr)
        for f in res.findings:
            if f.code == "JAX000" and not is_selected(f.code, ["JAX"] + list(select), ignore):
                continue
            if not cfg.keeps(res.path, f):
                continue
            if f.opt_in is not None and not (args.pedantic or cfg.pedantic):
                if f.code == PARSE_ERROR:  # written for a newer Python: not checked, never in silence
                    print(f"jaxlint: {res.path}: not checked: {f.message}; the exit code is unaffected "
                          "(--pedantic reports it as JAX000)", file=sys.stderr)
                continue
            findings.append(f)
        internal.extend(f"{res.path}: {msg}" for msg in res.internal_errors)
    findings.sort(key=lambda f: (f.path, f.line, f.col, f.code))
    if explain_line is not None:
        text = explain_findings(findings, explain_line)
        why_not = explain_quiet(files[0] if files else args.paths[0], explain_line, codes, select, ignore,
                                {(f.line, f.code) for f in findings})
        if not text and not why_not:
            print(f"jaxlint: no finding on line {explain_line} of {args.paths[0]}, and no rule looked at it (nothing "
                  "there is a construct a rule checks)", file=sys.stderr)
            return EXIT_CLEAN
        sys.stdout.write(text + why_not)
        return EXIT_FINDINGS if text else EXIT_CLEAN
    if args.format in ("text", "json") and not stdin and any(f.code in fixable_rule_codes() for f in findings):
        from . import fix as fixmod  # only jaxlint's own formats mark the fixable findings

        findings = fixmod.mark_fixable(findings, codes, {res.path for res in results if res.cached})
    sys.stdout.write(reporters.FORMATS[args.format](findings))
    if args.statistics and findings:
        sys.stdout.write(reporters.statistics(findings))
    for msg in internal:
        print(f"jaxlint: internal error (please report): {msg}", file=sys.stderr)
    # stdout stays flake8's format; the closing line goes to stderr. Not when nothing was checked
    # because the paths named do not exist: the error above already said so.
    if args.format == "text" and (files or not missing):
        sys.stderr.write(reporters.closing_line(findings, len(files)))
    if internal or fix_errors or missing:
        return EXIT_ERROR
    if findings and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def cmd_rules() -> int:
    from .registry import CATALOG

    for r in CATALOG:
        print(f"{r.code}  {r.name:34} {r.short}")
    return EXIT_CLEAN


def cmd_explain(code: str) -> int:
    """``jaxlint explain JAX201`` or ``jaxlint explain host-transfer-in-loop``: every code that
    ``jaxlint rules`` lists, JAX000 included, by code or by name."""
    from .registry import CATALOG

    rules = CATALOG
    wanted = code.strip().lower()
    rule = next((r for r in rules if wanted in (r.code.lower(), r.name)), None)
    if rule is None:
        print(f"jaxlint: unknown rule {code!r}; `jaxlint rules` lists the codes and names", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(rule.explain())
    return EXIT_CLEAN


def cmd_conventions(args) -> int:
    """Every decision jaxlint still makes from a name the user chose, the words in force for the
    project at ``args.path`` and why a name is evidence there."""
    from . import conventions

    try:
        cfg = load_config(pyproject=args.config) if args.config else load_config(args.path)
    except ConfigError as e:
        print(f"jaxlint: config error: {e}", file=sys.stderr)
        return EXIT_ERROR
    conventions.configure(cfg.conventions)
    print(conventions.describe())
    return EXIT_CLEAN


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "trace":  # the program's own arguments must reach it untouched
        from .trace.command import main as trace_main

        return trace_main(argv[1:])
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on usage errors, 0 on --help
        return int(e.code or 0)
    try:
        if args.command == "check":
            return cmd_check(args)
        if args.command == "rules":
            return cmd_rules()
        if args.command == "explain":
            return cmd_explain(args.code)
        if args.command == "conventions":
            return cmd_conventions(args)
        parser.print_help()
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_CLEAN
