"""What the commands show and write: the only CLI module that imports
:mod:`topograph_slurm.output` (an import contract in pyproject.toml holds it), so every file a
command writes goes through the one guarded writer the same way."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from topograph_slurm.cli.options import config_settings, log, warn
from topograph_slurm.config import state_dir
from topograph_slurm.errors import Exit

if TYPE_CHECKING:
    from topograph_slurm.output import WriteOutcome


class Console:
    """A use case's words on the terminal (``app.generate.Console``): its texts as they are on
    stdout or stderr, progress lines (not under ``-q``), warnings."""

    def __init__(self, ctx: click.Context) -> None:
        self._ctx = ctx

    def echo(self, text: str, *, err: bool = False) -> None:
        click.echo(text, nl=False, err=err)

    def log(self, message: str) -> None:
        log(self._ctx, message)

    def warn(self, message: str) -> None:
        warn(message)


def write_output(
    ctx: click.Context, path: str, text: str, *, check: bool = False, diff: bool = False
) -> int:
    """Write one output file through the guarded writer (``output.write_output``: atomic,
    only on change, locked in the state directory); print the diff for --check/--diff, log
    what happened; the exit code (1 when --check finds *path* out of date). ``-`` is stdout,
    as for generate's -o."""
    from topograph_slurm.output import write_output as write

    if path == "-":
        if check or diff:
            raise click.UsageError("--check and --diff need a file, not stdout")
        click.echo(text, nl=False)
        return Exit.OK

    settings = config_settings(ctx)
    outcome = write(
        path,
        text,
        state_dir=state_dir(settings),
        check=check,
        show_diff=diff,
        lock_timeout=settings.lock_timeout,
    )
    if (check or diff) and outcome.diff:
        click.echo(outcome.diff, nl=False)
    if check:
        log(ctx, f"{path}: {'out of date' if outcome.changed else 'up to date'}")
        return Exit.DIFFERS if outcome.changed else Exit.OK
    log(ctx, f"{path}: {'written' if outcome.written else 'unchanged'}")
    return Exit.OK


def write_files(ctx: click.Context, directory: str, files: dict[str, str]) -> list[WriteOutcome]:
    """Write *files* (name → text) into *directory* through the guarded writer
    (``output.write_tree``: each atomic and only on change, locked in the state directory);
    what became of each."""
    from topograph_slurm.output import write_tree

    settings = config_settings(ctx)
    return write_tree(
        Path(directory),
        files,
        state_dir=state_dir(settings),
        lock_timeout=settings.lock_timeout,
    )
