"""``nvidia-smi nvlink -e`` on this node, for the job record's counters (the parse is
``sources/link_counters.parse_nvlink_errors``). Where no nvidia-smi exists there is nothing
to read, which is not an error: a node without NVIDIA GPUs has no NVLinks."""

from __future__ import annotations

import shutil
import subprocess

#: Seconds nvidia-smi may take: the Prolog and Epilog wait for it, and slurmd kills a slow one.
TIMEOUT = 20.0


def nvlink_errors(binary: str = "nvidia-smi") -> tuple[str | None, str]:
    """(its output, "") when it ran; (None, "") without nvidia-smi; (None, why) when it failed."""
    path = shutil.which(binary)
    if path is None:
        return None, ""
    try:
        done = subprocess.run(
            [path, "nvlink", "-e"], capture_output=True, timeout=TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"{binary} nvlink -e: {type(err).__name__}: {err}"
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()
        return None, f"{binary} nvlink -e: exit {done.returncode}" + (
            f": {tail[-1]}" if tail else ""
        )
    return done.stdout.decode(errors="replace"), ""
