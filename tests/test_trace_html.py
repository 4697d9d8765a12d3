"""`jaxlint trace --html` and `--chrome-trace`: the event log behind them, the Trace Event JSON's
structure, the page's self-containment, and the page as a real browser (headless Chromium)
renders it: the timeline's compile marks after the page's JavaScript ran, and a screenshot.

The browser test skips when no Chromium is installed (Debian: `apt-get install -y chromium`;
`.ci/run` tries that, best-effort).
"""

import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

import pytest

pytest.importorskip("jax")

from jaxlint.trace import collector as col  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures", "trace")
EXPECTED_COMPILES = {"jit_in_loop.py": 5, "three_shapes.py": 3}
FIRST_CALL_RGB = (0x2F, 0x9E, 0x44)  # .r-first in html.CSS: every run's first compile has it


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each fixture traced once with --html and --chrome-trace: name -> (html path, html, trace json)."""
    out = {}
    for name in EXPECTED_COMPILES:
        d = tmp_path_factory.mktemp(name.replace(".py", ""))
        page, events = d / "report.html", d / "trace.json"
        proc = subprocess.run(
            [sys.executable, "-m", "jaxlint", "trace", "--html", str(page), "--chrome-trace", str(events),
             os.path.join(FIX, name)], capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "Recompilation hotspots" in proc.stderr  # the text report is still written
        out[name] = (str(page), page.read_text(encoding="utf-8"), json.loads(events.read_text(encoding="utf-8")))
    return out


# -- the event log ------------------------------------------------------------------


class _Files:
    def __call__(self, filename):
        return True

    def site(self, frame):
        return ("prog.py", 3)


def test_event_log_is_bounded_and_counts_what_it_drops():
    c = col.Collector(_Files())
    rec = c.record("k", lambda key: ("f", "f", "prog.py", 1))
    for _ in range(col.MAX_EVENTS + 7):
        c.compiled("k", 0.001)
    assert rec.compiles == col.MAX_EVENTS + 7  # counts stay exact
    assert len(c.events) == col.MAX_EVENTS and c.events_dropped == 7
    for _ in range(col.MAX_TRANSFER_SAMPLES + 5):
        c.transferred(None, "float")
    assert c.transfers[("prog.py", 3, "float")] == col.MAX_TRANSFER_SAMPLES + 5
    assert len(c.transfer_samples) == col.MAX_TRANSFER_SAMPLES


def test_internal_compiles_get_a_smaller_share_of_the_log():
    c = col.Collector(_Files())
    for _ in range(col.MAX_INTERNAL_EVENTS + 3):
        c.compiled(None, 0.001)
    assert c.internal_compiles == col.MAX_INTERNAL_EVENTS + 3
    assert len(c.events) == col.MAX_INTERNAL_EVENTS and c.events_dropped == 3


def test_each_compile_is_logged_with_its_time_and_the_reason_of_its_trace():
    import jax
    import jax.numpy as jnp

    from jaxlint.trace import audit

    with audit() as a:
        @jax.jit
        def predict(w, batch):
            return jnp.tanh(batch @ w)

        w = jnp.ones((8, 4))
        for n in (32, 32, 17, 32, 5):
            predict(w, jnp.ones((n, 8)))
    events = [e for e in a.collector.events if e.key is not None]
    compiles = [e for e in events if e.kind == "compile"]
    assert [e.reason for e in compiles] == [
        "first call",
        "shape of `batch` changed: f32[32,8] → f32[17,8]",
        "shape of `batch` changed: f32[17,8] → f32[5,8]",
    ]
    assert [e.reason for e in events if e.kind == "trace"] == [e.reason for e in compiles]
    times = [e.t for e in events]
    assert times == sorted(times) and times[0] >= 0
    assert all(e.seconds >= 0 for e in events)
    assert a.collector.t_end is not None and a.collector.t_end - a.collector.t0 >= compiles[-1].t


# -- --chrome-trace -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED_COMPILES))
def test_chrome_trace_is_valid_trace_event_json(runs, name):
    _, _, data = runs[name]
    assert isinstance(data, dict) and isinstance(data["traceEvents"], list)
    events = data["traceEvents"]
    for ev in events:
        for key, kind in (("name", str), ("ph", str), ("pid", int), ("tid", int)):
            assert isinstance(ev.get(key), kind), (key, ev)
        assert isinstance(ev.get("ts"), (int, float)) and ev["ts"] >= 0, ev
        assert ev["ph"] in ("M", "X", "i", "C"), ev
        if ev["ph"] == "X":
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0, ev
            assert ev["cat"] in ("trace", "lower", "compile") and isinstance(ev["args"]["reason"], str)
        if ev["ph"] == "i":
            assert ev["s"] in ("t", "p", "g")
        if ev["ph"] == "C":
            assert all(isinstance(v, (int, float)) for v in ev["args"].values())
    ts = [ev["ts"] for ev in events]
    assert ts == sorted(ts), "timestamps must not go backwards"
    threads = {ev["tid"]: ev["args"]["name"] for ev in events if ev["ph"] == "M" and ev["name"] == "thread_name"}
    timed = [ev for ev in events if ev["ph"] != "M"]
    assert {ev["tid"] for ev in timed} <= set(threads)  # every track is named
    fn_tids = {tid for tid, n in threads.items() if "fixtures/trace/" + name in n}
    assert len(fn_tids) == 1  # one tid per function
    compiles = [ev for ev in timed if ev["cat"] == "compile" and ev["tid"] in fn_tids]
    assert len(compiles) == EXPECTED_COMPILES[name]
    assert compiles[0]["args"]["reason"] == "first call"
    traces = [ev for ev in timed if ev["cat"] == "trace" and ev["tid"] in fn_tids]
    assert len(traces) == EXPECTED_COMPILES[name]
    for t, c in zip(traces, compiles):  # a compile follows its trace, with the same reason
        assert t["ts"] + t["dur"] <= c["ts"] and t["args"]["reason"] == c["args"]["reason"]


def test_chrome_trace_has_transfer_instants_and_a_counter(tmp_path):
    events = tmp_path / "t.json"
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--no-static", "--chrome-trace", str(events),
                           os.path.join(FIX, "float_every_step.py")], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(events.read_text())["traceEvents"]
    instants = [ev for ev in data if ev["ph"] == "i"]
    counters = [ev for ev in data if ev["ph"] == "C"]
    assert len(instants) == len(counters) == 51
    assert sum(1 for ev in instants if ev["args"]["line"] == 21 and ev["args"]["kind"] == "float") == 50
    assert [ev["args"]["count"] for ev in counters] == list(range(1, 52))


# -- --html -----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED_COMPILES))
def test_html_is_self_contained(runs, name):
    _, page, _ = runs[name]
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"""\b(?:src|href|xlink:href|action|poster)\s*=\s*["']?(?!#)""", page, re.I)
    assert not re.search(r"<(?:link|iframe|object|embed|img|base)\b", page, re.I)
    assert "@import" not in page and "url(" not in page and "@font-face" not in page
    assert page.count("<script") == 1 and "<script>" in page  # one inline script, no src
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")


@pytest.mark.parametrize("name", sorted(EXPECTED_COMPILES))
def test_html_has_the_timeline_chart_and_tables(runs, name):
    _, page, _ = runs[name]
    assert len(re.findall(r'class="compile-mark\b', page)) == EXPECTED_COMPILES[name]
    for section in ("timeline", "transfer-chart", "functions", "transfers", "jaxpr", "findings"):
        assert f'<section id="{section}">' in page
    titles = re.findall(r'<rect class="compile-mark[^>]*><title>([^<]*)</title>', page)
    assert len(titles) == EXPECTED_COMPILES[name]
    assert "reason: first call" in titles[0]
    if name == "three_shapes.py":
        assert "reason: shape of `batch` changed: f32[32,8] → f32[17,8]" in titles[1].replace("&#x27;", "'")
    else:
        assert all("reason: function object re-created" in t for t in titles[1:])
        assert "JAX101" in page and "confirmed" in page


def test_html_transfer_chart_has_a_bar_per_line(tmp_path):
    page = tmp_path / "r.html"
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--html", str(page),
                           os.path.join(FIX, "float_every_step.py")], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    assert len(re.findall(r'class="transfer-bar"', text)) == 2
    assert "float_every_step.py:21: 50 transfers (float 50)" in text
    assert len(re.findall(r'class="transfer-mark"', text)) == 51


def _bars(svg: str) -> list:
    """(label x, label text, bar x, bar width, count x, count text) of each bar, from the SVG."""
    pattern = (r'<text class="lane-label bar-label" x="([\d.]+)" y="[\d.]+" text-anchor="end">([^<]*)</text>'
               r'<rect class="transfer-bar" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"[^>]*/>'
               r'<text class="count" x="([\d.]+)" y="[\d.]+">([^<]*)</text>')
    return [(float(a), html.unescape(b), float(c), float(d), float(e), html.unescape(f))
            for a, b, c, d, e, f in re.findall(pattern, svg)]


def test_html_transfer_chart_labels_fit_whole(monkeypatch, tmp_path):
    """Each bar's `file:line` ends before its bar and its count text inside the chart, however
    long the path or the list of kinds (the 1200 px page used to hide the line number under the
    bar and cut the kinds at the chart's edge)."""
    from jaxlint.trace import html as page

    monkeypatch.chdir(tmp_path)
    kinds = ["float", "int", "bool", "item", "tolist", "numpy", "str", "format", "device_get"]
    cases = {
        "src/train.py": 7,  # short
        "a_rather_long_folder_name/with_more_nesting_inside/training_loop.py": 123,  # 70 characters
        "x/" * 60 + "deep.py": 9,  # longer than the label column
    }
    report = {"transfers": []}
    for n, (rel, line) in enumerate(cases.items()):
        for k, kind in enumerate(kinds[: (3, 5, 9)[n]]):
            report["transfers"].append({"file": str(tmp_path / rel), "line": line, "kind": kind,
                                        "count": 100 * (n + 1) + k})
    bars = _bars(page.transfers_svg(report))
    assert len(bars) == 3
    for label_x, label, bar_x, bar_w, count_x, count in bars:
        assert len(label) * page.CHAR <= label_x  # right-aligned at label_x, starts inside the chart
        assert label_x < bar_x  # and ends before its bar
        assert count_x >= bar_x + bar_w and count_x + len(count) * page.CHAR <= page.WIDTH
        assert re.search(r":\d+$", label), label  # the line number is always shown
    labels = {label.rsplit(":", 1)[0] for _, label, *_ in bars}
    assert "src/train.py" in labels and "a_rather_long_folder_name/with_more_nesting_inside/training_loop.py" in labels
    long_label = next(label for _, label, *_ in bars if label.startswith("…"))
    assert long_label.endswith("x/x/deep.py:9")
    counts = {label: count for _, label, *_, count in bars}
    assert counts["src/train.py:7"] == "303 · bool 102, int 101, float 100"
    assert counts["a_rather_long_folder_name/with_more_nesting_inside/training_loop.py:123"] == (
        "1010 · tolist 204, item 203, bool 202, int 201, float 200")
    assert counts[long_label].endswith("…")  # nine kinds: cut to fit, whole on hover


def test_html_write_failure_keeps_the_report_and_says_why(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--no-static", "--html",
                           str(tmp_path / "missing-dir" / "r.html"), os.path.join(FIX, "hoisted_jit.py")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2
    assert "Recompilation hotspots" in proc.stderr and "cannot write" in proc.stderr


# -- in a real browser ---------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium():
    """The browser's path; requested before ``runs`` so that without one nothing is traced."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium found for the headless-browser test: install it with `apt-get install -y chromium` "
                "(Debian; .ci/run tries this best-effort)")


def _browser(chromium, profile, *args):
    cmd = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--hide-scrollbars",
           "--disable-dev-shm-usage", "--force-color-profile=srgb", f"--user-data-dir={profile}",
           "--virtual-time-budget=3000", "--run-all-compositor-stages-before-draw", "--window-size=1200,900", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _png_pixels(data: bytes):
    """(width, height, rows of RGB tuples) of an 8-bit, non-interlaced RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, ctype, _, _, interlace = head
    assert depth == 8 and ctype in (2, 6) and interlace == 0, head
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return width, height, rows


@pytest.mark.parametrize("name", sorted(EXPECTED_COMPILES))
def test_html_in_headless_chromium(chromium, runs, name, tmp_path):
    path, _, _ = runs[name]
    url = "file://" + os.path.abspath(path)
    dom = _browser(chromium, tmp_path / "profile-dom", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    marks = len(re.findall(r'class="compile-mark\b', dom.stdout))
    assert marks == EXPECTED_COMPILES[name], marks
    assert 'data-ready="1"' in dom.stdout, "the page's script did not run to its end"
    assert f'data-compile-marks="{EXPECTED_COMPILES[name]}"' in dom.stdout  # counted by the script itself

    shot = tmp_path / (name.replace(".py", "") + ".png")
    res = _browser(chromium, tmp_path / "profile-shot", f"--screenshot={shot}", url)
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    print(f"\nscreenshot of {name}: {shot}")
    data = shot.read_bytes()
    assert len(data) > 20_000, len(data)
    width, height, rows = _png_pixels(data)
    assert (width, height) == (1200, 900)
    colours = {px for row in rows[::4] for px in row[::4]}
    assert len(colours) > 50, "the screenshot is (nearly) one colour"
    near = lambda px, ref: all(abs(p - r) <= 8 for p, r in zip(px, ref))  # noqa: E731
    plot_left = 320  # the timeline's plot area starts right of the lane labels (and the legend's swatch)
    green = sum(1 for row in rows for px in row[plot_left:] if near(px, FIRST_CALL_RGB))
    assert green >= 40, "the first compile's mark is not visible in the screenshot"


LONG_PATHS_SCRIPT = """\
import jax
import jax.numpy as jnp
import numpy as np

@jax.jit
def step(x):
    return x * 2

x = jnp.ones(3)
for i in range(12):
    x = step(x)
    a = float(x[0])
    b = int(x[1]); c = np.asarray(x); d = x.tolist(); e = bool(x[0] > 0); f = x[2].item()
"""

MEASURE = """<script>
const svg = document.getElementById('transfers-svg'), boxes = [];
for (const g of svg.querySelectorAll('g.bar')) {
  const [label, bar, count] = [g.querySelector('text.lane-label'), g.querySelector('rect'),
                               g.querySelector('text.count')].map(e => e.getBBox());
  boxes.push({label: [label.x, label.x + label.width], bar: [bar.x, bar.x + bar.width],
              count: [count.x, count.x + count.width], text: g.querySelector('text.lane-label').textContent});
}
const r = svg.getBoundingClientRect();
document.body.setAttribute('data-measured', JSON.stringify(
  {width: svg.viewBox.baseVal.width, boxes, right: r.right, inner: window.innerWidth}));
</script></body>"""


def _measured_page(chromium, tmp_path, rel: str, script_text: str, measure: str, *browser_args) -> dict:
    """`jaxlint trace --html` of ``script_text`` saved at ``rel`` under ``tmp_path``, laid out by
    Chromium with ``measure`` (a script that stores JSON in body's ``data-measured``) appended."""
    script = tmp_path / rel
    script.parent.mkdir(parents=True)
    script.write_text(script_text)
    page = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--no-static", "--html", str(page), rel],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    measured = tmp_path / "measured.html"
    measured.write_text(page.read_text(encoding="utf-8").replace("</body>", measure), encoding="utf-8")
    dom = _browser(chromium, tmp_path / "profile", *browser_args, "--dump-dom", "file://" + str(measured))
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r'data-measured="([^"]*)"', dom.stdout)
    assert m, "the measuring script did not run"
    got = json.loads(html.unescape(m.group(1)))
    got["html"] = page.read_text(encoding="utf-8")
    return got


def test_html_transfer_labels_fit_at_1200px_in_headless_chromium(chromium, tmp_path):
    """The transfer chart as Chromium lays it out in a 1200 px window: each `file:line` label
    ends before its bar and each count label inside the chart, for a long path and six kinds."""
    rel = os.path.join("a_rather_long_folder_name", "with_more_nesting_inside", "training_loop_with_a_long_name.py")
    got = _measured_page(chromium, tmp_path, rel, LONG_PATHS_SCRIPT, MEASURE)
    assert got["right"] <= got["inner"]  # the chart is not wider than the page
    assert len(got["boxes"]) == 2
    for box in got["boxes"]:
        assert 0 <= box["label"][0] and box["label"][1] <= box["bar"][0], box  # the label ends before its bar
        assert box["bar"][1] <= box["count"][0] and box["count"][1] <= got["width"], box  # the count inside
        assert re.search(r"training_loop_with_a_long_name\.py:1[23]$", box["text"]), box  # its line is shown


MANY_SITES_SCRIPT = """\
import numpy as np
import jax
import jax.numpy as jnp

@jax.jit
def a_training_step_function_with_a_rather_long_descriptive_name(x):
    return x * 2

table = np.ones((64, 64), dtype=np.float32)
for i in range(3):
    a_training_step_function_with_a_rather_long_descriptive_name(jnp.ones(3))
    a_training_step_function_with_a_rather_long_descriptive_name(jnp.ones(4))
    a_training_step_function_with_a_rather_long_descriptive_name(jnp.ones(5))
    a_training_step_function_with_a_rather_long_descriptive_name(jnp.ones(6))
    a_training_step_function_with_a_rather_long_descriptive_name(jnp.ones(7))
    a_training_step_function_with_a_rather_long_descriptive_name(jnp.ones(8))
    y = jnp.asarray(table)
    print(float(y[0, 0]))
"""

MEASURE_PAGE = """<script>
const wraps = [...document.querySelectorAll('.table-wrap')].map(w => [w.scrollWidth, w.clientWidth]);
const labels = [...document.querySelectorAll('#timeline text.lane-label')].map(t => t.textContent);
document.body.setAttribute('data-measured', JSON.stringify({
  page: document.documentElement.scrollWidth, inner: window.innerWidth, wraps, labels,
  sections: [...document.querySelectorAll('section')].map(s => s.id)}));
</script></body>"""


def test_html_at_1280px_fits_long_names_and_many_call_sites(chromium, tmp_path):
    """A long-named function called from six lines of a deep, long-named path, with uploads: at
    1280 px the page does not scroll sideways, no table overflows its box (call sites wrap at
    folders), timeline lane labels keep whole file names, and the host-to-device table is there."""
    rel = os.path.join("experiments_with_a_long_folder_name", "another_long_nested_folder",
                       "train_the_model_with_many_call_sites.py")
    got = _measured_page(chromium, tmp_path, rel, MANY_SITES_SCRIPT, MEASURE_PAGE, "--window-size=1280,900")
    assert got["inner"] == 1280 and got["page"] <= got["inner"], got  # nothing widens the page
    assert got["wraps"] and all(scroll <= client for scroll, client in got["wraps"]), got["wraps"]
    assert "uploads" in got["sections"] and "transfers" in got["sections"]
    lane = [t for t in got["labels"] if "train_the_model" in t or "…" in t]
    assert lane, got["labels"]
    for text in lane:  # a clipped path starts at a folder boundary or is the line alone, never mid-name
        label = text.split("  ", 1)[-1]
        assert "…" not in label or re.search(r"…[/:]", label), text
    assert "call sites" in got["html"]


MEASURE_TOKENS = """<script>
const split = [];
for (const td of document.querySelectorAll('td')) {
  const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    const re = /\\S+/g;
    let m;
    while ((m = re.exec(node.textContent))) {
      const r = document.createRange();
      r.setStart(node, m.index);
      r.setEnd(node, m.index + m[0].length);
      const tops = new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top)));
      if (tops.size > 1) split.push(m[0]);
    }
  }
}
document.body.setAttribute('data-measured', JSON.stringify({split, inner: window.innerWidth,
  cells: document.querySelectorAll('td').length}));
</script></body>"""

NARROW_SCRIPT = MANY_SITES_SCRIPT + """
lr = 0.1
for step in range(12):
    lr = lr * jnp.cos(jnp.pi * step / 12)  # eager, with a long fix
    t = jnp.tanh(jnp.ones(3) * lr)
"""


def test_html_narrow_columns_do_not_break_inside_tokens_in_headless_chromium(chromium, tmp_path):
    """At 900 px, with long fix texts beside numbers, codes and paths, no word of a table cell is
    split over two lines ("JAX20 5", "train_fix.py / :55", "22.00 8"): numbers and codes do not
    wrap, paths wrap only at their folders (a text node of their own each), and text at spaces."""
    rel = os.path.join("experiments_with_a_long_folder_name", "train_fix.py")
    got = _measured_page(chromium, tmp_path, rel, NARROW_SCRIPT, MEASURE_TOKENS, "--window-size=900,900")
    assert got["inner"] == 900 and got["cells"] > 20, got
    assert got["split"] == [], got["split"][:20]
