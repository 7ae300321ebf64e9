"""Transports: run the node script (``collect.protocol``) on many nodes and bring back each
node's raw output, exit status and timing. Every transport has the same shape
(:class:`Transport`); ``TRANSPORTS`` maps ``--via`` names to them.

Choices, and why:

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

Every srun runs in its own session, so a timed-out one is stopped with its whole process group
(SIGTERM, which makes srun cancel its job or step, then SIGKILL after the grace).

No child gets a UFM credential (``CREDENTIAL_ENV_VARS``: ``collect --ufm`` reads them from the
environment, and srun exports its whole environment to every task on every node): srun is
started with an environment without them; ClusterShell's ssh workers copy ``os.environ`` and
offer no way to leave a variable out, so those variables leave ``os.environ`` for the duration
of the clush fan-out (UFM has been fetched by then) and come back after.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from ClusterShell.NodeSet import NodeSet

from topograph_slurm.collect.plan import CollectPlan, now_iso
from topograph_slurm.collect.protocol import split_labelled
from topograph_slurm.errors import CollectError
from topograph_slurm.sources.ufm.credentials import CREDENTIAL_ENV_VARS

#: Called with a node's name as soon as that node is finished (answered, failed or timed out).
OnDone = Callable[[str], None]


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


class Transport(Protocol):
    """Run *script* on *nodes*, each bounded by *timeout* (plus ``plan.grace``), calling
    *on_done* once per node as it finishes; one run per node comes back, in *nodes* order."""

    def __call__(
        self,
        plan: CollectPlan,
        nodes: Sequence[str],
        script: str,
        timeout: float,
        on_done: OnDone,
        /,
    ) -> list[NodeRun]: ...


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


def child_environment() -> dict[str, str]:
    """This process's environment without the UFM credential variables, for srun."""
    return {key: value for key, value in os.environ.items() if key not in CREDENTIAL_ENV_VARS}


@contextlib.contextmanager
def _without_credentials() -> Iterator[None]:
    """The UFM credential variables out of ``os.environ`` while ClusterShell forks ssh."""
    saved = {key: os.environ.pop(key) for key in CREDENTIAL_ENV_VARS if key in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


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
        with _LIVE_LOCK:  # started and tracked at once: Ctrl-C in between would miss it
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=child_environment(),
            )
            _LIVE.add(proc)
    except OSError as exc:
        return NodeRun("", "", "", None, False, 0.0, stamp, f"cannot run srun: {exc.strerror}")
    timed_out = False
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


def run_bounded(argv: list[str], timeout: float, grace: float) -> NodeRun:
    """Run one command (an srun) with the hard local timeout every srun here gets: SIGTERM
    after *timeout* + *grace* (srun cancels its step), SIGKILL *grace* later; tracked, so
    :func:`terminate_live` stops it on Ctrl-C. Other edges (``bench``) launch through this."""
    return _run(argv, timeout, grace)


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
    on_done: OnDone,
) -> list[NodeRun]:
    """Every node through its own srun, at most ``plan.fanout`` at once."""

    def one(node: str) -> NodeRun:
        try:
            return run_srun_node(plan, node, script, timeout)
        finally:
            on_done(node)

    with ThreadPoolExecutor(max_workers=max(1, min(plan.fanout, len(nodes) or 1))) as pool:
        try:
            return list(pool.map(one, nodes))
        except BaseException:  # Ctrl-C: stop the running sruns before the pool waits for them
            pool.shutdown(wait=False, cancel_futures=True)
            terminate_live()
            raise


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
    on_done: OnDone,
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
            on_done(node)
        elif batch.timed_out:
            runs.append(
                NodeRun(node, "", batch.stderr, None, True, batch.duration, batch.timestamp)
            )
            on_done(node)
        else:
            missing.append(node)
    if missing:
        runs += _srun_per_node(plan, missing, script, timeout, on_done)
    order = {node: i for i, node in enumerate(nodes)}
    return sorted(runs, key=lambda run: order[run.node])


def fan_out_srun(
    plan: CollectPlan,
    nodes: Sequence[str],
    script: str,
    timeout: float,
    on_done: OnDone,
) -> list[NodeRun]:
    """srun transport: ``batch`` (default) or ``per-node`` (see the module doc)."""
    if plan.srun_mode == "per-node" or len(nodes) < 2:
        return _srun_per_node(plan, nodes, script, timeout, on_done)
    if plan.srun_mode != "batch":
        raise CollectError(f"unknown srun mode {plan.srun_mode!r}: use batch or per-node")
    return _srun_batch(plan, nodes, script, timeout, on_done)


def fan_out_clush(
    plan: CollectPlan,
    nodes: Sequence[str],
    script: str,
    timeout: float,
    on_done: OnDone,
) -> list[NodeRun]:
    """Every node over ssh with ClusterShell: one task, fanout-limited, per-node timeout.

    The task runs in a thread of its own: ClusterShell binds one task to each thread, so a
    fresh thread gives every call fresh buffers and settings.
    """
    box: list[list[NodeRun]] = []
    failure: list[BaseException] = []

    def body() -> None:
        try:
            box.append(_clush_in_thread(plan, nodes, script, timeout, on_done))
        except BaseException as err:  # re-raised in the caller's thread
            failure.append(err)

    thread = threading.Thread(target=body, name="topograph-clush", daemon=True)
    with _without_credentials():
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
    on_done: OnDone,
) -> list[NodeRun]:
    from ClusterShell.Event import EventHandler
    from ClusterShell.Task import task_self

    class Hup(EventHandler):  # type: ignore[misc]
        def ev_hup(self, worker: object, node: str, rc: int) -> None:
            on_done(node)

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
            on_done(node)
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


TRANSPORTS: dict[str, Transport] = {
    "srun": fan_out_srun,
    "clush": fan_out_clush,
}


def check_transport(via: str) -> None:
    if via not in TRANSPORTS:
        raise CollectError(f"unknown transport {via!r}: use one of {', '.join(TRANSPORTS)}")
    binary = "srun" if via == "srun" else "ssh"
    if shutil.which(binary) is None:
        raise CollectError(f"{binary} not found on PATH (needed for --via {via})")
