"""Who is cabled to whom, computed in one pass over the links.

Naming needs each HCA's leaf switches and the tree needs switch-to-switch neighbours; a 16k-node
fabric has ~400k links, so both come from a single loop instead of one loop each, and the
common case (one cabled port per CA) is folded into a dict in C afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from topograph_slurm.model import Fabric


@dataclass(slots=True)
class Adjacency:
    """``ca_leaves[ca]``: the switches the CA's ports are cabled to, in port order;
    ``neighbours[switch]``: the other switches it is cabled to (self-loops left out)."""

    ca_leaves: dict[str, list[str]]
    neighbours: dict[str, set[str]]


def adjacency(fabric: Fabric) -> Adjacency:
    """Index the fabric's links by device kind."""
    switches, cas = fabric.switches, fabric.cas
    neighbours: dict[str, set[str]] = {guid: set() for guid in switches}
    ca_ends: list[str] = []
    ports: list[int] = []
    leaves: list[str] = []
    end, port, leaf = ca_ends.append, ports.append, leaves.append
    for a, a_port, b, b_port, _, _ in fabric.links:  # unpacking beats attribute access
        if a in switches:
            if b in switches:
                if a != b:
                    neighbours[a].add(b)
                    neighbours[b].add(a)
            elif b in cas:
                end(b)
                port(b_port)
                leaf(a)
        elif b in switches and a in cas:
            end(a)
            port(a_port)
            leaf(b)
    return Adjacency(_leaves_by_ca(ca_ends, ports, leaves), neighbours)


def _leaves_by_ca(cas: list[str], ports: list[int], leaves: list[str]) -> dict[str, list[str]]:
    """Each CA's switches in port order. Nearly every CA has one cabled port (one HCA per
    rail), which a dict built in C handles; dual-port CAs need the sort."""
    single = dict(zip(cas, map(list, zip(leaves)), strict=True))
    if len(single) == len(cas):
        return single
    by_ca: dict[str, list[str]] = {}
    for ca, _, switch in sorted(zip(cas, ports, leaves, strict=True)):
        by_ca.setdefault(ca, []).append(switch)
    return by_ca


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
