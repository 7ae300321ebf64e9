"""UFM cables worked out a column at a time (numpy) against their definition, per record.

The cables side matches every link end to its port record, puts the smaller end first, keeps
the first record of each cable and rates it by the slower of its two ports, all as whole-column
array operations (:mod:`topograph_slurm.sources.ufm.cables`). Here a plain per-record reading
of the same answers, the definition in a dozen lines of Python, must give the very same cables
for any mix of repeated ports, unlisted ends, reversed and repeated links, and GUIDs on both
sides of 2**63 (where a signed comparison would order them differently from their text).
"""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from topograph_slurm.errors import ParseError
from topograph_slurm.model import rates
from topograph_slurm.model.fabric import normalize_guid
from topograph_slurm.sources.ufm import UfmResponses, cables, fabric_from_ufm, schema
from topograph_slurm.sources.ufm.columns import decode, guid_numbers, normal, port_ids

#: A few GUIDs, low and high (above 2**63), so that ends collide and compare both ways.
GUIDS = st.sampled_from(
    [f"{value:016x}" for value in (1, 2, 0x7FFF_FFFF_FFFF_FFFF, 1 << 63, (1 << 64) - 1, 0xABC)]
)
GUID_A, GUID_B = "0002c90000000001", "0002c90000000002"
RATES = st.sampled_from([("4x", "HDR"), ("4x", "NDR"), ("1x", "NDR")])
PORTS = st.lists(st.tuples(GUIDS, st.integers(1, 3), RATES), max_size=12)
ENDS = st.tuples(GUIDS, st.integers(1, 4))
LINKS = st.lists(st.tuples(ENDS, ENDS), max_size=12)


@given(st.lists(st.integers(0, (1 << 64) - 1), max_size=30))
def test_guid_numbers_are_the_guids_values_in_the_same_order(values: list[int]) -> None:
    texts = [f"{value:016x}" for value in values]
    numbers = guid_numbers(texts)
    assert numbers.tolist() == values
    assert (
        sorted(range(len(texts)), key=texts.__getitem__) == numbers.argsort(kind="stable").tolist()
    )


def _answers(ports: list[Any], links: list[Any]) -> tuple[str, str]:
    port_records = [
        {"guid": g, "number": n, "active_width": w, "active_speed": s} for g, n, (w, s) in ports
    ]
    link_records = [
        {"source_guid": a, "source_port": ap, "destination_guid": b, "destination_port": bp}
        for (a, ap), (b, bp) in links
    ]
    return json.dumps(port_records), json.dumps(link_records)


def _by_definition(ports: list[Any], links: list[Any]) -> dict[str, Any]:
    """The cables read one record at a time: a port is its last record, an end no record
    names is numbered past the records (a side's ends first), a cable is its first record
    with the smaller end first, rated by the slower of its ports."""
    rows = {(g, n): row for row, (g, n, _) in enumerate(ports)}
    unlisted: dict[tuple[str, int], int] = {}
    for side in (0, 1):
        for link in links:
            if link[side] not in rows:
                unlisted.setdefault(link[side], len(ports) + len(unlisted))
    row_of = rows | unlisted
    kept: dict[tuple[Any, ...], Any] = {}
    for a, b in links:
        kept.setdefault((*min(a, b), *max(a, b)), None)
    ends = sorted(kept)
    linked = [0] * len(ports)
    for row, (g, n, _) in enumerate(ports):
        if rows[g, n] != row:
            linked[row] = 1
    for end in [end for link in links for end in link]:
        if end in rows:
            linked[rows[end]] = 1
    rate_of = {row: rate for row, (_, _, rate) in enumerate(ports)}

    def rate(a: int, b: int) -> tuple[str, str]:
        ra, rb = rate_of.get(a), rate_of.get(b)
        if ra and rb:
            return rates.slower(ra, rb) if ra != rb else ra
        return ra or rb or ("???", "???")

    a_rows = [row_of[g, n] for g, n, _, _ in ends]
    b_rows = [row_of[g, n] for _, _, g, n in ends]
    return {
        "a": a_rows,
        "b": b_rows,
        "rates": [rate(a, b) for a, b in zip(a_rows, b_rows, strict=True)],
        "linked": linked,
        "unlisted": list(unlisted),
        "mismatches": sum(
            1
            for a, b in zip(a_rows, b_rows, strict=True)
            if a in rate_of and b in rate_of and rate_of[a] != rate_of[b]
        ),
    }


@settings(max_examples=300, deadline=None)
@given(PORTS, LINKS)
def test_the_cables_are_their_definition_read_record_by_record(
    ports: list[Any], links: list[Any]
) -> None:
    port_text, link_text = _answers(ports, links)
    records = decode(port_text, "ufm", "ports", schema.Port)
    ids = cables.PortIds(*port_ids(records, port_text, "ufm", {}))
    found = cables.read_cables(link_text, port_text, "ufm", lambda: ids)
    table = found.rates.table
    expected = _by_definition(ports, links)
    assert {
        "a": list(found.a),
        "b": list(found.b),
        "rates": [table[index] for index in found.rate],
        "linked": list(found.linked),
        "unlisted": found.unlisted,
        "mismatches": found.mismatches.count,
    } == expected


@settings(max_examples=100, deadline=None)
@given(PORTS.filter(len))
def test_each_guid_is_one_device_with_as_many_ports_as_its_highest(ports: list[Any]) -> None:
    """The devices side groups the port records by GUID in numpy (sorted as numbers): one CA
    per GUID, in GUID text order, its port count its highest port number."""
    port_text, _ = _answers(ports, [])
    fabric = fabric_from_ufm(UfmResponses("[]", port_text, "[]", "[]"))
    highest: dict[str, int] = {}
    for guid, number, _ in ports:
        highest[guid] = max(number, highest.get(guid, 0))
    assert list(fabric.cas) == sorted(highest)
    assert {guid: ca.nports for guid, ca in fabric.cas.items()} == highest


#: GUID texts in and out of normal form, and texts that are no GUID: split ones, short ones,
#: upper case, a newline, a non-ASCII digit.
GUID_TEXTS = st.sampled_from(
    [
        "0123456789abcdef",
        "0x0123456789ABCDEF",
        "1",
        "0123456789abcde",
        "01234567\n9abcdef",
        "0123456789abcdeF",
        "0123456789abcde٣",
        "0123456789abcdef0",
        "S-0002c903000e0b72",
    ]
)


@given(st.lists(GUID_TEXTS, min_size=1, max_size=6))
@example(["0123456789abcde", "0123456789abcdef0"])  # 15 + 17 digits: the lengths add up
def test_a_guid_column_is_normalised_exactly_as_each_guid_would_be(texts: list[str]) -> None:
    """The whole-column check that a GUID column is already in normal form never lets a text
    through that :func:`normalize_guid` would change or refuse."""
    try:
        expected = [normalize_guid(text) for text in texts]
    except ValueError:
        with pytest.raises(ParseError, match="bad GUID"):
            normal(None, list(texts), "ufm/ports[{row}]", "guid")
        return
    assert normal(None, list(texts), "ufm/ports[{row}]", "guid") == expected
    assert normal({}, list(texts), "ufm/ports[{row}]", "guid") == expected


def test_the_named_rates_are_the_speeds_the_model_knows() -> None:
    assert get_args(schema.SpeedName) == rates.SPEEDS


@pytest.mark.parametrize(
    ("width", "speed", "rate"),
    [("4x", "NDR", ("4x", "NDR")), ("4X", "NDR", ("4x", "NDR")), ("4x", 53.125, ("4x", "HDR"))],
)
def test_a_rate_named_otherwise_is_read_as_well(width: Any, speed: Any, rate: Any) -> None:
    """The ports' rates are decoded as named rates when every port names them as
    ibnetdiscover does, and as whatever else UFM sends otherwise: the same table."""
    ports = [(GUID_A, 1, ("4x", "NDR")), (GUID_B, 1, (width, speed))]
    port_text, link_text = _answers(ports, [((GUID_A, 1), (GUID_B, 1))])
    records = decode(port_text, "ufm", "ports", schema.Port)
    ids = cables.PortIds(*port_ids(records, port_text, "ufm", {}))
    found = cables.read_cables(link_text, port_text, "ufm", lambda: ids)
    assert found.rates.all()[1] == rate
