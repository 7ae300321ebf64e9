"""doctor: flags → settings → app.doctor → text or JSON → exit 1 on any fail."""

from __future__ import annotations

import click

from topograph_slurm.cli.display import environment, show
from topograph_slurm.cli.options import (
    SLURM_HEADING,
    SLURM_STATE,
    command,
    flag_settings,
    grouped,
    output_options,
    these_nodes,
)
from topograph_slurm.errors import Exit


@command("doctor")
@grouped(SLURM_HEADING, [SLURM_STATE])
@click.option(
    "--via",
    type=click.Choice(["srun", "clush"]),
    default="srun",
    show_default=True,
    help="How --nodes are reached (as collect reaches them).",
)
@these_nodes("Also compare the topograph-slurm release on these compute nodes with this one's.")
@output_options("json", "templates")
@click.pass_context
def doctor(
    ctx: click.Context,
    /,
    slurm_state: str | None,
    hostlist: str | None,
    via: str,
    as_json: bool,
    templates: str | None,
) -> None:
    """Check that the Slurm side is wired for what this tool makes: the topology plugin and
    file, rank order, the filters and SPANK plugin, the job-record hooks, PrologFlags, the
    record directory, the hourly run and its last result. Read-only. Each check prints ok,
    warn or fail with the line that fixes it. Exit 0 without a fail (warnings included),
    1 with any. With --slurm-state DIR the files scontrol show config names are read at
    their paths below DIR (docs/doctor.md).

    \b
      topograph-slurm doctor
      topograph-slurm doctor --slurm-state ./ctl-state --json
    """
    from topograph_slurm.app.doctor import doctor as run_doctor
    from topograph_slurm.app.doctor import node_versions
    from topograph_slurm.model.names import expand
    from topograph_slurm.render.doctor import render_doctor

    settings = flag_settings(ctx, (), slurm_state=slurm_state)
    versions = node_versions(expand(hostlist, "--nodes"), via) if hostlist else None
    report = run_doctor(settings, versions)
    show(render_doctor(environment(ctx), report, as_json))
    ctx.exit(Exit.DIFFERS if report.failed else Exit.OK)
