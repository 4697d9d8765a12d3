#!/usr/bin/env python3
"""Fetch the pinned real-JAX-library corpus used to judge jaxlint's precision and speed (stdlib only).

Same layout as ../shared/corpus/fetch.sh, so either tool can fill or reuse the other's folder:

    DEST/whl/                 the downloaded wheels (pip download --no-deps)
    DEST/libs/<name>/...      flax, optax, equinox, numpyro, chex, dm_haiku (~575 files, ~201k lines)
    DEST/jax/...              jax itself (~617 files, ~305k lines)
    DEST/.done                written last; when it exists nothing is downloaded or unpacked again
                              (it lists the pins; fetch.sh leaves it empty: both count)

`*.dist-info` folders are left out. DEST is --dest, else $JAXLINT_CORPUS, else
${XDG_CACHE_HOME:-~/.cache}/jaxlint-corpus.

    python bench/corpus.py                 # prints "libs: DEST/libs" and "jax:  DEST/jax"
    python bench/corpus.py --dest DIR

From Python (bench/run.py, bench/snapshot.py, tests/test_corpus_snapshot.py):
    fetch(dest=None) -> (libs, jax)        downloads and unpacks on first use
    locate(dest=None) -> (libs, jax) | None   only looks; None when not fetched (yet)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

# (distribution, version); the order is the order of the pip command
PINS = (
    ("flax", "0.12.8"),
    ("optax", "0.2.8"),
    ("equinox", "0.13.8"),
    ("numpyro", "0.22.0"),
    ("chex", "0.1.92"),
    ("dm-haiku", "0.0.17"),
    ("jax", "0.10.2"),
)
DOWNLOAD_LIMIT_S = 300  # the whole pip download (~5 MB); with --timeout/--retries below, an offline
# machine fails within about a minute instead of pip's default 15 s x 5 retries per index (more
# where pip is configured with a longer timeout), which keeps CI's "fetch or skip" step short
JAX = "jax"  # unpacked into DEST/jax; every other distribution into DEST/libs/<wheel name>


class CorpusError(Exception):
    pass


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def dir_name(dist: str) -> str:
    """The folder under libs/ of a distribution: its wheel file's name part (dm-haiku -> dm_haiku)."""
    return _canonical(dist)


LIBRARY_DIRS = {dist: dir_name(dist) for dist, _ in PINS if dist != JAX}  # "dm-haiku": "dm_haiku", ...


def default_dest() -> str:
    env = os.environ.get("JAXLINT_CORPUS")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.abspath(os.path.join(cache, "jaxlint-corpus"))


def _paths(dest: str):
    return os.path.join(dest, "libs"), os.path.join(dest, "jax")


def pin_line() -> str:
    return " ".join(f"{d}=={v}" for d, v in PINS)


def locate(dest=None):
    """(libs, jax) of a fetched corpus, or None when DEST has no complete one. Never downloads.

    .done is empty when fetch.sh made the folder, and holds the pins when this script did; a .done
    naming other pins (the pins were bumped since) does not count, so the corpus is fetched again."""
    dest = os.path.abspath(dest) if dest else default_dest()
    libs, jax = _paths(dest)
    try:
        with open(os.path.join(dest, ".done")) as fh:
            done = fh.read().strip()
    except OSError:
        return None
    if done and done != pin_line():
        return None
    if os.path.isdir(libs) and os.path.isdir(jax):
        return libs, jax
    return None


def _log(msg: str) -> None:
    print(f"corpus: {msg}", file=sys.stderr, flush=True)


def _download(whl: str) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
           # only the sources are read, never installed: jax 0.10.2 says Requires-Python >= 3.11
           "--ignore-requires-python", "--disable-pip-version-check", "--timeout", "20", "--retries", "2",
           "-d", whl,
           *(f"{dist}=={version}" for dist, version in PINS)]
    _log(f"downloading {pin_line()} ...")
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=DOWNLOAD_LIMIT_S)
    except subprocess.TimeoutExpired:
        raise CorpusError(f"pip download took over {DOWNLOAD_LIMIT_S} s; gave up: {' '.join(cmd)}") from None
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip()[-2000:]
        raise CorpusError(f"pip download failed (exit {p.returncode}): {' '.join(cmd)}\n{tail}")


def _wheel_for(whl: str, dist: str, version: str) -> str:
    found = []
    for name in sorted(os.listdir(whl)):
        if name.endswith(".whl"):
            parts = name[:-4].split("-")
            if len(parts) >= 5 and _canonical(parts[0]) == _canonical(dist) and parts[1] == version:
                found.append(os.path.join(whl, name))
    if len(found) != 1:
        raise CorpusError(f"expected one wheel for {dist}=={version} in {whl}, found {len(found)}: {found}")
    return found[0]


def _unpack(wheel: str, into: str) -> int:
    """Extract a wheel without its *.dist-info folder, keeping the archive's file times. Returns the file count."""
    n = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            parts = info.filename.replace("\\", "/").split("/")
            if any(p.endswith(".dist-info") for p in parts):
                continue
            target = zf.extract(info, into)  # zipfile drops absolute paths and ".." components
            if not info.is_dir():
                n += 1
                try:
                    t = time.mktime(info.date_time + (0, 0, -1))
                    os.utime(target, (t, t))
                except (OverflowError, ValueError, OSError):
                    pass
    return n


def fetch(dest=None):
    """Download (first time only) and unpack the pinned corpus into DEST; return (libs, jax)."""
    dest = os.path.abspath(dest) if dest else default_dest()
    found = locate(dest)
    if found:
        return found
    whl = os.path.join(dest, "whl")
    os.makedirs(whl, exist_ok=True)
    _download(whl)
    # Unpack into a staging folder and move it into place, so that an interrupted run never leaves
    # a half-unpacked tree behind .done (and a rerun starts from clean folders, not over old files).
    staging = os.path.join(dest, f".staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        s_libs, s_jax = _paths(staging)
        total = 0
        for dist, version in PINS:
            wheel = _wheel_for(whl, dist, version)
            total += _unpack(wheel, s_jax if dist == JAX else os.path.join(s_libs, dir_name(dist)))
        libs, jax = _paths(dest)
        for final, staged in ((libs, s_libs), (jax, s_jax)):
            shutil.rmtree(final, ignore_errors=True)
            os.replace(staged, final)
        with open(os.path.join(dest, ".done"), "w") as fh:
            fh.write(pin_line() + "\n")
        _log(f"unpacked {total} files into {dest}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return libs, jax


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Fetch the pinned real-library corpus (flax, optax, equinox, "
                                             "numpyro, chex, dm-haiku, jax) and print where it is.")
    ap.add_argument("--dest", metavar="DIR",
                    help="where to put it (default: $JAXLINT_CORPUS, else ${XDG_CACHE_HOME:-~/.cache}/jaxlint-corpus;"
                         f" here: {default_dest()})")
    args = ap.parse_args(argv)
    try:
        libs, jax = fetch(args.dest)
    except (CorpusError, OSError, zipfile.BadZipFile) as e:
        print(f"corpus: error: {e}", file=sys.stderr)
        return 1
    print(f"libs: {libs}")
    print(f"jax:  {jax}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
