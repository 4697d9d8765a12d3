"""Run the trace tests on a machine with one TPU chip, and say where each one ran (issue 38).

    python bench/trace_tpu_tests.py OUTDIR [TEST FILES ...]     (default: tests/test_trace*.py)

$TESTS_SECONDS (default 3000) bounds both passes together: a pass still running then is stopped,
and the summary covers the tests that finished. $TESTS_PASS1: node ids for pass 1 (default: every
test), or "skip"; $TESTS_INPROCESS: a file of node ids for pass 2 (default: pass 1's tests that
started no program), such as bench/trace_tpu_inprocess.txt, made by a pass 1 on a CPU machine.
A module-scoped fixture's programs count for the first test that uses it only: the tests after it
that use the same fixture must be taken out of such a list by hand (test_trace_html.py's `runs`).

One chip can be held by one process at a time, so two passes, each one pytest process:

1. children: every test; the pytest process's own JAX runs on the CPU (set in that process only),
   and the programs the tests start (`jaxlint trace prog.py`, plain `python prog.py`) take the
   chip one after another. Each child logs the backend it used.
2. inprocess: the tests that started no JAX program in pass 1 run again with the pytest process
   itself on the chip (audit(), inspect(), the pytest plugin).

Writes OUTDIR/results.jsonl (one line per test and pass), OUTDIR/children.tsv (test, backend,
command per child) and OUTDIR/summary.md (per test: pass 1's outcome and its children's
backends, pass 2's outcome).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main(argv) -> int:
    out = os.path.abspath(argv[0])
    files = argv[1:] or sorted(os.path.join("tests", f) for f in os.listdir(os.path.join(ROOT, "tests"))
                               if f.startswith("test_trace") and f.endswith(".py"))
    os.makedirs(out, exist_ok=True)
    results, children = os.path.join(out, "results.jsonl"), os.path.join(out, "children.tsv")
    env = dict(os.environ, JAXLINT_TPU_RESULTS=results, JAXLINT_CHILD_LOG=children,
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, "tpu_child_site"), HERE, ROOT,
                                           os.environ.get("PYTHONPATH", "")]))
    env.pop("JAX_PLATFORMS", None)
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tpu_tests_plugin", "-rfE"]
    deadline = time.monotonic() + float(os.environ.get("TESTS_SECONDS", "3000"))

    def run(name: str, extra: dict) -> None:
        with open(os.path.join(out, name), "w") as log:
            try:
                subprocess.run(base + files, cwd=ROOT, env=dict(env, **extra), stdout=log, stderr=subprocess.STDOUT,
                               timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.write("\nSTOPPED: out of time\n")

    given = os.environ.get("TESTS_INPROCESS")  # a list made by an earlier pass 1 (on a CPU machine: which
    pass1 = os.environ.get("TESTS_PASS1")      # tests start no program does not depend on the device)
    if pass1 != "skip":
        with open(os.path.join(out, "pass1-tests.txt"), "w") as fh:
            fh.write("\n".join(pass1.split()) if pass1 else "")
        if pass1:  # only these tests (node ids) in pass 1
            base_files = files
            files = pass1.split()
        run("pass1.log", {"JAXLINT_TPU_PASS": "children"})
        if pass1:
            files = base_files
    rows = [json.loads(line) for line in open(results)] if os.path.exists(results) else []
    kids = collections.defaultdict(list)
    if os.path.exists(children):
        for line in open(children):
            test, backend, _ = (line.rstrip("\n").split("\t") + ["", ""])[:3]
            kids[test].append(backend)  # "started" lines too: a test with any started no program alone
    alone = [r["nodeid"] for r in rows if r.get("pass") == "children" and not kids.get(r["nodeid"])
             and r.get("outcome") == "passed"]
    select = os.path.join(out, "inprocess.txt")
    if given:
        alone = [line.strip() for line in open(given) if line.strip()]
    with open(select, "w") as fh:
        fh.write("\n".join(alone) + "\n")
    if alone and deadline - time.monotonic() > 20:
        run("pass2.log", {"JAXLINT_TPU_PASS": "inprocess", "JAXLINT_TPU_SELECT": select})
    rows = [json.loads(line) for line in open(results)] if os.path.exists(results) else []
    by = collections.defaultdict(dict)
    for r in rows:
        by[r["nodeid"]][r["pass"]] = r
    lines = ["| test | pass 1 (programs on the chip) | their backends | pass 2 (in the pytest process) |",
             "|---|---|---|---|"]
    totals = collections.Counter()
    for nodeid, passes in by.items():
        p1, p2 = passes.get("children", {}), passes.get("inprocess", {})
        b = collections.Counter(kids.get(nodeid, []))
        backends = ", ".join(f"{k} ×{n}" for k, n in b.items()) or "-"
        second = (p2.get("outcome", "?") + f" ({p2.get('in_process_backend', 'no backend')})") if p2 else "-"
        lines.append(f"| {nodeid} | {p1.get('outcome', '?')} | {backends} | {second} |")
        totals[("pass1", p1.get("outcome", "?"))] += 1
        if p2:
            totals[("pass2", p2.get("outcome", "?"))] += 1
        for k, n in b.items():
            totals[("child", k)] += n
    lines.append("")
    lines.append("totals: " + ", ".join(f"{a} {b}: {n}" for (a, b), n in sorted(totals.items())))
    with open(os.path.join(out, "summary.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(lines[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
