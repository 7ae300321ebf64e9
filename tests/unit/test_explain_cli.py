"""`topograph-slurm explain` and `order` on the built-in simulated cluster, bad input included."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit

SIM = "nodes=16,gpus=8,rails=2,su=8,tiers=2"  # two leaves of 8 nodes under one spine
INTERLEAVED = ["gpu0001", "gpu0009", "gpu0002", "gpu0010"]


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, *args])


def hostfile(tmp_path: Path, nodes: list[str]) -> str:
    path = tmp_path / "hostfile"
    path.write_text("".join(f"{node}\n" for node in nodes))
    return str(path)


def one_error(result: Result, code: int, fragment: str) -> None:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topograph-slurm: error: "), result.stderr
    assert fragment in lines[0]


def test_demo_job_whose_tp_groups_stay_in_a_leaf_exits_0() -> None:
    result = run("explain", "--sim", "demo", "--nodes", "gpu[0001-0004]", "--tp", "16")
    assert result.exit_code == 0, result.output
    assert "Verdict: all 2 TP groups of 16 GPUs are inside leaf" in result.stdout
    assert "slowest link InfiniBand 4xNDR (400 Gb/s per link)" in result.stdout


def test_tp_groups_across_leaves_exit_1_with_counts(tmp_path: Path) -> None:
    result = run(
        "explain",
        "--sim",
        SIM,
        "--hostfile",
        hostfile(tmp_path, INTERLEAVED),
        "--tp",
        "16",
        "--json",
    )
    assert result.exit_code == Exit.DIFFERS, result.output
    data = json.loads(result.stdout)
    tp = data["kinds"]["tp"]
    assert tp["groups"] == 2 and tp["crossing"]["leaf"] == 2
    assert tp["worst_level"] == "spine-1" and tp["worst_nodes"] == ["gpu0001", "gpu0009"]
    assert data["verdict"] == "2 of 2 TP groups of 16 GPUs cross out of leaf"
    assert data["nodes"] == INTERLEAVED


def test_a_degraded_rail_on_the_path_is_named() -> None:
    result = run(
        "explain", "--sim", SIM + ",degraded=1", "--nodes", "gpu[0001-0002]", "--tp", "16", "--json"
    )
    assert result.exit_code == 0, result.output
    troubles = json.loads(result.stdout)["kinds"]["tp"]["troubles"]
    assert any(t["subject"] == "gpu0001" and t["kind"] == "degraded-link" for t in troubles)
    assert "1xNDR" in json.loads(result.stdout)["kinds"]["tp"]["worst_link"]


def test_order_regroups_an_interleaved_allocation_by_leaf(tmp_path: Path) -> None:
    result = run("order", "--sim", SIM, "--hostfile", hostfile(tmp_path, INTERLEAVED), "--tp", "16")
    assert result.exit_code == 0, result.output
    nodes = result.stdout.split()
    assert sorted(nodes) == sorted(INTERLEAVED)
    leaves = [int(node[3:]) <= 8 for node in nodes]
    assert leaves[0] == leaves[1] and leaves[2] == leaves[3]
    again = run("explain", "--sim", SIM, "--hostfile", hostfile(tmp_path, nodes), "--tp", "16")
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("plain", "gpu0001\ngpu0002\n"),
        ("torchrun", "gpu0001 0\ngpu0002 1\n"),
        ("mpi", "gpu0001 slots=8\ngpu0002 slots=8\n"),
        ("slurm-hostfile", "gpu0001\n" * 8 + "gpu0002\n" * 8),
    ],
)
def test_order_formats(fmt: str, expected: str) -> None:
    result = run("order", "--sim", SIM, "--nodes", "gpu[0001-0002]", "--tp", "8", "--format", fmt)
    assert result.exit_code == 0, result.output
    assert result.stdout == expected


def test_nodes_with_findings_go_last() -> None:
    result = run("order", "--sim", SIM + ",degraded=1", "--nodes", "gpu[0001-0004]", "--tp", "8")
    assert result.exit_code == 0, result.output
    assert result.stdout.split()[-1] == "gpu0001"


def test_an_allocation_that_cannot_hold_tp_exits_1_and_still_prints_an_order() -> None:
    result = run("order", "--sim", SIM, "--nodes", "gpu[0001,0009]", "--tp", "16")
    assert result.exit_code == Exit.DIFFERS
    assert sorted(result.stdout.split()) == ["gpu0001", "gpu0009"]
    assert "cannot keep TP inside: 1 of 1 TP groups of 16 GPUs cross out of leaf" in result.stderr


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["--nodes", "gpu[0001-0002]", "--tp", "3"], Exit.USAGE, "do not split into tp=3"),
        (["--nodes", "gpu[0001-0002]", "--order", "tp-dp-xx"], Exit.USAGE, "each at most once"),
        (["--nodes", "gpu[0001-0002]", "--order", "tp-cp"], Exit.USAGE, "names no dp"),
        (
            [
                "--nodes",
                "gpu[0001-0004]",
                "--tp",
                "8",
                "--ep",
                "2",
                "--pp",
                "2",
                "--order",
                "tp-cp-ep-pp-dp",
            ],
            Exit.USAGE,
            "does not end in pp",
        ),
        (["--nodes", "typo[1-4]", "--tp", "8"], Exit.INPUT, "4 of 4 nodes are not on the fabric"),
        (["--nodes", "gpu[0001-0003],nosuch1"], Exit.INPUT, "1 of 4 nodes are not on the fabric"),
        (["--nodes", "gpu[0001-0003],gpu001"], Exit.INPUT, "gpu001 (did you mean gpu0001?)"),
        (["--tp", "8"], Exit.USAGE, "give the job's nodes"),
        (["--nodes", "gpu[0001-"], Exit.USAGE, "invalid hostlist"),
        (["--nodes", "gpu0001", "--topology", "t.conf"], Exit.USAGE, "not both"),
        (["--hostfile", "/nonexistent/hostfile"], Exit.INPUT, "cannot read hostfile"),
    ],
)
def test_bad_input_is_one_line(args: list[str], code: int, fragment: str) -> None:
    for command in ("explain", "order"):
        one_error(run(command, "--sim", SIM, *args), code, fragment)


def test_without_a_fabric_or_topology_it_says_what_is_needed() -> None:
    one_error(run("explain", "--nodes", "gpu0001"), Exit.USAGE, "say where the fabric is")


def test_gpus_per_node_is_needed_when_the_source_does_not_say(tmp_path: Path) -> None:
    from topograph_slurm.sources import sim

    dump = tmp_path / "fabric.txt"
    dump.write_text(sim.generate_ibnetdiscover(sim.parse_sim_spec(SIM)))
    one_error(
        run("explain", "--ibnetdiscover", str(dump), "--nodes", "gpu0001", "--tp", "8"),
        Exit.USAGE,
        "--gpus-per-node is needed",
    )
    ok = run(
        "explain",
        "--ibnetdiscover",
        str(dump),
        "--nodes",
        "gpu0001",
        "--tp",
        "8",
        "--gpus-per-node",
        "8",
    )
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--tp", "0"], "--tp must be a positive integer, got 0"),
        (["--gpus-per-node", "0"], "--gpus-per-node must be 1 to 1024, got 0"),
        (["--gpus-per-node", "100000000"], "--gpus-per-node must be 1 to 1024, got 100000000"),
    ],
)
def test_sizes_of_zero_or_beyond_any_node_are_refused_not_replaced(
    flags: list[str], fragment: str
) -> None:
    """--tp 0 and --gpus-per-node 0 were taken as 'not given' (defaults, exit 0); a huge GPU
    count never finished."""
    for command in ("explain", "order"):
        result = run(command, "--sim", SIM, "--nodes", "gpu[0001-0002]", *flags)
        one_error(result, Exit.USAGE, fragment)


@pytest.mark.parametrize("text", ["", "# only a comment\n\n"])
def test_a_hostfile_naming_no_node_is_one_input_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "hostfile"
    path.write_text(text)
    for command in ("explain", "order"):
        result = run(command, "--sim", SIM, "--hostfile", str(path), "--tp", "8")
        one_error(result, Exit.INPUT, f"hostfile {path} names no node")


def test_a_job_claiming_more_gpus_per_node_than_any_node_holds_is_refused(tmp_path: Path) -> None:
    """A gres of 10**26 GPUs per node once made explain loop over every rank, forever."""
    from tests.support.scontrol import Answer, ReplayScontrol

    job = {
        "job_id": 7,
        "job_state": ["RUNNING"],
        "nodes": "gpu[0001-0002]",
        "gres_detail": [f"gpu:{10**26}(IDX:0-3)"] * 2,
        "admin_comment": "",
    }
    scontrol = ReplayScontrol(tmp_path, {"show job --json 7": Answer(json.dumps({"jobs": [job]}))})
    config = tmp_path / "c.yaml"
    config.write_text(f"scontrol: {scontrol.path}\n")
    result = CliRunner().invoke(main, ["--config", str(config), "explain", "7", "--sim", SIM])
    one_error(result, Exit.INPUT, f"the job's nodes hold {10**26} GPUs each")


# --------------------------------------------------------------------------- Megatron-Core's grids


def explained(*args: str) -> dict:  # type: ignore[type-arg]
    result = run("explain", "--sim", SIM, "--json", *args)
    assert result.exit_code in (Exit.OK, Exit.DIFFERS), result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_ep_reports_megatrons_dense_dp_and_the_expert_grid() -> None:
    """8 nodes of 8 GPUs, tp 8, ep 2: Megatron-Core's 8 DP groups of 8 (not 16 of 4), the EP
    pairs a node apart and the expert DP groups of 4."""
    data = explained("--nodes", "gpu[0001-0008]", "--tp", "8", "--ep", "2")
    kinds = data["kinds"]
    assert (kinds["dp"]["groups"], kinds["dp"]["size"]) == (8, 8)
    assert (kinds["ep"]["groups"], kinds["ep"]["size"]) == (32, 2)
    assert (kinds["edp"]["groups"], kinds["edp"]["size"]) == (16, 4)
    assert data["layout"] == {
        "tp": 8, "cp": 1, "ep": 2, "dp": 8, "pp": 1, "etp": 8, "edp": 4,
        "order": "tp-cp-ep-dp-pp",
    }  # fmt: skip


def test_ep_with_pp_reports_the_dp_groups() -> None:
    data = explained("--nodes", "gpu[0001-0008]", "--tp", "8", "--ep", "4", "--pp", "2")
    assert (data["kinds"]["dp"]["groups"], data["kinds"]["dp"]["size"]) == (16, 4)
    assert "edp" not in data["kinds"]


def test_ep_with_cp_pairs_neighbouring_nodes_inside_the_leaf() -> None:
    """tp 8, cp 2, ep 2 on 16 nodes: EP pairs are ranks 8 apart, (gpu0001, gpu0002): none
    crosses the leaf."""
    data = explained("--nodes", "gpu[0001-0016]", "--tp", "8", "--cp", "2", "--ep", "2")
    ep = data["kinds"]["ep"]
    assert ep["crossing"]["leaf"] == 0
    assert ep["worst_nodes"] == ["gpu0001", "gpu0002"]


def test_a_two_node_layout_megatron_runs_is_accepted() -> None:
    result = run(
        "explain", "--sim", SIM, "--nodes", "gpu[0001-0002]", "--tp", "8", "--cp", "2", "--ep", "2"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Layout: tp=8 cp=2 dp=1 pp=1; experts: etp=8 ep=2 edp=1 ")


def test_a_partial_order_string_is_completed_as_megatron_does() -> None:
    data = explained("--nodes", "gpu[0001-0004]", "--tp", "8", "--pp", "2", "--order", "tp-pp-dp")
    assert data["layout"]["order"] == "tp-pp-dp-cp-ep"
    assert data["kinds"]["pp"]["worst_nodes"] == ["gpu0001", "gpu0002"]


# --------------------------------------------------------------------------- hostfiles


def test_a_task_per_line_hostfile_is_read_per_task(tmp_path: Path) -> None:
    """16 lines alternating two nodes of two leaves (SLURM_HOSTFILE with
    --distribution=arbitrary): rank r on line r, so both TP groups cross the leaf, exit 1."""
    path = hostfile(tmp_path, ["gpu0001", "gpu0009"] * 8)
    result = run("explain", "--sim", SIM, "--hostfile", path, "--tp", "8")
    assert result.exit_code == Exit.DIFFERS, result.output
    assert f"Ranks from: hostfile {path}, one line per task: 16 tasks on 2 nodes" in result.stdout
    assert "Verdict: 2 of 2 TP groups of 8 GPUs cross out of one node" in result.stdout
    # the same file read as a node list folds the repeats: TP inside each node
    folded = run(
        "explain", "--sim", SIM, "--hostfile", path, "--tp", "8", "--hostfile-lines", "node"
    )
    assert folded.exit_code == 0, folded.output
    assert "one line per node: 2 nodes" in folded.stdout


def test_a_task_per_line_file_of_whole_nodes_orders_as_its_nodes(tmp_path: Path) -> None:
    path = hostfile(tmp_path, ["gpu0009"] * 8 + ["gpu0001"] * 8)
    result = run("order", "--sim", SIM, "--hostfile", path, "--tp", "8", "--format", "plain")
    assert result.exit_code == 0, result.output
    assert sorted(result.stdout.split()) == ["gpu0001", "gpu0009"]


def test_an_mpi_hostfile_gives_ranks_per_node_by_its_slots(tmp_path: Path) -> None:
    path = tmp_path / "mpi"
    path.write_text("gpu0001 slots=4\ngpu0002 slots=4  # second\n")
    data = explained("--hostfile", str(path), "--tp", "4")
    assert data["gpus_per_node"] == 4
    assert data["kinds"]["dp"]["groups"] == 4 and data["kinds"]["dp"]["size"] == 2
    assert "ranks per node from its slots=" in data["ranks_from"]


@pytest.mark.parametrize(
    ("lines", "extra", "code", "fragment"),
    [
        (["gpu0001"] * 16, ["--gpus-per-node", "8"], Exit.USAGE, "runs 16 ranks on gpu0001"),
        (["gpu0001 slots=4", "gpu0002"], [], Exit.INPUT, "not for gpu0002"),
        (["gpu0001 slots=0"], [], Exit.INPUT, "slots=0"),
    ],
)
def test_hostfiles_that_contradict_themselves_are_refused(
    tmp_path: Path, lines: list[str], extra: list[str], code: int, fragment: str
) -> None:
    path = hostfile(tmp_path, lines)
    one_error(run("explain", "--sim", SIM, "--hostfile", path, *extra), code, fragment)


def test_order_refuses_a_task_file_with_uneven_nodes(tmp_path: Path) -> None:
    path = hostfile(tmp_path, ["gpu0001"] * 8 + ["gpu0002"] * 4)
    one_error(
        run("order", "--sim", SIM, "--hostfile", path, "--tp", "4"),
        Exit.INPUT,
        "runs 4 to 8 per node",
    )
    # explain takes it as it is: 12 ranks
    assert explained("--hostfile", path, "--tp", "4")["kinds"]["tp"]["groups"] == 3


# --------------------------------------------------------------------------- names and levels


def test_five_digit_names_are_not_mistaken_for_four() -> None:
    """At 10,240 nodes the simulator names nodes gpu00001…: gpu[0001-0064] is not on that
    fabric, and the error says what was meant (it used to explain them as crossing)."""
    one_error(
        run("explain", "--sim", "nodes=10240,tiers=3", "--nodes", "gpu[0001-0064]", "--tp", "8"),
        Exit.INPUT,
        "64 of 64 nodes are not on the fabric",
    )
    result = run("order", "--sim", "nodes=10240,tiers=3", "--nodes", "gpu[0001-0064]")
    assert "and 59 more (did you mean gpu00001?)" in result.stderr


def test_blocksizes_levels_are_fabric_levels(tmp_path: Path) -> None:
    """A block topology's aggregated blocks (BlockSizes=8,16,32) are levels of their own: a TP
    group on two blocks of one 16-node aggregate stays inside it, one that straddles two
    aggregates does not."""
    conf = tmp_path / "topology.conf"
    conf.write_text(
        "".join(
            f"BlockName=b{b + 1} Nodes=gpu[{b * 8 + 1:04d}-{b * 8 + 8:04d}]\n" for b in range(4)
        )
        + "BlockSizes=8,16,32\n"
    )
    common = ["--topology", str(conf), "--gpus-per-node", "8", "--tp", "128", "--json"]
    inside = json.loads(run("explain", "--nodes", "gpu[0001-0016]", *common).stdout)
    assert inside["levels"] == ["node", "domain", "block-16", "block-32", "fabric"]
    assert inside["tp_home"] == "block-16" and inside["tp_inside"]
    straddling = run("explain", "--nodes", "gpu[0005-0020]", *common)
    assert straddling.exit_code == Exit.DIFFERS
    assert json.loads(straddling.stdout)["kinds"]["tp"]["worst_level"] == "block-32"


def test_a_group_inside_a_node_does_not_list_its_rails_as_trouble() -> None:
    """A degraded rail slows what leaves the node, not a TP group inside it; the DP groups
    that cross nodes still name it."""
    data = json.loads(
        run(
            "explain",
            "--sim",
            SIM + ",degraded=1",
            "--nodes",
            "gpu[0001-0002]",
            "--tp",
            "8",
            "--json",
        ).stdout
    )
    assert data["kinds"]["tp"]["worst_level"] == "node"
    assert data["kinds"]["tp"]["troubles"] == []
    assert any(t["kind"] == "degraded-link" for t in data["kinds"]["dp"]["troubles"])
