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
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import compress, count, repeat
from typing import Any, TypeVar, cast

from topograph_slurm.errors import ParseError
from topograph_slurm.model import rates
from topograph_slurm.model.fabric import Ca, Fabric, Links, Note, Switch, normalize_guid
from topograph_slurm.model.numbers import natural
from topograph_slurm.sources.ibnetdiscover import fork
from topograph_slurm.sources.ufm import schema
from topograph_slurm.sources.ufm.responses import UfmResponses
from topograph_slurm.sources.ufm.schema import JsonText, decode_list

T = TypeVar("T")

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
#: GUIDs already in normal form (16 lowercase hex digits), one per line.
_CANONICAL = re.compile(r"(?:[0-9a-f]{16}\n)*[0-9a-f]{16}")


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
    return f"{int(digits)}x" if rates.LANE_COUNT.fullmatch(digits) else "???"


#: A port's rate as ibnetdiscover prints it, (width, speed): ``("4x", "HDR")``.
Rate = tuple[str, str]
#: (guid, port, guid, port) of a cable, its ends in canonical order.
CableKey = tuple[str, int, str, int]


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
    keys: list[tuple[str, int]] = field(default_factory=list)  # (guid, port) of each record
    rows: dict[tuple[str, int], int] = field(default_factory=dict)  # port → its (last) record
    rates: list[Rate] = field(default_factory=list)  # each record's rate

    def rate(self, port: tuple[str, int]) -> Rate | None:
        """The rate of *port* (``(guid, number)``), None when UFM lists no such port."""
        row = self.rows.get(port)
        return None if row is None else self.rates[row]

    records: list[schema.Port] = field(default_factory=list)
    fabric: Fabric = field(default_factory=Fabric)
    mismatches: int = 0
    first_mismatch: str = ""


def fabric_from_ufm(responses: UfmResponses, source: str = "") -> Fabric:
    """Build the :class:`Fabric` the ibnetdiscover parser would build for the same fabric.

    Switches and CAs come from the ports (one node GUID each; a director chassis is many switch
    ASICs, a host many HCAs), named from their systems; cables from the links, at the rate of
    the slower of the ports at their ends (UFM's links carry a width but no speed); unhealthy
    ports become ``unhealthy-port`` notes. Any answer of the wrong shape raises ParseError
    naming the endpoint, the entry and the field (:mod:`.schema`).

    Ports and links are read a column at a time (``map``, ``zip``, ``dict`` over whole
    columns): a 16,384-node fabric has ~800k ports and ~400k links, and Python code per record
    cost several times the decoding (benchmarks/PERFORMANCE.md, "UFM path").
    """
    st = _Build(source or responses.url or "ufm", responses)
    st.fabric.source = st.source
    st.systems = {system.guid: system for system in _systems(responses.systems, st.source)}
    background = _in_background(responses, st.source)
    try:
        st.records = _decode(responses.ports, st.source, "ports", schema.Port)
        _read_ports(st)
        st.records = []
        read = background.result()
        st.rows, st.rates = dict(zip(st.keys, count())), read.rates
        cables, linked = _read_links(st, read.links)
    except BaseException:
        background.cancel()
        raise
    _add_port_only_cables(st, cables, linked)
    st.fabric.links = _columns(cables)
    _note_isolated(st)
    if st.mismatches:
        st.fabric.notes.append(
            Note(
                "link-mismatch",
                "",
                f"{st.mismatches} cable(s) reported with different rates at their two ends; "
                f"the slower was kept (first: {st.first_mismatch})",
            )
        )
    unhealthy = _decode(responses.unhealthy_ports, st.source, "unhealthy_ports", schema.Unhealthy)
    for index, entry in enumerate(unhealthy):
        st.fabric.notes.append(_unhealthy_note(entry, f"{st.source}/unhealthy_ports[{index}]"))
    if not st.fabric.switches and not st.fabric.cas:
        raise ParseError("UFM reports no InfiniBand devices", None, st.source)
    return st.fabric


def _decode(text: JsonText, source: str, key: str, item: type[T]) -> list[T]:
    return decode_list(text, f"{source}/{key}", item)


def _peers(st: _Build) -> list[schema.PortPeer]:
    """The ports' rarely needed fields, decoded from the answer once one is needed."""
    return _decode(st.responses.ports, st.source, "ports", schema.PortPeer)


def _link_ends(st: _Build) -> list[schema.LinkEnds]:
    """The links' rarely needed fields, decoded from the answer once one is needed."""
    return _decode(st.responses.links, st.source, "links", schema.LinkEnds)


def _guid(value: str, where: str) -> str:
    try:
        return normalize_guid(value)
    except ValueError:
        raise ParseError(f"bad GUID {value!r}", None, where) from None


def _column(records: Sequence[object], name: str) -> list[Any]:
    return list(map(operator.attrgetter(name), records))


def _normal(
    cache: dict[str, str], texts: list[str | None], where: str, name: str, optional: bool = False
) -> list[str]:
    """GUID texts in normal form, each GUID one string object (*cache*: text → normal form);
    a missing one (``None``, empty) stays None where *optional*, else is an error. *where* is
    formatted with the bad row."""
    new = cast(set[str], set(texts).difference(cache, (None, "")))
    if _CANONICAL.fullmatch("\n".join(new)):  # the common case: UFM's own form, checked at once
        cache.update(zip(new, new, strict=True))
        new = set()
    if not optional and (None in texts or "" in texts):
        new.add(next(text for text in texts if not text) or "")
    for text in new:
        try:
            guid = normalize_guid(text)
        except ValueError:
            row = texts.index(text)
            raise ParseError(
                f"field {name!r}: bad GUID {text!r}", None, where.format(row=row)
            ) from None
        cache[text] = cache.setdefault(guid, guid)
    return list(map(cache.get, texts))  # type: ignore[arg-type]


def _lid(value: int | str | None) -> int | None:
    if isinstance(value, str):
        value = natural(value)
    return None if value is None or value in (0, 0xFFFF) or value > 0xFFFF else value


def _by_value(values: list[Any], convert: Callable[[Any], Any]) -> list[Any]:
    """``convert`` of every value, called once per distinct value (rates, widths and LIDs
    repeat across ports)."""
    table = {value: convert(value) for value in set(values)}
    return list(map(table.__getitem__, values))


def _systems(text: JsonText, source: str) -> list[_System]:
    """The systems of a ``resources/systems`` answer, in answer order."""
    entries = _decode(text, source, "systems", schema.System)
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
    """Every port's rate by (guid, port), and one Switch or Ca per node GUID the ports name,
    in GUID order, plus switch systems that listed no port at all."""
    ports, where = st.records, f"{st.source}/ports[{{row}}]"
    texts, numbers = _column(ports, "guid"), _column(ports, "number")
    if not all(texts) or not set(map(type, numbers)) <= {int}:
        _port_identities(_peers(st), texts, numbers, where)
    guids = _normal(st.guids, texts, where, "guid")
    systems = _normal(st.guids, _column(ports, "systemID"), where, "systemID", optional=True)
    if None in systems:
        systems = [system or guid for system, guid in zip(systems, guids, strict=True)]
    keys = list(zip(guids, numbers, strict=True))
    st.keys = keys
    descriptions = _column(ports, "node_description")
    if None in descriptions:
        descriptions = [text or "" for text in descriptions]
    switch = _switch_ports(st, systems)
    lids = _by_value(_column(ports, "lid"), _lid)
    order = sorted(range(len(keys)), key=keys.__getitem__)  # near-linear: UFM sorts its ports
    is_switch = list(map(switch.__getitem__, order))
    switches = _devices(list(compress(order, is_switch)), guids, numbers, lids)
    cas = _devices(list(compress(order, map(operator.not_, is_switch))), guids, numbers, None)
    fab = st.fabric
    # A SHARP aggregation node sits inside a switch (UFM may file its port there) but is a
    # CA: were it a switch it would share the switch's name and rename both.
    aggregation = {
        guid for guid, row in switches.low.items() if _AGGREGATION.search(descriptions[row])
    }
    for guid in sorted(switches.low.keys() - aggregation):
        desc = _switch_description(st, systems[switches.low[guid]], guid)
        fab.switches[guid] = Switch(guid, desc, switches.high[guid], switches.lid.get(guid))
    fab.cas.update(_cas(cas, switches, aggregation, descriptions))
    with_ports = set(systems)
    for guid, sys in st.systems.items():
        if sys.type == "switch" and guid not in with_ports and fab.kind_of(guid) is None:
            fab.switches[guid] = Switch(guid, _switch_description(st, guid, guid), 0, None)


def _cas(
    cas: _Devices, switches: _Devices, aggregation: set[str], descriptions: list[str]
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
    texts = map(descriptions.__getitem__, map(low.__getitem__, guids))
    return dict(zip(guids, map(Ca, guids, texts, map(high.__getitem__, guids)), strict=True))


def _port_identities(
    peers: list[schema.PortPeer], texts: list[str | None], numbers: list[Any], where: str
) -> None:
    """Fill in the GUID text and port number of ports that lack one, from their name
    (``<guid>_<port>``); a port number given as text becomes a number."""
    for row, port in enumerate(peers):
        if texts[row] and type(numbers[row]) is int:
            continue
        name = port.name or ""
        texts[row] = texts[row] or name.rpartition("_")[0]
        if not texts[row]:
            raise ParseError(
                "missing field 'guid' (not a UFM response?)", None, where.format(row=row)
            )
        given = numbers[row]
        number = given if given is not None else name.rpartition("_")[2]
        if given is None and ("_" not in name or not number):
            raise ParseError(
                "missing field 'number' (not a UFM response?)", None, where.format(row=row)
            )
        value = number if type(number) is int else natural(str(number))
        if value is None or value > 255:
            where = where.format(row=row)
            raise ParseError(f"field 'number': bad port number {_shown(number)}", None, where)
        numbers[row] = value


def _port_rates(text: JsonText, source: str) -> list[Rate]:
    """Each port's (width, speed) as ibnetdiscover names them, in answer order, worked out
    once per distinct pair UFM sends (a speed given as a number may be a port rate, which
    needs the width); every port of one rate shares one tuple."""
    ports = _decode(text, source, "ports", schema.PortRate)
    widths, speeds = _column(ports, "active_width"), _column(ports, "active_speed")
    table = {pair: _rate(*pair) for pair in set(zip(widths, speeds, strict=True))}
    return list(map(table.__getitem__, zip(widths, speeds, strict=True)))


def _rate(width: object, speed: object) -> Rate:
    named = ufm_width(width)
    return named, ufm_speed(speed, named)


def _switch_ports(st: _Build, systems: list[str]) -> list[bool]:
    """Whether each port is a switch port: its own ``description`` (``Switch IB Port``)
    decides; without one, its system's type."""
    kinds = _column(st.records, "description")
    switch: list[bool] = _by_value(kinds, lambda text: "switch" in text.lower() if text else None)
    if None in switch:
        switch = [
            is_switch if is_switch is not None else _system_is_switch(st, system)
            for is_switch, system in zip(switch, systems, strict=True)
        ]
    return switch


def _system_is_switch(st: _Build, guid: str) -> bool:
    sys = st.systems.get(guid)
    return sys is not None and sys.type == "switch"


def _devices(
    rows: list[int], guids: list[str], numbers: list[int], lids: list[Any] | None
) -> _Devices:
    """:class:`_Devices` from port rows in (guid, port) order: the first row of a GUID is its
    lowest port, the last its highest (``dict`` keeps the last value given for a key). Only
    switches have a LID in the model (*lids* None: none)."""
    names = list(map(guids.__getitem__, rows))
    with_lid = list(compress(rows, map(lids.__getitem__, rows)))[::-1] if lids else []
    lids = lids or []
    return _Devices(
        low=dict(zip(names[::-1], rows[::-1], strict=True)),
        high=dict(zip(names, map(numbers.__getitem__, rows), strict=True)),
        lid=dict(
            zip(map(guids.__getitem__, with_lid), map(lids.__getitem__, with_lid), strict=True)
        ),
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


@dataclass(slots=True)
class _LinkColumns:
    """Every link's ends (GUIDs in normal form, port numbers) and width, a column each: what
    a forked child reads from the links answer while the parent reads the ports. It travels
    back pickled compactly: GUIDs newline-joined (16 hex digits each), ports as bytes."""

    a: list[str]
    a_port: list[int]
    b: list[str]
    b_port: list[int]
    widths: list[str]

    def __getstate__(self) -> tuple[str, bytes, str, bytes, list[str]]:
        a, b = "\n".join(self.a), "\n".join(self.b)
        return a, bytes(self.a_port), b, bytes(self.b_port), self.widths

    def __setstate__(self, state: tuple[str, bytes, str, bytes, list[str]]) -> None:
        a, a_port, b, b_port, self.widths = state
        self.a, self.b = a.split("\n") if a else [], b.split("\n") if b else []
        self.a_port, self.b_port = list(a_port), list(b_port)


@dataclass(slots=True)
class _Background:
    """What a forked child reads while the parent reads the ports' devices: every port's rate
    (rows in answer order) and the links' columns, the two things the cables need. Rates
    travel back as a table of the distinct ones and an index per port."""

    rates: list[Rate]
    links: _LinkColumns

    def __getstate__(self) -> tuple[list[Rate], bytes, _LinkColumns]:
        table = list(dict.fromkeys(self.rates))
        index = {rate: i for i, rate in enumerate(table)}
        return table, array("I", map(index.__getitem__, self.rates)).tobytes(), self.links

    def __setstate__(self, state: tuple[list[Rate], bytes, _LinkColumns]) -> None:
        table, index, self.links = state
        rows = array("I")
        rows.frombytes(index)
        self.rates = list(map(table.__getitem__, rows))


#: Answers from this size on (ports and links together: 8 MB, ~15k ports) are read partly by
#: a forked child (benchmarks/PERFORMANCE.md, "UFM path"); below, the fork costs more than
#: it saves.
_FORK_AT = 1 << 23


def _in_background(responses: UfmResponses, source: str) -> fork.Pending[_Background]:
    """The port rates and the links of large answers in a forked child (when a CPU is free;
    else, and whenever the child fails, computed here when asked for: a bad rate or link
    raises its ParseError from here, after any error in the ports' other fields)."""
    compute = partial(_read_in_background, responses.ports, responses.links, source)
    big = len(responses.ports) + len(responses.links) >= _FORK_AT
    return fork.in_background(compute) if big else fork.Pending(compute)


def _read_in_background(ports: JsonText, links: JsonText, source: str) -> _Background:
    return _Background(_port_rates(ports, source), _link_columns(links, source))


def _link_columns(text: JsonText, source: str) -> _LinkColumns:
    """The links answer decoded and its columns checked: GUIDs, port numbers, widths."""
    links = _decode(text, source, "links", schema.Link)
    where = f"{source}/links[{{row}}]"
    guids: dict[str, str] = {}
    return _LinkColumns(
        _normal(guids, _column(links, "source_guid"), where, "source_guid"),
        _ints(_column(links, "source_port"), where, "source_port"),
        _normal(guids, _column(links, "destination_guid"), where, "destination_guid"),
        _ints(_column(links, "destination_port"), where, "destination_port"),
        _by_value(_column(links, "width"), ufm_width),
    )


def _read_links(st: _Build, links: _LinkColumns) -> tuple[dict[CableKey, Rate], bytearray]:
    """Every cable once (the first record of a cable wins), ends in canonical order, at the
    slower rate of its two ports; and which ports a link names (:func:`_linked`). Each end is
    the very string that keys its device (``st.guids``), as the ports' are."""
    where = f"{st.source}/links[{{row}}]"
    intern = st.guids.setdefault
    a, b = list(map(intern, links.a, links.a)), list(map(intern, links.b, links.b))
    ap, bp, widths = links.a_port, links.b_port, links.widths
    ends_a, ends_b = list(zip(a, ap, strict=True)), list(zip(b, bp, strict=True))
    row_a, row_b = list(map(st.rows.get, ends_a)), list(map(st.rows.get, ends_b))
    rate_a, rate_b = _rates_of(st, row_a), _rates_of(st, row_b)
    complete = {rate for rate in set(st.rates) if rate[0] != rates.UNKNOWN}
    agree = list(
        map(operator.and_, map(operator.eq, rate_a, rate_b), map(complete.__contains__, rate_a))
    )
    for row in compress(range(len(a)), map(operator.not_, agree)):  # the few that do not
        ends = (a[row], ap[row], b[row], bp[row])
        rate_a[row] = _cable_rate(st, widths[row], rate_a[row], rate_b[row], ends)
    cable_rates = cast(list[Rate], rate_a)  # now every row's cable rate
    devices = st.fabric.switches.keys() | st.fabric.cas.keys()
    if not devices.issuperset(a) or not devices.issuperset(b):
        for row, link in enumerate(_link_ends(st)):
            if a[row] not in devices or b[row] not in devices:
                ends = (a[row], ap[row], b[row], bp[row])
                _add_link_ends(st, link, ends, where.format(row=row), devices)
    keys = list(zip(a, ap, b, bp, strict=True))
    for row in compress(range(len(keys)), map(operator.gt, ends_a, ends_b)):
        keys[row] = (b[row], bp[row], a[row], ap[row])  # canonical: the smaller end first
    cables = dict(zip(keys[::-1], cable_rates[::-1], strict=True))  # the first record wins
    return cables, _linked(st, row_a, row_b)


def _rates_of(st: _Build, rows: list[int | None]) -> list[Rate | None]:
    """The rate of each port record row; None for a link end UFM lists no port for."""
    if None not in rows:
        return list(map(st.rates.__getitem__, rows))  # type: ignore[arg-type]
    return [None if row is None else st.rates[row] for row in rows]


def _linked(st: _Build, *ends: list[int | None]) -> bytearray:
    """A flag per port record: 0 for a port no link names. A record that an later one of the
    same port repeats is flagged 1 too, so each port counts once (as ``st.rows`` keeps it)."""
    flags = bytearray(len(st.keys))
    if len(st.rows) < len(st.keys):
        flags = bytearray(b"\x01") * len(st.keys)
        deque(map(flags.__setitem__, st.rows.values(), repeat(0)), maxlen=0)
    for rows in ends:
        known = cast(list[int], compress(rows, map(operator.is_not, rows, repeat(None))))
        deque(map(flags.__setitem__, known, repeat(1)), maxlen=0)
    return flags


def _ints(values: list[int | str], where: str, name: str) -> list[int]:
    """Port numbers as numbers: the schema lets ``"1"`` through (real UFM sends link ports as
    text), checked here as digits of at most 255 once per distinct text."""
    if set(map(type, values)) <= {int}:
        return values  # type: ignore[return-value]
    table = {value: _port_number(value) for value in set(values)}
    if None in table.values():
        bad = next(value for value, number in table.items() if number is None)
        where = where.format(row=values.index(bad))
        raise ParseError(f"field {name!r}: bad port number {_shown(bad)}", None, where)
    return list(map(table.__getitem__, values))  # type: ignore[arg-type]


def _shown(value: object) -> str:
    """A bad value for a message: quoted, at most 40 characters of it."""
    text = repr(value)
    return text if len(text) <= 40 else text[:36] + "...'"


def _port_number(value: int | str) -> int | None:
    number = value if isinstance(value, int) else natural(value)
    return number if number is not None and number <= 255 else None


def _cable_rate(st: _Build, width: str, pa: Rate | None, pb: Rate | None, ends: CableKey) -> Rate:
    """The slower of the two ports' (width, speed); a port without a width takes the cable's.
    Ends that disagree are counted for one summary note."""
    ra = (pa[0] if pa[0] != rates.UNKNOWN else width, pa[1]) if pa else None
    rb = (pb[0] if pb[0] != rates.UNKNOWN else width, pb[1]) if pb else None
    if ra is None or rb is None:
        return ra or rb or (width, rates.UNKNOWN)
    if ra != rb:
        if not st.mismatches:
            a, ap, b, bp = ends
            st.first_mismatch = f"{a}[{ap}]-{b}[{bp}] {''.join(ra)} vs {''.join(rb)}"
        st.mismatches += 1
        return rates.slower(ra, rb)
    return ra


def _add_link_ends(
    st: _Build, link: schema.LinkEnds, ends: CableKey, where: str, devices: set[str]
) -> None:
    a, ap, b, bp = ends
    if a not in devices:
        desc, dname = link.source_port_node_description, link.source_port_dname
        _add_described_device(st, a, ap, desc, dname, f"appears only in UFM links ({where})")
        devices.add(a)
    if b not in devices:
        desc, dname = link.destination_port_node_description, link.destination_port_dname
        _add_described_device(st, b, bp, desc, dname, f"appears only in UFM links ({where})")
        devices.add(b)


def _add_port_only_cables(st: _Build, cables: dict[CableKey, Rate], linked: bytearray) -> None:
    """Cables of ports that no link names, from the ports' peers (UFM lists only some link
    states in ``resources/links``): added, with one summary Note. A peer that is no known
    device is created from the port's peer node description, with a note, as a link end
    without a port record is."""
    if linked.find(0) < 0:  # the usual case: every port is a link end
        return
    added, peers = 0, _peers(st)
    unlinked = compress(st.keys, map(operator.not_, linked))
    for guid, number in sorted(unlinked):
        port = peers[st.rows[guid, number]]
        peer = _peer(port.peer, st.guids)
        if peer is None:
            continue
        if st.fabric.kind_of(peer[0]) is None:
            origin = f"appears only as the peer of UFM port {guid}_{number}"
            desc, dname = port.peer_node_description, port.peer_port_dname
            _add_described_device(st, peer[0], peer[1], desc, dname, origin)
        key = (guid, number, *peer) if (guid, number) <= peer else (*peer, guid, number)
        if key in cables:
            continue
        own, other = st.rates[st.rows[guid, number]], st.rate(peer)
        cables[key] = rates.slower(own, other) if other is not None else own
        added += 1
    if added:
        st.fabric.notes.append(
            Note(
                "ports-only-links",
                "",
                f"{added} cable(s) appear in UFM ports but not in UFM links; taken from the ports",
            )
        )


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


def _columns(cables: dict[CableKey, Rate]) -> Links:
    """The cables as :class:`Links` columns, in (guid, port) order of their ends."""
    keys = sorted(cables)
    if not keys:
        return Links()
    a, a_port, b, b_port = map(list, zip(*keys, strict=True))
    width, speed = map(list, zip(*map(cables.__getitem__, keys), strict=True))
    return Links(a, a_port, b, b_port, width, speed)


def _note_isolated(st: _Build) -> None:
    fab = st.fabric
    linked = set(fab.links.a).union(fab.links.b)
    for guid in sorted((fab.switches.keys() | fab.cas.keys()) - linked):
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
