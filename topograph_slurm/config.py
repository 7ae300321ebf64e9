"""YAML configuration → typed settings, with errors that name the offending key.

The file mirrors the command-line flags (``--node-name-map`` is ``node_name_map:``), so a cron
job can carry its whole setup in ``/etc/topograph-slurm/config.yaml`` and a one-off run can
override any of it. Unknown keys are errors: a typo must not silently fall back to a default.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, Union

import yaml

from topograph_slurm.errors import ConfigError

DEFAULT_CONFIG = Path("/etc/topograph-slurm/config.yaml")
CONFIG_ENV = "TOPOGRAPH_SLURM_CONFIG"

T = TypeVar("T")


@dataclass(slots=True)
class RewriteRule:
    """A regex applied to HCA descriptions before the host name is taken from them."""

    pattern: str
    replace: str


@dataclass(slots=True)
class IbnetdiscoverCommand:
    """How to run the live ``ibnetdiscover`` when no dump file is given."""

    binary: str = "ibnetdiscover"
    args: list[str] = field(default_factory=list)
    timeout: float = 300.0


@dataclass(slots=True)
class Settings:
    """Everything ``generate`` needs; each key also exists as a flag."""

    ibnetdiscover: str | None = None
    ibnetdiscover_command: IbnetdiscoverCommand = field(default_factory=IbnetdiscoverCommand)
    sim: str | None = None
    ufm: str | None = None
    snapshot: str | None = None
    ufm_credentials: str | None = None
    ufm_ca_bundle: str | None = None
    ufm_insecure: bool = False
    ufm_timeout: float = 30.0
    #: Seconds for the whole UFM fetch (every endpoint, retry and backoff); see sources.ufm.
    ufm_deadline: float = 300.0
    #: Largest UFM response body accepted, per endpoint, in MiB.
    ufm_max_response_mib: int = 512
    node_name_map: str | None = None
    rewrites: list[RewriteRule] = field(default_factory=list)
    slurm_nodes: str | None = None
    hcas: str | None = None
    format: str = "tree"
    output: str | None = None
    report: str | None = None
    report_format: str = "text"
    max_tiers: int | None = None
    slurm_version: str = "24.11"
    block_sizes: list[int] | None = None
    shrink_limit: float = 0.10
    lock_timeout: float = 30.0
    templates: str | None = None
    filter_dir: str | None = None
    #: Where blocks come from: NVLink domains of a snapshot, IB scalable units, or auto.
    block_source: str = "auto"
    nvlink_unhealthy: str = "exclude"
    block_name_pattern: str = "nvl-{first}"
    #: Previous topology (or a racks list) whose block names/positions stay stable;
    #: default: the output file.
    layout: str | None = None
    yaml_default: str | None = None
    yaml_names: dict[str, str] | None = None
    #: slurm.conf partitions for --format yaml: partition name -> topology name.
    partitions: dict[str, str] | None = None
    #: Facts for the --tp-size filters (partitions, switch wait, SPANK plugin); block and leaf
    #: sizes a partition leaves out are taken from the fabric. See README "Job filters".
    filter: dict[str, Any] | None = None


def _is_optional(hint: Any) -> tuple[bool, Any]:
    """``X | None`` → (True, X)."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(args) == 1:
            return True, args[0]
    return False, hint


def _convert(value: Any, hint: Any, key: str) -> Any:
    """Check and convert one YAML value against a dataclass field's type."""
    optional, hint = _is_optional(hint)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"config key {key!r} must not be empty")
    origin = typing.get_origin(hint)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"config key {key!r} must be a list")
        (item,) = typing.get_args(hint)
        return [_convert(v, item, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"config key {key!r} must be a mapping")
        return value
    if dataclasses.is_dataclass(hint):
        return build(hint, value, key)  # type: ignore[arg-type]
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint is str and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)  # `slurm_version: 24.11` arrives as a float
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ConfigError(f"config key {key!r} must be {hint.__name__}, got {value!r}")
    return value


def build(cls: type[T], data: Any, where: str = "") -> T:
    """Build dataclass *cls* from a mapping, rejecting unknown keys and wrong types."""
    if not isinstance(data, dict):
        raise ConfigError(f"config section {where or 'top level'!r} must be a mapping")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(str(key) for key in data if key not in names)
    if unknown:
        prefix = f"{where}." if where else ""
        raise ConfigError(f"unknown config key {prefix}{unknown[0]}")
    values = {
        key: _convert(value, hints[key], f"{where}.{key}" if where else key)
        for key, value in data.items()
    }
    return cls(**values)


def config_path(explicit: str | None) -> tuple[Path, bool]:
    """The config file to read and whether the user asked for it (then it must exist)."""
    if explicit:
        return Path(explicit), True
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env), True
    return DEFAULT_CONFIG, False


def load_settings(explicit: str | None = None) -> Settings:
    """Read the config file (if any) into :class:`Settings`."""
    path, required = config_path(explicit)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise ConfigError(f"config file {path} not found") from None
        return Settings()
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {path}{where}: invalid YAML") from None
    return build(Settings, data or {})


def override(settings: Settings, **flags: Any) -> Settings:
    """Flags given on the command line (not None, not empty) win over the file."""
    given = {key: value for key, value in flags.items() if value not in (None, (), [])}
    return dataclasses.replace(settings, **given)
