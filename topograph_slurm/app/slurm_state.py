"""``slurm save``'s use case: every scontrol read the commands make, run once and kept as a
saved state directory (:mod:`topograph_slurm.slurm.saved`; docs/slurm-state.md), written as
a whole through the one guarded writer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from topograph_slurm.config import Settings, state_dir
from topograph_slurm.output import write_directory
from topograph_slurm.slurm import saved
from topograph_slurm.slurm.scontrol import Scontrol


@dataclass(frozen=True, slots=True)
class Saved:
    """The files written (name → bytes) and the reads not saved."""

    files: dict[str, int]
    missing: list[str]


def save(settings: Settings, directory: Path) -> Saved:
    """The reads run and written to *directory*, replacing it only when it is absent, empty
    or a saved state (an OutputError, exit 9, otherwise; nothing written)."""
    files, missing = saved.save(Scontrol.from_settings(settings).run)
    write_directory(
        directory,
        files,
        replaceable=saved.is_saved_state,
        what="saved Slurm state",
        state_dir=state_dir(settings),
        lock_timeout=settings.lock_timeout,
    )
    sizes = {name: len(text.encode()) for name, text in sorted(files.items())}
    return Saved(sizes, missing)
