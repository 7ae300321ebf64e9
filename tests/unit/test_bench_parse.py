"""benchmarks/bench_parse.py --base: the A/B of two checkouts in the same rounds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
BENCH = REPO / "benchmarks" / "bench_parse.py"


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(BENCH), "--nodes", "64", "--rails", "1", "--repeat", "1"]
    return subprocess.run([*command, *args], capture_output=True, text=True, check=False)


def test_base_adds_a_paired_row_for_every_stage_but_the_bare_scan() -> None:
    done = _bench("--stages", "parse", "generate", "--base", str(REPO))
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    stages = [row[3] for row in rows if len(row) == 10]
    assert stages == ["bare-scan", "parse", "generate", "parse@base", "generate@base"]


def test_a_base_without_the_code_fails_instead_of_timing_this_checkout_twice(
    tmp_path: Path,
) -> None:
    done = _bench("--stages", "parse", "--base", str(tmp_path))
    assert done.returncode != 0
    assert "AssertionError" in done.stderr and str(REPO) in done.stderr
