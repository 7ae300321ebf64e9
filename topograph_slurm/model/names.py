"""Names as Slurm and sysadmins read them: the one Slurm name rule, the one sanitiser, the one
unique-name maker, natural order, and hostlists (through ClusterShell only).

Every name that reaches a Slurm file — node, switch, block, topology — comes from data (a fabric
description, a previous file, a config) and must pass the same rule before a template sees it:
letters, digits and ``_.-``, starting with a letter or digit, at most 64 characters (Slurm's
switch and block name limit; node names are held to it too, so one rule serves all).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetBase, NodeSetException
from ClusterShell.RangeSet import RangeSet

from topograph_slurm.errors import InputError, TopographError

MAX_NAME = 64
SLURM_NAME = re.compile(rf"\A[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_NAME - 1}}}\Z")
#: Newline-separated Slurm names: one C-level match checks a whole list at once.
SLURM_NAMES = re.compile(rf"(?:[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_NAME - 1}}}\n)*")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_PLAIN_NAMES = re.compile(r"(?:[A-Za-z0-9_.-]+\n)*")  # newline-separated plain node names
_LAST_NUMBER = re.compile(r"(.*\D|)(\d+)(\D*)")  # a plain name around its last digit run


def is_slurm_name(name: str) -> bool:
    """Whether *name* may stand in a Slurm file as a node, switch, block or topology name."""
    return SLURM_NAME.match(name) is not None


def sanitize(raw: str, fallback: str = "") -> str:
    """A Slurm- and hostlist-safe name made from *raw*: runs of other characters become ``-``,
    at most 64 characters, not starting or ending with a separator (a leading ``-`` would read
    as an option to scontrol). *fallback* when nothing is left."""
    name = _UNSAFE.sub("-", raw).strip("-_.")[:MAX_NAME].rstrip("-_.")
    return name or fallback


def unique(name: str, taken: set[str]) -> str:
    """*name*, or ``<name>-2``, ``-3``… (cut to stay within 64 characters) when it is taken;
    the result is added to *taken*."""
    candidate, n = name, 2
    while candidate in taken:
        suffix = f"-{n}"
        candidate, n = name[: MAX_NAME - len(suffix)] + suffix, n + 1
    taken.add(candidate)
    return candidate


def natural_key(name: str) -> tuple[tuple[str | int, ...], str]:
    """Sort key putting ``node2`` before ``node10``, as hostlists and sysadmins do."""
    parts = re.split(r"(\d+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name


def expand(hostlist: str, where: str = "", error: type[TopographError] = InputError) -> list[str]:
    """A Slurm/ClusterShell hostlist (``gpu[001-064],login1``) as names in natural order,
    without duplicates. A malformed one raises *error* naming *where* it came from."""
    try:
        nodes = NodeSet(hostlist)  # ClusterShell's resolver: a site's @groups work too
    except NodeSetException as err:
        prefix = f"{where}: " if where else ""
        raise error(f"{prefix}invalid hostlist {hostlist!r}: {err}") from None
    return sorted(nodes, key=natural_key)


def count(hostlists: Iterable[str]) -> int:
    """Distinct names across *hostlists*; one that does not parse counts its comma items
    literally (a guard counting nodes must not fail on a hand-edited file)."""
    nodes = NodeSet(resolver=RESOLVER_NOGROUP)
    literal: set[str] = set()
    for hostlist in hostlists:
        try:
            nodes.update(NodeSet(hostlist, resolver=RESOLVER_NOGROUP))
        except NodeSetException:
            literal.update(item.strip() for item in hostlist.split(",") if item.strip())
    if literal:
        literal.difference_update(nodes)
    return len(nodes) + len(literal)


def fold(names: Iterable[str]) -> str:
    """Fold node names into a Slurm hostlist (``gpu[001-064]``), ranges on the last number only,
    since Slurm's hostlist parser does not read ClusterShell's multi-axis ranges.

    Plain names (no hostlist syntax: brackets, operators, ``@`` groups, wildcards, blanks) are
    handed to ClusterShell already grouped by what surrounds their last number, one
    ``NodeSetBase(pattern, RangeSet)`` per group: ``NodeSet.fromlist`` would run its full
    parser on every name, most of rendering a large tree. Anything else takes ``fromlist``.
    ClusterShell still does all the folding and padding.
    """
    ordered = list(names)
    if not _PLAIN_NAMES.fullmatch("\n".join(ordered) + "\n" if ordered else ""):
        nodes = NodeSet.fromlist(ordered)
    else:
        nodes = NodeSet(resolver=RESOLVER_NOGROUP)
        for group in _by_pattern(ordered):
            nodes.update(group)
    nodes.fold_axis = [-1]
    return str(nodes)


def _by_pattern(names: list[str]) -> list[NodeSetBase]:
    """``gpu0001``, ``gpu0002`` → ``NodeSetBase("gpu%s", RangeSet("0001-0002"))``; names
    without a digit stand alone."""
    ranges: dict[str, RangeSet] = {}
    groups: list[NodeSetBase] = []
    for name in names:
        match = _LAST_NUMBER.fullmatch(name)
        if match is None:
            groups.append(NodeSetBase(name))
            continue
        prefix, number, suffix = match.groups()
        pattern = f"{prefix}%s{suffix}"
        if pattern not in ranges:
            ranges[pattern] = RangeSet()
        ranges[pattern].add(number)
    return groups + [NodeSetBase(pattern, indexes) for pattern, indexes in ranges.items()]
