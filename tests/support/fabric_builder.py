"""Build small Fabric models by hand for analysis tests (no parser involved)."""

from __future__ import annotations

from dataclasses import dataclass, field

from topograph_slurm.model.fabric import Ca, Fabric, Link, Switch


@dataclass
class FabricBuilder:
    """Add switches and hosts by name; GUIDs are derived from a counter."""

    fabric: Fabric = field(default_factory=Fabric)
    guids: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    def _guid(self, key: str) -> str:
        if key not in self.guids:
            self.guids[key] = f"{len(self.guids) + 1:016x}"
        return self.guids[key]

    def switch(self, name: str, description: str | None = None) -> str:
        guid = self._guid(name)
        desc = description if description is not None else f"MF0;{name}:MQM9790/U1"
        self.fabric.switches[guid] = Switch(guid, desc, 65)
        return guid

    def ca(self, key: str, description: str) -> str:
        guid = self._guid(key)
        self.fabric.cas[guid] = Ca(guid, description, 1)
        return guid

    def _port(self, guid: str) -> int:
        self.ports[guid] = self.ports.get(guid, 0) + 1
        return self.ports[guid]

    def cable(self, a: str, b: str, width: str = "4x", speed: str = "NDR") -> None:
        ga, gb = self.guids[a], self.guids[b]
        self.fabric.links.append(Link.between(ga, self._port(ga), gb, self._port(gb), width, speed))

    def host(self, name: str, leaves: list[str], hca: str = "mlx5_{}") -> None:
        """A node with one HCA per leaf given (rail i on leaves[i])."""
        for rail, leaf in enumerate(leaves):
            key = f"{name}/{rail}"
            self.ca(key, f"{name} {hca.format(rail)}")
            self.cable(key, leaf)
