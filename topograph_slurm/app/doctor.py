"""``doctor``'s use case: read what the Slurm side holds (live on the controller, or a saved
state directory from an admin's laptop), compare it with what this tool makes, and return
one verdict per check (:mod:`topograph_slurm.analysis.doctor.checks`). Read-only: nothing
is written, slurmctld is only asked (``scontrol show config``).

A saved state directory (``--slurm-state DIR``, config ``slurm_state``) answers ``scontrol
show config`` from ``scontrol-show-config.txt``, as for every command (:mod:`.slurm.saved`),
and holds every other file at its absolute path below DIR (``DIR/etc/slurm/slurm.conf``),
modes and owners kept (``cp -a``, ``tar -p``): docs/doctor.md.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from topograph_slurm import __version__
from topograph_slurm.analysis.doctor.checks import run_checks, wanted_paths
from topograph_slurm.config import Settings, record_dir
from topograph_slurm.errors import InputError, TopographError
from topograph_slurm.model.doctor import Currency, DoctorFacts, DoctorReport, FileFacts, Wanted
from topograph_slurm.slurm.scontrol import Scontrol
from topograph_slurm.slurm.show_config import parse_show_config

#: The most of one file doctor reads (hook scripts, unit files, Lua, metrics).
READ_CAP = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Root:
    """Where the Slurm side is read: this host (``saved`` None) or a saved state directory."""

    saved: Path | None = None

    def at(self, path: str) -> Path:
        """*path* (absolute, as slurm.conf names it) here, or below the saved directory."""
        return self.saved / path.lstrip("/") if self.saved else Path(path)

    def facts(self, path: str) -> FileFacts:
        """What *path* is: missing, a directory, or a file with its text (links followed, as
        Slurm follows them)."""
        where = self.at(path)
        try:
            info = where.stat()
        except OSError:
            return FileFacts(path)
        mode, is_dir = stat.S_IMODE(info.st_mode), stat.S_ISDIR(info.st_mode)
        text = ""
        if stat.S_ISREG(info.st_mode):
            try:
                with where.open("rb") as handle:
                    text = handle.read(READ_CAP).decode("utf-8", errors="replace")
            except OSError:
                text = ""
        return FileFacts(path, True, is_dir, mode, info.st_uid, text)


def wanted(settings: Settings) -> Wanted:
    """What the config says this tool makes."""
    spank = None
    if settings.filter is not None:
        from topograph_slurm.render.filters import FilterFacts

        spank = settings.filter.get("spank_path") or FilterFacts.spank_path
    return Wanted(
        format=settings.format,
        output=settings.output,
        filter_dir=settings.filter_dir,
        spank_path=spank,
        record_dir=str(record_dir(settings)),
        metrics=settings.metrics,
        reconfigure=settings.reconfigure,
    )


def _has_source(settings: Settings) -> bool:
    return bool(
        settings.ibnetdiscover or settings.ufm or settings.netq or settings.snapshot or settings.sim
    )


def _currency(settings: Settings, root: Root) -> tuple[Currency, Currency]:
    """The topology file's and the filters' currency, by ``generate``'s own rendering (the
    bytes a ``generate --check`` compares); not checked without a fabric source."""
    if not _has_source(settings):
        why = "no fabric source (ibnetdiscover, ufm, snapshot) in the config"
        return Currency(None, why), Currency(None, why)
    from topograph_slurm.app.generate import generate
    from topograph_slurm.render.environment import environment

    quiet = replace(settings, reconfigure=False, metrics=None, report=None)
    try:
        env = environment(Path(settings.templates) if settings.templates else None)
        result = generate(quiet, env, lambda _message: None)
    except TopographError as err:
        return Currency(None, f"generate failed: {err}"), Currency(None, str(err))
    topology = Currency(None, "the config names no output")
    if settings.output and result.topology is not None:
        topology = Currency(_stale(root, {settings.output: result.topology}))
    filters = Currency(None, "no filter_dir in the config")
    if settings.filter_dir:
        written = {f"{settings.filter_dir.rstrip('/')}/{n}": t for n, t in result.filters.items()}
        filters = Currency(_stale(root, written))
    return topology, filters


def _stale(root: Root, files: dict[str, str]) -> list[str]:
    """The paths whose bytes differ from what generate renders (a missing one too)."""
    stale = []
    for path, text in sorted(files.items()):
        try:
            if root.at(path).read_bytes() != text.encode("utf-8"):
                stale.append(path)
        except OSError:
            stale.append(path)
    return stale


def doctor(settings: Settings, node_versions: dict[str, str] | None = None) -> DoctorReport:
    """Every check's verdict for the Slurm side (this host's, or the saved state's)."""
    scontrol = Scontrol.from_settings(settings)
    saved = scontrol.saved
    root = Root(saved)
    config = parse_show_config(scontrol.run(["show", "config"]))
    if config.release is None:
        raise InputError("scontrol show config: no SLURM_VERSION line (not its output?)")
    facts = DoctorFacts(config, wanted(settings), version=__version__, node_versions=node_versions)
    files: dict[str, FileFacts] = {}
    for _ in range(2):  # the metrics path may come from the unit read in the first round
        files.update({p: root.facts(p) for p in wanted_paths(facts) if p not in files})
        facts = replace(facts, files=dict(files))
    topology, filters = _currency(settings, root)
    facts = replace(facts, topology=topology, filters=filters)
    source = f"saved state {saved}" if saved else f"this host ({os.uname().nodename})"
    return DoctorReport(run_checks(facts), source, config.release)


#: What each node runs to tell its tool's release (``topograph-slurm, version 0.9.0``).
VERSION_SCRIPT = "topograph-slurm --version"


def node_versions(nodes: list[str], via: str, timeout: float = 60.0) -> dict[str, str]:
    """The tool's release on each node, through collect's transports (``srun`` one step per
    node, or ``clush``); a node that could not say gives its error instead."""
    from topograph_slurm.collect.plan import CollectPlan
    from topograph_slurm.collect.transport import TRANSPORTS, check_transport

    check_transport(via)
    plan = CollectPlan(nodes, via=via, timeout=timeout, srun_mode="per-node")
    runs = TRANSPORTS[via](plan, nodes, VERSION_SCRIPT, timeout, lambda _node: None)
    return {run.node: said_version(run.stdout, run.error or run.stderr) for run in runs}


def said_version(stdout: str, error: str) -> str:
    """The release a node's ``topograph-slurm --version`` printed, else ``unknown (<why>)``:
    a node that cannot answer differs from this host and is named with its reason."""
    words = stdout.strip().split()
    if len(words) >= 2 and words[-2] == "version":
        return words[-1]
    said = (error.strip().splitlines() or ["no answer"])[-1]
    return f"unknown ({said[:80]})"
