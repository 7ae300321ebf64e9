"""Names as Slurm and sysadmins read them: the one Slurm name rule, the one sanitiser, the one
unique-name maker, natural order, and hostlists (through ClusterShell only).

Every name that reaches a Slurm file — node, switch, block, topology — comes from data (a fabric
description, a previous file, a config) and must pass the same rule before a template sees it:
letters, digits and ``_.-``, starting with a letter or digit, at most 64 characters (Slurm's
switch and block name limit; node names are held to it too, so one rule serves all).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetBase, NodeSetException
from ClusterShell.NodeUtils import GroupResolverError, GroupSourceError
from ClusterShell.RangeSet import RangeSet

from topograph_slurm.errors import InputError, TopographError

MAX_NAME = 64
#: The rule in words, for error messages.
RULE = "letters, digits and _.-, starting with a letter or digit, at most 64 characters"
#: Largest hostlist :func:`expand` expands: ClusterShell builds every name, so ``n[1-20000000]``
#: would run for minutes; no cluster has a million nodes.
MAX_HOSTLIST = 1_000_000
SLURM_NAME = re.compile(rf"\A[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_NAME - 1}}}\Z")
#: Newline-separated Slurm names: one C-level match checks a whole list at once.
SLURM_NAMES = re.compile(rf"(?:[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_NAME - 1}}}\n)*")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_PLAIN_NAMES = re.compile(r"(?:[A-Za-z0-9_.-]+\n)*")  # newline-separated plain node names
_LAST_NUMBER = re.compile(r"(.*\D|)(\d+)(\D*)")  # a plain name around its last digit run
#: A bracket group, or a separator between hostlist items (operators count as separators).
_HOSTLIST_PART = re.compile(r"\[([^\[\]]*)\]|[,!&^\s]")
_RANGE = re.compile(r"\s*(\d+)(?:-(\d+))?(?:/(\d+))?\s*", re.ASCII)
_HUGE_NUMBER = re.compile(r"\d{19}")
_MAX_DIGITS = 640  # the lowest limit sys.set_int_max_str_digits() accepts
#: What ClusterShell raises on a bad hostlist: syntax, an unknown @group, a number too long.
_HOSTLIST_ERRORS = (NodeSetException, GroupResolverError, GroupSourceError, ValueError)


def is_slurm_name(name: str) -> bool:
    """Whether *name* may stand in a Slurm file as a node, switch, block or topology name."""
    return SLURM_NAME.match(name) is not None


def first_invalid(names: Iterable[str]) -> str | None:
    """The first of *names* that breaks the rule, or None; one C-level match for the whole list
    when all are good (a 16k-node tree is checked in microseconds)."""
    listed = list(names)
    joined = "\n".join(listed) + "\n" if listed else ""
    if joined.count("\n") == len(listed) and SLURM_NAMES.fullmatch(joined):
        return None  # as many newlines as names: no name holds one
    return next(name for name in listed if not is_slurm_name(name))


def check(
    names: Iterable[str], what: str, where: str = "", error: type[TopographError] = InputError
) -> None:
    """Raise *error* naming *where* and the first of *names* (each a *what* name: block, node,
    topology…) that may not stand in a Slurm file."""
    bad = first_invalid(names)
    if bad is not None:
        prefix = f"{where}: " if where else ""
        raise error(f"{prefix}invalid {what} name {bad!r}: use {RULE}")


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
    """Sort key putting ``node2`` before ``node10``, as hostlists and sysadmins do. Digit runs
    longer than Python converts to int (a hostile name in a manifest) compare by their first
    640 digits; the name itself breaks the tie."""
    parts = re.split(r"(\d+)", name)
    return tuple(int(p[:_MAX_DIGITS]) if i % 2 else p for i, p in enumerate(parts)), name


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known name most like *name* (a typo's likely meaning), or None when none is close:
    the one with the same text and numbers but other zero padding (``gpu0001`` for
    ``gpu00001``), else the closest by edit similarity."""
    candidates = list(known)
    key = natural_key(name)[0]
    same = [other for other in candidates if natural_key(other)[0] == key]
    if same:
        return min(same)
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return close[0] if close else None


def expand(hostlist: str, where: str = "", error: type[TopographError] = InputError) -> list[str]:
    """A Slurm/ClusterShell hostlist (``gpu[001-064],login1``) as names in natural order,
    without duplicates. A malformed one, or one of more than :data:`MAX_HOSTLIST` names,
    raises *error* naming *where* it came from."""
    return sorted(parse(hostlist, where, error), key=natural_key)


def parse(hostlist: str, where: str = "", error: type[TopographError] = InputError) -> NodeSet:
    """The hostlist as a NodeSet (ClusterShell's resolver: a site's @groups work too), its size
    bounded before ClusterShell builds any name; *error* naming *where* when it is refused."""
    prefix = f"{where}: " if where else ""
    if size_bound(hostlist) > MAX_HOSTLIST:
        raise error(
            f"{prefix}hostlist {hostlist[:40]!r} is too large to expand: more than "
            f"{MAX_HOSTLIST:,} names, or an index past 10^18"
        )
    try:
        return NodeSet(hostlist)
    except _HOSTLIST_ERRORS as err:
        raise error(f"{prefix}invalid hostlist {hostlist[:80]!r}: {err}") from None


def size_bound(hostlist: str) -> int:
    """At least as many names as *hostlist* expands to, counted from its bracket ranges without
    expanding any (``n[1-4]-[1-2],x`` → 9); stops counting past :data:`MAX_HOSTLIST`. Groups
    (``@rack1``) count one: the site defines them."""
    total, product = 0, 1
    for match in _HOSTLIST_PART.finditer(hostlist):
        if match.group(1) is None:  # a separator ends an item
            total, product = total + product, 1
        else:
            product *= max(_range_size(match.group(1)), 1)
        if total + product > MAX_HOSTLIST:
            return total + product
    return total + product


def _range_size(ranges: str) -> int:
    """Names in one bracket group (``1-8,10,20-40/2`` → 20); malformed parts count one and are
    left to ClusterShell to refuse."""
    if _HUGE_NUMBER.search(ranges):  # an index past 10^18: too many, whatever the range
        return MAX_HOSTLIST + 1
    size = 0
    for part in ranges.split(","):
        match = _RANGE.fullmatch(part)
        if match is None:
            size += 1
            continue
        start, stop, step = int(match[1]), int(match[2] or match[1]), int(match[3] or 1)
        size += max(stop - start, 0) // max(step, 1) + 1
    return size


def count(hostlists: Iterable[str]) -> int:
    """Distinct names across *hostlists*; one that does not parse counts its comma items
    literally, one too large to expand counts its :func:`size_bound` (a guard counting nodes
    must neither fail nor hang on a hand-edited file)."""
    nodes = NodeSet(resolver=RESOLVER_NOGROUP)
    literal: set[str] = set()
    huge = 0
    for hostlist in hostlists:
        size = size_bound(hostlist)
        if size > MAX_HOSTLIST:
            huge += size
            continue
        try:
            nodes.update(NodeSet(hostlist, resolver=RESOLVER_NOGROUP))
        except _HOSTLIST_ERRORS:
            literal.update(item.strip() for item in hostlist.split(",") if item.strip())
    if literal:
        literal.difference_update(nodes)
    return len(nodes) + len(literal) + huge


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
