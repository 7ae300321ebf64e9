"""Names as Slurm and sysadmins read them: the one Slurm name rule, the one sanitiser, unique names,
natural order, and hostlists (through ClusterShell only)."""

from __future__ import annotations

import re


def natural_key(name: str) -> tuple[tuple[str | int, ...], str]:
    """Sort key putting ``node2`` before ``node10``, as hostlists and sysadmins do."""
    parts = re.split(r"(\d+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name
