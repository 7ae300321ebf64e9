"""The analysed fabric as the job-scoped commands read it, packed into the kept index
(:mod:`topograph_slurm.sources.fabric_index`) and read back.

:func:`build_index` packs a fabric's places (:class:`FabricMap`) and path facts
(:class:`PathFacts`) with units and rates numbered once; :func:`fabric_map_of` and
:func:`path_facts_of` give back exactly what they were built from, so a command reading the
index answers as it would after a fresh analysis.
"""

from __future__ import annotations

from collections.abc import Iterable

from topograph_slurm.analysis.placement.explain import PathFacts
from topograph_slurm.model.placement import FabricMap, NodePlace
from topograph_slurm.model.result import Finding, decode_finding
from topograph_slurm.sources.fabric_index import FabricIndex, KeptFinding, Stamp


class _Numbering(dict[tuple[str, str], int]):
    """Each distinct (level, unit) or (width, speed) pair numbered in first-seen order."""

    def number(self, pair: tuple[str, str]) -> int:
        found = self.get(pair)
        if found is None:
            found = self[pair] = len(self)
        return found

    def numbers(self, pairs: Iterable[tuple[str, str]]) -> list[int]:
        return [self.number(pair) for pair in pairs]


def build_index(fmap: FabricMap, facts: PathFacts, gpus_per_node: int, stamp: Stamp) -> FabricIndex:
    """The index of a fabric's places and path facts, stamped with what its source was."""
    units, rates = _Numbering(), _Numbering()
    nodes = list(fmap.places)
    places = [units.numbers(fmap.places[node].units) for node in nodes]
    for unit in fmap.unit_sizes:  # the fabric level, which no node's place names
        units.number(unit)
    rails = {node: rates.numbers(found) for node, found in facts.rails.items()}
    uplinks = {leaf: rates.numbers(found) for leaf, found in facts.uplinks.items()}
    return FabricIndex(
        stamp,
        fmap.source,
        list(fmap.levels),
        list(units),
        [fmap.unit_sizes.get(unit, -1) for unit in units],
        nodes,
        places,
        list(rates),
        rails,
        uplinks,
        [_kept(finding) for found in facts.problems.values() for finding in found],
        facts.nvlink_domains,
        gpus_per_node,
    )


def fabric_map_of(index: FabricIndex) -> FabricMap:
    """The places the index was built from."""
    units = index.units
    places = {
        node: NodePlace(node, tuple(units[i] for i in held))
        for node, held in zip(index.nodes, index.places, strict=True)
    }
    sizes = {unit: size for unit, size in zip(units, index.unit_sizes, strict=True) if size >= 0}
    return FabricMap(places, list(index.levels), sizes, index.source)


def path_facts_of(index: FabricIndex) -> PathFacts:
    """The path facts the index was built from."""
    rates = index.rates
    problems: dict[str, list[Finding]] = {}
    for kept in index.problems:
        problems.setdefault(kept.subject, []).append(_finding(kept))
    return PathFacts(
        {node: [rates[i] for i in held] for node, held in index.rails.items()},
        {leaf: [rates[i] for i in held] for leaf, held in index.uplinks.items()},
        problems,
        index.nvlink_domains,
    )


def _kept(finding: Finding) -> KeptFinding:
    return KeptFinding(
        str(finding.kind), finding.subject, finding.message, finding.level, finding.nodes
    )


def _finding(kept: KeptFinding) -> Finding:
    """A kept finding, its kind passed on as written (the index is this release's: a kind
    equals its catalogue member)."""
    fields = ("kind", "subject", "message", "level", "nodes")
    return decode_finding({name: getattr(kept, name) for name in fields})
