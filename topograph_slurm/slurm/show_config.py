"""``scontrol show config``: the settings slurmctld runs with, as ``Key = Value`` lines.

The one reader of that output (``generate --reconfigure``'s prolog guard and ``doctor``).
Shape checked on 24.11.5 and 26.05.5: a ``Configuration data as of …`` line, then one
``Key<spaces>= Value`` per line; unset values read ``(null)``; hook programs are indexed
(``Prolog[0]``, ``Epilog[1]``, one per program); ``SlurmUser = root(0)`` carries the uid;
plugin sections (``MPI Plugins Configuration:``) and a ``Slurmctld(primary) at … is UP``
line follow. The first value of a key wins (a plugin section repeats none we read).
"""

from __future__ import annotations

import re

from topograph_slurm.model.slurm_config import SlurmConfig
from topograph_slurm.slurm.scontrol import Scontrol

#: ``Key = Value`` (value may be empty); ``Prolog[0]`` keeps its index in the key.
_LINE = re.compile(r"\A([A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?)\s*=\s?(.*)\Z")


def parse_show_config(text: str) -> SlurmConfig:
    """Every ``Key = Value`` line of ``scontrol show config`` (other lines skipped)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match is not None:
            values.setdefault(match.group(1), match.group(2).strip())
    return SlurmConfig(values)


def show_config(scontrol: Scontrol) -> SlurmConfig:
    """Run ``scontrol show config`` and read it."""
    return parse_show_config(scontrol.run(["show", "config"]))
