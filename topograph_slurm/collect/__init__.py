"""Fan-out collection: run the fabric commands on many nodes, keep every answer in a snapshot.

``topograph-slurm collect`` runs ``nvidia-smi`` (CSV fabric query, ``-q``, ``topo -m``) on every
node — and ``ibnetdiscover`` on one node when asked — and stores the raw outputs in a snapshot
directory that ``generate --snapshot DIR`` reads later. Cron collects; CI regenerates from a
committed snapshot without touching the cluster.

Transport choices, and why:

* ``srun``, mode ``batch`` (default): **one** ``srun --nodes=N --ntasks-per-node=1 --label``
  over all nodes — one job (or one step inside an allocation) instead of N, which is what
  slurmctld can take at thousands of nodes. Per-node results still come out exact: the node
  script names its node in a header line and frames every command with its own exit code,
  ``--label`` separates the tasks' streams, and ``timeout`` on the node bounds every command.
  A batch cannot start when one listed node is down or drained (srun refuses the whole
  allocation; ``--immediate`` stops it from queueing), so every node that did not report is
  then tried with its own srun — which gives that node its own exit code and error. After a
  batch timeout, nodes without output are recorded as timed out (not retried: a hung node
  costs one timeout, not two).
* ``srun``, mode ``per-node``: one srun per node (``--nodes=1 --nodelist=<node>``), at most
  ``fanout`` at a time from a thread pool; each node gets its own local timeout and exit code
  from the start. Costs one Slurm job per node. Inside an allocation (``SLURM_JOB_ID`` set)
  all sruns are steps with ``--overlap``; outside, jobs with a ``--time`` limit so Slurm reaps
  them even if this process dies.
* ``clush``: ClusterShell's ssh fan-out (``Task.shell`` with ``fanout`` and a per-node
  ``timeout``), for clusters where admins prefer ssh or Slurm itself is what is broken.

Both transports run the same small POSIX ``sh`` script on the node. It runs every command
(under ``timeout`` when the node has it) and prints, per command, a marker line with the exit
code and the command's stdout and stderr **base64-encoded** between markers. So output bytes
survive any transport unchanged (ClusterShell re-splits lines, srun may interleave), and nothing
a command prints can be mistaken for a marker. Each run uses a fresh random marker.

Snapshot layout (``--snapshot DIR``)::

    DIR/manifest.json                    format, version, created, via, srun_mode, nodes,
                                         commands, and one result per node and command:
                                         node, command, argv, exit_code, duration (the node's
                                         run), timestamp, error, timed_out, stderr_tail, file
    DIR/nodes/<node>/<command-key>.txt   raw stdout of each command that succeeded
    DIR/fabric/ibnetdiscover.txt         with --ibnetdiscover-on NODE
    DIR/ufm/*.json                       with --ufm URL (sources/ufm.py reads them)

A node that fails (non-zero exit, timeout, unreachable, garbage) is recorded in the manifest
with its exit code, error and stderr tail, and never stops the run. A run where *no* node
answered is an error and the previous snapshot is kept, since replacing a good snapshot with
an empty one would make the next ``generate`` strand every node.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ClusterShell.NodeSet import NodeSet, NodeSetException

from topograph_slurm.errors import CollectError, InputError, OutputError, ParseError
from topograph_slurm.model.gpu import DomainResult, GpuFabric, GpuTopology
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.result import Block, BlockTopology, Finding, Tree
from topograph_slurm.slurm_version import SlurmVersion
from topograph_slurm.sources.nvidia_smi import CSV_FIELDS, parse_fabric_output, parse_topo_matrix
from topograph_slurm.topology.clique import node_domain
from topograph_slurm.topology.nvlink import NvlinkPolicy, nvlink_blocks

SNAPSHOT_FORMAT = "topograph-slurm-snapshot"
SNAPSHOT_VERSION = 1
MANIFEST = "manifest.json"
NODES_DIR = "nodes"
FABRIC_DIR = "fabric"
IBNETDISCOVER_KEY = "ibnetdiscover"
IBNETDISCOVER_FILE = "ibnetdiscover.txt"
STDERR_TAIL = 2000  # characters of stderr kept per command in the manifest
TERM_GRACE = 5.0  # seconds between SIGTERM and SIGKILL for a timed-out srun

KEY_QUERY = "nvidia-smi-query"
KEY_Q = "nvidia-smi-q"
KEY_TOPO = "nvidia-smi-topo"

#: The commands ``collect`` runs on every node by default, by file key.
DEFAULT_COMMANDS: dict[str, tuple[str, ...]] = {
    KEY_QUERY: ("nvidia-smi", f"--query-gpu={','.join(CSV_FIELDS)}", "--format=csv,noheader"),
    KEY_Q: ("nvidia-smi", "-q"),
    KEY_TOPO: ("nvidia-smi", "topo", "-m"),
}
DEFAULT_IBNETDISCOVER: tuple[str, ...] = ("ibnetdiscover",)

KIND_FAILED = "collect-failed"
KIND_TIMEOUT = "collect-timeout"
KIND_MISSING = "collect-missing"
KIND_PARSE = "collect-parse-error"

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


# --------------------------------------------------------------------------- data


@dataclass(slots=True)
class CommandResult:
    """One command on one node: what the manifest records (stdout goes to its own file)."""

    node: str
    command: str
    argv: list[str]
    exit_code: int | None
    duration: float
    timestamp: str
    error: str = ""
    timed_out: bool = False
    stderr_tail: str = ""
    file: str | None = None
    stdout: str = field(default="", repr=False)

    @property
    def ok(self) -> bool:
        """Ran to completion with exit code 0."""
        return self.exit_code == 0 and not self.timed_out and not self.error

    def manifest_entry(self) -> dict[str, Any]:
        """The JSON-ready manifest record (everything but the stdout text)."""
        entry = asdict(self)
        del entry["stdout"]
        return entry


@dataclass(slots=True)
class CollectPlan:
    """What to run where and how; every field has a CLI flag."""

    nodes: list[str]
    via: str = "srun"
    commands: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(DEFAULT_COMMANDS))
    timeout: float = 60.0
    fanout: int = 32
    partition: str | None = None
    srun_args: list[str] = field(default_factory=list)
    srun_mode: str = "batch"  # "batch": one multi-node srun, per-node retry; "per-node"
    ibnetdiscover_on: str | None = None
    ibnetdiscover_command: tuple[str, ...] = DEFAULT_IBNETDISCOVER
    ibnetdiscover_timeout: float = 300.0
    grace: float = TERM_GRACE  # the node's own timeout fires first; then SIGTERM, then SIGKILL


@dataclass(slots=True)
class CollectOutcome:
    """Where the snapshot went and what happened per node."""

    path: Path
    results: list[CommandResult]
    fabric: CommandResult | None
    duration: float

    @property
    def failed_nodes(self) -> list[str]:
        """Nodes where at least one command did not succeed, in natural order."""
        return sorted({r.node for r in self.results if not r.ok}, key=natural_key)

    @property
    def ok_nodes(self) -> list[str]:
        """Nodes where every command succeeded."""
        failed = set(self.failed_nodes)
        return sorted({r.node for r in self.results} - failed, key=natural_key)


def now_iso() -> str:
    """UTC timestamp with seconds, as every manifest entry carries."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expand_nodes(hostlist: str) -> list[str]:
    """A Slurm/ClusterShell hostlist as node names in natural order, validated as plain names
    (they become directory names in the snapshot)."""
    try:
        nodes = list(NodeSet(hostlist))
    except NodeSetException as err:
        raise InputError(f"invalid hostlist {hostlist!r}: {err}") from None
    for node in nodes:
        check_node_name(node)
    return sorted(set(nodes), key=natural_key)


def check_node_name(node: str) -> str:
    """Reject names that cannot be a Slurm node or a safe directory name."""
    if not _NODE.match(node):
        raise InputError(f"invalid node name {node!r}")
    return node


def check_key(key: str) -> str:
    """Command keys become file names: letters, digits, ``_.-`` only."""
    if not _KEY.match(key) or key in (".", ".."):
        raise InputError(f"invalid command key {key!r}")
    return key


# --------------------------------------------------------------------------- node script


def node_script(commands: Mapping[str, Sequence[str]], timeout: float, marker: str) -> str:
    """The POSIX sh script run on each node: every command, base64-framed (see module doc).

    Lean on purpose — a handful of processes per command — because on a busy head node or
    thousands of small tasks the script's own forks are a visible part of the run time.
    ``begin`` lines may carry ``<start> <end>`` times after the exit code; they are optional.
    """
    secs = max(1, int(timeout))
    lines = [
        "T=; command -v timeout >/dev/null 2>&1 && T='timeout -k 5 " + str(secs) + "'",
        'D=$(mktemp -d 2>/dev/null || echo "/tmp/topograph.$$"); mkdir -p "$D"',
        f'echo "{marker} node ${{SLURMD_NODENAME:-$(hostname)}}"',
        "run() {",
        '  k=$1; shift; $T "$@" >"$D/o" 2>"$D/e"; rc=$?',
        f'  echo "{marker} begin $k $rc"',
        '  base64 <"$D/o"',
        f'  echo "{marker} stderr $k"',
        '  if [ -s "$D/e" ]; then tail -c 4000 "$D/e" | base64; fi',
        f'  echo "{marker} end $k"',
        "}",
    ]
    for key, argv in commands.items():
        lines.append(f"run {shlex.quote(check_key(key))} {shlex.join(argv)}")
    lines.append('rm -rf "$D"')
    return "\n".join(lines) + "\n"


@dataclass(slots=True)
class _Framed:
    """One command's result as the node script reported it."""

    exit_code: int
    stdout: str
    stderr: str
    duration: float | None


def _seconds(start: str, end: str) -> float | None:
    try:
        return max(0.0, float(end) - float(start))
    except ValueError:
        return None  # a date(1) without %N


def _decode(lines: list[str]) -> str:
    data = base64.b64decode("".join(lines).encode("ascii"), validate=False)
    return data.decode("utf-8", errors="replace")


def parse_framed(text: str, marker: str) -> dict[str, _Framed]:
    """Per-command results from the node script's output; frames cut short are left out."""
    out: dict[str, _Framed] = {}
    state: str | None = None
    key, head = "", [""]
    body: list[str] = []
    err: list[str] = []
    for line in text.splitlines():
        if line.startswith(marker + " "):
            parts = line.split()
            tag = parts[1] if len(parts) > 1 else ""
            if tag == "begin" and len(parts) >= 4:
                key, head, body, err, state = parts[2], parts[3:], [], [], "out"
            elif tag == "stderr" and state == "out":
                state = "err"
            elif tag == "end" and state == "err":
                with contextlib.suppress(binascii.Error, ValueError, UnicodeError):
                    start, end = [*head[1:3], "", ""][:2]
                    out[key] = _Framed(
                        int(head[0]), _decode(body), _decode(err), _seconds(start, end)
                    )
                state = None
            continue
        if state == "out":
            body.append(line.strip())
        elif state == "err":
            err.append(line.strip())
    return out


# --------------------------------------------------------------------------- transports


@dataclass(slots=True)
class NodeRun:
    """What a transport brings back from one node: raw output, exit status, timing."""

    node: str
    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    duration: float
    timestamp: str
    error: str = ""


def _tail(text: str, limit: int = STDERR_TAIL) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def srun_argv(plan: CollectPlan, node: str, script: str, timeout: float) -> list[str]:
    """The srun command line for one node (long ``--opt=value`` forms only)."""
    minutes = max(1, int(timeout // 60) + 2)
    argv = [
        "srun",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={node}",
        "--job-name=topograph-collect",
        "--quiet",
    ]
    if os.environ.get("SLURM_JOB_ID"):
        argv.append("--overlap")
    else:  # a job: limit its life, and fail with Slurm's reason rather than queue when busy
        argv += [f"--time={minutes}", f"--immediate={max(1, int(timeout))}"]
    if plan.partition:
        argv.append(f"--partition={plan.partition}")
    argv += list(plan.srun_args)
    return [*argv, "sh", "-c", script]


_LIVE: set[subprocess.Popen[bytes]] = set()
_LIVE_LOCK = threading.Lock()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the srun and anything it started locally (its own session/process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _terminate(proc: subprocess.Popen[bytes], grace: float) -> tuple[bytes, bytes]:
    """Stop a timed-out srun politely (it cancels its job/step on SIGTERM), then hard."""
    _signal_group(proc, signal.SIGTERM)
    try:
        return proc.communicate(timeout=grace)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
        return proc.communicate()


def terminate_live() -> None:
    """Stop every srun still running (Ctrl-C, or an error in another thread)."""
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        _signal_group(proc, signal.SIGTERM)


def _run(argv: list[str], timeout: float, grace: float) -> NodeRun:
    """Run one srun with a hard local timeout; ``node`` is filled in by the caller."""
    stamp, start = now_iso(), time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return NodeRun("", "", "", None, False, 0.0, stamp, f"cannot run srun: {exc.strerror}")
    timed_out = False
    with _LIVE_LOCK:
        _LIVE.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout + grace)
    except subprocess.TimeoutExpired:
        timed_out = True
        out, err = _terminate(proc, grace)
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)
    return NodeRun(
        "",
        out.decode("utf-8", errors="replace"),
        err.decode("utf-8", errors="replace"),
        None if timed_out else proc.returncode,
        timed_out,
        time.monotonic() - start,
        stamp,
    )


def run_srun_node(plan: CollectPlan, node: str, script: str, timeout: float) -> NodeRun:
    """One node through its own srun, with a hard local timeout."""
    run = _run(srun_argv(plan, node, script, timeout), timeout, plan.grace)
    run.node = node
    return run


def _srun_per_node(
    plan: CollectPlan,
    nodes: Sequence[str],
    script: str,
    timeout: float,
    done: Callable[[str], None],
) -> list[NodeRun]:
    """Every node through its own srun, at most ``plan.fanout`` at once."""

    def one(node: str) -> NodeRun:
        try:
            return run_srun_node(plan, node, script, timeout)
        finally:
            done(node)

    with ThreadPoolExecutor(max_workers=max(1, min(plan.fanout, len(nodes) or 1))) as pool:
        try:
            return list(pool.map(one, nodes))
        except BaseException:  # Ctrl-C: stop the running sruns before the pool waits for them
            pool.shutdown(wait=False, cancel_futures=True)
            terminate_live()
            raise


_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
_NODE_HEADER = re.compile(r"^@@topograph-[0-9a-f]+ node (\S+)\s*$")


def split_labelled(stdout: str) -> dict[str, str]:
    """Per-node output of a ``srun --label`` run: lines grouped by task id, each task's node
    named by the script's header line (task ids are not node names)."""
    tasks: dict[int, list[str]] = {}
    for line in stdout.splitlines():
        match = _LABEL.match(line)
        if match:
            tasks.setdefault(int(match.group(1)), []).append(match.group(2))
    out: dict[str, str] = {}
    for lines in tasks.values():
        node = next((m.group(1) for m in map(_NODE_HEADER.match, lines) if m), None)
        if node is not None:
            out[node] = "\n".join(lines) + "\n"
    return out


def srun_batch_argv(
    plan: CollectPlan, nodes: Sequence[str], script: str, timeout: float
) -> list[str]:
    """One srun over all *nodes*, one task each, output labelled by task."""
    argv = srun_argv(plan, nodes[0], script, timeout)
    count = len(nodes)
    head = [
        "srun",
        f"--nodes={count}",
        f"--ntasks={count}",
        "--ntasks-per-node=1",
        f"--nodelist={NodeSet.fromlist(nodes)}",
        "--label",
        "--kill-on-bad-exit=0",
    ]
    rest = [arg for arg in argv[4:] if not arg.startswith("--immediate=")]
    if not os.environ.get("SLURM_JOB_ID"):
        head.append(f"--immediate={max(1, min(30, int(timeout)))}")
    return head + rest


def _srun_batch(
    plan: CollectPlan,
    nodes: Sequence[str],
    script: str,
    timeout: float,
    done: Callable[[str], None],
) -> list[NodeRun]:
    """All nodes in one srun (one job or step: cheap for slurmctld, one launch tree), then a
    per-node srun for every node that did not report — which gives that node its own exit
    code and error. After a timeout, nodes without output are recorded as timed out rather
    than tried again, so a hung node costs one timeout, not two."""
    batch = _run(srun_batch_argv(plan, nodes, script, timeout), timeout, plan.grace)
    per_node = split_labelled(batch.stdout)
    runs: list[NodeRun] = []
    missing: list[str] = []
    for node in nodes:
        if node in per_node:
            runs.append(
                NodeRun(node, per_node[node], "", 0, False, batch.duration, batch.timestamp)
            )
            done(node)
        elif batch.timed_out:
            runs.append(
                NodeRun(node, "", batch.stderr, None, True, batch.duration, batch.timestamp)
            )
            done(node)
        else:
            missing.append(node)
    if missing:
        runs += _srun_per_node(plan, missing, script, timeout, done)
    order = {node: i for i, node in enumerate(nodes)}
    return sorted(runs, key=lambda run: order[run.node])


def fan_out_srun(
    plan: CollectPlan,
    nodes: Sequence[str],
    script: str,
    timeout: float,
    done: Callable[[str], None],
) -> list[NodeRun]:
    """srun transport: ``batch`` (default) or ``per-node`` (see the module doc)."""
    if plan.srun_mode == "per-node" or len(nodes) < 2:
        return _srun_per_node(plan, nodes, script, timeout, done)
    if plan.srun_mode != "batch":
        raise CollectError(f"unknown srun mode {plan.srun_mode!r}: use batch or per-node")
    return _srun_batch(plan, nodes, script, timeout, done)


def fan_out_clush(
    plan: CollectPlan,
    nodes: Sequence[str],
    script: str,
    timeout: float,
    done: Callable[[str], None],
) -> list[NodeRun]:
    """Every node over ssh with ClusterShell: one task, fanout-limited, per-node timeout.

    The task runs in a thread of its own: ClusterShell binds one task to each thread, so a
    fresh thread gives every call fresh buffers and settings.
    """
    box: list[list[NodeRun]] = []
    failure: list[BaseException] = []

    def body() -> None:
        try:
            box.append(_clush_in_thread(plan, nodes, script, timeout, done))
        except BaseException as err:  # re-raised in the caller's thread
            failure.append(err)

    thread = threading.Thread(target=body, name="topograph-clush", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise CollectError(f"ClusterShell failed: {failure[0]}") from failure[0]
    return box[0]


def _clush_in_thread(
    plan: CollectPlan,
    nodes: Sequence[str],
    script: str,
    timeout: float,
    done: Callable[[str], None],
) -> list[NodeRun]:
    from ClusterShell.Event import EventHandler
    from ClusterShell.Task import task_self

    class Hup(EventHandler):  # type: ignore[misc]
        def ev_hup(self, worker: object, node: str, rc: int) -> None:
            done(node)

    task = task_self()
    task.set_info("fanout", max(1, plan.fanout))
    task.set_info("connect_timeout", min(30.0, timeout))
    stamp, start = now_iso(), time.monotonic()
    task.shell(
        "sh -c " + shlex.quote(script),
        nodes=",".join(nodes),
        timeout=timeout + plan.grace,
        stderr=True,
        handler=Hup(),
    )
    task.run()
    elapsed = time.monotonic() - start
    timed_out = {str(n) for n in task.iter_keys_timeout()}
    runs = []
    for node in nodes:
        late = node in timed_out
        if late:
            done(node)
        runs.append(
            NodeRun(
                node,
                bytes(task.node_buffer(node)).decode("utf-8", errors="replace"),
                bytes(task.node_error(node)).decode("utf-8", errors="replace"),
                None if late else task.node_retcode(node),
                late,
                elapsed,
                stamp,
            )
        )
    return runs


TRANSPORTS: dict[str, Callable[..., list[NodeRun]]] = {
    "srun": fan_out_srun,
    "clush": fan_out_clush,
}


def _check_transport(via: str) -> None:
    if via not in TRANSPORTS:
        raise CollectError(f"unknown transport {via!r}: use one of {', '.join(TRANSPORTS)}")
    binary = "srun" if via == "srun" else "ssh"
    if shutil.which(binary) is None:
        raise CollectError(f"{binary} not found on PATH (needed for --via {via})")


# --------------------------------------------------------------------------- results


def _results_for(
    run: NodeRun, commands: Mapping[str, Sequence[str]], marker: str
) -> list[CommandResult]:
    """Turn one node's transport output into one result per command."""
    framed = parse_framed(run.stdout, marker)
    results = []
    for key, argv in commands.items():
        got = framed.get(key)
        result = CommandResult(
            run.node, key, list(argv), None, round(run.duration, 3), run.timestamp
        )
        if got is not None:
            result.exit_code = got.exit_code
            result.stdout = got.stdout
            result.stderr_tail = _tail(got.stderr)
            if got.duration is not None:
                result.duration = round(got.duration, 3)
            if got.exit_code == 124:
                result.timed_out = True
                result.error = "timed out on the node"
            elif got.exit_code != 0:
                result.error = f"exit code {got.exit_code}"
        else:
            result.exit_code = run.exit_code
            result.timed_out = run.timed_out
            result.stderr_tail = _tail(run.stderr)
            result.error = _transport_error(run)
        results.append(result)
    return results


def _transport_error(run: NodeRun) -> str:
    """Why a command left no frame: the node timed out, the transport failed, or it died."""
    if run.error:
        return run.error
    if run.timed_out:
        return f"no answer within the timeout ({run.duration:.0f}s); transport stopped"
    if run.exit_code not in (0, None):
        return f"transport exited {run.exit_code} before the command reported"
    return "no output from the node script (truncated or not run)"


# --------------------------------------------------------------------------- progress


class _Progress:
    """A rich progress bar on stderr; a no-op when disabled (not a TTY, or ``-q``)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self._lock = threading.Lock()
        self._bar: Any = None
        self._task: Any = None
        if enabled and total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self._bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task("collecting", total=total)

    @property
    def enabled(self) -> bool:
        return self._bar is not None

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def advance(self, node: str) -> None:
        if self._bar is not None:
            with self._lock:
                self._bar.update(self._task, advance=1, description=node)


def progress_wanted(quiet: bool = False) -> bool:
    """Show progress only to a human: stderr is a terminal and not ``-q``."""
    return not quiet and sys.stderr.isatty()


# --------------------------------------------------------------------------- snapshot writing


def _node_file(node: str, key: str) -> str:
    return f"{NODES_DIR}/{check_node_name(node)}/{check_key(key)}.txt"


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def _is_snapshot_or_empty(path: Path) -> bool:
    if not path.exists():
        return True
    if not path.is_dir():
        return False
    return (path / MANIFEST).is_file() or not any(path.iterdir())


def write_snapshot(
    dest: Path,
    manifest: dict[str, Any],
    files: Mapping[str, str],
) -> Path:
    """Build the snapshot in a temp dir beside *dest*, then swap it in.

    A directory cannot be renamed over a non-empty one, so the old snapshot is renamed aside
    first and removed only after the new one is in place (and put back if that fails): readers
    see the old or the new snapshot, never a half-written one. *dest* must be a snapshot or
    empty — ``--snapshot /etc`` must never move /etc aside.
    """
    if not _is_snapshot_or_empty(dest):
        raise OutputError(f"{dest} exists and is not a topograph-slurm snapshot; not replacing it")
    parent = dest.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=parent))
    except OSError as err:
        raise OutputError(f"cannot create a snapshot beside {dest}: {err.strerror}") from None
    try:
        for rel, text in files.items():
            _write_text(tmp / rel, text)
        _write_text(tmp / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        os.chmod(tmp, 0o755)
        _swap_in(tmp, dest)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OutputError(f"cannot write snapshot {dest}: {err.strerror}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _swap_in(tmp: Path, dest: Path) -> None:
    old: Path | None = None
    if dest.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
        try:
            os.rename(dest, old / "snapshot")
        except OSError:
            shutil.rmtree(old, ignore_errors=True)
            raise
    try:
        os.rename(tmp, dest)
    except OSError:
        if old is not None:
            os.rename(old / "snapshot", dest)
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    with contextlib.suppress(OSError):
        fd = os.open(dest.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --------------------------------------------------------------------------- collect


def _run_all(
    plan: CollectPlan,
    nodes: Sequence[str],
    commands: Mapping[str, Sequence[str]],
    timeout: float,
    progress: _Progress,
) -> list[CommandResult]:
    marker = "@@topograph-" + secrets.token_hex(8)
    script = node_script(commands, timeout, marker)
    runs = TRANSPORTS[plan.via](plan, nodes, script, timeout, progress.advance)
    return [r for run in runs for r in _results_for(run, commands, marker)]


def _manifest(
    plan: CollectPlan,
    results: list[CommandResult],
    fabric: CommandResult | None,
    started: str,
    duration: float,
) -> dict[str, Any]:
    return {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "created": started,
        "duration": round(duration, 3),
        "via": plan.via,
        "srun_mode": plan.srun_mode if plan.via == "srun" else None,
        "nodes": list(plan.nodes),
        "commands": {key: shlex.join(argv) for key, argv in plan.commands.items()},
        "timeout": plan.timeout,
        "fanout": plan.fanout,
        "results": [r.manifest_entry() for r in results],
        "fabric": fabric.manifest_entry() if fabric else None,
    }


def _fan_out(plan: CollectPlan, show: bool) -> tuple[list[CommandResult], CommandResult | None]:
    """Node commands, then ibnetdiscover on its node; running sruns stop on any error."""
    if not plan.nodes and not plan.ibnetdiscover_on:
        return [], None
    _check_transport(plan.via)
    total = len(plan.nodes) + (1 if plan.ibnetdiscover_on else 0)
    try:
        with _Progress(total, show) as bar:
            results = (
                _run_all(plan, plan.nodes, plan.commands, plan.timeout, bar) if plan.nodes else []
            )
            fabric = None
            if plan.ibnetdiscover_on:
                cmds = {IBNETDISCOVER_KEY: plan.ibnetdiscover_command}
                node = check_node_name(plan.ibnetdiscover_on)
                fabric = _run_all(plan, [node], cmds, plan.ibnetdiscover_timeout, bar)[0]
    except BaseException:
        terminate_live()
        raise
    return results, fabric


def collect(
    plan: CollectPlan,
    dest: Path,
    *,
    progress: bool | None = None,
    extra_files: Mapping[str, str] | None = None,
    extra_manifest: Mapping[str, Any] | None = None,
) -> CollectOutcome:
    """Run the plan and write the snapshot to *dest* atomically; see the module doc.

    *extra_files* (snapshot-relative path → text) and *extra_manifest* keys go into the same
    snapshot — e.g. UFM's REST responses (``sources.ufm.snapshot_files``), fetched by the
    caller first so a refused login writes nothing. With extra files, *plan* may have no nodes.

    ``progress=None`` shows a bar only when stderr is a terminal. Raises CollectError when not
    a single node answered (the old snapshot stays), OutputError when *dest* cannot be written.
    """
    for node in plan.nodes:
        check_node_name(node)
    if not plan.nodes and not plan.ibnetdiscover_on and not extra_files:
        raise CollectError("no nodes to collect from")
    started, t0 = now_iso(), time.monotonic()
    show = progress_wanted() if progress is None else progress
    results, fabric = _fan_out(plan, show)
    files: dict[str, str] = dict(extra_files or {})
    for result in results:
        if result.ok:
            result.file = _node_file(result.node, result.command)
            files[result.file] = result.stdout
    if fabric is not None and fabric.ok:
        fabric.file = f"{FABRIC_DIR}/{IBNETDISCOVER_FILE}"
        files[fabric.file] = fabric.stdout
    duration = time.monotonic() - t0
    answered = any(r.ok for r in results) or bool(fabric and fabric.ok)
    if (results or fabric) and not answered and not extra_files:
        first = next((r for r in [*results, *([fabric] if fabric else [])] if r.error), None)
        why = f" (first: {first.node} {first.command}: {first.error})" if first else ""
        raise CollectError(
            f"no node answered any command{why}; the previous snapshot at {dest} is kept"
        )
    manifest = _manifest(plan, results, fabric, started, duration)
    manifest.update(extra_manifest or {})
    write_snapshot(dest, manifest, files)
    return CollectOutcome(dest, results, fabric, duration)


# --------------------------------------------------------------------------- snapshot reading


@dataclass(slots=True)
class NodeSnapshot:
    """One node's parsed outputs. ``gpus`` is None when no fabric output could be read;
    ``fabric_source`` names the command it came from (``-q`` is preferred: it has Health)."""

    name: str
    gpus: list[GpuFabric] | None = None
    fabric_source: str | None = None
    topology: GpuTopology | None = None
    raw: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Snapshot:
    """A collected snapshot, parsed. ``findings`` hold every per-node collection or parse
    problem, so a node that could not be read is reported rather than silently missing."""

    path: Path
    created: str
    via: str
    nodes: dict[str, NodeSnapshot]
    manifest: dict[str, Any]
    ibnetdiscover: str | None = None
    findings: list[Finding] = field(default_factory=list)

    def domain_results(self) -> dict[str, DomainResult]:
        """The NVLink verdict of every node whose fabric output could be read."""
        return {
            name: node_domain(node.gpus, name)
            for name, node in self.nodes.items()
            if node.gpus is not None
        }

    def nvlink_blocks(
        self,
        version: SlurmVersion,
        *,
        policy: NvlinkPolicy | None = None,
        block_sizes: Sequence[int] | None = None,
        tree: Tree | None = None,
        layout: Sequence[Block] = (),
    ) -> BlockTopology:
        """Blocks from this snapshot's NVLink domains, with every collection and parse
        finding carried along (see ``topology.nvlink.nvlink_blocks``)."""
        return nvlink_blocks(
            self.domain_results(),
            version,
            policy=policy,
            block_sizes=block_sizes,
            tree=tree,
            layout=layout,
            findings=self.findings,
        )

    @property
    def unread_nodes(self) -> list[str]:
        """Nodes in the manifest without readable fabric output."""
        return [name for name, node in self.nodes.items() if node.gpus is None]


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path} is not a snapshot: {MANIFEST} missing") from None
    except OSError as err:
        raise InputError(f"cannot read {path / MANIFEST}: {err.strerror}") from None
    except ValueError as err:
        raise InputError(f"{path / MANIFEST}: invalid JSON ({err})") from None
    if not isinstance(data, dict) or data.get("format") != SNAPSHOT_FORMAT:
        raise InputError(f"{path / MANIFEST}: not a {SNAPSHOT_FORMAT} manifest")
    if data.get("version") != SNAPSHOT_VERSION:
        raise InputError(f"{path / MANIFEST}: unsupported snapshot version {data.get('version')}")
    if not isinstance(data.get("results"), list):
        raise InputError(f"{path / MANIFEST}: 'results' must be a list")
    return data


def _failure(entry: Mapping[str, Any]) -> tuple[str, str, str]:
    """(node, kind, what went wrong) for one failed manifest entry."""
    kind = KIND_TIMEOUT if entry.get("timed_out") else KIND_FAILED
    detail = str(entry.get("error") or f"exit code {entry.get('exit_code')}")
    tail = str(entry.get("stderr_tail") or "").strip().splitlines()
    return str(entry.get("node")), kind, detail + (f": {tail[-1].strip()}" if tail else "")


def _failure_findings(entries: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """One finding per node and distinct failure, naming every command it hit, so a dead
    node is one line in the report rather than one per command."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for entry in entries:
        grouped.setdefault(_failure(entry), []).append(str(entry.get("command")))
    return [
        Finding(kind, node, f"{', '.join(commands)}: {detail}")
        for (node, kind, detail), commands in grouped.items()
    ]


def _entries(data: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for entry in data["results"]:
        if isinstance(entry, dict) and isinstance(entry.get("node"), str):
            yield entry


def _read_output(root: Path, entry: Mapping[str, Any]) -> str | None:
    rel = entry.get("file")
    if not isinstance(rel, str):
        return None
    path = (root / rel).resolve()
    if root.resolve() not in path.parents:
        raise InputError(f"{root / MANIFEST}: file {rel!r} points outside the snapshot")
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None


def _parse_node(node: NodeSnapshot, findings: list[Finding]) -> None:
    """Fill gpus/topology from raw outputs; -q first (it carries Health), then the CSV."""
    for key in (KEY_Q, KEY_QUERY):
        text = node.raw.get(key)
        if text is None:
            continue
        try:
            gpus = parse_fabric_output(text)
        except ParseError as err:
            findings.append(Finding(KIND_PARSE, node.name, f"{key}: {err}"))
            continue
        if gpus:
            node.gpus, node.fabric_source = gpus, key
            break
    if node.gpus is None and not any(f.subject == node.name for f in findings):
        findings.append(Finding(KIND_MISSING, node.name, "no nvidia-smi fabric output"))
    text = node.raw.get(KEY_TOPO)
    if text is not None:
        try:
            node.topology = parse_topo_matrix(text)
        except ParseError as err:
            findings.append(Finding(KIND_PARSE, node.name, f"{KEY_TOPO}: {err}"))


def load_snapshot(path: Path | str) -> Snapshot:
    """Read and parse a snapshot directory written by :func:`collect`.

    Raises InputError only when the snapshot as a whole is unusable (no manifest, bad JSON);
    per-node failures and unparsable outputs become findings.
    """
    root = Path(path)
    data = _read_manifest(root)
    nodes: dict[str, NodeSnapshot] = {}
    findings: list[Finding] = []
    failed: list[Mapping[str, Any]] = []
    for entry in _entries(data):
        name = check_node_name(entry["node"])
        node = nodes.setdefault(name, NodeSnapshot(name))
        text = _read_output(root, entry) if entry.get("exit_code") == 0 else None
        if text is not None:
            node.raw[str(entry.get("command"))] = text
        elif entry.get("exit_code") == 0 and not entry.get("error"):
            what = f"{entry.get('command')}: output file missing"
            findings.append(Finding(KIND_MISSING, name, what))
        else:
            failed.append(entry)
    findings += _failure_findings(failed)
    for name in sorted(nodes, key=natural_key):
        _parse_node(nodes[name], findings)
    fabric_text = None
    fabric = data.get("fabric")
    if isinstance(fabric, dict):
        fabric_text = _read_output(root, fabric) if fabric.get("exit_code") == 0 else None
        if fabric_text is None:
            findings += _failure_findings([fabric])
    findings.sort(key=lambda f: (natural_key(f.subject), f.kind))
    ordered = {name: nodes[name] for name in sorted(nodes, key=natural_key)}
    return Snapshot(
        root,
        str(data.get("created", "")),
        str(data.get("via", "")),
        ordered,
        data,
        fabric_text,
        findings,
    )
