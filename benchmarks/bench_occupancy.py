"""``occupancy`` at scale: 16,384 nodes of 4 GPUs in NVL72-class blocks of 18 nodes, 10,000
jobs (running ones scattered over the blocks, pending ones of mixed large shapes: whole
nodes, segments, ``--tp-size`` records), four partitions. The pending jobs fit almost nowhere:
the worst case, where every unit is tried against every distinct need.

The answers of ``scontrol show nodes --json`` and ``scontrol show jobs --json`` are built from
Slurm's own records (tests/fixtures/real/scontrol, ``--release`` 26.05 or 24.11): each node
and job is a real record with every field that release prints, its name, GRES, state,
partitions, allocation and request replaced by the scenario's, printed with Slurm's 2-space
indentation — the size Slurm prints (~2.7 kB a node, ~9 kB a job). They are replayed by a
stand-in ``scontrol`` so the command runs as
it would from a 1-minute timer: the whole CLI (``occupancy --topology FILE --json --metrics``,
in-process through click) and its stages apart (the two parsers, the analysis, the three
renderings). The best of ``--rounds`` is shown, CPU seconds; peak RSS is the process's
(the answers themselves are held in it too).

Usage: python benchmarks/bench_occupancy.py [--nodes N] [--jobs N] [--block N] [--rounds N]
       [--release 26.05|24.11]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from click.testing import CliRunner  # noqa: E402

from tests.support.scontrol import Answer, ReplayScontrol  # noqa: E402
from topograph_slurm.analysis.occupancy.units import report  # noqa: E402
from topograph_slurm.analysis.placement.span import fabric_map  # noqa: E402
from topograph_slurm.cli.main import main as cli  # noqa: E402
from topograph_slurm.model.names import fold  # noqa: E402
from topograph_slurm.render.environment import environment  # noqa: E402
from topograph_slurm.render.occupancy import render_occupancy, render_occupancy_metrics  # noqa: E402
from topograph_slurm.slurm.jobs import parse_scontrol_jobs  # noqa: E402
from topograph_slurm.slurm.nodes import parse_node_gpus  # noqa: E402
from topograph_slurm.sources.layout import load_topology  # noqa: E402

GPUS = 4
PARTITIONS = ("p0", "p1", "p2", "p3")
REAL = ROOT / "tests" / "fixtures" / "real" / "scontrol"
#: Slurm's own records, every field a release prints (set by main from --release).
TEMPLATE: dict[str, Any] = {}


def templates(release: str) -> None:
    nodes = json.loads((REAL / f"scontrol-{release}-nodes.json").read_text())["nodes"]
    jobs = json.loads((REAL / f"scontrol-{release}-jobs.json").read_text())["jobs"]
    TEMPLATE["node"] = nodes[0]
    TEMPLATE["running"] = jobs[0]
    TEMPLATE["pending"] = jobs[2]
    TEMPLATE["allocated"] = jobs[0]["job_resources"]["nodes"]["allocation"][0]


def cluster(nodes: int, jobs: int, block: int, seed: int = 7) -> tuple[str, str, str]:
    """topology.conf (hostlists folded, as ``generate`` writes them), show nodes --json and
    show jobs --json of a fragmented cluster."""
    rng = random.Random(seed)
    names = [f"gpu{i:05d}" for i in range(1, nodes + 1)]
    blocks = [names[i : i + block] for i in range(0, nodes, block)]
    topology = (
        "".join(f"BlockName=nvl{b:04d} Nodes={fold(members)}\n" for b, members in enumerate(blocks))
        + f"BlockSizes={block}\n"
    )
    free = names[:]
    rng.shuffle(free)
    queue: list[dict[str, Any]] = []
    used: dict[str, int] = {}
    running = jobs * 7 // 10
    for job_id in range(1, running + 1):
        size = rng.choice((1, 1, 1, 2, 4))
        held = [free.pop() for _ in range(min(size, len(free)))]
        if not held:
            break
        gpus = rng.choice((GPUS, GPUS, 2))
        for name in held:
            used[name] = gpus
        queue.append(_job(job_id, "RUNNING", rng, held, gpus))
    for job_id in range(running + 1, jobs + 1):
        queue.append(_job(job_id, "PENDING", rng, [], GPUS))
    node_list = [
        TEMPLATE["node"]
        | {
            "name": name,
            "gres": f"gpu:gb200:{GPUS}(S:0-1)",
            "gres_used": f"gpu:gb200:{used.get(name, 0)}(IDX:N/A)",
            "state": [
                "ALLOCATED" if used.get(name) == GPUS else "MIXED" if name in used else "IDLE"
            ]
            + (["DRAIN"] if i % 97 == 0 else []),
            "partitions": [PARTITIONS[(i // block) % len(PARTITIONS)]],
        }
        for i, name in enumerate(names)
    ]
    return (
        topology,
        json.dumps({"nodes": node_list}, indent=2),
        json.dumps({"jobs": queue}, indent=2),
    )


def _job(job_id: int, state: str, rng: random.Random, held: list[str], gpus: int) -> dict[str, Any]:
    size = len(held) or rng.choice((6, 8, 12, 16, 18, 32))
    shape = rng.random()
    record = f"topograph:tp={GPUS * 6},gpn={GPUS},group=6,src=user" if shape < 0.3 else ""
    real = TEMPLATE["running" if held else "pending"]
    resources = real["job_resources"]
    return real | {
        "job_id": job_id,
        "job_state": [state],
        "nodes": fold(held) if held else "",
        "partition": rng.choice(PARTITIONS),
        "node_count": {"set": True, "infinite": False, "number": size},
        "segment_size": rng.choice((0, 6, 8)) if 0.3 <= shape < 0.6 else 0,
        "job_resources": resources
        | {
            "nodes": resources["nodes"]
            | {
                "allocation": [
                    TEMPLATE["allocated"] | {"index": i, "name": n} for i, n in enumerate(held)
                ]
            }
        }
        if held
        else resources,
        "gres_detail": [f"gpu:gb200:{gpus}(IDX:0-{gpus - 1})"] * len(held),
        "tres_per_node": f"gres/gpu:{gpus}",
        "admin_comment": record,
    }


def best(rounds: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        start = time.process_time()
        work()
        times.append(time.process_time() - start)
    return min(times)


#: Runs the command and prints its CPU seconds and peak RSS: a small process of its own, since
#: a child keeps the peak RSS of the process it was forked from (this one holds the answers).
_MEASURE = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
    "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(f'{r.ru_utime + r.ru_stime:7.3f} s CPU, peak RSS {r.ru_maxrss / 1024:.0f} MB')\n"
)


def process(argv: list[str]) -> str:
    """The command as a timer runs it, a process of its own: CPU seconds (its scontrol
    children included) and its peak RSS."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-c", _MEASURE, sys.executable, "-m", "topograph_slurm", *argv]
    return subprocess.run(
        command, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=16384)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--block", type=int, default=18)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--release", choices=("26.05", "24.11"), default="26.05")
    args = parser.parse_args()
    templates(args.release)
    topology, nodes_json, jobs_json = cluster(args.nodes, args.jobs, args.block)
    size = (len(nodes_json) + len(jobs_json)) / 2**20
    print(f"answers as Slurm {args.release} prints them: {size:.0f} MB")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "topology.conf").write_text(topology)
        scontrol = ReplayScontrol(
            root / "bin",
            {"show nodes --json": Answer(nodes_json), "show jobs --json": Answer(jobs_json)},
        )
        (root / "c.yaml").write_text(f"scontrol: {scontrol.path}\n")
        argv = ["--config", str(root / "c.yaml"), "occupancy", "--topology"]
        argv += [str(root / "topology.conf"), "--json", "--metrics", str(root / "o.prom")]

        def whole() -> None:
            result = CliRunner().invoke(cli, argv)
            assert result.exit_code == 0, result.output

        fmap_topology = load_topology(root / "topology.conf")
        fmap = fabric_map(fmap_topology.tree, fmap_topology.blocks)
        nodes = parse_node_gpus(nodes_json)
        jobs = parse_scontrol_jobs(jobs_json)
        found = report(fmap, nodes, jobs)
        env = environment(None)
        stages = {
            "occupancy CLI (--json --metrics)": whole,
            "parse show nodes --json": lambda: parse_node_gpus(nodes_json),
            "parse show jobs --json": lambda: parse_scontrol_jobs(jobs_json),
            "analysis (fabric + partitions)": lambda: report(fmap, nodes, jobs),
            "render text": lambda: render_occupancy(env, found, "text"),
            "render json": lambda: render_occupancy(env, found, "json"),
            "render metrics": lambda: render_occupancy_metrics(env, found),
        }
        print(
            f"{args.nodes} nodes, {len(fmap_topology.blocks.blocks) if fmap_topology.blocks else 0}"
            f" blocks of {args.block}, {len(jobs)} jobs ({found.fabric.pending} pending), "
            f"stranded {found.fabric.stranded} of {found.fabric.total('free')} free GPUs"
        )
        for name, work in stages.items():
            print(f"{name:36s} {best(args.rounds, work):7.3f} s")
        print(f"{'occupancy process (whole command)':36s} {process(argv):s}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
