"""Fan-out collection: run the fabric commands on many nodes, keep every answer in a snapshot.

``topograph-slurm collect`` runs ``nvidia-smi`` (CSV fabric query, ``-q``, ``topo -m``) on every
node — and ``ibnetdiscover`` on one node when asked — and stores the raw outputs in a snapshot
directory that ``generate --snapshot DIR`` reads later (``sources.snapshot``, which also
describes the layout). Cron collects; CI regenerates from a committed snapshot without
touching the cluster. Collection decides nothing about the topology.

The parts: ``plan`` (what to run where, and the results), ``protocol`` (the script run on the
node and its framed output), ``transport`` (srun or ClusterShell, and why each), and here
:func:`collect` itself.

A node that fails (non-zero exit, timeout, unreachable, garbage) is recorded in the manifest
with its exit code, error and stderr tail, and never stops the run. A run where *no* node
answered is an error and the previous snapshot is kept, since replacing a good snapshot with
an empty one would make the next ``generate`` strand every node.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from topograph_slurm.collect.plan import (
    CollectOutcome,
    CollectPlan,
    CommandResult,
    check_key,
    now_iso,
)
from topograph_slurm.collect.protocol import new_marker, node_script, parse_framed
from topograph_slurm.collect.transport import (
    TRANSPORTS,
    NodeRun,
    OnDone,
    check_transport,
    terminate_live,
)
from topograph_slurm.errors import CollectError
from topograph_slurm.output import write_directory, write_file
from topograph_slurm.sources.snapshot import (
    FABRIC_DIR,
    FACTS_FILE,
    IBNETDISCOVER_FILE,
    IBNETDISCOVER_KEY,
    MANIFEST,
    NODES_DIR,
    SNAPSHOT_FORMAT,
    SNAPSHOT_VERSION,
    check_node_name,
    snapshot_facts,
)

STDERR_TAIL = 2000  # characters of stderr kept per command in the manifest


def _no_progress(node: str) -> None:
    """The default progress callback: nobody is watching."""


# --------------------------------------------------------------------------- results


def _tail(text: str, limit: int = STDERR_TAIL) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def _results_for(
    run: NodeRun, commands: Mapping[str, Sequence[str]], marker: str
) -> list[CommandResult]:
    """Turn one node's transport output into one result per command."""
    framed = parse_framed(run.stdout, marker)
    results = []
    for key, argv in commands.items():
        got = framed.get(key)
        result = CommandResult(
            run.node, key, list(argv), None, round(run.duration, 3), run.timestamp
        )
        if got is not None:
            result.exit_code = got.exit_code
            result.stdout = got.stdout
            result.stderr_tail = _tail(got.stderr)
            if got.duration is not None:
                result.duration = round(got.duration, 3)
            if got.exit_code == 124:
                result.timed_out = True
                result.error = "timed out on the node"
            elif got.exit_code != 0:
                result.error = f"exit code {got.exit_code}"
        else:
            result.exit_code = run.exit_code
            result.timed_out = run.timed_out
            result.stderr_tail = _tail(run.stderr)
            result.error = _transport_error(run)
        results.append(result)
    return results


def _why(result: CommandResult) -> str:
    """A failed result's error and the last line its stderr ended with: ssh's own reason
    ("Could not resolve hostname …", "Permission denied …") when the transport failed."""
    last = (result.stderr_tail or "").strip().splitlines()
    return f"{result.error}: {last[-1].strip()}" if last else str(result.error)


def _transport_error(run: NodeRun) -> str:
    """Why a command left no frame: the node timed out, the transport failed, or it died."""
    if run.error:
        return run.error
    if run.timed_out:
        return f"no answer within the timeout ({run.duration:.0f}s); transport stopped"
    if run.exit_code not in (0, None):
        return f"transport exited {run.exit_code} before the command reported"
    return "no output from the node script (truncated or not run)"


# --------------------------------------------------------------------------- snapshot writing


def _node_file(node: str, key: str) -> str:
    return f"{NODES_DIR}/{check_node_name(node)}/{check_key(key)}.txt"


def is_snapshot_or_empty(path: Path) -> bool:
    """Whether *path* may be replaced by a snapshot: absent, empty, or a snapshot."""
    if not path.exists():
        return True
    if not path.is_dir():
        return False
    return (path / MANIFEST).is_file() or not any(path.iterdir())


def write_snapshot(
    dest: Path,
    manifest: dict[str, Any],
    files: Mapping[str, str],
    state_dir: Path | None = None,
) -> Path:
    """Write *files* and the manifest as the snapshot *dest*, atomically as a whole
    (``output.write_directory``, under *dest*'s lock in *state_dir* when given). *dest* must
    be a snapshot or empty — ``--snapshot /etc`` must never move /etc aside."""
    tree = {**files, MANIFEST: json.dumps(manifest, indent=2, sort_keys=True) + "\n"}
    return write_directory(
        dest, tree, replaceable=is_snapshot_or_empty, what="snapshot", state_dir=state_dir
    )


# --------------------------------------------------------------------------- collect


def _run_all(
    plan: CollectPlan,
    nodes: Sequence[str],
    commands: Mapping[str, Sequence[str]],
    timeout: float,
    on_done: OnDone,
) -> list[CommandResult]:
    marker = new_marker()
    script = node_script(commands, timeout, marker)
    runs = TRANSPORTS[plan.via](plan, nodes, script, timeout, on_done)
    return [r for run in runs for r in _results_for(run, commands, marker)]


def _manifest(
    plan: CollectPlan,
    results: list[CommandResult],
    fabric: CommandResult | None,
    started: str,
    duration: float,
) -> dict[str, Any]:
    return {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "created": started,
        "duration": round(duration, 3),
        "via": plan.via,
        "srun_mode": plan.srun_mode if plan.via == "srun" else None,
        "nodes": list(plan.nodes),
        "commands": {key: shlex.join(argv) for key, argv in plan.commands.items()},
        "timeout": plan.timeout,
        "fanout": plan.fanout,
        "results": [r.manifest_entry() for r in results],
        "fabric": fabric.manifest_entry() if fabric else None,
    }


def _fan_out(
    plan: CollectPlan, on_progress: OnDone
) -> tuple[list[CommandResult], CommandResult | None]:
    """Node commands, then ibnetdiscover on its node; running sruns stop on any error."""
    if not plan.nodes and not plan.ibnetdiscover_on:
        return [], None
    check_transport(plan.via)
    try:
        results = (
            _run_all(plan, plan.nodes, plan.commands, plan.timeout, on_progress)
            if plan.nodes
            else []
        )
        fabric = None
        if plan.ibnetdiscover_on:
            cmds = {IBNETDISCOVER_KEY: plan.ibnetdiscover_command}
            node = check_node_name(plan.ibnetdiscover_on)
            fabric = _run_all(plan, [node], cmds, plan.ibnetdiscover_timeout, on_progress)[0]
    except BaseException:
        terminate_live()
        raise
    return results, fabric


def collect(
    plan: CollectPlan,
    dest: Path,
    *,
    on_progress: OnDone | None = None,
    extra_files: Mapping[str, str] | None = None,
    extra_manifest: Mapping[str, Any] | None = None,
    state_dir: Path | None = None,
) -> CollectOutcome:
    """Run the plan and write the snapshot to *dest* atomically; see the module doc.

    *extra_files* (snapshot-relative path → text) and *extra_manifest* keys go into the same
    snapshot — e.g. UFM's REST responses (``sources.ufm.snapshot_files``), fetched by the
    caller first so a refused login writes nothing. With extra files, *plan* may have no nodes.
    *state_dir* holds the snapshot's lock (:func:`write_snapshot`).

    *on_progress* is called with each node's name as it finishes (once per node of the plan,
    once more for the ibnetdiscover node). Raises CollectError when not a single node answered
    (the old snapshot stays), OutputError when *dest* cannot be written.
    """
    for node in plan.nodes:
        check_node_name(node)
    if not plan.nodes and not plan.ibnetdiscover_on and not extra_files:
        raise CollectError("no nodes to collect from")
    started, t0 = now_iso(), time.monotonic()
    results, fabric = _fan_out(plan, on_progress or _no_progress)
    files: dict[str, str] = dict(extra_files or {})
    for result in results:
        if result.ok:
            result.file = _node_file(result.node, result.command)
            files[result.file] = result.stdout
    if fabric is not None and fabric.ok:
        fabric.file = f"{FABRIC_DIR}/{IBNETDISCOVER_FILE}"
        files[fabric.file] = fabric.stdout
    duration = time.monotonic() - t0
    answered = any(r.ok for r in results) or bool(fabric and fabric.ok)
    if (results or fabric) and not answered and not extra_files:
        first = next((r for r in [*results, *([fabric] if fabric else [])] if r.error), None)
        why = f" (first: {first.node} {first.command}: {_why(first)})" if first else ""
        raise CollectError(
            f"no node answered any command{why}; the previous snapshot at {dest} is kept"
        )
    manifest = _manifest(plan, results, fabric, started, duration)
    manifest.update(extra_manifest or {})
    write_snapshot(dest, manifest, files, state_dir)
    write_file(dest / FACTS_FILE, snapshot_facts(dest))
    return CollectOutcome(dest, results, fabric, duration)
