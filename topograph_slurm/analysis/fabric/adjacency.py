"""Who is cabled to whom, read off the link columns.

Naming needs each HCA's leaf switches and the tree needs switch-to-switch neighbours; a 16k-node
fabric has ~400k links, so both come from C-level passes over whole columns (which ends are
switches, then ``compress`` and ``set.add`` mapped over the pairs), not a Python step per link.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import chain, compress
from operator import and_, gt, lt, not_

from topograph_slurm.model.fabric import Fabric, Links


@dataclass(slots=True)
class Adjacency:
    """``ca_leaves[ca]``: the switches the CA's ports are cabled to, in port order;
    ``neighbours[switch]``: the other switches it is cabled to (self-loops left out)."""

    ca_leaves: dict[str, tuple[str, ...]]
    neighbours: dict[str, set[str]]


def adjacency(fabric: Fabric) -> Adjacency:
    """Index the fabric's links by device kind. Every link end is a device of the fabric
    (each source creates the devices it sees only as peers), so an end that is not a switch
    is a CA."""
    links, switches = fabric.links, fabric.switches
    a_ca, b_ca, both = _end_kinds(links, switches)
    ends = (list(compress(links.a, both)), list(compress(links.b, both)))
    neighbours: dict[str, set[str]] = {guid: set() for guid in switches}
    for here, there in (ends, ends[::-1]):
        deque(map(set.add, map(neighbours.__getitem__, here), there), maxlen=0)
    for guid, peers in neighbours.items():  # loop cables: a handful, cheaper to undo than test
        peers.discard(guid)
    cas = list(chain(compress(links.a, a_ca), compress(links.b, b_ca)))
    ports = list(chain(compress(links.a_port, a_ca), compress(links.b_port, b_ca)))
    leaves = list(chain(compress(links.b, a_ca), compress(links.a, b_ca)))
    return Adjacency(_leaves_by_ca(cas, ports, leaves), neighbours)


def _end_kinds(
    links: Links, switches: Mapping[str, object]
) -> tuple[list[bool], list[bool], list[bool]]:
    """Per cable: whether only its a end is a CA, whether only its b end is, whether both ends
    are switches. Taken from the source's ``b_switch`` when it gives one (every a end a
    switch: no CA on that side), else looked up end by end."""
    if links.b_switch is not None:
        return [], list(map(not_, links.b_switch)), links.b_switch
    a_switch = list(map(switches.__contains__, links.a))
    b_switch = list(map(switches.__contains__, links.b))
    a_ca = list(map(lt, a_switch, b_switch))  # False < True: b is the switch, a the CA
    return a_ca, list(map(gt, a_switch, b_switch)), list(map(and_, a_switch, b_switch))


def _leaves_by_ca(
    cas: list[str], ports: list[int], leaves: list[str]
) -> dict[str, tuple[str, ...]]:
    """Each CA's switches in port order. Nearly every CA has one cabled port (one HCA per
    rail), which a dict built in C handles; dual-port CAs need the sort."""
    one_each: Iterable[tuple[str, ...]] = zip(leaves)
    single = dict(zip(cas, one_each, strict=True))
    if len(single) == len(cas):
        return single
    by_ca: dict[str, list[str]] = {}
    for ca, _, switch in sorted(zip(cas, ports, leaves, strict=True)):
        by_ca.setdefault(ca, []).append(switch)
    return {ca: tuple(switches) for ca, switches in by_ca.items()}


def components(neighbours: Mapping[str, set[str]]) -> dict[str, int]:
    """The connected component (subnet or island) of every switch, numbered in order of each
    component's smallest GUID. Breadth-first a level at a time, so each step is one C-level
    union of neighbour sets rather than a Python step per cable."""
    component: dict[str, int] = {}
    count = 0
    for start in sorted(neighbours):
        if start in component:
            continue
        seen, frontier = {start}, {start}
        while frontier:
            frontier = set().union(*map(neighbours.__getitem__, frontier)) - seen
            seen |= frontier
        component.update(dict.fromkeys(seen, count))
        count += 1
    return component
