"""``topograph-slurm occupancy --apply`` on real Slurm (24.11 and 26.05): the Weights it sets
make Slurm put a small job into a partly used unit, not a whole free one, and ``--reset`` gives
every node its own Weight and features back (an admin's feature on node05 stays throughout).

12 nodes of 4 fake GPUs in three 4-node units (node01-04, node05-08, node09-12). A 1-GPU job
holds part of node05, so unit 1 is partly used. A small (1-GPU) job runs and is cancelled:
where plain Slurm put it; then ``occupancy --apply`` and the same job again.

Measured on 24.11 and 26.05, without a topology plugin (the units known to topograph only,
from a topology file: NVLink domains under a fabric Slurm does not model), with topology/block
and with topology/tree: plain Slurm puts the small job in a whole free unit though unit 1 had
room: node01 (no plugin: Weight, then node order; tree; block on 26.05) or node09 (block on
24.11: every block ties at 4 usable nodes, node05 counting as usable, and the tie goes to the
last, `bnc <= block_node_cnt` in eval_nodes_block()). With ``occupancy --apply`` (units 0
and 2 at Weight 101, unit 1 at 1) the job lands in unit 1: every plugin takes the lowest
Weight first.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Shims
from harness import Cluster, ClusterSpec, NodeSpec

pytestmark = pytest.mark.integration

GPUS, UNIT, UNITS = 4, 4, 3
SLEEP = "--wrap 'sleep 600'"
NODES = [f"node{i:02d}" for i in range(1, UNIT * UNITS + 1)]
MEMBERS = [NODES[u * UNIT : (u + 1) * UNIT] for u in range(UNITS)]
BLOCKS = "".join(f"BlockName=b{u} Nodes={','.join(m)}\n" for u, m in enumerate(MEMBERS))
TREE = "".join(f"SwitchName=s{u} Nodes={','.join(m)}\n" for u, m in enumerate(MEMBERS))
CONF = {
    "topology/block": BLOCKS + f"BlockSizes={UNIT}\n",
    "topology/tree": TREE + "SwitchName=spine Switches=s[0-2]\n",
    "none": BLOCKS + f"BlockSizes={UNIT}\n",  # topograph's units; slurmctld runs no plugin
}
SMALL = f"-N 1 -n 1 --gres=gpu:1 {SLEEP}"


def unit_of(node: str) -> int:
    return NODES.index(node) // UNIT


@pytest.mark.parametrize("plugin", sorted(CONF))
def test_applied_weights_put_a_small_job_into_the_partly_used_unit(
    make_cluster: Callable[..., Cluster],
    shims: Shims,
    slurm_version: str,
    plugin: str,
    tmp_path: Path,
) -> None:
    plugged = plugin != "none"
    spec = ClusterSpec(
        nodes=[NodeSpec(name, cpus=GPUS, gpus=GPUS) for name in NODES],
        topology_plugin=plugin if plugged else None,
        topology_conf=CONF[plugin] if plugged else None,
    )
    cluster = make_cluster(spec)
    env = shims(cluster, "scontrol")
    topology = [] if plugged else ["--topology", str(tmp_path / "units.conf")]
    (tmp_path / "units.conf").write_text(CONF[plugin])
    cluster.exec("scontrol update NodeName=node05 AvailableFeatures=admin ActiveFeatures=admin")
    cluster.wait_job(cluster.sbatch(f"-N 1 -n 1 -w node05 --gres=gpu:1 {SLEEP}"))

    def tool(*args: str, code: int = 0) -> str:
        argv = ["topograph-slurm", "occupancy", *topology, *args]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == code, done.stdout + done.stderr
        return done.stdout

    first = cluster.sbatch(SMALL)
    plain = cluster.wait_job(first).nodes
    cluster.exec(f"scancel {first}").check()
    cluster.wait_job(first, states=("CANCELLED", "COMPLETED"))
    deadline = time.monotonic() + 60
    while cluster.node_states()[plain[0]] != "idle" and time.monotonic() < deadline:
        time.sleep(1)

    dry = json.loads(tool("--keep-whole", "--json", code=1))["keep"]["commands"]
    assert len(dry) == 1, dry
    tool("--apply")
    weights = nodes_json(cluster)
    assert {n: w for n, (w, _) in weights.items()} == {
        n: 1 if unit_of(n) == 1 else 101 for n in NODES
    }, weights
    assert weights["node05"][1] == ["admin"] and weights["node01"][1] == ["topo_keep"], weights
    assert json.loads(tool("--keep-whole", "--json"))["keep"]["commands"] == []  # idempotent

    steered = cluster.wait_job(cluster.sbatch(SMALL)).nodes
    assert [unit_of(n) for n in steered] == [1], (plugin, plain, steered)
    # plain Slurm broke a whole free unit, though unit 1 had room
    assert [unit_of(n) for n in plain] in ([0], [2]), (plugin, plain)

    tool("--reset", "--apply")
    assert nodes_json(cluster) == {n: (1, ["admin"] if n == "node05" else []) for n in NODES}, (
        nodes_json(cluster)
    )


def nodes_json(cluster: Cluster) -> dict[str, tuple[int, list[str]]]:
    data = json.loads(cluster.exec("scontrol show nodes --json").check().stdout)
    return {
        node["name"]: (int(node["weight"]), sorted(node.get("features") or []))
        for node in data["nodes"]
    }
