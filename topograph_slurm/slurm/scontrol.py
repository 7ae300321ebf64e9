"""What the running Slurm says: its nodes (in its node table order, and each node's weight,
features and state), a job, its topology.

Reads ``scontrol show nodes --json`` and ``scontrol show job --json`` (stable across
23.02–26.05) rather than pyslurm, whose releases pair with a single Slurm major.minor, and
``scontrol show topology``, whose ``Key=Value`` lines :mod:`.layout` already reads. Each
command runs at the edge (:func:`_scontrol`); each parser is a pure function of its text.

Field names checked on 24.11.5 and 26.05.5 (tests/integration/test_slurm_job_sources.py records
both): ``jobs[].job_id`` (a number), ``job_state`` (a list: ``["RUNNING"]``), ``nodes`` (a
hostlist, ``""`` while pending), ``job_resources.nodes.allocation[].{index,name}`` (absent,
``null``, while pending), ``gres_detail`` (one ``gpu:4(IDX:0-3)`` per node, also for an
exclusive job that asked for no GPUs), ``tres_per_node`` (``gres/gpu:4`` for ``--gres=gpu:4``
and ``--gpus-per-node=4``), ``admin_comment`` (``""`` when unset). An unknown job id gives
``"jobs": []`` and exit 0 on both.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from typing import Any

from topograph_slurm.errors import CollectError, InputError, UsageError
from topograph_slurm.model import names
from topograph_slurm.model.health import SlurmNode
from topograph_slurm.model.job import SlurmJob, parse_tp_record
from topograph_slurm.model.result import NamedTopology
from topograph_slurm.sources.layout import parse_topology

#: A job id scontrol takes: ``123``, an array task ``123_4``, a het component ``123+1``.
_JOB_ID = re.compile(r"\A\d+(?:[_+]\d+)?\Z")
#: GPUs of one node in ``gres_detail`` (``gpu:4(IDX:0-3)``, typed ``gpu:h100:4(IDX:0-3)``).
_GRES_GPUS = re.compile(r"(?:^|,)gpu(?::[^:(,]+)?:(\d+)")
#: GPUs per node in ``tres_per_node`` (``gres/gpu:4``, ``gres/gpu:h100:4``, ``gres/gpu=4``).
_TRES_GPUS = re.compile(r"(?:^|,)gres/gpu(?::[^:=,]+)?[:=](\d+)")


def _scontrol(args: Sequence[str], binary: str, timeout: float) -> str:
    """stdout of ``scontrol <args>``; a collect error (one line) when it cannot be had."""
    what = " ".join([binary, *args[:2]])
    try:
        proc = subprocess.run(
            [binary, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise CollectError(f"{binary} not found: install slurm-client or pass a hostlist") from None
    except subprocess.TimeoutExpired:
        raise CollectError(f"{what} timed out after {timeout:g}s") from None
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no error output"]
        raise CollectError(f"{what} failed (exit {proc.returncode}): {tail[0]}")
    return proc.stdout


def _json(text: str, command: str) -> Any:
    """The decoded output; ``json`` gives up on deep nesting with a RecursionError, which is
    bad input like any other malformed output."""
    try:
        return json.loads(text)
    except ValueError as err:
        raise InputError(f"unexpected `{command}` output: {err}") from None
    except RecursionError:
        raise InputError(f"unexpected `{command}` output: JSON nested too deep") from None


# --------------------------------------------------------------------------- nodes


def parse_node_table(text: str) -> list[str]:
    """Node names from ``scontrol show nodes --json``, in Slurm's node table order (the order
    it ranks a job's nodes in: see :func:`slurm_rank_order`)."""
    try:
        return [str(node["name"]) for node in _json(text, "scontrol show nodes --json")["nodes"]]
    except (KeyError, TypeError) as err:
        raise InputError(f"unexpected `scontrol show nodes --json` output: {err}") from None


def parse_scontrol_nodes(text: str) -> frozenset[str]:
    """Node names from ``scontrol show nodes --json`` output."""
    return frozenset(parse_node_table(text))


def scontrol_node_table(binary: str = "scontrol", timeout: float = 60.0) -> list[str]:
    """Run ``scontrol show nodes --json``: the node names in node table order."""
    return parse_node_table(_scontrol(["show", "nodes", "--json"], binary, timeout))


def scontrol_nodes(binary: str = "scontrol", timeout: float = 60.0) -> frozenset[str]:
    """Run ``scontrol show nodes --json`` and return the node names."""
    return frozenset(scontrol_node_table(binary, timeout))


def parse_node_states(text: str) -> list[SlurmNode]:
    """Each node's weight, features (available and active), state flags and reason from
    ``scontrol show nodes --json``: what ``health`` compares its proposals with.

    Field names checked on 24.11 and 26.05: ``weight`` (a number), ``features`` and
    ``active_features`` (lists of names), ``state`` (a list: ``["IDLE", "DRAIN"]``),
    ``reason`` (``""`` when unset).
    """
    command = "scontrol show nodes --json"
    try:
        return [
            SlurmNode(
                str(node["name"]),
                int(node["weight"]),
                _names(node.get("features")),
                _names(node.get("active_features")),
                _names(node.get("state")),
                str(node.get("reason") or ""),
            )
            for node in _json(text, command)["nodes"]
        ]
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"unexpected `{command}` output: {err!r}") from None


def _names(value: object) -> tuple[str, ...]:
    """A list of names, or a comma-separated string of them (older releases' features)."""
    if isinstance(value, str):
        return tuple(part for part in value.split(",") if part)
    if isinstance(value, list):
        return tuple(str(part) for part in value)
    if value is None:
        return ()
    raise TypeError(f"expected a list of names, got {value!r}")


def scontrol_node_states(binary: str = "scontrol", timeout: float = 60.0) -> list[SlurmNode]:
    """Run ``scontrol show nodes --json``: every node's weight, features, state and reason."""
    return parse_node_states(_scontrol(["show", "nodes", "--json"], binary, timeout))


def slurm_rank_order(nodes: Iterable[str], node_table: Sequence[str]) -> list[str]:
    """*nodes* in the order Slurm lays a job's ranks on them: its node table order, as
    ``scontrol show nodes --json`` lists it (nodes it does not know last, by name).

    Measured (``srun -l --ntasks-per-node=1`` over 6 of 8 nodes defined in slurm.conf as
    node08…node01, blocks/leaves mixing odd and even nodes): ``SLURM_PROCID`` follows the node
    table on every setup, and so do ``scontrol show job --json`` (``nodes`` and the allocation
    list), ``SLURM_JOB_NODELIST`` and ``scontrol show hostnames``. The table itself differs:
    24.11 ``topology/block`` keeps slurm.conf order (node08 is rank 0); 24.11 ``topology/tree``
    and 26.05 block and tree sort by name (DESIGN §4's "26.05 tasks follow topology order" did
    not show: rank 0 was node01 though its block came second); 26.05 with
    ``TopologyParam=BlockAsNodeRank`` groups by block. The Slurm version alone therefore does
    not tell the order; the table does. A job read with :func:`parse_scontrol_job` is already
    in this order: this is for node lists from elsewhere (a hostlist, which expands sorted).
    """
    position = {name: i for i, name in enumerate(node_table)}
    unknown = len(position)
    return sorted(nodes, key=lambda n: (position.get(n, unknown), names.natural_key(n)))


# --------------------------------------------------------------------------- jobs


def parse_scontrol_job(text: str, job_id: str) -> SlurmJob:
    """Job *job_id* from ``scontrol show job --json <job_id>`` output (an array job's own
    task, else the first listed); an input error when Slurm lists no such job."""
    jobs = _json(text, "scontrol show job --json")
    try:
        listed = jobs["jobs"]
        if not listed:
            raise InputError(f"job {job_id} not found: scontrol show job lists no such job")
        job = next((j for j in listed if str(j.get("job_id")) == job_id), listed[0])
        return SlurmJob(
            str(job["job_id"]),
            _state(job.get("job_state")),
            tuple(_job_nodes(job)),
            _gpus_per_node(job),
            parse_tp_record(str(job.get("admin_comment") or "")),
        )
    except (KeyError, TypeError, AttributeError) as err:
        raise InputError(f"unexpected `scontrol show job --json` output: {err!r}") from None


def scontrol_job(job_id: str, binary: str = "scontrol", timeout: float = 60.0) -> SlurmJob:
    """Run ``scontrol show job --json <job_id>`` and read the job."""
    job_id = job_id.strip()
    if not _JOB_ID.match(job_id):
        raise UsageError(f"invalid job id {job_id!r}: expected a number such as 1234 or 1234_5")
    return parse_scontrol_job(_scontrol(["show", "job", "--json", job_id], binary, timeout), job_id)


def _state(value: object) -> str:
    """``["RUNNING"]`` (24.11, 26.05; flags such as ``COMPLETING`` follow) or a plain string."""
    if isinstance(value, list):
        return "+".join(str(v) for v in value)
    return str(value or "UNKNOWN")


def _job_nodes(job: dict[str, Any]) -> list[str]:
    """The allocation list in Slurm's order; the ``nodes`` hostlist (sorted by name) when a
    finished job no longer has one."""
    resources = job.get("job_resources") or {}
    allocation = (resources.get("nodes") or {}).get("allocation") or []
    if allocation:
        ordered = sorted(allocation, key=lambda node: int(node.get("index", 0)))
        return [str(node["name"]) for node in ordered]
    hostlist = str(job.get("nodes") or "")
    return names.expand(hostlist, "scontrol show job") if hostlist else []


def _gpus_per_node(job: dict[str, Any]) -> int | None:
    """GPUs each node holds: the allocated ``gres_detail`` when all nodes agree, else the
    request ``tres_per_node``; None without GPUs or when nodes hold different counts."""
    detail = job.get("gres_detail") or []
    counts = {sum(int(n) for n in _GRES_GPUS.findall(str(entry))) for entry in detail}
    if len(counts) == 1 and min(counts) > 0:
        return counts.pop()
    if len(counts) > 1:
        return None
    found = _TRES_GPUS.findall(str(job.get("tres_per_node") or ""))
    return sum(int(n) for n in found) or None


# --------------------------------------------------------------------------- topology


def parse_show_topology(text: str, name: str | None = None) -> NamedTopology:
    """``scontrol show topology [name]`` output as a tree and/or blocks (neither: flat, which
    prints nothing)."""
    found = parse_topology(text, "scontrol show topology")
    return NamedTopology(name or "", found.tree, found.blocks)


def scontrol_topology(
    name: str | None = None, binary: str = "scontrol", timeout: float = 60.0
) -> NamedTopology:
    """The running topology (with a topology.yaml: the default one, or the one *name*d)."""
    if name is not None:
        names.check([name], "topology", "--topology-name", error=UsageError)
    text = _scontrol(["show", "topology", *([name] if name else [])], binary, timeout)
    return parse_show_topology(text, name)


# --------------------------------------------------------------------------- version

#: ``slurm-wlm 24.11.5`` (Debian's packages), ``slurm 26.05.5`` (upstream builds).
_VERSION_LINE = re.compile(r"\Aslurm(?:-wlm)?\s+(\d+\.\d+(?:\.\d+)?)\b")
#: The commands asked for the Slurm release, in order: both print the client's release, the
#: one installed beside slurmctld on the host that writes its config, and need no daemon.
VERSION_COMMANDS = ("scontrol", "sinfo")


def parse_version(text: str, command: str = "scontrol --version") -> str:
    """``24.11.5`` from ``scontrol --version`` / ``sinfo --version`` output (checked on
    24.11.5 and 26.05.5: ``slurm-wlm 24.11.5``; upstream builds print ``slurm 24.11.5``)."""
    match = _VERSION_LINE.match(text.strip())
    if match is None:
        first = text.strip().splitlines()[:1] or ["no output"]
        raise InputError(f"unexpected `{command}` output: {first[0][:80]!r}")
    return match.group(1)


def installed_version(
    binaries: Sequence[str] = VERSION_COMMANDS, timeout: float = 10.0
) -> tuple[str, str]:
    """The Slurm release and the command that told it; a collect error naming why each
    command failed when none answers."""
    reasons = []
    for binary in binaries:
        if shutil.which(binary) is None:
            reasons.append(f"{binary} not found")
            continue
        try:
            return parse_version(_scontrol(["--version"], binary, timeout)), binary
        except (CollectError, InputError) as err:
            reasons.append(str(err))
    raise CollectError("; ".join(reasons))


# --------------------------------------------------------------------------- reconfigure


def run_scontrol(args: Sequence[str], binary: str = "scontrol", timeout: float = 60.0) -> str:
    """stdout of ``scontrol <args>`` for the edge modules that act on Slurm (reconfigure);
    a collect error (one line: the command, its exit code, its last stderr line) otherwise."""
    return _scontrol(args, binary, timeout)


#: A slurmctld log line: ``[2026-12-01T12:05:51.916] fatal: …`` (or ``error:``).
_LOG_LINE = re.compile(r"^\[[^\]]*\]\s+(fatal|error):\s+(?:_?[a-z_]+:\s+)?(.*)$")
#: The line a reconfigure attempt starts with (24.11 and 26.05).
RECONFIGURE_START = "Attempting to reconfigure"


def reconfigure_reason(log: str) -> str | None:
    """Why slurmctld refused a reconfigure, from its log since the attempt: the ``fatal:`` line
    and the ``error:`` just before it (``Parsing error at unrecognized key: FooBar; something
    wrong with opening/reading /etc/slurm/topology.conf: Invalid argument``). Recorded on
    24.11.5 and 26.05.5: ``scontrol reconfigure`` itself only says ``Unspecified error``."""
    attempt = log.rfind(RECONFIGURE_START)
    lines = log[attempt if attempt >= 0 else 0 :].splitlines()
    found = [m for m in map(_LOG_LINE.match, lines) if m is not None]
    fatal = next((i for i, m in enumerate(found) if m.group(1) == "fatal"), None)
    if fatal is None:
        return None
    before = found[fatal - 1].group(2) if fatal and found[fatal - 1].group(1) == "error" else None
    return "; ".join(text for text in (before, found[fatal].group(2)) if text)


def parse_log_file(show_config: str) -> str | None:
    """``SlurmctldLogFile`` from ``scontrol show config`` (None when slurmctld logs to syslog
    or the journal: ``(null)``)."""
    match = re.search(r"^SlurmctldLogFile\s*=\s*(\S+)", show_config, re.MULTILINE)
    return match.group(1) if match and match.group(1) != "(null)" else None
