"""`draw JOBID` against a job real Slurm placed, both versions: the job read from the real
``scontrol show job --json``, the fabric from the real ``scontrol show topology`` (places only).

The setup is `explain`'s (test_explain_order.py): 16 nodes of 2 GPUs in four 4-node blocks,
two nodes busy in every block, a 4-node ``--segment=2`` job placed 2+2 in two blocks. With
``--tp 8`` each TP group needs all 4 nodes, which fit one block: every group edge between two
blocks is red (slow), every edge inside a block is not, and only the job's nodes are marked.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import Shims
from harness import Cluster
from test_explain_order import BLOCK_OF, split_job  # noqa: F401  (split_job is a fixture)

from topograph_slurm.cli.main import main

pytestmark = pytest.mark.integration
SVG = "{http://www.w3.org/2000/svg}"


def test_draw_a_running_job_from_real_scontrol(
    split_job: tuple[Cluster, str, list[str], Path],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shims: Shims,
) -> None:
    cluster, job, placed, _conf = split_job
    monkeypatch.setenv("PATH", shims(cluster, "scontrol")["PATH"])  # the in-process CLI's
    out = tmp_path / "job.svg"
    result = CliRunner().invoke(
        main, ["--config", os.devnull, "draw", job, "--tp", "8", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    drawing = ET.parse(out).getroot().find(f"{SVG}g[@class='drawing']")
    assert drawing is not None
    marked = {e.get("data-key") for e in drawing if "job" in e.get("class", "").split()}
    assert marked == set(placed)
    edges = [e for e in drawing if "edge-tp" in e.get("class", "")]
    assert len(edges) == 3  # one TP group of 8 GPUs on 4 nodes: a path of 3 edges
    for edge in edges:
        a, b = "".join(edge.itertext()).split(": ", 1)[1].split(" (")[0].split(" → ")
        assert ("slow" in edge.get("class", "")) == (BLOCK_OF[a] != BLOCK_OF[b]), (a, b)
    assert any("slow" in e.get("class", "") for e in edges)
    blocks = {e.get("data-key") for e in drawing if "block" in e.get("class", "").split()}
    used = {BLOCK_OF[n] for n in placed}  # b0…b3, numbered #1…#4 in the file's order
    assert blocks == used | {f"block #{int(name[1:]) + 1}" for name in used}
