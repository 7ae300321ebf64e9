"""The pure parts of benchmarks/bench_placement.py: the seeded job stream, the sbatch options
of each policy, and the metrics on a hand-made schedule."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_placement as bench

BLOCKS = {f"b{b + 1}": [f"n{b * 4 + i + 1:02d}" for i in range(4)] for b in range(4)}


def job(index: int, nodes: int, tp: int, runtime: int = 5, arrival: int = 0) -> bench.JobSpec:
    return bench.JobSpec(index, nodes, tp, runtime, arrival)


def test_stream_is_deterministic_for_a_seed() -> None:
    assert bench.job_stream(100, 7) == bench.job_stream(100, 7)
    assert bench.job_stream(100, 7) != bench.job_stream(100, 8)


@pytest.mark.parametrize("seed", range(5))
def test_stream_is_valid(seed: int) -> None:
    shape = bench.StreamShape()
    stream = bench.job_stream(120, seed, shape=shape)
    assert [j.index for j in stream] == list(range(120))
    for j in stream:
        gpus = j.nodes * bench.GPUS_PER_NODE
        assert 1 <= j.nodes <= 16 and 4 <= j.tp <= 64
        assert j.tp <= gpus and gpus % j.tp == 0, j
        assert shape.runtime[0] <= j.runtime <= shape.runtime[1]
    arrivals = [j.arrival for j in stream]
    assert arrivals == sorted(arrivals)
    bursts = [arrivals.count(t) for t in sorted(set(arrivals))]
    assert max(bursts) > 1 and all(n <= shape.burst[1] for n in bursts)  # bursts, then pauses
    assert {j.tp for j in stream} >= {4, 8, 16, 32, 64}
    assert max(j.nodes for j in stream) > 8  # some jobs need more than one block


def test_stream_respects_the_node_cap() -> None:
    assert max(j.nodes for j in bench.job_stream(200, 1, max_nodes=8)) <= 8


def test_policy_args() -> None:
    small, large = job(3, 4, 16), job(4, 12, 32)
    assert bench.policy_args("plain", small, 8) == "--exclusive -N 4 -t 1 -o /dev/null -J bench-3"
    assert bench.policy_args("tp-size", small, 8).endswith(" --tp-size=16")
    assert bench.policy_args("whole-unit", small, 8).endswith(
        "-N 4 -t 1 -o /dev/null -J bench-3 --segment=4"
    )
    assert "-N 16 " in bench.policy_args("whole-unit", large, 8)  # rounded up to whole blocks
    assert bench.policy_args("whole-unit", large, 8).endswith("--segment=8")
    with pytest.raises(ValueError, match="unknown policy"):
        bench.policy_args("best", small, 8)


def test_tp_crossing_counts_groups_over_a_block() -> None:
    fmap = bench.block_fabric(BLOCKS)
    spec = job(0, 4, 16)  # 2 nodes per TP group
    assert bench.tp_crossing(["n01", "n02", "n05", "n06"], spec, fmap, 8) == (0, 2)
    assert bench.tp_crossing(["n03", "n04", "n05", "n06"], spec, fmap, 8) == (0, 2)
    assert bench.tp_crossing(["n04", "n05", "n06", "n07"], spec, fmap, 8) == (1, 2)
    assert bench.tp_crossing(["n04", "n05", "n08", "n09"], spec, fmap, 8) == (2, 2)
    assert bench.tp_crossing(["n01", "n05"], job(1, 2, 8), fmap, 8) == (0, 0)  # one node each
    # a whole-unit job on rounded-up nodes runs on the first spec.nodes of them
    assert bench.tp_crossing(["n03", "n04", "n05", "n06"], job(2, 2, 16), fmap, 8) == (0, 1)


def test_metrics_on_a_hand_made_schedule() -> None:
    """Four 4-node blocks (16 nodes); times in seconds from the first submission."""
    fmap = bench.block_fabric(BLOCKS)
    records = [
        bench.JobRecord(job(0, 2, 16), "COMPLETED", 0, 0, 10, ("n04", "n05")),  # crosses
        bench.JobRecord(job(1, 4, 16), "COMPLETED", 0, 2, 12, ("n01", "n02", "n03", "n06")),
        bench.JobRecord(job(2, 1, 8), "COMPLETED", 5, 15, 20, ("n09",)),
        bench.JobRecord(job(3, 4, 4), "COMPLETED", 5, 5, 25, ("n13", "n14", "n15", "n16")),
        bench.JobRecord(job(4, 2, 16), "FAILED", 6, 0, 0, ()),
    ]
    result = bench.summarise("x", records, 16, fmap)
    # TP groups spanning nodes: job 0 one (crosses), job 1 two (n01,n02 in; n03,n06 out)
    assert (result.tp_groups, result.tp_crossing, result.jobs_crossing) == (3, 2, 2)
    assert result.crossing_share == pytest.approx(2 / 3)
    assert (result.jobs, result.failed) == (5, 1)
    assert result.mean_wait == pytest.approx((0 + 2 + 10 + 0) / 4)
    assert result.p95_wait == 10
    assert result.makespan == 25
    busy = 2 * 10 + 4 * 10 + 1 * 5 + 4 * 20
    assert result.utilisation == pytest.approx(busy / (16 * 25))
    assert result.useful == result.utilisation
    # cancelled at the timeout before it started (Slurm's StartTime = the cancel time)
    stuck = bench.JobRecord(job(5, 8, 8), "CANCELLED", 20, 40, 40, ())
    with_stuck = bench.summarise("x", [*records, stuck], 16, fmap)
    assert with_stuck.failed == 2 and with_stuck.p95_wait == 20
    assert with_stuck.not_done == (4, 5)
    assert with_stuck.mean_wait == pytest.approx((0 + 2 + 10 + 0 + 20) / 5)
    text = bench.table([result])
    assert text.splitlines()[1].startswith("x") and "66.7%" in text


def test_useful_utilisation_leaves_out_the_rounding_of_whole_units() -> None:
    nodes = tuple(f"n{i:02d}" for i in range(1, 9))
    rec = bench.JobRecord(job(0, 6, 8), "COMPLETED", 0, 0, 10, nodes)
    result = bench.summarise("whole-unit", [rec], 16, bench.block_fabric(BLOCKS))
    assert result.utilisation == pytest.approx(0.5)
    assert result.useful == pytest.approx(6 / 16)


def test_p95_is_nearest_rank() -> None:
    assert bench.p95(list(range(1, 101))) == 95
    assert bench.p95([3.0]) == 3.0
    assert bench.p95([]) == 0.0


# --------------------------------------------------------------------------------------------
# A fragmented cluster and the node order
# --------------------------------------------------------------------------------------------

EIGHTS = {f"b{b + 1}": [f"n{b * 8 + i + 1:02d}" for i in range(8)] for b in range(4)}


@pytest.mark.parametrize(("share", "seed"), [(0.25, 1), (0.3, 2), (0.4, 3), (0.3, 4)])
def test_fragment_nodes_spreads_a_seeded_share_over_every_unit(share: float, seed: int) -> None:
    busy = bench.fragment_nodes(EIGHTS, share, seed)
    assert busy == bench.fragment_nodes(EIGHTS, share, seed)
    assert len(busy) == len(set(busy)) == round(share * 32)
    per_unit = [sum(n in busy for n in nodes) for nodes in EIGHTS.values()]
    assert max(per_unit) - min(per_unit) <= 1 and min(per_unit) >= 2  # every block held
    order = [n for nodes in EIGHTS.values() for n in nodes]
    assert busy == sorted(busy, key=order.index)


def test_fragment_nodes_differ_by_seed_and_refuse_more_than_units_hold() -> None:
    assert bench.fragment_nodes(EIGHTS, 0.3, 1) != bench.fragment_nodes(EIGHTS, 0.3, 2)
    assert bench.fragment_nodes(EIGHTS, 0, 1) == []
    with pytest.raises(ValueError, match="evenly"):
        bench.fragment_nodes({"a": ["n1"], "b": ["n2", "n3", "n4"]}, 0.75, 1)


def test_job_layout_takes_two_stages_where_they_fit() -> None:
    assert bench.job_layout(job(0, 4, 16)) == bench.ParallelLayout.for_world(32, tp=16, pp=2)
    assert bench.job_layout(job(0, 2, 16)).pp == 1  # 16 GPUs: one TP group
    assert bench.job_layout(job(0, 3, 8)).pp == 1  # 24 GPUs: 3 TP groups, not two stages
    layout = bench.job_layout(job(0, 6, 4))
    assert (layout.tp, layout.pp, layout.dp) == (4, 2, 6)


def test_tree_fabric_reads_leaves_and_the_switch_above() -> None:
    import harness

    leaves = [harness.TopoSwitch(name, 0, 100, nodes, []) for name, nodes in BLOCKS.items()]
    spine = harness.TopoSwitch("spine", 1, 100, [], list(BLOCKS))
    fmap = bench.tree_fabric([*leaves, spine])
    assert fmap.levels == ["node", "leaf", "spine-1", "island", "fabric"]
    assert bench.unit_level(fmap) == "leaf" and bench.split_levels(fmap) == ["node", "leaf"]
    assert bench.tp_crossing(["n04", "n05", "n06", "n07"], job(0, 4, 16), fmap, 8) == (1, 2)
    blocks = bench.block_fabric(BLOCKS)
    assert bench.unit_level(blocks) == "domain" and bench.split_levels(blocks) == ["node", "domain"]


def test_compare_order_against_slurms_rank_order() -> None:
    """Blocks of 4; Slurm ranks n04, n05, n06, n08 in that order: with tp=16 (2 nodes per
    group) the pairs (n04, n05) and (n06, n08) cross 1 and 0 blocks; ``order`` pairs n05
    with n06 and leaves n04 with n08: still one crossing, so not improved."""
    fmap = bench.block_fabric(BLOCKS)
    same = bench.compare_order(job(0, 4, 16), ["n04", "n05", "n06", "n08"], fmap)
    assert (same.layout, same.improved) == ("tp16 pp2 dp1", False)
    assert same.slurm["tp"] == same.ordered["tp"] == {"node": 2, "domain": 1}
    # n01 n05 n02 n06: Slurm's pairs both cross; order's (n01, n02), (n05, n06) none
    better = bench.compare_order(job(1, 4, 16), ["n01", "n05", "n02", "n06"], fmap)
    assert better.improved and better.chosen in ("packed", "natural")
    assert better.slurm["tp"]["domain"] == 2 and better.ordered["tp"]["domain"] == 0
    assert better.groups == {"tp": 2, "pp": 16}
    text = bench.order_table([same, better])
    assert "2 multi-node jobs, 1 improved (50.0%)" in text
    tp_line = next(line for line in text.splitlines() if line.startswith("tp"))
    assert tp_line.split() == ["tp", "4", "4", "->", "4", "3", "->", "1"]


def test_summarise_compares_the_order_of_every_multi_node_job() -> None:
    fmap = bench.block_fabric(BLOCKS)
    records = [
        bench.JobRecord(job(0, 2, 16), "COMPLETED", 0, 0, 10, ("n04", "n05")),
        bench.JobRecord(job(1, 1, 8), "COMPLETED", 0, 0, 10, ("n09",)),
        bench.JobRecord(job(2, 4, 8), "COMPLETED", 0, 0, 10, ("n01", "n05", "n02", "n06")),
    ]
    result = bench.summarise("x", records, 16, fmap)
    assert [c.index for c in result.orders] == [0, 2]
    assert result.level == "domain" and "crossing domain" in bench.table([result])
