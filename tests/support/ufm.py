"""Test helpers around the UFM source: write a snapshot, read a ``systems`` response alone.

The product never writes a snapshot itself (the collector writes :func:`snapshot_files` as one
atomic directory), so tests that only need the files on disk write them plainly here.
"""

from __future__ import annotations

from pathlib import Path

from topograph_slurm.sources.ufm import UfmResponses, snapshot_files, translate

#: One ``resources/systems`` entry as the translation reads it (guid, type, name, model).
UfmSystem = translate._System


def store_responses(responses: UfmResponses, directory: Path) -> Path:
    """Write every raw response to ``<directory>/ufm/<endpoint>.json``; returns that folder."""
    for rel, text in snapshot_files(responses).items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return directory / "ufm"


def parse_systems(text: str, source: str = "systems") -> list[UfmSystem]:
    """The systems of a ``GET resources/systems`` response, in response order, read by the
    same code :func:`fabric_from_ufm` uses."""
    return translate._systems(text, source)
