"""Who is cabled to whom, computed in one pass over the links.

Naming needs each HCA's leaf switches and the tree needs switch-to-switch neighbours; a 16k-node
fabric has ~400k links, so both come from a single loop instead of one loop each.
"""

from __future__ import annotations

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
    ca_ports: dict[str, list[tuple[int, str]]] = {}
    for link in fabric.links:
        a, b = link.a_guid, link.b_guid
        if a in switches:
            if b in switches:
                if a != b:
                    neighbours[a].add(b)
                    neighbours[b].add(a)
            elif b in cas:
                ca_ports.setdefault(b, []).append((link.b_port, a))
        elif b in switches and a in cas:
            ca_ports.setdefault(a, []).append((link.a_port, b))
    ca_leaves = {
        guid: [ports[0][1]] if len(ports) == 1 else [sw for _, sw in sorted(ports)]
        for guid, ports in ca_ports.items()
    }
    return Adjacency(ca_leaves, neighbours)
