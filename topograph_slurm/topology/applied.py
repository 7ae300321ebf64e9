"""Does slurmctld run the topology we wrote? The structure of both, compared.

``generate --reconfigure`` writes a topology, asks slurmctld to reconfigure and then reads back
``scontrol show topology``. Its text is not ours (``Level=``, ``LinkSpeed=``, a parent lists
its leaves' nodes, blocks gain ``BlockIndex=`` and aggregated lines), so the two are compared
as structures: which nodes hang off which leaf, which switches a switch holds, which nodes form
each block and the block sizes. A topology Slurm read differently (a node it dropped, a switch
it merged) is a difference with a reason; none means the write took effect.
"""

from __future__ import annotations

from collections.abc import Iterator

from topograph_slurm.model import names
from topograph_slurm.model.result import BlockTopology, NamedTopology, Tree

#: Differences shown in one error line at most; the rest are counted.
SHOWN = 3


def differences(written: NamedTopology, running: NamedTopology) -> list[str]:
    """Every way *running* (``scontrol show topology``) differs from *written*, worded for an
    admin; empty when slurmctld runs what was written."""
    found = list(_tree_differences(written.tree, running.tree))
    found += _block_differences(written.blocks, running.blocks)
    return found


def summary(found: list[str]) -> str:
    """The first few differences and how many more, for one error line."""
    more = len(found) - SHOWN
    return "; ".join(found[:SHOWN]) + (f" (and {more} more)" if more > 0 else "")


def _members(groups: dict[str, list[str]], what: str) -> dict[str, frozenset[str]]:
    return {name: frozenset(items) for name, items in groups.items() if items or what == "switch"}


def _compare(
    what: str, written: dict[str, frozenset[str]], running: dict[str, frozenset[str]]
) -> Iterator[str]:
    """Each named group (leaf, switch, block) missing, added or with other members."""
    for name in sorted(written.keys() | running.keys(), key=names.natural_key):
        want, have = written.get(name), running.get(name)
        if have is None:
            yield f"{what} {name} is not running"
        elif want is None:
            yield f"{what} {name} runs but was not written"
        elif want != have:
            missing, extra = sorted(want - have, key=names.natural_key), sorted(have - want)
            parts = [f"without {names.fold(missing)}"] if missing else []
            parts += [f"with {names.fold(extra)}"] if extra else []
            yield f"{what} {name} runs {' and '.join(parts)}"


def _tree_differences(written: Tree | None, running: Tree | None) -> Iterator[str]:
    if written is None and running is None:
        return
    if written is None or running is None:
        yield "no tree topology runs" if running is None else "a tree runs but none was written"
        return
    yield from _compare("leaf", _leaves(written), _leaves(running))
    yield from _compare("switch", _uppers(written), _uppers(running))


def _leaves(tree: Tree) -> dict[str, frozenset[str]]:
    return _members({leaf.name: leaf.nodes for leaf in tree.leaves}, "leaf")


def _uppers(tree: Tree) -> dict[str, frozenset[str]]:
    return _members({switch.name: switch.children for switch in tree.uppers}, "switch")


def _block_differences(
    written: BlockTopology | None, running: BlockTopology | None
) -> Iterator[str]:
    if written is None and running is None:
        return
    if written is None or running is None:
        yield "no blocks run" if running is None else "blocks run but none were written"
        return
    yield from _compare("block", _blocks(written), _blocks(running))
    if written.block_sizes and running.block_sizes != written.block_sizes:
        sizes = ",".join(map(str, running.block_sizes)) or "none"
        yield f"BlockSizes {sizes} run, {','.join(map(str, written.block_sizes))} written"


def _blocks(blocks: BlockTopology) -> dict[str, frozenset[str]]:
    """Blocks with nodes: an empty placeholder block only keeps order in the file."""
    return _members({block.name: block.nodes for block in blocks.blocks}, "block")
