#!/usr/bin/env python3
"""What each name-based decision (jaxlint/conventions.py) does on the real-code review sets, and
which findings change when every user-chosen identifier is renamed.

Usage:
  python bench/conventions.py [--dir DIR] [--out bench/review/conventions.md]

For each review set (unpacked by bench/realcode.py into DIR) this runs ``jaxlint check`` with the
default rules:
1. as it is (the baseline);
2. once per convention, with that convention emptied (``[tool.jaxlint.conventions] KEY = []`` in a
   temporary config): the findings that appear or disappear are the convention's measured effect;
3. on a copy of the set with every user-chosen identifier renamed (bench/rename.py, one tree per
   repository): a finding that appears or disappears there changed because of a name. Each such
   change is attributed to the conventions whose emptying changes the same finding (path, line,
   code); a change no convention explains is listed as unexplained.
Counts are given per half (bench/review/split.md); finding locations only for the worked half.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import realcode  # noqa: E402
import rename  # noqa: E402

from jaxlint.conventions import CONVENTIONS  # noqa: E402


def run(dest, target, config):
    cmd = [sys.executable, "-m", "jaxlint", "check", "--no-cache", "--exit-zero", "--format", "json",
           "--config", config, target]
    out = subprocess.run(cmd, cwd=dest, capture_output=True, text=True, check=False)
    if out.returncode not in (0, 1):
        sys.exit(f"jaxlint failed: {out.stderr[-2000:]}")
    return {(f["path"].removeprefix("./"), f["line"], f["code"]) for f in json.loads(out.stdout)
            if f["code"] != "JAX000"}


def config_file(folder, body):
    path = os.path.join(folder, f"cfg-{abs(hash(body))}.toml")
    with open(path, "w") as fh:
        fh.write("[tool.jaxlint]\n" + body)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "jaxlint-realcode"))
    ap.add_argument("--out", help="write the markdown report here (default: stdout)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="jaxlint-conv-")
    base_cfg = config_file(tmp, "")
    lines = ["# Conventions on the review sets", "",
             "`python bench/conventions.py` (default rules). Per convention: the default findings that change "
             "when it is emptied (`+` appear, `-` disappear). Renaming: the findings that change when every "
             "user-chosen identifier is renamed (`bench/rename.py`), each attributed to the conventions that "
             "change it. Worked half: locations; held-out half: counts only.", ""]
    table = {}  # key -> {(set, half): (plus, minus)}
    renamed_rows = []
    for set_name, (_, _, target, _, _) in realcode.SETS.items():
        dest = realcode.unpack(a.dir, set_name)
        split = realcode.halves(realcode.repos(dest, set_name))
        half_of = {r: h for h, rs in split.items() for r in rs}

        def half(key):
            return half_of.get(realcode.repo_of(set_name, key[0]))

        base = run(dest, target, base_cfg)
        emptied = {}
        for c in CONVENTIONS:
            got = run(dest, target, config_file(tmp, f"[tool.jaxlint.conventions]\n{c.key!s} = []\n"))
            emptied[c.key] = got
            for h in ("work", "held"):
                plus = sorted(k for k in got - base if half(k) == h)
                minus = sorted(k for k in base - got if half(k) == h)
                table.setdefault(c.key, {})[(set_name, h)] = (plus, minus)
        # renaming, one tree per repository
        rdest = os.path.join(tmp, "renamed-" + set_name)
        base_root = os.path.join(dest, "real") if set_name == "review2" else dest
        out_root = os.path.join(rdest, "real") if set_name == "review2" else rdest
        for repo in realcode.repos(dest, set_name):
            with open(os.devnull, "w") as null:
                stdout, sys.stdout = sys.stdout, null
                try:
                    rename.rename_tree(os.path.join(base_root, repo), os.path.join(out_root, repo))
                finally:
                    sys.stdout = stdout
        renamed = run(rdest, target, base_cfg)
        for h in ("work", "held"):
            changed = sorted([("+", k) for k in renamed - base if half(k) == h] +
                             [("-", k) for k in base - renamed if half(k) == h])
            total = sum(1 for k in base if half(k) == h)
            explained = []
            for sign, k in changed:
                why = [c.key for c in CONVENTIONS if (k in base) != (k in emptied[c.key])]
                explained.append((sign, k, why))
            renamed_rows.append((set_name, h, total, explained))
    lines += ["## Effect of each convention (default findings that change when it is emptied)", "",
              "| convention | dev work | dev held | review2 work | review2 held |", "|---|---|---|---|---|"]
    for c in CONVENTIONS:
        cells = []
        for s in ("dev", "review2"):
            for h in ("work", "held"):
                plus, minus = table[c.key][(s, h)]
                cells.append(f"+{len(plus)} -{len(minus)}")
        lines.append(f"| `{c.key}` | " + " | ".join(cells) + " |")
    lines += ["", "Worked half, the findings each convention decides:", ""]
    for c in CONVENTIONS:
        for s in ("dev", "review2"):
            plus, minus = table[c.key][(s, "work")]
            for sign, ks in (("+", plus), ("-", minus)):
                for k in ks:
                    lines.append(f"- `{c.key}` emptied: {sign} {k[2]} {k[0]}:{k[1]}")
    lines += ["", "## Renaming every user-chosen identifier", "",
              "| set | half | default findings | changed under renaming | explained by a convention |",
              "|---|---|--:|--:|--:|"]
    for s, h, total, explained in renamed_rows:
        ok = sum(1 for _, _, why in explained if why)
        lines.append(f"| {s} | {h} | {total} | {len(explained)} | {ok} |")
    lines += [""]
    for s, h, total, explained in renamed_rows:
        if h != "work":
            continue
        for sign, k, why in explained:
            lines.append(f"- {s}: {sign} {k[2]} {k[0]}:{k[1]} — "
                         + (", ".join(f"`{w}`" for w in why) if why else "**no convention explains it**"))
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
