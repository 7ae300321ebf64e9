"""``experts`` with the engines' own files: SGLang's expert-distribution dump in, and out the
files SGLang, DeepSeek's EPLB and TensorRT-LLM load a placement from.

The inputs follow the writers exactly, and the outputs are checked against what each loader
reads (none of the engines imports without torch and a GPU here):

- SGLang's dump: ``_StatAccumulator.dump`` in python/sglang/srt/eplb/expert_distribution.py
  (sgl-project/sglang 02295fe5ac5ccff3e8829800d50450351c56fb53) saves
  ``dict(rank=..., logical_count=[pass][layer][logical expert],
  average_utilization_rate_over_window=...)``; ``init_by_eplb`` in expert_location.py
  (01fec5c2e61f9568c41a6e1d4fd5ac46c88504f1) also takes a 2-D ``logical_count``.
- SGLang's ``--init-expert-location FILE.json``: ``compute_initial_expert_location_metadata``
  (same file) calls ``init_by_mapping(server_args, model_config, **data_dict)``, whose only
  other parameter is ``physical_to_logical_map`` ([layer][physical expert]); every logical
  expert needs a physical one (``compute_logical_to_rank_dispatch_physical_map`` draws from
  each expert's replicas).
- DeepSeek EPLB (deepseek-ai/EPLB d52c72d5b2f2fb4c41afbf8eb21366820239913d, eplb.py):
  ``phy2log, log2phy, logcnt = rebalance_experts(...)``, ``log2phy`` padded with -1 to the
  largest replica count of any layer.
- TensorRT-LLM: ``MoeLoadBalancerConfig`` (tensorrt_llm/llmapi/llm_args.py, a
  ``StrictBaseModel``: no other keys) holds ``num_slots``, ``initial_global_assignments:
  Dict[int, List[int]]`` and ``layer_updates_per_iter``, as
  examples/wide_ep/ep_load_balancer/generate_eplb_config.py
  (NVIDIA/TensorRT-LLM 76a646e90c8e863629009ea5d365697da147348f) writes them.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit, InputError
from topograph_slurm.sources.expert_load import parse_load

PASSES = [
    [[10, 0, 5, 1, 3, 2, 0, 4], [1, 1, 9, 2, 0, 0, 6, 1]],
    [[2, 3, 0, 1, 1, 0, 7, 0], [0, 4, 1, 1, 8, 0, 0, 2]],
    [[0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]],
]
SUMMED = [[12, 3, 5, 2, 4, 2, 7, 4], [1, 5, 10, 3, 8, 0, 6, 3]]
SIM = ["--sim", "nodes=2,gpus=2", "--nodes", "gpu[0001-0002]"]
LAYERS, EXPERTS, SLOTS, GPUS = 2, 8, 12, 4


def dump(logical_count: object) -> str:
    """An SGLang stat dump as JSON, the keys its ``_StatAccumulator.dump`` saves."""
    return json.dumps(
        {"rank": 0, "logical_count": logical_count, "average_utilization_rate_over_window": None}
    )


def test_sglang_dump_passes_are_summed_and_a_2d_count_is_read_as_is() -> None:
    assert parse_load(dump(PASSES), "d") == SUMMED
    assert parse_load(dump(SUMMED), "d", "sglang") == SUMMED
    assert parse_load(json.dumps({"weight": SUMMED}), "w", "eplb") == SUMMED


@pytest.mark.parametrize(
    ("text", "fmt", "fragment"),
    [
        (json.dumps(SUMMED), "sglang", "an SGLang dump is an object with a 'logical_count'"),
        (json.dumps({"weight": SUMMED}), "sglang", "needs a 'logical_count' key"),
        (dump(SUMMED), "eplb", "needs a 'weight' or 'load' key"),
        (json.dumps(PASSES), "eplb", "is not a token count"),
        (dump([PASSES[0], [[1, 2]]]), "auto", "forward pass 1 has another [layer][expert] shape"),
        (dump([PASSES[0], [[1] * 8]]), "auto", "forward pass 1 has another [layer][expert] shape"),
        (dump([[[1, -1]]]), "auto", "-1 is not a token count"),
    ],
)
def test_a_dump_that_is_not_what_its_format_says_is_one_input_error(
    text: str, fmt: str, fragment: str
) -> None:
    with pytest.raises(InputError) as err:
        parse_load(text, "loads", fmt)
    assert fragment in str(err.value)


def run(tmp_path: Path, *args: str) -> Result:
    loads = tmp_path / "expert_distribution_recorder.json"
    loads.write_text(dump(PASSES))
    return CliRunner().invoke(
        main,
        ["--config", os.devnull, "experts", *SIM, "--loads", str(loads), "--replicas",
         str(SLOTS), "--groups", "2", *args],
    )  # fmt: skip


def plan(tmp_path: Path) -> dict[str, list[list[int]]]:
    result = run(tmp_path, "--json")
    assert result.exit_code == 0, result.output
    layers = json.loads(result.stdout)["layers"]
    return {key: [layer[key] for layer in layers] for key in layers[0] if key != "gpu_experts"}


def test_sglang_file_is_the_map_init_by_mapping_takes_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "init_expert_location.json"
    result = run(tmp_path, "--format", "sglang", "-o", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert result.stdout == ""  # -o FILE: the file instead of stdout
    assert set(data) == {"physical_to_logical_map"}
    p2l = data["physical_to_logical_map"]
    assert p2l == plan(tmp_path)["physical_to_logical"]
    assert len(p2l) == LAYERS and all(len(row) == SLOTS for row in p2l)
    assert all(type(e) is int for row in p2l for e in row)
    assert all(sorted(set(row)) == list(range(EXPERTS)) for row in p2l)
    assert SLOTS % GPUS == 0


def test_eplb_file_is_rebalance_experts_three_arrays(tmp_path: Path) -> None:
    result = run(tmp_path, "--format", "eplb")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"phy2log", "log2phy", "logcnt"}
    whole = plan(tmp_path)
    assert data["phy2log"] == whole["physical_to_logical"]
    assert data["logcnt"] == whole["replica_counts"]
    width = max(max(row) for row in data["logcnt"])
    for p2l, l2p, counts in zip(data["phy2log"], data["log2phy"], data["logcnt"], strict=True):
        assert len(l2p) == EXPERTS and all(len(slots) == width for slots in l2p)
        for expert, slots in enumerate(l2p):
            real = [s for s in slots if s != -1]
            assert slots == real + [-1] * (width - len(real)) and len(real) == counts[expert]
            assert all(p2l[s] == expert for s in real)


def test_trtllm_file_is_the_load_balancer_config_keyed_by_model_layer(tmp_path: Path) -> None:
    result = run(tmp_path, "--format", "trtllm", "--first-layer", "3")
    assert result.exit_code == 0, result.output
    config = yaml.safe_load(result.stdout)
    assert set(config) == {"num_slots", "initial_global_assignments", "layer_updates_per_iter"}
    assert config["num_slots"] == SLOTS and config["layer_updates_per_iter"] == 0
    assignments = config["initial_global_assignments"]
    assert list(assignments) == [3, 4]
    assert list(assignments.values()) == plan(tmp_path)["physical_to_logical"]


def test_json_and_an_engine_format_together_are_a_usage_error(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    result = run(tmp_path, "--json", "--format", "sglang", "-o", str(out))
    assert result.exit_code == Exit.USAGE, result.output
    assert "--json or --format sglang, not both" in result.stderr
    assert not out.exists()


TREE = "SwitchName=leaf1 Nodes=gpu[0001-0002]\nSwitchName=leaf2 Nodes=gpu[0003-0004]\n" + (
    "SwitchName=spine Switches=leaf[1-2]\n"
)
BLOCK = "BlockName=nvl1 Nodes=gpu[0001-0002]\nBlockName=nvl2 Nodes=gpu[0003-0004]\n"


@pytest.mark.parametrize("topology", [TREE, BLOCK], ids=["tree-leaves", "nvlink-blocks"])
def test_rank_cost_matrix_is_square_zero_diagonal_in_rank_order_and_ordered_by_level(
    tmp_path: Path, topology: str
) -> None:
    """SGLang's load_rank_cost_matrix (python/sglang/srt/eplb/topology.py, sgl-project/sglang
    1855e32b6035d0e8b84d264bf641758b82bcfd94) reads only ``rank_cost_matrix``: square, finite,
    non-negative, zero diagonal. Four 2-GPU nodes, two per leaf (or NVLink block), and a
    hostfile that interleaves the units so rank order is not node order."""
    conf = tmp_path / "topology.conf"
    conf.write_text(topology)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("gpu0001\ngpu0001\ngpu0003\ngpu0003\ngpu0002\ngpu0002\ngpu0004\ngpu0004\n")
    loads = tmp_path / "loads.json"
    loads.write_text(dump(PASSES))
    result = CliRunner().invoke(
        main,
        ["--config", os.devnull, "experts", "--topology", str(conf), "--hostfile", str(hostfile),
         "--gpus-per-node", "2", "--loads", str(loads), "--replicas", "16",
         "--format", "sglang-topology"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"rank_cost_matrix"}
    matrix = data["rank_cost_matrix"]
    unit = {"gpu0001": 1, "gpu0002": 1, "gpu0003": 2, "gpu0004": 2}
    hosts = ["gpu0001", "gpu0001", "gpu0003", "gpu0003", "gpu0002", "gpu0002", "gpu0004", "gpu0004"]
    assert len(matrix) == 8 and all(len(row) == 8 for row in matrix)
    node, shared, apart = set(), set(), set()
    for i, a in enumerate(hosts):
        for j, b in enumerate(hosts):
            cost = matrix[i][j]
            assert cost == matrix[j][i] and type(cost) is int and cost >= 0
            if i == j:
                assert cost == 0
            else:
                (node if a == b else shared if unit[a] == unit[b] else apart).add(cost)
    assert len(node) == len(shared) == len(apart) == 1
    assert 0 < min(node) < min(shared) < min(apart)


def safetensors(tensors: dict[str, list[int]], dtype: str = "I64") -> bytes:
    """A safetensors file as safetensors' save_file writes one: 8-byte little-endian header
    length, the JSON header padded with spaces to 8 bytes, then each tensor's little-endian
    bytes in key order (TensorRT-LLM's ExpertStatistic saves torch.bincount's int64 counts)."""
    code = {"I64": "q", "I32": "i"}[dtype]
    header, body = {}, b""
    for key in sorted(tensors):
        data = struct.pack(f"<{len(tensors[key])}{code}", *tensors[key])
        header[key] = {"dtype": dtype, "shape": [len(tensors[key])],
                       "data_offsets": [len(body), len(body) + len(data)]}  # fmt: skip
        body += data
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + body


def statistics_dir(tmp_path: Path) -> Path:
    """EXPERT_STATISTIC_PATH as tensorrt_llm/_torch/expert_statistic.py (NVIDIA/TensorRT-LLM
    0fccc5b97dd7b23c438e740b3bf4dcde607266c4) leaves it: rank 0's meta_info.json, and per rank
    rank<N>.safetensors keyed <iteration>_<layer>, one count per expert; a *_raw file (token
    ids, which examples/wide_ep/ep_load_balancer/utils.py skips) that is not counts at all."""
    folder = tmp_path / "expert_statistic"
    folder.mkdir()
    (folder / "meta_info.json").write_text('{"num_experts": 8, "num_experts_per_token": 2}')
    for rank, (first, second) in enumerate(zip(PASSES[0], PASSES[1], strict=True)):
        (folder / f"rank{rank}.safetensors").write_bytes(
            safetensors(
                {f"100_{rank + 3}": first, f"101_{rank + 3}": second, f"100_{4 - rank}": [0] * 8}
            )
        )
    (folder / "rank0_raw.safetensors").write_bytes(b"not counts")
    return folder


def test_trtllm_statistics_sum_ranks_and_iterations_per_layer_in_layer_order(
    tmp_path: Path,
) -> None:
    folder = statistics_dir(tmp_path)
    # rank 0 holds layer 3's two iterations, rank 1 layer 4's; each zeros for the other layer.
    result = CliRunner().invoke(
        main,
        ["--config", os.devnull, "experts", *SIM, "--loads", str(folder), "--replicas",
         str(SLOTS), "--format", "trtllm", "--first-layer", "3"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert list(yaml.safe_load(result.stdout)["initial_global_assignments"]) == [3, 4]
    from topograph_slurm.sources.expert_load import parse_trtllm_statistics

    ranks = {p.name: p.read_bytes() for p in folder.glob("rank?.safetensors")}
    assert parse_trtllm_statistics((folder / "meta_info.json").read_text(), ranks, "s") == SUMMED


@pytest.mark.parametrize(
    ("damage", "fragment"),
    [
        (lambda f: (f / "rank1.safetensors").write_bytes(b"\xff" * 16), "not a safetensors file"),
        (
            lambda f: (f / "rank1.safetensors").write_bytes(safetensors({"100_3": [1] * 7})),
            "is not 8 integer counts",
        ),
        (
            lambda f: (f / "rank1.safetensors").write_bytes(safetensors({"x": [1] * 8})),
            "is not named <iteration>_<layer>",
        ),
        (
            lambda f: (f / "rank1.safetensors").write_bytes(safetensors({"1_3": [-1] * 8})),
            "-1 is not a token count",
        ),
        (lambda f: (f / "meta_info.json").write_text("{}"), "want a positive 'num_experts'"),
        (lambda f: (f / "meta_info.json").unlink(), "cannot read expert loads"),
    ],
)
def test_damaged_trtllm_statistics_exit_3_and_write_nothing(
    tmp_path: Path, damage: Any, fragment: str
) -> None:
    folder = statistics_dir(tmp_path)
    damage(folder)
    out = tmp_path / "plan.yaml"
    result = CliRunner().invoke(
        main,
        ["--config", os.devnull, "experts", *SIM, "--loads", str(folder), "--replicas",
         str(SLOTS), "--format", "trtllm", "-o", str(out)],
    )  # fmt: skip
    assert result.exit_code == Exit.INPUT, result.output
    assert fragment in result.stderr and not out.exists()
