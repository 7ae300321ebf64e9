"""Slurm release numbers, because what topology and job_submit accept differs per release."""

from __future__ import annotations

import re
from dataclasses import dataclass

from topograph_slurm.errors import ConfigError

#: slurmctld 25.05.0–25.05.8 and 25.11.0–25.11.5 read past the end of a topology.yaml whose
#: size is an exact multiple of this and die (fixed in 25.11.6 and 26.05.0).
YAML_READ_BLOCK = 4096

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?(?:[-+~]\S*)?\s*$", re.ASCII)


@dataclass(frozen=True, order=True, slots=True)
class SlurmVersion:
    """``major.minor[.micro]`` (``24.11``, ``25.11.2``, Debian's ``24.11.5-1``); ordered for
    feature gates."""

    major: int
    minor: int
    micro: int = 0

    @classmethod
    def parse(cls, text: str) -> SlurmVersion:
        """Parse ``24.11`` or ``25.11.2``; anything else is a config error."""
        match = _VERSION.match(str(text)) if str(text).strip()[:1].isdigit() else None
        if not match:
            raise ConfigError(f"invalid Slurm version {text!r}: expected MAJOR.MINOR[.MICRO]")
        return cls(int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.micro}"

    @property
    def allows_small_blocks(self) -> bool:
        """25.05+ accepts blocks smaller than the base block size (and empty ones)."""
        return (self.major, self.minor) >= (25, 5)

    @property
    def can_set_segment_size(self) -> bool:
        """job_submit.lua can read and write ``job_desc.segment_size`` from 25.11.2 on."""
        return (self.major, self.minor, self.micro) >= (25, 11, 2)

    @property
    def has_topology_yaml(self) -> bool:
        """25.05+ reads topology.yaml with several named topologies."""
        return (self.major, self.minor) >= (25, 5)

    @property
    def misreads_yaml_block_multiple(self) -> bool:
        """slurmctld dies on a topology.yaml of an exact multiple of :data:`YAML_READ_BLOCK`
        bytes: 25.05.0–25.05.8 (no 25.05 fix is known, so every 25.05) and 25.11.0–25.11.5.
        A release given as ``25.11`` counts as 25.11.0, so it is treated as affected."""
        return (25, 5) <= (self.major, self.minor) < (25, 11) or (25, 11, 0) <= (
            self.major,
            self.minor,
            self.micro,
        ) < (25, 11, 6)

    @property
    def loses_deferred_launch(self) -> bool:
        """Up to 26.05 a ``scontrol reconfigure`` while a job's Prolog runs under
        ``PrologFlags=DeferBatch`` discards that job's deferred batch launch (fixed for 26.11,
        commits 3c59156bfc and 0753517e19; reproduced on 24.11.5 in the test cluster)."""
        return (self.major, self.minor) < (26, 11)


def yaml_needs_padding(size: int, version: SlurmVersion | None) -> bool:
    """Whether a topology.yaml of *size* bytes needs a padding line for *version* (None: the
    release is unknown, so yes when the size is a multiple): see
    :attr:`SlurmVersion.misreads_yaml_block_multiple`."""
    affected = version is None or version.misreads_yaml_block_multiple
    return affected and size % YAML_READ_BLOCK == 0
