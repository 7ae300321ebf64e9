"""``occupancy``: GPUs per unit, over-spread jobs and stranded GPUs, against a stand-in
``scontrol`` replaying ``show nodes --json`` and ``show jobs --json``.

The hand-built cluster: 12 nodes of 4 GPUs in three 4-node blocks (b0 node01-04, b1 node05-08,
b2 node09-12); every node in partition ``gpu``, node01-04 also in ``debug``.

- job 100 runs exclusive on node01, node05, node09: one node in every block (ALLOCATED, 12
  GPUs busy); it needs one block, holds three: over-spread.
- job 101 runs on node02 with 2 GPUs (MIXED).
- node12 is drained: its 4 GPUs are down.
- pending in ``gpu``: job 200 (4 whole nodes) and job 201 (``--tp-size 16`` record: a TP group
  of 4 nodes of 4 GPUs); pending in ``debug``: job 202 (1 node, 2 GPUs).

Free GPUs: b0 2+4+4 = 10, b1 3x4 = 12, b2 2x4 = 8 (node12 down): 30. No block has 4 idle
nodes (b0 2, b1 3, b2 2), so jobs 200 and 201 fit nowhere; job 202 fits b0 (node02's 2 free
GPUs), and only b0 is in ``debug``. Stranded: b1 12 + b2 8 = 20 over the fabric; in ``gpu``
(jobs 200, 201 only) all 30; in ``debug`` (job 202 fits) 0. The largest TP group placeable now:
b1's 3 idle nodes, 12 GPUs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from prometheus_client.parser import text_string_to_metric_families

from tests.support.scontrol import Answer, ReplayScontrol
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit

TOPOLOGY = """BlockName=b0 Nodes=node[01-04]
BlockName=b1 Nodes=node[05-08]
BlockName=b2 Nodes=node[09-12]
BlockSizes=4
"""


def node(i: int, state: tuple[str, ...] = ("IDLE",), used: int = 0) -> dict[str, Any]:
    return {
        "name": f"node{i:02d}",
        "gres": "gpu:h100:4(S:0-1)",
        "gres_used": f"gpu:h100:{used}(IDX:{'0-' + str(used - 1) if used else 'N/A'})",
        "state": list(state),
        "partitions": ["gpu", "debug"] if i <= 4 else ["gpu"],
    }


def nodes() -> list[dict[str, Any]]:
    found = [node(i) for i in range(1, 13)]
    for i in (1, 5, 9):  # job 100, exclusive: ALLOCATED (gres_used says so too here)
        found[i - 1] = node(i, ("ALLOCATED",), 4)
    found[1] = node(2, ("MIXED",), 2)
    found[11] = node(12, ("IDLE", "DRAIN"))
    return found


def job(job_id: int, state: str, **kw: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "job_id": job_id,
        "job_state": [state],
        "nodes": "",
        "partition": "gpu",
        "node_count": {"set": True, "infinite": False, "number": 1},
        "gres_detail": [],
        "tres_per_node": "",
        "admin_comment": "",
    }
    return entry | kw


def jobs() -> list[dict[str, Any]]:
    return [
        job(100, "RUNNING", nodes="node[01,05,09]", gres_detail=["gpu:4(IDX:0-3)"] * 3),
        job(101, "RUNNING", nodes="node02", tres_per_node="gres/gpu:2"),
        job(200, "PENDING", node_count={"set": True, "infinite": False, "number": 4}),
        job(201, "PENDING", admin_comment="topograph:tp=16,gpn=4,group=4,src=user"),
        job(202, "PENDING", partition="debug", tres_per_node="gres/gpu:2"),
        job(99, "COMPLETED", nodes="node03"),
    ]


def run(
    tmp_path: Path,
    *args: str,
    node_list: object = None,
    job_list: object = None,
    command: str = "occupancy",
) -> Result:
    answers = {
        "show nodes --json": Answer(
            json.dumps({"nodes": nodes() if node_list is None else node_list})
        ),
        "show jobs --json": Answer(json.dumps({"jobs": jobs() if job_list is None else job_list})),
    }
    scontrol = ReplayScontrol(tmp_path / "bin", answers)
    config = tmp_path / "c.yaml"
    config.write_text(f"scontrol: {scontrol.path}\n")
    topology = tmp_path / "topology.conf"
    topology.write_text(TOPOLOGY)
    return CliRunner().invoke(
        main, ["--config", str(config), command, "--topology", str(topology), *args]
    )


def occupancy(tmp_path: Path, *args: str, **kw: object) -> dict[str, Any]:
    result = run(tmp_path, "--json", *args, **kw)  # type: ignore[arg-type]
    assert result.exit_code == Exit.OK, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_stranded_gpus_are_the_free_gpus_of_blocks_no_pending_job_fits(tmp_path: Path) -> None:
    data = occupancy(tmp_path)
    fabric = data["fabric"]
    assert fabric["level"] == "domain"
    units = {u["name"]: u for u in fabric["units"]}
    assert {name: (u["busy"], u["free"], u["down"]) for name, u in units.items()} == {
        "b0": (6, 10, 0),
        "b1": (4, 12, 0),
        "b2": (4, 8, 4),
    }
    assert {name: u["stranded"] for name, u in units.items()} == {"b0": 0, "b1": 12, "b2": 8}
    assert fabric["stranded"] == 20 and fabric["largest_tp"] == 12 and fabric["pending"] == 3
    assert fabric["totals"] == {"gpus": 48, "busy": 14, "free": 30, "down": 4}
    parts = data["partitions"]
    assert (parts["gpu"]["stranded"], parts["debug"]["stranded"]) == (30, 0)
    assert [u["name"] for u in parts["debug"]["units"]] == ["b0"]


def test_a_job_on_more_blocks_than_its_size_needs_is_over_spread(tmp_path: Path) -> None:
    spread = occupancy(tmp_path)["fabric"]["spread_jobs"]
    assert spread == [{"job_id": "100", "nodes": 3, "held": 3, "fewest": 1}]


def test_nothing_is_stranded_while_nothing_pends(tmp_path: Path) -> None:
    running = [j for j in jobs() if j["job_state"] != ["PENDING"]]
    assert occupancy(tmp_path, job_list=running)["fabric"]["stranded"] == 0


def test_a_segment_that_fits_frees_the_block(tmp_path: Path) -> None:
    """Job 200 with --segment=2 needs 2 idle nodes in one block: every block has them (b0
    node03-04, b1 node06-08, b2 node10-11), so nothing is stranded."""
    queue = [*jobs()[:2], job(200, "PENDING", node_count=4, segment_size=2)]
    assert occupancy(tmp_path, job_list=queue)["fabric"]["stranded"] == 0


def test_text_names_the_figures(tmp_path: Path) -> None:
    result = run(tmp_path)
    assert result.exit_code == Exit.OK, result.output
    assert "stranded 20; largest TP group placeable now 12; pending jobs 3" in result.stdout
    assert "job 100: 3 nodes on 3 units (fits in 1)" in result.stdout
    assert "Partition debug: GPUs: 16 (6 busy, 10 free, 0 down); stranded 0" in result.stdout


def test_metrics_parse_with_prometheus_clients_parser(tmp_path: Path) -> None:
    path = tmp_path / "occupancy.prom"
    assert run(tmp_path, "--metrics", str(path)).exit_code == Exit.OK
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(path.read_text())
        for s in family.samples
    }
    assert samples[("topograph_slurm_occupancy_stranded_gpus", (("partition", ""),))] == 20
    assert samples[("topograph_slurm_occupancy_stranded_gpus", (("partition", "gpu"),))] == 30
    unit = (("level", "domain"), ("unit", "b2"))
    assert samples[("topograph_slurm_occupancy_unit_stranded_gpus", unit)] == 8
    assert (
        samples[("topograph_slurm_occupancy_unit_gpus", (*unit[:1], ("state", "down"), unit[1]))]
        == 4
    )
    assert samples[("topograph_slurm_occupancy_spread_jobs", (("partition", ""),))] == 1


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("occupancy.txt", "must end in .prom"),
        ("metrics/", "must name a file, not a directory"),
        ("/", "must name a file, not a directory"),
    ],
)
def test_metrics_takes_generates_rule_and_writes_nothing_else(
    tmp_path: Path, name: str, why: str
) -> None:
    """``--metrics x.txt`` was accepted where generate requires .prom (node_exporter reads
    only those), and ``--metrics DIR/`` made a file named DIR."""
    path = name if name == "/" else f"{tmp_path}/{name}"
    result = run(tmp_path, "--metrics", path)
    assert result.exit_code == Exit.USAGE, result.output
    assert why in result.stderr and result.stdout == ""
    assert not (tmp_path / "metrics").exists() and not (tmp_path / "occupancy.txt").exists()


def test_metrics_unchanged_are_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "occupancy.prom"
    assert run(tmp_path, "--metrics", str(path)).exit_code == Exit.OK
    before = path.stat()
    assert run(tmp_path, "--metrics", str(path)).exit_code == Exit.OK
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize(
    ("node_list", "job_list"),
    [
        ([{"gres": "gpu:4"}], None),
        ([1, 2], None),
        (None, [1, 2]),
        (None, [{"job_state": ["RUNNING"]}]),
        (None, [job(1, "RUNNING", node_count=-3)]),
    ],
)
def test_a_wrong_shape_is_one_input_error_and_nothing_written(
    tmp_path: Path, node_list: object, job_list: object
) -> None:
    path = tmp_path / "occupancy.prom"
    result = run(tmp_path, "--metrics", str(path), node_list=node_list, job_list=job_list)
    assert result.exit_code == Exit.INPUT, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "unexpected `scontrol show" in lines[0], result.output
    assert not path.exists()


def test_bytes_that_are_not_utf8_are_replaced_not_a_crash(tmp_path: Path) -> None:
    """Slurm copies a drain reason's bytes into its JSON unchanged (exit 70 once): a reason
    holding 0xff reads as U+FFFD and the counts are those of the clean answer."""
    clean = occupancy(tmp_path / "clean")
    raw = json.dumps({"nodes": nodes()}).encode().replace(b'{"name"', b'{"reason": "m\xff", "name"')
    assert raw.count(b"\xff") == 12
    answers = {
        "show nodes --json": Answer(raw),
        "show jobs --json": Answer(json.dumps({"jobs": jobs()})),
    }
    scontrol = ReplayScontrol(tmp_path / "bin", answers)
    config = tmp_path / "c.yaml"
    config.write_text(f"scontrol: {scontrol.path}\n")
    topology = tmp_path / "topology.conf"
    topology.write_text(TOPOLOGY)
    argv = ["--config", str(config), "occupancy", "--topology", str(topology), "--json"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == Exit.OK, result.output
    assert json.loads(result.stdout)["fabric"] == clean["fabric"]


def test_draw_occupancy_colours_each_node_by_its_state(tmp_path: Path) -> None:
    """b0: node01 busy (job 100), node02 mixed (job 101), node03-04 free (b0 is not
    stranded); b1 and b2 stranded but for job 100's node05 and node09; node12 down."""
    import re

    result = run(tmp_path, "--occupancy", command="draw")
    assert result.exit_code == Exit.OK, result.output
    drawn = re.findall(r'class="node occ-(\w+)[^"]*"[^>]*data-key="(\w+)"', result.stdout)
    found = {name: state for state, name in drawn}
    assert found == {
        "node01": "busy", "node02": "mixed", "node03": "free", "node04": "free",
        "node05": "busy", "node06": "stranded", "node07": "stranded", "node08": "stranded",
        "node09": "busy", "node10": "stranded", "node11": "stranded", "node12": "down",
    }  # fmt: skip
    assert "TP group or segment can use (5)" in result.stdout  # the legend, with its count


def test_draw_occupancy_is_for_the_fabric_view_only(tmp_path: Path) -> None:
    result = run(tmp_path, "--occupancy", "--nodes", "node01", command="draw")
    assert result.exit_code == Exit.USAGE, result.output
    assert "--occupancy colours the fabric view" in result.output


def test_a_unit_counts_only_for_pending_jobs_of_its_partitions(tmp_path: Path) -> None:
    """Only ``debug`` (node01-04, b0) has a queue: job 202 wants 8 GPUs on one node, which no
    node of b0 has free. b1 and b2 are only in ``gpu``, where nothing pends: no pending job
    may use them, so they are not stranded, over the fabric as in every partition."""
    queue = [*jobs()[:2], job(202, "PENDING", partition="debug", tres_per_node="gres/gpu:8")]
    data = occupancy(tmp_path, job_list=queue)
    units = {u["name"]: u["stranded"] for u in data["fabric"]["units"]}
    assert units == {"b0": 10, "b1": 0, "b2": 0}
    assert data["fabric"]["stranded"] == 10
    assert (data["partitions"]["gpu"]["stranded"], data["partitions"]["debug"]["stranded"]) == (
        0,
        10,
    )


def test_nodes_the_topology_does_not_place_are_counted_in_the_metrics(tmp_path: Path) -> None:
    """node13 is Slurm's but in no block: listed, and its count is a metric to alert on."""
    path = tmp_path / "occupancy.prom"
    result = run(tmp_path, "--metrics", str(path), node_list=[*nodes(), node(13)])
    assert result.exit_code == Exit.OK, result.output
    assert "Not in the topology: node13" in result.stdout
    assert 'topograph_slurm_occupancy_unplaced_nodes{partition=""} 1' in path.read_text()


@pytest.mark.parametrize(
    ("topology", "fragment"),
    [
        ('{"weight": [[90, 132, 40, 61]]}', "places none of Slurm's 12 nodes"),
        ("BlockName=b0 Nodes=gpu[01-04]\nBlockSizes=4\n", "places none of Slurm's 12 nodes"),
    ],
    ids=["expert-load-json", "other-names"],
)
def test_a_topology_that_places_no_slurm_node_is_refused(
    tmp_path: Path, topology: str, fragment: str
) -> None:
    """Not one unit ``fabric`` with "stranded 0": the worst answer for a timer that alerts."""
    path = tmp_path / "occupancy.prom"
    other = tmp_path / "other.conf"
    other.write_text(topology)
    result = run(tmp_path, "--metrics", str(path))  # writes the good topology file first
    assert result.exit_code == Exit.OK
    path.unlink()
    answers_dir = tmp_path / "bin"
    assert answers_dir.exists()
    result = CliRunner().invoke(
        main,
        ["--config", str(tmp_path / "c.yaml"), "occupancy", "--topology", str(other),
         "--metrics", str(path)],
    )  # fmt: skip
    assert result.exit_code == Exit.INPUT, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and str(other) in lines[0]
    assert not path.exists() and result.stdout == ""


def test_a_fabric_source_whose_names_are_not_slurms_is_refused(tmp_path: Path) -> None:
    run(tmp_path)  # the stand-in scontrol and its config
    result = CliRunner().invoke(
        main,
        ["--config", str(tmp_path / "c.yaml"), "occupancy", "--sim", "nodes=12,gpus=4,su=4"],
    )
    assert result.exit_code == Exit.INPUT, result.output
    assert "places none of Slurm's 12 nodes" in result.stderr


@pytest.mark.parametrize(
    "name", ["x\x1b[2J\ny", "a b", "node01\u202e"], ids=["escape", "space", "rtl"]
)
def test_a_hostile_node_name_from_slurm_is_refused_before_anything_is_written(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / "occupancy.prom"
    hostile = [*nodes(), node(13) | {"name": name}]
    result = run(tmp_path, "--metrics", str(path), node_list=hostile)
    assert result.exit_code == Exit.INPUT, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "invalid node name" in lines[0] and "\x1b" not in lines[0]
    assert not path.exists() and result.stdout == ""
