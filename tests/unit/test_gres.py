"""``topograph-slurm gres``: gres.conf from every real ``topo -m`` capture, node types folded,
a node that differs is a finding, --check, and bad input (one line, exit 3, nothing written).

The expected Cores= and Links= of each capture below were read off the capture by hand: the
CPU Affinity column (two equal ranges = a core's two threads: the first range is the cores)
and the matrix's ``NV#`` cells (a PCIe-only matrix has no Links=). Cores= is a whole socket
(Slurm 24.11+ refuses any other core list, ``_check_core_range_matches_sock`` in
src/interfaces/gres.c: one whole socket, or every core); a node whose GPUs all share one CPU
affinity gets none (any core can be used).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.snapshots import write_node_outputs
from topograph_slurm.analysis.nvlink.gres import gres_type
from topograph_slurm.cli.main import main
from topograph_slurm.sources.snapshot import KEY_Q, KEY_QUERY, KEY_TOPO

REAL = Path(__file__).parents[1] / "fixtures" / "real"
TOPO = REAL / "nvidia-smi-topo"
H100_Q = REAL / "nvidia-smi-q" / "h100-sxm-8gpu-hgx-q-fabric-completed.txt"
H100_TOPO = TOPO / "h100-8gpu-sxm-ht-nonic-stas00.txt"


def _all(count: int, nv: int) -> list[str]:
    """Links= of *count* GPUs that all share *nv* NVLinks: -1 on the diagonal."""
    return [",".join("-1" if j == i else str(nv) for j in range(count)) for i in range(count)]


def _no_links(count: int) -> list[None]:
    return [None] * count


#: capture → (Cores= per GPU, Links= per GPU), read from the capture by hand
EXPECT: dict[str, tuple[list[str] | list[None], list[str] | list[None]]] = {
    # a workstation, 24 CPUs, no NUMA affinity; GPU0-GPU1 NV2; one affinity: no Cores=
    "2gpu-nvlink-nv2-workstation-stas00.txt": ([None] * 2, _all(2, 2)),
    # two consumer GPUs over PHB: no NVLink, so no Links=; one affinity: no Cores=
    "2gpu-pcie-phb-consumer-stas00.txt": ([None] * 2, _no_links(2)),
    # 8x A100 NV12, NUMA 0 = CPUs 0-23, NUMA 1 = 24-47 (single ranges: one thread per core)
    "a100-8gpu-sxm-nonic-compact-stas00.txt": (["0-23"] * 4 + ["24-47"] * 4, _all(8, 12)),
    # 4 RTX 6000 Ada over PCIe, CPUs 0-31 / 32-63
    "asus-esc8000a-e12-4x-rtx6000ada-4nic-pcie.txt": (["0-31"] * 2 + ["32-63"] * 2, _no_links(4)),
    # DGX A100 in NPS4: 128 cores, 256 threads, 8 NUMA nodes of 16 cores; 48-63,176-191 is
    # cores 48-63 (NUMA 3), inside socket 0 (cores 0-63): the whole socket is written
    "dgx-a100-8gpu-12nic-mlx5-columns.txt": (["0-63"] * 4 + ["64-127"] * 4, _all(8, 12)),
    # DGX-1 topo -mp: PCIe only; 40 cores, 0-19,40-59 is cores 0-19
    "dgx1-v100-topo-mp-pcie-only-4nic.txt": (["0-19"] * 4 + ["20-39"] * 4, _no_links(8)),
    # GB200 tray: two 72-core Grace CPUs without SMT, NV18 all-to-all
    "gb200-4gpu-8nic-grace-openshift.txt": (["0-71"] * 2 + ["72-143"] * 2, _all(4, 18)),
    # DGX H100: 112 cores, 0-55,112-167 is cores 0-55
    "h100-8gpu-8ib-5eth-13nic-dgx.txt": (["0-55"] * 4 + ["56-111"] * 4, _all(8, 18)),
    # 8x H100 SXM: 104 cores, 0-51,104-155 is cores 0-51
    "h100-8gpu-sxm-ht-nonic-stas00.txt": (["0-51"] * 4 + ["52-103"] * 4, _all(8, 18)),
    # NUMA off: every GPU 0-191 (96 cores with their threads): one affinity, no Cores=
    "hgx-8gpu-nv18-12nic-numa-off-tpgds.txt": ([None] * 8, _all(8, 18)),
    # HGX H200 on two AMD sockets: 128 cores, 0-63,128-191 is cores 0-63
    "hgx-h200-8gpu-10nic-amd-2socket.txt": (["0-63"] * 4 + ["64-127"] * 4, _all(8, 18)),
    # a Threadripper workstation, one NUMA node of 24 CPUs, PHB: no Cores=
    "puget-wrx90-2x-rtx6000ada-2nic-pcie.txt": ([None] * 2, _no_links(2)),
}


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["gres", *args])
    return result.exit_code, result.stdout, result.stderr


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_every_capture_has_an_expectation() -> None:
    assert sorted(EXPECT) == sorted(p.name for p in TOPO.glob("*.txt"))


@pytest.mark.parametrize("capture", sorted(EXPECT))
def test_capture_lines(capture: str) -> None:
    code, out, _ = _run("--topo-matrix", str(TOPO / capture), "--nodes", "gpu[001-004]")
    cores, links = EXPECT[capture]
    expected = [
        f"NodeName=gpu[001-004] Name=gpu File=/dev/nvidia{i}"
        + (f" Cores={c}" if c else "")
        + (f" Links={lk}" if lk else "")
        for i, (c, lk) in enumerate(zip(cores, links, strict=True))
    ]
    assert code == 0
    assert _lines(out) == expected


def test_untyped_says_so() -> None:
    code, out, err = _run("--topo-matrix", str(H100_TOPO), "--nodes", "gpu1")
    assert code == 0
    assert "no Type= for gpu1: only the GPU topology is known" in out
    assert "no Type= for gpu1" in err


def test_type_from_nvidia_smi_q() -> None:
    code, out, _ = _run(
        "--topo-matrix", str(H100_TOPO), "--nodes", "gpu1", "--nvidia-smi-q", str(H100_Q)
    )
    assert code == 0
    first = _lines(out)[0]
    assert first.startswith("NodeName=gpu1 Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-51 ")
    assert "no Type=" not in out


@pytest.mark.parametrize(
    ("product", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("NVIDIA RTX 6000 Ada Generation", "rtx_6000"),
        ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
        ("NVIDIA GB200", "gb200"),
        ("NVIDIA H100 NVL", "h100"),
        ("NVIDIA Graphics Device", "graphics_device"),
    ],
)
def test_gres_type(product: str, expected: str) -> None:
    assert gres_type(product) == expected


def test_a_numa_off_node_gets_no_cores_not_its_hyperthreads_as_cores() -> None:
    """Every GPU 0-191 on a 96-core node: Cores=0-191 names cores past the node's 96 (slurmd
    refuses it); any core can be used, so there is no Cores= at all."""
    numa_off = TOPO / "hgx-8gpu-nv18-12nic-numa-off-tpgds.txt"
    for extra in ([], ["--threads-per-core", "2"]):
        code, out, _ = _run("--topo-matrix", str(numa_off), "--nodes", "n1", *extra)
        assert code == 0
        assert not any("Cores=" in line for line in _lines(out))
        assert "every GPU has the same CPU affinity" in out


NPS4 = TOPO / "dgx-a100-8gpu-12nic-mlx5-columns.txt"


@pytest.mark.parametrize(
    ("flags", "cores"),
    [
        ([], ["0-63"] * 4 + ["64-127"] * 4),
        (["--sockets", "2"], ["0-63"] * 4 + ["64-127"] * 4),
        (["--sockets", "1"], [None] * 8),  # one socket: every core, so none named
        (["--sockets", "8"], ["48-63"] * 2 + ["16-31"] * 2 + ["112-127"] * 2 + ["80-95"] * 2),
        (
            ["--numa-node-as-socket"],
            ["48-63"] * 2 + ["16-31"] * 2 + ["112-127"] * 2 + ["80-95"] * 2,
        ),
    ],
    ids=["default", "sockets-2", "sockets-1", "sockets-8", "numa-node-as-socket"],
)
def test_nps4_cores_are_whole_sockets_unless_numa_nodes_are_sockets(
    flags: list[str], cores: list[str | None]
) -> None:
    """A DGX A100 in NPS4: NUMA nodes of 16 cores inside sockets of 64. Slurm 24.11+ takes a
    Cores= of one whole socket only, unless SlurmdParameters=numa_node_as_socket makes every
    NUMA node a socket."""
    code, out, _ = _run("--topo-matrix", str(NPS4), "--nodes", "n1", *flags)
    assert code == 0, out
    found = [re.search(r" Cores=(\S+)", line) for line in _lines(out)]
    assert [m.group(1) if m else None for m in found] == cores
    if "--numa-node-as-socket" in flags:
        assert "SlurmdParameters=numa_node_as_socket" in out


def test_sockets_that_do_not_divide_the_cores_are_a_usage_error() -> None:
    code, _, err = _run("--topo-matrix", str(NPS4), "--nodes", "n1", "--sockets", "3")
    assert code == 2 and "--sockets 3 does not divide the node's 128 cores" in err


def _snapshot(tmp_path: Path, nodes: dict[str, Path]) -> Path:
    """Each node's topo -m; the H100 nodes' nvidia-smi -q too (their Type=)."""
    outputs: dict[str, dict[str, str]] = {}
    for name, topo in nodes.items():
        outputs[name] = {KEY_TOPO: topo.read_text()}
        if name.startswith("gpu"):
            outputs[name][KEY_Q] = H100_Q.read_text()
    return write_node_outputs(tmp_path / "snap", outputs)


def _differing_capture(tmp_path: Path) -> Path:
    """The H100 capture with GPU6-GPU7 down to NV12: one node whose links differ."""
    rows = [line.split() for line in H100_TOPO.read_text().splitlines()]
    rows[7][8] = rows[8][7] = "NV12"  # row GPU6 column GPU7, row GPU7 column GPU6
    path = tmp_path / "differs.txt"
    header = H100_TOPO.read_text().splitlines()[0]
    path.write_text("\n".join([header, *("\t".join(row) for row in rows[1:])]) + "\n")
    return path


def test_snapshot_folds_node_types_and_names_the_differing_node(tmp_path: Path) -> None:
    differs = _differing_capture(tmp_path)
    four = TOPO / "gb200-4gpu-8nic-grace-openshift.txt"
    nodes = {f"gpu{i:03d}": H100_TOPO for i in range(1, 5)} | {"gpu005": differs}
    nodes |= {"gb01": four, "gb02": four}
    snap = _snapshot(tmp_path, nodes)
    code, out, err = _run("--snapshot", str(snap))
    assert code == 0
    lines = _lines(out)
    assert sum(line.startswith("NodeName=gpu[001-004] ") for line in lines) == 8
    assert sum(line.startswith("NodeName=gpu005 ") for line in lines) == 8
    assert sum(line.startswith("NodeName=gb[01-02] ") for line in lines) == 4
    assert "NodeName=gpu005 Name=gpu Type=h100 File=/dev/nvidia7 Cores=52-103 " in out
    assert lines[-1].endswith("/dev/nvidia7 Cores=52-103 Links=18,18,18,18,18,18,12,-1")
    assert "NodeName=gb[01-02] Name=gpu File=/dev/nvidia0 Cores=0-71 " in out  # no -q: no Type
    assert "no Type= for gb[01-02]" in out
    assert err.count("gres-layout-differs") == 1
    assert "gres-layout-differs: gpu005: GPU6: other links; GPU7: other links" in err
    assert "(gpu[001-004])" in err


def test_snapshot_node_without_topo_is_reported(tmp_path: Path) -> None:
    outputs = {"gpu1": {KEY_TOPO: H100_TOPO.read_text()}, "gpu2": {KEY_QUERY: "0, S, , , , "}}
    snap = write_node_outputs(tmp_path / "snap", outputs)
    code, out, err = _run("--snapshot", str(snap))
    assert code == 0
    assert "NodeName=gpu2" not in out
    assert "gpu2" in err


def test_check_and_only_on_change(tmp_path: Path) -> None:
    target = tmp_path / "gres.conf"
    args = ("--topo-matrix", str(H100_TOPO), "--nodes", "gpu[1-2]", "-o", str(target))
    assert _run(*args, "--check")[0] == 1
    assert not target.exists()
    assert _run(*args)[0] == 0
    mtime = target.stat().st_mtime_ns
    code, _, err = _run(*args, "--check")
    assert code == 0 and "up to date" in err
    assert _run(*args)[0] == 0
    assert target.stat().st_mtime_ns == mtime  # unchanged: not rewritten
    changed = ("--topo-matrix", str(H100_TOPO), "--nodes", "gpu[1-3]", "-o", str(target))
    code, out, _ = _run(*changed, "--check")
    assert code == 1 and "+NodeName=gpu[1-3]" in out


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.txt", "cannot read"),
        (lambda d: _write(d / "cpu-only.txt", "        CPU Affinity    NUMA Affinity\n"), ""),
    ],
    ids=["unreadable", "no-gpus"],
)
def test_bad_input_is_one_line_exit_3_nothing_written(tmp_path: Path, make, message) -> None:
    capture = make(tmp_path)
    target = tmp_path / "gres.conf"
    code, out, err = _run("--topo-matrix", str(capture), "--nodes", "n1", "-o", str(target))
    assert code == 3
    assert len(err.strip().splitlines()) == 1 and err.startswith("topograph-slurm: error: ")
    assert str(capture) in err and message in err
    assert not target.exists() and out == ""


def test_snapshot_without_any_topo_is_exit_3(tmp_path: Path) -> None:
    snap = write_node_outputs(tmp_path / "snap", {"gpu1": {KEY_QUERY: "0, S, , , , "}})
    code, _, err = _run("--snapshot", str(snap))
    assert code == 3 and "no node has a readable nvidia-smi topo -m" in err


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "nodes",
    ["a\nSwitchName=x Name=gpu File=/dev/null", "a b", "a;b", "$(reboot)", "gpu\u202e1", "-x"],
    ids=["newline", "space", "semicolon", "command", "rtl-override", "dash"],
)
def test_nodes_outside_the_slurm_name_rule_exit_2_nothing_written(
    tmp_path: Path, nodes: str
) -> None:
    """--nodes is the one name gres takes from a user: a newline would forge a gres.conf line
    (slurmd reads it on every node). Every expanded name passes the Slurm name rule."""
    target = tmp_path / "gres.conf"
    code, out, err = _run("--topo-matrix", str(H100_TOPO), "--nodes", nodes, "-o", str(target))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "invalid node name" in err
    assert "--nodes" in err and not target.exists() and out == ""


def test_nodes_hostlist_expands_and_every_name_is_checked(tmp_path: Path) -> None:
    code, out, _ = _run("--topo-matrix", str(H100_TOPO), "--nodes", "gpu[1-3],login-1")
    assert code == 0 and "NodeName=gpu[1-3],login-1 Name=gpu" in out
    code, _, err = _run("--topo-matrix", str(H100_TOPO), "--nodes", "gpu[1-3],bad name")
    assert code == 2 and "'bad name'" in err


def test_topo_matrix_dash_reads_stdin() -> None:
    """`nvidia-smi topo -m | topograph-slurm gres --topo-matrix - --nodes …`: the same lines
    as from the file, the header naming stdin."""
    from_file = _run("--topo-matrix", str(H100_TOPO), "--nodes", "gpu[1-2]")
    piped = CliRunner().invoke(
        main,
        ["gres", "--topo-matrix", "-", "--nodes", "gpu[1-2]"],
        input=H100_TOPO.read_text(),
    )
    assert piped.exit_code == 0 and from_file[0] == 0, piped.output
    assert _lines(piped.stdout) == _lines(from_file[1])
    assert "# gres.conf made by topograph-slurm gres from <stdin>\n" in piped.stdout


def test_both_captures_from_stdin_is_a_usage_error() -> None:
    code, out, err = _run("--topo-matrix", "-", "--nodes", "gpu1", "--nvidia-smi-q", "-")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "only one of --topo-matrix and --nvidia-smi-q (--rocm-smi-product) can be stdin" in err


def test_json_is_the_plan_as_data(tmp_path: Path) -> None:
    differs = _differing_capture(tmp_path)
    nodes = {f"gpu{i:03d}": H100_TOPO for i in range(1, 5)} | {"gpu005": differs}
    code, out, err = _run("--snapshot", str(_snapshot(tmp_path, nodes)), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["format"], data["version"]) == ("topograph-slurm-gres", 1)
    assert [group["nodes"] for group in data["groups"]] == ["gpu[001-004]", "gpu005"]
    first = data["groups"][0]["devices"][0]
    assert first == {
        "index": 0,
        "file": "/dev/nvidia0",
        "type": "h100",
        "cores": "0-51",
        "links": [-1, 18, 18, 18, 18, 18, 18, 18],
    }
    assert [f["kind"] for f in data["findings"]] == ["gres-layout-differs"]
    assert "gres-layout-differs: gpu005" in err  # the finding still on stderr
