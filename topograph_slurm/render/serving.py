"""``pools --format dynamo|srt-slurm|sglang|vllm`` and the launcher files ``--out-dir DIR`` writes
beside the hostfiles: the plan as the serving frameworks take it. The names each file uses were
read from the frameworks' own sources (docs/pools.md, "For the launchers", cites them); the
syntax is the templates'.

- Dynamo's topology-aware KV transfer: per node a directory of domain files (file name = domain,
  content = the node's unit) and per instance its ``DYN_*`` variables, the KV transfer domain
  being the level pools placed the KV pairs for.
- srt-slurm: its recipe's ``resources`` for a two-component heterogeneous job (prefill, decode)
  and the ``sbatch`` line that gives each component its nodes.
- SGLang and vLLM disaggregated serving: one script that starts every instance as an ``srun``
  step of its component, on its own GPUs and NICs, and the routers or proxies that pair them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2

from topograph_slurm.model.gpu import RankBinding, cpu_runs
from topograph_slurm.model.placement import LEVEL_DOMAIN, LEVEL_LEAF, LEVEL_NODE, FabricMap
from topograph_slurm.model.pools import DECODE, PREFILL, Instance, PoolPlan
from topograph_slurm.render.environment import render

#: ``pools --format`` values that render a launcher's files (the rest are the plan and bindings).
SERVING_FORMATS = ("dynamo", "srt-slurm", "sglang", "vllm")
#: ``--out-dir DIR``'s launcher files (one per format that is one file), and the domain tree.
SCRIPT_FILES = {"sglang": "sglang.sh", "vllm": "vllm.sh"}
SRT_FILES = ("srt-slurm.yaml", "srt-slurm.sh")
DYNAMO_DIR = "dynamo"
DYNAMO_ENV = ".dynamo.env"
#: Dynamo's domain files a node gets: our level as Dynamo reads it (any file name is a domain).
DOMAIN_FILES = ("block", "leaf", "spine", "host")
#: Dynamo's KV-transfer policy when a unit holds a prefill without a decode instance: preferred
#: (its docs: ``required`` can fail requests there), at the weight its docs show.
PREFERRED_WEIGHT = "0.85"
#: Ports of the n-th instance on a node: each engine's documented default, plus n.
PORTS = {
    "sglang": {"http": 30000, "bootstrap": 8998, "dist": 5757, "router": 8000},
    "vllm": {"http": 8100, "side": 5600, "master": 29500, "router": 8000},
}


@dataclass(frozen=True, slots=True)
class Domain:
    """Dynamo's view of the plan: each node's domain files, the KV transfer domain (empty when
    the pairs' home is no domain a node has a file for), its enforcement, and per unit of that
    domain the prefill and decode instances it holds (what Dynamo asks operators to ensure)."""

    files: dict[str, dict[str, str]]
    name: str
    enforcement: str
    capacity: list[tuple[str, int, int]] = field(default_factory=list)


def serving_context(
    plan: PoolPlan,
    fmap: FabricMap,
    bound: Mapping[str, Sequence[RankBinding]] | None,
    root: str,
) -> dict[str, Any]:
    """Everything the launcher templates need: the instances (group, GPUs, NICs, ports, peers,
    Dynamo variables), the two srt-slurm components and the Dynamo domains. *root* is where
    ``--out`` writes (Dynamo's mount paths under it; ``.`` when only printed)."""
    domain = dynamo_domain(plan, fmap)
    groups = _groups(plan)
    slots = _slots(plan)
    heads = {i.name: i.nodes[0] for i in plan.instances}
    instances = [
        _instance(i, groups[i.name], slots[i.name], heads, bound, domain, root)
        for i in plan.instances
    ]
    return {
        "instances": instances,
        "decodes": [i for i in instances if i["role"] == DECODE],
        "components": [_component(plan, role) for role in (PREFILL, DECODE)],
        "gpus_per_node": plan.gpus_per_node,
        "domain": domain,
        "srt_same": _srt_same(plan),
        "bound": bound is not None,
        "ports": PORTS,
    }


def render_serving(env: jinja2.Environment, context: Mapping[str, Any], fmt: str) -> str:
    """What ``pools --format FMT`` prints: the launcher script, the srt-slurm recipe fields
    with its submit line, or Dynamo's domains and variables."""
    if fmt in SCRIPT_FILES:
        return render(env, f"pools.{fmt}.sh.j2", **context)
    if fmt == "srt-slurm":
        return render(env, "pools.srt-slurm.yaml.j2", **context)
    return render(env, "pools.dynamo.txt.j2", **context)


def serving_files(env: jinja2.Environment, context: Mapping[str, Any]) -> dict[str, str]:
    """``--out-dir DIR``'s launcher files: both scripts, srt-slurm's recipe fields and submit
    script, each instance's ``NAME.dynamo.env`` and ``dynamo/NODE/DOMAIN`` files."""
    files = {name: render_serving(env, context, fmt) for fmt, name in SCRIPT_FILES.items()}
    files["srt-slurm.yaml"] = render_serving(env, context, "srt-slurm")
    files["srt-slurm.sh"] = render(env, "pools.srt-slurm.sh.j2", **context)
    for instance in context["instances"]:
        files[instance["name"] + DYNAMO_ENV] = render(
            env, "pools.dynamo.env.j2", variables=instance["dynamo"]
        )
    domain: Domain = context["domain"]
    for node, units in domain.files.items():
        for name, unit in units.items():
            files[f"{DYNAMO_DIR}/{node}/{name}"] = unit + "\n"
    return files


def serving_names(instances: Sequence[str]) -> set[str]:
    """The top-level file names ``serving_files`` writes for these instances."""
    return {*SCRIPT_FILES.values(), *SRT_FILES} | {name + DYNAMO_ENV for name in instances}


def dynamo_domain(plan: PoolPlan, fmap: FabricMap) -> Domain:
    """Each node's domain files and the KV transfer domain: the coarsest level the KV pairs'
    home is (so every pair fits one unit of it); ``required`` when every unit of it holding a
    prefill instance holds a decode instance too, else ``preferred``."""
    spine = next((level for level in fmap.levels if level.startswith("spine-")), "")
    levels = {LEVEL_DOMAIN: "block", LEVEL_LEAF: "leaf", spine: "spine", LEVEL_NODE: "host"}
    nodes = dict.fromkeys(node for i in plan.instances for node in i.nodes)
    files = {node: _node_files(fmap, node, levels) for node in nodes}
    homes = [path.home for path in plan.kv_paths]
    if not homes:
        return Domain(files, "", "")
    home = max(homes, key=lambda level: fmap.levels.index(level) if level in fmap.levels else 99)
    name = levels.get(home, "") if home != LEVEL_NODE else ""
    if not name or not all(name in units for units in files.values()):
        return Domain(files, "", "")
    counts: dict[str, list[int]] = {}
    for i in plan.instances:
        unit = files[i.nodes[0]][name]
        counts.setdefault(unit, [0, 0])[0 if i.role == PREFILL else 1] += 1
    capacity = [(unit, p, d) for unit, (p, d) in counts.items()]
    required = all(d > 0 for _, p, d in capacity if p > 0)
    return Domain(files, name, "required" if required else "preferred", capacity)


def _node_files(fmap: FabricMap, node: str, levels: Mapping[str, str]) -> dict[str, str]:
    place = fmap.places.get(node)
    units = {name: (place.unit(level) if place else None) for level, name in levels.items()}
    units["host"] = node
    return {name: unit for name, unit in units.items() if name and unit}


def _instance(
    one: Instance,
    group: int,
    slot: int,
    heads: Mapping[str, str],
    bound: Mapping[str, Sequence[RankBinding]] | None,
    domain: Domain,
    root: str,
) -> dict[str, Any]:
    ranks = list(bound[one.name]) if bound is not None else []
    nics = list(dict.fromkeys(nic for rank in ranks for nic in rank.nics))
    cpus = sorted({cpu for rank in ranks for cpu in rank.cpus})
    binding = {  # one process for all the instance's GPUs: order.binding.macros.j2's env()
        "visible_devices": ranks[0].visible_devices if ranks else "CUDA_VISIBLE_DEVICES",
        "gpu": ",".join(map(str, one.gpus)),
        "nics": nics,
        "cpus": cpus,
        "cpu_ranges": cpu_runs(cpus),
    }
    return {
        "name": one.name,
        "role": one.role,
        "tp": one.tp,
        "nodes": one.nodes,
        "head": one.nodes[0],
        "group": group,
        "slot": slot,
        "binding": binding,
        "pairs": [{"name": name, "head": heads[name]} for name in one.pairs],
        "dynamo": _dynamo_variables(one, domain, root),
    }


def _dynamo_variables(one: Instance, domain: Domain, root: str) -> list[tuple[str, str]]:
    """The ``DYN_*`` variables Dynamo's worker reads (components/src/dynamo/common/utils/
    topology.py); topology off when the pairs' home is no domain of the nodes' files."""
    if not domain.name:
        return [("DYN_TOPOLOGY_ENABLED", "false")]
    variables = [
        ("DYN_TOPOLOGY_ENABLED", "true"),
        ("DYN_TOPOLOGY_MOUNT_PATH", f"{root}/{DYNAMO_DIR}/{one.nodes[0]}"),
        ("DYN_KV_TRANSFER_DOMAIN", domain.name),
        ("DYN_KV_TRANSFER_ENFORCEMENT", domain.enforcement),
    ]
    if domain.enforcement == "preferred":
        variables.append(("DYN_KV_TRANSFER_PREFERRED_WEIGHT", PREFERRED_WEIGHT))
    return variables


def _groups(plan: PoolPlan) -> dict[str, int]:
    """Each instance's component in ``hetjob.sh`` (instances on the same nodes share one)."""
    first: dict[tuple[str, ...], int] = {}
    for i in plan.instances:
        first.setdefault(tuple(i.nodes), len(first))
    return {i.name: first[tuple(i.nodes)] for i in plan.instances}


def _slots(plan: PoolPlan) -> dict[str, int]:
    """Each instance's index among the instances on its first node: its ports' offset."""
    seen: dict[str, int] = {}
    slots = {}
    for i in plan.instances:
        slots[i.name] = seen.get(i.nodes[0], 0)
        seen[i.nodes[0]] = slots[i.name] + 1
    return slots


def _component(plan: PoolPlan, role: str) -> dict[str, Any]:
    """One srt-slurm component: the role's nodes in instance order, its worker count and size."""
    instances = plan.role(role)
    nodes = list(dict.fromkeys(node for i in instances for node in i.nodes))
    return {
        "role": role,
        "nodes": nodes,
        "workers": len(instances),
        "gpus": instances[0].tp if instances else 0,
    }


def _srt_same(plan: PoolPlan) -> bool:
    """Whether srt-slurm forms pools' instances: it expands each component's node list
    (Slurm's node order, which ``--nodelist`` does not change) and fills the nodes in that
    order, each worker on the next GPUs (src/srtctl/core/topology.py)."""
    from topograph_slurm.model.names import natural_key

    for role in (PREFILL, DECODE):
        instances = plan.role(role)
        nodes = sorted({n for i in instances for n in i.nodes}, key=natural_key)
        slots = [(node, gpu) for node in nodes for gpu in range(plan.gpus_per_node)]
        filled = 0
        for i in instances:
            want = [(node, gpu) for node in i.nodes for gpu in i.gpus]
            if sorted(want) != sorted(slots[filled : filled + len(want)]):
                return False
            filled += len(want)
    return True
