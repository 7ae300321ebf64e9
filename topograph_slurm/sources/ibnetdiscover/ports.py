"""Read the ``ibnetdiscover -p`` ports report: one line per port, both ends and their
descriptions inline, no node blocks.

It shares the reference parser's state, notes, cable table and number bounds, so a ``-p`` dump
and a plain dump of the same fabric give the same Fabric, but for the port counts: ``-p`` has
no per-node header, so a device has as many ports as the highest one listed. A ``-p`` line
states both ends of its cable at once, so the ends agreeing is the plain dumps' other rule: a
port carries at most one cable (a second line giving it another cable is a ParseError naming
both lines). That a cable is listed from both ends is not required: the excerpts users keep
of these reports (the exporters' test fixtures) pick single lines.
"""

from __future__ import annotations

import re

from topograph_slurm.errors import ParseError
from topograph_slurm.model.fabric import Ca, Fabric, Note, Switch
from topograph_slurm.sources.ibnetdiscover.links import RATE_NAMES, build_links
from topograph_slurm.sources.ibnetdiscover.reference import (
    BINARY_RE,
    HEX,
    WIDTH,
    State,
    bounded_lid,
    mismatch,
    note_summaries,
    one_cable_per_port,
    other_line,
    port_number,
)

# ibnetdiscover -p: "CA 78 1 0x946d… 4x HDR - SW 51 81 0x946d… ( 'desc' - 'peer desc' )"
_P_LINE_RE = re.compile(
    rf"(SW|CA|RT)\s+(\d+)\s+(\d+)\s+0x({HEX})\s+{WIDTH}\s*(.*?)\s+"
    rf"(?:-\s+(SW|CA|RT)\s+(\d+)\s+(\d+)\s+0x({HEX})\s+\(\s*'(.*)'\s+-\s+'(.*)'\s*\)"
    r"|'(.*)')\s*$"
)
_P_START_RE = re.compile(r"(SW|CA|RT)\s+\d+\s+\d+\s+0x")


def is_ports_format(text: str) -> bool:
    """Whether the first topology line is an ``ibnetdiscover -p`` line."""
    for n, line in enumerate(text[: 1 << 16].splitlines()):
        stripped = line.strip()
        if stripped.startswith(("vendid=", "devid=", "Switch", "Ca", "Rt", "[")):
            return False
        if _P_START_RE.match(stripped):
            return True
        if n > 200:
            break
    return False


def parse(text: str, source: str) -> Fabric:
    """The Fabric of an ``ibnetdiscover -p`` report; raises ParseError on a malformed line."""
    st = State(source)
    st.fabric.source = source
    down = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = _P_LINE_RE.match(stripped)
        if m is None:
            if _P_START_RE.match(stripped) or BINARY_RE.search(stripped):
                raise st.error(f"malformed ibnetdiscover -p line: {stripped[:80]!r}", lineno)
            other_line(st, stripped, lineno)
            continue
        kind, lid, port_s, raw, width, speed, *peer_fields, lone_desc = m.groups()
        guid, port = st.guid(raw, lineno), port_number(st, port_s, lineno)
        if peer_fields[0] is None:
            _p_device(st, kind, guid, lone_desc, port, bounded_lid(st, lid, lineno))
            down += 1
            continue
        p_kind, p_lid, p_port_s, p_raw, desc, p_desc = peer_fields
        peer, p_port = st.guid(p_raw, lineno), port_number(st, p_port_s, lineno)
        _p_device(st, kind, guid, desc, port, bounded_lid(st, lid, lineno))
        _p_device(st, p_kind, peer, p_desc, p_port, bounded_lid(st, p_lid, lineno))
        a, b = (guid, port), (peer, p_port)
        key = (*a, *b) if a <= b else (*b, *a)
        ws = f"{width}{RATE_NAMES.get(speed, speed)}"
        old = st.cables.get(key)
        if old is None:
            st.cables[key] = ws
            st.from_a[key] = lineno
        elif old != ws:
            mismatch(st, key, old, ws, lineno)
    if not st.fabric.switches and not st.fabric.cas:
        raise ParseError("no InfiniBand devices found in ibnetdiscover -p text", None, source)
    one_cable_per_port(st)
    st.fabric.links = build_links(st.cables)
    if down:
        st.fabric.notes.append(
            Note("unconnected-ports", "", f"{down} port(s) listed without a peer (down/unused)")
        )
    note_summaries(st)
    return st.fabric


def _p_device(st: State, kind: str, guid: str, desc: str, port: int, lid: int | None) -> None:
    """Create or widen the device a ``-p`` line names; ``-p`` has no per-node header, so the
    port count is the highest port seen (and CAs are keyed by their port GUID)."""
    fab = st.fabric
    if kind == "SW":
        sw = fab.switches.get(guid)
        if sw is None:
            fab.switches[guid] = Switch(guid, desc, port, lid)
        elif port > sw.nports:
            sw.nports = port
        return
    ca = fab.cas.get(guid)
    if ca is None:
        fab.cas[guid] = Ca(guid, desc, port)
    elif port > ca.nports:
        ca.nports = port
