"""Drift: what changed between two fabric summaries (``diff``, and every ``generate`` report's
"Changes since the last run").

Between two cron runs nodes power off, cables move during maintenance, links train down to a
lower width or speed. Each comparison runs only on facts both summaries could show
(:attr:`~topograph_slurm.model.summary.FabricSummary.known`); the others are named in
``not_compared`` with the input that lacks them, so a topology.conf compared with a dump never
reports every cable as gone. Changes come kind by kind (:data:`KINDS` order), subjects
naturally sorted: the same two inputs always give the same text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from topograph_slurm.model.names import fold, natural_key
from topograph_slurm.model.rates import gbps, speed_rank
from topograph_slurm.model.result import Change, Drift
from topograph_slurm.model.summary import (
    FACT_BLOCKS,
    FACT_DOMAINS,
    FACT_LEAVES,
    FACT_NODES,
    FACT_RAILS,
    FACT_SWITCHES,
    FabricSummary,
    NodeSummary,
    RailSummary,
)

KIND_NODE_APPEARED = "node-appeared"
KIND_NODE_VANISHED = "node-vanished"
KIND_NODE_MOVED = "node-moved"
KIND_CABLE_MOVED = "cable-moved"
KIND_DISAGREE_APPEARED = "rail-disagreement-appeared"
KIND_DISAGREE_HEALED = "rail-disagreement-healed"
KIND_LINK_DEGRADED = "link-degraded"
KIND_LINK_RESTORED = "link-restored"
KIND_LINK_DOWN = "link-down"
KIND_LINK_UP = "link-up"
KIND_SWITCH_ADDED = "switch-added"
KIND_SWITCH_REMOVED = "switch-removed"
KIND_BLOCK_ADDED = "block-added"
KIND_BLOCK_REMOVED = "block-removed"
KIND_BLOCK_CHANGED = "block-changed"
KIND_BLOCKS_REORDERED = "blocks-reordered"
KIND_BLOCK_SIZES = "block-sizes-changed"
#: Every change kind, in the order a drift lists them.
KINDS: tuple[str, ...] = (
    KIND_NODE_APPEARED,
    KIND_NODE_VANISHED,
    KIND_NODE_MOVED,
    KIND_CABLE_MOVED,
    KIND_DISAGREE_APPEARED,
    KIND_DISAGREE_HEALED,
    KIND_LINK_DEGRADED,
    KIND_LINK_RESTORED,
    KIND_LINK_DOWN,
    KIND_LINK_UP,
    KIND_SWITCH_ADDED,
    KIND_SWITCH_REMOVED,
    KIND_BLOCK_ADDED,
    KIND_BLOCK_REMOVED,
    KIND_BLOCK_CHANGED,
    KIND_BLOCKS_REORDERED,
    KIND_BLOCK_SIZES,
)
_ORDER = {kind: i for i, kind in enumerate(KINDS)}

#: What each fact lets the drift compare, for the "not compared" lines.
_FACT_TEXT = {
    FACT_LEAVES: "leaves (node to leaf)",
    FACT_BLOCKS: "blocks and BlockSizes",
    FACT_RAILS: "cables, link rates and rail disagreement",
    FACT_SWITCHES: "switches",
    FACT_DOMAINS: "NVLink domains",
}


def drift(old: FabricSummary, new: FabricSummary) -> Drift:
    """Every change from *old* to *new* that both can show, and what could not be compared."""
    both = {fact for fact in old.known if new.knows(fact)}
    changes: list[Change] = []
    if FACT_NODES in both:
        changes += _presence(old, new)
        changes += _moves(old, new, both)
    if FACT_RAILS in both:
        changes += _rails(old, new)
        changes += _switch_links(old, new)
    if FACT_SWITCHES in both:
        changes += _added_removed(old.switches, new.switches, KIND_SWITCH_ADDED, "switch")
    if FACT_BLOCKS in both:
        changes += _blocks(old, new)
    changes.sort(key=lambda c: (_ORDER[c.kind], natural_key(c.subject)))
    return Drift(old.source, new.source, changes, _not_compared(old, new, both))


def _not_compared(old: FabricSummary, new: FabricSummary, both: set[str]) -> list[str]:
    lines = []
    for fact, text in _FACT_TEXT.items():
        if fact in both:
            continue
        lacking = [s.source for s in (old, new) if not s.knows(fact)]
        lines.append(f"{text}: {' and '.join(lacking)} cannot show them")
    return lines


def _present(summary: FabricSummary) -> set[str]:
    """Nodes on the fabric (a kept node is absent from it, only kept in its place)."""
    return {name for name, node in summary.nodes.items() if not node.kept}


def _presence(old: FabricSummary, new: FabricSummary) -> Iterator[Change]:
    before, after = _present(old), _present(new)
    for name in after - before:
        back = " (back; it was kept in its place)" if name in old.nodes else ""
        yield Change(KIND_NODE_APPEARED, name, f"on the fabric{back} at {_place(new.nodes[name])}")
    for name in before - after:
        node = new.nodes.get(name)
        message = (
            f"absent from the fabric; kept at {_place(node)} (last seen {node.last_seen})"
            if node
            else f"gone from {_place(old.nodes[name])}"
        )
        yield Change(KIND_NODE_VANISHED, name, message)
    for name in old.nodes.keys() - before - new.nodes.keys():
        was = old.nodes[name]
        yield Change(
            KIND_NODE_VANISHED, name, f"no longer kept at {_place(was)} (last seen {was.last_seen})"
        )


def _place(node: NodeSummary) -> str:
    parts = [f"leaf {node.leaf}" if node.leaf else "", f"block {node.block}" if node.block else ""]
    return ", ".join(part for part in parts if part) or "no leaf or block"


def _moves(old: FabricSummary, new: FabricSummary, both: set[str]) -> Iterator[Change]:
    """A node under another leaf, in another block or NVLink domain."""
    fields = [
        (fact, attr)
        for fact, attr in ((FACT_LEAVES, "leaf"), (FACT_BLOCKS, "block"), (FACT_DOMAINS, "domain"))
        if fact in both
    ]
    for name in old.nodes.keys() & new.nodes.keys():
        was, now = old.nodes[name], new.nodes[name]
        moved = [
            f"{attr} {getattr(was, attr) or '(none)'} -> {getattr(now, attr) or '(none)'}"
            for _, attr in fields
            if getattr(was, attr) != getattr(now, attr)
        ]
        if moved:
            yield Change(KIND_NODE_MOVED, name, ", ".join(moved))


def _rails(old: FabricSummary, new: FabricSummary) -> Iterator[Change]:
    """Per node seen in both: rail disagreement, and per cable its end and rate."""
    for name in _present(old) & _present(new):
        was, now = old.nodes[name], new.nodes[name]
        if was.rails_disagree != now.rails_disagree:
            kind = KIND_DISAGREE_APPEARED if now.rails_disagree else KIND_DISAGREE_HEALED
            yield Change(kind, name, f"rails reach leaves {_leaves(now.rails)}")
        yield from _cables(name, {r.hca: r for r in was.rails}, {r.hca: r for r in now.rails})


def _leaves(rails: Iterable[RailSummary]) -> str:
    return fold(sorted({rail.switch for rail in rails}, key=natural_key))


def _cables(
    node: str, before: dict[str, RailSummary], after: dict[str, RailSummary]
) -> Iterator[Change]:
    for hca in before.keys() | after.keys():
        subject = f"{node}/{hca}"
        was, now = before.get(hca), after.get(hca)
        if now is None:
            assert was is not None
            yield Change(KIND_LINK_DOWN, subject, f"no cable (was on {_end(was)} at {was.rate})")
        elif was is None:
            yield Change(KIND_LINK_UP, subject, f"cabled to {_end(now)} at {now.rate}")
        elif (was.switch, was.port) != (now.switch, now.port):
            yield Change(KIND_CABLE_MOVED, subject, f"{_end(was)} -> {_end(now)}")
        if was is not None and now is not None:
            yield from _rate(subject, was.rate, now.rate)


def _end(rail: RailSummary) -> str:
    return f"{rail.switch}/{rail.port}"


def _rate(subject: str, was: str, now: str) -> Iterator[Change]:
    """Degraded when the cable now carries less, restored when it carries more."""
    if was == now:
        return
    faster = _speed(now) > _speed(was)
    kind = KIND_LINK_RESTORED if faster else KIND_LINK_DEGRADED
    yield Change(kind, subject, f"{was} -> {now}")


def _speed(rate: str) -> tuple[float, int]:
    """``4xNDR`` → (400.0, rank of NDR); anything unreadable is slowest."""
    lanes, sep, speed = rate.partition("x")
    width = lanes + sep
    return gbps(width, speed), speed_rank(speed)


def _switch_links(old: FabricSummary, new: FabricSummary) -> Iterator[Change]:
    """Switch-to-switch cables that fell below the norm or came back to it. A cable off the
    slow list whose switch is gone is left to ``switch-removed``."""
    switches = set(new.switches)
    for label in old.slow_links.keys() | new.slow_links.keys():
        was = old.slow_links.get(label, old.link_norm)
        now = new.slow_links.get(label)
        if now is None:
            ends = {end.rsplit("/", 1)[0] for end in label.split(" <-> ")}
            if not ends <= switches:
                continue
            now = new.link_norm
        yield from _rate(label, was, now)


def _added_removed(
    before: Iterable[str], after: Iterable[str], added: str, what: str
) -> Iterator[Change]:
    was, now = set(before), set(after)
    removed = KIND_SWITCH_REMOVED if added == KIND_SWITCH_ADDED else KIND_BLOCK_REMOVED
    for name in now - was:
        yield Change(added, name, f"new {what}")
    for name in was - now:
        yield Change(removed, name, f"{what} gone")


def _blocks(old: FabricSummary, new: FabricSummary) -> Iterator[Change]:
    """Blocks added, removed, with other nodes, in another order; BlockSizes."""
    before = {block.name: block.nodes for block in old.blocks}
    after = {block.name: block.nodes for block in new.blocks}
    yield from _added_removed(before, after, KIND_BLOCK_ADDED, "block")
    for name in before.keys() & after.keys():
        gained = sorted(set(after[name]) - set(before[name]), key=natural_key)
        lost = sorted(set(before[name]) - set(after[name]), key=natural_key)
        if gained or lost:
            parts = [f"+{len(gained)} {fold(gained)}" if gained else ""]
            parts.append(f"-{len(lost)} {fold(lost)}" if lost else "")
            text = ", ".join(p for p in parts if p)
            yield Change(KIND_BLOCK_CHANGED, name, f"{text} ({len(after[name])} nodes)")
    common = before.keys() & after.keys()
    order_was = [b.name for b in old.blocks if b.name in common]
    order_now = [b.name for b in new.blocks if b.name in common]
    if order_was != order_now:
        yield Change(KIND_BLOCKS_REORDERED, "blocks", "blocks of both in another file order")
    if old.block_sizes != new.block_sizes:
        sizes = f"{_sizes(old.block_sizes)} -> {_sizes(new.block_sizes)}"
        yield Change(KIND_BLOCK_SIZES, "BlockSizes", sizes)


def _sizes(sizes: list[int]) -> str:
    return ",".join(map(str, sizes)) or "(none)"
