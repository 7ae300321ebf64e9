"""Running ``health --apply``'s ``scontrol update`` lines: I/O at the edge, like
:mod:`topograph_slurm.slurm.spank`.

Each line is what the dry run printed (``templates/health.commands.j2``), split as a POSIX shell
would and run without a shell; only ``scontrol update`` lines are run, so a site template
cannot make ``--apply`` run anything else. Every line is tried, so one node Slurm refuses does
not keep the others' verdicts from the scheduler; the first refusal is reported in Slurm's
words, with how many failed.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

from topograph_slurm.errors import ApplyError, CollectError, ConfigError
from topograph_slurm.slurm.scontrol import NotInstalled, Scontrol


def _argv(line: str) -> list[str]:
    try:
        argv = shlex.split(line)
    except ValueError as err:
        raise ConfigError(f"health command {line!r}: {err}") from None
    if argv[:2] != ["scontrol", "update"]:
        raise ConfigError(f"health command {line!r} is not an `scontrol update` line")
    return argv


def apply_commands(
    lines: Sequence[str],
    scontrol: Scontrol,
    done: Callable[[str], None] = lambda line: None,
) -> None:
    """Run every line (``done`` is told of each that succeeded); an :class:`ApplyError` with
    the first failure when any failed."""
    argvs = [_argv(line) for line in lines]  # a bad line stops before anything runs
    failures = []
    for line, argv in zip(lines, argvs, strict=True):
        try:
            scontrol.run(argv[1:], what=f"`{line}`")
        except NotInstalled:
            raise
        except CollectError as err:
            failures.append(str(err))
            continue
        done(line)
    if failures:
        more = f" ({len(failures)} of {len(lines)} commands failed)" if len(lines) > 1 else ""
        raise ApplyError(failures[0] + more)
