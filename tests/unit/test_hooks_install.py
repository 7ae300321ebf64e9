"""`topograph-slurm hooks install`: the four scripts Slurm runs, the record root, the
slurm.conf lines, `--check`; and the scripts themselves run as Slurm runs them (no search
path, the tool failing every way), passing on only the gate's code."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit

SCRIPTS = ("start", "task", "node-start", "node-end")


def install(tmp_path: Path, binary: Path, *extra: str) -> Result:
    config = tmp_path / "config.yaml"
    config.write_text(f"record_dir: {tmp_path / 'records'}\n")
    args = ["--config", str(config), "hooks", "install", "--dir", str(tmp_path / "slurm")]
    return CliRunner().invoke(main, [*args, "--binary", str(binary), *extra])


def fake_tool(tmp_path: Path, body: str) -> Path:
    tool = tmp_path / "bin" / "topograph-slurm"
    tool.parent.mkdir(exist_ok=True)
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)
    return tool


def run_hook(tmp_path: Path, hook: str) -> subprocess.CompletedProcess[str]:
    """The script as slurmd/slurmctld start it: its path alone, an empty environment."""
    script = tmp_path / "slurm" / f"topograph-record-{hook}.sh"
    return subprocess.run([str(script)], capture_output=True, text=True, env={}, check=False)


def test_install_writes_four_root_scripts_the_record_root_and_the_slurm_conf_lines(
    tmp_path: Path,
) -> None:
    result = install(tmp_path, fake_tool(tmp_path, "exit 0"))
    assert result.exit_code == 0, result.output
    for hook in SCRIPTS:
        script = tmp_path / "slurm" / f"topograph-record-{hook}.sh"
        info = script.stat()
        assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o755, os.geteuid())
        assert script.read_text().startswith("#!/bin/sh\n")
        assert f"{tmp_path / 'bin' / 'topograph-slurm'} --config {tmp_path / 'config.yaml'}" in (
            script.read_text()
        )
    root = (tmp_path / "records").stat()
    assert stat.S_IMODE(root.st_mode) == 0o755
    assert result.output.splitlines()[-5:] == [
        f"PrologSlurmctld={tmp_path}/slurm/topograph-record-start.sh",
        f"TaskProlog={tmp_path}/slurm/topograph-record-task.sh",
        f"Prolog={tmp_path}/slurm/topograph-record-node-start.sh",
        f"Epilog={tmp_path}/slurm/topograph-record-node-end.sh",
        "PrologFlags=Alloc",
    ]
    assert install(tmp_path, tmp_path / "bin" / "topograph-slurm", "--check").exit_code == 0


def test_check_names_a_stale_script_and_a_shared_record_root(tmp_path: Path) -> None:
    tool = fake_tool(tmp_path, "exit 0")
    install(tmp_path, tool)
    with (tmp_path / "slurm" / "topograph-record-task.sh").open("a") as script:
        script.write("exit 1\n")
    (tmp_path / "records").chmod(0o1777)
    checked = install(tmp_path, tool, "--check")
    assert checked.exit_code == Exit.DIFFERS, checked.output
    assert f"stale {tmp_path}/slurm/topograph-record-task.sh" in checked.output
    assert "writable by others (mode 1777)" in checked.output
    assert "wrote" in install(tmp_path, tool).output  # the script rewritten, the root not
    assert install(tmp_path, tool, "--check").exit_code == Exit.DIFFERS


@pytest.mark.parametrize(
    ("body", "hook", "code"),
    [
        ("exit 70", "node-end", 0),  # a bug, a module missing: the Epilog must not drain
        ("exit 1", "start", 0),  # Python's own crash code is not the gate's
        (f"exit {int(Exit.JOB_REFUSED)}", "start", int(Exit.JOB_REFUSED)),  # the gate
        (f"exit {int(Exit.JOB_REFUSED)}", "task", 0),  # only start has a gate
        ("kill -9 $$", "node-start", 0),
    ],
)
def test_the_script_passes_on_only_the_gates_code(
    tmp_path: Path, body: str, hook: str, code: int
) -> None:
    install(tmp_path, fake_tool(tmp_path, body))
    done = run_hook(tmp_path, hook)
    assert done.returncode == code, done
    if code == 0:  # the script's line last (sh may say "Killed" before it)
        assert done.stderr.splitlines()[-1].endswith("the job goes on")


def test_the_script_runs_no_job_into_failure_when_the_tool_is_gone(tmp_path: Path) -> None:
    tool = fake_tool(tmp_path, "exit 0")
    install(tmp_path, tool)
    tool.unlink()
    for hook in SCRIPTS:
        done = run_hook(tmp_path, hook)
        assert done.returncode == 0, done
        assert "exited 127" in done.stderr


def test_the_task_script_passes_the_exports_through(tmp_path: Path) -> None:
    install(tmp_path, fake_tool(tmp_path, "echo export TOPOGRAPH_NODES=2"))
    done = run_hook(tmp_path, "task")
    assert (done.returncode, done.stdout, done.stderr) == (0, "export TOPOGRAPH_NODES=2\n", "")


def test_a_path_a_script_would_split_is_refused(tmp_path: Path) -> None:
    result = install(tmp_path, tmp_path / "my tool")
    assert result.exit_code == Exit.USAGE and "--binary" in result.output
    assert not (tmp_path / "slurm").exists()
