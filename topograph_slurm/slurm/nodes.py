"""Slurm's nodes: their names in node table order (the order it ranks a job's nodes in) and
each node's weight, features, state and reason, from ``scontrol show nodes --json`` (stable
across 23.02–26.05, read rather than pyslurm, whose releases pair with one Slurm major.minor).
Each parser is a pure function of the answer's bytes, decoded into the typed records of
:mod:`.schema` (only the fields read); the commands run through :class:`.Scontrol`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from topograph_slurm.errors import InputError
from topograph_slurm.model import names
from topograph_slurm.model.health import SlurmNode
from topograph_slurm.model.occupancy import NodeGpus
from topograph_slurm.slurm.jobs import gres_gpus
from topograph_slurm.slurm.schema import Node, NodeNames, Nodes, decode
from topograph_slurm.slurm.scontrol import Scontrol, whole

#: The command every reader here reads, as its errors name it.
SHOW_NODES = "scontrol show nodes --json"


def parse_node_table(data: bytes | str) -> list[str]:
    """Node names from ``scontrol show nodes --json``, in Slurm's node table order (the order
    it ranks a job's nodes in: see :func:`slurm_rank_order`)."""
    return [node.name for node in decode(data, SHOW_NODES, NodeNames).nodes]


def parse_scontrol_nodes(data: bytes | str) -> frozenset[str]:
    """Node names from ``scontrol show nodes --json`` output."""
    return frozenset(parse_node_table(data))


def scontrol_nodes(scontrol: Scontrol) -> frozenset[str]:
    """Run ``scontrol show nodes --json`` and return the node names."""
    return parse_scontrol_nodes(_show_nodes(scontrol))


def _show_nodes(scontrol: Scontrol) -> bytes:
    return scontrol.output(["show", "nodes", "--json"])


def _records(data: bytes | str) -> list[Node]:
    return decode(data, SHOW_NODES, Nodes).nodes


def parse_node_states(data: bytes | str) -> list[SlurmNode]:
    """Each node's weight, features (available and active), state flags and reason from
    ``scontrol show nodes --json``: what ``health`` compares its proposals with.

    Field names checked on 24.11 and 26.05: ``weight`` (a number), ``features`` and
    ``active_features`` (lists of names), ``state`` (a list: ``["IDLE", "DRAIN"]``),
    ``reason`` (``""`` when unset).
    """
    try:
        return [
            SlurmNode(
                node.name,
                whole(node.weight),
                _names(node.features),
                _names(node.active_features),
                _names(node.state),
                node.reason or "",
            )
            for node in _records(data)
        ]
    except ValueError as err:
        raise InputError(f"unexpected `{SHOW_NODES}` output: {err}") from None


#: Node state flags under which a node takes no new job: its free GPUs count as down.
_NO_NEW_JOBS = frozenset(
    {
        "DOWN",
        "DRAIN",
        "DRAINED",
        "DRAINING",
        "FAIL",
        "FAILING",
        "FUTURE",
        "INVAL",
        "INVALID",
        "MAINTENANCE",
        "NOT_RESPONDING",
        "POWERING_DOWN",
        "REBOOT_ISSUED",
    }
)


#: Base states of a node some job holds part or all of.
_HELD = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})


def parse_node_gpus(data: bytes | str) -> list[NodeGpus]:
    """Each node's GPUs from ``scontrol show nodes --json``: ``gres`` (configured), the
    allocated ``gres_used`` (all of them on an ALLOCATED node: no CPU is left to use the rest),
    whether its state takes no new job, ``partitions``, and whether a job holds any of it."""
    return [_node_gpus(node) for node in _records(data)]


def _node_gpus(node: Node) -> NodeGpus:
    state = set(_names(node.state))
    gpus = gres_gpus(node.gres or "")
    used = gpus if "ALLOCATED" in state else gres_gpus(node.gres_used or "")
    held = bool(state & _HELD) or used > 0
    return NodeGpus(
        node.name, gpus, used, bool(state & _NO_NEW_JOBS), _names(node.partitions), held
    )


def scontrol_node_gpus(scontrol: Scontrol) -> list[NodeGpus]:
    """Run ``scontrol show nodes --json``: every node's GPUs, state and partitions."""
    return parse_node_gpus(_show_nodes(scontrol))


def _names(value: list[str] | str | None) -> tuple[str, ...]:
    """A list of names, or a comma-separated string of them (older releases' features)."""
    if isinstance(value, str):
        return tuple(part for part in value.split(",") if part)
    return tuple(value or ())


def scontrol_node_states(scontrol: Scontrol) -> list[SlurmNode]:
    """Run ``scontrol show nodes --json``: every node's weight, features, state and reason."""
    return parse_node_states(_show_nodes(scontrol))


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
    not tell the order; the table does. A job read with :func:`~.jobs.parse_scontrol_job` is already
    in this order: this is for node lists from elsewhere (a hostlist, which expands sorted).
    """
    position = {name: i for i, name in enumerate(node_table)}
    unknown = len(position)
    return sorted(nodes, key=lambda n: (position.get(n, unknown), names.natural_key(n)))
