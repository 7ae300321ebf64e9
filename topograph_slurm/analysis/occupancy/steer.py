"""Keep whole units free: ``occupancy --apply``'s node Weights (issue 40).

Slurm allocates the lowest Weight first, and both topology plugins pick their unit by it
before anything else:

- topology/block, ``eval_nodes_block()`` (src/plugins/topology/block/eval_nodes_block.c, the
  same on 24.11 and 26.05): "Select the block: 1) with lowest weight nodes 2) with lowest
  sufficient count of nodes - to minimize fragmentation"; a block's weight is the lowest of
  its free nodes' (``list_find_first(node_weight_list, eval_nodes_topo_node_find, ...)`` over
  the list sorted by weight). The second rule counts a block's nodes the job could use, and a
  node a small job holds part of still counts: on its own Slurm does not see a block half
  used by shared jobs as partly used.
- topology/tree, ``_eval_nodes_topo()`` (src/plugins/topology/tree/eval_nodes_tree.c): the
  top switch is the one whose lowest-weight node is lowest (``nw->weight <=
  top_switch_lowest_weight``), and "Add lowest weight nodes. Treat similar to required nodes"
  takes the lowest-weight nodes first.

So the rule: every node of a **whole free unit** (the TP home level, as ``occupancy``
counts it: every node up and no job holding any part of it) gets ``weight`` added to its
own; every other node carries its own Weight. Small and CPU-only jobs then fill the partly
used units, and a whole free unit stays whole for the job that needs one. Once every unit is
partly used (or every one free), all carry the same offset and Slurm's own order decides.

Remembered as health remembers its offset (analysis/health/proposal.py): the node carries
``<prefix>keep`` exactly while the offset is in effect, both are set in one ``scontrol
update`` and both fall back to slurm.conf together on a reconfigure, so a node's own Weight
is its current one minus the offset with the mark, its current one without. Health's offset
adds on top (each command takes off only its own), so with ``weight`` below health's the
rule is: **admin's Weight + keep offset + health offset**, and a degraded node stays last
(config refuses a keep offset not below health's). ``reset`` takes every offset off. Pure
functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from topograph_slurm.analysis.health.proposal import KEEP_FEATURE, MAX_WEIGHT, relabel
from topograph_slurm.analysis.occupancy.units import unit_level
from topograph_slurm.analysis.placement.span import unit_of
from topograph_slurm.model.health import UNKNOWN, NodeChange, SlurmNode, Verdict
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.occupancy import NodeGpus
from topograph_slurm.model.placement import LEVEL_FABRIC, FabricMap


@dataclass(frozen=True, slots=True)
class KeepPolicy:
    """The feature prefix (health's) and the Weight added to the nodes of a whole free unit."""

    prefix: str = "topo_"
    weight: int = 100

    @property
    def mark(self) -> str:
        return self.prefix + KEEP_FEATURE


def whole_free_units(fmap: FabricMap, nodes: Sequence[NodeGpus]) -> set[str]:
    """The units (at the TP home level) whose every node is up and held by no job; none on a
    flat topology, where the one unit is the whole fabric."""
    level = unit_level(fmap)
    if level == LEVEL_FABRIC:
        return set()
    used: set[str] = set()
    seen: set[str] = set()
    for node in nodes:
        if node.name not in fmap.places:
            continue
        unit = unit_of(fmap, node.name, level)
        seen.add(unit)
        if node.down or node.allocated:
            used.add(unit)
    return seen - used


def keep_changes(
    fmap: FabricMap,
    nodes: Sequence[NodeGpus],
    current: Iterable[SlurmNode],
    policy: KeepPolicy,
    *,
    reset: bool = False,
) -> list[NodeChange]:
    """One change per Slurm node, in name order (empty where Slurm holds its value already):
    the keep offset and mark on the nodes of whole free units, off everywhere else (off on
    every node with *reset*)."""
    keep = set() if reset else whole_free_units(fmap, nodes)
    level = unit_level(fmap)
    kept = {node.name for node in nodes if unit_of(fmap, node.name, level) in keep}
    return [
        _change(node, node.name in kept, policy)
        for node in sorted(current, key=lambda slurm: natural_key(slurm.name))
    ]


def own_weight(node: SlurmNode, policy: KeepPolicy) -> int:
    """The node's Weight without our offset (an admin's, plus health's if it set one)."""
    own = node.weight - policy.weight if policy.mark in node.features else node.weight
    return own if own >= 1 else node.weight  # an admin set it below our offset: start anew


def _change(node: SlurmNode, keep: bool, policy: KeepPolicy) -> NodeChange:
    own = own_weight(node, policy)
    weight = min(own + policy.weight, MAX_WEIGHT) if keep else own
    ours = (policy.mark,) if keep else ()
    features, active = relabel(node, ours, lambda feature: feature == policy.mark)
    return NodeChange(
        node.name,
        Verdict(node.name, UNKNOWN),
        node,
        weight=weight if weight != node.weight else None,
        features=features,
        active_features=active,
    )
