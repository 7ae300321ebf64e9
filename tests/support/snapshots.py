"""Snapshots for tests: recorded outputs per node written as `collect` writes them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from topograph_slurm.collect import write_snapshot
from topograph_slurm.sources.snapshot import SNAPSHOT_FORMAT, SNAPSHOT_VERSION


def write_node_outputs(
    root: Path,
    outputs: Mapping[str, Mapping[str, str]],
    files: Mapping[str, str] | None = None,
    **manifest: Any,
) -> Path:
    """A snapshot at *root* holding, per node, each command's successful output
    (``outputs[node][command key] = text``), plus *files* and *manifest* keys as given."""
    entries, written = [], dict(files or {})
    for node, by_key in outputs.items():
        for key, text in by_key.items():
            rel = f"nodes/{node}/{key}.txt"
            written[rel] = text
            entries.append({"node": node, "command": key, "exit_code": 0, "file": rel})
    data = {"format": SNAPSHOT_FORMAT, "version": SNAPSHOT_VERSION, "results": entries}
    write_snapshot(root, data | manifest, written)
    return root
