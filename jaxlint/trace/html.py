"""``jaxlint trace --html FILE``: the report as one self-contained HTML page.

No network: the CSS, the SVG charts and a few lines of JavaScript are inline, and the page
refers to no external script, stylesheet, font or image. It shows

* a timeline of compilations: one lane per user function, a mark per compile at its time since
  the run started (hover: the miss reason), traces above them, JAX's own eager compiles and the
  first timestamped host transfers in lanes of their own;
* a bar chart of host transfers per source line;
* the tables of the text report: functions, transfers, jaxpr facts, static findings.

Nothing here imports JAX.
"""

from __future__ import annotations

import html as _html
import re
from typing import Optional

from . import eager, steploops
from .chrome_trace import timeline
from .collector import FIRST_CALL, RECREATED
from .report import _bytes, _mib, _reason_lines, _where

MAX_LANES = 40  # user functions drawn in the timeline (most compiled first)
MAX_BARS = 30  # source lines in the transfer chart
_SIGNATURE_REASONS = ("shape", "dtype", "weak type", "sharding", "pytree structure", "static value")

WIDTH = 1160
LABEL = 300
PLOT = WIDTH - LABEL - 24
LANE = 30
AXIS = 26


def _e(value) -> str:
    return _html.escape("" if value is None else str(value), quote=True)


def _reason_class(reason: str) -> str:
    if reason == FIRST_CALL:
        return "r-first"
    if reason.startswith(RECREATED):
        return "r-recreated"
    if reason.startswith(_SIGNATURE_REASONS):
        return "r-signature"
    return "r-other"


def _duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def _ticks(duration: float) -> list:
    """About eight round tick values from 0 to ``duration``."""
    if duration <= 0:
        return [0.0]
    raw = duration / 8
    mag = 10 ** _floor_log10(raw)
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    out, t = [], 0.0
    while t <= duration * 1.0001:
        out.append(t)
        t = round(t + step, 12)
    return out


def _floor_log10(x: float) -> int:
    n = 0
    while x >= 10:
        x /= 10
        n += 1
    while x < 1:
        x *= 10
        n -= 1
    return n


def _tick_label(t: float, duration: float) -> str:
    if duration >= 2:
        return f"{t:g} s"
    return f"{t * 1e3:g} ms"


def _clip(text: str, width: int = 44) -> str:
    """``text`` in at most ``width`` characters, its end kept: a path keeps whole folder and file
    names (``…/train/loop.py:12``); when the file name alone is too long, its line (``…:12``; the
    tooltip has the whole path); cut inside a name only when not even that fits."""
    if len(text) <= width:
        return text
    parts = text.replace("\\", "/").split("/")
    kept = parts[-1]
    if len(parts) > 1 and len(kept) + 2 <= width:
        for part in reversed(parts[:-1]):
            if len(part) + 1 + len(kept) + 2 > width:
                break
            kept = part + "/" + kept
        return "…/" + kept
    line = parts[-1].rpartition(":")[2]
    if line.isdigit() and len(line) + 2 <= width:  # the file name alone is too long: its line only
        return "…:" + line
    return "…" + text[-(width - 1):]


def timeline_svg(tl: dict) -> str:
    lanes = tl["lanes"]
    shown = sorted(range(len(lanes)), key=lambda i: (-round(lanes[i].get("lost_seconds", 0.0), 2),
                                                      -lanes[i]["compiles"], i))[:MAX_LANES]
    shown.sort()
    row = {lane: n for n, lane in enumerate(shown)}
    internal = [e for e in tl["events"] if e["lane"] is None and e["kind"] == "compile"]
    n_rows = len(shown) + (1 if internal else 0) + (1 if tl["transfers"] else 0)
    height = AXIS + max(1, n_rows) * LANE + 8
    duration = max(tl["duration"], 1e-6)

    def x(t: float) -> float:
        return LABEL + min(t, duration) / duration * PLOT

    head = [f'<svg id="timeline-svg" class="chart" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
            f'height="{height}" role="img" aria-label="compilations over the run">']
    grid = []  # drawn over the lanes' backgrounds, under the marks
    for t in _ticks(duration):
        xt = x(t)
        grid.append(f'<line class="grid" x1="{xt:.1f}" y1="{AXIS - 6}" x2="{xt:.1f}" y2="{height - 8}"/>'
                    f'<text class="tick" x="{xt:.1f}" y="{AXIS - 10}">{_e(_tick_label(t, duration))}</text>')
    backgrounds: list = []
    out: list = []  # the marks

    def lane_box(n: int, label: str, title: str, cls: str, right: str = "") -> float:
        y = AXIS + n * LANE
        extra = (f'<text class="lane-lost" x="{LABEL - 2}" y="{y + 19}" text-anchor="end">{_e(right)}'
                 f'<title>{_e(title)}</title></text>' if right else "")
        backgrounds.append(f'<g class="lane {cls}" data-lane="{n}"><rect class="lane-bg" x="0" y="{y}" '
                           f'width="{WIDTH}" height="{LANE}"><title>{_e(title)}</title></rect>'
                           f'<text class="lane-label" x="8" y="{y + 19}">{_e(label)}<title>{_e(title)}</title>'
                           f'</text>{extra}</g>')
        return y

    ys = {}
    for lane in shown:
        info = lanes[lane]
        calls = "-" if info["calls"] is None else info["calls"]
        name = info["qualname"] if len(info["qualname"]) <= 20 else info["qualname"][:19] + "…"
        lost = _lost_label(info.get("lost_seconds", 0.0))
        ys[lane] = lane_box(row[lane], f"{name}  {_clip(info['where'], 39 - len(name) - (len(lost) + 2 if lost else 0))}",
                            f"{info['qualname']} at {info['where']}: {info['compiles']} compiles, "
                            f"{info['traces']} traces, {calls} calls; "
                            f"{_duration(info.get('lost_seconds', 0.0))} lost to recompiles after the first compile "
                            f"({_duration(info.get('first_seconds', 0.0))})", "fn-lane", lost)
    n_int = len(shown)
    if internal:
        ys[None] = lane_box(n_int, "JAX internal (eager ops)",
                            f"JAX's own compilations for eager operations: {len(internal)} drawn", "internal-lane")
    counts: dict = {}
    for e in tl["events"]:
        lane = e["lane"]
        if lane not in ys or e["kind"] == "lower":
            continue
        if lane is None and e["kind"] != "compile":
            continue
        y = ys[lane]
        n = counts[(lane, e["kind"])] = counts.get((lane, e["kind"]), 0) + 1
        who = "JAX internal" if lane is None else lanes[lane]["qualname"]
        title = (f"{e['kind']} #{n} of {who} at {_duration(e['t'])} ({_duration(e['seconds'])})\n"
                 f"reason: {e['reason']}")
        w = e["seconds"] / duration * PLOT
        if e["kind"] == "trace":
            out.append(f'<rect class="trace-mark" x="{x(e["t"]):.2f}" y="{y + 4}" width="{max(1.5, w):.2f}" '
                       f'height="7" data-info="{_e(title)}"><title>{_e(title)}</title></rect>')
        elif lane is None:
            out.append(f'<rect class="internal-mark" x="{x(e["t"]):.2f}" y="{y + 8}" width="{max(2.0, w):.2f}" '
                       f'height="14" data-info="{_e(title)}"><title>{_e(title)}</title></rect>')
        else:
            out.append(f'<rect class="compile-mark {_reason_class(e["reason"])}" x="{x(e["t"]):.2f}" '
                       f'y="{y + 13}" width="{max(4.0, w):.2f}" height="13" rx="1" data-info="{_e(title)}">'
                       f'<title>{_e(title)}</title></rect>')
    if tl["transfers"]:
        n = len(shown) + (1 if internal else 0)
        total, sampled = tl["transfers_total"], len(tl["transfers"])
        label = "host transfers" + (f" (first {sampled})" if sampled < total else "")
        y = lane_box(n, label, f"{total} host transfers; the first {sampled} are drawn", "transfer-lane")
        for s in tl["transfers"]:
            xt = x(s["t"])
            title = f"{s['kind']} at {s['where']}, {_duration(s['t'])}"
            out.append(f'<line class="transfer-mark" x1="{xt:.2f}" y1="{y + 6}" x2="{xt:.2f}" y2="{y + LANE - 6}" '
                       f'data-info="{_e(title)}"><title>{_e(title)}</title></line>')
    if not n_rows:
        out.append(f'<text class="empty" x="{LABEL}" y="{AXIS + 19}">no compilation was recorded</text>')
    out.append("</svg>")
    out = head + backgrounds + grid + out
    notes = []
    if len(lanes) > len(shown):
        notes.append(f"{len(lanes) - len(shown)} more functions not drawn (the {MAX_LANES} most compiled are)")
    if tl["events_dropped"]:
        notes.append(f"{tl['events_dropped']} events past the log's limit not drawn (counts in the tables are exact)")
    return "".join(out) + "".join(f'<p class="note">{_e(n)}</p>' for n in notes)


def _cost_cards(report: dict) -> list:
    """The run's wall time spent compiling and the time lost to recompiles, as summary cards."""
    c = report.get("compiling_seconds")
    if not c or report.get("wall_seconds") is None:
        return []
    return [(f"{report['compile_share']:.0%}", f"of {_duration(report['wall_seconds'])} wall time compiling "
             f"({_duration(c['total'])})"),
            (_duration(c["lost"]), "lost to recompiles of your functions")]


def _lost_label(seconds: float) -> str:
    """A lane's time lost, short: ``lost 1.2 s``, ``lost 35 ms``; empty when nothing was lost."""
    if seconds < 5e-4:
        return ""
    return f"lost {seconds:.1f} s" if seconds >= 1 else f"lost {seconds * 1e3:.0f} ms"


# The charts' text is 12px monospace (.lane-label, .count): at most this many px per character
# (DejaVu Sans Mono, Menlo, Liberation Mono: 0.6 em), so a label's width is known before a browser
# lays it out and every label is placed where it fits whole.
CHAR = 7.3
MIN_PLOT = 150  # the longest transfer bar is at least this wide (longer kinds text is cut with "…")


def _fit_end(text: str, px: float) -> str:
    """``text`` if it fits in ``px``; else its start kept and the rest replaced by "…"."""
    n = int(px // CHAR)
    return text if len(text) <= n else text[:max(1, n - 1)] + "…"


def transfers_svg(report: dict) -> str:
    """One bar per source line: the line's ``file:line`` right-aligned before its bar, in a
    column as wide as the longest one (up to 45% of the chart; a longer path keeps its end, the
    file name and line, after a "…"), and the count and kinds after the bar, the bars scaled so
    that every one of them ends inside the chart."""
    per_line: dict = {}
    for t in report["transfers"]:
        entry = per_line.setdefault((t["file"], t["line"]), {})
        entry[t["kind"]] = entry.get(t["kind"], 0) + t["count"]
    if not per_line:
        return '<p class="empty">No host transfers counted.</p>'
    rows = sorted(per_line.items(), key=lambda kv: (-sum(kv[1].values()), str(kv[0])))
    top = max(sum(k.values()) for _, k in rows)
    shown = rows[:MAX_BARS]
    bar_h, gap, pad = 20, 6, 8
    height = len(shown) * (bar_h + gap) + 10
    wheres = [_where(file, line) for (file, line), _ in shown]
    label_w = min(max(len(w) for w in wheres) * CHAR, 0.45 * WIDTH)
    bars_x = pad + label_w + pad
    room = WIDTH - pad - bars_x - 6  # for a bar, then 6 px, then its count text
    counts = []
    for (_, kinds) in shown:
        n = sum(kinds.values())
        detail = ", ".join(f"{k} {c}" for k, c in sorted(kinds.items(), key=lambda kv: -kv[1]))
        counts.append((n, detail, f"{n} · {detail}"))
    # the widest plot at which each bar's text still ends inside the chart
    plot = min([room - 4 * CHAR] + [(room - len(text) * CHAR) * top / n for n, _, text in counts])
    plot = max(plot, MIN_PLOT)
    out = [f'<svg id="transfers-svg" class="chart" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
           f'height="{height}" role="img" aria-label="host transfers per source line">']
    for i, (where, (n, detail, text)) in enumerate(zip(wheres, counts)):
        y = 5 + i * (bar_h + gap)
        w = max(2.0, n / top * plot)
        title = f"{where}: {n} transfer{'s' if n != 1 else ''} ({detail})"
        label = where if len(where) * CHAR <= label_w else _clip(where, int(label_w // CHAR))
        out.append(f'<g class="bar" data-info="{_e(title)}"><title>{_e(title)}</title>'
                   f'<text class="lane-label bar-label" x="{bars_x - pad:.2f}" y="{y + 15}" '
                   f'text-anchor="end">{_e(label)}</text>'
                   f'<rect class="transfer-bar" x="{bars_x:.2f}" y="{y}" width="{w:.2f}" height="{bar_h}" rx="2"/>'
                   f'<text class="count" x="{bars_x + w + 6:.2f}" y="{y + 15}">{_e(_fit_end(text, room - w))}</text></g>')
    out.append("</svg>")
    if len(rows) > len(shown):
        out.append(f'<p class="note">{len(rows) - len(shown)} more lines in the table below</p>')
    return "".join(out)


def _table(headers: list, rows: list, numeric: tuple = ()) -> str:
    """A sortable table in a box that scrolls sideways if it must: long paths and call sites wrap
    at their separators instead of widening the page."""
    if not rows:
        return '<p class="empty">None.</p>'
    head = "".join(f'<th class="{"num" if i in numeric else ""}">{_e(h)}</th>' for i, h in enumerate(headers))
    body = []
    for r in rows:
        cells = "".join(f'<td class="{"num" if i in numeric else ""}">{c}</td>' for i, c in enumerate(r))
        body.append(f"<tr>{cells}</tr>")
    return (f'<div class="table-wrap"><table class="sortable"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def _wrap_where(file, line) -> str:
    """``file:line`` for a table cell, with break opportunities after each ``/`` (a long path
    wraps at a folder, not mid-name, and never widens the table past the page), and in a name
    longer than :data:`LONG_NAME` after its underscores; the file name and its line stay together."""
    parts = _e(_where(file, line)).split("/")
    parts = [re.sub(r"_(?=[^_])", "_<wbr>", p) if len(p) > LONG_NAME else p for p in parts]  # a long name: after "_"
    return "/<wbr>".join(parts)


LONG_NAME = 24  # a name longer than this may wrap after its dots and underscores


def _code(name) -> str:
    """A function's name as code, whole: it never wraps inside (CSS), except a long one after its
    dots and underscores (``a_training_step_<wbr>function...``), so it does not widen a table past
    the page."""
    text = _e(name)
    if len(str(name or "")) > LONG_NAME:
        text = re.sub(r"([._])(?=[^._])", r"\1<wbr>", text)
    return f"<code>{text}</code>"



def _functions_table(report: dict) -> str:
    rows = []
    for f in report["functions"]:
        reasons = _reason_lines(f)
        if f.get("via"):
            reasons.append(f"traced through {f['via']}")
        sites = "<br>".join(
            f"{_wrap_where(s['file'], s['line'])}: {s['misses']} miss{'es' if s['misses'] != 1 else ''}, "
            f"{s['lost_seconds']:.3f} s lost" for s in f.get("call_sites", []))
        rows.append([
            str(f["compiles"]), str(f["traces"]), "-" if f["calls"] is None else str(f["calls"]),
            f"{f.get('lost_seconds', 0.0):.3f}", f"{f.get('first_compile_seconds', 0.0):.3f}",
            f"{_code(f['qualname'])}", _wrap_where(f["file"], f["line"]),
            "<br>".join(_e(r) for r in reasons), sites,
        ])
    return _table(["compiles", "traces", "calls", "lost s", "first compile s", "function", "where",
                   "miss reasons (time lost)", "call sites"], rows, (0, 1, 2, 3, 4))


def _budgets_section(report: dict) -> str:
    """The compile budgets and gates checked on this run (``report["budgets"]``), pass or fail."""
    results = report.get("budgets") or []
    if not results:
        return ""
    rows = []
    for r in results:
        if r["function"] is None:
            state, what = '<span class="no">matched no function</span>', ""
        else:
            state = ('<span class="ok">passed</span>' if r["passed"] else
                     '<span class="no">failed</span>' if r["gate"] else '<span class="no">cannot pass (guessed counts)</span>')
            what = f"{_code(r['function'])} at {_wrap_where(r['file'], r['line'])}"
        limit = f"{_e(r['option'])} <code>{_e(r['pattern'])}</code> ≤ {r['limit']}"
        rows.append([limit, what, "" if r["compiles"] is None else str(r["compiles"]), state])
    return ('<section id="budgets"><h2>Compile budgets</h2>'
            + _table(["budget", "function", "compiles", "result"], rows, (2,)) + "</section>")


def _jaxpr_table(report: dict) -> str:
    rows = []
    for j in report["jaxpr"]:
        cbs = "<br>".join(f"{_e(c['primitive'])} at {_wrap_where(c['file'], c['line'])}" for c in j["callbacks"])
        consts = "<br>".join(f"{_e(c['dtype'])}{_e(c['shape'])} {_e(_mib(c['bytes']))}" for c in j["large_constants"])
        rows.append([f"{_code(j['qualname'])}", _wrap_where(j["file"], j["line"]), str(j["equations"]),
                     cbs, consts, str(j["float64_ops"])])
    return _table(["function", "where", "equations", "host callbacks", "constants > 1 MiB", "float64 ops"],
                  rows, (2, 5))


def _memory_section(report: dict) -> str:
    """Compiled programs' memory (MiB in every column, so that the columns sort; exact bytes in
    each cell's title), donation advice, the set-up order and device memory."""
    mem = report.get("memory")
    if not mem:
        return ""

    def size(n) -> str:
        return "" if n is None else f'<span title="{int(n)} bytes">{_e(_mib(n))}</span>'

    rows = [[size(p["temp"]), size(p["argument"]), size(p["output"]), size(p["alias"]),
             ("" if p["footprint_exact"] else "≤ ") + size(p["footprint"]), size(p.get("device_peak_rise")),
             str(p["compiles"]), f"{_code(p['function'])}", _wrap_where(p["file"], p["line"])]
            for p in mem["programs"]]
    out = ['<section id="memory"><h2>Memory of each compiled program</h2>',
           '<p class="note">XLA\'s figures for each function\'s largest compile, largest temporaries first; '
           '"≤": this jaxlib reports no peak, so arguments + outputs + temporaries − aliased (an upper bound). '
           '"device": how much the device\'s own peak (peak_bytes_in_use, measured) rose over the function\'s '
           'first calls, every call it had in flight included; empty where the device reports no memory.</p>',
           _table(["temp", "arguments", "outputs", "aliased", "peak", "device", "compiles", "function", "where"],
                  rows, (0, 1, 2, 3, 4, 5, 6))]
    donation = [[size(d["bytes"]), size(d.get("device_saving")), f"{_code(d['function'])}",
                 _wrap_where(d["file"], d["line"]), _e(d["fix"])] for d in mem["donation"]]
    donation += [[("" if not u["count"] else str(u["count"]) + "× "), "", f"{_code(u['function'] or '')}",
                  _wrap_where(u["file"], u["line"]),
                  _e(f"donated but not usable: {u['arguments']} (no output of the same shape and dtype)")]
                 for u in mem["donation_unusable"]]
    if donation:
        out += ["<h3>Donation</h3>", _table(["not donated (XLA's figure)", "device peak saving (estimated)", "function",
                                             "where", "advice"], donation, (0, 1))]
    order = []
    for st in mem["settings"]:
        read = st.get("read_at")
        state = "in time" if st["effective"] else "no effect: " + (
            "read at import jax" if st["read"] == "import" else "the backend had started")
        order.append([f"<code>{_e(st['name'])}</code>", _wrap_where(st["file"], st["line"]), _e(state),
                      _wrap_where(read["file"], read["line"]) if read else ""])
    for i in mem["distributed_initialize"]:
        at = i.get("backend_started_at")
        order.append(["<code>jax.distributed.initialize()</code>", _wrap_where(i["file"], i["line"]),
                      _e("after the backend started" if i["late"] else "in time"),
                      _wrap_where(at["file"], at["line"]) if at else ""])
    if order:
        out += ["<h3>Set-up order</h3>", _table(["setting", "where", "effect", "JAX read it at"], order)]
    dev = mem.get("device") or {}
    if dev.get("available"):
        out += ["<h3>Device memory</h3>", _table(
            ["device", "peak in use", "in use", "limit"],
            [[_e(d["device"]), size(d.get("peak_bytes_in_use")), size(d.get("bytes_in_use")), size(d.get("bytes_limit"))]
             for d in dev["devices"]], (1, 2, 3))]
    elif dev:
        out.append(f'<p class="note">Device memory: not available ({_e(dev.get("why"))}).</p>')
    out.append("</section>")
    return "".join(out)


def _findings(report: dict) -> str:
    rows = []
    for f in report["findings"]:
        state = ('<span class="ok">confirmed</span>' if f["confirmed"]
                 else '<span class="no">not confirmed</span>')
        rows.append([f"<code>{_e(f['code'])}</code>", _wrap_where(f["file"], f["line"]), state,
                     _e(f["evidence"]), _e(f["message"])])
    out = _table(["code", "where", "at runtime", "evidence", "message"], rows)
    if report["unpredicted"]:
        urows = []
        for u in report["unpredicted"]:
            what = (f"{u['count']} compilations of {_code(u['name'])}" if u["kind"] == "recompilation"
                    else f"{u['count']} eager dispatches" if u["kind"] == "eager" else f"{u['count']} transfers")
            urows.append([_e(u["kind"]), what, _wrap_where(u["file"], u["line"]), _e(u["detail"])])
        out += ("<h3>Runtime problems no static finding predicted</h3>"
                + _table(["kind", "what", "where", "detail"], urows))
    return out


CSS = """
:root{--fg:#1d2330;--muted:#5c6577;--line:#dfe3ea;--bg:#fff;--panel:#f6f8fb}
*{box-sizing:border-box}
body{margin:0;padding:20px 28px 40px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;
color:var(--fg);background:var(--bg)}
h1{font-size:20px;margin:0 0 2px}h2{font-size:16px;margin:26px 0 8px}h3{font-size:14px;margin:16px 0 6px}
code{font:12.5px ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace}
.meta,.note,.empty{color:var(--muted);margin:4px 0}
.partial{background:#fff4e5;border:1px solid #ffc078;padding:6px 10px;border-radius:4px;margin:6px 0}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:14px 0 4px}
.card{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:130px}
.card b{display:block;font-size:20px}.card span{color:var(--muted);font-size:12px}
.chart{display:block;max-width:100%;height:auto;border:1px solid var(--line);border-radius:6px;background:#fff}
.lane-bg{fill:#fff}.lane:nth-child(even) .lane-bg{fill:#f7f9fc}
.lane.hl .lane-bg{fill:#e7f0ff}
.lane-label{font:12px ui-monospace,Menlo,Consolas,monospace;fill:var(--fg)}
.lane-lost{font:12px ui-monospace,Menlo,Consolas,monospace;fill:#c92a2a}
.grid{stroke:#e3e7ee;stroke-width:1}.tick{font-size:11px;fill:var(--muted);text-anchor:middle}
.trace-mark{fill:#74c0fc}
.compile-mark{stroke:#1d2330;stroke-width:.6}
.r-first{fill:#2f9e44}.r-recreated{fill:#e03131}.r-signature{fill:#f76707}.r-other{fill:#7048e8}
.internal-mark{fill:#adb5bd}
.transfer-mark{stroke:#1c7ed6;stroke-width:1}
.transfer-bar{fill:#1c7ed6}.count{font:12px ui-monospace,Menlo,Consolas,monospace;fill:var(--fg)}
.chart [data-info]{cursor:pointer}.chart [data-info]:hover{opacity:.7}
.legend{display:flex;gap:16px;flex-wrap:wrap;color:var(--muted);font-size:12px;margin:4px 0 8px}
.legend i{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:5px;vertical-align:-2px}
.detail{white-space:pre-wrap;font:12.5px ui-monospace,Menlo,Consolas,monospace;background:var(--panel);
border:1px solid var(--line);border-radius:4px;padding:6px 10px;margin-top:6px;min-height:2.6em}
.table-wrap{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;width:100%;margin:4px 0 8px}
td{overflow-wrap:break-word}
td.num{white-space:nowrap}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:var(--panel);font-weight:600;cursor:pointer;user-select:none;white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#2b8a3e;font-weight:600}.no{color:var(--muted)}
footer{margin-top:26px;color:var(--muted);font-size:12px}
"""

# Hover or click a mark or bar: its text in the detail box. Click a column head: sort the table.
JS = """
(function(){
  document.querySelectorAll('svg.chart').forEach(function(svg){
    var box=svg.parentNode.querySelector('.detail');
    function show(ev){var el=ev.target.closest('[data-info]');
    if(el&&box){box.textContent=el.getAttribute('data-info');}}
    svg.addEventListener('mouseover',show);svg.addEventListener('click',show);});
  document.querySelectorAll('#timeline-svg .lane').forEach(function(g){
    g.addEventListener('mouseenter',function(){g.classList.add('hl');});
    g.addEventListener('mouseleave',function(){g.classList.remove('hl');});});
  document.querySelectorAll('table.sortable th').forEach(function(th,i){
    th.addEventListener('click',function(){
      var tb=th.closest('table').tBodies[0],rows=Array.prototype.slice.call(tb.rows);
      var asc=th.getAttribute('data-sort')!=='asc';th.setAttribute('data-sort',asc?'asc':'desc');
      function key(r){var t=r.cells[i].textContent.trim(),n=parseFloat(t);return isNaN(n)?t:n;}
      rows.sort(function(a,b){var x=key(a),y=key(b);
        var c=(typeof x==='number'&&typeof y==='number')?x-y:String(x).localeCompare(String(y));return asc?c:-c;});
      rows.forEach(function(r){tb.appendChild(r);});});});
  var marks=document.querySelectorAll('#timeline-svg .compile-mark').length;
  document.body.setAttribute('data-compile-marks',String(marks));
  document.body.setAttribute('data-ready','1');
})();
"""


def render(report: dict, tl: dict, label: Optional[str] = None) -> str:
    """The whole page, from the report dict (``report.build``) and ``chrome_trace.timeline``."""
    env = report.get("environment") or {}
    script = label or report.get("script") or "audit"
    if not script.startswith("-m "):
        script = _where(script, None)
    title = f"jaxlint trace: {script}"
    meta = []
    if report.get("script_exit_code") is not None:
        meta.append(f"exited with {report['script_exit_code']}")
    if env:
        meta.append(f"jax {env.get('jax', '?')}, {env.get('backend', '?')}, python {env.get('python', '?')}")
    meta.append(f"run time {_duration(tl['duration'])}")
    user_compiles = sum(f["compiles"] for f in report["functions"])
    transfers = sum(t["count"] for t in report["transfers"])
    cards = [(user_compiles, "compilations of your functions"), (len(report["functions"]), "functions traced"),
             (transfers, "host transfers"), (report["internal_compiles"], "internal JAX compilations"),
             (sum(1 for f in report["findings"] if f["confirmed"]), "static findings confirmed")]
    cards += _cost_cards(report)
    legend = [("r-first", "#2f9e44", "compile: first call"), ("r-recreated", "#e03131", "compile: function re-created"),
              ("r-signature", "#f76707", "compile: argument signature changed"),
              ("r-other", "#7048e8", "compile: other reason"), ("trace", "#74c0fc", "trace"),
              ("internal", "#adb5bd", "JAX internal compile"), ("transfer", "#1c7ed6", "host transfer")]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<header><h1>{_e(title)}</h1><p class=\"meta\">{_e(' · '.join(meta))}</p>",
        "".join(f'<p class="partial">PARTIAL REPORT: {_e(p)}</p>' for p in report["partial"]),
        '<div class="cards">' + "".join(f"<div class=\"card\"><b>{n}</b><span>{_e(s)}</span></div>" for n, s in cards)
        + "</div></header>",
        '<section id="timeline"><h2>Compilations over the run</h2>',
        '<div class="legend">' + "".join(f'<span><i style="background:{c}"></i>{_e(t)}</span>' for _, c, t in legend)
        + "</div>",
        timeline_svg(tl),
        '<div class="detail">Hover over or click a mark for its time and reason.</div></section>',
        '<section id="transfer-chart"><h2>Host transfers per source line</h2>', transfers_svg(report),
        '<div class="detail">Hover over or click a bar for its kinds of transfer.</div>' if report["transfers"] else "",
        "</section>",
        '<section id="functions"><h2>Recompilation hotspots</h2>', _functions_table(report), "</section>",
        _budgets_section(report),
        '<section id="transfers"><h2>Host transfers</h2>',
        _table(["count", "kind", "where", "fix"],
               [[str(t["count"]), _e(t["kind"]), _wrap_where(t["file"], t["line"]), _e(t.get("fix") or "")]
                for t in report["transfers"]], (0,)),
        "</section>",
        '<section id="uploads"><h2>Host-to-device copies</h2>',
        _table(["count", "bytes", "kind", "where", "fix"],
               [[str(u["count"]), _e(_bytes(u["bytes"])), _e(u["kind"]), _wrap_where(u["file"], u["line"]),
                 _e(u.get("fix") or "")] for u in report.get("uploads", [])], (0, 1)),
        "</section>",
        ('<section id="callbacks"><h2>Host callbacks run</h2>'
         + _table(["count", "where", "fix"], [[str(c["count"]), _wrap_where(c["file"], c["line"]), _e(c.get("fix") or "")]
                                             for c in report["callbacks"]], (0,)) + "</section>")
        if report.get("callbacks") else "",
        '<section id="jaxpr"><h2>Jaxpr facts (first trace of each function)</h2>', _jaxpr_table(report), "</section>",
        _memory_section(report),
        steploops.html_section(report, _e, _wrap_where, _table),
        eager.html_section(report, _e, _wrap_where, _table),
        '<section id="findings"><h2>Static findings, checked against the run</h2>', _findings(report), "</section>",
        "<footer>",
        f"<p>Internal JAX compilations (eager operations): {report['internal_compiles']} "
        f"({report['internal_compile_seconds']:.2f} s)</p>",
    ]
    if report.get("instrumentation_errors"):
        n = sum(report["instrumentation_errors"].values())
        parts.append(f"<p>jaxlint: {n} instrumentation error(s) ignored; the counts may be incomplete</p>")
    for gate in report.get("gates") or []:
        parts.append(f"<p><b>GATE:</b> {_e(gate)}</p>")
    parts.append("<p>Generated by jaxlint trace. Self-contained: this file loads nothing from the network.</p>")
    parts.append(f"</footer><script>{JS}</script></body></html>\n")
    return "".join(parts)


def write(path: str, report: dict, collector, label: Optional[str] = None) -> None:
    page = render(report, timeline(collector), label)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(page)
