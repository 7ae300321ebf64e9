"""``topograph-slurm units``: the systemd service and timer pass ``systemd-analyze verify``
(which checks that ExecStart's program exists), the cron example runs the same command, and a
path that systemd or cron would split is refused."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit

ANALYZE = shutil.which("systemd-analyze")
needs_systemd = pytest.mark.skipif(
    ANALYZE is None, reason="systemd-analyze not installed (Debian: apt-get install systemd)"
)


def units(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--config", "/dev/null", "units", *args])
    return result.exit_code, result.stdout, result.stderr


def write_units(directory: Path, binary: str, tmp_path: Path) -> None:
    code, _, err = units(
        str(directory), "--binary", binary, "--metrics", str(tmp_path / "prom" / "t.prom")
    )
    assert code == Exit.OK, err


def verify(directory: Path) -> subprocess.CompletedProcess[str]:
    assert ANALYZE is not None
    files = [str(directory / "topograph-slurm.service"), str(directory / "topograph-slurm.timer")]
    return subprocess.run(
        [ANALYZE, "verify", *files], capture_output=True, text=True, check=False, timeout=120
    )


@needs_systemd
def test_rendered_units_verify(tmp_path: Path) -> None:
    write_units(tmp_path / "units", sys.executable, tmp_path)
    result = verify(tmp_path / "units")
    assert result.returncode == 0, result.stderr


@needs_systemd
def test_verify_finds_a_missing_program(tmp_path: Path) -> None:
    """The check above can fail: a unit whose ExecStart program does not exist does not verify."""
    write_units(tmp_path / "units", str(tmp_path / "no" / "topograph-slurm"), tmp_path)
    result = verify(tmp_path / "units")
    assert result.returncode != 0 and "topograph-slurm" in result.stderr


def test_service_runs_generate_hardened(tmp_path: Path) -> None:
    code, service, _ = units("--print", "service", "--binary", "/usr/bin/topograph-slurm")
    assert code == Exit.OK
    assert (
        "ExecStart=/usr/bin/topograph-slurm --quiet --config /etc/topograph-slurm/config.yaml "
        "generate -o /etc/slurm/topology.conf --reconfigure --metrics "
        "/var/lib/prometheus/node-exporter/topograph_slurm.prom\n"
    ) in service
    for line in ("Type=oneshot", "ProtectSystem=strict", "Nice=10", "TimeoutStartSec=20min"):
        assert f"\n{line}\n" in service
    assert "\nReadWritePaths=/etc/slurm /var/lib/prometheus/node-exporter\n" in service
    _, timer, _ = units("--print", "timer", "--binary", "/usr/bin/topograph-slurm")
    assert "\nOnCalendar=hourly\n" in timer and "\nPersistent=true\n" in timer
    _, cron, _ = units("--print", "cron", "--binary", "/usr/bin/topograph-slurm")
    command = service.split("ExecStart=")[1].splitlines()[0]
    assert cron.rstrip().endswith(f"root  nice -n 10 {command}")


def test_writing_twice_changes_nothing(tmp_path: Path) -> None:
    args = (str(tmp_path), "--binary", "/usr/bin/topograph-slurm")
    assert "3 of 3 unit files written" in units(*args)[2]
    assert "0 of 3 unit files written" in units(*args)[2]
    assert sorted(p.name for p in tmp_path.glob("topograph-slurm.*")) == [
        "topograph-slurm.cron",
        "topograph-slurm.service",
        "topograph-slurm.timer",
    ]


@pytest.mark.parametrize(
    "args",
    [
        ("--binary", "/opt/my tools/topograph-slurm"),
        ("--binary", "relative/topograph-slurm"),
        ("--output", "/etc/slurm/%h.conf"),
        ("--metrics", "/var/lib/$USER/x.prom"),
    ],
)
def test_paths_systemd_or_cron_would_split_are_refused(
    tmp_path: Path, args: tuple[str, str]
) -> None:
    code, _, err = units(
        str(tmp_path), *(("--binary", "/usr/bin/t") if args[0] != "--binary" else ()), *args
    )
    assert code == Exit.USAGE and err.count("\n") == 1 and args[0] in err
    assert list(tmp_path.iterdir()) == []


def test_dir_or_print() -> None:
    code, _, err = units()
    assert code == Exit.USAGE and "give DIR" in err
