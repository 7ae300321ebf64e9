"""generate's state directory (issue 24 item 5): the kept summary and the lock live in
``--state-dir`` (config ``state_dir``), never beside the target that sites copy to every node;
state an older release kept beside the target moves there once; an unwritable one is exit 9
with nothing written."""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.generate import generate_sim
from topograph_slurm import config
from topograph_slurm.cli.main import main
from topograph_slurm.config import Settings, state_dir
from topograph_slurm.errors import Exit
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.sources.fabric_index import index_path
from topograph_slurm.sources.summary import decode, legacy_summary_path, state_file, summary_path


def _generate(out: Path, spec: str, *args: str) -> tuple[int, str, dict]:
    """The report outside the target's directory, which must hold the target alone."""
    return generate_sim(out, spec, *args, report=out.parent.parent / "report.json")


@pytest.fixture
def etc(tmp_path: Path) -> Path:
    """The directory sites rsync to every node."""
    (tmp_path / "etc").mkdir()
    return tmp_path / "etc"


def test_nothing_but_the_target_sits_beside_it(tmp_path: Path, etc: Path) -> None:
    state = tmp_path / "state"
    out, other = etc / "topology.conf", tmp_path / "test" / "topology.conf"
    other.parent.mkdir()
    for target in (out, other):
        code, _, _ = _generate(target, "nodes=16,su=8", "--state-dir", str(state))
        assert code == Exit.OK
    assert [p.name for p in etc.iterdir()] == ["topology.conf"]
    assert [p.name for p in other.parent.iterdir()] == ["topology.conf"]
    kept = sorted(p.name for p in state.iterdir())
    report = state_file(state, tmp_path / "report.json", ".lock").name  # --report's own lock
    index = index_path(state, f"sim:{'nodes=16,su=8'}")  # one per source, not per target
    assert len(kept) == 7 and kept == sorted(
        [
            report,
            index.name,
            state_file(state, index, ".lock").name,
            *(
                state_file(state, target, suffix).name
                for target in (out, other)
                for suffix in (".fabric.json", ".lock")
            ),
        ]
    )  # one target's state never overwrites the other's
    assert all(name.startswith(("topology.conf-", index.name)) for name in kept if name != report)


def test_the_default_is_var_lib_for_root_and_xdg_for_a_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, etc: Path
) -> None:
    monkeypatch.setattr(config.os, "geteuid", lambda: 0)
    assert state_dir(Settings()) == config.ROOT_STATE_DIR
    monkeypatch.setattr(config.os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir(Settings()) == tmp_path / "xdg" / "topograph-slurm"
    monkeypatch.setenv("XDG_STATE_HOME", "relative")  # the XDG rule: ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert state_dir(Settings()) == tmp_path / "home" / ".local" / "state" / "topograph-slurm"
    assert state_dir(Settings(state_dir=str(etc))) == etc
    monkeypatch.undo()
    config_file = tmp_path / "config.yaml"
    config_file.write_text(f"state_dir: {tmp_path / 'from-config'}\n")
    result = CliRunner().invoke(
        main,
        ["--config", str(config_file), "generate", "--sim", "demo", "-o", str(etc / "t.conf")],
    )
    assert result.exit_code == Exit.OK and (tmp_path / "from-config").is_dir()


def test_the_default_dir_is_created_0755_as_root(etc: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("root's default; a user's is 0700 (next test)")
    assert _generate(etc / "topology.conf", "demo")[0] == Exit.OK
    assert stat.S_IMODE(state_dir(Settings()).stat().st_mode) == 0o755


def test_a_users_state_dir_is_created_0700(tmp_path: Path, etc: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("needs a user: root's is 0755")
    assert _generate(etc / "topology.conf", "demo")[0] == Exit.OK
    assert stat.S_IMODE(state_dir(Settings()).stat().st_mode) == 0o700


@pytest.mark.parametrize("bad", ["a-file", "a-file/below"])
def test_an_unusable_state_dir_is_one_line_exit_9_nothing_written(
    tmp_path: Path, etc: Path, bad: str
) -> None:
    (tmp_path / "a-file").write_text("not a directory\n")
    out = etc / "topology.conf"
    code, err, _ = _generate(out, "demo", "--state-dir", str(tmp_path / bad))
    assert code == Exit.OUTPUT and err.count("\n") == 1
    assert err.startswith("topograph-slurm: error: ") and "state directory" in err
    assert list(etc.iterdir()) == []


def test_an_unwritable_state_dir_is_exit_9(tmp_path: Path, etc: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes through a directory's mode bits")
    state = tmp_path / "state"
    state.mkdir(mode=0o500)
    code, err, _ = _generate(etc / "topology.conf", "demo", "--state-dir", str(state))
    assert code == Exit.OUTPUT and "is not writable" in err and list(etc.iterdir()) == []


def _legacy_run(out: Path, spec: str, state: Path) -> bytes:
    """Leave the state an older release kept beside *out*: its summary and lock file."""
    assert _generate(out, spec, "--state-dir", str(state))[0] == Exit.OK
    kept = summary_path(out, state).read_bytes()
    shutil.move(summary_path(out, state), legacy_summary_path(out))
    state_file(state, out, ".lock").unlink()
    (out.parent / f".{out.name}.lock").touch()
    return kept


def test_state_beside_the_target_moves_once_and_keeps_working(tmp_path: Path, etc: Path) -> None:
    out, state = etc / "topology.conf", tmp_path / "state"
    kept = _legacy_run(out, "nodes=16,su=8", state)
    code, _, report = _generate(out, "nodes=14,su=8", "--state-dir", str(state), "--check")
    assert code == Exit.OK  # --check reads the old place, moves nothing
    assert sorted(p.name for p in etc.iterdir()) == sorted(
        [".topology.conf.fabric.json", ".topology.conf.lock", "topology.conf"]
    )
    code, err, report = _generate(out, "nodes=14,su=8", "--state-dir", str(state))
    assert code == Exit.OK
    moved = [line for line in err.splitlines() if "moved the state" in line]
    assert moved == [
        f"{out}: moved the state kept beside it into {state}: .topology.conf.fabric.json as "
        f"{summary_path(out, state).name}; removed .topology.conf.lock"
    ]
    assert [p.name for p in etc.iterdir()] == ["topology.conf"]
    kinds = [f["kind"] for f in report["findings"]]
    assert kinds.count(FindingKind.KEPT_MISSING) == 2  # the moved summary gave the places
    now = decode(summary_path(out, state).read_bytes(), "kept")
    assert now.nodes["gpu0016"].kept and decode(kept, "old").nodes["gpu0016"].leaf
    code, err, _ = _generate(out, "nodes=14,su=8", "--state-dir", str(state))
    assert code == Exit.OK and "moved the state" not in err  # once


def test_a_held_old_lock_stays_until_it_is_free(tmp_path: Path, etc: Path) -> None:
    out, state = etc / "topology.conf", tmp_path / "state"
    _legacy_run(out, "demo", state)
    old_lock = etc / ".topology.conf.lock"
    fd = os.open(old_lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # an older release's run is under way
        code, err, _ = _generate(out, "demo", "--state-dir", str(state))
        assert code == Exit.OK and old_lock.exists() and "removed" not in err
    finally:
        os.close(fd)
    code, err, _ = _generate(out, "demo", "--state-dir", str(state))
    assert code == Exit.OK and not old_lock.exists()
    assert err.startswith(f"{out}: moved the state kept beside it into {state}: removed ")


def test_a_device_output_needs_no_state_dir(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = CliRunner().invoke(
        main,
        [
            "--config",
            os.devnull,
            "generate",
            "--sim",
            "demo",
            "-o",
            os.devnull,
            "--state-dir",
            str(tmp_path / "a-file" / "below"),
        ],
    )
    assert result.exit_code == Exit.OK  # nothing kept for /dev/null, so no state dir asked


def test_state_moves_across_file_systems(tmp_path: Path, etc: Path) -> None:
    """A state dir on another file system (rename fails with EXDEV): written, then removed."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs a second file system at /dev/shm")
    out = etc / "topology.conf"
    state = Path(tempfile.mkdtemp(dir=shm)) / "state"
    try:
        _legacy_run(out, "nodes=16,su=8", state)
        code, err, _ = _generate(out, "nodes=16,su=8", "--state-dir", str(state))
        assert code == Exit.OK and "moved the state" in err
        assert [p.name for p in etc.iterdir()] == ["topology.conf"]
        assert decode(summary_path(out, state).read_bytes(), "moved").nodes
    finally:
        shutil.rmtree(state.parent)
