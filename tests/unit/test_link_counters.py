"""The node's link counters as sysfs and nvidia-smi show them (sources/link_counters.py), on a
tree laid out from real prints (tests/support/ib_sysfs.py)."""

from __future__ import annotations

from pathlib import Path

from tests.support import ib_sysfs
from topograph_slurm.model.counters import ERROR_COUNTERS
from topograph_slurm.sources.link_counters import parse_nvlink_errors, parse_rate, read_sysfs


def test_the_real_capture_reads_as_every_error_counter_and_the_port_state(tmp_path: Path) -> None:
    reading = read_sysfs(ib_sysfs.lay_out(tmp_path), "gpu01")
    assert [port.name for port in reading.ports] == ["mlx5_0/1", "mlx5_1/1"]
    port = reading.ports[1]
    assert set(port.counters) == set(ERROR_COUNTERS)  # the data counters are not errors
    assert port.counters["excessive_buffer_overrun_errors"] == 15
    assert port.counters["link_downed"] == 255
    assert port.counters["port_xmit_discards"] == 65535
    assert (port.width, port.speed, port.state, port.phys_state, port.link_layer) == (
        "4x",
        "EDR",
        "ACTIVE",
        "LinkUp",
        "Ethernet",
    )
    assert reading.findings == ()


def test_rates_as_the_kernel_prints_them() -> None:
    assert parse_rate("400 Gb/sec (4X NDR)\n") == ("4x", "NDR")
    assert parse_rate("10 Gb/sec (4X)") == ("4x", "")
    assert parse_rate("") == ("", "")
    assert parse_rate("lots (٤X NDR)") == ("", "")


def test_an_unreadable_counter_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    root = ib_sysfs.lay_out(tmp_path)
    ib_sysfs.set_file(root, "counters/symbol_error", "N/A (no PMA)")  # what iWARP prints
    (ib_sysfs.port_dir(root) / "counters" / "VL15_dropped").unlink()
    (ib_sysfs.port_dir(root) / "state").unlink()
    (ib_sysfs.port_dir(root) / "state").mkdir()  # a directory where a file should be: EISDIR
    reading = read_sysfs(root, "gpu01")
    assert "symbol_error" not in reading.ports[1].counters
    assert [(f.kind, f.subject, f.message) for f in reading.findings] == [
        (
            "record-incomplete",
            "gpu01",
            "mlx5_1/1: could not read counters/symbol_error, counters/VL15_dropped, state",
        )
    ]


def test_no_tree_is_one_finding(tmp_path: Path) -> None:
    reading = read_sysfs(tmp_path / "absent", "gpu01")
    assert reading.ports == ()
    assert [f.kind for f in reading.findings] == ["record-incomplete"]
    assert "no InfiniBand sysfs tree at" in reading.findings[0].message


#: Written by hand from the format `nvidia-smi nvlink --help` documents for -e: no real
#: capture was found (tests/fixtures/real/SOURCES.md).
NVLINK_E = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)
\t Link 0: Replay Errors: 0
\t Link 0: Recovery Errors: 2
\t Link 0: CRC Errors: 0
\t Link 1: Replay Errors: N/A
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000001)
\t Link 0: Replay Errors: 5
"""


def test_nvlink_error_counters_per_gpu_and_link() -> None:
    links = parse_nvlink_errors(NVLINK_E)
    assert [(link.name, link.counters) for link in links] == [
        ("GPU0/link0", {"Replay Errors": 0, "Recovery Errors": 2, "CRC Errors": 0}),
        ("GPU1/link0", {"Replay Errors": 5}),
    ]
    assert parse_nvlink_errors("No devices were found\n") == ()
