"""What the unattended run's operations cost: the ``auto`` defaults and ``--reconfigure``.

1. ``auto`` without Slurm: ``generate --sim demo`` as a process, with the defaults (``scontrol``
   and ``sinfo`` looked for, not found) against ``--slurm-nodes all --slurm-version 24.11``
   (nothing asked), interleaved, several rounds; the medians and their ratio.
2. ``--reconfigure`` on the real test cluster (``--cluster 24.11`` and/or ``26.05``): the
   4-node scenario of tests/integration/test_reconfigure.py, timing a changed run (write,
   ``scontrol reconfigure``, ``scontrol show topology`` compared) against an unchanged one
   (no reconfigure) and a bare ``scontrol reconfigure`` in the controller. The shims pay a
   ``docker exec`` per scontrol call that a controller host does not.

Usage: python benchmarks/bench_ops.py [--rounds 15] [--cluster 24.11,26.05] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "slurm-test-cluster"), str(ROOT / "tests" / "integration")]

DEMO = [sys.executable, "-m", "topograph_slurm", "--config", os.devnull, "generate", "--sim"]
PINNED = ["--slurm-nodes", "all", "--slurm-version", "24.11"]


def _seconds(argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def auto_cost(rounds: int) -> dict[str, float]:
    """Median seconds of a demo generate with the auto defaults and pinned, and the ratio."""
    with tempfile.TemporaryDirectory() as empty:
        bare = {**os.environ, "PATH": f"{empty}{os.pathsep}{Path(sys.executable).parent}"}
        auto, pinned = [], []
        for _ in range(rounds):
            auto.append(_seconds([*DEMO, "demo"], bare))
            pinned.append(_seconds([*DEMO, "demo", *PINNED], bare))
    a, p = statistics.median(auto), statistics.median(pinned)
    return {"auto_s": round(a, 3), "pinned_s": round(p, 3), "ratio": round(a / p, 3)}


def reconfigure_cost(version: str, rounds: int) -> dict[str, Any]:
    """Seconds of a changed and an unchanged ``generate --reconfigure`` on real Slurm."""
    import harness
    from test_reconfigure import NODES, START, shims

    spec = harness.ClusterSpec(
        nodes=[harness.NodeSpec(name, 4, 0) for name in NODES],
        topology_plugin="topology/tree",
        topology_conf=START,
        slurmctld_daemon=True,
    )
    with harness.Cluster(spec, harness.ensure_image(version), version=version) as cluster:
        cluster.wait_idle()
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            conf, log = tmp / "topology.conf", tmp / "slurmctld.log"
            (tmp / "config.yaml").write_text(f"slurmctld_log: {log}\n")
            env = {**shims(tmp, cluster, conf, log), "PYTHONPATH": str(ROOT)}
            run = [sys.executable, "-m", "topograph_slurm", "--config", str(tmp / "config.yaml")]
            run += ["generate", "-o", str(conf), "--reconfigure", "--sim"]
            changed, unchanged, bare = [], [], []
            for _ in range(rounds):
                conf.write_text(START)
                changed.append(_seconds([*run, "nodes=6,rails=1,su=2,tiers=2"], env))
                unchanged.append(_seconds([*run, "nodes=6,rails=1,su=2,tiers=2"], env))
                start = time.perf_counter()
                cluster.exec(["scontrol", "reconfigure"]).check("scontrol reconfigure")
                bare.append(time.perf_counter() - start)
    return {
        "version": version,
        "changed_s": round(statistics.median(changed), 3),
        "unchanged_s": round(statistics.median(unchanged), 3),
        "bare_reconfigure_s": round(statistics.median(bare), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--cluster", default="", help="Slurm versions, e.g. 24.11,26.05")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"auto": auto_cost(args.rounds)}
    versions = [v for v in args.cluster.split(",") if v]
    results["reconfigure"] = [reconfigure_cost(v, max(3, args.rounds // 3)) for v in versions]
    print(json.dumps(results, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
