"""`topograph-slurm pools`: prefill and decode instances on simulated fabrics with planted
faults, exit codes, and the placement's pure parts."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tests.unit.test_health_cli import fake_scontrol
from topograph_slurm.analysis.placement.explain import PathFacts
from topograph_slurm.analysis.placement.span import fabric_map
from topograph_slurm.analysis.pools.deployment import closest, nodes_needed
from topograph_slurm.analysis.pools.pairing import pair
from topograph_slurm.analysis.pools.place import place
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit, UsageError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.names import expand
from topograph_slurm.model.pools import DECODE, PREFILL, Deployment, PoolSize, parse_size
from topograph_slurm.model.result import Finding, LeafGroup, Tree, TreeSwitch
from topograph_slurm.sources.hostfile import parse_hostfile

# Two leaves of 8 nodes (gpu0001-0008, gpu0009-0016) under one spine. degraded=4 spreads four
# slow rails over the 32 node links: links 0, 8, 16, 24, i.e. the first rail of gpu0001,
# gpu0005, gpu0009 and gpu0013; swap=3 misaligns gpu0003's rails.
SIM = "nodes=16,gpus=8,rails=2,su=8,degraded=4,swap=3"
BAD = {"gpu0001", "gpu0005", "gpu0009", "gpu0013", "gpu0003"}
ALL = "gpu[0001-0016]"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, *args])


def pools_json(*args: str, code: int = Exit.OK) -> dict[str, Any]:
    result = run("pools", "--json", *args)
    assert result.exit_code == code, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def role_nodes(data: dict[str, Any], role: str) -> set[str]:
    return {n for i in data["instances"] if i["role"] == role for n in i["nodes"]}


def test_decode_avoids_degraded_and_misaligned_nodes_and_pairs_stay_in_a_leaf() -> None:
    data = pools_json("--sim", SIM, "--nodes", ALL, "--prefill", "8x8", "--decode", "4x8")
    decode = role_nodes(data, DECODE)
    assert len(decode) == 4 and not decode & BAD
    assert all(not i["unmet"] for i in data["instances"]) and data["met"]
    assert {path["level"] for path in data["kv_paths"]} == {"leaf"}
    assert len(data["kv_paths"]) == 8
    assert len(role_nodes(data, PREFILL) | decode | set(data["unused"])) == 16
    assert data["pools"]["decode"]["nodes_with_problems"] == []


def test_every_node_used_puts_the_faulty_ones_in_prefill() -> None:
    data = pools_json("--sim", SIM, "--nodes", ALL, "--prefill", "10x8", "--decode", "6x8")
    assert not role_nodes(data, DECODE) & BAD
    assert set(data["pools"]["prefill"]["nodes_with_problems"]) == BAD


def test_decode_tp_across_nodes_stays_in_one_leaf_on_healthy_nodes() -> None:
    data = pools_json("--sim", SIM, "--nodes", ALL, "--prefill", "4x8", "--decode", "2x16")
    for instance in data["instances"]:
        if instance["role"] == DECODE:
            assert instance["tp_level"] == "leaf" and len(instance["nodes"]) == 2
            assert not set(instance["nodes"]) & BAD


def test_decode_forced_onto_a_degraded_node_is_said_and_exits_1() -> None:
    nodes = "gpu0001,gpu0002,gpu0003,gpu0005"  # one healthy node for two decodes
    result = run("pools", "--sim", SIM, "--nodes", nodes, "--prefill", "2x8", "--decode", "2x8")
    assert result.exit_code == Exit.DIFFERS, result.output
    assert "NOT MET: decode on a degraded path" in result.stdout
    assert "Verdict: 1 of 4 instances have something not met" in result.stdout


def test_pair_that_cannot_share_a_leaf_is_said() -> None:
    # one node from each leaf: the KV path must cross the spine
    data = pools_json(
        "--sim",
        "nodes=16,gpus=8,rails=2,su=8",
        "--nodes",
        "gpu0002,gpu0010",
        "--prefill",
        "1x8",
        "--decode",
        "1x8",
        code=Exit.DIFFERS,
    )
    assert data["kv_paths"][0]["level"] == "spine-1"
    prefill = next(i for i in data["instances"] if i["role"] == PREFILL)
    assert prefill["unmet"] == [
        "KV path to decode-0 spans spine-1; one unit of leaf could hold the pair"
    ]


def test_tp_that_cannot_stay_in_a_leaf_is_said() -> None:
    data = pools_json(
        "--sim",
        "nodes=16,gpus=8,rails=2,su=8",
        "--nodes",
        "gpu0001,gpu0009,gpu0002",
        "--prefill",
        "1x8",
        "--decode",
        "1x16",
        code=Exit.DIFFERS,
    )
    decode = next(i for i in data["instances"] if i["role"] == DECODE)
    assert decode["nodes"] == ["gpu0001", "gpu0002"] and decode["tp_level"] == "leaf"
    assert data["instances"][0]["nodes"] == ["gpu0009"]
    assert any("KV path" in u for u in data["instances"][0]["unmet"])


def test_too_few_nodes_exit_2_with_the_closest_feasible_deployment() -> None:
    result = run(
        "pools", "--sim", SIM, "--nodes", "gpu[0001-0006]", "--prefill", "4x8", "--decode", "2x16"
    )
    assert result.exit_code == Exit.USAGE, result.output
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "topograph-slurm: error: --prefill 4x8 --decode 2x16 needs 8 nodes of 8 GPUs, the job "
        "has 6: the closest feasible deployment is --prefill 2x8 --decode 1x16 (4 nodes)"
    ]
    assert result.stdout == ""


def test_ratio_fills_the_nodes_in_whole_multiples() -> None:
    data = pools_json(
        "--sim", SIM, "--nodes", ALL, "--prefill", "8", "--decode", "16", "--ratio", "2:1"
    )
    assert data["deployment"] == {
        "prefill": {"count": 8, "tp": 8},
        "decode": {"count": 4, "tp": 16},
    }
    assert data["unused"] == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--prefill", "4x8", "--decode", "2x16", "--ratio", "2:1"], "not counts"),
        (["--prefill", "8", "--decode", "16"], "or --ratio P:D"),
        (["--prefill", "4y8", "--decode", "2x16"], "--prefill takes NxTP"),
        (["--prefill", "0x8", "--decode", "2x16"], "at least 1"),
        (["--prefill", "8", "--decode", "16", "--ratio", "2"], "--ratio takes PREFILL:DECODE"),
    ],
)
def test_bad_deployment_flags_are_one_usage_error(args: list[str], fragment: str) -> None:
    result = run("pools", "--sim", SIM, "--nodes", ALL, *args)
    assert result.exit_code == Exit.USAGE, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr


def test_text_names_each_instance_its_tp_and_its_kv_path() -> None:
    result = run("pools", "--sim", SIM, "--nodes", ALL, "--prefill", "2x8", "--decode", "1x16")
    assert result.exit_code == Exit.OK, result.output
    assert "decode-0: TP 16 on " in result.stdout
    assert (
        "KV with decode-0: spans leaf (home leaf); slowest link InfiniBand 4xNDR" in result.stdout
    )
    assert "Verdict: everything is met" in result.stdout


def test_parse_size_reads_counts_and_tp_alone() -> None:
    assert parse_size("4x8", "--prefill") == (4, 8)
    assert parse_size("4×8", "--prefill") == (4, 8)
    assert parse_size("16", "--decode") == (None, 16)
    for bad in ("4x", "٤x8", "-1x8", ""):
        with pytest.raises(UsageError):
            parse_size(bad, "--prefill")


def test_closest_keeps_the_ratio_then_uses_the_most_nodes() -> None:
    wanted = Deployment(PoolSize(6, 8), PoolSize(3, 8))
    assert nodes_needed(wanted, 8) == 9
    assert closest(wanted, 8, 7) == Deployment(PoolSize(4, 8), PoolSize(2, 8))
    assert closest(wanted, 8, 1) is None


def test_place_moves_decode_off_a_leaf_whose_uplinks_are_degraded() -> None:
    leaves = [LeafGroup("leaf1", [], ["a", "b"]), LeafGroup("leaf2", [], ["c", "d"])]
    tree = Tree(leaves, [TreeSwitch("spine", 1, [], ["leaf1", "leaf2"])], ["spine"])
    fmap = fabric_map(tree)
    slow = Finding(FindingKind.DEGRADED_LINK, "leaf1", "an uplink runs at 1xNDR")
    facts = PathFacts(problems={"leaf1": [slow]})
    plan = place(Deployment(PoolSize(1, 8), PoolSize(1, 8)), ["a", "b", "c", "d"], 8, fmap, facts)
    decode = plan.role(DECODE)[0]
    assert decode.nodes[0] in {"c", "d"} and plan.met
    assert plan.kv_paths[0].level == "leaf"


def test_out_writes_each_instances_hostfiles_the_hetjob_and_the_plan(tmp_path: Path) -> None:
    out = tmp_path / "pools"
    args = ["--sim", SIM, "--nodes", ALL, "--prefill", "2x8", "--decode", "1x16"]
    data = pools_json(*args, "--out-dir", str(out))
    names = [i["name"] for i in data["instances"]]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{n}.{suffix}" for n in names for suffix in ("hostfile", "nodes", "dynamo.env")]
        + ["hetjob.sh", "pools.json", "dynamo", "sglang.sh", "vllm.sh"]
        + ["srt-slurm.yaml", "srt-slurm.sh"]
    )
    decode = data["instances"][-1]
    tasks = parse_hostfile((out / "decode-0.hostfile").read_text(), "h", "auto")
    assert tasks.tasks == [node for node in decode["nodes"] for _ in range(8)]
    assert (out / "decode-0.nodes").read_text().split() == decode["nodes"]
    saved = json.loads((out / "pools.json").read_text())
    assert saved == {key: value for key, value in data.items() if key != "features"}  # the plan
    pools_json(*args, "--out-dir", str(out))  # a directory pools wrote is replaced


def test_hetjob_runs_one_sbatch_with_a_component_per_instance(tmp_path: Path) -> None:
    out = tmp_path / "pools"
    data = pools_json(
        "--sim", SIM, "--nodes", ALL, "--prefill", "2x8", "--decode", "1x16", "--out-dir", str(out)
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sbatch"
    fake.write_text('#!/bin/sh\nfor arg in "$@"; do echo "$arg"; done\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    argv = subprocess.run(
        ["sh", str(out / "hetjob.sh"), "serve.sh", "--port", "8000"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")[:-1]
    assert argv[-3:] == ["serve.sh", "--port", "8000"]
    components = " ".join(argv[:-3]).split(" : ")
    assert len(components) == len(data["instances"])
    for component, instance in zip(components, data["instances"], strict=True):
        assert f"--nodelist={','.join(instance['nodes'])}" in component.split()
        assert f"--nodes={len(instance['nodes'])}" in component.split()


def test_out_refuses_a_directory_it_did_not_write(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep\n")
    result = run(
        "pools",
        "--sim",
        SIM,
        "--nodes",
        ALL,
        "--prefill",
        "2x8",
        "--decode",
        "1x16",
        "--out-dir",
        str(out),
    )
    assert result.exit_code == Exit.OUTPUT, result.output
    assert "not a topograph-slurm pools directory" in result.stderr
    assert [p.name for p in out.iterdir()] == ["notes.txt"] and result.stdout == ""


HEALTHY = "nodes=16,gpus=8,rails=2,su=8"


def test_explain_pools_flags_a_decode_that_now_sits_on_a_degraded_path(tmp_path: Path) -> None:
    planned = tmp_path / "pools.json"
    result = run(
        "pools",
        "--sim",
        HEALTHY,
        "--nodes",
        "gpu[0001-0004]",
        "--prefill",
        "2x8",
        "--decode",
        "1x16",
        "--json",
    )
    assert result.exit_code == Exit.OK, result.output
    planned.write_text(result.stdout)
    decode = next(i for i in json.loads(result.stdout)["instances"] if i["role"] == DECODE)
    assert "gpu0001" in decode["nodes"]  # degraded=4 slows gpu0001's first rail
    same = run("explain", "--sim", HEALTHY, "--pools", str(planned), "--json")
    plan = {key: value for key, value in json.loads(result.stdout).items() if key != "features"}
    assert same.exit_code == Exit.OK and json.loads(same.stdout) == plan
    later = run("explain", "--sim", HEALTHY + ",degraded=4", "--pools", str(planned))
    assert later.exit_code == Exit.DIFFERS, later.output
    assert "NOT MET: decode on a degraded path (degraded-link on gpu0001)" in later.stdout
    assert "Decode pool: 1 instance on 2 nodes, 1 with problems on their path (gpu0001)" in (
        later.stdout
    )


def test_explain_pools_reads_a_hand_written_file(tmp_path: Path) -> None:
    path = tmp_path / "running.json"
    path.write_text(
        json.dumps(
            {
                "instances": [
                    {"name": "d", "role": "decode", "tp": 8, "nodes": ["gpu0002"]},
                    {"name": "p", "role": "prefill", "tp": 8, "nodes": ["gpu0010"], "pairs": ["d"]},
                ]
            }
        )
    )
    data = json.loads(run("explain", "--sim", HEALTHY, "--pools", str(path), "--json").stdout)
    assert data["kv_paths"] == [
        {
            "prefill": "p",
            "decode": "d",
            "level": "spine-1",
            "home": "leaf",
            "slowest_link": data["kv_paths"][0]["slowest_link"],
        }
    ]
    assert data["kv_paths"][0]["slowest_link"].startswith("InfiniBand 4xNDR")
    assert data["instances"][1]["unmet"] == [
        "KV path to d spans spine-1; one unit of leaf could hold the pair"
    ]


@pytest.mark.parametrize(
    ("content", "code", "fragment"),
    [
        ("{", Exit.INPUT, "not JSON"),
        ('{"instances": []}', Exit.INPUT, "non-empty list of instances"),
        (
            '{"instances": [{"name": "a", "role": "x", "tp": 8, "nodes": ["gpu0001"]}]}',
            Exit.INPUT,
            "role is prefill or decode",
        ),
        (
            '{"instances": [{"name": "a", "role": "decode", "tp": 0, "nodes": ["gpu0001"]}]}',
            Exit.INPUT,
            "tp is a positive integer",
        ),
        (
            '{"instances": [{"name": "a", "role": "decode", "tp": 8, "nodes": ["gpu9999"]}]}',
            Exit.INPUT,
            "not on the fabric",
        ),
        (
            '{"instances": [{"name": "a", "role": "decode", "tp": 8, "nodes": ["gpu0001"], '
            '"pairs": ["b"]}]}',
            Exit.INPUT,
            "is not a prefill and a decode instance",
        ),
        (
            '{"instances": [{"name": "a", "role": "decode", "tp": 2, "nodes": ["gpu0001"], '
            '"gpus": [0, -1]}]}',
            Exit.INPUT,
            "gpus is a non-empty list of local GPU indices",
        ),
        (
            '{"instances": [{"name": "a", "role": "decode", "tp": 2, "nodes": ["gpu0001"], '
            '"gpus": [7, 8]}]}',
            Exit.INPUT,
            "a: GPU 8 is not one of gpu0001's 8 GPUs",
        ),
    ],
)
def test_explain_pools_bad_file_is_one_error(
    tmp_path: Path, content: str, code: int, fragment: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = run("explain", "--sim", HEALTHY, "--pools", str(path))
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert result.stdout == ""


def test_explain_pools_takes_no_node_flags(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(
        '{"instances": [{"name": "a", "role": "decode", "tp": 8, "nodes": ["gpu0001"]}]}'
    )
    result = run("explain", "--sim", HEALTHY, "--pools", str(path), "--nodes", "gpu0001")
    assert result.exit_code == Exit.USAGE and "drop --nodes" in result.stderr


SLURM_SIM = "nodes=8,gpus=4,rails=2,su=4,prefix=node"  # the 8 nodes the fake scontrol lists


@pytest.fixture
def slurm(tmp_path: Path) -> Path:
    """health's stand-in scontrol (shows nodes.json, logs updates.log, refuses a node)."""
    return fake_scontrol(tmp_path)


def apply_pools(slurm: Path, *args: str) -> Result:
    env = {"PATH": f"{slurm}{os.pathsep}{os.environ['PATH']}"}
    flags = ["pools", "--sim", SLURM_SIM, "--nodes", "node[0001-0004]", "--json", "--apply"]
    return CliRunner().invoke(main, ["--config", os.devnull, *flags, *args], env=env)


def test_apply_gives_each_pool_node_its_feature_keeping_every_other(slurm: Path) -> None:
    nodes = json.loads((slurm / "nodes.json").read_text())
    nodes["nodes"][0]["features"] = nodes["nodes"][0]["active_features"] = ["admin_a", "topo_ok"]
    nodes["nodes"][6]["features"] = nodes["nodes"][6]["active_features"] = ["topo_pool_decode"]
    (slurm / "nodes.json").write_text(json.dumps(nodes))
    result = apply_pools(slurm, "--prefill", "2x4", "--decode", "1x8")
    assert result.exit_code == Exit.OK, result.output
    plan = json.loads(result.stdout)
    role = {n: i["role"] for i in plan["instances"] for n in i["nodes"]}
    lines = [shlex.split(line) for line in (slurm / "updates.log").read_text().splitlines()]
    got = {}
    for argv in lines:
        assert argv[0] == "update"
        fields = dict(arg.split("=", 1) for arg in argv[1:])
        assert fields["AvailableFeatures"] == fields["ActiveFeatures"]
        for name in expand(fields["NodeName"]):
            got[name] = fields["AvailableFeatures"]
    expected = {name: f"topo_pool_{r}" for name, r in role.items()}
    expected["node0001"] = f"admin_a,topo_ok,topo_pool_{role['node0001']}"
    expected["node0007"] = ""  # left the pools: its pool feature taken away
    assert got == expected
    assert "applied: scontrol update NodeName=" in result.stderr


def test_apply_changes_nothing_when_slurm_holds_the_pools(slurm: Path) -> None:
    first = json.loads(apply_pools(slurm, "--prefill", "2x4", "--decode", "1x8").stdout)
    nodes = json.loads((slurm / "nodes.json").read_text())
    for entry in nodes["nodes"]:
        for instance in first["instances"]:
            if entry["name"] in instance["nodes"]:
                feature = f"topo_pool_{instance['role']}"
                entry["features"] = entry["active_features"] = [feature]
    (slurm / "nodes.json").write_text(json.dumps(nodes))
    (slurm / "updates.log").unlink()
    again = apply_pools(slurm, "--prefill", "2x4", "--decode", "1x8")
    assert again.exit_code == Exit.OK, again.output
    assert not (slurm / "updates.log").exists()
    assert "pools: 0 command(s) applied" in again.stderr


def test_apply_refused_by_slurm_exits_10(slurm: Path) -> None:
    (slurm / "refuse").write_text("node0001")
    result = apply_pools(slurm, "--prefill", "1x4", "--decode", "1x4")
    assert result.exit_code == Exit.APPLY, result.output
    assert "Invalid node state specified" in result.stderr


def partition_scontrol(tmp_path: Path, partitions: list[dict[str, Any]]) -> dict[str, str]:
    """A stand-in ``scontrol`` that answers ``show partition --json`` as 24.11/26.05 do."""
    (tmp_path / "partitions.json").write_text(json.dumps({"partitions": partitions}))
    script = tmp_path / "scontrol"
    script.write_text(f'#!/bin/sh\n[ "$2" = partition ] && cat {tmp_path}/partitions.json\n')
    script.chmod(0o755)
    return {"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}


def test_partition_nodes_are_split(tmp_path: Path) -> None:
    env = partition_scontrol(
        tmp_path, [{"name": "serve", "nodes": {"configured": "gpu[0009-0012]", "total": 4}}]
    )
    args = ["--sim", SIM, "--partition", "serve", "--prefill", "2x8", "--decode", "1x8", "--json"]
    result = CliRunner().invoke(main, ["--config", os.devnull, "pools", *args], env=env)
    assert result.exit_code == Exit.OK, result.output
    data = json.loads(result.stdout)
    used = role_nodes(data, PREFILL) | role_nodes(data, DECODE) | set(data["unused"])
    assert used == {"gpu0009", "gpu0010", "gpu0011", "gpu0012"}
    assert role_nodes(data, DECODE) <= {"gpu0010", "gpu0011", "gpu0012"}  # gpu0009 is slow


def test_an_unknown_partition_is_an_input_error(tmp_path: Path) -> None:
    env = partition_scontrol(tmp_path, [])
    args = ["--sim", SIM, "--partition", "nosuch", "--prefill", "1x8", "--decode", "1x8"]
    result = CliRunner().invoke(main, ["--config", os.devnull, "pools", *args], env=env)
    assert result.exit_code == Exit.INPUT, result.output
    assert "partition nosuch not found" in result.stderr


def test_partition_and_nodes_together_is_a_usage_error() -> None:
    args = ["--sim", SIM, "--partition", "p", "--nodes", ALL, "--prefill", "1x8", "--decode", "1x8"]
    result = run("pools", *args)
    assert result.exit_code == Exit.USAGE and "give the nodes once" in result.stderr


def nvlink_snapshot(root: Path) -> Path:
    """Two NVLink racks of 4 nodes on one leaf; gpu0006's GPU fabric registration unfinished
    (its rack is then no NVLink block: the healthy rack, gpu0001-0004, is the one domain)."""
    from tests.support.sim_gpu import nvl_node_gpus, render_query_q
    from tests.support.snapshots import write_node_outputs
    from topograph_slurm.sources import sim
    from topograph_slurm.sources.snapshot import KEY_Q

    outputs = {}
    for index in range(8):
        node, rack = f"gpu{index + 1:04d}", index // 4 + 1
        state = "In Progress" if node == "gpu0006" else "Completed"
        uuid = f"c0ffee00-0000-0000-0000-00000000000{rack}"
        outputs[node] = {KEY_Q: render_query_q(nvl_node_gpus(uuid, 1, state=state))}
    dump = sim.generate_ibnetdiscover(sim.parse_sim_spec("nodes=8,rails=2,su=8"))
    entry = {"node": "gpu0001", "command": "ibnetdiscover", "exit_code": 0}
    return write_node_outputs(
        root,
        outputs,
        {"fabric/ibnetdiscover.txt": dump},
        fabric=entry | {"file": "fabric/ibnetdiscover.txt"},
    )


def test_snapshot_keeps_decode_tp_in_the_nvlink_domain_and_off_unhealthy_nvlink(
    tmp_path: Path,
) -> None:
    snap = str(nvlink_snapshot(tmp_path / "snap"))
    flags = ["--snapshot", snap, "--gpus-per-node", "4"]
    data = pools_json(
        *flags,
        "--nodes",
        "gpu[0001-0008]",
        "--prefill",
        "2x4",
        "--decode",
        "2x8",
        code=Exit.DIFFERS,
    )
    for instance in data["instances"]:
        if instance["role"] == DECODE:
            assert instance["tp_level"] == instance["tp_home"] == "domain", instance
            assert set(instance["nodes"]) <= {"gpu0001", "gpu0002", "gpu0003", "gpu0004"}
    small = pools_json(
        *flags,
        "--nodes",
        "gpu[0005-0008]",
        "--prefill",
        "2x4",
        "--decode",
        "2x4",
        code=Exit.DIFFERS,
    )
    assert "gpu0006" not in role_nodes(small, DECODE)
    assert small["pools"]["prefill"]["nodes_with_problems"] == ["gpu0006"]


def bench_record(path: Path, findings: list[dict[str, Any]]) -> Path:
    from topograph_slurm.sources.snapshot import BENCH_FORMAT, BENCH_VERSION

    record = {"format": BENCH_FORMAT, "version": BENCH_VERSION, "findings": findings, "levels": []}
    path.write_text(json.dumps(record))
    return path


def test_a_bench_records_slow_node_and_slow_pair_keep_decode_off_them(tmp_path: Path) -> None:
    record = bench_record(
        tmp_path / "bench.json",
        [
            {
                "kind": "slow-node",
                "subject": "gpu0002",
                "message": "0.4x the median",
                "level": "problem",
                "nodes": ["gpu0002"],
            },
            {
                "kind": "slow-link",
                "subject": "gpu0003 <-> gpu0004",
                "message": "slow pair",
                "level": "problem",
                "nodes": ["gpu0003", "gpu0004"],
            },
        ],
    )
    args = ["--sim", HEALTHY, "--nodes", "gpu[0001-0006]", "--prefill", "4x8", "--decode", "2x8"]
    data = pools_json(*args, "--bench", str(record))
    assert role_nodes(data, DECODE) == {"gpu0001", "gpu0005"}
    assert role_nodes(pools_json(*args), DECODE) == {"gpu0001", "gpu0002"}  # without the record


def test_a_snapshots_own_bench_record_counts(tmp_path: Path) -> None:
    snap = nvlink_snapshot(tmp_path / "snap")
    slow = {
        "kind": "slow-node",
        "subject": "gpu0005",
        "message": "0.4x the median",
        "level": "problem",
        "nodes": ["gpu0005"],
    }
    bench_record(snap / "bench.json", [slow])
    flags = ["--snapshot", str(snap), "--gpus-per-node", "4", "--nodes", "gpu[0005-0008]"]
    data = pools_json(*flags, "--prefill", "2x4", "--decode", "2x4", code=Exit.DIFFERS)
    assert role_nodes(data, DECODE) == {"gpu0007", "gpu0008"}


def test_a_decode_placed_higher_up_leaves_a_placed_cells_prefill_nodes_alone() -> None:
    # leaf A holds cell 0 (decode a1, prefills a2 a3); cell 1 fits no leaf, so it goes to the
    # spine, where a2 and a3 are as good as b1 but spoken for: its decode takes b1
    leaves = [LeafGroup("A", [], ["a1", "a2", "a3"]), LeafGroup("B", [], ["b1"])]
    leaves.append(LeafGroup("C", [], ["c1"]))
    tree = Tree(leaves, [TreeSwitch("spine", 1, [], ["A", "B", "C"])], ["spine"])
    order = ["a1", "a2", "a3", "b1", "c1"]
    plan = place(Deployment(PoolSize(3, 8), PoolSize(2, 8)), order, 8, fabric_map(tree))
    assert [i.nodes for i in plan.role(DECODE)] == [["a1"], ["b1"]]
    assert sorted(path.level for path in plan.kv_paths) == ["leaf", "leaf", "spine-1"]


def test_a_topology_file_gives_places_only() -> None:
    golden = Path(__file__).resolve().parents[1] / "golden" / "sim-2tier.block.conf"
    flags = ["--topology", str(golden), "--nodes", "gpu[0007-0012]", "--gpus-per-node", "8"]
    data = pools_json(*flags, "--prefill", "2x8", "--decode", "2x8")
    assert {path["level"] for path in data["kv_paths"]} == {"domain"}  # a block each
    assert {path["slowest_link"] for path in data["kv_paths"]} == {"InfiniBand"}  # no rates


def test_a_ratio_whose_one_multiple_does_not_fit_names_the_closest() -> None:
    result = run(
        "pools",
        "--sim",
        SIM,
        "--nodes",
        "gpu[0001-0003]",
        "--prefill",
        "16",
        "--decode",
        "16",
        "--ratio",
        "3:1",
    )
    assert result.exit_code == Exit.USAGE, result.output
    assert "--prefill 3x16 --decode 1x16 needs 8 nodes of 8 GPUs, the job has 3" in result.stderr
    assert "not even one instance of each role fits" in result.stderr


def test_templates_dir_overrides_the_text_and_the_hetjob(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "pools.txt.j2").write_text("site text: {{ instances | length }} instances\n")
    (mine / "pools.sbatch.j2").write_text("site hetjob\n")
    args = ["--sim", SIM, "--nodes", ALL, "--prefill", "2x8", "--decode", "1x8"]
    out = tmp_path / "out"
    result = run("pools", *args, "--templates", str(mine), "--out-dir", str(out))
    assert result.exit_code == Exit.OK, result.output
    assert result.stdout == "site text: 3 instances\n"
    assert (out / "hetjob.sh").read_text() == "site hetjob\n"
    missing = run(
        "pools", *args, "--templates", str(tmp_path / "no"), "--out-dir", str(tmp_path / "o")
    )
    assert missing.exit_code == Exit.CONFIG and "templates directory" in missing.stderr
    assert not (tmp_path / "o").exists()


def test_instances_smaller_than_a_node_share_it_and_each_role_keeps_its_nodes() -> None:
    data = pools_json("--sim", SIM, "--nodes", ALL, "--prefill", "4x4", "--decode", "3x2")
    by_name = {i["name"]: i for i in data["instances"]}
    decode_node = by_name["decode-0"]["nodes"]
    assert len(decode_node) == 1 and not set(decode_node) & BAD
    assert [by_name[f"decode-{d}"]["nodes"] for d in range(3)] == [decode_node] * 3
    assert [by_name[f"decode-{d}"]["gpus"] for d in range(3)] == [[0, 1], [2, 3], [4, 5]]
    assert [by_name[f"prefill-{p}"]["gpus"] for p in range(4)] == [[0, 1, 2, 3], [4, 5, 6, 7]] * 2
    prefill = role_nodes(data, PREFILL)
    assert len(prefill) == 2 and not prefill & set(decode_node)  # no node holds both roles
    assert len(data["unused"]) == 13 and data["met"]
    pools = data["pools"]
    assert (pools["prefill"]["nodes"], pools["decode"]["nodes"]) == (2, 1)  # each node once


def test_tp_larger_than_a_node_keeps_whole_nodes_and_all_their_gpus() -> None:
    data = pools_json("--sim", SIM, "--nodes", ALL, "--prefill", "1x8", "--decode", "1x16")
    decode = next(i for i in data["instances"] if i["role"] == DECODE)
    assert len(decode["nodes"]) == 2 and decode["gpus"] == list(range(8))


def test_nodes_needed_and_closest_count_shared_nodes() -> None:
    wanted = Deployment(PoolSize(5, 4), PoolSize(3, 2))  # 3 prefill nodes, 1 decode node
    assert nodes_needed(wanted, 8) == 4
    # 3x4 + 2x2 keeps 5:3 better than 4x4 + 3x2, each on 2 + 1 nodes
    assert closest(wanted, 8, 3) == Deployment(PoolSize(3, 4), PoolSize(2, 2))
    result = run("pools", "--sim", SIM, "--nodes", "gpu[0002-0004]", "--prefill", "5x4",
                 "--decode", "3x2")  # fmt: skip
    assert result.exit_code == Exit.USAGE and result.stdout == ""
    assert "needs 4 nodes of 8 GPUs, the job has 3: the closest feasible deployment is " \
        "--prefill 3x4 --decode 2x2 (3 nodes)" in result.stderr  # fmt: skip


def test_ratio_counts_shared_nodes() -> None:
    data = pools_json(
        "--sim", SIM, "--nodes", "gpu[0002-0004]", "--prefill", "4", "--decode", "2",
        "--ratio", "1:1",
    )  # fmt: skip
    # 4 TP-4 prefills on 2 nodes, 4 TP-2 decodes on 1 node: a fifth multiple needs a 4th node
    assert data["deployment"] == {"prefill": {"count": 4, "tp": 4}, "decode": {"count": 4, "tp": 2}}


def test_shared_nodes_hostfiles_and_hetjob_give_each_instance_its_gpus(tmp_path: Path) -> None:
    out = tmp_path / "pools"
    pools_json("--sim", SIM, "--nodes", ALL, "--prefill", "2x4", "--decode", "1x8", "--out-dir",
               str(out))  # fmt: skip
    tasks = parse_hostfile((out / "prefill-1.hostfile").read_text(), "h", "auto").tasks
    assert len(tasks) == 4 and len(set(tasks)) == 1
    hetjob = (out / "hetjob.sh").read_text()
    node = tasks[0]
    assert (
        f"# het-group 0 on {node}: prefill-0 (prefill, TP 4, CUDA_VISIBLE_DEVICES=0,1,2,3), "
        "prefill-1 (prefill, TP 4, CUDA_VISIBLE_DEVICES=4,5,6,7)\n"
    ) in hetjob
    assert f"--nodes=1 --nodelist={node} --ntasks-per-node=8 --gpus-per-node=8 :" in hetjob
    assert hetjob.count("--nodelist=") == 2  # the two prefills' node, the decode's


def test_pairs_take_the_finest_kv_path_where_prefill_j_with_decode_j_mod_d_would_not() -> None:
    leaves = [LeafGroup("A", [], ["a1", "a2", "a3", "a4"]), LeafGroup("B", [], ["b1", "b2"])]
    fmap = fabric_map(Tree(leaves, [TreeSwitch("spine", 1, [], ["A", "B"])], ["spine"]))
    # the fixed rule pairs b1 with a2 and a1 with b2: both across the spine
    assert pair([["b1"], ["a1"]], [["a2"], ["b2"]], fmap) == [1, 0]  # both inside a leaf


def test_pairs_stay_balanced_floor_to_ceil() -> None:
    leaves = [LeafGroup("A", [], [f"a{i}" for i in range(8)]), LeafGroup("B", [], ["b1"])]
    fmap = fabric_map(Tree(leaves, [TreeSwitch("spine", 1, [], ["A", "B"])], ["spine"]))
    prefills = [[f"a{i}"] for i in range(3, 8)]
    # five prefills in A, decodes a0 and a1 in A and b1 in B: each takes 1 or 2, b1 one across
    chosen = pair(prefills, [["a0"], ["a1"], ["b1"]], fmap)
    assert sorted(chosen.count(d) for d in range(3)) == [1, 2, 2] and chosen.count(2) == 1
    assert pair(prefills[:2], [["a0"], ["a1"], ["b1"]], fmap) == [0, 1]  # at most one each


def test_place_pairs_shared_node_prefills_with_the_decode_beside_them() -> None:
    # two leaves of two nodes: a decode (TP 8) and a node of two prefills (TP 4) in each; prefill
    # j with decode j mod 2 would send prefill-1's KV cache across the spine
    leaves = [LeafGroup("A", [], ["a1", "a2"]), LeafGroup("B", [], ["b1", "b2"])]
    fmap = fabric_map(Tree(leaves, [TreeSwitch("spine", 1, [], ["A", "B"])], ["spine"]))
    plan = place(Deployment(PoolSize(4, 4), PoolSize(2, 8)), ["a1", "a2", "b1", "b2"], 8, fmap)
    assert [path.level for path in plan.kv_paths] == ["leaf"] * 4 and plan.met
    assert [path.decode for path in plan.kv_paths] == ["decode-0"] * 2 + ["decode-1"] * 2


def test_explain_pools_reads_back_the_gpus_of_instances_sharing_a_node(tmp_path: Path) -> None:
    written = pools_json("--sim", SIM, "--nodes", ALL, "--prefill", "2x4", "--decode", "2x2")
    path = tmp_path / "pools.json"
    path.write_text(json.dumps(written))
    result = run("explain", "--sim", SIM, "--pools", str(path), "--json")
    assert result.exit_code == Exit.OK, result.output
    read = {i["name"]: i["gpus"] for i in json.loads(result.stdout)["instances"]}
    assert read == {i["name"]: i["gpus"] for i in written["instances"]}
    assert read["decode-1"] == [2, 3]


def test_explain_pools_says_which_instances_share_a_gpu(tmp_path: Path) -> None:
    """A hand-edited deployment puts decode-1 on decode-0's GPUs: both say so, exit 1."""
    written = pools_json("--sim", SIM, "--nodes", ALL, "--prefill", "2x4", "--decode", "2x2")
    decode = {i["name"]: i for i in written["instances"]}
    assert decode["decode-0"]["nodes"] == decode["decode-1"]["nodes"]
    decode["decode-1"]["gpus"] = decode["decode-0"]["gpus"]
    path = tmp_path / "pools.json"
    path.write_text(json.dumps(written))
    result = run("explain", "--sim", SIM, "--pools", str(path), "--json")
    assert result.exit_code == Exit.DIFFERS, result.output
    unmet = {i["name"]: i["unmet"] for i in json.loads(result.stdout)["instances"]}
    node, gpu = decode["decode-0"]["nodes"][0], decode["decode-0"]["gpus"][0]
    assert f"shares GPU {gpu} of {node} with decode-1" in unmet["decode-0"]
    assert f"shares GPU {gpu} of {node} with decode-0" in unmet["decode-1"]
    assert not any("shares" in line for name in ("prefill-0", "prefill-1") for line in unmet[name])


DGX = Path(__file__).parents[1] / "fixtures" / "real" / "nvidia-smi-topo"
DGX_A100 = DGX / "dgx-a100-8gpu-12nic-mlx5-columns.txt"
SHARED = ["--sim", SIM, "--nodes", ALL, "--prefill", "2x4", "--decode", "1x8"]


def binding(fmt: str, *more: str) -> Result:
    return run("pools", *SHARED, "--format", fmt, "--topo-matrix", str(DGX_A100), *more)


def test_binding_env_binds_each_instances_ranks_to_its_own_gpus_nics_and_cpus() -> None:
    from topograph_slurm.analysis.placement.binding import node_binding
    from topograph_slurm.sources.nvidia_smi import parse_topo_matrix

    node = node_binding(parse_topo_matrix(DGX_A100.read_text()))
    result = binding("binding-env")
    assert result.exit_code == Exit.OK, result.output
    blocks = result.stdout.split("# prefill-1 (prefill, TP 4) on ")[1].split("# decode-0")[0]
    lines = [line for line in blocks.splitlines() if line.startswith("LOCAL_RANK=")]
    assert len(lines) == 4
    for rank, line in enumerate(lines):
        want = node[4 + rank]  # prefill-1 holds GPUs 4-7 of the node it shares with prefill-0
        assert line.startswith(f"LOCAL_RANK={rank} CUDA_VISIBLE_DEVICES={want.gpu} ")
        assert f"NCCL_IB_HCA=={','.join(want.nics)} " in line


def test_binding_srun_maps_each_instances_tasks_onto_its_gpus() -> None:
    result = binding("binding-srun")
    assert result.exit_code == Exit.OK, result.output
    lines = result.stdout.splitlines()
    assert lines[0].endswith(", GPUs 0,1,2,3") and lines[2].endswith(", GPUs 4,5,6,7")
    assert lines[1].endswith("--gpu-bind=map_gpu:0,1,2,3")
    assert lines[3].startswith("--ntasks-per-node=4 --cpu-bind=mask_cpu:0x")
    assert lines[3].endswith("--gpu-bind=map_gpu:4,5,6,7")
    assert lines[5].endswith("--gpu-bind=map_gpu:0,1,2,3,4,5,6,7")


def test_binding_wrapper_exports_by_instance_and_local_rank(tmp_path: Path) -> None:
    result = binding("binding-wrapper")
    assert result.exit_code == Exit.OK, result.output
    script = tmp_path / "bind.sh"
    script.write_text(result.stdout)

    def bound(instance: str, rank: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], "SLURM_LOCALID": rank}
        argv = ["sh", str(script), instance, "sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES"']
        return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)

    assert bound("prefill-1", "2").stdout == "6\n"
    assert bound("prefill-0", "2").stdout == "2\n"
    assert bound("decode-0", "7").stdout == "7\n"
    wrong = bound("prefill-1", "4")  # prefill-1 has four ranks
    assert wrong.returncode == 2 and "no binding for instance 'prefill-1' local rank '4'" in (
        wrong.stderr
    )


def test_binding_without_topo_m_is_one_input_error_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("pools", *SHARED, "--format", "binding-env", "--out-dir", str(out))
    assert result.exit_code == Exit.INPUT, result.output
    assert result.stderr.strip().splitlines() == [
        "topograph-slurm: error: prefill-0: no nvidia-smi topo -m for gpu0004: give "
        "--topo-matrix FILE (one node's capture) or a --snapshot that has it"
    ]
    assert result.stdout == "" and not out.exists()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--format", "binding-env", "--json"], "--json or --format binding-env, not both"),
        (["--topo-matrix", str(DGX_A100)], "--topo-matrix is for the binding-* and launcher"),
    ],
)
def test_binding_flag_misuse_is_one_usage_error(args: list[str], fragment: str) -> None:
    result = run("pools", *SHARED, *args)
    assert result.exit_code == Exit.USAGE, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0]


# --------------------------------------------------------------------------- impossible deployments

FOUR = "nodes=16,gpus=4,rails=2,su=8"  # nodes of 4 GPUs


def explain_one(tmp_path: Path, tp: int, extra: str = "") -> Result:
    """explain --pools of one decode instance of TP *tp* on gpu0001 (4 GPUs)."""
    path = tmp_path / "pools.json"
    instance = f'{{"name": "d", "role": "decode", "tp": {tp}, "nodes": ["gpu0001"]{extra}}}'
    path.write_text(f'{{"instances": [{instance}]}}')
    return run("explain", "--sim", FOUR, "--pools", str(path), "--json")


@pytest.mark.parametrize(
    ("tp", "extra", "said"),
    [
        (8, "", "TP 8 needs 8 GPUs; it has 4 (4 on each of its 1 node)"),
        (10**30, "", f"TP {10**30} needs {10**30} GPUs; it has 4 (4 on each of its 1 node)"),
        (4, ', "gpus": [0, 0, 0, 0]', "names GPU 0 more than once"),
        (4, ', "gpus": [0]', "TP 4 needs 4 GPUs; it has 1 (1 on each of its 1 node)"),
    ],
    ids=["tp-8-on-4", "tp-1e30", "gpus-repeat", "gpus-short"],
)
def test_explain_pools_says_an_impossible_instance_is_not_met(
    tmp_path: Path, tp: int, extra: str, said: str
) -> None:
    """Each once said "everything is met"."""
    result = explain_one(tmp_path, tp, extra)
    assert result.exit_code == Exit.DIFFERS, result.output
    data = json.loads(result.stdout)
    assert said in data["instances"][0]["unmet"] and data["met"] is False


def test_explain_pools_of_a_whole_instance_is_met(tmp_path: Path) -> None:
    result = explain_one(tmp_path, 4, ', "gpus": [0, 1, 2, 3]')
    assert result.exit_code == Exit.OK, result.output


def test_one_instance_and_one_node_are_said_in_the_singular() -> None:
    result = run("pools", "--sim", HEALTHY, "--nodes", ALL, "--prefill", "1x8", "--decode", "1x8")
    assert "Decode pool: 1 instance on 1 node, 0 with problems" in result.stdout, result.output
    explained = run("explain", "--sim", HEALTHY, "--nodes", "gpu0001", "--gpus-per-node", "1")
    assert "1 GPU per node, 1 node\n" in explained.stdout, explained.output


def test_without_apply_the_report_lists_the_lines_apply_would_run_and_runs_none(
    slurm: Path,
) -> None:
    """The dry run: Slurm asked, only the nodes whose features differ listed, nothing run."""
    nodes = json.loads((slurm / "nodes.json").read_text())
    nodes["nodes"][6]["features"] = nodes["nodes"][6]["active_features"] = ["topo_pool_decode"]
    (slurm / "nodes.json").write_text(json.dumps(nodes))
    env = {"PATH": f"{slurm}{os.pathsep}{os.environ['PATH']}"}
    flags = ["pools", "--sim", SLURM_SIM, "--nodes", "node[0001-0004]"]
    size = ["--prefill", "2x4", "--decode", "1x8"]
    as_json = CliRunner().invoke(main, ["--config", os.devnull, *flags, *size, "--json"], env=env)
    assert as_json.exit_code == Exit.OK, as_json.output
    features = json.loads(as_json.stdout)["features"]
    assert features["applied"] is False and features["slurm_asked"] is True
    named = {n for line in features["commands"] for n in expand(shlex.split(line)[2][9:])}
    assert named == {"node0001", "node0002", "node0003", "node0004", "node0007"}
    text = CliRunner().invoke(main, ["--config", os.devnull, *flags, *size], env=env)
    assert "Slurm features (a dry run: --apply runs these):\n" in text.stdout
    assert "Slurm not asked" not in text.stdout
    assert all(f"  {line}\n" in text.stdout for line in features["commands"])
    assert not (slurm / "updates.log").exists()


def test_a_dry_run_where_slurm_cannot_be_asked_still_lists_the_lines_and_says_so() -> None:
    data = pools_json(
        "--sim", SIM, "--nodes", "gpu[0001-0004]", "--prefill", "2x8", "--decode", "1x16"
    )
    features = data["features"]
    assert features["slurm_asked"] is False and features["why"] == "no scontrol on this host"
    roles = {n: i["role"] for i in data["instances"] for n in i["nodes"]}
    for line in features["commands"]:
        argv = shlex.split(line)
        role = {roles[n] for n in expand(argv[2].removeprefix("NodeName="))}
        assert argv[3:] == [f"AvailableFeatures=topo_pool_{r}" for r in role] + [
            f"ActiveFeatures=topo_pool_{r}" for r in role
        ]
    assert len(features["commands"]) == 2


def test_apply_without_scontrol_is_exit_4_and_runs_nothing() -> None:
    result = run("pools", *SHARED, "--apply", "--json")
    assert result.exit_code == Exit.COLLECT, result.output
    assert result.stdout == ""


def test_the_old_out_still_writes_the_directory_with_one_warning_line(tmp_path: Path) -> None:
    out = tmp_path / "pools"
    result = run("pools", *SHARED, "--out", str(out))
    assert result.exit_code == Exit.OK, result.output
    assert (out / "pools.json").exists()
    warned = [line for line in result.stderr.splitlines() if "warning" in line]
    tail = "; the old spelling goes in the next release"
    assert warned == [f"topograph-slurm: warning: --out is now --out-dir{tail}"]


def test_topo_matrix_dash_reads_stdin() -> None:
    result = CliRunner().invoke(
        main,
        ["--config", os.devnull, "pools", *SHARED, "--format", "binding-env", "--topo-matrix", "-"],
        input=DGX_A100.read_text(),
    )
    assert result.exit_code == Exit.OK, result.output
    assert result.stdout == binding("binding-env").stdout
