"""The first ``nvidia-smi -q`` readers, kept only as a test oracle: every line of the text
fed to the state machine, and the product names read in a second pass. The streaming reader
(``sources/nvidia_smi._scan``, which feeds only the lines that can matter) must give the same
GPUs, the same errors and the same product names (tests/unit/test_nvidia_smi.py)."""

from __future__ import annotations

from topograph_slurm.errors import ParseError
from topograph_slurm.model.gpu import GpuFabric
from topograph_slurm.sources.nvidia_smi import (
    _GPU_HEADER,
    _KEY_VALUE,
    SRC_Q,
    _clean_lines,
    _headerless_blocks,
    _QReader,
    _to_fabric,
    _value,
)


def parse_query_fabric(text: str) -> list[GpuFabric]:
    lines = _clean_lines(text)
    reader = _QReader()
    for lineno, line in enumerate(lines, 1):
        reader.feed(lineno, line)
    if reader.gpus:
        if reader.orphans:
            raise ParseError(
                "Fabric block before the first 'GPU 0000…' header: mixed fragment and full output",
                reader.orphans[0].line,
                SRC_Q,
            )
        return [_to_fabric(i, gpu.fabric, gpu) for i, gpu in enumerate(reader.gpus)]
    blocks = reader.orphans or _headerless_blocks(lines)
    if not blocks:
        raise ParseError(
            "no 'GPU 0000…' section and no Fabric block (State/CliqueId/ClusterUUID) found",
            source=SRC_Q,
        )
    return [_to_fabric(i, block, None) for i, block in enumerate(blocks)]


def parse_product_names(text: str) -> dict[int, str]:
    names: dict[int, str] = {}
    index = -1
    for line in _clean_lines(text):
        stripped = line.strip()
        if _GPU_HEADER.match(stripped):
            index += 1
            continue
        match = _KEY_VALUE.match(stripped)
        if index >= 0 and match and match.group(1).strip() == "Product Name":
            value = _value(match.group(2))
            if value is not None:
                names.setdefault(index, value)
    return names
