"""What a command shows and writes: the one place the command line prints a result, a warning
or a progress line, renders through the template environment, and writes a file.

Every command ends here, so the same ``--templates``/config ``templates:`` hold for every
rendering, every written file goes through the one guarded writer (:mod:`topograph_slurm.output`:
atomic, only on change, locked in the state directory) with the same ``--check``/``--diff``
meaning, and every result reaches stdout the same way. No other CLI module imports
:mod:`topograph_slurm.output` (an import contract checks it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import click
import jinja2

from topograph_slurm.cli.messages import log, warn
from topograph_slurm.config import Settings, state_dir
from topograph_slurm.errors import Exit, UsageError

__all__ = ["Console", "environment", "log", "show", "templates_dir", "warn", "write", "write_files"]


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


def show(text: str) -> None:
    """A command's result on stdout, as rendered (it ends with its own newline)."""
    click.echo(text, nl=False)


def templates_dir(ctx: click.Context) -> Path | None:
    """The directory whose templates override the built-in ones: the command's
    ``--templates``, else the config's ``templates``."""
    from topograph_slurm.cli.options import config_settings

    chosen = ctx.params.get("templates") or config_settings(ctx).templates
    return Path(chosen) if chosen else None


def environment(ctx: click.Context) -> jinja2.Environment:
    """The one template environment of this run (:func:`templates_dir` over the built-in
    templates); a missing override directory is a config error before any work."""
    from topograph_slurm.render.environment import environment as make

    return make(templates_dir(ctx))


def write(
    ctx: click.Context,
    path: str,
    text: str,
    *,
    check: bool = False,
    diff: bool = False,
    settings: Settings | None = None,
) -> int:
    """Write one output file through the guarded writer; print the diff for --check/--diff,
    log what happened; the exit code (1 when --check finds *path* out of date). ``-`` is
    stdout. *settings*: the run's own, when its flags move the state directory (generate's
    --state-dir); else the config's."""
    from topograph_slurm.cli.options import config_settings
    from topograph_slurm.output import write_output

    if path == "-":
        if check or diff:
            raise UsageError("--check and --diff need a file (-o FILE), not stdout")
        show(text)
        return Exit.OK
    settings = settings or config_settings(ctx)
    outcome = write_output(
        path,
        text,
        state_dir=state_dir(settings),
        check=check,
        show_diff=diff,
        lock_timeout=settings.lock_timeout,
    )
    if (check or diff) and outcome.diff:
        show(outcome.diff)
    if check:
        log(ctx, f"{path}: {'out of date' if outcome.changed else 'up to date'}")
        return Exit.DIFFERS if outcome.changed else Exit.OK
    log(ctx, f"{path}: {'written' if outcome.written else 'unchanged'}")
    return Exit.OK


def write_files(
    ctx: click.Context,
    directory: str,
    files: Mapping[str, str],
    *,
    check: bool = False,
    diff: bool = False,
    kind: str = "files",
    settings: Settings | None = None,
) -> int:
    """Write generated files into *directory*, each only on change, under one lock (the
    guarded writer's ``write_tree``); --check/--diff and *settings* as for :func:`write`; the
    log line counts them as *kind* (``unit files``)."""
    from topograph_slurm.cli.options import config_settings
    from topograph_slurm.output import write_tree

    settings = settings or config_settings(ctx)
    outcomes = write_tree(
        Path(directory),
        dict(files),
        check=check,
        show_diff=diff,
        state_dir=state_dir(settings),
        lock_timeout=settings.lock_timeout,
    )
    if check or diff:
        for outcome in outcomes:
            if outcome.diff:
                show(outcome.diff)
    changed = sum(1 for outcome in outcomes if outcome.changed)
    if check:
        log(ctx, f"{directory}: {changed} of {len(outcomes)} {kind} out of date")
        return Exit.DIFFERS if changed else Exit.OK
    written = sum(1 for outcome in outcomes if outcome.written)
    log(ctx, f"{directory}: {written} of {len(outcomes)} {kind} written")
    return Exit.OK
