"""slurmctld's settings as ``scontrol show config`` prints them (parsed by
:mod:`topograph_slurm.slurm.show_config`): read by ``generate --reconfigure``'s prolog guard
and by ``doctor``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from topograph_slurm.errors import ConfigError
from topograph_slurm.model.slurm_version import SlurmVersion

_INDEXED = re.compile(r"\A([A-Za-z_][A-Za-z0-9_]*)\[(\d+)\]\Z")
#: How ``scontrol show config`` prints an unset value.
NULL = "(null)"


@dataclass(frozen=True, slots=True)
class SlurmConfig:
    """slurmctld's settings by key (``(null)`` already dropped)."""

    values: dict[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str | None:
        """The value of *key*; None when unset (``(null)``) or absent."""
        value = self.values.get(key)
        return value if value not in (None, "", NULL) else None

    def flags(self, key: str) -> frozenset[str]:
        """A comma-separated setting (``PrologFlags = Alloc,DeferBatch``) as its words."""
        return frozenset(word.strip() for word in (self.get(key) or "").split(",") if word)

    def programs(self, key: str) -> list[str]:
        """The programs of a hook key, in order: ``Prolog[0]``, ``Prolog[1]`` … (or a plain
        ``Prolog`` as older releases print it)."""
        found = []
        for name, value in self.values.items():
            match = _INDEXED.match(name)
            if (match and match.group(1) == key) or name == key:
                index = int(match.group(2)) if match else 0
                if value and value != NULL:
                    found.append((index, value))
        return [value for _, value in sorted(found)]

    @property
    def release(self) -> str | None:
        """``SLURM_VERSION`` (``24.11.5``): the release slurmctld runs."""
        return self.get("SLURM_VERSION")

    @property
    def slurm_user(self) -> tuple[str, int | None]:
        """``SlurmUser = slurm(64030)`` → (``slurm``, 64030); the uid None when not printed."""
        match = re.fullmatch(r"(.*?)\((\d+)\)", self.get("SlurmUser") or "root(0)")
        if match is None:
            return self.get("SlurmUser") or "root", None
        return match.group(1), int(match.group(2))

    @property
    def conf_dir(self) -> str:
        """The directory of slurm.conf (``SLURM_CONF``), where slurmctld looks for
        topology.conf/yaml, job_submit.lua, cli_filter.lua and plugstack.conf by default."""
        conf = self.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
        return conf.rsplit("/", 1)[0] or "/"


def reconfigure_risk(config: SlurmConfig) -> str | None:
    """Why a reconfigure now may lose a job (``Slurm 24.11.5 with PrologFlags=DeferBatch``),
    None when it cannot: no DeferBatch, or a release that keeps the launch (26.11+). An
    unreadable release counts as affected."""
    if "DeferBatch" not in config.flags("PrologFlags"):
        return None
    release = config.release
    try:
        if release and not SlurmVersion.parse(release).loses_deferred_launch:
            return None
    except ConfigError:
        pass
    return f"Slurm {release or '(release unknown)'} with PrologFlags=DeferBatch"


#: ``Key=value`` in slurm.conf: keys are case-insensitive, ``#`` starts a comment.
_CONF_LINE = re.compile(r"^\s*([A-Za-z]+)\s*=\s*(\S+)", re.MULTILINE)


def conf_value(slurm_conf: str, key: str) -> str | None:
    """The last value slurm.conf's text gives *key* (as slurmctld reads it, the last wins),
    None when it gives none."""
    text = "\n".join(line.split("#", 1)[0] for line in slurm_conf.splitlines())
    found = [v for k, v in _CONF_LINE.findall(text) if k.lower() == key.lower()]
    return found[-1] if found else None
