"""The ``auto`` defaults: Slurm's node list and release from the running Slurm, or a fallback
and a note saying so.

An admin expects ``generate`` on the controller to know the cluster without being told: the
nodes slurmctld defines (so storage and login hosts on the fabric stay out) and the release
(which decides the block rules). Both come from ``scontrol``, at the edge; when it cannot
answer the run goes on as it did before these defaults (every host, release 24.11), and an
info finding in the report says which was used and why, so a changed file never goes
unexplained. An explicit hostlist, ``scontrol`` (which must answer) or ``all`` asks nothing.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from topograph_slurm.config import ALL, AUTO, Settings
from topograph_slurm.errors import CollectError, InputError
from topograph_slurm.model import names
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.result import (
    EVERY_HOST,
    LEVEL_INFO,
    LEVEL_PROBLEM,
    SLURM_NODES,
    Finding,
    MadeWith,
)
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.slurm.release import installed_version
from topograph_slurm.slurm.scontrol import Scontrol

#: The release assumed when Slurm cannot be asked (the oldest the test cluster runs).
FALLBACK_VERSION = "24.11"


def node_list(
    settings: Settings, notes: list[Finding], made: MadeWith | None = None
) -> frozenset[str] | None:
    """The Slurm node names hosts must be among, or None for every host; *made* gets where
    they came from."""
    made = made or MadeWith()
    value = settings.slurm_nodes
    made.nodes, made.nodes_from = SLURM_NODES, f"--slurm-nodes {value or ALL}"
    if value in (None, ALL):
        made.nodes = EVERY_HOST
        return None
    if value != AUTO and value != "scontrol":
        made.nodes_from = "--slurm-nodes HOSTLIST"
        return frozenset(names.expand(value))
    from topograph_slurm.slurm.nodes import scontrol_nodes  # the JSON decoder only when asked

    try:
        found = scontrol_nodes(Scontrol.from_settings(settings))
    except (CollectError, InputError) as err:
        if value == "scontrol":
            raise
        notes.append(
            _fallback(FindingKind.SLURM_NODES, settings.scontrol, err, "every host is a node")
        )
        made.nodes, made.nodes_from = EVERY_HOST, "--slurm-nodes auto: Slurm did not answer"
        return None
    made.nodes_from = f"{len(found)} from `scontrol show nodes --json`"
    if value == AUTO:
        message = f"{len(found)} nodes from `scontrol show nodes --json`; other hosts are excluded"
        notes.append(Finding(FindingKind.SLURM_NODES, "scontrol", message, LEVEL_INFO))
    return found


def resolve_version(
    settings: Settings, notes: list[Finding], made: MadeWith | None = None
) -> Settings:
    """*settings* with ``slurm_version: auto`` replaced by the installed release; *made* gets
    where the release came from."""
    made = made or MadeWith()
    made.release, made.release_from = settings.slurm_version, "--slurm-version"
    if settings.slurm_version != AUTO:
        return settings
    commands = [settings.scontrol, _sibling(settings.scontrol, "sinfo")]
    saved = Scontrol.from_settings(settings).saved
    try:
        version, command = installed_version(commands, min(settings.scontrol_timeout, 30.0), saved)
    except CollectError as err:
        notes.append(
            _fallback(
                FindingKind.SLURM_VERSION, settings.scontrol, err, f"{FALLBACK_VERSION} assumed"
            )
        )
        made.release = FALLBACK_VERSION
        made.release_from = "--slurm-version auto: Slurm did not answer, assumed"
        return replace(settings, slurm_version=FALLBACK_VERSION)
    made.release, made.release_from = version, f"`{command} --version`"
    notes.append(
        Finding(
            FindingKind.SLURM_VERSION,
            command,
            f"Slurm {version} (`{command} --version`)",
            LEVEL_INFO,
        )
    )
    return replace(settings, slurm_version=version)


def release(settings: Settings) -> SlurmVersion:
    """The target release of *settings*, ``auto`` resolved (its note dropped: for commands
    whose output has no report to say where the release came from)."""
    return SlurmVersion.parse(resolve_version(settings, []).slurm_version)


def _sibling(scontrol: str, command: str) -> str:
    """``sinfo`` beside a configured scontrol path (``/opt/slurm/bin/sinfo``), else on PATH."""
    return str(Path(scontrol).with_name(command)) if "/" in scontrol else command


def _fallback(kind: FindingKind, scontrol: str, err: Exception, outcome: str) -> Finding:
    """Not installed is information (a host without Slurm); installed but not answering is a
    problem (slurmctld down: the node list may be wrong until the next run)."""
    installed = shutil.which(scontrol) is not None
    return Finding(
        kind,
        scontrol,
        f"Slurm did not answer ({err}): {outcome}",
        LEVEL_PROBLEM if installed else LEVEL_INFO,
    )
