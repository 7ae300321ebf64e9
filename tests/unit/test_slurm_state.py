"""A saved Slurm state (``--slurm-state DIR``, :mod:`topograph_slurm.slurm.saved`): each
scontrol read answered from its one file, ``show job``/``show partition`` from the saved
lists in Slurm's own shape, a missing file one input error, a change refused; ``slurm save``
through the guarded writer. The answers are real ones (tests/fixtures/real/scontrol)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from topograph_slurm.cli.main import main
from topograph_slurm.config import Settings, override
from topograph_slurm.errors import ConfigError, Exit, InputError, UsageError
from topograph_slurm.slurm.jobs import parse_scontrol_job, scontrol_job, scontrol_jobs
from topograph_slurm.slurm.partitions import scontrol_partition_nodes
from topograph_slurm.slurm.saved import FILES, Unchanged
from topograph_slurm.slurm.scontrol import Scontrol

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "scontrol"
RELEASES = ("24.11", "26.05")


def _state(tmp_path: Path, release: str = "24.11") -> Path:
    """A saved state of the recorded answers of *release*'s test cluster."""
    state = tmp_path / "state"
    state.mkdir()
    for kind, name in (("nodes", "nodes"), ("jobs", "jobs"), ("partition", "partitions")):
        shutil.copy(REAL / f"scontrol-{release}-{kind}.json", state / f"scontrol-show-{name}.json")
    (state / "scontrol-version.txt").write_text(f"slurm-wlm {release}.5\n")
    return state


def test_each_read_is_its_one_file(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    for args, name in FILES.items():
        (state / name).write_bytes(f"{' '.join(args)}\n".encode())
    for args in FILES:
        assert Scontrol(saved=state).output(list(args)) == f"{' '.join(args)}\n".encode()


@pytest.mark.parametrize("release", RELEASES)
def test_show_job_is_the_saved_jobs_filtered_as_slurm_answers_it(
    tmp_path: Path, release: str
) -> None:
    state = _state(tmp_path, release)
    own = parse_scontrol_job((REAL / f"scontrol-{release}-job.json").read_bytes(), "2")
    assert scontrol_job(Scontrol(saved=state), "2") == own
    assert len(scontrol_jobs(Scontrol(saved=state))) == 4
    with pytest.raises(InputError, match="job 99 not found"):
        scontrol_job(Scontrol(saved=state), "99")


def test_a_saved_job_file_of_its_own_wins(tmp_path: Path) -> None:
    state = _state(tmp_path)
    shutil.copy(REAL / "scontrol-26.05-job.json", state / "scontrol-show-job-2.json")
    answer = Scontrol(saved=state).output(["show", "job", "--json", "2"])
    assert answer == (REAL / "scontrol-26.05-job.json").read_bytes()


def test_show_partition_is_the_saved_partitions_filtered(tmp_path: Path) -> None:
    state = _state(tmp_path)
    assert scontrol_partition_nodes(Scontrol(saved=state), "gpu")[:2] == ["node01", "node02"]
    with pytest.raises(InputError, match="partition cpu not found"):
        scontrol_partition_nodes(Scontrol(saved=state), "cpu")


def test_a_missing_file_names_itself_and_how_to_save_it(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        Scontrol(saved=tmp_path).output(["show", "nodes", "--json"])
    message = str(caught.value)
    assert message.startswith(f"{tmp_path}/scontrol-show-nodes.json: No such file")
    assert "`scontrol show nodes --json`" in message and "slurm save DIR" in message
    assert caught.value.exit_code == Exit.INPUT


@pytest.mark.parametrize(
    "args", [["update", "nodename=node01", "state=drain"], ["reconfigure"], ["requeuehold", "2"]]
)
def test_a_change_to_a_saved_state_is_refused(tmp_path: Path, args: list[str]) -> None:
    with pytest.raises(Unchanged, match="refused, Slurm is read from the saved state") as caught:
        Scontrol(saved=tmp_path).run(args)
    assert caught.value.exit_code == Exit.REFUSED
    with pytest.raises(Unchanged):
        Scontrol(saved=tmp_path).require("--reconfigure needs slurm-client", "--reconfigure")


def test_the_setting_is_a_directory(tmp_path: Path) -> None:
    assert override(Settings(), slurm_state=str(tmp_path)).slurm_state == str(tmp_path)
    with pytest.raises(UsageError, match="--slurm-state: must be a directory"):
        override(Settings(), slurm_state=str(tmp_path / "nothing"))
    config = tmp_path / "config.yaml"
    config.write_text(f"slurm_state: {tmp_path / 'nothing'}\n")
    result = CliRunner().invoke(main, ["--config", str(config), "occupancy"])
    assert result.exit_code == ConfigError.exit_code, result.output
    assert "config key 'slurm_state': must be a directory" in result.stderr


def test_the_release_comes_from_the_saved_version(tmp_path: Path) -> None:
    from topograph_slurm.slurm.auto import resolve_version

    settings = override(Settings(), slurm_state=str(_state(tmp_path, "26.05")))
    assert resolve_version(settings, []).slurm_version == "26.05.5"


def test_record_starts_gate_cannot_hold_a_saved_states_job(tmp_path: Path) -> None:
    from topograph_slurm.app.record import _hold

    settings = override(Settings(), slurm_state=str(tmp_path))
    (said,) = _hold(settings, "2")
    assert said.startswith("not held (Slurm requeues it and retries): scontrol requeuehold")
    assert "refused, Slurm is read from the saved state" in said


# --------------------------------------------------------------------------- slurm save

FAKE_SCONTROL = """#!/bin/sh
# scontrol replaying the recorded answers of the 24.11 test cluster
case "$*" in
  "show config") printf 'SLURM_VERSION           = 24.11.5\\n' ;;
  "show nodes --json") cat {real}/scontrol-24.11-nodes.json ;;
  "show jobs --json") cat {real}/scontrol-24.11-jobs.json ;;
  "show partitions --json") cat {real}/scontrol-24.11-partition.json ;;
  "--version") echo "slurm-wlm 24.11.5" ;;
  *) echo "scontrol: error: {topology}" >&2; exit 1 ;;
esac
"""


def _fake_scontrol(tmp_path: Path, topology: str = "no topology") -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "scontrol"
    fake.write_text(FAKE_SCONTROL.format(real=REAL, topology=topology))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "XDG_STATE_HOME": str(tmp_path / "xdg")}


def test_slurm_save_writes_the_layout_and_the_commands_read_it(tmp_path: Path) -> None:
    env = _fake_scontrol(tmp_path)
    state = tmp_path / "saved"
    result = CliRunner().invoke(main, ["slurm", "save", str(state), "--json"], env=env)
    assert result.exit_code == Exit.OK, result.output
    summary = json.loads(result.stdout)
    assert summary["format"] == "topograph-slurm/slurm-state" and summary["version"] == 1
    names = sorted(set(FILES.values()) - {"scontrol-show-topology.txt"})
    assert sorted(summary["files"]) == names == sorted(p.name for p in state.iterdir())
    assert summary["not_saved"] == [
        "scontrol-show-topology.txt: scontrol show topology failed (exit 1): "
        "scontrol: error: no topology"
    ]
    nodes = (REAL / "scontrol-24.11-nodes.json").read_bytes()
    assert (state / "scontrol-show-nodes.json").read_bytes() == nodes
    again = CliRunner().invoke(main, ["slurm", "save", str(state)], env=env)  # a saved state
    assert again.exit_code == Exit.OK, again.output
    assert again.stdout.startswith(f"saved Slurm state in {state}:\n  scontrol-show-config.txt")


def test_slurm_save_refuses_a_directory_that_is_no_saved_state(tmp_path: Path) -> None:
    env = _fake_scontrol(tmp_path)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("mine\n")
    result = CliRunner().invoke(main, ["slurm", "save", str(tmp_path / "home")], env=env)
    assert result.exit_code == Exit.OUTPUT, result.output
    assert "is not a topograph-slurm saved Slurm state; not replacing it" in result.stderr
    assert [p.name for p in (tmp_path / "home").iterdir()] == ["notes.txt"]


def test_slurm_save_writes_nothing_when_a_read_fails(tmp_path: Path) -> None:
    env = _fake_scontrol(tmp_path)
    (tmp_path / "bin" / "scontrol").write_text("#!/bin/sh\necho 'slurmctld down' >&2\nexit 1\n")
    result = CliRunner().invoke(main, ["slurm", "save", str(tmp_path / "s")], env=env)
    assert result.exit_code == Exit.COLLECT, result.output
    assert "scontrol show config failed (exit 1): slurmctld down" in result.stderr
    assert not (tmp_path / "s").exists()


# --------------------------------------------------------------------------- each command, offline

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "slurm-state"
REPO = Path(__file__).resolve().parents[2]
BLOCKS = "BlockName=b0 Nodes=node[01-04]\nBlockName=b1 Nodes=node[05-08]\nBlockSizes=4\n"


def _offline(tmp_path: Path, *args: str, state: Path = EXAMPLE) -> subprocess.CompletedProcess[str]:
    """The command run from the shipped saved state (examples/slurm-state: the Docker test
    cluster's 24.11, docs/slurm-state.md) with no scontrol anywhere on PATH."""
    empty = tmp_path / "no-slurm"
    empty.mkdir(exist_ok=True)
    env = {"PATH": str(empty), "PYTHONPATH": str(REPO), "XDG_STATE_HOME": str(tmp_path / "xdg")}
    argv = [sys.executable, "-m", "topograph_slurm", *args, "--slurm-state", str(state)]
    return subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, check=False)


def test_occupancy_offline(tmp_path: Path) -> None:
    done = _offline(tmp_path, "occupancy", "--json")
    assert done.returncode == Exit.OK, done.stderr
    fabric = json.loads(done.stdout)["fabric"]
    units = {unit["name"]: (unit["busy"], unit["free"], unit["down"]) for unit in fabric["units"]}
    assert units == {"b0": (12, 4, 0), "b1": (2, 10, 4)}  # node07 drained
    assert (fabric["stranded"], fabric["pending"], fabric["largest_tp"]) == (14, 2, 8)


def test_explain_a_job_offline(tmp_path: Path) -> None:
    done = _offline(tmp_path, "explain", "3")
    assert done.returncode == Exit.OK, done.stderr
    assert "Ranks from: job 3, in the order Slurm ranks its nodes" in done.stdout
    assert "Nodes in rank order: node02 node03" in done.stdout
    gone = _offline(tmp_path, "explain", "99")
    assert gone.returncode == Exit.INPUT
    said = "topograph-slurm: error: job 99 not found: scontrol show job lists no such job\n"
    assert gone.stderr == said


def test_pools_of_a_partition_offline(tmp_path: Path) -> None:
    (tmp_path / "topology.conf").write_text(BLOCKS)
    args = ["pools", "--partition", "small", "--topology", "topology.conf", "--gpus-per-node", "4"]
    done = _offline(tmp_path, *args, "--prefill", "2x4", "--decode", "2x4", "--json")
    assert done.returncode == Exit.OK, done.stderr
    placed = json.loads(done.stdout)
    nodes = {node for inst in placed["instances"] for node in inst["nodes"]}
    assert nodes == {"node01", "node02", "node03", "node04"}  # partition small


def test_record_start_offline(tmp_path: Path) -> None:
    records = tmp_path / "records"
    done = _offline(tmp_path, "record", "start", "--job", "3", "--record-dir", str(records))
    assert done.returncode == Exit.OK, done.stderr
    record = json.loads((records / "job-3.json").read_text())
    placed = [(node["node"], node["block"]) for node in record["nodes"]]
    assert placed == [("node02", "b0"), ("node03", "b0")]
    assert record["findings"] == [] and record["refused"] == ""


def test_record_starts_gate_offline_writes_the_record_and_says_it_could_not_hold(
    tmp_path: Path,
) -> None:
    """Job 3 with a --tp-size 8 record on 4-GPU nodes, on a topology splitting its two nodes:
    the gate refuses it, the saved state cannot hold it: the record is written, exit 11."""
    state = tmp_path / "state"
    shutil.copytree(EXAMPLE, state)
    jobs = json.loads((state / "scontrol-show-jobs.json").read_text())
    (job,) = [job for job in jobs["jobs"] if job["job_id"] == 3]
    job["admin_comment"] = "topograph:tp=8,gpn=4,group=2"
    (state / "scontrol-show-jobs.json").write_text(json.dumps(jobs))
    (tmp_path / "split.conf").write_text(
        "BlockName=x Nodes=node[01-02]\nBlockName=y Nodes=node[03-04]\n"
        "BlockName=z Nodes=node[05-08]\nBlockSizes=2\n"
    )
    records = tmp_path / "records"
    args = ["record", "start", "--job", "3", "--record-dir", str(records), "--refuse"]
    done = _offline(tmp_path, *args, "tp-crossing", "--topology", "split.conf", state=state)
    assert done.returncode == Exit.JOB_REFUSED, done.stderr
    assert (
        "job 3: not held (Slurm requeues it and retries): scontrol requeuehold: refused, Slurm "
        f"is read from the saved state {state} (--slurm-state); nothing changed"
    ) in done.stderr
    record = json.loads((records / "job-3.json").read_text())
    assert record["refused"].startswith("tp-crossing: 1 of 1 TP groups of 8 GPUs cross")


def test_doctor_offline(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("{}\n")
    done = _offline(tmp_path, "--config", "config.yaml", "doctor")
    assert done.returncode == Exit.DIFFERS, done.stderr  # the example runs topology/block
    assert done.stdout.startswith(f"Slurm 24.11.5 on saved state {EXAMPLE}\n")
    assert "fail  topology-plugin      TopologyPlugin is topology/block" in done.stdout


def test_a_change_offline_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    args = ["generate", "--sim", "demo", "--slurm-nodes", "all", "-o", "t.conf", "--reconfigure"]
    done = _offline(tmp_path, *args)
    assert done.returncode == Exit.REFUSED, done.stderr
    assert done.stderr == (
        f"topograph-slurm: error: --reconfigure: refused, Slurm is read from the saved state "
        f"{EXAMPLE} (--slurm-state); nothing changed\n"
    )
    assert not (tmp_path / "t.conf").exists()
