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
from dataclasses import dataclass, field

from topograph_slurm.slurm.scontrol import Scontrol

#: ``Key = Value`` (value may be empty); ``Prolog[0]`` keeps its index in the key.
_LINE = re.compile(r"\A([A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?)\s*=\s?(.*)\Z")
_INDEXED = re.compile(r"\A([A-Za-z_][A-Za-z0-9_]*)\[(\d+)\]\Z")
#: How ``scontrol show config`` prints an unset value.
NULL = "(null)"


@dataclass(frozen=True, slots=True)
class SlurmConfig:
    """slurmctld's settings by key (``(null)`` already dropped)."""

    values: dict[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str | None:
        """The value of *key*; None when unset (``(null)``) or absent."""
        value = self.values.get(key)
        return value if value not in (None, "", NULL) else None

    def flags(self, key: str) -> frozenset[str]:
        """A comma-separated setting (``PrologFlags = Alloc,DeferBatch``) as its words."""
        return frozenset(word.strip() for word in (self.get(key) or "").split(",") if word)

    def programs(self, key: str) -> list[str]:
        """The programs of a hook key, in order: ``Prolog[0]``, ``Prolog[1]`` … (or a plain
        ``Prolog`` as older releases print it)."""
        found = []
        for name, value in self.values.items():
            match = _INDEXED.match(name)
            if (match and match.group(1) == key) or name == key:
                index = int(match.group(2)) if match else 0
                if value and value != NULL:
                    found.append((index, value))
        return [value for _, value in sorted(found)]

    @property
    def release(self) -> str | None:
        """``SLURM_VERSION`` (``24.11.5``): the release slurmctld runs."""
        return self.get("SLURM_VERSION")

    @property
    def slurm_user(self) -> tuple[str, int | None]:
        """``SlurmUser = slurm(64030)`` → (``slurm``, 64030); the uid None when not printed."""
        match = re.fullmatch(r"(.*?)\((\d+)\)", self.get("SlurmUser") or "root(0)")
        if match is None:
            return self.get("SlurmUser") or "root", None
        return match.group(1), int(match.group(2))


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
