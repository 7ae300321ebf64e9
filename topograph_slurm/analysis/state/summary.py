"""A fabric summary from an analysed fabric or from a topology file (see
:mod:`topograph_slurm.model.summary`): the one shape ``diff`` compares and ``generate`` keeps.

An analysed fabric shows everything: each node's logical leaf, block, NVLink domain, the rails
it is cabled with and their rates, switch names, blocks and BlockSizes, and the cables between
switches that run below the fabric's norm. A topology file shows only what Slurm is told:
nodes under leaves and/or in blocks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from itertools import compress

from topograph_slurm.analysis.fabric.block import typical_size
from topograph_slurm.analysis.fabric.degraded_links import is_below, rate_norm
from topograph_slurm.model.fabric import Fabric
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.result import Analysis, Block, BlockTopology, NamedTopology
from topograph_slurm.model.summary import (
    ALL_FACTS,
    FACT_BLOCKS,
    FACT_DOMAINS,
    FACT_LEAVES,
    FACT_NODES,
    FabricSummary,
    NodeSummary,
    RailSummary,
)


def summarize(
    analysis: Analysis,
    blocks: BlockTopology | None,
    seen_at: str,
    domains: Mapping[str, str] | None = None,
) -> FabricSummary:
    """Everything an analysed fabric shows, every node last seen at *seen_at*. *domains* maps
    a node to its NVLink domain when a snapshot had GPU fabric data (else no domain facts)."""
    fabric, names = analysis.fabric, analysis.switch_names
    hcas = {hca for rails in analysis.hosts.rails.values() for hca, _ in rails}
    cables = _hca_cables(fabric, hcas)
    disagree = {f.subject for f in analysis.findings if f.kind == FindingKind.RAIL_DISAGREEMENT}
    leaf_of = {node: leaf.name for leaf in analysis.tree.leaves for node in leaf.nodes}
    block_of = _block_of(blocks)
    nodes = {}
    for node in sorted(analysis.hosts.rails, key=natural_key):
        rails = [
            RailSummary(_hca_name(fabric, hca), names.get(leaf, leaf), *cables.get(hca, (0, "")))
            for hca, leaf in analysis.hosts.rails[node]
        ]
        nodes[node] = NodeSummary(
            leaf=leaf_of.get(node, ""),
            block=block_of.get(node, ""),
            domain=(domains or {}).get(node, ""),
            rails=rails,  # in HCA order, as naming attached them
            rails_disagree=node in disagree,
            last_seen=seen_at,
        )
    norm, slow = _slow_switch_links(fabric, names)
    lacking = {FACT_DOMAINS} if not domains else set()
    lacking |= {FACT_BLOCKS} if blocks is None else set()
    known = [fact for fact in ALL_FACTS if fact not in lacking]
    return FabricSummary(
        source=fabric.source,
        known=known,
        nodes=nodes,
        switches=sorted(set(names.values()), key=natural_key),
        blocks=_block_summaries(blocks),
        block_sizes=list(blocks.block_sizes) if blocks else [],
        slow_links=slow,
        link_norm=norm,
    )


def from_topology(topology: NamedTopology, source: str) -> FabricSummary:
    """What a topology file (or ``scontrol show topology``) shows: nodes under leaves and/or
    in blocks, the blocks and BlockSizes; no rails, rates, switches or domains."""
    known = [FACT_NODES]
    leaf_of: dict[str, str] = {}
    if topology.tree is not None:
        known.append(FACT_LEAVES)
        leaf_of = {node: leaf.name for leaf in topology.tree.leaves for node in leaf.nodes}
    block_of = _block_of(topology.blocks)
    if topology.blocks is not None:
        known.append(FACT_BLOCKS)
    placed = sorted(leaf_of.keys() | block_of.keys(), key=natural_key)
    return FabricSummary(
        source=source,
        known=known,
        nodes={n: NodeSummary(leaf=leaf_of.get(n, ""), block=block_of.get(n, "")) for n in placed},
        blocks=_block_summaries(topology.blocks),
        block_sizes=list(topology.blocks.block_sizes) if topology.blocks else [],
    )


def designed_unit(summary: FabricSummary) -> int:
    """The InfiniBand unit size *summary* shows: the most common node count of its logical
    leaves, kept nodes counted (what a unit held before a node went off); 0 when it knows
    no leaves (a block-only topology file)."""
    counts = Counter(node.leaf for node in summary.nodes.values() if node.leaf)
    return typical_size(counts.values())


def _block_of(blocks: BlockTopology | None) -> dict[str, str]:
    return {node: block.name for block in blocks.blocks for node in block.nodes} if blocks else {}


def _block_summaries(blocks: BlockTopology | None) -> list[Block]:
    if blocks is None:
        return []
    return [Block(b.name, list(b.nodes)) for b in blocks.blocks]


def _hca_name(fabric: Fabric, guid: str) -> str:
    """The HCA's name in its description (``mlx5_0`` of ``gpu0001 mlx5_0``), else its GUID."""
    ca = fabric.cas.get(guid)
    words = ca.description.split() if ca else []
    return words[1] if len(words) > 1 else guid


def _hca_cables(fabric: Fabric, hcas: set[str]) -> dict[str, tuple[int, str]]:
    """Each node HCA's switch port and rate (``4xNDR``). The HCA ends are found a column at a
    time, so only the rows of node cables are unpacked (a fabric has as many switch cables)."""
    links = fabric.links
    on_a = list(map(hcas.__contains__, links.a))
    touching = [x or y for x, y in zip(on_a, map(hcas.__contains__, links.b), strict=True)]
    out: dict[str, tuple[int, str]] = {}
    rows = compress(zip(on_a, *links.columns(), strict=True), touching)
    for a_is_hca, a, a_port, b, b_port, width, speed in rows:
        hca, port = (a, b_port) if a_is_hca else (b, a_port)
        out[hca] = (port, width + speed)
    return out


def _slow_switch_links(fabric: Fabric, names: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The fabric's norm rate and every switch-to-switch cable below it, by a label made of
    both ends' switch names and ports (smaller end first, so it reads the same every run)."""
    links = fabric.links
    rates = Counter(zip(links.width, links.speed, strict=True))
    norm = rate_norm(rates)
    if norm is None:
        return "", {}
    slow_rates = {rate for rate in rates if is_below(rate, norm)}
    slow: dict[str, str] = {}
    if slow_rates:
        for a, a_port, b, b_port, width, speed in zip(*links.columns(), strict=True):
            if (width, speed) in slow_rates and a in names and b in names:
                ends = sorted([f"{names[a]}/{a_port}", f"{names[b]}/{b_port}"], key=natural_key)
                slow[" <-> ".join(ends)] = width + speed
    return "".join(norm), dict(sorted(slow.items(), key=lambda item: natural_key(item[0])))
