"""The jaxlint flake8 plugin's own CPU time, as a share of flake8's time without it.

Wall-clock ratios of two 40-second flake8 runs on a shared 2-core machine swing by +-10%, more
than the plugin costs. This runs flake8 once, in process, timing only the plugin's ``run``
(``time.process_time``), so the overhead is measured directly:

    python bench/plugin_share.py [PATH]     (default: the corpus' libs/ folder)
"""

from __future__ import annotations

import os
import sys
import time

import jaxlint.flake8_plugin as plugin
from flake8.main.application import Application


def main() -> int:
    if len(sys.argv) > 1:
        path = sys.argv[1]
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import corpus

        path = corpus.fetch()[0]
    spent = [0.0]
    original = plugin.JaxlintChecker.run

    def timed(self):
        start = time.process_time()
        out = list(original(self))
        spent[0] += time.process_time() - start
        return iter(out)

    plugin.JaxlintChecker.run = timed
    start = time.process_time()
    app = Application()
    with open(os.devnull, "w") as devnull:
        stdout, sys.stdout = sys.stdout, devnull
        try:
            app.run(["-j1", "--isolated", "--select", "E,W,F,C90,JAX", path])
        finally:
            sys.stdout = stdout
    total = time.process_time() - start
    alone = total - spent[0]
    print(f"flake8 CPU without the plugin's work: {alone:.2f} s; plugin: {spent[0]:.2f} s; "
          f"overhead {total / alone:.3f}x (target <= 1.05x)")
    print(f"@@plugin-share alone={alone:.4f} plugin={spent[0]:.4f}")  # for bench/run.py
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
