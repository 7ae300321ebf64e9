"""The node side of ``topograph-slurm record``: ``record node-start`` and ``record node-end``
(Slurm's Prolog and Epilog on every node), and the binding check ``record task`` adds to its
exports (the TaskProlog of every task).

The hooks' failure policy: a hook never fails a job or a node for its own trouble. It
writes what it can, says what went wrong in one stderr line (slurmd's log) and exits 0
(cli/hook_runner.py), a job id or node name that is not one included: nothing is written
under it then.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click
import jinja2

from topograph_slurm.cli.hook_runner import never_fail
from topograph_slurm.cli.options import (
    HOOK_HEADING,
    JOB_ID,
    RECORD_DIR,
    THIS_NODE,
    command,
    flag_settings,
    grouped,
)
from topograph_slurm.errors import TopographError

F = TypeVar("F", bound=Callable[..., Any])


#: The hooks' renamed flags: JOBID positional (from $SLURM_JOB_ID as Slurm gives it), the
#: node they run on ``--this-node``.
HOOK_ALIASES = {"--job": "", "--node": "--this-node"}


def _hook_options(func: F) -> F:
    return JOB_ID(grouped(HOOK_HEADING, [THIS_NODE, RECORD_DIR])(func))


_SYSFS = click.option(
    "--sysfs",
    "infiniband_sysfs",
    metavar="DIR",
    help="The InfiniBand sysfs tree (default /sys/class/infiniband).",
)


@command("node-start", aliases=HOOK_ALIASES)
@_hook_options
@_SYSFS
@click.pass_context
@never_fail("node-start")
def node_start(ctx: click.Context, /, job_id: str | None, node: str | None, **flags: Any) -> None:
    """Prolog (root, every node): keep this node's HCA port counters, rates and states (and
    NVLink error counters where nvidia-smi exists) as <node>.start.json.

    \b
    slurm.conf:  PrologFlags=Alloc   (the Prolog on every node at job start, not at its
                                      first step there)
                 Prolog=/etc/slurm/prolog.sh   (runs: topograph-slurm record node-start)
    """
    from topograph_slurm.app.record_node import node_start

    settings = _settings(ctx, flags)
    node_start(settings, _where(settings, job_id, node))


@command("node-end", aliases=HOOK_ALIASES)
@_hook_options
@_SYSFS
@click.pass_context
@never_fail("node-end")
def node_end(ctx: click.Context, /, job_id: str | None, node: str | None, **flags: Any) -> None:
    """Epilog (root, every node): read the counters again and write <node>.end.json naming
    every link whose error counters rose, whose width or speed dropped, that left
    ACTIVE/LinkUp or was gone (link-errors-during-job, link-degraded-during-job,
    nvlink-errors-during-job); `health --job-records` takes them.

    \b
    slurm.conf:  Epilog=/etc/slurm/epilog.sh   (runs: topograph-slurm record node-end)
    """
    from topograph_slurm.app.record_node import node_end

    settings = _settings(ctx, flags)
    node_end(settings, _where(settings, job_id, node))


#: ``record task``'s options for the binding check (the job's own come from the group).
BINDING_OPTIONS = (
    THIS_NODE,
    click.option(
        "--topo-matrix",
        "record_topo_matrix",
        metavar="FILE",
        help="This node's `nvidia-smi topo -m` capture ('-' = stdin), for the binding check "
        "(default: the record_topo_matrix key; none: TOPOGRAPH_BINDING=unknown).",
    ),
)


def binding_exports(
    settings: Any, env: jinja2.Environment | None, job: str | None, node: str | None
) -> tuple[str, str]:
    """This task's binding check as its export line (its CPUs vs the CPU affinity of its GPUs:
    ok, far-numa, spans-numa, unbound, no-gpu, unknown), with task-<step>.<proc>.json
    written (a binding-far-numa or binding-spans-numa finding when it is one), and what went
    wrong ("" when nothing). Never fails: undecided is TOPOGRAPH_BINDING=unknown; *settings*
    None (a broken config) is undecided."""
    from topograph_slurm.app.record_node import task_binding, write_task
    from topograph_slurm.render.record_node import binding_exports as render

    status = "unknown"
    line = "export TOPOGRAPH_BINDING=unknown\n"
    if settings is None or env is None:
        return line, ""
    try:
        where = _where(settings, job, node)
        found, path = task_binding(settings, where, os.environ)
        status = found.status
        line = render(env, status)
        write_task(settings, where, found, path)
    except (TopographError, OSError) as err:
        return line, f"binding: {_reason(err)} (exported TOPOGRAPH_BINDING={status})"
    return line, ""


def _settings(ctx: click.Context, flags: dict[str, Any]) -> Any:
    return flag_settings(ctx, (), **flags)


def _where(settings: Any, job: str | None, node: str | None) -> Any:
    from topograph_slurm.app.record_node import hook

    return hook(settings, job, node, os.environ)


def _reason(err: Exception) -> str:
    return err.strerror or str(err) if isinstance(err, OSError) else str(err)
