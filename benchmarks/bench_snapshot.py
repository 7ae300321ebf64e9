"""Scale benchmark: reading a collected snapshot (``gres --snapshot``, ``generate --snapshot``)
against ``generate --ibnetdiscover`` of the same fabric, in one run.

    python benchmarks/bench_snapshot.py                   # 2,048 and 16,384 nodes x 8 rails
    python benchmarks/bench_snapshot.py --nodes 2048 --repeat 5

The snapshot holds, for every node of the simulated fabric, the real 80 kB ``nvidia-smi -q``
of an HGX H100 (tests/fixtures/real/nvidia-smi-q, 8 GPUs, fabric Completed) and the real
DGX A100 ``nvidia-smi topo -m``, hard-linked (the bytes read are the same; the disk holds one
copy), and the fabric's ibnetdiscover dump as ``fabric/ibnetdiscover.txt``, as
``collect --ibnetdiscover-on`` leaves it. Stages, each in its own child process (imports before
the clock), ``--repeat`` rounds in turn:

* ``generate``: ``generate --ibnetdiscover DUMP --format tree`` (the reference);
* ``generate-snapshot``: ``generate --snapshot DIR --format tree --block-source ib`` (every
  node's ``-q`` and ``topo -m`` read, the dump analysed; ``ib`` because this single-node
  NVSwitch capture, CliqueId 0 and an all-zero ClusterUUID, is refused as NVLink blocks
  until issue 34 item 10 lands);
* ``gres-snapshot``: ``gres --snapshot DIR`` (every node's ``topo -m`` and product names);
* ``…-raw``: the same two on the same snapshot without ``facts.json`` (every node's texts
  parsed, as for a snapshot an older release collected or one whose files changed).

The snapshot with facts gets them as ``collect`` writes them (``snapshot_facts``, after the
texts); that one-time cost is shown apart.

The table shows each stage's best CPU seconds (user + system, children included: steadier
than wall time on a shared machine), its peak RSS, and the median over rounds of its CPU
time over ``generate``'s in the same round (``paired``).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_parse import Sample, print_sample, sample, scale_parser, write_fabric

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from topograph_slurm.sources.snapshot import FACTS_FILE, snapshot_facts  # noqa: E402

STAGES = [
    "generate",
    "generate-snapshot",
    "gres-snapshot",
    "generate-snapshot-raw",
    "gres-snapshot-raw",
]
REAL = REPO / "tests" / "fixtures" / "real"
Q = REAL / "nvidia-smi-q" / "h100-sxm-8gpu-hgx-q-fabric-completed.txt"
TOPO = REAL / "nvidia-smi-topo" / "dgx-a100-8gpu-12nic-mlx5-columns.txt"


def _cli(args: list[str]) -> None:
    import contextlib
    import io

    from topograph_slurm.cli.main import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(["--config", "/dev/null", *args], standalone_mode=False)


def _child(stage: str, dump: str, snapshot: str) -> None:
    import topograph_slurm.cli.generate
    import topograph_slurm.cli.gres  # noqa: F401

    raw = f"{snapshot}-raw"
    generate = ["generate", "--format", "tree", "--block-source", "ib", "--snapshot"]
    runs = {
        "generate": ["generate", "--ibnetdiscover", dump, "--format", "tree"],
        "generate-snapshot": [*generate, snapshot],
        "gres-snapshot": ["gres", "--snapshot", snapshot],
        "generate-snapshot-raw": [*generate, raw],
        "gres-snapshot-raw": ["gres", "--snapshot", raw],
    }
    print_sample(lambda: _cli(runs[stage]))


def write_snapshot_dir(dump: Path, root: Path) -> int:
    """A snapshot of every host of *dump* (manifest written directly: the writer's fsync per
    file is not what is measured here); returns the node count."""
    from topograph_slurm.sources.snapshot import (
        KEY_Q,
        KEY_TOPO,
        MANIFEST,
        SNAPSHOT_FORMAT,
        SNAPSHOT_VERSION,
    )

    hosts = sorted(set(re.findall(r'"(\S+) mlx5_\d+"', dump.read_text())))
    results = []
    for host in hosts:
        folder = root / "nodes" / host
        folder.mkdir(parents=True)
        for key, source in ((KEY_Q, Q), (KEY_TOPO, TOPO)):
            os.link(source, folder / f"{key}.txt")
            entry = {"node": host, "command": key, "exit_code": 0}
            results.append(entry | {"file": f"nodes/{host}/{key}.txt"})
    (root / "fabric").mkdir()
    os.link(dump, root / "fabric" / "ibnetdiscover.txt")
    fabric = {"node": hosts[0], "command": "ibnetdiscover", "exit_code": 0}
    manifest = {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "results": results,
        "fabric": fabric | {"file": "fabric/ibnetdiscover.txt"},
    }
    (root / MANIFEST).write_text(json.dumps(manifest))
    return len(hosts)


def main(argv: list[str] | None = None) -> int:
    parser = scale_parser(__doc__.split("\n\n")[0], STAGES)
    parser.add_argument("--child", nargs=3, help="internal")
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    print(f"{'nodes':>6} {'stage':<22} {'CPU s':>7} {'paired':>7} {'RSS MB':>7}")
    for nodes in args.nodes:
        with tempfile.TemporaryDirectory(prefix="topograph-bench-") as tmp:
            dump, _ = write_fabric(nodes, args.rails, Path(tmp))
            snapshot = Path(tmp) / "snapshot"
            write_snapshot_dir(dump, Path(f"{snapshot}-raw"))
            write_snapshot_dir(dump, snapshot)
            start = time.process_time()
            (snapshot / FACTS_FILE).write_bytes(snapshot_facts(snapshot))
            made = time.process_time() - start
            print(f"{nodes:>6} {'(facts at collect)':<22} {made:>7.2f}")
            samples: dict[str, list[Sample]] = {name: [] for name in STAGES}
            for _ in range(args.repeat):
                for name in STAGES:
                    command = [sys.executable, __file__, "--child", name, str(dump)]
                    samples[name].append(sample([*command, str(Path(tmp) / "snapshot")]))
            base = samples["generate"]
            for name, got in samples.items():
                paired = statistics.median(
                    s.cpu_seconds / b.cpu_seconds for s, b in zip(got, base, strict=True)
                )
                best = min(got, key=lambda s: s.cpu_seconds)
                print(
                    f"{nodes:>6} {name:<22} {best.cpu_seconds:>7.2f} {paired:>7.2f} "
                    f"{max(s.peak_rss_mb for s in got):>7.0f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
