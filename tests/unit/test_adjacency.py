"""Adjacency from link columns agrees with the plain definition, link by link."""

from __future__ import annotations

import pytest

from tests.conftest import real_dump_names, real_fixture
from topograph_slurm.analysis.fabric.adjacency import Adjacency, adjacency
from topograph_slurm.model.fabric import Fabric
from topograph_slurm.sources.ibnetdiscover import bulk, parse_ibnetdiscover, read_ibnetdiscover
from topograph_slurm.sources.sim import generate_ibnetdiscover, parse_sim_spec

_DUMPS = real_dump_names()


def _by_definition(fabric: Fabric) -> Adjacency:
    """One Link at a time: switch pairs are neighbours (not a switch with itself), a CA's
    switches are listed in the CA's port order."""
    neighbours: dict[str, set[str]] = {guid: set() for guid in fabric.switches}
    cabled: dict[str, list[tuple[int, str]]] = {}
    for link in fabric.links:
        ends = ((link.a_guid, link.a_port), (link.b_guid, link.b_port))
        switch_ends = [guid for guid, _ in ends if guid in fabric.switches]
        if len(switch_ends) == 2 and link.a_guid != link.b_guid:
            neighbours[link.a_guid].add(link.b_guid)
            neighbours[link.b_guid].add(link.a_guid)
        elif len(switch_ends) == 1:
            (ca, port), switch = (
                next(e for e in ends if e[0] not in fabric.switches),
                switch_ends[0],
            )
            cabled.setdefault(ca, []).append((port, switch))
    leaves = {ca: tuple(switch for _, switch in sorted(ports)) for ca, ports in cabled.items()}
    return Adjacency(leaves, neighbours)


@pytest.mark.parametrize("name", _DUMPS)
def test_real_dumps(name: str) -> None:
    fabric = read_ibnetdiscover(real_fixture(f"ibnetdiscover/{name}"))
    assert adjacency(fabric) == _by_definition(fabric)


def test_loops_are_not_neighbours() -> None:
    fabric = read_ibnetdiscover(
        real_fixture("ibnetdiscover/mellanox-ufm-lab-small-fdr-edr-hdr.txt")
    )
    loops = {link.a_guid for link in fabric.links if link.is_loop}
    assert loops, "the fixture has loop cables"
    neighbours = adjacency(fabric).neighbours
    assert all(guid not in neighbours[guid] for guid in loops)


@pytest.mark.parametrize("spec", ["nodes=64,rails=4,su=16,tiers=3", "nodes=32,rails=2,storage=1"])
def test_sim(spec: str) -> None:
    fabric = parse_ibnetdiscover(generate_ibnetdiscover(parse_sim_spec(spec)))
    assert adjacency(fabric) == _by_definition(fabric)


def test_end_kinds_from_the_source_give_the_same_adjacency() -> None:
    """The bulk parser says which far ends are switches; adjacency read that way is the one
    looked up end by end, and the one by definition."""
    text = generate_ibnetdiscover(parse_sim_spec("nodes=64,rails=4,su=16,tiers=3,storage=1"))
    fabric = bulk.parse(text, "sim")
    assert fabric is not None and fabric.links.b_switch is not None
    told = adjacency(fabric)
    fabric.links.b_switch = None
    assert told == adjacency(fabric) == _by_definition(fabric)
