"""The reference parser of plain and grouped (``-g``) ibnetdiscover dumps: line by line.

Sysadmins feed us whatever they have: a fresh dump, a PuTTY log of one (CRLF, a banner, tabs
eaten, the switch prompt at the end), an old grouped dump from a man page. The parser therefore
recognises lines by their first character and one anchored regular expression, skips what is
plainly not topology (comments, ``ibwarn`` noise, chassis headings, prompts) and reports the
skipped lines in a :class:`~topograph_slurm.model.Note`, while anything that *looks* like
topology but is malformed raises :class:`~topograph_slurm.errors.ParseError` with its line.

Every cable is printed twice (once from each end); it becomes one row of :class:`Links`. A
peer that has no block of its own (an excerpt, or a CA ibnetdiscover could not query) is created
from the description printed next to it, with a Note. A dump that ends inside a block is an error: a
truncated dump silently missing half a scalable unit would produce a wrong topology.conf.

The two ends of a cable must agree: a port carries at most one cable, and a cable between two
devices that both have a block is listed by both blocks, port for port. ibnetdiscover prints
one consistent walk of the fabric, so a dump that contradicts itself was edited, spliced or
captured while cables moved, and which end is right cannot be told from the text: believing
either could move a whole leaf under another switch. So a contradiction is a ParseError naming
both lines, never a quietly different tree (only a width/speed disagreement, which changes no
placement, is a Note). Numbers are bounded before they are converted: ports 1-255 and within
their block's port count, LIDs at most 65535.

This parser is the oracle: simple and slow. The bulk path (:mod:`.bulk`) must give the same
Fabric for every dump it accepts (the tests fuzz that) and leaves everything irregular to this
one, which decides and explains. Both share the state, notes and checks defined here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Set
from dataclasses import dataclass, field

from topograph_slurm.errors import ParseError
from topograph_slurm.model.fabric import Ca, Fabric, Note, Switch, normalize_guid
from topograph_slurm.model.numbers import natural
from topograph_slurm.model.rates import KNOWN_SPEEDS
from topograph_slurm.sources.ibnetdiscover.links import Cables, build_links, slower_token

HEX = r"[0-9a-fA-F]{1,16}"
_EXT = r"(?:\[ext \d+\])?"
#: A link width (IB has 1x to 12x): two digits at most, so no int() ever meets thousands.
WIDTH = r"(\d{0,2}x|\?+)"
# One port line of a node block, from a switch ("[p] "H-g"[q](pg) # "desc" lid N 4xNDR") or
# a CA ("[p](pg) "S-g"[q] # lid N lmc M "desc" lid N 4xNDR"); tabs are optional (PuTTY logs).
_PORT_RE = re.compile(
    rf"\[(\d+)\](?:\({HEX}\))?{_EXT}\s*"
    rf'"([SHR])-({HEX})"\[(\d+)\]{_EXT}\s*(?:\({HEX}\))?\s*'
    r'#\s*(?:lid \d+ lmc \d+\s+)?"(.*)"\s+lid (\d+)\s+' + WIDTH + r"\s*(\S+)"
)
_SWITCH_RE = re.compile(
    rf'Switch\s*(\d+)\s+"S-({HEX})"\s*#\s*"(.*)"\s+(?:enhanced|base)?\s*port 0 lid (\d+)'
    r"(?:\s+lmc\s+\d+)?\s*$"
)
_CA_RE = re.compile(rf'(?:Ca|Rt)\s*(\d+)\s+"[HR]-({HEX})"\s*#\s*"(.*)"\s*(?:\(scp\))?\s*$')
_HEADER_START_RE = re.compile(r"(?:Switch|Ca|Rt)\s*\d")
BINARY_RE = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
_CHUNK = 1 << 22  # characters per split() batch: bounds the transient list of line strings
SKIPPED = ("Chassis ", "Non-Chassis Nodes")
#: Port numbers as printed → their value: IB port numbers are 8-bit and port 0 (a switch's
#: management port) carries no cable. A dictionary is also cheaper than int() in the hot loop.
PORTS = {str(i): i for i in range(1, 256)}
#: A header's port count.
NPORTS = {str(i): i for i in range(256)}
MAX_LID = 0xFFFF
ID_PREFIXES = ("vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "rtguid=")


def _lines(text: str) -> Iterator[list[str]]:
    """Batches of lines, so a large dump never becomes all its line strings at once."""
    start, end_all = 0, len(text)
    while start < end_all:
        end = text.find("\n", start + _CHUNK)
        if end < 0:
            end = end_all
        yield text[start:end].split("\n")
        start = end + 1


@dataclass(slots=True)
class _Peer:
    """What a port line says about its far end, kept in case that device has no block."""

    kind: str
    desc: str
    line: int
    max_port: int


@dataclass(slots=True)
class State:
    """Mutable parse state shared by the line handlers; the bulk and ``-p`` parsers fill one
    for the notes they share with this parser."""

    source: str
    fabric: Fabric = field(default_factory=Fabric)
    cables: Cables = field(default_factory=dict)
    peers: dict[str, _Peer] = field(default_factory=dict)
    guids: dict[str, str] = field(default_factory=dict)
    # the first line listing each cable from its first end (the smaller (GUID, port)), and
    # from its second end: a cable both of whose devices have a block is in both
    from_a: dict[tuple[str, int, str, int], int] = field(default_factory=dict)
    from_b: dict[tuple[str, int, str, int], int] = field(default_factory=dict)
    blocks: dict[str, int] = field(default_factory=dict)  # GUID → line of its (first) header
    cur: str = ""  # GUID of the block whose port lines we are reading
    cur_line: int = 0
    cur_ports: int = 0
    cur_nports: int = 0  # the port count its header declares
    pending_ids: int = 0  # line of a "vendid=" not yet followed by a node header
    portless: list[str] = field(default_factory=list)
    skipped: int = 0
    first_skipped: int = 0
    mismatches: int = 0
    first_mismatch: str = ""

    def guid(self, raw: str, line: int) -> str:
        """Canonical (interned, normalised) GUID string for *raw*."""
        known = self.guids.get(raw)
        if known is not None:
            return known
        try:
            norm = normalize_guid(raw)
        except ValueError:
            raise ParseError(f"bad GUID {raw!r}", line, self.source) from None
        norm = self.guids.setdefault(norm, norm)
        self.guids[raw] = norm
        return norm

    def error(self, message: str, line: int) -> ParseError:
        return ParseError(message, line, self.source)


def parse(text: str, source: str) -> Fabric:
    """The dump's Fabric, line by line; raises ParseError for what is not a valid dump."""
    st = State(source)
    st.fabric.source = source
    _scan(text, st)
    _finish(st)
    return st.fabric


def _scan(text: str, st: State) -> None:
    """The hot loop: dispatch each line on its first character."""
    port_match = _PORT_RE.match
    cables = st.cables
    peers = st.peers
    guids = st.guids
    from_a, from_b = st.from_a, st.from_b
    ports = PORTS.get
    lineno = 0
    for batch in _lines(text):
        for line in batch:
            lineno += 1
            c = line[:1]
            if c == "[":
                m = port_match(line)
                if m is None or not st.cur:
                    _bad_port_line(st, line, lineno, m is None)
                    continue
                port_s, kind, raw, peer_port_s, desc, _lid, width, speed = m.groups()
                peer = guids.get(raw) or st.guid(raw, lineno)
                port, peer_port = ports(port_s), ports(peer_port_s)
                if port is None or peer_port is None or port > st.cur_nports:
                    _bad_port_number(st, port_s, peer_port_s, lineno)
                    continue
                me = st.cur
                if me < peer or (me == peer and port <= peer_port):
                    key = (me, port, peer, peer_port)
                    from_a.setdefault(key, lineno)
                else:
                    key = (peer, peer_port, me, port)
                    from_b.setdefault(key, lineno)
                ws = width + speed
                old = cables.get(key)
                if old is None:
                    cables[key] = ws
                elif old != ws:
                    mismatch(st, key, old, ws, lineno)
                info = peers.get(peer)
                if info is None:
                    peers[peer] = _Peer(kind, desc, lineno, peer_port)
                elif peer_port > info.max_port:
                    info.max_port = peer_port
                st.cur_ports += 1
            elif c == "v" or c == "d" or c == "s" or c == "c" or c == "r":
                if line.startswith("vendid="):
                    st.pending_ids = lineno
                elif not line.startswith(ID_PREFIXES):
                    other_line(st, line, lineno)
            elif c == "S" or c == "C" or c == "R":
                if not _HEADER_START_RE.match(line):
                    other_line(st, line, lineno)
                elif c == "S":
                    _switch_header(st, line, lineno)
                else:
                    _ca_header(st, line, lineno)
            elif c == "#" or not line.strip():
                continue
            elif c in " \t\r":
                _indented_line(st, line, lineno)
            else:
                other_line(st, line, lineno)


def _indented_line(st: State, line: str, lineno: int) -> None:
    """A line with leading blanks (CR from a terminal log, indented grouped output)."""
    stripped = line.strip()
    if stripped.startswith(ID_PREFIXES):
        if stripped.startswith("vendid="):
            st.pending_ids = lineno
        return
    if _HEADER_START_RE.match(stripped):
        if stripped.startswith("S"):
            _switch_header(st, stripped, lineno)
        else:
            _ca_header(st, stripped, lineno)
    elif stripped.startswith("["):
        raise st.error(f"indented port line not understood: {stripped[:80]!r}", lineno)
    elif not stripped.startswith(SKIPPED):
        other_line(st, stripped, lineno)


def _bad_port_line(st: State, line: str, lineno: int, malformed: bool) -> None:
    if BINARY_RE.search(line):
        raise st.error("binary data in ibnetdiscover text", lineno)
    if malformed:
        raise st.error(f"malformed port line (truncated dump?): {line[:80]!r}", lineno)
    raise st.error("port line outside a Switch/Ca block (truncated dump?)", lineno)


def port_number(st: State, text: str, lineno: int) -> int:
    """A port number's value; ParseError (not int()'s ValueError) when out of range."""
    value = PORTS.get(text)
    if value is None:
        raise st.error(f"port number {_shown(text)} out of range (1-255)", lineno)
    return value


def bounded_lid(st: State, text: str, lineno: int) -> int | None:
    """:func:`parse_lid`, a LID out of range a ParseError."""
    try:
        return parse_lid(text)
    except ValueError as err:
        raise st.error(str(err), lineno) from None


def _bad_port_number(st: State, port: str, peer_port: str, lineno: int) -> None:
    port_number(st, port, lineno)
    port_number(st, peer_port, lineno)
    raise st.error(
        f"port {port} beyond the {st.cur_nports} port(s) its block's header (line "
        f"{st.cur_line}) declares",
        lineno,
    )


def _shown(number: str) -> str:
    """A number as an error message shows it: thousands of digits are cut."""
    return number if len(number) <= 12 else f"{number[:12]}... ({len(number)} digits)"


def header_number(st: State, text: str, table: dict[str, int], what: str, lineno: int) -> int:
    """A header's port count (from *table*): ParseError, not int()'s ValueError, when it is
    out of range (a number of thousands of digits included)."""
    value = table.get(text)
    if value is None:
        raise st.error(f"{what} {_shown(text)} out of range (0-{max(table.values())})", lineno)
    return value


def other_line(st: State, line: str, lineno: int) -> None:
    """Not topology: remember it for one summary Note; binary data is fatal."""
    if BINARY_RE.search(line):
        raise st.error("binary data in ibnetdiscover text", lineno)
    if line.startswith(SKIPPED) or line.startswith("#"):
        return
    if not st.skipped:
        st.first_skipped = lineno
    st.skipped += 1


def mismatch(st: State, key: tuple[str, int, str, int], old: str, new: str, line: int) -> None:
    """The two ends of one cable disagree on width/speed: keep the slower, note it."""
    st.cables[key] = slower_token(old, new)
    if not st.mismatches:
        st.first_mismatch = f"{key[0]}[{key[1]}]-{key[2]}[{key[3]}] {old} vs {new} (line {line})"
    st.mismatches += 1


def _start_block(st: State, guid: str, nports: int, lineno: int) -> None:
    if st.cur and not st.cur_ports:
        st.portless.append(st.cur)
    st.cur, st.cur_line, st.cur_ports, st.pending_ids = guid, lineno, 0, 0
    st.cur_nports = nports
    st.blocks.setdefault(guid, lineno)


def _switch_header(st: State, line: str, lineno: int) -> None:
    m = _SWITCH_RE.match(line)
    if m is None:
        raise st.error(f"malformed Switch header: {line[:80]!r}", lineno)
    nports_s, raw, desc, lid_s = m.groups()
    guid = st.guid(raw, lineno)
    nports = header_number(st, nports_s, NPORTS, "port count", lineno)
    lid = bounded_lid(st, lid_s, lineno)
    fab = st.fabric
    old = fab.switches.get(guid)
    if old is not None or guid in fab.cas:
        _duplicate(st, guid, desc, old is not None and old.description == desc, lineno)
    else:
        fab.switches[guid] = Switch(guid, desc, nports, lid)
    _start_block(st, guid, nports, lineno)


def _ca_header(st: State, line: str, lineno: int) -> None:
    m = _CA_RE.match(line)
    if m is None:
        raise st.error(f"malformed Ca header: {line[:80]!r}", lineno)
    nports_s, raw, desc = m.groups()
    guid = st.guid(raw, lineno)
    nports = header_number(st, nports_s, NPORTS, "port count", lineno)
    fab = st.fabric
    old = fab.cas.get(guid)
    if old is not None or guid in fab.switches:
        _duplicate(st, guid, desc, old is not None and old.description == desc, lineno)
    else:
        fab.cas[guid] = Ca(guid, desc, nports)
    _start_block(st, guid, nports, lineno)


def parse_lid(text: str) -> int | None:
    """A LID's value; LID 0 and 65535 (0xffff, permissive/unassigned) mean "no LID" (None).
    ValueError above 65535 or when not ASCII digits (``\\d`` matches ``٤`` too)."""
    lid = natural(text.lstrip("0") or "0")
    if lid is None or lid > MAX_LID:
        raise ValueError(f"LID {_shown(text)} out of range (0-{MAX_LID})")
    return None if lid in (0, MAX_LID) else lid


def _duplicate(st: State, guid: str, desc: str, same: bool, lineno: int) -> None:
    """A GUID with two blocks: identical repeats are noted, conflicting ones are fatal."""
    if not same:
        raise st.error(f"GUID {guid} declared twice with different type or description", lineno)
    st.fabric.notes.append(
        Note("duplicate-block", guid, f"GUID {guid} has a second identical block (line {lineno})")
    )


def _finish(st: State) -> None:
    """Checks that need the whole dump, then the links and devices seen only as peers."""
    if st.pending_ids:
        raise st.error(
            "dump ends inside a node block (ids without a Switch/Ca line)", st.pending_ids
        )
    if st.cur and not st.cur_ports:
        st.portless.append(st.cur)
    fab = st.fabric
    if not fab.switches and not fab.cas:
        raise ParseError("no InfiniBand devices found (not ibnetdiscover output?)", None, st.source)
    one_cable_per_port(st)
    _check_last_block(st)
    _both_ends_listed(st)
    fab.links = build_links(st.cables)
    _add_peer_only_devices(st)
    note_portless(st, {g for a, _, b, _ in st.cables for g in (a, b)})
    note_summaries(st)


def check_last_line(text: str, source: str) -> None:
    """A last line without newline whose speed is no known name was cut mid-line."""
    if text.endswith("\n"):
        return
    tail = text[text.rfind("\n") + 1 :]
    m = _PORT_RE.match(tail.lstrip())
    if m is not None and m.group(8) not in KNOWN_SPEEDS:
        raise ParseError(f"dump cut mid-line: {tail[:80]!r}", text.count("\n") + 1, source)


def _check_last_block(st: State) -> None:
    """ibnetdiscover lists every cable from both ends; if the final block lists fewer ports
    than other blocks link to it, the dump was cut inside that block."""
    last = st.cur
    if not last or last not in st.peers:
        return
    linked = sum(1 for a, _, b, _ in st.cables if a == last or b == last)
    if linked > st.cur_ports:
        raise st.error(
            f"dump appears truncated: last block {last} lists {st.cur_ports} port(s) but "
            f"{linked} cable(s) lead to it",
            st.cur_line,
        )


def _line_of(st: State, key: tuple[str, int, str, int]) -> int:
    return st.from_a.get(key) or st.from_b[key]


def one_cable_per_port(st: State) -> None:
    """A port is one end of one cable: a second cable claimed for it contradicts the first."""
    owner: dict[tuple[str, int], tuple[str, int, str, int]] = {}
    for key in st.cables:
        for end, far in (((key[0], key[1]), key[2:]), ((key[2], key[3]), key[:2])):
            other = owner.setdefault(end, key)
            if other is key:
                continue
            other_far = other[2:] if other[:2] == end else other[:2]
            first, second = _line_of(st, other), _line_of(st, key)
            raise st.error(
                f"port {end[0]}[{end[1]}] is given two cables: to {other_far[0]}[{other_far[1]}] "
                f"(line {first}) and to {far[0]}[{far[1]}] (line {second}); the two ends of a "
                "cable must agree",
                max(first, second),
            )


def _both_ends_listed(st: State) -> None:
    """A cable between two devices that both have a block is listed by both."""
    blocks = st.blocks
    for key in st.cables:
        for end, listed in ((key[:2], st.from_a), (key[2:], st.from_b)):
            if key not in listed and end[0] in blocks:
                far = key[2:] if end == key[:2] else key[:2]
                raise st.error(
                    f"cable {far[0]}[{far[1]}] - {end[0]}[{end[1]}] is listed only at "
                    f"{far[0]}'s end; the block of {end[0]} (line {blocks[end[0]]}) does not "
                    f"list port {end[1]}: the two ends of a cable must agree",
                    _line_of(st, key),
                )


def _add_peer_only_devices(st: State) -> None:
    """Peers with no block of their own become devices from the description next to them."""
    fab = st.fabric
    missing = [g for g in st.peers if g not in fab.switches and g not in fab.cas]
    for guid in sorted(missing):
        peer = st.peers[guid]
        if peer.kind == "S":
            fab.switches[guid] = Switch(guid, peer.desc, peer.max_port, None)
        else:
            fab.cas[guid] = Ca(guid, peer.desc, peer.max_port)
        fab.notes.append(
            Note(
                "no-block",
                guid,
                f"{guid} ({peer.desc!r}) appears only as a peer (first at line {peer.line}); "
                "created from that description",
            )
        )


def note_portless(st: State, linked: Set[str]) -> None:
    """Devices whose block lists no port and that no other block links to: isolated."""
    for guid in st.portless:
        if guid not in linked:
            st.fabric.notes.append(Note("isolated", guid, f"{guid} has no active link"))


def note_summaries(st: State) -> None:
    """One note each for the lines skipped and the cables whose ends disagree, dump-wide."""
    fab = st.fabric
    if st.skipped:
        fab.notes.append(
            Note(
                "skipped-lines",
                "",
                f"{st.skipped} line(s) that are not topology were ignored "
                f"(first at line {st.first_skipped})",
            )
        )
    if st.mismatches:
        fab.notes.append(
            Note(
                "link-mismatch",
                "",
                f"{st.mismatches} cable(s) reported with different width/speed at their two ends; "
                f"the slower was kept (first: {st.first_mismatch})",
            )
        )
