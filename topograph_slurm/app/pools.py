"""``pools``' use case: a job's nodes (as ``explain`` reads them) split into prefill and decode
instances on the fabric, with the health the fabric and a bench record show."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from topograph_slurm.analysis.placement.explain import PathFacts
from topograph_slurm.app.fabric import Warn
from topograph_slurm.app.placement import PlacedJob, prepare_job
from topograph_slurm.config import Settings, state_dir
from topograph_slurm.errors import CollectError, InputError, UsageError
from topograph_slurm.model.placement import MEGATRON_ORDER
from topograph_slurm.model.pools import (
    Deployment,
    PoolFeatures,
    PoolPlan,
    PoolSize,
    parse_ratio,
    parse_size,
)
from topograph_slurm.slurm.scontrol import NotInstalled, Scontrol

#: The job flags ``explain`` takes that pools do not: a deployment has no training layout.
_NO_LAYOUT = {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "etp": None, "rank_order": MEGATRON_ORDER}


@dataclass(frozen=True, slots=True)
class PoolRequest:
    """The flags as given: ``--prefill``, ``--decode`` (NxTP or TP), ``--ratio`` (P:D) and a
    bench record whose slow nodes and links count as problems."""

    prefill: str
    decode: str
    ratio: str | None = None
    bench: str | None = None


def prepare(
    settings: Settings,
    topology: str | None,
    job_id: str | None,
    job: Mapping[str, Any],
    bench: str | None,
    warn: Warn,
    partition: str | None = None,
) -> PlacedJob:
    """The job's nodes (or a *partition*'s, in name order) on the fabric view
    (:func:`.placement.prepare_job`), a bench record's findings added to the view's problems."""
    if partition:
        job = {**job, "hostlist": _partition_hostlist(settings, partition, job_id, job)}
    placed = prepare_job(settings, topology, job_id, {**job, **_NO_LAYOUT}, warn)
    record = bench or _snapshot_bench(settings)
    if record:
        from topograph_slurm.sources.snapshot import load_bench

        facts = placed.view.facts or PathFacts()
        for found in load_bench(record).findings:
            # a slow pair or path is a problem on each node it names
            for subject in (found.nodes or (found.subject,)) if found.is_problem else ():
                facts.problems.setdefault(subject, []).append(found)
        placed.view.facts = facts
    return placed


def _snapshot_bench(settings: Settings) -> str | None:
    """The snapshot's own bench record, when it has one."""
    from topograph_slurm.sources.snapshot import BENCH_FILE

    if settings.snapshot and (Path(settings.snapshot) / BENCH_FILE).is_file():
        return str(settings.snapshot)
    return None


def _partition_hostlist(
    settings: Settings, partition: str, job_id: str | None, job: Mapping[str, Any]
) -> str:
    from topograph_slurm.slurm.partitions import scontrol_partition_nodes

    if job_id or job.get("hostlist") or job.get("hostfile"):
        raise UsageError("give the nodes once: JOBID, --nodes, --hostfile or --partition")
    return ",".join(scontrol_partition_nodes(Scontrol.from_settings(settings), partition))


def deployment(request: PoolRequest, gpus_per_node: int, nodes: int) -> Deployment:
    """The deployment the flags ask for: counts given, or the most instances the nodes hold at
    ``--ratio``. A usage error for counts and a ratio together, or neither; and, with the
    closest feasible deployment, for one that needs more nodes than the job has."""
    from topograph_slurm.analysis.pools.deployment import closest, nodes_needed, with_ratio

    prefill, decode = (
        parse_size(request.prefill, "--prefill"),
        parse_size(request.decode, "--decode"),
    )
    counted = prefill[0] is not None and decode[0] is not None
    if request.ratio is not None and (prefill[0] is not None or decode[0] is not None):
        raise UsageError("give --ratio with TP sizes only (--prefill 8 --decode 16), not counts")
    if request.ratio is None and not counted:
        raise UsageError("give both counts (--prefill 4x8 --decode 2x16) or --ratio P:D")
    if request.ratio is not None:
        wanted = with_ratio(prefill[1], decode[1], parse_ratio(request.ratio), gpus_per_node, nodes)
    else:
        wanted = Deployment(
            PoolSize(prefill[0] or 1, prefill[1]), PoolSize(decode[0] or 1, decode[1])
        )
    need = nodes_needed(wanted, gpus_per_node)
    if need > nodes:
        near = closest(wanted, gpus_per_node, nodes)
        offer = (
            f"the closest feasible deployment is {near.text()} "
            f"({nodes_needed(near, gpus_per_node)} nodes)"
            if near
            else "not even one instance of each role fits"
        )
        raise UsageError(
            f"{wanted.text()} needs {need} nodes of {gpus_per_node} GPUs, the job has "
            f"{nodes}: {offer}"
        )
    return wanted


def plan_pools(job: PlacedJob, request: PoolRequest) -> PoolPlan:
    """The deployment placed on the job's nodes (:func:`.analysis.pools.place.place`)."""
    from topograph_slurm.analysis.pools.place import place

    wanted = deployment(request, job.gpus, len(job.order))
    return place(wanted, job.order, job.gpus, job.view.fmap, job.view.facts)


def write_out(
    env: jinja2.Environment,
    plan: PoolPlan,
    directory: str,
    settings: Settings,
    serving: Mapping[str, Any] | None = None,
) -> Path:
    """``--out-dir DIR``: the instances' hostfiles, the hetjob line, the plan and the launchers'
    files (*serving*: :func:`.render.serving.serving_context`), replacing the directory as a
    whole (a new one, an empty one, or one a previous run wrote: :func:`_ours_or_empty`),
    under its lock in the state directory."""
    from topograph_slurm.output import write_directory
    from topograph_slurm.render.pools import pools_files
    from topograph_slurm.render.serving import serving_files

    files = pools_files(env, plan)
    if serving is not None:
        files |= serving_files(env, serving)
    return write_directory(
        Path(directory),
        files,
        replaceable=_ours_or_empty,
        what="pools directory",
        state_dir=state_dir(settings),
        lock_timeout=settings.lock_timeout,
    )


def _ours_or_empty(path: Path) -> bool:
    """Absent, an empty directory, or one holding nothing but regular files its
    ``pools.json`` lists (:func:`.render.pools.out_files`, the launchers' files) and a
    ``dynamo/`` of its nodes' domain files: a hand-written pools.json beside a serve.sh or a
    notes/ directory makes it the user's, never replaced."""
    from topograph_slurm.render.pools import PLAN_FILE, out_files
    from topograph_slurm.render.serving import DYNAMO_DIR, serving_names
    from topograph_slurm.sources.pools_file import load_pools

    try:
        if not stat.S_ISDIR(path.lstat().st_mode):
            return False
        with os.scandir(path) as listing:
            entries = [(e.name, e.is_file(follow_symlinks=False)) for e in listing]
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not entries:
        return True
    files = {name for name, regular in entries if regular}
    if PLAN_FILE not in files or not {name for name, _ in entries} - files <= {DYNAMO_DIR}:
        return False
    try:
        listed = load_pools(str(path / PLAN_FILE)).instances
    except InputError:
        return False
    names = [instance.name for instance in listed]
    nodes = {node for instance in listed for node in instance.nodes}
    if len(files) < len(entries) and not _domain_tree(path / DYNAMO_DIR, nodes):
        return False
    return files <= out_files(names) | serving_names(names)


def _domain_tree(path: Path, nodes: set[str]) -> bool:
    """``dynamo/`` as pools writes it: a real directory of the listed nodes' directories, each
    holding nothing but domain files."""
    from topograph_slurm.render.serving import DOMAIN_FILES

    try:
        if not stat.S_ISDIR(path.lstat().st_mode):
            return False
        with os.scandir(path) as listing:
            found = [(e.name, e.is_dir(follow_symlinks=False)) for e in listing]
        for name, is_dir in found:
            if not is_dir or name not in nodes:
                return False
            with os.scandir(path / name) as inner:
                if any(
                    e.name not in DOMAIN_FILES or not e.is_file(follow_symlinks=False)
                    for e in inner
                ):
                    return False
    except OSError:
        return False
    return True


def check_file(
    settings: Settings, topology: str | None, path: str, job: Mapping[str, Any], warn: Warn
) -> PoolPlan:
    """``explain --pools FILE``: a running deployment's instances on the fabric view (its
    nodes from the file, GPUs per node as explain reads them), judged."""
    from topograph_slurm.analysis.pools.judge import check_running
    from topograph_slurm.model import names
    from topograph_slurm.sources.pools_file import load_pools

    if job.get("hostlist") or job.get("hostfile"):
        raise UsageError("explain --pools FILE reads the nodes from FILE: drop --nodes/--hostfile")
    running = load_pools(path)
    nodes = list(dict.fromkeys(node for one in running.instances for node in one.nodes))
    names.check(nodes, "node", path)
    flags = {**job, **_NO_LAYOUT, "hostlist": ",".join(nodes)}
    placed = prepare_job(settings, topology, None, flags, warn)
    return check_running(running, placed.gpus, placed.view.fmap, placed.view.facts)


def feature_lines(
    settings: Settings, env: jinja2.Environment, plan: PoolPlan, apply: bool
) -> PoolFeatures:
    """The ``scontrol update`` lines that give every Slurm node its pool feature (and take it
    from a node that left), against what Slurm holds now; health's rules. A dry run where
    Slurm cannot be asked (no scontrol here, no controller) still lists them, from nodes
    without features, and says why; ``--apply`` needs Slurm."""
    from topograph_slurm.analysis.pools.features import feature_changes
    from topograph_slurm.model.health import HealthPlan, SlurmNode
    from topograph_slurm.render.health import render_commands
    from topograph_slurm.slurm.nodes import scontrol_node_states

    asked, why = True, ""
    try:
        current = scontrol_node_states(Scontrol.from_settings(settings))
    except (CollectError, InputError) as err:
        if apply:
            raise
        asked, why = (
            False,
            "no scontrol on this host" if isinstance(err, NotInstalled) else str(err),
        )
        nodes = dict.fromkeys(node for one in plan.instances for node in one.nodes)
        current = [SlurmNode(name, 1, known=False) for name in nodes]
    changes = feature_changes(plan, current, settings.health_feature_prefix)
    commands = render_commands(env, HealthPlan(changes, [], []))
    return PoolFeatures(commands, apply, asked, why)


def apply_features(settings: Settings, features: PoolFeatures, done: Callable[[str], None]) -> None:
    """``--apply``: run the lines, as ``health --apply`` runs its own (exit 10 on a refusal)."""
    from topograph_slurm.app.health import apply

    apply(settings, features.commands, done)
