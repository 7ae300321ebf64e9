"""``occupancy``'s use case: the fabric's units (a topology file, a fabric source, else the
topology slurmctld runs), Slurm's nodes and jobs, and what fills which unit."""

from __future__ import annotations

from collections.abc import Callable

from topograph_slurm.analysis.occupancy.units import node_states, report, unplaced
from topograph_slurm.app.fabric import Warn, given_sources
from topograph_slurm.app.view import FabricView, from_settings
from topograph_slurm.config import Settings
from topograph_slurm.errors import ConfigError, InputError
from topograph_slurm.model import names
from topograph_slurm.model.health import HealthPlan
from topograph_slurm.model.occupancy import OccupancyReport
from topograph_slurm.slurm.jobs import scontrol_jobs
from topograph_slurm.slurm.nodes import scontrol_node_gpus
from topograph_slurm.slurm.scontrol import Scontrol


def read_occupancy(settings: Settings, topology: str | None, warn: Warn) -> OccupancyReport:
    """The occupancy of the fabric and of each partition, from ``scontrol show nodes --json``
    and ``scontrol show jobs --json``, on the units the view places (no path facts: only the
    places matter). Slurm's names pass the Slurm name rule (they reach a terminal and the
    metrics); a topology file or fabric source that places none of Slurm's nodes is an
    InputError, not one unit ``fabric`` with nothing stranded."""
    view = from_settings(settings, topology, warn, running=True, facts=False)
    scontrol = Scontrol.from_settings(settings)
    nodes, jobs = scontrol_node_gpus(scontrol), scontrol_jobs(scontrol)
    names.check([node.name for node in nodes], "node", "scontrol show nodes --json")
    names.check([n for job in jobs for n in job.nodes], "node", "scontrol show jobs --json")
    sources = given_sources(settings)
    if nodes and (topology or sources) and len(unplaced(view.fmap, nodes)) == len(nodes):
        where = topology or f"the --{sources[0]} fabric"
        listed = names.fold(node.name for node in nodes)
        shown = listed if len(listed) <= 60 else listed[:60] + "…"
        raise InputError(
            f"{where} places none of Slurm's {len(nodes)} nodes ({shown}): its node names "
            "are not Slurm's, or it is no topology file"
        )
    return report(view.fmap, nodes, jobs)


def view_node_states(settings: Settings, view: FabricView) -> dict[str, str]:
    """Each node's occupancy state on *view*'s units (``draw --occupancy``), from Slurm now."""
    scontrol = Scontrol.from_settings(settings)
    nodes = scontrol_node_gpus(scontrol)
    found = report(view.fmap, nodes, scontrol_jobs(scontrol)).fabric
    return node_states(view.fmap, nodes, found)


def keep_plan(settings: Settings, topology: str | None, warn: Warn, *, reset: bool) -> HealthPlan:
    """``occupancy --apply``'s changes: the keep offset on the nodes of every whole free unit
    and off everywhere else (everywhere with *reset*), only where Slurm's value differs; a
    plan of health's kind, so its commands render and run as health's do."""
    from topograph_slurm.analysis.occupancy.steer import KeepPolicy, keep_changes
    from topograph_slurm.slurm.nodes import scontrol_node_states

    if settings.occupancy_keep_weight >= settings.health_weight:
        raise ConfigError(
            f"occupancy_keep_weight ({settings.occupancy_keep_weight}) must be below "
            f"health_weight ({settings.health_weight}): a degraded node must stay last"
        )
    view = from_settings(settings, topology, warn, running=True, facts=False)
    scontrol = Scontrol.from_settings(settings)
    nodes, current = scontrol_node_gpus(scontrol), scontrol_node_states(scontrol)
    names.check([node.name for node in nodes], "node", "scontrol show nodes --json")
    policy = KeepPolicy(settings.health_feature_prefix, settings.occupancy_keep_weight)
    return HealthPlan(keep_changes(view.fmap, nodes, current, policy, reset=reset), [], [])


def apply_keep(settings: Settings, commands: list[str], done: Callable[[str], None]) -> None:
    """Run the keep plan's ``scontrol update`` lines, as ``health --apply`` runs its own."""
    from topograph_slurm.app.health import apply

    apply(settings, commands, done)
