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
        (["--nodes", "gpu[0001-0002]", "--order", "tp-dp"], Exit.USAGE, "--order must name"),
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
