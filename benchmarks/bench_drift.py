"""Scale benchmark: what keeping the fabric's state costs a cron run of ``generate -o``.

    python benchmarks/bench_drift.py                      # 2,048 and 16,384 nodes x 8 rails
    python benchmarks/bench_drift.py --nodes 2048 --repeat 5

A run with ``-o FILE`` reads the summary the last run kept beside FILE, puts back the nodes
that are off (``--keep-missing``), compares (the report's "Changes since the last run") and
records today's summary. Stages, each in its own child process, ``--repeat`` rounds:

* ``generate``: ``generate --ibnetdiscover today --format tree`` to stdout (keeps nothing);
* ``generate-o``: the same with ``-o FILE --slurm-nodes <all> --report`` (JSON) beside the
  summary of yesterday's fabric, where today's lacks its last node: it is kept, reported,
  and the new summary is written;
* ``diff``: ``diff yesterday-summary today`` (the summary decoded, today's dump analysed).

The table shows the best wall time of each stage and the median over rounds of its time over
``generate`` in the same round (``paired``).
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_parse import Sample, print_sample, sample, scale_parser, write_fabric

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

STAGES = ["generate", "generate-o", "diff"]


def _cli(args: list[str]) -> None:
    import contextlib
    import io

    from topograph_slurm.cli.main import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(["--config", "/dev/null", *args], standalone_mode=False)
        except SystemExit as exit_:  # diff exits 1 on a change
            assert exit_.code in (0, 1), exit_.code


def _child(stage: str, today: str, state: str, nodes: str) -> None:
    """Inside the child: time one stage (imports happen before the clock starts)."""
    import topograph_slurm.cli.diff
    import topograph_slurm.cli.generate  # noqa: F401

    out = str(Path(state) / "topology.conf")
    listed = f"gpu[{1:0{len(nodes)}d}-{nodes}]"  # nodes comes zero-padded
    runs = {
        "generate": ["generate", "--ibnetdiscover", today, "--format", "tree"],
        "generate-o": [
            *("generate", "--ibnetdiscover", today, "--format", "tree", "-o", out),
            *("--slurm-nodes", listed, "--report", str(Path(state) / "report.json")),
            *("--json", "--force"),
        ],
        "diff": ["diff", str(Path(state) / ".topology.conf.fabric.json"), today],
    }
    print_sample(lambda: _cli(runs[stage]))


def main(argv: list[str] | None = None) -> int:
    parser = scale_parser(__doc__.split("\n\n")[0], STAGES)
    parser.add_argument("--child", nargs=4, help="internal")
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    print(f"{'nodes':>6} {'stage':<11} {'wall s':>7} {'paired':>7} {'RSS MB':>7}")
    with tempfile.TemporaryDirectory(prefix="topograph-bench-") as tmp:
        for nodes in args.nodes:
            for name, best, paired in _measure(Path(tmp), nodes, args.rails, args.repeat):
                print(
                    f"{nodes:>6} {name:<11} {best.seconds:>7.2f} {paired:>7.2f} "
                    f"{best.peak_rss_mb:>7.0f}"
                )
    return 0


def _measure(tmp: Path, nodes: int, rails: int, repeat: int) -> list[tuple[str, Sample, float]]:
    for day in ("yesterday", "today"):
        (tmp / day).mkdir(exist_ok=True)
    yesterday, _ = write_fabric(nodes, rails, tmp / "yesterday")
    today, _ = write_fabric(nodes - 1, rails, tmp / "today")
    seeded = tmp / "seeded"
    shutil.rmtree(seeded, ignore_errors=True)
    seeded.mkdir()
    _cli(["generate", "--ibnetdiscover", str(yesterday), "-o", str(seeded / "topology.conf")])
    width = max(4, len(str(nodes)))  # as the simulator names nodes
    samples: dict[str, list[Sample]] = {name: [] for name in STAGES}
    for _ in range(repeat):
        for name in STAGES:
            state = tmp / "state"
            shutil.rmtree(state, ignore_errors=True)
            shutil.copytree(seeded, state)
            command = [sys.executable, __file__, "--child", name, str(today), str(state)]
            samples[name].append(sample([*command, f"{nodes:0{width}d}"]))
    base = samples["generate"]
    return [
        (
            name,
            min(got, key=lambda s: s.seconds),
            statistics.median(s.seconds / b.seconds for s, b in zip(got, base, strict=True)),
        )
        for name, got in samples.items()
    ]


if __name__ == "__main__":
    sys.exit(main())
