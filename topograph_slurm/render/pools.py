"""What ``pools`` prints (text and JSON), the per-instance hostfiles ``--out`` writes (in
``order``'s formats) and the heterogeneous-job ``sbatch`` line, as template contexts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import jinja2

from topograph_slurm.model.gpu import RankBinding
from topograph_slurm.model.pools import ROLES, Instance, PoolFeatures, PoolPlan
from topograph_slurm.render.environment import printable, render
from topograph_slurm.render.placement import ORDER_FORMATS, render_order

#: ``--out DIR``: each instance's hostfiles (the ``order`` format of each), by file suffix.
HOSTFILES = {"hostfile": "slurm-hostfile", "nodes": "plain"}
#: The plan itself in ``--out DIR``: what ``explain --pools`` reads, and the mark of our directory.
PLAN_FILE = "pools.json"
HETJOB_FILE = "hetjob.sh"
#: What ``pools --json`` (and ``explain --pools --json``) say they are.
POOLS_JSON = {"format": "topograph-slurm-pools", "version": 1}


def pools_data(plan: PoolPlan) -> dict[str, Any]:
    """The plan as plain data: the JSON ``pools --json`` prints and ``explain --pools`` reads
    back, and the text template's context."""
    return {
        "deployment": {
            role: {"count": plan.deployment.size(role).count, "tp": plan.deployment.size(role).tp}
            for role in ROLES
        },
        "gpus_per_node": plan.gpus_per_node,
        "levels": plan.levels,
        "instances": [_instance(instance) for instance in plan.instances],
        "kv_paths": [
            {
                "prefill": path.prefill,
                "decode": path.decode,
                "level": path.level,
                "home": path.home,
                "slowest_link": path.link,
            }
            for path in plan.kv_paths
        ],
        "pools": {role: _spread(plan.role(role)) for role in ROLES},
        "unused": plan.unused,
        "met": plan.met,
    }


def _instance(instance: Instance) -> dict[str, Any]:
    return {
        "name": instance.name,
        "role": instance.role,
        "tp": instance.tp,
        "nodes": instance.nodes,
        "gpus": instance.gpus,
        "tp_level": instance.tp_level,
        "tp_home": instance.tp_home,
        "pairs": instance.pairs,
        "problems": [
            {"kind": f.kind, "subject": f.subject, "message": f.message} for f in instance.problems
        ],
        "unmet": instance.unmet,
    }


def _spread(instances: list[Instance]) -> dict[str, Any]:
    """The link quality inside one pool: its nodes, and those with problems on their path."""
    nodes = {node for instance in instances for node in instance.nodes}  # shared nodes once
    troubled = sorted(
        {
            node
            for instance in instances
            for node in instance.nodes
            if any(f.subject == node for f in instance.problems)
        }
        | {node for instance in instances if instance.problems for node in _unit_troubled(instance)}
    )
    return {"instances": len(instances), "nodes": len(nodes), "nodes_with_problems": troubled}


def _unit_troubled(instance: Instance) -> list[str]:
    """An instance's nodes when a problem is on a unit they share (a leaf's uplinks)."""
    own = {f.subject for f in instance.problems}
    return instance.nodes if own - set(instance.nodes) else []


def render_pools(
    env: jinja2.Environment, plan: PoolPlan, fmt: str, features: PoolFeatures | None = None
) -> str:
    """The plan as text or JSON (docs/pools.md: ``topograph-slurm-pools`` version 1), with
    pools' Slurm feature lines (the dry run's, or those ``--apply`` runs) when given."""
    data = pools_data(plan) | ({"features": _features(features)} if features else {})
    if fmt == "json":
        return json.dumps(POOLS_JSON | data, indent=2, sort_keys=True) + "\n"
    paths: dict[str, list[dict[str, Any]]] = {}
    for path in data["kv_paths"]:
        paths.setdefault(path["prefill"], []).append(path | {"other": path["decode"]})
        paths.setdefault(path["decode"], []).append(path | {"other": path["prefill"]})
    return render(env.overlay(finalize=printable), "pools.txt.j2", paths=paths, **data)


def _features(features: PoolFeatures) -> dict[str, Any]:
    return {
        "commands": features.commands,
        "applied": features.applied,
        "slurm_asked": features.slurm_asked,
        "why": features.why,
    }


def render_binding(
    env: jinja2.Environment,
    plan: PoolPlan,
    fmt: str,
    bound: Mapping[str, tuple[RankBinding, ...]],
) -> str:
    """Each instance's local ranks bound (*bound* by name) in one of order's binding formats
    (``render.placement.BINDING_FORMATS``): ``order``'s lines per instance, or one wrapper
    script taking the instance's name."""
    if fmt == "binding-wrapper":
        instances = [{"name": i.name, "binding": bound[i.name]} for i in plan.instances]
        return render(env, "pools.binding-wrapper.j2", instances=instances)
    blocks = [
        {
            "name": i.name,
            "role": i.role,
            "tp": i.tp,
            "nodes": i.nodes,
            "gpus": i.gpus,
            "text": render_order(env, fmt, i.nodes, len(i.gpus), bound[i.name]),
        }
        for i in plan.instances
    ]
    return render(env, "pools.binding.j2", blocks=blocks)


def pools_files(env: jinja2.Environment, plan: PoolPlan) -> dict[str, str]:
    """``--out DIR``'s files: per instance a task-per-line hostfile (SLURM_HOSTFILE) and a
    node-per-line one, the heterogeneous-job ``sbatch`` line, and the plan as JSON."""
    files = {
        _hostfile(instance.name, suffix): render(
            env, ORDER_FORMATS[fmt], nodes=instance.nodes, gpus_per_node=len(instance.gpus)
        )
        for instance in plan.instances
        for suffix, fmt in HOSTFILES.items()
    }
    files[HETJOB_FILE] = render(
        env, "pools.sbatch.j2", components=_components(plan), gpus_per_node=plan.gpus_per_node
    )
    files[PLAN_FILE] = render_pools(env, plan, "json")
    return files


def out_files(instances: Iterable[str]) -> set[str]:
    """The names ``--out DIR`` holds for a plan of these instances: what a ``pools.json``
    lists, so a directory holding anything else is not one pools wrote."""
    hostfiles = {_hostfile(name, suffix) for name in instances for suffix in HOSTFILES}
    return hostfiles | {HETJOB_FILE, PLAN_FILE}


def _hostfile(instance: str, suffix: str) -> str:
    return f"{instance}.{suffix}"


def _components(plan: PoolPlan) -> list[dict[str, Any]]:
    """The heterogeneous job's components: one per set of nodes, holding all their GPUs (the
    nodes are the role's own) and a task per GPU of the instances on them. Instances sharing a
    node share its component: Slurm, not pools, would choose a smaller component's GPUs, so an
    instance smaller than a node picks its own by CUDA_VISIBLE_DEVICES."""
    components: dict[tuple[str, ...], dict[str, Any]] = {}
    for i in plan.instances:
        one = components.setdefault(tuple(i.nodes), {"nodes": i.nodes, "tasks": 0, "members": []})
        one["tasks"] += len(i.gpus)
        part = len(i.gpus) < plan.gpus_per_node
        one["members"].append(
            {"name": i.name, "role": i.role, "tp": i.tp, "part": part, "gpus": i.gpus}
        )
    return list(components.values())
