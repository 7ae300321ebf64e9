"""``hooks install``: the four record hook scripts Slurm runs (templates/hook.sh.j2), the
slurm.conf lines naming them (templates/hooks.slurm.conf.j2) and the check of what is
installed (templates/hooks.check.txt.j2). Which hook is which, and each one's deadline, is
decided here; their shell syntax is the template's."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import jinja2

from topograph_slurm.errors import Exit, UsageError
from topograph_slurm.model.record import HOOK_DEADLINES, HOOK_GRACE
from topograph_slurm.render.environment import render

_PLAIN_PATH = re.compile(r"\A/[A-Za-z0-9_./+-]*\Z")


@dataclass(frozen=True, slots=True)
class HookScript:
    """One hook: its script's file name, the slurm.conf key naming it, the ``record``
    subcommand it runs, as whom and where its stderr goes, whether the gate may refuse,
    and the fixed arguments it passes (``--topology FILE`` for start)."""

    name: str
    slurm_key: str
    command: str
    runs_as: str
    log: str
    gate: bool = False
    args: tuple[str, ...] = ()
    path: str = ""


#: The four hooks, in slurm.conf order.
HOOKS = (
    HookScript(
        "topograph-record-start.sh",
        "PrologSlurmctld",
        "start",
        "slurmctld as SlurmUser, once per job start",
        "slurmctld's log",
        gate=True,
    ),
    HookScript(
        "topograph-record-task.sh",
        "TaskProlog",
        "task",
        "slurmstepd as the job's user, before every task",
        "slurmd's log",
    ),
    HookScript(
        "topograph-record-node-start.sh",
        "Prolog",
        "node-start",
        "slurmd as root, every node at job start (PrologFlags=Alloc)",
        "slurmd's log",
    ),
    HookScript(
        "topograph-record-node-end.sh",
        "Epilog",
        "node-end",
        "slurmd as root, every node at job end",
        "slurmd's log",
    ),
)


def check_path(flag: str, value: str) -> str:
    """An absolute path of plain characters: it lands in a script and slurm.conf, where a
    blank or a quote would split or end it."""
    if not _PLAIN_PATH.match(value) or "/../" in value + "/":
        raise UsageError(f"{flag} {value!r}: an absolute path of letters, digits and _./+- only")
    return value


def scripts(
    env: jinja2.Environment, binary: str, config: str, directory: str, topology: str | None
) -> dict[str, str]:
    """Each hook script's text by file name."""
    out = {}
    for hook in located(directory, topology):
        out[hook.name] = render(
            env,
            "hook.sh.j2",
            hook=hook,
            binary=binary,
            config=config,
            gate=int(Exit.JOB_REFUSED),
            deadline=HOOK_DEADLINES[hook.command],
            grace=HOOK_GRACE,
        )
    return out


def located(directory: str, topology: str | None) -> list[HookScript]:
    """The hooks with their scripts' paths in *directory* (and start's ``--topology``)."""
    from dataclasses import replace

    found = []
    for hook in HOOKS:
        args = ("--topology", topology) if topology and hook.command == "start" else ()
        found.append(replace(hook, path=f"{directory.rstrip('/')}/{hook.name}", args=args))
    return found


def slurm_conf(env: jinja2.Environment, hooks: Sequence[HookScript]) -> str:
    """The slurm.conf lines naming the scripts."""
    return render(env, "hooks.slurm.conf.j2", hooks=hooks)


def check_text(env: jinja2.Environment, items: Sequence[object]) -> str:
    """One line per installed piece: ok, stale, missing or wrong, and why."""
    return render(env, "hooks.check.txt.j2", items=items)
