"""Nodes that are off keep their place (``--keep-missing``): kept, expired, no longer listed by
Slurm, the shrink guard, and the summary recorded only after a successful write."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.generate import generate_sim
from topograph_slurm.analysis.state import keep_missing as k
from topograph_slurm.cli.main import main
from topograph_slurm.config import Settings, state_dir
from topograph_slurm.errors import Exit
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.result import Block, BlockTopology, LeafGroup, Tree
from topograph_slurm.model.summary import FabricSummary, NodeSummary
from topograph_slurm.sources.layout import load_topology
from topograph_slurm.sources.summary import decode, encode, summary_path

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DAY_AGO = "2026-11-30T12:00:00Z"


def _previous(**nodes: NodeSummary) -> FabricSummary:
    return FabricSummary("last", ["nodes", "leaves", "blocks"], dict(nodes))


def _policy(limit: str = "7d", listed: str | None = "n1,n2,n3") -> k.KeepPolicy:
    slurm = frozenset(listed.split(",")) if listed is not None else None
    return k.KeepPolicy(k.parse_duration(limit), slurm, NOW)


@pytest.mark.parametrize(
    ("text", "seconds"), [("7d", 604800), ("36h", 129600), ("90m", 5400), ("2w", 1209600), ("0", 0)]
)
def test_durations(text: str, seconds: int) -> None:
    assert k.parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "7", "7x", "-1d", "1.5d", "d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration like 7d"):
        k.parse_duration(text)


@pytest.mark.parametrize("text", ["3651d", "999999999w", "5256001m"])
def test_durations_past_ten_years_are_refused_not_an_overflow(text: str) -> None:
    """``999999999w`` once overflowed the date arithmetic (exit 70)."""
    with pytest.raises(ValueError, match=f"must be at most 3650d, got '{text}'"):
        k.parse_duration(text)
    assert k.parse_duration("3650d") == timedelta(days=3650)


def test_who_may_keep_their_place() -> None:
    previous = _previous(
        n1=NodeSummary("l1", last_seen=DAY_AGO),  # seen yesterday, listed: kept
        n2=NodeSummary("l1", last_seen="2026-11-20T12:00:00Z"),  # 11 days: expired
        n3=NodeSummary("l1"),  # never seen: unknown
        n4=NodeSummary("l1", last_seen=DAY_AGO),  # Slurm no longer lists it
        n5=NodeSummary("l1", last_seen=DAY_AGO),  # seen today
    )
    keep, refused = k.candidates(previous, ["n5"], _policy())
    assert list(keep) == ["n1"]
    assert [(f.kind, f.subject, f.is_problem) for f in refused] == [
        (FindingKind.KEPT_MISSING_EXPIRED, "n2", True),
        (FindingKind.MISSING_NOT_KEPT, "n3", True),
        (FindingKind.MISSING_NOT_KEPT, "n4", False),
    ]
    assert refused[0].message == (
        "absent since 2026-11-20T12:00:00Z, over 7d: dropped from the topology"
    )
    assert refused[2].message == "absent and no longer listed by Slurm: dropped from the topology"


def test_nothing_is_kept_when_off_and_the_summary_decides_without_a_node_list() -> None:
    previous = _previous(
        n1=NodeSummary("l1", last_seen=DAY_AGO), n2=NodeSummary("l1", last_seen="2026-11-20")
    )
    assert k.candidates(previous, [], _policy("0")) == ({}, [])
    keep, (expired,) = k.candidates(previous, [], _policy(listed=None))
    assert list(keep) == ["n1"] and expired.kind == FindingKind.KEPT_MISSING_EXPIRED


def test_kept_nodes_go_back_under_their_leaf_and_into_their_block() -> None:
    tree = Tree([LeafGroup("l1", ["g1"], ["n2"]), LeafGroup("l2", ["g2"], ["n9"])], [], ["l1"])
    keep = {
        "n1": NodeSummary("l1", "b1", last_seen=DAY_AGO),
        "n3": NodeSummary("gone", "gone", last_seen=DAY_AGO),
    }
    grown, leaves = k.place_in_tree(tree, keep)
    assert grown.leaves[0].nodes == ["n1", "n2"] and tree.leaves[0].nodes == ["n2"]
    assert leaves == {"n1": "l1"}
    blocks = BlockTopology([Block("b1", ["n2"]), Block("b2", ["n9"])], [2])
    placed_blocks, in_blocks = k.place_in_blocks(blocks, keep)
    assert placed_blocks is not None and placed_blocks.blocks[0].nodes == ["n1", "n2"]
    nodes, findings = k.kept_nodes(keep, leaves, in_blocks, _policy())
    assert nodes["n1"].kept and nodes["n1"].last_seen == DAY_AGO
    assert [(f.kind, f.subject) for f in findings] == [
        (FindingKind.KEPT_MISSING, "n1"),
        (FindingKind.MISSING_NOT_KEPT, "n3"),
    ]
    assert findings[0].message == (
        "absent from the fabric since 2026-11-30T12:00:00Z; kept in leaf l1 and block b1 "
        "until 2026-12-07T12:00:00Z"
    )
    assert findings[1].message == "its leaf gone and block gone are gone: dropped from the topology"


# --------------------------------------------------------------------------- generate -o


def _generate(out: Path, spec: str, *args: str, config: str = os.devnull) -> tuple[int, dict]:
    code, _, report = generate_sim(
        out, spec, *args, report=out.parent / "report.json", config=config
    )
    return code, report


def _kept_at(out: Path) -> Path:
    """Where generate keeps *out*'s summary: the default state directory."""
    return summary_path(out, state_dir(Settings()))


def _nodes(path: Path) -> list[str]:
    return load_topology(path).nodes


LISTED = ("--slurm-nodes", "gpu[0001-0015]")


@pytest.mark.parametrize("fmt", ["tree", "block"])
def test_a_node_off_today_keeps_its_leaf_and_block(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "topology.conf"
    assert _generate(out, "nodes=16,su=8", "--format", fmt)[0] == Exit.OK
    first = decode(_kept_at(out).read_bytes(), "kept")
    code, report = _generate(out, "nodes=13,su=8", "--format", fmt, *LISTED)
    assert code == Exit.OK
    assert _nodes(out) == [f"gpu{i:04d}" for i in range(1, 16)]  # gpu0016: Slurm lists it no more
    by_kind = {(f["kind"], f["subject"]) for f in report["findings"]}
    assert {(FindingKind.KEPT_MISSING, "gpu0014"), (FindingKind.KEPT_MISSING, "gpu0015")} <= by_kind
    assert (FindingKind.MISSING_NOT_KEPT, "gpu0016") in by_kind
    changes = report["since_last_run"]["changes"]
    assert [(c["kind"], c["subject"]) for c in changes if c["kind"] == "node-vanished"] == [
        ("node-vanished", "gpu0014"),
        ("node-vanished", "gpu0015"),
        ("node-vanished", "gpu0016"),
    ]
    kept = decode(_kept_at(out).read_bytes(), "kept").nodes["gpu0015"]
    assert kept.kept and kept.last_seen == first.nodes["gpu0015"].last_seen
    assert kept.leaf == "leaf-su002-r0" and kept.rails == first.nodes["gpu0015"].rails


def _block_sizes(path: Path) -> str:
    return next(line for line in path.read_text().splitlines() if "BlockSizes=" in line)


@pytest.fixture
def no_scontrol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm's node list unavailable: no scontrol on PATH."""
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


@pytest.mark.usefixtures("no_scontrol")
def test_one_node_off_without_slurms_node_list_keeps_its_place_and_block_sizes(
    tmp_path: Path,
) -> None:
    """Issue 24 item 4: one node powered off once turned BlockSizes=8,16,32 into 7,14,28 on
    every run without Slurm's node list, and --keep-missing kept nothing without it."""
    out = tmp_path / "topology.conf"
    assert _generate(out, "nodes=32,su=8", "--format", "block")[0] == Exit.OK
    code, report = _generate(out, "nodes=31,su=8", "--format", "block")
    assert code == Exit.OK and _block_sizes(out) == "BlockSizes=8,16,32"
    assert len(_nodes(out)) == 32
    (kept,) = [f for f in report["findings"] if f["kind"] == FindingKind.KEPT_MISSING]
    assert kept["subject"] == "gpu0032"


@pytest.mark.usefixtures("no_scontrol")
@pytest.mark.parametrize(("release", "sizes"), [("25.05", "8,16,32"), ("24.11", "7,14,28")])
def test_the_base_follows_the_unit_the_last_run_saw(
    tmp_path: Path, release: str, sizes: str
) -> None:
    """With nothing kept (--keep-missing 0), a 7-node unit among 8-node ones keeps base 8
    where Slurm keeps short blocks (25.05+); 24.11 would leave the short unit out, so there
    the base covers it."""
    out = tmp_path / "topology.conf"
    flags = ("--format", "block", "--slurm-version", release, "--keep-missing", "0")
    assert _generate(out, "nodes=32,su=8", *flags)[0] == Exit.OK
    assert _generate(out, "nodes=31,su=8", *flags)[0] == Exit.OK
    assert _block_sizes(out) == f"BlockSizes={sizes}" and len(_nodes(out)) == 31
    first = tmp_path / "first.conf"  # a first run knows no earlier unit: today's count decides
    assert _generate(first, "nodes=31,su=8", *flags)[0] == Exit.OK
    assert _block_sizes(first) == "BlockSizes=7,14,28"


def test_past_the_limit_a_kept_node_drops_out(tmp_path: Path) -> None:
    out = tmp_path / "topology.conf"
    _generate(out, "nodes=16,su=8")
    kept = decode(_kept_at(out).read_bytes(), "kept")
    week_ago = (datetime.now(UTC) - timedelta(days=8)).strftime(k.TIME_FORMAT)
    kept.nodes["gpu0016"].last_seen = week_ago
    _kept_at(out).write_bytes(encode(kept))
    code, report = _generate(out, "nodes=14,su=8", "--slurm-nodes", "gpu[0001-0016]")
    assert code == Exit.OK and _nodes(out) == [f"gpu{i:04d}" for i in range(1, 16)]
    (expired,) = [f for f in report["findings"] if f["kind"] == FindingKind.KEPT_MISSING_EXPIRED]
    assert (
        expired["subject"] == "gpu0016"
        and f"absent since {week_ago}, over 7d" in expired["message"]
    )


def test_the_shrink_guard_counts_kept_nodes_as_present(tmp_path: Path) -> None:
    out = tmp_path / "topology.conf"
    _generate(out, "nodes=16,su=8")
    before = _kept_at(out).read_bytes()
    listed = ("--slurm-nodes", "gpu[0001-0016]")
    # 7 of 16 nodes off (a leaf keeps one node, so its switches are still on the fabric)
    code, _ = _generate(out, "nodes=9,su=8", *listed, "--keep-missing", "0")
    assert code == Exit.REFUSED and len(_nodes(out)) == 16
    assert _kept_at(out).read_bytes() == before  # a refused run records nothing
    code, report = _generate(out, "nodes=9,su=8", *listed)
    assert code == Exit.OK and len(_nodes(out)) == 16
    assert sum(f["kind"] == FindingKind.KEPT_MISSING for f in report["findings"]) == 7


def test_without_a_summary_the_previous_output_gives_the_places(tmp_path: Path) -> None:
    out = tmp_path / "topology.conf"
    _generate(out, "nodes=16,su=8")
    _kept_at(out).unlink()
    code, report = _generate(out, "nodes=14,su=8", "--slurm-nodes", "gpu[0001-0016]")
    assert code == Exit.OK and len(_nodes(out)) == 16
    assert sum(f["kind"] == FindingKind.KEPT_MISSING for f in report["findings"]) == 2
    assert report["since_last_run"]["not_compared"][0].startswith("blocks and BlockSizes: ")


def test_a_corrupt_summary_is_a_finding_and_is_replaced(tmp_path: Path) -> None:
    out = tmp_path / "topology.conf"
    _generate(out, "nodes=16,su=8")
    _kept_at(out).write_text("{garbage")
    code, report = _generate(out, "nodes=14,su=8", "--slurm-nodes", "gpu[0001-0016]")
    assert code == Exit.OK and len(_nodes(out)) == 16  # the topology file gave the places
    (bad,) = [f for f in report["findings"] if f["kind"] == "summary-unreadable"]
    assert "not a fabric summary" in bad["message"] and bad["subject"] == str(out)
    assert decode(_kept_at(out).read_bytes(), "kept").nodes["gpu0016"].kept


def test_first_run_report_says_there_is_nothing_to_compare(tmp_path: Path) -> None:
    code, report = _generate(tmp_path / "topology.conf", "nodes=16,su=8")
    assert code == Exit.OK and report["since_last_run"]["changes"] == []
    assert report["since_last_run"]["not_compared"][0].startswith("everything: no earlier run")


def test_no_summary_beside_a_device_or_with_check(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["--config", os.devnull, "generate", "--sim", "nodes=4,su=4", "-o", os.devnull]
    )
    assert result.exit_code == 0 and not _kept_at(Path(os.devnull)).exists()
    out = tmp_path / "topology.conf"
    out.write_text("")
    _generate(out, "nodes=4,su=4", "--check")
    assert not _kept_at(out).exists()


def test_keep_missing_is_checked_as_flag_and_config_key(tmp_path: Path) -> None:
    out = tmp_path / "topology.conf"
    code, _ = _generate(out, "nodes=4,su=4", "--keep-missing", "7x")
    assert code == Exit.USAGE and not out.exists()
    config = tmp_path / "config.yaml"
    config.write_text("keep_missing: 7x\n")
    assert _generate(out, "nodes=4,su=4", config=str(config))[0] == Exit.CONFIG
    config.write_text("keep_missing: 0\n")
    assert _generate(out, "nodes=4,su=4", config=str(config))[0] == Exit.OK


def test_keep_missing_error_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["--config", os.devnull, "generate", "--sim", "demo", "--keep-missing", "week"]
    )
    assert result.exit_code == Exit.USAGE
    assert result.stderr == (
        "topograph-slurm: error: --keep-missing: must be a duration like 7d, 36h, 90m or 0 "
        "(off), got 'week'\n"
    )


def test_a_tree_run_needs_no_blocks_for_its_summary(tmp_path: Path) -> None:
    out = tmp_path / "topology.conf"
    code, _ = _generate(out, "nodes=8,su=4", "--block-source", "nvlink")  # no GPU data
    assert code == Exit.OK
    assert "blocks" not in decode(_kept_at(out).read_bytes(), "kept").known
