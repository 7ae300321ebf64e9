"""Each of ``doctor``'s checks: facts in, one verdict (ok / warn / fail and the line that
fixes it) out. No I/O: :func:`wanted_paths` names the files the checks read, the app reads
them (live, or from a saved state directory) and hands them in as :class:`DoctorFacts`.

Fail is what breaks jobs or leaves Slurm running something else than this tool made (a
hook that cannot run requeues every job or drains every node; a plugin that is not loaded
means the file is never read); warn is what works but is weaker than it should be (rank
order, no hourly run, a check that could not be made).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from topograph_slurm.errors import ConfigError
from topograph_slurm.model.doctor import (
    FAIL,
    HOOKS,
    OK,
    WARN,
    Check,
    Currency,
    DoctorFacts,
    FileFacts,
)
from topograph_slurm.model.slurm_config import conf_value, reconfigure_risk
from topograph_slurm.model.slurm_version import SlurmVersion

#: Where ``units`` output is installed (systemd's admin directory, then the packaged ones)
#: and the cron.d file its example names.
TIMERS = (
    "/etc/systemd/system/topograph-slurm.timer",
    "/usr/lib/systemd/system/topograph-slurm.timer",
    "/lib/systemd/system/topograph-slurm.timer",
)
SERVICES = tuple(path.replace(".timer", ".service") for path in TIMERS)
CRON = "/etc/cron.d/topograph-slurm"
_METRICS_FLAG = re.compile(r"--metrics[= ](\S+)")
_SUCCESS = re.compile(r"^topograph_slurm_success\s+([01])\s*$", re.MULTILINE)
_RECORD = re.compile(r"\btopograph-slurm\b.*\brecord\s+(start|task|node-start|node-end)\b")


def _release(facts: DoctorFacts) -> SlurmVersion | None:
    try:
        return SlurmVersion.parse(facts.config.release or "")
    except ConfigError:
        return None


def _in_conf_dir(facts: DoctorFacts, name: str) -> str:
    return f"{facts.config.conf_dir.rstrip('/')}/{name}"


def slurm_conf(facts: DoctorFacts) -> str:
    """The slurm.conf slurmctld read (``SLURM_CONF``)."""
    return facts.config.get("SLURM_CONF") or _in_conf_dir(facts, "slurm.conf")


def plugstack_path(facts: DoctorFacts) -> str:
    """PlugStackConfig, else plugstack.conf beside slurm.conf (Slurm's default)."""
    return facts.config.get("PlugStackConfig") or _in_conf_dir(facts, "plugstack.conf")


def hook_programs(facts: DoctorFacts) -> dict[str, list[str]]:
    """The programs of each record hook slurm.conf names."""
    return {key: facts.config.programs(key) for key in HOOKS}


def _scheduled(facts: DoctorFacts) -> list[FileFacts]:
    """The timer's service and the cron file that exist: where the hourly run is written."""
    return [facts.file(path) for path in (*SERVICES, CRON) if facts.file(path).exists]


def metrics_path(facts: DoctorFacts) -> str | None:
    """The run's metrics file: the config's, else the one the service or cron line names."""
    if facts.wanted.metrics:
        return facts.wanted.metrics
    for found in _scheduled(facts):
        match = _METRICS_FLAG.search(found.text)
        if match:
            return match.group(1)
    return None


def wanted_paths(facts: DoctorFacts) -> list[str]:
    """Every file the checks read, so the app can read exactly these (from / or a saved
    state directory); read in two rounds, since the metrics path may come from the unit."""
    paths = [
        slurm_conf(facts),
        _in_conf_dir(facts, "topology.conf"),
        _in_conf_dir(facts, "topology.yaml"),
        _in_conf_dir(facts, "job_submit.lua"),
        _in_conf_dir(facts, "cli_filter.lua"),
        plugstack_path(facts),
        *TIMERS,
        *SERVICES,
        CRON,
        *(p for programs in hook_programs(facts).values() for p in programs),
    ]
    wanted = facts.wanted
    paths += [p for p in (wanted.output, wanted.spank_path, wanted.record_dir) if p]
    metrics = metrics_path(facts)
    if metrics:
        paths.append(metrics)
    return sorted(set(paths))


# --------------------------------------------------------------------------- the topology


def topology_plugin(facts: DoctorFacts) -> Check:
    """The plugin and file slurmctld reads are the ones generate writes."""
    name, wanted, config = "topology-plugin", facts.wanted, facts.config
    yaml_path = _in_conf_dir(facts, "topology.yaml")
    if wanted.format == "yaml":
        release = _release(facts)
        if release is not None and not release.has_topology_yaml:
            return Check(
                name,
                FAIL,
                f"generate writes topology.yaml, which Slurm {release} does not read (25.05+)",
                "format: tree or block in the config, or upgrade Slurm",
            )
        return _location(facts, name, yaml_path, "topology.yaml")
    expected = _plugin_for(wanted.format)
    plugin = config.get("TopologyPlugin") or "(unset)"
    if facts.file(yaml_path).exists:
        return Check(
            name,
            FAIL,
            f"{yaml_path} exists: slurmctld reads it instead of TopologyPlugin and topology.conf",
            f"remove {yaml_path}, or format: yaml in the config",
        )
    if plugin != expected:
        return Check(
            name,
            FAIL,
            f"TopologyPlugin is {plugin}, generate writes a {wanted.format} topology",
            f"TopologyPlugin={expected} in slurm.conf, then scontrol reconfigure",
        )
    return _location(facts, name, _in_conf_dir(facts, "topology.conf"), expected)


def _location(facts: DoctorFacts, name: str, read: str, what: str) -> Check:
    """generate's -o is the file slurmctld reads, and it is there."""
    output = facts.wanted.output
    if output is None:
        return Check(
            name, WARN, f"{what}, but the config names no output", f"output: {read} in the config"
        )
    if output != read:
        return Check(
            name,
            FAIL,
            f"generate writes {output}, slurmctld reads {read}",
            f"output: {read} in the config (or -o {read})",
        )
    if not facts.file(read).exists:
        return Check(
            name,
            FAIL,
            f"{read} does not exist",
            f"topograph-slurm generate -o {read} --reconfigure",
        )
    return Check(name, OK, f"{what}, {read}")


#: The plugin that places no topology, by release: 24.11.5 knows only topology/default (a
#: slurm.conf naming topology/flat stops slurmctld: "Failed to initialize topology plugin");
#: 26.05.5 calls it topology/flat and reads topology/default as that. topology.yaml's
#: ``flat`` type came with 25.05, so the line is drawn there.
FLAT_SINCE = (25, 5)


def _plugin_for(fmt: str) -> str:
    """The TopologyPlugin a format needs (topology.yaml replaces it: the release's default)."""
    return "topology/default" if fmt == "yaml" else f"topology/{fmt}"


def topology_plugin_name(facts: DoctorFacts) -> Check:
    """slurm.conf on disk names a plugin this release has, and the one slurmctld runs."""
    name, path = "topology-plugin-name", slurm_conf(facts)
    found = facts.file(path)
    if not found.exists:
        return Check(name, WARN, f"{path} not found: what slurmctld reads next is not known", "")
    written = conf_value(found.text, "TopologyPlugin") or "topology/default"
    release = _release(facts)
    has_flat = release is None or (release.major, release.minor) >= FLAT_SINCE
    if written == "topology/flat" and not has_flat:
        return Check(
            name,
            FAIL,
            f"{path} names topology/flat, which Slurm {release} does not have: slurmctld "
            "stops at its next start or reconfigure",
            f"TopologyPlugin={_plugin_for(facts.wanted.format)} in {path}",
        )
    running = facts.config.get("TopologyPlugin") or "topology/default"
    same = {written, running} <= {"topology/default", "topology/flat"} or written == running
    if not same:
        return Check(
            name,
            WARN,
            f"{path} names {written}, slurmctld runs {running}: a change not yet applied",
            "scontrol reconfigure",
        )
    return Check(name, OK, f"{path} names {written}, as slurmctld runs it")


def topology_param(facts: DoctorFacts) -> Check:
    """TopologyParam orders ranks by switch or block, as the TP groups are placed."""
    name, params = "topology-param", facts.config.flags("TopologyParam")
    release = _release(facts)
    if facts.wanted.format == "tree":
        wanted = "SwitchAsNodeRank"
    elif release is None or (release.major, release.minor) >= (25, 11):
        wanted = "BlockAsNodeRank"
    else:
        return Check(name, OK, f"Slurm {release} orders block ranks by slurm.conf's node order")
    if wanted in params:
        return Check(name, OK, f"TopologyParam has {wanted}")
    line = ",".join(sorted({*params, wanted}))
    return Check(
        name,
        WARN,
        f"TopologyParam lacks {wanted}: ranks follow the node table, not the "
        f"{'switches' if wanted.startswith('Switch') else 'blocks'} (order/explain show it)",
        f"TopologyParam={line} in slurm.conf",
    )


def _currency(name: str, what: str, fix: str, state: Currency) -> Check:
    """ok when current, fail naming the stale files, warn when it could not be checked."""
    if state.stale is None:
        return Check(name, WARN, f"{what} not checked: {state.why}", "")
    if state.stale:
        return Check(name, FAIL, f"out of date: {', '.join(state.stale)}", fix)
    return Check(name, OK, f"{what} is what generate writes now")


def topology_current(facts: DoctorFacts) -> Check:
    """The topology file is what ``generate --check`` would find current."""
    output = facts.wanted.output or "PATH"
    fix = f"topograph-slurm generate -o {output} --reconfigure"
    return _currency("topology-current", "the topology file", fix, facts.topology)


# --------------------------------------------------------------------------- the filters


def filters(facts: DoctorFacts) -> Check:
    """JobSubmitPlugins/CliFilterPlugins load the Lua files generate --filter-dir writes."""
    name, config = "filters", facts.config
    if facts.wanted.filter_dir is None:
        return Check(name, OK, "not used (no filter_dir in the config)")
    if not {"lua", "job_submit/lua"} & config.flags("JobSubmitPlugins"):
        return Check(
            name, FAIL, "JobSubmitPlugins has no lua", "JobSubmitPlugins=lua in slurm.conf"
        )
    if not {"lua", "cli_filter/lua"} & config.flags("CliFilterPlugins"):
        return Check(
            name,
            FAIL,
            "CliFilterPlugins has no cli_filter/lua",
            "CliFilterPlugins=cli_filter/lua in slurm.conf",
        )
    for lua in ("job_submit.lua", "cli_filter.lua"):
        path = _in_conf_dir(facts, lua)
        if not facts.file(path).exists:
            return Check(
                name,
                FAIL,
                f"{path} does not exist",
                f"topograph-slurm generate --filter-dir {facts.config.conf_dir}",
            )
    fix = f"topograph-slurm generate --filter-dir {facts.wanted.filter_dir}"
    return _currency(name, "job_submit.lua and cli_filter.lua", fix, facts.filters)


def spank(facts: DoctorFacts) -> Check:
    """plugstack.conf loads the --tp-size plugin, and the plugin is installed."""
    name, so = "spank", facts.wanted.spank_path
    if so is None or facts.wanted.filter_dir is None:
        return Check(name, OK, "not used (no filter in the config)")
    stack = facts.file(plugstack_path(facts))
    lines = [line.split("#", 1)[0].split() for line in stack.text.splitlines()]
    if not any(len(words) >= 2 and words[1] == so for words in lines):
        return Check(
            name,
            FAIL,
            f"{stack.path} has no line loading {so}",
            f"optional {so} in {stack.path}",
        )
    if not facts.file(so).exists:
        return Check(
            name, FAIL, f"{so} does not exist", f"topograph-slurm spank build --install {so}"
        )
    return Check(name, OK, f"{stack.path} loads {so}")


# --------------------------------------------------------------------------- the record hooks


def _wired(facts: DoctorFacts) -> dict[str, FileFacts]:
    """Each record hook's program that runs ``topograph-slurm record …``, by hook key."""
    found = {}
    for key, programs in hook_programs(facts).items():
        for program in programs:
            if _RECORD.search(facts.file(program).text):
                found[key] = facts.file(program)
    return found


def hooks(facts: DoctorFacts) -> list[Check]:
    """Every hook a job record needs points at an executable script with a ``#!`` line that
    runs its ``record`` subcommand; no hook wired at all is one ok line."""
    wired = _wired(facts)
    programs = hook_programs(facts)
    if not wired:
        return [Check("hooks", OK, "not used (no hook runs topograph-slurm record)")]
    return [_hook(key, sub, programs[key], wired.get(key), facts) for key, sub in HOOKS.items()]


def _hook(
    key: str, sub: str, programs: list[str], wired: FileFacts | None, facts: DoctorFacts
) -> Check:
    name = f"hook-{key}"
    script = wired or (facts.file(programs[0]) if programs else None)
    if script is None:
        return Check(
            name,
            FAIL,
            f"{key} is not set: the record lacks its `record {sub}` part",
            f"{key}=<script running topograph-slurm record {sub}> in slurm.conf "
            "(topograph-slurm hooks install)",
        )
    problem = _script_problem(script)
    if problem:
        return Check(name, FAIL, f"{key}={script.path}: {problem}", _script_fix(script, sub))
    if wired is None:
        return Check(
            name,
            WARN,
            f"{key}={script.path} runs no `topograph-slurm record {sub}`",
            f"add `topograph-slurm record {sub}` to {script.path} (topograph-slurm hooks install)",
        )
    return Check(name, OK, f"{key}={script.path} runs record {sub}")


def _script_problem(script: FileFacts) -> str | None:
    if not script.exists:
        return "does not exist (Slurm requeues or drains on every job)"
    if script.is_dir:
        return "is a directory"
    if not script.executable:
        return f"is not executable (mode {script.mode & 0o7777:04o})"
    if not script.text.startswith("#!"):
        return "has no #! line (exit 127 when Slurm runs it)"
    return None


def _script_fix(script: FileFacts, sub: str) -> str:
    if script.exists and not script.executable:
        return f"chmod 0755 {shlex.quote(script.path)}"
    return f"topograph-slurm hooks install (writes #!/bin/sh scripts running record {sub})"


def prolog_flags(facts: DoctorFacts) -> Check:
    """A Prolog that runs ``record node-start`` needs PrologFlags=Alloc (else it runs at a
    node's first step, not at the allocation)."""
    name, flags = "prolog-flags", facts.config.flags("PrologFlags")
    if "Prolog" not in _wired(facts):
        return Check(name, OK, "not needed (no Prolog runs record node-start)")
    if "Alloc" in flags:
        return Check(name, OK, "PrologFlags has Alloc")
    line = ",".join(sorted({*flags, "Alloc"}))
    return Check(
        name,
        FAIL,
        "PrologFlags lacks Alloc: record node-start runs at the first step, not at the start",
        f"PrologFlags={line} in slurm.conf",
    )


def record_dir(facts: DoctorFacts) -> Check:
    """The record root is owned by root or SlurmUser and not writable by everyone: a job's
    user must not plant files there for the root hooks to read."""
    name, path = "record-dir", facts.wanted.record_dir
    if not _wired(facts):
        return Check(name, OK, "not used (no hook runs topograph-slurm record)")
    found = facts.file(path)
    user, uid = facts.config.slurm_user
    owners = {0, uid if uid is not None else 0}
    if not found.exists:
        return Check(
            name,
            WARN,
            f"{path} does not exist yet",
            f"install -d -o {user} -m 0755 {shlex.quote(path)}",
        )
    if not found.is_dir:
        return Check(name, FAIL, f"{path} is not a directory", f"rm {shlex.quote(path)}")
    if found.uid not in owners:
        return Check(
            name,
            FAIL,
            f"{path} is owned by uid {found.uid}, not root or SlurmUser {user}",
            f"chown {user} {shlex.quote(path)}",
        )
    if found.mode & 0o022:  # sticky or not: others could still create files there
        return Check(
            name,
            FAIL,  # the hooks refuse such a root too (docs/record.md, the trust model)
            f"{path} is writable by {'everyone' if found.mode & 0o002 else 'its group'} "
            f"(mode {found.mode & 0o7777:04o})",
            f"chmod 0755 {shlex.quote(path)}",
        )
    return Check(name, OK, f"{path} owned by uid {found.uid}, mode {found.mode & 0o7777:04o}")


# --------------------------------------------------------------------------- the hourly run


def schedule(facts: DoctorFacts) -> Check:
    """A timer or cron entry runs generate unattended."""
    name = "schedule"
    timers = [path for path in TIMERS if facts.file(path).exists]
    cron = facts.file(CRON)
    if timers:
        return Check(name, OK, f"{timers[0]}")
    if cron.exists:
        return Check(name, OK, CRON)
    return Check(
        name,
        WARN,
        "no topograph-slurm.timer and no /etc/cron.d/topograph-slurm: nothing keeps the "
        "topology true",
        "topograph-slurm units /etc/systemd/system && systemctl enable --now topograph-slurm.timer",
    )


def last_run(facts: DoctorFacts) -> Check:
    """The last unattended run's metrics say success."""
    name, path = "last-run", metrics_path(facts)
    if path is None:
        return Check(name, WARN, "no metrics file known", "metrics: FILE.prom in the config")
    found = facts.file(path)
    match = _SUCCESS.search(found.text) if found.exists else None
    if match is None:
        return Check(name, WARN, f"{path} holds no run yet", "")
    if match.group(1) != "1":
        return Check(
            name,
            FAIL,
            f"{path}: the last run failed (topograph_slurm_success 0)",
            "run the timer's command by hand to see its error line",
        )
    return Check(name, OK, f"{path}: topograph_slurm_success 1")


def reconfigure_prolog(facts: DoctorFacts) -> Check:
    """Slurm up to 26.05 with DeferBatch and an unattended --reconfigure: a reconfigure during
    a job's Prolog loses its batch launch; generate waits (reconfigure_wait), by hand not."""
    name = "reconfigure-prolog"
    risk = reconfigure_risk(facts.config)
    hourly = facts.wanted.reconfigure or any(
        "--reconfigure" in found.text for found in _scheduled(facts)
    )
    if risk is None or not hourly:
        return Check(name, OK, "no risk" if risk is None else f"{risk}, but no --reconfigure runs")
    return Check(
        name,
        WARN,
        f"{risk} and an unattended --reconfigure: a reconfigure while a job's Prolog runs loses "
        "its batch launch; generate waits for prologs (reconfigure_wait), a reconfigure by hand "
        "does not",
        "drop DeferBatch from PrologFlags, or upgrade to Slurm 26.11",
    )


def node_versions(facts: DoctorFacts) -> Check:
    """The tool on the compute nodes (the hooks run it there) is the controller's release."""
    name, found = "node-versions", facts.node_versions
    if found is None:
        return Check(name, OK, "not asked (--nodes HOSTLIST)")
    other = {node: v for node, v in found.items() if v != facts.version}
    if not other:
        return Check(name, OK, f"{len(found)} node(s) run topograph-slurm {facts.version}")
    shown = ", ".join(f"{node}: {v}" for node, v in sorted(other.items())[:5])
    return Check(
        name,
        FAIL,
        f"{len(other)} node(s) differ from {facts.version} here: {shown}",
        f"install topograph-slurm {facts.version} on those nodes",
    )


#: The checks in report order.
CHECKS: tuple[Callable[[DoctorFacts], Check | list[Check]], ...] = (
    topology_plugin,
    topology_plugin_name,
    topology_param,
    topology_current,
    filters,
    spank,
    hooks,
    prolog_flags,
    record_dir,
    schedule,
    last_run,
    reconfigure_prolog,
    node_versions,
)


def run_checks(facts: DoctorFacts) -> list[Check]:
    """Every check's verdict, in report order."""
    found: list[Check] = []
    for check in CHECKS:
        result = check(facts)
        found += result if isinstance(result, list) else [result]
    return found
