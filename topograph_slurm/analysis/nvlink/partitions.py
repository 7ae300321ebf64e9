"""Slurm blocks from NMX's NVLink partitions: a node's block is its partition inside its rack.

An NVL72 rack is one NVLink domain, but NMX can split it into partitions whose GPUs reach each
other only. Where a rack is split, a block per rack would promise NVLink between trays that
have none, so each partition becomes a block, and ``topology/block`` gets two levels:
``BlockSizes=<partition>,<rack>``.

Slurm aggregates blocks in file order (block i starts a level-j aggregate when i mod 2^j = 0,
``block_record.c``), so the rack level holds only when every rack takes exactly 2^k block
positions in a row. A rack split into fewer partitions than the others is padded with empty
blocks on 25.05+ (which keeps them); 24.11 rejects empty and undersized blocks, so there the
base is the smallest partition (a tray down shrinks it), and an uneven split gets the
partitions as the one level, with a finding that says the rack level is lost.

Health, as NMX reports it, is judged here: a tray not healthy, a GPU outside its tray's
partition or not healthy, a partition not healthy, each a finding ``health`` acts on.
Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ClusterShell.NodeSet import NodeSet

from topograph_slurm.analysis.fabric.block import plan_blocks, typical_size, validate_block_sizes
from topograph_slurm.analysis.nvlink.domains import (
    POLICY_INCLUDE,
    NvlinkPolicy,
    block_name,
    order_domains,
    plan_racks,
)
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import Domain
from topograph_slurm.model.names import natural_key, sanitize, unique
from topograph_slurm.model.nvlink_partition import HEALTHY, NvlinkInventory, NvlinkTray
from topograph_slurm.model.result import Block, BlockTopology, Finding, Tree
from topograph_slurm.model.slurm_version import SlurmVersion


@dataclass(slots=True)
class _Rack:
    """One NVLink domain: its nodes by partition id ("" when the rack is not split)."""

    domain: str
    groups: dict[str, list[str]]

    @property
    def nodes(self) -> list[str]:
        return sorted((n for nodes in self.groups.values() for n in nodes), key=natural_key)


def nmx_blocks(
    inventory: NvlinkInventory,
    version: SlurmVersion,
    *,
    policy: NvlinkPolicy | None = None,
    block_sizes: Sequence[int] | None = None,
    tree: Tree | None = None,
) -> BlockTopology:
    """The block topology of NMX's racks and partitions (see the module doc)."""
    policy = policy or NvlinkPolicy()
    racks, findings = _group(inventory, policy)
    ordered = order_domains(
        [Domain(r.domain, r.nodes, r.domain, 0) for r in racks.values() if r.nodes], tree
    )
    listed: dict[str, list[str]] = {}  # every tray NMX lists, down or not: stable names
    for tray in sorted(inventory.trays, key=lambda t: natural_key(t.name)):
        listed.setdefault(tray.domain, []).append(tray.name)
    taken: set[str] = set()
    named: list[tuple[str, list[Block]]] = []
    for index, domain in enumerate(ordered, start=1):
        trays = listed[domain.id]
        rack = unique(block_name(policy.name_pattern, trays, index, domain.id, 0), taken)
        groups = racks[domain.id].groups
        parts = [
            Block(
                unique(sanitize(f"{rack}-p{part}", "nvl"), taken) if len(groups) > 1 else rack,
                nodes,
            )
            for part, nodes in sorted(groups.items(), key=lambda kv: _group_key(*kv))
        ]
        named.append((rack, parts))
    findings += _partition_health(inventory, named)
    if all(len(parts) == 1 for _, parts in named):
        planned = plan_racks([parts[0] for _, parts in named], version, block_sizes)
    else:
        planned = _two_levels(named, version, block_sizes, taken)
    planned.findings = [*findings, *planned.findings]
    return planned


def _group_key(part: str, nodes: Sequence[str]) -> tuple[object, ...]:
    """Partitions in the order of their first tray (emptied ones by their number, last)."""
    return (0, natural_key(nodes[0])) if nodes else (1, natural_key(part))


def _group(
    inventory: NvlinkInventory, policy: NvlinkPolicy
) -> tuple[dict[str, _Rack], list[Finding]]:
    """Each tray into its rack and partition; trays NMX reports down, and trays whose GPUs
    are not all healthy in one partition of a split rack, left out (policy ``include``:
    kept where their GPUs agree) with a finding each."""
    split = {part.domain for part in inventory.partitions}
    racks: dict[str, _Rack] = {}
    for partition in inventory.partitions:  # every partition keeps its place, even emptied
        if partition.gpus:  # one NMX lists with no member at all holds no tray
            racks.setdefault(partition.domain, _Rack(partition.domain, {})).groups[
                partition.id
            ] = []
    findings: list[Finding] = []
    for tray in sorted(inventory.trays, key=lambda t: natural_key(t.name)):
        found = _tray_findings(tray, inventory, tray.domain in split)
        findings += found
        parts = {inventory.gpus[g].partition for g in tray.gpus if g in inventory.gpus}
        part = parts.pop() if len(parts) == 1 and tray.domain in split else ""
        if found and not (
            policy.unhealthy == POLICY_INCLUDE and (part or tray.domain not in split)
        ):
            continue
        racks.setdefault(tray.domain, _Rack(tray.domain, {})).groups.setdefault(part, []).append(
            tray.name
        )
    return racks, findings


def _where(tray: NvlinkTray) -> str:
    place = tray.place
    return f"chassis {place.chassis or '?'} slot {place.slot} tray {place.tray}"


def _tray_findings(tray: NvlinkTray, inventory: NvlinkInventory, split: bool) -> list[Finding]:
    """What NMX shows wrong with one tray: itself down, or a GPU not healthy or outside the
    one partition its other GPUs are in."""
    if tray.health != HEALTHY:
        return [
            Finding(
                FindingKind.NVLINK_TRAY_DOWN,
                tray.name,
                f"NMX reports the tray ({_where(tray)}, domain {tray.domain}) "
                f"{tray.health or 'with no health'}",
            )
        ]
    gpus = [inventory.gpus[g] for g in tray.gpus if g in inventory.gpus]
    sick = [g.id for g in gpus if g.health != HEALTHY]
    parts = sorted({g.partition for g in gpus})
    outside = split and (len(parts) != 1 or parts == [""])
    if not sick and not outside:
        return []
    said = ", ".join(f"partition {p}" if p else "no partition" for p in parts)
    why = f"GPU {', '.join(sick)} not healthy" if sick else f"its GPUs are in {said}"
    return [
        Finding(
            FindingKind.NVLINK_GPU_OUTSIDE_PARTITION,
            tray.name,
            f"NMX: {why} ({_where(tray)}); left out of the NVLink blocks",
        )
    ]


def _partition_health(
    inventory: NvlinkInventory, named: Sequence[tuple[str, Sequence[Block]]]
) -> list[Finding]:
    """A finding per partition NMX reports not healthy, naming its nodes."""
    owner = {g: t.name for t in inventory.trays for g in t.gpus}
    findings = []
    for part in inventory.partitions:
        if part.health == HEALTHY:
            continue
        nodes = sorted({owner[g] for g in part.gpus if g in owner}, key=natural_key)
        label = f"partition {part.id}" + (f" ({part.name})" if part.name else "")
        findings.append(
            Finding(
                FindingKind.NVLINK_PARTITION_DEGRADED,
                _block_of(named, nodes) or sanitize(label, "partition"),
                f"NMX reports {label} of domain {part.domain} {part.health or 'with no health'}"
                f"{f' ({NodeSet.fromlist(nodes)})' if nodes else ''}",
                nodes=tuple(nodes),
            )
        )
    return findings


def _block_of(named: Sequence[tuple[str, Sequence[Block]]], nodes: Sequence[str]) -> str:
    for _, blocks in named:
        for block in blocks:
            if nodes and nodes[0] in block.nodes:
                return block.name
    return ""


def _two_levels(
    named: Sequence[tuple[str, list[Block]]],
    version: SlurmVersion,
    block_sizes: Sequence[int] | None,
    taken: set[str],
) -> BlockTopology:
    """Partition blocks, each rack's in 2^k consecutive positions, ``BlockSizes=<partition
    size>,<rack>``; 24.11 with an uneven split: the partitions alone (see the module doc)."""
    slots = 1 << max(len(parts) - 1 for _, parts in named).bit_length()
    sizes = [len(block.nodes) for _, parts in named for block in parts]
    base = typical_size(sizes)
    even = all(len(parts) == slots for _, parts in named) and all(sizes)
    if not version.allows_small_blocks and even:
        base = min(sizes)  # 24.11 refuses a block below the base: a tray down shrinks it
    elif not version.allows_small_blocks:
        blocks = [block for _, parts in named for block in parts]
        finding = Finding(
            FindingKind.NVLINK_PARTITIONS_UNEVEN,
            "BlockSizes",
            f"racks split into {sorted({len(p) for _, p in named})} partitions"
            f"{', one emptied' if 0 in sizes else ''}: Slurm "
            f"{version.major}.{version.minor:02d} keeps no empty block, so the partitions are "
            f"one level (BlockSizes={base}); 25.05+ adds the rack level",
        )
        planned = plan_blocks(blocks, version, block_sizes or [base])
        planned.findings.insert(0, finding)
        return planned
    blocks = []
    for rack, parts in named:
        blocks += parts
        blocks += [Block(unique(f"{rack}-free", taken)) for _ in range(slots - len(parts))]
    levels = list(block_sizes) if block_sizes else [base, base * slots]
    return BlockTopology(blocks, validate_block_sizes(levels, len(blocks)))
