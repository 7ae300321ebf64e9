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
from topograph_slurm.model.result import (
    PLUGIN_BLOCK,
    PLUGIN_TREE,
    BlockTopology,
    NamedTopology,
    Tree,
)

#: Differences shown in one error line at most; the rest are counted.
SHOWN = 3


def differences(written: NamedTopology, running: NamedTopology) -> list[str]:
    """Every way *running* (``scontrol show topology``) differs from *written*, worded for an
    admin; empty when slurmctld runs what was written."""
    found: list[str] = []
    pairs = (
        (PLUGIN_TREE, written.tree, running.tree),
        (PLUGIN_BLOCK, written.blocks, running.blocks),
    )
    for kind, mine, theirs in pairs:
        if mine is None and theirs is None:
            continue
        if mine is None or theirs is None:
            found.append(
                f"no {kind} topology runs"
                if theirs is None
                else f"a {kind} topology runs but none was written"
            )
        elif isinstance(mine, Tree) and isinstance(theirs, Tree):
            found += _compare("leaf", _leaves(mine), _leaves(theirs))
            found += _compare("switch", _uppers(mine), _uppers(theirs))
        elif isinstance(mine, BlockTopology) and isinstance(theirs, BlockTopology):
            found += _compare("block", _blocks(mine), _blocks(theirs))
            found += _sizes(mine, theirs)
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


def _leaves(tree: Tree) -> dict[str, frozenset[str]]:
    return _members({leaf.name: leaf.nodes for leaf in tree.leaves}, "leaf")


def _uppers(tree: Tree) -> dict[str, frozenset[str]]:
    return _members({switch.name: switch.children for switch in tree.uppers}, "switch")


def _sizes(written: BlockTopology, running: BlockTopology) -> list[str]:
    if not written.block_sizes or running.block_sizes == written.block_sizes:
        return []
    sizes = ",".join(map(str, running.block_sizes)) or "none"
    return [f"BlockSizes {sizes} run, {','.join(map(str, written.block_sizes))} written"]


def _blocks(blocks: BlockTopology) -> dict[str, frozenset[str]]:
    """Blocks with nodes: an empty placeholder block only keeps order in the file."""
    return _members({block.name: block.nodes for block in blocks.blocks}, "block")
