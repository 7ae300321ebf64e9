"""The Slurm node inventory: which hosts Slurm knows, so fabric hosts outside it are excluded.

Reads ``scontrol show nodes --json`` (stable across 23.02–26.05) rather than pyslurm, whose
releases pair with a single Slurm major.minor.
"""

from __future__ import annotations

import json
import subprocess

from topograph_slurm.errors import CollectError, InputError


def parse_scontrol_nodes(text: str) -> frozenset[str]:
    """Node names from ``scontrol show nodes --json`` output."""
    try:
        data = json.loads(text)
        nodes = data["nodes"]
        names = frozenset(str(node["name"]) for node in nodes)
    except (ValueError, KeyError, TypeError) as err:
        raise InputError(f"unexpected `scontrol show nodes --json` output: {err}") from None
    return names


def scontrol_nodes(binary: str = "scontrol", timeout: float = 60.0) -> frozenset[str]:
    """Run ``scontrol show nodes --json`` and return the node names."""
    try:
        proc = subprocess.run(
            [binary, "show", "nodes", "--json"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise CollectError(f"{binary} not found: install slurm-client or pass a hostlist") from None
    except subprocess.TimeoutExpired:
        raise CollectError(f"{binary} show nodes timed out after {timeout:g}s") from None
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no error output"]
        raise CollectError(f"{binary} show nodes failed (exit {proc.returncode}): {tail[0]}")
    return parse_scontrol_nodes(proc.stdout)
