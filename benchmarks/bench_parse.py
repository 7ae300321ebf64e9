"""Scale benchmark: parse simulated rail-optimised fabrics, against a bare read+split scan.

    python benchmarks/bench_parse.py                      # 2,048 and 16,384 nodes x 8 rails
    python benchmarks/bench_parse.py --nodes 2048 --repeat 5
    python benchmarks/bench_parse.py --base /tmp/old     # every stage with that code too, paired

Every stage runs in its own child process (so peak RSS is that stage's alone, read from
``ru_maxrss``), interleaved with the bare scan, ``--repeat`` times; the table shows the best
time of each (shared CI machines are noisy), the ratio of best to best in the same run, and
("paired") the median over rounds of each stage's time over the bare scan just before it.
The target from the project issue: the whole ``generate`` within 3x the bare scan and
500 MB peak RSS on the 16,384-node fabric; ``generate`` runs the real CLI in-process.

``--base DIR`` adds a ``STAGE@base`` stage for every stage but the bare scan: that stage with
another checkout's code, in the same rounds, so an A/B of two commits shares the machine's
state of each moment.

To measure another stage, add a function ``f(path) -> None`` to ``STAGES``; it is timed from
the start of reading the file to the end (imports happen before the clock starts, in
``prepare``).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def bare_scan(path: str) -> None:
    """The yardstick: read the text and split every line into words."""
    text = Path(path).read_text()
    for line in text.splitlines():
        line.split()


def parse(path: str) -> None:
    """Read and parse into a Fabric (what every ``generate`` run does first)."""
    from topograph_slurm.sources.ibnetdiscover import parse_ibnetdiscover

    fabric = parse_ibnetdiscover(Path(path).read_text(), path)
    assert fabric.links


def generate(path: str) -> None:
    """The whole ``topograph-slurm generate --format tree`` (parse, analysis, rendering)."""
    import contextlib
    import io

    from topograph_slurm.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["generate", "--ibnetdiscover", path, "--format", "tree"], standalone_mode=False)
    assert "SwitchName=" in out.getvalue()


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[str], None]
    prepare: Callable[[], None] = lambda: None


def _import_parser() -> None:
    import topograph_slurm.sources.ibnetdiscover  # noqa: F401


def _import_cli() -> None:
    import topograph_slurm.cli.main  # noqa: F401


STAGES: dict[str, Stage] = {
    "bare-scan": Stage("bare-scan", bare_scan),
    "parse": Stage("parse", parse, _import_parser),
    "generate": Stage("generate", generate, _import_cli),
}


@dataclass(frozen=True)
class Sample:
    seconds: float  # wall clock
    cpu_seconds: float  # user+system of the child: steadier than wall time on a busy machine
    peak_rss_mb: float


def _usage() -> tuple[float, float, float]:
    """CPU seconds and peak RSS (MB) of this process and its children (``generate`` forks
    a child for half of a large dump): (cpu, own peak RSS, largest child's peak RSS)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    return cpu, me.ru_maxrss / 1024, kids.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def _child(stage_name: str, path: str, repo: str) -> None:
    """Entry point inside the child process: prints one JSON sample of the code in *repo*.

    Peak RSS is this process's plus its largest child's: an upper bound on what the stage
    held at once, since the forked child's pages shared with the parent count twice."""
    sys.path.insert(0, repo)
    stage = STAGES[stage_name]
    stage.prepare()
    if "topograph_slurm" in sys.modules:
        module = sys.modules["topograph_slurm"].__file__ or ""
        assert Path(module).is_relative_to(repo), module
    print_sample(lambda: stage.run(path))


def print_sample(run: Callable[[], None]) -> None:
    """Run *run* once and print its :class:`Sample` as the JSON line :func:`sample` reads."""
    cpu_before = _usage()[0]
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    cpu_after, own_rss, child_rss = _usage()
    sample = {"seconds": seconds, "cpu_seconds": cpu_after - cpu_before}
    print(json.dumps(sample | {"peak_rss_mb": own_rss + child_rss}))


def sample(command: list[str], cwd: Path | None = None) -> Sample:
    """The :class:`Sample` a child process (*command*) printed last."""
    out = subprocess.run(command, check=False, capture_output=True, text=True, cwd=cwd)
    if out.returncode:
        sys.stderr.write(out.stderr)  # the child's own error, not just its exit status
        out.check_returncode()
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return Sample(data["seconds"], data["cpu_seconds"], data["peak_rss_mb"])


def run_stage(stage_name: str, path: Path, repo: Path = REPO) -> Sample:
    return sample([sys.executable, __file__, "--child", stage_name, str(path), str(repo)])


def write_fabric(nodes: int, rails: int, directory: Path) -> tuple[Path, float]:
    """The simulated dump as a file; returns its path and the generation time."""
    from topograph_slurm.sources.sim import parse_sim_spec, write_ibnetdiscover

    spec = parse_sim_spec(f"nodes={nodes},rails={rails},su=32,tiers=3")
    path = directory / f"sim-{nodes}x{rails}.ibnetdiscover"
    start = time.perf_counter()
    with path.open("w") as fp:
        write_ibnetdiscover(spec, fp)
    return path, time.perf_counter() - start


@dataclass(frozen=True)
class Measured:
    """One stage over all rounds: best time, highest RSS, and the median of its per-round
    ratios to the bare scan run just before it (pairs share the machine's state of the moment,
    which on a shared host moves even the bare scan a lot from one round to the next)."""

    best: Sample
    paired_ratio: float


def measure(
    path: Path, stages: list[str], repeat: int, base: Path | None = None
) -> dict[str, Measured]:
    """*repeat* rounds, each running every stage once in order (the bare scan first), and
    with *base* every stage but the bare scan again with that checkout's code."""
    runs = [(name, name, REPO) for name in stages]
    if base is not None:
        runs += [(f"{name}@base", name, base) for name in stages[1:]]
    samples: dict[str, list[Sample]] = {label: [] for label, _, _ in runs}
    for _ in range(repeat):
        for label, name, repo in runs:
            samples[label].append(run_stage(name, path, repo))
    bare = samples[stages[0]]
    return {
        name: Measured(
            Sample(
                min(s.seconds for s in got),
                min(s.cpu_seconds for s in got),
                max(s.peak_rss_mb for s in got),
            ),
            statistics.median(s.seconds / b.seconds for s, b in zip(got, bare, strict=True)),
        )
        for name, got in samples.items()
    }


def scale_parser(description: str, stages: list[str]) -> argparse.ArgumentParser:
    """The options every scale benchmark takes: fabric sizes, rails, rounds, stages."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--nodes", type=int, nargs="+", default=[2048, 16384])
    parser.add_argument("--rails", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stages", nargs="+", default=stages, choices=stages)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = scale_parser(__doc__.split("\n\n")[0], list(STAGES))
    parser.add_argument("--base", type=Path, help="also time every stage with this checkout")
    child = ("STAGE", "PATH", "REPO")
    parser.add_argument("--child", nargs=3, metavar=child, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    stages = ["bare-scan", *[s for s in args.stages if s != "bare-scan"]]
    header = ("nodes", "rails", "MB", "stage", "wall s", "x bare", "paired", "cpu s", "x bare")
    print("{:>6} {:>5} {:>6} {:<13} {:>7} {:>6} {:>6} {:>7} {:>6} {:>7}".format(*header, "RSS MB"))
    with tempfile.TemporaryDirectory(prefix="topograph-bench-") as tmp:
        for nodes in args.nodes:
            path, gen_seconds = write_fabric(nodes, args.rails, Path(tmp))
            size_mb = path.stat().st_size / 1e6
            result = measure(path, stages, args.repeat, args.base and args.base.resolve())
            bare = result["bare-scan"].best
            for name in result:
                s, paired = result[name].best, result[name].paired_ratio
                print(
                    f"{nodes:>6} {args.rails:>5} {size_mb:>6.1f} {name:<13} {s.seconds:>7.2f} "
                    f"{s.seconds / bare.seconds:>6.2f} {paired:>6.2f} {s.cpu_seconds:>7.2f} "
                    f"{s.cpu_seconds / bare.cpu_seconds:>6.2f} {s.peak_rss_mb:>7.0f}"
                )
            print(f"{'':>6} {'':>5} {'':>6} {'(sim write)':<13} {gen_seconds:>7.2f}")
            path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
