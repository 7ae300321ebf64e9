"""``order --format binding-*``'s use case: the per-local-rank GPU, NIC(s) and CPUs of the
job's nodes, from one ``nvidia-smi topo -m`` capture every node shares or each node's own in
the snapshot the fabric was read from. The node order itself is :mod:`.placement`'s."""

from __future__ import annotations

from topograph_slurm.app.placement import PlacedJob
from topograph_slurm.errors import InputError
from topograph_slurm.model.gpu import GpuTopology, RankBinding
from topograph_slurm.model.names import fold


def job_binding(job: PlacedJob, topo_matrix: str | None) -> tuple[RankBinding, ...]:
    """The binding of the job's local ranks (GPUs per node of them); an InputError when a
    node has no ``topo -m`` or the nodes would bind differently."""
    from topograph_slurm.analysis.placement import binding

    return binding.job_binding(_topologies(job, topo_matrix), job.gpus)


def _topologies(job: PlacedJob, topo_matrix: str | None) -> dict[str, GpuTopology]:
    if topo_matrix is not None:
        from topograph_slurm.app.gres import read_topo_matrix

        return dict.fromkeys(job.order, read_topo_matrix(topo_matrix))
    missing = [node for node in job.order if node not in job.view.topologies]
    if missing:
        raise InputError(
            f"no nvidia-smi topo -m for {fold(missing)}: give --topo-matrix FILE "
            "(one node's capture) or a --snapshot that has it"
        )
    return {node: job.view.topologies[node] for node in job.order}
