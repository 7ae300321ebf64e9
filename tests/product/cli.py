"""Every command of the CLI, enumerated from the click group itself (a new command is covered
without editing a test), and the check that the installed tool's ``--help`` for one is the
checkout's."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner

from tests.product.artifact import Artifact
from topograph_slurm.cli.main import main

#: A fixed help width: the checkout's help (in process) and the installed one must agree.
#: click wraps at COLUMNS - 2 in a process, at ``terminal_width`` as given in CliRunner.
WIDTH = {"COLUMNS": "80"}
TERMINAL_WIDTH = 78


def command_paths(group: click.Command = main, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The tool itself, then every command and subcommand, as argv words."""
    found = [path]
    if isinstance(group, click.Group):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is not None:
                found += command_paths(command, (*path, name))
    return found


def checkout_help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(
        main, [*path, "--help"], prog_name="topograph-slurm", terminal_width=TERMINAL_WIDTH
    )
    return result.output


def help_problem(artifact: Artifact, path: tuple[str, ...], cwd: Path) -> str:
    """Empty when ``topograph-slurm PATH --help`` as installed exits 0, prints nothing on
    stderr and prints the checkout's help text; else what went wrong."""
    done = artifact.run([*path, "--help"], cwd, WIDTH)
    shown = " ".join(("topograph-slurm", *path, "--help"))
    if done.returncode != 0 or done.stderr:
        return f"{shown}: exit {done.returncode}: {done.stderr.strip()[-2000:]}"
    if done.stdout != checkout_help(path):
        return f"{shown}: the installed help differs from the checkout's:\n{done.stdout}"
    return ""
