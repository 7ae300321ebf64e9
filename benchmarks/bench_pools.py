"""``pools`` at scale: a 16,384-node × 8-rail simulated fabric with slow node cables, every node
of it one job, split into prefill and decode instances.

Reading the fabric (sim + parse + analyse + the view's places and path facts) is timed apart
from the placement (``analysis/pools/place.place``) and the rendering (text, JSON, ``--out``'s
files), each over the same view; peak RSS is the process's. The ratio is the placement's to
reading the fabric of the same run.

Usage: python benchmarks/bench_pools.py [--nodes N] [--degraded N] [--prefill NxTP]
       [--decode NxTP] [--rounds N]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from topograph_slurm.analysis.pools.place import place
from topograph_slurm.app.fabric import read_fabric
from topograph_slurm.app.view import from_fabric
from topograph_slurm.config import Settings
from topograph_slurm.model.pools import Deployment, PoolSize, parse_size
from topograph_slurm.render.environment import environment
from topograph_slurm.render.pools import pools_files, render_pools


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def size(text: str) -> PoolSize:
    count, tp = parse_size(text, "size")
    return PoolSize(count or 1, tp)


def one_round(settings: Settings, deployment: Deployment, env: Any) -> str:
    """Read the fabric, place every node of it, render: the times and what came out."""
    read, view = timed(lambda: from_fabric(read_fabric(settings, print), settings))
    nodes = sorted(view.fmap.places)
    placed, plan = timed(lambda: place(deployment, nodes, 8, view.fmap, view.facts))
    text, _ = timed(lambda: render_pools(env, plan, "text"))
    as_json, _ = timed(lambda: render_pools(env, plan, "json"))
    files, out = timed(lambda: pools_files(env, plan))
    unmet = sum(1 for instance in plan.instances if instance.unmet)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return (
        f"read {read:.2f} s, place {placed:.2f} s ({placed / read:.2f}x the read), "
        f"text {text:.2f} s, json {as_json:.2f} s, --out-dir {files:.2f} s ({len(out)} files); "
        f"{len(plan.instances)} instances, {unmet} with something not met, "
        f"{len(plan.unused)} nodes unused; peak RSS {rss:.0f} MB"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=16384)
    parser.add_argument("--degraded", type=int, default=256)
    parser.add_argument("--prefill", default="8192x8", help="NxTP (default: half the nodes)")
    parser.add_argument("--decode", default="4096x16", help="NxTP (default: the other half)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    spec = f"nodes={args.nodes},su=32,tiers=3,degraded={args.degraded}"
    settings = Settings(sim=spec)
    deployment = Deployment(size(args.prefill), size(args.decode))
    env = environment(None)
    print(f"fabric {spec}; {deployment.text()}")
    for round_ in range(1, args.rounds + 1):
        print(f"round {round_}: {one_round(settings, deployment, env)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
