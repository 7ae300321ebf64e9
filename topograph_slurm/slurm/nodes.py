"""Slurm's nodes: their names in node table order (the order it ranks a job's nodes in) and
each node's weight, features, state and reason, from ``scontrol show nodes --json`` (stable
across 23.02–26.05, read rather than pyslurm, whose releases pair with one Slurm major.minor).
Each parser is a pure function of its text; the commands run through :class:`.Scontrol`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from topograph_slurm.errors import InputError
from topograph_slurm.model import names
from topograph_slurm.model.health import SlurmNode
from topograph_slurm.model.occupancy import NodeGpus
from topograph_slurm.slurm.jobs import gres_gpus
from topograph_slurm.slurm.scontrol import Scontrol, decode, whole


def parse_node_table(text: str) -> list[str]:
    """Node names from ``scontrol show nodes --json``, in Slurm's node table order (the order
    it ranks a job's nodes in: see :func:`slurm_rank_order`)."""
    try:
        return [str(node["name"]) for node in decode(text, "scontrol show nodes --json")["nodes"]]
    except (KeyError, TypeError) as err:
        raise InputError(f"unexpected `scontrol show nodes --json` output: {err}") from None


def parse_scontrol_nodes(text: str) -> frozenset[str]:
    """Node names from ``scontrol show nodes --json`` output."""
    return frozenset(parse_node_table(text))


def scontrol_nodes(scontrol: Scontrol) -> frozenset[str]:
    """Run ``scontrol show nodes --json`` and return the node names."""
    return parse_scontrol_nodes(scontrol.run(["show", "nodes", "--json"]))


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
                whole(node["weight"]),
                _names(node.get("features")),
                _names(node.get("active_features")),
                _names(node.get("state")),
                str(node.get("reason") or ""),
            )
            for node in decode(text, command)["nodes"]
        ]
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"unexpected `{command}` output: {err!r}") from None


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


def parse_node_gpus(text: str) -> list[NodeGpus]:
    """Each node's GPUs from ``scontrol show nodes --json``: ``gres`` (configured), the
    allocated ``gres_used`` (all of them on an ALLOCATED node: no CPU is left to use the rest),
    whether its state takes no new job, and ``partitions``."""
    command = "scontrol show nodes --json"
    try:
        return [_node_gpus(node) for node in decode(text, command)["nodes"]]
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"unexpected `{command}` output: {err!r}") from None


def _node_gpus(node: dict[str, object]) -> NodeGpus:
    state = set(_names(node.get("state")))
    gpus = gres_gpus(str(node.get("gres") or ""))
    used = gpus if "ALLOCATED" in state else gres_gpus(str(node.get("gres_used") or ""))
    return NodeGpus(
        str(node["name"]), gpus, used, bool(state & _NO_NEW_JOBS), _names(node.get("partitions"))
    )


def scontrol_node_gpus(scontrol: Scontrol) -> list[NodeGpus]:
    """Run ``scontrol show nodes --json``: every node's GPUs, state and partitions."""
    return parse_node_gpus(scontrol.run(["show", "nodes", "--json"]))


def _names(value: object) -> tuple[str, ...]:
    """A list of names, or a comma-separated string of them (older releases' features)."""
    if isinstance(value, str):
        return tuple(part for part in value.split(",") if part)
    if isinstance(value, list):
        return tuple(str(part) for part in value)
    if value is None:
        return ()
    raise TypeError(f"expected a list of names, got {value!r}")


def scontrol_node_states(scontrol: Scontrol) -> list[SlurmNode]:
    """Run ``scontrol show nodes --json``: every node's weight, features, state and reason."""
    return parse_node_states(scontrol.run(["show", "nodes", "--json"]))


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
