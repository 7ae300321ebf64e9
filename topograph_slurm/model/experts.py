"""MoE expert placement as DeepSeek's EPLB states it: an EP layout (physical expert slots,
expert groups, GPUs and the fast domains they sit in), and per layer the three arrays an
inference engine loads (physical-to-logical map, logical-to-physical map, replica counts)
with the estimate that says whether the plan is worth loading."""

from __future__ import annotations

from dataclasses import dataclass

#: EPLB's two policies: groups packed onto domains first, or replicas over all GPUs at once.
HIERARCHICAL, GLOBAL = "hierarchical", "global"
#: Why a plan is global (``ExpertPlan.why_global``): the groups do not divide the experts,
#: or do not divide by the domains, or the domains hold unequal GPU counts.
GROUPS_SPLIT_EXPERTS, GROUPS_SPLIT_DOMAINS, UNEVEN_DOMAINS = (
    "groups-split-experts",
    "groups-split-domains",
    "uneven-domains",
)


@dataclass(frozen=True, slots=True)
class ExpertLayout:
    """The EP shape a plan is for: *replicas* physical slots in all (a multiple of *gpus*),
    *groups* expert groups, *gpus* EP ranks and *domains* fast domains (EPLB's "nodes")."""

    replicas: int
    groups: int
    gpus: int
    domains: int

    @property
    def slots_per_gpu(self) -> int:
        return self.replicas // self.gpus


@dataclass(frozen=True, slots=True)
class Gpu:
    """One EP rank: the node it runs on, its local rank there, and its domain's name."""

    rank: int
    host: str
    local_rank: int
    domain: str


@dataclass(frozen=True, slots=True)
class LayerPlan:
    """One MoE layer's placement: the logical expert in each physical slot (slot ``s`` on
    GPU ``s // slots_per_gpu``), which replica of its expert each slot holds (0 for the
    first) and how many replicas each logical expert has."""

    physical_to_logical: list[int]
    replica_rank: list[int]
    replica_counts: list[int]

    def logical_to_physical(self, width: int) -> list[list[int]]:
        """Each logical expert's slots, first replica first, padded with -1 to *width*
        (EPLB's third array; built only for the JSON, where it is the largest part)."""
        table = [[-1] * width for _ in self.replica_counts]
        for slot, (expert, rank) in enumerate(
            zip(self.physical_to_logical, self.replica_rank, strict=True)
        ):
            table[expert][rank] = slot
        return table


@dataclass(frozen=True, slots=True)
class LayerEstimate:
    """What a layout does to one layer's traffic: the busiest GPU's tokens over the mean
    (1.0 is perfect balance), the share of tokens sent to an expert outside the sender's
    domain, and how many expert groups have replicas in more than one domain."""

    balance: float
    cross_domain: float
    split_groups: int


@dataclass(frozen=True, slots=True)
class ExpertPlan:
    """A whole model's plan: the policy used (and why not the hierarchical one, empty when
    it was used), each layer's arrays, and each layer's estimate for the default layout (experts
    laid contiguously over the GPUs, no replicas) and for the plan."""

    layout: ExpertLayout
    policy: str
    why_global: str
    layers: list[LayerPlan]
    before: list[LayerEstimate]
    after: list[LayerEstimate]

    @property
    def width(self) -> int:
        """The most replicas any expert has in any layer: EPLB pads every layer's
        logical-to-physical map to it."""
        return max(max(layer.replica_counts) for layer in self.layers)
