"""Rail alignment inside a unit: every node's HCA k on the unit's rail-k leaf.

A rail-optimised unit (a DGX SuperPOD scalable unit) has one leaf switch per rail, and NCCL's
rail-aligned collectives send HCA k's traffic of every node through rail k's leaf. Two cables of
one node exchanged between two rails' leaves of its own unit leave every signature, logical
leaf and block as they were, so the rail vote (:mod:`.leaf`) sees nothing; yet every
collective through that node then crosses rails at the spine. The fabric alone shows it: the
HCA named ``mlx5_0`` of every node of the unit sits on one leaf but this node's.

A rail is an HCA name of the unit's nodes; its leaf is the leaf of the unit holding a strict
majority of the HCAs of that name, at least two. Inside a unit a tie cannot decide (two of
four nodes with their cables swapped), so then the fabric does: leaves whose names end in the
same number (``su1-LEAF-R0``, ``su2-LEAF-R0``) are one rail's leaves in every unit, and the HCA
name holding a strict majority of that rail's HCAs over the whole fabric is the rail's name;
the unit's one leaf with that number is then its leaf. No such number (one a unit's leaves
share, or none at all), no claim. A unit is judged only when it is rail-optimised:
most of its nodes have each HCA in the unit on a leaf of its own (not several HCAs per leaf).
HCAs whose name a node repeats (a dual-port HCA, a description naming no HCA), cabled to
another unit's leaf (a rail disagreement, found by :mod:`.leaf`) or whose rail has no leaf are
not judged. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from itertools import chain
from operator import itemgetter

from topograph_slurm.analysis.fabric.naming import HcaNames
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.result import Finding, LeafGroup

_HCA, _LEAF = itemgetter(0), itemgetter(1)  # of a rail (hca guid, leaf switch guid)
_LAST_NUMBER = re.compile(r"\d+")


def _by_name(item: tuple[str, tuple[str, str]]) -> tuple[tuple[str | int, ...], str]:
    """A node's HCAs in natural name order (``mlx5_2`` before ``mlx5_10``)."""
    return natural_key(item[0])


#: A node's HCAs in its unit by name: name -> (hca guid, leaf switch guid)
Placed = dict[str, tuple[str, str]]


def _placed(
    node_rails: list[tuple[str, str]], unit: set[str], hca_names: Mapping[str, str | None]
) -> Placed:
    """The node's HCAs on the unit's leaves whose name the node carries once."""
    named = [(hca_names.get(hca), hca, leaf) for hca, leaf in node_rails]
    counts = Counter(name for name, _, _ in named)
    return {
        name: (hca, leaf)
        for name, hca, leaf in named
        if name is not None and counts[name] == 1 and leaf in unit
    }


def _rail_optimised(placed: Mapping[str, Placed]) -> bool:
    """Most nodes have each of their HCAs in the unit on a leaf of its own."""
    own = sum(len({leaf for _, leaf in held.values()}) == len(held) > 1 for held in placed.values())
    return 2 * own > len(placed)


def _rail_leaves(placed: Mapping[str, Placed]) -> dict[str, str]:
    """Each rail (HCA name) with the leaf holding a strict majority (at least two) of its HCAs."""
    votes: dict[str, Counter[str]] = {}
    for held in placed.values():
        for name, (_hca, leaf) in held.items():
            votes.setdefault(name, Counter())[leaf] += 1
    return _majorities(votes)


def _majorities(votes: Mapping[str, Counter[str]]) -> dict[str, str]:
    """Each key with the value holding a strict majority (at least two) of its votes."""
    won = {}
    for key, counted in votes.items():
        ((value, most),) = counted.most_common(1)
        if most >= 2 and 2 * most > counted.total():
            won[key] = value
    return won


def _rail_number(switch: str) -> str | None:
    """The last number of a leaf switch's name (``su1-LEAF-R0`` → ``0``), None without one."""
    found = _LAST_NUMBER.findall(switch)
    return (found[-1].lstrip("0") or "0") if found else None


def _fabric_rails(
    rails: Mapping[str, list[tuple[str, str]]],
    hca_names: HcaNames,
    switch_names: Mapping[str, str],
) -> dict[str, str]:
    """Each rail number with the HCA name holding a strict majority (at least two) of the
    HCAs on leaves of that number, over the whole fabric."""
    held = list(chain.from_iterable(rails.values()))
    votes: dict[str, Counter[str]] = {}
    for name, leaf in zip(hca_names(list(map(_HCA, held))), map(_LEAF, held), strict=True):
        number = _rail_number(switch_names.get(leaf, leaf))
        if number is not None and name is not None:
            votes.setdefault(number, Counter())[name] += 1
    return _majorities(votes)


def _ties_by_rail_number(
    leaf_of: dict[str, str],
    group: LeafGroup,
    fabric_rails: Mapping[str, str],
    switch_names: Mapping[str, str],
) -> dict[str, str]:
    """*leaf_of* with the rails the unit's own votes left open taken from the fabric: the
    unit's one leaf whose number the fabric gives that HCA name (none when the unit's leaves
    share a number)."""
    numbers = Counter(_rail_number(switch_names.get(leaf, leaf)) for leaf in group.switches)
    decided = dict(leaf_of)
    for leaf in group.switches:
        number = _rail_number(switch_names.get(leaf, leaf))
        name = fabric_rails.get(number) if number is not None else None
        if name is not None and numbers[number] == 1:
            decided.setdefault(name, leaf)
    return decided


def _names_to_judge(
    group: LeafGroup, rails: Mapping[str, list[tuple[str, str]]], hca_names: HcaNames
) -> dict[str, str | None] | None:
    """The names of the unit's nodes' HCAs by GUID; None when every name is on one leaf:
    nothing to judge (the usual unit, told a column at a time: a 16k-node fabric has 131k
    HCAs)."""
    held = list(chain.from_iterable(map(rails.__getitem__, group.nodes)))
    hcas = list(map(_HCA, held))
    names = hca_names(hcas)
    if len(set(zip(names, map(_LEAF, held), strict=True))) == len(set(names)):
        return None
    return dict(zip(hcas, names, strict=True))


def misaligned_rails(
    groups: list[LeafGroup],
    rails: Mapping[str, list[tuple[str, str]]],
    hca_names: HcaNames,
    switch_names: Mapping[str, str],
) -> list[Finding]:
    """A ``rail-misaligned`` finding for every node of a rail-optimised unit with an HCA on
    another rail's leaf of the unit, naming each such HCA, its leaf and its rail's leaf.

    *hca_names* names HCAs (``mlx5_0``; see :func:`.naming.hca_names`); an HCA it does not
    name is not judged.
    """
    findings = []
    fabric_rails: dict[str, str] | None = None  # rail number -> HCA name, read when needed
    for group in groups:
        names = _names_to_judge(group, rails, hca_names) if len(group.switches) > 1 else None
        if names is None:
            continue
        unit = set(group.switches)
        placed = {node: _placed(rails[node], unit, names) for node in group.nodes}
        if not _rail_optimised(placed):
            continue
        leaf_of = _rail_leaves(placed)
        if len(leaf_of) < len({name for held in placed.values() for name in held}):
            if fabric_rails is None:
                fabric_rails = _fabric_rails(rails, hca_names, switch_names)
            leaf_of = _ties_by_rail_number(leaf_of, group, fabric_rails, switch_names)
        for node, held in placed.items():
            wrong = [
                (name, hca, leaf, leaf_of[name])
                for name, (hca, leaf) in sorted(held.items(), key=_by_name)
                if leaf_of.get(name, leaf) != leaf
            ]
            if wrong:
                findings.append(_misaligned(node, group.name, wrong, switch_names))
    return sorted(findings, key=lambda finding: finding.subject)


def _misaligned(
    node: str,
    unit: str,
    wrong: list[tuple[str, str, str, str]],
    switch_names: Mapping[str, str],
) -> Finding:
    def name(guid: str) -> str:
        return switch_names.get(guid, guid)

    hcas = "; ".join(
        f"{hca_name} ({hca}) is on {name(leaf)}, its rail's leaf is {name(rail)}"
        for hca_name, hca, leaf, rail in wrong
    )
    return Finding(
        FindingKind.RAIL_MISALIGNED,
        node,
        f"{hcas} (unit {unit}): rail-aligned collectives through the node cross rails; "
        "cable each HCA to its rail's leaf",
    )
