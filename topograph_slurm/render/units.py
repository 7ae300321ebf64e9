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
#: What ``PrivateTmp=yes`` replaces by an empty directory of the service's own: a program,
#: config or output there is missing (203/EXEC) or written where nobody reads it.
PRIVATE_TMP = ("/tmp", "/var/tmp")
#: What ``ProtectHome=yes`` hides; ``read-only`` shows it (ReadWritePaths= still opens the
#: directories the run writes).
HOMES = ("/home", "/root", "/run/user")


def _under(path: str, tops: tuple[str, ...]) -> bool:
    return any(path == top or path.startswith(top + "/") for top in tops)


@dataclass(frozen=True, slots=True)
class UnitPaths:
    """Where the run's program, config, topology and metrics are on the site's controller."""

    binary: str
    config: str
    output: str
    metrics: str

    def check(self) -> None:
        """Refuse a path systemd or cron would split or expand (blanks, ``%``, ``$``, quotes),
        and one under /tmp, which the service's ``PrivateTmp=yes`` hides (the hourly run
        would fail with 203/EXEC, or write where nobody reads)."""
        for flag, value in self._flags:
            if not _PLAIN_PATH.match(value) or "/../" in value + "/":
                raise UsageError(
                    f"{flag}: must be an absolute path of letters, digits and _./+-, got {value!r}"
                )
            if _under(value, PRIVATE_TMP):
                raise UsageError(
                    f"{flag}: {value} is under {value.split('/')[1]}, which the service's "
                    f"PrivateTmp=yes hides: pass {flag} with a path outside /tmp and /var/tmp"
                )

    @property
    def _flags(self) -> tuple[tuple[str, str], ...]:
        return (
            ("--binary", self.binary),
            ("--service-config", self.config),
            ("--service-output", self.output),
            ("--service-metrics", self.metrics),
        )

    @property
    def in_home(self) -> bool:
        """A path the run reads or writes is under /home, /root or /run/user (a pip install
        --user, a virtualenv in root's home): ``ProtectHome=yes`` would hide it, so the
        service gets ``ProtectHome=read-only``."""
        return any(_under(value, HOMES) for _, value in self._flags)

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
        name: render(env, template, paths=paths, writable=paths.writable, home=paths.in_home)
        for name, template in UNITS.items()
    }
