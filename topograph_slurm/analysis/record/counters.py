"""A node's links at a job's start against its end: which error counters rose and by how
much, which port dropped width or speed, left ACTIVE/LinkUp or was gone, which NVLink's
errors rose. A counter that went down was reset (the HCA restarted, someone cleared it): what
it counted during the job is unknown, so that is a reset, never a huge rise. Pure."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from topograph_slurm.model.counters import ACTIVE, LINK_UP, NodeCounters, PortReading
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.rates import gbps, is_rated
from topograph_slurm.model.result import Finding


def compare(start: NodeCounters, end: NodeCounters, node: str) -> tuple[Finding, ...]:
    """Every change on *node*'s links from *start* to *end*, one finding per link and kind;
    a finding's subject is ``<node>/<link>`` and it names *node* for ``health``."""
    now = {port.name: port for port in end.ports}
    found = [f for port in start.ports for f in _port(port, now.get(port.name), node)]
    nvlinks = {link.name: link.counters for link in end.nvlinks}
    for link in start.nvlinks:
        if link.name in nvlinks:
            found += _counters(
                FindingKind.NVLINK_ERRORS_DURING_JOB,
                node,
                link.name,
                link.counters,
                nvlinks[link.name],
            )
    return tuple(found)


def _port(before: PortReading, after: PortReading | None, node: str) -> Iterator[Finding]:
    if after is None:
        yield _finding(
            FindingKind.LINK_DEGRADED_DURING_JOB, node, before.name, "gone at the job's end"
        )
        return
    yield from _counters(
        FindingKind.LINK_ERRORS_DURING_JOB, node, before.name, before.counters, after.counters
    )
    dropped = list(_dropped(before, after))
    if dropped:
        yield _finding(FindingKind.LINK_DEGRADED_DURING_JOB, node, before.name, "; ".join(dropped))


def _dropped(before: PortReading, after: PortReading) -> Iterator[str]:
    """What a port lost: rate (a known rate that is now lower or unknown), state, phys_state."""
    if is_rated(before.width, before.speed) and gbps(after.width, after.speed) < gbps(
        before.width, before.speed
    ):
        was, now = _rate(before), _rate(after)
        yield f"rate dropped from {was} to {now}"
    for label, was, now, good in (
        ("state", before.state, after.state, ACTIVE),
        ("phys_state", before.phys_state, after.phys_state, LINK_UP),
    ):
        if was == good and now != good:
            yield f"{label} left {good} (now {now or 'unreadable'})"


def _counters(
    kind: FindingKind, node: str, link: str, before: Mapping[str, int], after: Mapping[str, int]
) -> Iterator[Finding]:
    common = [name for name in before if name in after]
    rose = [
        f"{name} +{after[name] - before[name]}" for name in common if after[name] > before[name]
    ]
    reset = [
        f"{name} {before[name]}->{after[name]}" for name in common if after[name] < before[name]
    ]
    if rose:
        yield _finding(kind, node, link, f"{', '.join(rose)} during the job")
    if reset:
        yield _finding(
            FindingKind.LINK_COUNTERS_RESET, node, link, f"went down (reset): {', '.join(reset)}"
        )


def _rate(port: PortReading) -> str:
    return f"{port.width}{port.speed}" if port.width else "unknown"


def _finding(kind: FindingKind, node: str, link: str, what: str) -> Finding:
    return Finding(kind, f"{node}/{link}", f"{link}: {what}", nodes=(node,))
