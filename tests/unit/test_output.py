"""Behaviour of the writer: atomic, only-on-change, shrink-guarded, locked; node counting."""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topograph_slurm import output
from topograph_slurm.errors import Exit, LockedError, RefusedError
from topograph_slurm.model.summary import FabricSummary
from topograph_slurm.output import (
    OutputError,
    _writer_tag,
    lock_path,
    output_lock,
    unified_diff,
    write_directory,
    write_file,
    write_output,
    write_summary,
    write_topology,
    write_tree,
)
from topograph_slurm.sources.layout import count_nodes
from topograph_slurm.sources.summary import summary_path

TREE_CONF = """\
# topology.conf generated for a 2-tier fat tree
SwitchName=spine01 Switches=leaf[01-02]
SwitchName=leaf01 Nodes=gpu[001-004]   # SU 1
SwitchName=leaf02 Nodes=gpu[005-008],cpu01
"""

BLOCK_CONF = """\
BlockName=block01 Nodes=gpu[001-008]
BlockName=block02 Nodes=gpu[009-016]
BlockSizes=8,16
"""

TOPOLOGY_YAML = """\
---
- topology: fabric
  cluster_default: true
  tree:
    switches:
      - switch: spine01
        children: leaf[01-02]
      - switch: leaf01
        nodes: gpu[001-004]
      - switch: leaf02
        nodes: gpu[005-008]  # four more
- topology: nvl
  block:
    block_sizes:
      - 4
      - 8
    blocks:
      - block: nvl01
        nodes: gpu[001-004]
      - block: nvl02
        nodes: gpu[005-008],gpu[009-010]
- topology: flat
  flat: true
"""


def tree(n: int) -> str:
    """A one-leaf tree topology.conf with ``n`` nodes."""
    return f"SwitchName=leaf01 Nodes=n[0001-{n:04d}]\n"


def temp_files(directory: Path) -> list[Path]:
    return sorted(directory.glob(".*.tmp"))


# --------------------------------------------------------------------------- count_nodes


def test_count_tree_conf() -> None:
    assert count_nodes(TREE_CONF) == 9


def test_count_block_conf() -> None:
    assert count_nodes(BLOCK_CONF) == 16


def test_count_yaml_collects_tree_and_block_nodes_distinctly() -> None:
    # the tree covers gpu[001-008], the blocks gpu[001-010]: 10 distinct names
    assert count_nodes(TOPOLOGY_YAML) == 10


def test_count_conf_keys_are_case_insensitive_and_comments_ignored() -> None:
    text = (
        "switchname=leaf01 nodes=a[1-3]\n"
        "SWITCHNAME=leaf02 NODES=b[1-2] # Nodes=c[1-100]\n"
        "# SwitchName=leaf03 Nodes=d[1-50]\n"
    )
    assert count_nodes(text) == 5


def test_count_conf_overlap_and_continuation() -> None:
    text = "SwitchName=s1 Nodes=n[1-4] \\\n  LinkSpeed=100\nSwitchName=s2 Nodes=n[3-6]\n"
    assert count_nodes(text) == 6


def test_count_neither_format_is_zero() -> None:
    assert count_nodes("") == 0
    assert count_nodes("# only a comment\n") == 0
    assert count_nodes("hello world\n") == 0
    assert count_nodes("{unbalanced: [yaml\n") == 0
    assert count_nodes("SwitchName=spine Switches=leaf[1-2]\n") == 0


def test_count_survives_self_referencing_yaml() -> None:
    assert count_nodes("a: &x [*x, {nodes: 'n[1-2]'}]\n") == 2


@given(st.text())
def test_count_nodes_never_raises(text: str) -> None:
    assert count_nodes(text) >= 0


# --------------------------------------------------------------------------- diff


def test_unified_diff_labels_and_equal() -> None:
    assert unified_diff("a\n", "a\n", "/etc/slurm/topology.conf") == ""
    diff = unified_diff("a\nb\n", "a\nc\n", "/etc/slurm/topology.conf")
    assert diff.splitlines()[:2] == [
        "--- a/etc/slurm/topology.conf",
        "+++ b/etc/slurm/topology.conf",
    ]
    assert "-b\n" in diff and "+c\n" in diff


def test_unified_diff_marks_missing_final_newline() -> None:
    diff = unified_diff("a", "b\n", "t.conf")
    assert "-a\n\\ No newline at end of file\n+b\n" in diff


# --------------------------------------------------------------------------- only on change


def test_new_file_is_written_0644(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    out = write_topology(target, tree(8))
    assert (out.changed, out.written, out.new_nodes, out.old_nodes) == (True, True, 8, 0)
    assert target.read_text() == tree(8)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert temp_files(tmp_path) == []


def test_unchanged_content_keeps_mtime_and_inode(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(8))
    os.utime(target, (1_000_000, 1_000_000))
    before = target.stat()
    out = write_topology(target, tree(8), show_diff=True)
    after = target.stat()
    assert (out.changed, out.written, out.diff) == (False, False, "")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_changed_content_replaces_atomically_keeping_mode(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(8))
    target.chmod(0o640)
    inode = target.stat().st_ino
    out = write_topology(target, tree(9), show_diff=True)
    assert (out.changed, out.written) == (True, True)
    assert target.read_text() == tree(9)
    assert target.stat().st_ino != inode  # renamed into place, not rewritten in place
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert "+SwitchName=leaf01 Nodes=n[0001-0009]" in out.diff
    assert temp_files(tmp_path) == []


def test_show_diff_off_computes_no_diff(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(8))
    assert write_topology(target, tree(9)).diff == ""


def test_symlinked_target_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "repo" / "topology.conf"
    real.parent.mkdir()
    real.write_text(tree(8))
    link = tmp_path / "topology.conf"
    link.symlink_to(real)
    write_topology(link, tree(9))
    assert link.is_symlink()
    assert real.read_text() == tree(9)


OTHER_UID = 54321  # a user that is neither root nor the one running the tests
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def _planted_link(tmp_path: Path, *, link_owner: int = 0, dir_mode: int = 0o755) -> Path:
    """``shared/topology.conf`` -> ``victim`` (a file holding "precious"), as another user
    could plant it in a shared directory."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, dir_mode)
    link = shared / "topology.conf"
    link.symlink_to(victim)
    os.lchown(link, link_owner, link_owner)
    return link


@needs_root
@pytest.mark.parametrize(
    ("link_owner", "dir_mode", "why"),
    [
        (OTHER_UID, 0o755, "the link belongs to another user"),
        (0, 0o777, "writable by others and not sticky"),
    ],
)
def test_a_link_someone_else_could_have_planted_is_not_followed(
    tmp_path: Path, link_owner: int, dir_mode: int, why: str
) -> None:
    link = _planted_link(tmp_path, link_owner=link_owner, dir_mode=dir_mode)
    with pytest.raises(OutputError, match=why):
        write_topology(link, tree(9))
    with pytest.raises(OutputError, match=why):
        write_file(link, tree(9))
    assert (tmp_path / "victim").read_text() == "precious\n"
    assert not (tmp_path / ".victim.lock").exists()


@needs_root
def test_a_link_in_a_directory_of_another_user_is_not_followed(tmp_path: Path) -> None:
    link = _planted_link(tmp_path)
    os.chown(link.parent, OTHER_UID, OTHER_UID)
    with pytest.raises(OutputError, match="its directory belongs to another user"):
        write_topology(link, tree(9))
    assert (tmp_path / "victim").read_text() == "precious\n"


def test_own_links_in_a_sticky_shared_directory_are_followed(tmp_path: Path) -> None:
    link = _planted_link(tmp_path, link_owner=os.geteuid(), dir_mode=0o1777)
    assert write_topology(link, tree(9)).written
    assert (tmp_path / "victim").read_text() == tree(9)


def test_the_lock_guards_the_real_file_not_the_link(tmp_path: Path) -> None:
    real = tmp_path / "repo" / "topology.conf"
    real.parent.mkdir()
    link = tmp_path / "topology.conf"
    link.symlink_to(real)
    write_topology(link, tree(9))
    assert lock_path(real).is_file()
    assert not lock_path(link).exists()


def test_a_symlink_at_the_lock_path_is_refused_and_its_target_not_created(
    tmp_path: Path,
) -> None:
    target = tmp_path / "topology.conf"
    lock_path(target).symlink_to(tmp_path / "created-by-root")
    with pytest.raises(OutputError, match="symbolic link"):
        write_topology(target, tree(9))
    assert not (tmp_path / "created-by-root").exists()
    assert not target.exists()


def test_a_fifo_at_the_lock_path_is_refused_without_hanging(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    os.mkfifo(lock_path(target))
    with pytest.raises(OutputError, match="not a regular file"):
        write_topology(target, tree(9))
    assert not target.exists()


def test_stale_temp_files_of_a_killed_run_are_removed_under_the_lock(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    stale = [tmp_path / ".topology.conf.abcd1234.tmp", tmp_path / ".topology.conf.zz_9yx8w.tmp"]
    kept = [tmp_path / ".other.conf.abcd1234.tmp", tmp_path / "notes.tmp"]
    for path in stale + kept:
        path.write_text("half a file")
    assert write_topology(target, tree(9)).written
    assert not any(path.exists() for path in stale)
    assert all(path.exists() for path in kept)
    # unchanged content still cleans up (the next cron run after a kill has nothing to write)
    stale[0].write_text("half a file")
    assert not write_topology(target, tree(9)).written
    assert not stale[0].exists()


def test_stale_temp_files_of_a_killed_summary_write_are_removed(tmp_path: Path) -> None:
    """A kill -9 while the kept summary was written left its temp file for ever."""
    target, state = tmp_path / "topology.conf", tmp_path / "state"
    state.mkdir()
    name = summary_path(target, state).name
    stale = state / f".{name}.abcd1234.tmp"
    kept = state / f".{name}.abcd1234.tmp.other"
    for path in (stale, kept):
        path.write_text("half a summary")
    write_summary(target, FabricSummary("sim:demo"), state_dir=state)
    assert not stale.exists() and kept.exists()


@needs_root
def test_another_users_temp_file_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    theirs = tmp_path / ".topology.conf.abcd1234.tmp"
    theirs.write_text("theirs")
    os.chown(theirs, OTHER_UID, OTHER_UID)
    write_topology(target, tree(9))
    assert theirs.read_text() == "theirs"


# --------------------------------------------------------------------------- check mode


def test_check_never_writes_and_returns_diff(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(8))
    before = target.stat()
    out = write_topology(target, tree(4), check=True)  # would also trip the shrink guard
    assert (out.changed, out.written) == (True, False)
    assert out.diff.startswith("--- a/")
    assert "-SwitchName=leaf01 Nodes=n[0001-0008]" in out.diff
    assert target.read_text() == tree(8)
    assert target.stat().st_mtime_ns == before.st_mtime_ns
    assert not lock_path(target).exists()  # a check takes no lock


def test_check_on_missing_file_diffs_against_empty(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    out = write_topology(target, tree(2), check=True)
    assert out.changed and not out.written
    assert "+SwitchName=leaf01" in out.diff
    assert not target.exists()


def test_check_current_file_is_unchanged(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(2))
    out = write_topology(target, tree(2), check=True)
    assert (out.changed, out.diff) == (False, "")


# --------------------------------------------------------------------------- shrink guard


def test_shrink_over_limit_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(512))
    with pytest.raises(RefusedError) as info:
        write_topology(target, tree(448))
    message = str(info.value)
    assert message == (
        f"refusing to replace {target}: node count would drop from 512 to 448 "
        "(-12.5%, limit 10%); use --force"
    )
    assert "\n" not in message
    assert info.value.exit_code == Exit.REFUSED
    assert target.read_text() == tree(512)
    assert temp_files(tmp_path) == []


def test_shrink_with_force_is_written(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(512))
    out = write_topology(target, tree(448), force=True)
    assert out.written and (out.old_nodes, out.new_nodes) == (512, 448)
    assert target.read_text() == tree(448)


def test_shrink_within_limit_is_written(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(100))
    assert write_topology(target, tree(90)).written  # exactly 10%: allowed
    assert target.read_text() == tree(90)


def test_shrink_limit_is_configurable(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(100))
    with pytest.raises(RefusedError, match="limit 5%"):
        write_topology(target, tree(94), shrink_limit=0.05)
    assert write_topology(target, tree(94), shrink_limit=0.5).written


def test_growth_is_always_allowed(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(8))
    assert write_topology(target, tree(800)).written


def test_empty_topology_is_refused_even_with_generous_limit(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(TREE_CONF)
    with pytest.raises(RefusedError, match="no nodes"):
        write_topology(target, "# no fabric found\n", shrink_limit=1.0)
    assert target.read_text() == TREE_CONF
    assert write_topology(target, "# no fabric found\n", force=True).written


def test_guard_uses_yaml_counts_across_formats(tmp_path: Path) -> None:
    target = tmp_path / "topology.yaml"
    target.write_text(TOPOLOGY_YAML)  # 10 nodes
    with pytest.raises(RefusedError, match="from 10 to 8"):
        write_topology(target, tree(8))


def test_custom_counter_is_used(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RefusedError):
        write_topology(target, "new", count=lambda text: 10 if text == "old" else 1)


def test_negative_shrink_limit_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_topology(tmp_path / "t.conf", tree(1), shrink_limit=-0.1)


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize("victim", ["fsync", "replace"])
def test_failure_during_write_keeps_old_file_and_cleans_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, victim: str
) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(8))
    inode = target.stat().st_ino

    def boom(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, victim, boom)
    with pytest.raises(OutputError) as info:
        write_topology(target, tree(9))
    monkeypatch.undo()
    assert str(info.value) == f"cannot write {target}: No space left on device"
    assert target.read_text() == tree(8)
    assert target.stat().st_ino == inode
    assert temp_files(tmp_path) == []


def test_interrupt_during_write_cleans_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(8))

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_topology(target, tree(9))
    monkeypatch.undo()
    assert target.read_text() == tree(8)
    assert temp_files(tmp_path) == []


def test_missing_parent_directory_is_a_clean_error(tmp_path: Path) -> None:
    target = tmp_path / "nowhere" / "topology.conf"
    with pytest.raises(OutputError, match="does not exist") as info:
        write_topology(target, tree(2))
    assert info.value.exit_code == Exit.OUTPUT
    assert not target.parent.exists()


def test_parent_is_a_file_is_a_clean_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError):
        write_topology(tmp_path / "file" / "topology.conf", tree(2))


def test_target_is_a_directory_is_a_clean_error(tmp_path: Path) -> None:
    (tmp_path / "topology.conf").mkdir()
    with pytest.raises(OutputError, match=r"cannot write .*topology\.conf: it is a directory"):
        write_topology(tmp_path / "topology.conf", tree(2))


def test_permission_denied_is_a_clean_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # root ignores directory modes, so simulate what mkstemp meets in a read-only /etc/slurm
    target = tmp_path / "topology.conf"
    target.write_text(tree(8))

    def denied(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(OutputError, match=r"cannot write .*: Permission denied$"):
        write_topology(target, tree(9))
    assert target.read_text() == tree(8)


def in_unprivileged_child(action: Callable[[], str]) -> str:
    """Run ``action`` in a forked child that, under root, drops to ``nobody``; return its text.

    Root ignores directory permission bits, so a real read-only directory needs a real user.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read_end)
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            text = action()
        except BaseException as exc:
            text = f"unexpected {type(exc).__name__}: {exc}"
        os.write(write_end, text.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        result = pipe.read().decode()
    os.waitpid(pid, 0)
    return result


@pytest.mark.parametrize("lock_exists", [True, False])
def test_read_only_directory_is_a_clean_error(lock_exists: bool) -> None:
    base = Path(tempfile.mkdtemp(prefix="topograph-ro-"))  # pytest's tmp_path is root-only
    base.chmod(0o755)
    directory = base / "slurm"
    directory.mkdir()
    try:
        target = directory / "topology.conf"
        target.write_text(tree(8))
        if lock_exists:
            lock_path(target).touch()
        directory.chmod(0o555)

        def attempt() -> str:
            try:
                write_topology(target, tree(9))
            except OutputError as exc:
                return f"OutputError: {exc}"
            return "written"

        result = in_unprivileged_child(attempt)
        assert result.startswith("OutputError: cannot ")
        assert result.endswith(": Permission denied")
        assert "\n" not in result
        assert target.read_text() == tree(8)
        assert sorted(p.name for p in directory.iterdir()) == sorted(
            ["topology.conf"] + ([".topology.conf.lock"] if lock_exists else [])
        )
    finally:
        directory.chmod(0o755)
        shutil.rmtree(base)


# --------------------------------------------------------------------------- lock

HOLDER = """
import fcntl, sys
handle = open(sys.argv[1], "a")
fcntl.flock(handle, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


class LockHolder:
    """Another process holding the flock, released by closing its stdin."""

    def __init__(self, lock: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(lock)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == "locked\n"

    def release(self) -> None:
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def test_lock_held_elsewhere_raises_locked_after_timeout(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    target.write_text(tree(8))
    holder = LockHolder(lock_path(target))
    try:
        start = time.monotonic()
        with pytest.raises(LockedError) as info:
            write_topology(target, tree(9), lock_timeout=0.3)
        assert time.monotonic() - start >= 0.3
    finally:
        holder.release()
    assert f"another topograph-slurm run holds {tmp_path}/.topology.conf.lock" in str(info.value)
    assert info.value.exit_code == Exit.LOCKED
    assert target.read_text() == tree(8)
    assert write_topology(target, tree(9), lock_timeout=1).written  # free again


def test_lock_waits_for_a_short_holder(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    holder = LockHolder(lock_path(target))
    try:
        assert holder.proc.stdin is not None
        timer = threading.Timer(0.3, holder.proc.stdin.close)
        timer.start()
        assert write_topology(target, tree(2), lock_timeout=10).written
        timer.join()
    finally:
        holder.release()


def test_output_lock_is_reentrant_and_excludes_other_processes(tmp_path: Path) -> None:
    target = tmp_path / "topology.conf"
    with output_lock(target, timeout=1) as lock:
        assert lock == tmp_path / ".topology.conf.lock"
        assert write_topology(target, tree(2), lock_timeout=0).written  # same thread: re-entry
        probe = subprocess.run(
            [sys.executable, "-c", PROBE, str(lock)], capture_output=True, text=True, timeout=10
        )
        assert probe.stdout == "busy\n"
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, str(lock)], capture_output=True, text=True, timeout=10
    )
    assert probe.stdout == "free\n"
    assert lock.exists()  # never unlinked: that would break flock exclusion


PROBE = """
import fcntl, sys
handle = open(sys.argv[1], "a")
try:
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("busy")
"""


# --------------------------------------------------------------------------- write_tree


def test_write_tree_creates_directory_and_writes_only_changes(tmp_path: Path) -> None:
    directory = tmp_path / "filters"
    files = {"job_submit.lua": "-- v1\n", "tpsize.c": "int x;\n"}
    first = write_tree(directory, files)
    assert [(o.path.name, o.written) for o in first] == [
        ("job_submit.lua", True),
        ("tpsize.c", True),
    ]
    assert stat.S_IMODE((directory / "tpsize.c").stat().st_mode) == 0o644
    inode = (directory / "tpsize.c").stat().st_ino
    second = write_tree(directory, {**files, "job_submit.lua": "-- v2\n"}, show_diff=True)
    assert [(o.path.name, o.written) for o in second] == [
        ("job_submit.lua", True),
        ("tpsize.c", False),
    ]
    assert "+-- v2" in second[0].diff
    assert (directory / "tpsize.c").stat().st_ino == inode
    assert (directory / "job_submit.lua").read_text() == "-- v2\n"
    assert temp_files(directory) == []


def test_write_tree_has_no_shrink_guard(tmp_path: Path) -> None:
    directory = tmp_path / "filters"
    write_tree(directory, {"topo.conf": tree(100)})
    assert write_tree(directory, {"topo.conf": ""})[0].written


def test_write_tree_check_writes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "filters"
    outcomes = write_tree(directory, {"cli_filter.lua": "-- x\n"}, check=True)
    assert outcomes[0].changed and not outcomes[0].written
    assert "+-- x" in outcomes[0].diff
    assert not directory.exists()


def test_write_tree_rejects_paths_as_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_tree(tmp_path, {"../escape.lua": "x"})
    assert not (tmp_path.parent / "escape.lua").exists()


def test_write_tree_lock_held_elsewhere(tmp_path: Path) -> None:
    directory = tmp_path / "filters"
    directory.mkdir()
    holder = LockHolder(lock_path(directory))
    try:
        with pytest.raises(LockedError):
            write_tree(directory, {"a.lua": "x"}, lock_timeout=0.1)
    finally:
        holder.release()
    assert not (directory / "a.lua").exists()


# --------------------------------------------------------------------------- round trip


@settings(max_examples=60, deadline=None)
@given(st.text())
def test_write_then_read_gives_exact_bytes(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "topology.conf"
        target.write_bytes(b"stale\r\n")
        assert write_topology(target, text, force=True).written == (text != "stale\r\n")
        assert target.read_bytes() == text.encode("utf-8")
        again = write_topology(target, text)
        assert not again.changed and not again.written
        assert temp_files(Path(tmp)) == []


def _drain(fifo: Path, into: list[bytes]) -> threading.Thread:
    reader = threading.Thread(target=lambda: into.append(fifo.read_bytes()))
    reader.start()
    return reader


def test_fifo_target_is_written_through_and_stays_a_fifo(tmp_path: Path) -> None:
    """``-o /dev/null`` or a FIFO: a rename over it would put a regular file in its place (it
    did to /dev/null once). A FIFO stands in for the device, which tests must not risk."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = _drain(fifo, received)
    outcome = write_topology(fifo, TREE_CONF)
    reader.join(10)
    assert received == [TREE_CONF.encode()]
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert (outcome.changed, outcome.written) == (True, True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temp file, no lock


def test_check_against_a_fifo_is_a_clean_error(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="not a regular file"):
        write_topology(fifo, TREE_CONF, check=True)


@needs_root
def test_generate_through_a_planted_link_is_one_line_and_exit_9(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from topograph_slurm.cli.main import main

    link = _planted_link(tmp_path, link_owner=OTHER_UID)
    result = CliRunner().invoke(
        main, ["--config", os.devnull, "generate", "--sim", "demo", "-o", str(link)]
    )
    assert result.exit_code == Exit.OUTPUT, result.output
    assert result.stderr.count("\n") == 1 and "could have been planted" in result.stderr
    assert (tmp_path / "victim").read_text() == "precious\n"


def test_write_file_writes_through_a_device_instead_of_replacing_it(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_file(fifo, "the report\n")
    reader.join(timeout=10)
    assert got == [b"the report\n"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # still the FIFO, not a regular file


def test_a_report_to_a_fifo_is_written_through(tmp_path: Path) -> None:
    """``--report /dev/stdout`` or a FIFO: written to, never replaced by a regular file."""
    from click.testing import CliRunner

    from topograph_slurm.cli.main import main

    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    result = CliRunner().invoke(
        main, ["--config", os.devnull, "generate", "--sim", "demo", "--report", str(fifo)]
    )
    reader.join(timeout=10)
    assert result.exit_code == 0, result.output
    assert got and b"topograph-slurm report" in got[0]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


# --------------------------------------------------------------------------- write_output


@pytest.mark.parametrize("name", ["out/", "out/.", "out/..", "/", "", "."])
def test_write_output_refuses_a_directory_name(tmp_path: Path, name: str) -> None:
    """``Path('x/')`` drops the slash: the writer is handed the text as typed."""
    path = name if name in ("/", "", ".") else f"{tmp_path}/{name}"
    with pytest.raises(OutputError, match="names a directory"):
        write_output(path, "x\n", state_dir=tmp_path / "state")
    assert not (tmp_path / "out").exists()


def test_write_output_refuses_an_existing_directory(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    for check in (False, True):
        with pytest.raises(OutputError, match="it is a directory"):
            write_output(tmp_path / "out", "x\n", state_dir=tmp_path / "state", check=check)
    assert list((tmp_path / "out").iterdir()) == []


def test_write_output_locks_in_the_state_dir_and_removes_a_free_old_lock(tmp_path: Path) -> None:
    target, state = tmp_path / "gres.conf", tmp_path / "state"
    (tmp_path / ".gres.conf.lock").write_text("")
    assert write_output(target, "x\n", state_dir=state).written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gres.conf", "state"]
    assert [p.suffix for p in state.iterdir()] == [".lock"]
    assert not write_output(target, "x\n", state_dir=state).written  # only on change


def test_an_old_lock_a_run_still_holds_is_left(tmp_path: Path) -> None:
    target, old = tmp_path / "gres.conf", tmp_path / ".gres.conf.lock"
    with output_lock(target):  # an older release's run, its lock beside the target
        assert write_output(target, "x\n", state_dir=tmp_path / "state").written
        assert old.exists()


# --------------------------------------------------------------------------- leftovers


def _temp(directory: Path, name: str, *, host: str | None = None, pid: int, age: float = 0) -> Path:
    """A temp file as _atomic_replace names it, for *host* (default: this one) and *pid*."""
    mine = _writer_tag().split("-")[0]
    path = directory / f".{name}.{host or mine}-{pid}.abcd_123.tmp"
    path.write_text("half a file")
    if age:
        then = time.time() - age
        os.utime(path, (then, then))
    return path


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_later_write_removes_temps_whose_writer_is_gone(tmp_path: Path) -> None:
    dead = _temp(tmp_path, "a1.end.json", pid=_dead_pid())
    old_elsewhere = _temp(tmp_path, "a2.end.json", host="0badc0de", pid=1, age=7200)
    live = _temp(tmp_path, "a3.end.json", pid=os.getppid())
    fresh_elsewhere = _temp(tmp_path, "a4.end.json", host="0badc0de", pid=1)
    not_ours = tmp_path / ".a5.end.json.abcd_123.tmp.keep"
    not_ours.write_text("admin's")
    write_file(tmp_path / "a6.end.json", "{}\n")
    assert not dead.exists() and not old_elsewhere.exists()
    assert live.exists() and fresh_elsewhere.exists() and not_ours.exists()


def test_a_link_named_as_a_temp_is_left(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / f".x.{_writer_tag().split('-')[0]}-{_dead_pid()}.abcd_123.tmp"
    link.symlink_to(victim)
    write_file(tmp_path / "x", "new\n")
    assert link.is_symlink() and victim.read_text() == "precious\n"


@needs_root
def test_another_users_temp_with_a_dead_writer_is_left(tmp_path: Path) -> None:
    theirs = _temp(tmp_path, "x", pid=_dead_pid(), age=7200)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    write_file(tmp_path / "x", "new\n")
    assert theirs.exists()


def test_a_directory_tree_is_made_durable_by_one_sync_not_one_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One fsync per file cost pools --out 15.9 s for 24,578 files and a 16k snapshot 215 s."""
    calls: list[str] = []
    real_fsync, real_syncfs = os.fsync, output._syncfs
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append("fsync") or real_fsync(fd))
    monkeypatch.setattr(output, "_syncfs", lambda fd: calls.append("syncfs") or real_syncfs(fd))
    files = {f"nodes/n{i:03d}/topo.txt": f"{i}\n" for i in range(200)}
    write_directory(tmp_path / "snap", files, replaceable=lambda _: True)
    assert calls.count("syncfs") == 1 and calls.count("fsync") <= 1  # the parent directory
    assert (tmp_path / "snap" / "nodes" / "n199" / "topo.txt").read_text() == "199\n"


def test_write_directory_locks_in_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    write_directory(tmp_path / "snap", {"a": "1\n"}, replaceable=lambda _: True, state_dir=state)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap", "state"]
    fd = os.open(lock_path(tmp_path / "snap", state), os.O_RDONLY)  # another run's hold
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(LockedError):
            write_directory(
                tmp_path / "snap", {"a": "2\n"}, replaceable=lambda _: True, state_dir=state,
                lock_timeout=0,
            )  # fmt: skip
    finally:
        os.close(fd)
    assert (tmp_path / "snap" / "a").read_text() == "1\n"


def test_write_directory_refuses_the_root(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="refusing to replace /"):
        write_directory(Path("/"), {"a": "1\n"}, replaceable=lambda _: True)
