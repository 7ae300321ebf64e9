"""Rail-aware logical leaves: the switches a set of nodes shares as its first hop.

On a rail-optimised fabric (DGX SuperPOD) each node has one HCA per rail and each rail of a
scalable unit has its own leaf switch, so a node sits under eight leaves at once. Slurm's tree
plugin wants each node under exactly one leaf, so the leaves that carry the same node set are
folded into one *logical leaf*. A node whose rails disagree (one cable moved to another unit's
leaf) must not merge two units: it joins the group that holds the majority of its rails and is
reported as a finding.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from operator import itemgetter

from topograph_slurm.model.result import Finding, LeafGroup

KIND_RAIL_DISAGREE = "rail-disagreement"


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


def group_leaves(
    rails: Mapping[str, list[tuple[str, str]]], switch_names: Mapping[str, str]
) -> tuple[list[LeafGroup], list[Finding]]:
    """Fold leaf switches into logical leaves and place every node under exactly one of them.

    Returns the groups sorted by name (a group is named after its first leaf by name) and a
    finding for every node whose rails reach more than one logical leaf.
    """
    by_signature = _signatures(rails)
    primaries = _primary_sets(by_signature)
    members: list[list[str]] = [[] for _ in primaries]
    findings: list[Finding] = []
    index_of = {leaf: i for i, leaves in enumerate(primaries) for leaf in leaves}
    for signature, nodes in by_signature.items():
        votes = Counter(index_of[leaf] for leaf in signature if leaf in index_of)
        if not votes:  # cannot happen: every signature overlaps some primary
            continue
        best = min(votes, key=lambda i: (-votes[i], i))
        primaries[best] |= signature
        for node in nodes:
            members[best].append(node)
            if len(votes) > 1:
                findings.append(_disagreement(node, rails[node], votes, switch_names))
    groups = []
    for leaves, nodes in zip(primaries, members, strict=True):
        ordered = sorted(leaves, key=lambda guid: (switch_names.get(guid, guid), guid))
        groups.append(LeafGroup(switch_names.get(ordered[0], ordered[0]), ordered, sorted(nodes)))
    groups.sort(key=lambda group: group.name)
    findings.sort(key=lambda finding: finding.subject)
    return groups, findings


def _disagreement(
    node: str,
    node_rails: list[tuple[str, str]],
    votes: Counter[int],
    switch_names: Mapping[str, str],
) -> Finding:
    """Describe which leaf switches a node's rails land on and where it was placed."""
    leaves = ", ".join(sorted({switch_names.get(leaf, leaf) for _, leaf in node_rails}))
    return Finding(
        KIND_RAIL_DISAGREE,
        node,
        f"rails reach {len(votes)} leaf groups (leaves {leaves}); placed with the group "
        f"holding {max(votes.values())} of {len(node_rails)} rails",
    )
