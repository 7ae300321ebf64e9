"""topology.yaml (Slurm 25.05+): several named topologies in one file, and the partition lines
that pick them.

One cluster often wants more than one placement model: the IB switch tree for CPU and
small-GPU partitions, NVLink blocks for the GB200 partition, and a flat topology for a debug
partition that must never pend on placement. topology.yaml holds them all; slurm.conf
partitions choose one with ``Topology=<name>``; the one with ``cluster_default: true`` serves
partitions without ``Topology=`` and slurmctld's own traffic.

Schema (Slurm's topology.yaml(5), data_parser): a list of mappings, ``topology`` first, then
``cluster_default`` and exactly one of ``tree: {switches: [{switch, nodes | children}]}``,
``block: {block_sizes: [int…], blocks: [{block, nodes?}]}`` or ``flat: true``. Slurm skips
invalid ``block_sizes`` silently and checks neither disjoint blocks nor unique names
strictly, so :func:`check_topologies` does, before the template renders anything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import jinja2

from topograph_slurm.analysis.fabric.block import validate_block_sizes
from topograph_slurm.errors import ConfigError
from topograph_slurm.model import names as slurm_names
from topograph_slurm.model.result import (
    PLUGIN_BLOCK,
    PLUGIN_FLAT,
    PLUGIN_TREE,
    BlockTopology,
    MadeWith,
    NamedTopology,
    Partition,
    Tree,
)
from topograph_slurm.model.slurm_version import YAML_READ_BLOCK, SlurmVersion, yaml_needs_padding
from topograph_slurm.render.environment import render

TEMPLATE = "topology.yaml.j2"
PARTITIONS_TEMPLATE = "slurm.conf.partitions.j2"

#: Topology names ``generate --format yaml`` uses unless configured otherwise.
DEFAULT_NAMES: dict[str, str] = {PLUGIN_TREE: "ib", PLUGIN_BLOCK: "nvl", PLUGIN_FLAT: "flat"}


def _check_name(name: str, what: str) -> None:
    slurm_names.check([name], what, error=ConfigError)


def check_names(tree: Tree | None, blocks: BlockTopology | None, where: str = "") -> None:
    """Every switch, block and node name about to be rendered passes the one Slurm name rule,
    and none repeats.

    Sources and readers check the names they bring (the layout reader its block names, the
    naming its hosts and switches); this is the last check before any template, topology.conf
    or topology.yaml, so a name from a source nobody checked still cannot inject a line. Slurm
    checks neither that names are unique nor that leaves and blocks are disjoint: two leaves
    or blocks of one name would each claim the nodes of one, and a node listed twice sits
    wherever slurmctld last read it, so either is refused here rather than written."""
    found: list[tuple[str, list[str]]] = []
    prefix = f"{where}: " if where else ""
    if tree is not None:
        switches = [leaf.name for leaf in tree.leaves] + [s.name for s in tree.uppers]
        found += [("switch", switches), ("node", [n for leaf in tree.leaves for n in leaf.nodes])]
        _check_unique(switches, "switch", prefix)
        _check_disjoint([(leaf.name, leaf.nodes) for leaf in tree.leaves], "leaves", prefix)
    if blocks is not None:
        block_names = [block.name for block in blocks.blocks]
        found += [("block", block_names), ("node", [n for b in blocks.blocks for n in b.nodes])]
        _check_unique(block_names, "block", prefix)
        _check_disjoint([(block.name, block.nodes) for block in blocks.blocks], "blocks", prefix)
    for what, listed in found:
        slurm_names.check(listed, what, where, ConfigError)


def _check_unique(listed: list[str], what: str, prefix: str) -> None:
    repeated = next((name for name, n in Counter(listed).items() if n > 1), None)
    if repeated is not None:
        raise ConfigError(f"{prefix}duplicate {what} name {repeated!r}")


def _check_disjoint(groups: list[tuple[str, list[str]]], what: str, prefix: str) -> None:
    """No node in two of *groups* (leaves or blocks); the usual case in one set pass."""
    nodes = [node for _, members in groups for node in members]
    if len(set(nodes)) == len(nodes):
        return
    seen: dict[str, str] = {}
    for name, members in groups:
        for node in members:
            if node in seen:
                raise ConfigError(
                    f"{prefix}node {node} is in {what} {seen[node]} and {name}; Slurm does not "
                    f"check that {what} are disjoint"
                )
            seen[node] = name


def _check_tree(topo: NamedTopology, tree: Tree) -> None:
    if not tree.leaves:
        raise ConfigError(f"topology {topo.name!r}: the tree has no leaf switch")


def _check_blocks(topo: NamedTopology, blocks: BlockTopology) -> None:
    nonempty = [block for block in blocks.blocks if block.nodes]
    if not nonempty:
        raise ConfigError(f"topology {topo.name!r}: no block has nodes")
    validate_block_sizes(blocks.block_sizes, len(nonempty))


def check_topologies(
    topologies: Sequence[NamedTopology], default: str, version: SlurmVersion | None = None
) -> None:
    """Refuse what Slurm would misread: duplicate or unsafe names, a default that is not
    defined, invalid block_sizes, overlapping blocks, or a release without topology.yaml."""
    if version is not None and not version.has_topology_yaml:
        raise ConfigError(
            f"topology.yaml needs Slurm 25.05 or later (target is {version.major}."
            f"{version.minor:02d}); use --format tree or block"
        )
    if not topologies:
        raise ConfigError("topology.yaml needs at least one topology")
    names = [topo.name for topo in topologies]
    for name in names:
        _check_name(name, "topology")
    if len(set(names)) != len(names):
        raise ConfigError(f"duplicate topology names in {', '.join(names)}")
    if default not in names:
        raise ConfigError(f"default topology {default!r} is not one of {', '.join(names)}")
    for topo in topologies:
        if topo.tree is not None and topo.blocks is not None:
            raise ConfigError(f"topology {topo.name!r} cannot be both a tree and blocks")
        check_names(topo.tree, topo.blocks, f"topology {topo.name!r}")
        if topo.tree is not None:
            _check_tree(topo, topo.tree)
        elif topo.blocks is not None:
            _check_blocks(topo, topo.blocks)


def render_topology_yaml(
    env: jinja2.Environment,
    topologies: Sequence[NamedTopology],
    default: str,
    version: SlurmVersion | None = None,
    made: MadeWith | None = None,
) -> str:
    """topology.yaml text (its header naming what it was *made* with), checked first (see
    :func:`check_topologies`); rendered again with
    the template's padding comment when its size would kill the target's slurmctld
    (:func:`~topograph_slurm.model.slurm_version.yaml_needs_padding`)."""
    check_topologies(topologies, default, version)
    context = {"topologies": list(topologies), "default": default, "made": made}
    text = render(env, TEMPLATE, **context, pad=False)
    if not yaml_needs_padding(len(text.encode("utf-8")), version):
        return text
    padded = render(env, TEMPLATE, **context, pad=True)
    if yaml_needs_padding(len(padded.encode("utf-8")), version):  # a --templates override
        raise ConfigError(
            f"{TEMPLATE} renders a multiple of {YAML_READ_BLOCK} bytes even with its padding "
            f"line (`pad`), which slurmctld {version or 'of an unknown release'} reads past "
            "the end of: keep the built-in template's padding line in the override"
        )
    return padded


def default_partitions(topologies: Sequence[NamedTopology]) -> list[Partition]:
    """One partition per topology, named after it, over the nodes it places (flat: ALL)."""
    return [Partition(topo.name, topo.name, topo.nodes) for topo in topologies]


def partitions_from_map(
    mapping: Mapping[str, str], topologies: Sequence[NamedTopology]
) -> list[Partition]:
    """Partitions from a ``partition: topology`` mapping (config key ``partitions``)."""
    by_name = {topo.name: topo for topo in topologies}
    out = []
    for partition, topology in mapping.items():
        _check_name(partition, "partition")
        if topology not in by_name:
            raise ConfigError(
                f"partition {partition!r} uses unknown topology {topology!r} "
                f"(defined: {', '.join(by_name)})"
            )
        out.append(Partition(partition, topology, by_name[topology].nodes))
    return out


def render_partition_lines(
    env: jinja2.Environment, partitions: Sequence[Partition], default: str
) -> str:
    """The ``PartitionName=… Topology=…`` lines to merge into slurm.conf."""
    for part in partitions:
        _check_name(part.name, "partition")
        _check_name(part.topology, "topology")
    return render(env, PARTITIONS_TEMPLATE, partitions=list(partitions), default=default)
