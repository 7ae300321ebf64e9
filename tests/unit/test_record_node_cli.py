"""`record node-start|node-end|task` (the Prolog, Epilog and TaskProlog hooks) end to end through
the CLI on a sysfs tree laid out from real prints, and `health --job-records` taking what the
Epilog found."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support import ib_sysfs
from tests.support.sim_gpu import near_cpus_topology, render_topo_matrix
from tests.unit.test_health_cli import fake_scontrol
from tests.unit.test_health_cli import run as run_health
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.sources.record_node import task_part

REPO = Path(__file__).resolve().parents[2]
#: Each hook's `record` subcommand: the Prolog's, the Epilog's and the TaskProlog's.
COMMAND = {"start": "node-start", "end": "node-end", "binding": "task"}
#: What `record task` prints first when, as in these tests, there is no job record.
MISSING = "export TOPOGRAPH_RECORD_MISSING=1\n"


def hook(tmp_path: Path, command: str, *args: str, job: str = "42", node: str = "gpu01") -> Result:
    flags = ["--record-dir", str(tmp_path / "rec"), "--this-node", node]
    if command != "binding":
        flags += ["--sysfs", str(tmp_path / "sys")]
    env = {"SLURM_JOB_ID": job, "PATH": os.defpath}  # no nvidia-smi on this PATH
    return CliRunner().invoke(
        main, ["--config", os.devnull, "record", COMMAND[command], *flags, *args], env=env
    )


def part(tmp_path: Path, name: str, job: str = "42") -> dict[str, object]:
    data: dict[str, object] = json.loads((tmp_path / "rec" / f"job-{job}.d" / name).read_text())
    return data


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return ib_sysfs.lay_out(tmp_path / "sys")


def test_the_end_part_names_the_link_whose_errors_rose_during_the_job(
    tmp_path: Path, tree: Path
) -> None:
    started = hook(tmp_path, "start")
    assert (started.exit_code, started.output) == (0, "")
    ib_sysfs.bump(tree, "link_error_recovery", 4)
    ended = hook(tmp_path, "end")
    assert (ended.exit_code, ended.output) == (0, "")
    start, end = part(tmp_path, "gpu01.start.json"), part(tmp_path, "gpu01.end.json")
    assert {key: start[key] for key in ("format", "version", "part", "job_id", "node")} == {
        "format": "topograph-slurm/record",
        "version": 1,
        "part": "node-start",
        "job_id": "42",
        "node": "gpu01",
    }
    assert start["findings"] == []
    assert end["part"] == "node-end"
    assert end["findings"] == [
        {
            "kind": "link-errors-during-job",
            "subject": "gpu01/mlx5_1/1",
            "message": "mlx5_1/1: link_error_recovery +4 during the job",
            "level": "problem",
            "nodes": ["gpu01"],
        }
    ]
    assert (tmp_path / "rec/job-42.d/gpu01.end.json").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("job", ["", "42x", "٤2", " 42", "-1"])
def test_a_job_id_that_is_not_digits_is_one_line_exit_0_and_nothing_written(
    tmp_path: Path, tree: Path, job: str
) -> None:
    result = hook(tmp_path, "start", job=job)
    assert result.exit_code == 0, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "is not a Slurm job id" in result.output
    assert not (tmp_path / "rec").exists()


def test_an_end_without_a_start_still_writes_and_says_why(tmp_path: Path, tree: Path) -> None:
    result = hook(tmp_path, "end")
    assert (result.exit_code, result.output) == (0, "")
    (finding,) = part(tmp_path, "gpu01.end.json")["findings"]  # type: ignore[misc]
    assert finding["kind"] == "record-incomplete"
    assert "no start counters to compare" in finding["message"]


def test_no_sysfs_is_a_finding_in_the_part_and_exit_0(tmp_path: Path) -> None:
    result = hook(tmp_path, "start")
    assert (result.exit_code, result.output) == (0, "")
    (finding,) = part(tmp_path, "gpu01.start.json")["findings"]  # type: ignore[misc]
    assert finding["kind"] == "record-incomplete"


def test_an_unwritable_record_dir_is_one_line_and_exit_0(tmp_path: Path, tree: Path) -> None:
    (tmp_path / "rec").write_text("a file where the directory should be")
    result = hook(tmp_path, "start")
    assert result.exit_code == 0
    (line,) = result.output.strip().splitlines()
    assert line.startswith("topograph-slurm: warning: record node-start: job 42: record_dir ")
    assert "not a directory" in line


def binding(
    tmp_path: Path,
    near: list[str],
    cpus: set[int],
    visible: str,
    step_gpus: str = "",
    stdin: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`record task` (its binding check; no job record here) in a process of its own bound
    to *cpus*, as task/affinity leaves a task, with this node's topo -m putting GPU i near the
    CPU list near[i]."""
    matrix = tmp_path / "topo.txt"
    matrix.write_text(render_topo_matrix(near_cpus_topology(near)))
    prolog(tmp_path)
    args = ["--config", os.devnull, "record", "task", "--record-dir", str(tmp_path / "rec")]
    args += ["--this-node", "gpu01", "--topo-matrix", "-" if stdin else str(matrix)]
    code = (
        f"import os; os.sched_setaffinity(0, {cpus!r}); "
        f"from topograph_slurm.cli.main import main; main({args!r})"
    )
    env = {
        "SLURM_JOB_ID": "42",
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "1",
        "CUDA_VISIBLE_DEVICES": visible,
    }
    env |= {"SLURM_STEP_GPUS": step_gpus} if step_gpus else {}
    env |= {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        input=matrix.read_text() if stdin else None,
    )


def prolog(tmp_path: Path, job: str = "42") -> None:
    """The Prolog as Slurm runs it for a job of this test's own uid: the job's part directory
    and its tasks/ (where the TaskProlog writes)."""
    flags = [
        "--record-dir",
        str(tmp_path / "rec"),
        "--this-node",
        "gpu01",
        "--sysfs",
        str(tmp_path),
    ]
    env = {"SLURM_JOB_ID": job, "SLURM_JOB_UID": str(os.geteuid()), "PATH": os.defpath}
    args = ["--config", os.devnull, "record", "node-start", *flags]
    CliRunner().invoke(main, args, env=env)


needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")


@needs_two_cpus
@pytest.mark.parametrize("stdin", [False, True], ids=["file", "stdin"])
def test_a_task_near_its_gpu_exports_ok(tmp_path: Path, stdin: bool) -> None:
    first = min(os.sched_getaffinity(0))
    done = binding(tmp_path, [str(first)], {first}, "0", stdin=stdin)
    assert (done.returncode, done.stdout) == (0, MISSING + "export TOPOGRAPH_BINDING=ok\n")
    assert "no job record" in done.stderr and len(done.stderr.splitlines()) == 1
    task = part(tmp_path, "tasks/task-0.1.json")
    assert (task["part"], task["binding"], task["findings"]) == ("task", "ok", [])


@needs_two_cpus
def test_a_task_on_the_far_cpu_exports_far_numa_and_a_finding(tmp_path: Path) -> None:
    first, second = sorted(os.sched_getaffinity(0))[:2]
    done = binding(tmp_path, [str(second), str(first)], {first}, "0")
    assert (done.returncode, done.stdout) == (0, MISSING + "export TOPOGRAPH_BINDING=far-numa\n")
    (finding,) = part(tmp_path, "tasks/task-0.1.json")["findings"]  # type: ignore[misc]
    assert (finding["kind"], finding["subject"]) == ("binding-far-numa", "gpu01/task-0.1")


@needs_two_cpus
def test_the_physical_gpu_index_counts_where_devices_are_constrained(tmp_path: Path) -> None:
    """ConstrainDevices: the task of GPU 1 sees it as CUDA_VISIBLE_DEVICES=0, while Slurm's
    SLURM_STEP_GPUS keeps the node's index 1; GPU 1 is near the task's CPU, GPU 0 is not."""
    first, second = sorted(os.sched_getaffinity(0))[:2]
    done = binding(tmp_path, [str(second), str(first)], {first}, "0", step_gpus="1")
    assert (done.returncode, done.stdout) == (0, MISSING + "export TOPOGRAPH_BINDING=ok\n")


def test_binding_that_cannot_write_still_exports_and_exits_0(tmp_path: Path) -> None:
    (tmp_path / "rec").write_text("not a directory")
    done = binding(tmp_path, ["0"], set(os.sched_getaffinity(0)), "")
    assert (done.returncode, done.stdout) == (0, MISSING + "export TOPOGRAPH_BINDING=no-gpu\n")
    assert len(done.stderr.splitlines()) == 1


def test_health_takes_the_end_parts_as_degraded_never_drained(tmp_path: Path, tree: Path) -> None:
    (tmp_path / "slurm").mkdir()
    slurm = fake_scontrol(tmp_path / "slurm")
    hook(tmp_path, "start", node="node0003")
    ib_sysfs.bump(tree, "symbol_error", 9)
    hook(tmp_path, "end", node="node0003")
    records = ["--job-records", "--record-dir", str(tmp_path / "rec")]

    def node3(*args: str) -> dict[str, object]:
        rows = json.loads(run_health(slurm, "--json", *args).stdout)["nodes"]
        return next(row for row in rows if row["node"] == "node0003")

    assert node3()["verdict"] == "healthy"
    judged = node3(*records)
    assert judged["verdict"] == "degraded", judged
    assert [f["kind"] for f in judged["findings"]] == ["link-errors-during-job"]  # type: ignore[attr-defined]
    old = time.time() - 2 * 3600
    os.utime(tmp_path / "rec/job-42.d/node0003.end.json", (old, old))
    assert node3(*records, "--job-records-since", "1h")["verdict"] == "healthy"
    assert node3(*records)["verdict"] == "degraded"  # within the default 24h


NVML_ERROR = "Failed to initialize NVML: Driver/library version mismatch"


def fake_nvidia_smi(bin_dir: Path, replay: int, code: int = 0) -> None:
    """An `nvidia-smi` that prints `nvlink -e` in the documented layout (no real capture
    exists; see tests/fixtures/real/SOURCES.md) with GPU0 link 2's Replay Errors at *replay*."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        '[ "$1 $2" = "nvlink -e" ] || exit 9\n'
        f"[ {code} = 0 ] || {{ echo '{NVML_ERROR}' >&2; exit {code}; }}\n"
        "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)'\n"
        f"printf '\\t Link 2: Replay Errors: {replay}\\n\\t Link 2: CRC Errors: 0\\n'\n"
    )
    script.chmod(0o755)


def nvlink_hook(tmp_path: Path, command: str) -> Result:
    flags = [
        "--record-dir",
        str(tmp_path / "rec"),
        "--this-node",
        "gpu01",
        "--sysfs",
        str(tmp_path / "sys"),
    ]
    env = {"SLURM_JOB_ID": "7", "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.defpath}"}
    return CliRunner().invoke(
        main, ["--config", os.devnull, "record", COMMAND[command], *flags], env=env
    )


def test_nvlink_errors_that_rose_during_the_job(tmp_path: Path, tree: Path) -> None:
    fake_nvidia_smi(tmp_path / "bin", replay=1)
    assert nvlink_hook(tmp_path, "start").exit_code == 0
    fake_nvidia_smi(tmp_path / "bin", replay=4)
    assert nvlink_hook(tmp_path, "end").exit_code == 0
    found = part(tmp_path, "gpu01.end.json", job="7")["findings"]
    assert [(f["kind"], f["message"]) for f in found] == [  # type: ignore[attr-defined]
        ("nvlink-errors-during-job", "GPU0/link2: Replay Errors +3 during the job")
    ]


def test_a_failing_nvidia_smi_is_a_finding_not_a_failure(tmp_path: Path, tree: Path) -> None:
    fake_nvidia_smi(tmp_path / "bin", replay=0, code=255)
    result = nvlink_hook(tmp_path, "start")
    assert (result.exit_code, result.output) == (0, "")
    (finding,) = part(tmp_path, "gpu01.start.json", job="7")["findings"]  # type: ignore[misc]
    assert finding["kind"] == "record-incomplete"
    assert finding["message"] == (
        "no NVLink counters: nvidia-smi nvlink -e: exit 255: "
        "Failed to initialize NVML: Driver/library version mismatch"
    )


def test_the_record_dir_is_one_place_whoever_runs_the_hook(tmp_path: Path) -> None:
    """root (Prolog), SlurmUser (PrologSlurmctld) and the job's user (TaskProlog) must meet:
    the default may not follow the state directory, which is per user."""
    from topograph_slurm.config import Settings, record_dir

    default = Path("/var/lib/topograph-slurm/records")
    assert record_dir(Settings(state_dir=str(tmp_path))) == default
    assert record_dir(Settings()) == default
    assert record_dir(Settings(state_dir=str(tmp_path), record_dir="/shared/r")) == Path(
        "/shared/r"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a directory to another uid needs root")
def test_the_prolog_keeps_the_part_directory_and_hands_only_tasks_to_the_user(
    tmp_path: Path, tree: Path
) -> None:
    flags = ["--record-dir", str(tmp_path / "rec"), "--this-node", "gpu01", "--sysfs", str(tree)]
    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_UID": "2000", "PATH": os.defpath}
    args = ["--config", os.devnull, "record", "node-start", *flags]
    assert CliRunner().invoke(main, args, env=env).exit_code == 0
    parts = tmp_path / "rec" / "job-42.d"
    assert (parts.stat().st_uid, parts.stat().st_mode & 0o777) == (0, 0o755)
    assert (parts / "gpu01.start.json").stat().st_uid == 0
    tasks = parts / "tasks"
    assert (tasks.stat().st_uid, tasks.stat().st_mode & 0o777) == (2000, 0o755)


@pytest.mark.parametrize("node", ["../etc", "gpu 01", "-x"])
def test_a_node_name_slurm_would_not_take_is_one_line_and_exit_0(
    tmp_path: Path, tree: Path, node: str
) -> None:
    result = hook(tmp_path, "end", node=node)
    assert result.exit_code == 0, result.output
    assert len(result.output.splitlines()) == 1
    assert "invalid node name" in result.output
    assert not (tmp_path / "rec").exists()


def test_show_and_diff_read_the_parts_beside_the_record(tmp_path: Path, tree: Path) -> None:
    """Two runs of one job record: the second's Epilog found a link that took errors and
    its task was bound far from its GPU. `record show` lists both, `record diff` marks both
    as mattering (exit 1); parts are what the hooks wrote, the job records one file."""
    from tests.unit.test_record import CROSSING, run, started

    config = started(tmp_path, CROSSING)  # job 7's record in tmp_path/records
    records = tmp_path / "records"
    (records / "job-8.json").write_bytes((records / "job-7.json").read_bytes())
    for job, bump in (("7", 0), ("8", 3)):
        flags = ["--record-dir", str(records), "--this-node", "gpu0001", "--sysfs", str(tree)]
        env = {"SLURM_JOB_ID": job, "PATH": os.defpath}
        for command in ("node-start", "node-end"):
            if command == "node-end" and bump:
                ib_sysfs.bump(tree, "symbol_error", bump)
            args = ["--config", os.devnull, "record", command, *flags]
            assert CliRunner().invoke(main, args, env=env).exit_code == 0
    parts = records / "job-8.d"
    (parts / "tasks").mkdir()
    (parts / "tasks" / "task-0.0.json").write_text(
        task_part("8", "gpu0001", "task-0.0", "far-numa", "CPUs 1, GPU 0 near CPUs 0", [])
    )
    shown = run(config, "record", "show", "8")
    assert shown.exit_code == 0, shown.output
    assert "link-errors-during-job gpu0001/mlx5_1/1: mlx5_1/1: symbol_error +3" in shown.stdout
    assert "gpu0001/task-0.0: far-numa" in shown.stdout
    diffed = run(config, "record", "diff", "7", "8")
    assert diffed.exit_code == Exit.DIFFERS, diffed.output
    assert "links degraded during the job" in diffed.stdout
    assert "task bindings" in diffed.stdout
    (parts / "gpu0001.end.json").write_text("{broken")
    shown = run(config, "record", "show", "8")
    assert shown.exit_code == 0 and "record-incomplete gpu0001.end: unreadable part" in shown.stdout


def test_the_old_job_and_node_flags_of_the_node_hooks_still_work_with_a_warning(
    tmp_path: Path, tree: Path
) -> None:
    flags = ["--record-dir", str(tmp_path / "rec"), "--sysfs", str(tree)]
    result = CliRunner().invoke(
        main,
        ["--config", os.devnull, "record", "node-start", *flags, "--job", "42", "--node", "gpu01"],
        env={"PATH": os.defpath},
    )
    assert result.exit_code == 0, result.output
    tail = "; the old spelling goes in the next release"
    assert result.stderr.splitlines() == [
        f"topograph-slurm: warning: --job is now a JOBID argument{tail}",
        f"topograph-slurm: warning: --node is now --this-node{tail}",
    ]
    assert (tmp_path / "rec/job-42.d/gpu01.start.json").exists()
