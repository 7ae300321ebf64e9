"""Blocks: adjacency order, BlockSizes inference/validation and per-release rules."""

from __future__ import annotations

import pytest

from topograph_slurm.analysis.fabric.block import (
    adjacency_order,
    covering_base,
    designed_base,
    infer_block_sizes,
    plan_blocks,
    typical_base,
    validate_block_sizes,
)
from topograph_slurm.errors import ConfigError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.result import LEVEL_INFO, Block, LeafGroup, Tree, TreeSwitch
from topograph_slurm.model.slurm_version import SlurmVersion

V2411 = SlurmVersion.parse("24.11")
V2505 = SlurmVersion.parse("25.05")


def _blocks(*sizes: int) -> list[Block]:
    return [Block(f"b{i}", [f"n{i}-{j}" for j in range(size)]) for i, size in enumerate(sizes)]


def test_adjacency_order_keeps_units_under_one_spine_together() -> None:
    leaves = [LeafGroup(name, [], []) for name in ("a", "b", "c", "d")]
    uppers = [
        TreeSwitch("s1", 1, [], ["a", "d"]),
        TreeSwitch("s2", 1, [], ["b", "c"]),
        TreeSwitch("core", 2, [], ["s1", "s2"]),
    ]
    assert adjacency_order(Tree(leaves, uppers, ["core"])) == ["a", "d", "b", "c"]


def test_base_rules_and_levels_double() -> None:
    blocks = _blocks(32, 32, 32, 20)
    assert typical_base(blocks) == 32
    assert covering_base(blocks) == 20  # 20 of 116 nodes (17 %) would be left out at 32
    assert covering_base(_blocks(32, 32, 32, 32, 32, 20)) == 20  # 20 of 180 nodes (11 %)
    assert covering_base(_blocks(*([32] * 9), 20)) == 32  # 20 of 308 nodes (6.5 %)
    assert covering_base(_blocks(18, 17, 12, 10, 1)) == 10  # the 1-node leaf never rules
    assert infer_block_sizes(32, 4) == [32, 64, 128]
    assert infer_block_sizes(32, 3) == [32, 64]
    assert infer_block_sizes(4, 1) == [4]


@pytest.mark.parametrize(
    ("sizes", "count", "message"),
    [
        ([], 4, "empty"),
        ([0], 4, "positive"),
        ([4, 12], 4, "power of two"),
        ([4, 8, 8], 4, "increasing"),
        ([4, 32], 4, "needs 8 blocks"),
    ],
)
def test_bad_block_sizes_are_refused(sizes: list[int], count: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_block_sizes(sizes, count)


def test_undersized_blocks_left_out_on_2411_and_kept_on_2505() -> None:
    old = plan_blocks(_blocks(4, 4, 2, 4), V2411, base_rule=typical_base)
    assert [b.name for b in old.blocks] == ["b0", "b1", "b3"]
    assert old.block_sizes == [4, 8]
    (finding,) = old.findings
    assert finding.subject == "b2" and "2 nodes < base block size 4" in finding.message
    new = plan_blocks(_blocks(4, 4, 2, 4), V2505, base_rule=typical_base)
    assert [b.name for b in new.blocks] == ["b0", "b1", "b2", "b3"]
    assert new.block_sizes == [4, 8, 16] and new.findings == []


def test_user_block_sizes_are_validated_against_kept_blocks() -> None:
    assert plan_blocks(_blocks(4, 4), V2411, [4, 8]).block_sizes == [4, 8]
    with pytest.raises(ConfigError):
        plan_blocks(_blocks(4, 4, 2), V2411, [4, 8, 16])


def test_version_parsing() -> None:
    assert SlurmVersion.parse("25.11.2") > SlurmVersion.parse("25.11")
    assert not V2411.allows_small_blocks and V2505.allows_small_blocks
    with pytest.raises(ConfigError, match="invalid Slurm version"):
        SlurmVersion.parse("latest")


def test_a_base_below_the_unit_size_is_explained() -> None:
    """su03 and su07 are short: the base falls to 28, and the report says why and what it
    costs, as information (the topology is fine, just not what the units could do)."""
    blocks = [
        Block(f"su{i:02d}", [f"n{i}-{j}" for j in range({3: 28, 7: 30}.get(i, 32))])
        for i in range(1, 9)
    ]
    for version in (V2411, V2505):
        planned = plan_blocks(blocks, version)
        assert planned.block_sizes[0] == 28
        [finding] = [f for f in planned.findings if f.kind == FindingKind.BLOCK_BASE_BELOW_UNIT]
        assert finding.level == LEVEL_INFO and finding.subject == "BlockSizes"
        assert finding.message.startswith("BlockSizes=28 instead of the unit size 32:")
        assert "(su03 (28 nodes), su07 (30 nodes))" in finding.message
        assert "jobs of 29-32 nodes cannot stay in one block" in finding.message
        assert "--block-sizes 32,64,..." in finding.message


def test_no_base_explanation_when_pinned_or_at_unit_size() -> None:
    short = _blocks(32, 32, 32, 20)
    assert not plan_blocks(short, V2505, [32, 64]).findings
    assert not plan_blocks(_blocks(*[32] * 9, 31), V2505).findings  # 31 < 10 %: base 32
    assert not plan_blocks(short, V2505, base_rule=typical_base).findings


def test_base_explanation_names_eight_short_blocks_and_counts_the_rest() -> None:
    planned = plan_blocks(_blocks(*([8] * 12 + [5] * 10)), V2505)
    [finding] = planned.findings
    assert finding.message.count(" nodes)") == 8 and "and 2 more" in finding.message


def test_the_designed_unit_raises_the_base_while_a_block_still_holds_it() -> None:
    """Issue 24 item 4: a unit with one node off does not lower the base below the unit
    earlier runs saw; a fabric whose blocks are all smaller gets the rule's base."""
    blocks = [Block("a", ["n"] * 8), Block("b", ["n"] * 7)]
    assert designed_base(blocks, covering_base, 0) == 7
    assert designed_base(blocks, covering_base, 8) == 8
    assert designed_base(blocks[1:], covering_base, 8) == 7
