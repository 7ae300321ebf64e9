"""``topograph-slurm gres``: gres.conf from the measured node (nvidia-smi topo -m and -q on
NVIDIA, rocm-smi --showtopo on AMD)."""

from __future__ import annotations

import click

from topograph_slurm.cli.display import environment, log, warn, write
from topograph_slurm.cli.options import (
    TOPO_MATRIX,
    AsciiIntRange,
    command,
    output_options,
    these_nodes,
)


@command()
@click.option("--snapshot", metavar="DIR", help="A snapshot made by `collect`.")
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
    metavar="N",
    help="Hardware threads per core (default: read from the CPU affinity lists).",
)
@click.option(
    "--sockets",
    type=AsciiIntRange(1, 64),
    metavar="N",
    help="Sockets per node, as the node line's Sockets= (default: two when the NUMA nodes "
    "split evenly in two, else one): Cores= is the GPU's whole socket.",
)
@click.option(
    "--numa-node-as-socket",
    is_flag=True,
    help="slurm.conf sets SlurmdParameters=numa_node_as_socket: Cores= is the GPU's NUMA node.",
)
@these_nodes("With --topo-matrix: the nodes the capture stands for.")
@TOPO_MATRIX
@output_options("output", "json", "check", "diff", "templates")
@click.pass_context
def gres(
    ctx: click.Context,
    /,
    snapshot: str | None,
    topo_matrix: str | None,
    hostlist: str | None,
    nvidia_smi_q: str | None,
    rocm_smi_product: str | None,
    threads_per_core: int | None,
    sockets: int | None,
    numa_node_as_socket: bool,
    output: str | None,
    as_json: bool,
    check: bool,
    diff: bool,
    templates: str | None,
) -> None:
    """Write Slurm's gres.conf from the GPUs each node measured: one line per GPU with
    Type= (nvidia-smi -q's product name), File=/dev/nvidiaN (AMD: /dev/dri/renderD<128+N>,
    from rocm-smi --showtopo), Cores= (the Slurm core indices
    of the GPU's socket, as Slurm 24.11+ takes them; none when every GPU shares one CPU
    affinity) and Links= (NVLinks, or AMD xGMI links, to each GPU), identical nodes folded into one
    NodeName= hostlist. A node whose layout differs from its type's is a finding on stderr.
    --json prints the same plan as data (docs/gres.md).

    \b
    Examples:
      topograph-slurm gres --snapshot /var/lib/topograph/snap -o /etc/slurm/gres.conf
      topograph-slurm gres --topo-matrix topo.txt --nodes 'gpu[001-064]' --check -o gres.conf
      nvidia-smi topo -m | topograph-slurm gres --topo-matrix - --nodes 'gpu[001-064]'
    """
    from topograph_slurm.app.gres import GresSource, plan
    from topograph_slurm.render.gres import render_gres, render_gres_json

    if (snapshot is None) == (topo_matrix is None):
        raise click.UsageError("give --snapshot DIR or --topo-matrix FILE --nodes HOSTLIST")
    if topo_matrix is not None and hostlist is None:
        raise click.UsageError("--topo-matrix needs --nodes HOSTLIST")
    if snapshot is not None and (hostlist or nvidia_smi_q or rocm_smi_product):
        raise click.UsageError(
            "--nodes, --nvidia-smi-q and --rocm-smi-product go with --topo-matrix"
        )
    if nvidia_smi_q and rocm_smi_product:
        raise click.UsageError("give --nvidia-smi-q or --rocm-smi-product, not both")
    products = nvidia_smi_q or rocm_smi_product
    if topo_matrix == "-" and products == "-":
        raise click.UsageError(
            "only one of --topo-matrix and --nvidia-smi-q (--rocm-smi-product) can be stdin"
        )
    source = GresSource(
        snapshot,
        topo_matrix,
        hostlist,
        products,
        threads_per_core,
        sockets,
        numa_node_as_socket,
    )
    result = plan(source)
    if as_json:
        text = render_gres_json(result, source.name, numa_node_as_socket)
    else:
        text = render_gres(environment(ctx), result, source.name, numa_node_as_socket)
    for finding in result.findings:
        warn(f"{finding.kind}: {finding.subject}: {finding.message}")
    for note in result.notes:
        log(ctx, f"note: {note}")
    ctx.exit(write(ctx, output or "-", text, check=check, diff=diff))
