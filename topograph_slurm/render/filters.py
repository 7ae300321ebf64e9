"""Job filters for ``--tp-size`` / ``--pp-size``: cluster facts and rendering of the templates.

The rules themselves live in plain Lua (``templates/topograph_tp.lua``) because they must run
inside ``slurmctld`` (job_submit.lua) and inside sbatch/salloc/srun (cli_filter.lua). Python only
validates the cluster facts the rules need (GPUs per node, topology kind, block and leaf sizes,
target Slurm version) and renders them as a *data table* (``templates/topograph_facts.lua.j2``)
that is put in front of the rules: every name that comes from the fabric or the config goes
through :func:`lua_str`, so no Lua code is ever built from fabric strings, and the rules are
never run through Jinja, so luacheck reads them as they ship. Building the SPANK plugin is I/O
and lives in :mod:`topograph_slurm.slurm.spank`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import jinja2

from topograph_slurm.errors import ConfigError
from topograph_slurm.model.result import PLUGIN_BLOCK, PLUGIN_TREE, TOPOLOGY_PLUGINS
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.render.environment import environment, render

TopologyKind = Literal["block", "tree", "flat"]

#: Largest --tp-size (and --pp-size) the filters accept; the Lua and the SPANK plugin share
#: this bound.
MAX_TP = 65536

#: The rules module, shipped as it is generated: the rendered facts, then this static file.
MODULE = "topograph_tp.lua"
FACTS_TEMPLATE = "topograph_facts.lua.j2"

#: The files rendered around the module (the Lua ones inline it): name -> template, in the
#: order a site installs them.
FILTER_TEMPLATES: dict[str, str] = {
    "job_submit.lua": "job_submit.lua.j2",
    "cli_filter.lua": "cli_filter.lua.j2",
    "tpsize.c": "tpsize.c.j2",
    "plugstack.conf": "plugstack.conf.j2",
}

#: Every file ``generate --filter-dir`` writes.
FILTER_FILES: tuple[str, ...] = (MODULE, *FILTER_TEMPLATES)


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
        if self.topology not in TOPOLOGY_PLUGINS:
            raise ConfigError(
                f"partition {self.name}: topology must be one of {', '.join(TOPOLOGY_PLUGINS)}, "
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
        if self.topology == PLUGIN_BLOCK and self.base_block is None:
            raise ConfigError(f"partition {self.name}: a block partition needs base_block")
        if self.topology == PLUGIN_TREE and self.leaf_size is None:
            raise ConfigError(f"partition {self.name}: a tree partition needs leaf_size")


@dataclass(frozen=True)
class FilterFacts:
    """Everything the generated filters know about the cluster.

    ``switch_wait`` is the seconds a tree job waits for its leaf count before Slurm relaxes it;
    ``plugin_name`` is the SPANK plugin name (it appears in ``options.spank[...]`` and in the
    ``_SLURM_SPANK_OPTION_<plugin>_tp_size`` / ``_pp_size`` variables); ``spank_path`` is where
    the built ``.so`` is installed (for the plugstack line).
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


def render_module(env: jinja2.Environment, context: Mapping[str, Any]) -> str:
    """The rules module: the facts template rendered, then the rules file exactly as it is.

    The rules are looked up like any template (a site's ``--templates DIR`` first) but never
    rendered, so they stay plain Lua: a ``{{`` in them is Lua, not Jinja.
    """
    try:
        rules = env.loader.get_source(env, MODULE)[0] if env.loader else None
    except jinja2.TemplateNotFound:
        rules = None
    if rules is None:
        raise ConfigError(f"template {MODULE} not found")
    return render(env, FACTS_TEMPLATE, **context) + rules


def render_filters(facts: FilterFacts, env: jinja2.Environment | None = None) -> dict[str, str]:
    """Render every filter file; returns file name -> content.

    job_submit.lua and cli_filter.lua inline the rules module, because Slurm reloads them only
    when their own mtime changes; ``topograph_tp.lua`` is the same module for sites that call it
    from their own job_submit.lua.
    """
    env = env or environment()
    context = facts.template_context()
    context["module"] = render_module(env, context)
    files = {MODULE: context["module"]}
    files.update(
        (name, render(env, template, **context)) for name, template in FILTER_TEMPLATES.items()
    )
    return files


def render_plugstack_line(env: jinja2.Environment, spank_path: str) -> str:
    """The plugstack.conf entry for a plugin installed at *spank_path*, for ``spank build`` to
    print: plugstack.conf.j2 rendered as ``generate --filter-dir`` does, without its comments."""
    text = render(env, FILTER_TEMPLATES["plugstack.conf"], spank_path=spank_path)
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))


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
    config: Mapping[str, Any],
    measured: Mapping[str, int],
    slurm_version: str,
    gpus_per_node: int = 0,
) -> tuple[FilterFacts, list[str]]:
    """FilterFacts from the config's ``filter`` section, completed from what was measured, and
    the partitions that took the measured *gpus_per_node*.

    A block partition without ``base_block`` gets the measured base block size, a tree
    partition without ``leaf_size`` the typical number of nodes under one leaf, so the filters
    always match the topology generated in the same run; ``slurm_version`` defaults to the
    one topology is generated for. A partition without ``gpus_per_node`` gets *gpus_per_node*
    when one was measured (0: none was, and the config must say).
    """
    data = dict(config)
    data.setdefault("slurm_version", slurm_version)
    filled: list[str] = []
    parts = data.get("partitions")
    if isinstance(parts, Mapping):
        data["partitions"] = {
            name: _with_measured(spec, measured, gpus_per_node) for name, spec in parts.items()
        }
        filled = [
            str(name)
            for name, spec in parts.items()
            if gpus_per_node and isinstance(spec, Mapping) and "gpus_per_node" not in spec
        ]
    return facts_from_mapping(data), filled


def _with_measured(spec: object, measured: Mapping[str, int], gpus_per_node: int) -> object:
    """*spec* with the measured size for its topology kind and the measured GPUs per node
    filled in where missing (a GPU count of 0 means none was measured)."""
    if not isinstance(spec, Mapping):
        return spec
    filled = dict(spec)
    key = {PLUGIN_BLOCK: "base_block", PLUGIN_TREE: "leaf_size"}.get(str(spec.get("topology")))
    if key is not None and key not in spec:
        filled[key] = measured[str(spec["topology"])]
    if gpus_per_node and "gpus_per_node" not in spec:
        filled["gpus_per_node"] = gpus_per_node
    return filled


def _partition_from_mapping(name: str, spec: object) -> PartitionFacts:
    if not isinstance(spec, Mapping):
        raise ConfigError(f"partition {name}: expected a mapping, got {spec!r}")
    allowed = {"topology", "gpus_per_node", "base_block", "leaf_size", "max_leaves", "default_tp"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ConfigError(f"partition {name}: unknown keys: {', '.join(map(str, unknown))}")
    topology = spec.get("topology")
    if topology not in TOPOLOGY_PLUGINS:
        raise ConfigError(
            f"partition {name}: topology must be one of {', '.join(TOPOLOGY_PLUGINS)}"
        )
    return PartitionFacts(
        name=name,
        topology=cast(TopologyKind, topology),
        gpus_per_node=spec.get("gpus_per_node"),  # type: ignore[arg-type]  # validated
        base_block=spec.get("base_block"),
        leaf_size=spec.get("leaf_size"),
        max_leaves=spec.get("max_leaves"),
        default_tp=spec.get("default_tp"),
    )
