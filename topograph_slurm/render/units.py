"""The systemd service and timer and the cron.d example that run ``generate`` unattended.

Sites run ``generate --reconfigure --metrics`` from a timer or cron; the files that do it are
templates (``templates/topograph-slurm.{service,timer,cron}.j2``) filled with the paths of one
site. The paths land unquoted in unit and crontab lines, so each must be an absolute path made
of characters neither systemd nor cron reads specially.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

import jinja2

from topograph_slurm.errors import UsageError
from topograph_slurm.render.environment import render

#: Installed file name → template.
UNITS = {
    "topograph-slurm.service": "topograph-slurm.service.j2",
    "topograph-slurm.timer": "topograph-slurm.timer.j2",
    "topograph-slurm.cron": "topograph-slurm.cron.j2",
}
#: What ``units --print`` names each file.
KINDS = {
    "service": "topograph-slurm.service",
    "timer": "topograph-slurm.timer",
    "cron": "topograph-slurm.cron",
}
_PLAIN_PATH = re.compile(r"\A/[A-Za-z0-9_./+-]*\Z")


@dataclass(frozen=True, slots=True)
class UnitPaths:
    """Where the run's program, config, topology and metrics are on the site's controller."""

    binary: str
    config: str
    output: str
    metrics: str

    def check(self) -> None:
        """Refuse a path systemd or cron would split or expand (blanks, ``%``, ``$``, quotes)."""
        for flag, value in (
            ("--binary", self.binary),
            ("--config", self.config),
            ("--output", self.output),
            ("--metrics", self.metrics),
        ):
            if not _PLAIN_PATH.match(value) or "/../" in value + "/":
                raise UsageError(
                    f"{flag}: must be an absolute path of letters, digits and _./+-, got {value!r}"
                )

    @property
    def writable(self) -> list[str]:
        """The directories the run writes (topology and its lock; metrics), for
        ``ReadWritePaths=``: everything else stays read-only under ``ProtectSystem=strict``."""
        dirs = {str(PurePosixPath(self.output).parent), str(PurePosixPath(self.metrics).parent)}
        return sorted(dirs)


def render_units(env: jinja2.Environment, paths: UnitPaths) -> dict[str, str]:
    """Every unit file by its installed name."""
    paths.check()
    return {
        name: render(env, template, paths=paths, writable=paths.writable)
        for name, template in UNITS.items()
    }
