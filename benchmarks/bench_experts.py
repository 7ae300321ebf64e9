"""Scale benchmark: ``experts`` for a DeepSeek-V3-sized model, 256 experts x 64 MoE layers.

    python benchmarks/bench_experts.py                 # both policies, best of 3
    python benchmarks/bench_experts.py --repeat 5

Per case, in one process: EPLB's plan (``analysis.experts.hierarchy.plan_experts``, the
estimate included) on seeded skewed loads (a Pareto draw per expert and layer), then the
JSON and text outputs rendered from it. The cases:

- hierarchical: 64 GPUs in 8 domains of 8 (EPLB's "node"), 8 groups, 320 slots (5 per GPU);
- global: 48 GPUs in 6 domains, 8 groups (8 does not divide by 6), 288 slots (6 per GPU);
- global-8k: 8,192 GPUs in 1,024 servers of 8, 8 groups, 8,192 slots (one per GPU);
- hierarchical-8k: 8,192 GPUs in 128 NVLink domains of 64, 128 groups, 16,384 slots.

The text is the default (estimates only); "text+gpu" is ``--per-gpu`` (each GPU's experts).
Times are CPU seconds of this process (steady on a shared machine).

The first implementation (tests/support/experts_oracle.py, the test oracle) plans once beside
it, as the "before". Best CPU time over ``--repeat`` rounds, the plan's peak Python allocation
(tracemalloc, a separate round, so its cost does not enter the time) and the process's peak RSS
at the end.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

EXPERTS, LAYERS = 256, 64
CASES = {  # gpus, domains, groups, slots
    "hierarchical": (64, 8, 8, 320),
    "global": (48, 6, 8, 288),
    "global-8k": (8192, 1024, 8, 8192),
    "hierarchical-8k": (8192, 128, 128, 16384),
}


def loads(seed: int = 1) -> list[list[int]]:
    rng = random.Random(seed)
    return [[int(1000 * rng.paretovariate(1.5)) for _ in range(EXPERTS)] for _ in range(LAYERS)]


def measure(case: str, repeat: int) -> dict[str, float]:
    from topograph_slurm.analysis.experts.hierarchy import plan_experts
    from topograph_slurm.model.experts import Gpu
    from topograph_slurm.render.environment import environment
    from topograph_slurm.render.experts import experts_data, render_experts

    gpus, domains, groups, slots = CASES[case]
    table = loads()
    gpu_domains = [g * domains // gpus for g in range(gpus)]
    ranks = [Gpu(g, f"gpu{g // 8 + 1:04d}", g % 8, f"d{gpu_domains[g]}") for g in range(gpus)]
    env = environment(None)
    best = dict.fromkeys(("plan", "json", "text", "text+gpu"), float("inf"))
    made = ("node", "bench", "")
    for _ in range(repeat):
        start = time.process_time()
        plan = plan_experts(table, slots, groups, gpu_domains)
        planned = time.process_time()
        # EPLB's JSON pads every expert's slot list to the most copies any expert got: at
        # 8,192 slots a hot expert holds thousands, and the file is ~1 GB (measured apart).
        big = gpus > 1024
        as_json = "" if big else render_experts(env, experts_data(plan, ranks, *made), "json")
        rendered = time.process_time()
        as_text = render_experts(env, experts_data(plan, ranks, *made, "text"), "text")
        texted = time.process_time()
        per_gpu = experts_data(plan, ranks, *made, "text", per_gpu_text=True)
        render_experts(env, per_gpu, "text")
        done = time.process_time()
        best["plan"] = min(best["plan"], planned - start)
        best["json"] = min(best["json"], rendered - planned)
        best["text"] = min(best["text"], texted - rendered)
        best["text+gpu"] = min(best["text+gpu"], done - texted)
    assert plan.policy == case.removesuffix("-8k")
    from tests.support.experts_oracle import plan_experts as loop_by_loop

    start = time.process_time()
    loop_by_loop(table, slots, groups, gpu_domains)
    best["oracle"] = time.process_time() - start
    tracemalloc.start()
    plan_experts(table, slots, groups, gpu_domains)
    best["peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    best["json_kb"], best["text_kb"] = len(as_json) / 1024, len(as_text) / 1024
    best["json"] = float("nan") if gpus > 1024 else best["json"]
    best["balance_before"] = max(e.balance for e in plan.before)
    best["balance_after"] = max(e.balance for e in plan.after)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(
        "| case | plan | loop-by-loop plan (before) | JSON | text | text+gpu | plan peak alloc "
        "| JSON / text size "
        "| worst layer balance before -> after |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for case in CASES:
        r = measure(case, args.repeat)
        print(
            f"| {case} | {r['plan']:.2f} s | {r['oracle']:.2f} s | {r['json']:.2f} s "
            f"| {r['text']:.2f} s | {r['text+gpu']:.2f} s "
            f"| {r['peak_mb']:.1f} MB | {r['json_kb']:.0f} / {r['text_kb']:.0f} kB "
            f"| {r['balance_before']:.2f} -> {r['balance_after']:.2f} |"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of the process: {rss:.0f} MB")


if __name__ == "__main__":
    main()
