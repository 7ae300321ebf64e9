"""The fabric view (and a job on it) as geometry: tiers of logical switches above logical
leaves, each leaf with its rails and its nodes, nodes grouped into their blocks in Slurm file
order, faults coloured, cable counts on the aggregated tier edges.

Up to :data:`DETAIL_NODES` nodes on :data:`DETAIL_LEAVES` leaves it is one picture with every
node. A larger fabric is an overview of *units* (the leaves under one first-level switch, at
most :data:`UNIT_LEAVES` of them) with their counts and fault badges, plus one detail picture
per unit (in the HTML page a click away; ``draw --unit NAME`` for one SVG). A job picture
draws the leaves its nodes sit on, its nodes coloured by group and every group edge, the
slow ones red.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from topograph_slurm.analysis.fabric.cabling import tier_cables
from topograph_slurm.analysis.placement.group_edges import JobGroups
from topograph_slurm.errors import UsageError
from topograph_slurm.model import names
from topograph_slurm.model.result import Analysis, BlockTopology, Finding, Tree, TreeSwitch
from topograph_slurm.render.draw.faults import FAULT_CLASSES, FAULT_MEANING, FaultMap, fabric_faults
from topograph_slurm.render.draw.picture import Line, Picture, Shape, legend

#: Largest fabric drawn node by node in one picture (nodes and leaves, so it stays about as
#: wide as a screen); above either, units and drill-downs.
DETAIL_NODES, DETAIL_LEAVES = 1024, 16
#: Most leaves in one unit (a first-level switch with more is split into several units).
UNIT_LEAVES = 32
#: Group colours cycle through this many classes (g0…g7).
GROUP_COLOURS = 8

NODE, GAP, COLS, PAD = 10, 2, 8, 6
GROUP_W = PAD * 2 + COLS * (NODE + GAP) - GAP + 4
GROUP_GAP, HEAD_H, BLOCK_HEAD = 14, 34, 12
SWITCH_W, SWITCH_H, TIER_H = 120, 30, 70
UNIT_W, UNIT_H = 150, 80
#: Units per row of the overview (more wrap, so a 16k-node overview fits a screen's shape).
UNITS_PER_ROW = 16
LEFT, TOP, NOTE_H, MAX_NOTES = 300, 40, 13, 200
LEGEND_ROW = 16

_MEANING: list[tuple[str, str]] = [
    ("upper", "switch tier (logical switch: member ASICs merged)"),
    ("leaf", "logical leaf (one rail switch per rail, its nodes below)"),
    ("unit", "unit: leaves under one switch (click for its detail)"),
    ("block", "block, numbered in Slurm file order"),
    ("node", "node"),
    ("edge", "cables between tiers (count on the edge)"),
    ("job", "the job's nodes (coloured by group)"),
    ("occ-busy", "node: every GPU busy"),
    ("occ-mixed", "node: some GPUs free"),
    ("occ-free", "node: every GPU free"),
    ("occ-stranded", "node: free GPUs no pending job's TP group or segment can use"),
    ("occ-down", "node: takes no job (down, drained)"),
    ("edge-tp", "TP group edge"),
    ("edge-pp", "PP group edge"),
    ("slow", "group edge leaving the fastest unit its group fits in"),
    *((f"fault-{cls}", FAULT_MEANING[cls]) for cls in FAULT_CLASSES),
]


@dataclass(slots=True)
class FabricScene:
    """What the fabric view draws: the places (a tree and/or blocks), the faults on them, the
    cable counts between tiers, switch names by GUID, and optionally a job's groups."""

    tree: Tree | None
    blocks: BlockTopology | None
    faults: FaultMap
    cables: dict[tuple[str, str], int] = field(default_factory=dict)
    switch_names: dict[str, str] = field(default_factory=dict)
    source: str = ""
    job: JobGroups | None = None
    occupancy: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Group:
    """A leaf-like box: a logical leaf (with rail switches) or, without a tree, a block."""

    name: str
    nodes: list[str]
    switches: list[str]
    parent: str | None


@dataclass(slots=True)
class _Unit:
    """Leaves under one switch (or a run of them), drawn as one box in the overview."""

    id: str
    name: str
    groups: list[_Group]
    parent: str | None
    whole: bool  # all of the parent's children: the unit stands for the parent


@dataclass(slots=True)
class _Index:
    """Lookups the layout needs: block of each node, upper switches by name, parents."""

    block_of: dict[str, tuple[int, str]]
    file_rank: dict[str, int]  # a node's position in the Slurm file's block order
    uppers: dict[str, TreeSwitch]
    parent: dict[str, str]


def _index(scene: FabricScene) -> _Index:
    blocks = scene.blocks.blocks if scene.blocks else []
    block_of = {node: (i + 1, b.name) for i, b in enumerate(blocks) for node in b.nodes}
    uppers = {upper.name: upper for upper in scene.tree.uppers} if scene.tree else {}
    parent = {child: upper.name for upper in uppers.values() for child in upper.children}
    file_rank = {node: i for i, node in enumerate(n for block in blocks for n in block.nodes)}
    return _Index(block_of, file_rank, uppers, parent)


def _groups(scene: FabricScene, index: _Index) -> list[_Group]:
    """Logical leaves with their nodes in block file order; blocks when there is no tree."""
    if scene.tree is not None and scene.tree.leaves:
        return [
            _Group(
                leaf.name,
                sorted(leaf.nodes, key=lambda n: index.file_rank.get(n, len(index.file_rank))),
                sorted(
                    leaf.switches, key=lambda g: names.natural_key(scene.switch_names.get(g) or g)
                ),
                index.parent.get(leaf.name),
            )
            for leaf in scene.tree.leaves
        ]
    blocks = scene.blocks.blocks if scene.blocks else []
    return [_Group(block.name, list(block.nodes), [], None) for block in blocks if block.nodes]


def _units(groups: Sequence[_Group], index: _Index) -> list[_Unit]:
    """The groups under each parent (parents in order of first appearance), at most
    :data:`UNIT_LEAVES` per unit."""
    by_parent: dict[str | None, list[_Group]] = {}
    for group in groups:
        by_parent.setdefault(group.parent, []).append(group)
    runs = [
        members[i : i + UNIT_LEAVES]
        for members in by_parent.values()
        for i in range(0, len(members), UNIT_LEAVES)
    ]
    units = []
    for i, run in enumerate(runs):
        parent = run[0].parent
        whole = parent is not None and set(index.uppers[parent].children) == {g.name for g in run}
        name = parent if whole and parent else f"{run[0].name} … {run[-1].name}"
        if len(run) == 1 and not whole:
            name = run[0].name
        units.append(_Unit(f"unit-{i + 1}", name, run, parent, whole))
    return units


def fabric_pictures(scene: FabricScene, unit: str | None = None) -> list[Picture]:
    """The fabric: one detail picture when small, else the overview and a detail per unit;
    with *unit* (a unit, switch, leaf or node name) only that unit's detail."""
    index = _index(scene)
    groups = _groups(scene, index)
    node_count = sum(len(group.nodes) for group in groups)
    if node_count == 0:
        return []
    in_blocks = [n for block in (scene.blocks.blocks if scene.blocks else []) for n in block.nodes]
    notes = [*scene.faults.notes, *_undrawn(in_blocks, groups, "block nodes are on no leaf")]
    if unit is None and node_count <= DETAIL_NODES and len(groups) <= DETAIL_LEAVES:
        return [_detail("fabric", _title(scene, "fabric"), groups, scene, index, notes)]
    units = _units(groups, index)
    if unit is not None:
        chosen = _find_unit(units, unit)
        title = _title(scene, chosen.name)
        return [_detail(chosen.id, title, chosen.groups, scene, index, notes)]
    details = [_detail(u.id, _title(scene, u.name), u.groups, scene, index, notes) for u in units]
    return [_overview(scene, units, index, notes), *details]


def _undrawn(nodes: Iterable[str], groups: Sequence[_Group], what: str) -> list[str]:
    """A note naming the *nodes* no drawn group holds (none when all are drawn)."""
    drawn = {node for group in groups for node in group.nodes}
    missing = sorted(set(nodes) - drawn, key=names.natural_key)
    return [f"{len(missing)} {what}: {names.fold(missing)}"] if missing else []


def _find_unit(units: Sequence[_Unit], name: str) -> _Unit:
    for unit in units:
        members = {unit.id, unit.name, unit.parent or ""}
        members |= {group.name for group in unit.groups}
        members |= {node for group in unit.groups for node in group.nodes}
        if name in members:
            return unit
    raise UsageError(f"--unit {name}: no unit, switch, leaf or node of that name is drawn")


def job_picture(scene: FabricScene) -> Picture:
    """The leaves the job's nodes sit on, job nodes coloured by group, every group edge."""
    assert scene.job is not None
    index = _index(scene)
    job_nodes = set(scene.job.node_groups)
    groups = [g for g in _groups(scene, index) if job_nodes.intersection(g.nodes)]
    if not groups:
        raise UsageError("none of the job's nodes is on this fabric")
    notes = [*scene.faults.notes, *_undrawn(job_nodes, groups, "job nodes are on no leaf")]
    return _detail("job", _title(scene, "job"), groups, scene, index, notes)


def _title(scene: FabricScene, what: str) -> str:
    return f"{what} — {scene.source}" if scene.source else what


# ---- detail -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Canvas:
    shapes: list[Shape] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    centres: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # x, top, bottom
    #: x centres that place the switches above (a split unit's leaves stand at its centre)
    anchor_x: dict[str, int] = field(default_factory=dict)

    def place(self, name: str, x: int, top: int, bottom: int) -> None:
        self.centres[name] = (x, top, bottom)
        self.anchor_x[name] = x


def _detail(
    pid: str,
    title: str,
    groups: Sequence[_Group],
    scene: FabricScene,
    index: _Index,
    notes: Sequence[str],
) -> Picture:
    """Every node of *groups*, their leaves, and the switches above them."""
    canvas = _Canvas()
    levels = _ancestor_levels([group.name for group in groups], index)
    leaf_y = TOP + len(levels) * TIER_H
    x = LEFT
    bottom = leaf_y
    node_at: dict[str, tuple[int, int]] = {}
    for group in groups:
        bottom = max(bottom, _group_box(canvas, group, x, leaf_y, scene, index, node_at))
        x += GROUP_W + GROUP_GAP
    _tiers(canvas, levels, scene, index)
    if scene.job is not None:
        _job_edges(canvas, scene.job, node_at)
    return _finish(pid, title, canvas, x, bottom, notes)


def _ancestor_levels(children: Iterable[str], index: _Index) -> list[list[str]]:
    """The upper switches above *children*, one row per tree level, lowest first (a switch
    above children of different depths is drawn once, on its own level's row)."""
    found: dict[str, int] = {}
    current = list(children)
    while current:
        above = dict.fromkeys(index.parent[c] for c in current if c in index.parent)
        current = [name for name in above if name not in found]
        found.update((name, index.uppers[name].level) for name in current)
    return [
        [name for name, level in found.items() if level == row]
        for row in sorted(set(found.values()))
    ]


def _group_box(
    canvas: _Canvas,
    group: _Group,
    x: int,
    y: int,
    scene: FabricScene,
    index: _Index,
    node_at: dict[str, tuple[int, int]],
) -> int:
    """A leaf (or block) box with its rail strip and its nodes in block parts; its bottom."""
    faults = scene.faults
    parts = _block_parts(group.nodes, index)
    height = HEAD_H + sum(BLOCK_HEAD + _rows(len(nodes)) * (NODE + GAP) for _, nodes in parts)
    kind = "leaf" if scene.tree is not None else "block"
    tip = [f"{kind} {group.name}", f"{len(group.nodes)} nodes", *_fault_lines(faults, group.name)]
    cls = " ".join([kind, *(f"fault-{c}" for c in faults.classes(group.name))])
    lines = (
        group.name,
        f"{len(group.nodes)} nodes"
        + (f" · {len(group.switches)} rail sw." if group.switches else ""),
    )
    canvas.shapes.append(Shape(x, y, GROUP_W, height + PAD, cls, lines, "\n".join(tip), group.name))
    canvas.place(group.name, x + GROUP_W // 2, y, y + height + PAD)
    _rails(canvas, group, x, y + 24, scene)
    row_y = y + HEAD_H
    for block, nodes in parts:
        _block_part(canvas, block, nodes, x, row_y, group.name, scene, node_at)
        row_y += BLOCK_HEAD + _rows(len(nodes)) * (NODE + GAP)
    return y + height + PAD


def _rows(count: int) -> int:
    return -(-count // COLS)


def _block_parts(
    nodes: Sequence[str], index: _Index
) -> list[tuple[tuple[int, str] | None, list[str]]]:
    """Runs of *nodes* in one block (None: in no block), in order."""
    parts: list[tuple[tuple[int, str] | None, list[str]]] = []
    for node in nodes:
        block = index.block_of.get(node)
        if parts and parts[-1][0] == block:
            parts[-1][1].append(node)
        else:
            parts.append((block, [node]))
    return parts


def _rails(canvas: _Canvas, group: _Group, x: int, y: int, scene: FabricScene) -> None:
    """One segment per rail switch of a logical leaf, coloured by its faults."""
    if not group.switches:
        return
    width = (GROUP_W - 2 * PAD) // len(group.switches)
    for i, guid in enumerate(group.switches):
        name = scene.switch_names.get(guid, guid)
        classes = " ".join(["rail", *(f"fault-{c}" for c in scene.faults.classes(guid))])
        tip = "\n".join([f"rail switch {name}", f"GUID {guid}", *_fault_lines(scene.faults, guid)])
        canvas.shapes.append(Shape(x + PAD + i * width, y, width - 1, 6, classes, (), tip, guid))


def _block_part(
    canvas: _Canvas,
    block: tuple[int, str] | None,
    nodes: Sequence[str],
    x: int,
    y: int,
    leaf: str,
    scene: FabricScene,
    node_at: dict[str, tuple[int, int]],
) -> None:
    """A block's outline and number (when in one), and its nodes in rows of :data:`COLS`."""
    height = BLOCK_HEAD + _rows(len(nodes)) * (NODE + GAP)
    if block is not None:
        number, name = block
        # a block named after its leaf (IB unit blocks) shares its faults: the leaf shows them
        own = scene.faults.classes(name) if name != leaf else []
        classes = " ".join(["block", *(f"fault-{c}" for c in own)])
        tip = "\n".join(
            [
                f"block #{number} {name}",
                f"{len(nodes)} nodes here",
                *_fault_lines(scene.faults, name),
            ]
        )
        canvas.shapes.append(
            Shape(
                x + 3,
                y,
                GROUP_W - 6,
                height - 1,
                classes,
                (f"#{number} {name}",),
                tip,
                f"block #{number}",
                "",
                9,
            )
        )
    for i, node in enumerate(nodes):
        nx = x + PAD + (i % COLS) * (NODE + GAP)
        ny = y + BLOCK_HEAD + (i // COLS) * (NODE + GAP)
        canvas.shapes.append(_node(node, nx, ny, leaf, block, scene))
        node_at[node] = (nx + NODE // 2, ny + NODE // 2)


def _node(
    node: str, x: int, y: int, leaf: str, block: tuple[int, str] | None, scene: FabricScene
) -> Shape:
    classes = ["node", *(f"fault-{c}" for c in scene.faults.classes(node))]
    tip = [node, f"leaf {leaf}"]
    if block is not None:
        tip.append(f"block #{block[0]} {block[1]}")
    if node in scene.occupancy:
        classes.insert(1, f"occ-{scene.occupancy[node]}")
        tip.append(f"GPUs: {scene.occupancy[node]}")
    job = scene.job
    if job is not None and node in job.node_groups:
        groups = job.node_groups[node]
        classes.insert(1, "job")
        if job.colour_kind in groups:
            classes.insert(2, f"g{groups[job.colour_kind] % GROUP_COLOURS}")
        tip += [f"{kind.upper()} group {n}" for kind, n in groups.items()]
    tip += _fault_lines(scene.faults, node)
    return Shape(x, y, NODE, NODE, " ".join(classes), (), "\n".join(tip), node)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _fault_lines(faults: FaultMap, element: str) -> list[str]:
    return [f"{fault.cls}: {fault.message}" for fault in faults.on.get(element, ())]


def _tiers(
    canvas: _Canvas, levels: Sequence[Sequence[str]], scene: FabricScene, index: _Index
) -> None:
    """The upper switches, level by level, each centred over its drawn children; tier edges."""
    for depth, level in enumerate(levels):
        y = TOP + (len(levels) - 1 - depth) * TIER_H
        wanted = []
        for name in level:
            children = [
                canvas.anchor_x[c] for c in index.uppers[name].children if c in canvas.anchor_x
            ]
            wanted.append((sum(children) // len(children), name))
        right = LEFT - GROUP_GAP
        for centre, name in sorted(wanted):
            x = max(centre - SWITCH_W // 2, right + GROUP_GAP)
            right = x + SWITCH_W
            _switch(canvas, index.uppers[name], x, y, scene)
    for child, parent in index.parent.items():
        if child in canvas.centres and parent in canvas.centres:
            _tier_edge(canvas, child, parent, scene.cables.get((child, parent)), scene.faults)


def _switch(canvas: _Canvas, upper: TreeSwitch, x: int, y: int, scene: FabricScene) -> None:
    faults = scene.faults
    members = _count(len(upper.switches), "switch", "switches") if upper.switches else "synthetic"
    classes = " ".join(["upper", *(f"fault-{c}" for c in faults.classes(upper.name))])
    tip = "\n".join(
        [
            f"level-{upper.level} switch {upper.name}",
            members,
            f"{_count(len(upper.children), 'switch', 'switches')} below",
            *_fault_lines(faults, upper.name),
        ]
    )
    canvas.shapes.append(
        Shape(x, y, SWITCH_W, SWITCH_H, classes, (upper.name, members), tip, upper.name)
    )
    canvas.place(upper.name, x + SWITCH_W // 2, y, y + SWITCH_H)


def _tier_edge(
    canvas: _Canvas, child: str, parent: str, cables: int | None, faults: FaultMap
) -> None:
    cx, ctop, _ = canvas.centres[child]
    px, _, pbottom = canvas.centres[parent]
    on_edge = faults.edges.get((child, parent), [])
    classes = "edge" + (" fault-degraded" if on_edge else "")
    count = f"×{cables}" if cables else ""
    tip = "\n".join(
        [
            f"{child} → {parent}",
            f"{cables} cables" if cables else "cables unknown",
            *(f"{f.cls}: {f.message}" for f in on_edge),
        ]
    )
    canvas.lines.append(Line(cx, ctop, px, pbottom, classes, tip, count))


def _job_edges(canvas: _Canvas, job: JobGroups, node_at: Mapping[str, tuple[int, int]]) -> None:
    """Each group edge as an arc between its nodes; slow ones last, so they are drawn on top."""
    for edge in sorted(job.edges, key=lambda e: e.slow):
        if edge.a not in node_at or edge.b not in node_at:
            continue
        (x1, y1), (x2, y2) = node_at[edge.a], node_at[edge.b]
        bend = min(80, 8 + abs(x2 - x1) // 4 + abs(y2 - y1) // 4)
        classes = f"edge-{edge.kind}" + (" slow" if edge.slow else "")
        shared = f" and {edge.groups - 1} more" if edge.groups > 1 else ""
        where = f"shares one {edge.level}" if edge.level != "fabric" else "shares no unit"
        tip = f"{edge.kind.upper()} group {edge.group}{shared}: {edge.a} → {edge.b} ({where})"
        if edge.slow:
            tip += "; its group fits in a finer unit"
        canvas.lines.append(Line(x1, y1, x2, y2, classes, tip, "", bend, front=True))


def _finish(
    pid: str, title: str, canvas: _Canvas, right: int, bottom: int, notes: Sequence[str]
) -> Picture:
    """Legend on the left, notes under the drawing; the picture's size."""
    items = legend(canvas.shapes, canvas.lines, _MEANING)
    shown = list(notes[:MAX_NOTES])
    if len(notes) > MAX_NOTES:
        shown.append(f"… and {len(notes) - MAX_NOTES} more (see --report)")
    height = max(bottom, TOP + LEGEND_ROW * (len(items) + 1)) + PAD * 3 + NOTE_H * len(shown)
    return Picture(
        pid, title, max(right, LEFT + 400), height, canvas.shapes, canvas.lines, items, shown
    )


# ---- overview -----------------------------------------------------------------------------


def _overview(
    scene: FabricScene, units: Sequence[_Unit], index: _Index, notes: Sequence[str]
) -> Picture:
    """One box per unit with its counts and fault badges; the switches above the units."""
    canvas = _Canvas()
    anchors = [[u.parent] if u.whole and u.parent else [g.name for g in u.groups] for u in units]
    levels = _ancestor_levels([name for names_ in anchors for name in names_], index)
    top = TOP + len(levels) * TIER_H
    per_row = UNITS_PER_ROW if len(units) > UNITS_PER_ROW * 3 // 2 else len(units)
    for i, (unit, names_) in enumerate(zip(units, anchors, strict=True)):
        x = LEFT + (i % per_row) * (UNIT_W + GROUP_GAP)
        _unit_box(canvas, unit, x, top + (i // per_row) * (UNIT_H + GROUP_GAP * 2), scene, index)
        for name in names_:
            canvas.anchor_x[name] = x + UNIT_W // 2
        if unit.whole and unit.parent and i < per_row:  # below the first row: no edges
            canvas.centres[unit.parent] = canvas.centres[unit.id]
    right = LEFT + per_row * (UNIT_W + GROUP_GAP)
    bottom = top + -(-len(units) // per_row) * (UNIT_H + GROUP_GAP * 2)
    _tiers(canvas, levels, scene, index)
    for unit in units[:per_row]:
        if not unit.whole and unit.parent in canvas.centres:
            _unit_edge(canvas, unit, scene, index)
    return _finish("overview", _title(scene, "fabric overview"), canvas, right, bottom, notes)


def _unit_box(
    canvas: _Canvas, unit: _Unit, x: int, y: int, scene: FabricScene, index: _Index
) -> None:
    nodes = [node for group in unit.groups for node in group.nodes]
    numbers = sorted({index.block_of[n][0] for n in nodes if n in index.block_of})
    blocks = f"blocks #{numbers[0]}–#{numbers[-1]}" if numbers else "no blocks"
    above, cables = _uplink(unit, scene, index)
    uplink = f"↑ {above} ×{cables}" if above else "top of its island"
    sizes = f"{_count(len(unit.groups), 'leaf', 'leaves')} · {len(nodes)} nodes"
    lines = (unit.name, sizes, blocks, uplink)
    counts = _unit_faults(unit, nodes, scene)
    tip = [
        unit.name,
        f"leaves {unit.groups[0].name} … {unit.groups[-1].name}",
        f"nodes {names.fold(nodes)}",
        blocks,
        f"{cables} cables up to {above}" if above else "no switch above",
        *(f"{count} × {FAULT_MEANING[cls]}" for cls, count in counts.items()),
        "click: detail",
    ]
    canvas.shapes.append(
        Shape(x, y, UNIT_W, UNIT_H, "unit", lines, "\n".join(tip), unit.id, unit.id)
    )
    canvas.place(unit.id, x + UNIT_W // 2, y, y + UNIT_H)
    for i, (cls, count) in enumerate(counts.items()):
        badge = Shape(
            x + PAD + i * 24,
            y + UNIT_H - 18,
            22,
            13,
            f"badge fault-{cls}",
            (str(count),),
            f"{count} × {FAULT_MEANING[cls]}",
            unit.id,
            unit.id,
            9,
        )
        canvas.shapes.append(badge)


def _unit_faults(unit: _Unit, nodes: Sequence[str], scene: FabricScene) -> dict[str, int]:
    """How many faults of each class the unit holds (on its nodes, leaves, rail switches, the
    switch it stands for, its leaves' uplinks), each counted once however many elements it
    marks (a degraded rail marks its node and its rail switch)."""
    faults = scene.faults
    elements = [
        *nodes,
        *(g.name for g in unit.groups),
        *(s for g in unit.groups for s in g.switches),
    ]
    if unit.whole and unit.parent:
        elements.append(unit.parent)
    found = {fault for element in elements for fault in faults.on.get(element, ())}
    found |= {f for g in unit.groups for f in faults.edges.get((g.name, unit.parent or ""), ())}
    counts: dict[str, int] = {}
    for fault in found:
        counts[fault.cls] = counts.get(fault.cls, 0) + 1
    return {cls: counts[cls] for cls in FAULT_CLASSES if cls in counts}


def _uplink(unit: _Unit, scene: FabricScene, index: _Index) -> tuple[str, int]:
    """The switch above the unit and the cables to it (the unit's switch's, or its leaves')."""
    if unit.whole and unit.parent:
        above = index.parent.get(unit.parent, "")
        return above, scene.cables.get((unit.parent, above), 0)
    parent = unit.parent or ""
    return parent, sum(scene.cables.get((g.name, parent), 0) for g in unit.groups)


def _unit_edge(canvas: _Canvas, unit: _Unit, scene: FabricScene, index: _Index) -> None:
    """A split unit's edge to its switch: the cables of all its leaves."""
    parent, cables = _uplink(unit, scene, index)
    on_edge = [f for g in unit.groups for f in scene.faults.edges.get((g.name, parent), [])]
    cx, ctop, _ = canvas.centres[unit.id]
    px, _, pbottom = canvas.centres[parent]
    classes = "edge" + (" fault-degraded" if on_edge else "")
    tip = "\n".join([f"{unit.name} → {parent}", f"{cables} cables", *(f.message for f in on_edge)])
    canvas.lines.append(Line(cx, ctop, px, pbottom, classes, tip, f"×{cables}" if cables else ""))


def scene(
    tree: Tree | None,
    blocks: BlockTopology | None,
    analysis: Analysis | None = None,
    findings: Sequence[Finding] = (),
    source: str = "",
    job: JobGroups | None = None,
) -> FabricScene:
    """The scene of a fabric: its faults placed, its tier cables counted (when a fabric was
    read, not only a topology file)."""
    return FabricScene(
        tree,
        blocks,
        fabric_faults(analysis, tree, blocks, findings),
        tier_cables(analysis.fabric, tree) if analysis and tree else {},
        analysis.switch_names if analysis else {},
        source,
        job,
    )
