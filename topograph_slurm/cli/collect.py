"""``topograph-slurm collect``: gather nvidia-smi (and optionally ibnetdiscover) from the nodes
into a snapshot directory. Thin: parse options, call :func:`topograph_slurm.app.collect.collect`,
print a summary. Errors are TopographError subclasses, turned into one line and an exit code
by the ``main`` group.
"""

from __future__ import annotations

import shlex

import click

from topograph_slurm.app import collect as use_case
from topograph_slurm.cli.display import show, warn
from topograph_slurm.cli.options import (
    AsciiIntRange,
    command,
    output_options,
    these_nodes,
    ufm_options,
)
from topograph_slurm.cli.progress import ProgressBar, progress_wanted
from topograph_slurm.config import load_settings, override
from topograph_slurm.errors import Exit
from topograph_slurm.render.collect import render_collect_json

_COMMAND_HELP = "\n      ".join(
    f"{key}: {shlex.join(argv)}" for key, argv in use_case.ALL_GPU_COMMANDS.items()
)


def _summary(outcome: use_case.CollectOutcome) -> str:
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


@command("collect", aliases={"--snapshot": "--out-dir", "--partition": "--srun-partition"})
@click.option(
    "--via",
    type=click.Choice(["srun", "clush"]),
    default="srun",
    show_default=True,
    help="Transport: one srun per node (inside an allocation: steps with --overlap; "
    "outside: tiny jobs with a --time limit), or ClusterShell over ssh.",
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
    "--srun-partition",
    "partition",
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
    type=click.Choice(use_case.GPU_VENDORS),
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
@these_nodes(
    "Nodes to collect from, e.g. 'gb[001-072]'; default or 'scontrol': every node slurmctld knows.",
    "HOSTLIST|scontrol",
)
@output_options("out_dir", "json")
@click.pass_context
def collect(
    ctx: click.Context,
    /,
    via: str,
    hostlist: str | None,
    out_dir: str | None,
    as_json: bool,
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
    code is 4. --out-dir DIR is required (the snapshot the other commands read with
    --snapshot DIR); --json prints what happened per node and command as data.

    \b
    Examples:
      topograph-slurm collect --nodes 'gb[001-072]' --out-dir /var/lib/topograph/snap
      salloc -N72 topograph-slurm collect --nodes "$SLURM_JOB_NODELIST" --out-dir snap
      topograph-slurm collect --via clush --nodes 'gb[001-072]' --fanout 64 \\
          --ibnetdiscover-on gb001 --out-dir snap
    """
    if out_dir is None:
        raise click.UsageError("collect writes a snapshot: give --out-dir DIR")
    snapshot = out_dir
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
    request = use_case.Request(
        snapshot=snapshot,
        via=via,
        hostlist=hostlist,
        gpu_vendor=gpu_vendor,
        ibnetdiscover_on=ibnetdiscover_on,
        ibnetdiscover_timeout=ibnetdiscover_timeout,
        timeout=timeout,
        fanout=fanout,
        srun_mode=srun_mode,
        partition=partition,
        srun_args=srun_args,
        lldp=lldp,
    )
    quiet = bool(obj.get("quiet"))
    shown = False if no_progress else progress_wanted(quiet)
    outcome = use_case.collect(settings, request, warn, lambda total: ProgressBar(total, shown))
    if not quiet or outcome.failed_nodes:
        click.echo(_summary(outcome), err=True)
    if as_json:
        show(render_collect_json(outcome))
    if strict and outcome.failed_nodes:
        ctx.exit(int(Exit.COLLECT))


collect.help = (collect.help or "").replace("{commands}", _COMMAND_HELP)
