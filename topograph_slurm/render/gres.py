"""``gres.conf`` from a :class:`GresPlan`: the hostlists, core ranges and link lists as Slurm
writes them; the line syntax is ``templates/gres.conf.j2``."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import jinja2

from topograph_slurm.model.gpu import GresDevice, GresPlan
from topograph_slurm.model.names import fold
from topograph_slurm.render.environment import printable, render

#: ``gres --json``'s format and version (docs/gres.md has the schema).
GRES_FORMAT = "topograph-slurm-gres"
GRES_VERSION = 1


def core_ranges(cores: tuple[int, ...]) -> str:
    """``(0, 1, 2, 5)`` → ``0-2,5``: Slurm's core list form."""
    parts: list[str] = []
    start = prev = cores[0]
    for core in (*cores[1:], None):
        if core is not None and core == prev + 1:
            prev = core
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if core is not None:
            start = prev = core
    return ",".join(parts)


def _device(device: GresDevice) -> dict[str, Any]:
    return {
        "index": device.index,
        "file": device.file or f"/dev/nvidia{device.index}",
        "type": device.type,
        "cores": core_ranges(device.cores) if device.cores else "",
        "links": ",".join(str(n) for n in device.links) if device.links else "",
    }


def render_gres(
    env: jinja2.Environment, plan: GresPlan, source: str, numa_node_as_socket: bool = False
) -> str:
    """The whole file. *source* (the snapshot or capture read) lands in a comment, so it is
    shown printable: a path with a newline must not start a line Slurm reads. With
    *numa_node_as_socket* the header says slurm.conf must set it (Cores= are NUMA nodes)."""
    groups = [
        {"nodes": fold(group.nodes), "devices": [_device(d) for d in group.devices]}
        for group in plan.groups
    ]
    notes = [printable(note) for note in plan.notes]
    return render(
        env,
        "gres.conf.j2",
        source=printable(source),
        notes=notes,
        groups=groups,
        numa_node_as_socket=numa_node_as_socket,
    )


def render_gres_json(plan: GresPlan, source: str, numa_node_as_socket: bool = False) -> str:
    """``gres --json``: the same plan as data: each group's nodes (a hostlist and the
    names), each GPU's Type=, Slurm core indices (Slurm's list form, as Cores= takes them) and
    Links= (a list), the findings and notes."""
    data = {
        "format": GRES_FORMAT,
        "version": GRES_VERSION,
        "source": source,
        "numa_node_as_socket": numa_node_as_socket,
        "groups": [
            {
                "nodes": fold(group.nodes),
                "node_names": list(group.nodes),
                "devices": [
                    {
                        "index": d.index,
                        "file": f"/dev/nvidia{d.index}",
                        "type": d.type,
                        "cores": core_ranges(d.cores) if d.cores else None,
                        "links": list(d.links) if d.links else None,
                    }
                    for d in group.devices
                ],
            }
            for group in plan.groups
        ],
        "findings": [dataclasses.asdict(finding) for finding in plan.findings],
        "notes": list(plan.notes),
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
