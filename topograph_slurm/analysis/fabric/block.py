"""Blocks for Slurm's ``topology/block``: the units inside which a job segment stays.

A block is a set of nodes with a fast interconnect among them: an InfiniBand scalable unit (one
logical leaf) or an NVLink domain. Slurm aggregates blocks in *file order* — block i starts a
level-j aggregate when i mod 2^j = 0 — so blocks must be listed in physical-adjacency order, or a
"2-block" aggregate may pair units on opposite sides of the fabric. Slurm checks neither that
blocks are disjoint nor, in topology.yaml, that ``block_sizes`` are valid; we do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from topograph_slurm.errors import ConfigError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.result import Block, BlockTopology, Finding, Tree
from topograph_slurm.model.slurm_version import SlurmVersion

#: Short blocks named in the base-size message; the rest are counted.
_SHOWN_SHORT = 8


def adjacency_order(tree: Tree) -> list[str]:
    """Leaf-group names in depth-first order from the tops, so that groups under the same
    spine are neighbours (and therefore aggregate together)."""
    children = {switch.name: switch.children for switch in tree.uppers}
    order: list[str] = []
    stack = list(reversed(tree.tops))
    while stack:
        name = stack.pop()
        if name in children:
            stack.extend(reversed(children[name]))
        else:
            order.append(name)
    return order


def blocks_from_tree(tree: Tree) -> list[Block]:
    """One block per logical leaf (scalable unit), in adjacency order."""
    nodes = {group.name: group.nodes for group in tree.leaves}
    return [Block(name, list(nodes[name])) for name in adjacency_order(tree) if name in nodes]


BaseRule = Callable[[Sequence[Block]], int]


def typical_base(blocks: Sequence[Block]) -> int:
    """The base block size for physical units of fixed size (NVLink racks): the most common
    block size, so a rack with a dead tray is the exception, not the rule."""
    base = typical_size(len(block.nodes) for block in blocks)
    if not base:
        raise ConfigError("no non-empty blocks: cannot infer BlockSizes")
    return base


def typical_size(sizes: Iterable[int]) -> int:
    """The most common non-zero size (larger on ties): a partial last unit should not shrink
    what every full unit can serve. Zero when there is none."""
    counts = Counter(size for size in sizes if size)
    return max(counts, key=lambda size: (counts[size], size)) if counts else 0


#: At most this share of nodes may sit in blocks smaller than the inferred base size.
MAX_UNDERSIZED_SHARE = 0.10


def covering_base(blocks: Sequence[Block], max_share: float = MAX_UNDERSIZED_SHARE) -> int:
    """The base block size for InfiniBand units: the largest block size such that the blocks
    smaller than it hold at most *max_share* of the nodes.

    Real fabrics have uneven leaf groups (a half-filled leaf, a unit with a few nodes down). A
    larger base lets segments be larger; a base above a block's size leaves that block out on
    24.11 (it refuses undersized blocks) and wastes it on 25.05+. This keeps nearly every node
    usable without letting one small service leaf shrink the base for all.
    """
    sizes = sorted({len(block.nodes) for block in blocks if block.nodes})
    if not sizes:
        raise ConfigError("no non-empty blocks: cannot infer BlockSizes")
    total = sum(len(block.nodes) for block in blocks)
    base = sizes[0]
    for size in sizes[1:]:
        below = sum(len(block.nodes) for block in blocks if 0 < len(block.nodes) < size)
        if below <= max_share * total:
            base = size
    return base


def infer_block_sizes(base: int, block_count: int) -> list[int]:
    """``base, 2·base, 4·base …`` up to the largest aggregate the block count can form."""
    sizes = [base]
    while len(sizes) < 32 and 2 ** len(sizes) <= block_count:
        sizes.append(base * 2 ** len(sizes))
    return sizes


def validate_block_sizes(sizes: Sequence[int], block_count: int) -> list[int]:
    """Check user-given ``BlockSizes``: positive, increasing, each ``base·2^k``, and no level
    larger than all blocks together. Slurm skips bad values silently in topology.yaml."""
    if not sizes:
        raise ConfigError("BlockSizes is empty")
    base = sizes[0]
    if base <= 0:
        raise ConfigError(f"BlockSizes base must be positive, got {base}")
    previous = 0
    for size in sizes:
        ratio, rest = divmod(size, base)
        if size <= previous or rest or ratio & (ratio - 1):
            raise ConfigError(
                f"invalid BlockSizes {','.join(map(str, sizes))}: each size must be the base "
                f"({base}) times a power of two, increasing"
            )
        if ratio > max(block_count, 1):
            raise ConfigError(
                f"BlockSizes level {size} needs {ratio} blocks but the topology has {block_count}"
            )
        previous = size
    return list(sizes)


def _short_base(blocks: Sequence[Block], base: int) -> Finding | None:
    """Why the inferred base is below the unit size (the most common block size), and what
    it costs: which blocks are short, by how much, and which job sizes lose one block."""
    unit = typical_size(len(block.nodes) for block in blocks)
    if base >= unit:
        return None
    short = sorted((b for b in blocks if 0 < len(b.nodes) < unit), key=lambda b: len(b.nodes))
    shown = ", ".join(f"{b.name} ({len(b.nodes)} nodes)" for b in short[:_SHOWN_SHORT])
    more = f" and {len(short) - _SHOWN_SHORT} more" if len(short) > _SHOWN_SHORT else ""
    jobs = f"{base + 1}-{unit}" if unit > base + 1 else str(unit)
    return Finding(
        FindingKind.BLOCK_BASE_BELOW_UNIT,
        "BlockSizes",
        f"BlockSizes={base} instead of the unit size {unit}: blocks shorter than {unit} hold "
        f"more than {MAX_UNDERSIZED_SHARE:.0%} of the nodes ({shown}{more}); jobs of {jobs} "
        "nodes cannot stay in one block. "
        f"--block-sizes {unit},{2 * unit},... pins the base (the short blocks are then below "
        "it: Slurm 24.11 leaves them out, 25.05+ keeps them)",
    )


def designed_base(blocks: Sequence[Block], rule: BaseRule, unit: int) -> int:
    """The base the rule gives today's blocks, raised to *unit* (the unit size earlier runs
    saw, 0 when unknown) as long as some block still holds that many nodes: one node off
    must not change BlockSizes cluster-wide, while a fabric rebuilt with smaller units (no
    block that large any more) gets the rule's base."""
    base = rule(blocks)
    largest = max((len(block.nodes) for block in blocks), default=0)
    return max(base, unit) if unit <= largest else base


def plan_blocks(
    blocks: list[Block],
    version: SlurmVersion,
    block_sizes: Sequence[int] | None = None,
    base_rule: BaseRule = covering_base,
    unit: int = 0,
) -> BlockTopology:
    """Choose BlockSizes and apply the release's rule for blocks smaller than the base.

    Slurm 24.11 refuses to start when a block is smaller than the base size, so such blocks are
    left out and reported; 25.05+ accepts them (and empty placeholders), so they stay in place.
    An inferred base follows the designed *unit* size (:func:`designed_base`) where the release
    keeps short blocks; on 24.11 a raised base would leave the short unit's nodes out.
    """
    nonempty = [block for block in blocks if block.nodes]
    unit = unit if version.allows_small_blocks else 0  # 24.11 would leave the short unit out
    sizes = (
        validate_block_sizes(block_sizes, len(nonempty))
        if block_sizes
        else infer_block_sizes(designed_base(nonempty, base_rule, unit), len(nonempty))
    )
    base = sizes[0]
    explained = None if block_sizes else _short_base(nonempty, base)
    findings = [explained] if explained is not None else []
    if version.allows_small_blocks:
        return BlockTopology(blocks, sizes, findings)
    kept = []
    for block in blocks:
        if len(block.nodes) >= base:
            kept.append(block)
        else:
            findings.append(
                Finding(
                    FindingKind.UNDERSIZED_BLOCK,
                    block.name,
                    f"{len(block.nodes)} nodes < base block size {base}; left out because "
                    f"Slurm {version.major}.{version.minor:02d} rejects undersized blocks "
                    "(25.05+ keeps them)",
                )
            )
    if not kept:
        raise ConfigError(f"no block has at least {base} nodes")
    sizes = (
        validate_block_sizes(sizes, len(kept))
        if block_sizes
        else infer_block_sizes(base, len(kept))
    )
    return BlockTopology(kept, sizes, findings)
