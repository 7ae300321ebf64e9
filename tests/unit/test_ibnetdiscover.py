"""ibnetdiscover parser: every real dump, the quirks they carry, and malformed input.

Expected numbers were counted independently of the parser (grep for ``^Switch``/``^Ca``
headers, an awk script that canonicalises both ends of every port line and counts unique
cables), so a parser bug cannot make its own test pass.
"""

from __future__ import annotations

import contextlib
import sys
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import real_fixture
from topograph_slurm.errors import CollectError, ParseError
from topograph_slurm.model.fabric import Fabric, Link
from topograph_slurm.sources.ibnetdiscover import (
    bulk,
    fork,
    parse_ibnetdiscover,
    read_ibnetdiscover,
    reference,
    run_ibnetdiscover,
    split_width_speed,
)
from topograph_slurm.sources.ibnetdiscover.links import links_from_columns
from topograph_slurm.sources.sim import generate_ibnetdiscover, parse_sim_spec

D = "ibnetdiscover/"


@dataclass(frozen=True)
class Expect:
    file: str
    switches: int
    cas: int
    links: int
    loops: int = 0
    notes: tuple[str, ...] = ()


FIXTURES = [
    Expect("dgx-gb200-single-isolated-ca.txt", 0, 1, 0, notes=("isolated",)),
    Expect("dgx-superpod-ndr-quantum2-mqm9701.txt", 40, 582, 1114),
    Expect("ibm-pcm-2009-sdr-1sw-2ca.txt", 1, 2, 2),
    Expect("ibnetdiscover-p-osc-edr-excerpt.txt", 4, 3, 4, notes=("unconnected-ports",)),
    Expect("loginoff-2014-sx6036-fdr-qdr-8sw-144ca.txt", 8, 144, 192),
    Expect(
        "manpage-2007-voltaire-isr9024-grouped-nonchassis.txt", 2, 4, 7, notes=("link-mismatch",)
    ),
    Expect("mellanox-sat11-hdr-putty-log-notabs.txt", 400, 2328, 8723, notes=("skipped-lines",)),
    Expect("mellanox-ufm-lab-small-fdr-edr-hdr.txt", 2, 13, 16, loops=2),
    Expect(
        "nvidia-kb-edr-fdr-qdr-sdr-loopbacks-ibwarn.txt",
        2,
        6,
        10,
        loops=3,
        notes=("skipped-lines",),
    ),
    Expect("nvidia-selene-compute-hdr-quantum.txt", 666, 4341, 12852),
    Expect("nvidia-selene-storage-hdr-edr.txt", 160, 1247, 3286),
    Expect("oracle-sun-dcs36-qdr-1sw-1ca.txt", 1, 1, 1),
    Expect("psmn-x5-qdr-ddr-voltaire-mellanox.txt", 11, 89, 159),
]


def _load(name: str) -> Fabric:
    return read_ibnetdiscover(real_fixture(D + name))


def _text(name: str) -> str:
    return real_fixture(D + name).read_bytes().decode("utf-8", errors="replace")


def _canonical(links: list[Link]) -> bool:
    return all(
        (link.a_guid, link.a_port) <= (link.b_guid, link.b_port)
        and link
        == Link.between(link.b_guid, link.b_port, link.a_guid, link.a_port, link.width, link.speed)
        for link in links
    )


@pytest.mark.parametrize("exp", FIXTURES, ids=lambda e: e.file)
def test_real_dump_counts(exp: Expect) -> None:
    fab = _load(exp.file)
    assert len(fab.switches) == exp.switches
    assert len(fab.cas) == exp.cas
    assert len(fab.links) == exp.links
    assert len(set(fab.links)) == exp.links, "a cable was kept twice"
    assert sum(link.is_loop for link in fab.links) == exp.loops
    assert sorted(n.kind for n in fab.notes) == sorted(exp.notes)
    assert _canonical(fab.links)
    ends = [
        (g, p)
        for link in fab.links
        for g, p in ((link.a_guid, link.a_port), (link.b_guid, link.b_port))
    ]
    known = fab.switches.keys() | fab.cas.keys()
    assert {g for g, _ in ends} <= known, "every link end is a known device"
    assert len(ends) == len(set(ends)), "no port carries two cables"


@pytest.mark.parametrize(
    "exp", [e for e in FIXTURES if not e.file.startswith("ibnetdiscover-p-")], ids=lambda e: e.file
)
def test_fast_path_equals_line_parser(exp: Expect) -> None:
    """The bulk path must give exactly what the line-by-line parser gives (or decline)."""
    text = _text(exp.file)
    slow = reference.parse(text, "x")
    fast = bulk.parse(text, "x")
    if exp.notes == ("link-mismatch",):
        assert fast is None  # disagreeing cable ends are the line parser's job
        return
    assert fast is not None, "regular dumps take the fast path"
    assert fast.switches == slow.switches
    assert fast.cas == slow.cas
    assert list(fast.cas) == list(slow.cas), "CAs keep the dump's order"
    assert Counter(fast.links) == Counter(slow.links)
    assert fast.notes == slow.notes


def test_ndr_superpod_facts() -> None:
    fab = _load("dgx-superpod-ndr-quantum2-mqm9701.txt")
    descs = Counter(ca.description for ca in fab.cas.values())
    assert descs["Mellanox Technologies Aggregation Node"] == 40
    # firmware default description, internal spaces kept exactly as printed
    assert descs["MT4129 ConnectX7   Mellanox Technologies"] == 69
    assert sum(d.startswith(("localhost", "ubuntu", "B11-P1-CUFM")) for d in descs.elements()) == 7
    assert {(link.width, link.speed) for link in fab.links} == {("4x", "NDR")}
    sw = fab.switches["2c5eab0300b87b40"]
    assert sw.description == "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"
    assert (sw.nports, sw.lid) == (65, 73)
    # SHARP node on port 65 of that leaf
    assert Link.between("2c5eab0300b87b40", 65, "2c5eab0300b87b50", 1, "4x", "NDR") in fab.links
    assert all(ca.nports == 1 for ca in fab.cas.values())


def test_selene_compute_facts() -> None:
    fab = _load("nvidia-selene-compute-hdr-quantum.txt")
    descs = [ca.description for ca in fab.cas.values()]
    assert sum(d == "Mellanox Technologies Aggregation Node" for d in descs) == 666
    assert sum(d.startswith("luna-") and " mlx5_" in d for d in descs) == 3664
    assert {link.speed for link in fab.links} == {"HDR"}


def test_putty_log_quirks() -> None:
    """CRLF, banner, stripped tabs ("Switch41"), lid 65535, trailing prompt."""
    fab = _load("mellanox-sat11-hdr-putty-log-notabs.txt")
    sw = fab.switches["0c42a10300a9b026"]
    assert sw.nports == 41
    assert sw.description == "MF0;sat11-0101-0927-20ib0:MQM8700/U1"
    assert sw.lid == 3894
    assert not any("\r" in ca.description for ca in fab.cas.values())
    assert fab.cas["1c34da03005503dc"].description == "SAT111092710053 ibp11s0f0"
    (note,) = fab.notes
    assert "2 line(s)" in note.message and "line 1" in note.message
    assert {link.speed for link in fab.links} == {"HDR", "EDR"}


def test_loops_and_ibwarn() -> None:
    fab = _load("nvidia-kb-edr-fdr-qdr-sdr-loopbacks-ibwarn.txt")
    loops = sorted((link.a_port, link.b_port) for link in fab.links if link.is_loop)
    assert loops == [(1, 2), (19, 21), (29, 30)]
    speeds = Counter(link.speed for link in fab.links)
    assert speeds == Counter({"EDR": 4, "FDR": 3, "QDR": 2, "SDR": 1})


def test_fdr10_speed() -> None:
    fab = _load("mellanox-ufm-lab-small-fdr-edr-hdr.txt")
    loop = [link for link in fab.links if link.is_loop and link.a_port == 25]
    assert loop and (loop[0].width, loop[0].speed, loop[0].b_port) == ("4x", "FDR10", 26)


def test_switch_without_sysimgguid_and_multiport_ca() -> None:
    fab = _load("ibm-pcm-2009-sdr-1sw-2ca.txt")
    assert fab.switches["000b8cffff0053ee"].lid == 3
    # keyed by node GUID (caguid / H-...), not the port GUID printed in parentheses
    assert set(fab.cas) == {"0002c902002789ac", "0002c9030002847c"}
    assert fab.cas["0002c9030002847c"].nports == 2
    assert Link.between("000b8cffff0053ee", 2, "0002c9030002847c", 2, "4x", "SDR") in fab.links


def test_grouped_manpage() -> None:
    fab = _load("manpage-2007-voltaire-isr9024-grouped-nonchassis.txt")
    # both ends of switch 6IB4 port 1 <-> ISR9024 port 10 say 1xSDR
    assert Link.between("0008f10400410015", 1, "005442ba00003080", 10, "1x", "SDR") in fab.links
    # the CA end of ISR9024[12] says 1xSDR, the switch end 4xSDR: the slower one is kept
    assert Link.between("005442ba00003080", 12, "0008f10403960558", 1, "1x", "SDR") in fab.links
    assert "2 cable(s)" in fab.notes[0].message


def test_ports_format() -> None:
    fab = _load("ibnetdiscover-p-osc-edr-excerpt.txt")
    assert fab.switches["7cfe9003009ce5b0"].description == "ib-i1l1s01"
    assert fab.switches["7cfe9003009ce5b0"].lid == 1719
    assert fab.cas["7cfe9003003b4bde"].description == "o0001 HCA-1"
    assert Link.between("7cfe9003009ce5b0", 1, "7cfe900300b07320", 1, "4x", "EDR") in fab.links
    assert "2 port(s)" in fab.notes[0].message


def test_ports_format_excerpt_that_gives_a_port_two_cables_is_refused() -> None:
    """The exporter's curated HDR excerpt cables the aggregation node's port 1 to the leaf
    (line 1) and to a spine (line 5): lines picked from two captures. Without line 5 it reads,
    blanks inside the quotes kept."""
    text = _text("ibnetdiscover-p-hdr-leaf-spine-excerpt.txt")
    with pytest.raises(ParseError, match=r"port 946dae0300630bfe\[1\] is given two cables") as err:
        parse_ibnetdiscover(text, "excerpt")
    assert "(line 1)" in str(err.value) and "(line 5)" in str(err.value)
    lines = text.splitlines(keepends=True)
    hdr = parse_ibnetdiscover("".join(lines[:4] + lines[5:]), "excerpt")
    assert (len(hdr.switches), len(hdr.cas), len(hdr.links)) == (4, 2, 2)
    assert hdr.switches["946dae0300630bf6"].description == "5FB0405-leaf-IB01 "
    assert hdr.cas["946dae0300630bfe"].description == "Mellanox Technologies Aggregation Node"


def test_isolated_ca_is_a_note() -> None:
    fab = _load("dgx-gb200-single-isolated-ca.txt")
    assert fab.cas["b8e92403009ca838"].description == "dgx-gb200-n01-c1 HCA-1"
    assert fab.notes[0].kind == "isolated" and fab.notes[0].guid == "b8e92403009ca838"


# ---------------------------------------------------------------------------------------------
# Synthetic input: small dumps in the real layout.

SWITCH = (
    "vendid=0x2c9\ndevid=0xd2f2\nsysimgguid=0x2c5eab0300b87b40\n"
    "switchguid=0x2c5eab0300b87b40(2c5eab0300b87b40)\n"
    'Switch\t65 "S-2c5eab0300b87b40"\t\t# "MF0;leaf1:MQM9790/U1" enhanced port 0 lid 7 lmc 0\n'
    '[1]\t"H-e09d7303007a4bd8"[1](e09d7303007a4bd8) \t\t# "node1 mlx5_0" lid 11 4xNDR\n'
    '[2]\t"H-e09d7303007a4bd9"[1](e09d7303007a4bd9) \t\t# "node2 mlx5_0" lid 12 4xNDR\n'
)


def _ca(guid: str, desc: str, port: int, lid: int) -> str:
    short = guid.lstrip("0")
    return (
        f"\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0x{short}\ncaguid=0x{short}\n"
        f'Ca\t1 "H-{guid}"\t\t# "{desc}"\n'
        f'[1]({short}) \t"S-2c5eab0300b87b40"[{port}]\t\t# lid {lid} lmc 0 '
        f'"MF0;leaf1:MQM9790/U1" lid 7 4xNDR\n'
    )


GOOD = (
    "#\n# Topology file\n#\n\n"
    + SWITCH
    + _ca("e09d7303007a4bd8", "node1 mlx5_0", 1, 11)
    + _ca("e09d7303007a4bd9", "node2 mlx5_0", 2, 12)
)


def test_synthetic_good_dump() -> None:
    fab = parse_ibnetdiscover(GOOD, "t")
    assert (len(fab.switches), len(fab.cas), len(fab.links), fab.notes) == (1, 2, 2, [])
    assert fab.source == "t"
    assert bulk.parse(GOOD, "t") is not None


def test_dual_port_ca_between_single_port_ones_keeps_the_dump_order() -> None:
    """Single-port CA blocks are read in one regex pass, others block by block; a dual-port
    HCA among them must not reorder the CAs (node order follows the dump)."""
    dual = (
        '\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0xaa\ncaguid=0xaa\nCa\t2 "H-00000000000000aa"'
        '\t\t# "node0 mlx5_0"\n'
        '[1](aa) \t"S-2c5eab0300b87b40"[3]\t\t# lid 13 lmc 0 "MF0;leaf1:MQM9790/U1" lid 7 4xNDR\n'
        '[2](ab) \t"S-2c5eab0300b87b40"[4]\t\t# lid 14 lmc 0 "MF0;leaf1:MQM9790/U1" lid 7 4xNDR\n'
    )
    to_dual = (
        '[3]\t"H-00000000000000aa"[1](aa) \t\t# "node0 mlx5_0" lid 13 4xNDR\n'
        '[4]\t"H-00000000000000aa"[2](ab) \t\t# "node0 mlx5_0" lid 14 4xNDR\n'
    )
    text = (
        "#\n\n"
        + SWITCH
        + to_dual
        + _ca("e09d7303007a4bd8", "node1 mlx5_0", 1, 11)
        + dual
        + _ca("e09d7303007a4bd9", "node2 mlx5_0", 2, 12)
    )
    fast = bulk.parse(text, "t")
    assert fast is not None and len(fast.links) == 4
    expected = ["e09d7303007a4bd8", "00000000000000aa", "e09d7303007a4bd9"]
    assert list(fast.cas) == list(reference.parse(text, "t").cas) == expected


@pytest.mark.parametrize("junk", ["ibwarn: port 3 timed out", "\x1b[0m", "# a comment", ""])
def test_stray_line_between_switch_ports_is_noted_like_the_line_parser(junk: str) -> None:
    """A non-topology line among a switch's port lines (a warning, a terminal escape) is
    skipped and counted, with the same first line number, by the bulk path and the line
    parser; a line that looks like a port but is not one sends the dump to the line parser."""
    first_port = GOOD.index("[1]\t")
    second_port = GOOD.index("[2]\t")
    text = GOOD[:second_port] + junk + "\n" + GOOD[second_port:]
    fast, slow = bulk.parse(text, "t"), reference.parse(text, "t")
    assert fast is not None
    assert (fast.notes, len(fast.links)) == (slow.notes, len(slow.links)) == (fast.notes, 2)
    broken = GOOD[:first_port] + "[1]\tnot a port\n" + GOOD[first_port:]
    assert bulk.parse(broken, "t") is None


def test_crlf_and_no_tabs_variants_agree() -> None:
    crlf = GOOD.replace("\n", "\r\n")
    squeezed = GOOD.replace("\t", "")
    base = parse_ibnetdiscover(GOOD)
    for variant in (crlf, squeezed):
        fab = parse_ibnetdiscover(variant)
        assert fab.switches == base.switches and fab.cas == base.cas
        assert Counter(fab.links) == Counter(base.links)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("", None),
        ("\n\n   \n", None),
        ("# only comments\n#\n", None),
        ("hello world\nthis is not a dump\n", None),
        (GOOD + "\nvendid=0x2c9\ndevid=0x1021\n", GOOD.count("\n") + 2),  # cut after ids
        (GOOD + '\nvendid=0x2c9\nCa\t1 "H-e09d73', GOOD.count("\n") + 3),  # cut in a header
        (GOOD[: GOOD.rindex("[1](")] + '[1](e09d7303007a4bd9) \t"S-2c5e', GOOD.count("\n")),
        ('[1]\t"H-e09d7303007a4bd8"[1] # "x" lid 1 4xNDR\n' + GOOD, 1),  # port before a header
        (GOOD + "\x00\x01\x02binary\xff\n", GOOD.count("\n") + 1),
        ("\x7fELF\x02\x01\x01\x00\x00\x00\n\x03\x00>\x00", 1),
    ],
    ids=[
        "empty",
        "blank",
        "comments",
        "prose",
        "ids-without-header",
        "cut-in-header",
        "cut-mid-line",
        "port-before-header",
        "binary-tail",
        "binary",
    ],
)
def test_malformed_input_raises_parse_error(text: str, line: int | None) -> None:
    with pytest.raises(ParseError) as err:
        parse_ibnetdiscover(text, "dump.txt")
    assert err.value.line == line
    assert str(err.value).startswith("dump.txt")


def test_truncated_last_block_is_an_error() -> None:
    """The last CA's port line is missing although its switch lists the cable."""
    cut = GOOD[: GOOD.rindex("[1](")]
    with pytest.raises(ParseError, match="truncated") as err:
        parse_ibnetdiscover(cut)
    assert err.value.line == cut.count("\n")  # the header line of that CA


def test_duplicate_guid_conflict_is_an_error() -> None:
    dup = GOOD + _ca("e09d7303007a4bd8", "other-host mlx5_3", 1, 11)
    with pytest.raises(ParseError, match="declared twice"):
        parse_ibnetdiscover(dup)


def test_identical_duplicate_block_is_a_note() -> None:
    dup = GOOD + _ca("e09d7303007a4bd8", "node1 mlx5_0", 1, 11)
    fab = parse_ibnetdiscover(dup)
    assert [n.kind for n in fab.notes] == ["duplicate-block"]
    assert len(fab.links) == 2


def test_ca_with_no_links_is_a_note() -> None:
    lonely = GOOD + '\nvendid=0x2c9\ncaguid=0xabc\nCa\t1 "H-0000000000000abc"\t\t# "spare mlx5_9"\n'
    fab = parse_ibnetdiscover(lonely)
    assert [(n.kind, n.guid) for n in fab.notes] == [("isolated", "0000000000000abc")]


def test_peer_without_block_is_created_with_a_note() -> None:
    """A CA that appears only as the peer of a switch port (no own block)."""
    extra = '[3]\t"H-00000000000000aa"[1](aa) \t\t# "ghost01 mlx5_0" lid 13 4xHDR\n'
    text = GOOD.replace(SWITCH, SWITCH + extra)
    fab = parse_ibnetdiscover(text)
    assert fab.cas["00000000000000aa"].description == "ghost01 mlx5_0"
    assert [n.kind for n in fab.notes] == ["no-block"]
    assert Link.between("2c5eab0300b87b40", 3, "00000000000000aa", 1, "4x", "HDR") in fab.links


def test_ext_ports_and_full_info_take_the_line_parser() -> None:
    text = GOOD.replace('[1]\t"H-e09d7303007a4bd8"[1]', '[1][ext 3]\t"H-e09d7303007a4bd8"[1]')
    text = text.replace("lid 12 4xNDR\n", "lid 12 4xNDR s=5 w=3 v=1\n", 1)
    fab = parse_ibnetdiscover(text)
    assert len(fab.links) == 2 and {link.speed for link in fab.links} == {"NDR"}


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("4xNDR", ("4x", "NDR")),
        ("4x EDR", ("4x", "EDR")),
        ("1xSDR", ("1x", "SDR")),
        ("4x ???", ("4x", "???")),
        ("12xFDR10", ("12x", "FDR10")),
        ("4x 10.0 Gbps", ("4x", "QDR")),
    ],
)
def test_split_width_speed(token: str, expected: tuple[str, str]) -> None:
    assert split_width_speed(token) == expected


@given(st.lists(st.sampled_from(["4xNDR", "4x EDR", "1xSDR", "4x 10.0 Gbps"]), min_size=1))
def test_link_rates_are_each_token_split_whether_one_or_many(tokens: list[str]) -> None:
    """One rate on every cable takes the repeated-value path, several the lookup: both give
    every cable its own token's width and speed."""
    n = len(tokens)
    links = links_from_columns(["a"] * n, [1] * n, ["b"] * n, list(range(n)), tokens)
    assert list(zip(links.width, links.speed, strict=True)) == list(map(split_width_speed, tokens))


# ---------------------------------------------------------------------------------------------
# Fuzzing: whatever the text, the parser answers with a Fabric or a ParseError.


def _parse_or_parse_error(text: str) -> None:
    with contextlib.suppress(ParseError):
        parse_ibnetdiscover(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_fuzz_arbitrary_text(text: str) -> None:
    _parse_or_parse_error(text)


_ALPHABET = st.sampled_from(
    ['"', "[", "]", "(", ")", "#", "\n", "\t", " ", "x", "S-", "H-", "0", "9", "f", "=", "\r"]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(GOOD)),
            st.integers(0, 40),
            st.lists(_ALPHABET, max_size=6).map("".join),
        ),
        max_size=4,
    )
)
def test_fuzz_mutated_dump(edits: list[tuple[int, int, str]]) -> None:
    """Deletions/insertions in a real-layout dump (cuts, doubled lines, stray quotes)."""
    text = GOOD
    for pos, length, insert in edits:
        text = text[:pos] + insert + text[pos + length :]
    _parse_or_parse_error(text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_real_snippets(data: st.DataObject) -> None:
    """Line-level mutations of a real dump: drop, duplicate or truncate lines."""
    lines = _REAL_SNIPPET.splitlines(keepends=True)
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["drop", "dup", "cut"]))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        else:
            lines[i] = lines[i][: data.draw(st.integers(0, len(lines[i])))]
        if not lines:
            break
    _parse_or_parse_error("".join(lines))


# a PuTTY-style excerpt of the kb dump layout (CRLF, loops, ibwarn) kept inline so the fuzz
# test needs no fixture file
_REAL_SNIPPET = (
    "src/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1,1,31 Attr 0x11:0) bad status 110\r\n"
    "#\r\n\r\nvendid=0x2c9\r\ndevid=0xcb20\r\nsysimgguid=0xe41d2d030003e470\r\n"
    "switchguid=0xe41d2d030003e470(e41d2d030003e470)\r\n"
    'Switch 36 "S-e41d2d030003e470" # "SwitchIB Mellanox Technologies" '
    "base port 0 lid 268 lmc 0\r\n"
    '[1] "S-e41d2d030003e470"[2] # "SwitchIB Mellanox Technologies" lid 268 4xEDR\r\n'
    '[2] "S-e41d2d030003e470"[1] # "SwitchIB Mellanox Technologies" lid 268 4xEDR\r\n'
    '[34] "H-e41d2d030061f957"[1](e41d2d030061f957) # "r-ufm216 HCA-2" lid 2 4xEDR\r\n'
    "\r\nvendid=0x2c9\r\ndevid=0x1013\r\ncaguid=0xe41d2d030061f957\r\n"
    'Ca 1 "H-e41d2d030061f957" # "r-ufm216 HCA-2"\r\n'
    '[1](e41d2d030061f957) "S-e41d2d030003e470"[34] # lid 2 lmc 0 '
    '"SwitchIB Mellanox Technologies" lid 268 4xEDR\r\n'
)


def test_inline_snippet_parses() -> None:
    fab = parse_ibnetdiscover(_REAL_SNIPPET)
    assert (len(fab.switches), len(fab.cas), len(fab.links)) == (1, 1, 2)
    assert [n.kind for n in fab.notes] == ["skipped-lines"]


# ---------------------------------------------------------------------------------------------
# Running the binary.


def test_run_returns_stdout() -> None:
    out = run_ibnetdiscover(sys.executable, ["-c", "print('vendid=0x2c9')"], timeout=30)
    assert out == "vendid=0x2c9\n"


def test_run_missing_binary() -> None:
    with pytest.raises(CollectError, match="command not found"):
        run_ibnetdiscover("/nonexistent/ibnetdiscover", [], timeout=5)


def test_run_nonzero_exit_reports_stderr_tail() -> None:
    code = (
        "import sys; print('noise', file=sys.stderr); "
        "print('ibwarn: no port', file=sys.stderr); sys.exit(3)"
    )
    with pytest.raises(CollectError) as err:
        run_ibnetdiscover(sys.executable, ["-c", code], timeout=30)
    message = str(err.value)
    assert "exit status 3" in message and "ibwarn: no port" in message
    assert "\n" not in message


def test_run_timeout() -> None:
    with pytest.raises(CollectError, match=r"timed out after 0\.5s"):
        run_ibnetdiscover(sys.executable, ["-c", "import time; time.sleep(10)"], timeout=0.5)


@pytest.mark.skipif(not fork.spare_cpu(), reason="needs a second CPU to fork onto")
@pytest.mark.parametrize(
    "source",
    [*(e.file for e in FIXTURES if not e.file.startswith("ibnetdiscover-p-")), "sim"],
)
def test_fast_path_in_two_processes_equals_one(source: str) -> None:
    """A large dump's second half is read by a forked child: same Fabric, same order."""
    if source == "sim":
        text = generate_ibnetdiscover(parse_sim_spec("nodes=512,rails=8,su=32,tiers=3"))
    else:
        text = _text(source)
    one = bulk.parse(text, "x", fork_at=1 << 40)
    two = bulk.parse(text, "x", fork_at=0)
    if one is None:
        assert two is None
        return
    assert two is not None
    assert list(two.switches.items()) == list(one.switches.items())
    assert list(two.cas.items()) == list(one.cas.items())
    assert (two.links, two.notes) == (one.links, one.notes)


def test_the_two_shares_cost_the_same_not_the_same_bytes() -> None:
    """Switch blocks (printed first) cost twice as much per byte as CA blocks, so the parent
    takes less than half of the text; without switches the split is at half the bytes."""
    text = generate_ibnetdiscover(parse_sim_spec("nodes=512,rails=8,su=32,tiers=3"))
    bounds = bulk._chunk_bounds(text)
    half = bulk._balanced_half(text, bounds)

    def cost(start: int, end: int) -> int:
        switch_bytes = sum(
            b - a
            for a, b in zip(bounds[start:end], bounds[start + 1 : end + 1], strict=True)
            if text.startswith("\nSwitch", a)
        )
        return bounds[end] - bounds[start] + (bulk._SWITCH_COST - 1) * switch_bytes

    parent, child = cost(0, half - 1), cost(half - 1, len(bounds) - 1)
    largest = max(cost(i, i + 1) for i in range(len(bounds) - 1))
    assert abs(parent - child) <= largest
    assert bounds[half - 1] < len(text) * 0.45
    cas_only = text[text.index("\nvendid=0x2c9\ndevid=0x1021") :]
    ca_bounds = bulk._chunk_bounds(cas_only)
    assert bulk._balanced_half(cas_only, ca_bounds) == bisect_left(ca_bounds, len(cas_only) / 2)


def test_damage_in_the_forked_half_declines_the_fast_path() -> None:
    """An irregular chunk read by the child sends the dump to the line parser, as in one pass."""
    text = generate_ibnetdiscover(parse_sim_spec("nodes=512,rails=8,su=32,tiers=3"))
    cut = text.rfind("\n[", 0, len(text) * 3 // 4)
    damaged = text[:cut] + "\n[garbage" + text[cut:]
    assert bulk.parse(damaged, "x", fork_at=0) is None
    assert bulk.parse(text, "x", fork_at=0) is not None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_fast_path_agrees_with_line_parser(data: st.DataObject) -> None:
    """Damage a dump the way files get damaged (lines lost, lines cut and joined to the next):
    when the bulk path accepts the text, the line parser must read it the same way."""
    lines = data.draw(st.sampled_from([GOOD, _REAL_SNIPPET])).splitlines(keepends=True)
    for _ in range(data.draw(st.integers(1, 3))):
        if not lines:
            break
        i = data.draw(st.integers(0, len(lines) - 1))
        if data.draw(st.booleans()):
            del lines[i]
        else:
            lines[i] = lines[i][: data.draw(st.integers(0, len(lines[i])))]
    text = "".join(lines)
    fast = bulk.parse(text, "")
    if fast is None:
        return
    slow = reference.parse(text, "")
    assert (fast.switches, fast.cas, fast.notes) == (slow.switches, slow.cas, slow.notes)
    assert list(fast.cas) == list(slow.cas)
    assert Counter(fast.links) == Counter(slow.links)


def test_stray_line_number_agrees_when_a_cut_line_joins_the_next() -> None:
    """A CA block's id line cut short joins the next line ("d" + "caguid=…"): the bulk path
    must number that stray line as the line parser does (found by the fuzz test above)."""
    lines = _REAL_SNIPPET.splitlines(keepends=True)
    lines[13] = lines[13][:1]
    del lines[0]
    text = "".join(lines)
    fast = bulk.parse(text, "")
    assert fast is not None
    assert fast.notes == reference.parse(text, "").notes
    assert "first at line 13" in fast.notes[0].message


def test_guids_are_normalised() -> None:
    """Upper-case or unpadded GUIDs (hand-edited files) key the same devices."""
    text = GOOD.replace('"H-e09d7303007a4bd8"', '"H-E09D7303007A4BD8"').replace(
        '"S-2c5eab0300b87b40"[1]', '"S-2C5EAB0300B87B40"[1]'
    )
    fab = parse_ibnetdiscover(text)
    assert set(fab.cas) == {"e09d7303007a4bd8", "e09d7303007a4bd9"}
    assert len(fab.links) == 2 and fab.notes == []


def test_router_block_is_a_ca() -> None:
    text = GOOD.replace(
        SWITCH, SWITCH + '[3]\t"R-0000000000000abc"[1](abc) \t\t# "rtr" lid 9 4xHDR\n'
    )
    text += (
        '\nvendid=0x2c9\nrtguid=0xabc\nRt\t1 "R-0000000000000abc"\t\t# "rtr"\n'
        '[1](abc) \t"S-2c5eab0300b87b40"[3]\t\t# lid 9 lmc 0 "MF0;leaf1:MQM9790/U1" lid 7 4xHDR\n'
    )
    fab = parse_ibnetdiscover(text)
    assert fab.cas["0000000000000abc"].description == "rtr"
    assert len(fab.links) == 3 and fab.notes == []


# ---------------------------------------------------------------------------------------------
# The two ends of a cable must agree; numbers are bounded.

SUPERPOD = "dgx-superpod-ndr-quantum2-mqm9701.txt"
SPINE_09 = "2c5eab0300c26200"  # its port 3 goes to IBLEAF-02-01 port 49, both blocks say so
HCA_LINE = '[1](e09d7303007a5a68) \t"S-2c5eab0300b87b40"[17]'
STOLEN = (
    '[2](e09d7303007a5a69) \t"S-2c5eab0300c26200"[3]\t\t# lid 658 lmc 0 '
    '"MF0;B10-P1-IBSPINE-09:MQM9701/U1" lid 31 4xNDR\n'
)


def _steal_spine_port(dual_port_header: bool) -> str:
    """The issue's example on a real dump: one extra port line in an HCA's block claims a spine
    port that the spine's own block (and the leaf's) give to a leaf."""
    text = _text(SUPERPOD)
    at = text.index("\n", text.index(HCA_LINE)) + 1
    text = text[:at] + STOLEN + text[at:]
    if dual_port_header:
        text = text.replace('Ca\t1 "H-e09d7303007a5a68"', 'Ca\t2 "H-e09d7303007a5a68"')
    return text


def test_a_port_claimed_by_two_cables_is_an_error_naming_both_lines() -> None:
    text = _steal_spine_port(dual_port_header=True)
    stolen_line = text[: text.index(STOLEN)].count("\n") + 1
    # the leaf's block lists that cable first (the spine's block agrees, further down)
    leaf_line = text[: text.index('[49]\t"S-2c5eab0300c26200"[3]')].count("\n") + 1
    with pytest.raises(ParseError, match=rf"port {SPINE_09}\[3\] is given two cables") as err:
        parse_ibnetdiscover(text, "dump")
    assert f"(line {leaf_line})" in str(err.value) and f"(line {stolen_line})" in str(err.value)
    assert err.value.line == stolen_line
    assert bulk.parse(text, "dump") is None


def test_a_port_beyond_the_header_port_count_is_an_error() -> None:
    """The same extra line in the single-port HCA's block: port 2 of a 1-port CA."""
    with pytest.raises(ParseError, match=r"port 2 beyond the 1 port\(s\)"):
        parse_ibnetdiscover(_steal_spine_port(dual_port_header=False), "dump")


def test_a_cable_listed_at_one_end_only_is_an_error() -> None:
    """A switch lists a cable to a CA whose own block lists another switch port: both
    blocks exist, so the ends contradict each other (a moved cable, a spliced dump)."""
    text = GOOD.replace('"S-2c5eab0300b87b40"[2]', '"S-2c5eab0300b87b40"[5]')
    with pytest.raises(ParseError, match="two ends of a cable must agree"):
        parse_ibnetdiscover(text)
    extra = '[3]\t"H-e09d7303007a4bd8"[2](e09d7303007a4bd8) \t\t# "node1" lid 11 4xNDR\n'
    one_sided = GOOD.replace(SWITCH, SWITCH + extra)
    one_sided = one_sided.replace('Ca\t1 "H-e09d7303007a4bd8"', 'Ca\t2 "H-e09d7303007a4bd8"')
    with pytest.raises(ParseError, match=r"listed only at 2c5eab0300b87b40's end") as err:
        parse_ibnetdiscover(one_sided)
    assert err.value.line == one_sided.count("\n", 0, one_sided.index("[3]\t")) + 1
    assert bulk.parse(one_sided, "") is None


def test_the_unmodified_dump_still_parses_in_bulk() -> None:
    fab = bulk.parse(_text(SUPERPOD), "x")
    assert fab is not None and len(fab.links) == 1114


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('[1]\t"H-e09d7303007a4bd8"[1]', '[7777]\t"H-e09d7303007a4bd8"[1]', "port number 7777"),
        ('"H-e09d7303007a4bd8"[1]', '"H-e09d7303007a4bd8"[' + "9" * 5000 + "]", "5000 digits"),
        ("port 0 lid 7 lmc", "port 0 lid " + "9" * 5000 + " lmc", r"LID 999999999999\.\.\."),
        ("port 0 lid 7 lmc", "port 0 lid 65536 lmc", r"LID 65536 out of range \(0-65535\)"),
        ("Switch\t65", "Switch\t" + "6" * 5000, r"port count 666666666666\.\.\."),
        ("Ca\t1", "Ca\t256", r"port count 256 out of range \(0-255\)"),
        ('[1]\t"H-', '[0]\t"H-', "port number 0 out of range"),
        ("lid 11 4xNDR", "lid 11 " + "4" * 5000 + "xNDR", "malformed port line"),
    ],
    ids=["port", "huge-peer-port", "huge-lid", "lid", "huge-nports", "nports", "port-0", "width"],
)
def test_numbers_are_bounded_with_one_clear_error(old: str, new: str, message: str) -> None:
    """int() refuses more than 4,300 digits with a ValueError (exit 70 once); every number is
    bounded before it is converted: a ParseError with its line, and the bulk path declines."""
    text = GOOD.replace(old, new, 1)
    assert text != GOOD
    with pytest.raises(ParseError, match=message) as err:
        parse_ibnetdiscover(text, "dump")
    assert err.value.line is not None and len(str(err.value)) < 200
    assert bulk.parse(text, "dump") is None


def test_ports_format_numbers_are_bounded() -> None:
    line = "CA 134 1 0x7cfe9003003b4bde 4x EDR - SW 1719 {port} 0x7cfe9003009ce5b0 ( 'o' - 's' )\n"
    assert len(parse_ibnetdiscover(line.format(port=10)).links) == 1
    for port, message in (("9" * 5000, "5000 digits"), ("300", "port number 300")):
        with pytest.raises(ParseError, match=message):
            parse_ibnetdiscover(line.format(port=port))
    with pytest.raises(ParseError, match="LID"):
        parse_ibnetdiscover(line.format(port=10).replace("1719", "9" * 5000))


def test_ports_format_a_port_given_two_cables_is_an_error_naming_both_lines() -> None:
    """The plain dumps' cable-end rule holds for ``-p`` too: the switch's own line gives its
    port 10 to another HCA than the HCA's line does (a spliced report, a moved cable)."""
    hca = "CA 134 1 0x7cfe9003003b4bde 4x EDR - SW 1719 10 0x7cfe9003009ce5b0 ( 'o1' - 's' )\n"
    moved = "SW 1719 10 0x7cfe9003009ce5b0 4x EDR - CA 133 1 0x7cfe9003003b4b96 ( 's' - 'o2' )\n"
    both_ends = (
        hca + "SW 1719 10 0x7cfe9003009ce5b0 4x EDR - CA 134 1 0x7cfe9003003b4bde ( 's' - 'o1' )\n"
    )
    assert len(parse_ibnetdiscover(both_ends).links) == 1
    with pytest.raises(ParseError, match=r"port 7cfe9003009ce5b0\[10\] is given two cables") as err:
        parse_ibnetdiscover("# a -p report\n" + hca + moved)
    assert "(line 2)" in str(err.value) and "(line 3)" in str(err.value)
    assert err.value.line == 3
