"""Donation advice against the device's own memory peak (issue 38).

    python bench/trace_donation.py [--json FILE]

For each program, three runs in separate processes (the device's peak_bytes_in_use only grows
within a process): the program as it is, with its step not donated; the same program with
`donate_argnums=(0,)` on its step; and `jaxlint trace --format json` of the undonated one. Each
plain run prints the device's peak_bytes_in_use at its end. The measured change is the first
peak minus the second; the advice's figures are the report's donation row for the step
(`device_peak_saving`: how much the device's peak would drop, the in-flight depth x the bytes not
donated where the peak was reached during the step's calls, else 0; `device_saving`: what donating
frees while the calls run; `compiled_saving`: XLA's compiled figure; `device_peak_rise`: how much the
peak rose over the step's first calls). `points_of_peak`: the advice minus the measured change, in
percent of the undonated peak. On a backend
without memory statistics (CPU) the peaks are None and only XLA's figure is there.

Programs: a probe whose parameters are 256 MiB, stepped 20 times (the issue's), and JAX's MNIST
example (bench/programs/mnist_ragged.py, parameters 397.5 KiB) as it is, and with its hidden
layer 4096 wide (bench/programs/mnist_wide.py, 12.3 MiB).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

PROBE = '''
import jax
import jax.numpy as jnp

@jax.jit
def step(params, lr):
    return params - lr * jnp.tanh(params), jnp.mean(params)

params = jnp.ones((256 * 256, 1024), jnp.float32)  # 256 MiB
for i in range(20):
    params, loss = step(params, 0.01)
jax.block_until_ready(params)
'''

PEAK = '''
import json as _json, time as _time, jax as _jax
_dev = _jax.local_devices()[0]
_stats = _dev.memory_stats()
_t = _time.perf_counter()
for _ in range(100):
    _dev.memory_stats()
print("PEAK " + _json.dumps({"peak_bytes_in_use": (_stats or {}).get("peak_bytes_in_use"),
                             "memory_stats_us": (_time.perf_counter() - _t) * 1e4, "backend": _jax.default_backend()}))
'''

# program -> (source, the step's name, the line that jits it, the same line with donation)
PROGRAMS = {
    "probe_256mib": (PROBE, "step", "@jax.jit\ndef step(", "@partial(jax.jit, donate_argnums=(0,))\ndef step("),
    "mnist_ragged": (open(os.path.join(HERE, "programs", "mnist_ragged.py")).read(), "update",
                     "@jax.jit\ndef update(", "@partial(jax.jit, donate_argnums=(0,))\ndef update("),
    "mnist_wide": (open(os.path.join(HERE, "programs", "mnist_wide.py")).read(), "update",
                   "@jax.jit\ndef update(", "@partial(jax.jit, donate_argnums=(0,))\ndef update("),
}


def variant(source: str, plain: str, donated: str, donate: bool) -> str:
    assert plain in source, plain
    if donate:
        source = "from functools import partial\n" + source.replace(plain, donated)
    return source + PEAK


def run(path: str, trace: bool, patch: tuple = ()) -> tuple:
    """``patch``: ``NAME=INT`` settings of jaxlint/trace/steps.py for the traced run (an experiment on
    how the watcher's own work changes what it measures), else the shipped ones."""
    cmd = [sys.executable, path]
    out = path + ".json"
    if trace:
        args = ["trace", "--no-static", "--format", "json", "-o", out, "--donation-threshold", "0", path]
        cmd = [sys.executable, "-m", "jaxlint", *args]
        if patch:
            sets = "; ".join(f"s.{p.split('=')[0]} = {int(p.split('=')[1])}" for p in patch)
            cmd = [sys.executable, "-c", f"import sys; import jaxlint.trace.steps as s; {sets}; "
                   f"from jaxlint.cli import main; sys.exit(main({args!r}))"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    peak = [json.loads(line[5:]) for line in proc.stdout.splitlines() if line.startswith("PEAK ")]
    if proc.returncode != 0 or not peak:
        raise RuntimeError(f"{cmd}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    report = json.load(open(out)) if trace else None
    return peak[0], report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--patch", action="append", default=[], metavar="NAME=INT",
                    help="a setting of jaxlint/trace/steps.py for the traced run (PEAK_CALLS=4)")
    ap.add_argument("--repeat", type=int, default=1, help="run each program this many times (the peaks vary)")
    ap.add_argument("programs", nargs="*", default=list(PROGRAMS))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in [p for p in args.programs for _ in range(args.repeat)]:
            source, fn, plain, donated = PROGRAMS[name]
            paths = {}
            for donate in (False, True):
                paths[donate] = os.path.join(tmp, f"{name}_{'donated' if donate else 'plain'}.py")
                with open(paths[donate], "w") as fh:
                    fh.write(variant(source, plain, donated, donate))
            undonated, _ = run(paths[False], trace=False)
            donated_peak, _ = run(paths[True], trace=False)
            traced_peak, report = run(paths[False], trace=True, patch=tuple(args.patch))
            advice = [d for d in report["memory"]["donation"] if d["function"] == fn]
            d = advice[0] if advice else {}
            a, b = undonated["peak_bytes_in_use"], donated_peak["peak_bytes_in_use"]
            measured = a - b if a is not None and b is not None else None
            figure = (d.get("device_peak_saving") if d.get("device_peak_saving") is not None
                      else d.get("compiled_saving"))
            row = {"program": name, "patch": args.patch, "backend": undonated["backend"], "peak_undonated": a, "peak_donated": b,
                   "peak_under_trace": traced_peak["peak_bytes_in_use"], "measured_change": measured,
                   "advice_figure": d.get("figure"), "device_saving": d.get("device_saving"),
                   "device_peak_saving": d.get("device_peak_saving"), "peak_in_calls": d.get("peak_in_calls"),
                   "in_use_during_calls": d.get("in_use_during_calls"), "device_peak": d.get("device_peak"),
                   "compiled_saving": d.get("compiled_saving"), "in_flight": d.get("in_flight"),
                   "in_flight_plain": d.get("in_flight_plain"), "own_per_call": d.get("own_per_call"),
                   "device_peak_rise": d.get("device_peak_rise"), "memory_stats_us": undonated["memory_stats_us"],
                   "ratio": round(figure / measured, 3) if figure and measured else None,
                   "points_of_peak": (round(100 * (figure - measured) / a, 2) if figure is not None and measured
                                      is not None and a else None), "fix": d.get("fix")}
            rows.append(row)
            print(f"{name:<13} {row['backend']:<4} peak {a} -> {b} donated (change {measured}); advice "
                  f"{row['advice_figure']} {figure} (peak in its calls {row['peak_in_calls']}, in use "
                  f"{row['in_use_during_calls']} of peak {row['device_peak']}, freed while running "
                  f"{row['device_saving']}, in flight {row['in_flight']} measured, {row['in_flight_plain']} without "
                  f"jaxlint's {1e6 * (row['own_per_call'] or 0):.0f} us a call, XLA {row['compiled_saving']}, "
                  f"peak rise {row['device_peak_rise']}); ratio {row['ratio']}; memory_stats "
                  f"{row['memory_stats_us']:.1f} us", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
