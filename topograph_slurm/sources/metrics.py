"""The metrics file of the previous run: when it last succeeded.

A failed run still writes its metrics (``topograph_slurm_success 0``) but must not lose the
time of the last success, or an alert on "no success for a day" would reset on every failure;
that time is read back from the file the previous run wrote.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

_LAST_SUCCESS = re.compile(
    r"^topograph_slurm_last_success_timestamp_seconds\s+([0-9.eE+-]+)\s*$", re.MULTILINE
)


def parse_last_success(text: str) -> float | None:
    """The last success time in a .prom text, None when it has none (or a broken one)."""
    match = _LAST_SUCCESS.search(text)
    if match is None:
        return None
    try:
        value = float(match.group(1))
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def load_last_success(path: Path) -> float | None:
    """:func:`parse_last_success` of a file; a missing or unreadable one has none."""
    try:
        return parse_last_success(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
