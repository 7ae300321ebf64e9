"""``slurm save``'s summary: text (``templates/slurm_state.txt.j2``) or JSON (format
``topograph-slurm/slurm-state``, version 1: docs/slurm-state.md)."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2

from topograph_slurm.render.environment import render

TEMPLATE = "slurm_state.txt.j2"
FORMAT, VERSION = "topograph-slurm/slurm-state", 1


def render_saved(
    env: jinja2.Environment,
    directory: Path,
    files: dict[str, int],
    missing: list[str],
    as_json: bool,
) -> str:
    """Where the state went, each file with its size, and the reads not saved."""
    if as_json:
        data = {
            "format": FORMAT,
            "version": VERSION,
            "directory": str(directory),
            "files": files,
            "not_saved": missing,
        }
        return json.dumps(data, indent=2) + "\n"
    return render(env, TEMPLATE, directory=directory, files=files, missing=missing)
