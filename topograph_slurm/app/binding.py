"""``order --format binding-*``'s use case (and ``pools``', per instance): the per-local-rank
GPU, NIC(s) and CPUs of the job's nodes, from one ``nvidia-smi topo -m`` capture every node
shares or each node's own in the snapshot the fabric was read from. The node order itself is
:mod:`.placement`'s."""

from __future__ import annotations

from topograph_slurm.app.placement import PlacedJob
from topograph_slurm.errors import InputError
from topograph_slurm.model.gpu import GpuTopology, RankBinding
from topograph_slurm.model.names import fold
from topograph_slurm.model.pools import PoolPlan


def job_binding(job: PlacedJob, topo_matrix: str | None) -> tuple[RankBinding, ...]:
    """The binding of the job's local ranks (GPUs per node of them); an InputError when a
    node has no ``topo -m`` or the nodes would bind differently."""
    from topograph_slurm.analysis.placement import binding

    return binding.job_binding(_topologies(job, job.order, _capture(topo_matrix)), job.gpus)


def instance_bindings(
    job: PlacedJob, plan: PoolPlan, topo_matrix: str | None
) -> dict[str, tuple[RankBinding, ...]]:
    """``pools``' binding-* formats: per instance, its local ranks on its GPUs of its nodes
    (the errors of :func:`job_binding`, the instance named)."""
    from topograph_slurm.analysis.placement import binding

    capture = _capture(topo_matrix)
    bound = {}
    for one in plan.instances:
        try:
            topologies = _topologies(job, one.nodes, capture)
            bound[one.name] = binding.job_binding(topologies, len(one.gpus), one.gpus[0])
        except InputError as err:
            raise InputError(f"{one.name}: {err}") from None
    return bound


def engine_bindings(
    job: PlacedJob, plan: PoolPlan, topo_matrix: str | None
) -> dict[str, tuple[RankBinding, ...]] | None:
    """``pools``' launcher formats: :func:`instance_bindings` when a ``topo -m`` covers every
    instance's nodes (``--topo-matrix``, or the snapshot's), else None: the launchers then
    bind GPUs only and leave the NICs to NCCL."""
    nodes = {node for one in plan.instances for node in one.nodes}
    if topo_matrix is None and not nodes <= job.view.topologies.keys():
        return None
    return instance_bindings(job, plan, topo_matrix)


def _topologies(
    job: PlacedJob, nodes: list[str], capture: GpuTopology | None
) -> dict[str, GpuTopology]:
    """*capture* on every node (``--topo-matrix``), else each node's own from the snapshot."""
    if capture is not None:
        return dict.fromkeys(nodes, capture)
    missing = [node for node in nodes if node not in job.view.topologies]
    if missing:
        raise InputError(
            f"no nvidia-smi topo -m for {fold(missing)}: give --topo-matrix FILE "
            "(one node's capture) or a --snapshot that has it"
        )
    return {node: job.view.topologies[node] for node in nodes}


def _capture(path: str | None) -> GpuTopology | None:
    """``--topo-matrix``'s capture, read once; None without the flag."""
    from topograph_slurm.sources.node_captures import read_topo_matrix

    return None if path is None else read_topo_matrix(path)
