"""A job submitted with ``--pp-size``: the filter's record (``…,pp=2,replica=4,unit=replica``)
read back into the layout the job record, its exports and ``explain JOBID`` judge.

Held out from the code: the expected groups come from the Megatron-Core oracle of
test_megatron_layout (index tuples, not the project's stride arithmetic), the node of each rank
from Slurm's rank order (rank r on the job's node r // GPUs per node), the leaf of each node
from the record's own node table; every layout with PP > 1 and its PP = 1 twin.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support.scontrol import Answer, ReplayScontrol
from tests.unit.test_megatron_layout import completed, dense_sizes, oracle_groups
from topograph_slurm.cli.main import main
from topograph_slurm.model.job import TpRecord, parse_tp_record

SIM = "nodes=16,gpus=4,rails=2,su=4,tiers=2"  # four leaves of 4 nodes of 4 GPUs
GPN = 4
#: rank order interleaving the leaves, so groups cross leaves in ways that depend on PP
ORDER = [f"gpu{n:04d}" for n in (1, 5, 2, 6, 9, 13, 10, 14, 3, 7, 4, 8, 11, 15, 12, 16)]


def job_json(nodes: list[str], comment: str) -> str:
    job = {
        "job_id": 7,
        "job_state": ["RUNNING"],
        "nodes": ",".join(nodes),
        "job_resources": {
            "nodes": {"allocation": [{"index": i, "name": n} for i, n in enumerate(nodes)]}
        },
        "gres_detail": [f"gpu:{GPN}(IDX:0-{GPN - 1})"] * len(nodes),
        "admin_comment": comment,
    }
    return json.dumps({"jobs": [job]})


def record(tp: int, pp: int, nodes: int) -> str:
    """The record templates/topograph_tp.lua writes for --tp-size/--pp-size."""
    group = max(1, tp // GPN)
    replica = tp * pp // math.gcd(tp * pp, GPN)
    return (
        f"topograph:tp={tp},gpn={GPN},group={group},pp={pp},replica={replica},unit=replica,src=user"
    )


def setup(tmp_path: Path, nodes: list[str], comment: str) -> Path:
    scontrol = ReplayScontrol(
        tmp_path / "bin", {"show job --json 7": Answer(job_json(nodes, comment))}
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        f"scontrol: {scontrol.path}\nsim: {SIM!r}\nrecord_dir: {tmp_path / 'records'}\n"
    )
    return config


def run(config: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["--config", str(config), *args], env=env)


def test_the_pp_fields_of_the_filters_record_are_read() -> None:
    text = "x topograph:tp=8,gpn=4,group=2,pp=2,replica=4,unit=replica,segment=4,src=user"
    assert parse_tp_record(text) == TpRecord(8, 4, 2, 4, "user", pp=2, replica=4, unit="replica")
    older = parse_tp_record("topograph:tp=8,gpn=4,group=2,segment=2,src=user")
    assert older == TpRecord(8, 4, 2, 2, "user") and older.pp is None


@pytest.mark.parametrize("text", ["topograph:tp=8,gpn=4,group=2,pp=0,replica=4,src=user"])
def test_a_zero_pp_is_not_ours(text: str) -> None:
    assert parse_tp_record(text) is None


def oracle_crossings(kind: str, tp: int, pp: int, nodes: list[str], leaf: dict[str, str]) -> dict:
    world = len(nodes) * GPN
    order = completed("tp-cp-ep-dp-pp")
    groups = oracle_groups(order, dense_sizes(tp, 1, pp, world), kind)
    node_of = [nodes[r // GPN] for r in range(world)]
    return {
        "node": sum(len({node_of[r] for r in g}) > 1 for g in groups),
        "leaf": sum(len({leaf[node_of[r]] for r in g}) > 1 for g in groups),
    }


#: (tp, pp, node count): every one a layout the filter accepts (TP divides a node's GPUs or is
#: a multiple of them; the world a whole number of replicas)
LAYOUTS = [
    (tp, pp, n)
    for tp in (1, 2, 4, 8, 16)
    for pp in (2, 4)
    for n in (4, 8, 16)
    if (n * GPN) % (tp * pp) == 0 and n * GPN >= tp * pp
]


@pytest.mark.parametrize(("tp", "pp", "count"), LAYOUTS)
def test_record_explain_and_export_follow_megatrons_groups(
    tmp_path: Path, tp: int, pp: int, count: int
) -> None:
    nodes = ORDER[:count]
    config = setup(tmp_path, nodes, record(tp, pp, count))
    assert run(config, "record", "start", "7").exit_code == 0
    data = json.loads((tmp_path / "records" / "job-7.json").read_text())
    assert data["layout"] == {"tp": tp, "pp": pp, "gpus_per_node": GPN, "source": "admin-comment"}
    leaf = {entry["node"]: entry["leaf"] for entry in data["nodes"]}
    for kind in ("dp", "pp"):
        want = oracle_crossings(kind, tp, pp, nodes, leaf)
        got = data["crossings"].get(kind, {"node": 0, "leaf": 0})
        assert {lvl: got[lvl] for lvl in want} == want, (kind, data["crossings"])
    task = run(config, "record", "task", env={"SLURM_JOB_ID": "7", "SLURMD_NODENAME": nodes[0]})
    assert f"TOPOGRAPH_LAYOUT=tp={tp},pp={pp},gpn={GPN},src=admin-comment" in task.stdout
    explained = run(config, "explain", "7", "--json")
    assert explained.exit_code in (0, 1), explained.output
    layout = json.loads(explained.stdout)["layout"]
    world = count * GPN
    assert (layout["tp"], layout["pp"], layout["dp"]) == (tp, pp, world // (tp * pp))


def test_an_explicit_pp_flag_overrides_the_record(tmp_path: Path) -> None:
    config = setup(tmp_path, ORDER[:4], record(4, 2, 4))
    explained = run(config, "explain", "7", "--json", "--pp", "1")
    assert json.loads(explained.stdout)["layout"]["pp"] == 1
