"""Cost of the generated job_submit.lua inside a real slurmctld (24.11 and/or 26.05).

slurmctld runs job_submit.lua inside the submit RPC, under its job write lock, so its cost is
added to every submission. This starts one test-cluster slurmctld (controller only: held jobs
need no slurmd), then submits the same burst of ``sbatch --hold --tp-size=8 -N 4 --wrap true``
and reads sdiag's average REQUEST_SUBMIT_BATCH_JOB time (``sdiag -r`` before every sub-burst).

1. Restart-separated: no job submit plugin, ``JobSubmitPlugins=lua`` with an empty
   job_submit.lua (Slurm's own cost of the plugin: the job_desc proxy, the partition list and
   the ``slurm.jobs`` table it rebuilds from every job record), and the generated script.
   slurmctld restarts for each visit, visits run in palindromic order (A B C C B A) so drift
   cancels, and each configuration's figure is the median of its sub-bursts, plus slurmctld's
   CPU time per submission. On a shared machine this is noisy: visits of one configuration
   differ by 2x when other work comes and goes.
2. Paired, one slurmctld: the empty script and the generated one alternate in place
   (job_submit/lua reloads a script whose mtime moved); adjacent sub-bursts form a pair, so load
   changes hit both sides alike. One call of the script is smaller than the remaining noise, so
   the generated side calls its slurm_job_submit ``--repeat`` times per job; the median paired
   difference divided by that is the cost of one call, reported as a share of a plain
   submission (phase 1's "none").

The client is the same throughout: the --tp-size SPANK plugin, no cli_filter.lua (that runs in
sbatch, not in slurmctld).

Usage: python benchmarks/bench_filter_slurmctld.py [--version 24.11|26.05|all] [--jobs 200]
       [--rounds 1] [--samples 10] [--pairs 30] [--pair-jobs 20] [--repeat 25] [--json]
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "slurm-test-cluster"))

import harness  # noqa: E402
from harness import Cluster, ClusterSpec, NodeSpec, PartitionSpec  # noqa: E402

from topograph_slurm.model.slurm_version import SlurmVersion  # noqa: E402
from topograph_slurm.render.filters import (  # noqa: E402
    FilterFacts,
    PartitionFacts,
    render_filters,
)
from topograph_slurm.slurm.spank import spank_compile_command  # noqa: E402

TARGET_PCT = 10.0
SPANK_SO = "/etc/slurm/tpsize.so"
SUBMIT = "sbatch --hold --tp-size=8 -N 4 --wrap true"
WARM_UP = 20
EMPTY_LUA = """function slurm_job_submit(job_desc, part_list, submit_uid)
  return slurm.SUCCESS
end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
return slurm.SUCCESS
"""
_RPC = re.compile(
    r"REQUEST_SUBMIT_BATCH_JOB\s*\(\s*\d+\)\s*count:(\d+)\s+ave_time:(\d+)\s+total_time:(\d+)"
)


@dataclass(frozen=True)
class Visit:
    """One configuration's turn: sdiag averages of its sub-bursts, slurmctld CPU over all."""

    config: str
    jobs: int
    queue_before: int
    ave_us: list[int]
    cpu_us: float
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


def submit(cluster: Cluster, jobs: int) -> float:
    """Submit ``jobs`` held jobs one after another; wall seconds."""
    start = time.monotonic()
    loop = f"for i in $(seq {jobs}); do {SUBMIT} >/dev/null || exit 1; done"
    cluster.exec(loop, timeout=1800).check("submission burst")
    return time.monotonic() - start


def sdiag_ave(cluster: Cluster) -> int:
    """sdiag's average REQUEST_SUBMIT_BATCH_JOB time since the last ``sdiag -r``, in us."""
    match = _RPC.search(cluster.exec(["sdiag"]).check("sdiag").stdout)
    if match is None:
        raise harness.HarnessError("sdiag shows no REQUEST_SUBMIT_BATCH_JOB line")
    return int(match.group(2))


def cpu_us(cluster: Cluster) -> float:
    """slurmctld's user+system CPU so far (all threads, exited RPC threads included), in us.

    On a shared machine an RPC's wall time grows with every other busy process; its CPU time
    does not, so this is the steadier figure.
    """
    out = cluster.exec(
        "echo $(getconf CLK_TCK) $(awk '{print $14+$15}' /proc/$(pidof slurmctld)/stat)"
    ).check("slurmctld CPU")
    tck, ticks = out.stdout.split()
    return 1e6 * float(ticks) / float(tck)


def visit(cluster: Cluster, config: str, jobs: int, samples: int) -> Visit:
    """Warm up, then ``samples`` sub-bursts with ``sdiag -r`` before each."""
    queue = jobs_known(cluster)
    submit(cluster, WARM_UP)
    per = max(1, jobs // samples)
    aves: list[int] = []
    wall = 0.0
    cpu0 = cpu_us(cluster)
    for _ in range(samples):
        cluster.exec(["sdiag", "-r"]).check("sdiag -r")
        wall += submit(cluster, per)
        aves.append(sdiag_ave(cluster))
    cpu = (cpu_us(cluster) - cpu0) / (per * samples)
    return Visit(config, per * samples, queue, aves, cpu, wall)


def configs(spec: ClusterSpec) -> dict[str, ClusterSpec]:
    """Configuration name -> spec; the generated script is in ``spec``."""
    return {
        "none": replace(spec, job_submit_lua=None),
        "empty lua": replace(spec, job_submit_lua=EMPTY_LUA),
        "topograph": spec,
    }


def switch(cluster: Cluster, spec: ClusterSpec) -> None:
    """Restart slurmctld with ``spec``'s job submit setup; cancel the held jobs so far."""
    cluster.exec(["scancel", "-u", "root"])  # held jobs would pile up in the queue
    cluster.reconfigure(spec)


def jobs_known(cluster: Cluster) -> int:
    """Job records slurmctld holds, finished ones included.

    job_submit/lua rebuilds its ``slurm.jobs`` table from every record before each call, so
    its cost grows with this number (cancelled jobs stay MinJobAge seconds); the palindromic
    visit order gives every configuration the same average queue.
    """
    out = cluster.exec(["squeue", "-h", "-t", "all", "-o", "%i"]).check("squeue").stdout
    return len(out.split())


def recorded(cluster: Cluster) -> int:
    """Jobs whose AdminComment carries a topograph decision (the generated script ran)."""
    out = cluster.exec("scontrol -o show jobs | grep -c 'AdminComment=topograph:' || true")
    return int(out.stdout.strip() or 0)


def swap_script(cluster: Cluster, script: str) -> None:
    """Replace job_submit.lua in place; job_submit/lua reloads it on the next call because its
    mtime (whole seconds) moved on, so wait for the next second first."""
    time.sleep(1.05)
    cluster.write_files({"job_submit.lua": script})
    submit(cluster, 2)  # the reload (parsing the script) is not part of the figure


def sub_burst(cluster: Cluster, jobs: int) -> int:
    cluster.exec(["sdiag", "-r"]).check("sdiag -r")
    submit(cluster, jobs)
    return sdiag_ave(cluster)


def amplified(script: str, repeat: int) -> str:
    """The generated job_submit.lua, calling its slurm_job_submit ``repeat`` times per job.

    One call costs less than the noise of a shared machine; ``repeat`` calls do not, and the
    difference to the empty script divided by ``repeat`` is the cost of one call.
    """
    body, tail = script.rsplit("return slurm.SUCCESS", 1)
    wrapper = f"""
local topograph_job_submit = slurm_job_submit
function slurm_job_submit(job_desc, part_list, submit_uid)
  local rc = slurm.SUCCESS
  for _ = 1, {repeat:d} do
    rc = topograph_job_submit(job_desc, part_list, submit_uid)
  end
  return rc
end
"""
    return body + wrapper + "return slurm.SUCCESS" + tail


def paired(cluster: Cluster, script: str, pairs: int, jobs: int) -> list[tuple[int, int]]:
    """(empty script, generated script) sdiag averages of adjacent sub-bursts, one slurmctld.

    Swapping the script needs no restart, so the two alternate every few seconds and a change
    in the machine's load hits both sides of a pair alike; the order flips every pair.
    """
    out: list[tuple[int, int]] = []
    for i in range(pairs):
        figures: dict[str, int] = {}
        for name in ("empty", "topograph") if i % 2 == 0 else ("topograph", "empty"):
            swap_script(cluster, EMPTY_LUA if name == "empty" else script)
            figures[name] = sub_burst(cluster, jobs)
        out.append((figures["empty"], figures["topograph"]))
    return out


def run_version(
    version: str, jobs: int, rounds: int, samples: int, pairs: int, pair_jobs: int, repeat: int
) -> dict[str, Any]:
    image = harness.ensure_image(version)
    text = harness.check_image_version(harness.docker_client(), image, version)
    release = re.search(r"\d+\.\d+\.\d+", text)
    assert release is not None, text
    spec = spec_for(release.group(0))
    named = configs(spec)
    visits: list[Visit] = []
    with Cluster(spec, image, controller_only=True) as cluster:
        src = Path("/etc/slurm/tpsize.c")
        cluster.exec(spank_compile_command("cc", src, Path(SPANK_SO))).check("spank build")
        for _ in range(rounds):
            for name in [*named, *reversed(named)]:
                switch(cluster, named[name])
                visits.append(visit(cluster, name, jobs, samples))
        switch(cluster, spec)
        before = recorded(cluster)
        script = amplified(spec.job_submit_lua or "", repeat)
        pairs_us = paired(cluster, script, pairs, pair_jobs)
        swapped_in = recorded(cluster) - before
    expected = pairs * (pair_jobs + 2)  # every job of the generated script's sub-bursts
    if swapped_in != expected:
        raise harness.HarnessError(
            f"job_submit.lua swaps did not take: {swapped_in} jobs recorded, {expected} expected"
        )
    return {
        "version": version,
        "release": release.group(0),
        "jobs_per_visit": jobs,
        "samples_per_visit": samples,
        "visits": [asdict(v) for v in visits],
        "summary": summarise(visits),
        "pairs": pairs_us,
        "pair_jobs": pair_jobs,
        "repeat": repeat,
        "script_overhead": script_overhead(pairs_us, repeat, visits),
    }


def script_overhead(
    pairs_us: list[tuple[int, int]], repeat: int, visits: list[Visit]
) -> dict[str, float]:
    """One call of the generated script: median paired difference / ``repeat``, and that as a
    share of a submission without any job submit plugin (median of phase 1's "none" visits)."""
    empty = statistics.median(e for e, _ in pairs_us)
    topo = statistics.median(t for _, t in pairs_us)
    per_call = statistics.median(t - e for e, t in pairs_us) / repeat
    none = statistics.median(a for v in visits if v.config == "none" for a in v.ave_us)
    return {
        "empty_median_us": empty,
        "amplified_median_us": topo,
        "per_call_us": per_call,
        "none_median_us": none,
        "overhead_pct": 100.0 * per_call / none,
    }


def summarise(visits: list[Visit]) -> dict[str, dict[str, float]]:
    """Per configuration: median and minimum sub-burst sdiag average, CPU per submission; and
    the overheads against no job submit plugin."""
    out: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(v.config for v in visits):
        mine = [v for v in visits if v.config == name]
        aves = [a for v in mine for a in v.ave_us]
        out[name] = {
            "sdiag_median_us": statistics.median(aves),
            "sdiag_min_us": min(aves),
            "cpu_us_per_submit": sum(v.cpu_us * v.jobs for v in mine) / sum(v.jobs for v in mine),
        }
    base = out["none"]
    for figures in out.values():
        for key in ("sdiag_median_us", "sdiag_min_us", "cpu_us_per_submit"):
            figures[f"{key}_overhead_pct"] = 100.0 * (figures[key] - base[key]) / base[key]
    return out


def report(result: dict[str, Any]) -> str:
    lines = [
        f"Slurm {result['release']}: {result['jobs_per_visit']} submissions per visit in "
        f"{result['samples_per_visit']} sub-bursts ({SUBMIT})"
    ]
    for v in result["visits"]:
        aves = " ".join(f"{a}" for a in v["ave_us"])
        lines.append(
            f"  {v['config']:<10} queue {v['queue_before']:4d}  sdiag ave us: {aves}"
            f"  CPU {v['cpu_us']:.0f} us/job"
        )
    lines.append(f"  {'':<10} {'sdiag median':>15} {'sdiag min':>15} {'CPU/job':>15}")
    for name, f in result["summary"].items():
        cells = [
            f"{f[key]:7.0f} us {f[key + '_overhead_pct']:+4.0f}%"
            for key in ("sdiag_median_us", "sdiag_min_us", "cpu_us_per_submit")
        ]
        lines.append(f"  {name:<10} " + " ".join(cells))
    topo = result["summary"]["topograph"]
    lines.append(
        f"  restart-separated: generated job_submit.lua vs none, sdiag median "
        f"{topo['sdiag_median_us_overhead_pct']:+.1f} %, CPU "
        f"{topo['cpu_us_per_submit_overhead_pct']:+.1f} %"
    )
    sc = result["script_overhead"]
    verdict = "OK" if sc["overhead_pct"] <= TARGET_PCT else "OVER TARGET"
    lines.append(
        f"  paired, same slurmctld ({len(result['pairs'])} pairs of {result['pair_jobs']} jobs, "
        f"generated script called {result['repeat']}x per job): empty "
        f"{sc['empty_median_us']:.0f} us, amplified {sc['amplified_median_us']:.0f} us -> "
        f"{sc['per_call_us']:.1f} us per call = {sc['overhead_pct']:+.1f} % of a plain submission"
        f" ({sc['none_median_us']:.0f} us; target <= {TARGET_PCT:.0f} %: {verdict})"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="all", choices=[*harness.VERSIONS, "all"])
    parser.add_argument("--jobs", type=int, default=200, help="submissions per visit")
    parser.add_argument("--rounds", type=int, default=1, help="A B C C B A rounds")
    parser.add_argument("--samples", type=int, default=10, help="sub-bursts per visit")
    parser.add_argument("--pairs", type=int, default=30, help="empty/generated script pairs")
    parser.add_argument("--pair-jobs", type=int, default=20, help="submissions per pair side")
    parser.add_argument("--repeat", type=int, default=25, help="script calls per job (phase 2)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args()
    versions = list(harness.VERSIONS) if args.version == "all" else [args.version]
    results = [
        run_version(
            v, args.jobs, args.rounds, args.samples, args.pairs, args.pair_jobs, args.repeat
        )
        for v in versions
    ]
    for result in results:
        print(json.dumps(result) if args.json else report(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
