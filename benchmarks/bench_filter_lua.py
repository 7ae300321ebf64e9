"""Per-call cost of the generated job_submit.lua, under lupa's Lua 5.1 and 5.4.

slurmctld calls slurm_job_submit() once per submission while holding its job write lock, so
the filter's cost adds directly to every submit RPC. The loop runs inside Lua (as slurmctld's
C caller does) against the fake job_desc proxy of the unit tests, whose metamethods stand in for
Slurm's C getters/setters. The real-cluster comparison (sdiag submit-RPC times with and without
the filter) is the integration benchmark; this one isolates the Lua.

Usage: python benchmarks/bench_filter_lua.py [--calls N]
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.lua_fakes import RUNTIMES, LuaFilter, tp_env
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.render.filters import FilterFacts, PartitionFacts, render_filters

BENCH_LUA = r"""
function BENCH(spec, env, calls)
  local job_desc = FAKE.job_desc(spec, env, true)
  local start = os.clock()
  for _ = 1, calls do
    FAKE.reset()
    slurm_job_submit(job_desc, {}, 1000)
  end
  return os.clock() - start
end
"""

SCENARIOS: dict[str, tuple[dict[str, object], list[str]]] = {
    "no --tp-size": ({"partition": "gpu", "min_nodes": 8, "max_nodes": 8}, ["OTHER=1"]),
    "block accept": (
        {"partition": "gpu", "min_nodes": 8, "max_nodes": 8, "admin_comment": "x"},
        ["OTHER=1", tp_env("16")],
    ),
    "tree accept": ({"partition": "ib", "min_nodes": 8, "max_nodes": 8}, [tp_env("16")]),
    "reject": ({"partition": "gpu", "min_nodes": 6, "max_nodes": 6}, [tp_env("16")]),
}


def facts(partitions: int) -> FilterFacts:
    """A cluster with `partitions` partitions besides the two the scenarios use."""
    parts = [
        PartitionFacts("gpu", "block", 4, base_block=18),
        PartitionFacts("ib", "tree", 8, leaf_size=32),
    ]
    parts += [PartitionFacts(f"p{i:03d}", "block", 4, base_block=18) for i in range(partitions)]
    return FilterFacts(tuple(parts), SlurmVersion.parse("25.11.2"), default_partition="gpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=50)
    args = parser.parse_args()
    script = render_filters(facts(args.partitions))["job_submit.lua"]
    print(f"{'runtime':<12} {'scenario':<14} {'us/call':>9} {'calls/s':>11}")
    for runtime in RUNTIMES:
        try:
            importlib.import_module(runtime)
        except ImportError:
            print(f"{runtime:<12} not available")
            continue
        filt = LuaFilter(runtime, script)
        filt.lua.execute(BENCH_LUA)
        for name, (spec, env) in SCENARIOS.items():
            bench = filt.lua.globals().BENCH
            bench(filt.lua.table_from(spec), filt.lua.table_from(env), 1000)  # warm up
            seconds = bench(filt.lua.table_from(spec), filt.lua.table_from(env), args.calls)
            per_call = seconds / args.calls
            print(f"{runtime:<12} {name:<14} {per_call * 1e6:9.2f} {1 / per_call:11,.0f}")


if __name__ == "__main__":
    main()
