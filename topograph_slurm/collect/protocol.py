"""The wire protocol between a node and the collector: a small POSIX ``sh`` script run on the
node, and the parsers of what it prints.

Every transport runs the same script. It runs every command (under ``timeout`` when the node
has it) and prints, per command, a marker line with the exit code and the command's stdout and
stderr **base64-encoded** between markers. So output bytes survive any transport unchanged
(ClusterShell re-splits lines, srun may interleave), and nothing a command prints can be
mistaken for a marker. Each run uses a fresh random marker; the script's first line names the
node, so ``srun --label`` output (labelled by task id, not node) can be split per node.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
import secrets
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from topograph_slurm.collect.plan import check_key

MARKER_PREFIX = "@@topograph-"

_LABEL = re.compile(r"^\s*(\d+): ?(.*)$", re.ASCII)
_NODE_HEADER = re.compile(rf"^{MARKER_PREFIX}[0-9a-f]+ node (\S+)\s*$")


def new_marker() -> str:
    """A fresh random marker for one run, so no earlier output can forge a frame."""
    return MARKER_PREFIX + secrets.token_hex(8)


def node_script(commands: Mapping[str, Sequence[str]], timeout: float, marker: str) -> str:
    """The POSIX sh script run on each node: every command, base64-framed (see module doc).

    Lean on purpose — a handful of processes per command — because on a busy head node or
    thousands of small tasks the script's own forks are a visible part of the run time.
    ``begin`` lines may carry ``<start> <end>`` times after the exit code; they are optional.
    """
    secs = max(1, int(timeout))
    lines = [
        "T=; command -v timeout >/dev/null 2>&1 && T='timeout -k 5 " + str(secs) + "'",
        'D=$(mktemp -d 2>/dev/null || echo "/tmp/topograph.$$"); mkdir -p "$D"',
        f'echo "{marker} node ${{SLURMD_NODENAME:-$(hostname)}}"',
        "run() {",
        '  k=$1; shift; $T "$@" >"$D/o" 2>"$D/e"; rc=$?',
        f'  echo "{marker} begin $k $rc"',
        '  base64 <"$D/o"',
        f'  echo "{marker} stderr $k"',
        '  if [ -s "$D/e" ]; then tail -c 4000 "$D/e" | base64; fi',
        f'  echo "{marker} end $k"',
        "}",
    ]
    for key, argv in commands.items():
        lines.append(f"run {shlex.quote(check_key(key))} {shlex.join(argv)}")
    lines.append('rm -rf "$D"')
    return "\n".join(lines) + "\n"


@dataclass(slots=True)
class Framed:
    """One command's result as the node script reported it."""

    exit_code: int
    stdout: str
    stderr: str
    duration: float | None


def _seconds(start: str, end: str) -> float | None:
    try:
        return max(0.0, float(end) - float(start))
    except ValueError:
        return None  # a date(1) without %N


def _decode(lines: list[str]) -> str:
    data = base64.b64decode("".join(lines).encode("ascii"), validate=False)
    return data.decode("utf-8", errors="replace")


def parse_framed(text: str, marker: str) -> dict[str, Framed]:
    """Per-command results from the node script's output; frames cut short are left out."""
    out: dict[str, Framed] = {}
    state: str | None = None
    key, head = "", [""]
    body: list[str] = []
    err: list[str] = []
    for line in text.splitlines():
        if line.startswith(marker + " "):
            parts = line.split()
            tag = parts[1] if len(parts) > 1 else ""
            if tag == "begin" and len(parts) >= 4:
                key, head, body, err, state = parts[2], parts[3:], [], [], "out"
            elif tag == "stderr" and state == "out":
                state = "err"
            elif tag == "end" and state == "err":
                with contextlib.suppress(binascii.Error, ValueError, UnicodeError):
                    start, end = [*head[1:3], "", ""][:2]
                    out[key] = Framed(
                        int(head[0]), _decode(body), _decode(err), _seconds(start, end)
                    )
                state = None
            continue
        if state == "out":
            body.append(line.strip())
        elif state == "err":
            err.append(line.strip())
    return out


def split_labelled(stdout: str) -> dict[str, str]:
    """Per-node output of a ``srun --label`` run: lines grouped by task id, each task's node
    named by the script's header line (task ids are not node names)."""
    tasks: dict[int, list[str]] = {}
    for line in stdout.splitlines():
        match = _LABEL.match(line)
        if match:
            tasks.setdefault(int(match.group(1)), []).append(match.group(2))
    out: dict[str, str] = {}
    for lines in tasks.values():
        node = next((m.group(1) for m in map(_NODE_HEADER.match, lines) if m), None)
        if node is not None:
            out[node] = "\n".join(lines) + "\n"
    return out
