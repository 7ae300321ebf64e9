"""Simulated rail-optimised InfiniBand fabrics, emitted as real ``ibnetdiscover`` text.

The demo, the golden tests and the scale benchmarks need fabrics nobody can lend us (2,048 and
16,384 DGX nodes). Rather than building a :class:`~topograph_slurm.model.Fabric` directly, the
simulator writes the same plain-format text ``ibnetdiscover`` prints on an NDR SuperPOD, so every
simulated run also exercises the real parser end to end.

Shape (DGX SuperPOD reference architecture): a *scalable unit* (SU) of ``su`` nodes has one leaf
switch per rail; HCA ``mlx5_<r>`` of every node in the SU plugs into that SU's rail-``r`` leaf.
Leaves have ``su`` down- and ``su`` up-links. Two tiers: leaves → spines (every leaf reaches
every spine). Three tiers: pods of leaves, each with ``su`` pod spines (one cable from every
leaf of the pod to every pod spine), pod spine ``j`` of every pod → core group ``j``.
The 2,048-node spec ``nodes=2048,su=32,tiers=3`` gives 512 leaves, 512 spines and 256 cores, as
the B200 SuperPOD. Everything (GUIDs, LIDs, names, order) is derived from the spec, so the same
spec always gives the same bytes.

``fabric=roce`` builds the very same cabling as an Ethernet/RoCE fabric (Spectrum-X style
rail-optimised leaves, spines, super-spines with ``tiers=3``) and writes it as NetQ's topology
graph (:func:`generate_netq`; switch ports ``swpN``, NICs ``eth<r>``), which the NetQ
translation reads: a RoCE spec and its ``fabric=ib`` twin give the same topology.

``gpu=mi300x`` (or another AMD Instinct model: ``mi250``, ``mi325x``, ``mi355x`` …) makes the
nodes AMD ones: every node prints the same ``rocm-smi --showtopo`` (:func:`generate_showtopo`,
read by the real parser), all its GPUs one xGMI hive, the first half on NUMA node 0 and the
rest on node 1. Without it the simulated nodes carry no GPU topology.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import TextIO

from topograph_slurm.errors import UsageError
from topograph_slurm.model.numbers import natural

OUI = "0002c9"  # Mellanox; leading zeros exercise ibnetdiscover's unpadded "(portguid)"
STORAGE_OUI = "b83fd2"  # another Mellanox OUI: the storage fabric's GUIDs never meet compute's

# kind nibble of simulated GUIDs: <OUI:6><island:1><kind:1><index:8>
_KIND_CA, _KIND_LEAF, _KIND_SPINE, _KIND_CORE = 0, 1, 2, 3
_KIND_STORAGE_SERVER, _KIND_STORAGE_SWITCH = 5, 6
_SHARP_BIT = 8

SHARP_DESCRIPTION = "Mellanox Technologies Aggregation Node"


@dataclass(frozen=True, slots=True)
class _Hardware:
    switch_model: str
    switch_devid: int
    hca_devid: int


_HARDWARE = {
    "EDR": _Hardware("MSB7800", 0xCB20, 0x1017),
    "HDR": _Hardware("MQM8700", 0xD2F0, 0x101B),
    "NDR": _Hardware("MQM9790", 0xD2F2, 0x1021),
    "XDR": _Hardware("Q3400", 0xD2F4, 0x1023),
}
_SHARP_DEVID = 0xCF09
_PREFIX_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,30}\Z")


class SimSpecError(UsageError, ValueError):
    """A ``--sim`` spec is malformed or too large: bad usage (exit 2), as a hostlist too large
    to expand is; a ValueError too, for callers that parse specs as values."""


@dataclass(frozen=True, slots=True)
class SimSpec:
    """What to simulate. Every field has a compact ``key=value`` form (see :func:`parse_sim_spec`).

    ``disagree`` names one node (or its 1-based index) whose last-rail cable is moved to the
    same rail's leaf of the next SU; ``swap`` names one node whose ``mlx5_0`` and ``mlx5_1``
    cables are exchanged between its SU's rail-0 and rail-1 leaves (rails misaligned, leaves
    unchanged); ``degraded`` turns that many node links into 1x or SDR links (alternating), all
    for exercising the health findings.
    """

    nodes: int = 64
    gpus: int = 8
    rails: int = 8
    su: int = 32
    tiers: int = 2
    islands: int = 1
    storage: bool = False
    sharp: bool = False
    prefix: str = "gpu"
    speed: str = "NDR"
    pod: int = 0  # SUs per pod (3 tiers); 0 = as many as fill half a leaf radix
    disagree: str = ""
    swap: str = ""
    degraded: int = 0
    #: ``ib`` (ibnetdiscover text) or ``roce``: the same cabling as Ethernet/RoCE (Spectrum-X
    #: leaves, spines, super-spines with tiers=3) in NetQ's topology-graph form
    fabric: str = "ib"
    #: GPUs per NVLink domain (72: GB200 NVL72 racks of nvl/gpus trays), 0 for none; NMX's
    #: answers then describe the racks (:func:`generate_nmx`), each split into ``partitions``
    nvl: int = 0
    partitions: int = 1
    #: a tray NMX reports down (name or 1-based index)
    down: str = ""
    #: an AMD Instinct model (``mi300x``): the nodes' GPU topology as rocm-smi prints it
    gpu: str = ""

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def radix(self) -> int:
        """Switch radix: 64 (Quantum-2) unless an SU needs more down+up ports."""
        return max(64, 2 * self.su)

    @property
    def name_width(self) -> int:
        """Digits in node names, so names sort in node order."""
        return max(4, len(str(self.nodes)))

    def nic_name(self, rail: int) -> str:
        """The name of a node's rail-*rail* NIC: ``mlx5_<r>`` on InfiniBand, the netdev
        ``eth<r>`` on Ethernet."""
        return f"eth{rail}" if self.fabric == "roce" else f"mlx5_{rail}"

    def node_name(self, index: int) -> str:
        """Host name of node *index* (0-based): ``gpu0001`` for index 0."""
        return f"{self.prefix}{index + 1:0{self.name_width}d}"

    def island_nodes(self) -> list[range]:
        """Node indices of each island, split as evenly as possible (earlier islands larger)."""
        base, extra = divmod(self.nodes, self.islands)
        out, start = [], 0
        for i in range(self.islands):
            size = base + (1 if i < extra else 0)
            out.append(range(start, start + size))
            start += size
        return out

    def disagree_index(self) -> int | None:
        """0-based index of the ``disagree`` node, or None."""
        return self._node_index(self.disagree)

    def swap_index(self) -> int | None:
        """0-based index of the ``swap`` node, or None."""
        return self._node_index(self.swap)

    def _node_index(self, node: str) -> int | None:
        """0-based index of a node given by name or 1-based index; None when not given, -1
        when no simulated node has that name."""
        if not node:
            return None
        index = natural(node)
        if index is not None:
            return index - 1
        for i in range(self.nodes):
            if self.node_name(i) == node:
                return i
        return -1


#: Largest fabric simulated: four times the 16,384-node benchmark, twice the largest GPU
#: clusters known; ``nodes=100000000`` would build gigabytes of text for minutes first.
MAX_NODES = 65_536
#: Largest scalable unit: a leaf has ``2 * su`` ports and a port number is at most 255.
MAX_SU = 127


def _validate(spec: SimSpec) -> None:
    """Reject specs the generator cannot build, with a message naming the key."""
    positive = ("nodes", "gpus", "rails", "su", "islands")
    for key in positive:
        if getattr(spec, key) < 1:
            raise SimSpecError(f"sim spec: {key} must be >= 1, got {getattr(spec, key)}")
    if spec.nodes > MAX_NODES:
        raise SimSpecError(f"sim spec: nodes must be <= {MAX_NODES:,}, got {spec.nodes:,}")
    if spec.su > MAX_SU:
        raise SimSpecError(f"sim spec: su must be <= {MAX_SU}, got {spec.su}")
    if spec.rails > 14:
        raise SimSpecError(f"sim spec: rails must be <= 14, got {spec.rails}")
    if spec.tiers not in (2, 3):
        raise SimSpecError(f"sim spec: tiers must be 2 or 3, got {spec.tiers}")
    if spec.islands > 16 or spec.islands > spec.nodes:
        raise SimSpecError(f"sim spec: islands must be <= 16 and <= nodes, got {spec.islands}")
    if spec.speed not in _HARDWARE:
        known = ", ".join(sorted(_HARDWARE))
        raise SimSpecError(f"sim spec: speed must be one of {known}, got {spec.speed!r}")
    if not _PREFIX_RE.match(spec.prefix):
        raise SimSpecError(f"sim spec: prefix must match [A-Za-z][A-Za-z0-9_-]*: {spec.prefix!r}")
    if spec.pod < 0 or spec.degraded < 0:
        raise SimSpecError("sim spec: pod and degraded must be >= 0")
    if spec.degraded > spec.nodes * spec.rails:
        raise SimSpecError(
            f"sim spec: degraded={spec.degraded} exceeds the {spec.nodes * spec.rails} node links"
        )
    _validate_nodes(spec)
    _validate_roce(spec)
    _validate_nvl(spec)
    if spec.gpu and not _AMD_GPU.match(spec.gpu):
        what = f"got {spec.gpu[:40]!r}"
        raise SimSpecError(f"sim spec: gpu must be an AMD Instinct model (mi300x), {what}")


def _validate_roce(spec: SimSpec) -> None:
    """What an Ethernet fabric from NetQ cannot show: SHARP nodes and an IB storage subnet
    are InfiniBand's, NetQ's graph has no link rates, and it names each switch once (so one
    graph, one island)."""
    if spec.fabric not in ("ib", "roce"):
        raise SimSpecError(f"sim spec: fabric must be ib or roce, got {spec.fabric!r}")
    if spec.fabric == "roce":
        refused = [key for key in ("sharp", "storage", "degraded") if getattr(spec, key)]
        if spec.islands > 1:
            refused.append("islands")
        if refused:
            raise SimSpecError(f"sim spec: fabric=roce takes no {', '.join(refused)}")


def _validate_nvl(spec: SimSpec) -> None:
    """NVLink racks hold whole trays and split into equal partitions of whole trays."""
    if spec.nvl < 0 or spec.partitions < 1:
        raise SimSpecError("sim spec: nvl must be >= 0 and partitions >= 1")
    trays, rest = divmod(spec.nvl, spec.gpus)
    if spec.nvl and (rest or trays % spec.partitions):
        raise SimSpecError(
            f"sim spec: nvl={spec.nvl} must hold whole trays of gpus={spec.gpus}, split into "
            f"partitions={spec.partitions} of whole trays"
        )
    if not spec.nvl and (spec.partitions > 1 or spec.down):
        raise SimSpecError("sim spec: partitions and down need nvl (GPUs per NVLink rack)")
    _simulated_node(spec, "down", spec._node_index(spec.down))


def _validate_nodes(spec: SimSpec) -> None:
    """The ``disagree`` and ``swap`` nodes exist, and the fabric can move or swap their cables."""
    disagree = _simulated_node(spec, "disagree", spec.disagree_index())
    if disagree is not None:
        island = next(r for r in spec.island_nodes() if disagree in r)
        if len(island) <= spec.su:
            raise SimSpecError("sim spec: disagree needs at least two scalable units in its island")
    if _simulated_node(spec, "swap", spec.swap_index()) is not None and spec.rails < 2:
        raise SimSpecError("sim spec: swap needs at least two rails")


def _simulated_node(spec: SimSpec, key: str, index: int | None) -> int | None:
    """The node index a key names (None when not given); one that names no node is an error."""
    if index is not None and not 0 <= index < spec.nodes:
        raise SimSpecError(f"sim spec: {key}={getattr(spec, key)!r} is not a simulated node")
    return index


_INT_RE = re.compile(r"-?[0-9]{1,12}")
_INT_KEYS = {"nodes", "gpus", "rails", "su", "tiers", "islands", "pod", "degraded", "nvl"}
_INT_KEYS |= {"partitions"}
_BOOL_KEYS = {"storage", "sharp"}
_STR_KEYS = {"prefix", "speed", "disagree", "swap", "fabric", "down", "gpu"}
_AMD_GPU = re.compile(r"mi\d{2,3}[a-z]{0,2}\Z")


def parse_sim_spec(spec: str) -> SimSpec:
    """Parse ``nodes=64,gpus=8,rails=8,su=32,tiers=2[,islands=2][,storage=1][,sharp=1]…``.

    Keys may come in any order; omitted keys take the :class:`SimSpec` defaults. Unknown keys,
    repeated keys and non-integer numbers raise :class:`SimSpecError` naming the culprit.
    """
    values: dict[str, object] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, sep, raw = (s.strip() for s in item.partition("="))
        if not sep:
            raise SimSpecError(f"sim spec: expected key=value, got {item!r}")
        if key in values:
            raise SimSpecError(f"sim spec: key {key!r} given twice")
        values[key] = _convert(key, raw)
    return SimSpec(**values)  # type: ignore[arg-type]


def _convert(key: str, raw: str) -> object:
    if key in _INT_KEYS:
        if not _INT_RE.fullmatch(raw):  # int() takes "1_000", "٤" and 4,300 digits
            raise SimSpecError(f"sim spec: {key} must be an integer, got {raw[:40]!r}")
        return int(raw)
    if key in _BOOL_KEYS:
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise SimSpecError(f"sim spec: {key} must be 0 or 1, got {raw!r}")
    if key in _STR_KEYS:
        return raw.upper() if key == "speed" else raw.lower() if key in ("fabric", "gpu") else raw
    known = ", ".join(f.name for f in fields(SimSpec))
    raise SimSpecError(f"sim spec: unknown key {key!r} (known: {known})")


def format_sim_spec(spec: SimSpec) -> str:
    """The compact form of *spec*, listing only keys that differ from the defaults."""
    default = SimSpec()
    parts = []
    for f in fields(SimSpec):
        value = getattr(spec, f.name)
        if f.name in ("nodes", "rails", "su", "tiers") or value != getattr(default, f.name):
            parts.append(f"{f.name}={int(value) if isinstance(value, bool) else value}")
    return ",".join(parts)


# --------------------------------------------------------------------------------------------
# Building the fabric: devices with numbered ports; cables fill both ends.


@dataclass(slots=True)
class _Device:
    switch: bool
    guid: str
    desc: str
    nports: int
    devid: int
    sysimg: str
    lid: int = 0
    ports: dict[int, tuple[int, int, str]] | None = None


class _Builder:
    """Devices and cables of one subnet, in emission order (switches, then CAs)."""

    def __init__(
        self, island: int, hw: _Hardware, speed: str, oui: str = OUI, prefix: str = ""
    ) -> None:
        self.island = island
        self.oui = oui
        self.prefix = prefix  # of switch names: the storage fabric's are "stor-…"
        self.hw = hw
        self.width_speed = "4x" + speed
        self.devices: list[_Device] = []

    def guid(self, kind: int, index: int) -> str:
        return f"{self.oui}{self.island:x}{kind:x}{index:08x}"

    def switch(self, kind: int, index: int, name: str, nports: int) -> int:
        guid = self.guid(kind, index)
        desc = f"MF0;{self.prefix}{name}:{self.hw.switch_model}/U1"
        self.devices.append(_Device(True, guid, desc, nports, self.hw.switch_devid, guid, 0, {}))
        return len(self.devices) - 1

    def ca(self, guid: str, desc: str, devid: int, sysimg: str = "") -> int:
        self.devices.append(_Device(False, guid, desc, 1, devid, sysimg or guid, 0, {}))
        return len(self.devices) - 1

    def cable(self, a: int, a_port: int, b: int, b_port: int, ws: str = "") -> None:
        ws = ws or self.width_speed
        a_ports, b_ports = self.devices[a].ports, self.devices[b].ports
        assert a_ports is not None and b_ports is not None
        assert a_port not in a_ports and b_port not in b_ports, "sim: port used twice"
        a_ports[a_port] = (b, b_port, ws)
        b_ports[b_port] = (a, a_port, ws)

    def assign_lids(self) -> None:
        """Switches first, then CAs, as a subnet manager sweeping from the core would not,
        but deterministic and unique within the subnet."""
        order = [d for d in self.devices if d.switch] + [d for d in self.devices if not d.switch]
        for lid, device in enumerate(order, start=1):
            device.lid = lid


def _build_upper_tiers(b: _Builder, leaves: list[int], spec: SimSpec, pod_leaves: int) -> None:
    """Connect *leaves* (uplink ports ``su+1..2su``) through spines (and cores) into one tree."""
    uplinks, radix = spec.su, spec.radix
    if spec.tiers == 2:
        n_spines = max(1, math.ceil(len(leaves) * uplinks / radix))
        if n_spines > uplinks:
            raise SimSpecError(
                f"sim spec: {len(leaves)} leaves need {n_spines} spines but a leaf has only "
                f"{uplinks} uplinks; use tiers=3"
            )
        spines = [
            b.switch(_KIND_SPINE, i, f"spine-{i + 1:03d}", radix + 1) for i in range(n_spines)
        ]
        next_port = [1] * n_spines
        for n, leaf in enumerate(leaves):
            for j in range(uplinks):
                s = (n * uplinks + j) % n_spines
                b.cable(leaf, spec.su + 1 + j, spines[s], next_port[s])
                next_port[s] += 1
        return
    pods = [leaves[i : i + pod_leaves] for i in range(0, len(leaves), pod_leaves)]
    half = radix // 2
    cores_per_group = max(1, math.ceil(len(pods) * half / radix))
    groups = [
        [
            b.switch(
                _KIND_CORE, g * cores_per_group + c, f"core-g{g + 1:02d}-c{c + 1:02d}", radix + 1
            )
            for c in range(cores_per_group)
        ]
        for g in range(uplinks)
    ]
    core_port = {core: 1 for group in groups for core in group}
    for p, pod in enumerate(pods):
        for j in range(uplinks):
            name = f"spine-p{p + 1:03d}-s{j + 1:02d}"
            spine = b.switch(_KIND_SPINE, p * uplinks + j, name, radix + 1)
            for n, leaf in enumerate(pod):
                b.cable(leaf, spec.su + 1 + j, spine, n + 1)
            # uplinks are dealt round-robin over the group's cores, all pods in turn, one core
            # further on each lap: every core gets as many cables (never more than its radix)
            # and consecutive pods share cores, so the fabric stays one piece
            for k in range(half):
                dealt = p * half + k
                core = groups[j][(dealt + dealt // cores_per_group) % cores_per_group]
                b.cable(spine, half + 1 + k, core, core_port[core])
                core_port[core] += 1


def _add_sharp(b: _Builder, spec: SimSpec) -> None:
    """One SHARP aggregation node per switch on its last port, as on Quantum switches."""
    if not spec.sharp:
        return
    for index in [i for i, d in enumerate(b.devices) if d.switch]:
        sw = b.devices[index]
        guid = f"{sw.guid[:7]}{int(sw.guid[7], 16) | _SHARP_BIT:x}{sw.guid[8:]}"
        agg = b.ca(guid, SHARP_DESCRIPTION, _SHARP_DEVID, sysimg=sw.guid)
        b.cable(index, sw.nports, agg, 1)


def _degraded_links(spec: SimSpec) -> dict[tuple[int, int], str]:
    """(node, rail) -> width+speed for the ``degraded`` knob, spread evenly over node links."""
    total = spec.nodes * spec.rails
    out: dict[tuple[int, int], str] = {}
    for k in range(spec.degraded):
        link = k * total // spec.degraded
        out[divmod(link, spec.rails)] = f"1x{spec.speed}" if k % 2 == 0 else "4xSDR"
    return out


def _build_compute_island(spec: SimSpec, island: int, nodes: range) -> _Builder:
    hw = _HARDWARE[spec.speed]
    b = _Builder(island, hw, spec.speed)
    n_su = math.ceil(len(nodes) / spec.su)
    tag = f"i{island + 1}-" if spec.islands > 1 else ""
    leaves: list[list[int]] = []  # [su][rail]
    for s in range(n_su):
        leaves.append(
            [
                b.switch(
                    _KIND_LEAF,
                    (nodes.start // spec.su + s) * 16 + r,
                    f"{tag}leaf-su{s + 1:03d}-r{r}",
                    spec.radix + 1,
                )
                for r in range(spec.rails)
            ]
        )
    degraded = _degraded_links(spec)
    moved, swapped = spec.disagree_index(), spec.swap_index()
    spare: dict[int, int] = {}  # leaf -> next free port for a moved cable
    for k, node in enumerate(nodes):
        s, slot = divmod(k, spec.su)
        for r in range(spec.rails):
            hca = b.ca(
                b.guid(_KIND_CA, node * 16 + r),
                f"{spec.node_name(node)} {spec.nic_name(r)}",
                hw.hca_devid,
            )
            rail = 1 - r if node == swapped and r < 2 else r
            leaf, port = leaves[s][rail], slot + 1
            if node == moved and r == spec.rails - 1:
                leaf = leaves[(s + 1) % n_su][rail]
                port = spare.get(leaf, 2 * spec.su + 1)
                if port > spec.radix:  # no free port on a full radix-64 leaf: one extra
                    b.devices[leaf].nports = spec.radix + 2
                    port = spec.radix + 2
                spare[leaf] = port + 1
            b.cable(leaf, port, hca, 1, degraded.get((node, r), ""))
    flat = [leaf for su_leaves in leaves for leaf in su_leaves]
    pod_sus = spec.pod or max(1, (spec.radix // 2) // spec.rails)
    _build_upper_tiers(b, flat, spec, pod_sus * spec.rails)
    _add_sharp(b, spec)
    b.assign_lids()
    return b


def _build_storage(spec: SimSpec) -> _Builder:
    """Storage fabric: two storage HCAs per node plus storage servers, leaves filled in order."""
    hw = _HARDWARE[spec.speed]
    b = _Builder(0, hw, spec.speed, STORAGE_OUI, prefix="stor-")
    ends: list[int] = []
    for node in range(spec.nodes):
        for r in (spec.rails, spec.rails + 1):
            desc = f"{spec.node_name(node)} mlx5_{r}"
            ends.append(b.ca(b.guid(_KIND_CA, node * 16 + r), desc, hw.hca_devid))
    for i in range(max(2, math.ceil(spec.nodes / 16))):
        guid = b.guid(_KIND_STORAGE_SERVER, i)
        ends.append(b.ca(guid, f"stor-{i + 1:03d} HCA-1", hw.hca_devid))
    per_leaf = spec.su
    leaves: list[int] = []
    for i in range(0, len(ends), per_leaf):
        leaf = b.switch(
            _KIND_STORAGE_SWITCH, len(leaves), f"leaf-{len(leaves) + 1:03d}", spec.radix + 1
        )
        leaves.append(leaf)
        for slot, hca in enumerate(ends[i : i + per_leaf]):
            b.cable(leaf, slot + 1, hca, 1)
    tiers = 2 if math.ceil(len(leaves) * spec.su / spec.radix) <= spec.su else 3
    plain = replace(spec, tiers=tiers, disagree="", swap="", degraded=0)
    _build_upper_tiers(b, leaves, plain, (spec.radix // 2))
    b.assign_lids()
    return b


# --------------------------------------------------------------------------------------------
# Emitting ibnetdiscover text (plain format, as infiniband-diags prints it).


def _short(guid: str) -> str:
    """A GUID as ibnetdiscover prints it in ``0x…`` and ``(…)``: hex without leading zeros."""
    return guid.lstrip("0") or "0"


def _emit(b: _Builder, out: TextIO) -> None:
    devs = b.devices
    refs = [f'"{"S" if d.switch else "H"}-{d.guid}"' for d in devs]
    pguid = ["" if d.switch else f"({_short(d.guid)}) " for d in devs]
    for d in (d for d in devs if d.switch):
        short = _short(d.guid)
        lines = [
            f"\nvendid=0x2c9\ndevid=0x{d.devid:x}\nsysimgguid=0x{short}\n"
            f"switchguid=0x{short}({short})\n"
            f'Switch\t{d.nports} "S-{d.guid}"\t\t# "{d.desc}" enhanced port 0 lid {d.lid} lmc 0\n'
        ]
        assert d.ports is not None
        for port in sorted(d.ports):
            peer, peer_port, ws = d.ports[port]
            p = devs[peer]
            lines.append(
                f"[{port}]\t{refs[peer]}[{peer_port}]{pguid[peer]}\t\t"
                f'# "{p.desc}" lid {p.lid} {ws}\n'
            )
        out.write("".join(lines))
    for d in (d for d in devs if not d.switch):
        short = _short(d.guid)
        lines = [
            f"\nvendid=0x2c9\ndevid=0x{d.devid:x}\nsysimgguid=0x{_short(d.sysimg)}\n"
            f'caguid=0x{short}\nCa\t{d.nports} "H-{d.guid}"\t\t# "{d.desc}"\n'
        ]
        assert d.ports is not None
        for port in sorted(d.ports):
            peer, peer_port, ws = d.ports[port]
            p = devs[peer]
            lines.append(
                f"[{port}]({short}) \t{refs[peer]}[{peer_port}]\t\t"
                f'# lid {d.lid} lmc 0 "{p.desc}" lid {p.lid} {ws}\n'
            )
        out.write("".join(lines))


def _preamble(spec: SimSpec, first: _Builder, what: str) -> str:
    ca = next((d for d in first.devices if not d.switch), first.devices[0])
    return (
        "#\n"
        f"# Topology file: simulated {what} fabric by topograph-slurm ({format_sim_spec(spec)})\n"
        "#\n"
        f"# Initiated from node {ca.guid} port {ca.guid}\n"
    )


def write_ibnetdiscover(spec: SimSpec, fp: TextIO) -> None:
    """Stream the compute fabric of *spec* (all islands, one after the other) to *fp*; with
    ``storage``, the storage subnet follows, as two ``ibnetdiscover`` runs (one from a compute
    HCA, one from a storage HCA) written to one file would."""
    first = True
    for island, nodes in enumerate(spec.island_nodes()):
        b = _build_compute_island(spec, island, nodes)
        if first:
            fp.write(_preamble(spec, b, "compute"))
            first = False
        _emit(b, fp)
    if spec.storage:
        write_storage_ibnetdiscover(spec, fp)


def generate_ibnetdiscover(spec: SimSpec) -> str:
    """The fabric of *spec* as ibnetdiscover plain-format text (see :func:`write_ibnetdiscover`)."""
    buf = io.StringIO()
    write_ibnetdiscover(spec, buf)
    return buf.getvalue()


def write_storage_ibnetdiscover(spec: SimSpec, fp: TextIO) -> None:
    """Stream the storage fabric (separate subnet: 2 storage HCAs per node + storage servers)."""
    b = _build_storage(spec)
    fp.write(_preamble(spec, b, "storage"))
    _emit(b, fp)


def generate_storage_ibnetdiscover(spec: SimSpec) -> str:
    """The storage fabric of *spec* as ibnetdiscover text (whether or not ``spec.storage``)."""
    buf = io.StringIO()
    write_storage_ibnetdiscover(spec, buf)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# Emitting NetQ's topology graph (fabric=roce): the same devices and cables, as NetQ lists an
# Ethernet fabric (switch ports ``swpN``, hosts by name, parallel cables compounded).

#: A switch's tier in NetQ's graph, by its kind; hosts are tier -1 (unclassified).
_TIERS = {_KIND_LEAF: 1, _KIND_SPINE: 2, _KIND_CORE: 3}


def generate_netq(spec: SimSpec) -> str:
    """The fabric of *spec* as the JSON NetQ's ``fetch-topology`` answers (one graph)."""
    b = _build_compute_island(spec, 0, spec.island_nodes()[0])
    ids, tiers = _netq_devices(b)
    ends = [_netq_end(d) for d in b.devices]
    pairs: dict[tuple[str, str], list[dict[str, object]]] = {}
    for i, device in enumerate(b.devices):
        assert device.ports is not None
        for port, (peer, peer_port, _) in sorted(device.ports.items()):
            if (i, port) < (peer, peer_port):
                a, z = (ids[i], ends[i](port)), (ids[peer], ends[peer](peer_port))
                pairs.setdefault((a[0], z[0]), []).append(
                    {
                        "id": f"{a[0]}:{a[1]}-*-{z[0]}:{z[1]}",
                        "interfaces": [
                            {"interface": a[1], "node": a[0]},
                            {"interface": z[1], "node": z[0]},
                        ],
                    }
                )
    links = [
        {
            "compounded_links": cables,
            "id": f"{a}-*-{z}",
            "interfaces": [{"node": a}, {"node": z}],
            "size": len(cables),
            "src": a,
            "target": z,
        }
        for (a, z), cables in pairs.items()
    ]
    return json.dumps([{"links": links, "nodes": tiers}], indent=1) + "\n"


def _netq_devices(b: _Builder) -> tuple[list[str], list[dict[str, object]]]:
    """Each device's graph id (a host's CAs share their host's) and the tier groups."""
    ids: list[str] = []
    groups: dict[int, dict[str, dict[str, object]]] = {}
    for device in b.devices:
        tier = _TIERS[int(device.guid[7], 16)] if device.switch else -1
        name = _switch_name(device.desc) if device.switch else device.desc.split()[0]
        members = groups.setdefault(tier, {})
        if name not in members:
            kind = "switch" if device.switch else "discovered_via_lldp"
            node = f"node{sum(map(len, groups.values()))}"  # the devices so far
            members[name] = {"device_type": kind, "id": node, "name": name, "tier": tier}
        ids.append(str(members[name]["id"]))
    tiers = [
        {
            "compounded_nodes": list(members.values()),
            "id": f"tier-{tier}" if tier > 0 else "tier-unclassified",
            "node_type": "tier",
            "tier": tier,
        }
        for tier, members in sorted(groups.items())
    ]
    return ids, tiers


def _switch_name(desc: str) -> str:
    """``MF0;leaf-su001-r0:MQM9790/U1`` → ``leaf-su001-r0``."""
    return desc.split(";", 1)[1].split(":", 1)[0]


def _netq_end(device: _Device) -> Callable[[int], str]:
    """How a port of *device* is named: ``swpN`` on a switch, the NIC's netdev on a host."""
    if device.switch:
        return lambda port: f"swp{port}"
    nic = device.desc.split()[1]
    return lambda _port: nic


# --------------------------------------------------------------------------------------------
# NVLink racks as NMX reports them (compute nodes, GPUs, partitions).


def generate_nmx(spec: SimSpec) -> tuple[str, list[str], list[str]]:
    """NMX's answers for *spec*'s NVL racks: ``/compute-nodes`` and, per domain, ``/gpus``
    and ``/partitions`` (JSON text), in the fields :mod:`sources.nmx.schema` reads. Racks
    hold consecutive nodes (the last one may be short); ``partitions`` splits each rack into
    equal runs of trays; the ``down`` tray is reported down."""
    per_rack = spec.nvl // spec.gpus
    down = spec._node_index(spec.down)
    nodes: list[dict[str, object]] = []
    gpus: list[str] = []
    partitions: list[str] = []
    for rack, first in enumerate(range(0, spec.nodes, per_rack)):
        domain = f"{rack + 1:08x}-5eed-4000-8000-{rack + 1:012x}"
        members: dict[int, list[str]] = {}
        rack_gpus = []
        for slot, index in enumerate(range(first, min(first + per_rack, spec.nodes))):
            ids = [f"{index + 1:08x}{g:04x}" for g in range(spec.gpus)]
            part = slot // (per_rack // spec.partitions) + 1
            members.setdefault(part, []).extend(ids)
            healthy = "UNHEALTHY" if index == down else "HEALTHY"
            nodes.append(
                {
                    "DomainUUID": domain,
                    "GpuIDList": ids,
                    "Health": healthy,
                    "ID": f"{index + 1:024x}",
                    "LocationInfo": {
                        "ChassisID": 1,
                        "ChassisSerialNumber": f"SIM{rack + 1:010d}",
                        "HostID": 1,
                        "SlotID": slot + 1,
                        "TrayIndex": slot,
                    },
                    "Name": spec.node_name(index),
                }
            )
            rack_gpus += [{"ID": g, "Health": "HEALTHY", "PartitionID": part} for g in ids]
        gpus.append(json.dumps(rack_gpus) + "\n")
        parts = [
            {
                "PartitionID": part,
                "Name": f"rack{rack + 1}-{part}",
                "DomainUUID": domain,
                "Health": "HEALTHY",
                "GpuIDList": ids,
            }
            for part, ids in members.items()
        ]
        partitions.append(json.dumps(parts) + "\n")
    return json.dumps(nodes, indent=1) + "\n", gpus, partitions


# AMD nodes: rocm-smi's view of one node's GPUs.


def generate_showtopo(spec: SimSpec) -> str:
    """``rocm-smi --showtopo`` of one simulated AMD node: ``spec.gpus`` GPUs, every pair
    ``XGMI`` (weight 15, 1 hop), GPUs of the first half on NUMA node 0, the rest on 1."""
    _validate(spec)
    gpus = range(spec.gpus)

    def matrix(title: str, cell: Callable[[int, int], str]) -> list[str]:
        rows = ["       " + "".join(f"{f'GPU{g}':<13}" for g in gpus)]
        rows += [f"GPU{a:<4}  " + "".join(f"{cell(a, b):<13}" for b in gpus) for a in gpus]
        return [f"{'=' * 20} {title} {'=' * 20}", *rows, ""]

    lines = [f"{'=' * 20} ROCm System Management Interface {'=' * 20}"]
    lines += matrix("Weight between two GPUs", lambda a, b: "0" if a == b else "15")
    lines += matrix("Hops between two GPUs", lambda a, b: "0" if a == b else "1")
    lines += matrix("Link Type between two GPUs", lambda a, b: "0" if a == b else "XGMI")
    lines.append(f"{'=' * 20} Numa Nodes {'=' * 20}")
    for gpu in gpus:
        numa = 0 if gpu < (spec.gpus + 1) // 2 else 1
        lines.append(f"GPU[{gpu}]\t\t: (Topology) Numa Node: {numa}")
        lines.append(f"GPU[{gpu}]\t\t: (Topology) Numa Affinity: {numa}")
    lines.append(f"{'=' * 20} End of ROCm SMI Log {'=' * 20}")
    return "\n".join(lines) + "\n"
