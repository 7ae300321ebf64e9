"""Run a benchmark plan: every run one ``srun`` step of nccl-tests inside the caller's
allocation, round after round, the runs of a round at the same time.

An edge: it launches, times, kills and records; what the numbers mean is
``topology.bench_judge``'s. A run that fails (non-zero exit, a timeout, no table, wrong
results) is a recorded result and the sweep goes on. A timed-out step gets SIGTERM (srun
cancels the step on its nodes), then SIGKILL, and is recorded as timed out.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topograph_slurm.collect import STDERR_TAIL, is_snapshot_or_empty, write_snapshot
from topograph_slurm.collect.plan import TERM_GRACE, now_iso
from topograph_slurm.collect.transport import (
    NodeRun,
    child_environment,
    run_bounded,
    terminate_live,
)
from topograph_slurm.errors import CollectError, OutputError, ParseError
from topograph_slurm.model.bench import BenchPlan, BenchRun, NcclOutput, RunResult
from topograph_slurm.output import write_file
from topograph_slurm.sources.nccl_tests import parse_nccl_tests
from topograph_slurm.sources.snapshot import (
    BENCH_FILE,
    MANIFEST,
    SNAPSHOT_FORMAT,
    SNAPSHOT_VERSION,
)

#: nccl-tests arguments by default: large messages only (they measure the links, not the
#: latency), doubling, one GPU per rank.
DEFAULT_ARGS: tuple[str, ...] = ("-b", "512M", "-e", "8G", "-f", "2", "-g", "1")
DEFAULT_LAUNCHER: tuple[str, ...] = ("srun", "--mpi=pmix")

OnRun = Callable[[RunResult], None]


@dataclass(frozen=True, slots=True)
class BenchCommand:
    """How every run is launched: the launcher (srun and its flags), the nccl-tests binary
    and its arguments, ranks per node, the per-run timeout, and how many steps may run at
    once (a round of a large fabric can hold thousands)."""

    launcher: tuple[str, ...] = DEFAULT_LAUNCHER
    binary: str = "all_reduce_perf"
    args: tuple[str, ...] = DEFAULT_ARGS
    gpus_per_node: int = 8
    timeout: float = 600.0
    parallel: int = 32

    def argv(self, run: BenchRun) -> list[str]:
        """The step's command line: one task per GPU on each of the run's nodes; a rank that
        fails ends the step rather than leaving the others waiting."""
        nodes = len(run.nodes)
        return [
            *self.launcher,
            f"--nodes={nodes}",
            f"--ntasks={nodes * self.gpus_per_node}",
            f"--ntasks-per-node={self.gpus_per_node}",
            f"--nodelist={','.join(run.nodes)}",
            "--kill-on-bad-exit=1",
            self.binary,
            *self.args,
        ]


def check_launcher(command: BenchCommand) -> None:
    """A launcher that is not there fails the whole sweep at once, not run by run."""
    if shutil.which(command.launcher[0]) is None:
        raise CollectError(f"launcher {command.launcher[0]!r} not found on PATH")


def slurm_version(command: BenchCommand) -> str:
    """``srun --version`` (e.g. ``slurm 24.11.5``), for the record; '' when it says nothing."""
    try:
        done = subprocess.run(
            [command.launcher[0], "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            env=child_environment(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""


def run_plan(plan: BenchPlan, command: BenchCommand, on_run: OnRun) -> list[RunResult]:
    """Every run of *plan*, round by round; results in plan order. Ctrl-C (or any error)
    stops every step still running."""
    by_round: dict[int, list[BenchRun]] = {}
    for run in plan.runs:
        by_round.setdefault(run.round, []).append(run)
    results: dict[str, RunResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, command.parallel)) as pool:
        try:
            for number in sorted(by_round):
                for result in pool.map(lambda r: _run_one(r, command), by_round[number]):
                    results[result.run.key] = result
                    on_run(result)
        except BaseException:  # stop the steps before leaving the pool waits for them
            pool.shutdown(wait=False, cancel_futures=True)
            terminate_live()
            raise
    return [results[run.key] for run in plan.runs]


def _run_one(run: BenchRun, command: BenchCommand) -> RunResult:
    argv = command.argv(run)
    done = run_bounded(argv, command.timeout, TERM_GRACE)
    return result_of(run, argv, done, command.timeout)


def result_of(run: BenchRun, argv: list[str], done: NodeRun, timeout: float) -> RunResult:
    """The recorded result of one step: its table parsed, and why it failed if it did."""
    result = RunResult(
        run,
        argv,
        done.timestamp,
        round(done.duration, 3),
        done.exit_code,
        done.timed_out,
        done.error,
        stderr_tail=done.stderr[-STDERR_TAIL:],
    )
    try:
        result.output = parse_nccl_tests(done.stdout, f"{run.key} output")
    except ParseError as err:
        unreadable = f"unreadable output: {err}"
    else:
        unreadable = ""
    if done.timed_out:
        result.error = f"timed out after {timeout:g} s (killed)"
    elif not result.error and done.exit_code != 0:
        result.error = f"exit code {done.exit_code}"
    elif not result.error:
        result.error = unreadable or (_invalid(result.output) if result.output else "")
    peak = result.output.peak if result.output else None
    if peak is not None and peak.busbw is not None and not result.error:
        result.busbw = peak.busbw
    return result


def _invalid(output: NcclOutput) -> str:
    """Why a run that exited 0 with a table measured nothing ('' when it did): wrong
    elements, a table cut before its largest size, no busbw at the largest size."""
    peak = output.peak
    if output.wrong:
        return f"{output.wrong} wrong elements (data corruption)"
    if output.cut:
        last = f"{peak.size if peak else 0} of {output.last_size} B"
        return f"output ends before the largest size ({last})"
    if peak is not None and peak.busbw is not None and peak.busbw <= 0:
        return f"busbw {peak.busbw:g} GB/s at the largest size (no measurement)"
    return ""


def check_record(dest: Path) -> None:
    """Refuse a --record target that is neither a snapshot nor empty before the sweep runs,
    so hours of results are never lost to a destination that was wrong from the start."""
    if not is_snapshot_or_empty(dest):
        raise OutputError(f"{dest} exists and is not a topograph-slurm snapshot; not recording")


def write_record(dest: Path, record: dict[str, Any]) -> Path:
    """*record* as ``DEST/bench.json``: into the snapshot *dest* when it is one, else as a new
    snapshot holding only the record (an empty manifest beside it)."""
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    if (dest / MANIFEST).is_file():
        write_file(dest / BENCH_FILE, text)
        return dest
    manifest = {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "created": record.get("created", now_iso()),
        "via": "bench",
        "nodes": [],
        "commands": {},
        "results": [],
        "fabric": None,
    }
    return write_snapshot(dest, manifest, {BENCH_FILE: text})
