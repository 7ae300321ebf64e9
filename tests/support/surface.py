"""The public command surface as text: one line per command and one per option, argument and
metavar, so a change to any flag is a visible diff of ``tests/golden/surface.txt``.

``UPDATE_SURFACE=1 python3 -m pytest tests/unit/test_surface.py`` rewrites the file.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from topograph_slurm.cli.main import main


def leaf_commands() -> Iterator[tuple[str, click.Command]]:
    """Every command a user runs, by its full name (``record start``), in name order."""

    def walk(command: click.Command, path: list[str]) -> Iterator[tuple[str, click.Command]]:
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    yield from walk(sub, [*path, name])
        else:
            yield " ".join(path), command

    yield from walk(main, [])


def describe(param: click.Parameter) -> str:
    """One parameter as the surface file lists it."""
    if isinstance(param, click.Argument):
        return f"  argument {param.make_metavar(click.Context(click.Command('x')))}"
    assert isinstance(param, click.Option)
    names = ", ".join([*param.opts, *param.secondary_opts])
    kind = "flag" if param.is_flag else (param.metavar or param.type.name.upper())
    heading = getattr(param, "heading", "-")
    hidden = " hidden" if param.hidden else ""
    return f"  {names} {kind} [{heading}]{hidden}"


def surface() -> str:
    lines = []
    for name, command in leaf_commands():
        aliases = getattr(command, "aliases", {})
        lines.append(name)
        lines.extend(describe(param) for param in command.params)
        lines.extend(f"  renamed {old} -> {new or 'JOBID'}" for old, new in sorted(aliases.items()))
    return "\n".join(lines) + "\n"
