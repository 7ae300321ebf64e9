"""UFM JSON → the :class:`Fabric` model, exactly as the ibnetdiscover parser would build it.

UFM shapes (REST API guide 6.x, checked against real answers from NVIDIA's Selene kept in the
UFM SDK; the fields each endpoint must have, and their types, are :mod:`.schema`):

* ``resources/systems``: one entry per *system* (a switch chassis, or a host with all its HCAs):
  ``system_guid``, ``guid``, ``system_name``, ``type`` (``switch``/``host``/…), ``model``,
  ``description``, ``ports`` (``<node guid>_<port>`` names);
* ``resources/ports``: one entry per port: ``guid`` (the node GUID of its switch ASIC or HCA:
  a host system lists the ports of all its HCAs), ``number``, ``name``,
  ``node_description`` (an HCA's real node description; ``<switch>:<port label>`` for switches),
  ``description`` (``Switch IB Port`` / ``Computer IB Port``), ``systemID``, ``system_name``,
  ``lid``, ``active_speed`` (``HDR``), ``active_width`` (``4x``), ``peer`` (``<guid>_<port>``);
* ``resources/links``: one entry per cable: ``source_guid``/``source_port``,
  ``destination_guid``/``destination_port`` (as text), ``width``, ``severity``, port node
  descriptions — but no speed: a cable runs at the slower (width, speed) of its two ports;
* ``app/unhealthy_ports``: ``UnhealthyGUID``, ``UnhealthyPortNumber``, ``UnhealthyNode``,
  ``Condition``, ``State``, ``StatusTime``, ``PeerNode``, ``PeerPortNumber``.

Switch descriptions: ibnetdiscover shows a Mellanox switch as ``MF0;<name>:<model>/U1`` and
naming takes ``<name>``; UFM splits that into ``system_name`` and ``model``, so the description
is rebuilt in that form and both sources give every switch the same Slurm name.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import compress, count
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from topograph_slurm.errors import ParseError
from topograph_slurm.model import rates
from topograph_slurm.model.fabric import Ca, Fabric, Links, Note, Switch, normalize_guid
from topograph_slurm.model.numbers import natural
from topograph_slurm.sources.ibnetdiscover import fork
from topograph_slurm.sources.ufm import cables, schema
from topograph_slurm.sources.ufm.cables import CableKey
from topograph_slurm.sources.ufm.columns import (
    by_value,
    column,
    decode,
    guid_numbers,
    normal,
    port_ids,
    run_starts,
)
from topograph_slurm.sources.ufm.responses import UfmResponses
from topograph_slurm.sources.ufm.schema import JsonText

_SIMPLE_NAME = re.compile(r"^[^\s:;]+$")
_AGGREGATION = re.compile(r"aggregation node", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _System:
    guid: str
    type: str
    name: str
    model: str


@dataclass(frozen=True, slots=True)
class _Devices:
    """What the ports of one kind (switch or CA) say about their devices, by node GUID: the
    row of its lowest-numbered port (which names its system and description), its highest
    port number (the port count) and the first LID its ports give."""

    low: dict[str, int]
    high: dict[str, int]
    lid: dict[str, int]


@dataclass(slots=True)
class _Build:
    """Translation state: systems and ports read so far, plus the fabric under construction.

    ``guids`` maps every GUID text seen to its normal form, one string object per GUID, so
    each GUID is normalised once and every cable end is the very string that keys its device
    (the analysis' sets and dicts then match by identity; see the performance fence in
    ARCHITECTURE.md)."""

    source: str
    responses: UfmResponses
    systems: dict[str, _System] = field(default_factory=dict)
    guids: dict[str, str] = field(default_factory=dict)
    port_guids: list[str] = field(default_factory=list)  # each record's node GUID
    numbers: list[int] = field(default_factory=list)  # each record's port number
    portless: list[str] = field(default_factory=list)  # switch systems that listed no port
    records: list[schema.Port] = field(default_factory=list)
    fabric: Fabric = field(default_factory=Fabric)


def fabric_from_ufm(responses: UfmResponses, source: str = "") -> Fabric:
    """Build the :class:`Fabric` the ibnetdiscover parser would build for the same fabric.

    Switches and CAs come from the ports (one node GUID each; a director chassis is many switch
    ASICs, a host many HCAs), named from their systems; cables from the links, at the rate of
    the slower of the ports at their ends (:mod:`.cables`, in a forked child for a large
    answer, while this process reads the devices); unhealthy ports become ``unhealthy-port``
    notes. Any answer of the wrong shape raises ParseError naming the endpoint, the entry and
    the field (:mod:`.schema`).
    """
    st = _Build(source or responses.url or "ufm", responses)
    st.fabric.source = st.source
    ids: fork.Feed[cables.PortIds] = fork.Feed()
    background = cables.in_background(responses, st.source, ids)
    try:
        st.systems = {system.guid: system for system in _systems(responses.systems, st.source)}
        st.records = decode(responses.ports, st.source, "ports", schema.Port)
        st.port_guids, st.numbers = port_ids(st.records, responses.ports, st.source, st.guids)
        ids.put(cables.PortIds(st.port_guids, st.numbers))
        _read_ports(st)
        st.records = []
        found = background.result()
    except BaseException:
        background.cancel()
        raise
    links, mismatches = (
        found.links(st.port_guids, st.numbers, st.guids.setdefault),
        found.mismatches,
    )
    _add_link_ends(st, links)
    st.fabric.links = _add_port_only_cables(st, links, found)
    _note_isolated(st, found.linked.find(0) < 0)
    if mismatches.count:
        st.fabric.notes.append(
            Note(
                "link-mismatch",
                "",
                f"{mismatches.count} cable(s) reported with different rates at their two ends; "
                f"the slower was kept (first: {mismatches.first})",
            )
        )
    unhealthy = decode(responses.unhealthy_ports, st.source, "unhealthy_ports", schema.Unhealthy)
    for index, entry in enumerate(unhealthy):
        st.fabric.notes.append(_unhealthy_note(entry, f"{st.source}/unhealthy_ports[{index}]"))
    if not st.fabric.switches and not st.fabric.cas:
        raise ParseError("UFM reports no InfiniBand devices", None, st.source)
    return st.fabric


def _peers(st: _Build) -> list[schema.PortPeer]:
    """The ports' rarely needed fields, decoded from the answer once one is needed."""
    return decode(st.responses.ports, st.source, "ports", schema.PortPeer)


def _link_ends(st: _Build) -> list[schema.LinkEnds]:
    """The links' rarely needed fields, decoded from the answer once one is needed."""
    return decode(st.responses.links, st.source, "links", schema.LinkEnds)


def _guid(value: str, where: str) -> str:
    try:
        return normalize_guid(value)
    except ValueError:
        raise ParseError(f"bad GUID {value!r}", None, where) from None


def _systems(text: JsonText, source: str) -> list[_System]:
    """The systems of a ``resources/systems`` answer, in answer order."""
    entries = decode(text, source, "systems", schema.System)
    return [_system(entry, f"{source}/systems[{i}]") for i, entry in enumerate(entries)]


def _system(entry: schema.System, where: str) -> _System:
    """The fields of one ``resources/systems`` entry that topology cares about."""
    guid_text = entry.system_guid or entry.guid
    if not guid_text:
        raise ParseError("missing field 'system_guid' (not a UFM response?)", None, where)
    name = (entry.system_name or "").strip()
    model = (entry.model or entry.description or "").strip()
    return _System(_guid(guid_text, where), entry.type.strip().lower(), name, model)


def _read_ports(st: _Build) -> None:
    """One Switch or Ca per node GUID the ports name, in GUID order, plus switch systems that
    listed no port at all. A port's description, system and LID are read only for the rows
    that describe a device (its lowest port), not as whole columns."""
    guids, numbers = st.port_guids, st.numbers
    switch = _switch_ports(st)
    ports_of = _Ports(guids, numbers, guid_numbers(guids))
    order = np.lexsort((np.asarray(numbers), ports_of.guid_numbers))  # stable, as sorted()
    is_switch = np.asarray(switch, dtype=bool)[order]
    switches = _devices(order[is_switch], ports_of, st.records)
    cas = _devices(order[~is_switch], ports_of, None)
    fab = st.fabric
    # A SHARP aggregation node sits inside a switch (UFM may file its port there) but is a
    # CA: were it a switch it would share the switch's name and rename both.
    described = zip(switches.low, _descriptions(st.records, switches.low.values()), strict=True)
    aggregation = {guid for guid, text in described if _AGGREGATION.search(text)}
    for guid in sorted(switches.low.keys() - aggregation):
        desc = _switch_description(st, _system_of(st, switches.low[guid]), guid)
        fab.switches[guid] = Switch(guid, desc, switches.high[guid], switches.lid.get(guid))
    fab.cas.update(_cas(cas, switches, aggregation, st.records))
    _add_portless_switches(st)


def _add_portless_switches(st: _Build) -> None:
    """Switch systems that no port names as its system and that are no device themselves
    (usually none: a switch system's GUID is its ASIC's), as switches without ports."""
    fab = st.fabric
    candidates = [
        guid
        for guid, sys in st.systems.items()
        if sys.type == "switch" and fab.kind_of(guid) is None
    ]
    if not candidates:
        return
    where = f"{st.source}/ports[{{row}}]"
    with_ports = set(normal(None, column(st.records, "systemID"), where, "systemID", True))
    for guid in candidates:
        if guid not in with_ports:
            fab.switches[guid] = Switch(guid, _switch_description(st, guid, guid), 0, None)
            st.portless.append(guid)


def _system_of(st: _Build, row: int) -> str:
    """The GUID of the system port record *row* names (its own node GUID when none)."""
    text = st.records[row].systemID
    if not text:
        return st.port_guids[row]
    try:
        return normalize_guid(text)
    except ValueError:
        where = f"{st.source}/ports[{row}]"
        raise ParseError(f"field 'systemID': bad GUID {text!r}", None, where) from None


def _fields(records: list[schema.Port], name: str, rows: Iterable[int]) -> list[Any]:
    """Field *name* of port records *rows* only (the rows that describe devices)."""
    return list(map(operator.attrgetter(name), map(records.__getitem__, rows)))


def _descriptions(records: list[schema.Port], rows: Iterable[int]) -> list[str]:
    """The node descriptions of port records *rows* ("" for none)."""
    return [text or "" for text in _fields(records, "node_description", rows)]


def _lid(value: int | str | None) -> int | None:
    if isinstance(value, str):
        value = natural(value)
    return None if value is None or value in (0, 0xFFFF) or value > 0xFFFF else value


def _cas(
    cas: _Devices, switches: _Devices, aggregation: set[str], records: list[schema.Port]
) -> dict[str, Ca]:
    """One Ca per CA GUID in GUID order, a column at a time (a 16,384-node fabric has 131k):
    described by its lowest port, as many ports as its highest. An aggregation node filed
    among switch ports takes its CA port's description if it has one, and the highest port
    of either kind."""
    low, high = cas.low, cas.high
    if aggregation:
        low = low | {guid: low.get(guid, switches.low[guid]) for guid in aggregation}
        high = high | {guid: max(switches.high[guid], high.get(guid, 0)) for guid in aggregation}
    guids = sorted(low)
    texts = _descriptions(records, map(low.__getitem__, guids))
    return dict(zip(guids, map(Ca, guids, texts, map(high.__getitem__, guids)), strict=True))


def _switch_ports(st: _Build) -> list[bool]:
    """Whether each port is a switch port: its own ``description`` (``Switch IB Port``)
    decides; without one, its system's type."""
    kinds = column(st.records, "description")
    switch: list[bool] = by_value(kinds, lambda text: "switch" in text.lower() if text else None)
    if None in switch:
        switch = [
            is_switch if is_switch is not None else _system_is_switch(st, _system_of(st, row))
            for row, is_switch in enumerate(switch)
        ]
    return switch


def _system_is_switch(st: _Build, guid: str) -> bool:
    sys = st.systems.get(guid)
    return sys is not None and sys.type == "switch"


@dataclass(frozen=True, slots=True)
class _Ports:
    """Each port record's node GUID (the interned text and as a number) and port number."""

    guids: list[str]
    numbers: list[int]
    guid_numbers: NDArray[np.uint64]


def _devices(rows: NDArray[np.intp], ports: _Ports, records: list[schema.Port] | None) -> _Devices:
    """:class:`_Devices` from port rows in (guid, port) order: a GUID's rows are consecutive,
    the first its lowest port, the last its highest, so only the rows where the GUID changes
    are looked at (a switch has up to 64 ports), found by numpy over the whole column. Only
    switches have a LID in the model (*records* None: none)."""
    if not len(rows):
        return _Devices({}, {}, {})
    firsts = run_starts(ports.guid_numbers[rows])
    low, high = rows[firsts].tolist(), rows[np.append(firsts[1:], len(rows)) - 1].tolist()
    devices = list(map(ports.guids.__getitem__, low))
    return _Devices(
        low=dict(zip(devices, low, strict=True)),
        high=dict(zip(devices, map(ports.numbers.__getitem__, high), strict=True)),
        lid=_first_lids(rows, ports.guids, devices, low, records) if records else {},
    )


def _first_lids(
    rows: NDArray[np.intp],
    guids: list[str],
    devices: list[str],
    low: list[int],
    records: list[schema.Port],
) -> dict[str, int]:
    """The first LID the ports of each device give (as UFM sends them, see :func:`_lid`): its
    lowest port's (one look per device), unless one lowest port has none; then the first of
    its ports in *rows* that has one."""
    lowest = list(map(_lid, _fields(records, "lid", low)))
    if all(lowest):
        return dict(zip(devices, cast(list[int], lowest), strict=True))
    given_lids = _fields(records, "lid", rows.tolist())
    table = {value: _lid(value) for value in set(given_lids)}
    given = cast(list[int], list(map(table.__getitem__, given_lids)))
    with_lid = list(compress(range(len(rows)), given))[::-1]
    return dict(
        zip(
            map(guids.__getitem__, rows[with_lid].tolist()),
            map(given.__getitem__, with_lid),
            strict=True,
        )
    )


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


def _add_link_ends(st: _Build, links: Links) -> None:
    """Devices for link ends that no port record names, from the link's end descriptions, in
    link answer order (rare: the links are read again for them)."""
    devices = st.fabric.switches.keys() | st.fabric.cas.keys()
    if devices.issuperset(links.a) and devices.issuperset(links.b):
        return
    where = f"{st.source}/links[{{row}}]"
    columns = cables.link_columns(st.responses.links, st.source, st.guids)
    for row, link in enumerate(_link_ends(st)):
        a, ap, b, bp = columns.a[row], columns.a_port[row], columns.b[row], columns.b_port[row]
        for guid, port, desc, dname in (
            (a, ap, link.source_port_node_description, link.source_port_dname),
            (b, bp, link.destination_port_node_description, link.destination_port_dname),
        ):
            if guid not in devices:
                origin = f"appears only in UFM links ({where.format(row=row)})"
                _add_described_device(st, guid, port, desc, dname, origin)
                devices.add(guid)


def _add_port_only_cables(st: _Build, links: Links, found: cables.Cables) -> Links:
    """*links* plus the cables of ports that no link names, from the ports' peers (UFM lists
    only some link states in ``resources/links``), with one summary Note. A peer that is no
    known device is created from the port's peer node description, with a note, as a link
    end without a port record is."""
    if found.linked.find(0) < 0:  # the usual case: every port is a link end
        return links
    added, peers, table, port_rates = 0, _peers(st), cables.cables_of(links), found.rates.all()
    keys = list(zip(st.port_guids, st.numbers, strict=True))
    rows = dict(zip(keys, count()))
    unlinked = compress(keys, map(operator.not_, found.linked))
    for guid, number in sorted(unlinked):
        port = peers[rows[guid, number]]
        peer = _peer(port.peer, st.guids)
        if peer is None:
            continue
        if st.fabric.kind_of(peer[0]) is None:
            origin = f"appears only as the peer of UFM port {guid}_{number}"
            desc, dname = port.peer_node_description, port.peer_port_dname
            _add_described_device(st, peer[0], peer[1], desc, dname, origin)
        key: CableKey = (guid, number, *peer) if (guid, number) <= peer else (*peer, guid, number)
        if key in table:
            continue
        own, other = port_rates[rows[guid, number]], rows.get(peer)
        table[key] = rates.slower(own, port_rates[other]) if other is not None else own
        added += 1
    if added:
        st.fabric.notes.append(
            Note(
                "ports-only-links",
                "",
                f"{added} cable(s) appear in UFM ports but not in UFM links; taken from the ports",
            )
        )
    return cables.links_of(table)


def _peer(value: str | None, guids: dict[str, str]) -> tuple[str, int] | None:
    """``<guid>_<port>`` → (guid, port); ``N/A``, empty or odd values → None."""
    text, sep, digits = (value or "").strip().rpartition("_")
    number = natural(digits) if sep else None
    if number is None or number > 255:
        return None
    guid = guids.get(text)
    if guid is None:
        try:
            guid = normalize_guid(text)
        except ValueError:
            return None
        guid = guids[text] = guids.setdefault(guid, guid)
    return guid, number


def _add_described_device(
    st: _Build, guid: str, port: int, desc: str | None, dname: str | int | None, origin: str
) -> None:
    """A device UFM names without a port record of its own: created from the node
    description the link (or the peer's port) gives for it, with a Note."""
    desc = (desc or "").strip()
    sys = st.systems.get(guid)
    dname = str(dname if dname is not None else port)
    is_switch = (sys is not None and sys.type == "switch") or desc.endswith(f":{dname}")
    if is_switch:
        sw_desc = _switch_description(st, guid, guid) if sys else desc.rpartition(":")[0]
        st.fabric.switches[guid] = Switch(guid, sw_desc, port, None)
    else:
        st.fabric.cas[guid] = Ca(guid, desc, port)
    st.fabric.notes.append(
        Note("no-block", guid, f"{guid} ({desc!r}) {origin}; created from its node description")
    )


def _note_isolated(st: _Build, every_port_linked: bool) -> None:
    """A note for each device no cable reaches. When every port record is a link end, only
    the switch systems that listed no port can be one (usually there is none), so the cable
    ends are not looked through for the others."""
    fab = st.fabric
    candidates = st.portless if every_port_linked else fab.switches.keys() | fab.cas.keys()
    if not candidates:
        return
    linked = set(fab.links.a).union(fab.links.b)
    for guid in sorted(set(candidates) - linked):
        fab.notes.append(Note("isolated", guid, f"{guid} has no active link"))


def _unhealthy_note(entry: schema.Unhealthy, where: str) -> Note:
    guid = _guid(entry.UnhealthyGUID, where)
    node = entry.UnhealthyNode or guid
    port = next((p for p in (entry.UnhealthyPortNumber, entry.UnhealthyPort) if p is not None), "?")
    condition = entry.Condition or "?"
    if isinstance(condition, list):
        condition = ",".join(condition)
    peer = entry.PeerNode
    peer_port = entry.PeerPortNumber if entry.PeerPortNumber is not None else "?"
    peer_text = f"; peer {peer} port {peer_port}" if peer else ""
    since = f" since {entry.StatusTime}" if entry.StatusTime else ""
    return Note(
        "unhealthy-port",
        guid,
        f"{node} port {port} is marked unhealthy in UFM ({condition}, "
        f"{entry.State or '?'}){since}{peer_text}",
    )
