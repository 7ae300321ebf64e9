"""``hooks install``: the four record hook scripts Slurm runs, written where slurm.conf names
them, and the record root made with the owner and mode the trust model needs
(docs/record.md). :func:`check` says whether what is installed is current; ``doctor`` calls
it too.

The scripts are the hooks' last line of defence: whatever the tool does (a missing module,
a hung scontrol past the deadline, no binary at all), the script passes on only the gate's
code and turns every other exit into 0, so no job is requeued and no node drained for it.
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

from topograph_slurm.config import Settings
from topograph_slurm.errors import OutputError, UsageError

#: Where the scripts go unless ``--dir`` says otherwise: beside slurm.conf.
DEFAULT_SCRIPT_DIR = "/etc/slurm"
OK, STALE, MISSING, WRONG, WROTE = "ok", "stale", "missing", "wrong", "wrote"


@dataclass(frozen=True, slots=True)
class InstallRequest:
    """What to install: the scripts' directory, the tool's absolute path and the config it
    is run with, the record root and its owner (SlurmUser, who writes the job records), and
    the topology file ``record start`` hashes (None: none)."""

    directory: str
    binary: str
    config: str
    record_dir: str
    owner: str = "root"
    topology: str | None = None


@dataclass(frozen=True, slots=True)
class Checked:
    """One installed piece (a script, the record root): ``ok``, ``wrote`` (install just wrote
    or made it), ``stale`` (differs from what install writes), ``missing`` or ``wrong``
    (untrusted: a link, another owner, a mode others may write), and why."""

    state: str
    path: str
    problem: str = ""


def scripts(settings: Settings, request: InstallRequest) -> dict[str, str]:
    """Each script's text by file name, as install writes it."""
    from topograph_slurm.render import hooks as render
    from topograph_slurm.render.environment import environment

    for flag, value in (("--dir", request.directory), ("--binary", request.binary)):
        render.check_path(flag, value)
    render.check_path("--config", request.config)
    if request.topology:
        render.check_path("--topology", request.topology)
    env = environment(Path(settings.templates) if settings.templates else None)
    return render.scripts(env, request.binary, request.config, request.directory, request.topology)


def slurm_conf_lines(settings: Settings, request: InstallRequest) -> str:
    """The slurm.conf lines naming the installed scripts."""
    from topograph_slurm.render import hooks as render
    from topograph_slurm.render.environment import environment

    env = environment(Path(settings.templates) if settings.templates else None)
    return render.slurm_conf(env, render.located(request.directory, request.topology))


def install(settings: Settings, request: InstallRequest) -> list[Checked]:
    """Write every script that is missing or stale (mode 0755, this user's: root's), make
    the record root when missing (mode 0755, given to the owner), then :func:`check`. An
    existing record root is never re-owned: a wrong one is reported, not adopted."""
    from topograph_slurm.output import make_record_root, write_at

    texts = scripts(settings, request)
    uid = _uid(request.owner)
    directory = Path(request.directory)
    written: set[str] = set()
    try:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise OutputError(f"cannot write into {directory}: {err.strerror}") from None
    try:
        for item in _scripts_checked(fd, directory, texts):
            if item.state != OK:
                name = Path(item.path).name
                write_at(fd, name, texts[name].encode(), item.path, mode=0o755)
                written.add(item.path)
    finally:
        os.close(fd)
    if make_record_root(Path(request.record_dir), uid):
        written.add(request.record_dir)
    return [
        Checked(WROTE, item.path) if item.path in written and item.state == OK else item
        for item in check(settings, request)
    ]


def check(settings: Settings, request: InstallRequest) -> list[Checked]:
    """Whether the installed scripts are what install would write (text, mode 0755, owned by
    root) and the record root is trusted (a real directory owned by the owner, writable by
    nobody else): the state of each. ``doctor`` reports these."""
    texts = scripts(settings, request)
    directory = Path(request.directory)
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        found = [Checked(MISSING, str(directory / name), err.strerror or "") for name in texts]
    else:
        try:
            found = _scripts_checked(fd, directory, texts)
        finally:
            os.close(fd)
    return [*found, _root_checked(Path(request.record_dir), _uid(request.owner))]


def _scripts_checked(fd: int, directory: Path, texts: dict[str, str]) -> list[Checked]:
    return [_script_checked(fd, str(directory / name), name, text) for name, text in texts.items()]


def _script_checked(fd: int, path: str, name: str, text: str) -> Checked:
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return Checked(MISSING, path)
    if not stat.S_ISREG(info.st_mode):
        return Checked(WRONG, path, "not a regular file (a link?)")
    if info.st_uid != os.geteuid():
        return Checked(STALE, path, f"owned by uid {info.st_uid}")
    if stat.S_IMODE(info.st_mode) != 0o755:
        return Checked(STALE, path, f"mode {stat.S_IMODE(info.st_mode):o}, not 755")
    from topograph_slurm.sources.record import read_at

    if read_at(fd, name, 1 << 20, None, path) != text.encode():
        return Checked(STALE, path, "differs from what hooks install writes")
    return Checked(OK, path)


def _root_checked(directory: Path, uid: int) -> Checked:
    """The record root as the trust model needs it (docs/record.md)."""
    try:
        info = directory.lstat()
    except FileNotFoundError:
        return Checked(MISSING, str(directory), "the record root")
    except OSError as err:
        return Checked(WRONG, str(directory), err.strerror or str(err))
    mode = stat.S_IMODE(info.st_mode)
    problem = (
        "not a real directory (a link?)"
        if not stat.S_ISDIR(info.st_mode)
        else f"writable by others (mode {mode:o}): not trusted"
        if mode & (stat.S_IWGRP | stat.S_IWOTH)
        else f"owned by uid {info.st_uid}, not {uid} (SlurmUser: --owner)"
        if info.st_uid != uid
        else ""
    )
    return Checked(WRONG if problem else OK, str(directory), problem)


def _uid(owner: str) -> int:
    try:
        return pwd.getpwnam(owner).pw_uid
    except KeyError:
        raise UsageError(f"--owner {owner!r}: no such user here") from None
