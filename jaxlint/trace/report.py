"""The report of a traced run: a JSON-ready dict, its text rendering, and the
static/dynamic cross-check. Nothing here imports JAX."""

from __future__ import annotations

import json
import os
import textwrap
from collections import namedtuple
from typing import Iterable, Optional

from ..registry import confirmed_by
from . import advice, cost, eager, loopbody, memory, memory_report, stale, steploops
from .collector import RECREATED, Collector

Transfer = namedtuple("Transfer", "file line kind count")

SCHEMA_VERSION = 2
# Which findings a run can confirm, and how, is declared on each rule (``Rule.confirmed_by``).
# Thresholds for "runtime problems no static finding predicted".
UNPREDICTED_COMPILES = 3
UNPREDICTED_TRANSFERS = 10
UNROLLED_EQUATIONS = 1000


def _real(path: Optional[str]) -> Optional[str]:
    if not path or path.startswith("<"):
        return path
    return os.path.realpath(path)


def _reasons(rec) -> list:
    return [
        {"reason": r, "argument": a, "before": b, "after": af, "count": n,
         "seconds": cost.reason_seconds(rec, (r, a, b, af))}
        for (r, a, b, af), n in sorted(rec.miss_reasons.items(), key=lambda kv: -kv[1])
    ]


def _transfer_via(collector: Collector, site: tuple) -> Optional[dict]:
    """The library frame that made most of a user line's transfers (None: the line itself did),
    with how many of them it made."""
    frames = getattr(collector, "transfer_via", {}).get(site)
    if not frames:
        return None
    (module, qualname, file, line), n = frames.most_common(1)[0]
    return {"module": module, "function": qualname, "file": file, "line": line, "count": n}


def _function(rec, names_only: bool = False, mem: Optional[memory.Memory] = None,
              threshold: int = memory.DEFAULT_DONATION_THRESHOLD, steps=None) -> dict:
    return {
        "name": rec.name, "qualname": rec.qualname, "file": rec.file, "line": rec.line,
        "calls": rec.calls, "traces": rec.traces, "compiles": rec.compiles,
        "trace_seconds": round(rec.trace_seconds, 6), "lower_seconds": round(rec.lower_seconds, 6),
        "compile_seconds": round(rec.compile_seconds, 6), "via": rec.via,
        "miss_reasons": _reasons(rec),
        "stale_reads": stale.rows(rec),
        "matched_by_name": rec.by_name or names_only,
        **advice.describe(rec),
        **cost.function_keys(rec),
        **memory_report.function_keys(mem if mem is not None else memory.Memory(), rec, threshold, steps),
    }


def build(collector: Collector, findings: Optional[Iterable] = None, exit_code: Optional[int] = None,
          failure_sites: Iterable = (), script: Optional[str] = None, environment: Optional[dict] = None,
          donation_threshold: int = memory.DEFAULT_DONATION_THRESHOLD) -> dict:
    """The report as plain data; ``findings`` are static ``Finding`` objects to cross-check."""
    recs = sorted(collector.user_records(), key=lambda r: (-round(r.cost.lost_seconds, 2), -r.compiles, -r.traces,
                                                           str(r.file), r.line or 0))
    transfers = [
        {"file": f, "line": l, "kind": k, "count": n, "via": _transfer_via(collector, (f, l, k))}
        for (f, l, k), n in sorted(collector.transfers.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    uploads = [
        {"file": f, "line": l, "kind": k, "count": n, "bytes": collector.upload_bytes[(f, l, k)]}
        for (f, l, k), n in sorted(collector.uploads.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    jaxpr = [
        {"name": r.name, "qualname": r.qualname, "file": r.file, "line": r.line, **r.jaxpr}
        for r in recs if r.jaxpr is not None
    ]
    report = {
        "schema": SCHEMA_VERSION,
        "script": script,
        "script_exit_code": exit_code,
        "environment": environment or {},
        "partial": list(collector.partial),
        "functions": [_function(r, collector.names_only, collector.memory, donation_threshold,
                                getattr(collector, "steps", None)) for r in recs],
        "transfers": transfers,
        "uploads": uploads,
        "jaxpr": jaxpr,
        "eager": eager.rows(collector),
        "callbacks": [{"file": f, "line": l, "count": n}
                      for (f, l), n in sorted(collector.callbacks.items(), key=lambda kv: (-kv[1], kv[0]))],
        "findings": [],
        "unpredicted": [],
        "internal_compiles": collector.internal_compiles,
        "compiles_matched_by_name": collector.compiles_by_name,
        "internal_compile_seconds": round(collector.internal_compile_seconds, 6),
        "instrumentation_errors": dict(collector.errors),
        "static_checked": findings is not None,
        **cost.run_keys(collector),
    }
    report["memory"] = memory_report.section(collector, report["functions"], donation_threshold)
    names = {r.key: (r.qualname, r.file, r.line) for r in collector.records.values()}
    report["step_loops"] = steploops.section(collector, names)
    report["step_loops"]["backend_note"] = steploops.backend_note(
        (environment or {}).get("backend"), report["step_loops"].get("sync_dispatch_calls", 0),
        report["step_loops"].get("sync_checked_calls", 0), report["step_loops"].get("sampling", ()))
    _hotspot_fixes(report)
    if findings is not None:
        report["findings"], report["unpredicted"] = cross_check(list(findings), recs, collector, failure_sites)
    return report


def _hotspot_fixes(report: dict) -> None:
    """A ``fix`` on every transfer, upload, eager and callback row (None below the hotspot counts)."""
    steps = eager.busiest_calls(report)
    for t in report["transfers"]:
        t["fix"] = advice.transfer_fix(t, steps)
    for u in report["uploads"]:
        u["fix"] = advice.upload_fix(u, _bytes(u["bytes"]))
    busiest = max(report["functions"], key=lambda f: f.get("calls") or 0, default=None)
    step = busiest["qualname"] if busiest and busiest.get("calls") else None
    hot: dict = {}
    for e in report["eager"]:
        if e["count"] >= advice.MIN_EAGER:
            hot.setdefault(e["file"], []).append(e["line"])
    for e in report["eager"]:
        e["fix"] = advice.eager_fix(e)
        if e["fix"] and e["file"] and not e["file"].startswith("<"):
            try:
                named = loopbody.fix_text(loopbody.suggestion(e["file"], e["line"], hot.get(e["file"], ())),
                                          e["count"], _where(e["file"], None), step)
            except Exception:  # the source changed or cannot be read: the general fix stays
                named = None
            e["fix"] = named or e["fix"]
    for cb in report["callbacks"]:
        cb["fix"] = advice.callback_fix(cb)


def _code_span(code) -> tuple:
    last = code.co_firstlineno
    stack = [code]
    while stack:
        c = stack.pop()
        for _, _, line in c.co_lines():
            if line is not None and line > last:
                last = line
        stack.extend(k for k in c.co_consts if hasattr(k, "co_lines"))
    return code.co_firstlineno, last


def _enclosing(recs: list, file: str, line: int):
    best = None
    for r in recs:
        if not hasattr(r.key, "co_lines") or _real(r.file) != file:
            continue
        lo, hi = _code_span(r.key)
        if lo <= line <= hi and (best is None or lo >= best[0]):
            best = (lo, r)
    return best[1] if best else None


def _top_reason(rec) -> str:
    if not rec.miss_reasons:
        return ""
    groups = advice.groups(rec.miss_reasons)
    return "; " + advice.group_text(groups[0]) if groups else ""


# At most this many lines between a decorated function's first decorator and its ``def``.
_DECORATOR_LINES = 30


def cross_check(findings: list, recs: list, collector: Collector, failure_sites: Iterable) -> tuple:
    """Mark each static finding confirmed or not, and list what no finding predicted."""
    failures = {(_real(f), l): exc for f, l, exc in failure_sites}
    by_site: dict = {}
    for r in recs:
        for (f, l), _ in list(r.created_at.items()) + list(r.traced_from.items()):
            by_site.setdefault((_real(f), l), []).append(r)
        for (f, l), _ in r.created_at.items():
            # a decorator's wrapper: made at the decorator's line on Python 3.11+, at the `def`
            # line before; a static finding names the decorator (``@jax.jit`` over ``@jax.vmap``)
            if r.file and r.line and _real(f) == _real(r.file) and r.line <= l <= r.line + _DECORATOR_LINES:
                for d in range(r.line, l):
                    if r not in by_site.setdefault((_real(f), d), []):
                        by_site[(_real(f), d)].append(r)
    lines: dict = {}
    for (f, l, k), n in collector.transfers.items():
        entry = lines.setdefault((_real(f), l), [0, set()])
        entry[0] += n
        entry[1].add(k)
    upload_lines: dict = {}  # (file, line) -> {kind: [count, bytes]}
    for (f, l, k), n in collector.uploads.items():
        entry = upload_lines.setdefault((_real(f), l), {}).setdefault(k, [0, 0])
        entry[0] += n
        entry[1] += collector.upload_bytes[(f, l, k)]
    out, explained_recs, explained_lines = [], set(), set()
    for fd in findings:
        file, line = _real(fd.path), fd.line
        confirmed, evidence = False, "not observable at runtime by jaxlint trace"
        kind = confirmed_by(fd.code)
        if kind == "compiles":
            matched = by_site.get((file, line), [])
            if matched:
                rec = max(matched, key=lambda r: r.compiles)
                explained_recs.update(id(r) for r in matched)
                n = rec.compiles or rec.traces
                what = "compilations" if rec.compiles else "traces"
                confirmed = n >= 2
                evidence = f"{n} {what} of `{rec.qualname}`{_top_reason(rec)}" if n != 1 else f"`{rec.qualname}` compiled once"
            else:
                evidence = "not observed: no traced call ran from this line"
        elif kind == "transfers":
            entry = lines.get((file, line))
            if entry:
                explained_lines.add((file, line))
                confirmed = entry[0] >= 2
                evidence = f"{entry[0]} transfer{'s' if entry[0] != 1 else ''} ({', '.join(sorted(entry[1]))})"
            else:
                evidence = "not observed: no host transfer from this line"
        elif kind == "clock":
            site = next(((f, l) for (f, l) in collector.clock_reads if _real(f) == file and l == line), None)
            if site is None:
                evidence = ("not observed: no clock read after a jitted call ran from this line "
                            "(timeit and timers bound before the run are not seen)")
            else:
                n, pending = collector.clock_reads[site], collector.clock_reads_pending[site]
                confirmed = pending > 0
                evidence = (f"{pending} of {n} clock read{'s' if n != 1 else ''} here came while the last jitted "
                            "call's result was still being computed")
        elif kind == "uploads":
            by_kind = upload_lines.get((file, line), {})
            # Several copies on one line (``f(jnp.asarray(a), jax.device_put(b))``): the finding's
            # message starts with the call it is about, which names the kind.
            spelled = _UPLOAD_KIND.get(fd.message.split("(", 1)[0].rsplit(".", 1)[-1].strip("`"))
            if spelled in by_kind:
                by_kind = {spelled: by_kind[spelled]}
            if by_kind:
                n = sum(c for c, _ in by_kind.values())
                confirmed = n >= 2
                evidence = (f"{n} host-to-device cop{'ies' if n != 1 else 'y'} of "
                            f"{_bytes(sum(b for _, b in by_kind.values()))} in all ({', '.join(sorted(by_kind))})")
            else:
                evidence = "not observed: no host-to-device copy from this line"
        elif kind == "eager":
            counts, _, by_line = collector.eager_totals()
            n = sum(c for (f, l), c in counts.items() if _real(f) == file and l == line)
            ops: dict = {}
            for (f, l), o in by_line.items():
                if _real(f) == file and l == line:
                    for k, v in o.items():
                        ops[k] = ops.get(k, 0) + v
            confirmed = n >= 2
            evidence = (f"{n} eager dispatch{'es' if n != 1 else ''} from this line "
                        f"({eager.ops_text(dict(sorted(ops.items(), key=lambda kv: -kv[1])))})" if n else
                        "not observed: no eager dispatch from this line")
        elif kind == "callbacks":
            n = sum(c for (f, l), c in collector.callbacks.items() if _real(f) == file and l == line)
            confirmed = n >= 2
            evidence = (f"the host callback made on this line ran {n} time{'s' if n != 1 else ''}" if n else
                        "not observed: no host callback made on this line ran")
        elif kind == "setup":
            confirmed, evidence = memory_report.confirm_setup(collector.memory, file, line, _real, _where)
        elif kind == "stale":
            confirmed, evidence = stale.evidence(recs, fd.message, file, line, _real, _code_span)
        elif kind == "donation":
            evidence = "not observed: no read of a deleted (donated) array failed on this line"
        elif kind in ("trace_time", "unroll"):
            rec = _enclosing(recs, file, line)
            if rec is None:
                evidence = "not observed: the enclosing function was not traced"
            elif kind == "unroll":
                eqns = (rec.jaxpr or {}).get("equations")
                confirmed = eqns is not None and eqns >= UNROLLED_EQUATIONS
                evidence = f"the jaxpr of `{rec.qualname}` has {eqns} equations" if eqns is not None else "no jaxpr recorded"
            elif rec.calls is not None and rec.calls > rec.traces:
                confirmed = True
                evidence = (f"ran at trace time only: `{rec.qualname}` traced {rec.traces}× "
                            f"for {rec.calls} calls")
            else:
                evidence = f"`{rec.qualname}` traced {rec.traces}×" + (
                    f" for {rec.calls} calls" if rec.calls is not None else "; its calls were not counted")
        exc = failures.get((file, line))
        if exc is not None:
            confirmed, evidence = True, f"the run failed on this line with {exc}"
        out.append({"code": fd.code, "file": fd.path, "line": fd.line, "col": fd.col + 1,
                    "message": fd.message, "confirmed": confirmed, "evidence": evidence})
    unpredicted = []
    for r in recs:
        if id(r) in explained_recs:
            continue
        recreated = any(k[0] == RECREATED for k in r.miss_reasons)
        if r.compiles >= UNPREDICTED_COMPILES or (recreated and r.compiles >= 2):
            unpredicted.append({"kind": "recompilation", "name": r.qualname, "file": r.file, "line": r.line,
                                "count": r.compiles, "detail": _top_reason(r)[2:]})
    # A line is a per-step sync when it transfers about as often as the busiest jitted function
    # runs; periodic logging (every 100th step) is not a problem.
    busiest = max((r.calls or 0 for r in recs), default=0)
    floor = max(UNPREDICTED_TRANSFERS, busiest // 2)
    for (file, line), (n, kinds) in sorted(lines.items(), key=lambda kv: -kv[1][0]):
        if (file, line) not in explained_lines and n >= floor and line:
            unpredicted.append({"kind": "transfer", "name": None, "file": file, "line": line,
                                "count": n, "detail": ", ".join(sorted(kinds))})
    eager_lines = {(_real(fd.path), fd.line) for fd in findings if confirmed_by(fd.code) == "eager"}
    unpredicted.extend(eager.unpredicted(collector, busiest, eager_lines, _real))
    return out, unpredicted


# -- text -------------------------------------------------------------------


def _where(file: Optional[str], line: Optional[int]) -> str:
    if not file:
        return "?"
    try:
        rel = os.path.relpath(file)
        if not rel.startswith(".."):
            file = rel
    except ValueError:
        pass
    return f"{file}:{line}" if line else file


def _reason_lines(f: dict) -> list:
    """A function row's every retrace reason (the chain of values each argument took), with the
    seconds its misses lost when the row has them, and its fix."""
    gs = f["reasons"] if "reasons" in f else advice.from_rows(f["miss_reasons"])
    secs: dict = {}
    for r in f["miss_reasons"]:
        if "seconds" in r:
            k = (r["reason"], r["argument"])
            secs[k] = secs.get(k, 0.0) + r["seconds"]
    if secs:
        gs = [dict(g, seconds=secs.get((g["reason"], g["argument"]), 0.0)) for g in gs]
    out = advice.lines(gs) + stale.text_lines(f)
    fix = f["fix"] if "fix" in f else advice.fix(gs)
    if fix:
        out.append(f"fix: {fix}")
    return out


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


# The last name of an upload call as a JAX205 message spells it -> the kind the hooks count.
_UPLOAD_KIND = {"asarray": "jnp.asarray", "array": "jnp.array", "device_put": "device_put"}


def _bytes(n: int) -> str:
    """Exact below 1 KiB, else KiB/MiB/GiB with one decimal."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def text(report: dict, max_rows: int = 20) -> str:
    lines = []
    env = report.get("environment") or {}
    script = report.get("script")
    head = f"jaxlint trace: {_where(script, None) if script and not script.startswith('-m') else script or 'audit'}"
    if report.get("script_exit_code") is not None:
        head += f" exited with {report['script_exit_code']}"
    if env:
        head += f" (jax {env.get('jax', '?')}, {env.get('backend', '?')})"
    lines.append(head)
    for note in report["partial"]:
        lines.append(f"  PARTIAL REPORT: {note}")
    funcs = report["functions"]
    lines.append("")
    lines.append("Recompilation hotspots")
    if not funcs:
        lines.append("  no user function was traced")
    else:
        lines.append(f"  {'compiles':>8} {'traces':>6} {'calls':>6} {'lost s':>7}  function")
        for f in funcs[:max_rows]:
            calls = "-" if f["calls"] is None else str(f["calls"])
            name = f"{f['qualname']} at {_where(f['file'], f['line'])}"
            if f.get("matched_by_name"):
                name += " [counts and seconds matched by name: guesses]"
            lines.append(f"  {f['compiles']:>8} {f['traces']:>6} {calls:>6} {f.get('lost_seconds', 0.0):>7.2f}  {name}")
            lines.extend(f"      {t}" for t in _reason_lines(f))
            if f.get("via"):
                lines.append(f"      traced through {f['via']}")
            lines.extend(cost.site_lines(f, _where))
        if len(funcs) > max_rows:
            lines.append(f"  … {len(funcs) - max_rows} more functions (see --format json)")
    lines.extend(cost.summary_lines(report))
    lines.append("")
    lines.append("Host transfers")
    if not report["transfers"]:
        lines.append("  none counted")
    else:
        lines.append(f"  {'count':>8}  {'kind':<10}  where")
        for t in report["transfers"][:max_rows]:
            lines.append(f"  {t['count']:>8}  {t['kind']:<10}  {_where(t['file'], t['line'])}")
            via = t.get("via")
            if via:
                lines.append(f"      {'all' if via['count'] == t['count'] else via['count']} made in "
                             f"{via['module']}:{via['line']} ({via['function']})")
            if t.get("fix"):
                lines.append(f"      fix: {t['fix']}")
        if len(report["transfers"]) > max_rows:
            lines.append(f"  … {len(report['transfers']) - max_rows} more lines (see --format json)")
    lines.append("")
    lines.append("Host-to-device copies")
    uploads = report.get("uploads", [])
    if not uploads:
        lines.append("  none counted")
    else:
        lines.append(f"  {'count':>8}  {'bytes':>10}  {'kind':<12}  where")
        for u in uploads[:max_rows]:
            lines.append(f"  {u['count']:>8}  {_bytes(u['bytes']):>10}  {u['kind']:<12}  {_where(u['file'], u['line'])}")
            if u.get("fix"):
                lines.append(f"      fix: {u['fix']}")
        if len(uploads) > max_rows:
            lines.append(f"  … {len(uploads) - max_rows} more lines (see --format json)")
    callbacks = report.get("callbacks", [])
    if callbacks:  # a section only when a program stages host callbacks
        lines.append("")
        lines.append("Host callbacks run (each one stops the device and calls Python)")
        lines.append(f"  {'count':>8}  where")
        for cb in callbacks[:max_rows]:
            lines.append(f"  {cb['count']:>8}  {_where(cb['file'], cb['line'])}")
            if cb.get("fix"):
                lines.append(f"      fix: {cb['fix']}")
        if len(callbacks) > max_rows:
            lines.append(f"  … {len(callbacks) - max_rows} more lines (see --format json)")
    lines.append("")
    lines.append("Jaxpr facts (first trace of each function)")
    if not report["jaxpr"]:
        lines.append("  none recorded")
    for j in report["jaxpr"][:max_rows]:
        facts = [f"{j['equations']} equations"]
        for cb in j["callbacks"]:
            facts.append(f"{cb['primitive']} at {_where(cb['file'], cb['line'])}")
        for c in j["large_constants"]:
            facts.append(f"constant {c['dtype']}{c['shape']} {_mib(c['bytes'])}")
        if j["float64_ops"]:
            facts.append(f"{j['float64_ops']} float64 ops")
        lines.append(f"  {j['qualname']} at {_where(j['file'], j['line'])}: " + "; ".join(facts))
    lines.extend(memory_report.text_lines(report, _where, max_rows))
    lines.extend(steploops.text_lines(report, _where, max_rows))
    lines.extend(eager.text_lines(report, _where, max_rows))
    lines.append("")
    lines.append("Static findings, checked against the run")
    if not report.get("static_checked", True):
        lines.append(f"  {_static_not_run(report)}")
    elif not report["findings"]:
        lines.append("  none")
    for f in report["findings"]:
        state = "confirmed" if f["confirmed"] else "not confirmed"
        lines.append(f"  {f['code']} {_where(f['file'], f['line'])} {state}: {f['evidence']}")
    if report["unpredicted"]:
        lines.append("")
        lines.append("Runtime problems no static finding predicted")
        for u in report["unpredicted"]:
            if u["kind"] == "recompilation":
                lines.append(f"  {u['count']} compilations of {u['name']} at {_where(u['file'], u['line'])}"
                             + (f": {u['detail']}" if u["detail"] else ""))
            elif u["kind"] == "eager":
                lines.append(f"  {u['count']} eager dispatches ({u['detail']}) at {_where(u['file'], u['line'])}")
            else:
                lines.append(f"  {u['count']} transfers ({u['detail']}) at {_where(u['file'], u['line'])}")
    lines.append("")
    lines.append(f"Internal JAX compilations (eager operations): {report['internal_compiles']} "
                 f"({report['internal_compile_seconds']:.2f} s)")
    if report.get("instrumentation_errors"):
        n = sum(report["instrumentation_errors"].values())
        lines.append(f"jaxlint: {n} instrumentation error(s) ignored; the counts may be incomplete")
    return "".join(_fit(line) for line in lines)


def _static_not_run(report: dict) -> str:
    if any(p.startswith("static cross-check failed") for p in report["partial"]):
        return "not run: the static check failed (see PARTIAL REPORT above)"
    if report.get("script") is None:
        return "not run (audit() runs no static check)"
    return "not run (--no-static)"


def _fit(line: str, width: int = 80) -> str:
    """One report line, wrapped to ``width`` columns under its own indentation."""
    if len(line) <= width:
        return line + "\n"
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    return textwrap.fill(line, width=width, subsequent_indent=indent, break_on_hyphens=False) + "\n"


def as_json(report: dict) -> str:
    return json.dumps(report, indent=2, sort_keys=False) + "\n"
