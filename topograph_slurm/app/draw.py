"""``draw``'s use case: the pictures of the analysed fabric, of a job's groups on it, and of
one node's GPUs and NICs, as geometry (:mod:`topograph_slurm.render.draw`) the CLI renders."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from topograph_slurm.app.fabric import Warn
from topograph_slurm.app.placement import prepare_job
from topograph_slurm.app.view import FabricView, from_settings
from topograph_slurm.config import Settings
from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.render.draw.picture import Picture
from topograph_slurm.sources.gc_pause import no_cyclic_gc


def fabric_pictures(
    settings: Settings,
    topology: str | None,
    unit: str | None,
    warn: Warn,
    occupancy: bool = False,
) -> list[Picture]:
    """The fabric view (its overview and unit details above 1,024 nodes or 16 leaves), its
    nodes coloured by Slurm's occupancy now with *occupancy* (the topology slurmctld runs
    when no other is named)."""
    from topograph_slurm.render.draw.fabric import fabric_pictures as pictures_of

    with no_cyclic_gc():
        view = from_settings(settings, topology, warn, running=occupancy, facts=False, kept=False)
        drawn = _scene(view)
        if occupancy:
            from topograph_slurm.app.occupancy import view_node_states

            drawn.occupancy = view_node_states(settings, view)
        pictures = pictures_of(drawn, unit)
    if not pictures:
        raise InputError("nothing to draw: no host became a Slurm node (see generate --report)")
    return pictures


def _scene(view: FabricView, job: Any = None) -> Any:
    """The view's scene: its tree and the blocks Slurm gets (NVLink domains, else IB units)."""
    from topograph_slurm.render.draw.fabric import scene

    return scene(view.tree, view.blocks, view.analysis, view.findings, view.fmap.source, job)


def job_picture(
    settings: Settings,
    topology: str | None,
    job_id: str | None,
    job: Mapping[str, Any],
    warn: Warn,
) -> Picture:
    """A job's TP and PP groups on the leaves it uses."""
    from topograph_slurm.analysis.placement.group_edges import job_groups
    from topograph_slurm.render.draw.fabric import job_picture as picture_of

    with no_cyclic_gc():
        placed = prepare_job(settings, topology, job_id, job, warn, kept=False)
        groups = job_groups(placed.layout, placed.ranks, placed.view.fmap)
        return picture_of(_scene(placed.view, groups))


def node_picture(node: str | None, topo_matrix: str | None, snapshot: str | None) -> Picture:
    """One node's GPUs, NVLink or xGMI, NICs and NUMA affinity: from a saved ``nvidia-smi
    topo -m`` or ``rocm-smi --showtopo`` (*topo_matrix*), or a snapshot's node."""
    from topograph_slurm.analysis.nvlink.affinity import affinity_issues
    from topograph_slurm.render.draw.node import node_picture as picture_of

    if topo_matrix:
        if node or snapshot:
            raise UsageError("give --topo-matrix FILE, or --snapshot DIR with --node NODE")
        from topograph_slurm.sources.node_captures import read_topo_matrix

        name = "<stdin>" if topo_matrix == "-" else Path(topo_matrix).name
        topology = read_topo_matrix(topo_matrix)
        return picture_of(name, topology, affinity=affinity_issues({name: topology}))
    if not snapshot:
        raise UsageError("--node needs --snapshot DIR (or draw a saved matrix with --topo-matrix)")
    from topograph_slurm.sources.snapshot import load_snapshot

    taken = load_snapshot(Path(snapshot))
    assert node is not None
    if node not in taken.nodes:
        known = ", ".join(sorted(taken.nodes)[:5])
        raise UsageError(f"--node {node} is not in snapshot {snapshot} (it has {known} …)")
    found = taken.nodes[node]
    if found.topology is None:
        raise InputError(f"snapshot {snapshot} has no readable nvidia-smi topo -m for {node}")
    mine = [i for i in affinity_issues(taken.topologies) if i.finding.subject == node]
    return picture_of(node, found.topology, found.gpus or [], mine)
