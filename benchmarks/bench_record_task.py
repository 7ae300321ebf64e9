"""What one ``record task`` (the TaskProlog, once per task) reads and costs as the job grows:
the small ``job-<ID>.exports`` that ``record start`` writes beside the record, against the
whole record the task read before (its size grows with the job's nodes, so the file system
served nodes x tasks x record bytes at every job start).

For each job size a record of that many nodes (each with its leaf, block, spine and NVLink
domain units, as ``record start`` writes them) and its exports are written by the real writer;
then, in the same run, the task's read of the exports (``app.record.task_exports``) and the
old read of the whole record plus the exports computed from it are timed (best of --rounds),
with the bytes each reads. The bytes served at one job start: bytes per task x tasks (8 a node).

Usage: python benchmarks/bench_record_task.py [--nodes 16,512,4096] [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from topograph_slurm.app.record import _write, access, task_exports
from topograph_slurm.config import Settings
from topograph_slurm.model.record import JobRecord, RecordLayout, RecordNode
from topograph_slurm.render.record import exports
from topograph_slurm.sources.record import read_record, record_file

TASKS_PER_NODE = 8


def record_of(nodes: int) -> JobRecord:
    placed = [
        RecordNode(
            f"gpu{i:05d}",
            {
                "node": f"gpu{i:05d}",
                "leaf": f"leaf{i // 32}",
                "block": f"b{i // 18}",
                "spine": "s0",
            },
            f"leaf{i // 32}",
            f"b{i // 18}",
            "s0",
            f"b{i // 18}",
        )
        for i in range(nodes)
    ]
    return JobRecord(
        job_id="7",
        nodes=placed,
        levels=["node", "block", "leaf", "spine"],
        layout=RecordLayout(8, 1, 8, "admin-comment"),
        crossings={"tp": {"leaf": 0}, "dp": {"leaf": nodes // 32}},
        tp_home="node",
        fingerprint="f" * 64,
    )


def best(rounds: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="16,512,4096")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    print(
        "| nodes | record bytes | exports bytes | task: whole record | task: exports | "
        "served per job start (whole record -> exports) |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | --- |")
    for nodes in (int(n) for n in args.nodes.split(",")):
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch) / "records"
            settings = Settings(record_dir=str(root))
            path = record_file(root, "7")
            _write(settings, path, record_of(nodes), access(settings, None))
            whole = best(args.rounds, lambda p=path: exports(p, read_record(p)))
            last = f"gpu{nodes - 1:05d}"  # its unit row is the last one searched
            small = best(args.rounds, lambda s=settings, n=last: task_exports(s, "7", n))
            size = path.stat().st_size
            small_size = (root / "job-7.exports").stat().st_size
            tasks = nodes * TASKS_PER_NODE
            print(
                f"| {nodes} | {size:,} | {small_size:,} | {whole * 1e3:.2f} ms | "
                f"{small * 1e3:.2f} ms | {size * tasks / 1e9:.3g} GB -> "
                f"{small_size * tasks / 1e6:.3g} MB |"
            )


if __name__ == "__main__":
    main()
