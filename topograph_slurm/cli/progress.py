"""The progress bar of ``topograph-slurm collect`` and ``bench``: a terminal concern, so it
lives with the CLI; collection itself only calls a callback per finished node."""

from __future__ import annotations

import sys
import threading
from typing import Any


class ProgressBar:
    """A rich progress bar on stderr; a no-op when disabled (not a TTY, or ``-q``).

    :meth:`advance` is thread-safe: transports report nodes from their worker threads.
    """

    def __init__(self, total: int, enabled: bool, description: str = "collecting") -> None:
        self._lock = threading.Lock()
        self._bar: Any = None
        self._task: Any = None
        if enabled and total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self._bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task(description, total=total)

    def __enter__(self) -> ProgressBar:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def advance(self, node: str) -> None:
        if self._bar is not None:
            with self._lock:
                self._bar.update(self._task, advance=1, description=node)


def progress_wanted(quiet: bool = False) -> bool:
    """Show progress only to a human: stderr is a terminal and not ``-q``."""
    return not quiet and sys.stderr.isatty()
