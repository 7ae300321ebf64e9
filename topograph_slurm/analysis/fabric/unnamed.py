"""Slurm nodes "missing from the fabric" that are there, unnamed.

A node whose HCAs still carry the firmware-default description (``MT4129 ConnectX7 Mellanox
Technologies``: the driver never set one) is excluded by naming, and ``--slurm-nodes`` then
lists it as missing. Cabling usually says where it is: a scalable unit's nodes plug into the
same port of every rail leaf, in name order, so ``n06`` on port 6 and ``n08`` on port 8 of a
leaf put ``n07`` on port 7 of that leaf. When that port holds an HCA excluded for naming no
host, that HCA is very probably ``n07``'s, and an OpenSM node-name map line names it.

Cheap at any size: only missing nodes are looked at, and only the links of their neighbours'
HCAs and of unnamed HCAs are read (two C-level membership passes over the link columns).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress

from topograph_slurm.analysis.fabric.naming import REASON_DEFAULT, REASON_EMPTY, REASON_LOCALHOST
from topograph_slurm.model.fabric import Fabric
from topograph_slurm.model.result import Exclusion, HostAttachments, UnnamedHca, UnnamedNode

#: Exclusions of HCAs whose description names no host: the ones a missing node can hide as.
UNNAMED_REASONS = frozenset({REASON_DEFAULT, REASON_LOCALHOST, REASON_EMPTY})

_NUMBERED = re.compile(r"^(.*?)(\d+)(\D*)$")

#: ``(prefix, suffix, digits)``: a family of names that differ only in one zero-padded number
Family = tuple[str, str, int]


def _split(name: str) -> tuple[Family, int] | None:
    """``gpu0007`` → ``(("gpu", "", 4), 7)``; None for names without a number."""
    match = _NUMBERED.match(name)
    if match is None:
        return None
    prefix, digits, suffix = match.groups()
    width = len(digits) if digits.startswith("0") else 0
    return (prefix, suffix, width), int(digits)


def _families(nodes: Iterable[str]) -> dict[Family, list[int]]:
    """The sorted numbers of every name family among the placed nodes."""
    out: dict[Family, list[int]] = {}
    for name in nodes:
        split = _split(name)
        if split is not None:
            out.setdefault(split[0], []).append(split[1])
    for numbers in out.values():
        numbers.sort()
    return out


def _name(family: Family, number: int) -> str:
    prefix, suffix, width = family
    return f"{prefix}{number:0{width}d}{suffix}"


def _neighbour_pairs(numbers: Sequence[int], number: int) -> list[tuple[int, int]]:
    """Pairs of placed numbers near *number* to predict its ports from, best first: one each
    side, then the two above, then the two below (the first or last node of a unit, whose
    other side is cabled to another unit's leaves)."""
    at = bisect_left(numbers, number)
    pairs = [(numbers[at - 1], numbers[at])] if 0 < at < len(numbers) else []
    if at + 1 < len(numbers):
        pairs.append((numbers[at], numbers[at + 1]))
    if at >= 2:
        pairs.append((numbers[at - 2], numbers[at - 1]))
    return pairs


def _switch_ports(fabric: Fabric, guids: set[str]) -> dict[str, tuple[str, int]]:
    """``(switch, port)`` each of *guids* (CAs) is cabled to; the first cable of a CA wins."""
    links, switches = fabric.links, fabric.switches
    out: dict[str, tuple[str, int]] = {}
    for here, there, there_port in (
        (links.a, links.b, links.b_port),
        (links.b, links.a, links.a_port),
    ):
        for i in compress(range(len(here)), map(guids.__contains__, here)):
            if there[i] in switches:
                out.setdefault(here[i], (there[i], there_port[i]))
    return out


def _hca_word(description: str, node: str) -> str:
    """The HCA part of ``<node> <hca>`` (``mlx5_3``); empty when the description does not
    name *node* (it was named by a node-name map or a rewrite)."""
    words = description.split()
    return words[1] if len(words) > 1 and words[0] == node else ""


class _Positions:
    """Where the placed nodes' HCAs and the unnamed HCAs sit, for the nodes asked about."""

    def __init__(self, fabric: Fabric, hosts: HostAttachments, nodes: Iterable[str]) -> None:
        self.unnamed = {ex.guid: ex for ex in hosts.exclusions if ex.reason in UNNAMED_REASONS}
        rails = {hca for node in nodes for hca, _ in hosts.rails.get(node, ())}
        self.port = _switch_ports(fabric, rails | self.unnamed.keys())
        self.at = {self.port[g]: g for g in self.unnamed if g in self.port}
        self.fabric, self.hosts = fabric, hosts

    def by_leaf(self, node: str) -> dict[str, tuple[int, str]]:
        """``leaf → (port, hca word)`` of one placed node's rails."""
        out: dict[str, tuple[int, str]] = {}
        for hca, _ in self.hosts.rails.get(node, ()):
            if hca in self.port:
                leaf, port = self.port[hca]
                out.setdefault(leaf, (port, _hca_word(self.fabric.cas[hca].description, node)))
        return out

    def exclusion(self, leaf: str, port: int) -> Exclusion | None:
        guid = self.at.get((leaf, port))
        return self.unnamed[guid] if guid is not None else None


def _predicted(
    low: tuple[int, dict[str, tuple[int, str]]],
    high: tuple[int, dict[str, tuple[int, str]]],
    number: int,
) -> Iterable[tuple[str, int, str]]:
    """``(leaf, port, hca)`` the missing *number* should use: on every leaf both neighbours
    share, the port their port numbers give by linear steps (a whole number or nothing)."""
    (n_low, ports_low), (n_high, ports_high) = low, high
    for leaf, (p_low, hca) in ports_low.items():
        if leaf not in ports_high:
            continue
        step, rest = divmod((ports_high[leaf][0] - p_low) * (number - n_low), n_high - n_low)
        if not rest:
            yield leaf, p_low + step, hca


@dataclass(frozen=True, slots=True)
class _Plan:
    """A missing node's number and two placed siblings (name, number) to predict it from."""

    node: str
    number: int
    low: tuple[str, int]
    high: tuple[str, int]


def _plans(missing: Sequence[str], placed: Iterable[str]) -> list[list[_Plan]]:
    """For each missing numbered node, the sibling pairs to try, best first."""
    families = _families(placed)
    plans = []
    for node in missing:
        split = _split(node)
        if split is None:
            continue
        family, number = split
        pairs = _neighbour_pairs(families.get(family, []), number)
        named = [((_name(family, a), a), (_name(family, b), b)) for a, b in pairs]
        if named:
            plans.append([_Plan(node, number, low, high) for low, high in named])
    return plans


def _match(plan: _Plan, positions: _Positions, switch_names: Mapping[str, str]) -> UnnamedNode:
    """The unnamed HCAs at the ports *plan*'s siblings predict (possibly none)."""
    low = (plan.low[1], positions.by_leaf(plan.low[0]))
    high = (plan.high[1], positions.by_leaf(plan.high[0]))
    hcas = []
    for leaf, port, hca in _predicted(low, high, plan.number):
        found = positions.exclusion(leaf, port)
        if found is not None:
            name = f"{plan.node} {hca}" if hca else plan.node
            hcas.append(UnnamedHca(found.guid, name, switch_names.get(leaf, leaf), port))
    hcas.sort(key=lambda h: (h.name, h.guid))
    return UnnamedNode(plan.node, (plan.low[0], plan.high[0]), tuple(hcas))


def find_unnamed(
    fabric: Fabric,
    hosts: HostAttachments,
    missing: Sequence[str],
    switch_names: Mapping[str, str],
) -> list[UnnamedNode]:
    """Missing Slurm nodes whose HCAs sit, unnamed, where their neighbours' cabling puts them.

    For each missing ``<prefix><n>``, the two nearest placed nodes of the same name family
    fix a port per leaf they share (linear in the node number); every such port holding an
    HCA excluded for naming no host is a match, named ``<node> <hca>`` after the neighbour's
    HCA on that leaf. A node with no match is left out of the result.
    """
    if not missing or not any(ex.reason in UNNAMED_REASONS for ex in hosts.exclusions):
        return []
    plans = _plans(missing, hosts.rails)
    siblings = {name for tries in plans for plan in tries for name in (plan.low[0], plan.high[0])}
    positions = _Positions(fabric, hosts, siblings)
    out = []
    for tries in plans:
        matches = (_match(plan, positions, switch_names) for plan in tries)
        found = next((match for match in matches if match.hcas), None)
        if found is not None:
            out.append(found)
    return out
