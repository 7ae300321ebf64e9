"""``topograph-slurm hooks install``: write the four record hook scripts Slurm runs, make the
record root, print the slurm.conf lines naming them; ``--check`` says whether what is
installed is current (exit 1 when not)."""

from __future__ import annotations

import os
import shutil

import click

from topograph_slurm.cli.display import environment, show
from topograph_slurm.cli.options import (
    HOOK_HEADING,
    RECORD_DIR,
    TOPOLOGY,
    Group,
    flag_settings,
    grouped,
    output_options,
)
from topograph_slurm.errors import Exit, UsageError


@click.group("hooks", cls=Group)
def hooks_group() -> None:
    """The job record's Slurm hooks (docs/record.md): installed by the tool, never failing a
    job or a node."""


@hooks_group.command("install")
@click.option(
    "--dir",
    "directory",
    default="/etc/slurm",
    show_default=True,
    metavar="DIR",
    help="Where the four scripts go (every host's copy of it: the controller runs "
    "PrologSlurmctld, the nodes the others).",
)
@click.option(
    "--binary",
    metavar="PATH",
    help="The tool's absolute path on every host (default: topograph-slurm on PATH).",
)
@click.option(
    "--owner",
    default="root",
    show_default=True,
    metavar="USER",
    help="The record root's owner: slurm.conf's SlurmUser, who writes the job records.",
)
@grouped(HOOK_HEADING, [RECORD_DIR, TOPOLOGY])
@output_options("check", "templates")
@click.pass_context
def install(
    ctx: click.Context,
    /,
    directory: str,
    record_dir: str | None,
    binary: str | None,
    owner: str,
    topology: str | None,
    check: bool,
    templates: str | None,
) -> None:
    """Write the record hooks as Slurm runs them: #!/bin/sh scripts (mode 0755) that call the
    tool by its absolute path with this --config, under a deadline, and turn every exit but
    the gate's (11) into 0, so a broken or missing tool never requeues a job or drains a
    node. Make the record root (mode 0755, owned by --owner) and print the slurm.conf lines.
    --topology is the file record start reads in the hooks (its sha256 goes in the record);
    --check writes nothing and exits 1 unless all is current.
    """
    from topograph_slurm.app import hooks
    from topograph_slurm.config import DEFAULT_CONFIG, config_path
    from topograph_slurm.config import record_dir as default_dir
    from topograph_slurm.render.hooks import check_text

    settings = flag_settings(ctx, (), templates=templates)  # the scripts honour --templates
    path, _ = config_path(ctx.obj.get("config_file"))
    request = hooks.InstallRequest(
        directory,
        binary or _binary(),
        os.path.abspath(path) if path != DEFAULT_CONFIG else str(DEFAULT_CONFIG),
        record_dir or str(default_dir(settings)),
        owner,
        topology,
    )
    found = hooks.check(settings, request) if check else hooks.install(settings, request)
    show(check_text(environment(ctx), found))
    if not check:
        show("\nslurm.conf (every host):\n")
        show(hooks.slurm_conf_lines(settings, request))
    fine = (hooks.OK, hooks.WROTE)
    ctx.exit(Exit.OK if all(item.state in fine for item in found) else Exit.DIFFERS)


def _binary() -> str:
    found = shutil.which("topograph-slurm")
    if not found:
        raise UsageError("topograph-slurm is not on PATH here: name it with --binary PATH")
    return os.path.abspath(found)
