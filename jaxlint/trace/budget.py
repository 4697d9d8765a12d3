"""Compile budgets and CI gates of ``jaxlint trace``, and ``Audit.assert_compiles``.

A budget is ``PATTERN=N``: every function whose qualified name (``Model.__call__``,
``main.<locals>.step``) or plain name matches the glob ``PATTERN`` may compile at most ``N``
times. Several patterns may match one function; the most specific one applies: a name equal
to the pattern, else the pattern with the most literal characters (``eval_*`` beats ``*``),
else the first given. ``--fail-on-recompile`` is a budget of 1 for every function,
``--max-compiles N`` one of N. Pure code: no JAX import (``--help`` and the option parser use it).
"""

from __future__ import annotations

import argparse
import fnmatch
from dataclasses import dataclass, field
from typing import Optional

from . import advice

_WILD = set("*?[]")
NO_RETRACE = ("traced once: the other compilations are of programs derived from that trace "
              "(e.g. jax.grad or vmap of the jitted function)")


@dataclass
class Settings:
    """The gates of one run: command line over ``[tool.jaxlint.trace]``."""
    budget: list = field(default_factory=list)  # [(pattern, limit, origin)] in the order given
    fail_on_recompile: Optional[str] = None  # where it was asked for, or None
    max_compiles: Optional[int] = None
    max_transfers_per_line: Optional[int] = None
    budget_memory: list = field(default_factory=list)  # [(pattern, bytes, origin)] in the order given

    @property
    def counts_compiles(self) -> bool:
        return bool(self.budget) or self.fail_on_recompile is not None or self.max_compiles is not None


def parse_option(text: str) -> tuple:
    """``--budget PATTERN=N`` -> (pattern, N); argparse turns the error into a usage error (exit 2)."""
    pattern, sep, n = text.partition("=")
    pattern = pattern.strip()
    if not sep or not pattern:
        raise argparse.ArgumentTypeError(f"expected PATTERN=N (e.g. train_step=1 or '*=3'), not {text!r}")
    if "=" in n:  # ``a=1=2``: no function name holds "=", so this is a typo, not a pattern ``a=1``
        raise argparse.ArgumentTypeError(f"expected one PATTERN=N (e.g. train_step=1), not {text!r}")
    try:
        return pattern, count_option(n)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"the N of {text!r} must be an integer >= 0") from None


def memory_option(text: str) -> tuple:
    """``--budget-memory PATTERN=SIZE`` -> (pattern, bytes, SIZE as typed); a usage error (exit 2)
    otherwise."""
    from .sizes import parse_size

    pattern, sep, size = text.partition("=")
    pattern = pattern.strip()
    if not sep or not pattern or "=" in size:
        raise argparse.ArgumentTypeError(f"expected one PATTERN=SIZE (e.g. train_step='2 GB'), not {text!r}")
    try:
        return pattern, parse_size(size), size.strip()
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"the SIZE of {text!r}: {e}") from None


def size_option(text: str) -> int:
    """``--donation-threshold SIZE``: bytes (``2 GB``, ``512 MiB``), else a usage error (exit 2)."""
    from .sizes import parse_size

    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def count_option(text: str) -> int:
    """``--max-compiles N``/``--max-transfers-per-line N``: an integer >= 0, else a usage error
    (exit 2, before the program runs); ``-1`` would fail every function, ``-3`` pass every line."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, not {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, not {text!r}")
    return n


def settings(args, trace_config=None) -> Settings:
    """Merge the command line (``args``) over ``trace_config`` (``config.TraceConfig`` or None):
    any ``--budget`` replaces the configured budget table; ``--max-compiles`` and
    ``--max-transfers-per-line`` replace the configured values; ``--fail-on-recompile`` or
    ``fail-on-recompile = true`` turns that gate on."""
    cli_budget = getattr(args, "budget", None) or []
    out = Settings()
    if cli_budget:
        out.budget = [(p, n, f"--budget {p}={n}") for p, n in cli_budget]
    elif trace_config is not None:
        out.budget = [(p, n, f"[tool.jaxlint.trace] budget {p!r} = {n}") for p, n in trace_config.budget.items()]
    if getattr(args, "fail_on_recompile", False):
        out.fail_on_recompile = "--fail-on-recompile"
    elif trace_config is not None and trace_config.fail_on_recompile:
        out.fail_on_recompile = "[tool.jaxlint.trace] fail-on-recompile = true"
    out.max_compiles = getattr(args, "max_compiles", None)
    if out.max_compiles is None and trace_config is not None:
        out.max_compiles = trace_config.max_compiles
    cli_memory = getattr(args, "budget_memory", None) or []
    if cli_memory:
        out.budget_memory = [(p, n, f"--budget-memory {p}={typed}") for p, n, typed in cli_memory]
    elif trace_config is not None:
        out.budget_memory = [(p, n, f"[tool.jaxlint.trace] budget-memory {p!r}")
                             for p, n in getattr(trace_config, "budget_memory", {}).items()]
    out.max_transfers_per_line = getattr(args, "max_transfers_per_line", None)
    if out.max_transfers_per_line is None and trace_config is not None:
        out.max_transfers_per_line = trace_config.max_transfers_per_line
    return out


def _literal(pattern: str) -> int:
    return sum(1 for ch in pattern if ch not in _WILD)


def match(budget: list, qualname: str, name: Optional[str] = None) -> Optional[tuple]:
    """The (pattern, limit, origin) of ``budget`` that applies to a function, or None."""
    names = [n for n in (qualname, name) if n]
    exact = [b for b in budget if b[0] in names]
    if exact:
        return exact[0]
    hits = [b for b in budget if any(fnmatch.fnmatchcase(n, b[0]) for n in names)]
    if not hits:
        return None
    return max(hits, key=lambda b: _literal(b[0]))  # max keeps the first of equals


def evaluate(report: dict, s: Settings) -> tuple:
    """(gate messages, budget results) of a run's report.

    A result per (rule, function) checked: ``{option, pattern, limit, function, file, line,
    compiles, passed, gate}`` (``gate``: the message when it failed), and one with ``function``
    null for a budget pattern that matched no function. No compile gate passes on a guess: when
    some compilation was attributed by function name only, each compile gate that is set says it
    cannot pass."""
    from .report import _where

    messages, results = [], []
    funcs = report["functions"]
    guessed = sorted({f["qualname"] for f in funcs if f.get("matched_by_name")})
    by_name = report.get("compiles_matched_by_name", 0)

    def cannot_pass(option: str) -> None:
        messages.append(f"{option} cannot pass: {by_name} compilation(s) were attributed by function name only"
                        + (f" ({', '.join(guessed)})" if guessed else "")
                        + "; per-function counts are not exact on this run")

    def times(n: int) -> str:
        return f"{n} time{'' if n == 1 else 's'}"

    def check(option: str, pattern: str, limit: int, f: dict, message: str) -> None:
        over = f["compiles"] > limit
        exact = not (by_name or guessed)
        gate = message if over else None
        results.append({"option": option, "pattern": pattern, "limit": limit, "function": f["qualname"],
                        "file": f["file"], "line": f["line"], "compiles": f["compiles"],
                        "passed": exact and not over, "gate": gate})
        if gate:
            messages.append(gate)

    inexact = bool(by_name or guessed)
    if s.max_compiles is not None:
        if inexact:
            cannot_pass(f"--max-compiles {s.max_compiles}")
        for f in funcs:
            check("--max-compiles", "*", s.max_compiles, f,
                  f"{f['qualname']} at {_where(f['file'], f['line'])} compiled {times(f['compiles'])} "
                  f"(--max-compiles {s.max_compiles})")
    if s.budget:
        if inexact:
            cannot_pass("--budget")
        used = {p for p, _, _ in s.budget for f in funcs
                if any(fnmatch.fnmatchcase(n, p) for n in (f["qualname"], f.get("name")) if n)}
        for f in funcs:
            b = match(s.budget, f["qualname"], f.get("name"))
            if b is None:
                continue
            pattern, limit, origin = b
            check("budget", pattern, limit, f,
                  f"{f['qualname']} at {_where(f['file'], f['line'])} compiled {times(f['compiles'])}, "
                  f"over its budget of {limit} ({origin})")
        for pattern, limit, origin in s.budget:
            if pattern not in used:
                results.append({"option": "budget", "pattern": pattern, "limit": limit, "function": None,
                                "file": None, "line": None, "compiles": None, "passed": True, "gate": None})
    if s.fail_on_recompile is not None:
        if inexact:
            cannot_pass("--fail-on-recompile")
        for f in funcs:
            check("fail-on-recompile", "*", 1, f,
                  f"{f['qualname']} at {_where(f['file'], f['line'])} compiled {times(f['compiles'])} "
                  f"({s.fail_on_recompile})")
    if s.budget_memory:
        _evaluate_memory(funcs, s.budget_memory, messages, results)
    if s.max_transfers_per_line is not None:
        per_line: dict = {}
        for t in report["transfers"]:
            per_line[(t["file"], t["line"])] = per_line.get((t["file"], t["line"]), 0) + t["count"]
        for (file, line), n in per_line.items():
            if n > s.max_transfers_per_line:
                messages.append(f"{_where(file, line)} made {n} host transfer{'' if n == 1 else 's'} "
                                f"(--max-transfers-per-line {s.max_transfers_per_line})")
    return messages, results


def _evaluate_memory(funcs: list, budget: list, messages: list, results: list) -> None:
    """Each function's largest compiled program (XLA's peak, or the upper bound where this jaxlib
    reports none) against the most specific ``budget-memory`` pattern that matches it."""
    from .report import _where
    from .sizes import format_size

    used = set()
    for f in funcs:
        b = match(budget, f["qualname"], f.get("name"))
        if b is None:
            continue
        pattern, limit, origin = b
        used.add(pattern)
        largest = (f.get("memory") or {}).get("largest")
        if largest is None:  # matched, but no compile in the run: nothing to measure
            results.append({"option": "budget-memory", "pattern": pattern, "limit": limit, "function": f["qualname"],
                            "file": f["file"], "line": f["line"], "bytes": None, "passed": True, "gate": None})
            continue
        total = largest["footprint"]
        rise = f["memory"].get("device_peak_rise")
        gate = None
        if rise is not None and rise > total and rise > limit:  # the device needed more than XLA's figure
            total = rise
            gate = (f"{f['qualname']} at {_where(f['file'], f['line'])}: the device's peak rose "
                    f"{format_size(rise)} over its calls (measured, peak_bytes_in_use; "
                    f"{f['memory'].get('in_flight') or 0} earlier calls in flight at most), over its budget of "
                    f"{format_size(limit)} ({origin}); XLA's compiled peak of one call "
                    f"{format_size(largest['footprint'])}: {memory_breakdown(largest)}")
            messages.append(gate)
        elif total > limit:
            kind = "peak" if largest["footprint_exact"] else "memory (upper bound: this jaxlib reports no peak)"
            gate = (f"{f['qualname']} at {_where(f['file'], f['line'])}: compiled {kind} {format_size(total)}, over "
                    f"its budget of {format_size(limit)} ({origin}): {memory_breakdown(largest)}")
            messages.append(gate)
        total = max(total, rise or 0)
        results.append({"option": "budget-memory", "pattern": pattern, "limit": limit, "function": f["qualname"],
                        "file": f["file"], "line": f["line"], "bytes": total, "passed": gate is None, "gate": gate})
    for pattern, limit, origin in budget:
        if pattern not in used:
            results.append({"option": "budget-memory", "pattern": pattern, "limit": limit, "function": None,
                            "file": None, "line": None, "bytes": None, "passed": True, "gate": None})


def memory_breakdown(m: dict) -> str:
    """``temporaries 1.2 GiB, arguments 400.0 MiB, ...`` of one compile, largest first."""
    from .sizes import format_size

    parts = [("temporaries", m["temp"]), ("arguments", m["argument"]), ("outputs", m["output"]),
             ("aliased", m["alias"]), ("generated code", m["generated_code"])]
    return ", ".join(f"{k} {format_size(v)}" for k, v in sorted(parts, key=lambda kv: -kv[1]))


def gate_text(report: dict) -> str:
    """The ``GATE:`` lines of the text report; a function's gate is followed by its retrace
    reasons and its fix."""
    from .report import _fit, _reason_lines

    failed = [r for r in report.get("budgets") or [] if r["gate"]]  # in the order of the gates
    funcs = {(f["qualname"], f["file"], f["line"]): f for f in report["functions"]}
    out = []
    for message in report.get("gates") or []:
        out.append(f"GATE: {message}\n")
        r = next((r for r in failed if r["gate"] == message), None)
        if r is not None:
            failed.remove(r)  # two functions of one name: each gate gets its own row
        f = funcs.get((r["function"], r["file"], r["line"])) if r and r["option"] != "budget-memory" else None
        if f is not None:
            out.extend(_fit(f"      {line}") for line in _reason_lines(f) or [NO_RETRACE])
    return "".join(out)


def unmatched_text(report: dict) -> str:
    """One note per budget pattern that matched no function (a typo would silently pass)."""
    out = []
    for r in report.get("budgets") or []:
        if r["option"] in ("budget", "budget-memory") and r["function"] is None:
            out.append(f"jaxlint trace: {r['option']} pattern {r['pattern']!r} matched no function of this run\n")
    return "".join(out)


# -- Audit.assert_compiles ------------------------------------------------


def compile_assertion(rec, fn, at_most: Optional[int] = None, exactly: Optional[int] = None,
                      names_only: bool = False) -> Optional[str]:
    """None when ``rec`` (``collector.Record`` of ``fn``, or None: never traced in the block)
    meets the limit; else the failure message: the count, every retrace reason and the fix."""
    if (at_most is None) == (exactly is None):
        raise TypeError("assert_compiles needs one of at_most=N or exactly=N")
    limit = at_most if at_most is not None else exactly
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise TypeError(f"the limit must be an integer >= 0, not {limit!r}")
    name = rec.qualname if rec is not None else getattr(fn, "__qualname__", None) or repr(fn)
    n = rec.compiles if rec is not None else 0
    ok = n <= limit if at_most is not None else n == limit
    wanted = f"at most {limit}" if at_most is not None else f"exactly {limit}"
    where = f" ({advice._where((rec.file, rec.line))})" if rec is not None and rec.file else ""
    if rec is not None and (rec.by_name or names_only):
        return (f"`{name}`{where}: cannot check that it compiled {wanted} time(s): its compilations "
                f"were attributed by function name only (an ahead-of-time compile, or a JAX version whose "
                f"trace entry points jaxlint does not know), so the count ({n}) is a guess")
    if ok:
        return None
    if rec is None or (rec.compiles == 0 and rec.traces == 0):
        return (f"`{name}` compiled 0 times inside this audit() block, expected {wanted}: it was not "
                "called in the block, or every call reused a compile made before the block (JAX "
                "caches per function object; to count the first compile, create or first call the "
                "jitted function inside the block)")
    head = (f"`{name}`{where} compiled {n} time{'s' if n != 1 else ''} inside this audit() block, "
            f"expected {wanted}")
    if rec.calls is not None:
        head += f" ({rec.calls} call{'s' if rec.calls != 1 else ''}, {rec.traces} trace{'s' if rec.traces != 1 else ''})"
    gs = advice.groups(rec.miss_reasons)
    body = advice.lines(gs)
    if not body:
        body = [NO_RETRACE if rec.traces <= 1 else "retraced, but the reason was not recorded on this JAX version"]
    fix = advice.fix(gs, advice.created_site(rec), getattr(rec, "static_partition", None))
    if fix:
        body.append(f"fix: {fix}")
    return head + ":\n" + "".join(f"  {line}\n" for line in body).rstrip("\n")


def memory_assertion(rec, compiles: list, fn, at_most) -> Optional[str]:
    """None when every compile of ``fn`` in the block (``compiles``: its memory entries) stays within
    ``at_most`` (bytes or a size such as ``"2 GB"``); else the message, with the breakdown."""
    from .sizes import format_size, parse_size

    try:
        limit = parse_size(at_most)
    except ValueError as e:
        raise TypeError(f"at_most: {e}") from None
    name = rec.qualname if rec is not None else getattr(fn, "__qualname__", None) or repr(fn)
    where = f" ({advice._where((rec.file, rec.line))})" if rec is not None and rec.file else ""
    if not compiles:
        return (f"`{name}`{where}: no compile of it inside this audit() block, so its memory is unknown (it was not "
                "called in the block, every call reused a compile made before it, or this JAX reports no "
                "compiled memory statistics)")
    worst = max(compiles, key=lambda m: m["footprint"])
    if worst["footprint"] <= limit:
        return None
    kind = "peak" if worst["footprint_exact"] else "memory (upper bound: this jaxlib reports no peak)"
    return (f"`{name}`{where}: compiled {kind} {format_size(worst['footprint'])}, over {format_size(limit)}: "
            f"{memory_breakdown(worst)}")
