"""What a node's links said at one moment of a job: each HCA port's error counters, width,
speed and state (sysfs), and each GPU link's NVLink error counters (``nvidia-smi nvlink -e``).
The job record's node parts hold one reading at the job's start and one at its end;
``analysis/record/counters.py`` compares them. Pure data, no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from topograph_slurm.model.result import Finding

#: The InfiniBand PortCounters that count errors (the kernel's sysfs names); the data and
#: packet counters (port_rcv_data, port_xmit_wait …) count traffic, not trouble.
ERROR_COUNTERS: tuple[str, ...] = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_rcv_constraint_errors",
    "port_xmit_constraint_errors",
    "VL15_dropped",
)

#: The port state and physical state of a link that carries traffic.
ACTIVE, LINK_UP = "ACTIVE", "LinkUp"


@dataclass(frozen=True, slots=True)
class PortReading:
    """One HCA port: its error counters (those it could read), rate and states as sysfs
    names them (``state`` ``ACTIVE``, ``phys_state`` ``LinkUp``: the text after ``4: ``);
    ``width``/``speed`` as :mod:`model.rates` knows them (``4x``, ``NDR``; empty: unread)."""

    device: str
    port: str
    counters: dict[str, int]
    width: str = ""
    speed: str = ""
    state: str = ""
    phys_state: str = ""
    link_layer: str = ""

    @property
    def name(self) -> str:
        """``mlx5_0/1``: how findings and records name the port."""
        return f"{self.device}/{self.port}"


@dataclass(frozen=True, slots=True)
class NvlinkReading:
    """One NVLink of one GPU: its error counters by nvidia-smi's names (``Replay Errors``)."""

    gpu: int
    link: int
    counters: dict[str, int]

    @property
    def name(self) -> str:
        """``GPU0/link3``."""
        return f"GPU{self.gpu}/link{self.link}"


@dataclass(frozen=True, slots=True)
class NodeCounters:
    """A node's links at one moment, and what could not be read (``record-incomplete``)."""

    ports: tuple[PortReading, ...] = ()
    nvlinks: tuple[NvlinkReading, ...] = ()
    findings: tuple[Finding, ...] = ()
