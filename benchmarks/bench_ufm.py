"""Scale benchmark: ``generate`` from UFM's answers against ``generate`` from ibnetdiscover text,
for the same simulated fabric.

    python benchmarks/bench_ufm.py                       # 2,048 and 16,384 nodes x 8 rails
    python benchmarks/bench_ufm.py --nodes 2048 --repeat 5
    python benchmarks/bench_ufm.py --repo /tmp/old       # another checkout's code, same data
    python benchmarks/bench_ufm.py --base /tmp/old       # every stage with that code too, paired

The UFM answers are the ones the tests serve from the loopback stand-in
(``tests/support/ufm_standin.ufm_json_from_fabric`` of the parsed dump), stored as a snapshot
by the same writer ``collect --ufm`` uses; ``generate --snapshot`` then reads them offline, so
the clock covers reading, decoding and translating the answers and the whole analysis, not
HTTPS. Stages, each in its own child process (peak RSS is that stage's alone), ``--repeat``
rounds interleaved:

* ``ibnetdiscover``: ``generate --ibnetdiscover DUMP --format tree`` (the yardstick);
* ``ufm``: ``generate --snapshot SNAP --format tree``;
* ``parse``: the ibnetdiscover parse alone (text → Fabric);
* ``ufm-translate``: ``load_responses`` + ``fabric_from_ufm`` alone (JSON → Fabric);
* ``json-loads``: the standard library's ``json.loads`` of the same answers (what decoding
  alone cost before ``msgspec``).

"paired" is the median over rounds of each stage's time over the ``ibnetdiscover`` stage just
before it, "spread" the lowest and highest of those ratios, "cpu paired" the median of the
same ratio of CPU times (user + system, forked children included). ``--base DIR`` adds a
``STAGE@base`` stage for every stage: that stage with another checkout's code, in the same
rounds (before and after, paired). The target from the project issue: ``ufm`` within 2x of
``ibnetdiscover``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench_parse import Sample, print_sample, sample, scale_parser, write_fabric

REPO = Path(__file__).resolve().parent.parent


def _generate(args: list[str]) -> None:
    import contextlib
    import io

    from topograph_slurm.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["generate", *args, "--format", "tree"], standalone_mode=False)
    assert "SwitchName=" in out.getvalue()


def ibnetdiscover(work: Path) -> None:
    _generate(["--ibnetdiscover", str(work / "fabric.ibnetdiscover")])


def ufm(work: Path) -> None:
    _generate(["--snapshot", str(work / "snapshot")])


def parse(work: Path) -> None:
    from topograph_slurm.sources.ibnetdiscover import parse_ibnetdiscover

    path = work / "fabric.ibnetdiscover"
    assert parse_ibnetdiscover(path.read_text(), str(path)).links


def ufm_translate(work: Path) -> None:
    from topograph_slurm.sources.ufm import fabric_from_ufm, load_responses

    assert fabric_from_ufm(load_responses(work / "snapshot")).links


def json_loads(work: Path) -> None:
    for name in ("systems", "ports", "links", "unhealthy_ports"):
        json.loads((work / "snapshot" / "ufm" / f"{name}.json").read_text())


STAGES: dict[str, Callable[[Path], None]] = {
    "ibnetdiscover": ibnetdiscover,
    "ufm": ufm,
    "parse": parse,
    "ufm-translate": ufm_translate,
    "json-loads": json_loads,
}


def _child(stage: str, work: str, repo: str) -> None:
    """Inside the child: import the code under test (from *repo*), run once, print a sample.
    The CLI, which both paths share, is imported before the clock starts; what a stage
    imports beyond it (its source; msgspec and numpy for UFM) is timed, as a run pays it."""
    sys.path.insert(0, repo)
    import topograph_slurm
    import topograph_slurm.cli.main

    assert Path(topograph_slurm.__file__).is_relative_to(repo), topograph_slurm.__file__
    print_sample(lambda: STAGES[stage](Path(work)))


def run_stage(stage: str, work: Path, repo: Path) -> Sample:
    return sample([sys.executable, __file__, "--child", stage, str(work), str(repo)], cwd=work)


def write_inputs(nodes: int, rails: int, work: Path) -> tuple[float, float]:
    """The dump and, from the very fabric parsed out of it, UFM's answers as a snapshot;
    returns the sizes (MB) of both."""
    sys.path.insert(0, str(REPO))
    from tests.support.ufm_standin import ufm_json_from_fabric
    from topograph_slurm.collect import collect
    from topograph_slurm.collect.plan import CollectPlan
    from topograph_slurm.sources.ibnetdiscover import read_ibnetdiscover
    from topograph_slurm.sources.ufm import UfmResponses, snapshot_files

    dump, _ = write_fabric(nodes, rails, work)
    dump = dump.rename(work / "fabric.ibnetdiscover")
    answers = ufm_json_from_fabric(read_ibnetdiscover(dump))
    texts = {key: json.dumps(value) for key, value in answers.items()}
    files = snapshot_files(UfmResponses(**texts, url="https://ufm.bench"))
    manifest = {"ufm": {"url": "https://ufm.bench", "files": sorted(files)}}
    collect(CollectPlan(nodes=[]), work / "snapshot", extra_files=files, extra_manifest=manifest)
    return dump.stat().st_size / 1e6, sum(len(t) for t in texts.values()) / 1e6


def _print_stage(nodes: int, rails: int, label: str, got: list[Sample], base: list[Sample]) -> None:
    """One row: best wall time, best over best, the per-round ratios' median and range, best
    CPU time, the per-round CPU ratios' median, highest peak RSS."""
    best = min(s.seconds for s in got)
    ratios = [s.seconds / b.seconds for s, b in zip(got, base, strict=True)]
    cpu = statistics.median(s.cpu_seconds / b.cpu_seconds for s, b in zip(got, base, strict=True))
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
    print(
        f"{nodes:>6} {rails:>5} {label:<14} {best:>7.2f} "
        f"{best / min(s.seconds for s in base):>7.2f} {statistics.median(ratios):>6.2f} "
        f"{spread:>11} {min(s.cpu_seconds for s in got):>7.2f} {cpu:>10.2f} "
        f"{max(s.peak_rss_mb for s in got):>7.0f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = scale_parser(__doc__.split("\n\n")[0], list(STAGES))
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose code is timed")
    parser.add_argument("--base", type=Path, help="also time every stage with this code")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--write", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    if args.write:
        print(*write_inputs(int(args.write[1]), int(args.write[2]), Path(args.write[0])))
        return 0
    stages = ["ibnetdiscover", *[s for s in args.stages if s != "ibnetdiscover"]]
    print(f"code from {args.repo.resolve()}")
    print(
        f"{'nodes':>6} {'rails':>5} {'stage':<14} {'wall s':>7} {'x ibnet':>7} {'paired':>6} "
        f"{'spread':>11} {'cpu s':>7} {'cpu paired':>10} {'RSS MB':>7}"
    )
    for nodes in args.nodes:
        with tempfile.TemporaryDirectory(prefix="topograph-bench-ufm-") as tmp:
            work = Path(tmp)
            # In a child: Linux keeps a process's peak RSS across fork and exec, so the parent
            # must never hold the big fabric its stage children are measured against.
            command = [sys.executable, __file__, "--write", str(work), str(nodes), str(args.rails)]
            sizes = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            dump_mb, json_mb = map(float, sizes.split())
            print(f"{nodes:>6} {args.rails:>5} dump {dump_mb:.1f} MB, UFM answers {json_mb:.1f} MB")
            runs = [(name, name, args.repo) for name in stages]
            if args.base:
                runs += [(f"{name}@base", name, args.base) for name in stages]
            samples: dict[str, list[Sample]] = {label: [] for label, _, _ in runs}
            for _ in range(args.repeat):
                for label, name, repo in runs:
                    samples[label].append(run_stage(name, work, repo))
            for label, got in samples.items():
                _print_stage(nodes, args.rails, label, got, samples["ibnetdiscover"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
