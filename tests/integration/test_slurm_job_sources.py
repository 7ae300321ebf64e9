"""The Slurm sources ``explain`` and ``order`` read, against real Slurm 24.11 and 26.05.

Per version and topology plugin (block, tree) one 8-node cluster whose slurm.conf defines the
nodes backwards (node08 first) and whose blocks/leaves mix odd and even nodes, so slurm.conf
order, name order and topology order all differ. A 6-node exclusive job with ``--gres=gpu:4``
records, from its own batch script, the node of every ``SLURM_PROCID`` and ``scontrol show
hostnames $SLURM_JOB_NODELIST``; its AdminComment carries the record job_submit.lua writes
(set with ``scontrol update``, the filter itself is tested in test_tp_filter.py). The
``scontrol`` outputs are recorded under the test's tmp dir and read back by the parsers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import image_for
from harness import Cluster, ClusterSpec, NodeSpec, validate_topology

from topograph_slurm.analysis.placement.span import fabric_map
from topograph_slurm.errors import InputError
from topograph_slurm.model.names import natural_key
from topograph_slurm.slurm.jobs import parse_scontrol_job
from topograph_slurm.slurm.nodes import parse_node_table, slurm_rank_order
from topograph_slurm.slurm.topology import parse_show_topology
from topograph_slurm.sources.layout import parse_topology

pytestmark = pytest.mark.integration

DEFINED = [f"node{i:02d}" for i in range(8, 0, -1)]  # slurm.conf order: node08 … node01
EVEN, ODD = "node[02,04,05,07]", "node[01,03,06,08]"
CONFS = {
    "block": f"BlockName=bA Nodes={EVEN}\nBlockName=bB Nodes={ODD}\nBlockSizes=2,4\n",
    "tree": f"SwitchName=s1 Nodes={EVEN}\nSwitchName=s2 Nodes={ODD}\n"
    "SwitchName=top Switches=s[1-2]\n",
}
RECORD = "topograph:tp=8,gpn=4,group=2,segment=2,src=user"
RANKS = """#!/bin/bash
srun -l --ntasks-per-node=1 printenv SLURMD_NODENAME | sort -n
echo ---
scontrol show hostnames "$SLURM_JOB_NODELIST"
sleep 600
"""


def record(tmp_path: Path, name: str, text: str) -> str:
    """Keep a real output next to the test (shown on failure), return it."""
    (tmp_path / name).write_text(text, encoding="utf-8")
    return text


def batch_output(cluster: Cluster, job_id: str, path: str, timeout: float = 30) -> str:
    """The batch script's output once its hostnames part is there (on the batch host)."""
    host = cluster.exec(["scontrol", "show", "job", job_id]).stdout
    batch_host = re.search(r"BatchHost=(\S+)", host)
    assert batch_host, host
    for _ in range(int(timeout * 2)):
        out = cluster.exec(["cat", path], node=batch_host.group(1)).stdout
        if "---" in out and len(out.split("---", 1)[1].split()) == 6:
            return out
        cluster.exec(["sleep", "0.5"])
    raise AssertionError(f"no rank output from job {job_id}: {out!r}")


@pytest.mark.parametrize("plugin", ["block", "tree"])
def test_job_topology_and_rank_order(
    make_cluster: Callable[..., Cluster], slurm_version: str, plugin: str, tmp_path: Path
) -> None:
    spec = ClusterSpec(
        nodes=[NodeSpec(name, 4, 4) for name in DEFINED],
        topology_plugin=f"topology/{plugin}",
        topology_conf=CONFS[plugin],
    )
    cluster = make_cluster(spec)
    cluster.put_file(None, "/tmp/ranks.sh", RANKS, 0o755)
    job_id = cluster.sbatch("--exclusive -N 6 --gres=gpu:4 -o /tmp/ranks-%j.out /tmp/ranks.sh")
    cluster.wait_job(job_id)
    cluster.exec(["scontrol", "update", f"JobId={job_id}", f"AdminComment={RECORD}"]).check()
    small = cluster.sbatch("-N 2 --gpus-per-node=2 --wrap 'sleep 600'")
    pending = cluster.sbatch("--exclusive -N 4 --wrap 'sleep 600'")
    cluster.wait_job(small, timeout=30)

    # The rank order, as the job's own step sees it.
    out = batch_output(cluster, job_id, f"/tmp/ranks-{job_id}.out")
    ranks_part, hostnames_part = out.split("---", 1)
    by_rank = [line.split(":", 1)[1].strip() for line in ranks_part.split("\n") if ":" in line]
    hostnames = hostnames_part.split()

    def show(*args: str) -> str:
        text = cluster.exec(["scontrol", "show", *args]).stdout
        return record(tmp_path, "-".join(args) + ".txt", text)

    job = parse_scontrol_job(show("job", "--json", job_id), job_id)
    table = parse_node_table(show("nodes", "--json"))

    assert job.state == "RUNNING" and job.job_id == job_id
    assert list(job.nodes) == by_rank == hostnames, (job.nodes, by_rank, hostnames)
    assert job.gpus_per_node == 4 and job.tp == 8 and job.record is not None
    assert (job.record.group, job.record.segment, job.record.source) == (2, 2, "user")
    assert slurm_rank_order(sorted(job.nodes, key=natural_key), table) == by_rank
    # What the node table is, per version and plugin (see slurm_rank_order).
    if slurm_version == "24.11" and plugin == "block":
        assert table == DEFINED
    else:
        assert table == sorted(DEFINED, key=natural_key)

    assert parse_scontrol_job(show("job", "--json", small), small).gpus_per_node == 2
    waiting = parse_scontrol_job(show("job", "--json", pending), pending)
    assert (waiting.state, waiting.nodes) == ("PENDING", ())
    with pytest.raises(InputError, match="job 9999 not found"):
        parse_scontrol_job(show("job", "--json", "9999"), "9999")

    # The running topology reads as the file we gave it, and maps every node.
    running = parse_show_topology(show("topology"))
    ours = parse_topology(CONFS[plugin], "topology.conf")
    assert_same_topology(running, ours)
    fmap = fabric_map(running.tree, running.blocks, "scontrol show topology")
    assert sorted(fmap.places) == sorted(DEFINED)


def assert_same_topology(running: Any, ours: Any) -> None:
    if ours.tree is not None:
        assert running.tree is not None
        assert [(g.name, g.nodes) for g in running.tree.leaves] == [
            (g.name, g.nodes) for g in ours.tree.leaves
        ]
        assert [(s.name, s.level, s.children) for s in running.tree.uppers] == [
            (s.name, s.level, s.children) for s in ours.tree.uppers
        ]
        assert running.tree.tops == ours.tree.tops
    else:
        assert running.tree is None
    if ours.blocks is not None:
        assert running.blocks is not None
        assert [(b.name, b.nodes) for b in running.blocks.blocks] == [
            (b.name, b.nodes) for b in ours.blocks.blocks
        ]
        assert running.blocks.block_sizes == ours.blocks.block_sizes
    else:
        assert running.blocks is None


TOPOLOGY_YAML = """
- topology: ib
  cluster_default: true
  tree:
    switches:
      - switch: s1
        nodes: node[01-04]
      - switch: s2
        nodes: node[05-08]
      - switch: top
        children: s[1-2]
- topology: nvl
  cluster_default: false
  block:
    block_sizes: [2, 4]
    blocks:
      - block: b1
        nodes: node[01-02]
      - block: b2
        nodes: node[03-04]
      - block: b3
        nodes: node[05-06]
      - block: b4
        nodes: node[07-08]
- topology: none
  cluster_default: false
  flat: true
"""


def test_topology_yaml_named_topologies_on_26_05(docker_client: Any, tmp_path: Path) -> None:
    """26.05 with a topology.yaml: the default (tree), ``show topology nvl`` (blocks plus the
    aggregates Slurm adds, which are skipped) and a flat one (prints nothing)."""
    nodes = [f"node{i:02d}" for i in range(1, 9)]
    result = validate_topology(
        "26.05", nodes, topology_yaml=TOPOLOGY_YAML, image=image_for("26.05", docker_client)
    )
    record(tmp_path, "show-topology.txt", result.topology_text)
    for name, text in result.named_topology_texts.items():
        record(tmp_path, f"show-topology-{name}.txt", text)
    assert "AggregatedBlock=" in result.named_topology_texts["nvl"]
    assert_same_topology(
        parse_show_topology(result.topology_text), parse_topology(TOPOLOGY_YAML, topology="ib")
    )
    for name in ("ib", "nvl", "none"):
        running = parse_show_topology(result.named_topology_texts[name], name)
        assert_same_topology(running, parse_topology(TOPOLOGY_YAML, topology=name))
        assert running.name == name
    both = parse_topology(TOPOLOGY_YAML)  # no name: the tree and the blocks together
    assert both.tree is not None and both.blocks is not None
