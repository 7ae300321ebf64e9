"""``topograph-slurm``: the command line. Thin on purpose: parse options, call, print, exit.

Every expected failure is a :class:`TopographError` and leaves as one line on stderr with its
own exit code (see :mod:`topograph_slurm.errors`); ``-v`` adds the traceback.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import Any, cast

import click

from topograph_slurm import __version__
from topograph_slurm.cli.options import Command, Group
from topograph_slurm.errors import SUMMARY, Exit, TopographError, capped

# click 8.2 raises this for a bare command with no_args_is_help; 8.1 (Debian trixie's, which
# the node-side hooks may run under) prints the help and exits 0 itself, so nothing to catch.
_NO_ARGS_IS_HELP: tuple[type[click.UsageError], ...] = tuple(
    error for error in [getattr(click.exceptions, "NoArgsIsHelpError", None)] if error
)

# `collect` (UFM's HTTP stack, nvidia-smi parsing), the filters and the output module are
# imported when a command needs them, so `generate` run from cron starts quickly.
_LAZY_COMMANDS = {
    "generate": ("topograph_slurm.cli.generate", "generate"),
    "collect": ("topograph_slurm.cli.collect", "collect"),
    "spank": ("topograph_slurm.cli.spank", "spank"),
    "explain": ("topograph_slurm.cli.placement", "explain"),
    "order": ("topograph_slurm.cli.placement", "order"),
    "units": ("topograph_slurm.cli.units", "units"),
    "health": ("topograph_slurm.cli.health", "health"),
    "bench": ("topograph_slurm.cli.bench", "bench"),
    "diff": ("topograph_slurm.cli.diff", "diff"),
    "draw": ("topograph_slurm.cli.draw", "draw"),
    "experts": ("topograph_slurm.cli.experts", "experts"),
    "gres": ("topograph_slurm.cli.gres", "gres"),
    "pools": ("topograph_slurm.cli.pools", "pools_command"),
    "occupancy": ("topograph_slurm.cli.occupancy", "occupancy_command"),
    "record": ("topograph_slurm.cli.record", "record_group"),
    "doctor": ("topograph_slurm.cli.doctor", "doctor"),
    "hooks": ("topograph_slurm.cli.hooks", "hooks_group"),
    "slurm": ("topograph_slurm.cli.slurm_state", "slurm_group"),
}


class _LazyCommand:
    """Stands in for a command in ``main.commands`` until something looks at it."""

    def __init__(self, module: str, attr: str) -> None:
        self._where = (module, attr)

    def load(self) -> click.Command:
        import importlib

        module, attr = self._where
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def __getattr__(self, item: str) -> Any:
        return getattr(self.load(), item)


#: The top-level help's sections: every command in one, in this order (a test checks that
#: each command is listed once).
SECTIONS = {
    "Build the Slurm side": (
        "generate",
        "diff",
        "gres",
        "units",
        "spank",
        "hooks",
        "doctor",
        "slurm",
    ),
    "Measure the cluster": ("collect", "bench", "health", "occupancy", "draw"),
    "Place a job": ("explain", "order", "pools", "experts", "record"),
}


class Cli(click.Group):
    """A click group that turns our errors, and click's usage errors, into one line and a
    distinct exit code; its help lists the commands by section and every exit code."""

    command_class = Command
    group_class = Group

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        listed = [name for names in SECTIONS.values() for name in names]
        extra = tuple(name for name in self.list_commands(ctx) if name not in listed)
        limit = formatter.width - 6 - max(map(len, [*listed, *extra]))
        for title, names in [*SECTIONS.items(), ("Other", extra)]:
            rows = []
            for name in names:
                command = self.get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(limit)))
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Exit codes (docs/exit-codes.md)"):
            formatter.write_dl([(str(int(code)), words) for code, words in SUMMARY.items()])

    def main(  # type: ignore[override]
        self, args: Sequence[str] | None = None, prog_name: str | None = None, **extra: Any
    ) -> Any:
        """click's ``main`` with its own error display replaced: a usage error is one line
        (``topograph-slurm: error: …; see '… --help'``), not click's three. ``--help`` and
        ``--version`` are untouched (they exit inside click). An in-process caller that asks
        for ``standalone_mode=False`` gets click's own behaviour: the result, or the exception.
        """
        if not extra.pop("standalone_mode", True):
            return super().main(args, prog_name, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, standalone_mode=False, **extra)
        except _NO_ARGS_IS_HELP as err:  # bare `topograph-slurm`: the help
            err.show()
            sys.exit(int(Exit.USAGE))
        except click.UsageError as err:
            where = err.ctx.command_path if err.ctx else (prog_name or self.name)
            _say(f"{err.format_message().rstrip('.')} (see '{where} --help')")
            sys.exit(int(Exit.USAGE))
        except click.ClickException as err:  # click's file errors and the like
            _say(err.format_message())
            sys.exit(err.exit_code)
        except click.Abort:  # Ctrl-C: 128 + SIGINT, as a shell reports it
            _say("interrupted")
            sys.exit(int(Exit.INTERRUPTED))
        sys.exit(code if isinstance(code, int) else 0)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command: Any = self.commands.get(cmd_name)
        if isinstance(command, _LazyCommand):
            self.commands[cmd_name] = command = command.load()
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TopographError as err:
            _fail(ctx, str(err), err.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as err:  # a bug: still one line, the traceback only with -v
            _fail(ctx, f"internal error ({type(err).__name__}: {err}); rerun with -v", Exit.BUG)


def _fail(ctx: click.Context, message: str, code: int) -> None:
    """Print one error line (plus the traceback at -v) and exit with *code*. Control
    characters a message quotes from the fabric or a command's output are escaped, so the
    line stays one line and cannot drive the terminal."""
    if ctx.obj and ctx.obj.get("verbose", 0) > 0:
        traceback.print_exc()
    _say(message)
    sys.exit(int(code))


def _say(message: str) -> None:
    """``topograph-slurm: error: <message>`` as exactly one line: control characters and line
    separators from data (a name with a newline, an escape sequence) are shown escaped, and a
    long quoted value cut (:func:`.errors.capped`)."""
    from topograph_slurm.render.environment import printable

    click.echo(f"topograph-slurm: error: {capped(str(printable(message)))}", err=True)


@click.group(cls=Cli, context_settings={"help_option_names": ["-h", "--help"]})
# One version: the package's, which pyproject.toml reads too (so an uninstalled checkout's
# `python -m topograph_slurm --version` answers as well).
@click.version_option(__version__, prog_name="topograph-slurm")
@click.option("-v", "--verbose", count=True, help="More detail; -v also shows tracebacks.")
@click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr.")
@click.option(
    "--config",
    "config_file",
    metavar="PATH",
    help="YAML config (default: $TOPOGRAPH_SLURM_CONFIG or /etc/topograph-slurm/config.yaml).",
)
@click.pass_context
def main(ctx: click.Context, verbose: int, quiet: bool, config_file: str | None) -> None:
    """Topology-aware scheduling for GPU clusters on Slurm.

    Collects the fabric (InfiniBand, NVLink), generates Slurm topology config, and builds job
    filters that keep tensor-parallel groups inside one switch block.

    Every command's options: its own first, then the shared groups (Job, Parallel layout,
    Output, Slurm, Fabric source, Host naming, Hook); one concept, one flag (docs/cli.md).
    """
    ctx.ensure_object(dict)
    ctx.obj.update(verbose=0 if quiet else verbose, quiet=quiet, config_file=config_file)


for _name, _where in _LAZY_COMMANDS.items():
    main.commands[_name] = cast(click.Command, _LazyCommand(*_where))
