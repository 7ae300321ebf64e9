"""``topograph-slurm gres``: gres.conf from the measured node (nvidia-smi topo -m and -q on
NVIDIA, rocm-smi --showtopo on AMD)."""

from __future__ import annotations

from pathlib import Path

import click

from topograph_slurm.cli.options import (
    OUTPUT_FILE,
    AsciiIntRange,
    config_settings,
    log,
    warn,
    write_output,
)


@click.command()
@click.option("--snapshot", metavar="DIR", help="A snapshot made by `collect`.")
@click.option(
    "--topo-matrix",
    metavar="FILE",
    help="One node's `nvidia-smi topo -m` (NVIDIA) or `rocm-smi --showtopo` (AMD) capture.",
)
@click.option("--nodes", metavar="HOSTLIST", help="With --topo-matrix: the nodes it describes.")
@click.option(
    "--nvidia-smi-q",
    metavar="FILE",
    help="With --topo-matrix: its node's `nvidia-smi -q` (Type=).",
)
@click.option(
    "--rocm-smi-product",
    metavar="FILE",
    help="With an AMD --topo-matrix: its node's `rocm-smi --showproduct` (Type=).",
)
@click.option(
    "--threads-per-core",
    type=AsciiIntRange(1, 8),
    help="Hardware threads per core (default: read from the CPU affinity lists).",
)
@click.option(
    "--sockets",
    type=AsciiIntRange(1, 64),
    help="Sockets per node, as the node line's Sockets= (default: two when the NUMA nodes "
    "split evenly in two, else one): Cores= is the GPU's whole socket.",
)
@click.option(
    "--numa-node-as-socket",
    is_flag=True,
    help="slurm.conf sets SlurmdParameters=numa_node_as_socket: Cores= is the GPU's NUMA node.",
)
@click.option(
    "-o",
    "--output",
    type=OUTPUT_FILE,
    metavar="PATH",
    help="Write gres.conf here (atomic, only on change) instead of stdout.",
)
@click.option(
    "--check", is_flag=True, help="Write nothing; exit 1 with a diff when PATH is out of date."
)
@click.option("--diff", is_flag=True, help="Write, and show the change to PATH as a diff.")
@click.pass_context
def gres(
    ctx: click.Context,
    snapshot: str | None,
    topo_matrix: str | None,
    nodes: str | None,
    nvidia_smi_q: str | None,
    rocm_smi_product: str | None,
    threads_per_core: int | None,
    sockets: int | None,
    numa_node_as_socket: bool,
    output: str | None,
    check: bool,
    diff: bool,
) -> None:
    """Write Slurm's gres.conf from the GPUs each node measured: one line per GPU with
    Type= (nvidia-smi -q's product name), File=/dev/nvidiaN (AMD: /dev/dri/renderD<128+N>,
    from rocm-smi --showtopo), Cores= (the Slurm core indices
    of the GPU's socket, as Slurm 24.11+ takes them; none when every GPU shares one CPU
    affinity) and Links= (NVLinks, or AMD xGMI links, to each GPU), identical nodes folded into one
    NodeName= hostlist. A node whose layout differs from its type's is a finding on stderr.

    \b
    Examples:
      topograph-slurm gres --snapshot /var/lib/topograph/snap -o /etc/slurm/gres.conf
      topograph-slurm gres --topo-matrix topo.txt --nodes 'gpu[001-064]' --check -o gres.conf
    """
    from topograph_slurm.app.gres import GresSource, plan
    from topograph_slurm.render.environment import environment
    from topograph_slurm.render.gres import render_gres

    if (snapshot is None) == (topo_matrix is None):
        raise click.UsageError("give --snapshot DIR or --topo-matrix FILE --nodes HOSTLIST")
    if topo_matrix is not None and nodes is None:
        raise click.UsageError("--topo-matrix needs --nodes HOSTLIST")
    if snapshot is not None and (nodes or nvidia_smi_q or rocm_smi_product):
        raise click.UsageError(
            "--nodes, --nvidia-smi-q and --rocm-smi-product go with --topo-matrix"
        )
    if nvidia_smi_q and rocm_smi_product:
        raise click.UsageError("give --nvidia-smi-q or --rocm-smi-product, not both")
    products = nvidia_smi_q or rocm_smi_product
    source = GresSource(
        snapshot, topo_matrix, nodes, products, threads_per_core, sockets, numa_node_as_socket
    )
    result = plan(source)
    templates = config_settings(ctx).templates
    env = environment(Path(templates) if templates else None)
    text = render_gres(env, result, source.name, numa_node_as_socket)
    for finding in result.findings:
        warn(f"{finding.kind}: {finding.subject}: {finding.message}")
    for note in result.notes:
        log(ctx, f"note: {note}")
    ctx.exit(write_output(ctx, output or "-", text, check=check, diff=diff))
