"""Explain a job's placement: per kind of parallel group, how many groups cross each fabric
level, the slowest link on the worst group's path, what on those paths is unhealthy, and one
verdict: is every TP group inside the fastest domain that can hold it?

The verdict is the exit code of ``topograph-slurm explain`` (0 inside, 1 crossing), so a job
prolog, a launcher or CI can act on it.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import and_, is_not, ne

from topograph_slurm.analysis.fabric.degraded_links import is_below, rate_norm
from topograph_slurm.analysis.placement.span import (
    KindSpans,
    home_level,
    kind_spans,
    nodes_per_group,
)
from topograph_slurm.model import rates
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.placement import (
    LEVEL_DOMAIN,
    LEVEL_LEAF,
    LEVEL_NODE,
    FabricMap,
    ParallelLayout,
)
from topograph_slurm.model.result import Analysis, Finding


@dataclass(slots=True)
class PathFacts:
    """What the fabric says about the links a group's traffic can take: each node's rails
    (HCA-to-leaf links) and each leaf's uplinks as (width, speed), and the problems found on
    nodes (by node name) and on links (by node or leaf name). ``nvlink_domains`` tells
    whether the ``domain`` level is NVLink (GB200 racks) or an InfiniBand block;
    ``node_link`` names the links inside a node (``xGMI/PCIe`` on AMD nodes)."""

    rails: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    uplinks: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    problems: dict[str, list[Finding]] = field(default_factory=dict)
    nvlink_domains: bool = False
    node_link: str = "NVLink/PCIe"


@dataclass(slots=True)
class KindReport:
    """One kind of group, explained."""

    spans: KindSpans
    worst_link: str
    troubles: list[Finding] = field(default_factory=list)


@dataclass(slots=True)
class Explanation:
    layout: ParallelLayout
    gpus_per_node: int
    nodes: list[str]
    levels: list[str]
    kinds: dict[str, KindReport]
    tp_home: str
    tp_inside: bool
    verdict: str


def _rate_text(rate: tuple[str, str] | None) -> str:
    """The link as explain names it; a source that gives no rates (NetQ, LLDP: Ethernet) and
    the link layer with it is named neutrally rather than as InfiniBand ``???``."""
    if rate is None or not rates.is_rated(*rate):
        return "fabric link (rate unknown)"
    width, speed = rate
    gbps = rates.gbps(width, speed)
    return f"InfiniBand {width}{speed}" + (f" ({gbps:g} Gb/s per link)" if gbps else "")


def _slowest(links: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    slowest: tuple[str, str] | None = None
    for link in links:
        slowest = link if slowest is None else rates.slower(slowest, link)
    return slowest


def worst_link(level: str, nodes: Sequence[str], fmap: FabricMap, facts: PathFacts | None) -> str:
    """The slowest link class a group spanning *level* over *nodes* rides."""
    if level == LEVEL_NODE:
        return f"{facts.node_link if facts else 'NVLink/PCIe'} inside the node"
    if level == LEVEL_DOMAIN and facts is not None and facts.nvlink_domains:
        return "NVLink (multi-node domain)"
    if facts is None:
        return "InfiniBand"
    links = [rate for node in nodes for rate in facts.rails.get(node, [])]
    levels = fmap.levels
    if LEVEL_LEAF in levels and levels.index(level) > levels.index(LEVEL_LEAF):
        leaves = {fmap.places[n].unit(LEVEL_LEAF) for n in nodes if n in fmap.places}
        links += [
            rate for leaf in sorted(filter(None, leaves)) for rate in facts.uplinks.get(leaf, [])
        ]
    return _rate_text(_slowest(links))


#: Findings about a node's InfiniBand links and its GPUs' way to them: no trouble for a group
#: inside one node, whose traffic never leaves it.
NETWORK_KINDS = frozenset(
    {
        FindingKind.DEGRADED_LINK,
        FindingKind.GPU_NIC_FAR_NUMA,
        FindingKind.GPU_NIC_SYS_ONLY,
        FindingKind.GPU_NIC_RAILS_UNEVEN,
        FindingKind.MISSING_RAIL,
        FindingKind.RAIL_DISAGREEMENT,
        FindingKind.RAIL_MISALIGNED,
        FindingKind.SLOW_LINK,
    }
)


def _troubles(
    level: str, nodes: Sequence[str], fmap: FabricMap, facts: PathFacts | None
) -> list[Finding]:
    """The problems on the path of a group spanning *level* over *nodes*: its nodes' and their
    units'; inside one node, only what is inside it (its NVLink, not its rails)."""
    if facts is None:
        return []
    if level == LEVEL_NODE:
        return [
            finding
            for node in nodes
            for finding in facts.problems.get(node, [])
            if finding.kind not in NETWORK_KINDS
        ]
    return path_problems(nodes, fmap, facts)


def path_problems(nodes: Iterable[str], fmap: FabricMap, facts: PathFacts | None) -> list[Finding]:
    """The problems on traffic leaving *nodes*: their own and their units' (leaf, block)."""
    if facts is None:
        return []
    members = list(nodes)
    units = sorted({unit for n in members if n in fmap.places for _, unit in fmap.places[n].units})
    return [finding for name in members + units for finding in facts.problems.get(name, [])]


def explain(
    layout: ParallelLayout,
    ranks: Sequence[str],
    gpus_per_node: int,
    fmap: FabricMap,
    facts: PathFacts | None = None,
) -> Explanation:
    """How *layout* sits on the fabric *fmap* when rank r runs on ``ranks[r]``; a TP group's
    home is judged for nodes of *gpus_per_node* GPUs."""
    spans = kind_spans(layout, ranks, fmap)
    kinds = {
        kind: KindReport(
            span,
            worst_link(span.worst_level, span.worst_nodes, fmap, facts),
            _troubles(span.worst_level, span.worst_nodes, fmap, facts),
        )
        for kind, span in spans.items()
    }
    home = home_level(fmap, nodes_per_group(layout.tp, gpus_per_node))
    tp = spans.get("tp")
    inside = tp is None or tp.crossing(home, fmap.levels) == 0
    return Explanation(
        layout,
        gpus_per_node,
        list(dict.fromkeys(ranks)),
        list(fmap.levels),
        kinds,
        home,
        inside,
        _verdict(tp, home, fmap.levels, inside),
    )


def _verdict(tp: KindSpans | None, home: str, levels: Sequence[str], inside: bool) -> str:
    if tp is None:
        return "no TP groups (tp=1): nothing to keep together"
    where = {LEVEL_NODE: "one node", LEVEL_DOMAIN: "one NVLink domain/block"}.get(home, home)
    if inside:
        return f"all {tp.groups} TP groups of {tp.size} GPUs are inside {where}"
    crossing = tp.crossing(home, levels)
    return f"{crossing} of {tp.groups} TP groups of {tp.size} GPUs cross out of {where}"


def problems_by_subject(findings: Sequence[Finding]) -> dict[str, list[Finding]]:
    """Problem findings keyed by their subject (a node, a leaf, a block)."""
    by: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.is_problem:
            by.setdefault(finding.subject, []).append(finding)
    return by


def path_facts(
    analysis: Analysis, findings: Sequence[Finding] = (), nvlink_domains: bool = False
) -> PathFacts:
    """The rates of every node's rails and every leaf's uplinks, read off the fabric, and the
    problems on them: the analysis' and *findings* (a snapshot's), plus every rail or uplink
    that runs below the fabric's norm."""
    hca_rate, uplinks = _link_rates(analysis)
    rails = {
        node: [hca_rate[hca] for hca, _leaf in hcas if hca in hca_rate]
        for node, hcas in analysis.hosts.rails.items()
    }
    problems = problems_by_subject([*analysis.findings, *findings])
    links = analysis.fabric.links
    norm = rate_norm(Counter(zip(links.width, links.speed, strict=True)))
    if norm is not None:
        judged = {rate: is_below(rate, norm) for rate in {*hca_rate.values(), *_flat(uplinks)}}
        for subject, what, measured in [
            *((node, "a rail", node_rates) for node, node_rates in rails.items()),
            *((leaf, "an uplink", leaf_rates) for leaf, leaf_rates in uplinks.items()),
        ]:
            slow = sorted({rate for rate in measured if judged[rate]})
            if slow:
                message = f"{what} runs at {slow[0][0]}{slow[0][1]}, the norm is {''.join(norm)}"
                problems.setdefault(subject, []).append(
                    Finding(FindingKind.DEGRADED_LINK, subject, message)
                )
    return PathFacts(rails, uplinks, problems, nvlink_domains)


def _flat(lists: Mapping[str, list[tuple[str, str]]]) -> Iterator[tuple[str, str]]:
    return (rate for rates_ in lists.values() for rate in rates_)


def _last_rows(column: list[str], wanted: set[str]) -> dict[str, int]:
    """Each wanted GUID of *column* and the last row it is on."""
    rows = list(compress(range(len(column)), map(wanted.__contains__, column)))
    return dict(zip(map(column.__getitem__, rows), rows, strict=True))


def _link_rates(
    analysis: Analysis,
) -> tuple[dict[str, tuple[str, str]], dict[str, list[tuple[str, str]]]]:
    """(width, speed) of each rail by HCA GUID (a multi-port HCA: its last cable's), and of
    each leaf's cables to other switches (as a multiset: the order is no fact). A column at a
    time: only the cables with a rail end, and those between two switches, are visited."""
    rails = {hca for hcas in analysis.hosts.rails.values() for hca, _leaf in hcas}
    leaf_of = {switch: leaf.name for leaf in analysis.tree.leaves for switch in leaf.switches}
    switches = analysis.fabric.switches
    links = analysis.fabric.links
    a, _, b, _, width, speed = links.columns()
    rows = range(len(a))
    # each rail's last cable (a multi-port HCA's ports may run at different rates)
    last, later = _last_rows(a, rails), _last_rows(b, rails)
    for hca in last.keys() & later.keys():
        later[hca] = max(last[hca], later[hca])
    last.update(later)
    hca_rate = {hca: (width[row], speed[row]) for hca, row in last.items()}
    b_switch = links.b_switch
    if b_switch is None:
        b_switch = list(map(switches.__contains__, b))
        between = list(compress(rows, map(and_, map(switches.__contains__, a), b_switch)))
    else:  # the source read every cable from a switch: a[row] is one
        between = list(compress(rows, b_switch))
    rates_ = list(
        zip(map(width.__getitem__, between), map(speed.__getitem__, between), strict=True)
    )
    leaf_a: list[str | None] = list(map(leaf_of.get, map(a.__getitem__, between)))
    leaf_b = list(map(leaf_of.get, map(b.__getitem__, between)))
    leaving = list(map(ne, leaf_a, leaf_b))
    # a cable leaving a leaf is an uplink of the leaf at each of its ends
    uplinks: defaultdict[str | None, list[tuple[str, str]]] = defaultdict(list)
    for leaves in (leaf_a, leaf_b):
        ends = list(map(and_, leaving, map(is_not, leaves, repeat(None))))
        appended = map(
            list.append, map(uplinks.__getitem__, compress(leaves, ends)), compress(rates_, ends)
        )
        deque(appended, maxlen=0)
    return hca_rate, {leaf: found for leaf, found in uplinks.items() if leaf is not None}
