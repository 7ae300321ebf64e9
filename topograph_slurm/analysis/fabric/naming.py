"""Which HCA belongs to which Slurm node, and what every switch is called in Slurm.

An HCA's node description is usually ``<host> <hca>`` (``luna-0001 mlx5_0``), but real fabrics
also carry SHARP aggregation nodes, firmware-default descriptions of HCAs whose driver never set
one (``MT4129 ConnectX7 Mellanox Technologies``), ``localhost`` and service hosts outside Slurm.
None of those may become a Slurm node, and none may vanish silently either: every CA that is not
attached to a node is returned as an :class:`Exclusion` with its GUID, leaf switch and reason.
A node-name map (OpenSM format) and regex rewrites rescue HCAs whose description is wrong.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import and_, attrgetter, eq, is_not, itemgetter, not_
from typing import Any, cast

from topograph_slurm.errors import ConfigError
from topograph_slurm.model.fabric import Fabric
from topograph_slurm.model.names import SLURM_NAMES, is_slurm_name, sanitize
from topograph_slurm.model.result import Exclusion, HostAttachments

#: Slurm node and switch names: hostname-like, no hostlist syntax, no separators or quotes.
_MF0 = re.compile(r"^MF0;([^:]+):")
_FIRMWARE_DEFAULT = re.compile(r"mellanox technologies|nvidia technologies", re.IGNORECASE)
_AGGREGATION = re.compile(r"aggregation node", re.IGNORECASE)
#: the literal words of _AGGREGATION and _FIRMWARE_DEFAULT, lower case
_NO_HOST_WORDS = ("aggregation node", "mellanox technologies", "nvidia technologies")
_LOCALHOSTS = frozenset({"localhost", "localhost.localdomain", "(none)", "ubuntu"})

REASON_SHARP = "SHARP aggregation node"
REASON_DEFAULT = "firmware-default description names no host"
REASON_LOCALHOST = "description names no real host"
REASON_UNSAFE = "host name is not a valid Slurm node name"
REASON_OUTSIDE = "host is not in the Slurm node list"
REASON_NO_LINK = "no active link to a switch"
REASON_EMPTY = "empty description"
REASON_HCA = "HCA is not a compute rail (--hcas)"


#: Seconds a user's pattern (``--rewrite``, ``--hcas``) may take on one description. These
#: patterns run on every CA and come from users, so one that backtracks catastrophically
#: (``(a+)+$``) would hang a cron run; ``regex`` stops it and the run ends with one error.
MATCH_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A regex substitution applied to a CA description before the host is taken from it
    (a ``regex`` pattern: its matches can be given a time limit)."""

    pattern: Any
    replacement: str


@dataclass(slots=True)
class NamingPolicy:
    """How CA descriptions become Slurm node names (built from config and flags)."""

    node_name_map: dict[str, str] = field(default_factory=dict)
    rewrites: list[Rewrite] = field(default_factory=list)
    slurm_nodes: frozenset[str] | None = None
    #: HCA names (``mlx5_0``, the description's second word) that are compute rails; None: all.
    #: Storage HCAs in the same dump (a converged fabric, or two subnets in one file) would
    #: otherwise become rails of their nodes.
    hcas: Any = None  # a ``regex`` pattern, as a rewrite's


def compile_hcas(pattern: str | None) -> Any:
    """The ``--hcas`` regex (matched against the whole HCA name); a bad one is a config error."""
    if pattern is None:
        return None
    import regex  # here, not at the top: most runs give no pattern and need no regex engine

    try:
        return regex.compile(pattern)
    except regex.error as err:
        raise ConfigError(f"invalid --hcas pattern {pattern!r}: {err}") from None


def compile_rewrites(rules: Iterable[tuple[str, str]]) -> list[Rewrite]:
    """Compile ``(pattern, replacement)`` pairs; a bad regex or a replacement naming a group
    the pattern lacks (``\\9``) is a config error now, not a crash at the first match."""
    compiled = []
    for pattern, replacement in rules:
        import regex  # as in compile_hcas: only when there is a rule

        try:
            compiled_pattern = regex.compile(pattern)
        except regex.error as err:
            raise ConfigError(f"invalid rewrite pattern {pattern!r}: {err}") from None
        try:
            # ``regex`` parses a replacement at its first match: the pattern or nothing (a
            # newline first ends a verbose-mode comment) has the same groups and matches ""
            regex.compile(pattern + "\n|").sub(replacement, "", count=1)
        except (regex.error, IndexError) as err:
            raise ConfigError(f"invalid rewrite replacement {replacement!r}: {err}") from None
        compiled.append(Rewrite(compiled_pattern, replacement))
    return compiled


def _timed(what: str, pattern: Any, match: Any, text: str, *args: str) -> Any:
    """``match(*args, text, timeout=…)``; a pattern that runs out of time is a config error
    naming it and the description it choked on."""
    try:
        return match(*args, text, timeout=MATCH_SECONDS)
    except TimeoutError:
        raise ConfigError(
            f"{what} pattern {pattern.pattern!r} took over {MATCH_SECONDS:g} s on {text[:80]!r}: "
            "it backtracks catastrophically (overlapping repeats such as (a|aa)+ or (a+)+?)"
        ) from None


def _rewritten(description: str, policy: NamingPolicy) -> str:
    """The description after the first rewrite rule that matches it, stripped."""
    desc = description.strip()
    for rule in policy.rewrites:
        pattern = rule.pattern
        if _timed("rewrite", pattern, pattern.search, desc):
            rewritten: str = _timed("rewrite", pattern, pattern.sub, desc, rule.replacement)
            return rewritten.strip()
    return desc


#: HCA GUIDs -> their names in the same order (``mlx5_0``; None: the description names none)
HcaNames = Callable[[list[str]], list[str | None]]


def hca_names(fabric: Fabric, policy: NamingPolicy) -> HcaNames:
    """The names of the HCAs it is given (``mlx5_0``): each description's second word after
    the node-name map and the rewrites, the word ``--hcas`` matches; None when a description
    names none, so rail alignment does not judge that HCA. A function, not a table: the rail
    check names a unit's HCAs as it judges the unit (a 16k-node fabric has 131k HCAs, and a
    table of them all cost more than the judging)."""

    def names_of(hcas: list[str]) -> list[str | None]:
        described: Iterable[str] = map(attrgetter("description"), map(fabric.cas.__getitem__, hcas))
        if policy.node_name_map:
            described = map(policy.node_name_map.get, hcas, described)
        if policy.rewrites:
            described = (_rewritten(desc, policy) for desc in described)
        words = list(map(str.split, described, repeat(None), repeat(2)))
        if all(map((1).__lt__, map(len, words))):  # every description names an HCA
            return list(map(itemgetter(1), words))
        return [split[1] if len(split) > 1 else None for split in words]

    return names_of


def host_of(description: str, policy: NamingPolicy) -> tuple[str | None, str]:
    """The host a CA description names, or ``(None, reason)`` when it names none."""
    desc = _rewritten(description, policy)
    if not desc:
        return None, REASON_EMPTY
    if _AGGREGATION.search(desc):
        return None, REASON_SHARP
    if _FIRMWARE_DEFAULT.search(desc):
        return None, REASON_DEFAULT
    host, *rest = desc.split()
    if host.lower() in _LOCALHOSTS:
        return None, REASON_LOCALHOST
    if not is_slurm_name(host):
        return None, REASON_UNSAFE
    hcas = policy.hcas
    if hcas is not None and not _timed("--hcas", hcas, hcas.fullmatch, rest[0] if rest else ""):
        return None, REASON_HCA
    return host, ""


def attach_hosts(
    fabric: Fabric,
    policy: NamingPolicy,
    switch_names: Mapping[str, str],
    ca_leaves: Mapping[str, tuple[str, ...]],
) -> HostAttachments:
    """Decide for every CA whether it is a rail of a Slurm node; exclude the rest with reasons.

    *ca_leaves* maps each CA to the switches it is cabled to (see :mod:`.adjacency`). Output
    order does not depend on the source's order: exclusions and each node's rails are sorted
    by GUID, so a UFM and an ibnetdiscover view of one fabric give the same result.
    """
    result = HostAttachments()
    rails, exclusions = result.rails, result.exclusions
    allowed = policy.slurm_nodes
    guids = list(fabric.cas)
    cas = list(fabric.cas.values())
    described = list(map(attrgetter("description"), cas))
    if policy.node_name_map:
        described = list(map(policy.node_name_map.get, guids, described))
    hosts = _plain_hosts(described, policy)
    if hosts is None:  # something to rewrite or exclude by name: decide CA by CA
        named = [host_of(desc, policy) for desc in described]
        hosts = list(map(itemgetter(0), named))
        reasons = list(map(itemgetter(1), named))
    else:
        reasons = [""] * len(hosts)
    leaves_of = list(map(ca_leaves.get, guids))
    placed = list(map(and_, map(is_not, hosts, repeat(None)), map(bool, leaves_of)))
    if allowed is not None:
        placed = list(map(and_, placed, map(allowed.__contains__, hosts)))
    for i in compress(range(len(guids)), map(not_, placed)):
        host, reason, leaves = hosts[i], reasons[i], leaves_of[i] or ()
        if host is not None and allowed is not None and host not in allowed:
            reason = REASON_OUTSIDE
        elif host is not None:
            reason = REASON_NO_LINK
        leaf = switch_names.get(leaves[0], leaves[0]) if leaves else ""
        exclusions.append(Exclusion(guids[i], cas[i].description, leaf, reason))
    placed_hosts = cast(list[str], list(compress(hosts, placed)))
    placed_leaves = cast(list[tuple[str, ...]], list(compress(leaves_of, placed)))
    # node order: first appearance among the CAs, as a loop over them would insert it
    rails.update({host: [] for host in dict.fromkeys(placed_hosts)})
    if all(map(eq, map(len, placed_leaves), repeat(1))):  # one cabled port per CA (the rule)
        rail_pairs = zip(compress(guids, placed), map(itemgetter(0), placed_leaves), strict=True)
        deque(map(list.append, map(rails.__getitem__, placed_hosts), rail_pairs), maxlen=0)
    else:
        for host, guid, cabled in zip(
            placed_hosts, compress(guids, placed), placed_leaves, strict=True
        ):
            rails[host].extend([(guid, leaf) for leaf in cabled])
    exclusions.sort(key=lambda ex: ex.guid)
    for node_rails in rails.values():
        node_rails.sort()
    return result


def _plain_hosts(descriptions: list[str], policy: NamingPolicy) -> list[str | None] | None:
    """What :func:`host_of` returns for every description, judged on the whole list at once
    when the answer is the common one: no rewrite rule, and every description names a valid
    host. None when any description needs :func:`host_of`'s CA-by-CA judgement."""
    if policy.rewrites or policy.hcas is not None:
        return None
    stripped = list(map(str.strip, descriptions))
    if not all(stripped):
        return None
    # the patterns hold no newline, so a hit in the joined text is a hit in one description
    joined = "\n".join(stripped)
    if joined.isascii():  # ASCII: lower() and a substring search are what IGNORECASE does
        low = joined.lower()
        if any(map(low.__contains__, _NO_HOST_WORDS)):
            return None
    elif _AGGREGATION.search(joined) or _FIRMWARE_DEFAULT.search(joined):
        return None
    hosts: list[str] = list(map(itemgetter(0), map(str.split, stripped)))
    # a node's HCAs name the same host: each distinct name is judged once (in any order: the
    # answer is one yes or no); split() leaves no whitespace in a host, so no "\n" in one
    distinct = set(hosts)
    if not _LOCALHOSTS.isdisjoint(map(str.lower, distinct)) or not SLURM_NAMES.fullmatch(
        "\n".join(distinct) + "\n"
    ):
        return None
    return list[str | None](hosts)


def switch_display_name(description: str) -> str:
    """The human name a switch gives itself: ``<name>`` of ``MF0;<name>:<model>``, else the
    description when it is a single word (``ib-i1l1s01``); empty when it names nothing useful."""
    desc = description.strip()
    match = _MF0.match(desc)
    if match:
        return match.group(1).strip()
    return desc if desc and " " not in desc else ""


def name_switches(fabric: Fabric) -> dict[str, str]:
    """A unique Slurm-safe name for every switch GUID, stable for a given fabric.

    Names come from descriptions; a switch whose description names nothing, or sanitises to a
    name another switch already has, is called ``sw-<guid>`` so that names stay unique and a
    rename of one switch never renames another.
    """
    wanted: dict[str, str] = {}
    for guid, switch in fabric.switches.items():
        wanted[guid] = sanitize(switch_display_name(switch.description))
    counts: dict[str, int] = {}
    for name in wanted.values():
        counts[name.lower()] = counts.get(name.lower(), 0) + 1
    names = {}
    for guid, name in wanted.items():
        unique = bool(name) and counts[name.lower()] == 1
        names[guid] = name if unique else f"sw-{guid}"
    return names
