"""Scale benchmark: plan the per-level communication benchmarks of a simulated fabric.

    python benchmarks/bench_plan.py                       # 2,048 and 16,384 nodes x 8 rails
    python benchmarks/bench_plan.py --nodes 16384 --repeat 3

Per size, in one process: reading the fabric as ``bench`` does (simulate, parse, analyse:
``fabric_view.from_fabric``, the yardstick every fabric command pays), then the planner
(``topology.bench_plan.plan``: pairs per level and rounds), then the printed plan (the text
template). The table gives the best time of each over ``--repeat`` rounds and the planner's
ratio to reading the fabric in the same run, with the plan's size (runs, rounds).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def spec(nodes: int) -> str:
    tiers = 3 if nodes > 1024 else 2
    return f"nodes={nodes},gpus=8,rails=8,su=32,tiers={tiers}"


def measure(nodes: int, repeat: int) -> dict[str, float]:
    from topograph_slurm.analysis.bench.plan import plan
    from topograph_slurm.app.view import from_fabric
    from topograph_slurm.config import Settings
    from topograph_slurm.render.bench import render_plan
    from topograph_slurm.render.environment import environment

    best = {"fabric": float("inf"), "plan": float("inf"), "text": float("inf")}
    size = (0, 0)
    for _ in range(repeat):
        start = time.perf_counter()
        view = from_fabric(Settings(sim=spec(nodes)), lambda message: None)
        mid = time.perf_counter()
        bench = plan(view.fmap, list(view.fmap.places), 8)
        end = time.perf_counter()
        render_plan(environment(None), bench, [], "text")
        done = time.perf_counter()
        best["fabric"] = min(best["fabric"], mid - start)
        best["plan"] = min(best["plan"], end - mid)
        best["text"] = min(best["text"], done - end)
        size = (len(bench.runs), bench.rounds)
    return {**best, "runs": size[0], "rounds": size[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, action="append")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| nodes | fabric (sim+parse+analyse) | plan | plan / fabric | text | runs | rounds |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for nodes in args.nodes or [2048, 16384]:
        m = measure(nodes, args.repeat)
        print(
            f"| {nodes:,} | {m['fabric']:.2f} s | {m['plan']:.2f} s | "
            f"{m['plan'] / m['fabric']:.2f}x | {m['text']:.2f} s | {m['runs']:,} | "
            f"{m['rounds']:,} |"
        )


if __name__ == "__main__":
    main()
