"""Placement quality on the real Slurm test cluster: does ``--tp-size`` pay off, and does
``order`` lay ranks better than Slurm does?

One cluster per run (default 32 nodes of 8 fake GPUs, ``--topology block``: 4 blocks of 8
nodes, or ``tree``: 4 leaves of 8 under one spine; one partition), with the ``topology.conf``
and the filters ``topograph-slurm generate --filter-dir`` renders for that fabric and the SPANK
plugin built inside a node, as ``tests/integration/test_tp_filter.py`` sets it up. One seeded
stream of mixed jobs (1-16 nodes, TP 4-64, ``sleep`` runtimes, arriving in bursts) is submitted
once per policy, one policy after the other on the same cluster:

- ``plain``: ``sbatch -N n --exclusive``, no topology request (Slurm's block plugin still keeps
  a job inside the smallest block level that holds it; the tree plugin picks the fewest leaves).
- ``tp-size``: the same plus ``--tp-size=tp``; the filters turn it into ``--segment=tp/8``
  (block) or ``--switches`` (tree) when a TP group spans nodes and leave the job alone when it
  fits one node.
- ``keep``: ``tp-size``'s jobs, and ``topograph-slurm occupancy --apply`` (through a host
  ``scontrol`` shim) after every burst and every 2 s poll: Weight +100 on the nodes of every
  whole free block or leaf, so Slurm fills partly used units first (issue 40); ``--reset
  --apply`` after the stream.
- ``whole-unit`` (block, idle cluster only): every job in whole units: ``--segment=n`` when it
  fits one block (the job sits in one block), else whole blocks: ``-N`` rounded up to a multiple
  of the block size with ``--segment=<block size>`` (the job runs on the first n nodes).

``--fragment SHARE`` makes the cluster a busy day's: before each policy's stream, long 1-node
jobs pinned with ``-w`` hold that share of the nodes, spread evenly over every block or leaf
(seeded, the same nodes for every policy); they are cancelled after the stream.

Per policy it reports the share of multi-node TP groups that cross a block (or leaf), the mean
and p95 queue wait (start - submit; a job cancelled at ``--timeout`` before it started counts
up to then), the makespan (last end - first submit) and node utilisation (allocated
node-seconds / (free nodes x makespan); "useful" counts only the n nodes a job asked for).
Times are Slurm's own (``scontrol show job``, 1 s). Crossings use each job's nodes in Slurm's
rank order: the allocation of ``scontrol show job --json`` while the job runs, read by the
project's ``parse_scontrol_job`` (else its hostlist in node table order, ``slurm_rank_order``).
Every multi-node job then gets a layout (its TP, PP 2 where two stages fit, DP the rest) and its
groups' crossings per kind and level under Slurm's order are compared with the order
``best_order`` picks; a job is improved when ``cost`` is strictly lower.

Usage: python benchmarks/bench_placement.py [--version 24.11|26.05] [--topology block|tree]
       [--fragment 0.3] [--jobs 100] [--seed 1] [--nodes 32] [--block-size 8]
       [--timeout 900] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "slurm-test-cluster"), str(ROOT / "tests" / "integration")]

from topograph_slurm.analysis.placement.order import best_order  # noqa: E402
from topograph_slurm.analysis.placement.span import (  # noqa: E402
    KindSpans,
    cost,
    fabric_map,
    kind_spans,
    rank_nodes,
)
from topograph_slurm.model.placement import LEVEL_NODE, FabricMap, ParallelLayout  # noqa: E402
from topograph_slurm.model.result import (  # noqa: E402
    Block,
    BlockTopology,
    LeafGroup,
    Tree,
    TreeSwitch,
)
from topograph_slurm.slurm.jobs import parse_scontrol_job  # noqa: E402
from topograph_slurm.slurm.nodes import parse_node_table, slurm_rank_order  # noqa: E402

GPUS_PER_NODE = 8
POLICIES = ("plain", "tp-size", "whole-unit", "keep")
#: Job sizes (nodes) and how often each comes up: many small jobs, some over one block.
NODE_WEIGHTS = {1: 14, 2: 18, 3: 8, 4: 18, 6: 8, 8: 16, 12: 8, 16: 10}
TP_CHOICES = (4, 8, 16, 32, 64)
TIME_LIMIT_MIN = 1  # every job, every policy: backfill needs a limit; runtimes stay well under
DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"}


# --------------------------------------------------------------------------------------------
# The job stream (pure)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamShape:
    """Runtimes and arrival bursts, in seconds; ``quick`` is a smoke run's shape."""

    runtime: tuple[int, int] = (2, 12)
    burst: tuple[int, int] = (3, 6)
    pause: tuple[int, int] = (3, 10)


QUICK = StreamShape(runtime=(1, 4), burst=(2, 4), pause=(1, 3))


@dataclass(frozen=True)
class JobSpec:
    """One job of the stream: its size, TP, runtime and arrival (seconds after the first)."""

    index: int
    nodes: int
    tp: int
    runtime: int
    arrival: int


def valid_tps(nodes: int, gpus_per_node: int, block_size: int) -> list[int]:
    """TP sizes a job of *nodes* can use: its GPUs a multiple of TP, a group within a block."""
    gpus = nodes * gpus_per_node
    return [
        tp
        for tp in TP_CHOICES
        if tp <= gpus and gpus % tp == 0 and -(-tp // gpus_per_node) <= block_size
    ]


def job_stream(
    count: int,
    seed: int,
    *,
    max_nodes: int = 16,
    block_size: int = 8,
    gpus_per_node: int = GPUS_PER_NODE,
    shape: StreamShape = StreamShape(),
) -> list[JobSpec]:
    """The seeded stream: the same jobs, sizes and arrival times for every policy."""
    rng = random.Random(seed)
    sizes = [n for n in NODE_WEIGHTS if n <= max_nodes]
    weights = [NODE_WEIGHTS[n] for n in sizes]
    jobs: list[JobSpec] = []
    clock = 0
    while len(jobs) < count:
        for _ in range(min(rng.randint(*shape.burst), count - len(jobs))):
            nodes = rng.choices(sizes, weights)[0]
            tp = rng.choice(valid_tps(nodes, gpus_per_node, block_size))
            jobs.append(JobSpec(len(jobs), nodes, tp, rng.randint(*shape.runtime), clock))
        clock += rng.randint(*shape.pause)
    return jobs


def policy_args(policy: str, job: JobSpec, block_size: int) -> str:
    """The sbatch options (before ``--wrap``) of *job* under *policy*."""
    nodes = allocated_nodes(policy, job, block_size)
    base = f"--exclusive -N {nodes} -t {TIME_LIMIT_MIN} -o /dev/null -J bench-{job.index}"
    if policy == "plain":
        return base
    if policy in ("tp-size", "keep"):
        return f"{base} --tp-size={job.tp}"
    if policy == "whole-unit":
        return f"{base} --segment={min(nodes, block_size)}"
    raise ValueError(f"unknown policy {policy!r}")


def allocated_nodes(policy: str, job: JobSpec, block_size: int) -> int:
    """Nodes the policy asks Slurm for: whole blocks for a whole-unit job over one block."""
    if policy == "whole-unit" and job.nodes > block_size:
        return math.ceil(job.nodes / block_size) * block_size
    return job.nodes


# --------------------------------------------------------------------------------------------
# Metrics (pure)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobRecord:
    """What Slurm did with one job: times in seconds (any common origin) and its nodes."""

    spec: JobSpec
    state: str
    submit: float
    start: float
    end: float
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class PolicyResult:
    policy: str
    level: str  # the level TP groups should not cross: domain (block) or leaf
    jobs: int
    failed: int
    tp_groups: int
    tp_crossing: int
    jobs_crossing: int
    mean_wait: float
    p95_wait: float
    makespan: float
    utilisation: float
    useful: float
    orders: tuple[OrderComparison, ...] = ()
    not_done: tuple[int, ...] = ()  # stream indices of the jobs that did not complete

    @property
    def crossing_share(self) -> float:
        return self.tp_crossing / self.tp_groups if self.tp_groups else 0.0


def block_fabric(blocks: Mapping[str, Sequence[str]]) -> FabricMap:
    """Places from the cluster's blocks, under one switch that holds them all: without a level
    above the blocks, a group spread over two blocks would have nowhere wider to span."""
    topo = BlockTopology([Block(name, list(nodes)) for name, nodes in blocks.items()], [])
    every = [node for nodes in blocks.values() for node in nodes]
    return fabric_map(Tree([LeafGroup("cluster", [], every)], [], ["cluster"]), topo)


def tree_fabric(switches: Sequence[Any]) -> FabricMap:
    """Places from ``scontrol show topology`` of a tree (harness ``TopoSwitch``: name, level,
    nodes, switches): level-0 switches are the leaves, the others the switches above them."""
    leaves = [LeafGroup(s.name, [], list(s.nodes)) for s in switches if s.level == 0]
    uppers = [TreeSwitch(s.name, s.level, [], list(s.switches)) for s in switches if s.level]
    children = {child for upper in uppers for child in upper.children}
    tops = [s.name for s in switches if s.name not in children]
    return fabric_map(Tree(leaves, sorted(uppers, key=lambda u: (u.level, u.name)), tops))


def unit_level(fmap: FabricMap) -> str:
    """The level a TP group should not cross: ``domain`` (a block) or, without blocks, ``leaf``."""
    return fmap.levels[1]


def split_levels(fmap: FabricMap) -> list[str]:
    """The levels a job's groups can cross here: ``node`` and every level with more than one
    unit (not the one switch above all blocks, not the top of a one-island tree)."""
    units = [level for level, _ in fmap.unit_sizes]
    return [LEVEL_NODE] + [lvl for lvl in fmap.levels[1:-1] if units.count(lvl) > 1]


def spans_of(
    layout: ParallelLayout, order: Sequence[str], gpus_per_node: int, fmap: FabricMap
) -> dict[str, KindSpans]:
    """How the job's groups span the fabric with its ranks laid on *order* (the one call of
    ``kind_spans``)."""
    return kind_spans(layout, rank_nodes(order, gpus_per_node), fmap)


def tp_crossing(
    nodes: Sequence[str], spec: JobSpec, fmap: FabricMap, gpus_per_node: int
) -> tuple[int, int]:
    """(TP groups that cross a block or leaf, TP groups that span nodes) of a job on *nodes*
    (Slurm's rank order; a whole-unit job runs on the first ``spec.nodes`` of them)."""
    if spec.tp <= gpus_per_node:
        return 0, 0
    used = list(nodes)[: spec.nodes]
    layout = ParallelLayout.for_world(len(used) * gpus_per_node, tp=spec.tp)
    spans = spans_of(layout, used, gpus_per_node, fmap)["tp"]
    return spans.crossing(unit_level(fmap), fmap.levels), spans.groups


def p95(values: Sequence[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)] if ordered else 0.0


def summarise(
    policy: str,
    records: Sequence[JobRecord],
    total_nodes: int,
    fmap: FabricMap,
    gpus_per_node: int = GPUS_PER_NODE,
) -> PolicyResult:
    """The policy's numbers from what Slurm did (*total_nodes*: those the stream can use);
    jobs that did not complete (failed, or cancelled at the timeout) count as not done."""
    ran = [r for r in records if r.state == "COMPLETED" and r.nodes]
    crossing = [tp_crossing(r.nodes, r.spec, fmap, gpus_per_node) for r in ran]
    # a job cancelled at the timeout before it started has Slurm's StartTime = its cancel
    # time: its wait counts up to then (a lower bound), or a stuck policy would look quick
    stuck = [r for r in records if r.state == "CANCELLED" and r.start >= r.submit]
    waits = [r.start - r.submit for r in [*ran, *stuck]]
    makespan = max(r.end for r in ran) - min(r.submit for r in records) if ran else 0.0
    capacity = total_nodes * makespan or 1.0
    return PolicyResult(
        policy=policy,
        level=unit_level(fmap),
        jobs=len(records),
        failed=len(records) - len(ran),
        tp_groups=sum(groups for _, groups in crossing),
        tp_crossing=sum(cross for cross, _ in crossing),
        jobs_crossing=sum(1 for cross, _ in crossing if cross),
        mean_wait=statistics.fmean(waits) if waits else 0.0,
        p95_wait=p95(waits),
        makespan=makespan,
        utilisation=sum(len(r.nodes) * (r.end - r.start) for r in ran) / capacity,
        useful=sum(r.spec.nodes * (r.end - r.start) for r in ran) / capacity,
        not_done=tuple(r.spec.index for r in records if r not in ran),
        orders=tuple(
            compare_order(r.spec, r.nodes[: r.spec.nodes], fmap, gpus_per_node)
            for r in ran
            if r.spec.nodes > 1
        ),
    )


def table(results: Sequence[PolicyResult], baseline: str = "plain") -> str:
    """The printed table; wait and makespan also as a ratio to the baseline policy."""
    base = next((r for r in results if r.policy == baseline), None)
    level = results[0].level if results else ""
    head = f"policy      TP groups crossing {level:<6} jobs crossing  mean wait  p95 wait  makespan"
    lines = [head + "         util  useful  not done"]
    for r in results:
        ratio = f"({r.makespan / base.makespan:4.2f}x)" if base and base.makespan else ""
        lines.append(
            f"{r.policy:<11} {r.tp_crossing:>3}/{r.tp_groups:<4} {r.crossing_share:6.1%}"
            f"  {r.jobs_crossing:>13}  {r.mean_wait:8.1f}s  {r.p95_wait:7.1f}s"
            f"  {r.makespan:6.0f}s {ratio:<8} {r.utilisation:5.1%}  {r.useful:6.1%}"
            f"  {r.failed:>8}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# A fragmented cluster and the node order (pure)
# --------------------------------------------------------------------------------------------


def fragment_nodes(units: Mapping[str, Sequence[str]], share: float, seed: int) -> list[str]:
    """The nodes background jobs hold on a busy day: *share* of all nodes (rounded), spread
    over every block or leaf as evenly as the count allows (the remainder to seeded units),
    seeded nodes inside each unit; in unit order."""
    rng = random.Random(seed)
    total = round(share * sum(map(len, units.values())))
    names = list(units)
    count = dict.fromkeys(names, total // len(names))
    for name in rng.sample(names, total % len(names)):
        count[name] += 1
    if any(count[name] > len(units[name]) for name in names):
        raise ValueError(f"cannot hold {total} nodes evenly over {len(names)} units")
    return [node for name in names for node in sorted(rng.sample(list(units[name]), count[name]))]


def job_layout(spec: JobSpec, gpus_per_node: int = GPUS_PER_NODE) -> ParallelLayout:
    """The job's layout: its TP, PP 2 where two stages of TP groups divide its GPUs (else 1),
    DP the rest, in Megatron-Core's rank order."""
    world = spec.nodes * gpus_per_node
    pp = 2 if world % (2 * spec.tp) == 0 else 1
    return ParallelLayout.for_world(world, tp=spec.tp, pp=pp)


Crossings = dict[str, dict[str, int]]  # kind -> level -> groups that cross that level


@dataclass(frozen=True)
class OrderComparison:
    """One multi-node job: its groups' crossings under Slurm's rank order and under the order
    ``best_order`` picks, and whether the pick costs strictly less."""

    index: int
    layout: str
    chosen: str
    groups: dict[str, int]
    slurm: Crossings
    ordered: Crossings
    improved: bool


def crossings(spans: Mapping[str, KindSpans], levels: Sequence[str], fmap: FabricMap) -> Crossings:
    return {
        kind: {lvl: s.crossing(lvl, fmap.levels) for lvl in levels} for kind, s in spans.items()
    }


def compare_order(
    spec: JobSpec, ranked: Sequence[str], fmap: FabricMap, gpus_per_node: int = GPUS_PER_NODE
) -> OrderComparison:
    """Slurm's rank order of the job's nodes against ``best_order``'s, by ``cost``."""
    layout = job_layout(spec, gpus_per_node)
    before = spans_of(layout, ranked, gpus_per_node, fmap)
    after = best_order(layout, list(ranked), gpus_per_node, fmap)
    levels = split_levels(fmap)
    return OrderComparison(
        index=spec.index,
        layout=f"tp{layout.tp} pp{layout.pp} dp{layout.dp}",
        chosen=after.chosen,
        groups={kind: s.groups for kind, s in before.items()},
        slurm=crossings(before, levels, fmap),
        ordered=crossings(after.spans, levels, fmap),
        improved=cost(after.spans, fmap.levels) < cost(before, fmap.levels),
    )


def order_table(comparisons: Sequence[OrderComparison]) -> str:
    """The share of jobs ``order`` improves; per kind, its groups and, per level, how many
    cross it under Slurm's rank order -> under ``order``'s."""
    levels = list(next(iter(comparisons[0].slurm.values()))) if comparisons else []
    improved = sum(c.improved for c in comparisons)
    share = improved / len(comparisons) if comparisons else 0.0
    lines = [
        f"order vs Slurm's rank order: {len(comparisons)} multi-node jobs, "
        f"{improved} improved ({share:.1%})",
        "kind  groups  " + "  ".join(f"crossing {lvl:<10}" for lvl in levels),
    ]
    for kind in ("tp", "cp", "ep", "pp", "dp"):
        jobs = [c for c in comparisons if kind in c.groups]
        if not jobs:
            continue
        cells = []
        for lvl in levels:
            before = sum(c.slurm[kind][lvl] for c in jobs)
            after = sum(c.ordered[kind][lvl] for c in jobs)
            cells.append(f"{before:>9} -> {after:<7}")
        lines.append(f"{kind:<4}  {sum(c.groups[kind] for c in jobs):>6}  " + "  ".join(cells))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The run on the test cluster
# --------------------------------------------------------------------------------------------


def slurm_time(value: str) -> float:
    """Seconds since the epoch of a ``scontrol`` timestamp (the controller's local time)."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S").timestamp()


class Bench:
    """One cluster: the filters installed, the plugin built, its blocks or leaves known, and
    the nodes background jobs hold (none on an idle cluster)."""

    def __init__(self, cluster: Any, block_size: int, fragment: float, seed: int) -> None:
        import harness

        self.cluster = cluster
        self.block_size = block_size
        topology = harness.parse_show_topology(cluster.show_topology())
        if topology.base_blocks:
            self.units = {b.name: b.nodes for b in topology.base_blocks}
            self.fmap = block_fabric(self.units)
        else:
            self.units = topology.leaf_nodes()
            self.fmap = tree_fabric(topology.switches)
        self.busy = fragment_nodes(self.units, fragment, seed) if fragment else []
        text = cluster.exec(["scontrol", "show", "nodes", "--json"]).check("nodes").stdout
        self.node_table = parse_node_table(text)
        self.shim_env = cluster.shims(Path(tempfile.mkdtemp()) / "shims", ["scontrol"])
        self.steered = 0

    def steer(self, *args: str) -> None:
        """``occupancy --apply`` (the ``keep`` policy) on the topology slurmctld runs."""
        argv = ["topograph-slurm", "occupancy", "--apply", *args]
        done = subprocess.run(argv, env=self.shim_env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"occupancy --apply failed ({done.returncode}): {done.stderr}")
        self.steered += 1

    def submit(self, policy: str, burst: Sequence[JobSpec]) -> dict[str, JobSpec]:
        """A burst in one exec (several sbatch at once); job id -> spec."""
        lines = [
            f"sbatch --parsable {policy_args(policy, j, self.block_size)} "
            f"--wrap 'sleep {j.runtime}'"
            for j in burst
        ]
        out = self.cluster.exec("\n".join(lines)).check(f"{policy} burst").stdout.split()
        if len(out) != len(burst):
            raise SystemExit(f"{policy}: submitted {len(out)} of {len(burst)} jobs: {out}")
        return {job_id.split(";")[0]: spec for job_id, spec in zip(out, burst, strict=True)}

    def fragment(self) -> list[str]:
        """Pin a long 1-node job on every busy node and wait until all run; their ids."""
        lines = [
            f"sbatch --parsable --exclusive -N 1 -w {node} -t 60 -o /dev/null -J background "
            "--wrap 'sleep 3600'"
            for node in self.busy
        ]
        out = self.cluster.exec("\n".join(lines)).check("background jobs").stdout.split()
        ids = [job_id.split(";")[0] for job_id in out]
        for job_id in ids:
            self.cluster.wait_job(job_id, timeout=120)
        return ids

    def snapshot(self, seen: dict[str, dict[str, str]], ranked: dict[str, list[str]]) -> None:
        """Merge every job ``scontrol`` knows into *seen* (finished jobs stay for MinJobAge),
        and each job's nodes in Slurm's rank order into *ranked*: the allocation list of
        ``scontrol show job --json`` read by the project's parser while the job runs (a
        finished job keeps only its hostlist: then its nodes in node table order)."""
        import harness

        text = self.cluster.exec(["scontrol", "-o", "show", "job"]).stdout
        for line in text.splitlines():
            kv = harness.parse_kv_line(line)
            if "JobId" in kv:
                seen[kv["JobId"]] = kv
        listed = json.loads(self.cluster.exec(["scontrol", "show", "job", "--json"]).stdout)
        for raw in listed["jobs"]:
            job_id = str(raw["job_id"])
            job = parse_scontrol_job(json.dumps({"jobs": [raw]}), job_id)
            if job.state.startswith("RUNNING") and job.nodes:
                ranked[job_id] = list(job.nodes)
            elif job_id not in ranked and job.nodes:
                ranked[job_id] = slurm_rank_order(job.nodes, self.node_table)

    def run_policy(self, policy: str, stream: Sequence[JobSpec], timeout: float) -> PolicyResult:
        background = self.fragment() if self.busy else []
        jobs: dict[str, JobSpec] = {}
        seen: dict[str, dict[str, str]] = {}
        ranked: dict[str, list[str]] = {}
        t0 = time.monotonic()
        for arrival in sorted({j.arrival for j in stream}):
            time.sleep(max(0.0, t0 + arrival - time.monotonic()))
            jobs |= self.submit(policy, [j for j in stream if j.arrival == arrival])
            self.snapshot(seen, ranked)
            if policy == "keep":
                self.steer()
        while not all(seen.get(i, {}).get("JobState") in DONE for i in jobs):
            if time.monotonic() - t0 > timeout:
                self.cluster.exec(["scancel", *jobs])
                break
            time.sleep(2)
            self.snapshot(seen, ranked)
            if policy == "keep":
                self.steer()
        self.snapshot(seen, ranked)
        if policy == "keep":
            self.steer("--reset")
        if background:
            self.cluster.exec(["scancel", *background])
        self.cluster.wait_idle(timeout=120)
        records = [record(seen[i], spec, ranked.get(i, ())) for i, spec in jobs.items()]
        free = sum(map(len, self.units.values())) - len(self.busy)
        return summarise(policy, records, free, self.fmap)


def record(kv: Mapping[str, str], spec: JobSpec, ranked: Sequence[str]) -> JobRecord:
    """The job's times from ``scontrol -o show job``, its nodes in Slurm's rank order."""

    def at(key: str) -> float:
        value = kv.get(key, "")
        return slurm_time(value) if value[:1].isdigit() else 0.0

    state = kv.get("JobState", "UNKNOWN")
    return JobRecord(spec, state, at("SubmitTime"), at("StartTime"), at("EndTime"), tuple(ranked))


def run(args: argparse.Namespace) -> list[PolicyResult]:
    """Start the cluster, run every policy in turn, tear it down whatever happens."""
    import harness

    from tests.integration import test_tp_filter as scenario

    names = [f"gpu{i:04d}" for i in range(1, args.nodes + 1)]
    scenario.GPUS = GPUS_PER_NODE
    scenario.SIM = f"nodes={args.nodes},rails=1,su={args.block_size}"
    scenario.NODES[:] = names
    scenario.TOPOLOGY = args.topology
    client = harness.docker_client()
    image = harness.ensure_image(args.version, client)
    release = scenario.release_of(client, image, args.version)
    stream = job_stream(
        args.jobs,
        args.seed,
        max_nodes=min(16, args.nodes // 2),
        block_size=args.block_size,
        shape=QUICK if args.quick else StreamShape(),
    )
    with tempfile.TemporaryDirectory() as tmp:
        files = scenario.generate(Path(tmp), release)
    cluster = harness.Cluster(scenario.cluster_spec(files), image, client=client)
    try:
        cluster.start()
        cluster.wait_idle(timeout=300)
        scenario.build_plugin(cluster).check("SPANK plugin build")
        bench = Bench(cluster, args.block_size, args.fragment, args.seed)
        return [bench.run_policy(p, stream, args.timeout) for p in args.policies]
    finally:
        cluster.teardown()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="24.11", choices=["24.11", "26.05"])
    parser.add_argument("--jobs", type=int, default=None, help="jobs in the stream (100)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--block-size", type=int, default=8)
    parser.add_argument("--topology", default="block", choices=["block", "tree"])
    parser.add_argument(
        "--fragment", type=float, default=0.0, help="share of nodes background jobs hold (0)"
    )
    parser.add_argument("--policies", nargs="+", default=None, choices=POLICIES)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per policy")
    parser.add_argument("--quick", action="store_true", help="smoke run: 12 short jobs")
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = parser.parse_args(argv)
    if args.jobs is None:
        args.jobs = 12 if args.quick else 100
    whole_blocks = args.topology == "block" and not args.fragment
    if args.policies is None:
        args.policies = list(POLICIES) if whole_blocks else ["plain", "tp-size"]
    if "whole-unit" in args.policies and not whole_blocks:
        parser.error("whole-unit needs whole free blocks: topology/block without --fragment")
    if not 0 <= args.fragment < 0.5:
        parser.error("--fragment must be at least 0 and under 0.5")
    if args.nodes % args.block_size or args.nodes < 2 * args.block_size:
        parser.error("--nodes must be a multiple of --block-size, at least two blocks")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    results = run(args)
    units = "blocks" if args.topology == "block" else "leaves"
    print(
        f"Slurm {args.version} topology/{args.topology}: {args.nodes} nodes x {GPUS_PER_NODE} "
        f"GPUs, {args.nodes // args.block_size} {units} of {args.block_size}, "
        f"{args.fragment:.0%} held by background jobs; {args.jobs} jobs, seed {args.seed}; "
        f"{time.monotonic() - started:.0f} s in all"
    )
    print(table(results))
    for result in results:
        print(f"\n{result.policy}: " + order_table(result.orders))
    if args.json:
        print(json.dumps([asdict(r) | {"crossing_share": r.crossing_share} for r in results]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
