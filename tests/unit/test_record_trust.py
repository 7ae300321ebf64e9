"""The record hooks attacked as another user on the cluster would (issue "Job hooks that cannot
hurt the cluster"): the attacker is a second uid (a forked child that drops to it), the hooks
run as root with the environment Slurm gives them, and each attack is tried with
``fs.protected_symlinks`` 0 and 1 (the kernel's guard against following another user's link in
a sticky directory must not be what keeps the hooks safe). Run as root, as CI runs.

Also here: the never-fail runner (a start part holding 1e400, scontrol printing a byte that is
not UTF-8, a hung scontrol past the deadline) and the one escaping rule of text output."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support import ib_sysfs
from tests.unit.test_health_cli import fake_scontrol
from tests.unit.test_health_cli import run as run_health
from topograph_slurm.cli.main import main
from topograph_slurm.sources.record_node import node_part

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a second uid needs root")

ATTACKER, VICTIM = 65534, 65533  # nobody, and a job's user
SYSCTL = Path("/proc/sys/fs/protected_symlinks")


@pytest.fixture(params=[0, 1], ids=["protected_symlinks=0", "protected_symlinks=1"])
def symlinks(request: pytest.FixtureRequest) -> Iterator[int]:
    """Each attack with the kernel's link protection off and on (restored afterwards)."""
    try:
        before = SYSCTL.read_text().strip()
        SYSCTL.write_text(str(request.param))
    except OSError as err:
        pytest.skip(f"fs.protected_symlinks cannot be set here: {err.strerror}")
    yield request.param
    SYSCTL.write_text(before)


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory every uid can reach (pytest's tmp_path is root's alone), with the
    attacker's own directory in it."""
    path = Path(tempfile.mkdtemp(prefix="record-trust-", dir="/tmp"))
    path.chmod(0o755)
    (path / "attacker").mkdir()
    os.chown(path / "attacker", ATTACKER, ATTACKER)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_uid(uid: int, action: Callable[[], object]) -> bool:
    """Run *action* in a forked child that dropped to *uid*; whether it succeeded."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            action()
        except BaseException as err:
            os.write(2, f"as uid {uid}: {type(err).__name__}: {err}\n".encode())
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def legacy_root(base: Path) -> Path:
    """The record root as the earlier docs said to make it: mode 1777, like /tmp."""
    root = base / "records"
    root.mkdir()
    root.chmod(0o1777)
    return root


def trusted_root(base: Path) -> Path:
    root = base / "records"
    root.mkdir(mode=0o755)
    return root


def hook(root: Path, command: str, job: str, node: str = "gpu01", **env: str) -> Result:
    """A node hook as slurmd runs it (as root): SLURM_JOB_ID, SLURMD_NODENAME, SLURM_JOB_UID."""
    flags = ["--record-dir", str(root)]
    if command != "task":
        flags += ["--sysfs", str(root.parent / "sys")]
    environ = {"SLURM_JOB_ID": job, "SLURMD_NODENAME": node, "SLURM_JOB_UID": str(VICTIM)}
    environ |= {"PATH": os.defpath, **env}
    args = ["--config", os.devnull, "record", command, *flags]
    return CliRunner().invoke(main, args, env=environ)


def start_part(job: str, node: str = "gpu01", gpu: str = "1e400") -> str:
    """A node-start part whose NVLink GPU index is *gpu* as JSON text."""
    text = node_part("node-start", job, node, ib_sysfs_reading(), [])
    data = json.loads(text)
    data["nvlinks"] = [{"gpu": 0, "link": 0, "counters": {}}]
    return json.dumps(data).replace('"gpu": 0', f'"gpu": {gpu}')


def ib_sysfs_reading() -> object:
    from topograph_slurm.model.counters import NodeCounters

    return NodeCounters((), ())


def one_warning(result: Result) -> str:
    assert result.exit_code == 0, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("topograph-slurm: warning: record "), line
    return line


# ------------------------------------------------------------------------ 1: the Epilog's exit


def test_a_planted_start_part_cannot_fail_the_epilog(base: Path, symlinks: int) -> None:
    """Attack 1: any user plants the next job's start part (1e400) in a 1777 record root, or a
    link to one: the Epilog must neither exit non-zero nor write where the planter chose."""
    root = legacy_root(base)
    ib_sysfs.lay_out(base / "sys")

    def plant() -> None:
        (root / "job-43.d").mkdir(mode=0o777)
        (root / "job-43.d" / "gpu01.start.json").write_text(start_part("43"))
        (base / "attacker" / "elsewhere").mkdir(mode=0o777)
        os.symlink(base / "attacker" / "elsewhere", root / "job-44.d")

    assert as_uid(ATTACKER, plant)
    for job in ("43", "44"):
        line = one_warning(hook(root, "node-end", job))
        assert "writable by others" in line
    assert sorted(os.listdir(root / "job-43.d")) == ["gpu01.start.json"]
    assert os.listdir(base / "attacker" / "elsewhere") == []


def test_a_start_part_holding_1e400_is_an_input_error_not_exit_70(base: Path) -> None:
    """Issue 34 item 11: the part reader refuses a number no counter or index can hold; the
    Epilog writes its end part with a record-incomplete finding and exits 0."""
    root = trusted_root(base)
    ib_sysfs.lay_out(base / "sys")
    (root / "job-45.d").mkdir(mode=0o755)
    (root / "job-45.d" / "gpu01.start.json").write_text(start_part("45"))
    result = hook(root, "node-end", "45")
    assert (result.exit_code, result.output) == (0, "")
    end = json.loads((root / "job-45.d" / "gpu01.end.json").read_text())
    (finding,) = [f for f in end["findings"] if f["kind"] == "record-incomplete"]
    assert "no start counters to compare" in finding["message"]
    assert "out of range" in finding["message"]


# ------------------------------------------------------------------ 2: health --job-records


def health_verdicts(base: Path, root: Path) -> tuple[dict[str, str], str]:
    slurm = base / "slurm"
    slurm.mkdir(exist_ok=True)
    fake_scontrol(slurm)
    done = run_health(slurm, "--json", "--job-records", "--record-dir", str(root))
    rows = json.loads(done.stdout)["nodes"]
    return {row["node"]: row["verdict"] for row in rows}, done.stderr


def forged_end(job: str, node: str, kind: str, about: str) -> str:
    finding = {"kind": kind, "subject": about, "message": "forged", "level": "problem"}
    data = json.loads(node_part("node-end", job, node, ib_sysfs_reading(), []))
    data["findings"] = [finding | {"nodes": [about]}]
    return json.dumps(data)


def test_forged_end_parts_in_a_shared_root_degrade_nothing(base: Path, symlinks: int) -> None:
    """Attack 2: another user's end part naming a drain kind for a node it is not about."""
    root = legacy_root(base)

    def plant() -> None:
        (root / "job-50.d").mkdir(mode=0o777)
        text = forged_end("50", "node0003", "missing-rail", "node0004")
        (root / "job-50.d" / "node0003.end.json").write_text(text)

    assert as_uid(ATTACKER, plant)
    verdicts, warnings = health_verdicts(base, root)
    assert verdicts["node0004"] == verdicts["node0003"] == "healthy"
    assert "writable by others" in warnings


def test_an_end_part_only_degrades_its_own_node_and_only_by_node_end_kinds(base: Path) -> None:
    """Attack 2's checks one at a time, in a trusted root: a part another uid owns is not
    read; a root-owned part's drain kind and its claim about another node are dropped."""
    root = trusted_root(base)
    parts = root / "job-51.d"
    parts.mkdir(mode=0o755)
    (parts / "node0003.end.json").write_text(
        forged_end("51", "node0003", "missing-rail", "node0004")
    )
    errors = forged_end("51", "node0005", "link-errors-during-job", "node0005/mlx5_0/1")
    (parts / "node0005.end.json").write_text(errors.replace('"node0005/mlx5_0/1"]', '"node0008"]'))
    (parts / "node0007.end.json").write_text(
        forged_end("51", "node0007", "link-errors-during-job", "node0007/mlx5_0/1")
    )
    os.chown(parts / "node0007.end.json", ATTACKER, ATTACKER)  # left by an older layout
    verdicts, warnings = health_verdicts(base, root)
    assert verdicts["node0004"] == verdicts["node0003"] == "healthy"
    assert verdicts["node0005"] == "degraded" and verdicts["node0008"] == "healthy"
    assert verdicts["node0007"] == "healthy" and "owned by uid 65534" in warnings


# ------------------------------------------------------------- 3: a record planted before


def test_a_planted_record_is_not_exported_nor_kept_as_the_planters(
    base: Path, symlinks: int
) -> None:
    """Attack 3: a record and exports planted before the job (1777 root) are not exported to
    the victim's tasks; in a trusted root, a file another uid owns (an older layout's) is
    refused by record task and replaced by a root-owned one, not re-owned to the planter."""
    root = legacy_root(base)

    def plant() -> None:
        exports = {"job_id": "60", "variables": [["TOPOGRAPH_FINGERPRINT", "planted"]]}
        head = {"format": "topograph-slurm/record", "version": 1, "part": "exports"}
        (root / "job-60.exports").write_text(json.dumps(head | exports))

    assert as_uid(ATTACKER, plant)
    shown = hook(root, "task", "60")
    assert "planted" not in shown.stdout
    assert "TOPOGRAPH_RECORD_MISSING=1" in shown.stdout

    root.chmod(0o755)  # trusted now, with the planter's file still in it
    os.chown(root / "job-60.exports", ATTACKER, ATTACKER)
    shown = hook(root, "task", "60")
    assert "planted" not in shown.stdout and "owned by uid 65534" in shown.stderr
    from topograph_slurm.app.record import _write, access
    from topograph_slurm.config import Settings
    from topograph_slurm.model.record import JobRecord

    record = JobRecord(job_id="60", restart_count=0, created="", nodes=[])
    settings = Settings(record_dir=str(root))
    _write(settings, root / "job-60.json", record, access(settings, VICTIM))
    assert (root / "job-60.exports").stat().st_uid == 0
    assert (root / "job-60.json").stat().st_uid == 0


# ------------------------------------------------- 4: a directory or link at job-<ID>.d


@pytest.mark.parametrize("command", ["node-start", "node-end"])
def test_a_premade_job_directory_or_link_is_not_written_into(
    base: Path, symlinks: int, command: str
) -> None:
    """Attack 4: whatever stands at job-<ID>.d that the hooks did not make (a link to the
    planter's directory, the planter's own directory) gets nothing written into it."""
    root = trusted_root(base)
    ib_sysfs.lay_out(base / "sys")
    chosen = base / "chosen"
    chosen.mkdir(mode=0o777)
    os.symlink(chosen, root / "job-70.d")
    os.lchown(root / "job-70.d", ATTACKER, ATTACKER)
    (root / "job-71.d").mkdir(mode=0o755)
    os.chown(root / "job-71.d", ATTACKER, ATTACKER)
    assert "not a real directory" in one_warning(hook(root, command, "70"))
    assert "owned by uid 65534" in one_warning(hook(root, command, "71"))
    assert os.listdir(chosen) == [] and os.listdir(root / "job-71.d") == []


def test_a_link_the_jobs_user_puts_in_tasks_is_not_followed_by_root(base: Path) -> None:
    """The job's user owns tasks/: a link there to a file root may read is shown as an
    unreadable part by root's record show, never followed."""
    root = trusted_root(base)
    ib_sysfs.lay_out(base / "sys")
    assert hook(root, "node-start", "72").exit_code == 0
    secret = base / "secret.json"
    secret.write_text(json.dumps({"format": "topograph-slurm/record", "secret": "s3cr3t"}))
    secret.chmod(0o600)
    tasks = root / "job-72.d" / "tasks"
    assert tasks.stat().st_uid == VICTIM
    assert as_uid(VICTIM, lambda: os.symlink(secret, tasks / "task-0.0.json"))
    from topograph_slurm.app.record import read_side
    from topograph_slurm.config import Settings
    from topograph_slurm.model.record import JobRecord
    from topograph_slurm.sources.record import encode

    (root / "job-72.json").write_bytes(
        encode(JobRecord(job_id="72", restart_count=0, created="", nodes=[]))
    )
    _, parts = read_side(Settings(record_dir=str(root)), "72")
    (task,) = [part for part in parts if part.name == "task-0.0"]
    assert "a symbolic link" in task.findings[0].message and "s3cr3t" not in str(parts)


def test_the_tasks_part_goes_only_where_the_jobs_user_owns(base: Path) -> None:
    """record task, as the job's user, writes its part into the tasks/ the Prolog handed it;
    it cannot write into the root-owned job directory itself."""
    root = trusted_root(base)
    ib_sysfs.lay_out(base / "sys")
    assert hook(root, "node-start", "73").exit_code == 0
    import topograph_slurm.app.record_node
    import topograph_slurm.cli.record
    import topograph_slurm.render.record_node  # noqa: F401

    env = {"SLURM_STEP_ID": "0", "SLURM_PROCID": "0"}
    assert as_uid(VICTIM, lambda: hook(root, "task", "73", **env))
    part = root / "job-73.d" / "tasks" / "task-0.0.json"
    assert part.stat().st_uid == VICTIM
    assert not as_uid(VICTIM, lambda: (root / "job-73.d" / "gpu01.end.json").write_text("{}"))


# --------------------------------------------------------------------------- 5: privacy


def test_a_private_record_is_the_jobs_users_alone(base: Path, tmp_path: Path) -> None:
    """Attack 5: with record_private, another user reads neither the record, its exports
    nor the job's part directory; the job's user reads the exports (its tasks do)."""
    root = trusted_root(base)
    ib_sysfs.lay_out(base / "sys")
    config = base / "config.yaml"
    config.write_text("record_private: true\n")
    config.chmod(0o644)
    from topograph_slurm.app.record import _write, access
    from topograph_slurm.config import Settings
    from topograph_slurm.model.record import JobRecord

    settings = Settings(record_dir=str(root), record_private=True)
    record = JobRecord(job_id="80", restart_count=0, created="", nodes=[])
    _write(settings, root / "job-80.json", record, access(settings, VICTIM))
    args = ["--config", str(config), "record", "node-start", "--record-dir", str(root)]
    args += ["--sysfs", str(base / "sys")]
    env = {"SLURM_JOB_ID": "80", "SLURMD_NODENAME": "gpu01", "SLURM_JOB_UID": str(VICTIM)}
    assert CliRunner().invoke(main, args, env=env).exit_code == 0
    for path in ("job-80.json", "job-80.exports", "job-80.d/gpu01.start.json"):
        assert not as_uid(ATTACKER, lambda p=path: (root / p).read_bytes()), path
        assert as_uid(VICTIM, lambda p=path: (root / p).read_bytes()), path
    assert not as_uid(ATTACKER, lambda: os.listdir(root / "job-80.d"))


# ------------------------------------------------------------------------- 6: escaping


def test_record_show_escapes_every_string_of_the_record(base: Path) -> None:
    """Attack 6: ESC, OSC and clear-screen in a record's strings reach no terminal raw."""
    from topograph_slurm.model.record import JobRecord, RecordLayout
    from topograph_slurm.model.result import Finding
    from topograph_slurm.sources.record import encode

    root = trusted_root(base)
    evil = "\x1b]0;owned\x07\x1b[2J"
    record = JobRecord(
        job_id="90",
        restart_count=0,
        created=evil,
        nodes=[],
        fingerprint=evil,
        layout=RecordLayout(4, 1, 4, evil),
        findings=[Finding(evil, evil, evil, evil)],
    )
    (root / "job-90.json").write_bytes(encode(record))
    shown = CliRunner().invoke(
        main, ["--config", os.devnull, "record", "show", "90", "--record-dir", str(root)]
    )
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "\\x1b]0;owned\\x07\\x1b[2J" in shown.stdout


def test_health_escapes_the_why_of_a_finding_no_node_is_judged_by() -> None:
    """Issue 34 item 13: the note's message half was printed raw."""
    from topograph_slurm.render.environment import environment, render

    text = render(
        environment(None),
        "health.txt.j2",
        summary={"nodes": 0, "healthy": 0, "degraded": 0, "drain": 0, "unknown": 0, "changing": 0},
        slurm_asked=True,
        shown=[],
        count=0,
        relabelled="",
        not_in_slurm=[],
        not_per_node=[{"kind": "k", "subject": "s", "why": "HCA\x1b[2J\x07: not a node"}],
        commands=[],
    )
    assert "\x1b" not in text and "\x07" not in text and "HCA\\x1b[2J\\x07" in text


# ---------------------------------------------------------------- the never-fail runner


def test_scontrol_output_that_is_not_utf8_lets_the_job_start(tmp_path: Path) -> None:
    """Issue 34 item 11: Slurm's JSON copies a job name's bytes >= 0x80 unchanged; record
    start decodes it with replacement and writes the record, exit 0."""
    from tests.unit.test_record import INSIDE, TP16, run, setup

    config = setup(tmp_path, INSIDE, TP16)
    out = tmp_path / "bin" / "scontrol.0.out"
    data = json.loads(out.read_text())
    data["jobs"][0]["name"] = "job\udcff"
    out.write_bytes(json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogateescape"))
    assert b"\xff" in out.read_bytes()
    result = run(config, "record", "start", "7")
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    assert json.loads((tmp_path / "records" / "job-7.json").read_text())["nodes"]


def test_a_hung_scontrol_past_the_deadline_is_one_line_and_exit_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook's own deadline (the installed script's timeout is the outer bound)."""
    from topograph_slurm.model import record

    monkeypatch.setitem(record.HOOK_DEADLINES, "start", 1)
    scontrol = tmp_path / "scontrol"
    scontrol.write_text("#!/bin/sh\nexec sleep 30\n")
    scontrol.chmod(0o755)
    config = tmp_path / "config.yaml"
    config.write_text(f"scontrol: {scontrol}\nrecord_dir: {tmp_path / 'records'}\n")
    result = CliRunner().invoke(main, ["--config", str(config), "record", "start", "7"])
    assert result.exit_code == 0, result.output
    assert "deadline of 1s passed" in result.stderr
