#!/usr/bin/env python3
"""Score jaxlint on the two real-code review sets, each split into a worked half and a held-out half.

Usage:
  python bench/realcode.py [--dir DIR] [--half work|held|both] [-v] [--pedantic] [--rename]

Unpacks `../shared/realcode/{dev,review2}.tar.gz` into DIR (default: a folder under the system temp
directory, reused between runs), runs `jaxlint check --no-cache --exit-zero --format json` on each
set, splits the findings by repository into the two halves fixed in `bench/review/split.md` (sorted by
the SHA-256 of the repository's folder name, alternate folders; decided before any finding was looked
at) and scores each half with `../shared/realcode/score.py`. `-v` passes `-v` to the scorer for the
worked half only: the held-out half is reported as counts, so that nobody reads its findings while
working. `--rename` first renames every user-chosen identifier of both sets (`bench/rename.py`) and
reports how many findings changed.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "realcode"))
SETS = {
    # name: (tarball, folder jaxlint runs in, target it checks, verdicts, misses, repo prefix depth)
    "dev": ("dev.tar.gz", "", ".", "verdicts-dev.tsv", None),
    "review2": ("review2.tar.gz", "", "real", "verdicts-review2.tsv", "misses-review2.tsv"),
}


def repo_of(set_name, path):
    parts = path.lstrip("./").split("/")
    return parts[1] if set_name == "review2" else parts[0]


def halves(names):
    order = sorted(names, key=lambda n: hashlib.sha256(n.encode()).hexdigest())
    return {"work": sorted(order[0::2]), "held": sorted(order[1::2])}


def unpack(dirname, set_name):
    dest = os.path.join(dirname, set_name)
    if not os.path.exists(os.path.join(dest, ".done")):
        os.makedirs(dest, exist_ok=True)
        with tarfile.open(os.path.join(SHARED, SETS[set_name][0])) as tar:
            tar.extractall(dest, filter="data") if sys.version_info >= (3, 12) else tar.extractall(dest)
        open(os.path.join(dest, ".done"), "w").close()
    return dest


def repos(dest, set_name):
    base = os.path.join(dest, "real") if set_name == "review2" else dest
    return sorted(n for n in os.listdir(base) if not n.startswith(".") and os.path.isdir(os.path.join(base, n)))


def run_jaxlint(dest, target, extra):
    cmd = [sys.executable, "-m", "jaxlint", "check", "--no-cache", "--exit-zero", "--format", "json", *extra, target]
    out = subprocess.run(cmd, cwd=dest, capture_output=True, text=True, check=False)
    if out.returncode not in (0, 1):
        sys.exit(f"jaxlint failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "jaxlint-realcode"))
    ap.add_argument("--half", choices=("work", "held", "both"), default="both")
    ap.add_argument("--set", choices=("dev", "review2", "both"), default="both")
    ap.add_argument("--pedantic", action="store_true")
    ap.add_argument("-v", action="store_true")
    ap.add_argument("--save", help="folder to write each half's findings JSON into")
    a = ap.parse_args()
    for set_name, (tarball, _, target, verdicts, misses) in SETS.items():
        if a.set not in ("both", set_name):
            continue
        dest = unpack(a.dir, set_name)
        found = run_jaxlint(dest, target, ["--pedantic"] if a.pedantic else [])
        split = halves(repos(dest, set_name))
        for half in ("work", "held"):
            if a.half not in ("both", half):
                continue
            mine = [f for f in found if repo_of(set_name, f["path"]) in split[half]]
            path = os.path.join(a.save or dest, f"found-{set_name}-{half}.json")
            if a.save:
                os.makedirs(a.save, exist_ok=True)
            with open(path, "w") as fh:
                json.dump(mine, fh)
            vt = os.path.join(dest, f"verdicts-{half}.tsv")
            with open(os.path.join(SHARED, verdicts)) as src, open(vt, "w") as dst:
                lines = src.read().splitlines()
                col = lines[0].split("\t").index("path")
                dst.write(lines[0] + "\n")
                # verdicts this project's independent reviewers gave on findings newer than the
                # shared tables, same columns (bench/review/verdicts-<set>-extra.tsv)
                extra = os.path.join(HERE, "review", f"verdicts-{set_name}-extra.tsv")
                if os.path.exists(extra):
                    with open(extra) as fh:
                        more = fh.read().splitlines()
                    assert more[0] == lines[0], f"{extra}: columns differ from the shared table"
                    lines += more[1:]
                for line in lines[1:]:
                    if repo_of(set_name, line.split("\t")[col]) in split[half]:
                        dst.write(line + "\n")
            cmd = [sys.executable, os.path.join(SHARED, "score.py"), path, vt]
            if misses:
                cmd += ["--misses", os.path.join(SHARED, misses)]
            if a.v and half == "work":
                cmd.append("-v")
            res = subprocess.run(cmd, capture_output=True, text=True, check=False)
            lines = res.stdout.rstrip().splitlines()
            if half == "held":  # counts only; and misses only for the held repos' paths
                lines = [ln for ln in lines[-1:]]
            print(f"== {set_name} / {half} ({len(split[half])} repositories)")
            print("\n".join(lines))


if __name__ == "__main__":
    main()
