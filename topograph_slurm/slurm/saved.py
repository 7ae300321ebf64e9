"""A saved Slurm state: the answers of ``scontrol``'s reads kept as files in one directory, so
every command that asks Slurm runs on a laptop with no Slurm and a bug report carries its
inputs (``--slurm-state DIR``, config ``slurm_state``; ``topograph-slurm slurm save DIR``
writes one). The layout is docs/slurm-state.md.

Each read maps to ONE file (:data:`FILES`). ``show job --json ID`` and ``show partition
--json NAME`` are answered from the saved lists, filtered to the one asked, in the shape
Slurm prints (an unknown one an empty list, as Slurm answers), unless a file of that one
(``scontrol-show-job-ID.json``) was saved. Every other command would change Slurm and is
refused (:class:`Unchanged`, exit 6): the saved state is what Slurm was, not a Slurm.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from topograph_slurm.errors import CollectError, InputError, RefusedError

#: The reads a saved state answers: scontrol's arguments → the file holding their stdout.
#: doctor's ``scontrol-show-config.txt`` is the first (docs/doctor.md).
FILES: dict[tuple[str, ...], str] = {
    ("show", "config"): "scontrol-show-config.txt",
    ("show", "nodes", "--json"): "scontrol-show-nodes.json",
    ("show", "jobs", "--json"): "scontrol-show-jobs.json",
    ("show", "partitions", "--json"): "scontrol-show-partitions.json",
    ("show", "topology"): "scontrol-show-topology.txt",
    ("--version",): "scontrol-version.txt",
}
#: Reads whose failure does not stop a save: ``show topology`` fails on a cluster without a
#: topology plugin, and the state is then saved without its file.
OPTIONAL = frozenset({("show", "topology")})
#: ``show job --json ID`` / ``show partition --json NAME``: the list they are filtered from.
_ONE_OF = {
    ("show", "job", "--json"): (("show", "jobs", "--json"), "jobs", "scontrol-show-job-{}.json"),
    ("show", "partition", "--json"): (
        ("show", "partitions", "--json"),
        "partitions",
        "scontrol-show-partition-{}.json",
    ),
}


class Unchanged(RefusedError):
    """A command that would change Slurm, asked of a saved state (exit 6)."""


def answer(saved: Path, args: Sequence[str]) -> bytes:
    """What ``scontrol <args>`` printed when *saved* was saved: its file's bytes, or a saved
    list filtered to the one asked; an InputError naming the file and how to save it when it
    is missing; :class:`Unchanged` for a command that is no read."""
    key = tuple(args)
    if key in FILES:
        return _read(saved, FILES[key], key)
    if key[:3] in _ONE_OF and len(key) == 4:
        whole, field, own = _ONE_OF[key[:3]]
        one = saved / own.format(key[3])
        if "/" not in key[3] and one.is_file():
            return _read(saved, one.name, key)
        return _filtered(_read(saved, FILES[whole], whole), field, key[3])
    if key[:2] == ("show", "topology") and len(key) == 3:
        return _read(saved, f"scontrol-show-topology-{key[2]}.txt", key)
    raise Unchanged(f"scontrol {args[0] if args else ''}: {refusal(saved)}")


def refusal(saved: Path) -> str:
    """Why a change is refused: the one wording."""
    return f"refused, Slurm is read from the saved state {saved} (--slurm-state); nothing changed"


def _read(saved: Path, name: str, args: Sequence[str]) -> bytes:
    path = saved / name
    try:
        return path.read_bytes()
    except OSError as err:
        command = " ".join(["scontrol", *args])
        raise InputError(
            f"{path}: {err.strerror}: save `{command}` there, or the whole state with "
            "`topograph-slurm slurm save DIR` (docs/slurm-state.md)"
        ) from None


def _filtered(data: bytes, field: str, wanted: str) -> bytes:
    """The saved answer with only the job or partition *wanted* in its list (none: an empty
    list, as Slurm answers an unknown one); anything else kept as saved."""
    try:
        whole = json.loads(data)
        listed = whole[field]
    except (ValueError, TypeError, KeyError):
        return data  # not Slurm's shape: the reader says so, naming the command
    if isinstance(listed, list):
        whole[field] = [item for item in listed if _is(item, field, wanted)]
    return json.dumps(whole).encode()


def _is(item: object, field: str, wanted: str) -> bool:
    if not isinstance(item, dict):
        return False
    if field == "partitions":
        return bool(item.get("name") == wanted)
    if str(item.get("job_id")) == wanted:
        return True
    parent, task = (_number(item.get(key)) for key in ("array_job_id", "array_task_id"))
    return task is not None and f"{parent}_{task}" == wanted


def _number(value: object) -> object:
    """24.11/26.05's ``{"set": true, "number": 5}`` (None when not set), else the value."""
    if isinstance(value, dict):
        return value.get("number") if value.get("set") else None
    return value


def save(run: Callable[[list[str]], str]) -> tuple[dict[str, str], list[str]]:
    """Each read of :data:`FILES` run once (*run*: :meth:`.Scontrol.run`, which imports this
    module): file name → what scontrol printed (a byte that is not UTF-8 read as U+FFFD), and
    why an optional read is missing; a read that fails is a CollectError (exit 4) and nothing
    is saved."""
    files, missing = {}, []
    for args, name in FILES.items():
        try:
            files[name] = run(list(args))
        except CollectError as err:
            if args not in OPTIONAL:
                raise
            missing.append(f"{name}: {err}")
    return files, missing


def is_saved_state(path: Path) -> bool:
    """Absent, empty, or a directory of nothing but regular files a save writes (their names
    start with ``scontrol-``): what ``slurm save`` may replace as a whole."""
    if not path.exists():
        return True
    if not path.is_dir() or path.is_symlink():
        return False
    return all(
        entry.name.startswith("scontrol-") and entry.is_file() and not entry.is_symlink()
        for entry in path.iterdir()
    )
