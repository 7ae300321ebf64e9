"""The switch hierarchy above the logical leaves, as Slurm's ``topology/tree`` wants it.

Starting from the logical leaves, each step up takes the switches cabled to the current level
that are not hosts' leaves themselves, and merges those that share any child into one logical
switch (redundant spines, and the rail planes of one pod, are one parent for scheduling). That
yields a true tree of any depth. Fabrics that are joined only by lateral links (small clusters
whose leaves are cabled to each other) get a synthetic top switch, because Slurm lets a job span
only switches with a common ancestor; fabrics with no cable between them stay separate islands.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import repeat

from topograph_slurm.model.result import LeafGroup, Tree, TreeSwitch


class _Components:
    """Tiny union-find over integers (children indices)."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, item: int) -> int:
        root = self.parent.setdefault(item, item)
        while root != self.parent[root]:
            root = self.parent[root]
        while item != root:
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, items: Iterable[int]) -> None:
        first = None
        for item in items:
            root = self.find(item)
            if first is None:
                first = root
            elif root != first:
                self.parent[root] = first


def _parents(
    level: list[list[str]],
    neighbours: Mapping[str, set[str]],
    excluded: set[str],
) -> list[tuple[list[str], list[int]]]:
    """The next level up: groups of parent switches and the child indices each group serves.

    Cabling is symmetric (a parent is a neighbour of its children and they of it), so each
    candidate parent's children come from one C-level set intersection rather than a Python
    step per cable: a 16k-node fabric has ~260k cables between leaves and spines."""
    owner = {guid: index for index, members in enumerate(level) for guid in members}
    owned, nothing = set(owner), set[str]()
    candidates = set().union(*map(neighbours.get, owned, repeat(nothing))) - excluded - owned
    served = {
        peer: set(map(owner.__getitem__, neighbours[peer] & owned)) for peer in sorted(candidates)
    }
    components = _Components()
    # many parents serve the very same children (the spines of one plane): union each
    # distinct set once, in first-seen order, which leaves the same components and roots
    for distinct in dict.fromkeys(map(frozenset, served.values())):
        components.union(distinct)
    grouped: dict[int, tuple[list[str], set[int]]] = {}
    for guid, children in served.items():
        members, all_children = grouped.setdefault(components.find(min(children)), ([], set()))
        members.append(guid)
        all_children |= children
    return [(sorted(members), sorted(children)) for members, children in grouped.values()]


def _first_name(members: list[str], switch_names: Mapping[str, str]) -> str:
    return min(switch_names.get(guid, guid) for guid in members)


def build_tree(
    neighbours: Mapping[str, set[str]],
    leaves: list[LeafGroup],
    switch_names: Mapping[str, str],
    host_switches: set[str],
    component: Mapping[str, int],
    max_tiers: int | None = None,
) -> Tree:
    """Build the switch tree above *leaves* from the switch-to-switch *neighbours*.

    *host_switches* are switches that carry hosts outside Slurm (service and storage leaves):
    they are never parents. *max_tiers* caps the number of levels, leaves included.
    *component* is every switch's connected component (:func:`.adjacency.components`).
    """
    excluded = set(host_switches)
    level_members = [group.switches for group in leaves]
    level_names = [group.name for group in leaves]
    excluded.update(guid for members in level_members for guid in members)
    uppers: list[TreeSwitch] = []
    has_parent: set[str] = set()
    depth = 1
    while max_tiers is None or depth < max_tiers:
        parents = _parents(level_members, neighbours, excluded)
        if not parents:
            break
        next_members, next_names = [], []
        for members, children in parents:
            name = _first_name(members, switch_names)
            kids = sorted(level_names[i] for i in children)
            uppers.append(TreeSwitch(name, depth, members, kids))
            has_parent.update(kids)
            next_members.append(members)
            next_names.append(name)
            excluded.update(members)
        level_members, level_names = next_members, next_names
        depth += 1
    tree = Tree(leaves, uppers, [])
    _trim_unary_tops(tree, has_parent)
    _join_islands(tree, max_tiers, component)
    tree.uppers.sort(key=lambda switch: (switch.level, switch.name))
    return tree


def _trim_unary_tops(tree: Tree, has_parent: set[str]) -> None:
    """Drop top switches with a single child: they add a level without adding choice."""
    changed = True
    while changed:
        changed = False
        for switch in list(tree.uppers):
            if switch.name not in has_parent and len(switch.children) == 1:
                tree.uppers.remove(switch)
                has_parent.discard(switch.children[0])
                changed = True
    names = [group.name for group in tree.leaves] + [switch.name for switch in tree.uppers]
    tree.tops = sorted(name for name in names if name not in has_parent)


def _join_islands(tree: Tree, max_tiers: int | None, component: Mapping[str, int]) -> None:
    """Give every cabled-together set of top switches (one *component*) a synthetic common
    parent."""
    if len(tree.tops) < 2 or (max_tiers is not None and tree.depth >= max_tiers):
        return  # one top switch: nothing to join
    members_of = {group.name: group.switches for group in tree.leaves}
    members_of.update({switch.name: switch.switches for switch in tree.uppers})
    level_of = {switch.name: switch.level for switch in tree.uppers}
    by_island: dict[int, list[str]] = {}
    for top in tree.tops:
        island = component[members_of[top][0]]
        by_island.setdefault(island, []).append(top)
    taken = set(members_of)
    tops = []
    for island_tops in sorted(by_island.values()):
        if len(island_tops) < 2:
            tops.extend(island_tops)
            continue
        name = _fresh_name("top", taken)
        taken.add(name)
        level = 1 + max(level_of.get(top, 0) for top in island_tops)
        tree.uppers.append(TreeSwitch(name, level, [], sorted(island_tops)))
        tops.append(name)
    tree.tops = sorted(tops)


def _fresh_name(base: str, taken: set[str]) -> str:
    """*base*, or *base*-N for the first N that no other switch uses."""
    if base not in taken:
        return base
    counter = 2
    while f"{base}-{counter}" in taken:
        counter += 1
    return f"{base}-{counter}"
