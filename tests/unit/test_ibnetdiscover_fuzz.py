"""Mutation fuzz of real ibnetdiscover dumps: the bulk path gives the reference's answer or none.

Every real plain/grouped dump in ``tests/fixtures/real/ibnetdiscover/`` and one simulated
fabric are damaged the way files get damaged and hostile inputs are built: cut short, lines
deleted, doubled, swapped or moved into another block, bytes flipped, a cable's far end
rewritten so that its two ends contradict each other, a number grown to thousands of digits.
For each mutant the line-by-line parser (the oracle) and the bulk path must agree: the same
switches, CAs (in order), cables and notes, or the bulk path declines; when the oracle rejects
the text, the bulk path must not return a Fabric. Through the CLI the same mutants exit 0 or 3
only, with one line on stderr and nothing written on 3.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TypeVar

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REAL_FIXTURES
from topograph_slurm.cli.main import main
from topograph_slurm.errors import ParseError
from topograph_slurm.model.fabric import Fabric
from topograph_slurm.sources.ibnetdiscover import bulk, parse_ibnetdiscover, reference
from topograph_slurm.sources.sim import generate_ibnetdiscover, parse_sim_spec

T = TypeVar("T")
DUMPS = REAL_FIXTURES / "ibnetdiscover"
# the two largest dumps cost ~0.25 s a mutant (both parsers): fuzzed in a test of their own
LARGE = ("mellanox-sat11-hdr-putty-log-notabs.txt", "nvidia-selene-compute-hdr-quantum.txt")
SIM = "sim:nodes=32,rails=4,su=16,tiers=3"
_PORT_LINE = re.compile(r"[ \t]*\[\d+\]")
_PEER = re.compile(r'"([SHR])-([0-9a-fA-F]+)"\[(\d+)\]')
_NUMBER = re.compile(r"\d+")
_JUNK = ["\x00", "\n", '"', "[", "]", "#", "\t", " ", "x", "0", "9", "f", "S", "H", "-", "\r", "é"]


def _names(large: bool) -> list[str]:
    if not DUMPS.is_dir():
        return []
    return sorted(
        p.name
        for p in DUMPS.iterdir()
        if not p.name.startswith("ibnetdiscover-p-") and (p.name in LARGE) == large
    )


@cache
def _lines(name: str) -> tuple[str, ...]:
    if name.startswith("sim:"):
        text = generate_ibnetdiscover(parse_sim_spec(name[4:]))
    else:
        text = (DUMPS / name).read_bytes().decode("utf-8", errors="replace")
    return tuple(text.splitlines(keepends=True))


def _sources(large: bool) -> st.SearchStrategy[str]:
    names = _names(large)
    if not names:
        pytest.fail(f"real fixtures folder {DUMPS} missing", pytrace=False)
    return st.sampled_from(names if large else [*names, SIM])


# ---------------------------------------------------------------------------------------------
# Mutations: each takes the lines and a source of choices and returns the new lines.


class Draw:
    """The choices a mutation makes, drawn by Hypothesis (so a failure shrinks to a short,
    replayable list of choices); ``benchmarks``-style scripts can drive the same mutations
    from a seeded ``random.Random`` by subclassing."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def bool(self) -> bool:
        return self.data.draw(st.booleans())

    def choice(self, options: Sequence[T]) -> T:
        return self.data.draw(st.sampled_from(options))


def _pick(draw: Draw, lines: list[str], port_lines: bool = False) -> int:
    """A line index; with *port_lines*, preferably a port line (the bulk path's hot spot)."""
    i = draw.int(0, len(lines) - 1)
    if port_lines:
        for j in (*range(i, len(lines)), *range(i)):
            if _PORT_LINE.match(lines[j]):
                return j
    return i


def _truncate(draw: Draw, lines: list[str]) -> list[str]:
    i = _pick(draw, lines)
    return [*lines[:i], lines[i][: draw.int(0, len(lines[i]))]]


def _delete(draw: Draw, lines: list[str]) -> list[str]:
    i = _pick(draw, lines, draw.bool())
    return lines[:i] + lines[i + 1 :]


def _duplicate(draw: Draw, lines: list[str]) -> list[str]:
    i = _pick(draw, lines, draw.bool())
    return [*lines[: i + 1], lines[i], *lines[i + 1 :]]


def _swap(draw: Draw, lines: list[str]) -> list[str]:
    i = _pick(draw, lines, draw.bool())
    j = min(len(lines) - 1, i + 1) if draw.bool() else _pick(draw, lines, True)
    out = list(lines)
    out[i], out[j] = out[j], out[i]
    return out


def _move(draw: Draw, lines: list[str]) -> list[str]:
    """A port line moved (or copied) into another block: a cable claimed by the wrong device."""
    i, j = _pick(draw, lines, True), _pick(draw, lines, True)
    out = list(lines)
    line = out[i] if draw.bool() else out.pop(i)
    out.insert(min(j, len(out)), line)
    return out


def _flip(draw: Draw, lines: list[str]) -> list[str]:
    i = _pick(draw, lines, draw.bool())
    line = lines[i]
    k = draw.int(0, max(0, len(line) - 1))
    out = list(lines)
    out[i] = line[:k] + draw.choice(_JUNK) + line[k + 1 :]
    return out


def _contradict(draw: Draw, lines: list[str]) -> list[str]:
    """A port line's far end rewritten: another port of the same peer, or another device's
    port (GUID taken from elsewhere in the dump), so the cable's two ends disagree."""
    i, j = _pick(draw, lines, True), _pick(draw, lines, True)
    mine, other = _PEER.search(lines[i]), _PEER.search(lines[j])
    if mine is None or other is None:
        return lines
    if draw.bool():
        far = f'"{other[1]}-{other[2]}"[{other[3]}]'
    else:
        far = f'"{mine[1]}-{mine[2]}"[{draw.int(1, 70)}]'
    out = list(lines)
    out[i] = lines[i][: mine.start()] + far + lines[i][mine.end() :]
    return out


def _huge(draw: Draw, lines: list[str]) -> list[str]:
    """A number (port, lid, port count) of thousands of digits: past int()'s 4,300-digit limit."""
    i = _pick(draw, lines, draw.bool())
    numbers = list(_NUMBER.finditer(lines[i]))
    if not numbers:
        return lines
    m = numbers[draw.int(0, len(numbers) - 1)]
    out = list(lines)
    out[i] = lines[i][: m.start()] + "9" * draw.choice([4, 6, 5000]) + lines[i][m.end() :]
    return out


MUTATIONS = [_truncate, _delete, _duplicate, _swap, _move, _flip, _contradict, _huge]


def _mutant(draw: Draw, name: str) -> str:
    lines = list(_lines(name))
    for _ in range(draw.int(1, 3)):
        if not lines:
            break
        lines = draw.choice(MUTATIONS)(draw, lines)
    return "".join(lines)


def assert_same(fast: Fabric, slow: Fabric) -> None:
    assert list(fast.switches.items()) == list(slow.switches.items())
    assert list(fast.cas.items()) == list(slow.cas.items()), "CAs keep the dump's order"
    assert Counter(fast.links) == Counter(slow.links)
    assert fast.notes == slow.notes
    assert fast.source == slow.source
    # the end kinds the bulk path hands the analysis are the ones the devices say
    assert fast.links.b_switch is not None, "every bulk-read cable was read from a switch"
    assert all(map(slow.switches.__contains__, fast.links.a))
    assert fast.links.b_switch == list(map(slow.switches.__contains__, fast.links.b))


def _check(text: str) -> None:
    """The bulk path gives the reference parser's Fabric or None; None when the reference
    rejects the text."""
    try:
        reference.check_last_line(text, "x")
    except ParseError:
        return  # parse.py stops here, before either parser
    try:
        slow: Fabric | None = reference.parse(text, "x")
    except ParseError:
        slow = None
    fast = bulk.parse(text, "x")
    if slow is None:
        assert fast is None, "the bulk path accepted a dump the reference parser rejects"
    elif fast is not None:
        assert_same(fast, slow)


@settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_bulk_path_agrees_with_reference_on_mutated_real_dumps(data: st.DataObject) -> None:
    _check(_mutant(Draw(data), data.draw(_sources(large=False))))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_bulk_path_agrees_with_reference_on_mutated_large_dumps(data: st.DataObject) -> None:
    _check(_mutant(Draw(data), data.draw(_sources(large=True))))


# ---------------------------------------------------------------------------------------------
# Through the CLI: exit 0 or 3, one line on stderr on 3, the output left alone.


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_cli_on_mutated_dumps_exits_0_or_3_with_one_line(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    text = _mutant(Draw(data), data.draw(_sources(large=False)))
    work = tmp_path_factory.mktemp("cli")
    dump, out = work / "dump.txt", work / "topology.conf"
    dump.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    result = CliRunner().invoke(
        main, ["--config", "/dev/null", "generate", "--ibnetdiscover", str(dump), "-o", str(out)]
    )
    assert result.exit_code in (0, 3), (result.exit_code, result.stderr, result.exception)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    if result.exit_code == 3:
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith("topograph-slurm: error: ")
        assert sorted(p.name for p in work.iterdir()) == ["dump.txt"], "nothing written"


def test_parse_errors_are_parse_errors_only() -> None:
    """parse_ibnetdiscover of a mutant raises nothing but ParseError (checked here once on a
    number past int()'s digit limit, in the other tests on every mutant through the CLI)."""
    text = "".join(_lines(SIM)).replace("[1]", "[" + "7" * 5000 + "]", 1)
    with pytest.raises(ParseError, match="out of range"):
        parse_ibnetdiscover(text, "x")
    assert bulk.parse(text, "x") is None


def test_fixture_folder_is_used() -> None:
    """Guard against the fuzz silently covering nothing: the real dumps are found."""
    assert len(_names(large=False)) >= 8 and set(_names(large=True)) == set(LARGE)
    assert Path(DUMPS / LARGE[0]).stat().st_size > 1 << 20


@pytest.mark.parametrize("chunk", [bulk._CHUNK, 1])
def test_a_switch_port_line_moved_after_a_ca_block_is_not_handed_back_to_the_switch(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the fuzz above: the switch's port 2 line, moved to just after the first CA's
    block (where the line parser reads it as that CA's cable, a contradiction), must not be
    rejoined to the switch when the fast path cuts the single-port CA block out, whether the
    switch block shares the CA blocks' chunk or not (chunk 1: a chunk per block)."""
    monkeypatch.setattr(bulk, "_CHUNK", chunk)
    fine = "".join(_lines("ibm-pcm-2009-sdr-1sw-2ca.txt"))
    fast, slow = bulk.parse(fine, "x"), reference.parse(fine, "x")
    assert fast is not None and Counter(fast.links) == Counter(slow.links)
    lines = list(_lines("ibm-pcm-2009-sdr-1sw-2ca.txt"))
    port2 = next(i for i, line in enumerate(lines) if line.startswith('[2]     "H-'))
    moved = lines.pop(port2)
    second = next(i for i, line in enumerate(lines) if line.startswith("caguid=0x2c9030002847c"))
    lines.insert(second - 3, moved)  # after the first CA's block, before the second's id lines
    text = "".join(lines)
    with pytest.raises(ParseError, match="two cables"):
        reference.parse(text, "x")
    assert bulk.parse(text, "x") is None


def test_the_cable_multiset_tells_apart_two_lines_that_swapped_their_far_ends() -> None:
    """Two CA lines whose switch ends were swapped (the mutant that the fuzz test once saw
    accepted) must change the multiset: the plain or re-hashed tuple hash is close to additive
    and matched for about one pair in forty; squared hashes match for none."""
    rng = random.Random(20261201)

    def guid() -> str:
        return f"{rng.getrandbits(64):016x}"

    same = 0
    for _ in range(4000):
        x, y, a, b = guid(), guid(), guid(), guid()
        ports = [str(rng.randint(1, 64)) for _ in range(4)]
        kept = [(x, ports[0], a, ports[1], "4xQDR"), (y, ports[2], b, ports[3], "4xQDR")]
        swapped = [(x, ports[0], b, ports[3], "4xQDR"), (y, ports[2], a, ports[1], "4xQDR")]
        same += bulk._multiset(kept) == bulk._multiset(swapped)
    assert same == 0
