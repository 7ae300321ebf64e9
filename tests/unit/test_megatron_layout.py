"""The layout's groups against Megatron-Core's rank generator rules.

Megatron-Core (megatron/core/parallel_state.py) documents its rule as an equation: with the
order's kinds k0, k1, … (k0 fastest), ``global_rank = Σ idx_i · stride_i``, ``stride_i`` the
product of the sizes before kind i; a group of kind k holds the ranks that agree on every other
kind's index. It lays two grids over the world: the dense one (tp, cp, dp, pp; ep = 1) and the
expert one (expert tp, ep, expert dp, pp; cp = 1), both in the same order string, kinds left
out of it appended with size 1. The tables below are written from those rules (and from the
docstring's own worked example); the oracle enumerates index tuples, a different computation
from the project's stride arithmetic, and hypothesis compares the two on every layout the
rules accept.
"""

from __future__ import annotations

import itertools
from math import prod

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topograph_slurm.errors import UsageError
from topograph_slurm.model.placement import KINDS, ParallelLayout

# --------------------------------------------------------------------------- the oracle


def oracle_groups(order: list[str], sizes: dict[str, int], kind: str) -> list[list[int]]:
    """Groups of *kind* by enumerating every index tuple (Megatron-Core's equation)."""
    strides = {k: prod(sizes[o] for o in order[: order.index(k)]) for k in order}
    others = [k for k in order if k != kind]
    groups = []
    # groups ordered by their smallest rank: iterate the other kinds' indices slowest-last
    for rest in itertools.product(*(range(sizes[k]) for k in reversed(others))):
        base = sum(i * strides[k] for k, i in zip(reversed(others), rest, strict=True))
        groups.append([base + i * strides[kind] for i in range(sizes[kind])])
    return sorted(groups)


def completed(order: str) -> list[str]:
    tokens = order.split("-")
    return tokens + [k for k in KINDS if k not in tokens]


def dense_sizes(tp: int, cp: int, pp: int, world: int) -> dict[str, int]:
    return {"tp": tp, "cp": cp, "ep": 1, "dp": world // (tp * cp * pp), "pp": pp}


def expert_sizes(etp: int, ep: int, pp: int, world: int) -> dict[str, int]:
    return {"tp": etp, "cp": 1, "ep": ep, "dp": world // (etp * ep * pp), "pp": pp}


def megatron_refuses(order: str, dense: dict[str, int], expert: dict[str, int]) -> bool:
    """Megatron-Core's checks: a kind larger than 1 missing from the order (in either grid),
    and with pp > 1 an order not ending in pp whose grids' DP sizes differ, or different
    pipeline groups (the world divides in these tables by construction)."""
    named = order.split("-")
    if any(
        size > 1 and kind not in named for grid in (dense, expert) for kind, size in grid.items()
    ):
        return True
    full = completed(order)
    pp_last = order.endswith("pp") or dense["pp"] == 1 or dense["dp"] == expert["dp"]
    same_pp = oracle_groups(full, dense, "pp") == oracle_groups(full, expert, "pp")
    return not (pp_last and same_pp)


# --------------------------------------------------------------------------- tables


def test_the_docstrings_own_example() -> None:
    """parallel_size [tp, dp, pp] = [2, 3, 4], order tp-dp-pp: dp_group[0] = [0, 2, 4] …
    dp_group[7] = [19, 21, 23]."""
    layout = ParallelLayout.for_world(24, tp=2, pp=4, order="tp-dp-pp")
    dp = layout.groups("dp")
    assert len(dp) == 8
    assert dp[0] == [0, 2, 4] and dp[1] == [1, 3, 5] and dp[7] == [19, 21, 23]


def test_ep_does_not_shrink_dense_dp() -> None:
    """64 GPUs, tp 8, ep 2: 8 DP groups of 8 (dense tp·cp·dp·pp); EP pairs 8 apart; expert
    DP = 64 / (8·2) = 4."""
    layout = ParallelLayout.for_world(64, tp=8, ep=2)
    assert (layout.dp, layout.edp) == (8, 4)
    assert layout.groups("dp") == [[r + 8 * i for i in range(8)] for r in range(8)]
    assert layout.groups("ep")[:2] == [[0, 8], [1, 9]]
    assert layout.groups("edp")[0] == [0, 16, 32, 48]
    assert layout.kinds() == ["tp", "dp", "ep", "edp"]


def test_ep_with_pp_keeps_dense_dp_groups() -> None:
    """tp 8, ep 4, pp 2 on 64 GPUs: 16 DP groups of 4 (the old model reported none)."""
    layout = ParallelLayout.for_world(64, tp=8, ep=4, pp=2)
    assert (layout.dp, layout.edp) == (4, 1)
    dp = layout.groups("dp")
    assert len(dp) == 16 and dp[0] == [0, 8, 16, 24] and dp[8] == [32, 40, 48, 56]
    assert layout.groups("pp")[0] == [0, 32]
    assert "dp" in layout.kinds() and "edp" not in layout.kinds()


def test_ep_with_cp_pairs_ranks_tp_apart() -> None:
    """tp 8, cp 2, ep 2: the expert grid has no CP, so EP pairs are ranks 8 apart (nodes 1
    and 2 of 8 GPUs), and CP pairs are 8 apart too in the dense grid."""
    layout = ParallelLayout.for_world(128, tp=8, cp=2, ep=2)
    assert layout.groups("ep")[:3] == [[0, 8], [1, 9], [2, 10]]
    assert layout.groups("cp")[0] == [0, 8]
    assert layout.groups("dp")[0] == [0, 16, 32, 48, 64, 80, 96, 112]


def test_a_layout_megatron_runs_on_two_nodes() -> None:
    """2 × 8 GPUs, tp 8, cp 2, ep 2: dp = 1, expert dp = 1; accepted."""
    layout = ParallelLayout.for_world(16, tp=8, cp=2, ep=2)
    assert (layout.dp, layout.edp) == (1, 1)
    assert layout.kinds() == ["tp", "cp", "ep"]


def test_expert_tp_has_groups_of_its_own() -> None:
    """tp 4 dense, expert tp 2, ep 4 on 16 GPUs: expert TP pairs, EP groups 2 apart."""
    layout = ParallelLayout.for_world(16, tp=4, ep=4, etp=2)
    assert layout.groups("etp")[:2] == [[0, 1], [2, 3]]
    assert layout.groups("ep")[0] == [0, 2, 4, 6]
    assert layout.kinds() == ["tp", "dp", "ep", "edp", "etp"]


def test_partial_order_strings_are_completed() -> None:
    """Kinds left out are appended with size 1, as Megatron-Core's RankGenerator does."""
    full = ParallelLayout.for_world(16, tp=2, pp=2, order="tp-pp-dp-cp-ep")
    partial = ParallelLayout.for_world(16, tp=2, pp=2, order="tp-pp-dp")
    assert partial.order == full.order
    for kind in ("tp", "pp", "dp"):
        assert partial.groups(kind) == full.groups(kind)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tp": 3}, "do not split into tp=3 x cp=1 x pp=1 .3 GPUs per replica of the dense"),
        ({"tp": 2, "ep": 3}, "etp=2 x ep=3 x pp=1 .6 GPUs per replica of the expert layers"),
        ({"tp": 2, "order": "tp-tp-cp-ep-dp"}, "each at most once"),
        ({"tp": 2, "order": "tp-xx-dp"}, "each at most once"),
        ({"tp": 2, "order": "tp-pp"}, "names no dp, whose size is 8"),
        ({"tp": 2, "ep": 2, "order": "tp-dp-pp"}, "names no ep"),
        ({"tp": 0}, "--tp must be a positive integer"),
        ({"tp": 2, "pp": -1}, "--pp must be a positive integer"),
        ({"tp": 2, "etp": 0}, "--etp must be a positive integer"),
        # Megatron-Core: "When not using pp-last rank ordering, the data parallel size of the
        # attention and moe layers must be the same"
        ({"tp": 2, "ep": 2, "pp": 2, "order": "tp-cp-ep-pp-dp"}, "does not end in pp"),
    ],
)
def test_layouts_megatron_refuses_are_usage_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        ParallelLayout.for_world(16, **kwargs)  # type: ignore[arg-type]


def test_pp_not_last_is_fine_when_both_grids_agree() -> None:
    """tp 2, cp 2, ep 2 (expert tp 2): tp·cp = etp·ep, so dp equals expert dp and the
    pipelines agree; Megatron-Core accepts the order."""
    layout = ParallelLayout.for_world(16, tp=2, cp=2, ep=2, pp=2, order="tp-cp-ep-pp-dp")
    assert layout.groups("pp")[0] == [0, 4]


# --------------------------------------------------------------------------- every layout

_SIZES = st.sampled_from([1, 2, 4])


@settings(max_examples=300, deadline=None)
@given(
    tp=_SIZES,
    cp=_SIZES,
    ep=_SIZES,
    etp=_SIZES,
    pp=_SIZES,
    scale=st.sampled_from([1, 2, 4]),
    order=st.permutations(KINDS),
    cut=st.integers(min_value=0, max_value=2),
)
def test_every_group_is_megatrons(
    tp: int, cp: int, ep: int, etp: int, pp: int, scale: int, order: list[str], cut: int
) -> None:
    """Every layout the rules accept: each kind's groups equal the oracle's, dense kinds
    from the dense grid and EP, expert DP and expert TP from the expert grid."""
    world = scale * tp * cp * pp * etp * ep
    text = "-".join(order[: len(order) - cut])
    full = completed(text)
    dense = dense_sizes(tp, cp, pp, world)
    expert = expert_sizes(etp, ep, pp, world)
    try:
        layout = ParallelLayout.for_world(world, tp=tp, cp=cp, ep=ep, pp=pp, etp=etp, order=text)
    except UsageError:
        assert megatron_refuses(text, dense, expert)
        return
    assert not megatron_refuses(text, dense, expert)
    for kind in ("tp", "cp", "dp", "pp"):
        assert sorted(layout.groups(kind)) == oracle_groups(full, dense, kind)
    assert sorted(layout.groups("ep")) == oracle_groups(full, expert, "ep")
    assert sorted(layout.groups("edp")) == oracle_groups(full, expert, "dp")
    assert sorted(layout.groups("etp")) == oracle_groups(full, expert, "tp")
    # Megatron-Core asserts both grids share their pipelines
    assert oracle_groups(full, dense, "pp") == oracle_groups(full, expert, "pp")
    # groups come in rank order, and each kind's groups partition the world
    for kind in ("tp", "cp", "dp", "pp", "ep", "edp", "etp"):
        groups = layout.groups(kind)
        assert groups == sorted(groups)
        assert sorted(r for g in groups for r in g) == list(range(world))
