"""Rail-aware logical leaves: the switches a set of nodes shares as its first hop.

On a rail-optimised fabric (DGX SuperPOD) each node has one HCA per rail and each rail of a
scalable unit has its own leaf switch, so a node sits under eight leaves at once. Slurm's tree
plugin wants each node under exactly one leaf, so the leaves that carry the same node set are
folded into one *logical leaf*. A node whose rails disagree (one cable moved to another unit's
leaf) must not merge two units: it joins the group that holds the majority of its rails and is
reported as a finding. Nodes whose leaves a group holds only partly because a few of them are
shared with it (a whole unit's rail moved to another unit's leaf) are folded into that group and
reported too, unless they reach every leaf of the group and more (the group's own nodes are then
the ones short of a rail: ``missing-rail``, whatever their share). With no majority (two rails
split 1:1, four split 2:2) it joins the group of its first rail (lowest HCA GUID): a rule that
depends on the node alone, so the same fabric from UFM or ibnetdiscover places it the same way.
Each leaf switch belongs to exactly one logical leaf, and a logical leaf is named after its
first switch, so the names are as unique as the switch names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from operator import itemgetter

from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.result import Finding, LeafGroup

_LEAF = itemgetter(1)  # of a rail (hca guid, leaf switch guid)


def _signatures(rails: Mapping[str, list[tuple[str, str]]]) -> dict[frozenset[str], list[str]]:
    """Group nodes by the exact set of leaf switches their HCAs reach."""
    by_signature: dict[frozenset[str], list[str]] = {}
    for node in sorted(rails):
        signature = frozenset(map(_LEAF, rails[node]))
        by_signature.setdefault(signature, []).append(node)
    return by_signature


def _primary_sets(by_signature: dict[frozenset[str], list[str]]) -> list[set[str]]:
    """Disjoint leaf sets, most-populated signature first: these define the logical leaves."""
    primaries: list[set[str]] = []
    claimed: set[str] = set()
    ordered = sorted(by_signature.items(), key=lambda item: (-len(item[1]), sorted(item[0])))
    for signature, _nodes in ordered:
        if claimed.isdisjoint(signature):
            primaries.append(set(signature))
            claimed |= signature
    return primaries


def _tied(votes: Counter[int]) -> list[int]:
    """The groups holding the most of a signature's rails (one unless there is no majority)."""
    most = max(votes.values())
    return sorted(group for group, held in votes.items() if held == most)


def _first_rail(
    node_rails: list[tuple[str, str]], tied: list[int], index_of: Mapping[str, int]
) -> tuple[str, str]:
    """The node's first rail (rails are sorted by HCA GUID) whose leaf is in a tied group."""
    return next(rail for rail in node_rails if index_of.get(_LEAF(rail)) in tied)


def group_leaves(
    rails: Mapping[str, list[tuple[str, str]]], switch_names: Mapping[str, str]
) -> tuple[list[LeafGroup], list[Finding]]:
    """Fold leaf switches into logical leaves and place every node under exactly one of them.

    Returns the groups sorted by name (a group is named after its first leaf by name) and a
    finding for every node whose rails reach more than one logical leaf. A leaf switch that no
    primary signature claims (reached only by moved cables) joins the group of the first node
    placed that reaches it, never a second group.
    """
    by_signature = _signatures(rails)
    primaries = _primary_sets(by_signature)
    index_of = {leaf: i for i, leaves in enumerate(primaries) for leaf in leaves}
    members: list[list[str]] = [[] for _ in primaries]
    strays: dict[str, int] = {}
    findings: list[Finding] = []
    folded: list[tuple[list[str], frozenset[str], frozenset[str]]] = []
    for signature, nodes in by_signature.items():
        # every signature overlaps a primary (_primary_sets), so there is always a vote
        votes = Counter(index_of[leaf] for leaf in signature if leaf in index_of)
        unclaimed = signature.difference(index_of)  # probes per leaf; "- keys()" walks them all
        if len(votes) == 1:  # the usual signature: every rail in one group, no node to judge
            (only,) = votes
            members[only].extend(nodes)
            strays.update({leaf: only for leaf in unclaimed if leaf not in strays})
            # most of its leaves came along with it, and not merely because the group's own
            # nodes lack them (half a unit missing a rail: the whole nodes are not strays)
            if 2 * len(unclaimed) >= len(signature) and not signature >= primaries[only]:
                folded.append((nodes, signature, unclaimed))
            continue
        tied = _tied(votes)
        for node in nodes:
            first = None if len(tied) == 1 else _first_rail(rails[node], tied, index_of)
            best = tied[0] if first is None else index_of[_LEAF(first)]
            members[best].append(node)
            strays.update({leaf: best for leaf in unclaimed if leaf not in strays})
            why = _placed_why(votes[best], len(rails[node]), first, switch_names)
            findings.append(_disagreement(node, rails[node], len(votes), why, switch_names))
    for leaf, group in strays.items():
        primaries[group].add(leaf)
    groups = []
    for leaves, nodes in zip(primaries, members, strict=True):
        ordered = sorted(leaves, key=lambda guid: (switch_names.get(guid, guid), guid))
        groups.append(LeafGroup(switch_names.get(ordered[0], ordered[0]), ordered, sorted(nodes)))
    groups.sort(key=lambda group: group.name)
    findings += _folded_findings(folded, groups, switch_names)
    findings.sort(key=lambda finding: finding.subject)
    return groups, findings


def _folded_findings(
    folded: list[tuple[list[str], frozenset[str], frozenset[str]]],
    groups: list[LeafGroup],
    switch_names: Mapping[str, str],
) -> list[Finding]:
    """A finding for each node of a signature that shares at most half of its leaves with the
    group it joined: its rails all reach one group only because the group's own nodes reach
    some of its leaves (a whole unit's rail cabled to another unit's leaf folds two units
    into one logical leaf, which no node's vote shows)."""
    group_of = {leaf: group.name for group in groups for leaf in group.switches}
    findings = []
    for nodes, signature, unclaimed in folded:
        shared = sorted(switch_names.get(leaf, leaf) for leaf in signature - unclaimed)
        own = sorted(switch_names.get(leaf, leaf) for leaf in unclaimed)
        group = group_of[next(iter(signature - unclaimed))]
        message = (
            f"rails share only {len(shared)} of {len(signature)} leaves with leaf group "
            f"{group} ({', '.join(shared)}); its other leaves ({', '.join(own)}) were folded "
            "into that group with it: check the cabling of the shared leaves"
        )
        findings += [Finding(FindingKind.RAIL_DISAGREEMENT, node, message) for node in nodes]
    return findings


def _placed_why(
    held: int, total: int, first: tuple[str, str] | None, switch_names: Mapping[str, str]
) -> str:
    """Where a disagreeing node went: the majority, or (on a tie) its first rail's group."""
    if first is None:
        return f"placed with the group holding {held} of {total} rails"
    hca, leaf = first
    return (
        f"no majority ({held} of {total} rails in each of the top groups): placed with the "
        f"group of its first rail (HCA {hca} on {switch_names.get(leaf, leaf)})"
    )


def _disagreement(
    node: str,
    node_rails: list[tuple[str, str]],
    groups: int,
    why: str,
    switch_names: Mapping[str, str],
) -> Finding:
    """Describe which leaf switches a node's rails land on and where it was placed."""
    leaves = ", ".join(sorted({switch_names.get(leaf, leaf) for _, leaf in node_rails}))
    return Finding(
        FindingKind.RAIL_DISAGREEMENT,
        node,
        f"rails reach {groups} leaf groups (leaves {leaves}); {why}",
    )
