"""``collect``'s use case: the nodes to visit (a hostlist, else every node slurmctld knows),
UFM's answers fetched first (a refused login writes nothing), the plan, and the snapshot
written by :func:`topograph_slurm.collect.collect`. Nothing here prints: the progress of the
fan-out reaches the CLI through *progress*, the outcome comes back for it to summarise."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from topograph_slurm.app.fabric import Warn, fetch_ufm
from topograph_slurm.collect import collect as run_collect
from topograph_slurm.collect.plan import (
    AMD_COMMANDS,
    DEFAULT_IBNETDISCOVER,
    CollectPlan,
    expand_nodes,
    gpu_commands,
)
from topograph_slurm.collect.plan import (
    DEFAULT_COMMANDS as DEFAULT_COMMANDS,  # re-exported: collect --help lists them
)
from topograph_slurm.collect.plan import (
    GPU_VENDORS as GPU_VENDORS,  # re-exported: --gpu-vendor's choices
)
from topograph_slurm.collect.plan import (
    CollectOutcome as CollectOutcome,  # re-exported: what the CLI summarises
)
from topograph_slurm.config import Settings, state_dir
from topograph_slurm.errors import CollectError
from topograph_slurm.slurm.nodes import scontrol_nodes
from topograph_slurm.slurm.scontrol import Scontrol
from topograph_slurm.sources import ufm as ufm_source
from topograph_slurm.sources.lldp import KEY_LLDP, LLDP_COMMAND

#: Every per-node GPU command collect may run (NVIDIA's and AMD's): collect --help lists them.
ALL_GPU_COMMANDS = {**DEFAULT_COMMANDS, **AMD_COMMANDS}


class Steps(Protocol):
    """A progress display while it is open: one step done, named (a node, a run)."""

    def advance(self, name: str) -> None:
        """One more step finished."""


#: A progress display opened for a number of steps (the CLI's bar; a no-op off a terminal).
Progress = Callable[[int], AbstractContextManager[Steps]]


@dataclass(frozen=True, slots=True)
class Request:
    """What to collect and how: the transport, the nodes (None: every node slurmctld knows),
    the snapshot directory to write, the budgets."""

    snapshot: str
    via: str = "srun"
    hostlist: str | None = None
    #: nvidia, amd or auto (each node runs the tools it has)
    gpu_vendor: str = "nvidia"
    ibnetdiscover_on: str | None = None
    ibnetdiscover_timeout: float = 300.0
    timeout: float = 60.0
    fanout: int = 32
    srun_mode: str = "batch"
    partition: str | None = None
    srun_args: tuple[str, ...] = ()
    lldp: bool = False


def collect(settings: Settings, request: Request, warn: Warn, progress: Progress) -> CollectOutcome:
    """Fetch UFM's answers (when asked), plan the nodes' commands and write the snapshot; a
    step of *progress* per node and one for the ibnetdiscover node."""
    extra_files, extra_manifest = _ufm_snapshot(settings, warn) if settings.ufm else ({}, {})
    only_ufm = (
        settings.ufm is not None and request.hostlist is None and request.ibnetdiscover_on is None
    )
    plan = CollectPlan(
        nodes=[] if only_ufm else _nodes(request.hostlist, settings),
        via=request.via,
        timeout=request.timeout,
        fanout=request.fanout,
        partition=request.partition,
        srun_args=list(request.srun_args),
        srun_mode=request.srun_mode,
        commands=gpu_commands(request.gpu_vendor),
        ibnetdiscover_on=request.ibnetdiscover_on,
        ibnetdiscover_command=DEFAULT_IBNETDISCOVER,
        ibnetdiscover_timeout=request.ibnetdiscover_timeout,
    )
    if request.lldp:
        plan.commands[KEY_LLDP] = LLDP_COMMAND
    total = len(plan.nodes) + (1 if plan.ibnetdiscover_on else 0)
    with progress(total) as steps:
        return run_collect(
            plan,
            Path(request.snapshot),
            on_progress=steps.advance,
            extra_files=extra_files,
            extra_manifest=extra_manifest,
            state_dir=state_dir(settings),
        )


def _nodes(hostlist: str | None, settings: Settings) -> list[str]:
    if hostlist and hostlist != "scontrol":
        return expand_nodes(hostlist)
    nodes = scontrol_nodes(Scontrol.from_settings(settings))
    if not nodes:
        raise CollectError("scontrol lists no nodes; give --nodes HOSTLIST")
    return expand_nodes(",".join(sorted(nodes)))


def _ufm_snapshot(settings: Settings, warn: Warn) -> tuple[dict[str, str], dict[str, Any]]:
    """UFM's answers as snapshot files plus a manifest entry (URL without credentials)."""
    responses = fetch_ufm(settings, warn)
    files = ufm_source.snapshot_files(responses)
    return files, {"ufm": {"url": responses.url, "files": sorted(files)}}
