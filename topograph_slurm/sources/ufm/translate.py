"""UFM JSON → the :class:`Fabric` model, exactly as the ibnetdiscover parser would build it.

UFM shapes (REST API guide 6.x, checked against UFM sample responses):

* ``resources/systems``: one entry per *system* (a switch chassis, or a host with all its HCAs):
  ``system_guid``, ``guid``, ``system_name``, ``type`` (``switch``/``host``/…), ``model``,
  ``description``, ``ports`` (``<node guid>_<port>`` names);
* ``resources/ports``: one entry per port: ``guid`` (the node GUID), ``number``, ``name``,
  ``node_description`` (an HCA's real node description; ``<switch>:<port label>`` for switches),
  ``description`` (``Switch IB Port`` / ``Computer IB Port``), ``systemID``, ``system_name``,
  ``lid``, ``active_speed`` (``HDR``), ``active_width`` (``4x``), ``peer`` (``<guid>_<port>``);
* ``resources/links``: one entry per cable: ``source_guid``/``source_port``,
  ``destination_guid``/``destination_port``, ``width``, ``severity``, port node descriptions —
  but no speed, which therefore comes from the ports;
* ``app/unhealthy_ports``: ``UnhealthyGUID``, ``UnhealthyPortNumber``, ``UnhealthyNode``,
  ``Condition``, ``State``, ``StatusTime``, ``PeerNode``, ``PeerPortNumber``.

Switch descriptions: ibnetdiscover shows a Mellanox switch as ``MF0;<name>:<model>/U1`` and
naming takes ``<name>``; UFM splits that into ``system_name`` and ``model``, so the description
is rebuilt in that form and both sources give every switch the same Slurm name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from topograph_slurm.errors import ParseError
from topograph_slurm.model import rates
from topograph_slurm.model.fabric import Ca, Fabric, Link, Links, Note, Switch, normalize_guid
from topograph_slurm.sources.ufm.responses import UfmResponses, json_type, load_list

# Per-lane signalling rates (Gb/s) some UFM versions print instead of names.
_LANE_RATES = {
    2.5: "SDR",
    5.0: "DDR",
    10.0: "QDR",
    10.3125: "FDR10",
    14.0: "FDR",
    14.0625: "FDR",
    25.0: "EDR",
    25.78125: "EDR",
    50.0: "HDR",
    53.125: "HDR",
    100.0: "NDR",
    106.25: "NDR",
    200.0: "XDR",
    212.5: "XDR",
}
_UNKNOWN = {"", "n/a", "na", "unknown", "none", "?", "???", "-"}
_RATE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(g|gb|gbps|gb/s)?\s*$", re.IGNORECASE)
_SIMPLE_NAME = re.compile(r"^[^\s:;]+$")
_AGGREGATION = re.compile(r"aggregation node", re.IGNORECASE)


def ufm_speed(text: object, width: str = "") -> str:
    """UFM's ``active_speed`` as ibnetdiscover names it: ``HDR`` stays; a number is read as
    the port rate first (``200 Gb/s`` at *width* ``4x`` is HDR, as ibstat prints rates), else
    as a lane rate (``53.125 Gbps`` is HDR); unknown is ``???``."""
    raw = str(text if text is not None else "").strip()
    if raw.lower() in _UNKNOWN:
        return "???"
    upper = raw.upper()
    if upper in rates.KNOWN_SPEEDS:
        return upper
    m = _RATE_RE.match(raw)
    if m:
        rate, lanes = float(m.group(1)), rates.lanes(width)
        if lanes and rate / lanes in _LANE_RATES:  # a port rate, as ibstat prints it
            return _LANE_RATES[rate / lanes]
        if rate in _LANE_RATES:
            return _LANE_RATES[rate]
    return upper


def ufm_width(text: object) -> str:
    """``4x`` / ``4X`` / ``x4`` / ``4`` → ``4x``; unknown → ``???`` (as ibnetdiscover prints)."""
    raw = str(text if text is not None else "").strip().lower()
    digits = raw.strip("x")
    return f"{int(digits)}x" if digits.isdigit() else "???"


@dataclass(slots=True)
class _Port:
    guid: str
    number: int
    switch: bool
    description: str  # node description of a CA port; unused for switch ports
    system: str  # system guid the port belongs to
    lid: int | None
    speed: str
    width: str
    peer: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class _System:
    guid: str
    type: str
    name: str
    model: str


@dataclass(slots=True)
class _Build:
    """Parse state: decoded responses plus the fabric under construction."""

    source: str
    systems: dict[str, _System] = field(default_factory=dict)
    ports: dict[tuple[str, int], _Port] = field(default_factory=dict)
    fabric: Fabric = field(default_factory=Fabric)
    mismatches: int = 0
    first_mismatch: str = ""


def fabric_from_ufm(responses: UfmResponses, source: str = "") -> Fabric:
    """Build the :class:`Fabric` the ibnetdiscover parser would build for the same fabric.

    Switches and CAs come from the ports (one node GUID each; a director chassis is many switch
    ASICs, a host many HCAs), named from their systems; cables from the links, with speed from
    the ports at both ends (the slower wins); unhealthy ports become ``unhealthy-port`` notes.
    Malformed responses raise ParseError naming the endpoint and entry.
    """
    st = _Build(source or responses.url or "ufm")
    st.fabric.source = st.source
    for entry, where in _entries(responses.systems, st.source, "systems"):
        _add_system(st, entry, where)
    for entry, where in _entries(responses.ports, st.source, "ports"):
        _add_port(st, entry, where)
    _add_devices(st)
    cables: dict[tuple[str, int, str, int], Link] = {}
    for entry, where in _entries(responses.links, st.source, "links"):
        link = _link(st, entry, where)
        cables.setdefault((link.a_guid, link.a_port, link.b_guid, link.b_port), link)
    _add_port_only_cables(st, cables)
    st.fabric.links = Links.of(
        sorted(cables.values(), key=lambda k: (k.a_guid, k.a_port, k.b_guid, k.b_port))
    )
    _note_isolated(st)
    if st.mismatches:
        st.fabric.notes.append(
            Note(
                "link-mismatch",
                "",
                f"{st.mismatches} cable(s) reported with different speeds at their two ends; "
                f"the slower was kept (first: {st.first_mismatch})",
            )
        )
    for entry, where in _entries(responses.unhealthy_ports, st.source, "unhealthy_ports"):
        st.fabric.notes.append(_unhealthy_note(entry, where))
    if not st.fabric.switches and not st.fabric.cas:
        raise ParseError("UFM reports no InfiniBand devices", None, st.source)
    return st.fabric


def _entries(text: str, source: str, key: str) -> Iterator[tuple[dict[str, Any], str]]:
    data = load_list(text, f"{source}/{key}")
    for index, entry in enumerate(data):
        where = f"{source}/{key}[{index}]"
        if not isinstance(entry, dict):
            raise ParseError(f"entry is a JSON {json_type(entry)}, not an object", None, where)
        yield entry, where


def _field(entry: Mapping[str, Any], where: str, *names: str) -> Any:
    """The first present field of *names*; missing → ParseError (unexpected schema)."""
    for name in names:
        if name in entry and entry[name] is not None:
            return entry[name]
    raise ParseError(f"missing field {names[0]!r} (not a UFM response?)", None, where)


def _guid(value: object, where: str) -> str:
    try:
        return normalize_guid(str(value))
    except ValueError:
        raise ParseError(f"bad GUID {value!r}", None, where) from None


def _int(value: object, where: str, what: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise ParseError(f"bad {what} {value!r}", None, where) from None


def _lid(value: object) -> int | None:
    try:
        lid = int(str(value).strip())
    except ValueError:
        return None
    return None if lid in (0, 0xFFFF) else lid


def _add_system(st: _Build, entry: Mapping[str, Any], where: str) -> None:
    system = _system(entry, where)
    st.systems[system.guid] = system


def _system(entry: Mapping[str, Any], where: str) -> _System:
    """The fields of one ``resources/systems`` entry that topology cares about."""
    guid = _guid(_field(entry, where, "system_guid", "guid"), where)
    kind = str(_field(entry, where, "type")).strip().lower()
    name = str(entry.get("system_name") or "").strip()
    model = str(entry.get("model") or entry.get("description") or "").strip()
    return _System(guid, kind, name, model)


def _add_port(st: _Build, entry: Mapping[str, Any], where: str) -> None:
    name = str(entry.get("name") or "")
    guid_raw = entry.get("guid") or name.rpartition("_")[0]
    if not guid_raw:
        raise ParseError("missing field 'guid' (not a UFM response?)", None, where)
    guid = _guid(guid_raw, where)
    number_raw = entry.get("number", name.rpartition("_")[2] if "_" in name else None)
    if number_raw is None:
        raise ParseError("missing field 'number' (not a UFM response?)", None, where)
    number = _int(number_raw, where, "port number")
    system = _guid(entry["systemID"], where) if entry.get("systemID") else guid
    width = ufm_width(entry.get("active_width"))
    port = _Port(
        guid=guid,
        number=number,
        switch=_is_switch_port(st, entry, system),
        description=str(entry.get("node_description") or ""),
        system=system,
        lid=_lid(entry.get("lid")),
        speed=ufm_speed(entry.get("active_speed"), width),
        width=width,
        peer=_peer(entry.get("peer")),
    )
    st.ports[(guid, number)] = port


def _peer(value: object) -> tuple[str, int] | None:
    """``<guid>_<port>`` → (guid, port); ``N/A``, empty or odd values → None."""
    guid, sep, number = str(value or "").strip().rpartition("_")
    if not sep or not number.isdigit():
        return None
    try:
        return normalize_guid(guid), int(number)
    except ValueError:
        return None


def _is_switch_port(st: _Build, entry: Mapping[str, Any], system: str) -> bool:
    """The port's own ``description`` (``Switch IB Port``) decides; without one, its system's
    type. A SHARP aggregation node sits inside a switch but is a CA: were it taken for a switch
    it would share the switch's name and rename both to ``sw-<guid>``."""
    if _AGGREGATION.search(str(entry.get("node_description") or "")):
        return False
    desc = str(entry.get("description") or "").lower()
    if desc:
        return "switch" in desc
    sys = st.systems.get(system)
    return sys is not None and sys.type == "switch"


def _switch_description(st: _Build, system_guid: str, guid: str) -> str:
    """``MF0;<name>:<model>/U1`` as the switch itself reports it, so naming matches ibnetdiscover.

    A name with blanks is kept as is (ibnetdiscover's naming ignores multi-word descriptions);
    an unnamed switch (UFM then uses the GUID as name) gets an empty description."""
    sys = st.systems.get(system_guid)
    if sys is None:
        return ""
    name = sys.name
    if not name or _is_guid_text(name, guid, system_guid):
        return ""
    if sys.model and _SIMPLE_NAME.match(name):
        return f"MF0;{name}:{sys.model}/U1"
    return name


def _is_guid_text(name: str, *guids: str) -> bool:
    try:
        return normalize_guid(name) in guids
    except ValueError:
        return False


def _add_devices(st: _Build) -> None:
    """One Switch or Ca per node GUID seen in the ports (port count = highest port number),
    plus switch systems that listed no port at all."""
    fab = st.fabric
    for (guid, number), port in sorted(st.ports.items()):
        if port.switch:
            sw = fab.switches.get(guid)
            if sw is None:
                desc = _switch_description(st, port.system, guid)
                fab.switches[guid] = Switch(guid, desc, number, port.lid)
            else:
                sw.nports = max(sw.nports, number)
                sw.lid = sw.lid if sw.lid is not None else port.lid
        else:
            ca = fab.cas.get(guid)
            if ca is None:
                fab.cas[guid] = Ca(guid, port.description, number)
            else:
                ca.nports = max(ca.nports, number)
    with_ports = {port.system for port in st.ports.values()}
    for guid, sys in st.systems.items():
        if sys.type == "switch" and guid not in with_ports and fab.kind_of(guid) is None:
            fab.switches[guid] = Switch(guid, _switch_description(st, guid, guid), 0, None)


def _link(st: _Build, entry: Mapping[str, Any], where: str) -> Link:
    a = _guid(_field(entry, where, "source_guid"), where)
    ap = _int(_field(entry, where, "source_port"), where, "source_port")
    b = _guid(_field(entry, where, "destination_guid"), where)
    bp = _int(_field(entry, where, "destination_port"), where, "destination_port")
    pa, pb = st.ports.get((a, ap)), st.ports.get((b, bp))
    width = ufm_width(entry.get("width") or (pa.width if pa else "") or (pb.width if pb else ""))
    speeds = [p.speed for p in (pa, pb) if p is not None]
    speed = speeds[0] if len(speeds) == 1 else rates.slower_speed(*speeds) if speeds else "???"
    if len(speeds) == 2 and speeds[0] != speeds[1]:
        if not st.mismatches:
            st.first_mismatch = f"{a}[{ap}]-{b}[{bp}] {speeds[0]} vs {speeds[1]}"
        st.mismatches += 1
    for guid, port, desc_key in ((a, ap, "source"), (b, bp, "destination")):
        if st.fabric.kind_of(guid) is None:
            _add_link_only_device(st, guid, port, entry, desc_key, where)
    return Link.between(a, ap, b, bp, width, speed)


def _add_port_only_cables(st: _Build, cables: dict[tuple[str, int, str, int], Link]) -> None:
    """Cables both of whose ports name each other as peer but that the links endpoint left
    out (UFM lists only some link states there): added, with one summary Note."""
    added = 0
    for (guid, number), port in sorted(st.ports.items()):
        if port.peer is None or st.fabric.kind_of(port.peer[0]) is None:
            continue
        link = Link.between(guid, number, *port.peer, port.width, port.speed)
        key = (link.a_guid, link.a_port, link.b_guid, link.b_port)
        if key in cables:
            continue
        other = st.ports.get(port.peer)
        speed = rates.slower_speed(port.speed, other.speed) if other is not None else port.speed
        cables[key] = Link.between(guid, number, *port.peer, port.width, speed)
        added += 1
    if added:
        st.fabric.notes.append(
            Note(
                "ports-only-links",
                "",
                f"{added} cable(s) appear in UFM ports but not in UFM links; taken from the ports",
            )
        )


def _add_link_only_device(
    st: _Build, guid: str, port: int, entry: Mapping[str, Any], end: str, where: str
) -> None:
    """A link end with no port record: create it from what the link says, with a Note."""
    desc = str(entry.get(f"{end}_port_node_description") or "").strip()
    sys = st.systems.get(guid)
    dname = str(entry.get(f"{end}_port_dname") or port)
    is_switch = (sys is not None and sys.type == "switch") or desc.endswith(f":{dname}")
    if is_switch:
        sw_desc = _switch_description(st, guid, guid) if sys else desc.rpartition(":")[0]
        st.fabric.switches[guid] = Switch(guid, sw_desc, port, None)
    else:
        st.fabric.cas[guid] = Ca(guid, desc, port)
    st.fabric.notes.append(
        Note(
            "no-block",
            guid,
            f"{guid} ({desc!r}) appears only in UFM links ({where}); "
            "created from the link's node description",
        )
    )


def _note_isolated(st: _Build) -> None:
    linked = {g for link in st.fabric.links for g in (link.a_guid, link.b_guid)}
    for guid in sorted(set(st.fabric.switches) | set(st.fabric.cas)):
        if guid not in linked:
            st.fabric.notes.append(Note("isolated", guid, f"{guid} has no active link"))


def _unhealthy_note(entry: Mapping[str, Any], where: str) -> Note:
    guid = _guid(_field(entry, where, "UnhealthyGUID"), where)
    node = str(entry.get("UnhealthyNode") or guid)
    port = entry.get("UnhealthyPortNumber", entry.get("UnhealthyPort", "?"))
    condition = entry.get("Condition") or "?"
    if isinstance(condition, list):
        condition = ",".join(str(c) for c in condition)
    peer = entry.get("PeerNode")
    peer_text = f"; peer {peer} port {entry.get('PeerPortNumber', '?')}" if peer else ""
    since = f" since {entry['StatusTime']}" if entry.get("StatusTime") else ""
    return Note(
        "unhealthy-port",
        guid,
        f"{node} port {port} is marked unhealthy in UFM ({condition}, "
        f"{entry.get('State', '?')}){since}{peer_text}",
    )
