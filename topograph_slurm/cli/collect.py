"""``topograph-slurm collect``: gather nvidia-smi (and optionally ibnetdiscover) from the nodes
into a snapshot directory. Thin: parse options, call :func:`topograph_slurm.collect.collect`,
print a summary. Errors are TopographError subclasses, turned into one line and an exit code
by the ``main`` group.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click

from topograph_slurm.app.fabric import fetch_ufm
from topograph_slurm.cli.options import AsciiIntRange, ufm_options, warn
from topograph_slurm.cli.progress import ProgressBar, progress_wanted
from topograph_slurm.collect import collect as run_collect
from topograph_slurm.collect.plan import (
    AMD_COMMANDS,
    DEFAULT_COMMANDS,
    DEFAULT_IBNETDISCOVER,
    GPU_VENDORS,
    CollectOutcome,
    CollectPlan,
    expand_nodes,
    gpu_commands,
)
from topograph_slurm.config import Settings, load_settings, override, state_dir
from topograph_slurm.errors import CollectError, Exit
from topograph_slurm.slurm.nodes import scontrol_nodes
from topograph_slurm.slurm.scontrol import Scontrol
from topograph_slurm.sources import ufm as ufm_source
from topograph_slurm.sources.lldp import KEY_LLDP, LLDP_COMMAND

_COMMAND_HELP = "\n      ".join(
    f"{key}: {shlex.join(argv)}" for key, argv in {**DEFAULT_COMMANDS, **AMD_COMMANDS}.items()
)


def _nodes(hostlist: str | None, settings: Settings) -> list[str]:
    if hostlist and hostlist != "scontrol":
        return expand_nodes(hostlist)
    nodes = scontrol_nodes(Scontrol.from_settings(settings))
    if not nodes:
        raise CollectError("scontrol lists no nodes; give --nodes HOSTLIST")
    return expand_nodes(",".join(sorted(nodes)))


def _ufm_snapshot(settings: Settings) -> tuple[dict[str, str], dict[str, Any]]:
    """UFM's answers as snapshot files plus a manifest entry (URL without credentials)."""
    responses = fetch_ufm(settings, warn)
    files = ufm_source.snapshot_files(responses)
    return files, {"ufm": {"url": responses.url, "files": sorted(files)}}


def _summary(outcome: CollectOutcome) -> str:
    ok, failed = outcome.ok_nodes, outcome.failed_nodes
    if not outcome.results and outcome.fabric is None:
        return f"{outcome.path}: written ({outcome.duration:.1f}s)"
    lines = [
        f"{outcome.path}: {len(ok)} nodes ok, {len(failed)} with failures ({outcome.duration:.1f}s)"
    ]
    for result in outcome.results:
        if not result.ok:
            tail = result.stderr_tail.strip().splitlines()
            detail = f" ({tail[-1].strip()})" if tail else ""
            lines.append(f"  {result.node} {result.command}: {result.error}{detail}")
    if outcome.fabric is not None:
        state = "ok" if outcome.fabric.ok else f"failed: {outcome.fabric.error}"
        lines.append(f"  ibnetdiscover on {outcome.fabric.node}: {state}")
    return "\n".join(lines)


@click.command("collect")
@click.option(
    "--via",
    type=click.Choice(["srun", "clush"]),
    default="srun",
    show_default=True,
    help="Transport: one srun per node (inside an allocation: steps with --overlap; "
    "outside: tiny jobs with a --time limit), or ClusterShell over ssh.",
)
@click.option(
    "--nodes",
    "hostlist",
    metavar="HOSTLIST|scontrol",
    help="Nodes to collect from, e.g. 'gb[001-072]'; default or 'scontrol': every node "
    "slurmctld knows.",
)
@click.option(
    "--snapshot",
    "snapshot",
    required=True,
    metavar="DIR",
    help="Snapshot directory to (re)write atomically: nodes/<node>/<command>.txt, "
    "fabric/ibnetdiscover.txt, manifest.json.",
)
@click.option(
    "--ibnetdiscover-on",
    metavar="NODE",
    help="Also run ibnetdiscover on this one node (it sees the whole fabric).",
)
@click.option(
    "--ibnetdiscover-timeout",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    metavar="S",
    help="Timeout for the ibnetdiscover run (large fabrics take minutes).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    metavar="S",
    help="Per-node budget in seconds: each command is killed on the node after S, and a node "
    "that has not answered after S (+5 s grace) is stopped and recorded as timed out.",
)
@click.option(
    "--fanout",
    type=AsciiIntRange(min=1, max=4096),
    default=32,
    show_default=True,
    metavar="N",
    help="At most N nodes at a time: concurrent per-node sruns, or ssh connections.",
)
@click.option(
    "--srun-mode",
    type=click.Choice(["batch", "per-node"]),
    default="batch",
    show_default=True,
    help="batch: one multi-node srun (one job), then one srun per node that did not report; "
    "per-node: one srun per node from the start, --fanout at a time.",
)
@click.option(
    "--partition",
    metavar="P",
    help="srun --partition (outside an allocation: where the collection jobs run).",
)
@click.option(
    "--srun-arg",
    "srun_args",
    multiple=True,
    metavar="ARG",
    help="Extra srun argument, repeatable, e.g. --srun-arg=--reservation=maint.",
)
@ufm_options(
    "Also store NVIDIA UFM's REST answers (ufm/*.json) in the snapshot; without --nodes, only "
    "UFM is collected. Fetched first: a refused login writes nothing."
)
@click.option(
    "--lldp",
    is_flag=True,
    help="Also run `lldpcli -f json0 show neighbors details` on every node (lldpd): each NIC's "
    "switch and port, the leaf layer of an Ethernet/RoCE fabric for generate --snapshot.",
)
@click.option(
    "--gpu-vendor",
    type=click.Choice(GPU_VENDORS),
    default="nvidia",
    show_default=True,
    help="Whose GPU tools to run: nvidia (nvidia-smi), amd (rocm-smi --showtopo), or auto "
    "(each only on the nodes that have it: mixed or unknown clusters).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 4 when any node failed (the snapshot is still written).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar even on a terminal.")
@click.pass_context
def collect(
    ctx: click.Context,
    via: str,
    hostlist: str | None,
    snapshot: str,
    ibnetdiscover_on: str | None,
    ibnetdiscover_timeout: float,
    timeout: float,
    fanout: int,
    srun_mode: str,
    partition: str | None,
    srun_args: tuple[str, ...],
    ufm: str | None,
    ufm_credentials: str | None,
    ufm_ca_bundle: str | None,
    ufm_insecure: bool | None,
    ufm_timeout: float | None,
    ufm_deadline: float | None,
    ufm_max_response_mib: int | None,
    lldp: bool,
    gpu_vendor: str,
    strict: bool,
    no_progress: bool,
) -> None:
    """Collect NVLink/GPU facts from every node into a snapshot directory.

    \b
    Runs on each node, in parallel, NVIDIA's or (--gpu-vendor amd) AMD's:
      {commands}
    and, with --ibnetdiscover-on NODE, ibnetdiscover on that node. A node that fails, times
    out or cannot be reached is recorded in manifest.json (exit code, error, stderr tail) and
    never stops the run; `generate --snapshot DIR` reports it. The snapshot is built beside
    DIR and swapped in; if no node answered at all, the old snapshot is kept and the exit
    code is 4.

    \b
    Examples:
      topograph-slurm collect --nodes 'gb[001-072]' --snapshot /var/lib/topograph/snap
      salloc -N72 topograph-slurm collect --nodes "$SLURM_JOB_NODELIST" --snapshot snap
      topograph-slurm collect --via clush --nodes 'gb[001-072]' --fanout 64 \\
          --ibnetdiscover-on gb001 --snapshot snap
    """
    obj = ctx.obj or {}
    settings = override(
        load_settings(obj.get("config_file")),
        ufm=ufm,
        ufm_credentials=ufm_credentials,
        ufm_ca_bundle=ufm_ca_bundle,
        ufm_insecure=ufm_insecure,
        ufm_timeout=ufm_timeout,
        ufm_deadline=ufm_deadline,
        ufm_max_response_mib=ufm_max_response_mib,
        snapshot=snapshot,  # checked as generate's --snapshot is: a file name
    )
    extra_files, extra_manifest = _ufm_snapshot(settings) if settings.ufm else ({}, {})
    only_ufm = settings.ufm is not None and hostlist is None and ibnetdiscover_on is None
    plan = CollectPlan(
        nodes=[] if only_ufm else _nodes(hostlist, settings),
        via=via,
        commands=gpu_commands(gpu_vendor),
        timeout=timeout,
        fanout=fanout,
        partition=partition,
        srun_args=list(srun_args),
        srun_mode=srun_mode,
        ibnetdiscover_on=ibnetdiscover_on,
        ibnetdiscover_command=DEFAULT_IBNETDISCOVER,
        ibnetdiscover_timeout=ibnetdiscover_timeout,
    )
    if lldp:
        plan.commands[KEY_LLDP] = LLDP_COMMAND
    quiet = bool(obj.get("quiet"))
    show = False if no_progress else progress_wanted(quiet)
    total = len(plan.nodes) + (1 if plan.ibnetdiscover_on else 0)
    with ProgressBar(total, show) as bar:
        outcome = run_collect(
            plan,
            Path(snapshot),
            on_progress=bar.advance,
            extra_files=extra_files,
            extra_manifest=extra_manifest,
            state_dir=state_dir(settings),
        )
    if not quiet or outcome.failed_nodes:
        click.echo(_summary(outcome), err=True)
    if strict and outcome.failed_nodes:
        ctx.exit(int(Exit.COLLECT))


collect.help = (collect.help or "").replace("{commands}", _COMMAND_HELP)
