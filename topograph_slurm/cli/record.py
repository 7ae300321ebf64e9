"""``topograph-slurm record``: the job's topology record, written by a Slurm hook at job start
(``start``), exported to every task with its binding check (``task``), its nodes' link
counters before and after (``node-start``, ``node-end``: cli/record_node.py), shown and
compared (``show``, ``diff``)."""

from __future__ import annotations

import os
from typing import Any

import click

from topograph_slurm.app import record
from topograph_slurm.cli.display import environment, show, warn
from topograph_slurm.cli.hook_runner import never_fail
from topograph_slurm.cli.options import (
    BENCH,
    FABRIC_HEADING,
    HOOK_HEADING,
    JOB_ID,
    RECORD_DIR,
    TOPOLOGY,
    Group,
    config_settings,
    fabric_options,
    flag_settings,
    grouped,
    job_or_environment,
    output_options,
)
from topograph_slurm.cli.record_node import BINDING_OPTIONS, binding_exports, node_end, node_start
from topograph_slurm.errors import Exit, TopographError, UsageError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.record import REFUSALS

RECORD_INCOMPLETE = FindingKind.RECORD_INCOMPLETE
#: The hooks' JOBID: positional, from $SLURM_JOB_ID as Slurm gives it; ``--job`` the old way.
JOB_ALIAS = {"--job": ""}


@click.group("record", cls=Group)
def record_group() -> None:
    """The job's topology record: where its nodes sit, how its TP/PP groups cross the
    fabric, what is unhealthy on its paths, a fingerprint of it all (docs/record.md).

    \b
    slurm.conf (each a script calling the command with the site's --config):
      PrologSlurmctld=...  topograph-slurm record start       (the record, the gate)
      TaskProlog=...       topograph-slurm record task        (export TOPOGRAPH_* lines)
      PrologFlags=Alloc
      Prolog=...           topograph-slurm record node-start  (link counters at start)
      Epilog=...           topograph-slurm record node-end    (what rose during the job)
    """


@record_group.command("start", aliases=JOB_ALIAS)
@JOB_ID
@click.option(
    "--refuse",
    "record_refuse",
    type=click.Choice(REFUSALS),
    multiple=True,
    help="The gate (config record_refuse): tp-crossing refuses a job whose TP groups cross "
    "their home: it is requeued and held (scontrol requeuehold, exit 0), or, when the hold "
    "fails, exit 11 so that Slurm requeues it; the record is written anyway.",
)
@TOPOLOGY
@fabric_options
@grouped(FABRIC_HEADING, [BENCH])
@grouped(HOOK_HEADING, [RECORD_DIR])
@click.pass_context
@never_fail("start")
def start(
    ctx: click.Context, /, job_id: str | None, topology: str | None, bench: str | None, **flags: Any
) -> None:
    """Write the job's record, <record_dir>/job-<JOBID>.json, once per job start (a
    requeued job's replaces it; SLURM_JOB_RESTART_COUNT is in it). For PrologSlurmctld.

    What cannot be learned (Slurm, the fabric, the bench record) becomes a record-incomplete
    finding; the hook then says so in one line and exits 0: it never fails a job for its
    own trouble (a broken config, an untrusted or unwritable record_dir, a job id that is no
    number: nothing is written then), whatever it is (cli/hook_runner.py). A job the gate
    refuses (--refuse tp-crossing; explain's line on stderr) is requeued and held, exit 0;
    exit 11 only when the hold fails, so that Slurm requeues it.

    JOBID defaults to $SLURM_JOB_ID, as PrologSlurmctld gets it. --topology FILE's sha256
    goes into the record, and the job is placed on it when no fabric source is configured
    (else on the topology slurmctld runs).
    """
    from topograph_slurm.model.numbers import natural

    job_id = record.check_job_id(_job(job_id))
    flags["record_refuse"] = list(flags["record_refuse"])
    flags["record_bench"] = bench
    settings = flag_settings(ctx, flags.pop("rewrites"), **flags)
    env = os.environ
    request = record.StartRequest(
        job_id,
        env.get("SLURM_JOB_RESTART_COUNT", ""),
        topology,
        natural(env.get("SLURM_JOB_UID", "")),
    )
    started = record.start(settings, request, warn)
    troubles = [f.message for f in started.record.findings if f.kind == RECORD_INCOMPLETE]
    if started.trouble:
        troubles.append(started.trouble)
    if troubles:  # one line, whatever went wrong: the hook's log stays readable
        warn(f"job {job_id}: {'; '.join(troubles)}")
    if started.refused:
        click.echo(f"topograph-slurm: job {job_id} refused: {started.refused}", err=True)
        # held: exit 0, or Slurm requeues the held job a second time (docs/record.md)
        ctx.exit(Exit.OK if started.held else Exit.JOB_REFUSED)
    ctx.exit(Exit.OK)


@record_group.command("task", aliases={**JOB_ALIAS, "--node": "--this-node"})
@JOB_ID
@grouped(HOOK_HEADING, [RECORD_DIR, *BINDING_OPTIONS])
@click.pass_context
@never_fail("task")
def task(
    ctx: click.Context,
    /,
    job_id: str | None,
    record_dir: str | None,
    node: str | None,
    record_topo_matrix: str | None,
) -> None:
    """Print the job record's TOPOGRAPH_* values as `export NAME=value` lines, the
    TaskProlog protocol that puts them in the task's environment, and this task's binding
    check (TOPOGRAPH_BINDING: its CPUs against the CPU affinity of its GPUs in this node's
    topo -m; job-<JOBID>.d/tasks/task-<step>.<proc>.json). For TaskProlog. It reads only the
    small job-<JOBID>.exports that record start wrote, written by root or the record's writer.

    Without a readable record (or config) it prints `export TOPOGRAPH_RECORD_MISSING=1`,
    says why in one line on stderr and exits 0: the task always runs.
    """
    from topograph_slurm.app.record_node import this_node
    from topograph_slurm.render import record as text

    job_id = job_or_environment(job_id) or ""
    troubles, variables, env = [], text.MISSING, None
    try:
        settings = flag_settings(
            ctx, (), record_dir=record_dir, record_topo_matrix=record_topo_matrix
        )
        env = environment(ctx)  # the config's templates (a missing directory: its trouble)
    except TopographError as err:  # a broken config never fails the task
        settings, troubles = None, [str(err)]
    if settings is not None:
        try:
            here = this_node(node, os.environ)
            variables = record.task_exports(settings, job_id, here)[1]
        except TopographError as err:  # nor does a missing or broken record
            troubles.append(str(err))
    binding, trouble = binding_exports(settings, env, job_id or None, node)
    troubles += [trouble] if trouble else []
    if troubles:  # one line, whatever went wrong: the hook's log stays readable
        warn(f"job {job_id or '(no SLURM_JOB_ID)'}: {'; '.join(troubles)}")
    show(text.render_exports(env, variables) + binding)


@record_group.command("show")
@click.argument("spec", metavar="JOBID|FILE")
@output_options("json", "templates")
@grouped(HOOK_HEADING, [RECORD_DIR])
@click.pass_context
def show_command(
    ctx: click.Context, /, spec: str, record_dir: str | None, as_json: bool, templates: str | None
) -> None:
    """Show a job's record (a job id in record_dir, or a record file), with what its nodes'
    Epilogs found (links that degraded or took errors during the job) and each task's
    binding check, from job-<JOBID>.d/ beside it. Exit 3 when the record is missing or
    unreadable; --json prints the job record's JSON only, as stored."""
    from topograph_slurm.render.record import render_show

    env = environment(ctx)
    found, parts = record.read_side(_settings(ctx, record_dir), spec)
    show(render_show(env, found, parts, spec, "json" if as_json else "text"))


@record_group.command("diff")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@output_options("json", "templates")
@grouped(HOOK_HEADING, [RECORD_DIR])
@click.pass_context
def diff(
    ctx: click.Context,
    /,
    a: str,
    b: str,
    record_dir: str | None,
    as_json: bool,
    templates: str | None,
) -> None:
    """Why two runs of one config may differ: compare two job records (job ids or files).

    Marked `*`, what matters for speed: the layout, how many leaves/blocks/spines the job
    spans, crossings per kind and level, the problems on its paths, a bench median that
    moved more than 10%, links that degraded during the job, the tasks' binding statuses.
    Unmarked: other node or unit names, another fingerprint or topology file. Exit 0 when
    nothing that matters differs, 1 when something does, 3 for an unreadable record.
    """
    from topograph_slurm.render.record import render_diff

    env = environment(ctx)
    found = record.compare(_settings(ctx, record_dir), a, b)
    show(render_diff(env, found, "json" if as_json else "text"))
    ctx.exit(Exit.DIFFERS if found.matters else Exit.OK)


def _job(job_id: str | None) -> str:
    """JOBID, else $SLURM_JOB_ID (the hook's); a usage error (one line, exit 0) without."""
    found = job_or_environment(job_id)
    if not found:
        raise UsageError("no JOBID and no $SLURM_JOB_ID: not run by Slurm's PrologSlurmctld?")
    return found


def _settings(ctx: click.Context, record_dir: str | None) -> Any:
    from topograph_slurm.config import override

    return override(config_settings(ctx), record_dir=record_dir)


record_group.add_command(node_start)
record_group.add_command(node_end)
