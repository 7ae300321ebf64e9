"""The analysed result: what the analysis decides and every template renders."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from topograph_slurm.model.fabric import Fabric
from topograph_slurm.model.names import natural_key

#: The topology plugins Slurm knows, as topology.yaml and the CLI name them.
PLUGIN_TREE, PLUGIN_BLOCK, PLUGIN_FLAT = "tree", "block", "flat"
TOPOLOGY_PLUGINS: tuple[str, ...] = (PLUGIN_TREE, PLUGIN_BLOCK, PLUGIN_FLAT)

#: Finding levels: a problem an admin should act on (alerting pages on it), or information
#: about a healthy but notable configuration (the report shows it, alerting does not page).
LEVEL_PROBLEM, LEVEL_INFO = "problem", "info"


@dataclass(frozen=True, slots=True)
class Exclusion:
    """A channel adapter that did not become a Slurm node, and why.

    ``leaf`` names the switch it hangs off (or is empty), so an admin can walk to the cable.
    """

    guid: str
    description: str
    leaf: str
    reason: str


@dataclass(frozen=True, slots=True)
class Finding:
    """A health or consistency observation about the fabric that does not stop generation:
    a degraded link, a node whose rails disagree, a GPU whose NVLink fabric is not ready.

    ``subject`` is what it is about (a node name, a switch name, ``guid/port``); ``kind`` is a
    stable machine-readable key for reports and alerting, a member of the catalogue
    (``model/findings.py``: ``FindingKind``) when this release makes it; ``level`` is
    ``LEVEL_PROBLEM`` or ``LEVEL_INFO``, the kind's own unless given (a kind the catalogue does
    not know, read from another release's record, is a problem). ``nodes`` names the Slurm
    nodes it affects when the subject is not one node (the nodes behind a degraded leaf uplink,
    the partners of a slow benchmark pair): ``health`` turns findings into per-node verdicts
    from the subject when it is a node, else from these.
    """

    kind: str
    subject: str
    message: str
    level: str = ""
    nodes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.level:  # a catalogue kind knows its level (model/findings.py)
            object.__setattr__(self, "level", getattr(self.kind, "level", LEVEL_PROBLEM))

    @property
    def is_problem(self) -> bool:
        """False for information (a single-node NVSwitch system, a base size explained)."""
        return self.level != LEVEL_INFO


def decode_finding(entry: Mapping[str, Any]) -> Finding:
    """A finding as a record (``bench.json``, a job record's part) holds it, of any release:
    its kind passed on as written. KeyError/TypeError/AttributeError when it is malformed."""
    return Finding(
        str(entry["kind"]),
        str(entry["subject"]),
        str(entry["message"]),
        str(entry["level"]),
        tuple(str(node) for node in entry["nodes"]),
    )


@dataclass(slots=True)
class LeafGroup:
    """One logical leaf: the physical leaf switches (GUIDs) and the Slurm nodes under them."""

    name: str
    switches: list[str]
    nodes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TreeSwitch:
    """A logical switch above the leaves: member ASICs (GUIDs, empty when synthetic) and the
    names of its children one level down."""

    name: str
    level: int
    switches: list[str]
    children: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Tree:
    """Leaves, upper switches (by level, then name) and the top switch of every island."""

    leaves: list[LeafGroup]
    uppers: list[TreeSwitch]
    tops: list[str]

    @property
    def depth(self) -> int:
        """Number of switch levels, leaves included."""
        return 1 + max((switch.level for switch in self.uppers), default=0)


@dataclass(slots=True)
class Block:
    """One block: a Slurm-safe name and its nodes (empty for a placeholder that keeps order)."""

    name: str
    nodes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class BlockTopology:
    """Blocks in file order and the ``BlockSizes`` levels (base first)."""

    blocks: list[Block]
    block_sizes: list[int]
    findings: list[Finding] = field(default_factory=list)


@dataclass(slots=True)
class NamedTopology:
    """One entry of topology.yaml: a tree, a block topology, or flat (neither)."""

    name: str
    tree: Tree | None = None
    blocks: BlockTopology | None = None

    @property
    def kind(self) -> str:
        """``tree``, ``block`` or ``flat``."""
        if self.tree is not None:
            return PLUGIN_TREE
        return PLUGIN_BLOCK if self.blocks is not None else PLUGIN_FLAT

    @property
    def nodes(self) -> list[str]:
        """Nodes this topology places (empty for flat, which means all nodes)."""
        if self.tree is not None:
            found = {node for leaf in self.tree.leaves for node in leaf.nodes}
        elif self.blocks is not None:
            found = {node for block in self.blocks.blocks for node in block.nodes}
        else:
            found = set()
        return sorted(found, key=natural_key)

    @property
    def node_count(self) -> int:
        return len(self.nodes)


@dataclass(slots=True)
class MadeWith:
    """What a topology file was made with beyond the fabric: the Slurm release and whether
    Slurm's node list kept other hosts out (its header names both, see :data:`EVERY_HOST`),
    and, for this run only, where each came from. A ``--check`` on another host (a CI runner
    without Slurm) differs by these, and says so. The header's values are deterministic and
    the same whether asked of Slurm or pinned by flags (no origin, count, error text or time),
    so an unchanged run writes the same bytes and a pinned check matches the controller's."""

    release: str = ""
    nodes: str = ""
    release_from: str = ""
    nodes_from: str = ""


#: :attr:`MadeWith.nodes` when no node list kept hosts out; else :data:`SLURM_NODES`.
EVERY_HOST, SLURM_NODES = "every host", "Slurm's nodes"


@dataclass(slots=True)
class Partition:
    """A ``PartitionName=… Nodes=… Topology=…`` line; empty ``nodes`` means ``ALL``."""

    name: str
    topology: str
    nodes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class HostAttachments:
    """Result of naming: each Slurm node with its HCAs' leaf switches, plus every exclusion.

    ``rails[node]`` lists ``(hca guid, leaf switch guid)`` in HCA order; a node with eight
    rails has eight entries, normally on eight different leaves.
    """

    rails: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    exclusions: list[Exclusion] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        """Node names in sorted order."""
        return sorted(self.rails)


@dataclass(frozen=True, slots=True)
class UnnamedHca:
    """An excluded HCA that sits where a missing node's cabling says that node's HCA goes:
    ``name`` is the description it probably should carry (``<node> <hca>``)."""

    guid: str
    name: str
    leaf: str
    port: int


@dataclass(frozen=True, slots=True)
class UnnamedNode:
    """A Slurm node missing from the fabric whose HCAs are probably there, unnamed: the
    neighbours whose port numbers placed it, and each HCA found at that position."""

    node: str
    neighbours: tuple[str, ...]
    hcas: tuple[UnnamedHca, ...]


@dataclass(slots=True)
class Analysis:
    """The fabric as Slurm will see it, plus what did not make it in."""

    fabric: Fabric
    switch_names: dict[str, str]
    hosts: HostAttachments
    tree: Tree
    findings: list[Finding] = field(default_factory=list)
    missing_nodes: list[str] = field(default_factory=list)
    #: missing nodes whose HCAs are probably on the fabric without a host name
    unnamed: list[UnnamedNode] = field(default_factory=list)

    @property
    def exclusions(self) -> list[Exclusion]:
        return self.hosts.exclusions

    @property
    def node_count(self) -> int:
        return len(self.hosts.rails)


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between two fabric summaries (or bench records): ``kind`` is a stable key
    (``node-moved``, ``link-degraded``, …; see :mod:`topograph_slurm.analysis.state.drift` and
    :mod:`~topograph_slurm.analysis.bench.drift`), ``subject`` the node,
    cable, switch or block it is about, ``message`` what it was and what it is."""

    kind: str
    subject: str
    message: str


@dataclass(slots=True)
class Drift:
    """What changed from ``old`` to ``new`` (input names), in a stable order, and each
    comparison the inputs could not support with the reason (``links: … holds no rates``)."""

    old: str
    new: str
    changes: list[Change] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)
    #: per benchmark level, the medians of both bench records (``diff`` of two recorded sweeps)
    bench_levels: list[LevelDelta] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.changes)


@dataclass(frozen=True, slots=True)
class LevelDelta:
    """One benchmark level in two recorded sweeps: the median busbw (GB/s) of each (None when
    that sweep has none), the change as a fraction of the old, and whether it moved beyond the
    threshold (a change) or not."""

    level: str
    before: float | None
    after: float | None
    change: float | None
    changed: bool
