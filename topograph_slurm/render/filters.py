"""Job filters for ``--tp-size``: cluster facts, rendering of the Lua/SPANK templates, SPANK build.

The rules themselves live in Lua (``templates/topograph_tp.lua.j2``) because they must run inside
``slurmctld`` (job_submit.lua) and inside sbatch/salloc/srun (cli_filter.lua). Python only
validates the cluster facts the rules need (GPUs per node, topology kind, block and leaf sizes,
target Slurm version) and renders them into the Lua as a *data table*: every name that comes from
the fabric or the config goes through :func:`lua_str`, so no Lua code is ever built from fabric
strings.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import jinja2

from topograph_slurm.errors import CollectError, ConfigError
from topograph_slurm.render.environment import environment
from topograph_slurm.slurm_version import SlurmVersion

TopologyKind = Literal["block", "tree", "flat"]
TOPOLOGY_KINDS: tuple[str, ...] = ("block", "tree", "flat")

#: Largest --tp-size the filters accept; the Lua and the SPANK plugin share this bound.
MAX_TP = 65536

#: File name -> template name, in the order a site installs them.
FILTER_TEMPLATES: dict[str, str] = {
    "topograph_tp.lua": "topograph_tp.lua.j2",
    "job_submit.lua": "job_submit.lua.j2",
    "cli_filter.lua": "cli_filter.lua.j2",
    "tpsize.c": "tpsize.c.j2",
    "plugstack.conf": "plugstack.conf.j2",
}

_PLUGIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def _positive_int(value: object, what: str) -> int:
    """Return *value* if it is a positive int (bool excluded), else raise ConfigError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must be a positive integer, got {value!r}")
    return value


def _optional_positive_int(value: object, what: str) -> int | None:
    return None if value is None else _positive_int(value, what)


@dataclass(frozen=True)
class PartitionFacts:
    """What the rules need to know about one partition.

    ``base_block`` (nodes per base block) is required for ``block`` partitions, ``leaf_size``
    (nodes under one leaf switch) for ``tree``; ``default_tp`` is the site's --tp-size for jobs
    that give none (applied only when it fits the job, never a reason to reject).
    """

    name: str
    topology: TopologyKind
    gpus_per_node: int
    base_block: int | None = None
    leaf_size: int | None = None
    max_leaves: int | None = None
    default_tp: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "," in self.name:
            raise ConfigError(
                f"partition name must be a non-empty string without ',': {self.name!r}"
            )
        if self.topology not in TOPOLOGY_KINDS:
            raise ConfigError(
                f"partition {self.name}: topology must be one of {', '.join(TOPOLOGY_KINDS)}, "
                f"got {self.topology!r}"
            )
        _positive_int(self.gpus_per_node, f"partition {self.name}: gpus_per_node")
        _optional_positive_int(self.base_block, f"partition {self.name}: base_block")
        _optional_positive_int(self.leaf_size, f"partition {self.name}: leaf_size")
        _optional_positive_int(self.max_leaves, f"partition {self.name}: max_leaves")
        if (
            self.default_tp is not None
            and _positive_int(self.default_tp, f"partition {self.name}: default_tp") > MAX_TP
        ):
            raise ConfigError(f"partition {self.name}: default_tp must be at most {MAX_TP}")
        if self.topology == "block" and self.base_block is None:
            raise ConfigError(f"partition {self.name}: a block partition needs base_block")
        if self.topology == "tree" and self.leaf_size is None:
            raise ConfigError(f"partition {self.name}: a tree partition needs leaf_size")


@dataclass(frozen=True)
class FilterFacts:
    """Everything the generated filters know about the cluster.

    ``switch_wait`` is the seconds a tree job waits for its leaf count before Slurm relaxes it;
    ``plugin_name`` is the SPANK plugin name (it appears in ``options.spank[...]`` and in the
    ``_SLURM_SPANK_OPTION_<plugin>_tp_size`` variable); ``spank_path`` is where the built
    ``.so`` is installed (for the plugstack line).
    """

    partitions: tuple[PartitionFacts, ...]
    slurm_version: SlurmVersion
    default_partition: str | None = None
    switch_wait: int = 300
    plugin_name: str = "tpsize"
    spank_path: str = "/usr/local/lib/topograph-slurm/tpsize.so"
    _by_name: dict[str, PartitionFacts] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name: dict[str, PartitionFacts] = {}
        for part in self.partitions:
            if part.name in by_name:
                raise ConfigError(f"partition {part.name} is listed twice")
            by_name[part.name] = part
        object.__setattr__(self, "_by_name", by_name)
        if self.default_partition is not None and self.default_partition not in by_name:
            raise ConfigError(f"default partition {self.default_partition!r} has no facts")
        _positive_int(self.switch_wait, "switch_wait")
        if not _PLUGIN_NAME.match(self.plugin_name):
            raise ConfigError(
                f"SPANK plugin name must be a C identifier of at most 64 chars: "
                f"{self.plugin_name!r}"
            )
        if not self.spank_path.startswith("/") or any(c.isspace() for c in self.spank_path):
            raise ConfigError(
                f"spank_path must be an absolute path without spaces: {self.spank_path!r}"
            )

    def partition(self, name: str) -> PartitionFacts:
        """The facts of partition *name* (KeyError when unknown)."""
        return self._by_name[name]

    def template_context(self) -> dict[str, Any]:
        """Plain data for the templates (sorted, so same facts give byte-identical files)."""
        parts = sorted(self.partitions, key=lambda p: p.name)
        return {
            "partitions": [vars(p) for p in parts],
            "default_partition": self.default_partition,
            "slurm_version": str(self.slurm_version),
            "can_set_segment_size": self.slurm_version.can_set_segment_size,
            "switch_wait": self.switch_wait,
            "plugin_name": self.plugin_name,
            "spank_path": self.spank_path,
            "max_tp": MAX_TP,
        }


def render_filters(facts: FilterFacts, env: jinja2.Environment | None = None) -> dict[str, str]:
    """Render every filter file; returns file name -> content.

    job_submit.lua and cli_filter.lua inline the rules module, because Slurm reloads them only
    when their own mtime changes; ``topograph_tp.lua`` is the same module for sites that call it
    from their own job_submit.lua.
    """
    env = env or environment()
    context = facts.template_context()
    return {
        name: env.get_template(template).render(context)
        for name, template in FILTER_TEMPLATES.items()
    }


def _find_spank_header(include_dir: Path | None) -> Path | None:
    """Where ``slurm/spank.h`` is, if anywhere the compiler will look."""
    candidates = [include_dir] if include_dir else []
    candidates += [Path("/usr/include"), Path("/usr/local/include")]
    cpath = os.environ.get("CPATH", "")
    candidates += [Path(p) for p in cpath.split(os.pathsep) if p]
    for base in candidates:
        if (base / "slurm" / "spank.h").is_file():
            return base
    return None


def spank_compile_command(
    compiler: str, source: Path, output: Path, include_dir: Path | None = None
) -> list[str]:
    """The compiler command line that builds the SPANK plugin.

    One definition, so the integration tests compile the plugin inside a Slurm container with
    exactly the flags ``spank build`` uses (the container has no Python to run the CLI).
    """
    cmd = [compiler, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(output), str(source)]
    if include_dir is not None:
        cmd[1:1] = ["-I", str(include_dir)]
    return cmd


def build_spank(
    source: Path,
    outdir: Path,
    *,
    cc: str = "cc",
    include_dir: Path | None = None,
    timeout: float = 120.0,
) -> Path:
    """Compile the SPANK plugin *source* into ``outdir/<stem>.so`` and return its path.

    The ``.so`` is built under a temporary name and renamed, so a failed build never leaves a
    half-written plugin where slurmd/sbatch would load it. Raises CollectError when the compiler
    or ``slurm/spank.h`` is missing or compilation fails.
    """
    compiler = shutil.which(cc)
    if compiler is None:
        raise CollectError(
            f"C compiler {cc!r} not found: install gcc (Debian: apt-get install gcc)"
        )
    if not source.is_file():
        raise CollectError(f"SPANK source {source} does not exist: run generate --filter-dir first")
    header_base = _find_spank_header(include_dir)
    if include_dir is not None and header_base != include_dir:
        raise CollectError(f"slurm/spank.h not found under {include_dir}")
    outdir.mkdir(parents=True, exist_ok=True)
    target = outdir / f"{source.stem}.so"
    fd, tmp_name = tempfile.mkstemp(prefix=f".{source.stem}.", suffix=".so", dir=outdir)
    os.close(fd)
    cmd = spank_compile_command(compiler, source, Path(tmp_name), include_dir)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise CollectError(_compile_error(proc.stderr, header_base is None))
        os.chmod(tmp_name, 0o755)
        os.replace(tmp_name, target)
    except subprocess.TimeoutExpired as exc:
        raise CollectError(f"compiling {source} timed out after {timeout:.0f}s") from exc
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return target


def _compile_error(stderr: str, header_missing: bool) -> str:
    """One line that says what to do, not a page of compiler output."""
    if header_missing or "spank.h" in stderr:
        return (
            "slurm/spank.h not found: install the Slurm development headers "
            "(Debian/Ubuntu: libslurm-dev, RPM: slurm-devel) or pass include_dir"
        )
    first = next((line for line in stderr.splitlines() if "error" in line), stderr.strip())
    return f"compiling the SPANK plugin failed: {first}"


def facts_from_mapping(data: Mapping[str, Any]) -> FilterFacts:
    """Build FilterFacts from plain config data (``partitions`` as a name -> facts mapping)."""
    known = {
        "partitions",
        "slurm_version",
        "default_partition",
        "switch_wait",
        "plugin_name",
        "spank_path",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"unknown filter keys: {', '.join(unknown)}")
    raw_parts = data.get("partitions")
    if not isinstance(raw_parts, Mapping) or not raw_parts:
        raise ConfigError("filter facts need a non-empty 'partitions' mapping")
    parts = tuple(_partition_from_mapping(str(name), spec) for name, spec in raw_parts.items())
    extra = {
        k: data[k]
        for k in ("default_partition", "switch_wait", "plugin_name", "spank_path")
        if k in data
    }
    return FilterFacts(
        partitions=parts,
        slurm_version=SlurmVersion.parse(str(data.get("slurm_version", ""))),
        **extra,
    )


def filter_facts(
    config: Mapping[str, Any], measured: Mapping[str, int], slurm_version: str
) -> FilterFacts:
    """FilterFacts from the config's ``filter`` section, completed from the fabric.

    A block partition without ``base_block`` gets the measured base block size, a tree
    partition without ``leaf_size`` the typical number of nodes under one leaf, so the filters
    always match the topology generated in the same run; ``slurm_version`` defaults to the
    one topology is generated for.
    """
    data = dict(config)
    data.setdefault("slurm_version", slurm_version)
    parts = data.get("partitions")
    if isinstance(parts, Mapping):
        data["partitions"] = {name: _with_measured(spec, measured) for name, spec in parts.items()}
    return facts_from_mapping(data)


def _with_measured(spec: object, measured: Mapping[str, int]) -> object:
    """*spec* with the measured size for its topology kind filled in when missing."""
    if not isinstance(spec, Mapping):
        return spec
    key = {"block": "base_block", "tree": "leaf_size"}.get(str(spec.get("topology")))
    if key is None or key in spec:
        return spec
    return {**spec, key: measured[str(spec["topology"])]}


def _partition_from_mapping(name: str, spec: object) -> PartitionFacts:
    if not isinstance(spec, Mapping):
        raise ConfigError(f"partition {name}: expected a mapping, got {spec!r}")
    allowed = {"topology", "gpus_per_node", "base_block", "leaf_size", "max_leaves", "default_tp"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ConfigError(f"partition {name}: unknown keys: {', '.join(map(str, unknown))}")
    topology = spec.get("topology")
    if topology not in TOPOLOGY_KINDS:
        raise ConfigError(f"partition {name}: topology must be one of {', '.join(TOPOLOGY_KINDS)}")
    return PartitionFacts(
        name=name,
        topology=cast(TopologyKind, topology),
        gpus_per_node=spec.get("gpus_per_node"),  # type: ignore[arg-type]  # validated
        base_block=spec.get("base_block"),
        leaf_size=spec.get("leaf_size"),
        max_leaves=spec.get("max_leaves"),
        default_tp=spec.get("default_tp"),
    )
