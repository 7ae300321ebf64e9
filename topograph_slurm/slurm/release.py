"""The Slurm release installed here, from ``scontrol --version`` (else ``sinfo --version``):
the one release reader (``generate``'s and ``health``'s ``auto``)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from topograph_slurm.errors import CollectError, InputError
from topograph_slurm.slurm.scontrol import Scontrol

_VERSION_LINE = re.compile(r"\Aslurm(?:-wlm)?\s+(\d+\.\d+(?:\.\d+)?)\b", re.ASCII)
#: The commands asked for the Slurm release, in order: both print the client's release, the
#: one installed beside slurmctld on the host that writes its config, and need no daemon.
VERSION_COMMANDS = ("scontrol", "sinfo")


def parse_version(text: str, command: str = "scontrol --version") -> str:
    """``24.11.5`` from ``scontrol --version`` / ``sinfo --version`` output (checked on
    24.11.5 and 26.05.5: ``slurm-wlm 24.11.5``; upstream builds print ``slurm 24.11.5``)."""
    match = _VERSION_LINE.match(text.strip())
    if match is None:
        first = text.strip().splitlines()[:1] or ["no output"]
        raise InputError(f"unexpected `{command}` output: {first[0][:80]!r}")
    return match.group(1)


def installed_version(
    binaries: Sequence[str] = VERSION_COMMANDS, timeout: float = 10.0, saved: Path | None = None
) -> tuple[str, str]:
    """The Slurm release and the command that told it; a collect error naming why each
    command failed when none answers. From a *saved* state: its ``scontrol --version``."""
    if saved is not None:
        try:
            return parse_version(Scontrol(saved=saved).run(["--version"])), "scontrol"
        except InputError as err:
            raise CollectError(str(err)) from None
    reasons = []
    for binary in binaries:
        if shutil.which(binary) is None:
            reasons.append(f"{binary} not found")
            continue
        try:
            return parse_version(Scontrol(binary, timeout).run(["--version"])), binary
        except (CollectError, InputError) as err:
            reasons.append(str(err))
    raise CollectError("; ".join(reasons))
