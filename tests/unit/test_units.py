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


def write_units(directory: Path, binary: str) -> None:
    code, _, err = units(
        "--out-dir", str(directory), "--binary", binary, "--service-metrics", "/var/lib/prom/t.prom"
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
    # A program that exists outside /tmp (units refuses a path PrivateTmp hides): not this
    # Python, which lives in /tmp whenever the test venv does.
    assert ANALYZE is not None
    write_units(tmp_path / "units", ANALYZE)
    result = verify(tmp_path / "units")
    assert result.returncode == 0, result.stderr


@needs_systemd
def test_verify_finds_a_missing_program(tmp_path: Path) -> None:
    """The check above can fail: a unit whose ExecStart program does not exist does not verify."""
    write_units(tmp_path / "units", "/opt/no/topograph-slurm")
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
    assert "\nStateDirectory=topograph-slurm\n" in service  # the state dir, writable
    _, timer, _ = units("--print", "timer", "--binary", "/usr/bin/topograph-slurm")
    assert "\nOnCalendar=hourly\n" in timer and "\nPersistent=true\n" in timer
    _, cron, _ = units("--print", "cron", "--binary", "/usr/bin/topograph-slurm")
    command = service.split("ExecStart=")[1].splitlines()[0]
    assert cron.rstrip().endswith(f"root  nice -n 10 {command}")


def test_writing_twice_changes_nothing(tmp_path: Path) -> None:
    args = ("--out-dir", str(tmp_path), "--binary", "/usr/bin/topograph-slurm")
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
        ("--service-output", "/etc/slurm/%h.conf"),
        ("--service-metrics", "/var/lib/$USER/x.prom"),
    ],
)
def test_paths_systemd_or_cron_would_split_are_refused(
    tmp_path: Path, args: tuple[str, str]
) -> None:
    binary = ("--binary", "/usr/bin/t") if args[0] != "--binary" else ()
    code, _, err = units("--out-dir", str(tmp_path), *binary, *args)
    assert code == Exit.USAGE and err.count("\n") == 1 and args[0] in err
    assert list(tmp_path.iterdir()) == []


def test_dir_or_print() -> None:
    code, _, err = units()
    assert code == Exit.USAGE and "give --out-dir DIR" in err


@needs_systemd
def test_a_program_or_config_in_a_home_keeps_home_readable(tmp_path: Path) -> None:
    """Issue 24: ExecStart under /root or /home with ProtectHome=yes fails with 203/EXEC every
    hour (the program is hidden); the service gets ProtectHome=read-only instead."""
    for binary, config in [("/usr/bin/env", "/home/a/config.yaml"), (sys.executable, "/etc/c")]:
        if not binary.startswith(("/root/", "/home/")) and config == "/etc/c":
            continue  # this interpreter is not in a home
        out = tmp_path / Path(binary).name
        code, _, err = units("--out-dir", str(out), "--binary", binary, "--service-config", config)
        assert code == Exit.OK, err
        service = (out / "topograph-slurm.service").read_text()
        assert "\nProtectHome=read-only\n" in service and "ProtectHome=yes" not in service
        assert verify(out).returncode == 0
    _, plain, _ = units("--print", "service", "--binary", "/usr/bin/topograph-slurm")
    assert "\nProtectHome=yes\n" in plain


@pytest.mark.parametrize(
    "args",
    [
        ("--binary", "/tmp/venv/bin/topograph-slurm"),
        ("--service-config", "/var/tmp/config.yaml"),
        ("--service-metrics", "/tmp/t.prom"),
        ("--service-metrics", "/var/lib/prom/t.txt"),  # node_exporter reads *.prom only
        ("--service-output", "/etc/slurm/"),
        ("--service-output", "/"),
    ],
)
def test_units_that_would_fail_every_hour_are_refused(
    tmp_path: Path, args: tuple[str, str]
) -> None:
    """Issue 24: a path PrivateTmp=yes hides, and what generate itself refuses (its own rule),
    are one usage line up front; nothing is written, the cron file neither."""
    binary = ("--binary", "/usr/bin/t") if args[0] != "--binary" else ()
    code, _, err = units("--out-dir", str(tmp_path / "units"), *binary, *args)
    assert code == Exit.USAGE and err.count("\n") == 1 and args[0] in err, err
    assert not (tmp_path / "units").exists()


def test_one_unwritable_unit_leaves_the_others_unwritten(tmp_path: Path) -> None:
    """Every target is checked before any is written: a directory where the service goes
    refuses the run with the cron file (first by name) not written either."""
    (tmp_path / "topograph-slurm.service").mkdir()
    code, _, err = units("--out-dir", str(tmp_path), "--binary", "/usr/bin/topograph-slurm")
    assert code == Exit.OUTPUT and "topograph-slurm.service" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topograph-slurm.service"]
