"""Nodes that are off keep their place: a node Slurm still lists but today's sweep missed.

A powered-down node's HCAs vanish from ``ibnetdiscover``. Dropping it from topology.conf means
Slurm cannot place it in a multi-node job after it powers back on, until the next run and a
reconfigure — and with power saving that happens every day. So a node the last run placed, that
Slurm still lists and that is absent now, keeps its last known leaf and block for a limited time
since it was last seen, with a ``kept-missing`` finding; past the limit it drops out with a
``kept-missing-expired`` finding. A node Slurm no longer lists is never kept; without Slurm's
node list (no scontrol, no ``--slurm-nodes``) the kept summary alone decides. Everything not
kept carries its reason: nothing is dropped silently.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.result import LEVEL_INFO, BlockTopology, Finding, Tree
from topograph_slurm.model.summary import FabricSummary, NodeSummary

#: How summaries write times: ISO 8601, UTC, whole seconds.
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d{1,9})([smhdw])", re.ASCII)  # int() reads "٧" as 7


#: The longest a missing node may keep its place: ten years is "forever" for a cluster.
MAX_KEEP = timedelta(days=3650)


def parse_duration(text: str) -> timedelta:
    """``7d``, ``36h``, ``90m``, ``2w``, ``0`` (off) → a timedelta; ValueError otherwise."""
    value = text.strip()
    if value == "0":
        return timedelta(0)
    match = _DURATION.fullmatch(value)
    if match is None:
        raise ValueError(f"must be a duration like 7d, 36h, 90m or 0 (off), got {text!r}")
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if seconds > MAX_KEEP.total_seconds():  # beyond it, date arithmetic overflows
        raise ValueError(f"must be at most {MAX_KEEP.days}d, got {text!r}")
    return timedelta(seconds=seconds)


@dataclass(frozen=True, slots=True)
class KeepPolicy:
    """How long a missing node keeps its place (zero: not at all), the nodes Slurm lists
    (None: unknown, so the kept summary alone decides), and the time of this run."""

    limit: timedelta
    slurm_nodes: frozenset[str] | None
    now: datetime


def candidates(
    previous: FabricSummary | None, seen: Iterable[str], policy: KeepPolicy
) -> tuple[dict[str, NodeSummary], list[Finding]]:
    """The nodes of *previous* absent now that may keep their place, and a finding for each
    one that may not (why, and that it drops out of the topology)."""
    if previous is None or not policy.limit:
        return {}, []
    keep: dict[str, NodeSummary] = {}
    findings = []
    for name in sorted(previous.nodes.keys() - set(seen), key=natural_key):
        node = previous.nodes[name]
        refusal = _why_not(name, node, policy)
        if refusal is None:
            keep[name] = node
        else:
            message = f"{refusal.message}: dropped from the topology"
            findings.append(dataclasses.replace(refusal, message=message))
    return keep, findings


def place_in_tree(tree: Tree, keep: Mapping[str, NodeSummary]) -> tuple[Tree, dict[str, str]]:
    """*tree* with each kept node back under its last leaf, when that leaf is still there (a
    block-only previous topology names IB blocks after their leaves: its block then counts);
    and the leaf of each node placed."""
    leaves = {leaf.name: list(leaf.nodes) for leaf in tree.leaves}
    placed = {}
    for name, node in keep.items():
        leaf = next((n for n in (node.leaf, node.block) if n and n in leaves), "")
        if leaf:
            leaves[leaf].append(name)
            placed[name] = leaf
    if not placed:
        return tree, placed
    grown = [dataclasses.replace(leaf, nodes=sorted(leaves[leaf.name])) for leaf in tree.leaves]
    return dataclasses.replace(tree, leaves=grown), placed


def place_in_blocks(
    blocks: BlockTopology | None, keep: Mapping[str, NodeSummary]
) -> tuple[BlockTopology | None, dict[str, str]]:
    """*blocks* with each kept node in its last block, when that block is still there; and
    the block of each kept node (also of those already in one: IB blocks are made from the
    tree, which holds the kept nodes already)."""
    if blocks is None:
        return None, {}
    members = {block.name: list(block.nodes) for block in blocks.blocks}
    where = {node: block for block, nodes in members.items() for node in nodes}
    placed = {}
    for name, node in keep.items():
        if name in where:
            placed[name] = where[name]
        elif node.block in members:
            members[node.block].append(name)
            placed[name] = node.block
    grown = [
        dataclasses.replace(block, nodes=sorted(members[block.name], key=natural_key))
        for block in blocks.blocks
    ]
    return dataclasses.replace(blocks, blocks=grown), placed


def kept_nodes(
    keep: Mapping[str, NodeSummary],
    leaves: Mapping[str, str],
    blocks: Mapping[str, str],
    policy: KeepPolicy,
) -> tuple[dict[str, NodeSummary], list[Finding]]:
    """Each kept node as it now stands (``kept`` set, ``last_seen`` unchanged) with its
    ``kept-missing`` finding; a candidate whose leaf and block are both gone drops out with
    a finding saying so."""
    nodes: dict[str, NodeSummary] = {}
    findings = []
    for name, node in keep.items():
        leaf, block = leaves.get(name, ""), blocks.get(name, "")
        if not (leaf or block):
            gone = f"its leaf {node.leaf or '(none)'} and block {node.block or '(none)'} are gone"
            findings.append(
                Finding(FindingKind.MISSING_NOT_KEPT, name, f"{gone}: dropped from the topology")
            )
            continue
        nodes[name] = dataclasses.replace(node, leaf=leaf, block=block, kept=True)
        message = _kept_message(node, leaf, block, policy)
        findings.append(Finding(FindingKind.KEPT_MISSING, name, message))
    return nodes, findings


def _why_not(name: str, node: NodeSummary, policy: KeepPolicy) -> Finding | None:
    """Why a missing node may not keep its place (a finding without the verdict), or None.
    A node Slurm no longer lists is information (it was retired); the others are problems.
    Without a node list the kept summary alone decides: a node off is far likelier than a
    node retired, and the time limit drops a retired one."""
    if policy.slurm_nodes is not None and name not in policy.slurm_nodes:
        return Finding(
            FindingKind.MISSING_NOT_KEPT, name, "absent and no longer listed by Slurm", LEVEL_INFO
        )
    seen = _time(node.last_seen)
    if seen is None:
        return Finding(
            FindingKind.MISSING_NOT_KEPT, name, "absent; when it was last seen is unknown"
        )
    if seen > policy.now:  # a clock gone wrong or an edited file: kept for ever otherwise
        return Finding(
            FindingKind.MISSING_NOT_KEPT, name, f"absent; last seen {node.last_seen}, in the future"
        )
    if policy.now - seen > policy.limit:
        limit = _text(policy.limit)
        return Finding(
            FindingKind.KEPT_MISSING_EXPIRED, name, f"absent since {node.last_seen}, over {limit}"
        )
    return None


def _kept_message(node: NodeSummary, leaf: str, block: str, policy: KeepPolicy) -> str:
    places = (f"leaf {leaf}" if leaf else "", f"block {block}" if block else "")
    where = " and ".join(place for place in places if place)
    until = _time(node.last_seen)
    assert until is not None  # _why_not returned None
    end = (until + policy.limit).strftime(TIME_FORMAT)
    return f"absent from the fabric since {node.last_seen}; kept in {where} until {end}"


def _time(text: str) -> datetime | None:
    """An ISO 8601 time, read as UTC when it names no zone; None when it is not one."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _text(limit: timedelta) -> str:
    seconds = int(limit.total_seconds())
    for unit in ("d", "h", "m"):
        if seconds % _UNITS[unit] == 0:
            return f"{seconds // _UNITS[unit]}{unit}"
    return f"{seconds}s"
