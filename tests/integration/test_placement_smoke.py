"""Placement smoke test: the ``--segment`` win on real Slurm, both versions (DESIGN §4).

16 nodes in four 4-node blocks, two nodes busy in every block. A 4-node exclusive job needs a
whole free block and pends; the same job with ``--segment=2`` runs as 2+2 nodes in two blocks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from harness import Cluster, ClusterSpec

pytestmark = pytest.mark.integration

BLOCK_SIZE = 4
BLOCKS = 4
SLEEP = "--wrap 'sleep 600'"


def node(i: int) -> str:
    return f"node{i:02d}"


def block_members() -> dict[str, list[str]]:
    """Block name -> its nodes, consecutive nodes forming one block."""
    return {
        f"b{b}": [node(b * BLOCK_SIZE + k) for k in range(1, BLOCK_SIZE + 1)] for b in range(BLOCKS)
    }


def block_topology_conf() -> str:
    lines = [f"BlockName={name} Nodes={','.join(nodes)}" for name, nodes in block_members().items()]
    return "\n".join([*lines, f"BlockSizes={BLOCK_SIZE}"]) + "\n"


def occupy_two_per_block(cluster: Cluster) -> list[str]:
    """Pin one exclusive 1-node job on each of the first two nodes of every block."""
    busy = [nodes[i] for nodes in block_members().values() for i in (0, 1)]
    jobs = {cluster.sbatch(f"--exclusive -N 1 -w {name} {SLEEP}"): name for name in busy}
    for job_id, name in jobs.items():
        assert cluster.wait_job(job_id).nodes == [name]
    return busy


def test_segment_runs_where_whole_block_pends(make_cluster: Callable[..., Cluster]) -> None:
    spec = ClusterSpec.simple(
        BLOCKS * BLOCK_SIZE, topology_plugin="topology/block", topology_conf=block_topology_conf()
    )
    cluster = make_cluster(spec)
    busy = occupy_two_per_block(cluster)
    block_of = {n: b for b, nodes in block_members().items() for n in nodes}

    whole = cluster.sbatch(f"--exclusive -N {BLOCK_SIZE} {SLEEP}")
    segmented = cluster.sbatch(f"--exclusive -N {BLOCK_SIZE} --segment=2 {SLEEP}")

    seg = cluster.wait_job(segmented, timeout=90)
    assert len(seg.nodes) == BLOCK_SIZE, seg
    assert not set(seg.nodes) & set(busy), seg
    per_block = Counter(block_of[n] for n in seg.nodes)
    assert sorted(per_block.values()) == [2, 2], per_block

    # The backfill pass that started the segmented job had the whole-block job in front of it.
    pending = cluster.job(whole)
    assert pending.state == "PENDING", pending
    assert pending.nodes == [], pending
