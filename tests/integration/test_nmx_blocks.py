"""NMX's NVLink partitions as two block levels, judged by the real slurmctld (24.11, 26.05):
``generate --sim …,nvl=72,partitions=2`` (NVL72 racks of 18 four-GPU trays, each split into two
partitions, as NMX's answers describe them) gives a topology.conf slurmctld starts with, whose
base blocks are the partitions and whose aggregates at the second BlockSizes level are
exactly the racks — Slurm's own aggregation, read back from ``scontrol show topology``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from harness import ValidationResult

from topograph_slurm.cli.main import main

pytestmark = pytest.mark.integration

Validate = Callable[..., ValidationResult]
RACKS = 3
SIM = f"nodes={18 * RACKS},gpus=4,rails=2,su=18,nvl=72,partitions=2"


def _generate(spec: str, version: str, tmp: Path) -> tuple[str, dict]:
    report = tmp / "report.json"
    args = ["--config", os.devnull, "generate", "--sim", spec, "--format", "block"]
    args += ["--slurm-version", version, "--report", str(report), "--report-format", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return result.stdout, json.loads(report.read_text())


def _rack(first: int) -> list[str]:
    return [f"gpu{i:04d}" for i in range(first, first + 18)]


@pytest.mark.parametrize("down", ["", "3"])
def test_partitions_are_blocks_and_racks_their_aggregates(
    validate: Validate, slurm_version: str, down: str, tmp_path: Path
) -> None:
    spec = SIM + (f",down={down}" if down else "")
    text, report = _generate(spec, slurm_version, tmp_path)
    nodes = [f"gpu{i:04d}" for i in range(1, 18 * RACKS + 1)]
    result = validate(nodes, topology_conf=text)
    problems = [p for p in result.problems if not (down and "lack access to 1 nodes" in p)]
    assert result.started and problems == [], result.log_text[-3000:]
    topo = result.topology
    base = [(b.name, sorted(b.nodes)) for b in topo.base_blocks]
    assert base == [(b["name"], sorted(b["nodes"])) for b in report["blocks"]]
    assert len(base) == 2 * RACKS
    racks = [_rack(1 + 18 * r) for r in range(RACKS)]
    if down:
        racks[0].remove(f"gpu{int(down):04d}")
        assert "nvlink-tray-down" in {f["kind"] for f in report["findings"]}
    aggregates = [sorted(b.nodes) for b in topo.blocks if b.aggregated]
    assert aggregates == racks
    assert report["block_sizes"] == ([8, 16] if down and slurm_version == "24.11" else [9, 18])
