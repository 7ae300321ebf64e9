"""AMD test inputs made from real captures: no real capture of a node split into two xGMI
groups is kept, so one is made from the real MI308X hive."""

from __future__ import annotations


def split_hive(text: str) -> str:
    """A ``rocm-smi --showtopo`` text with GPUs 0-3 and 4-7 joined over PCIe only: the
    MI250-style node of two xGMI groups (the link matrix rewritten, all else as given)."""
    out = []
    in_links = False
    for line in text.splitlines(keepends=True):
        if line.startswith("="):
            in_links = "Link Type" in line
        elif in_links and line.startswith("GPU"):
            cells = line.split()
            row = int(cells[0][3:])
            for col in range(len(cells) - 1):
                if (row < 4) != (col < 4):
                    cells[col + 1] = "PCIE"
            line = "   ".join(cells) + "\n"
        out.append(line)
    return "".join(out)
