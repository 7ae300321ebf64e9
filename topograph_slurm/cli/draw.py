"""``topograph-slurm draw``: pictures of the fabric, of a job's groups on it, and of one node's
GPUs and NICs; flags → view → geometry → SVG or HTML → ``output.write_file`` or stdout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from topograph_slurm.app.view import FabricView, from_settings
from topograph_slurm.cli.options import config_settings, warn
from topograph_slurm.cli.placement import job_options, prepare_job, split_flags
from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.render.draw.picture import (
    FORMATS,
    Picture,
    output_format,
    render_page,
    render_svg,
)
from topograph_slurm.render.environment import environment
from topograph_slurm.sources.gc_pause import no_cyclic_gc


@click.command()
@click.argument("job_id", metavar="[JOBID]", required=False)
@job_options
@click.option(
    "--node",
    metavar="NODE",
    help="Draw this node's GPUs, NVLink/PCIe relations, NICs and NUMA affinity from the "
    "--snapshot's nvidia-smi topo -m.",
)
@click.option(
    "--topo-matrix",
    metavar="FILE",
    help="Draw the node of a saved `nvidia-smi topo -m` output ('-' = stdin).",
)
@click.option(
    "--unit",
    metavar="NAME",
    help="Only the detail of the unit holding NAME (a unit, switch, leaf or node name).",
)
@click.option("-o", "--output", metavar="FILE", help="Write here (atomic) instead of stdout.")
@click.option(
    "--templates",
    metavar="DIR",
    help="Directory whose templates override the built-in ones (draw*.j2; config: templates).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(FORMATS)),
    help="svg (one picture) or html (one self-contained page: every picture, hover details, "
    "pan and zoom); default: from the -o extension, else svg.",
)
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
    **flags: Any,
) -> None:
    """Draw the fabric, a job's parallel groups on it, or one node's GPUs and NICs.

    The fabric view: switch tiers above the logical leaves (each with its rails), nodes per
    leaf grouped into their blocks (numbered in Slurm file order), faults coloured with a
    legend (degraded links, missing rails, rail disagreement, unhealthy NVLink, excluded
    HCAs), cable counts on the tier edges. Above 1,024 nodes or 16 leaves it is an overview
    of units (the leaves under one switch) with their counts and fault badges; the HTML page
    holds every unit's detail a click away, --unit NAME draws one.

    The job view (JOBID, or --nodes with the layout flags of `explain`): the leaves the job
    uses, its nodes coloured by TP group (PP when TP fits in a node), every TP and PP group
    edge drawn, red when it leaves the fastest unit its group fits in.

    The node view (--snapshot DIR --node NODE, or --topo-matrix FILE): GPUs inside their
    NUMA nodes, NVLink/NVSwitch between them, each GPU's nearest NIC (its rail) with the path
    class, GPU-NIC pairs that cross NUMA dashed red, and the whole matrix coloured.

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
    env = environment(_templates(ctx, templates))  # a bad directory fails before any work
    if node or topo_matrix:
        pictures = [_node_picture(ctx, node, topo_matrix, flags)]
    elif job_id or flags["hostlist"] or flags["hostfile"]:
        pictures = [_job_picture(ctx, job_id, flags)]
    else:
        pictures = _fabric_pictures(ctx, unit, flags)
    if fmt == "svg":
        if len(pictures) > 1:
            warn(
                f"the SVG holds the overview only; its {len(pictures) - 1} unit details are in "
                "--format html, or one at a time with --unit NAME"
            )
        text = render_svg(env, pictures[0])
    else:
        text = render_page(env, pictures[0].title, pictures)
    if output and output != "-":
        from topograph_slurm.output import write_file

        write_file(Path(output), text)
    else:
        click.echo(text, nl=False)


def _templates(ctx: click.Context, flag: str | None) -> Path | None:
    """--templates, else the config's ``templates``, as ``generate`` takes them."""
    chosen = flag or config_settings(ctx).templates
    return Path(chosen) if chosen else None


def _fabric_pictures(ctx: click.Context, unit: str | None, flags: dict[str, Any]) -> list[Picture]:
    from topograph_slurm.render.draw.fabric import fabric_pictures

    settings, topology, _job = split_flags(ctx, flags)
    with no_cyclic_gc():
        view = from_settings(settings, topology, warn, facts=False)
        pictures = fabric_pictures(_scene(view), unit)
    if not pictures:
        raise InputError("nothing to draw: no host became a Slurm node (see generate --report)")
    return pictures


def _scene(view: FabricView, job: Any = None) -> Any:
    """The view's scene: its tree and the blocks Slurm gets (NVLink domains, else IB units)."""
    from topograph_slurm.render.draw.fabric import scene

    return scene(view.tree, view.blocks, view.analysis, view.findings, view.fmap.source, job)


def _job_picture(ctx: click.Context, job_id: str | None, flags: dict[str, Any]) -> Picture:
    from topograph_slurm.analysis.placement.group_edges import job_groups
    from topograph_slurm.render.draw.fabric import job_picture

    with no_cyclic_gc():
        job = prepare_job(ctx, job_id, flags)
        groups = job_groups(job.layout, job.order, job.gpus, job.view.fmap)
        return job_picture(_scene(job.view, groups))


def _node_picture(
    ctx: click.Context, node: str | None, topo_matrix: str | None, flags: dict[str, Any]
) -> Picture:
    from topograph_slurm.render.draw.node import node_picture

    if topo_matrix:
        if node or flags["snapshot"]:
            raise UsageError("give --topo-matrix FILE, or --snapshot DIR with --node NODE")
        from topograph_slurm.app.fabric import read_text
        from topograph_slurm.sources.nvidia_smi import parse_topo_matrix

        name = "<stdin>" if topo_matrix == "-" else Path(topo_matrix).name
        return node_picture(name, parse_topo_matrix(read_text(topo_matrix)))
    if not flags["snapshot"]:
        raise UsageError("--node needs --snapshot DIR (or draw a saved matrix with --topo-matrix)")
    from topograph_slurm.sources.snapshot import load_snapshot

    snapshot = load_snapshot(Path(flags["snapshot"]))
    assert node is not None
    if node not in snapshot.nodes:
        known = ", ".join(sorted(snapshot.nodes)[:5])
        raise UsageError(f"--node {node} is not in snapshot {flags['snapshot']} (it has {known} …)")
    found = snapshot.nodes[node]
    if found.topology is None:
        raise InputError(
            f"snapshot {flags['snapshot']} has no readable nvidia-smi topo -m for {node}"
        )
    return node_picture(node, found.topology, found.gpus or [])
