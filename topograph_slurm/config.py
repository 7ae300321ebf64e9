"""YAML configuration → typed settings, with errors that name the offending key.

The file mirrors the command-line flags (``--node-name-map`` is ``node_name_map:``), so a cron
job can carry its whole setup in ``/etc/topograph-slurm/config.yaml`` and a one-off run can
override any of it. Unknown keys are errors: a typo must not silently fall back to a default.

Types are checked when the file is read; the rules on values (choices, ranges, regexes, Slurm
names) are declared once, on the :class:`Settings` fields, and checked on the merged settings
by :func:`override`, so a bad value is refused by the same rule whether it came from the file
(exit 5, naming the key) or from a flag (exit 2, naming the flag).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import string
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, Union

import yaml

from topograph_slurm.errors import ConfigError, TopographError, UsageError
from topograph_slurm.model import names
from topograph_slurm.model.result import PLUGIN_BLOCK, PLUGIN_TREE, TOPOLOGY_PLUGINS
from topograph_slurm.model.slurm_version import SlurmVersion

DEFAULT_CONFIG = Path("/etc/topograph-slurm/config.yaml")
CONFIG_ENV = "TOPOGRAPH_SLURM_CONFIG"

FORMATS = (PLUGIN_TREE, PLUGIN_BLOCK, "yaml")
REPORT_FORMATS = ("text", "json")
BLOCK_SOURCES = ("auto", "nvlink", "ib")
NVLINK_UNHEALTHY = ("exclude", "include")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Rule:
    """What a setting's value must be, beyond its type. ``check`` raises ValueError (or a
    TopographError) with the reason; ``flag`` is the option's name when it is not the key's."""

    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    above_low: bool = False  # low itself is not allowed
    integer: bool = False
    check: Callable[[Any], object] | None = None
    flag: str = ""
    #: the value may be written as a YAML number (``slurm_version: 24.11``): its text is kept
    number_as_text: bool = False

    def problem(self, value: Any) -> str | None:
        """Why *value* breaks the rule, or None."""
        if self.choices and value not in self.choices:
            return f"must be one of {', '.join(self.choices)}, got {value!r}"
        if (self.low is not None or self.high is not None) and not self._in_range(value):
            return f"must be {self.range_text()}, got {value!r}"
        if self.check is not None:
            try:
                self.check(value)
            except (ValueError, TopographError) as err:
                return str(err)
        return None

    def _in_range(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):  # an int may be too big for one
            return False
        if self.low is not None and (value < self.low or (self.above_low and value == self.low)):
            return False
        return self.high is None or value <= self.high

    def range_text(self) -> str:
        """``an integer >= 1``, ``a number from 0 to 1``, ``a number > 0``."""
        kind = "an integer" if self.integer else "a number"
        if self.low is not None and self.high is not None:
            return f"{kind} from {self.low:g} to {self.high:g}"
        return f"{kind} {'>' if self.above_low else '>='} {self.low:g}"


def _rule(**kwargs: Any) -> dict[str, Rule]:
    """Field metadata holding a :class:`Rule`."""
    return {"rule": Rule(**kwargs)}


def _path(value: str) -> None:
    if not value or "\0" in value:
        raise ValueError(f"must be a file name, got {value!r}")


def _directory(value: str) -> None:
    _path(value)
    if not os.path.isdir(value):
        raise ValueError(f"must be a directory, got {value!r}")


def output_path(value: str) -> None:
    """A file to write, never a directory's name (``/etc/slurm/``, ``/``, ``.``): generate would
    write beside the directory or fail on it every run. ``-`` is stdout. Every command's
    ``-o``/``--out`` takes this rule (``cli.options.OUTPUT_FILE``)."""
    _path(value)
    if value != "-" and os.path.basename(value) in ("", ".", ".."):
        raise ValueError(f"must name a file, not a directory, got {value!r}")


def _regex(value: str) -> None:
    try:
        re.compile(value)
    except re.error as err:
        raise ValueError(f"invalid regex {value!r}: {err}") from None


def _partitions(mapping: Mapping[str, str]) -> None:
    names.check(mapping, "partition")
    names.check(mapping.values(), "topology")


def _yaml_names(mapping: Mapping[str, str]) -> None:
    for kind in mapping:
        if kind not in TOPOLOGY_PLUGINS:
            raise ValueError(f"keys must be {', '.join(TOPOLOGY_PLUGINS)}, got {kind!r}")
    names.check(mapping.values(), "topology")


#: ``slurm_nodes`` / ``slurm_version`` asked of Slurm itself (see pipeline.slurm_node_list);
#: ``slurm_nodes: all`` takes every host of the fabric without asking.
AUTO, ALL = "auto", "all"


def _hostlist(value: str) -> None:
    if value not in ("scontrol", AUTO, ALL):
        names.parse(value)


def _version(value: str) -> None:
    if value != AUTO:
        SlurmVersion.parse(value)


def _rewrites(rules: list[RewriteRule]) -> None:
    from topograph_slurm.analysis.fabric.naming import compile_rewrites

    compile_rewrites((rule.pattern, rule.replace) for rule in rules)


def _block_name_pattern(value: str) -> None:
    from topograph_slurm.analysis.nvlink.domains import NvlinkPolicy

    for _, _, spec, _ in string.Formatter().parse(value):
        if spec and _WIDE.search(spec):  # '{first:>999999999}' would build a 1 GB name
            raise ValueError(f"field width in {value!r} too large (names have 64 characters)")
    NvlinkPolicy(name_pattern=value)


_WIDE = re.compile(r"\d{3,}")


def _block_sizes(sizes: list[int]) -> None:
    if not sizes or any(size < 1 for size in sizes):
        raise ValueError(f"must be positive integers, got {sizes}")


def metrics_path(value: str) -> None:
    """A file node_exporter's textfile collector reads: a file name (:func:`output_path`)
    ending in ``.prom``; every ``--metrics`` takes this rule."""
    output_path(value)
    if not value.endswith(".prom"):  # node_exporter's textfile collector reads *.prom only
        raise ValueError(f"must end in .prom (node_exporter reads only those), got {value!r}")


_FEATURE_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}\Z")


def _feature_prefix(value: str) -> None:
    if not _FEATURE_PREFIX.match(value):
        raise ValueError(
            f"must be a letter, then up to 31 letters, digits or _ (a Slurm feature's start), "
            f"got {value!r}"
        )


def _refusals(values: list[str]) -> None:
    if not values:  # the default: nothing to check, the record model stays unimported
        return
    from topograph_slurm.model.record import REFUSALS

    unknown = [value for value in values if value not in REFUSALS]
    if unknown:
        raise ValueError(f"must name {', '.join(REFUSALS)}, got {unknown[0]!r}")


def _duration(value: str) -> None:
    from topograph_slurm.analysis.state.keep_missing import parse_duration

    parse_duration(value)


PATH = _rule(check=_path)
TIMEOUT = _rule(low=0, above_low=True)


@dataclass(slots=True)
class RewriteRule:
    """A regex applied to HCA descriptions before the host name is taken from them."""

    pattern: str
    replace: str


@dataclass(slots=True)
class IbnetdiscoverCommand:
    """How to run the live ``ibnetdiscover`` when no dump file is given."""

    binary: str = field(default="ibnetdiscover", metadata=PATH)
    args: list[str] = field(default_factory=list)
    timeout: float = field(default=300.0, metadata=TIMEOUT)


@dataclass(slots=True)
class Settings:
    """Everything ``generate`` needs; each key also exists as a flag."""

    ibnetdiscover: str | None = field(default=None, metadata=PATH)
    ibnetdiscover_command: IbnetdiscoverCommand = field(default_factory=IbnetdiscoverCommand)
    sim: str | None = None
    ufm: str | None = None
    snapshot: str | None = field(default=None, metadata=PATH)
    ufm_credentials: str | None = field(default=None, metadata=PATH)
    ufm_ca_bundle: str | None = field(default=None, metadata=PATH)
    ufm_insecure: bool = False
    ufm_timeout: float = field(default=30.0, metadata=TIMEOUT)
    #: Seconds for the whole UFM fetch (every endpoint, retry and backoff); see sources.ufm.
    ufm_deadline: float = field(default=300.0, metadata=TIMEOUT)
    #: Largest UFM response body accepted, per endpoint, in MiB.
    ufm_max_response_mib: int = field(default=512, metadata=_rule(low=1, integer=True))
    #: NetQ (Ethernet/RoCE): its URL, credentials file and TLS; UFM's timeouts and size cap
    netq: str | None = None
    netq_credentials: str | None = field(default=None, metadata=PATH)
    netq_ca_bundle: str | None = field(default=None, metadata=PATH)
    netq_insecure: bool = False
    #: NMX (NVLink racks and partitions, read only): its URL, credentials file and TLS
    nmx: str | None = None
    nmx_credentials: str | None = field(default=None, metadata=PATH)
    nmx_ca_bundle: str | None = field(default=None, metadata=PATH)
    nmx_insecure: bool = False
    node_name_map: str | None = field(default=None, metadata=PATH)
    rewrites: list[RewriteRule] = field(
        default_factory=list, metadata=_rule(check=_rewrites, flag="--rewrite")
    )
    slurm_nodes: str | None = field(default=AUTO, metadata=_rule(check=_hostlist))
    hcas: str | None = field(default=None, metadata=_rule(check=_regex))
    format: str = field(default="tree", metadata=_rule(choices=FORMATS))
    output: str | None = field(default=None, metadata=_rule(check=output_path))
    report: str | None = field(default=None, metadata=_rule(check=output_path))
    report_format: str = field(default="text", metadata=_rule(choices=REPORT_FORMATS))
    max_tiers: int | None = field(default=None, metadata=_rule(low=1, integer=True))
    slurm_version: str = field(default=AUTO, metadata=_rule(check=_version, number_as_text=True))
    block_sizes: list[int] | None = field(default=None, metadata=_rule(check=_block_sizes))
    shrink_limit: float = field(default=0.10, metadata=_rule(low=0, high=1))
    lock_timeout: float = field(default=30.0, metadata=_rule(low=0))
    templates: str | None = field(default=None, metadata=PATH)
    filter_dir: str | None = field(default=None, metadata=PATH)
    #: Where blocks come from: NVLink domains of a snapshot, IB scalable units, or auto.
    block_source: str = field(default="auto", metadata=_rule(choices=BLOCK_SOURCES))
    nvlink_unhealthy: str = field(default="exclude", metadata=_rule(choices=NVLINK_UNHEALTHY))
    block_name_pattern: str = field(
        default="nvl-{first}", metadata=_rule(check=_block_name_pattern)
    )
    #: Previous topology (or a racks list) whose block names/positions stay stable;
    #: default: the output file.
    layout: str | None = field(default=None, metadata=PATH)
    yaml_default: str | None = field(
        default=None, metadata=_rule(check=lambda name: names.check([name], "topology"))
    )
    yaml_names: dict[str, str] | None = field(default=None, metadata=_rule(check=_yaml_names))
    #: slurm.conf partitions for --format yaml: partition name -> topology name.
    partitions: dict[str, str] | None = field(default=None, metadata=_rule(check=_partitions))
    #: Facts for the --tp-size filters (partitions, switch wait, SPANK plugin); block and leaf
    #: sizes a partition leaves out are taken from the fabric. See README "Job filters".
    filter: dict[str, Any] | None = None
    #: After a changed write of -o: scontrol reconfigure, check, restore on refusal.
    reconfigure: bool = False
    #: --reconfigure on Slurm up to 26.05 with PrologFlags=DeferBatch: how long it waits for
    #: jobs in their prolog before it gives up (the previous file restored; exit 12).
    reconfigure_wait: str = field(
        default="10m", metadata=_rule(check=_duration, number_as_text=True)
    )
    #: The scontrol that reconfigures and is asked for nodes and version, and its timeout.
    scontrol: str = field(default="scontrol", metadata=PATH)
    scontrol_timeout: float = field(default=120.0, metadata=TIMEOUT)
    #: The slurmctld log a refused reconfigure's reason is read from (default: scontrol show
    #: config's SlurmctldLogFile).
    slurmctld_log: str | None = field(default=None, metadata=PATH)
    #: A saved Slurm state (``slurm save DIR``) that answers every scontrol read instead of
    #: slurmctld; a change is refused (docs/slurm-state.md).
    slurm_state: str | None = field(default=None, metadata=_rule(check=_directory))
    #: Prometheus textfile-collector metrics of the run (node_exporter), written atomically.
    metrics: str | None = field(default=None, metadata=_rule(check=metrics_path))
    #: health: the prefix of every feature it sets (others are an admin's and stay as they are)
    health_feature_prefix: str = field(
        default="topo_", metadata=_rule(check=_feature_prefix, flag="--feature-prefix")
    )
    #: health: added to a degraded or drain-worthy node's own Weight (allocated last)
    health_weight: int = field(
        default=1000,
        metadata=_rule(low=1, high=1_000_000_000, integer=True, flag="--degraded-weight"),
    )
    #: health: drain drain-worthy nodes (false: only weight and label them)
    health_drain: bool = True
    #: occupancy --apply: added to the Weight of every node of a whole free unit, so small
    #: jobs fill partly used units first; below health_weight (a degraded node stays last)
    occupancy_keep_weight: int = field(
        default=100,
        metadata=_rule(low=1, high=1_000_000_000, integer=True, flag="--keep-weight"),
    )

    #: How long a node Slurm still lists but the sweep missed keeps its last place (``7d``,
    #: ``36h``, ``0`` = off); see topology.keep_missing and README "Nodes that are off".
    keep_missing: str = field(default="7d", metadata=_rule(check=_duration, number_as_text=True))
    #: Where generate keeps its state (the fabric summary, the lock) for each -o target; empty:
    #: /var/lib/topograph-slurm as root, else $XDG_STATE_HOME/topograph-slurm (see state_dir()).
    state_dir: str | None = field(default=None, metadata=PATH)
    #: Where `record start` writes job-<JOBID>.json and the node side its job-<JOBID>.d/:
    #: one path on every host, whoever runs the hook (default /var/lib/topograph-slurm/records;
    #: see record_dir() and docs/record.md).
    record_dir: str | None = field(default=None, metadata=PATH)
    #: Records readable only by the job's user (and root and SlurmUser), as PrivateData=jobs
    #: hides other users' jobs: modes 0600/0700 and a POSIX ACL for the job's uid.
    record_private: bool = False
    #: record start's gate: what refuses a job (tp-crossing: TP groups cross their home).
    record_refuse: list[str] = field(
        default_factory=list, metadata=_rule(check=_refusals, flag="--refuse")
    )
    #: A bench record (bench.json or a snapshot) whose level medians go into job records.
    record_bench: str | None = field(default=None, metadata=_rule(check=_path, flag="--bench"))
    #: health --job-records: how far back the node-end parts it reads were written.
    job_records_since: str = field(
        default="24h", metadata=_rule(check=_duration, number_as_text=True)
    )
    #: The InfiniBand sysfs tree the node parts of the record read (``--sysfs``).
    infiniband_sysfs: str = field(
        default="/sys/class/infiniband", metadata=_rule(check=_path, flag="--sysfs")
    )
    #: This node's ``nvidia-smi topo -m`` capture, for the TaskProlog's binding check.
    record_topo_matrix: str | None = field(
        default=None, metadata=_rule(check=_path, flag="--topo-matrix")
    )


#: root's state directory (the FHS place for a daemon's state; systemd's StateDirectory=).
ROOT_STATE_DIR = Path("/var/lib/topograph-slurm")


#: The job records' one default place: the same for root (Prolog, Epilog), SlurmUser
#: (PrologSlurmctld) and the job's user (TaskProlog), so the hooks' pieces meet.
DEFAULT_RECORD_DIR = ROOT_STATE_DIR / "records"


def record_dir(settings: Settings) -> Path:
    """Where the job records live: ``record_dir`` when set, else /var/lib/topograph-slurm/records
    whoever runs the hook (a site sets it to a file system the controller and the nodes
    share). Never per user: the hooks run as three different users and must meet."""
    return Path(settings.record_dir) if settings.record_dir else DEFAULT_RECORD_DIR


def state_dir(settings: Settings) -> Path:
    """Where generate's state lives: ``state_dir`` when set; as root /var/lib/topograph-slurm,
    else ``$XDG_STATE_HOME/topograph-slurm`` (``~/.local/state`` when unset or relative, as
    the XDG base directory rule says). Never beside the target: /etc/slurm is copied to every
    node, and state there is copied with it."""
    if settings.state_dir:
        return Path(settings.state_dir)
    if os.geteuid() == 0:
        return ROOT_STATE_DIR
    xdg = os.environ.get("XDG_STATE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return base / "topograph-slurm"


def choices_metavar(key: str) -> str:
    """``[tree|block|yaml]``: a flag's metavar from the choices its setting allows."""
    rule = next(f for f in dataclasses.fields(Settings) if f.name == key).metadata["rule"]
    return f"[{'|'.join(rule.choices)}]"


class _FloatText(float):
    """A YAML float that remembers how it was written (``25.10`` is not ``25.1``)."""

    text: str


def _float_with_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> _FloatText:
    number = _FloatText(loader.construct_yaml_float(node))
    number.text = str(node.value)
    return number


class _Loader(yaml.SafeLoader):
    """safe_load, keeping each float's text for keys that are text written like numbers."""


_Loader.add_constructor("tag:yaml.org,2002:float", _float_with_text)


def _is_optional(hint: Any) -> tuple[bool, Any]:
    """``X | None`` → (True, X)."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(args) == 1:
            return True, args[0]
    return False, hint


_FLOAT_MAX = 2.0**1023  # an int above it has no float (400 digits would be OverflowError)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _convert_dict(value: Any, hint: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"config key {key!r} must be a mapping")
    _, item = typing.get_args(hint)
    for name, entry in value.items():
        if not isinstance(name, str):
            raise ConfigError(f"config key {key!r}: keys must be text, got {name!r}")
        if item is str and not isinstance(entry, str):
            raise ConfigError(f"config key {key}.{name} must be str, got {entry!r}")
    return value


def _convert(value: Any, hint: Any, key: str, rule: Rule | None = None) -> Any:
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
        return _convert_dict(value, hint, key)
    if dataclasses.is_dataclass(hint):
        return build(hint, value, key)  # type: ignore[arg-type]
    if hint is float and _number(value) and abs(value) < _FLOAT_MAX:
        return float(value)
    if hint is str and _number(value) and rule is not None and rule.number_as_text:
        return value.text if isinstance(value, _FloatText) else str(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ConfigError(f"config key {key!r} must be {hint.__name__}, got {value!r}")
    return value


def build(cls: type[T], data: Any, where: str = "") -> T:
    """Build dataclass *cls* from a mapping, rejecting unknown keys and wrong types."""
    if not isinstance(data, dict):
        raise ConfigError(f"config section {where or 'top level'!r} must be a mapping")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(str(key) for key in data if key not in fields)
    if unknown:
        prefix = f"{where}." if where else ""
        raise ConfigError(f"unknown config key {prefix}{unknown[0]}")
    missing = [name for name, spec in fields.items() if name not in data and _required(spec)]
    if missing:
        prefix = f"{where}." if where else ""
        raise ConfigError(f"config key {prefix}{missing[0]} is missing")
    values = {
        key: _convert(
            value, hints[key], f"{where}.{key}" if where else key, fields[key].metadata.get("rule")
        )
        for key, value in data.items()
    }
    return cls(**values)


def _required(spec: dataclasses.Field[Any]) -> bool:
    """Whether a section's key has no default (a rewrite's ``pattern`` and ``replace``)."""
    no_factory = spec.default_factory is dataclasses.MISSING
    return spec.default is dataclasses.MISSING and no_factory


def config_path(explicit: str | None) -> tuple[Path, bool]:
    """The config file to read and whether the user asked for it (then it must exist)."""
    if explicit:
        return Path(explicit), True
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env), True
    return DEFAULT_CONFIG, False


def _read(path: Path, required: bool) -> str | None:
    """The config file's text; None when an optional one is absent."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise ConfigError(f"config file {path} not found") from None
        return None
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"config file {path}: not UTF-8 text (byte {err.object[err.start]:#04x} at "
            f"offset {err.start})"
        ) from None
    except ValueError:  # a NUL byte in the path
        raise ConfigError(f"config file {str(path)!r}: invalid path") from None


def load_settings(explicit: str | None = None) -> Settings:
    """Read the config file (if any) into :class:`Settings`; values are checked against
    their rules by :func:`override`, once the flags are merged in."""
    path, required = config_path(explicit)
    text = _read(path, required)
    if text is None:
        return Settings()
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {path}{where}: invalid YAML") from None
    except RecursionError:
        raise ConfigError(f"config file {path}: invalid YAML (nested too deeply)") from None
    except ValueError as err:  # a number of more than 4300 digits
        raise ConfigError(f"config file {path}: invalid YAML ({err})") from None
    try:
        return build(Settings, data or {})
    except RecursionError:  # an anchor that contains itself
        raise ConfigError(f"config file {path}: a value refers to itself") from None


def validate(settings: Any, flags: Collection[str] = (), where: str = "") -> None:
    """Check every field of *settings* against its :class:`Rule`. A value from a flag in
    *flags* is a usage error naming the flag; any other is a config error naming the key."""
    for spec in dataclasses.fields(settings):
        value = getattr(settings, spec.name)
        key = f"{where}.{spec.name}" if where else spec.name
        if dataclasses.is_dataclass(value):
            validate(value, (), key)
            continue
        rule = spec.metadata.get("rule")
        problem = rule.problem(value) if isinstance(rule, Rule) and value is not None else None
        if rule is None or problem is None:
            continue
        if spec.name in flags and not where:
            flag = rule.flag or "--" + spec.name.replace("_", "-")
            raise UsageError(f"{flag}: {problem}")
        raise ConfigError(f"config key {key!r}: {problem}")


def override(settings: Settings, **flags: Any) -> Settings:
    """Flags given on the command line (not None, not empty) win over the file; the merged
    settings are then checked (:func:`validate`)."""
    given = {key: value for key, value in flags.items() if value not in (None, (), [])}
    merged = dataclasses.replace(settings, **given)
    validate(merged, given)
    return merged
