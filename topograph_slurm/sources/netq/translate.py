"""NetQ's topology graph → the :class:`Fabric` ibnetdiscover and UFM give.

A switch (``device_type: switch``) is a :class:`Switch` named by its NetQ name; every other
device is a host, and each of its interfaces that a cable reaches (``ens1f0np1``) is a
:class:`Ca` described ``<host> <interface>``, as an HCA's node description reads, so naming
makes the host the Slurm node and the interface its rail. A compounded link is its parallel
cables, one :class:`Link` each. Ethernet has no GUIDs: a device's key is a stable 64-bit hash
of its name (and interface), in the GUID normal form. Ports are numbers: Cumulus ``swpN`` is
``N*100``, its breakout ``swpNsM`` ``N*100+M+1`` (so ``swp17s0`` reads as port 1701); other
switch interfaces follow, in natural order, from 100,000; a host interface is port 1 of its
own CA. NetQ's graph carries no link rates, so every cable is unrated (``???``): the
degraded-link check judges nothing here, and a note says so.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from topograph_slurm.model.fabric import Ca, Fabric, Link, Note, Switch
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.rates import UNKNOWN
from topograph_slurm.sources.netq.schema import Cable, Device, Graph, GraphLink, Interface
from topograph_slurm.sources.ufm.schema import JsonText, decode_list

_SWP = re.compile(r"swp([0-9]{1,4})(?:s([0-9]{1,2}))?")
#: Where switch interfaces that are not ``swpN[sM]`` are numbered from.
OTHER_PORTS = 100_000


def device_key(*parts: str) -> str:
    """A stable GUID-form key (16 hex digits) for a device without a GUID."""
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=8).hexdigest()


def switch_port(name: str) -> int | None:
    """``swp17`` → 1700, ``swp17s0`` → 1701; None for any other interface name."""
    match = _SWP.fullmatch(name)
    if match is None:
        return None
    base = int(match.group(1)) * 100
    return base if match.group(2) is None else base + int(match.group(2)) + 1


@dataclass(slots=True)
class _Build:
    source: str
    fabric: Fabric
    devices: dict[str, Device] = field(default_factory=dict)
    #: (switch key, interface) → port, for interfaces not named swpN[sM]
    others: dict[str, dict[str, int]] = field(default_factory=dict)


def fabric_from_netq(graphs: Iterable[JsonText], source: str = "netq") -> Fabric:
    """Every premises' topology graph as one Fabric; a wrong shape is a ParseError naming the
    answer, the entry and the field."""
    st = _Build(source, Fabric(source=source))
    cables: list[tuple[Interface, Interface]] = []
    for index, text in enumerate(graphs):
        for graph in decode_list(text, f"{source}[{index}]", Graph):
            _read_devices(st, graph)
            cables.extend(_cables(graph.links))
    _number_other_ports(st, cables)
    seen: set[Link] = set()
    for a, b in cables:
        _add_cable(st, a, b, seen)
    if st.fabric.links:
        st.fabric.notes.append(
            Note("unrated", "links", "NetQ's topology graph gives no link rates: none is judged")
        )
    return st.fabric


def _read_devices(st: _Build, graph: Graph) -> None:
    for tier in graph.nodes:
        for device in tier.compounded_nodes:
            st.devices[device.id] = device
            if device.device_type == "switch":
                key = device_key(device.name)
                st.fabric.switches.setdefault(key, Switch(key, device.name))


def _cables(links: list[GraphLink]) -> Iterator[tuple[Interface, Interface]]:
    """Each cable's two ends: the compounded ones, else the link's own."""
    for link in links:
        for cable in link.compounded_links or [Cable(link.interfaces, link.id)]:
            if len(cable.interfaces) == 2:
                yield cable.interfaces[0], cable.interfaces[1]


def _number_other_ports(st: _Build, cables: list[tuple[Interface, Interface]]) -> None:
    names: dict[str, set[str]] = {}
    for end in (end for cable in cables for end in cable):
        device = st.devices.get(end.node)
        if device is not None and device.device_type == "switch":
            names.setdefault(device.name, set()).add(end.interface)
    st.others = other_ports(names)


def other_ports(names: dict[str, set[str]]) -> dict[str, dict[str, int]]:
    """Per switch, a number for each interface not named ``swpN[sM]``: from OTHER_PORTS, in
    natural order, so the numbering does not depend on the order a source lists them in."""
    out: dict[str, dict[str, int]] = {}
    for switch, interfaces in names.items():
        ordered = sorted((n for n in interfaces if switch_port(n) is None), key=natural_key)
        out[switch] = {name: OTHER_PORTS + i for i, name in enumerate(ordered)}
    return out


def port_number(switch: str, name: str, others: dict[str, dict[str, int]]) -> int:
    """The port number of a switch interface (``swpN[sM]``, else from :func:`other_ports`)."""
    port = switch_port(name)
    return port if port is not None else others[switch][name]


def _end(st: _Build, end: Interface) -> tuple[str, int] | None:
    """A cable end as (key, port); None (with a note) for a device the graph does not list."""
    device = st.devices.get(end.node)
    if device is None:
        st.fabric.notes.append(
            Note("dangling", end.node, "a cable ends at this graph id, which no tier lists")
        )
        return None
    if device.device_type == "switch":
        return device_key(device.name), port_number(device.name, end.interface, st.others)
    key = device_key(device.name, end.interface)
    st.fabric.cas.setdefault(key, Ca(key, f"{device.name} {end.interface}", 1))
    return key, 1


def _add_cable(st: _Build, a: Interface, b: Interface, seen: set[Link]) -> None:
    ends = _end(st, a), _end(st, b)
    if ends[0] is None or ends[1] is None:
        return
    link = Link.between(*ends[0], *ends[1], "", UNKNOWN)
    if link in seen:
        return
    seen.add(link)
    st.fabric.links.append(link)


__all__ = [
    "OTHER_PORTS",
    "device_key",
    "fabric_from_netq",
    "other_ports",
    "port_number",
    "switch_port",
]
