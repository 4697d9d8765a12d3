#!/usr/bin/env python3
"""Speed benchmark for jaxlint on the pinned real-library corpus (stdlib only).

Measures, in one run (wall time = median of --runs runs, subprocess + time.perf_counter):
  1. flake8 -j1 on libs/ without vs with the jaxlint plugin, and the plugin's own CPU time inside
     one flake8 run (bench/plugin_share.py; the overhead target <= 1.05x is judged on that);
  2. the editor: flake8 on one ~1,000-line file without vs with the plugin (target <= 1.10x), the
     import time of the plugin (``python -X importtime``, target <= 20 ms) and which of jaxlint's
     modules a flake8 run loads (the fixer, notebooks, reporters, trace, CLI and cache must not);
  3. jaxlint check -j1 / -j0 (0 = all cores) on libs/, on jax/ and on libs/ + jax/, each with a
     cold cache (a fresh empty --cache-dir every run) and a warm one (the same --cache-dir after one
     untimed priming run); targets on libs+jax: cold -j0 >= 100k lines/s on 2 cores and <= 2.5x
     ruff's default rules, cold -j1 >= 55k lines/s, warm <= 0.25 s;
  4. warm with one file changed before each run, in a copy of libs+jax (target <= 0.4 s);
  5. ruff check (its default rules, and --select ALL) --no-cache on the same trees, as anchors, and
     reading and parsing alone (bench/parse_floor.py, -j1 / -j0, interleaved with the cold checks):
     the floor under a cold check, shown beside the ruff target;
  6. peak RSS of each command (os.wait4 on the child, see README), and of checking one generated
     200k-line module (bench/bigfile.py; target: under 400 MB, or refused with a JAX000 line);
  7. files / lines per tree, lines per second, findings per code.
Prints a markdown report to stdout; progress goes to stderr. A command that fails shows as n/a.

    python bench/run.py                  # corpus from bench/corpus.py (fetched on first use)
    python bench/run.py --runs 1         # quick look
    python bench/run.py --corpus DIR     # DIR holds libs/ and jax/
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FLAKE8_SELECT = "E,W,F,C90,JAX"
FLAKE8_TARGET = 1.05  # flake8 -j1 on libs with the plugin / without (CPU time)
EDITOR_FILE = os.path.join("flax", "flax", "nnx", "module.py")  # under libs/: 991 lines
EDITOR_TARGET = 1.10  # flake8 on that one file with the plugin / without (CPU time)
EDITOR_RUNS = 4  # the one-file runs are short: this many times --runs
IMPORT_TARGET_MS = 20.0  # python -X importtime: cumulative time of `import jaxlint.flake8_plugin`
COLD_LPS_TARGET = 100_000  # cold `jaxlint check -j0` on libs+jax, lines per second on 2 cores
COLD_J1_LPS_TARGET = 55_000  # cold `jaxlint check -j1` on libs+jax, lines per second
COLD_RUFF_TARGET = 2.5  # cold -j0 at most this many times ruff's default rules on the same trees
WARM_TARGET_S = 0.25  # warm `jaxlint check -j0`, nothing changed
WARM_ONE_TARGET_S = 0.4  # warm `jaxlint check -j0`, one file changed, libs+jax
RSS_TARGET_MB = 400.0  # peak RSS of one jaxlint process, MB = 10^6 bytes
BIG_LINES = 200_000  # the generated module of the memory row (bench/bigfile.py)
PARTS = ("flake8", "editor", "import", "ruff", "jax", "cold", "parse", "warm", "warm1", "memory", "j1", "findings")
MARK = "@@jaxlint-bench jaxlint_loaded="
MODS_MARK = "@@jaxlint-bench modules="
# What a flake8 run must never import: the fixer, notebooks, reporters, the dynamic mode, the CLI.
NOT_UNDER_FLAKE8 = ("jaxlint.fix", "jaxlint.edits", "jaxlint.notebook", "jaxlint.reporters", "jaxlint.trace",
                    "jaxlint.cli", "jaxlint.cache", "jaxlint.ipython", "jaxlint.docs", "jaxlint.config")

# Runs flake8 in-process exactly as the `flake8` script does (flake8.main.cli.main), after optionally
# filtering the jaxlint distribution out of flake8's entry-point discovery
# (flake8.plugins.finder._find_importlib_plugins, the one place installed plugins are found).
# At exit it reports whether the jaxlint package was ever imported, so the bench can verify both modes.
LAUNCHER = r"""
import sys
mode = sys.argv.pop(1)
import flake8.plugins.finder as finder
if mode == "without":
    _orig = finder._find_importlib_plugins
    def _without_jaxlint():
        for p in _orig():
            if p.package.lower() == "jaxlint" or p.entry_point.value.split(":")[0].split(".")[0] == "jaxlint":
                continue
            yield p
    finder._find_importlib_plugins = _without_jaxlint
elif mode != "with":
    raise SystemExit("launcher: mode must be with/without")
from flake8.main.cli import main
try:
    rc = main(sys.argv[1:])
finally:
    sys.stderr.write("\n%s%d\n" % (__MARK__, "jaxlint" in sys.modules))
    sys.stderr.write("%s%s\n" % (__MODS__, ",".join(sorted(m for m in sys.modules if m.startswith("jaxlint")))))
sys.exit(rc)
""".replace("__MARK__", repr(MARK)).replace("__MODS__", repr(MODS_MARK))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- corpus

def locate_corpus(arg):
    if arg:
        libs, jax = os.path.join(arg, "libs"), os.path.join(arg, "jax")
        if not (os.path.isdir(libs) and os.path.isdir(jax)):
            sys.exit(f"bench: --corpus {arg} must contain libs/ and jax/")
        return libs, jax
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    from corpus import CorpusError, default_dest, fetch  # bench/corpus.py

    log(f"corpus: {default_dest()} (downloaded on first use; bench/corpus.py) ...")
    try:
        return fetch()
    except (CorpusError, OSError) as e:
        sys.exit(f"bench: could not fetch the corpus: {e}\n"
                 "Run python bench/corpus.py by hand, or pass --corpus DIR with libs/ and jax/ inside.")


def count_lines(path):
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def count_tree(root):
    """.py files and their lines (what flake8 and jaxlint check by default)."""
    files = lines = 0
    for dirpath, dirs, names in os.walk(root):
        dirs.sort()
        for n in names:
            if n.endswith(".py"):
                files += 1
                with open(os.path.join(dirpath, n), "rb") as fh:
                    lines += sum(1 for _ in fh)
    return files, lines


# ---------------------------------------------------------------- running

# As installed for a user, Python caches bytecode: a PYTHONDONTWRITEBYTECODE=1 in the bench's own
# environment would make every run compile jaxlint's sources again (about 0.1 s per process here).
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_once(cmd, cwd, out_path):
    """Run cmd with stdout to a file; return (wall s, exit code, peak RSS KiB, stderr text, CPU s)."""
    with open(out_path, "wb") as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=CHILD_ENV)
        # wait4 gives the resource usage of this child alone (incl. its reaped descendants' max RSS),
        # unlike getrusage(RUSAGE_CHILDREN), which is a high-water mark over every child so far.
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        cpu = ru.ru_utime + ru.ru_stime  # user + system CPU of the child (and its reaped workers)
        return wall, p.returncode, ru.ru_maxrss, err.read().decode(errors="replace"), cpu


class Bench:
    def __init__(self, runs, workdir):
        self.runs = runs
        self.workdir = workdir
        self.errors = []

    def measure(self, label, cmds, check=None):
        """Time one or more commands, each (label, argv) or (label, argv, before): before() runs
        untimed ahead of every run (e.g. to empty a cache folder). With several commands, runs are
        interleaved (a, b, a, b, ...) so drift in machine load hits all of them alike. A command that
        exits with anything but 0/1 is recorded under errors and not run again (its median is None).
        Returns one result dict per command."""
        self.n_measures = getattr(self, "n_measures", 0) + 1
        res = [dict(label=c[0], cmd=c[1], before=c[2] if len(c) > 2 else None, times=[], cpus=[], rss=0,
                    rc=None, ok=True, out=None, out_path=os.path.join(self.workdir, f"out-{self.n_measures}-{k}.txt"))
               for k, c in enumerate(cmds)]
        for i in range(self.runs):
            for r in res:
                if not r["ok"]:
                    continue
                out_path = r["out_path"]
                log(f"  [{i + 1}/{self.runs}] {r['label']} ...")
                if r["before"]:
                    r["before"]()
                try:
                    wall, rc, rss, err, cpu = run_once(r["cmd"], self.workdir, out_path)
                except OSError as e:
                    wall, rc, rss, err, cpu = 0.0, None, 0, f"could not start: {e}", 0.0
                r["rc"] = rc
                if rc not in (0, 1):
                    r["ok"] = False
                    self.errors.append(f"{r['label']}: exit {rc}: {' '.join(r['cmd'])}\n{err.strip()[-1500:]}")
                    log(f"    ERROR exit {rc}")
                    continue
                if check:
                    problem = check(r, err)
                    if problem:
                        sys.exit(f"bench: {r['label']}: {problem}")
                r["times"].append(wall)
                r["cpus"].append(cpu)
                r["rss"] = max(r["rss"], rss)
                r["out"] = out_path
                log(f"    {wall:.2f} s")
        for r in res:
            if not r["ok"]:  # a failure in any run makes the whole row n/a
                r["times"], r["cpus"] = [], []
            r["median"] = statistics.median(r["times"]) if r["times"] else None
            r["median_cpu"] = statistics.median(r["cpus"]) if r["cpus"] else None
        return res


def version_of(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        text = " ".join((p.stdout or p.stderr).split())
        return text or "?"
    except (OSError, subprocess.SubprocessError) as e:
        return f"unavailable ({e.__class__.__name__})"


def count_jax_codes(path):
    c = Counter()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.split(": ", 1)
            if len(parts) == 2 and parts[1].startswith("JAX"):
                c[parts[1].split()[0]] += 1
    return c


def tool(name):
    """The tool's executable next to this interpreter, else the first on PATH. Next to the interpreter
    comes first so that no version-manager shim (pyenv's is a bash script, ~0.1 s a call) is timed."""
    mine = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.isfile(mine) and os.access(mine, os.X_OK):
        return mine
    return shutil.which(name)


def folder_state(folder):
    """(relative path, size, mtime_ns) of every file under folder."""
    out = []
    for dirpath, _, names in os.walk(folder):
        for n in names:
            full = os.path.join(dirpath, n)
            try:
                st = os.stat(full)
            except OSError:
                continue
            out.append((os.path.relpath(full, folder), st.st_size, st.st_mtime_ns))
    return sorted(out)


def same_file(a, b):
    try:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()
    except OSError:
        return False


def verdict(ok):
    return "PASS" if ok else "FAIL"


def import_time_ms(py, prelude, module, runs):
    """Median over ``runs`` of the cumulative ``-X importtime`` microseconds of ``module`` (ms),
    after ``prelude`` (imports that are already loaded where the module is used); None on failure."""
    code = f"{prelude}\nimport {module}" if prelude else f"import {module}"
    times = []
    for _ in range(runs):
        p = subprocess.run([py, "-X", "importtime", "-c", code], capture_output=True, text=True, env=CHILD_ENV,
                           cwd=tempfile.gettempdir())  # not the checkout: `-c` puts the cwd first on sys.path
        if p.returncode != 0:
            return None, p.stderr.strip()[-500:]
        for line in p.stderr.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[2].strip() == module:
                times.append(int(parts[1]) / 1000.0)
    return (statistics.median(times) if times else None), None


def top_imports(py, module, n=12):
    """The ``n`` jaxlint modules with the largest self import time (us) for ``import module``."""
    p = subprocess.run([py, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True,
                       env=CHILD_ENV, cwd=tempfile.gettempdir())
    rows = []
    for line in p.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0].startswith("import time:") and parts[0].split(":")[1].strip().isdigit():
            rows.append((int(parts[0].split(":")[1]), int(parts[1]), parts[2].strip()))
    return sorted(rows, reverse=True)[:n]


# ---------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs per command; the median is reported (default 5)")
    ap.add_argument("--corpus", metavar="DIR", help="folder holding libs/ and jax/ (default: bench/corpus.py's)")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: " + ", ".join(PARTS))
    ap.add_argument("--json-out", metavar="FILE", help="also write the raw numbers as JSON")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if skip - set(PARTS):
        ap.error(f"--skip: unknown part(s) {', '.join(sorted(skip - set(PARTS)))}; known: {', '.join(PARTS)}")

    libs, jaxdir = locate_corpus(args.corpus)
    py = sys.executable
    jaxlint_exe = tool("jaxlint")
    jaxlint = [jaxlint_exe] if jaxlint_exe else [py, "-m", "jaxlint"]
    ruff = tool("ruff")
    ncores = os.cpu_count() or 1
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = ncores
    cpu_model = "?"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu_model = next((l.split(":", 1)[1].strip() for l in fh if l.startswith("model name")), "?")
    except OSError:
        pass
    try:
        check_help = subprocess.run(jaxlint + ["check", "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        check_help = ""
    has_cache_dir = "--cache-dir" in check_help
    no_cache = ["--no-cache"] if "--no-cache" in check_help else []

    # --- verify the with/without launcher via --version before timing anything
    launcher = lambda mode, *a: [py, "-c", LAUNCHER, mode, *a]
    if "flake8" not in skip:
        v_with = version_of(launcher("with", "--version"))
        v_without = version_of(launcher("without", "--version"))
        listed = lambda v: "jaxlint" in v or "flake8-jax" in v  # flake8 lists the distribution's name
        if not listed(v_with):
            sys.exit(f"bench: the jaxlint flake8 plugin is not installed/registered (flake8 --version: {v_with})")
        if listed(v_without):
            sys.exit(f"bench: failed to hide the jaxlint plugin from flake8 (flake8 --version: {v_without})")

    versions = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "jaxlint": version_of(jaxlint + ["--version"]) + f" ({' '.join(jaxlint)})",
        "jaxlint cache flags": ("--cache-dir" if has_cache_dir else "no --cache-dir") + ", "
                               + ("--no-cache" if no_cache else "no --no-cache"),
        "ruff": (version_of([ruff, "--version"]) + f" ({ruff})") if ruff else "not installed (ruff rows skipped)",
    }
    if "flake8" not in skip:
        versions["flake8"] = version_of([py, "-m", "flake8", "--version"])
        versions["flake8 (plugin hidden)"] = v_without

    trees = {"libs": [libs]}
    counts = {"libs": count_tree(libs)}
    if "jax" not in skip:
        trees["jax"] = [jaxdir]
        trees["libs+jax"] = [libs, jaxdir]
        counts["jax"] = count_tree(jaxdir)
        counts["libs+jax"] = tuple(a + b for a, b in zip(counts["libs"], counts["jax"]))
    jobs = ([] if "j1" in skip else ["-j1"]) + ["-j0"]

    rows = []  # dict(r=result, tree=..., kind="flake8"/"editor"/"cold"/"parse"/"warm"/"ruff", jobs=..., note=...)
    import_top = []
    targets = []  # (target, measured, verdict)
    notes = []
    if not has_cache_dir:
        notes.append("This jaxlint has no `--cache-dir`: the cold rows run without cache flags (no cache, so "
                     "every run is cold) and the warm rows fail (n/a).")
    with tempfile.TemporaryDirectory(prefix="jaxlint-bench-") as work:
        bench = Bench(args.runs, work)

        # 1. flake8 overhead
        f8 = None
        if "flake8" not in skip:
            log("flake8 -j1 on libs, without vs with the jaxlint plugin (interleaved) ...")
            f8_args = ["-j1", "--isolated", "--select", FLAKE8_SELECT, libs]

            def check_loaded(r, err):
                want = "without" not in r["label"]
                lines = [l for l in err.splitlines() if l.startswith(MARK)]
                if not lines:
                    return "launcher did not report whether jaxlint was loaded"
                got = lines[-1][len(MARK):].strip() == "1"
                if got != want:
                    return f"jaxlint loaded={got}, expected {want}"
                return None

            f8 = bench.measure("flake8", [
                ("flake8 -j1 without jaxlint", launcher("without", *f8_args)),
                ("flake8 -j1 with jaxlint", launcher("with", *f8_args)),
            ], check=check_loaded)
            wo, wi = f8
            if wo["out"] and count_jax_codes(wo["out"]):
                sys.exit("bench: flake8 without the plugin still reported JAX codes")
            ratio = wi["median"] / wo["median"] if wo["median"] and wi["median"] else None
            cpu_ratio = wi["median_cpu"] / wo["median_cpu"] if wo["median_cpu"] and wi["median_cpu"] else None
            rows.append(dict(r=wo, tree="libs", kind="flake8", note=""))
            # flake8 -j1 is one busy core: its CPU time is the steadier measure when the machine is
            # shared, so the target is judged on it; the wall ratio is shown beside it.
            f8_text = f"{cpu_ratio:.3f}x CPU, {ratio:.3f}x wall" if ratio and cpu_ratio else "n/a"
            rows.append(dict(r=wi, tree="libs", kind="flake8", note=f"{f8_text} of without"))
            # Two separate flake8 runs differ by more than the plugin costs on a shared machine
            # (0.88x to 1.27x between two runs of this script on 2026-12-01), so the target is
            # judged on the plugin's own CPU time inside one flake8 run (bench/plugin_share.py),
            # median of --runs runs; the with/without ratio above is shown beside it.
            log("flake8 -j1 on libs, the plugin's own CPU time inside one run (bench/plugin_share.py) ...")
            shares = []
            for i in range(args.runs):
                proc = subprocess.run([py, os.path.join(HERE, "plugin_share.py"), libs], capture_output=True,
                                      text=True, env=CHILD_ENV, cwd=tempfile.gettempdir())
                found = re.search(r"@@plugin-share alone=([\d.]+) plugin=([\d.]+)", proc.stdout)
                if proc.returncode != 0 or not found:
                    bench.errors.append(f"bench/plugin_share.py failed: {proc.stderr.strip()[-300:]}")
                    break
                alone, spent = float(found.group(1)), float(found.group(2))
                shares.append((alone + spent) / alone)
                log(f"  [{i + 1}/{args.runs}] plugin {spent:.2f} s of {alone + spent:.2f} s CPU: {shares[-1]:.3f}x")
            if shares:
                share = statistics.median(shares)
                f8_ok = verdict(share <= FLAKE8_TARGET)
                notes.append("flake8 -j1 on libs, the plugin's own CPU share inside one flake8 run (bench/plugin_share.py): "
                             + ", ".join(f"{x:.3f}x" for x in shares) + f"; median {share:.3f}x")
                targets.append((f"flake8 -j1 with the plugin <= {FLAKE8_TARGET:.2f}x without (libs; the plugin's own "
                                "CPU time inside one flake8 run, bench/plugin_share.py)",
                                f"{share:.3f}x (median of {len(shares)}); two separate runs with/without: {f8_text}",
                                f8_ok))
            else:
                targets.append((f"flake8 -j1 with the plugin <= {FLAKE8_TARGET:.2f}x without (libs)", f8_text, "n/a"))

        # the editor: flake8 on one file, import time, modules loaded
        ed = None
        if "editor" not in skip:
            one = os.path.join(libs, EDITOR_FILE)
            if not os.path.isfile(one):
                sys.exit(f"bench: the editor file {one} is missing from the corpus")
            counts["one file"] = (1, count_lines(one))
            log(f"flake8 on one file ({EDITOR_FILE}), without vs with the jaxlint plugin (interleaved) ...")
            loaded_mods = {}

            def check_one(r, err):
                problem = check_loaded(r, err) if "flake8" not in skip else None
                mods = [l[len(MODS_MARK):].strip() for l in err.splitlines() if l.startswith(MODS_MARK)]
                loaded_mods[r["label"]] = mods[-1].split(",") if mods and mods[-1] else []
                return problem

            if "flake8" in skip:
                def check_loaded(r, err):
                    return None
            saved_runs = bench.runs
            bench.runs = max(3, args.runs * EDITOR_RUNS)
            ed = bench.measure("editor", [
                ("flake8 one file without jaxlint", launcher("without", "--isolated", "--select", FLAKE8_SELECT, one)),
                ("flake8 one file with jaxlint", launcher("with", "--isolated", "--select", FLAKE8_SELECT, one)),
            ], check=check_one)
            bench.runs = saved_runs
            wo, wi = ed
            cpu_ratio = wi["median_cpu"] / wo["median_cpu"] if wo["median_cpu"] and wi["median_cpu"] else None
            ratio = wi["median"] / wo["median"] if wo["median"] and wi["median"] else None
            ed_text = (f"{cpu_ratio:.3f}x CPU, {ratio:.3f}x wall (+{(wi['median'] - wo['median']) * 1000:.0f} ms)"
                       if ratio and cpu_ratio else "n/a")
            ed_ok = verdict(cpu_ratio <= EDITOR_TARGET) if cpu_ratio else "n/a"
            rows.append(dict(r=wo, tree="one file", kind="editor", note=""))
            rows.append(dict(r=wi, tree="one file", kind="editor",
                             note=f"{ed_text} of without (target <= {EDITOR_TARGET:.2f}x: {ed_ok})"))
            targets.append((f"editor: flake8 on one {counts['one file'][1]}-line file with the plugin <= "
                            f"{EDITOR_TARGET:.2f}x without (CPU time)", ed_text, ed_ok))
            heavy = sorted({m for m in loaded_mods.get("flake8 one file with jaxlint", [])
                            if any(m == h or m.startswith(h + ".") for h in NOT_UNDER_FLAKE8)})
            if "flake8 one file with jaxlint" in loaded_mods:
                targets.append(("editor: a flake8 run imports none of " + ", ".join(NOT_UNDER_FLAKE8),
                                ", ".join(heavy) if heavy else "none imported", verdict(not heavy)))
                notes.append("jaxlint modules a flake8 run on one file loaded: "
                             + (", ".join(loaded_mods["flake8 one file with jaxlint"]) or "none") + ".")
        if "import" not in skip:
            log("import time of jaxlint.flake8_plugin (python -X importtime) ...")
            n = max(5, args.runs * 2)
            bare, err1 = import_time_ms(py, "", "jaxlint.flake8_plugin", n)
            in_f8, err2 = import_time_ms(py, "import flake8.main.cli, flake8.checker", "jaxlint.flake8_plugin", n)
            for e in (err1, err2):
                if e:
                    bench.errors.append(f"import time: {e}")
            imp_ok = verdict(bare <= IMPORT_TARGET_MS) if bare is not None else "n/a"
            targets.append((f"editor: `import jaxlint.flake8_plugin` <= {IMPORT_TARGET_MS:.0f} ms "
                            f"(-X importtime, median of {n})",
                            (f"{bare:.1f} ms in a bare interpreter, {in_f8:.1f} ms after flake8's own imports"
                             if bare is not None and in_f8 is not None else "n/a"), imp_ok))
            import_top = top_imports(py, "jaxlint.flake8_plugin")

        # 3 + 5. jaxlint (cold, warm) and ruff per tree
        rf, rf_all = {}, {}  # ruff's default rules; --select ALL
        floor = {}  # (tree, jobs) -> bench/parse_floor.py's result
        for tree, paths in trees.items():
            if ruff and "ruff" not in skip:
                log(f"ruff on {tree} (default rules, and --select ALL) ...")
                rf[tree], rf_all[tree] = bench.measure(f"ruff {tree}", [
                    ("ruff check --no-cache (default rules)", [ruff, "check", "--no-cache", "--quiet",
                                                               "--exit-zero", "--isolated", *paths]),
                    ("ruff check --select ALL --no-cache", [ruff, "check", "--select", "ALL", "--no-cache", "--quiet",
                                                            "--exit-zero", "--isolated", *paths]),
                ])
                rows.append(dict(r=rf[tree], tree=tree, kind="ruff", note=""))
                rows.append(dict(r=rf_all[tree], tree=tree, kind="ruff",
                                 note="prints every finding of every rule: bound by its own output"))
            cold = {}
            if "cold" not in skip:
                log(f"jaxlint check on {tree}, cold cache ...")
                cmds = []
                for j in jobs:
                    folder = os.path.join(work, f"cache-cold-{tree}{j}")

                    def fresh(folder=folder):
                        shutil.rmtree(folder, ignore_errors=True)
                        os.makedirs(folder)

                    flags = ["--cache-dir", folder] if has_cache_dir else no_cache
                    cmds.append((f"jaxlint check {j} cold", jaxlint + ["check", j, *flags, *paths], fresh))
                floors = [] if "parse" in skip else jobs
                for j in floors:  # interleaved with the checks: the same machine state
                    cmds.append((f"parse alone {j} (bench/parse_floor.py)",
                                 [py, os.path.join(HERE, "parse_floor.py"), j, *paths]))
                measured = bench.measure(f"jaxlint {tree} cold", cmds)
                for j, r in zip(jobs, measured):
                    cold[j] = r
                    rows.append(dict(r=r, tree=tree, kind="cold", jobs=j, note=""))
                for j, r in zip(floors, measured[len(jobs):]):
                    floor[(tree, j)] = r
                    rows.append(dict(r=r, tree=tree, kind="parse", jobs=j,
                                     note="reading + parsing only: no model, rules or report"))
            if "warm" not in skip:
                log(f"jaxlint check on {tree}, warm cache (one untimed priming run each) ...")
                cmds, primed = [], {}
                for j in jobs:
                    folder = os.path.join(work, f"cache-warm-{tree}{j}")
                    shutil.rmtree(folder, ignore_errors=True)
                    cmd = jaxlint + ["check", j, "--cache-dir", folder, *paths]
                    try:
                        _, rc, _, err, _ = run_once(cmd, work, os.path.join(work, "priming.txt"))
                    except OSError as e:
                        rc, err = None, str(e)
                    if rc in (0, 1):
                        primed[j] = folder_state(folder)
                        if not primed[j]:
                            notes.append(f"warm {tree} {j}: the priming run wrote nothing into --cache-dir.")
                        cmds.append((f"jaxlint check {j} warm", cmd))
                    else:
                        bench.errors.append(f"jaxlint check {j} warm ({tree}): the priming run failed: exit {rc}: "
                                            f"{' '.join(cmd)}\n{err.strip()[-1500:]}")
                measured = iter(bench.measure(f"jaxlint {tree} warm", cmds)) if cmds else iter(())
                for j in jobs:
                    if j not in primed:  # priming failed: n/a without timing anything
                        r = dict(label=f"jaxlint check {j} warm", cmd=None, times=[], cpus=[], rss=0, out=None,
                                 median=None, median_cpu=None)
                        rows.append(dict(r=r, tree=tree, kind="warm", jobs=j, note="priming run failed"))
                        continue
                    r = next(measured)
                    note = []
                    if r["median"] is not None:
                        folder = os.path.join(work, f"cache-warm-{tree}{j}")
                        if folder_state(folder) != primed[j]:
                            note.append("cache rewritten by the timed runs: not every file was a hit")
                        if j in cold and cold[j]["out"] and r["out"]:
                            if same_file(cold[j]["out"], r["out"]):
                                note.append("output = cold's")
                            else:
                                bench.errors.append(f"jaxlint check {j} on {tree}: warm output differs from cold "
                                                    f"({r['out']} vs {cold[j]['out']})")
                                note.append("**output differs from cold**")
                    rows.append(dict(r=r, tree=tree, kind="warm", jobs=j, note="; ".join(note)))

        # 4. warm, one file changed before every run, in a copy of the big tree
        big = "libs+jax" if "libs+jax" in trees else "libs"
        if "warm1" not in skip and has_cache_dir:
            log(f"jaxlint check -j0 on a copy of {big}, one file changed before every run ...")
            copy = os.path.join(work, "tree-copy")
            copies = []
            for src in trees[big]:
                dst = os.path.join(copy, os.path.basename(src.rstrip(os.sep)))
                shutil.copytree(src, dst)
                copies.append(dst)
            edited = os.path.join(copies[0], EDITOR_FILE) if big.startswith("libs") else None
            if edited is None or not os.path.isfile(edited):
                edited = next(os.path.join(d, n) for d, _, ns in sorted(os.walk(copies[0])) for n in sorted(ns)
                              if n.endswith(".py"))
            folder = os.path.join(work, "cache-warm1")
            cmd = jaxlint + ["check", "-j0", "--cache-dir", folder, *copies]
            run_once(cmd, work, os.path.join(work, "priming1.txt"))
            edits = [0]

            def touch_one():
                edits[0] += 1
                with open(edited, "a", encoding="utf-8") as fh:
                    fh.write(f"\n# bench edit {edits[0]}\n")

            counts[f"{big} (copy)"] = counts[big]
            (w1,) = bench.measure("warm1", [("jaxlint check -j0 warm, one file changed", cmd, touch_one)])
            rows.append(dict(r=w1, tree=f"{big} (copy)", kind="warm1", jobs="-j0",
                             note=f"{os.path.relpath(edited, copy)} edited before each run"))
            m = w1["median"]
            targets.append((f"warm `jaxlint check -j0` on {big}, one file changed, <= {WARM_ONE_TARGET_S} s",
                            f"{m:.2f} s" if m else "n/a", verdict(m <= WARM_ONE_TARGET_S) if m else "n/a"))

        # 6. memory: one generated module of BIG_LINES lines
        if "memory" not in skip:
            if HERE not in sys.path:
                sys.path.insert(0, HERE)
            import bigfile  # bench/bigfile.py

            bigpath = os.path.join(work, "generated_big.py")
            with open(bigpath, "w", encoding="utf-8") as fh:
                fh.write(bigfile.generate(BIG_LINES))
            counts["generated"] = (1, count_lines(bigpath))
            log(f"jaxlint check -j1 on one generated {counts['generated'][1]:,}-line module ...")
            saved_runs = bench.runs
            bench.runs = 1
            # --fail-on-oversize: the refusal as a JAX000 line on stdout (by default only a notice on stderr)
            (mem,) = bench.measure("memory", [("jaxlint check -j1 --no-cache, generated module",
                                                jaxlint + ["check", "-j1", "--no-cache", "--fail-on-oversize",
                                                           bigpath])])
            bench.runs = saved_runs
            said = ""
            if mem["out"]:
                with open(mem["out"], encoding="utf-8", errors="replace") as fh:
                    said = next((l.strip() for l in fh if "JAX000" in l), "")
            mb = mem["rss"] * 1024 / 1e6
            refused = bool(said)
            rows.append(dict(r=mem, tree="generated", kind="memory",
                             note=("refused: " + said.split(": ", 1)[-1][:160]) if refused else "checked"))
            targets.append((f"one generated {counts['generated'][1]:,}-line module: peak RSS < {RSS_TARGET_MB:.0f} MB, "
                            "or refused with a JAX000 line",
                            f"{mb:.0f} MB, " + ("refused with JAX000" if refused else "checked"),
                            verdict(mb < RSS_TARGET_MB) if mem["median"] is not None else "n/a"))

        if ruff is None or "ruff" in skip:
            notes.append("ruff rows skipped (" + ("ruff not installed" if ruff is None else "--skip ruff") + ").")

        # targets (judged on the default -j0, and -j1, on libs+jax when measured)
        def row(kind, jobs):
            return next((x["r"] for x in rows if x["kind"] == kind and x["tree"] == big and x.get("jobs") == jobs),
                        None)

        c0, c1, w0 = row("cold", "-j0"), row("cold", "-j1"), row("warm", "-j0")
        lines_big = counts[big][1]
        ruff_big = rf[big]["median"] if big in rf else None
        ruff_all_big = rf_all[big]["median"] if big in rf_all else None
        if "cold" not in skip:
            m = c0["median"] if c0 else None
            cores = "" if usable == 2 else f"; this machine: {usable} usable cores, the target is for 2"
            targets.append((f"cold `jaxlint check -j0` on {big} >= {COLD_LPS_TARGET:,} lines/s on 2 cores "
                            f"(<= {lines_big / COLD_LPS_TARGET:.1f} s)",
                            f"{lines_big / m:,.0f} lines/s ({m:.2f} s{cores})" if m else "n/a",
                            verdict(lines_big / m >= COLD_LPS_TARGET) if m else "n/a"))
            if m and ruff_big:
                extra = f"; {m / ruff_all_big:.2f}x ruff --select ALL ({ruff_all_big:.2f} s)" if ruff_all_big else ""
                fl = floor.get((big, "-j0"))
                if fl and fl["median"]:
                    extra += (f"; reading and parsing alone (bench/parse_floor.py -j0) take {fl['median']:.2f} s = "
                              f"{fl['median'] / ruff_big:.2f}x ruff, leaving {COLD_RUFF_TARGET * ruff_big - fl['median']:.2f} s "
                              f"for everything else against {m - fl['median']:.2f} s now")
                targets.append((f"cold `jaxlint check -j0` on {big} <= {COLD_RUFF_TARGET}x ruff's default rules",
                                f"{m / ruff_big:.2f}x ({ruff_big:.2f} s ruff){extra}",
                                verdict(m / ruff_big <= COLD_RUFF_TARGET)))
            else:
                targets.append((f"cold `jaxlint check -j0` on {big} <= {COLD_RUFF_TARGET}x ruff's default rules",
                                "n/a", "n/a"))
            if "j1" not in skip:
                m1 = c1["median"] if c1 else None
                targets.append((f"cold `jaxlint check -j1` on {big} >= {COLD_J1_LPS_TARGET:,} lines/s",
                                f"{lines_big / m1:,.0f} lines/s ({m1:.2f} s)" if m1 else "n/a",
                                verdict(lines_big / m1 >= COLD_J1_LPS_TARGET) if m1 else "n/a"))
        if "warm" not in skip:
            m = w0["median"] if w0 else None
            targets.append((f"warm `jaxlint check -j0` on {big} <= {WARM_TARGET_S} s (nothing changed)",
                            f"{m:.2f} s" if m else "n/a", verdict(m <= WARM_TARGET_S) if m else "n/a"))
        jl_rows = [x for x in rows if x["kind"] in ("cold", "warm", "warm1") and x["r"]["rss"]]
        if jl_rows:
            top = max(jl_rows, key=lambda x: x["r"]["rss"])
            mb = top["r"]["rss"] * 1024 / 1e6
            targets.append((f"peak RSS of one `jaxlint check` process on the corpus <= {RSS_TARGET_MB:.0f} MB",
                            f"{mb:.0f} MB (max over the jaxlint rows: {top['r']['label']}, {top['tree']})",
                            verdict(mb <= RSS_TARGET_MB)))

        # row notes: targets next to the numbers
        for x in rows:
            r, tree = x["r"], x["tree"]
            extra = []
            if x["kind"] in ("cold", "warm") and r["median"] is not None:
                if tree == big and x.get("jobs") == "-j0":
                    if x["kind"] == "cold":
                        extra.append(f"target >= {COLD_LPS_TARGET:,} lines/s (2 cores): "
                                     f"{verdict(lines_big / r['median'] >= COLD_LPS_TARGET)}")
                        if ruff_big:
                            extra.append(f"<= {COLD_RUFF_TARGET}x ruff: {verdict(r['median'] / ruff_big <= COLD_RUFF_TARGET)}")
                    else:
                        extra.append(f"target <= {WARM_TARGET_S} s: {verdict(r['median'] <= WARM_TARGET_S)}")
                if r["rss"] * 1024 / 1e6 > RSS_TARGET_MB:
                    extra.append(f"RSS over {RSS_TARGET_MB:.0f} MB")
            x["note"] = "; ".join(p for p in [x["note"]] + extra if p)

        # 5. findings per code (one untimed JSON run per tree, no cache)
        findings = {}
        if "findings" not in skip:
            for tree, path in [("libs", libs)] + ([("jax", jaxdir)] if "jax" not in skip else []):
                log(f"jaxlint findings (json) on {tree} ...")
                p = subprocess.run(jaxlint + ["check", "--format", "json", "--exit-zero", "-j0", *no_cache, path],
                                   capture_output=True, text=True, cwd=work)
                if p.returncode not in (0, 1):
                    bench.errors.append(f"jaxlint --format json on {tree}: exit {p.returncode}\n{p.stderr.strip()[-1500:]}")
                    continue
                try:
                    findings[tree] = Counter(row["code"] for row in json.loads(p.stdout))
                except ValueError as e:
                    bench.errors.append(f"jaxlint --format json on {tree}: unparsable output ({e})")
            if f8 and f8[1]["out"] and "libs" in findings:
                via_f8 = count_jax_codes(f8[1]["out"])
                same = via_f8 == findings["libs"]
                notes.append(f"Cross-check: flake8+plugin reported {sum(via_f8.values())} JAX findings on libs, "
                             f"`jaxlint check` {sum(findings['libs'].values())} "
                             f"({'same per-code counts' if same else 'per-code counts differ: ' + str(dict(via_f8))}).")

    # ---------------------------------------------------------------- report
    out = []
    out.append("# jaxlint speed benchmark\n")
    out.append(f"- machine: {ncores} cores ({usable} usable), {cpu_model}, {platform.system()} {platform.release()}")
    for k, v in versions.items():
        out.append(f"- {k}: {v}")
    out.append(f"- wall time: median of {args.runs} run(s) (time.perf_counter around the subprocess); "
               "peak RSS: os.wait4 rusage of that child, max over runs (for -j0: the largest single process); "
               "MB = 10^6 bytes")
    out.append("- cold: a fresh empty `--cache-dir` before every run; warm: the same `--cache-dir` after one untimed "
               "priming run, nothing changed; `-j0` = all cores")
    if "flake8" not in skip:
        out.append(f"- flake8 options (both rows): `-j1 --isolated --select {FLAKE8_SELECT}`; "
                   "plugin hidden by filtering flake8.plugins.finder._find_importlib_plugins in a `python -c` launcher "
                   "used for both rows; each run verified that jaxlint was (not) imported")
    out.append("- trees: " + ", ".join(f"{t} = {counts[t][0]} files / {counts[t][1]:,} lines" for t in counts))
    out.append("")
    out.append("| command | tree | files | lines | median s | runs s | median CPU s | peak RSS MB | lines/s "
               "| x ruff | x ruff ALL | notes |")
    out.append("|---|---|--:|--:|--:|---|--:|--:|--:|--:|--:|---|")
    for x in rows:
        r, tree = x["r"], x["tree"]
        f, n = counts[tree]
        med = r["median"]
        ruff_med = rf[tree]["median"] if tree in rf else None
        ruff_all_med = rf_all[tree]["median"] if tree in rf_all else None
        cells = [
            f"`{r['label']}`", tree, str(f), f"{n:,}",
            f"{med:.2f}" if med is not None else "n/a",
            ", ".join(f"{t:.2f}" for t in r["times"]) or "n/a",
            f"{r['median_cpu']:.2f}" if r.get("median_cpu") is not None else "n/a",
            f"{r['rss'] * 1024 / 1e6:.0f}" if r["rss"] and med is not None else "n/a",
            f"{n / med:,.0f}" if med else "n/a",
            f"{med / ruff_med:.2f}x" if med and ruff_med and x["kind"] in ("cold", "parse", "warm") else "",
            f"{med / ruff_all_med:.2f}x" if med and ruff_all_med and x["kind"] in ("cold", "parse", "warm") else "",
            x["note"],
        ]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    if targets:
        out.append("| target | measured | verdict |")
        out.append("|---|---|---|")
        for t, m, v in targets:
            out.append(f"| {t} | {m} | {v} |")
        out.append("")
    if findings:
        codes = sorted(set().union(*findings.values()))
        out.append(f"Findings per code (`jaxlint check --format json{' --no-cache' if no_cache else ''}`):\n")
        out.append("| code | " + " | ".join(findings) + " |")
        out.append("|---|" + "--:|" * len(findings))
        for c in codes:
            out.append(f"| {c} | " + " | ".join(str(findings[t].get(c, 0)) for t in findings) + " |")
        out.append("| **total** | " + " | ".join(str(sum(findings[t].values())) for t in findings) + " |")
        out.append("")
    if import_top:
        out.append("Largest self import times under `python -X importtime -c 'import jaxlint.flake8_plugin'` (us):\n")
        out.append("| self us | cumulative us | module |")
        out.append("|--:|--:|---|")
        for self_us, cum_us, name in import_top:
            out.append(f"| {self_us} | {cum_us} | {name} |")
        out.append("")
    for n in notes:
        out.append(f"- {n}")
    if bench.errors:
        out.append("\n**Errors:**\n")
        for e in bench.errors:
            out.append("```\n" + e + "\n```")
    print("\n".join(out))

    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump({"versions": versions, "cores": ncores, "usable_cores": usable, "runs": args.runs,
                       "counts": counts, "findings": {t: dict(c) for t, c in findings.items()},
                       "rows": [{"label": x["r"]["label"], "tree": x["tree"], "kind": x["kind"], "jobs": x.get("jobs"),
                                 "cmd": x["r"]["cmd"], "times": x["r"]["times"], "median": x["r"]["median"],
                                 "cpus": x["r"]["cpus"], "peak_rss_kib": x["r"]["rss"], "note": x["note"]}
                                for x in rows],
                       "targets": [{"target": t, "measured": m, "verdict": v} for t, m, v in targets],
                       "notes": notes, "errors": bench.errors}, fh, indent=2)
    return 1 if bench.errors else 0


if __name__ == "__main__":
    sys.exit(main())
