"""What a collection runs where (:class:`CollectPlan`), what it brings back per node and command
(:class:`CommandResult`, :class:`CollectOutcome`), and the checks on the names that become
snapshot paths."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from topograph_slurm.errors import InputError
from topograph_slurm.model.names import expand, is_slurm_name, natural_key
from topograph_slurm.sources.nvidia_smi import CSV_FIELDS
from topograph_slurm.sources.snapshot import (
    KEY_Q,
    KEY_QUERY,
    KEY_ROCM_PRODUCT,
    KEY_ROCM_TOPO,
    KEY_TOPO,
    check_node_name,
)

TERM_GRACE = 5.0  # seconds between SIGTERM and SIGKILL for a timed-out srun

#: The commands ``collect`` runs on every node by default, by file key.
DEFAULT_COMMANDS: dict[str, tuple[str, ...]] = {
    KEY_QUERY: ("nvidia-smi", f"--query-gpu={','.join(CSV_FIELDS)}", "--format=csv,noheader"),
    KEY_Q: ("nvidia-smi", "-q"),
    KEY_TOPO: ("nvidia-smi", "topo", "-m"),
}
DEFAULT_IBNETDISCOVER: tuple[str, ...] = ("ibnetdiscover",)

#: What ``--gpu-vendor amd`` runs: rocm-smi's topology (xGMI links and NUMA nodes) and each
#: GPU's card series (gres' Type=).
AMD_COMMANDS: dict[str, tuple[str, ...]] = {
    KEY_ROCM_TOPO: ("rocm-smi", "--showtopo"),
    KEY_ROCM_PRODUCT: ("rocm-smi", "--showproduct"),
}
GPU_VENDORS = ("nvidia", "amd", "auto")
#: ``auto``: a command runs only where its program exists; elsewhere it prints nothing and
#: exits 0, which the snapshot reads as "this node has no such tool", not as a failure.
_IF_PRESENT = ("sh", "-c", 'command -v "$1" >/dev/null 2>&1 || exit 0; exec "$@"', "sh")


def gpu_commands(vendor: str) -> dict[str, tuple[str, ...]]:
    """The per-node GPU commands of ``--gpu-vendor``: NVIDIA's, AMD's, or (auto) both, each
    run only on the nodes that have its tool."""
    if vendor == "nvidia":
        return dict(DEFAULT_COMMANDS)
    if vendor == "amd":
        return dict(AMD_COMMANDS)
    both = {**DEFAULT_COMMANDS, **AMD_COMMANDS}
    return {key: (*_IF_PRESENT, *argv) for key, argv in both.items()}


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
    nodes = expand(hostlist)
    for node in nodes:
        check_node_name(node)
    return nodes


def check_key(key: str) -> str:
    """Command keys become file names: letters, digits, ``_.-`` only."""
    if not is_slurm_name(key):
        raise InputError(f"invalid command key {key!r}")
    return key
