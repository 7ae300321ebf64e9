"""``topograph-slurm health --apply`` on real Slurm (24.11 and 26.05).

Eight nodes named as a simulated fabric's hosts (``sources/sim``: 2 units of 4 nodes, 2
rails); the tool reads the real ibnetdiscover text of that fabric with two planted faults:
node0001's first cable trained down to 1x (``degraded=1``: degraded) and node0003's second
HCA unplugged (both cable ends removed: missing-rail, drain-worthy). node0001 carries an
admin's feature (bigmem) from slurm.conf. The page's two live examples (docs/health.md) run
as printed in the middle of it. topograph-slurm runs on the host; a ``scontrol`` shim on
PATH execs the controller container's real scontrol (only the transport is a shim).

1. The dry run prints the commands and exits 1; ``--apply`` sets Weight, features and drain
   exactly; a ``--constraint=topo_ok`` job of all six healthy nodes lands on them only.
2. A second ``--apply`` runs no command.
3. ``scontrol reconfigure`` and a slurmctld restart each drop Weight and features back to
   slurm.conf and keep the drain (as README says); the next ``--apply`` restores exactly the
   state before.
4. The fabric healed: ``--apply`` resumes our drain and restores the own weight and the
   health class; the admin's feature stays throughout.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import Shims
from harness import Cluster, ClusterSpec, NodeSpec

from tests.support.live_examples import assert_page_shows, run_here
from topograph_slurm.sources.sim import SimSpec, generate_ibnetdiscover

pytestmark = pytest.mark.integration

SIM = SimSpec(nodes=8, gpus=4, rails=2, su=4, tiers=2, prefix="node")
NODES = [SIM.node_name(i) for i in range(SIM.nodes)]
SLOW, UNPLUGGED = "node0001", "node0003"
HEALTHY = [n for n in NODES if n not in (SLOW, UNPLUGGED)]


def unplug(text: str, hca: str) -> str:
    """The dump without one HCA: its own block and the switch port line cabled to it."""
    blocks = [b for b in text.split("\n\n") if not ("\nCa\t" in "\n" + b and f'# "{hca}"' in b)]
    return "\n\n".join(
        "\n".join(line for line in b.split("\n") if f'"{hca}"' not in line) for b in blocks
    )


def nodes(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """Weight, features, drain flag and reason of every node, as scontrol shows them."""
    out = json.loads(cluster.exec(["scontrol", "show", "nodes", "--json"]).check().stdout)
    return {
        n["name"]: {
            "weight": n["weight"],
            "features": sorted(n["features"]),
            "active": sorted(n["active_features"]),
            "drain": "DRAIN" in n["state"],
            "reason": n["reason"],
        }
        for n in out["nodes"]
    }


def registered(cluster: Cluster, timeout: float = 90) -> None:
    """Wait until every slurmd registered again (a node is UNKNOWN until then)."""
    deadline = time.monotonic() + timeout
    while True:
        out = json.loads(cluster.exec(["scontrol", "show", "nodes", "--json"]).check().stdout)
        waiting = [
            n["name"] for n in out["nodes"] if {"UNKNOWN", "NOT_RESPONDING"} & set(n["state"])
        ]
        if not waiting:
            return
        assert time.monotonic() < deadline, f"{waiting} did not register again"
        time.sleep(1)


def test_health_apply_on_real_slurm(
    make_cluster: Callable[..., Cluster], slurm_version: str, tmp_path: Path, shims: Shims
) -> None:
    spec = ClusterSpec(
        nodes=[NodeSpec(n, cpus=2, features=("bigmem",) if n == SLOW else ()) for n in NODES]
    )
    cluster = make_cluster(spec)
    env = shims(cluster, "scontrol")
    faulty = tmp_path / "fabric.txt"
    faulty.write_text(
        unplug(generate_ibnetdiscover(replace(SIM, degraded=1)), f"{UNPLUGGED} mlx5_1")
    )
    healed = tmp_path / "healed.txt"
    healed.write_text(generate_ibnetdiscover(SIM))

    def health(fabric: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        argv = ["topograph-slurm", "health", "--ibnetdiscover", str(fabric)]
        return subprocess.run([*argv, *extra], env=env, capture_output=True, text=True, timeout=300)

    def terminal(line: str) -> str:
        """A docs/health.md line as the page ran it: the tool here, sinfo on the controller."""
        if not line.startswith("topograph-slurm"):
            return cluster.exec(f"{{ {line}\n}} 2>&1").stdout
        return run_here(tmp_path, env, line)

    # 1. dry run, then apply (then the page's example: the dry run, --apply, sinfo, again)
    dry = health(faulty)
    assert dry.returncode == 1, dry.stderr
    assert (
        f"scontrol update NodeName={UNPLUGGED} State=DRAIN Reason='topograph: missing-rail'"
        in dry.stdout
    )
    assert nodes(cluster)[SLOW]["weight"] == 1  # nothing changed yet
    if slurm_version == "24.11":  # the page's release: its example, as printed
        assert_page_shows("docs/health.md", 1, terminal)
    else:
        done = health(faulty, "--apply")
        assert done.returncode == 0, done.stderr
    state = nodes(cluster)
    leaf1, leaf2 = "topo_leaf_leaf-su001-r0", "topo_leaf_leaf-su002-r0"
    block1, block2 = "topo_block_leaf-su001-r0", "topo_block_leaf-su002-r0"
    assert state[SLOW]["weight"] == 1001
    assert state[SLOW]["features"] == sorted(["bigmem", "topo_degraded", leaf1, block1])
    assert state[SLOW]["active"] == state[SLOW]["features"]
    assert state[UNPLUGGED]["drain"] and state[UNPLUGGED]["reason"] == "topograph: missing-rail"
    assert state[UNPLUGGED]["weight"] == 1001
    assert "topo_drain" in state[UNPLUGGED]["features"]
    for node in HEALTHY:
        leaf, block = (leaf1, block1) if node <= "node0004" else (leaf2, block2)
        assert state[node] == {
            "weight": 1,
            "features": sorted(["topo_ok", leaf, block]),
            "active": sorted(["topo_ok", leaf, block]),
            "drain": False,
            "reason": "",
        }, node
    job = cluster.sbatch(f"-N {len(HEALTHY)} --constraint=topo_ok --wrap 'sleep 1'")
    assert cluster.wait_job(job, ("COMPLETED",)).nodes == HEALTHY

    # 2. nothing new: nothing run
    again = health(faulty, "--apply")
    assert again.returncode == 0 and "applied:" not in again.stderr, again.stderr
    assert health(faulty).returncode == 0

    # 3. what reconfigure and a restart keep, and --apply restoring the rest
    for lose in (
        lambda: cluster.exec(["scontrol", "reconfigure"]).check("reconfigure"),
        cluster.restart_slurmctld,
    ):
        lose()
        cluster.wait_controller()
        registered(cluster)
        lost = nodes(cluster)
        assert lost[SLOW]["weight"] == 1 and lost[SLOW]["features"] == ["bigmem"]
        assert lost[HEALTHY[0]]["features"] == []
        assert lost[UNPLUGGED]["drain"] and lost[UNPLUGGED]["reason"].startswith("topograph:")
        back = health(faulty, "--apply")
        assert back.returncode == 0, back.stderr
        assert "State=DRAIN" not in back.stderr  # the drain survived: not set again
        assert nodes(cluster) == state

    # 4. healed: our drain resumed, own weight and health class back, admin feature kept
    if slurm_version == "24.11":
        assert_page_shows("docs/health.md", 2, terminal)  # healed.txt --apply, then sinfo
    else:
        cured = health(healed, "--apply")
        assert cured.returncode == 0, cured.stderr
        assert f"NodeName={UNPLUGGED} State=RESUME" in cured.stderr
    final = nodes(cluster)
    assert final[SLOW]["weight"] == 1
    assert final[SLOW]["features"] == sorted(["bigmem", "topo_ok", leaf1, block1])
    assert not final[UNPLUGGED]["drain"] and final[UNPLUGGED]["weight"] == 1
    assert "topo_ok" in final[UNPLUGGED]["features"]
