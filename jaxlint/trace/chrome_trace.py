"""The run's event log as a timeline (plain data), and as Trace Event JSON (``--chrome-trace``).

``timeline(collector)`` is what both ``--html`` and ``--chrome-trace`` draw: one lane per user
function that was traced or compiled, its trace/lower/compile events with their times since the
run started and their reasons, a lane for JAX's own eager compiles, and the timestamped sample
of host transfers. ``chrome_trace(...)`` writes it in the Trace Event format that Perfetto
(ui.perfetto.dev) and ``chrome://tracing`` open: ``X`` (complete) events with ``ts``/``dur`` in
microseconds, one thread (``tid``) per function, and ``i`` (instant) events plus a ``C``
(counter) track for host transfers. Nothing here imports JAX.
"""

from __future__ import annotations

import json
from typing import Optional

from .collector import MAX_TRANSFER_SAMPLES, Collector
from .report import _where

PID = 1
INTERNAL_TID = 1  # JAX's own eager compiles
TRANSFER_TID = 2  # host transfers
FIRST_FUNCTION_TID = 10


def timeline(collector: Collector) -> dict:
    """``{"duration", "lanes", "events", "transfers", "events_dropped", "transfers_total",
    "transfer_samples_cap"}``; an event's ``lane`` indexes ``lanes`` (None: JAX internal)."""
    lanes, index = [], {}
    events = []
    for e in sorted(collector.events, key=lambda e: e.t):
        lane = None
        if e.key is not None:
            lane = index.get(e.key)
            if lane is None:
                rec = collector.records.get(e.key)
                if rec is None:
                    continue
                lane = index[e.key] = len(lanes)
                lanes.append({"name": rec.name, "qualname": rec.qualname, "file": rec.file, "line": rec.line,
                              "where": _where(rec.file, rec.line), "compiles": rec.compiles,
                              "traces": rec.traces, "calls": rec.calls,
                              "lost_seconds": rec.cost.lost_seconds, "first_seconds": rec.cost.first_seconds})
        events.append({"t": max(0.0, e.t), "seconds": max(0.0, e.seconds), "kind": e.kind, "lane": lane,
                       "reason": e.reason})
    transfers = [{"t": max(0.0, t), "file": f, "line": l, "where": _where(f, l), "kind": k}
                 for t, f, l, k in collector.transfer_samples]
    end = collector.t_end if collector.t_end is not None else None
    duration = (end - collector.t0) if end is not None else 0.0
    for e in events:
        duration = max(duration, e["t"] + e["seconds"])
    for s in transfers:
        duration = max(duration, s["t"])
    return {
        "duration": duration,
        "lanes": lanes,
        "events": events,
        "transfers": transfers,
        "transfers_total": sum(collector.transfers.values()),
        "transfer_samples_cap": MAX_TRANSFER_SAMPLES,
        "events_dropped": collector.events_dropped,
    }


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def chrome_trace(tl: dict, label: Optional[str] = None) -> dict:
    """The timeline as ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``."""
    meta = [{"name": "process_name", "ph": "M", "ts": 0, "pid": PID, "tid": 0,
             "args": {"name": f"jaxlint trace: {label}" if label else "jaxlint trace"}}]
    names = {}
    if any(e["lane"] is None for e in tl["events"]):
        names[INTERNAL_TID] = "JAX internal (eager operations)"
    if tl["transfers"]:
        names[TRANSFER_TID] = "host transfers"
    for i, lane in enumerate(tl["lanes"]):
        names[FIRST_FUNCTION_TID + i] = f"{lane['qualname']} at {lane['where']}"
    for tid, name in sorted(names.items()):
        meta.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": PID, "tid": tid, "args": {"name": name}})
        meta.append({"name": "thread_sort_index", "ph": "M", "ts": 0, "pid": PID, "tid": tid,
                     "args": {"sort_index": tid}})
    timed = []
    counts: dict = {}
    for e in tl["events"]:
        lane = e["lane"]
        if lane is None:
            tid, fn = INTERNAL_TID, "JAX internal"
        else:
            tid, fn = FIRST_FUNCTION_TID + lane, tl["lanes"][lane]["qualname"]
        n = counts[(tid, e["kind"])] = counts.get((tid, e["kind"]), 0) + 1
        timed.append({"name": f"{e['kind']} {fn}", "cat": e["kind"], "ph": "X", "ts": _us(e["t"]),
                      "dur": _us(e["seconds"]), "pid": PID, "tid": tid,
                      "args": {"reason": e["reason"], "function": fn, f"{e['kind']} #": n}})
    for i, s in enumerate(tl["transfers"]):
        ts = _us(s["t"])
        timed.append({"name": f"{s['kind']} at {s['where']}", "cat": "transfer", "ph": "i", "s": "t",
                      "ts": ts, "pid": PID, "tid": TRANSFER_TID,
                      "args": {"file": s["file"], "line": s["line"], "kind": s["kind"]}})
        timed.append({"name": "host transfers", "cat": "transfer", "ph": "C", "ts": ts, "pid": PID,
                      "tid": TRANSFER_TID, "args": {"count": i + 1}})
    timed.sort(key=lambda ev: ev["ts"])  # stable: a transfer's instant stays before its counter
    return {
        "traceEvents": meta + timed,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": "jaxlint trace",
            "script": label or "",
            "events_dropped": str(tl["events_dropped"]),
            "transfers_total": str(tl["transfers_total"]),
            "transfers_timestamped": str(len(tl["transfers"])),
        },
    }


def write(path: str, collector: Collector, label: Optional[str] = None) -> None:
    data = chrome_trace(timeline(collector), label)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, ensure_ascii=False, separators=(",", ":"))
        fh.write("\n")
