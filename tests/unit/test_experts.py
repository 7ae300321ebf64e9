"""`experts`: DeepSeek's EPLB policies (analysis/experts/) against EPLB's own outputs, the
traffic estimate against a hand computation, and the command on real files.

EPLB's outputs below were produced once by hand by running ``eplb.rebalance_experts`` from
github.com/deepseek-ai/EPLB at d52c72d5b2f2fb4c41afbf8eb21366820239913d under torch 2.13.0
(CPU) on the ``weight`` shown, with ``(num_replicas, num_groups, num_nodes, num_gpus)`` as
named in each test; the three returned tensors' ``tolist()`` are pasted as literals. The
held-out weights are ``random.seed(25)`` draws of ``randint(0, 400)``; the near-tie case was
found by comparing this code in float32 and in float64, then run through EPLB the same way.
Rows of at most 16 items keep torch's sort stable, so ties break as here; nothing here needs
torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import experts_oracle
from topograph_slurm.analysis.experts.estimate import Placement, contiguous, estimate
from topograph_slurm.analysis.experts.hierarchy import plan_experts
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit, InputError
from topograph_slurm.model.experts import GLOBAL, HIERARCHICAL, ExpertPlan
from topograph_slurm.sources.expert_load import parse_load

PUBLISHED = [
    [90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
    [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27],
]
HELD_OUT = [
    [193, 393, 7, 109, 156, 325, 242, 21, 387, 130, 17, 156, 289, 217, 49, 301],
    [63, 294, 351, 373, 100, 262, 319, 161, 92, 280, 183, 263, 240, 268, 53, 325],
    [347, 50, 307, 298, 182, 212, 180, 96, 346, 82, 316, 235, 37, 36, 206, 288],
]
HELD_OUT_P2L = [
    [9, 10, 8, 11, 8, 11, 8, 14, 13, 12, 13, 12, 15, 15, 15, 12,
     6, 7, 6, 2, 3, 4, 5, 0, 5, 0, 5, 4, 1, 1, 1, 1],
    [1, 10, 1, 0, 9, 8, 9, 10, 11, 2, 11, 2, 3, 3, 3, 2,
     13, 7, 13, 14, 5, 4, 5, 7, 12, 6, 12, 6, 15, 15, 15, 6],
    [15, 12, 15, 13, 0, 3, 0, 3, 0, 1, 14, 2, 14, 3, 2, 2,
     11, 6, 11, 9, 8, 4, 8, 4, 8, 6, 5, 10, 5, 7, 10, 10],
]  # fmt: skip


def arrays(plan: ExpertPlan) -> tuple[list[list[int]], list[list[list[int]]], list[list[int]]]:
    return (
        [layer.physical_to_logical for layer in plan.layers],
        [layer.logical_to_physical(plan.width) for layer in plan.layers],
        [layer.replica_counts for layer in plan.layers],
    )


def test_published_example_is_reproduced_exactly() -> None:
    """README's example, (16, 4, 2, 8): the physical-to-logical map it prints, and the other
    two arrays as EPLB returns them."""
    plan = plan_experts(PUBLISHED, 16, 4, [0] * 4 + [1] * 4)
    assert plan.policy == HIERARCHICAL
    assert arrays(plan) == (
        [[5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1],
         [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1]],
        [[[12, -1], [15, 13], [11, -1], [6, -1], [7, 5], [0, 2], [1, -1], [3, -1], [4, -1],
          [9, -1], [8, 10], [14, -1]],
         [[13, -1], [15, 11], [8, -1], [14, -1], [9, -1], [10, 12], [2, 4], [0, -1], [6, 3],
          [7, -1], [1, -1], [5, -1]]],
        [[1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1], [1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1]],
    )  # fmt: skip


def test_held_out_hierarchical_case_matches_eplb() -> None:
    """3 layers x 16 experts, (32, 4, 2, 16): two domains of 8 GPUs, 2 slots each."""
    plan = plan_experts(HELD_OUT, 32, 4, [0] * 8 + [1] * 8)
    assert plan.policy == HIERARCHICAL
    p2l, l2p, counts = arrays(plan)
    assert p2l == HELD_OUT_P2L
    assert l2p[0] == [
        [23, 25, -1, -1], [28, 30, 29, 31], [19, -1, -1, -1], [20, -1, -1, -1],
        [27, 21, -1, -1], [22, 24, 26, -1], [16, 18, -1, -1], [17, -1, -1, -1],
        [2, 4, 6, -1], [0, -1, -1, -1], [1, -1, -1, -1], [3, 5, -1, -1],
        [15, 9, 11, -1], [8, 10, -1, -1], [7, -1, -1, -1], [12, 14, 13, -1],
    ]  # fmt: skip
    assert l2p[2][2] == [14, 15, 11, -1] and l2p[2][3] == [13, 5, 7, -1]
    assert counts == [
        [2, 4, 1, 1, 2, 3, 2, 1, 3, 1, 1, 2, 3, 2, 1, 3],
        [1, 2, 3, 3, 1, 2, 3, 2, 1, 2, 2, 2, 2, 2, 1, 3],
        [3, 1, 3, 3, 2, 2, 2, 1, 3, 1, 3, 2, 1, 1, 2, 2],
    ]


def test_held_out_global_case_matches_eplb() -> None:
    """2 layers x 12 experts, (16, 3, 2, 8): 3 groups do not divide by 2 domains."""
    weight = [
        [35, 263, 325, 65, 373, 20, 277, 88, 39, 297, 113, 395],
        [217, 286, 228, 223, 252, 313, 258, 334, 247, 226, 29, 253],
    ]
    plan = plan_experts(weight, 16, 3, [0] * 4 + [1] * 4)
    assert plan.policy == GLOBAL
    assert arrays(plan) == (
        [[6, 5, 1, 0, 11, 3, 11, 8, 4, 10, 4, 7, 2, 9, 2, 9],
         [11, 10, 4, 6, 8, 6, 2, 1, 9, 1, 3, 5, 0, 5, 7, 7]],
        [[[3, -1], [2, -1], [12, 14], [5, -1], [8, 10], [1, -1], [0, -1], [11, -1], [7, -1],
          [13, 15], [9, -1], [4, 6]],
         [[12, -1], [9, 7], [6, -1], [10, -1], [2, -1], [13, 11], [5, 3], [14, 15], [4, -1],
          [8, -1], [1, -1], [0, -1]]],
        [[1, 1, 2, 1, 2, 1, 1, 1, 1, 2, 1, 2], [1, 2, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1]],
    )  # fmt: skip


def test_groups_that_split_the_domains_fall_back_to_global_as_vllm() -> None:
    """vLLM's ``test_parameter_validation``: 4 experts, (8, 3, 2, 4) is not an error but the
    global policy: every expert placed, 8 slots, the same arrays as with one group."""
    weight = [[10, 20, 30, 40]]
    plan = plan_experts(weight, 8, 3, [0, 0, 1, 1])
    assert (plan.policy, plan.why_global) == (GLOBAL, "groups-split-domains")
    assert sorted(set(plan.layers[0].physical_to_logical)) == [0, 1, 2, 3]
    assert len(plan.layers[0].physical_to_logical) == 8
    assert arrays(plan) == arrays(plan_experts(weight, 8, 1, [0] * 4))


def test_groups_that_split_the_experts_fall_back_to_global() -> None:
    """12 experts in 8 groups over 4 domains: the groups divide by the domains but cannot be
    packed (EPLB would assert); the global plan, as with one group, and the reason."""
    plan = plan_experts(PUBLISHED, 16, 8, [0, 0, 1, 1, 2, 2, 3, 3])
    assert (plan.policy, plan.why_global) == (GLOBAL, "groups-split-experts")
    assert arrays(plan) == arrays(plan_experts(PUBLISHED, 16, 1, [0] * 8))


def test_float32_arithmetic_as_eplb_decides_a_near_tie() -> None:
    """Counts near 2**28 that float32 rounds together, (16, 2, 2, 4): float64 arithmetic gives
    ``[0, 2, 2, 1, 2, 3, 3, 3, ...]``; EPLB's float32 tensors give this (run as above)."""
    weight = [[88080387, 12582912, 264241152, 264241152, 41943043, 20971520, 528482304, 20971520]]
    plan = plan_experts(weight, 16, 2, [0, 0, 1, 1])
    assert arrays(plan) == (
        [[0, 3, 3, 3, 2, 2, 2, 1, 6, 6, 6, 7, 6, 6, 4, 5]],
        [[[0, -1, -1, -1, -1], [7, -1, -1, -1, -1], [4, 5, 6, -1, -1], [1, 2, 3, -1, -1],
          [14, -1, -1, -1, -1], [15, -1, -1, -1, -1], [8, 12, 9, 13, 10], [11, -1, -1, -1, -1]]],
        [[1, 1, 3, 3, 1, 1, 5, 1]],
    )  # fmt: skip


def test_estimate_by_hand() -> None:
    """Two domains of one GPU each, experts 0-3 with 60, 20, 10, 10 tokens, two groups
    ({0,1}, {2,3}).

    Contiguous: GPU 0 holds 0 and 1 (80 tokens), GPU 1 holds 2 and 3 (20); the mean is 50,
    so balance 80/50 = 1.6. Every expert lives in one domain, so half the senders (the other
    domain's) send outside: cross-domain 0.5; no group is split.

    Expert 0 copied onto GPU 1 as well: each copy takes 30, GPU 0 has 30+20 = 50, GPU 1
    30+10+10 = 50: balance 1.0. Expert 0 is in both domains (0 outside); experts 1, 2, 3 in
    one, half their senders outside: (20+10+10)/2 = 20 of 100 tokens, 0.2. Group {0,1} now
    spans both domains: one split group.
    """
    loads, domains = [60, 20, 10, 10], [0, 1]
    before = estimate(loads, contiguous(4, 2), domains, 2)
    assert (before.balance, before.cross_domain, before.split_groups) == (1.6, 0.5, 0)
    after = estimate(
        loads, Placement(np.array([0, 1, 0, 1, 1]), np.array([0, 0, 1, 2, 3])), domains, 2
    )
    assert (after.balance, after.cross_domain, after.split_groups) == (1.0, 0.2, 1)


def test_interleaved_ranks_get_each_gpus_block_moved() -> None:
    """Ranks alternating between two domains: the same plan, each GPU's slots at its rank."""
    grouped = plan_experts(PUBLISHED, 16, 4, [0, 0, 0, 0, 1, 1, 1, 1]).layers[0]
    mixed = plan_experts(PUBLISHED, 16, 4, [0, 1, 0, 1, 0, 1, 0, 1]).layers[0]
    blocks = [grouped.physical_to_logical[g * 2 : g * 2 + 2] for g in range(8)]
    rank_of = [0, 2, 4, 6, 1, 3, 5, 7]  # EPLB's GPU j (domain-major) is this rank
    moved = [0] * 16
    for gpu, rank in enumerate(rank_of):
        moved[rank * 2 : rank * 2 + 2] = blocks[gpu]
    assert mixed.physical_to_logical == moved


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[list[int]], int, int, list[int]]:
    groups = draw(st.integers(1, 4))
    experts = groups * draw(st.integers(1, 4))
    domains = draw(st.integers(1, 3))
    per_domain = draw(st.integers(1, 3))
    gpus = domains * per_domain
    replicas = gpus * draw(st.integers(-(-experts // gpus), -(-experts // gpus) + 2))
    loads = draw(st.lists(st.lists(st.integers(0, 1000), min_size=experts, max_size=experts),
                          min_size=1, max_size=3))  # fmt: skip
    gpu_domains = draw(st.permutations([d for d in range(domains) for _ in range(per_domain)]))
    return loads, replicas, groups, gpu_domains


@settings(max_examples=150, deadline=None)
@given(layouts())
def test_every_plan_is_a_consistent_placement(
    case: tuple[list[list[int]], int, int, list[int]],
) -> None:
    """Every expert has a replica; counts sum to the slots and match the map; the
    logical-to-physical map inverts it; hierarchical plans keep a group's replicas in one
    domain."""
    loads, replicas, groups, gpu_domains = case
    plan = plan_experts(loads, replicas, groups, gpu_domains)
    per_gpu = replicas // len(gpu_domains)
    for layer in plan.layers:
        p2l, counts = layer.physical_to_logical, layer.replica_counts
        assert len(p2l) == replicas and min(counts) >= 1 and sum(counts) == replicas
        assert counts == [p2l.count(e) for e in range(len(counts))]
        for expert, slots in enumerate(layer.logical_to_physical(plan.width)):
            real = [s for s in slots if s != -1]
            assert slots[: len(real)] == real and len(real) == counts[expert]
            assert all(p2l[s] == expert for s in real)
        if plan.policy == HIERARCHICAL:
            size = len(counts) // groups
            for group in range(groups):
                homes = {gpu_domains[s // per_gpu] for s, e in enumerate(p2l) if e // size == group}
                assert len(homes) == 1
    for after in plan.after:
        assert after.balance >= 1.0 - 1e-9 and 0.0 <= after.cross_domain <= 1.0


# --- the load file -------------------------------------------------------------------------


@st.composite
def large_layouts(draw: st.DrawFn) -> tuple[list[list[int]], int, int, list[int]]:
    """Up to 64 experts on up to 48 GPUs, loads drawn from few values (ties everywhere) or
    a wide range, domains equal or not, ranks interleaved."""
    groups = draw(st.sampled_from([1, 2, 4, 8]))
    experts = groups * draw(st.integers(1, 8))
    domains = draw(st.integers(1, 6))
    sizes = (
        [draw(st.integers(1, 8))] * domains
        if draw(st.booleans())
        else [draw(st.integers(1, 8)) for _ in range(domains)]
    )
    gpus = sum(sizes)
    replicas = gpus * draw(st.integers(-(-experts // gpus), -(-experts // gpus) + 4))
    values = st.sampled_from([0, 1, 7, 7, 100]) if draw(st.booleans()) else st.integers(0, 2**40)
    loads = draw(
        st.lists(st.lists(values, min_size=experts, max_size=experts), min_size=1, max_size=3)
    )
    gpu_domains = draw(st.permutations([d for d, n in enumerate(sizes) for _ in range(n)]))
    return loads, replicas, groups, gpu_domains  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.one_of(layouts(), large_layouts()))
def test_vectorised_plan_and_estimate_equal_the_loop_by_loop_oracle(
    case: tuple[list[list[int]], int, int, list[int]],
) -> None:
    """The heap/sort/matrix implementation gives the first implementation's plan and
    estimates exactly (tests/support/experts_oracle.py keeps it), ties and float32 included."""
    loads, replicas, groups, gpu_domains = case
    new = plan_experts(loads, replicas, groups, gpu_domains)
    old = experts_oracle.plan_experts(loads, replicas, groups, gpu_domains)
    assert new.policy == old.policy
    assert arrays(new) == tuple(
        [getattr(layer, field) for layer in old.layers]
        for field in ("physical_to_logical", "logical_to_physical", "replica_counts")
    )
    assert (new.before, new.after) == (old.before, old.after)


def test_load_file_formats_agree() -> None:
    table = [[1, 2, 3], [4, 5, 6]]
    assert parse_load(json.dumps(table), "t") == table
    assert parse_load(json.dumps({"weight": table}), "t") == table
    assert parse_load(json.dumps({"load": [[1.0, 2.0, 3.0], [4, 5, 6]]}), "t") == table
    assert parse_load("# layer rows\ne0,e1,e2\n1,2,3\n\n4, 5 ,6\n", "t") == table


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[]", "no expert loads"),
        ("[[]]", "no expert loads"),
        ("", "no expert loads"),
        ("[[1,2],[3]]", "layer 1 has 1 experts, layer 0 has 2"),
        ("[[1,-2]]", "-2 is not a token count"),
        ("[[1,NaN]]", "nan is not a token count"),
        ("[[1,Infinity]]", "inf is not a token count"),
        ("[[1,2.5]]", "2.5 is not a token count"),
        ("[[1,true]]", "True is not a token count"),
        ('[[1,"2"]]', "'2' is not a token count"),
        ("[[1, 99999999999999999999]]", "not a token count"),
        ('{"weights": [[1]]}', "'weight' or 'load' key"),
        ("[1,2]", "want a list of layers"),
        ("[[1,2]", "not JSON"),
        ("1,2\n3,x\n", "layer 1 expert 1: 'x' is not a token count"),
        ("1,2\n3,1_0\n", "layer 1 expert 1: '1_0' is not a token count"),
        ("1,2\n3,nan\n", "layer 1 expert 1: 'nan' is not a token count"),
        ("1,2\n3,-1\n", "layer 1 expert 1: -1 is not a token count"),
    ],
)
def test_bad_load_file_is_one_input_error(text: str, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        parse_load(text, "loads")
    assert fragment in str(err.value)


# --- the command -----------------------------------------------------------------------------

SIM = ["--sim", "nodes=4,gpus=4", "--nodes", "gpu[0001-0004]"]


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, "experts", *args])


def loads_file(tmp_path: Path, table: object, name: str = "loads.json") -> str:
    path = tmp_path / name
    path.write_text(table if isinstance(table, str) else json.dumps(table))
    return str(path)


def one_error(result: Result, code: int, fragment: str) -> None:
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topograph-slurm: error: "), result.stderr
    assert fragment in lines[0]


def test_sim_servers_are_the_domains(tmp_path: Path) -> None:
    """A simulated fabric has no NVLink domains: each node's 4 GPUs are EPLB's node."""
    loads = loads_file(tmp_path, HELD_OUT)
    result = run(*SIM, "--loads", loads, "--replicas", "32", "--groups", "4", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["policy"] == HIERARCHICAL and data["domain_kind"] == "node"
    assert data["layout"] == {
        "replicas": 32, "groups": 4, "gpus": 16, "domains": 4, "slots_per_gpu": 2
    }  # fmt: skip
    assert [g["domain"] for g in data["gpus"]][::4] == ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    expected = plan_experts(HELD_OUT, 32, 4, [g // 4 for g in range(16)])
    assert [layer["physical_to_logical"] for layer in data["layers"]] == arrays(expected)[0]
    text = run(*SIM, "--loads", loads, "--replicas", "32", "--groups", "4")
    assert text.exit_code == 0, text.output
    assert "Policy: hierarchical: 4 expert groups packed onto 4 nodes of 4 GPUs" in text.stdout
    assert "layer 2: balance " in text.stdout
    assert "gpu0001:3" not in text.stdout and "--per-gpu lists them" in text.stdout
    per_gpu = run(*SIM, "--loads", loads, "--replicas", "32", "--groups", "4", "--per-gpu")
    assert per_gpu.exit_code == 0, per_gpu.output
    line = next(ln for ln in per_gpu.stdout.splitlines() if ln.startswith("  3 gpu0001:3 "))
    assert line == "  3 gpu0001:3 [gpu0001]: " + " | ".join(
        ",".join(map(str, layer["gpu_experts"][3])) for layer in data["layers"]
    )


def test_multi_node_nvlink_blocks_are_the_domains(tmp_path: Path) -> None:
    """Two blocks of two 4-GPU nodes: two domains of 8 GPUs, EPLB's held-out case exactly."""
    conf = tmp_path / "topology.conf"
    conf.write_text("BlockName=nvl1 Nodes=gpu[0001-0002]\nBlockName=nvl2 Nodes=gpu[0003-0004]\n")
    result = run(
        "--topology", str(conf), "--nodes", "gpu[0001-0004]", "--gpus-per-node", "4",
        "--loads", loads_file(tmp_path, {"weight": HELD_OUT}), "--replicas", "32",
        "--groups", "4", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["domain_kind"] == "NVLink domain" and data["layout"]["domains"] == 2
    assert [layer["physical_to_logical"] for layer in data["layers"]] == HELD_OUT_P2L


def test_a_task_hostfile_interleaving_domains_gets_each_gpus_slots_at_its_rank(
    tmp_path: Path,
) -> None:
    """Ranks alternate between the two NVLink blocks (a per-task SLURM_HOSTFILE): local ranks
    count per node, and the plan is the domain-major one with GPU blocks moved to ranks."""
    conf = tmp_path / "topology.conf"
    conf.write_text("BlockName=nvl1 Nodes=gpu[0001-0002]\nBlockName=nvl2 Nodes=gpu[0003-0004]\n")
    hosts = ["gpu0001", "gpu0003", "gpu0001", "gpu0003", "gpu0002", "gpu0004", "gpu0002", "gpu0004"]
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"{host}\n" for host in hosts))
    result = run(
        "--topology", str(conf), "--hostfile", str(hostfile), "--hostfile-lines", "task",
        "--gpus-per-node", "2", "--loads", loads_file(tmp_path, PUBLISHED),
        "--replicas", "16", "--groups", "4", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [(g["host"], g["local_rank"]) for g in data["gpus"][:4]] == [
        ("gpu0001", 0), ("gpu0003", 0), ("gpu0001", 1), ("gpu0003", 1)
    ]  # fmt: skip
    expected = plan_experts(PUBLISHED, 16, 4, [0, 1, 0, 1, 0, 1, 0, 1])
    assert [layer["physical_to_logical"] for layer in data["layers"]] == arrays(expected)[0]
    assert data["layers"][0]["gpu_experts"][0] == [5, 6]  # EPLB's GPU 0, first in nvl1


def test_single_node_blocks_leave_servers_as_the_domains(tmp_path: Path) -> None:
    """Blocks of one node are no multi-node NVLink domain: each node's GPUs are EPLB's node."""
    conf = tmp_path / "topology.conf"
    conf.write_text("".join(f"BlockName=b{n} Nodes=gpu000{n}\n" for n in range(1, 5)))
    result = run(
        "--topology", str(conf), "--nodes", "gpu[0001-0004]", "--gpus-per-node", "2",
        "--loads", loads_file(tmp_path, PUBLISHED), "--replicas", "16", "--groups", "4",
        "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["domain_kind"] == "node" and data["layout"]["domains"] == 4
    assert data["policy"] == HIERARCHICAL


def test_csv_loads_and_ep_take_the_first_ranks_and_out_writes_the_json(tmp_path: Path) -> None:
    """--ep 8 on 4-GPU nodes: two servers; -o gets the JSON, stdout the text."""
    csv = "".join(",".join(map(str, row)) + "\n" for row in PUBLISHED)
    out = tmp_path / "plan.json"
    result = run(
        *SIM, "--loads", loads_file(tmp_path, csv, "loads.csv"), "--replicas", "16",
        "--groups", "4", "--ep", "8", "-o", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Policy: hierarchical")
    data = json.loads(out.read_text())
    assert len(data["gpus"]) == 8 and data["layout"]["domains"] == 2
    published = [5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1]
    assert data["layers"][0]["physical_to_logical"] == published


@pytest.mark.parametrize(
    ("groups", "reason"),
    [("8", "8 groups do not divide the 12 experts"), ("3", "3 groups do not divide by 4 nodes")],
)
def test_groups_eplb_cannot_pack_name_the_global_policy(
    tmp_path: Path, groups: str, reason: str
) -> None:
    result = run(*SIM, "--loads", loads_file(tmp_path, PUBLISHED), "--replicas", "16",
                 "--groups", groups)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"Policy: global: replicas over all 16 GPUs ({reason})" in result.stdout
    data = json.loads(run(*SIM, "--loads", loads_file(tmp_path, PUBLISHED), "--replicas",
                          "16", "--groups", groups, "--json").stdout)  # fmt: skip
    assert data["policy"] == "global"


@pytest.mark.parametrize(
    ("flags", "code", "fragment"),
    [
        (["--replicas", "20"], Exit.USAGE, "--replicas 20 must be a multiple of the 16 EP GPUs"),
        (["--replicas", "16", "--groups", "0"], Exit.USAGE, "--groups 0 must be at least 1"),
        (["--replicas", "8", "--ep", "4"], Exit.USAGE, "--replicas 8 is fewer than the 12 logical"),
        (["--replicas", "16", "--ep", "17"], Exit.USAGE, "--ep 17 must be 1 to the job's 16"),
        (["--replicas", "16", "--ep", "0"], Exit.USAGE, "--ep 0 must be 1"),
        (["--replicas", "65552"], Exit.USAGE, "--replicas 65552 is more than 65,536 slots"),
        (["--replicas", "-16"], Exit.USAGE, "--replicas -16 is fewer than the 12"),
    ],
)
def test_layouts_that_cannot_fit_are_usage_errors(
    tmp_path: Path, flags: list[str], code: int, fragment: str
) -> None:
    one_error(run(*SIM, "--loads", loads_file(tmp_path, PUBLISHED), *flags), code, fragment)


def test_bad_or_missing_load_file_exits_3_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    one_error(
        run(
            *SIM,
            "--loads",
            loads_file(tmp_path, [[1, 2], [3]]),
            "--replicas",
            "16",
            "-o",
            str(out),
        ),
        Exit.INPUT,
        "layer 1 has 1 experts",
    )
    assert not out.exists()
    one_error(
        run(*SIM, "--loads", str(tmp_path / "none.json"), "--replicas", "16"),
        Exit.INPUT,
        "cannot read expert loads",
    )


def test_the_old_out_still_writes_the_file_with_one_warning_line(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    loads = loads_file(tmp_path, PUBLISHED)
    result = run(*SIM, "--loads", loads, "--replicas", "16", "--groups", "4", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["format"] == "topograph-slurm-experts"
    assert result.stderr.splitlines()[0] == (
        "topograph-slurm: warning: --out is now --output; the old spelling goes in the next release"
    )
    assert len([line for line in result.stderr.splitlines() if "warning" in line]) == 1
