"""``topograph-slurm bench`` end to end on the host: the plan on a simulated fabric, bad input
(one line, its exit code, nothing written), and a sweep whose launcher is the fake nccl-tests
replaying a real capture under planted faults (the real srun path is in
tests/integration/test_bench.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, real_fixture
from tests.support.nccl_fake import CAPTURE, fake_nccl_tests, scale_table
from topograph_slurm.sources.snapshot import load_bench, load_snapshot

SIM = "nodes=9,gpus=2,rails=8,su=3,tiers=2,prefix=bn"
SLOW_NODE, LEAF3 = "bn0002", ["bn0007", "bn0008", "bn0009"]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.run(
        [sys.executable, "-m", "topograph_slurm", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**base, **(env or {})},
        timeout=120,
    )


def one_error(done: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert done.returncode == code, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("topograph-slurm: error: "), done.stderr
    assert text in lines[0]
    assert done.stdout == ""


def test_plan_on_the_demo_fabric() -> None:
    done = cli("bench", "--plan", "--sim", "demo")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Benchmark plan: 32 nodes, 8 GPUs per node, 96 runs in 19 rounds"
    assert lines[1] == (
        "Duration: at most 19 rounds x 600 s (--timeout) = 3.2 h; a round's runs go in parallel"
    )
    assert lines[2].startswith("First run: srun --mpi=pmix --nodes=1 --ntasks=8 ")
    assert "leaf (pairs under one leaf switch): 32 runs, rounds 2-3" in lines
    assert "  round 4: gpu0001 gpu0009  via uplinks of leaf-su001-r0, leaf-su002-r0" in lines
    data = json.loads(cli("bench", "--plan", "--sim", "demo", "--json").stdout)
    assert [lvl["level"] for lvl in data["levels"]] == ["node", "leaf", "spine-1"]
    assert (
        data["command"][-8:]
        == ["all_reduce_perf", "-b", "512M", "-e", "8G", "-f", "2", "-g", "1"][-8:]
    )


def test_plan_limits() -> None:
    done = cli("bench", "--plan", "--sim", "demo", "--levels", "spine-1", "--max-pairs", "4")
    assert done.returncode == 0, done.stderr
    assert (
        "  note: 28 of 32 pairs dropped by --max-pairs 4 (--max-pairs N or --all-pairs for more)"
        in done.stdout.splitlines()
    )
    assert (
        done.stdout.splitlines()[0]
        == "Benchmark plan: 6 nodes, 8 GPUs per node, 4 runs in 3 rounds"
    )


def test_a_big_fabric_is_capped_by_default_and_says_how_to_lift_it() -> None:
    """256 nodes: 256 pairs per pair level, 64 kept by default with a note; --all-pairs plans
    every pair, and the duration bound says what that costs."""
    capped = cli("bench", "--plan", "--sim", "nodes=256").stdout.splitlines()
    assert capped[0] == "Benchmark plan: 256 nodes, 8 GPUs per node, 384 runs in 26 rounds"
    assert (
        capped.count(
            "  note: 192 of 256 pairs dropped by --max-pairs 64 "
            "(--max-pairs N or --all-pairs for more)"
        )
        == 2
    )
    every = cli("bench", "--plan", "--sim", "nodes=256", "--all-pairs", "--timeout", "60")
    lines = every.stdout.splitlines()
    assert lines[0] == "Benchmark plan: 256 nodes, 8 GPUs per node, 768 runs in 67 rounds"
    assert lines[1].startswith("Duration: at most 67 rounds x 60 s (--timeout) = 1.1 h")
    assert not any("dropped" in line for line in lines)


@pytest.mark.parametrize(
    ("args", "env", "code", "text"),
    [
        (["--plan", "--sim", "demo", "--levels", "leaf,bogus"], {}, 2, "--levels: bogus not in"),
        (["--plan", "--sim", "demo", "--slow-fraction", "1.5"], {}, 2, "--slow-fraction"),
        (["--plan", "--sim", "demo", "--max-pairs", "0"], {}, 2, "--max-pairs"),
        (["--plan", "--sim", "demo", "--nodes", "x[1-3]"], {}, 3, "none of the 3 nodes is on"),
        (["--sim", "demo"], {}, 2, "bench runs inside one allocation"),
        (
            ["--sim", "demo", "--launcher", "no-such-launcher-x"],
            {"SLURM_JOB_ID": "7"},
            4,
            "launcher 'no-such-launcher-x' not found",
        ),
        (["--sim", "demo", "--launcher", "'"], {"SLURM_JOB_ID": "7"}, 2, "--launcher/--args"),
        (
            ["--sim", "demo", "--baseline", "/nonexistent/bench.json"],
            {"SLURM_JOB_ID": "7"},
            3,
            "no bench record there",
        ),
    ],
)
def test_bad_input_is_one_line_and_its_code(
    args: list[str], env: dict[str, str], code: int, text: str
) -> None:
    one_error(cli("bench", *args, env=env), code, text)


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    capture = real_fixture(CAPTURE).read_text(encoding="utf-8")
    table = scale_table({SLOW_NODE: 0.4}, [(0.5, LEAF3)], hang=["bn0005"])
    path = tmp_path / "fake-srun"
    path.write_text(fake_nccl_tests(capture, table))
    path.chmod(0o755)
    return path


def allocation(nodes: str = "bn[0001-0009]") -> dict[str, str]:
    return {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": nodes}


def test_sweep_finds_the_planted_faults_and_records_them(fake: Path, tmp_path: Path) -> None:
    record = tmp_path / "snap"
    args = ["bench", "--sim", SIM, "--launcher", str(fake), "--levels", "leaf,spine-1"]
    done = cli(*args, "--out-dir", str(record), env=allocation())
    assert done.returncode == 1, done.stderr
    bench = load_snapshot(record).bench
    assert bench is not None
    found = [(f.kind, f.subject, f.nodes) for f in bench.findings]
    assert found == [("slow-node", SLOW_NODE, ()), ("slow-link", "leaf-su003-r0", tuple(LEAF3))]
    assert "[slow-node] bn0002: slow with every partner: with bn0001 (leaf)" in done.stdout
    assert "[slow-link] leaf-su003-r0 (nodes bn[0007-0009]): uplinks of leaf" in done.stdout
    data = bench.data
    assert data["format"] == "topograph-slurm-bench" and data["test"] == "all_reduce_perf"
    first = data["results"][0]
    assert first["argv"][:2] == [str(fake), "--nodes=2"] and first["busbw"] == 135.53
    assert first["rows"][-1]["size"] == 8589934592 and first["rows"][-1]["wrong"] == 0
    assert bench.medians == {"leaf": 338.82, "spine-1": 169.41}
    # the second run compares with the record it replaces: the same numbers, no drift
    again = cli(*args, "--out-dir", str(record), "--json", env=allocation())
    assert again.returncode == 1, again.stderr
    assert [lvl["baseline"] for lvl in json.loads(again.stdout)["levels"]] == [338.82, 169.41]
    assert not [f for f in load_bench(record).findings if f.kind == "bench-drift"]


def test_a_hung_run_is_killed_at_its_timeout_and_recorded(fake: Path, tmp_path: Path) -> None:
    args = ["bench", "--sim", SIM, "--launcher", str(fake), "--levels", "node", "--timeout", "1"]
    done = cli(
        *args, "--nodes", "bn[0004-0006]", "--out-dir", str(tmp_path / "r"), env=allocation()
    )
    assert done.returncode == 1, done.stderr
    results = load_bench(tmp_path / "r").data["results"]
    hung = next(r for r in results if r["nodes"] == ["bn0005"])
    assert hung["timed_out"] and hung["error"] == "timed out after 1 s (killed)"
    assert hung["duration"] < 30
    assert [r["busbw"] for r in results] == [338.82, None, 338.82]
    assert "  node bn0005 (round 1): timed out after 1 s (killed)" in done.stdout


def test_record_refuses_a_directory_that_is_not_a_snapshot(fake: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine\n")
    args = ["bench", "--sim", SIM, "--launcher", str(fake), "--levels", "node"]
    one_error(cli(*args, "--out-dir", str(other), env=allocation()), 9, "is not a topograph-slurm")
    assert sorted(p.name for p in other.iterdir()) == ["keep.txt"]


def test_plan_on_a_real_dump() -> None:
    dump = real_fixture("ibnetdiscover/dgx-superpod-ndr-quantum2-mqm9701.txt")
    args = ["bench", "--plan", "--ibnetdiscover", str(dump), "--gpus-per-node", "8", "--json"]
    done = cli(*args, "--all-pairs")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["nodes"], data["runs"]) == (120, 360)
    assert json.loads(cli(*args).stdout)["runs"] == 120 + 64 + 64  # the default cap
    assert [lvl["level"] for lvl in data["levels"]] == ["node", "leaf", "spine-1"]


def test_a_snapshot_gives_the_nvlink_rate_a_node_should_carry(fake: Path, tmp_path: Path) -> None:
    from tests.support.snapshots import write_node_outputs
    from topograph_slurm.sources.sim import generate_ibnetdiscover, parse_sim_spec

    topo = real_fixture("nvidia-smi-topo/h100-8gpu-sxm-ht-nonic-stas00.txt").read_text()
    nodes = [f"bn{i:04d}" for i in range(1, 10)]
    snap = write_node_outputs(
        tmp_path / "snap",
        {node: {"nvidia-smi-topo": topo} for node in nodes},
        {"fabric/ibnetdiscover.txt": generate_ibnetdiscover(parse_sim_spec(SIM))},
        fabric={"exit_code": 0, "file": "fabric/ibnetdiscover.txt"},
    )
    args = ["bench", "--snapshot", str(snap), "--launcher", str(fake), "--levels", "node"]
    done = cli(
        *args, "--nodes", "bn[0001-0003]", "--json", "--out-dir", str(snap), env=allocation()
    )
    assert done.returncode == 0, done.stderr
    level = json.loads(done.stdout)["levels"][0]
    assert (level["level"], level["expected"], level["median"], level["slow"]) == (
        "node",
        18 * 25.0,
        338.82,
        0,
    )
    snapshot = load_snapshot(snap)
    assert snapshot.bench is not None and sorted(snapshot.nodes) == nodes
    assert "gpus_per_node" in snapshot.bench.data["plan"]


def test_a_sweep_where_every_run_failed_is_recorded_then_exit_4(tmp_path: Path) -> None:
    broken = tmp_path / "broken-srun"
    broken.write_text("#!/bin/sh\necho 'srun: error: Unable to create step' >&2\nexit 1\n")
    broken.chmod(0o755)
    args = ["bench", "--sim", SIM, "--launcher", str(broken), "--levels", "node"]
    done = cli(
        *args, "--nodes", "bn[0001-0002]", "--out-dir", str(tmp_path / "r"), env=allocation()
    )
    assert done.returncode == 4, done.stderr
    assert done.stderr.splitlines()[-1] == (
        "topograph-slurm: error: every run failed (first: exit code 1); see the report"
    )
    assert "  node bn0001 (round 1): exit code 1" in done.stdout
    results = load_bench(tmp_path / "r").data["results"]
    assert [r["stderr_tail"] for r in results] == ["srun: error: Unable to create step\n"] * 2


def test_a_run_that_printed_wrong_results_or_no_table_failed() -> None:
    from topograph_slurm.collect.bench import BenchCommand, result_of
    from topograph_slurm.collect.transport import NodeRun
    from topograph_slurm.model.bench import BenchRun

    run = BenchRun("leaf", ("n1", "n2"))
    argv = BenchCommand(gpus_per_node=4).argv(run)
    assert argv[:7] == [
        "srun",
        "--mpi=pmix",
        "--nodes=2",
        "--ntasks=8",
        "--ntasks-per-node=4",
        "--nodelist=n1,n2",
        "--kill-on-bad-exit=1",
    ]
    corrupt = real_fixture(
        "nccl-tests/gh200-4node-16gpu-allreduce-v2.17.9-header-wrong-nonzero-nris-olivia.txt"
    ).read_text(encoding="utf-8")
    wrong = result_of(run, argv, NodeRun("", corrupt, "", 0, False, 2.0, "t"), 60)
    assert (wrong.error, wrong.busbw, wrong.ok) == (
        "3935945 wrong elements (data corruption)",
        None,
        False,
    )
    garbage = result_of(run, argv, NodeRun("", "garbage\n", "", 0, False, 1.0, "t"), 60)
    assert garbage.error == "unreadable output: leaf:n1,n2 output: no nccl-tests result table"


@pytest.mark.parametrize("flag", ["--slow-fraction", "--expected-fraction", "--drift"])
def test_a_threshold_that_is_not_a_number_is_refused(flag: str) -> None:
    """``nan`` passed every range check (it compares false) and then judged nothing."""
    from click.testing import CliRunner

    from topograph_slurm.cli.main import main
    from topograph_slurm.errors import Exit

    result = CliRunner().invoke(main, ["bench", "--plan", "--sim", "demo", flag, "nan"])
    assert result.exit_code == Exit.USAGE
    assert f"Invalid value for '{flag}': 'nan' is not a plain decimal number" in result.stderr


def test_ctrl_c_stops_the_running_steps_at_once(tmp_path: Path) -> None:
    """The pool waited for every step's timeout + 5 s (605 s here) before Ctrl-C was handled;
    now the steps get SIGTERM at once and the run exits 130.

    No wall-clock bound of seconds (a loaded CI machine starved the old 10 s one): the bug
    hangs for 605 s, so a generous 120 s still tells the two apart. And a step counts as gone
    when its pid no longer runs our ``sleep`` (a busy machine with pid_max 32768 may give the
    pid to another process right after the tool reaped the step)."""
    import contextlib
    import signal
    import time

    started = tmp_path / "started"
    launcher = tmp_path / "hung-srun"
    launcher.write_text(
        f"#!/bin/sh\n[ $1 = --version ] && exit 0\necho $$ >> {started}\nexec sleep 300\n"
    )
    launcher.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    args = ["bench", "--sim", SIM, "--launcher", str(launcher), "--levels", "node"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "topograph_slurm", "--config", os.devnull, *args],
        cwd=REPO,
        env={**base, **allocation()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def steps() -> list[int]:
        return [int(pid) for pid in started.read_text().split()] if started.exists() else []

    try:
        deadline = time.monotonic() + 300
        while sum(map(our_sleep, steps())) < 9:  # all nine steps of the round sleep
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert [pid for pid in steps() if our_sleep(pid)] == []  # every step is gone
    finally:  # a failure leaves no run and no step behind
        proc.kill()
        for pid in steps():
            if our_sleep(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def our_sleep(pid: int) -> bool:
    """Whether ``pid`` is still a step's ``sleep 300`` (not gone, not a zombie, not reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return cmdline == b"sleep\x00300\x00" and state != "Z"


def test_the_old_record_flag_still_records_with_one_warning(fake: Path, tmp_path: Path) -> None:
    """``--record DIR`` is now ``--out-dir DIR``: still taken for one release, warned once."""
    args = ["bench", "--sim", SIM, "--launcher", str(fake), "--levels", "node"]
    done = cli(*args, "--nodes", "bn0001", "--record", str(tmp_path / "r"), env=allocation())
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "warning:" in line]
    assert warned == [
        "topograph-slurm: warning: --record is now --out-dir; the old spelling goes in the next "
        "release"
    ]
    assert load_bench(tmp_path / "r").data["results"][0]["nodes"] == ["bn0001"]


def test_a_replayed_rccl_tests_run_is_read_as_nccl_tests_is() -> None:
    """AMD's rccl-tests prints nccl-tests' table: a real two-node MI300X run read back as a
    bench step's output gives its peak bus bandwidth and no error."""
    from topograph_slurm.collect.bench import BenchCommand, result_of
    from topograph_slurm.collect.transport import NodeRun
    from topograph_slurm.model.bench import BenchRun

    run = BenchRun("leaf", ("gpu-53", "gpu-56"))
    argv = BenchCommand(gpus_per_node=8).argv(run)
    text = real_fixture(
        "nccl-tests/mi300x-2node-16gpu-allreduce-rccl-tests-rccl-version-block-aac10.txt"
    ).read_text(encoding="utf-8")
    result = result_of(run, argv, NodeRun("", text, "", 0, False, 30.0, "t"), 60)
    assert (result.ok, result.error, result.busbw) == (True, "", 357.46)
