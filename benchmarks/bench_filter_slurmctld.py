"""Cost of the generated job_submit.lua inside a real slurmctld (24.11 and/or 26.05).

slurmctld runs job_submit.lua inside the submit RPC, under its job write lock, so its cost is
added to every submission. This starts one test-cluster slurmctld (controller only: held jobs
need no slurmd), then submits the same burst of ``sbatch --hold --tp-size=8 -N 4 --wrap true``
with and without ``JobSubmitPlugins=lua`` (slurmctld restarted in between, ``sdiag -r`` before
every burst) and compares sdiag's average REQUEST_SUBMIT_BATCH_JOB time. Rounds run in ABBA
order (with, without, without, with) so a drift (the job table grows over the run) cancels
out. The client is the same in both: the --tp-size SPANK plugin, no cli_filter.lua (that runs
in sbatch, not in slurmctld).

Usage: python benchmarks/bench_filter_slurmctld.py [--version 24.11|26.05|all] [--jobs 200]
       [--rounds 1] [--json]
Target (issue 5): overhead <= 10 %.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "slurm-test-cluster"))

import harness  # noqa: E402
from harness import Cluster, ClusterSpec, NodeSpec, PartitionSpec  # noqa: E402

from topograph_slurm.filter import (  # noqa: E402
    FilterFacts,
    PartitionFacts,
    render_filters,
    spank_compile_command,
)
from topograph_slurm.slurm_version import SlurmVersion  # noqa: E402

TARGET_PCT = 10.0
SPANK_SO = "/etc/slurm/tpsize.so"
SUBMIT = "sbatch --hold --tp-size=8 -N 4 --wrap true"
_RPC = re.compile(
    r"REQUEST_SUBMIT_BATCH_JOB\s*\(\s*\d+\)\s*count:(\d+)\s+ave_time:(\d+)\s+total_time:(\d+)"
)


@dataclass(frozen=True)
class Burst:
    """sdiag's view of one burst of submissions."""

    with_filter: bool
    count: int
    ave_us: int
    wall_s: float


def spec_for(release: str) -> ClusterSpec:
    """16 GPU nodes in four 4-node blocks, the generated job_submit.lua and the SPANK line."""
    facts = FilterFacts(
        (PartitionFacts("gpu", "block", 4, base_block=4),),
        SlurmVersion.parse(release),
        default_partition="gpu",
        spank_path=SPANK_SO,
    )
    files = render_filters(facts)
    nodes = [NodeSpec(f"gpu{i:02d}", cpus=4, gpus=4) for i in range(1, 17)]
    blocks = [f"BlockName=b{b} Nodes=gpu[{4 * b + 1:02d}-{4 * b + 4:02d}]" for b in range(4)]
    return ClusterSpec(
        nodes=nodes,
        partitions=[PartitionSpec("gpu", default=True)],
        topology_plugin="topology/block",
        topology_conf="\n".join([*blocks, "BlockSizes=4"]) + "\n",
        job_submit_lua=files["job_submit.lua"],
        plugstack_conf=files["plugstack.conf"],
        extra_files={"tpsize.c": files["tpsize.c"]},
    )


def burst(cluster: Cluster, jobs: int, with_filter: bool) -> Burst:
    """Reset sdiag, submit ``jobs`` held jobs one after another, read the submit-RPC average."""
    cluster.exec(["sdiag", "-r"]).check("sdiag -r")
    start = time.monotonic()
    loop = f"for i in $(seq {jobs}); do {SUBMIT} >/dev/null || exit 1; done"
    cluster.exec(loop, timeout=1800).check("submission burst")
    wall = time.monotonic() - start
    match = _RPC.search(cluster.exec(["sdiag"]).check("sdiag").stdout)
    if match is None:
        raise harness.HarnessError("sdiag shows no REQUEST_SUBMIT_BATCH_JOB line")
    return Burst(with_filter, int(match.group(1)), int(match.group(2)), wall)


def switch(cluster: Cluster, spec: ClusterSpec, with_filter: bool) -> None:
    """Restart slurmctld with or without JobSubmitPlugins=lua (the script stays on disk)."""
    target = spec if with_filter else replace(spec, job_submit_lua=None)
    cluster.reconfigure(target)
    cluster.exec(["scancel", "-u", "root"])  # equal queues: held jobs would pile up


def run_version(version: str, jobs: int, rounds: int) -> dict[str, object]:
    image = harness.ensure_image(version)
    release = re.search(
        r"\d+\.\d+\.\d+", harness.check_image_version(harness.docker_client(), image, version)
    )
    assert release is not None
    spec = spec_for(release.group(0))
    with Cluster(spec, image, controller_only=True) as cluster:
        src = Path("/etc/slurm/tpsize.c")
        cluster.exec(spank_compile_command("cc", src, Path(SPANK_SO))).check("spank build")
        cluster.exec(f"{SUBMIT} && scancel -u root").check("warm-up submission")
        results: list[Burst] = []
        for _ in range(rounds):
            for with_filter in (True, False, False, True):
                switch(cluster, spec, with_filter)
                results.append(burst(cluster, jobs, with_filter))
        log = cluster.slurmctld_log()
    on = statistics.mean(b.ave_us for b in results if b.with_filter)
    off = statistics.mean(b.ave_us for b in results if not b.with_filter)
    return {
        "version": version,
        "release": release.group(0),
        "jobs_per_burst": jobs,
        "bursts": [asdict(b) for b in results],
        "ave_us_with": on,
        "ave_us_without": off,
        "overhead_pct": 100.0 * (on - off) / off if off else float("nan"),
        "filter_decisions_logged": log.count("topograph: job of uid"),
    }


def report(result: dict[str, object]) -> str:
    lines = [f"Slurm {result['release']}: {result['jobs_per_burst']} submissions per burst"]
    for b in result["bursts"]:  # type: ignore[attr-defined]
        label = "with job_submit.lua   " if b["with_filter"] else "without job_submit.lua"
        lines.append(
            f"  {label}  count {b['count']:4d}  ave {b['ave_us']:6d} us  wall {b['wall_s']:.1f} s"
        )
    pct = float(result["overhead_pct"])  # type: ignore[arg-type]
    verdict = "OK" if pct <= TARGET_PCT else "OVER TARGET"
    lines.append(
        f"  mean ave: with {result['ave_us_with']:.0f} us, without {result['ave_us_without']:.0f}"
        f" us -> overhead {pct:+.1f} % (target <= {TARGET_PCT:.0f} %: {verdict})"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="all", choices=[*harness.VERSIONS, "all"])
    parser.add_argument("--jobs", type=int, default=200, help="submissions per burst")
    parser.add_argument("--rounds", type=int, default=1, help="ABBA rounds (4 bursts each)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args()
    versions = list(harness.VERSIONS) if args.version == "all" else [args.version]
    results = [run_version(v, args.jobs, args.rounds) for v in versions]
    for result in results:
        print(json.dumps(result) if args.json else report(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
