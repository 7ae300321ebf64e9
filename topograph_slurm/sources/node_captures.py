"""One node's ``nvidia-smi`` outputs captured by hand and named on the command line or in the
config (gres' ``--topo-matrix`` and ``--nvidia-smi-q``, order's and pools' ``--topo-matrix``
for the binding formats, the record hook's ``record_topo_matrix``): read as regular files up
to a size cap, then parsed by :mod:`topograph_slurm.sources.nvidia_smi`."""

from __future__ import annotations

import errno
import sys
from pathlib import Path

from topograph_slurm.errors import InputError
from topograph_slurm.model.gpu import GpuTopology

#: The most a hand-given capture may hold: a topo -m is a few KiB, a -q a few hundred.
_CAPTURE_LIMIT = 16 << 20


def read_capture(path: str) -> str:
    """A hand-given capture's text, stdin for ``-`` (``nvidia-smi topo -m | … --topo-matrix
    -``); an InputError when it cannot be read or holds more than a capture can."""
    from topograph_slurm.sources.files import read_regular

    try:
        if path == "-":
            data = sys.stdin.buffer.read(_CAPTURE_LIMIT + 1)
            if len(data) > _CAPTURE_LIMIT:
                raise OSError(errno.EFBIG, f"larger than {_CAPTURE_LIMIT >> 20} MiB")
        else:
            data = read_regular(Path(path), _CAPTURE_LIMIT)
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}") from None
    return data.decode("utf-8", errors="replace")


def read_topo_matrix(path: str) -> GpuTopology:
    """One node's ``topo -m`` (NVIDIA) or ``rocm-smi --showtopo`` (AMD) capture, parsed; an
    InputError naming *path*."""
    from topograph_slurm.sources.gpu_topology import parse_gpu_topology

    try:
        return parse_gpu_topology(read_capture(path))
    except InputError as err:
        raise InputError(f"{'<stdin>' if path == '-' else path}: {err}") from None


def read_product_names(path: str) -> dict[int, str]:
    """One node's ``nvidia-smi -q`` (or ``rocm-smi --showproduct``) capture: each GPU's
    product name by index."""
    from topograph_slurm.sources.gpu_topology import parse_gpu_products

    return parse_gpu_products(read_capture(path))
