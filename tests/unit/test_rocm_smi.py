"""``rocm-smi --showtopo`` (AMD Instinct) read into the vendor-neutral GPU topology: every real
capture's xGMI groups and NUMA nodes as read off it by hand, the xGMI findings, gres.conf's
AMD lines, and bad input (one clear error, exit 3).

Hand reading: the "Link Type between two GPUs" matrix gives the groups (GPUs joined by XGMI),
the "Numa Nodes" section each GPU's NUMA node. rocm-smi prints no NICs, so no capture has a
nearest NIC.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.amd import split_hive
from tests.support.snapshots import write_node_outputs
from topograph_slurm.analysis.nvlink.gres import gres_type
from topograph_slurm.analysis.nvlink.xgmi import hive_findings
from topograph_slurm.cli.main import main
from topograph_slurm.errors import ParseError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.sources.gpu_topology import parse_gpu_topology
from topograph_slurm.sources.rocm_smi import parse_showproduct, parse_showtopo
from topograph_slurm.sources.snapshot import KEY_TOPO

ROCM = Path(__file__).parents[1] / "fixtures" / "real" / "rocm-smi-topo"
MI308X = ROCM / "mi308x-8gpu-xgmi-2numa-lowpower-warning-msswift.txt"
MI100 = ROCM / "mi100-4gpu-pcie-only-2numa-rccl538.txt"
MI300A = ROCM.parent / "rocm-smi-product" / "mi300a-4apu-showproduct-rocmsmilib-changelog.txt"

#: capture → (xGMI groups, NUMA node per GPU, finding kind or None), read by hand
EXPECTED = {
    MI308X.name: (((0, 1, 2, 3, 4, 5, 6, 7),), [0, 0, 0, 0, 1, 1, 1, 1], None),
    MI100.name: (((0,), (1,), (2,), (3,)), [7, 1, 7, 1], FindingKind.XGMI_PCIE_ONLY),
}


def test_every_capture_has_an_expectation() -> None:
    assert sorted(p.name for p in ROCM.iterdir()) == sorted(EXPECTED)
    assert [p.name for p in MI300A.parent.iterdir()] == [MI300A.name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_capture_reads_as_read_by_hand(name: str) -> None:
    groups, numa, kind = EXPECTED[name]
    topo = parse_gpu_topology((ROCM / name).read_text())
    assert topo.vendor == "amd"
    assert topo.fast_groups == groups
    assert [topo.numa_node(gpu) for gpu in topo.gpus] == numa
    assert topo.nics == () and topo.rails == {gpu: () for gpu in topo.gpus}
    assert [f.kind for f in hive_findings("n1", topo)] == ([kind] if kind else [])


def test_pcie_pairs_are_classed_by_numa_node() -> None:
    topo = parse_showtopo(MI100.read_text())
    assert topo.link(0, 2) == "NODE"  # both NUMA node 7
    assert topo.link(0, 1) == "SYS"  # NUMA 7 and 1
    assert topo.nvlinks(0, 2) == 0 and not topo.all_nvlink


def test_mi300x_hive_counts_one_link_a_pair() -> None:
    topo = parse_showtopo(MI308X.read_text())
    assert topo.all_nvlink and topo.min_nvlinks == 1


def test_two_xgmi_groups_are_a_finding() -> None:
    topo = parse_showtopo(split_hive(MI308X.read_text()))
    assert topo.fast_groups == ((0, 1, 2, 3), (4, 5, 6, 7))
    (finding,) = hive_findings("mi01", topo)
    assert finding.kind == FindingKind.XGMI_SPLIT
    assert finding.message == "8 GPUs in 2 xGMI groups: GPUs 0,1,2,3 | 4,5,6,7"


def test_single_gpu_and_nvidia_give_no_finding() -> None:
    one = "=== Link Type between two GPUs ===\n       GPU0\nGPU0   0\n"
    assert hive_findings("n1", parse_showtopo(one)) == []


@pytest.mark.parametrize(
    "text",
    [
        "=== Weight between two GPUs ===\n GPU0\nGPU0 0\n",
        "=== Link Type between two GPUs ===\n GPU0 GPU1\nGPU0 0 XGMI\nGPU1 NVLINK 0\n",
        "=== Link Type between two GPUs ===\n GPU0 GPU1\nGPU0 0 XGMI\nGPU1 PCIE 0\n",
        "=== Link Type between two GPUs ===\n GPU0 GPU1\nGPU0 0 XGMI\n",
        "=== Link Type between two GPUs ===\n GPU0 GPU1\nGPU0 0\nGPU1 XGMI 0\n",
    ],
)
def test_bad_matrix_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_showtopo(text)


def _gres(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["gres", *args])
    return result.exit_code, result.stdout, result.stderr


def test_gres_from_an_mi300x_capture() -> None:
    code, out, err = _gres("--topo-matrix", str(MI308X), "--nodes", "mi[01-02]")
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("NodeName=")]
    assert len(lines) == 8
    links = ",".join("-1" if j == 3 else "1" for j in range(8))
    assert lines[3] == f"NodeName=mi[01-02] Name=gpu File=/dev/dri/renderD131 Links={links}"
    assert "xgmi" not in err


def test_gres_from_a_pcie_only_capture_warns() -> None:
    code, out, err = _gres("--topo-matrix", str(MI100), "--nodes", "mi1")
    assert code == 0
    assert "NodeName=mi1 Name=gpu File=/dev/dri/renderD130\n" in out  # no Links=: no xGMI
    assert "xgmi-pcie-only: mi1: 4 GPUs, no xGMI link between any two (all PCIe)" in err


def test_snapshot_of_amd_nodes(tmp_path: Path) -> None:
    split = split_hive(MI308X.read_text())
    outputs = {"mi01": {KEY_TOPO: MI308X.read_text()}, "mi02": {KEY_TOPO: split}}
    snap = write_node_outputs(tmp_path / "snap", outputs)
    code, out, err = _gres("--snapshot", str(snap))
    assert code == 0, err
    assert "NodeName=mi01 Name=gpu File=/dev/dri/renderD128 Links=-1,1,1,1,1,1,1,1" in out
    assert "NodeName=mi02 Name=gpu File=/dev/dri/renderD128 Links=-1,1,1,1,0,0,0,0" in out
    assert "xgmi-split: mi02: 8 GPUs in 2 xGMI groups: GPUs 0,1,2,3 | 4,5,6,7" in err


def test_bad_capture_is_one_line_exit_3(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("=== Link Type between two GPUs ===\n GPU0 GPU1\nGPU0 0 FOO\nGPU1 FOO 0\n")
    code, out, err = _gres("--topo-matrix", str(bad), "--nodes", "mi1")
    assert code == 3 and out == ""
    assert err.strip().count("\n") == 0 and "unknown link 'FOO'" in err


def _order(fmt: str, topo: Path) -> tuple[int, str, str]:
    sim = "nodes=4,gpus=8,rails=2,su=4,tiers=2"
    args = ["order", "--sim", sim, "--nodes", "gpu[0001-0002]", "--tp", "8"]
    result = CliRunner().invoke(main, [*args, "--topo-matrix", str(topo), "--format", fmt])
    return result.exit_code, result.stdout, result.stderr


def test_binding_env_on_amd_names_rocr_visible_devices() -> None:
    code, out, err = _order("binding-env", MI308X)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1:] == [f"LOCAL_RANK={gpu} ROCR_VISIBLE_DEVICES={gpu}" for gpu in range(8)]


def test_binding_wrapper_on_amd_says_rocm_smi(tmp_path: Path) -> None:
    code, out, err = _order("binding-wrapper", MI308X)
    assert code == 0, err
    assert "from rocm-smi --showtopo" in out
    assert "3) export ROCR_VISIBLE_DEVICES=3 ;;" in out


def test_node_view_draws_the_hive_as_one_bar() -> None:
    from topograph_slurm.render.draw.node import node_picture

    picture = node_picture("mi01", parse_showtopo(MI308X.read_text()))
    assert [s.lines for s in picture.shapes if s.cls == "xgmi-hive"] == [
        ("xGMI all pairs (one hive)",)
    ]
    assert sum(line.cls == "lk-xgmi" for line in picture.lines) == 8  # bar to each GPU
    assert "xgmi-hive" in {item.cls for item in picture.legend}


def test_node_view_draws_each_xgmi_pair_of_a_split_node() -> None:
    from topograph_slurm.render.draw.node import node_picture

    picture = node_picture("mi02", parse_showtopo(split_hive(MI308X.read_text())))
    assert not [s for s in picture.shapes if s.cls == "xgmi-hive"]
    assert sum(line.cls == "lk-xgmi" for line in picture.lines) == 12  # 6 pairs in each group


def test_showproduct_names_each_gpu_and_gives_its_gres_type() -> None:
    products = parse_showproduct(MI300A.read_text())
    assert products == dict.fromkeys(range(4), "Aqua Vanjaram [Instinct MI300A]")
    assert gres_type(products[0]) == "mi300a"
    assert gres_type("AMD Instinct MI300X OAM") == "mi300x"
    assert gres_type("NVIDIA H100 80GB HBM3") == "h100"


def test_gres_types_amd_gpus_from_showproduct() -> None:
    code, out, err = _gres("--topo-matrix", str(MI100), "--rocm-smi-product", str(MI300A))
    assert code == 2 and "--topo-matrix needs --nodes" in err
    args = ["--topo-matrix", str(MI100), "--nodes", "n1", "--rocm-smi-product", str(MI300A)]
    code, out, err = _gres(*args)
    assert code == 0, err
    assert "NodeName=n1 Name=gpu Type=mi300a File=/dev/dri/renderD128\n" in out
    assert "no Type=" not in out


def test_gres_refuses_both_product_captures() -> None:
    both = ["--nvidia-smi-q", str(MI300A), "--rocm-smi-product", str(MI300A)]
    code, out, err = _gres("--topo-matrix", str(MI100), "--nodes", "n1", *both)
    assert code == 2 and out == "" and "not both" in err


AMDSMI = ROCM.parent / "amd-smi-topology" / "mi355x-8gpu-xgmi-all-tables-oci-pollara.txt"


def test_amdsmi_topology_reads_as_read_by_hand() -> None:
    """8 MI355X: every pair XGMI in the LINK TYPE TABLE (rows by PCI address, GPU N the Nth);
    amd-smi prints no NUMA node, so none is known."""
    assert [p.name for p in AMDSMI.parent.iterdir()] == [AMDSMI.name]
    topo = parse_gpu_topology(AMDSMI.read_text())
    assert topo.vendor == "amd" and topo.gpus == tuple(range(8))
    assert topo.fast_groups == (tuple(range(8)),)
    assert [topo.numa_node(gpu) for gpu in topo.gpus] == [None] * 8
    assert hive_findings("n1", topo) == []


def test_amdsmi_pcie_pairs_and_bad_tables() -> None:
    text = AMDSMI.read_text().replace("SELF         XGMI", "SELF         PCIE", 1)
    with pytest.raises(ParseError, match="differ by direction"):
        parse_gpu_topology(text)
    head = "LINK TYPE TABLE:\n             0000:0d:00.0 0000:26:00.0\n"
    pcie = head + "0000:0d:00.0 SELF         PCIE\n0000:26:00.0 PCIE         SELF\n"
    topo = parse_gpu_topology(pcie)
    assert topo.link(0, 1) == "SYS"
    assert [f.kind for f in hive_findings("n1", topo)] == [FindingKind.XGMI_PCIE_ONLY]
    with pytest.raises(ParseError, match="not square"):
        parse_gpu_topology(head + "0000:0d:00.0 SELF         PCIE\n")
    with pytest.raises(ParseError, match="no PCI address header"):
        parse_gpu_topology("LINK TYPE TABLE:\n GPU0 GPU1\n")


AMD_SIM = "nodes=4,gpus=8,rails=2,su=4,tiers=2,gpu=mi300x"


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_sim_amd_nodes_print_a_showtopo_the_parser_reads() -> None:
    from topograph_slurm.sources import sim

    spec = sim.parse_sim_spec("nodes=2,gpus=8,gpu=MI300X")
    assert spec.gpu == "mi300x"
    topo = parse_showtopo(sim.generate_showtopo(spec))
    assert topo.vendor == "amd" and topo.fast_groups == (tuple(range(8)),)
    assert [topo.numa_node(g) for g in topo.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    code, _out, err = _cli("explain", "--sim", "nodes=4,gpu=a100", "--nodes", "gpu[0001-0002]")
    assert code == 2 and "gpu must be an AMD Instinct model (mi300x), got 'a100'" in err


def test_explain_order_and_pools_on_an_amd_sim() -> None:
    nodes = ("--nodes", "gpu[0001-0002]")
    code, out, err = _cli("explain", "--sim", AMD_SIM, *nodes, "--tp", "8")
    assert code == 0, err
    assert "slowest link xGMI/PCIe inside the node" in out
    code, out, err = _cli("order", "--sim", AMD_SIM, *nodes, "--tp", "8", "--format", "binding-env")
    assert code == 0, err
    assert out.splitlines()[1:] == [f"LOCAL_RANK={g} ROCR_VISIBLE_DEVICES={g}" for g in range(8)]
    pools = ("--prefill", "1x8", "--decode", "2x4", "--format", "binding-env")
    code, out, err = _cli("pools", "--sim", AMD_SIM, *nodes, *pools)
    assert code == 0, err
    assert "LOCAL_RANK=3 ROCR_VISIBLE_DEVICES=7" in out  # decode-1's last rank on GPU 7
    assert "CUDA_VISIBLE_DEVICES" not in out
