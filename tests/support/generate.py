"""``generate --sim`` through the CLI with a JSON report: the exit code, stderr and the report."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit


def generate_sim(
    out: Path, spec: str, *args: str, report: Path, config: str = os.devnull
) -> tuple[int, str, dict]:
    """Run ``generate --sim SPEC -o OUT ARGS`` with its JSON report at *report* (removed
    afterwards; ``{}`` when the run wrote none); a crash (exit 70) fails the test."""
    command = ["--config", config, "generate", "--sim", spec, "-o", str(out), *args]
    result = CliRunner().invoke(main, [*command, "--report", str(report), "--json"])
    assert result.exit_code != Exit.BUG, result.output
    data = json.loads(report.read_text()) if report.exists() else {}
    report.unlink(missing_ok=True)
    return result.exit_code, result.stderr, data
