"""`explain` and `order` against jobs real Slurm placed, both versions.

16 nodes with 2 GPUs each in four 4-node blocks, two nodes busy in every block: a 4-node job
with ``--segment=2`` runs as 2+2 nodes in two blocks (the placement smoke test's setup). Then:
``explain`` counts exactly the TP groups its node list puts across blocks; ``order``'s
SLURM_HOSTFILE, used by a real ``srun --distribution=arbitrary`` step inside the job, puts every
rank on the node it promised.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from harness import Cluster, ClusterSpec, NodeSpec

from topograph_slurm.cli.main import main

pytestmark = pytest.mark.integration

BLOCK_SIZE, BLOCKS, GPUS = 4, 4, 2
SLEEP = "--wrap 'sleep 600'"


def node(i: int) -> str:
    return f"node{i:02d}"


BLOCK_OF = {node(b * BLOCK_SIZE + k): f"b{b}" for b in range(BLOCKS) for k in range(1, 5)}


def topology_conf() -> str:
    lines = [
        f"BlockName=b{b} Nodes={','.join(node(b * BLOCK_SIZE + k) for k in range(1, 5))}"
        for b in range(BLOCKS)
    ]
    return "\n".join([*lines, f"BlockSizes={BLOCK_SIZE}"]) + "\n"


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--config", os.devnull, *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def split_job(
    make_module_cluster: Callable[..., Cluster], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Cluster, str, list[str], Path]:
    """A running 4-node job placed 2+2 across two blocks; the cluster's topology.conf. One per
    Slurm version for the module: the tests only read the placement (a step runs alongside)."""
    conf = topology_conf()
    nodes = [NodeSpec(node(i), cpus=4, gpus=GPUS) for i in range(1, BLOCK_SIZE * BLOCKS + 1)]
    spec = ClusterSpec(nodes=nodes, topology_plugin="topology/block", topology_conf=conf)
    cluster = make_module_cluster(spec)
    for b in range(BLOCKS):
        for k in (1, 2):
            busy = node(b * BLOCK_SIZE + k)
            cluster.wait_job(cluster.sbatch(f"--exclusive -N 1 -w {busy} {SLEEP}"))
    job = cluster.sbatch(f"--exclusive -N 4 --segment=2 --gres=gpu:{GPUS} {SLEEP}")
    placed = cluster.wait_job(job).nodes
    assert len(placed) == 4 and len({BLOCK_OF[n] for n in placed}) == 2, placed
    path = tmp_path_factory.mktemp("split-job") / "topology.conf"
    path.write_text(conf)
    return cluster, job, placed, path


def expected_crossing(order: list[str], nodes_per_group: int) -> int:
    groups = [order[i : i + nodes_per_group] for i in range(0, len(order), nodes_per_group)]
    return sum(len({BLOCK_OF[n] for n in group}) > 1 for group in groups)


def test_explain_counts_what_the_node_list_implies(
    split_job: tuple[Cluster, str, list[str], Path],
) -> None:
    _, _, placed, conf = split_job
    hostlist = ",".join(placed)
    for tp, per_group in ((4, 2), (8, 4)):
        code, out, err = cli(
            "explain", "--topology", str(conf), "--nodes", hostlist,
            "--gpus-per-node", str(GPUS), "--tp", str(tp), "--json",
        )  # fmt: skip
        data = json.loads(out)
        crossing = data["kinds"]["tp"]["crossing"]["domain"]
        assert crossing == expected_crossing(sorted(placed), per_group), (tp, placed, data)
        assert code == (0 if crossing == 0 else 1), err
    # tp=8 needs 4 nodes, which this job has in no block: one group crosses, as it must
    assert expected_crossing(sorted(placed), 4) == 1


def test_an_order_hostfile_puts_every_rank_where_promised(
    split_job: tuple[Cluster, str, list[str], Path],
) -> None:
    cluster, job, placed, conf = split_job
    interleaved = sorted(placed, key=lambda n: (sorted(placed).index(n) % 2, n))
    code, out, err = cli(
        "order", "--topology", str(conf), "--nodes", ",".join(interleaved),
        "--gpus-per-node", str(GPUS), "--tp", "4", "--format", "slurm-hostfile",
    )  # fmt: skip
    assert code == 0, err
    tasks = out.split()
    ordered = list(dict.fromkeys(tasks))
    assert expected_crossing(ordered, 2) == 0
    cluster.put_file(None, "/tmp/hosts", out)
    step = cluster.exec(
        f"SLURM_HOSTFILE=/tmp/hosts srun --jobid={job} --overlap --distribution=arbitrary "
        f"-n {len(tasks)} bash -c 'echo $SLURM_PROCID $SLURMD_NODENAME'",
        timeout=60,
    )
    assert step.rc == 0, step.stderr
    ranks = dict(line.split() for line in step.stdout.splitlines() if line.strip())
    assert {int(rank): host for rank, host in ranks.items()} == dict(enumerate(tasks))


def test_a_task_per_line_hostfile_is_explained_as_srun_lays_its_ranks(
    split_job: tuple[Cluster, str, list[str], Path],
) -> None:
    """A SLURM_HOSTFILE alternating the job's nodes of two blocks: real srun puts rank r on
    line r's node, and explain counts the TP groups of that very placement (not the folded
    node list, which would keep TP inside one node)."""
    cluster, job, placed, conf = split_job
    first, other = placed[0], next(n for n in placed if BLOCK_OF[n] != BLOCK_OF[placed[0]])
    tasks = [first, other] * GPUS
    cluster.put_file(None, "/tmp/tasks", "".join(f"{t}\n" for t in tasks))
    step = cluster.exec(
        f"SLURM_HOSTFILE=/tmp/tasks srun --jobid={job} --overlap --distribution=arbitrary "
        f"-n {len(tasks)} bash -c 'echo $SLURM_PROCID $SLURMD_NODENAME'",
        timeout=60,
    )
    assert step.rc == 0, step.stderr
    ran = {int(r): h for r, h in (line.split() for line in step.stdout.splitlines() if line)}
    assert [ran[r] for r in range(len(tasks))] == tasks
    local = Path(conf).parent / "tasks"
    local.write_text("".join(f"{t}\n" for t in tasks))
    code, out, err = cli(
        "explain", "--topology", str(conf), "--hostfile", str(local), "--tp", str(GPUS), "--json",
    )  # fmt: skip
    data = json.loads(out)
    groups = [[ran[r] for r in range(g, g + GPUS)] for g in range(0, len(tasks), GPUS)]
    crossing = sum(len({BLOCK_OF[h] for h in group}) > 1 for group in groups)
    assert crossing == len(groups) == data["kinds"]["tp"]["crossing"]["domain"], data
    assert code == 1, err
    assert "one line per task" in data["ranks_from"]
