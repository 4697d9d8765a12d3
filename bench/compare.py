#!/usr/bin/env python3
"""Before/after speed of two jaxlint checkouts, measured in one run with interleaved runs (so that
drifting machine load hits both alike), on the pinned corpus:

  - cold `jaxlint check --no-cache -j0` on libs/ + jax/;
  - warm `jaxlint check -j0` on libs/ + jax/ (the same --cache-dir after one untimed priming run);
  - flake8 -j1 on libs/ with the plugin, and without it (the plugin's share = with / without, on CPU
    time; the "without" rows are the same flake8 for both checkouts and are timed once).

Each checkout runs from its own source tree (PYTHONPATH=<checkout>) with this interpreter and its
installed dependencies, with bytecode caching on (as for a user; bench/run.py's CHILD_ENV).

    python bench/compare.py BEFORE_DIR [AFTER_DIR ...] [--runs 5] [--corpus DIR]

AFTER_DIR defaults to this checkout; several are measured side by side. Prints a markdown table to stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"jaxlint_bench_{name}", os.path.join(HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after", nargs="*", default=[REPO])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--corpus", metavar="DIR")
    args = ap.parse_args(argv)
    run = _load("run")
    libs, jaxdir = run.locate_corpus(args.corpus)
    py = sys.executable
    sides = {"before": os.path.abspath(args.before)}
    for i, d in enumerate(args.after):
        sides["after" if len(args.after) == 1 else f"after{i + 1}"] = os.path.abspath(d)

    def jaxlint(side, *a):
        return ["env", f"PYTHONPATH={sides[side]}", py, "-m", "jaxlint", *a]

    def flake8(side, mode):
        return ["env", f"PYTHONPATH={sides[side]}", py, "-c", run.LAUNCHER, mode, "-j1", "--isolated",
                "--select", run.FLAKE8_SELECT, libs]

    rows = []
    with tempfile.TemporaryDirectory(prefix="jaxlint-compare-") as work:
        bench = run.Bench(args.runs, work)
        cold = bench.measure("cold", [(f"{s}: jaxlint check --no-cache -j0 libs+jax",
                                       jaxlint(s, "check", "--no-cache", "-j0", libs, jaxdir)) for s in sides])
        rows += [("cold, libs+jax", r) for r in cold]
        warm_cmds = []
        for s in sides:
            folder = os.path.join(work, f"cache-{s}")
            shutil.rmtree(folder, ignore_errors=True)
            cmd = jaxlint(s, "check", "-j0", "--cache-dir", folder, libs, jaxdir)
            run.run_once(cmd, work, os.path.join(work, f"prime-{s}.txt"))
            warm_cmds.append((f"{s}: jaxlint check -j0 (warm cache) libs+jax", cmd))
        rows += [("warm, libs+jax", r) for r in bench.measure("warm", warm_cmds)]
        f8 = bench.measure("flake8", [("flake8 -j1 libs without the plugin", flake8("before", "without"))]
                           + [(f"{s}: flake8 -j1 libs with the plugin", flake8(s, "with")) for s in sides])
        rows += [("flake8", r) for r in f8]
    lines = run.count_tree(libs)[1] + run.count_tree(jaxdir)[1]
    print(f"Median of {args.runs} interleaved runs; " + ", ".join(f"{k} = {v}" for k, v in sides.items())
          + f"; libs+jax = {lines:,} lines.\n")
    print("| what | command | median wall s | median CPU s | lines/s |")
    print("|---|---|--:|--:|--:|")
    for what, r in rows:
        med, cpu = r["median"], r["median_cpu"]
        lps = f"{lines / med:,.0f}" if med and what != "flake8" else ""
        print(f"| {what} | `{r['label']}` | {med:.2f} | {cpu:.2f} | {lps} |" if med else f"| {what} | {r['label']} | n/a | n/a | |")
    base = f8[0]["median_cpu"]
    if base:
        for r in f8[1:]:
            if r["median_cpu"]:
                print(f"\nplugin share ({r['label'].split(':')[0]}): {r['median_cpu'] / base:.3f}x flake8's CPU time without it")
    for e in bench.errors:
        print(f"\nerror: {e}")
    return 1 if bench.errors else 0


if __name__ == "__main__":
    sys.exit(main())
