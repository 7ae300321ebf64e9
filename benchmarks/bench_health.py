"""What ``health`` adds to a fabric's analysis at scale: verdicts, labels, the plan against
Slurm's node states and the rendered ``scontrol update`` lines.

A simulated 16,384-node × 8-rail fabric with ``degraded`` slow node cables is parsed and
analysed (the degraded links also build the nodes-behind map); then, in the same run, the
health stages over Slurm node states of every node (as ``scontrol show nodes --json`` gives
them, parsed from JSON): once with nothing held yet (every node changes) and once with every
verdict already held (nothing changes). Ratios are to the analysis of the same run.

Usage: python benchmarks/bench_health.py [--nodes N] [--degraded N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jinja2

from topograph_slurm.analysis.fabric.analyse import analyse, ib_blocks
from topograph_slurm.analysis.fabric.naming import NamingPolicy
from topograph_slurm.analysis.health.proposal import HealthPolicy, plan
from topograph_slurm.analysis.health.verdict import judge, node_labels
from topograph_slurm.model.fabric import Fabric
from topograph_slurm.model.health import HealthPlan
from topograph_slurm.model.result import Analysis, BlockTopology
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.render.environment import environment
from topograph_slurm.render.health import render_commands
from topograph_slurm.slurm.nodes import parse_node_states
from topograph_slurm.sources.ibnetdiscover import parse_ibnetdiscover
from topograph_slurm.sources.sim import SimSpec, generate_ibnetdiscover

POLICY = HealthPolicy()


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def states(found: HealthPlan | None, names: list[str]) -> str:
    """``scontrol show nodes --json`` text: plain nodes, or each holding its planned values."""
    if found is None:
        nodes = [{"name": n, "weight": 1, "features": [], "state": ["IDLE"]} for n in names]
    else:
        nodes = [
            {
                "name": c.node,
                "weight": c.weight or c.was.weight,
                "features": list(c.features or c.was.features),
                "active_features": list(c.active_features or c.was.active_features),
                "state": ["IDLE", "DRAIN"] if c.drain_reason else ["IDLE"],
                "reason": c.drain_reason or "",
            }
            for c in found.changes
        ]
    return json.dumps({"nodes": nodes})


def health(
    analysis: Analysis, blocks: BlockTopology, text: str, env: jinja2.Environment
) -> tuple[HealthPlan, list[str]]:
    """What ``health`` does after the analysis: verdicts, labels, plan, command lines."""
    names = analysis.hosts.nodes
    verdicts, unused = judge([*analysis.findings, *blocks.findings], names)
    found = plan(verdicts, node_labels(analysis, blocks), parse_node_states(text), POLICY, unused)
    return found, render_commands(env, found)


def one_round(fabric: Fabric, env: jinja2.Environment) -> str:
    t_analyse, analysis = timed(lambda: analyse(fabric, NamingPolicy()))
    blocks = ib_blocks(analysis, SlurmVersion.parse("24.11"))
    names = analysis.hosts.nodes
    t_fresh, (fresh, commands) = timed(lambda: health(analysis, blocks, states(None, names), env))
    t_held, (held, _) = timed(lambda: health(analysis, blocks, states(fresh, names), env))
    return (
        f"{len(names)} nodes, {len(fresh.pending)} changing in {len(commands)} commands: "
        f"analyse {t_analyse:.2f} s; health, all changing {t_fresh:.2f} s "
        f"({t_fresh / t_analyse:.2f}x), all held {t_held:.2f} s ({t_held / t_analyse:.2f}x, "
        f"{len(held.pending)} changing)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=16_384)
    parser.add_argument("--degraded", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    spec = SimSpec(nodes=args.nodes, rails=8, su=32, tiers=3, degraded=args.degraded)
    fabric = parse_ibnetdiscover(generate_ibnetdiscover(spec), "sim")
    env = environment()
    for _ in range(args.rounds):
        print(one_round(fabric, env))


if __name__ == "__main__":
    main()
