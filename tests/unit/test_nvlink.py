"""NVLink domains → Slurm blocks: grouping, policy, order, names, layout stability per release,
BlockSizes, and the rendered topology.conf."""

from __future__ import annotations

import pytest

from tests.support.sim_gpu import nvl_node_gpus, render_query_q
from topograph_slurm.analysis.nvlink import domains as nv
from topograph_slurm.analysis.nvlink.clique import domain_results, node_domain
from topograph_slurm.collect import write_snapshot
from topograph_slurm.errors import ConfigError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import ZERO_UUID, DomainResult
from topograph_slurm.model.names import sanitize
from topograph_slurm.model.result import Block, BlockTopology, LeafGroup, Tree, TreeSwitch
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.render.environment import environment, render
from topograph_slurm.sources.layout import load_layout, parse_layout
from topograph_slurm.sources.snapshot import KEY_Q, SNAPSHOT_FORMAT, SNAPSHOT_VERSION, load_snapshot

V2411 = SlurmVersion(24, 11)
V2605 = SlurmVersion(26, 5)
UUIDS = [f"{i:08x}-7b3d-4e9f-a1c6-0d2e4b6a8c10" for i in range(1, 9)]


def rack_nodes(rack: int, per_rack: int = 4) -> list[str]:
    return [f"gb{rack * per_rack + i:02d}" for i in range(1, per_rack + 1)]


def cluster(
    racks: int = 3, per_rack: int = 4, **overrides: dict[str, object]
) -> dict[str, DomainResult]:
    """Healthy trays, one clique per rack; *overrides* maps node → nvl_node_gpus kwargs."""
    out = {}
    for rack in range(racks):
        for node in rack_nodes(rack, per_rack):
            kwargs: dict[str, object] = {"cluster_uuid": UUIDS[rack], "clique_id": rack + 1}
            kwargs.update(overrides.get(node, {}))
            out[node] = node_domain(nvl_node_gpus(**kwargs), node)  # type: ignore[arg-type]
    return out


def names(topology: BlockTopology) -> list[str]:
    return [block.name for block in topology.blocks]


def conf(topology: BlockTopology) -> str:
    nodes = sum(len(b.nodes) for b in topology.blocks)
    return render(environment(), "topology.conf.block.j2", blocks=topology, node_count=nodes)


# --------------------------------------------------------------------------- domains → blocks


def test_one_block_per_rack_in_natural_order_with_inferred_sizes() -> None:
    topo = nv.nvlink_blocks(cluster(3), V2411)
    assert names(topo) == ["nvl-gb01", "nvl-gb05", "nvl-gb09"]
    assert [b.nodes for b in topo.blocks] == [rack_nodes(0), rack_nodes(1), rack_nodes(2)]
    assert topo.block_sizes == [4, 8]
    assert topo.findings == []


def test_block_sizes_have_power_of_two_levels_up_to_the_block_count() -> None:
    assert nv.nvlink_blocks(cluster(4), V2411).block_sizes == [4, 8, 16]
    assert nv.nvlink_blocks(cluster(8, per_rack=2), V2411).block_sizes == [2, 4, 8, 16]
    assert nv.nvlink_blocks(cluster(1), V2411).block_sizes == [4]


def test_given_block_sizes_are_validated() -> None:
    assert nv.nvlink_blocks(cluster(4), V2411, block_sizes=[4, 8]).block_sizes == [4, 8]
    with pytest.raises(ConfigError, match="power of two"):
        nv.nvlink_blocks(cluster(4), V2411, block_sizes=[4, 12])
    with pytest.raises(ConfigError, match="needs 8 blocks"):
        nv.nvlink_blocks(cluster(4), V2411, block_sizes=[4, 32])


def test_natural_order_puts_gb2_before_gb10() -> None:
    per_node = {
        "gb10": node_domain(nvl_node_gpus(UUIDS[0], 1), "gb10"),
        "gb2": node_domain(nvl_node_gpus(UUIDS[1], 1), "gb2"),
    }
    assert names(nv.nvlink_blocks(per_node, V2605)) == ["nvl-gb2", "nvl-gb10"]


@pytest.mark.parametrize(
    ("overrides", "kind"),
    [
        ({"state": "In Progress"}, FindingKind.FABRIC_NOT_COMPLETED),
        ({"health": "Unhealthy"}, FindingKind.FABRIC_UNHEALTHY),
        ({"status": "Insufficient Resources"}, FindingKind.FABRIC_STATUS),
        (
            {"state": None, "status": None, "cluster_uuid": None, "clique_id": None},
            FindingKind.FABRIC_NA,
        ),
    ],
)
def test_unhealthy_node_is_a_finding_and_left_out(overrides: dict[str, object], kind: str) -> None:
    topo = nv.nvlink_blocks(cluster(2, gb03=overrides), V2605)
    assert topo.blocks[0].nodes == ["gb01", "gb02", "gb04"]
    assert {(f.subject, f.kind) for f in topo.findings} == {("gb03", kind)}


def test_disagreeing_gpus_leave_the_node_out() -> None:
    per_node = cluster(2)
    gpus = nvl_node_gpus(UUIDS[0], 1)
    gpus[3] = nvl_node_gpus(UUIDS[1], 2)[3]
    per_node["gb02"] = node_domain(gpus, "gb02")
    topo = nv.nvlink_blocks(per_node, V2605)
    assert "gb02" not in topo.blocks[0].nodes
    assert ("gb02", FindingKind.FABRIC_DISAGREE) in {(f.subject, f.kind) for f in topo.findings}


def test_include_policy_keeps_unhealthy_node_in_its_rack_and_reports_it() -> None:
    per_node = cluster(2, gb03={"state": "In Progress"})
    topo = nv.nvlink_blocks(per_node, V2605, policy=nv.NvlinkPolicy(unhealthy="include"))
    assert topo.blocks[0].nodes == rack_nodes(0)
    kinds = [(f.subject, f.kind) for f in topo.findings]
    assert ("gb03", FindingKind.FABRIC_NOT_COMPLETED) in kinds
    assert ("gb03", FindingKind.NVLINK_INCLUDED_WITH_FINDINGS) in kinds


def test_include_policy_cannot_place_nodes_without_a_domain() -> None:
    na = {"state": None, "status": None, "cluster_uuid": None, "clique_id": None}
    topo = nv.nvlink_blocks(cluster(2, gb03=na), V2605, policy=nv.NvlinkPolicy(unhealthy="include"))
    assert "gb03" not in topo.blocks[0].nodes


def test_single_node_nvswitch_systems_are_not_blocks() -> None:
    per_node = cluster(1)
    per_node["hgx1"] = node_domain(nvl_node_gpus(ZERO_UUID, 0, 8), "hgx1")
    topo = nv.nvlink_blocks(per_node, V2605)
    assert names(topo) == ["nvl-gb01"]
    assert ("hgx1", FindingKind.SINGLE_NODE_NVSWITCH) in {
        (f.subject, f.kind) for f in topo.findings
    }


def test_no_domain_at_all_is_an_error() -> None:
    na = {"state": None, "status": None, "cluster_uuid": None, "clique_id": None}
    per_node = cluster(1, **{n: na for n in rack_nodes(0)})
    with pytest.raises(ConfigError, match="no non-empty blocks"):
        nv.nvlink_blocks(per_node, V2605)


def test_carried_findings_come_first() -> None:
    from topograph_slurm.model.result import Finding

    extra = Finding("collect-failed", "gb99", "srun: error")
    topo = nv.nvlink_blocks(cluster(1), V2605, findings=[extra])
    assert topo.findings[0] == extra


# --------------------------------------------------------------------------- order by IB tree


def test_ib_tree_order_puts_racks_under_one_spine_side_by_side() -> None:
    # Racks 0 and 2 hang off spine A, racks 1 and 3 off spine B: A's racks come first.
    leaves = [LeafGroup(f"leaf{r}", [f"g{r}"], rack_nodes(r)) for r in range(4)]
    uppers = [
        TreeSwitch("spineA", 1, ["a"], ["leaf0", "leaf2"]),
        TreeSwitch("spineB", 1, ["b"], ["leaf1", "leaf3"]),
        TreeSwitch("core", 2, ["c"], ["spineA", "spineB"]),
    ]
    tree = Tree(leaves, uppers, ["core"])
    topo = nv.nvlink_blocks(cluster(4), V2605, tree=tree)
    assert names(topo) == ["nvl-gb01", "nvl-gb09", "nvl-gb05", "nvl-gb13"]


def test_nodes_missing_from_the_tree_go_last() -> None:
    tree = Tree([LeafGroup("leaf", ["g"], rack_nodes(2))], [], ["leaf"])
    topo = nv.nvlink_blocks(cluster(3), V2605, tree=tree)
    assert names(topo) == ["nvl-gb09", "nvl-gb01", "nvl-gb05"]


# --------------------------------------------------------------------------- names


def test_name_pattern_fields_and_padding() -> None:
    policy = nv.NvlinkPolicy(name_pattern="rack-{index:02d}")
    assert names(nv.nvlink_blocks(cluster(3), V2605, policy=policy)) == [
        "rack-01",
        "rack-02",
        "rack-03",
    ]
    assert nv.block_name("{prefix}", ["gb200-r01-n01", "gb200-r01-n18"], 1, UUIDS[0], 1) == (
        "gb200-r01-n"
    )
    assert nv.block_name("{uuid8}-{clique}", ["a"], 1, UUIDS[0], 7) == "00000001-7"
    assert nv.block_name("{first}..{last}", ["a1", "a4"], 1, UUIDS[0], 1) == "a1..a4"


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("nvl gb[01-04],x", "nvl-gb-01-04-x"),
        ("-leading", "leading"),
        ("ünïcode/räck", "n-code-r-ck"),
        ("", "nvl"),
        ("x" * 100, "x" * 64),
    ],
)
def test_names_are_hostlist_safe(raw: str, safe: str) -> None:
    assert sanitize(raw, "nvl") == safe


def test_colliding_names_get_suffixes() -> None:
    policy = nv.NvlinkPolicy(name_pattern="rack")
    assert names(nv.nvlink_blocks(cluster(3), V2605, policy=policy)) == ["rack", "rack-2", "rack-3"]


def test_bad_pattern_and_policy_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="pattern"):
        nv.NvlinkPolicy(name_pattern="{nope}")
    with pytest.raises(ConfigError, match="policy"):
        nv.NvlinkPolicy(unhealthy="maybe")


# --------------------------------------------------------------------------- layout stability


def without(per_node: dict[str, DomainResult], nodes: list[str]) -> dict[str, DomainResult]:
    return {n: r for n, r in per_node.items() if n not in nodes}


@pytest.mark.parametrize("fmt", ["conf", "yaml"])
def test_missing_rack_keeps_its_position_on_25_05(fmt: str) -> None:
    first = nv.nvlink_blocks(cluster(4), V2605)
    if fmt == "conf":
        layout = parse_layout(conf(first))
    else:
        layout = parse_layout(
            "- topology: nvl\n  block:\n    block_sizes: [4]\n    blocks:\n"
            + "".join(
                f"      - block: {b.name}\n        nodes: {','.join(b.nodes)}\n"
                for b in first.blocks
            )
        )
    assert [b.name for b in layout] == names(first)
    second = nv.nvlink_blocks(without(cluster(4), rack_nodes(1)), V2605, layout=layout)
    assert names(second) == names(first)
    assert [len(b.nodes) for b in second.blocks] == [4, 0, 4, 4]
    assert second.block_sizes == first.block_sizes
    missing = [f for f in second.findings if f.kind == FindingKind.NVLINK_RACK_MISSING]
    assert [f.subject for f in missing] == ["nvl-gb05"]
    assert "keep their positions" in missing[0].message
    text = conf(second)
    assert "BlockName=nvl-gb05\n" in text  # the empty block 25.05+ accepts
    blocks_in_file = [line.split()[0] for line in text.splitlines() if line.startswith("Block")]
    assert blocks_in_file[:4] == [f"BlockName={n}" for n in names(first)]


def test_missing_rack_is_left_out_and_reported_on_24_11() -> None:
    first = nv.nvlink_blocks(cluster(4), V2411)
    layout = parse_layout(conf(first))
    second = nv.nvlink_blocks(without(cluster(4), rack_nodes(1)), V2411, layout=layout)
    assert names(second) == ["nvl-gb01", "nvl-gb09", "nvl-gb13"]
    assert all(b.nodes for b in second.blocks)
    missing = [f for f in second.findings if f.kind == FindingKind.NVLINK_RACK_MISSING]
    assert [f.subject for f in missing] == ["nvl-gb05"]
    assert "shift" in missing[0].message and "24.11" in missing[0].message


def test_name_stays_when_the_first_node_of_a_rack_drops_out() -> None:
    first = nv.nvlink_blocks(cluster(3), V2605)
    layout = parse_layout(conf(first))
    per_node = cluster(3, gb01={"state": "In Progress"})
    second = nv.nvlink_blocks(per_node, V2605, layout=layout)
    assert names(second) == names(first)  # not "nvl-gb02"
    assert second.blocks[0].nodes == ["gb02", "gb03", "gb04"]
    # 24.11 cannot take the 3-node block: reported, left out
    old = nv.nvlink_blocks(per_node, V2411, layout=layout)
    assert names(old) == ["nvl-gb05", "nvl-gb09"]
    assert ("nvl-gb01", FindingKind.UNDERSIZED_BLOCK) in {(f.subject, f.kind) for f in old.findings}


def test_without_layout_a_missing_rack_shifts_later_blocks() -> None:
    """Why the layout matters: the same input without it renames nothing but moves blocks."""
    second = nv.nvlink_blocks(without(cluster(4), rack_nodes(1)), V2605)
    assert names(second) == ["nvl-gb01", "nvl-gb09", "nvl-gb13"]


def test_new_rack_is_appended_after_the_layout() -> None:
    layout = parse_layout(conf(nv.nvlink_blocks(cluster(2), V2605)))
    topo = nv.nvlink_blocks(cluster(3), V2605, layout=layout)
    assert names(topo) == ["nvl-gb01", "nvl-gb05", "nvl-gb09"]
    assert [(f.subject, f.kind) for f in topo.findings] == [
        ("nvl-gb09", FindingKind.NVLINK_RACK_NEW)
    ]


def test_a_rack_split_in_two_cliques_keeps_the_larger_part_in_place() -> None:
    layout = [Block("rackA", rack_nodes(0, 6))]
    per_node = cluster(1, per_rack=6)
    for node in ("gb05", "gb06"):
        per_node[node] = node_domain(nvl_node_gpus(UUIDS[5], 9), node)
    topo = nv.nvlink_blocks(per_node, V2605, layout=layout)
    assert [(b.name, b.nodes) for b in topo.blocks] == [
        ("rackA", ["gb01", "gb02", "gb03", "gb04"]),
        ("nvl-gb05", ["gb05", "gb06"]),
    ]
    assert FindingKind.NVLINK_RACK_SPLIT in {f.kind for f in topo.findings}


def test_racks_file_layout_with_placeholders_and_names() -> None:
    racks = "- block: r1\n  nodes: gb[01-04]\n- block: r2\n- block: r3\n  nodes: gb[09-12]\n"
    layout = parse_layout(racks)
    assert [(b.name, len(b.nodes)) for b in layout] == [("r1", 4), ("r2", 0), ("r3", 4)]
    topo = nv.nvlink_blocks(cluster(3), V2605, layout=layout)
    # gb05-08 match no layout block: r2 stays an empty placeholder, the rack is appended
    assert names(topo) == ["r1", "r2", "r3", "nvl-gb05"]


def test_layout_from_a_named_topology_in_a_yaml_with_several() -> None:
    text = (
        "- topology: ib\n  tree:\n    switches:\n      - switch: s1\n        nodes: gb[01-12]\n"
        "- topology: nvl\n  block:\n    blocks:\n      - block: x\n        nodes: gb[01-04]\n"
    )
    assert [b.name for b in parse_layout(text, topology="nvl")] == ["x"]
    assert parse_layout(text, topology="other") == []


def test_load_layout_missing_file_is_empty(tmp_path: object) -> None:
    from pathlib import Path

    assert load_layout(Path(str(tmp_path)) / "nope.conf") == []


# --------------------------------------------------------------------------- from a snapshot


def test_blocks_from_a_snapshot_carry_collection_findings(tmp_path: object) -> None:
    from pathlib import Path

    root = Path(str(tmp_path)) / "snap"
    entries, files = [], {}
    for rack in range(2):
        for node in rack_nodes(rack):
            state = "In Progress" if node == "gb06" else "Completed"
            gpus = nvl_node_gpus(UUIDS[rack], rack + 1, state=state)
            rel = f"nodes/{node}/{KEY_Q}.txt"
            files[rel] = render_query_q(gpus)
            entries.append({"node": node, "command": KEY_Q, "exit_code": 0, "file": rel})
    entries.append({"node": "gb09", "command": KEY_Q, "exit_code": 1, "error": "exit code 1"})
    data = {"format": SNAPSHOT_FORMAT, "version": SNAPSHOT_VERSION, "results": entries}
    write_snapshot(root, data, files)
    snap = load_snapshot(root)
    topo = nv.nvlink_blocks(domain_results(snap.gpus), V2605, findings=snap.findings)
    assert [b.nodes for b in topo.blocks] == [rack_nodes(0), ["gb05", "gb07", "gb08"]]
    subjects = {(f.subject, f.kind) for f in topo.findings}
    assert ("gb06", FindingKind.FABRIC_NOT_COMPLETED) in subjects
    assert ("gb09", "collect-failed") in subjects
