"""pools' pairing held against brute force: on small fabrics, for the roles the plan gave its
nodes, no pairing keeps more KV paths inside each level (docs/pools.md rule 3, on healthy nodes:
the fewest KV paths across each level, the coarsest first). ``best`` tries every way of giving
the nodes their roles as well (used by the issue's repro and to measure the split, see
benchmarks/PERFORMANCE.md: the split itself is not proven best).

The oracle is written from the rules, not from the code: for nodes given their roles, the most
pairs one unit can keep inside is ``min(p, f·d + e)`` (p prefill instances, d decode instances
in it, f = ⌊P/D⌋, e ≤ d of the P mod D decodes that take one more); summed over a level's units
with the extras shared, ``min(Σ min(p, f·d) + (P mod D), Σ min(p, (f+1)·d))``.
"""

from __future__ import annotations

import itertools
import json
import os

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from topograph_slurm.analysis.placement.span import fabric_map, unit_of
from topograph_slurm.analysis.pools.place import place
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.model.placement import FabricMap
from topograph_slurm.model.pools import Deployment, PoolPlan, PoolSize
from topograph_slurm.model.result import LeafGroup, Tree, TreeSwitch


def test_the_issues_repro_keeps_every_pair_in_a_leaf() -> None:
    """12 nodes in two leaves of 6: 6 prefill x TP 4 (three nodes of two) and 6 decode x TP 8
    once put every decode in one leaf and every prefill in the other: 6 of 6 KV paths across
    the spine, exit 1. Four decodes with two prefill nodes, two with one, fit."""
    args = ["--sim", "nodes=12,gpus=8,rails=2,su=6", "--nodes", "gpu[0001-0012]"]
    args += ["--prefill", "6x4", "--decode", "6x8", "--json"]
    result = CliRunner().invoke(main, ["--config", os.devnull, "pools", *args])
    assert result.exit_code == Exit.OK, result.output
    data = json.loads(result.stdout)
    assert [path["level"] for path in data["kv_paths"]] == ["leaf"] * 6 and data["met"]


# --------------------------------------------------------------------------- the oracle


def crossings(
    fmap: FabricMap, roles: dict[str, str], per_node: dict[str, int], p: int, d: int
) -> tuple[int, ...]:
    """The fewest KV paths that cross out of each level (coarsest first, fabric and node left
    out) for nodes given their roles, each node holding ``per_node[role]`` instances but one
    of the role's, which holds what is left: the best such node."""
    holders = {role: [n for n, r in roles.items() if r == role] for role in ("prefill", "decode")}
    return min(
        _crossings(fmap, _instances(roles, per_node, p, d, last), p, d)
        for last in itertools.product(holders["prefill"], holders["decode"])
    )


def _crossings(fmap: FabricMap, counts: dict[str, tuple[int, int]], p: int, d: int):  # type: ignore[no-untyped-def]
    floor, extra = divmod(p, d)
    out = []
    for level in reversed(fmap.levels[1:-1]):
        units: dict[str, list[int]] = {}
        for node, (pre, dec) in counts.items():
            unit = units.setdefault(unit_of(fmap, node, level), [0, 0])
            unit[0] += pre
            unit[1] += dec
        base = sum(min(pre, floor * dec) for pre, dec in units.values())
        ceil = sum(min(pre, (floor + 1) * dec) for pre, dec in units.values())
        out.append(p - min(base + extra, ceil))
    return tuple(out)


def _instances(
    roles: dict[str, str], per_node: dict[str, int], p: int, d: int, last: tuple[str, str]
) -> dict[str, tuple[int, int]]:
    total = {"prefill": p, "decode": d}
    counts = {}
    for role, partial in zip(("prefill", "decode"), last, strict=True):
        nodes = [n for n, r in roles.items() if r == role]
        full = per_node[role]
        for node in nodes:
            take = full if node != partial else total[role] - full * (len(nodes) - 1)
            counts[node] = (take, 0) if role == "prefill" else (0, take)
    return counts


def plan_crossings(plan: PoolPlan, fmap: FabricMap) -> tuple[int, ...]:
    levels = fmap.levels
    return tuple(
        sum(1 for path in plan.kv_paths if levels.index(path.level) > levels.index(level))
        for level in reversed(levels[1:-1])
    )


def best(fmap: FabricMap, nodes: list[str], per_node: dict[str, int], p: int, d: int):  # type: ignore[no-untyped-def]
    need = {role: -(-count // per_node[role]) for role, count in (("prefill", p), ("decode", d))}
    found = None
    for assignment in itertools.product(("prefill", "decode", "unused"), repeat=len(nodes)):
        if any(assignment.count(role) != need[role] for role in need):
            continue
        cost = crossings(fmap, dict(zip(nodes, assignment, strict=True)), per_node, p, d)
        found = cost if found is None or cost < found else found
    return found


def two_level_fabric(sizes: list[int], spines: int) -> tuple[FabricMap, list[str]]:
    """Leaves of *sizes* nodes, dealt round-robin under *spines* spine switches (one more
    level above them when there are two or more)."""
    leaves = [
        LeafGroup(f"L{i}", [], [f"n{i}{j}" for j in range(size)]) for i, size in enumerate(sizes)
    ]
    groups = [[leaf.name for leaf in leaves[s::spines]] for s in range(spines)]
    switches = [TreeSwitch(f"S{s}", 1, [], names) for s, names in enumerate(groups) if names]
    top = [switch.name for switch in switches]
    if len(switches) > 1:
        switches.append(TreeSwitch("core", 2, [], top))
        top = ["core"]
    fmap = fabric_map(Tree(leaves, switches, top))
    return fmap, [node for leaf in leaves for node in leaf.nodes]


def placed_counts(plan: PoolPlan) -> dict[str, tuple[int, int]]:
    counts: dict[str, list[int]] = {}
    for instance in plan.instances:
        side = 0 if instance.role == "prefill" else 1
        counts.setdefault(instance.nodes[0], [0, 0])[side] += 1
    return {node: (pre, dec) for node, (pre, dec) in counts.items()}


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=2, max_size=4),
    spines=st.integers(1, 3),
    gpus=st.sampled_from([4, 8]),
    prefill_tp=st.sampled_from([1, 2, 4, 8]),
    decode_tp=st.sampled_from([1, 2, 4, 8]),
    data=st.data(),
)
def test_the_pairing_is_the_best_for_the_nodes_placed(  # type: ignore[no-untyped-def]
    sizes, spines, gpus, prefill_tp, decode_tp, data
) -> None:
    """For the roles the plan gave its nodes, no pairing keeps more KV paths inside each
    level, the coarsest first (the oracle: every level at its most at once)."""
    if max(prefill_tp, decode_tp) > gpus:
        return
    fmap, nodes = two_level_fabric(sizes, spines)
    per_node = {"prefill": gpus // prefill_tp, "decode": gpus // decode_tp}
    p = data.draw(st.integers(1, per_node["prefill"] * (len(nodes) - 1)))
    room = len(nodes) - -(-p // per_node["prefill"])
    d = data.draw(st.integers(1, per_node["decode"] * max(1, room)))
    if room < 1:
        return
    plan = place(Deployment(PoolSize(p, prefill_tp), PoolSize(d, decode_tp)), nodes, gpus, fmap)
    assert plan_crossings(plan, fmap) == _crossings(fmap, placed_counts(plan), p, d)
