"""Degraded fabric links and rails: what in the fabric is worse than the rest of it (the
findings health turns into verdicts).

A single 1x or SDR cable among 4xNDR ones throttles every job whose traffic crosses it, and a
node that lost a rail runs its all-reduce on fewer HCAs than its peers. Neither stops generation
— Slurm placement is still right — but both belong in the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from itertools import compress
from operator import itemgetter

from topograph_slurm.model.fabric import Fabric, Link
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.rates import is_rated, lanes, speed_rank
from topograph_slurm.model.result import Finding, LeafGroup, Tree

_HCA = itemgetter(0)  # of a rail (hca guid, leaf switch guid)
#: A device's place for :func:`nodes_behind`: its level (an HCA -1, a leaf switch 0, an upper
#: switch its tree level) and the Slurm nodes whose traffic crosses it.
Reach = dict[str, tuple[int, tuple[str, ...]]]


def _label(fabric: Fabric, names: Mapping[str, str], guid: str, port: int) -> str:
    if guid in names:
        return f"{names[guid]}/{port}"
    ca = fabric.cas.get(guid)
    return f"{ca.description if ca else guid}/{port}"


def rate_norm(rates: Mapping[tuple[str, str], int]) -> tuple[str, str] | None:
    """The fabric's norm: the most common known (width, speed) of *rates* (rate -> links)."""
    rated = {rate: n for rate, n in rates.items() if is_rated(*rate)}
    return max(rated, key=lambda rate: (rated[rate], rate)) if rated else None


def is_below(rate: tuple[str, str], norm: tuple[str, str]) -> bool:
    """Narrower or slower than the norm (a known rate only)."""
    width, speed = rate
    return is_rated(width, speed) and (
        lanes(width) < lanes(norm[0]) or speed_rank(speed) < speed_rank(norm[1])
    )


def nodes_behind(tree: Tree, rails: Mapping[str, list[tuple[str, str]]]) -> Reach:
    """Each HCA, leaf and upper switch GUID with its level and the nodes behind it: an HCA
    its node, a leaf switch its logical leaf's nodes, an upper switch its children's nodes.

    A slow cable slows the traffic of the nodes below its lower end: an HCA cable its node
    only, a leaf uplink every node of that leaf, a spine-to-core link the spine's whole pod.
    """
    reach: Reach = {hca: (-1, (node,)) for node, held in rails.items() for hca, _ in held}
    below: dict[str, tuple[str, ...]] = {}
    for leaf in tree.leaves:
        below[leaf.name] = tuple(sorted(leaf.nodes, key=natural_key))
        reach.update((guid, (0, below[leaf.name])) for guid in leaf.switches)
    for upper in sorted(tree.uppers, key=lambda switch: switch.level):
        found = {node for child in upper.children for node in below.get(child, ())}
        below[upper.name] = tuple(sorted(found, key=natural_key))
        reach.update((guid, (upper.level, below[upper.name])) for guid in upper.switches)
    return reach


def degraded_links(
    fabric: Fabric, switch_names: Mapping[str, str], reach: Callable[[], Reach] | None = None
) -> list[Finding]:
    """Links narrower or slower than the fabric's most common width and speed. *reach*
    (called only when a link is slow, see :func:`nodes_behind`) fills each finding's
    ``nodes``: the nodes below the link's lower end."""
    norm, slow = below_norm(fabric)
    if not slow:
        return []
    behind = reach() if reach is not None else {}
    findings = [_degraded(fabric, switch_names, link, "".join(norm), behind) for link in slow]
    return sorted(findings, key=lambda finding: finding.subject)


def below_norm(fabric: Fabric) -> tuple[tuple[str, str], list[Link]]:
    """The fabric's norm rate and every link below it (none when the fabric has one rate).

    Rates are judged once per distinct (width, speed) pair, not per link: a 16k-node fabric has
    400k links but a handful of rates.
    """
    links = fabric.links
    if len(set(links.width)) <= 1 and len(set(links.speed)) <= 1:
        return ("", ""), []  # one rate throughout, the usual fabric: two set passes, no pairs
    rates = Counter(zip(links.width, links.speed, strict=True))
    norm = rate_norm(rates)
    if norm is None:
        return ("", ""), []
    slow = {rate for rate in rates if is_below(rate, norm)}
    if not slow:
        return norm, []
    is_slow = map(slow.__contains__, zip(links.width, links.speed, strict=True))
    return norm, [links[row] for row in compress(range(len(links)), is_slow)]


def _degraded(
    fabric: Fabric, names: Mapping[str, str], link: Link, norm: str, behind: Reach
) -> Finding:
    subject = f"{_label(fabric, names, link.a_guid, link.a_port)} <-> " + _label(
        fabric, names, link.b_guid, link.b_port
    )
    hosts = [guid for guid in (link.a_guid, link.b_guid) if guid in fabric.cas]
    if hosts:  # a host's own cable slows that host only, and nobody when it is no Slurm node
        nodes = next((behind[guid][1] for guid in hosts if guid in behind), ())
    else:
        ends = [behind[guid] for guid in (link.a_guid, link.b_guid) if guid in behind]
        nodes = min(ends)[1] if ends else ()
    message = f"runs at {link.width}{link.speed}, fabric norm is {norm}"
    return Finding(FindingKind.DEGRADED_LINK, subject, message, nodes=nodes)


def missing_rails(
    groups: list[LeafGroup], rails: Mapping[str, list[tuple[str, str]]]
) -> list[Finding]:
    """Nodes with fewer connected HCAs than their logical leaf's full count: the most HCAs
    two of its nodes have, or one has when that is what most of the fabric's nodes have. The
    nodes with fewer are the ones missing a rail, whatever their share of the leaf (half a
    unit, most of it); one node with an extra HCA sets no norm for the others."""
    counts = {node: len(set(map(_HCA, held))) for node, held in rails.items()}
    usual = Counter(counts.values()).most_common(1)[0][0] if counts else 0
    findings = []
    for group in groups:
        held = Counter(counts[node] for node in group.nodes)
        norm = max((n for n, nodes in held.items() if nodes > 1 or n == usual), default=0)
        for node in sorted(group.nodes):
            if counts[node] < norm:
                findings.append(
                    Finding(
                        FindingKind.MISSING_RAIL,
                        node,
                        f"{counts[node]} connected HCAs, peers under {group.name} have {norm}",
                    )
                )
    return findings


def islands(tree: Tree) -> list[Finding]:
    """Several top switches: parts of the fabric no cable joins, which Slurm never spans."""
    if len(tree.tops) < 2:
        return []
    return [
        Finding(
            FindingKind.ISLANDS,
            ",".join(tree.tops),
            f"the fabric has {len(tree.tops)} islands with no cable between them; Slurm will "
            "not place one job across them (and warns that no switch reaches all nodes)",
        )
    ]
