"""``topograph-slurm draw``: pictures of the fabric, of a job's groups on it, and of one node's
GPUs and NICs; flags → view → geometry → SVG or HTML → ``display.write`` (a file or stdout)."""

from __future__ import annotations

from typing import Any

import click

from topograph_slurm.app import draw as use_case
from topograph_slurm.cli.display import environment, warn, write
from topograph_slurm.cli.options import (
    JOB_ID,
    TOPO_MATRIX,
    command,
    job_options,
    job_or_environment,
    output_options,
    split_flags,
)
from topograph_slurm.errors import UsageError
from topograph_slurm.render.draw.picture import (
    FORMATS,
    output_format,
    render_page,
    render_svg,
)


@command()
@JOB_ID
@click.option(
    "--node",
    metavar="NODE",
    help="Draw this node's GPUs, NVLink/PCIe relations, NICs and NUMA affinity from the "
    "--snapshot's nvidia-smi topo -m.",
)
@click.option(
    "--unit",
    metavar="NAME",
    help="Only the detail of the unit holding NAME (a unit, switch, leaf or node name).",
)
@click.option(
    "--occupancy",
    "show_occupancy",
    is_flag=True,
    help="Colour the fabric view's nodes by Slurm's occupancy now (scontrol show nodes/jobs "
    "--json, as `occupancy`): every GPU busy, some free, all free, stranded, down; without "
    "--topology or a fabric source, on the topology slurmctld runs.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(FORMATS)),
    help="svg (one picture) or html (one self-contained page: every picture, hover details, "
    "pan and zoom); default: from the -o extension, else svg.",
)
@TOPO_MATRIX
@job_options
@output_options("output", "templates")
@click.pass_context
def draw(
    ctx: click.Context,
    /,
    job_id: str | None,
    node: str | None,
    topo_matrix: str | None,
    unit: str | None,
    output: str | None,
    templates: str | None,
    fmt: str | None,
    show_occupancy: bool,
    **flags: Any,
) -> None:
    """Draw the fabric, a job's parallel groups on it, or one node's GPUs and NICs.

    The fabric view: switch tiers above the logical leaves (each with its rails), nodes per
    leaf grouped into their blocks (numbered in Slurm file order), faults coloured with a
    legend (degraded links, missing rails, rail disagreement and misalignment, unhealthy
    NVLink, excluded HCAs), cable counts on the tier edges. Above 1,024 nodes or 16 leaves
    it is an overview of units (the leaves under one switch) with their counts and fault
    badges; the HTML page holds every unit's detail a click away, --unit NAME draws one.

    With --occupancy the fabric view's nodes are coloured by Slurm's occupancy now, as
    `occupancy` finds it: every GPU busy, some free, all free, stranded (free GPUs in a unit
    where no pending job's TP group or segment fits), down.

    The job view (JOBID, or --nodes with the layout flags of `explain`; inside a job JOBID
    defaults to $SLURM_JOB_ID unless --nodes, --hostfile, --unit or --occupancy is given): the
    leaves the job
    uses, its nodes coloured by TP group (PP when TP fits in a node), every TP and PP group
    edge drawn, red when it leaves the fastest unit its group fits in.

    The node view (--snapshot DIR --node NODE, or --topo-matrix FILE): GPUs inside their
    NUMA nodes, NVLink/NVSwitch (NVIDIA) or xGMI (AMD) between them, each GPU's nearest NIC
    (its rail) with the path class, GPU-NIC pairs that cross NUMA dashed red, the GPUs and NICs
    of affinity findings (nearest NIC on another NUMA node, only SYS NICs, no NIC of their
    own) marked, and the whole matrix coloured.

    Exit 0 when drawn; 2 bad flags (an unknown --unit or --node), 3 unreadable input, 9 when
    -o cannot be written. Nothing is written on an error.

    \b
    Examples:
      topograph-slurm draw --sim demo -o fabric.html
      topograph-slurm draw --snapshot /var/lib/topograph/snap --node gpu0001 -o node.svg
      topograph-slurm draw "$SLURM_JOB_ID" --pp 4 -o job.html
      topograph-slurm draw --sim demo --nodes 'gpu[0001-0016]' --tp 16 --pp 2 -o job.svg
    """
    fmt = output_format(fmt, output)
    env = environment(ctx)  # a bad --templates directory fails before any work
    if show_occupancy and (node or topo_matrix or job_id or flags["hostlist"] or flags["hostfile"]):
        raise UsageError("--occupancy colours the fabric view: give no JOBID, --nodes, --node")
    if node or topo_matrix:
        pictures = [use_case.node_picture(node, topo_matrix, flags["snapshot"])]
    else:
        settings, topology, job = split_flags(ctx, flags)
        job_id = job_or_environment(job_id, job["hostlist"], job["hostfile"], unit, show_occupancy)
        if job_id or job["hostlist"] or job["hostfile"]:
            pictures = [use_case.job_picture(settings, topology, job_id, job, warn)]
        else:
            pictures = use_case.fabric_pictures(settings, topology, unit, warn, show_occupancy)
    if fmt == "svg":
        if len(pictures) > 1:
            warn(
                f"the SVG holds the overview only; its {len(pictures) - 1} unit details are in "
                "--format html, or one at a time with --unit NAME"
            )
        text = render_svg(env, pictures[0])
    else:
        text = render_page(env, pictures[0].title, pictures)
    write(ctx, output or "-", text)
