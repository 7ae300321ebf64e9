"""What a deployment on the fabric could not have, for ``pools`` (a plan it made) and
``explain --pools`` (a deployment running): each instance's TP span against the finest level
that could hold it, the problems on its nodes' paths (a decode's are unmet: decode is tail-latency
bound), each KV pair's path level and slowest link against the finest level that could hold
the pair. Pure functions, no I/O."""

from __future__ import annotations

from topograph_slurm.analysis.placement.explain import PathFacts, path_problems, worst_link
from topograph_slurm.analysis.placement.span import home_level, nodes_per_group, span
from topograph_slurm.errors import InputError
from topograph_slurm.model.placement import FabricMap
from topograph_slurm.model.pools import (
    DECODE,
    PREFILL,
    Deployment,
    Instance,
    KvPath,
    PoolPlan,
    PoolSize,
    RunningInstance,
    RunningPools,
)


def instance(
    role: str,
    name: str,
    tp: int,
    nodes: list[str],
    gpus: list[int],
    fmap: FabricMap,
    facts: PathFacts | None,
) -> Instance:
    """An instance on *gpus* of *nodes*: where its TP sits and the problems on its nodes'
    paths (a decode's every problem; a prefill's as a decode's, for the spread of each pool)."""
    home = home_level(fmap, len(nodes))
    problems = path_problems(nodes, fmap, facts)
    return Instance(role, name, tp, nodes, gpus, span(fmap, nodes), home, [], problems)


def kv_path(
    pair: tuple[Instance, Instance], fmap: FabricMap, facts: PathFacts | None, home: str
) -> KvPath:
    """The KV-cache path of a prefill instance to its decode instance."""
    prefill, decode = pair
    nodes = prefill.nodes + decode.nodes
    level = span(fmap, nodes)
    prefill.pairs.append(decode.name)
    decode.pairs.append(prefill.name)
    return KvPath(prefill.name, decode.name, level, worst_link(level, nodes, fmap, facts), home)


def judge(instances: list[Instance], paths: list[KvPath], fmap: FabricMap) -> None:
    """What each instance could not have: TP outside its home, a decode on a path with
    problems, a KV path coarser than the pair's home."""
    levels = fmap.levels
    by_name = {instance.name: instance for instance in instances}
    for instance in instances:
        if levels.index(instance.tp_level) > levels.index(instance.tp_home):
            instance.unmet.append(
                f"TP group spans {instance.tp_level}; one unit of {instance.tp_home} could hold it"
            )
        if instance.role == DECODE and instance.problems:
            kinds = ", ".join(sorted({f"{f.kind} on {f.subject}" for f in instance.problems}))
            instance.unmet.append(f"decode on a degraded path ({kinds})")
    for path in paths:
        if levels.index(path.level) > levels.index(path.home):
            by_name[path.prefill].unmet.append(
                f"KV path to {path.decode} spans {path.level}; one unit of {path.home} "
                f"could hold the pair"
            )


def _shared_gpus(instances: list[Instance]) -> None:
    """Two instances of a hand-written deployment on one GPU contend for it: each says which
    GPU of which node it shares, with whom (a plan ``pools`` made never does this)."""
    by_name = {one.name: one for one in instances}
    owner: dict[tuple[str, int], str] = {}
    for one in instances:
        for node in one.nodes:
            for gpu in one.gpus:
                first = owner.setdefault((node, gpu), one.name)
                if first != one.name:
                    one.unmet.append(f"shares GPU {gpu} of {node} with {first}")
                    by_name[first].unmet.append(f"shares GPU {gpu} of {node} with {one.name}")


def _short_of_gpus(instances: list[Instance]) -> None:
    """An instance of a hand-written deployment that names a GPU twice, or whose distinct GPUs
    on its distinct nodes are fewer than its TP size, cannot run as written (a plan ``pools``
    made never does this)."""
    for one in instances:
        gpus = sorted(set(one.gpus))
        repeated = [gpu for gpu in gpus if one.gpus.count(gpu) > 1]
        if repeated:
            one.unmet.append(f"names GPU {repeated[0]} more than once")
        nodes = len(set(one.nodes))
        if len(gpus) * nodes < one.tp:
            plural = "node" if nodes == 1 else "nodes"
            one.unmet.append(
                f"TP {one.tp} needs {one.tp} GPUs; it has {len(gpus) * nodes} "
                f"({len(gpus)} on each of its {nodes} {plural})"
            )


def _gpus(one: RunningInstance, gpus_per_node: int) -> list[int]:
    """The GPUs the file names, else the instance's share of each node's from GPU 0."""
    if one.gpus is not None:
        beyond = [gpu for gpu in one.gpus if gpu >= gpus_per_node]
        if beyond:
            raise InputError(
                f"{one.name}: GPU {beyond[0]} is not one of {one.nodes[0]}'s {gpus_per_node} GPUs"
            )
        return list(one.gpus)
    return list(range(min(one.tp, gpus_per_node, -(-one.tp // len(one.nodes)))))


def check_running(
    running: RunningPools, gpus_per_node: int, fmap: FabricMap, facts: PathFacts | None = None
) -> PoolPlan:
    """A running deployment judged on the fabric (``explain --pools``)."""
    instances = [
        instance(
            one.role, one.name, one.tp, list(one.nodes), _gpus(one, gpus_per_node), fmap, facts
        )
        for one in running.instances
    ]
    by_name = {one.name: one for one in instances}
    paths = []
    for prefill, decode in running.pairs:
        pair = (by_name[prefill], by_name[decode])
        needed = sum(nodes_per_group(one.tp, gpus_per_node) for one in pair)
        paths.append(kv_path(pair, fmap, facts, home_level(fmap, needed)))
    judge(instances, paths, fmap)
    _short_of_gpus(instances)
    _shared_gpus(instances)
    sizes = {
        role: PoolSize(
            sum(1 for one in instances if one.role == role),
            max((one.tp for one in instances if one.role == role), default=0),
        )
        for role in (PREFILL, DECODE)
    }
    return PoolPlan(
        Deployment(sizes[PREFILL], sizes[DECODE]),
        gpus_per_node,
        list(fmap.levels),
        instances,
        paths,
    )
