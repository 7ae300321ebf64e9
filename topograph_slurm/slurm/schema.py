"""The shape of each ``scontrol --json`` answer the package reads, and the one decoder that
holds an answer to it.

``scontrol show nodes|jobs --json`` is large on a real cluster (~2.7 kB per node and ~9 kB
per job on 26.05: 16,384 nodes and 10,000 jobs are hundreds of MB), and the readers use a
handful of fields of each record. They are decoded by ``msgspec`` straight into typed records
of only those fields, as the UFM source does (:mod:`topograph_slurm.sources.ufm.schema`):
the rest is skipped without being built. Every field is declared as loosely as 24.11 and
26.05 print it (a number, or 24.11's ``{"set", "number"}``; a list of names, or older
releases' comma-separated text) and no looser: a record of another shape (``{"nodes":
[1, 2]}``) is one input error naming where, never a crash later.

Slurm copies bytes of node reasons, comments and names into its JSON unchanged, so the answer
need not be UTF-8: such a byte decodes as U+FFFD, as every other reader of outside text here
does, rather than failing the command.
"""

from __future__ import annotations

from typing import Annotated, TypeVar

import msgspec

from topograph_slurm.errors import InputError

#: A whole number as ``--json`` prints it (``5``, ``5.0`` or ``"5"``); checked by ``whole``.
Number = int | Annotated[float, msgspec.Meta(ge=0)] | str
#: Names: a list (24.11, 26.05) or a comma-separated text (older releases' features).
Names = list[str] | str | None


class SetNumber(msgspec.Struct, gc=False):
    """24.11/26.05's optional number: ``{"set": true, "infinite": false, "number": 4}``."""

    number: Number = 0
    set: bool = True


class Node(msgspec.Struct, gc=False):
    """The fields of a ``show nodes`` record any reader uses."""

    name: str
    weight: Number | None = None
    features: Names = None
    active_features: Names = None
    state: Names = None
    reason: str | None = None
    gres: str | None = None
    gres_used: str | None = None
    partitions: Names = None


class NodeName(msgspec.Struct, gc=False):
    """A ``show nodes`` record when only the name is read (the node table)."""

    name: str


class Nodes(msgspec.Struct, gc=False):
    nodes: list[Node]


class NodeNames(msgspec.Struct, gc=False):
    nodes: list[NodeName]


class Allocated(msgspec.Struct, gc=False):
    """One node of a job's ``job_resources.nodes.allocation``: its rank order and name."""

    name: str
    index: Number = 0


class Allocation(msgspec.Struct, gc=False):
    allocation: list[Allocated] | None = None


class Resources(msgspec.Struct, gc=False):
    nodes: Allocation | None = None


class Job(msgspec.Struct, gc=False):
    """The fields of a ``show job(s)`` record any reader uses."""

    job_id: int | str
    job_state: Names = None
    state_reason: str | None = None
    nodes: str | None = None
    partition: str | None = None
    node_count: SetNumber | Number | None = None
    segment_size: SetNumber | Number | None = None
    admin_comment: str | None = None
    gres_detail: list[str] | None = None
    tres_per_node: str | None = None
    job_resources: Resources | None = None


class Jobs(msgspec.Struct, gc=False):
    jobs: list[Job]


class PartitionNodes(msgspec.Struct, gc=False):
    configured: str | None = None


class Partition(msgspec.Struct, gc=False):
    name: str | None = None
    nodes: PartitionNodes | None = None


class Partitions(msgspec.Struct, gc=False):
    partitions: list[Partition]


Answer = TypeVar("Answer")


def decode(data: bytes | str, command: str, shape: type[Answer]) -> Answer:
    """*data* (``command``'s output) as *shape*; an input error of one line otherwise."""
    try:
        try:
            return msgspec.json.decode(data, type=shape)
        except msgspec.DecodeError as err:
            if isinstance(data, str) or "UTF-8" not in str(err):
                raise
            text = data.decode("utf-8", errors="replace")
            return msgspec.json.decode(text, type=shape)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise InputError(f"unexpected `{command}` output: {str(err)[:200]}") from None
    except RecursionError:  # even in a field skipped: msgspec walks it
        raise InputError(f"unexpected `{command}` output: JSON nested too deep") from None
