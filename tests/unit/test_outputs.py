"""Every command's ``-o``/``--out-dir``/``--metrics`` through the one guarded writer, end to end:
a directory's name is refused (``DIR/`` used to make a *file* DIR), one ``.prom`` rule, locks
in the state directory (not beside the target), links planted anywhere on the path refused,
pools' directory replaced only when it holds nothing but what its pools.json lists, and what
a run killed with SIGKILL inside a write left behind removed by the next run."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support import ib_sysfs
from tests.support.killed_write import kill_inside
from topograph_slurm.cli.main import main
from topograph_slurm.config import Settings, state_dir
from topograph_slurm.errors import Exit

REAL = Path(__file__).parents[1] / "fixtures" / "real"
TOPO = REAL / "nvidia-smi-topo" / "h100-8gpu-sxm-ht-nonic-stas00.txt"
OTHER_UID = 54321  # neither root nor the user running the tests
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")

POOLS = ["pools", "--sim", "nodes=16,gpus=8,rails=2,su=8", "--nodes", "gpu[0001-0016]"]
POOLS_SIZE = ["--prefill", "2x8", "--decode", "1x16"]


def run(*args: str, config: str = os.devnull) -> Result:
    return CliRunner().invoke(main, ["--config", config, *args])


def gres(target: str, *more: str) -> list[str]:
    return ["gres", "--topo-matrix", str(TOPO), "--nodes", "gpu[1-2]", "-o", target, *more]


def experts(tmp_path: Path, target: str) -> list[str]:
    loads = tmp_path / "loads.json"
    loads.write_text(json.dumps([[10, 20, 30, 40, 50, 60, 70, 80]]))
    sim = ["--sim", "nodes=2,gpus=4", "--nodes", "gpu[0001-0002]"]
    return ["experts", *sim, "--loads", str(loads), "--replicas", "8", "-o", target]


def draw(_tmp_path: Path, target: str) -> list[str]:
    return ["draw", "--sim", "nodes=4,gpus=4", "--format", "svg", "-o", target]


def report(_tmp_path: Path, target: str) -> list[str]:
    return ["generate", "--sim", "nodes=4", "--slurm-nodes", "all", "--report", target]


COMMANDS: dict[str, Callable[[Path, str], list[str]]] = {
    "gres -o": lambda _t, target: gres(target),
    "experts -o": experts,
    "draw -o": draw,
    "generate --report": report,
}


def one_error(result: Result, code: int, fragment: str) -> None:
    assert result.exit_code == code, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("topograph-slurm:")]
    assert len(errors) == 1 and fragment in errors[0], result.stderr
    assert result.stderr.strip().splitlines()[-1] == errors[0]


def siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}"))


# --------------------------------------------------------------------------- directories


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("suffix", ["/", "/.", "/.."])
def test_a_directory_name_is_refused_and_nothing_made(
    tmp_path: Path, command: str, suffix: str
) -> None:
    """``gres -o /etc/slurm/`` on a host without /etc/slurm made a *file* /etc/slurm."""
    target = tmp_path / "slurm"
    result = run(*COMMANDS[command](tmp_path, f"{target}{suffix}"))
    one_error(result, Exit.USAGE, "must name a file, not a directory")
    assert not target.exists() and result.stdout == ""


@pytest.mark.parametrize("command", COMMANDS)
def test_the_root_directory_is_refused(tmp_path: Path, command: str) -> None:
    one_error(run(*COMMANDS[command](tmp_path, "/")), Exit.USAGE, "not a directory")


@pytest.mark.parametrize("command", COMMANDS)
def test_an_existing_directory_is_refused_and_left_alone(tmp_path: Path, command: str) -> None:
    target = tmp_path / "slurm"
    target.mkdir()
    (target / "slurm.conf").write_text("ClusterName=x\n")
    one_error(run(*COMMANDS[command](tmp_path, str(target))), Exit.OUTPUT, str(target))
    assert [p.name for p in target.iterdir()] == ["slurm.conf"]


@pytest.mark.parametrize("command", COMMANDS)
def test_written_once_then_unchanged(tmp_path: Path, command: str) -> None:
    target = tmp_path / "out.txt"
    assert run(*COMMANDS[command](tmp_path, str(target))).exit_code in (Exit.OK, Exit.DIFFERS)
    before = target.stat()
    result = run(*COMMANDS[command](tmp_path, str(target)))
    assert result.exit_code in (Exit.OK, Exit.DIFFERS), result.output
    assert target.stat().st_mtime_ns == before.st_mtime_ns and target.stat().st_ino == before.st_ino
    assert siblings(target) == []


@needs_root
@pytest.mark.parametrize("command", COMMANDS)
def test_a_link_planted_above_the_file_is_not_followed(tmp_path: Path, command: str) -> None:
    """Another user's link in a directory of the path (``shared/etc -> /victim``) would make
    root write where that user chose; the last component is not the only one checked."""
    victim = tmp_path / "victim"
    victim.mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    (shared / "etc").symlink_to(victim)
    os.lchown(shared / "etc", OTHER_UID, OTHER_UID)
    result = run(*COMMANDS[command](tmp_path, str(shared / "etc" / "out.txt")))
    one_error(result, Exit.OUTPUT, "could have been planted")
    assert list(victim.iterdir()) == []


@needs_root
def test_pools_out_through_a_link_planted_above_it_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    (shared / "etc").symlink_to(victim)
    os.lchown(shared / "etc", OTHER_UID, OTHER_UID)
    one_error(pools_out(shared / "etc" / "serve"), Exit.OUTPUT, "could have been planted")
    assert list(victim.iterdir()) == []


def test_gres_keeps_its_lock_in_the_state_directory_and_removes_the_old_one(
    tmp_path: Path,
) -> None:
    """``gres -o /etc/slurm/gres.conf`` left ``/etc/slurm/.gres.conf.lock`` for good, and
    sites rsync /etc/slurm to every node."""
    target = tmp_path / "gres.conf"
    (tmp_path / ".gres.conf.lock").write_text("")  # an older release's
    assert run(*gres(str(target))).exit_code == Exit.OK
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gres.conf"]
    locks = list(state_dir(Settings()).glob("gres.conf-*.lock"))
    assert len(locks) == 1


def test_gres_check_and_diff_as_generate_has_them(tmp_path: Path) -> None:
    target = tmp_path / "gres.conf"
    first = run(*gres(str(target), "--check"))
    assert first.exit_code == Exit.DIFFERS and "+NodeName=gpu[1-2]" in first.stdout
    assert not target.exists()
    shown = run(*gres(str(target), "--diff"))
    assert shown.exit_code == Exit.OK and "+NodeName=gpu[1-2]" in shown.stdout
    assert "written" in shown.stderr and target.exists()
    again = run(*gres(str(target), "--check"))
    assert (again.exit_code, again.stdout) == (Exit.OK, "") and "up to date" in again.stderr


def test_gres_dash_is_stdout(tmp_path: Path) -> None:
    result = run(*gres("-"))
    assert result.exit_code == Exit.OK and result.stdout.startswith("# gres.conf")
    assert not Path("-").exists()


def test_units_keep_their_lock_in_the_state_directory(tmp_path: Path) -> None:
    """--binary outside /tmp: the default (this Python's script) may live in a venv under
    /tmp, which units refuses (the service's PrivateTmp hides it)."""
    directory = tmp_path / "systemd"
    result = run("units", "--out-dir", str(directory), "--binary", "/usr/local/bin/topograph-slurm")
    assert result.exit_code == Exit.OK, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["systemd"]


# ----------------------------------------------------------------------- pools --out-dir


def pools_out(out: Path, config: str = os.devnull) -> Result:
    return run(*POOLS, *POOLS_SIZE, "--out-dir", str(out), config=config)


def test_pools_replaces_a_directory_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "pools"
    assert pools_out(out).exit_code == Exit.OK
    (out / "decode-0.hostfile").write_text("stale\n")
    result = run(*POOLS, "--prefill", "1x8", "--decode", "1x16", "--out-dir", str(out))
    assert result.exit_code == Exit.OK, result.output
    assert not (out / "prefill-1.nodes").exists()  # the old plan's, gone with it
    assert (out / "decode-0.hostfile").read_text() != "stale\n"
    assert siblings(out) == []


def untouched(directory: Path) -> dict[str, tuple[int, int, int, int]]:
    """Each entry's identity, size, mode and change times: what a write would alter (the
    access time is not: refusing the directory reads its pools.json)."""
    return {
        p.name: (st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns)
        for p in directory.iterdir()
        for st in [p.lstat()]
    }


@pytest.mark.parametrize(
    "extra",
    [
        lambda d: (d / "serve.sh").write_text("vllm serve\n"),
        lambda d: (d / "notes").mkdir(),
        lambda d: (d / "link").symlink_to(d / "pools.json"),
    ],
    ids=["a-file", "a-directory", "a-link"],
)
def test_pools_never_replaces_a_directory_with_anything_its_plan_does_not_list(
    tmp_path: Path, extra: Callable[[Path], object]
) -> None:
    """A directory holding a hand-written pools.json beside serve.sh and notes/ was taken
    as pools' own and replaced whole."""
    out = tmp_path / "deploy"
    assert pools_out(out).exit_code == Exit.OK
    extra(out)
    before = untouched(out)
    result = pools_out(out)
    one_error(result, Exit.OUTPUT, "not a topograph-slurm pools directory")
    assert untouched(out) == before and result.stdout == ""


def test_pools_never_replaces_a_hand_written_pools_json_beside_other_files(
    tmp_path: Path,
) -> None:
    out = tmp_path / "deploy"
    out.mkdir()
    plan = {"instances": [{"name": "decode-0", "role": "decode", "tp": 8, "nodes": ["gpu0001"]}]}
    (out / "pools.json").write_text(json.dumps(plan))
    (out / "serve.sh").write_text("vllm serve\n")
    (out / "notes").mkdir()
    one_error(pools_out(out), Exit.OUTPUT, "not a topograph-slurm pools directory")
    assert sorted(p.name for p in out.iterdir()) == ["notes", "pools.json", "serve.sh"]
    assert json.loads((out / "pools.json").read_text()) == plan


def test_pools_never_replaces_a_directory_whose_pools_json_is_no_plan(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    out.mkdir()
    (out / "pools.json").write_text("{}")
    one_error(pools_out(out), Exit.OUTPUT, "not a topograph-slurm pools directory")
    assert (out / "pools.json").read_text() == "{}"


# --------------------------------------------------------------------------- kill -9


def config(tmp_path: Path) -> str:
    """A config naming the state directory: the child does not see the test's own."""
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\n")
    return str(path)


def test_a_gres_write_killed_inside_leaves_a_temp_the_next_run_removes(tmp_path: Path) -> None:
    target = tmp_path / "gres.conf"
    conf = config(tmp_path)
    kill_inside("os.replace", tmp_path, "--config", conf, *gres(str(target)))
    assert [p for p in siblings(target) if p.endswith(".tmp")]  # the kill left one
    assert not target.exists()
    assert run(*gres(str(target)), config=conf).exit_code == Exit.OK
    assert siblings(target) == [] and target.exists()


@pytest.mark.parametrize(
    ("blocked", "left"),
    [
        ("topograph_slurm.output._sync_tree", ["tmp"]),  # the new tree half made
        ("os.rename:2", ["old", "tmp"]),  # the old tree set aside, the new one not in
    ],
    ids=["while-writing", "while-swapping"],
)
def test_a_pools_out_killed_inside_leaves_trees_the_next_run_removes(
    tmp_path: Path, blocked: str, left: list[str]
) -> None:
    out = tmp_path / "pools"
    conf = config(tmp_path)
    assert pools_out(out, conf).exit_code == Exit.OK
    kill_inside(blocked, tmp_path, "--config", conf, *POOLS, *POOLS_SIZE, "--out-dir", str(out))
    assert sorted(name.split("-")[0].split(".")[-1] for name in siblings(out)) == left
    result = pools_out(out, conf)
    assert result.exit_code == Exit.OK, result.output
    assert siblings(out) == [] and (out / "pools.json").is_file()


def test_a_node_end_killed_inside_leaves_a_temp_the_next_part_write_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``record node-end`` killed in its write left ``.NODE.end.json.*.tmp`` for good; the
    next part written into that job's directory (another node's Epilog) removes it."""
    ib_sysfs.lay_out(tmp_path / "sys")
    conf = config(tmp_path)
    flags = ["--record-dir", str(tmp_path / "rec"), "--sysfs", str(tmp_path / "sys")]
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    kill_inside(
        "os.replace", tmp_path, "--config", conf, "record", "node-end", *flags, "--this-node", "a1"
    )
    parts = tmp_path / "rec" / "job-42.d"
    assert [p.name for p in parts.iterdir() if p.name.startswith(".a1.end.json.")]
    ended = CliRunner().invoke(
        main, ["--config", conf, "record", "node-end", *flags, "--this-node", "a2"]
    )
    assert ended.exit_code == Exit.OK, ended.output
    assert sorted(p.name for p in parts.iterdir()) == ["a2.end.json"]
