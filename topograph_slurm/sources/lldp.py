"""LLDP from every node: ``lldpcli -f json0 show neighbors details`` → each host NIC's switch
(the neighbour's chassis name) and port, the leaf layer of an Ethernet/RoCE fabric.

json0 is lldpd's JSON whose structure does not change with the number of interfaces or
neighbours: every element is a list of objects, and a plain value is ``{"value": …}``
(``{"lldp": [{"interface": [{"name": "eth0", "chassis": [{"name": [{"value": "leaf1"}]}],
"port": [{"id": [{"type": "ifname", "value": "swp4s1"}]}]}]}]}``); the default ``json``
folds one-element lists away, so one neighbour and two read differently.

A host's LLDP shows the switches its NICs are cabled to, never what those switches are cabled
to: the fabric built here has the leaves and nothing above them. It says so (a
``tiers-unknown`` finding) rather than guessing; switch-side LLDP or NetQ (``--netq``) show
the upper tiers. Devices are keyed and ports numbered as the NetQ translation does, so one
switch reads the same from both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from topograph_slurm.errors import ParseError
from topograph_slurm.model.fabric import Ca, Fabric, Link, Switch
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.rates import UNKNOWN
from topograph_slurm.model.result import Finding
from topograph_slurm.sources.netq.translate import device_key, other_ports, port_number
from topograph_slurm.sources.ufm.schema import decode_list

_T = TypeVar("_T")

#: The snapshot key of a node's LLDP output (``nodes/<node>/lldp.txt``) and its command.
KEY_LLDP = "lldp"
LLDP_COMMAND: tuple[str, ...] = ("lldpcli", "-f", "json0", "show", "neighbors", "details")


class Value(msgspec.Struct, frozen=True):
    value: str = ""


class TypedValue(msgspec.Struct, frozen=True):
    type: str = ""
    value: str = ""


class Capability(msgspec.Struct, frozen=True):
    type: str = ""
    enabled: bool = False


class Chassis(msgspec.Struct, frozen=True):
    id: list[TypedValue] = []
    name: list[Value] = []
    capability: list[Capability] = []


class Port(msgspec.Struct, frozen=True):
    id: list[TypedValue] = []
    descr: list[Value] = []


class Interface(msgspec.Struct, frozen=True):
    """One local interface and the neighbour heard on it."""

    name: str
    chassis: list[Chassis] = []
    port: list[Port] = []


class Neighbours(msgspec.Struct, frozen=True):
    interface: list[Interface] = []


class Output(msgspec.Struct, frozen=True):
    lldp: list[Neighbours] = []


@dataclass(frozen=True, slots=True)
class HostLink:
    """One host NIC and the switch port it is cabled to, as LLDP heard it."""

    node: str
    nic: str
    switch: str
    port: str


def parse_lldp(text: str, node: str, source: str = "") -> list[HostLink]:
    """A node's json0 output as its NICs' switch ports. A neighbour that says it is neither
    a bridge nor a router (a host cabled back to back) is no switch and is left out; one
    without a system name is named by its chassis id. A wrong shape is one ParseError."""
    where = source or f"{node}:{KEY_LLDP}"
    (output,) = decode_list(f"[{text}]", where, Output) if text.strip() else (Output(),)
    links = []
    for iface in (i for block in output.lldp for i in block.interface):
        chassis, port = _first(iface.chassis), _first(iface.port)
        if chassis is None or port is None or not _is_switch(chassis):
            continue
        switch = _value(chassis.name) or _value(chassis.id)
        name = _port_name(port)
        if not switch or not name:
            raise ParseError(
                f"interface {iface.name!r}: a neighbour without a name or port", None, where
            )
        links.append(HostLink(node, iface.name, switch, name))
    return links


def fabric_from_lldp(
    outputs: Mapping[str, str], source: str = "lldp"
) -> tuple[Fabric, list[Finding]]:
    """Every node's LLDP output as the leaf layer of one fabric, and the findings: a node
    whose output cannot be read or shows no switch (not read), and what LLDP from the hosts
    cannot show (``tiers-unknown``)."""
    links: list[HostLink] = []
    findings: list[Finding] = []
    for node in sorted(outputs, key=natural_key):
        try:
            found = parse_lldp(outputs[node], node)
        except ParseError as err:
            findings.append(Finding(FindingKind.COLLECT_PARSE_ERROR, node, f"{KEY_LLDP}: {err}"))
            continue
        if not found:
            findings.append(
                Finding(
                    FindingKind.COLLECT_MISSING, node, f"{KEY_LLDP}: no switch heard on any NIC"
                )
            )
        links += found
    fabric = _fabric(links, source)
    if fabric.switches:
        findings.append(_tiers_unknown(fabric))
    return fabric, findings


def _fabric(links: list[HostLink], source: str) -> Fabric:
    names: dict[str, set[str]] = {}
    for link in links:
        names.setdefault(link.switch, set()).add(link.port)
    others = other_ports(names)
    fabric = Fabric(source=source)
    for link in links:
        switch, nic = device_key(link.switch), device_key(link.node, link.nic)
        fabric.switches.setdefault(switch, Switch(switch, link.switch))
        fabric.cas.setdefault(nic, Ca(nic, f"{link.node} {link.nic}", 1))
        port = port_number(link.switch, link.port, others)
        fabric.links.append(Link.between(nic, 1, switch, port, "", UNKNOWN))
    return fabric


def _tiers_unknown(fabric: Fabric) -> Finding:
    count = len(fabric.switches)
    return Finding(
        FindingKind.TIERS_UNKNOWN,
        "fabric",
        f"LLDP from the hosts shows {count} leaf switch{'es' if count != 1 else ''} and "
        "nothing above them: the spine and super-spine tiers are unknown, so the leaves read "
        "as unjoined; give --netq, or LLDP from the switches, for the upper tiers",
    )


def _first(items: list[_T]) -> _T | None:
    return items[0] if items else None


def _value(items: list[Value] | list[TypedValue]) -> str:
    return items[0].value.strip() if items else ""


def _is_switch(chassis: Chassis) -> bool:
    """No capabilities said: taken as a switch (a host NIC's neighbour usually is one)."""
    said = {c.type for c in chassis.capability}
    on = {c.type for c in chassis.capability if c.enabled}
    return not said or bool(on & {"Bridge", "Router"})


def _port_name(port: Port) -> str:
    """The switch's interface name: the port id when it is one (``ifname``), else the port
    description (Cumulus puts the name there when the id is a MAC), else the id."""
    ident = _first(port.id)
    if ident is not None and ident.type == "ifname" and ident.value.strip():
        return ident.value.strip()
    return _value(port.descr) or _value(port.id)
