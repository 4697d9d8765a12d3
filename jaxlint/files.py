"""Which files ``jaxlint check`` reads."""

from __future__ import annotations

import os
from typing import Iterator, Sequence

from .config import Config


def discover(paths: Sequence[str], config: Config) -> Iterator[str]:
    """Python files and Jupyter notebooks under the given paths. A file named explicitly is always
    checked; folders are walked recursively, skipping excluded folders and files (virtualenvs,
    build output, .git...) and Jupyter's ``.ipynb_checkpoints`` copies."""
    seen = set()
    for path in paths:
        if os.path.isfile(path):
            if path not in seen:
                seen.add(path)
                yield path
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d != ".ipynb_checkpoints"
                             and not config.is_excluded(os.path.join(root, d))
                             and not os.path.isfile(os.path.join(root, d, "pyvenv.cfg")))
            for name in sorted(files):
                if name.endswith((".py", ".ipynb")):
                    full = os.path.join(root, name)
                    if full not in seen and not config.is_excluded(full):
                        seen.add(full)
                        yield full
