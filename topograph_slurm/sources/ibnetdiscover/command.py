"""Run the live ``ibnetdiscover`` command.

Whatever goes wrong (no binary, no permission, a hung fabric query, a non-zero exit) becomes
one :class:`~topograph_slurm.errors.CollectError` line that names the command and ends with the
last of its error output, which is what a sysadmin needs to see first.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from topograph_slurm.errors import CollectError


def run_ibnetdiscover(
    binary: str = "ibnetdiscover", args: Sequence[str] = (), timeout: float = 120.0
) -> str:
    """Run ``ibnetdiscover`` and return its stdout; every failure is one CollectError line."""
    cmd = [binary, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise CollectError(f"{binary}: command not found (install infiniband-diags?)") from None
    except PermissionError:
        raise CollectError(f"{binary}: permission denied") from None
    except subprocess.TimeoutExpired as exc:
        tail = _tail(exc.stderr)
        raise CollectError(
            f"{' '.join(cmd)}: timed out after {timeout:g}s" + (f": {tail}" if tail else "")
        ) from None
    if proc.returncode != 0:
        tail = _tail(proc.stderr) or "no error output"
        raise CollectError(f"{' '.join(cmd)}: exit status {proc.returncode}: {tail}")
    return proc.stdout.decode("utf-8", errors="replace")


def _tail(stderr: bytes | str | None, limit: int = 200) -> str:
    """The last non-empty stderr line(s), squeezed into one line of at most *limit* chars."""
    if not stderr:
        return ""
    text = stderr.decode("utf-8", errors="replace") if isinstance(stderr, bytes) else stderr
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = " | ".join(lines[-3:])
    return joined if len(joined) <= limit else "…" + joined[-limit:]
