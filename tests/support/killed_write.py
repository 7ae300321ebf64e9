"""Run the real CLI in a child process with one function blocked, so a test can kill -9 it
inside a write window and show what the next run does with the leftovers.

    python -m tests.support.killed_write MODULE.FUNCTION[:N] MARKER -- CLI ARGS...

The N-th call (default the first) of ``MODULE.FUNCTION`` writes the child's pid to MARKER
and sleeps; every other call goes through. The test waits for MARKER, then sends SIGKILL:
nothing of the child's own clean-up runs, as with kill -9 or a power cut.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _block(spec: str, marker: Path) -> None:
    name, _, nth = spec.partition(":")
    module_name, attr = name.rsplit(".", 1)
    module = importlib.import_module(module_name)
    real = getattr(module, attr)
    calls = [0]

    def blocked(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == int(nth or 1):
            marker.write_text(str(os.getpid()))
            time.sleep(600)
        return real(*args, **kwargs)

    setattr(module, attr, blocked)


def kill_inside(spec: str, tmp_path: Path, *args: str, timeout: float = 60.0) -> None:
    """Start the CLI with *spec* blocked, wait until it is inside, and kill -9 it."""
    marker = tmp_path / f"inside-{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "tests.support.killed_write", spec, str(marker), "--", *args]
    child = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            raise AssertionError(f"the child never reached {spec}: {child.communicate()[1]}")
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL


def main() -> None:
    spec, marker, dashes, *args = sys.argv[1:]
    assert dashes == "--"
    _block(spec, Path(marker))
    from topograph_slurm.cli.main import main as cli

    cli(args, prog_name="topograph-slurm")


if __name__ == "__main__":
    main()
