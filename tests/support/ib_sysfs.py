"""A ``/sys/class/infiniband`` tree laid out from real prints (``tests/fixtures/real/
infiniband-sysfs/``): every device and port ``ibstatus`` showed, each port's ``counters/``
holding the values the gpud capture printed. Plus the changes the tests make to it between a
job's start and its end (a counter bumped, a rate dropped, a port gone)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.conftest import real_fixture

COUNTERS = "infiniband-sysfs/gpud-943-mlx5_1-port1-counters.txt"
IBSTATUS = "infiniband-sysfs/nccl-1866-ibstatus-mlx5_0-mlx5_1.txt"

_COUNTER = re.compile(r"^=== \./(\S+) ===\n(.*)$", re.M)
_DEVICE = re.compile(r"^Infiniband device '(\S+)' port (\d+) status:$", re.M)
#: ibstatus's field names → the sysfs file each is read from.
_FIELDS = {"state": "state", "phys state": "phys_state", "rate": "rate", "link_layer": "link_layer"}


def counters() -> dict[str, str]:
    """The counter files of the gpud capture: name → value text as printed."""
    text = real_fixture(COUNTERS).read_text()
    return {name: value for name, value in _COUNTER.findall(text)}


def ports() -> dict[tuple[str, str], dict[str, str]]:
    """Each (device, port) ibstatus printed → its sysfs file texts (state, rate …)."""
    text = real_fixture(IBSTATUS).read_text()
    found: dict[tuple[str, str], dict[str, str]] = {}
    for block in text.split("\n\n"):
        head = _DEVICE.search(block)
        if head is None:
            continue
        files = {}
        for line in block.splitlines()[1:]:
            key, _, value = line.strip().partition(":")
            if key in _FIELDS:
                files[_FIELDS[key]] = value.strip()
        found[(head.group(1), head.group(2))] = files
    return found


def lay_out(root: Path) -> Path:
    """Write the tree under *root* (made if absent); returns *root*."""
    values = counters()
    for (device, port), files in ports().items():
        port_dir = root / device / "ports" / port
        (port_dir / "counters").mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (port_dir / name).write_text(text + "\n")
        for name, text in values.items():
            (port_dir / "counters" / name).write_text(text + "\n")
    return root


def port_dir(root: Path, device: str = "mlx5_1", port: str = "1") -> Path:
    return root / device / "ports" / port


def bump(root: Path, counter: str, by: int, device: str = "mlx5_1", port: str = "1") -> None:
    """Raise one counter of one port by *by* (negative: it went down, as after a reset)."""
    path = port_dir(root, device, port) / "counters" / counter
    path.write_text(f"{int(path.read_text()) + by}\n")


def set_file(root: Path, name: str, text: str, device: str = "mlx5_1", port: str = "1") -> None:
    """Replace one of a port's files (``rate``, ``state``, ``counters/symbol_error``)."""
    (port_dir(root, device, port) / name).write_text(text + "\n")


def remove_port(root: Path, device: str = "mlx5_1", port: str = "1") -> None:
    shutil.rmtree(port_dir(root, device, port))
