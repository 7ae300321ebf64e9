"""The nccl-tests parser on every real capture in tests/fixtures/real/nccl-tests/, with the
values read off the files by hand, and on damaged output."""

from __future__ import annotations

import pytest

from tests.conftest import REAL_FIXTURES, real_fixture
from topograph_slurm.errors import ParseError
from topograph_slurm.sources.nccl_tests import parse_nccl_tests

# file: (rows, first size, largest size, its out-of-place busbw, its in-place busbw,
#        avg busbw, out-of-bounds, test, version, library, hosts)
CAPTURES = {
    "a100-azure-ndv4-2node-allreduce-old-error-layout-nccl-info-interleaved.txt": (
        9,
        33554432,
        8589934592,
        187.91,
        189.33,
        None,
        None,
        "",
        "",
        "",
        [],
    ),
    "a100-dgx-2node-16gpu-allreduce-old-error-layout-k8s-deepops.txt": (
        30,
        8,
        4294967296,
        188.53,
        188.70,
        53.7098,
        0,
        "",
        "",
        "",
        [],
    ),
    "a100-dgx-4node-32gpu-allreduce-old-error-layout-deepops.txt": (
        13,
        1048576,
        4294967296,
        191.05,
        191.56,
        113.289,
        0,
        "",
        "",
        "",
        [],
    ),
    "a100-oci-1node-8gpu-allreduce-10g-v2.17.6-header-ocitutorials.txt": (
        1,
        10737418240,
        10737418240,
        233.00,
        233.34,
        233.168,
        0,
        "all_reduce_perf",
        "2.17.6",
        "22501",
        ["inst-gpu-master"],
    ),
    "a100-oci-ubuntu-1node-8gpu-allreduce-10g-no-version-line-ocitutorials.txt": (
        1,
        10737418240,
        10737418240,
        232.20,
        232.13,
        232.167,
        0,
        "all_reduce_perf",
        "",
        "",
        ["inst-lscuv-ao-ub24"],
    ),
    "gb10-dgx-spark-2node-allgather-v2.17.6-16g-fragment-dgxsparkplaybooks25.txt": (
        1,
        17179869184,
        17179869184,
        18.94,
        20.95,
        None,
        0,
        "all_gather_perf",
        "2.17.6",
        "22803",
        ["spark", "spark-3995"],
    ),
    "gb10-dgx-spark-2node-allreduce-v2.20.0-header-fragment-dgxsparkplaybooks103.txt": (
        4,
        8192,
        65536,
        0.96,
        1.01,
        None,
        None,
        "all_reduce_perf",
        "2.20.0",
        "23102",
        ["spark-d708", "spark-dbf4"],
    ),
    "gb200-20rack-1440gpu-allreduce-excerpt-coreweave.txt": (
        6,
        536870912,
        17179869184,
        405.74,
        404.77,
        297.808,
        0,
        "",
        "",
        "",
        ["slurm-gb200-218-073"],
    ),
    "gb200-nvl72-1rack-72gpu-allreduce-excerpt-coreweave.txt": (
        5,
        536870912,
        8589934592,
        834.57,
        846.82,
        745.53,
        0,
        "",
        "",
        "",
        ["slurm-gb200-207-171"],
    ),
    "gh200-2node-8gpu-allreduce-v2.18.3-header-nris-olivia.txt": (
        28,
        1,
        134217728,
        101.70,
        107.63,
        17.8617,
        0,
        "all_reduce_perf",
        "2.18.3",
        "23004",
        ["gpu-1-1", "gpu-1-2"],
    ),
    "gh200-4node-16gpu-allreduce-v2.17.9-header-wrong-nonzero-nris-olivia.txt": (
        28,
        1,
        134217728,
        89.85,
        83.23,
        None,
        None,
        "all_reduce_perf",
        "2.17.9",
        "22902",
        ["gpu-1-43", "gpu-1-47", "gpu-1-49", "gpu-1-51"],
    ),
    "h100-2node-16gpu-allreduce-root-wrong-layout-gcp-a3mega.txt": (
        31,
        8,
        8589934592,
        338.82,
        337.35,
        70.742,
        0,
        "",
        "",
        "",
        ["ztan-mig-235z", "ztan-mig-gq73"],
    ),
    "h100-2node-p5-allreduce-srun-label-prefix-table-only-aws.txt": (
        32,
        8,
        17179869184,
        487.09,
        487.26,
        None,
        None,
        "",
        "",
        "",
        [],
    ),
    # AMD rccl-tests (same table; its version and RCCL's on lines of their own)
    "mi300x-1node-8gpu-allreduce-rccl-tests-k8s-aac8.txt": (
        31,
        8,
        8589934592,
        315.69,
        315.91,
        110.464,
        0,
        "",
        "develop:a7809b3",
        "",
        ["1942ef50-8240-449e-82ca-4ce7993f70b4-78bfb5d4f4-4z9xh"],
    ),
    "mi300x-2node-16gpu-allreduce-rccl-tests-rccl-version-block-aac10.txt": (
        32,
        8,
        17179869184,
        357.46,
        357.41,
        92.3318,
        0,
        "",
        "develop:448c4c7",
        "2.22.3-HEAD:7d8d67c",
        ["gpu-53", "gpu-56"],
    ),
}


def test_every_capture_is_in_the_table() -> None:
    folder = REAL_FIXTURES / "nccl-tests"
    assert sorted(p.name for p in folder.glob("*.txt")) == sorted(CAPTURES)


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_real_capture(name: str) -> None:
    rows, first, largest, busbw, in_busbw, avg, bounds, test, version, library, hosts = CAPTURES[
        name
    ]
    out = parse_nccl_tests(real_fixture(f"nccl-tests/{name}").read_text(encoding="utf-8"))
    assert len(out.rows) == rows
    assert out.rows[0].size == first
    peak = out.peak
    assert peak is not None
    assert (peak.size, peak.busbw, peak.in_busbw) == (largest, busbw, in_busbw)
    assert (out.avg_busbw, out.out_of_bounds) == (avg, bounds)
    assert (out.test, out.version, out.nccl_library, out.hosts) == (test, version, library, hosts)


def test_older_layout_reads_the_float_error_column() -> None:
    path = real_fixture("nccl-tests/a100-dgx-4node-32gpu-allreduce-old-error-layout-deepops.txt")
    row = parse_nccl_tests(path.read_text(encoding="utf-8")).rows[0]
    assert (row.size, row.count, row.dtype, row.redop) == (1048576, 262144, "float", "sum")
    assert (row.time_us, row.algbw, row.busbw, row.error) == (135.3, 7.75, 15.02, 7e-07)
    assert (row.in_time_us, row.in_algbw, row.in_busbw, row.in_error) == (132.7, 7.90, 15.31, 7e-07)
    assert row.wrong is None and row.in_wrong is None


def test_current_layout_reads_wrong_counts_and_notes_them() -> None:
    path = real_fixture(
        "nccl-tests/gh200-4node-16gpu-allreduce-v2.17.9-header-wrong-nonzero-nris-olivia.txt"
    )
    out = parse_nccl_tests(path.read_text(encoding="utf-8"))
    row = next(r for r in out.rows if r.size == 8388608)
    assert (row.wrong, row.in_wrong, row.busbw) == (763876, 530181, 1.62)
    assert "8388608 B: 763876/530181 wrong elements" in out.notes
    assert out.wrong == sum((r.wrong or 0) + (r.in_wrong or 0) for r in out.rows) > 0


def test_srun_label_prefix_and_interleaved_nccl_info_are_skipped() -> None:
    aws = real_fixture("nccl-tests/h100-2node-p5-allreduce-srun-label-prefix-table-only-aws.txt")
    assert parse_nccl_tests(aws.read_text(encoding="utf-8")).rows[0].time_us == 69.12
    azure = real_fixture(
        "nccl-tests/a100-azure-ndv4-2node-allreduce-old-error-layout-nccl-info-interleaved.txt"
    )
    out = parse_nccl_tests(azure.read_text(encoding="utf-8"))
    assert out.rows[0].busbw == 105.97 and out.notes == []


def test_warnings_errors_and_damaged_rows_become_notes() -> None:
    text = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "node1:123:456 [0] NCCL WARN NET/IB : Got async event : port error\n"
        "     1048576        262144     float     sum      -1    120.1    8.73   16.37      0"
        "    119.3    8.79   16.48      0\n"
        "     2097152        524288     float     sum      -1    137.2\n"
        "   4194304       1048576     float     sum      -1    N/A    N/A    N/A      0"
        "    N/A    N/A    N/A    N/A\n"
    )
    out = parse_nccl_tests(text)
    assert [r.size for r in out.rows] == [1048576, 4194304]
    assert out.rows[1].busbw is None and out.rows[1].in_wrong is None
    assert out.notes[0] == "node1:123:456 [0] NCCL WARN NET/IB : Got async event : port error"
    assert out.notes[1].startswith("line 4: unreadable row '2097152")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage\n",
        "# nThread 1\n",
        "node1: Test NCCL failure common.cu:1005 'internal error'\n",
    ],
)
def test_no_table_is_one_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="no nccl-tests result table"):
        parse_nccl_tests(text, "run")


def test_the_error_names_the_failure_line() -> None:
    with pytest.raises(ParseError, match=r"Test NCCL failure common\.cu:1005"):
        parse_nccl_tests("node1: Test NCCL failure common.cu:1005 'internal error'\n")


def test_crlf_lines() -> None:
    path = real_fixture(
        "nccl-tests/a100-dgx-2node-16gpu-allreduce-old-error-layout-k8s-deepops.txt"
    )
    assert b"\r\n" in path.read_bytes()
    out = parse_nccl_tests(path.read_bytes().decode("utf-8"))
    assert out.rows[-1].in_error == 5e-07
