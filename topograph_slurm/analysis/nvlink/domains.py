"""Slurm blocks from NVLink domains: one block per GB200/GB300 NVL72 rack (multi-node clique).

Tensor parallelism must stay inside an NVLink domain, so on NVL72 systems the rack, not the IB
leaf, is the block. This module turns per-node NVLink verdicts (``topology/clique.py``) into an
ordered, named list of blocks and hands it to ``topology/block.py`` for BlockSizes and the
per-release rules. Pure functions: the previous layout comes in as blocks, read by
``sources/layout.py``.

Decisions a sysadmin should know about:

* **Unhealthy nodes.** A node whose GPUs disagree, report N/A, are not ``Completed`` or are
  unhealthy is a finding. Policy ``exclude`` (default) leaves it out of every block, so Slurm
  never promises NVLink bandwidth it cannot deliver. Policy ``include`` puts it into the rack
  its GPUs name (when they agree on one) and still reports it — for sites that drain such nodes
  by other means and want the topology file to stay stable.
* **Order.** Slurm aggregates blocks in file order, so neighbours must be physical neighbours.
  With an InfiniBand tree, domains are ordered by where their nodes sit in the tree's
  depth-first leaf order (racks under one spine group side by side); without one, by the
  natural order of their first node (``gb2`` before ``gb10``).
* **Names and positions stay put across runs.** Give a *layout* — the block list of the
  topology file written last time (topology.conf or topology.yaml), or a hand-written racks
  file (``- block: rack01`` / ``nodes: gb[001-018]``). Each current domain takes the name and
  position of the layout block it shares most nodes with. A rack that disappeared (powered off,
  fabric manager down) keeps its position as an EMPTY block on Slurm 25.05+, so the blocks
  after it do not shift and every 2ⁿ-block aggregate still pairs the same racks. Slurm 24.11
  rejects empty and undersized blocks: there the rack is left out and reported, and the
  report says that later blocks shift. New racks are appended after the layout.
* **Names** come from a pattern over the domain's node names (default ``nvl-{first}``); see
  :func:`block_name`. Everything is sanitised to hostlist-safe characters, since Slurm feeds
  block names through its hostlist parser when it names aggregated blocks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ClusterShell.NodeSet import NodeSet

from topograph_slurm.analysis.fabric.block import (
    adjacency_order,
    infer_block_sizes,
    plan_blocks,
    typical_base,
    validate_block_sizes,
)
from topograph_slurm.analysis.nvlink.clique import domain_results, group_domains
from topograph_slurm.errors import ConfigError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import ZERO_UUID, Domain, DomainKind, DomainResult, GpuFabric
from topograph_slurm.model.names import natural_key, sanitize, unique
from topograph_slurm.model.result import Block, BlockTopology, Finding, Tree
from topograph_slurm.model.slurm_version import SlurmVersion

POLICY_EXCLUDE = "exclude"
POLICY_INCLUDE = "include"
POLICIES = (POLICY_EXCLUDE, POLICY_INCLUDE)
DEFAULT_NAME_PATTERN = "nvl-{first}"


@dataclass(frozen=True, slots=True)
class NvlinkPolicy:
    """How domains become blocks; each field has a config key and a flag."""

    unhealthy: str = POLICY_EXCLUDE
    name_pattern: str = DEFAULT_NAME_PATTERN

    def __post_init__(self) -> None:
        if self.unhealthy not in POLICIES:
            raise ConfigError(
                f"unhealthy-node policy must be one of {', '.join(POLICIES)}, "
                f"got {self.unhealthy!r}"
            )
        block_name(self.name_pattern, ["node1"], 1, "0" * 8 + "-x", 0)  # fail early


# --------------------------------------------------------------------------- domains


def _included(per_node: Mapping[str, DomainResult]) -> dict[str, list[str]]:
    """Invalid nodes whose GPUs still agree on one multi-node domain, by domain id."""
    out: dict[str, list[str]] = {}
    for node in sorted(per_node, key=natural_key):
        result = per_node[node]
        if (
            result.kind is DomainKind.INVALID
            and result.cluster_uuid
            and result.cluster_uuid != ZERO_UUID
            and result.clique_id is not None
        ):
            out.setdefault(f"{result.cluster_uuid}.{result.clique_id}", []).append(node)
    return out


def collect_domains(
    per_node: Mapping[str, DomainResult], policy: NvlinkPolicy | None = None
) -> tuple[list[Domain], list[Finding]]:
    """Domains with their nodes (natural order) and every per-node finding.

    Under policy ``include``, nodes with findings whose GPUs agree on a domain join it, with
    an extra finding saying so; otherwise they stay out (their findings say why).
    """
    policy = policy or NvlinkPolicy()
    grouped, findings = group_domains(per_node)
    members = {domain: list(nodes) for domain, nodes in grouped.items()}
    if policy.unhealthy == POLICY_INCLUDE:
        for domain, nodes in _included(per_node).items():
            members.setdefault(domain, []).extend(nodes)
            findings += [
                Finding(
                    FindingKind.NVLINK_INCLUDED_WITH_FINDINGS,
                    node,
                    f"kept in NVLink domain {domain} despite the findings above "
                    "(unhealthy-node policy 'include')",
                )
                for node in nodes
            ]
    domains = []
    for domain_id in sorted(members):
        uuid, _, clique = domain_id.rpartition(".")
        nodes = sorted(set(members[domain_id]), key=natural_key)
        domains.append(Domain(domain_id, nodes, uuid, int(clique) if clique.isdigit() else 0))
    findings.sort(key=lambda f: (natural_key(f.subject), f.kind))
    return domains, findings


def order_domains(domains: Sequence[Domain], tree: Tree | None = None) -> list[Domain]:
    """Physical-adjacency order: by depth-first IB leaf position when a tree is known (racks
    under one spine group side by side), else by the natural order of the first node."""
    position: dict[str, int] = {}
    if tree is not None:
        leaf_nodes = {leaf.name: leaf.nodes for leaf in tree.leaves}
        for index, leaf in enumerate(adjacency_order(tree)):
            for node in leaf_nodes.get(leaf, ()):
                position.setdefault(node, index)
    unplaced = len(position) + 1

    def key(domain: Domain) -> tuple[int, tuple[tuple[str | int, ...], str]]:
        rank = min((position.get(node, unplaced) for node in domain.nodes), default=unplaced)
        return rank, natural_key(domain.nodes[0] if domain.nodes else domain.id)

    return sorted(domains, key=key)


# --------------------------------------------------------------------------- names


def _common_prefix(nodes: Sequence[str]) -> str:
    """Longest common character prefix (``gb200-r01-n01``, ``gb200-r01-n18`` → ``gb200-r01-n``);
    node names are not paths, so this is deliberately character-wise."""
    prefix = nodes[0] if nodes else ""
    for node in nodes[1:]:
        while not node.startswith(prefix):
            prefix = prefix[:-1]
    return prefix.rstrip("-_.") or "nvl"


def block_name(
    pattern: str, nodes: Sequence[str], index: int, cluster_uuid: str, clique_id: int
) -> str:
    """Render a block-name pattern for one domain, sanitised.

    Fields: ``{first}``/``{last}`` node, ``{prefix}`` (common prefix of the node names),
    ``{index}`` (1-based position; ``{index:02d}`` pads), ``{clique}``, ``{uuid8}`` (first 8
    characters of the ClusterUUID). Example: ``rack-{index:02d}``, ``{prefix}-nvl``.
    """
    values: dict[str, Any] = {
        "first": nodes[0] if nodes else "",
        "last": nodes[-1] if nodes else "",
        "prefix": _common_prefix(nodes),
        "index": index,
        "clique": clique_id,
        "uuid8": cluster_uuid[:8],
    }
    try:
        raw = pattern.format_map(values)
    except (KeyError, IndexError, ValueError, AttributeError) as err:
        raise ConfigError(f"invalid block name pattern {pattern!r}: {err}") from None
    return sanitize(raw, "nvl")


# --------------------------------------------------------------------------- placement


@dataclass(slots=True)
class _Placement:
    """Domains matched to layout positions, and the domains that matched none."""

    slots: list[tuple[Block, Domain | None]]
    extra: list[Domain]
    findings: list[Finding] = field(default_factory=list)


def _match_layout(domains: Sequence[Domain], layout: Sequence[Block]) -> _Placement:
    """Each domain takes the layout block it shares most nodes with (earliest on ties); when
    two domains want one block, the larger overlap wins and the other is new."""
    where = {node: i for i, block in enumerate(layout) for node in block.nodes}
    best: dict[int, tuple[int, Domain]] = {}
    extra: list[Domain] = []
    findings: list[Finding] = []
    for domain in domains:
        counts: dict[int, int] = {}
        for node in domain.nodes:
            if node in where:
                counts[where[node]] = counts.get(where[node], 0) + 1
        if not counts:
            extra.append(domain)
            continue
        slot = min(counts, key=lambda i: (-counts[i], i))
        held = best.get(slot)
        if held is None or counts[slot] > held[0]:
            if held is not None:
                extra.append(held[1])
                findings.append(_split(layout[slot].name, held[1]))
            best[slot] = (counts[slot], domain)
        else:
            extra.append(domain)
            findings.append(_split(layout[slot].name, domain))
    slots = [(block, best[i][1] if i in best else None) for i, block in enumerate(layout)]
    return _Placement(slots, extra, findings)


def _split(name: str, domain: Domain) -> Finding:
    return Finding(
        FindingKind.NVLINK_RACK_SPLIT,
        name,
        f"nodes of block {name} are now in more than one NVLink domain; "
        f"{NodeSet.fromlist(domain.nodes)} (domain {domain.id}) becomes a new block",
    )


def _missing(block: Block, version: SlurmVersion) -> Finding:
    was = f" (was {NodeSet.fromlist(block.nodes)})" if block.nodes else ""
    if version.allows_small_blocks:
        what = "kept as an empty block so the blocks after it keep their positions"
    else:
        what = (
            f"left out: Slurm {version.major}.{version.minor:02d} rejects empty blocks, so "
            "the blocks after it shift by one (25.05+ keeps the position)"
        )
    return Finding(
        FindingKind.NVLINK_RACK_MISSING, block.name, f"no NVLink domain found{was}; {what}"
    )


def place_blocks(
    domains: Sequence[Domain],
    version: SlurmVersion,
    *,
    layout: Sequence[Block] = (),
    name_pattern: str = DEFAULT_NAME_PATTERN,
) -> tuple[list[Block], list[Finding]]:
    """Blocks in file order: layout positions first (empty where a rack is missing, on
    25.05+), then domains the layout does not know, in the order given."""
    placement = _match_layout(domains, layout)
    taken = {block.name for block in layout}
    blocks: list[Block] = []
    findings = list(placement.findings)
    for block, domain in placement.slots:
        if domain is not None:
            blocks.append(Block(block.name, list(domain.nodes)))
            continue
        findings.append(_missing(block, version))
        if version.allows_small_blocks:
            blocks.append(Block(block.name, []))
    for domain in placement.extra:
        raw = block_name(
            name_pattern, domain.nodes, len(blocks) + 1, domain.cluster_uuid, domain.clique_id
        )
        name = unique(raw, taken)
        blocks.append(Block(name, list(domain.nodes)))
        if layout:
            findings.append(
                Finding(
                    FindingKind.NVLINK_RACK_NEW,
                    name,
                    f"new NVLink domain {domain.id} ({NodeSet.fromlist(domain.nodes)}) "
                    "appended after the known blocks",
                )
            )
    return blocks, findings


def nvlink_blocks(
    per_node: Mapping[str, DomainResult],
    version: SlurmVersion,
    *,
    policy: NvlinkPolicy | None = None,
    block_sizes: Sequence[int] | None = None,
    tree: Tree | None = None,
    layout: Sequence[Block] = (),
    findings: Sequence[Finding] = (),
) -> BlockTopology:
    """The block topology of the NVLink domains in *per_node* (see the module doc).

    *findings* (e.g. a snapshot's collection failures) are carried into the result, so the
    report lists everything in one place. BlockSizes are inferred from the most common domain
    size (``base, 2·base, 4·base…``) unless *block_sizes* is given, which is validated;
    release rules for undersized blocks come from ``block.plan_blocks``.
    """
    policy = policy or NvlinkPolicy()
    domains, node_findings = collect_domains(per_node, policy)
    ordered = order_domains(domains, tree)
    blocks, placement_findings = place_blocks(
        ordered, version, layout=layout, name_pattern=policy.name_pattern
    )
    planned = plan_racks(blocks, version, block_sizes)
    planned.findings = [*findings, *node_findings, *placement_findings, *planned.findings]
    return planned


def plan_racks(
    blocks: list[Block], version: SlurmVersion, block_sizes: Sequence[int] | None
) -> BlockTopology:
    """BlockSizes and release rules. On 25.05+ the levels count block *positions*, empty
    placeholders included — that is how Slurm aggregates (in file order) and it keeps
    ``BlockSizes`` unchanged while a rack is away; 24.11 has no placeholders, so
    ``plan_blocks`` applies as it is."""
    if not version.allows_small_blocks:
        return plan_blocks(blocks, version, block_sizes, base_rule=typical_base)
    if block_sizes:
        return BlockTopology(blocks, validate_block_sizes(block_sizes, len(blocks)))
    base = typical_base([block for block in blocks if block.nodes])
    return BlockTopology(blocks, infer_block_sizes(base, len(blocks)))


def blocks_node_count(topology: BlockTopology) -> int:
    """Distinct nodes in all blocks (for templates and reports)."""
    return len({node for block in topology.blocks for node in block.nodes})


def names_multi_node(gpus_by_node: Mapping[str, list[GpuFabric]]) -> bool:
    """Whether any GPU names a multi-node NVLink domain: a ClusterUUID that is not all zero,
    registered or not, healthy or not (a GB200 tray with a fault still belongs to its rack).
    Without one (HGX nodes: all-zero ClusterUUID; PCIe or older GPUs: no fabric) there is no
    NVLink domain larger than a node, so the InfiniBand fabric decides the blocks."""
    return any(
        gpu.cluster_uuid not in (None, ZERO_UUID) for gpus in gpus_by_node.values() for gpu in gpus
    )


def ib_decides(gpus_by_node: Mapping[str, list[GpuFabric]]) -> list[Finding]:
    """When no GPU names a multi-node domain: the finding that says the InfiniBand units are
    the blocks and why (how many single-node NVSwitch nodes, how many without fabric), and
    each node's NVLink findings that ``health`` acts on (a node whose GPUs fell off the bus or
    whose NVSwitch fabric did not come up is still news when the blocks come from IB)."""
    results = domain_results(gpus_by_node)
    single = sum(r.kind is DomainKind.SINGLE_NODE for r in results.values())
    message = (
        f"no GPU names a multi-node NVLink domain ({single} of {len(results)} nodes a "
        "healthy single-node NVSwitch, all-zero ClusterUUID): the blocks are the InfiniBand "
        "units"
    )
    acted_on = [
        replace(f, subject=node)
        for node in sorted(results, key=natural_key)
        for f in results[node].findings
        if isinstance(f.kind, FindingKind) and f.kind.severity is not None
    ]
    return [Finding(FindingKind.BLOCK_SOURCE, "nvidia-smi", message), *acted_on]
