"""The job-scoped commands from the kept fabric index against a fresh analysis (issue 35).

    python benchmarks/bench_index.py                        # 2,048 and 16,384 nodes x 8 rails
    python benchmarks/bench_index.py --nodes 16384 --repeat 5 --job 512

One simulated rail-optimised dump per size (``bench_parse.write_fabric``). Every stage is the
whole CLI in its own process (``python -m topograph_slurm``, imports included), its CPU
seconds (user + system, forked children included) and peak RSS read from ``wait4``; the
rounds interleave every stage, and each stage's ratio is taken to the ``generate -o`` of the
same round (which keeps the index), the median over rounds. CPU seconds are the steady
figure on a shared machine; wall seconds are shown too.

Stages: ``generate`` (``-o FILE``: writes the topology, the summary and the index), then for a
job of ``--job`` nodes (the first nodes by name, 8 GPUs each) ``explain``, ``order``,
``pools`` (prefill/decode of 8 GPUs each), ``experts`` (64 experts, 128 replicas on the
first 64 GPUs) and
``record start`` (a stand-in ``scontrol`` prints the job), each once ``@kept`` (the config's
state directory holds generate's index) and once ``@fresh`` (an empty state directory: the
fabric is analysed again). Targets (issue 35): every job-scoped command under 1 s CPU and
300 MB at 16,384 nodes from the kept index.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GPUS = 8


@dataclass(frozen=True)
class Sample:
    wall: float
    cpu: float
    rss_mb: float


def run(argv: list[str], env: dict[str, str]) -> Sample:
    """One process: wall, CPU (user + system, its waited-for children too) and peak RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if code not in (0, 1):  # 1: explain's verdict or pools' unmet wish, not a failure
        raise RuntimeError(f"{' '.join(argv)} exited {code}: {stderr}")
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def _configs(tmp: Path, scontrol: Path) -> tuple[Path, Path]:
    """The config whose state directory generate fills (kept) and one with an empty one."""
    made = []
    for name in ("kept", "fresh"):
        path = tmp / f"{name}.yaml"
        path.write_text(
            f"state_dir: {tmp / name}\nrecord_dir: {tmp / 'records'}\nscontrol: {scontrol}\n"
            "slurm_version: '24.11'\nslurm_nodes: all\n"
        )
        made.append(path)
    return made[0], made[1]


def _fake_scontrol(tmp: Path, job: str) -> Path:
    """``scontrol show job --json``: the benchmark's job, running on *job* (a hostlist)."""
    answer = tmp / "job.json"
    record = {"job_id": 7, "job_state": ["RUNNING"], "nodes": job}
    answer.write_text(json.dumps({"jobs": [record | {"tres_per_node": f"gres/gpu:{GPUS}"}]}))
    script = tmp / "scontrol"
    script.write_text(f"#!/bin/sh\nexec cat {answer}\n")
    script.chmod(0o755)
    return script


def _load_file(tmp: Path) -> Path:
    """Expert loads: 64 experts over 4 MoE layers."""
    path = tmp / "load.json"
    path.write_text(json.dumps([[1000 + 37 * e % 500 for e in range(64)] for _ in range(4)]))
    return path


def stages(dump: Path, tmp: Path, job_nodes: int, width: int) -> dict[str, list[str]]:
    """Each stage's command line without the ``--config``."""
    job = f"gpu[{1:0{width}d}-{job_nodes:0{width}d}]"
    source = ["--ibnetdiscover", str(dump)]
    nodes = [*source, "--nodes", job, "--gpus-per-node", str(GPUS)]
    half = job_nodes // 2
    return {
        "generate": ["generate", *source, "-o", str(tmp / "topology.conf")],
        "explain": ["explain", *nodes, "--tp", str(GPUS)],
        "order": ["order", *nodes, "--tp", str(GPUS)],
        "pools": ["pools", *nodes, "--prefill", f"{half}x{GPUS}", "--decode", f"{half}x{GPUS}"],
        "experts": [
            "experts",
            *nodes,
            "--loads",
            str(_load_file(tmp)),
            "--replicas",
            "128",
            "--ep",
            "64",
        ],
        "record start": ["record", "start", *source, "--job", "7"],
    }


def measure(dump: Path, nodes: int, job: int, repeat: int) -> dict[str, list[Sample]]:
    """*repeat* rounds of every stage, kept and fresh, interleaved."""
    width = len(str(nodes)) if nodes > 9999 else 4
    with tempfile.TemporaryDirectory(prefix="topograph-index-") as name:
        tmp = Path(name)
        scontrol = _fake_scontrol(tmp, f"gpu[{1:0{width}d}-{job:0{width}d}]")
        kept, fresh = _configs(tmp, scontrol)
        commands = stages(dump, tmp, job, width)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        base = [sys.executable, "-m", "topograph_slurm", "--config"]
        samples: dict[str, list[Sample]] = {}
        for _ in range(repeat):
            for stage, argv in commands.items():
                runs = (
                    [(stage, kept)]
                    if stage == "generate"
                    else [
                        (f"{stage} @kept", kept),
                        (f"{stage} @fresh", fresh),
                    ]
                )
                for label, config in runs:
                    samples.setdefault(label, []).append(run([*base, str(config), *argv], env))
    return samples


def report(nodes: int, samples: dict[str, list[Sample]]) -> None:
    generate = samples["generate"]
    for label, got in samples.items():
        cpu = statistics.median(s.cpu for s in got)
        wall = statistics.median(s.wall for s in got)
        ratio = statistics.median(s.cpu / g.cpu for s, g in zip(got, generate, strict=True))
        rss = max(s.rss_mb for s in got)
        print(f"{nodes:>6} {label:<22} {wall:>7.2f} {cpu:>7.2f} {ratio:>8.2f} {rss:>7.0f}")


def _dump(nodes: int, rails: int, directory: Path) -> Path:
    """The simulated dump (``bench_parse.write_fabric``), written by a child process: a
    child's peak RSS counts what it inherited before ``exec``, so this process stays small."""
    code = (
        "import sys; from pathlib import Path; from bench_parse import write_fabric; "
        "print(write_fabric(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))[0])"
    )
    argv = [sys.executable, "-c", code, str(nodes), str(rails), str(directory)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "benchmarks")])}
    out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2048, 16384])
    parser.add_argument("--rails", type=int, default=8)
    parser.add_argument("--job", type=int, default=512, help="nodes of the job (default 512)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'nodes':>6} {'stage':<22} {'wall s':>7} {'cpu s':>7} {'x gen cpu':>8} {'RSS MB':>7}")
    with tempfile.TemporaryDirectory(prefix="topograph-index-dump-") as tmp:
        for nodes in args.nodes:
            dump = _dump(nodes, args.rails, Path(tmp))
            report(nodes, measure(dump, nodes, min(args.job, nodes), args.repeat))
            dump.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
