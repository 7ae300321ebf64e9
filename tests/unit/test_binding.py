"""``order --format binding-*``: each local rank's GPU, nearest NIC(s) and CPUs from real
``nvidia-smi topo -m`` captures, the wrapper run by ``sh``, and the errors."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from topograph_slurm.analysis.placement.binding import job_binding, node_binding
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit, InputError
from topograph_slurm.sources.nvidia_smi import parse_topo_matrix

TOPO = Path(__file__).parents[1] / "fixtures" / "real" / "nvidia-smi-topo"
DGX_A100 = TOPO / "dgx-a100-8gpu-12nic-mlx5-columns.txt"
H200 = TOPO / "hgx-h200-8gpu-10nic-amd-2socket.txt"
SIM = "nodes=4,gpus=8,rails=2,su=4,tiers=2"


def _topo(path: Path):  # type: ignore[no-untyped-def]
    return parse_topo_matrix(path.read_text())


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, *args])


def _order(fmt: str, topo: Path, *extra: str) -> Result:
    nodes = ("--nodes", "gpu[0001-0002]", "--tp", "8")
    return _run("order", "--sim", SIM, *nodes, "--topo-matrix", str(topo), "--format", fmt, *extra)


# Read by hand from each capture: GPU row -> the NIC columns with the row's best class, and the
# row's CPU Affinity.
@pytest.mark.parametrize(
    ("capture", "rank", "gpu", "nics", "cpus"),
    [
        (DGX_A100, 0, 0, ("mlx5_0", "mlx5_1"), "48-63,176-191"),  # PXB; mlx5_4/5 PIX to each other
        (DGX_A100, 4, 4, ("mlx5_6", "mlx5_7"), "112-127,240-255"),
        (H200, 2, 2, ("mlx5_4",), "0-63,128-191"),  # its one PIX NIC, not mlx5_2
        (H200, 3, 3, ("mlx5_0", "mlx5_1", "mlx5_2"), "0-63,128-191"),  # three PXB NICs
        (H200, 7, 7, ("mlx5_6",), "64-127,192-255"),
        (TOPO / "puget-wrx90-2x-rtx6000ada-2nic-pcie.txt", 1, 1, ("mlx5_0", "mlx5_1"), "0-23"),
        (TOPO / "h100-8gpu-8ib-5eth-13nic-dgx.txt", 5, 5, ("mlx5_ib5",), "56-111,168-223"),
        (TOPO / "a100-8gpu-sxm-nonic-compact-stas00.txt", 5, 5, (), "24-47"),
    ],
)
def test_rank_binding_of_real_captures(
    capture: Path, rank: int, gpu: int, nics: tuple[str, ...], cpus: str
) -> None:
    bound = node_binding(_topo(capture))[rank]
    ranges = ",".join(f"{a}-{b}" if b > a else str(a) for a, b in bound.cpu_ranges)
    assert (bound.gpu, bound.nics, ranges) == (gpu, nics, cpus)


def test_cpu_mask_sets_one_bit_per_cpu() -> None:
    bound = node_binding(_topo(TOPO / "puget-wrx90-2x-rtx6000ada-2nic-pcie.txt"))[0]
    assert bound.cpu_mask == (1 << 24) - 1


def test_more_ranks_than_gpus_is_an_input_error() -> None:
    with pytest.raises(InputError, match="9 ranks per node but topo -m lists 8 GPUs"):
        node_binding(_topo(DGX_A100), 9)


def test_ranks_from_a_later_gpu_bind_to_it_and_must_fit() -> None:
    whole = node_binding(_topo(DGX_A100))
    later = node_binding(_topo(DGX_A100), 2, first=6)
    assert [(b.local_rank, b.gpu, b.nics) for b in later] == [
        (0, whole[6].gpu, whole[6].nics),
        (1, whole[7].gpu, whole[7].nics),
    ]
    with pytest.raises(InputError, match="4 ranks per node from GPU 6 but topo -m lists 8 GPUs"):
        node_binding(_topo(DGX_A100), 4, first=6)


def test_nodes_binding_differently_are_named() -> None:
    nodes = {"n1": _topo(DGX_A100), "n2": _topo(DGX_A100), "n3": _topo(H200)}
    with pytest.raises(InputError, match=r"differently \(n\[1-2\]; n3\)"):
        job_binding(nodes)


def test_binding_env_lines() -> None:
    result = _order("binding-env", DGX_A100)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == (
        "LOCAL_RANK=0 CUDA_VISIBLE_DEVICES=0 NCCL_IB_HCA==mlx5_0,mlx5_1 "
        "UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1 TOPOGRAPH_CPUS=48-63,176-191"
    )
    assert len(lines) == 1 + 8


def test_binding_srun_options() -> None:
    result = _order("binding-srun", TOPO / "a100-8gpu-sxm-nonic-compact-stas00.txt")
    assert result.exit_code == 0, result.output
    low, high = "0x" + "f" * 6, "0x" + "f" * 6 + "0" * 6  # CPUs 0-23, CPUs 24-47
    masks = ",".join([low] * 4 + [high] * 4)
    line = f"--ntasks-per-node=8 --cpu-bind=mask_cpu:{masks} --gpu-bind=map_gpu:0,1,2,3,4,5,6,7\n"
    assert result.stdout == line


def _wrapper(tmp_path: Path) -> Path:
    result = _order("binding-wrapper", H200)
    assert result.exit_code == 0, result.output
    path = tmp_path / "bind.sh"
    path.write_text(result.stdout)
    return path


def _sh(script: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    show = 'echo "$CUDA_VISIBLE_DEVICES $NCCL_IB_HCA $UCX_NET_DEVICES $TOPOGRAPH_CPUS"'
    command = ["sh", str(script), "sh", "-c", show]
    base = {"PATH": os.environ["PATH"]}
    return subprocess.run(command, env=base | env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({"SLURM_LOCALID": "0"}, "0 =mlx5_3 mlx5_3:1 0-63,128-191"),
        ({"SLURM_LOCALID": "3"}, "3 =mlx5_0,mlx5_1,mlx5_2 mlx5_0:1,mlx5_1:1,mlx5_2:1 0-63,128-191"),
        ({"SLURM_LOCALID": "0", "LOCAL_RANK": "7"}, "7 =mlx5_6 mlx5_6:1 64-127,192-255"),
    ],
)
def test_wrapper_exports_the_rank_values(tmp_path: Path, env: dict[str, str], line: str) -> None:
    done = _sh(_wrapper(tmp_path), env)
    assert (done.returncode, done.stdout, done.stderr) == (0, line + "\n", "")


@pytest.mark.parametrize("env", [{}, {"SLURM_LOCALID": "8"}])
def test_wrapper_without_a_known_rank_fails(tmp_path: Path, env: dict[str, str]) -> None:
    done = _sh(_wrapper(tmp_path), env)
    assert done.returncode == 2 and done.stdout == ""
    assert "no binding for local rank" in done.stderr


def test_no_topology_for_the_nodes_is_exit_3() -> None:
    result = _run("order", "--sim", SIM, "--nodes", "gpu[0001-0002]", "--format", "binding-env")
    assert result.exit_code == Exit.INPUT and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no nvidia-smi topo -m for gpu[0001-0002]" in lines[0]


def test_unreadable_topo_matrix_is_exit_3(tmp_path: Path) -> None:
    result = _order("binding-srun", tmp_path / "absent.txt")
    assert result.exit_code == Exit.INPUT and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1


def _snapshot_order(tmp_path: Path, nodes: str) -> Result:
    """order --format binding-env from a snapshot: gpu0001-0002 are H200 nodes, gpu0003 a DGX
    A100, gpu0004 has no topo -m."""
    from tests.support.snapshots import write_node_outputs
    from topograph_slurm.sources.sim import generate_ibnetdiscover, parse_sim_spec
    from topograph_slurm.sources.snapshot import KEY_TOPO

    captures = {"gpu0001": H200, "gpu0002": H200, "gpu0003": DGX_A100}
    snap = write_node_outputs(
        tmp_path / "snap",
        {node: {KEY_TOPO: path.read_text()} for node, path in captures.items()},
        {"fabric/ibnetdiscover.txt": generate_ibnetdiscover(parse_sim_spec(SIM))},
        fabric={"exit_code": 0, "file": "fabric/ibnetdiscover.txt"},
    )
    args = ["--snapshot", str(snap), "--nodes", nodes, "--gpus-per-node", "8"]
    return _run("order", *args, "--format", "binding-env")


def test_snapshot_gives_each_node_its_own_capture(tmp_path: Path) -> None:
    result = _snapshot_order(tmp_path, "gpu[0001-0002]")
    assert result.exit_code == 0, result.output
    assert "LOCAL_RANK=2 CUDA_VISIBLE_DEVICES=2 NCCL_IB_HCA==mlx5_4 " in result.stdout


@pytest.mark.parametrize(
    ("nodes", "fragment"),
    [
        ("gpu[0001-0003]", "the nodes bind their ranks differently (gpu[0001-0002]; gpu0003)"),
        ("gpu[0001,0004]", "no nvidia-smi topo -m for gpu0004: give --topo-matrix FILE"),
    ],
)
def test_snapshot_nodes_that_cannot_share_a_binding_exit_3(
    tmp_path: Path, nodes: str, fragment: str
) -> None:
    result = _snapshot_order(tmp_path, nodes)
    assert result.exit_code == Exit.INPUT and result.stdout == "", result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr


def test_topo_matrix_with_a_node_order_format_is_a_usage_error() -> None:
    result = _order("plain", DGX_A100)
    assert result.exit_code == Exit.USAGE and result.stdout == ""
    assert "--topo-matrix is for the binding-* formats, not --format plain" in result.stderr


HOSTILE_LEGEND = """\
\tGPU0\tGPU1\tGPU2\tNIC0\tNIC1\tNIC2\tCPU Affinity\tNUMA Affinity
GPU0\t X \tNV12\tNV12\tPIX\tSYS\tSYS\t0-15\t0
GPU1\tNV12\t X \tNV12\tSYS\tPIX\tSYS\t16-31\t1
GPU2\tNV12\tNV12\t X \tSYS\tSYS\tPIX\t32-47\t1
NIC0\tPIX\tSYS\tSYS\t X \tSYS\tSYS
NIC1\tSYS\tPIX\tSYS\tSYS\t X \tSYS
NIC2\tSYS\tSYS\tPIX\tSYS\tSYS\t X

NIC Legend:

  NIC0: mlx5 0
  NIC1: mlx5_1;reboot
  NIC2: mlx5_2
"""


def test_a_nic_without_a_usable_name_binds_no_nic(tmp_path: Path) -> None:
    """A legend name the parser cannot read (``mlx5 0``) once bound ``NCCL_IB_HCA==NIC0``, the
    column label; one no device could have (``mlx5_1;reboot``) went into the wrapper's shell
    line. Neither is a NIC to bind: the rank binds none; a good name still binds."""
    path = tmp_path / "topo.txt"
    path.write_text(HOSTILE_LEGEND)
    ranks = node_binding(parse_topo_matrix(HOSTILE_LEGEND))
    assert [rank.nics for rank in ranks] == [(), (), ("mlx5_2",)]
    result = _run(
        "order",
        "--sim",
        "nodes=4,gpus=3,rails=1,su=4",
        "--nodes",
        "gpu0001",
        "--topo-matrix",
        str(path),
        "--format",
        "binding-wrapper",
    )
    assert result.exit_code == 0, result.output
    assert "NIC0" not in result.stdout and "reboot" not in result.stdout
    assert "NCCL_IB_HCA==mlx5_2 " in result.stdout


def test_topo_matrix_dash_reads_stdin() -> None:
    topo = TOPO / "dgx-a100-8gpu-12nic-mlx5-columns.txt"
    nodes = ("--nodes", "gpu[0001-0002]", "--tp", "8", "--format", "binding-env")
    piped = CliRunner().invoke(
        main,
        ["--config", os.devnull, "order", "--sim", SIM, *nodes, "--topo-matrix", "-"],
        input=topo.read_text(),
    )
    assert piped.exit_code == 0, piped.output
    assert piped.stdout == _order("binding-env", topo).stdout
