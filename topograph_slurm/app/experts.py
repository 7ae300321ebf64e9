"""``experts``' use case: a MoE model's per-expert loads placed on a job's GPUs with
DeepSeek's EPLB policies, EPLB's "node" being the fabric's fastest domain the job's GPUs sit
in: a multi-node NVLink domain when the fabric has them, else a server."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topograph_slurm.app.fabric import Warn
from topograph_slurm.app.placement import PlacedJob, prepare_job
from topograph_slurm.config import Settings
from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.model.experts import ExpertPlan, Gpu
from topograph_slurm.model.placement import LEVEL_DOMAIN, MEGATRON_ORDER, FabricMap
from topograph_slurm.sources.expert_load import (
    LOAD_FORMATS as LOAD_FORMATS,  # re-exported: the --load-format choices
)

#: What EPLB's "node" is in a run: the kind of domain, as the output names it.
NVLINK_DOMAIN, SERVER = "NVLink domain", "node"


@dataclass(frozen=True, slots=True)
class ExpertsRun:
    """A plan with what it was made from: the EP GPUs, the kind of domain, the load file;
    and, when asked, the EP ranks' cost matrix by fabric level (SGLang's --eplb-topology)."""

    plan: ExpertPlan
    gpus: list[Gpu]
    domain_kind: str
    loads_from: str
    ranks_from: str
    rank_costs: list[list[int]] | None = None


def plan(
    settings: Settings,
    topology: str | None,
    job_id: str | None,
    job: Mapping[str, Any],
    experts: Mapping[str, Any],
    warn: Warn,
) -> ExpertsRun:
    """Loads from *experts*' ``loads`` file, the EP GPUs (the first ``ep`` ranks of the job
    *job* and *job_id* describe) and their domains, and EPLB's plan over them; with
    ``rank_costs`` the EP ranks' cost matrix too."""
    from topograph_slurm.analysis.experts.hierarchy import plan_experts
    from topograph_slurm.analysis.placement.rank_cost import rank_costs

    loads = _loads(experts["loads"], experts["loads_format"])
    placed = prepare_job(settings, topology, job_id, _dense(job), warn)
    ep = len(placed.ranks) if experts["ep"] is None else experts["ep"]
    if not 1 <= ep <= len(placed.ranks):
        raise UsageError(f"--ep {ep} must be 1 to the job's {len(placed.ranks)} ranks")
    gpus, kind = ep_gpus(placed, ep)
    names = list(dict.fromkeys(gpu.domain for gpu in gpus))
    domains = [names.index(gpu.domain) for gpu in gpus]
    result = plan_experts(loads, experts["replicas"], experts["groups"], domains)
    costs = (
        rank_costs(placed.view.fmap, [gpu.host for gpu in gpus]) if experts["rank_costs"] else None
    )
    return ExpertsRun(result, gpus, kind, experts["loads"], placed.ranks_from, costs)


def _loads(path: str, fmt: str) -> list[list[int]]:
    """The load table at *path*: TensorRT-LLM's statistics directory (``trtllm``, or ``auto``
    on a directory), else one file read as *fmt*."""
    from topograph_slurm.sources.expert_load import parse_load, parse_trtllm_statistics

    if fmt == "trtllm" or (fmt == "auto" and Path(path).is_dir()):
        folder = Path(path)
        ranks = sorted(folder.glob("rank*.safetensors")) if folder.is_dir() else []
        statistics = {
            rank.name: _read(rank) for rank in ranks if not rank.name.endswith("_raw.safetensors")
        }
        return parse_trtllm_statistics(_text(folder / "meta_info.json"), statistics, path)
    return parse_load(_text(Path(path)), path, fmt)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read expert loads {path}: {err}") from None


def _text(path: Path) -> str:
    try:
        return _read(path).decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"cannot read expert loads {path}: {err}") from None


def _dense(job: Mapping[str, Any]) -> dict[str, Any]:
    """The job flags with a plain layout: the EP layout here is EPLB's, not Megatron's grid."""
    return dict(job) | {
        "tp": 1,
        "pp": 1,
        "cp": 1,
        "ep": 1,
        "etp": None,
        "rank_order": MEGATRON_ORDER,
    }


def ep_gpus(placed: PlacedJob, ep: int) -> tuple[list[Gpu], str]:
    """The first *ep* ranks as GPUs, each in its NVLink domain when one of theirs spans more
    than one node of the fabric, else in its node."""
    ranks = placed.ranks[:ep]
    fmap = placed.view.fmap
    nvlink = _multi_node_domains(fmap, ranks)
    seen: Counter[str] = Counter()
    gpus = []
    for rank, host in enumerate(ranks):
        domain = (fmap.places[host].unit(LEVEL_DOMAIN) if nvlink else None) or host
        gpus.append(Gpu(rank, host, seen[host], domain))
        seen[host] += 1
    return gpus, NVLINK_DOMAIN if nvlink else SERVER


def _multi_node_domains(fmap: FabricMap, nodes: list[str]) -> bool:
    if LEVEL_DOMAIN not in fmap.levels:
        return False
    units = {fmap.places[node].unit(LEVEL_DOMAIN) for node in nodes}
    return any(fmap.unit_sizes.get((LEVEL_DOMAIN, unit), 0) > 1 for unit in units if unit)
