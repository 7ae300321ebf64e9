"""The node side of ``topograph-slurm record``: the commands Slurm's Prolog, Epilog and
TaskProlog run on every node. Until the ``record`` group holds them they live under a
``record-node`` group of their own (``record-node start|end|binding``).

The hooks' failure policy: a hook never fails a job or a node for its own trouble. It
writes what it can, says what went wrong in one stderr line (slurmd's log) and exits 0; only
a job id or node name that is not one is a usage error (exit 2), since nothing could be
written under it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from topograph_slurm.cli.options import flag_settings, warn
from topograph_slurm.errors import Exit, TopographError, UsageError

F = TypeVar("F", bound=Callable[..., Any])


def _hook_options(func: F) -> F:
    for option in reversed(
        (
            click.option("--job", metavar="ID", help="The job id (default: $SLURM_JOB_ID)."),
            click.option(
                "--node",
                metavar="NAME",
                help="This node's Slurm name (default: $SLURMD_NODENAME, else the short host "
                "name).",
            ),
            click.option(
                "--record-dir",
                metavar="DIR",
                help="Where the job records are (default: <state dir>/records; a file system "
                "the controller and the nodes share).",
            ),
        )
    ):
        func = option(func)
    return func


_SYSFS = click.option(
    "--sysfs",
    "infiniband_sysfs",
    metavar="DIR",
    help="The InfiniBand sysfs tree (default /sys/class/infiniband).",
)


@click.group("record-node")
def record_node() -> None:
    """The job record's node parts: link counters before and after a job (Prolog, Epilog)
    and each task's CPU/GPU binding check (TaskProlog). Parts go to
    <record-dir>/job-<ID>.d/. Every hook exits 0 on its own trouble (one line on stderr)."""


@record_node.command("start")
@_hook_options
@_SYSFS
@click.pass_context
def node_start(ctx: click.Context, /, job: str | None, node: str | None, **flags: Any) -> None:
    """Prolog (root, every node): keep this node's HCA port counters, rates and states (and
    NVLink error counters where nvidia-smi exists) as <node>.start.json.

    \b
    slurm.conf:  PrologFlags=Alloc   (the Prolog on every node at job start, not at its
                                      first step there)
                 Prolog=/etc/slurm/prolog.sh   (runs: topograph-slurm record-node start)
    """
    from topograph_slurm.app.record_node import node_start

    where = _hook(ctx, job, node, flags)
    owner = _uid(os.environ.get("SLURM_JOB_UID", ""))
    _never_fail("record-node start", lambda: node_start(_settings(ctx, flags), where, owner))


@record_node.command("end")
@_hook_options
@_SYSFS
@click.pass_context
def node_end(ctx: click.Context, /, job: str | None, node: str | None, **flags: Any) -> None:
    """Epilog (root, every node): read the counters again and write <node>.end.json naming
    every link whose error counters rose, whose width or speed dropped, that left
    ACTIVE/LinkUp or was gone (link-errors-during-job, link-degraded-during-job,
    nvlink-errors-during-job); `health --job-records` takes them.

    \b
    slurm.conf:  Epilog=/etc/slurm/epilog.sh   (runs: topograph-slurm record-node end)
    """
    from topograph_slurm.app.record_node import node_end

    where = _hook(ctx, job, node, flags)
    _never_fail("record-node end", lambda: node_end(_settings(ctx, flags), where))


@record_node.command("binding")
@_hook_options
@click.option(
    "--topo-matrix",
    "record_topo_matrix",
    metavar="FILE",
    help="This node's `nvidia-smi topo -m` capture (default: the record_topo_matrix key).",
)
@click.pass_context
def task_binding(ctx: click.Context, /, job: str | None, node: str | None, **flags: Any) -> None:
    """TaskProlog (every task, as the job's user): compare this task's allowed CPUs with the
    CPU affinity of the GPUs in its CUDA_VISIBLE_DEVICES; print
    `export TOPOGRAPH_BINDING=<status>` (ok, far-numa, spans-numa, unbound, no-gpu, unknown)
    and write task-<step>.<proc>.json (a binding-far-numa or binding-spans-numa finding when
    it is one). Never fails the task.
    """
    from topograph_slurm.app.record_node import task_binding, write_task
    from topograph_slurm.render.environment import environment
    from topograph_slurm.render.record_node import binding_exports

    where = _hook(ctx, job, node, flags)
    status = "unknown"
    try:
        settings = _settings(ctx, flags)
        found, path = task_binding(settings, where, os.environ)
        status = found.status
        env = environment(Path(settings.templates) if settings.templates else None)
        click.echo(binding_exports(env, status), nl=False)
        write_task(where, found, path)
    except (TopographError, OSError) as err:
        warn(f"record-node binding: {_reason(err)} (exported TOPOGRAPH_BINDING={status})")
        if status == "unknown":
            click.echo("export TOPOGRAPH_BINDING=unknown")


def _settings(ctx: click.Context, flags: dict[str, Any]) -> Any:
    return flag_settings(ctx, (), **flags)


def _hook(ctx: click.Context, /, job: str | None, node: str | None, flags: dict[str, Any]) -> Any:
    """Which job and node: a bad one is the one failure a hook reports (exit 2)."""
    from topograph_slurm.app.record_node import hook

    try:
        return hook(_settings(ctx, flags), job, node, os.environ)
    except UsageError:
        raise
    except TopographError as err:  # a broken config file: nothing to write with, still exit 0
        warn(f"record-node: {err}")
        ctx.exit(Exit.OK)


def _never_fail(what: str, run: Callable[[], object]) -> None:
    try:
        run()
    except (TopographError, OSError) as err:
        warn(f"{what}: {_reason(err)}")


def _reason(err: Exception) -> str:
    return err.strerror or str(err) if isinstance(err, OSError) else str(err)


def _uid(text: str) -> int | None:
    from topograph_slurm.model.numbers import natural

    return natural(text)
