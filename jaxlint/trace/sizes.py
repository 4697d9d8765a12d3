"""Byte sizes as people write them (``2 GB``, ``512MiB``, ``1.5G``, ``1000000``) and back.

Decimal units are powers of 1000 (``kB``/``KB``, ``MB``, ``GB``, ``TB``), binary ones powers of
1024 (``KiB``, ``MiB``, ``GiB``, ``TiB``, and the one-letter ``K``, ``M``, ``G``, ``T`` as in
``ulimit`` and Docker); a bare number is bytes. Pure: no JAX import (the option parser and the
configuration use it).
"""

from __future__ import annotations

import re

_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3, "tb": 1000 ** 4,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
          "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?\s*([A-Za-z]*)\s*$")


def parse_size(text) -> int:
    """Bytes of ``text`` (an int is taken as bytes); ValueError with the accepted forms."""
    if isinstance(text, bool):
        raise ValueError(f"expected a size such as '2 GB' or '512 MiB', not {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"expected a size >= 0, not {text!r}")
        return text
    m = _SIZE.match(str(text))
    unit = _UNITS.get(m.group(3).lower()) if m else None
    if m is None or unit is None:
        raise ValueError(f"expected a size such as '2 GB', '512 MiB' or a number of bytes, not {text!r}")
    value = float(m.group(1)) * (10 ** int(m.group(2)) if m.group(2) else 1) * unit
    return int(round(value))


def format_size(n: int) -> str:
    """Exact below 1 KiB, else KiB/MiB/GiB with one decimal (as the report's other sizes)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
