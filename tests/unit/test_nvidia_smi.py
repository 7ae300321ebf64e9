"""nvidia-smi parsers against every real capture in tests/fixtures/real and against bad input.

The expectations below were read off each fixture by hand (see SOURCES.md for provenance),
not produced by running the parser, so a parser bug cannot write its own answer key.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import real_fixture
from tests.support import nvidia_smi_oracle
from tests.support.sim_gpu import (
    fake_nvidia_smi_script,
    gb200_tray_topology,
    nvl_node_gpus,
    render_fabric_section,
    render_query_csv,
    render_query_q,
    render_topo_matrix,
)
from topograph_slurm.errors import ParseError
from topograph_slurm.model.gpu import ZERO_UUID, GpuFabric, GpuTopology
from topograph_slurm.sources.nvidia_smi import (
    parse_fabric_output,
    parse_product_names,
    parse_query_csv,
    parse_query_fabric,
    parse_topo_matrix,
)

TOPO = "nvidia-smi-topo"
QDIR = "nvidia-smi-q"
GB200_UUID = "dc6e40c4-d722-4357-9ba6-5291dd461278"


def _read(relpath: str) -> str:
    return real_fixture(relpath).read_text(encoding="utf-8")


def _numa(*spec: int | range) -> tuple[int, ...]:
    out: list[int] = []
    for item in spec:
        out.extend(item if isinstance(item, range) else [item])
    return tuple(out)


# --------------------------------------------------------------------------- topo -m fixtures


@dataclass
class TopoExpect:
    """What one real ``topo -m`` capture shows, read from the file by eye."""

    gpus: int
    nics: tuple[str, ...]
    all_nvlink: bool
    min_nvlinks: int
    pairs: dict[tuple[int, int], str] = field(default_factory=dict)
    gpu_nic: dict[tuple[int, str], str] = field(default_factory=dict)
    nic_pairs: dict[tuple[str, str], str] = field(default_factory=dict)
    rails: dict[int, tuple[str, ...]] = field(default_factory=dict)
    numa: dict[int, int | None] = field(default_factory=dict)
    cpu: dict[int, str | None] = field(default_factory=dict)


def _mlx(n: int) -> tuple[str, ...]:
    return tuple(f"mlx5_{i}" for i in range(n))


H100_13 = (*(f"mlx5_ib{i}" for i in range(8)), *(f"mlx5_eth{i}" for i in range(5)))

TOPO_EXPECT: dict[str, TopoExpect] = {
    "2gpu-nvlink-nv2-workstation-stas00.txt": TopoExpect(
        2, (), True, 2, pairs={(0, 1): "NV2"}, numa={0: None, 1: None}, cpu={1: "0-23"}
    ),
    "2gpu-pcie-phb-consumer-stas00.txt": TopoExpect(
        2, (), False, 0, pairs={(0, 1): "PHB"}, numa={0: None}, cpu={0: "0-11"}
    ),
    "a100-8gpu-sxm-nonic-compact-stas00.txt": TopoExpect(
        8,
        (),
        True,
        12,
        pairs={(0, 7): "NV12", (3, 4): "NV12"},
        numa={0: 0, 3: 0, 4: 1, 7: 1},
        cpu={0: "0-23", 4: "24-47"},
    ),
    "asus-esc8000a-e12-4x-rtx6000ada-4nic-pcie.txt": TopoExpect(
        4,
        _mlx(4),
        False,
        0,
        pairs={(0, 1): "NODE", (0, 2): "SYS", (2, 3): "NODE"},
        gpu_nic={(0, "mlx5_0"): "NODE", (0, "mlx5_2"): "SYS", (3, "mlx5_3"): "NODE"},
        nic_pairs={("mlx5_0", "mlx5_1"): "PIX", ("mlx5_1", "mlx5_2"): "SYS"},
        rails={0: ("mlx5_0", "mlx5_1"), 2: ("mlx5_2", "mlx5_3")},
        numa={0: 0, 1: 0, 2: 1, 3: 1},
        cpu={2: "32-63"},
    ),
    "dgx-a100-8gpu-12nic-mlx5-columns.txt": TopoExpect(
        8,
        _mlx(12),
        True,
        12,
        gpu_nic={(0, "mlx5_0"): "PXB", (0, "mlx5_2"): "SYS", (7, "mlx5_9"): "PXB"},
        nic_pairs={("mlx5_4", "mlx5_5"): "PIX", ("mlx5_10", "mlx5_11"): "PIX"},
        rails={
            0: ("mlx5_0", "mlx5_1"),
            3: ("mlx5_2", "mlx5_3"),
            5: ("mlx5_6", "mlx5_7"),
            6: ("mlx5_8", "mlx5_9"),
        },
        numa={0: 3, 2: 1, 4: 7, 6: 5},
        cpu={0: "48-63,176-191", 7: "80-95,208-223"},
    ),
    "dgx1-v100-topo-mp-pcie-only-4nic.txt": TopoExpect(
        8,
        _mlx(4),
        False,
        0,
        pairs={(0, 1): "PIX", (0, 2): "PHB", (0, 4): "SYS", (6, 7): "PIX"},
        gpu_nic={(0, "mlx5_1"): "PHB", (4, "mlx5_0"): "SYS"},
        rails={0: ("mlx5_0",), 2: ("mlx5_1",), 5: ("mlx5_2",), 7: ("mlx5_3",)},
        numa={0: 0, 3: 0, 4: 1, 7: 1},
        cpu={0: "0-19,40-59", 4: "20-39,60-79"},
    ),
    "gb200-4gpu-8nic-grace-openshift.txt": TopoExpect(
        4,
        _mlx(8),
        True,
        18,
        pairs={(0, 1): "NV18", (0, 3): "NV18", (2, 3): "NV18"},
        gpu_nic={(0, "mlx5_0"): "SYS", (3, "mlx5_7"): "SYS"},
        nic_pairs={
            ("mlx5_2", "mlx5_3"): "PIX",
            ("mlx5_6", "mlx5_7"): "PIX",
            ("mlx5_0", "mlx5_1"): "SYS",
        },
        # every NIC is SYS from every GPU: the matrix names no rail, so all are "closest"
        rails={g: _mlx(8) for g in range(4)},
        numa={0: 0, 1: 0, 2: 1, 3: 1},
        cpu={0: "0-71", 3: "72-143"},
    ),
    "h100-8gpu-8ib-5eth-13nic-dgx.txt": TopoExpect(
        8,
        H100_13,
        True,
        18,
        gpu_nic={
            (0, "mlx5_ib0"): "PIX",
            (0, "mlx5_ib1"): "PXB",
            (0, "mlx5_ib2"): "NODE",
            (0, "mlx5_eth0"): "SYS",
            (4, "mlx5_eth0"): "NODE",
        },
        nic_pairs={("mlx5_eth0", "mlx5_eth4"): "PIX", ("mlx5_ib0", "mlx5_ib1"): "PXB"},
        rails={g: (f"mlx5_ib{g}",) for g in range(8)},
        numa={0: 0, 3: 0, 4: 1, 7: 1},
        cpu={0: "0-55,112-167", 4: "56-111,168-223"},
    ),
    "h100-8gpu-sxm-ht-nonic-stas00.txt": TopoExpect(
        8,
        (),
        True,
        18,
        pairs={(0, 7): "NV18"},
        numa={0: 0, 4: 1},
        cpu={0: "0-51,104-155", 4: "52-103,156-207"},
    ),
    "hgx-8gpu-nv18-12nic-numa-off-tpgds.txt": TopoExpect(
        8,
        _mlx(12),
        True,
        18,
        gpu_nic={(3, "mlx5_3"): "NODE", (3, "mlx5_5"): "PIX"},
        nic_pairs={("mlx5_3", "mlx5_4"): "PIX", ("mlx5_9", "mlx5_10"): "PIX"},
        rails={
            0: ("mlx5_0",),
            1: ("mlx5_1",),
            2: ("mlx5_2",),
            3: ("mlx5_5",),
            4: ("mlx5_6",),
            5: ("mlx5_7",),
            6: ("mlx5_8",),
            7: ("mlx5_11",),
        },
        numa={g: 0 for g in range(8)},
        cpu={g: "0-191" for g in range(8)},
    ),
    "hgx-h200-8gpu-10nic-amd-2socket.txt": TopoExpect(
        8,
        _mlx(10),
        True,
        18,
        gpu_nic={(3, "mlx5_3"): "NODE", (4, "mlx5_0"): "SYS"},
        nic_pairs={("mlx5_0", "mlx5_2"): "PIX", ("mlx5_0", "mlx5_3"): "NODE"},
        rails={
            0: ("mlx5_3",),
            1: ("mlx5_5",),
            2: ("mlx5_4",),
            3: ("mlx5_0", "mlx5_1", "mlx5_2"),
            4: ("mlx5_7",),
            5: ("mlx5_9",),
            6: ("mlx5_8",),
            7: ("mlx5_6",),
        },
        numa={0: 0, 3: 0, 4: 1, 7: 1},
        cpu={0: "0-63,128-191", 7: "64-127,192-255"},
    ),
    "puget-wrx90-2x-rtx6000ada-2nic-pcie.txt": TopoExpect(
        2,
        _mlx(2),
        False,
        0,
        pairs={(0, 1): "PHB"},
        nic_pairs={("mlx5_0", "mlx5_1"): "PIX"},
        rails={0: ("mlx5_0", "mlx5_1"), 1: ("mlx5_0", "mlx5_1")},
        numa={0: 0, 1: 0},
        cpu={0: "0-23"},
    ),
}


def test_every_topo_fixture_has_expectations(real_fixtures: Path) -> None:
    """A capture added to tests/fixtures/real must get an entry here, not be skipped silently."""
    present = {p.name for p in (real_fixtures / TOPO).iterdir()}
    assert present == set(TOPO_EXPECT)


@pytest.mark.parametrize("name", sorted(TOPO_EXPECT))
def test_topo_fixture(name: str) -> None:
    exp = TOPO_EXPECT[name]
    topo = parse_topo_matrix(_read(f"{TOPO}/{name}"))
    assert topo.gpu_count == exp.gpus
    assert topo.gpus == tuple(range(exp.gpus))
    assert topo.nics == exp.nics
    assert topo.all_nvlink is exp.all_nvlink
    assert topo.min_nvlinks == exp.min_nvlinks
    assert len(topo.gpu_links) == exp.gpus * (exp.gpus - 1) // 2
    assert len(topo.gpu_nic_links) == exp.gpus * len(exp.nics)
    for (a, b), link in exp.pairs.items():
        assert topo.link(a, b) == link
        assert topo.link(b, a) == link
    for key, link in exp.gpu_nic.items():
        assert topo.gpu_nic_links[key] == link
    for key, link in exp.nic_pairs.items():
        assert topo.nic_links[key] == link
    for gpu, nics in exp.rails.items():
        assert topo.closest_nics(gpu) == nics, f"GPU{gpu}"
    for gpu, numa in exp.numa.items():
        assert topo.numa_node(gpu) == numa, f"GPU{gpu}"
    for gpu, cpu in exp.cpu.items():
        assert topo.cpu_affinity[gpu] == cpu


def test_topo_h100_13nic_rails_detail() -> None:
    """The DGX H100 capture: GPU0's rail is mlx5_ib0 over one PCIe switch (PIX); the
    Ethernet NICs are nobody's rail, and every GPU has exactly one PIX NIC."""
    topo = parse_topo_matrix(_read(f"{TOPO}/h100-8gpu-8ib-5eth-13nic-dgx.txt"))
    assert topo.closest_link(0) == "PIX"
    assert topo.rails[0] == ("mlx5_ib0",)
    rail_nics = {n for nics in topo.rails.values() for n in nics}
    assert rail_nics == {f"mlx5_ib{i}" for i in range(8)}
    assert all(topo.gpu_numa_id[g] is None for g in topo.gpus)
    assert topo.nvlinks(2, 5) == 18


def test_topo_gb200_numa_lists() -> None:
    """Grace NUMA affinity lists mix a CPU node with GPU memory nodes (``0,2-17``)."""
    topo = parse_topo_matrix(_read(f"{TOPO}/gb200-4gpu-8nic-grace-openshift.txt"))
    assert topo.numa_affinity[0] == _numa(0, range(2, 18))
    assert topo.numa_affinity[3] == _numa(1, range(18, 34))
    assert topo.closest_link(1) == "SYS"


def test_topo_h200_has_ansi_and_still_parses() -> None:
    text = _read(f"{TOPO}/hgx-h200-8gpu-10nic-amd-2socket.txt")
    assert "\x1b[4m" in text  # the capture really carries the terminal underline
    assert parse_topo_matrix(text).gpu_count == 8


def test_topo_tab_file_with_empty_tab_fields() -> None:
    """``0-191<TAB>0<TAB><TAB>N/A``: the empty field between NUMA and GPU NUMA ID."""
    text = _read(f"{TOPO}/hgx-8gpu-nv18-12nic-numa-off-tpgds.txt")
    assert "\t\tN/A" in text
    topo = parse_topo_matrix(text)
    assert topo.gpu_numa_id == {g: None for g in range(8)}


# --------------------------------------------------------------------------- topo -m synthetic

SMALL = (
    "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV4\tPIX\t0-7\t0\t\t2\n"
    "GPU1\tNV4\t X \tSYS\t8-15\t1\t\t3\n"
    "NIC0\tPIX\tSYS\t X \t\t\t\t\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "\n"
    "NIC Legend:\n"
    "\n"
    "  NIC0: mlx5_0\n"
)


def test_topo_small_with_gpu_numa_id_and_prompt_lines() -> None:
    text = "user@host:~$ nvidia-smi topo -m\r\n" + SMALL.replace("\n", "\r\n")
    topo = parse_topo_matrix(text)
    assert topo.gpu_numa_id == {0: 2, 1: 3}
    assert topo.numa_node(1) == 1
    assert topo.rails == {0: ("mlx5_0",), 1: ("mlx5_0",)}
    assert topo.min_nvlinks == 4


def test_topo_old_soc_token_is_sys() -> None:
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSOC\t0-7\nGPU1\tSOC\t X \t8-15\n"
    assert parse_topo_matrix(text).link(0, 1) == "SYS"


def test_topo_legend_missing_keeps_nic_labels() -> None:
    text = SMALL.split("NIC Legend")[0]
    assert parse_topo_matrix(text).nics == ("NIC0",)


def test_topo_single_gpu_is_not_all_nvlink() -> None:
    topo = parse_topo_matrix("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-7\tN/A\n")
    assert topo.gpu_count == 1
    assert not topo.all_nvlink
    assert topo.numa_node(0) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no matrix header"),
        ("   \n\n", "no matrix header"),
        ("hello world\nthis is not nvidia-smi\n", "no matrix header"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the driver\n", "header"),
        (SMALL.replace("NIC0\tPIX\tSYS\t X \t\t\t\t\n", ""), "truncated: no row for NIC0"),
        (SMALL.replace("GPU1\tNV4\t X \tSYS\t8-15\t1\t\t3\n", ""), "truncated: no row for GPU1"),
        (SMALL.split("GPU1\t")[0], "truncated"),
        (SMALL.replace("GPU1\tNV4\t X \tSYS", "GPU1\tNV4\t X "), "truncated?"),
        (SMALL.replace("NV4\tPIX", "NV4\tFOO"), "unknown link type 'FOO'"),
        (SMALL.replace("GPU0\t X ", "GPU0\tPIX"), "misplaced X"),
        (SMALL.replace("\tPIX\t0-7", "\tNV2\t0-7"), "NVLink NV2 between GPU0 and NIC0"),
        (SMALL.replace("0-7\t0\t\t2", "0-7\t0\t\t2\textra"), "unexpected extra values"),
        (SMALL.replace("0-7\t0\t", "0-7\tzero\t"), "NUMA affinity 'zero'"),
        (SMALL.replace("\t\t2\n", "\t\ttwo\n"), "GPU NUMA ID 'two'"),
        (SMALL.replace("NIC0\tPIX\tSYS", "GPU7\tPIX\tSYS"), "'GPU7' is not a column"),
        (SMALL.replace("NIC0\tPIX\tSYS", "GPU0\tPIX\tSYS"), "appears twice"),
    ],
)
def test_topo_bad_input_is_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(text)
    assert message in str(err.value)


def test_topo_truncated_real_capture() -> None:
    """A real capture cut mid-matrix (a paste or a killed command) is refused."""
    text = _read(f"{TOPO}/h100-8gpu-8ib-5eth-13nic-dgx.txt")
    cut = text[: text.index("\nNIC5 ") + 1]
    with pytest.raises(ParseError, match="truncated: no row for NIC5, NIC6"):
        parse_topo_matrix(cut)
    short = text.replace("PIX      X      PIX     PIX     PIX\n", "PIX      X\n", 1)
    assert short != text
    with pytest.raises(ParseError, match="matrix cells"):
        parse_topo_matrix(short)


def test_topo_renderer_round_trip() -> None:
    topo = gb200_tray_topology()
    text = render_topo_matrix(topo)
    assert parse_topo_matrix(text) == topo
    # and the rendered layout is the recorded one: tabs, NICn heads, legend
    assert text.startswith("\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\t")
    assert "\n  NIC7: mlx5_7\n" in text


def test_topo_renderer_round_trips_real_capture() -> None:
    topo = parse_topo_matrix(_read(f"{TOPO}/h100-8gpu-8ib-5eth-13nic-dgx.txt"))
    assert parse_topo_matrix(render_topo_matrix(topo)) == topo


# --------------------------------------------------------------------------- -q fixtures


def test_q_a100_full_output_fabric_na() -> None:
    gpus = parse_query_fabric(_read(f"{QDIR}/a100-sxm-4gpu-q-fabric-na.txt"))
    assert [g.bus_id for g in gpus] == [
        "00000000:68:00.0",
        "00000000:9E:00.0",
        "00000000:C2:00.0",
        "00000000:D4:00.0",
    ]
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    assert gpus[0].serial == "1320222043305"
    assert gpus[3].serial == "1321122065002"
    assert gpus[0].uuid == "GPU-31515c3d-1414-7c2c-004a-f86a898946ac"
    for g in gpus:
        assert (g.state, g.status, g.clique_id, g.cluster_uuid) == (None, None, None, None)
        assert g.health_bandwidth is None
        assert g.domain_id is None


def test_q_h100_nvl_pcie_fabric_na() -> None:
    gpus = parse_query_fabric(_read(f"{QDIR}/h100-nvl-2gpu-pcie-q-fabric-na.txt"))
    assert [g.bus_id for g in gpus] == ["00000000:AD:00.0", "00000000:AE:00.0"]
    assert [g.serial for g in gpus] == ["1650724004565", "1650924002357"]
    assert all(g.state is None and g.cluster_uuid is None for g in gpus)


def test_q_h100_sxm_single_node_nvswitch() -> None:
    gpus = parse_query_fabric(_read(f"{QDIR}/h100-sxm-8gpu-hgx-q-fabric-completed.txt"))
    assert len(gpus) == 8
    assert gpus[7].bus_id == "00000000:DB:00.0"
    assert gpus[7].serial == "1654223055370"  # not the "RACK Serial Number : N/A" line
    for g in gpus:
        assert g.state == "Completed"
        assert g.status == "Success"
        assert g.clique_id == 0
        assert g.cluster_uuid == ZERO_UUID
        assert g.health is None  # this driver prints only Health/Bandwidth
        assert g.health_bandwidth is None  # ... and it is N/A
    assert gpus[0].domain_id == f"{ZERO_UUID}.0"


def test_q_azure_deindented_fragment() -> None:
    text = _read(f"{QDIR}/azure-nvlink-fabric-insufficient-resources.txt")
    assert text.startswith("Fabric\n")  # de-indented: the block header sits in column 0
    [gpu] = parse_query_fabric(text)
    assert gpu.index == 0 and gpu.bus_id is None
    assert gpu.state == "Completed"
    assert gpu.status == "Insufficient Resources"
    assert gpu.clique_id == 0
    assert gpu.cluster_uuid == ZERO_UUID


def test_q_gb200_grep_fragment_unhealthy_clique2() -> None:
    text = _read(f"{QDIR}/gb200-fabric-grep-unhealthy-clique2.txt")
    assert "\n--" in text
    [gpu] = parse_query_fabric(text)
    assert gpu.state == "Completed"
    assert gpu.status == "Success"
    assert gpu.clique_id == 2
    assert gpu.cluster_uuid == GB200_UUID
    assert gpu.health == "Unhealthy"
    assert gpu.health_bandwidth == "Full"
    assert gpu.domain_id == f"{GB200_UUID}.2"


def test_every_q_fixture_parses(real_fixtures: Path) -> None:
    files = sorted((real_fixtures / QDIR).iterdir())
    assert len(files) == 5
    for path in files:
        assert parse_query_fabric(path.read_text(encoding="utf-8")), path.name


# --------------------------------------------------------------------------- -q synthetic

GREP_TWO_GPUS = """\
        Graphics                          : 685.000 mV
    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 32766
        ClusterUUID                       : 6E9B1A35-0C43-4F0B-9F4E-2D5C7A1B8E90
        Health
            Bandwidth                     : Full
            Route Recovery in progress    : False
            Route Unhealthy               : False
            Access Timeout Recovery       : False
            Summary                       : Healthy
    Processes                             : None
--
    Fabric
        State                             : In Progress
        Status                            : N/A
        CliqueId                          : N/A
        ClusterUUID                       : N/A
        Health
            Bandwidth                     : N/A
"""


def test_q_grep_fragment_two_blocks_and_extra_health_keys() -> None:
    first, second = parse_query_fabric(GREP_TWO_GPUS)
    assert first.index == 0 and second.index == 1
    assert first.cluster_uuid == "6e9b1a35-0c43-4f0b-9f4e-2d5c7a1b8e90"  # normalised
    assert first.clique_id == 32766
    assert (first.health, first.health_bandwidth) == ("Healthy", "Full")
    assert first.health_flags == ()  # all three yes/no entries read False
    assert second.state == "In Progress"
    assert second.status is None and second.clique_id is None


def test_q_health_flags_and_spaced_keys() -> None:
    text = GREP_TWO_GPUS.replace("Route Unhealthy               : False", "Route Unhealthy : True")
    text = text.replace("ClusterUUID      ", "Cluster UUID     ", 1)
    first, _ = parse_query_fabric(text)
    assert first.health_flags == ("route unhealthy",)
    assert first.cluster_uuid == "6e9b1a35-0c43-4f0b-9f4e-2d5c7a1b8e90"


def test_q_headerless_fragment_grep_A() -> None:
    """``grep -A3 State`` cuts the ``Fabric`` line off; keys alone still make a GPU each."""
    text = (
        "        State                             : Completed\n"
        "        Status                            : Success\n"
        "        CliqueId                          : 4\n"
        "        ClusterUUID                       : dc6e40c4-d722-4357-9ba6-5291dd461278\n"
        "--\n"
        "        State                             : Completed\n"
        "        Status                            : Success\n"
        "        CliqueId                          : 4\n"
        "        ClusterUUID                       : dc6e40c4-d722-4357-9ba6-5291dd461278\n"
    )
    gpus = parse_query_fabric(text)
    assert [g.domain_id for g in gpus] == [f"{GB200_UUID}.4"] * 2


def test_q_old_driver_gpu_without_fabric_section() -> None:
    text = (
        "==============NVSMI LOG==============\n\n"
        "Attached GPUs                             : 1\n"
        "GPU 00000000:3B:00.0\n"
        "    Product Name                          : Tesla V100-SXM2-32GB\n"
        "    Serial Number                         : 0323218012345\n"
        "    Processes                             : None\n"
    )
    [gpu] = parse_query_fabric(text)
    assert gpu.bus_id == "00000000:3B:00.0"
    assert gpu.serial == "0323218012345"
    assert gpu.state is None


def test_q_renderer_round_trip_and_format() -> None:
    gpus = nvl_node_gpus(GB200_UUID, 7, state="Completed", health="Unhealthy")
    text = render_query_q(gpus)
    assert parse_query_fabric(text) == gpus
    # Key padding as in the real captures: value colon in column 43.
    assert "        ClusterUUID                       : dc6e40c4-" in text
    assert text.startswith("==============NVSMI LOG==============\n")


def test_q_renderer_round_trips_health_flags() -> None:
    gpu = replace(nvl_node_gpus(GB200_UUID, 3, count=1)[0], health_flags=("route unhealthy",))
    text = render_fabric_section(gpu)
    assert "            Route Recovery in progress    : False" in text
    assert "            Route Unhealthy               : True" in text
    # a bare Fabric block carries no GPU identity, only the fabric fields
    expected = replace(gpu, bus_id=None, serial=None, uuid=None)
    assert parse_query_fabric(text) == [expected]


def test_q_fabric_section_matches_real_layout() -> None:
    """The rendered Fabric block equals the real H100 capture's block line for line."""
    real = _read(f"{QDIR}/h100-sxm-8gpu-hgx-q-fabric-completed.txt").splitlines()
    start = real.index("    Fabric")
    gpu = GpuFabric(0, state="Completed", status="Success", clique_id=0, cluster_uuid=ZERO_UUID)
    assert render_fabric_section(gpu).splitlines() == real[start : start + 7]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no 'GPU 0000"),
        ("just some junk\nwith: colons : here\n", "no 'GPU 0000"),
        ("No devices were found\n", "no 'GPU 0000"),
        ("Fabric\n    CliqueId : two\n", "CliqueId 'two' is not"),
        ("Fabric\n    CliqueId : -1\n", "CliqueId '-1'"),
        ("Fabric\n    ClusterUUID : not-a-uuid\n", "ClusterUUID 'not-a-uuid' is not a UUID"),
        ("  Fabric\n    State : Completed\nGPU 00000000:18:00.0\n", "before the first"),
    ],
)
def test_q_bad_input_is_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_query_fabric(text)
    assert message in str(err.value)


# --------------------------------------------------------------------------- CSV


def test_csv_recorded_format() -> None:
    text = (
        "0, 1652924010123, dc6e40c4-d722-4357-9ba6-5291dd461278, 2, Completed, Success\n"
        "1, 1652924010124, dc6e40c4-d722-4357-9ba6-5291dd461278, 2, Completed, Success\n"
    )
    gpus = parse_query_csv(text)
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[1].serial == "1652924010124"
    assert gpus[0].domain_id == f"{GB200_UUID}.2"


def test_csv_na_spellings_and_whitespace() -> None:
    text = (
        "\n 0 ,[N/A],  N/A ,N/A, N/A ,[Not Supported]  \n"
        "1, 1320222043305, [N/A], [N/A], In Progress, N/A\t\n\n"
    )
    a, b = parse_query_csv(text)
    assert (a.serial, a.cluster_uuid, a.clique_id, a.state, a.status) == (None,) * 5
    assert b.serial == "1320222043305" and b.state == "In Progress" and b.status is None


def test_csv_with_header_and_other_columns() -> None:
    text = (
        "index, uuid, fabric.cliqueId, fabric.clusterUuid, fabric.state, fabric.status\n"
        "3, GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1, 0, "
        "00000000-0000-0000-0000-000000000000, Completed, Success\n"
    )
    [gpu] = parse_query_csv(text)
    assert gpu.index == 3
    assert gpu.uuid == "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"
    assert gpu.cluster_uuid == ZERO_UUID and gpu.serial is None


def test_csv_explicit_fields() -> None:
    text = "dc6e40c4-d722-4357-9ba6-5291dd461278, 5\n"
    [gpu] = parse_query_csv(text, fields=("fabric.clusterUuid", "fabric.cliqueId"))
    assert gpu.index == 0 and gpu.domain_id == f"{GB200_UUID}.5"


def test_csv_renderer_round_trip() -> None:
    gpus = nvl_node_gpus(GB200_UUID, 2, count=4)
    gpus[3:] = [nvl_node_gpus(None, None, count=4, state=None, status=None)[3]]
    text = render_query_csv(gpus)
    assert text.splitlines()[0] == (
        "0, 1650000000000, dc6e40c4-d722-4357-9ba6-5291dd461278, 2, Completed, Success"
    )
    assert text.splitlines()[3] == "3, 1650000000003, N/A, N/A, N/A, N/A"
    parsed = parse_query_csv(text)
    assert [(g.index, g.serial, g.domain_id, g.state) for g in parsed] == [
        (g.index, g.serial, g.domain_id, g.state) for g in gpus
    ]
    assert parse_query_csv(render_query_csv(gpus, header=True)) == parsed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no GPU rows"),
        ("\n\n", "no GPU rows"),
        ("No devices were found\n", "expected 6 comma-separated values"),
        ("0, 123, N/A, N/A\n", "got 4"),
        ("x, 123, N/A, N/A, N/A, N/A\n", "GPU index 'x'"),
        ("0, 123, N/A, 1.5, Completed, Success\n", "CliqueId '1.5'"),
        ("0, 123, zzz, 1, Completed, Success\n", "ClusterUUID 'zzz'"),
    ],
)
def test_csv_bad_input_is_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_query_csv(text)
    assert message in str(err.value)


def test_parse_fabric_output_tells_formats_apart() -> None:
    gpus = nvl_node_gpus(GB200_UUID, 2)
    assert parse_fabric_output(render_query_q(gpus)) == gpus
    from_csv = parse_fabric_output(render_query_csv(gpus))
    assert [g.domain_id for g in from_csv] == [g.domain_id for g in gpus]
    fragment = _read(f"{QDIR}/gb200-fabric-grep-unhealthy-clique2.txt")
    assert parse_fabric_output(fragment)[0].clique_id == 2
    with pytest.raises(ParseError):
        parse_fabric_output("")


# --------------------------------------------------------------------------- fake binary


def test_fake_nvidia_smi_script(tmp_path: Path) -> None:
    import subprocess

    gpus = nvl_node_gpus(GB200_UUID, 1)
    csv, query, topo = (
        render_query_csv(gpus),
        render_query_q(gpus),
        render_topo_matrix(gb200_tray_topology()),
    )
    script = tmp_path / "nvidia-smi"
    script.write_text(fake_nvidia_smi_script(csv=csv, query=query, topo=topo))
    script.chmod(0o755)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(script), *args], capture_output=True, text=True, check=False)

    q = "--query-gpu=index,serial,fabric.clusterUuid,fabric.cliqueId,fabric.state,fabric.status"
    assert run(q, "--format=csv,noheader").stdout == csv
    assert run("-q").stdout == query
    assert run("topo", "-m").stdout == topo
    bad = run("-r")
    assert bad.returncode == 2 and "unsupported arguments: -r" in bad.stderr


# --------------------------------------------------------------------------- fuzzing

_TOKENS = st.sampled_from(
    [
        "GPU0",
        "GPU1",
        "NIC0",
        "mlx5_0",
        " X ",
        "NV18",
        "PIX",
        "SYS",
        "SOC",
        "NODE",
        "CPU Affinity",
        "NUMA Affinity",
        "GPU NUMA ID",
        "0-7",
        "0,2-17",
        "N/A",
        "[N/A]",
        "Fabric",
        "Health",
        "State : Completed",
        "CliqueId : 2",
        "ClusterUUID : " + GB200_UUID,
        "GPU 00000000:18:00.0",
        "NIC Legend:",
        "NIC0: mlx5_0",
        "Legend:",
        "--",
        ",",
        ":",
        "\t",
        " ",
        "    ",
        "\n",
        "\x1b[4m",
        "99999999999999999999",
    ]
)
_TEXTS = st.one_of(st.text(), st.lists(_TOKENS, max_size=60).map("".join))


@settings(max_examples=300, deadline=None)
@given(_TEXTS)
def test_parsers_raise_only_parse_error(text: str) -> None:
    for parse in (parse_topo_matrix, parse_query_fabric, parse_query_csv, parse_fabric_output):
        with contextlib.suppress(ParseError):
            parse(text)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=8), st.data())
def test_topo_mutations_of_valid_matrix(gpus: int, data: st.DataObject) -> None:
    """Deleting or replacing any one character of a valid matrix never crashes the parser."""
    text = render_topo_matrix(gb200_tray_topology(gpus=gpus, nics=("mlx5_0", "mlx5_1")))
    pos = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    repl = data.draw(st.sampled_from(["", "X", "\t", "\n", "9", "-", " "]))
    mutated = text[:pos] + repl + text[pos + 1 :]
    try:
        result = parse_topo_matrix(mutated)
    except ParseError:
        return
    assert isinstance(result, GpuTopology)


# --------------------------------------------------------------------------- NVIDIA topograph

# What NVIDIA topograph's collector runs (pkg/accelerator/nvidia_smi.go, NvidiaSMICommand):
# `nvidia-smi --query-gpu=fabric.clusterUuid,fabric.cliqueId --format=csv,noheader`, one line
# per GPU. No real capture of it was found (SOURCES.md lists none); these lines follow the
# format nvidia-smi prints for the collector's own six-column query: cells joined by ", ",
# fabric fields N/A when the GPU has no fabric.
TOPOGRAPH_TRAY = "".join(f"{GB200_UUID}, 32767\n" for _ in range(4))


def test_two_column_topograph_output_is_read_without_state() -> None:
    gpus = parse_query_csv(TOPOGRAPH_TRAY)
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    assert {g.domain_id for g in gpus} == {f"{GB200_UUID}.32767"}
    assert all(g.state is None and g.status is None and not g.state_collected for g in gpus)
    assert parse_fabric_output(TOPOGRAPH_TRAY) == gpus


def test_two_column_with_header_na_and_crlf() -> None:
    text = "fabric.clusterUuid, fabric.cliqueId\r\nN/A, N/A\r\n[N/A], [N/A]\r\n"
    a, b = parse_query_csv(text)
    assert (a.domain_id, b.domain_id, a.state_collected) == (None, None, False)


def test_six_columns_still_mean_state_collected() -> None:
    gpus = nvl_node_gpus(GB200_UUID, 2)
    assert all(g.state_collected for g in parse_query_csv(render_query_csv(gpus)))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"{GB200_UUID}, 1\n{GB200_UUID}, 1, Completed\n", "expected 2 comma-separated"),
        ("zzz, 1\n", "ClusterUUID 'zzz'"),
        (f"{GB200_UUID}, x\n", "CliqueId 'x'"),
    ],
)
def test_two_column_bad_input_is_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_fabric_output(text)
    assert message in str(err.value)


def test_parse_errors_escape_control_characters() -> None:
    """ParseError messages quote input with !r: repr escapes every control character, so
    the CLI's one error line stays one line and cannot drive the terminal."""
    with pytest.raises(ParseError) as err:
        parse_query_csv("0, 1, zz\x07\x1b1\x7f, 1, Completed, Success\n")
    message = str(err.value)
    assert "'zz\\x07\\x1b1\\x7f'" in message
    assert not any(ord(c) < 32 or ord(c) == 127 for c in message)


def _either(parse: Callable[[str], object], text: str) -> object:
    try:
        return parse(text)
    except ParseError as err:
        return ("ParseError", str(err))


def _same_as_oracle(text: str) -> None:
    products: dict[int, str] = {}
    assert _either(lambda t: parse_query_fabric(t, products), text) == _either(
        nvidia_smi_oracle.parse_query_fabric, text
    )
    expected = nvidia_smi_oracle.parse_product_names(text)
    assert products == expected and parse_product_names(text) == expected


def test_streaming_reader_equals_the_line_by_line_oracle_on_real_captures() -> None:
    """Every real ``-q`` capture (the project's and the shared ones), whole and cut at each
    tenth of its lines: the streaming reader's GPUs, errors and product names are the
    line-by-line reader's."""
    folders = [Path(__file__).parents[1] / "fixtures" / "real" / "nvidia-smi-q"]
    shared = Path("/work/shared/fixtures/real/nvidia-smi-q")
    folders += [shared] if shared.is_dir() else []
    paths = [path for folder in folders for path in sorted(folder.glob("*.txt"))]
    assert len(paths) >= 5
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.split("\n")
        for cut in range(1, 11):
            _same_as_oracle("\n".join(lines[: len(lines) * cut // 10]))
            _same_as_oracle("\n".join(lines[len(lines) * (cut - 1) // 10 :]))


#: Lines of ``-q`` text and its fragments, to be shuffled, re-indented and re-spaced.
_Q_LINES = [
    "GPU 00000000:18:00.0", "GPU 00000000:2A:00.0", "    Product Name : NVIDIA H100",
    "    Product Name                          : NVIDIA GB200", "Product Name: [N/A]",
    "    Serial Number : 1654", "    GPU UUID : GPU-1", "    Fabric", "Fabric", "--",
    "        State : Completed", "        Status : Success", "        CliqueId : 2",
    "        ClusterUUID : 8f4e5b2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b", "        Clique ID : x",
    "        Health", "            Summary : Healthy", "            Bandwidth : Full",
    "            Degraded BW : True", "    Compute Mode : Default", "", "  ",
    "\t\tState : In Progress",
    "        Cluster UUID : 00000000-0000-0000-0000-000000000000", "\x1b[1mFabric\x1b[0m",
    "    GPU Part Number : 2330", "CliqueId : 4", "    Fabric GUID : --",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(_Q_LINES), st.sampled_from(["", " ", "  ", "\t", "    "])),
        max_size=40,
    ),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_streaming_reader_equals_the_line_by_line_oracle_on_generated_text(
    lines: list[tuple[str, str]], newline: str
) -> None:
    """Shuffled, re-indented ``-q`` lines (headers, Fabric blocks, Health, fragments' ``--``,
    tabs, CR, ANSI escapes): the streaming reader answers as the line-by-line one."""
    _same_as_oracle(newline.join(indent + line for line, indent in lines))


def test_streaming_reader_equals_the_oracle_on_rendered_reports() -> None:
    gpus = [
        GpuFabric(i, state="Completed", status="Success", clique_id=i % 3, cluster_uuid=ZERO_UUID)
        for i in range(8)
    ]
    _same_as_oracle(render_query_q(gpus))
