"""``occupancy``'s use case: the fabric's units (a topology file, a fabric source, else the
topology slurmctld runs), Slurm's nodes and jobs, and what fills which unit."""

from __future__ import annotations

from topograph_slurm.analysis.occupancy.units import node_states, report
from topograph_slurm.app.fabric import Warn
from topograph_slurm.app.view import FabricView, from_settings
from topograph_slurm.config import Settings
from topograph_slurm.model.occupancy import OccupancyReport
from topograph_slurm.slurm.jobs import scontrol_jobs
from topograph_slurm.slurm.nodes import scontrol_node_gpus
from topograph_slurm.slurm.scontrol import Scontrol


def read_occupancy(settings: Settings, topology: str | None, warn: Warn) -> OccupancyReport:
    """The occupancy of the fabric and of each partition, from ``scontrol show nodes --json``
    and ``scontrol show jobs --json``, on the units the view places (no path facts: only the
    places matter)."""
    view = from_settings(settings, topology, warn, running=True, facts=False)
    scontrol = Scontrol.from_settings(settings)
    return report(view.fmap, scontrol_node_gpus(scontrol), scontrol_jobs(scontrol))


def view_node_states(settings: Settings, view: FabricView) -> dict[str, str]:
    """Each node's occupancy state on *view*'s units (``draw --occupancy``), from Slurm now."""
    scontrol = Scontrol.from_settings(settings)
    nodes = scontrol_node_gpus(scontrol)
    found = report(view.fmap, nodes, scontrol_jobs(scontrol)).fabric
    return node_states(view.fmap, nodes, found)
