"""Where `jaxlint trace`'s loop overhead goes: bench/mlp_train.py run plain and under `jaxlint trace
--no-static` with one part of the instrumentation switched off at a time (issue 38).

    python bench/trace_overhead_parts.py [--runs 3] [--steps 2000] [--variants full,nowatch,...]

Variants (each patches jaxlint in the traced process before the run starts; nothing here changes
jaxlint itself):
    full        jaxlint trace as shipped
    nowatch     no device watcher (no ready times, in-flight depth, idle windows or samples)
    nothread    the watcher's work on the dispatching thread as shipped, but no watcher thread (its calls
                queue up unread: no idle windows; what the thread's GIL hand-offs cost)
    keepswitch  the watcher never lowers Python's switch interval
    nosample    the watcher takes no stack samples of the idle host
    noquick     every call takes the watcher's full path (steps.QUICK off)
    noeager     no eager-dispatch hooks
    noupload    jitted calls' arguments are not scanned for host data
    nocounted   jitted calls go straight to JAX (no count, watcher, upload scan or JAX603 check)
    a+b         several parts off at once (noeager+nocounted: what running under jaxlint costs
                without the per-call hooks)
    nostale     no JAX603 watch (what traces read from globals, closures and self is not recorded,
                so no call checks it)
    gapN        past a function's first calls, hand the watcher at most one call per N ms (steps.WATCH_GAP;
                shipped: 10)
    sampleN     one sample of the idle host's stack per N ms of idle time (steps.SAMPLE_SECONDS; shipped: 5)
    at=DIR      jaxlint as shipped, imported from DIR (another commit's checkout, e.g. made with
                `git archive COMMIT jaxlint | tar -x -C DIR`): two versions compared in one interleaved run
Prints each variant's loop seconds (median of the runs, interleaved) and its ratio to plain python.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "mlp_train.py")
VARIANTS = ("full", "nowatch", "keepswitch", "nosample", "noquick", "noeager", "noupload", "nostale")


def _child(variant: str, rest: list) -> int:
    sys.path.remove(HERE)  # this folder goes first on the path: jaxlint is found where PYTHONPATH says
    sys.path.append(HERE)
    from jaxlint.trace import eager, hooks, stale, steps

    if "+" in variant:  # several parts off at once
        for part in variant.split("+"):
            _switch_off(part)
    else:
        _switch_off(variant)
    from jaxlint.cli import main as cli_main

    return cli_main(["trace", "--no-static", *rest])


def _switch_off(variant: str) -> None:
    from jaxlint.trace import eager, hooks, stale, steps

    if variant == "nocounted":  # jitted calls go straight to JAX (nothing counted, watched or scanned)
        hooks.Counted.__call__ = lambda self, *a, **k: self._jaxlint_real(*a, **k)
    elif variant == "nowatch":
        steps.Watcher.before = lambda self, *a, **k: None
    elif variant == "nothread":  # the dispatching thread's watcher work as shipped, no watcher thread to wake
        steps.Watcher._start = lambda self: None
    elif variant == "keepswitch":
        steps.SWITCH_INTERVAL = None
    elif variant == "nosample":
        steps.SAMPLE_SECONDS = 1e9
    elif variant == "noquick":
        steps.QUICK = False
    elif variant == "noeager":
        eager.install = lambda inst, patch: []
    elif variant == "noupload":
        hooks.host_bytes = lambda value, python_data=True: None
    elif variant == "nostale":
        stale.watch = lambda watches, key, fun, user_file: None
    elif variant.startswith("gap"):
        steps.WATCH_GAP = float(variant[3:]) / 1000
    elif variant.startswith("sample"):
        steps.SAMPLE_SECONDS = float(variant[6:]) / 1000


def _loop_seconds(cmd: list, env=None) -> float:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["loop_seconds"]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        sys.exit(_child(sys.argv[2], sys.argv[3:]))
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--script", default=SCRIPT, help="a program that prints {'loop_seconds': ...} last")
    args = ap.parse_args()
    script = args.script
    cmds = {"python": [sys.executable, script, str(args.steps)]}
    envs: dict = {}
    for v in args.variants.split(","):
        if v.startswith("at="):  # the shipped variant of another checkout, found first on the path
            where = os.path.abspath(v[3:])
            envs[v] = dict(os.environ, PYTHONPATH=os.pathsep.join([where, os.environ.get("PYTHONPATH", "")]))
            cmds[v] = [sys.executable, os.path.abspath(__file__), "--child", "full", script, str(args.steps)]
            continue
        cmds[v] = [sys.executable, os.path.abspath(__file__), "--child", v, script, str(args.steps)]
    got: dict = {k: [] for k in cmds}
    for _ in range(args.runs):  # interleaved, so drift in machine load hits every way alike
        for k, cmd in cmds.items():
            got[k].append(_loop_seconds(cmd, envs.get(k)))
            print(f"  {k}: {got[k][-1]:.3f} s", flush=True)
    base = statistics.median(got["python"])
    print(f"training loop, {args.steps} jitted steps, median of {args.runs} runs")
    for k, runs in got.items():
        loop = statistics.median(runs)
        print(f"  {k:<12} loop {loop:.3f} s ({loop / base:.3f}x)  runs {' '.join(f'{r:.3f}' for r in runs)}")


if __name__ == "__main__":
    main()
