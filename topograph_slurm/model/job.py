"""A running Slurm job as ``explain`` and ``order`` see it: its nodes in rank order, its GPUs
per node and the ``--tp-size`` decision job_submit.lua recorded in its AdminComment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The record ``M.record`` in templates/topograph_tp.lua writes, as ``M.parse_record`` reads it:
#: ``topograph:tp=8,gpn=4,group=2[,pp=2,replica=4[,unit=replica]][,segment=2][,switches=1@300],
#: src=user`` (first one wins; the --pp-size fields follow the head, as the filter writes them).
_RECORD = re.compile(r"topograph:(\S*)")
_RECORD_HEAD = re.compile(r"tp=(\d+),gpn=(\d+),group=(\d+)(?=,|$)", re.ASCII)
_RECORD_PP = re.compile(r",pp=(\d+),replica=(\d+)(?:,unit=([a-z]+))?(?=,|$)", re.ASCII)
_RECORD_SEGMENT = re.compile(r",segment=(\d+)(?=,|$)", re.ASCII)
_RECORD_SOURCE = re.compile(r",src=([^,]*)$")


@dataclass(frozen=True, slots=True)
class TpRecord:
    """What the controller decided for ``--tp-size`` (and ``--pp-size``): TP size, GPUs per
    node, nodes per TP group, the segment size it set (None: none), where the TP size came
    from; with ``--pp-size`` the PP size, the nodes holding whole model replicas and what the
    placement keeps together (``replica`` or ``group``; empty: nothing), else None/empty."""

    tp: int
    gpus_per_node: int
    group: int
    segment: int | None = None
    source: str = ""
    pp: int | None = None
    replica: int | None = None
    unit: str = ""


def parse_tp_record(text: str) -> TpRecord | None:
    """The record in an AdminComment, or None when there is none (or it is not ours: a zero
    size is never written, so a record holding one was edited by hand)."""
    found = _RECORD.search(text)
    head = _RECORD_HEAD.match(found.group(1)) if found else None
    if found is None or head is None:
        return None
    tp, gpn, group = (int(value) for value in head.groups())
    if min(tp, gpn, group) < 1:
        return None
    segment = _RECORD_SEGMENT.search(found.group(1))
    source = _RECORD_SOURCE.search(found.group(1))
    pipeline = _RECORD_PP.match(found.group(1), head.end())
    pp, replica = (int(pipeline.group(1)), int(pipeline.group(2))) if pipeline else (None, None)
    if pp is not None and replica is not None and min(pp, replica) < 1:
        return None
    return TpRecord(
        tp,
        gpn,
        group,
        int(segment.group(1)) if segment else None,
        source.group(1) if source else "",
        pp,
        replica,
        (pipeline.group(3) or "") if pipeline else "",
    )


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job from ``scontrol show job --json``.

    ``nodes`` are in the order Slurm ranks them (its node table order; see
    :func:`topograph_slurm.slurm.scontrol.slurm_rank_order`), empty while the job pends.
    ``gpus_per_node`` is None when the job holds no GPUs or its nodes hold different counts.
    """

    job_id: str
    state: str
    nodes: tuple[str, ...]
    gpus_per_node: int | None = None
    record: TpRecord | None = None

    @property
    def tp(self) -> int | None:
        """The ``--tp-size`` the job was submitted with, when the filter recorded it."""
        return self.record.tp if self.record else None

    @property
    def pp(self) -> int | None:
        """The ``--pp-size`` the job was submitted with, when the filter recorded it."""
        return self.record.pp if self.record else None
