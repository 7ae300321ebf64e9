"""Collection from 1 node vs N nodes on the real Slurm test cluster: parallel, not serial.

Starts a test cluster (default 32 nodes, Slurm 24.11), gives every node the fake
``nvidia-smi`` of the integration test, and times ``collect --via srun`` (the real code path:
one srun per node, ``--fanout`` at a time) for 1 node and for all N nodes, several rounds each.
A serial collector would take about N times as long for N nodes; the ratio printed at the end
is what the fan-out buys. Both srun modes are timed (``batch``: one multi-node srun;
``per-node``: one srun per node, ``--fanout`` at a time), plus one serial run (fanout 1).
The test image has no Python, so collection runs on the host and a
``srun`` shim execs the controller container's real srun (``docker exec`` adds a fixed cost
per srun, which a real head node does not pay).

Usage: python benchmarks/bench_collect.py [--version 24.11|26.05] [--nodes 32] [--rounds 3]
       [--fanout 32] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "slurm-test-cluster"), str(ROOT / "tests" / "integration")]

import harness  # noqa: E402
from ClusterShell.NodeSet import NodeSet  # noqa: E402

from tests.integration import test_nvlink_collect as scenario  # noqa: E402
from topograph_slurm.collect import collect  # noqa: E402
from topograph_slurm.collect.plan import DEFAULT_COMMANDS, CollectPlan  # noqa: E402


def _nodes(count: int) -> list[str]:
    return [f"node{i:02d}" for i in range(1, count + 1)]


def _time_collect(
    nodes: list[str], fanout: int, work: Path, round_no: int, mode: str = "batch"
) -> float:
    plan = CollectPlan(nodes=nodes, via="srun", timeout=60, fanout=fanout, srun_mode=mode)
    start = time.perf_counter()
    snap = work / f"snap-{mode}-{len(nodes)}-{round_no}"
    outcome = collect(plan, snap)
    elapsed = time.perf_counter() - start
    if outcome.failed_nodes:
        raise SystemExit(f"collection failed on {outcome.failed_nodes}")
    return elapsed


def _time_srun_true(nodes: list[str]) -> float:
    """The floor: a bare ``srun … true`` over the same nodes through the same shim."""
    argv = ["srun", f"--nodes={len(nodes)}", "--ntasks-per-node=1"]
    argv += [f"--nodelist={NodeSet.fromlist(nodes)}", "--quiet", "true"]
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - start


def run(version: str, count: int, rounds: int, fanout: int) -> dict[str, object]:
    nodes = _nodes(count)
    scenario.NODES[:] = nodes  # the scenario's fake nvidia-smi knows the node list
    spec = harness.ClusterSpec(nodes=[harness.NodeSpec(n, cpus=4, gpus=4) for n in nodes])
    image = harness.ensure_image(version)
    with harness.Cluster(spec, image) as cluster, tempfile.TemporaryDirectory() as tmp:
        cluster.wait_idle(timeout=180)
        scenario.install_fakes(cluster)
        work = Path(tmp)
        env = scenario.srun_shim(work, cluster)
        import os

        os.environ["PATH"] = env["PATH"]
        os.environ.pop("SLURM_JOB_ID", None)
        _time_collect(nodes[:1], fanout, work, -1)  # warm-up: munge, first srun
        one = [_time_collect(nodes[:1], fanout, work, r) for r in range(rounds)]
        many = [_time_collect(nodes, fanout, work, r) for r in range(rounds)]
        per_node = [_time_collect(nodes, fanout, work, r, "per-node") for r in range(rounds)]
        serial = _time_collect(nodes, 1, work, 0, "per-node")
        floor1 = statistics.median(_time_srun_true(nodes[:1]) for _ in range(rounds))
        floorn = statistics.median(_time_srun_true(nodes) for _ in range(rounds))
    t1, tn = statistics.median(one), statistics.median(many)
    return {
        "slurm": version,
        "nodes": count,
        "fanout": fanout,
        "rounds": rounds,
        "commands_per_node": len(DEFAULT_COMMANDS),
        "one_node_s": round(t1, 3),
        "all_nodes_s": round(tn, 3),
        "ratio": round(tn / t1, 2),
        "serial_estimate_s": round(t1 * count, 1),
        "per_node_mode_s": round(statistics.median(per_node), 3),
        "per_node_mode_ratio": round(statistics.median(per_node) / t1, 2),
        "serial_measured_s": round(serial, 2),
        "bare_srun_true_1_s": round(floor1, 3),
        "bare_srun_true_all_s": round(floorn, 3),
        "one_node_rounds_s": [round(x, 3) for x in one],
        "all_nodes_rounds_s": [round(x, 3) for x in many],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="24.11", choices=sorted(harness.VERSIONS))
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fanout", type=int, default=32)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.version, args.nodes, args.rounds, args.fanout)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"Slurm {result['slurm']}: collect --via srun ({result['commands_per_node']} commands "
        f"per node, fanout {result['fanout']}, median of {result['rounds']})\n"
        f"  1 node:   {result['one_node_s']:.2f} s\n"
        f"  {result['nodes']} nodes: {result['all_nodes_s']:.2f} s\n"
        f"  ratio {result['ratio']}x (serial would be ~{result['serial_estimate_s']} s, "
        f"{result['nodes']}x)\n"
        f"  --srun-mode per-node, fanout {result['fanout']}: {result['per_node_mode_s']:.2f} s "
        f"(ratio {result['per_node_mode_ratio']}x); fanout 1 (serial): "
        f"{result['serial_measured_s']:.2f} s\n"
        f"  floor, bare `srun true`: 1 node {result['bare_srun_true_1_s']:.2f} s, "
        f"{result['nodes']} nodes {result['bare_srun_true_all_s']:.2f} s"
    )


if __name__ == "__main__":
    main()
