"""``topograph-slurm diff OLD NEW``: two fabrics, topology files or kept summaries → what
changed (:func:`topograph_slurm.analysis.state.drift.drift`) → text or JSON → exit 0 same,
1 changed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from topograph_slurm.app.diff import DEFAULT_THRESHOLD
from topograph_slurm.cli.display import environment, show, warn
from topograph_slurm.cli.options import (
    SLURM_VERSION,
    FiniteFloatRange,
    command,
    flag_settings,
    naming_options,
    output_options,
)
from topograph_slurm.errors import Exit


@command()
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@click.option(
    "--drift",
    "bench_drift",
    type=FiniteFloatRange(min=0, min_open=True),
    default=DEFAULT_THRESHOLD,
    show_default=True,
    metavar="FRACTION",
    help="With two bench records: a level median that moved more than this fraction is a "
    "change (bench's --drift default).",
)
@output_options("json", "templates")
@SLURM_VERSION
@naming_options
@click.pass_context
def diff(
    ctx: click.Context,
    /,
    old: str,
    new: str,
    rewrites: Sequence[str],
    bench_drift: float,
    as_json: bool,
    **flags: Any,
) -> None:
    """Say what changed between two fabrics: nodes appeared or vanished, cables moved (a node
    to another leaf, block or NVLink domain; a rail to another switch port), rail disagreement
    appeared or healed, links degraded or restored (per cable), switches added or removed,
    blocks and BlockSizes changed. When both inputs carry a bench record (`bench --out-dir`), also
    each level's median busbw before and after (beyond --drift: a change), and slow nodes and
    slow links that appeared or cleared.

    OLD and NEW are each an ibnetdiscover dump, a `collect` snapshot directory, sim:SPEC (a
    simulated fabric), one of our topology.conf/topology.yaml files, the fabric summary
    `generate -o FILE` keeps in its state directory (STATE_DIR/FILE-HASH.fabric.json; as root
    /var/lib/topograph-slurm), or a bench.json (a record
    alone: no fabric facts). A topology file shows only
    nodes, their leaves and blocks, and BlockSizes; what the two inputs cannot both show is
    listed as not compared.

    Exit 0 when nothing changed, 1 when something did, 3 when an input cannot be read.

    \b
    Examples:
      topograph-slurm diff yesterday.txt today.txt
      topograph-slurm diff /var/lib/topograph-slurm/topology.conf-*.fabric.json today.txt --json
      topograph-slurm diff /etc/slurm/topology.conf /var/lib/topograph/snap
      topograph-slurm diff sim:nodes=64 sim:nodes=64,degraded=2,disagree=5
      topograph-slurm diff /var/lib/topograph/bench-monday /var/lib/topograph/bench-today
    """
    from topograph_slurm.app.diff import compare
    from topograph_slurm.render.diff import render_drift

    flags.pop("templates")
    settings = flag_settings(ctx, rewrites, **flags)
    result = compare(old, new, settings, warn, bench_drift)
    show(render_drift(environment(ctx), result, "json" if as_json else "text"))
    ctx.exit(Exit.DIFFERS if result.changed else Exit.OK)
