"""Disaggregated serving on the fabric: a deployment of prefill and decode instances (each a
tensor-parallel group), and where ``pools`` put them or found them.

Prefill instances turn prompts into KV cache (throughput bound); decode instances read that
cache and generate tokens (tail-latency bound: every step waits for its slowest link). Each
prefill instance sends its KV cache to one decode instance, its *pair*: that transfer should stay
at the finest fabric level (one leaf or block, else one spine) that can hold the pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from topograph_slurm.errors import UsageError
from topograph_slurm.model.numbers import natural
from topograph_slurm.model.result import Finding

#: The two roles, in the order pools list them.
PREFILL, DECODE = "prefill", "decode"
ROLES: tuple[str, ...] = (PREFILL, DECODE)


@dataclass(frozen=True, slots=True)
class PoolSize:
    """One role's instances: how many, and the TP size (GPUs) of each."""

    count: int
    tp: int

    def text(self) -> str:
        return f"{self.count}x{self.tp}"


@dataclass(frozen=True, slots=True)
class Deployment:
    """How many prefill and decode instances of which TP size."""

    prefill: PoolSize
    decode: PoolSize

    def size(self, role: str) -> PoolSize:
        return self.prefill if role == PREFILL else self.decode

    def text(self) -> str:
        return f"--prefill {self.prefill.text()} --decode {self.decode.text()}"


@dataclass(slots=True)
class KvPath:
    """A prefill instance's KV-cache path to its decode instance: the level whose one unit holds
    both, the slowest link on it, and the level the pair could sit in at best."""

    prefill: str
    decode: str
    level: str
    link: str
    home: str


@dataclass(slots=True)
class Instance:
    """One serving instance: its role, name (``prefill-0``), nodes, its GPUs on each of them
    (local indices, the same on every node: ``CUDA_VISIBLE_DEVICES``), the level its TP group
    spans and the finest level that could hold it, its pair (a prefill's decode instance, a
    decode's prefill instances), the problems on its nodes, and what could not be met."""

    role: str
    name: str
    tp: int
    nodes: list[str]
    gpus: list[int]
    tp_level: str
    tp_home: str
    pairs: list[str] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)
    unmet: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PoolPlan:
    """A deployment on the fabric: every instance, every KV path, the nodes left unused, and
    the spread of link quality in each pool (nodes with problems, of the pool's nodes)."""

    deployment: Deployment
    gpus_per_node: int
    levels: list[str]
    instances: list[Instance]
    kv_paths: list[KvPath]
    unused: list[str] = field(default_factory=list)

    @property
    def met(self) -> bool:
        return not any(instance.unmet for instance in self.instances)

    def role(self, role: str) -> list[Instance]:
        return [instance for instance in self.instances if instance.role == role]


@dataclass(frozen=True, slots=True)
class PoolFeatures:
    """The ``scontrol update`` lines that give each pool node its role's feature (and take it
    from a node that left): run with ``--apply``, else only listed (the dry run). When Slurm
    could not be asked (*why*), a dry run's lines start from nodes without features."""

    commands: list[str]
    applied: bool
    slurm_asked: bool = True
    why: str = ""


def parse_size(text: str, flag: str) -> tuple[int | None, int]:
    """``NxTP`` (N instances of TP GPUs each) or ``TP`` alone (the count from a ratio) as
    (count, tp); a usage error otherwise."""
    count, sep, tp = text.lower().replace("×", "x").partition("x")
    if not sep:
        count, tp = "", count
    size, number = natural(tp), natural(count) if count else None
    if size is None or (count and number is None):
        raise UsageError(
            f"{flag} takes NxTP (e.g. 4x8: four instances of TP 8) or TP, got {text!r}"
        )
    if size < 1 or number == 0:
        raise UsageError(f"{flag} {text}: counts and TP sizes must be at least 1")
    return number, size


def parse_ratio(text: str) -> tuple[int, int]:
    """``P:D`` as two positive integers; a usage error otherwise."""
    prefill, sep, decode = text.partition(":")
    p, d = (natural(prefill), natural(decode)) if sep else (None, None)
    if p is None or d is None:
        raise UsageError(f"--ratio takes PREFILL:DECODE (e.g. 2:1), got {text!r}")
    if min(p, d) < 1:
        raise UsageError(f"--ratio {text}: both sides must be at least 1")
    return p, d


@dataclass(frozen=True, slots=True)
class RunningInstance:
    """One instance of a running deployment as a pools file gives it (``pools --json``'s, or
    a hand-written one): name, role, TP size, nodes and (optionally) its GPUs on each node."""

    name: str
    role: str
    tp: int
    nodes: tuple[str, ...]
    gpus: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class RunningPools:
    """A running deployment: its instances and its KV pairs as (prefill, decode) names."""

    instances: tuple[RunningInstance, ...]
    pairs: tuple[tuple[str, str], ...]
