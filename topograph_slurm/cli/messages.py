"""The lines a command writes to stderr besides its error: a warning, a progress line.

A leaf of the CLI (option handling warns of a renamed flag before any command runs);
commands take them through :mod:`topograph_slurm.cli.display`.
"""

from __future__ import annotations

import click


def warn(message: str) -> None:
    """One warning line on stderr (``--ufm-insecure``, plain-http UFM, a finding, a renamed
    flag), control characters escaped as in the error line."""
    from topograph_slurm.render.environment import printable

    click.echo(f"topograph-slurm: warning: {printable(message)}", err=True)


def log(ctx: click.Context, message: str) -> None:
    """A progress line on stderr, unless ``-q``."""
    if not ctx.find_root().ensure_object(dict).get("quiet"):
        click.echo(message, err=True)
