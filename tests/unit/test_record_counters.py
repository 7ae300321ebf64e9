"""A node's links at job start against job end (analysis/record/counters.py): real counters
read from a tree laid out from real prints, then changed the way a job's hours change them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import ib_sysfs
from topograph_slurm.analysis.record.counters import compare
from topograph_slurm.model.counters import NodeCounters, NvlinkReading
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.sources.link_counters import read_sysfs


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return ib_sysfs.lay_out(tmp_path)


def _changes(tree: Path, *changes: object) -> list[tuple[str, str, str]]:
    start = read_sysfs(tree, "gpu01")
    for change in changes:
        change(tree)  # type: ignore[operator]
    end = read_sysfs(tree, "gpu01")
    return [(f.kind, f.subject, f.message) for f in compare(start, end, "gpu01")]


def test_nothing_changed_is_no_finding(tree: Path) -> None:
    assert _changes(tree) == []


def test_counters_that_rose_name_the_link_and_how_much(tree: Path) -> None:
    found = _changes(
        tree,
        lambda t: ib_sysfs.bump(t, "symbol_error", 12),
        lambda t: ib_sysfs.bump(t, "port_rcv_errors", 3),
    )
    assert found == [
        (
            "link-errors-during-job",
            "gpu01/mlx5_1/1",
            "mlx5_1/1: symbol_error +12, port_rcv_errors +3 during the job",
        )
    ]


def test_a_counter_that_went_down_is_a_reset_not_a_rise(tree: Path) -> None:
    found = _changes(tree, lambda t: ib_sysfs.bump(t, "excessive_buffer_overrun_errors", -15))
    assert found == [
        (
            "link-counters-reset",
            "gpu01/mlx5_1/1",
            "mlx5_1/1: went down (reset): excessive_buffer_overrun_errors 15->0",
        )
    ]
    assert FindingKind.LINK_COUNTERS_RESET.severity is None  # health makes no verdict of it


def test_a_rate_drop_and_a_state_change_are_a_degraded_link(tree: Path) -> None:
    found = _changes(
        tree,
        lambda t: ib_sysfs.set_file(t, "rate", "50 Gb/sec (2X EDR)", device="mlx5_0"),
        lambda t: ib_sysfs.set_file(t, "state", "1: DOWN"),
        lambda t: ib_sysfs.set_file(t, "phys_state", "2: Polling"),
    )
    assert found == [
        (
            "link-degraded-during-job",
            "gpu01/mlx5_0/1",
            "mlx5_0/1: rate dropped from 4xEDR to 2xEDR",
        ),
        (
            "link-degraded-during-job",
            "gpu01/mlx5_1/1",
            "mlx5_1/1: state left ACTIVE (now DOWN); phys_state left LinkUp (now Polling)",
        ),
    ]


def test_a_port_gone_at_the_end_is_a_degraded_link(tree: Path) -> None:
    found = _changes(tree, ib_sysfs.remove_port)
    assert found == [
        ("link-degraded-during-job", "gpu01/mlx5_1/1", "mlx5_1/1: gone at the job's end")
    ]


def test_nvlink_errors_that_rose_and_the_node_health_judges() -> None:
    start = NodeCounters(nvlinks=(NvlinkReading(0, 3, {"Replay Errors": 1, "CRC Errors": 0}),))
    end = NodeCounters(nvlinks=(NvlinkReading(0, 3, {"Replay Errors": 4, "CRC Errors": 0}),))
    (found,) = compare(start, end, "gpu01")
    assert (found.kind, found.message, found.nodes) == (
        "nvlink-errors-during-job",
        "GPU0/link3: Replay Errors +3 during the job",
        ("gpu01",),
    )
    assert FindingKind.NVLINK_ERRORS_DURING_JOB.severity == "degraded"
