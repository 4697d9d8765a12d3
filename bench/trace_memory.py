"""`jaxlint trace`'s memory figures against hand-written ``memory_analysis()`` on three programs,
and its donation advice followed.

    python bench/trace_memory.py

1. For each program (fixtures/trace/memory.py; JAX's MNIST example and equinox's RNN example
   from bench/programs/), the report's figures of its step function are compared, compile by
   compile, with what ``<jitted>.lower(<the same arguments>).compile().memory_analysis()`` gives
   in a plain run of the same program (the arguments the hand-written line uses are listed in
   HAND below).
2. The MNIST program's donation advice (``--donation-threshold 0``: its parameters are 400 KiB)
   is followed (``donate_argnums=(0,)``) and the program traced again: XLA's peak of ``update``
   before and after, where this jaxlib reports one. On CPU no device memory statistics exist, so
   that compiled peak is the only measure here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIELDS = ("argument", "output", "temp", "alias", "generated_code")

# program -> (function row, Python run after the program's own code with its globals as `g`,
# returning the list of memory_analysis() results to compare with the row's compiles, in order)
HAND = {
    os.path.join(ROOT, "fixtures", "trace", "memory.py"): ("train_step", """
x = g["x"]
out = [g["train_step"].lower(g["params"], g["opt"], x).compile().memory_analysis()]
"""),
    os.path.join(HERE, "programs", "mnist_ragged.py"): ("update", """
im, lb = g["images"], g["labels"]
out = [g["update"].lower(g["params"], (im[i:i + 128], lb[i:i + 128])).compile().memory_analysis() for i in (0, 896)]
"""),
    os.path.join(HERE, "programs", "equinox_rnn.py"): ("step", """
# equinox's Compiled wraps JAX's as `.compiled`
out = [g["step"].lower(g["model"], g["opt_state"], g["xs"], g["ys"]).compile().compiled.memory_analysis()]
"""),
}

RUN_HAND = """
import json, runpy, sys
g = runpy.run_path(sys.argv[1], run_name="__main__")
exec(sys.argv[2])
print("HAND " + json.dumps([{k: getattr(m, k + "_size_in_bytes") for k in %r} for m in out]))
""" % (FIELDS,)


def trace(program: str, *options: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--no-static", "--format", "json", "-o", out,
                        *options, program], capture_output=True, text=True, timeout=900, check=False)
        with open(out) as fh:
            return json.load(fh)


def row(report: dict, name: str) -> dict:
    return next(f for f in report["functions"] if f["name"] == name)


def main() -> int:
    bad = 0
    print(f"{'program':<22} {'function':<11} compiles  equal to memory_analysis()")
    for program, (name, code) in HAND.items():
        report = trace(program)
        got = [{k: m[k] for k in FIELDS} for m in (row(report, name)["memory"] or {}).get("compiles", [])]
        plain = subprocess.run([sys.executable, "-c", RUN_HAND, program, code], capture_output=True, text=True,
                               timeout=900)
        line = next((ln for ln in plain.stdout.splitlines() if ln.startswith("HAND ")), None)
        hand = json.loads(line[5:]) if line else None
        ok = hand is not None and got[:len(hand)] == hand
        bad += not ok
        print(f"{os.path.basename(program):<22} {name:<11} {len(got):>8}  {'yes' if ok else 'NO'}"
              + ("" if ok else f"\n    jaxlint {got}\n    hand    {hand}\n    {plain.stderr[-300:]}"))
    mnist = os.path.join(HERE, "programs", "mnist_ragged.py")
    before = trace(mnist, "--donation-threshold", "0")
    advice = row(before, "update")["donation"]
    print(f"\nMNIST donation advice: {advice and advice['fix']}")
    with tempfile.TemporaryDirectory() as tmp:
        followed = os.path.join(tmp, "mnist_donated.py")
        with open(mnist) as fh:
            src = fh.read()
        with open(followed, "w") as fh:
            fh.write(src.replace("@jax.jit\ndef update", "@partial(jax.jit, donate_argnums=(0,))\ndef update")
                     .replace("import jax\n", "import jax\nfrom functools import partial\n", 1))
        after = trace(followed, "--donation-threshold", "0")
    for label, rep in (("before", before), ("after", after)):
        compiles = row(rep, "update")["memory"]["compiles"]
        figures = ", ".join(f"peak {m['peak']}" if m["peak"] is not None else
                            f"upper bound {m['footprint']} (this jaxlib reports no peak)" for m in compiles)
        print(f"  {label:<7} update: {figures}; aliased {[m['alias'] for m in compiles]}; "
              f"advice {'none' if row(rep, 'update')['donation'] is None else 'given'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
