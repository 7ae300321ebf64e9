"""A partition's nodes, from ``scontrol show partition --json NAME``: what ``pools
--partition`` splits.

Field names checked on 24.11.5 and 26.05.5 (tests/integration/test_pools.py runs it):
``partitions[].name`` and ``partitions[].nodes.configured`` (a hostlist); an unknown name gives
``"partitions": []`` and exit 0 on both.
"""

from __future__ import annotations

from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.model import names
from topograph_slurm.slurm.schema import Partitions, decode
from topograph_slurm.slurm.scontrol import Scontrol


def parse_partition_nodes(data: bytes | str, name: str) -> list[str]:
    """The nodes partition *name* is configured with, in name order; an input error when
    Slurm lists no such partition or it has no nodes."""
    listed = [
        p
        for p in decode(data, "scontrol show partition --json", Partitions).partitions
        if p.name == name
    ]
    if not listed:
        raise InputError(f"partition {name} not found: scontrol show partition lists none")
    hostlist = (listed[0].nodes.configured if listed[0].nodes else None) or ""
    if not hostlist:
        raise InputError(f"partition {name} has no nodes")
    return names.expand(hostlist, f"partition {name}")


def scontrol_partition_nodes(scontrol: Scontrol, name: str) -> list[str]:
    """Run ``scontrol show partition --json NAME`` and read its nodes."""
    names.check([name], "partition", "--partition", UsageError)
    return parse_partition_nodes(scontrol.output(["show", "partition", "--json", name]), name)
