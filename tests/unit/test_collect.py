"""Fan-out collection against fake ``srun``/``ssh`` executables: per-node output, failures,
timeouts, the manifest, snapshot atomicity, progress, and reading snapshots back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.sim_gpu import (
    fake_nvidia_smi_script,
    gb200_tray_topology,
    nvl_node_gpus,
    render_query_csv,
    render_query_q,
    render_topo_matrix,
)
from topograph_slurm import collect as c
from topograph_slurm import output
from topograph_slurm.analysis.nvlink.clique import domain_results
from topograph_slurm.cli.collect import collect as collect_command
from topograph_slurm.cli.progress import ProgressBar, progress_wanted
from topograph_slurm.collect import plan as cp
from topograph_slurm.collect import protocol, transport
from topograph_slurm.errors import CollectError, Exit, InputError, OutputError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import DomainKind
from topograph_slurm.sources import snapshot as sn
from topograph_slurm.sources.ufm import CREDENTIAL_ENV_VARS

RACK = "5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10"
IB_DUMP = 'Switch 36 "S-0002c903007e5f60" # "MF0;leaf1:MQM9700/U1" lid 1\n'

# Behaves like srun for our argv (long --opt=value forms): --nodelist may name several nodes
# (one task each, output streamed as it comes, prefixed "<task>: " with --label); any "down*"
# node fails the allocation at once, "hang*" nodes never answer. Start/end lines feed the
# concurrency check.
FAKE_SRUN = f"""#!{sys.executable}
import os, subprocess, sys, threading, time
from ClusterShell.NodeSet import NodeSet

args = sys.argv[1:]
opts = {{}}
while args and args[0].startswith("--"):
    key, _, value = args.pop(0)[2:].partition("=")
    opts[key] = value
nodes = list(NodeSet(opts["nodelist"]))
log = os.path.join(os.environ["FAKE_ROOT"], "srun.log")
with open(log, "a") as handle:
    handle.write(f"start {{opts['nodelist']}} {{time.time()}}\\n")
if any(n.startswith("down") for n in nodes):
    sys.stderr.write("srun: error: Unable to allocate resources: Invalid node name specified\\n")
    sys.exit(1)
lock = threading.Lock()

def task(rank, node):
    if node.startswith("hang"):
        time.sleep(60)
    env = dict(os.environ, SLURMD_NODENAME=node)
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE)
    for line in proc.stdout:
        with lock:
            prefix = f"{{rank}}: ".encode() if "label" in opts else b""
            sys.stdout.buffer.write(prefix + line)
            sys.stdout.buffer.flush()
    return proc.wait()

threads = [threading.Thread(target=task, args=(i, n)) for i, n in enumerate(nodes)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with open(log, "a") as handle:
    handle.write(f"end {{opts['nodelist']}} {{time.time()}}\\n")
"""

# Stands in for ssh as ClusterShell calls it: -o options, the node, one command string.
FAKE_SSH = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in -*) shift;; *) break;; esac
done
node=$1; shift
case "$node" in down*) echo "ssh: connect to host $node port 22: No route to host" >&2
  exit 255;; esac
SLURMD_NODENAME=$node exec sh -c "$*"
"""

DISPATCH = '#!/bin/sh\nexec "$FAKE_ROOT/nodes/$SLURMD_NODENAME/nvidia-smi" "$@"\n'


def _exe(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def tray(index: int, state: str = "Completed") -> dict[str, str]:
    gpus = nvl_node_gpus(RACK, 1, state=state, serial_base=1_000_000 + 10 * index)
    return {
        "csv": render_query_csv(gpus),
        "query": render_query_q(gpus),
        "topo": render_topo_matrix(gb200_tray_topology()),
    }


class FakeCluster:
    """Fake srun/ssh/ibnetdiscover on PATH and one fake nvidia-smi per node."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.outputs: dict[str, dict[str, str]] = {}
        _exe(root / "bin" / "srun", FAKE_SRUN)
        _exe(root / "bin" / "ssh", FAKE_SSH)
        _exe(root / "bin" / "nvidia-smi", DISPATCH)
        _exe(root / "bin" / "ibnetdiscover", f"#!/bin/sh\nprintf '%s' '{IB_DUMP}'\n")

    def healthy(self, node: str, index: int, state: str = "Completed") -> None:
        self.outputs[node] = tray(index, state)
        _exe(
            self.root / "nodes" / node / "nvidia-smi", fake_nvidia_smi_script(**tray(index, state))
        )

    def script(self, node: str, body: str) -> None:
        _exe(self.root / "nodes" / node / "nvidia-smi", "#!/bin/sh\n" + body)

    def srun_calls(self) -> list[str]:
        """The --nodelist of every srun started, in order."""
        lines = (self.root / "srun.log").read_text().splitlines()
        return [line.split()[1] for line in lines if line.startswith("start")]

    def concurrency(self) -> int:
        """Most sruns running at once, from the fake srun's start/end log."""
        events = []
        for line in (self.root / "srun.log").read_text().splitlines():
            kind, _, stamp = line.split()
            events.append((float(stamp), 1 if kind == "start" else -1))
        running = peak = 0
        for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
            running += delta
            peak = max(peak, running)
        return peak


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    cluster = FakeCluster(tmp_path / "fake")
    monkeypatch.setenv("PATH", f"{cluster.root / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_ROOT", str(cluster.root))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return cluster


def plan(nodes: list[str], **kw: object) -> cp.CollectPlan:
    defaults: dict[str, object] = {"timeout": 2.0, "grace": 0.5, "fanout": 16}
    defaults.update(kw)
    return cp.CollectPlan(nodes=nodes, **defaults)  # type: ignore[arg-type]


def manifest(path: Path) -> dict[str, object]:
    return json.loads((path / sn.MANIFEST).read_text())


def by_key(path: Path) -> dict[tuple[str, str], dict[str, object]]:
    return {(r["node"], r["command"]): r for r in manifest(path)["results"]}  # type: ignore[attr-defined,index]


# --------------------------------------------------------------------------- collect


def test_every_node_gets_its_own_output_files_byte_exact(fake: FakeCluster, tmp_path: Path) -> None:
    for i in range(1, 4):
        fake.healthy(f"gb{i}", i)
    snap = tmp_path / "snap"
    outcome = c.collect(plan(["gb1", "gb2", "gb3"]), snap)
    assert outcome.ok_nodes == ["gb1", "gb2", "gb3"] and outcome.failed_nodes == []
    for node, texts in fake.outputs.items():
        # the fake prints through a heredoc, which ends every output with a newline
        for key, text in (("query", texts["csv"]), ("q", texts["query"]), ("topo", texts["topo"])):
            printed = text if text.endswith("\n") else text + "\n"
            assert (snap / "nodes" / node / f"nvidia-smi-{key}.txt").read_text() == printed


def _loaded(snap: Path) -> tuple[object, ...]:
    found = sn.load_snapshot(snap)
    return (found.findings, [(n.name, n.gpus, n.fabric_source, n.topology, n.products)
                             for n in found.nodes.values()])  # fmt: skip


def test_collect_keeps_the_parsed_facts_and_readers_use_them_while_files_are_unchanged(
    fake: FakeCluster, tmp_path: Path
) -> None:
    """collect writes facts.json beside the snapshot: what reading gives is the same with it
    as without it; it is what a reader takes for a node whose files are as recorded (a
    product name planted in it shows), and not once a file changed (the text read again)."""
    fake.healthy("gb1", 1)
    fake.healthy("gb2", 2)
    fake.script("gb3", "exit 9\n")
    snap = tmp_path / "snap"
    c.collect(plan(["gb1", "gb2", "gb3"]), snap)
    facts = json.loads((snap / sn.FACTS_FILE).read_text())
    assert (facts["format"], facts["version"]) == (sn.FACTS_FORMAT, sn.FACTS_VERSION)
    assert sorted(facts["nodes"]) == ["gb1", "gb2"]  # gb3 failed: read (and reported) anew
    cached = _loaded(snap)
    (snap / sn.FACTS_FILE).rename(tmp_path / "facts.json")
    assert _loaded(snap) == cached
    facts["nodes"]["gb1"]["products"] = {"0": "PLANTED"}
    (snap / sn.FACTS_FILE).write_text(json.dumps(facts))
    assert sn.load_snapshot(snap).nodes["gb1"].products == {0: "PLANTED"}
    q = snap / "nodes" / "gb1" / f"{sn.KEY_Q}.txt"
    q.write_text(q.read_text() + "\n")
    assert sn.load_snapshot(snap).nodes["gb1"].products != {0: "PLANTED"}
    assert _loaded(snap) == cached


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cluster_uuid", "x\nBlockName=evil Nodes=gb1"),
        ("state", "Completed\nSwitchName=evil"),
        ("clique_id", -1),
        ("health_flags", ["ok", "a\rb"]),
    ],
)
def test_facts_that_no_text_reader_would_hand_on_are_not_used(
    fake: FakeCluster, tmp_path: Path, field: str, value: object
) -> None:
    """facts.json is no more trusted than the texts: a ClusterUUID that is no UUID (it
    becomes part of block names) or a value with a line break is not taken; the node is read
    from its texts."""
    fake.healthy("gb1", 1)
    snap = tmp_path / "snap"
    c.collect(plan(["gb1"]), snap)
    cached = _loaded(snap)
    facts = json.loads((snap / sn.FACTS_FILE).read_text())
    facts["nodes"]["gb1"]["gpus"][0][field] = value
    (snap / sn.FACTS_FILE).write_text(json.dumps(facts))
    assert _loaded(snap) == cached


@pytest.mark.parametrize(
    "facts",
    [b"not json", b'{"format": "topograph-slurm-snapshot-facts", "version": 99, "topologies": [],'
     b' "nodes": {}}', b'{"nodes": [1, 2]}', b"[" * 100_000],
)  # fmt: skip
def test_a_facts_file_of_another_version_or_shape_is_not_used(
    fake: FakeCluster, tmp_path: Path, facts: bytes
) -> None:
    fake.healthy("gb1", 1)
    snap = tmp_path / "snap"
    c.collect(plan(["gb1"]), snap)
    cached = _loaded(snap)
    (snap / sn.FACTS_FILE).write_bytes(facts)
    assert _loaded(snap) == cached


def test_manifest_records_node_command_exit_duration_timestamp(
    fake: FakeCluster, tmp_path: Path
) -> None:
    fake.healthy("gb1", 1)
    fake.script(
        "gb2",
        "echo 'NVIDIA-SMI has failed because it couldn'\"'\"'t communicate "
        "with the NVIDIA driver' >&2\nexit 9\n",
    )
    snap = tmp_path / "snap"
    c.collect(plan(["gb1", "gb2"]), snap)
    data = manifest(snap)
    assert data["format"] == sn.SNAPSHOT_FORMAT and data["version"] == sn.SNAPSHOT_VERSION
    assert data["via"] == "srun" and data["nodes"] == ["gb1", "gb2"]
    assert set(data["commands"]) == set(cp.DEFAULT_COMMANDS)  # type: ignore[arg-type]
    entries = by_key(snap)
    assert len(entries) == 6
    ok = entries[("gb1", "nvidia-smi-query")]
    assert ok["exit_code"] == 0 and ok["error"] == "" and not ok["timed_out"]
    assert ok["file"] == "nodes/gb1/nvidia-smi-query.txt"
    assert ok["argv"][0] == "nvidia-smi"  # type: ignore[index]
    assert isinstance(ok["duration"], float) and 0 <= ok["duration"] < 30
    assert str(ok["timestamp"]).endswith("Z")
    bad = entries[("gb2", "nvidia-smi-q")]
    assert bad["exit_code"] == 9 and bad["file"] is None
    assert "exit code 9" in str(bad["error"])
    assert "communicate with the NVIDIA driver" in str(bad["stderr_tail"])
    assert not (snap / "nodes" / "gb2").exists()


def test_failing_timing_out_and_unreachable_nodes_are_recorded_not_fatal(
    fake: FakeCluster, tmp_path: Path
) -> None:
    fake.healthy("gb1", 1)
    fake.script("slow1", "sleep 60\n")
    snap = tmp_path / "snap"
    start = time.monotonic()
    nodes = ["gb1", "slow1", "down1", "hang1"]
    outcome = c.collect(plan(nodes, grace=2.0), snap)
    elapsed = time.monotonic() - start
    assert elapsed < 15, elapsed  # timeouts are per node and in parallel, never serial
    assert outcome.ok_nodes == ["gb1"]
    assert outcome.failed_nodes == ["down1", "hang1", "slow1"]
    entries = by_key(snap)
    # A command hanging on the node: killed there by timeout(1), exit 124.
    slow = entries[("slow1", "nvidia-smi-query")]
    assert slow["timed_out"] and slow["exit_code"] == 124
    # srun could not even start: its own exit code and stderr.
    down = entries[("down1", "nvidia-smi-q")]
    assert down["exit_code"] == 1 and not down["timed_out"]
    assert "Unable to allocate resources" in str(down["stderr_tail"])
    # No answer at all: the transport is stopped locally and the node marked timed out.
    hang = entries[("hang1", "nvidia-smi-topo")]
    assert hang["timed_out"] and hang["exit_code"] is None
    assert "no answer within the timeout" in str(hang["error"])


def test_fanout_limits_concurrency_and_runs_in_parallel(fake: FakeCluster, tmp_path: Path) -> None:
    nodes = [f"n{i}" for i in range(1, 7)]
    for node in nodes:
        fake.script(node, "sleep 0.3\necho 0, 1, x, 1, Completed, Success\n")
    c.collect(
        plan(nodes, fanout=2, srun_mode="per-node", commands={"q": ("nvidia-smi",)}),
        tmp_path / "a",
    )
    assert fake.concurrency() <= 2
    (fake.root / "srun.log").unlink()
    c.collect(
        plan(nodes, fanout=6, srun_mode="per-node", commands={"q": ("nvidia-smi",)}),
        tmp_path / "b",
    )
    assert fake.concurrency() > 2


def test_batch_mode_collects_all_nodes_in_one_srun(fake: FakeCluster, tmp_path: Path) -> None:
    for i in range(1, 5):
        fake.healthy(f"gb{i}", i)
    outcome = c.collect(plan(["gb1", "gb2", "gb3", "gb4"]), tmp_path / "s")
    assert outcome.ok_nodes == ["gb1", "gb2", "gb3", "gb4"]
    assert fake.srun_calls() == ["gb[1-4]"]
    for node, texts in fake.outputs.items():
        assert (tmp_path / "s/nodes" / node / "nvidia-smi-topo.txt").read_text() == texts["topo"]


def test_batch_failure_falls_back_to_one_srun_per_node(fake: FakeCluster, tmp_path: Path) -> None:
    fake.healthy("gb1", 1)
    fake.healthy("gb2", 2)
    outcome = c.collect(plan(["gb1", "gb2", "down1"]), tmp_path / "s")
    assert outcome.ok_nodes == ["gb1", "gb2"] and outcome.failed_nodes == ["down1"]
    calls = fake.srun_calls()
    assert calls[0] == "down1,gb[1-2]" and sorted(calls[1:]) == ["down1", "gb1", "gb2"]


def test_batch_with_a_hung_node_keeps_the_others_and_does_not_retry(
    fake: FakeCluster, tmp_path: Path
) -> None:
    fake.healthy("gb1", 1)
    fake.healthy("gb2", 2)
    outcome = c.collect(plan(["gb1", "gb2", "hang1"]), tmp_path / "s")
    assert outcome.ok_nodes == ["gb1", "gb2"] and outcome.failed_nodes == ["hang1"]
    assert len(fake.srun_calls()) == 1
    hang = by_key(tmp_path / "s")[("hang1", "nvidia-smi-q")]
    assert hang["timed_out"] and hang["exit_code"] is None


def test_split_labelled_output_by_node_header() -> None:
    text = (
        " 0: @@topograph-ab12 node gb7\n 1: @@topograph-ab12 node gb3\n"
        " 0: payload-a\n 1: payload-b\nsrun: warning on stdout\n 2: no header\n"
    )
    assert protocol.split_labelled(text) == {
        "gb7": "@@topograph-ab12 node gb7\npayload-a\n",
        "gb3": "@@topograph-ab12 node gb3\npayload-b\n",
    }


def test_ibnetdiscover_on_one_node(fake: FakeCluster, tmp_path: Path) -> None:
    fake.healthy("gb1", 1)
    snap = tmp_path / "snap"
    outcome = c.collect(plan(["gb1"], ibnetdiscover_on="gb1"), snap)
    assert outcome.fabric is not None and outcome.fabric.ok
    assert (snap / "fabric" / "ibnetdiscover.txt").read_text() == IB_DUMP
    fabric = manifest(snap)["fabric"]
    assert fabric["node"] == "gb1" and fabric["command"] == "ibnetdiscover"  # type: ignore[index]
    assert sn.load_snapshot(snap).ibnetdiscover == IB_DUMP


def test_clush_transport_over_fake_ssh(fake: FakeCluster, tmp_path: Path) -> None:
    fake.healthy("gb1", 1)
    fake.healthy("gb2", 2)
    snap = tmp_path / "snap"
    outcome = c.collect(plan(["gb1", "gb2", "down1"], via="clush"), snap)
    assert outcome.ok_nodes == ["gb1", "gb2"] and outcome.failed_nodes == ["down1"]
    assert (snap / "nodes/gb2/nvidia-smi-topo.txt").read_text() == fake.outputs["gb2"]["topo"]
    down = by_key(snap)[("down1", "nvidia-smi-query")]
    assert down["exit_code"] == 255 and "No route to host" in str(down["stderr_tail"])


def test_when_no_node_answers_the_error_passes_on_sshs_own_reason(
    fake: FakeCluster, tmp_path: Path
) -> None:
    """Every node unreachable over clush: the one error line ends with what ssh said, not
    only its exit code."""
    with pytest.raises(CollectError, match=r"transport exited 255 .*: ssh: .*No route to host"):
        c.collect(plan(["down1"], via="clush"), tmp_path / "snap")


@pytest.mark.parametrize(
    ("via", "mode"), [("srun", "batch"), ("srun", "per-node"), ("clush", "batch")]
)
def test_no_ufm_credential_reaches_a_node(
    fake: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, via: str, mode: str
) -> None:
    """srun exports its whole environment to every task; ssh children inherit ours. The node
    script prints what arrived: no UFM variable, and ours are back after the fan-out."""
    secrets = {name: f"secret-{name.lower()}" for name in CREDENTIAL_ENV_VARS}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    for node in ("gb1", "gb2"):
        fake.script(node, "env\n")
    snap = tmp_path / "snap"
    outcome = c.collect(plan(["gb1", "gb2"], via=via, srun_mode=mode), snap)
    assert outcome.failed_nodes == []
    printed = [path.read_text() for path in sorted((snap / "nodes").rglob("*.txt"))]
    assert len(printed) == 6 and all("FAKE_ROOT=" in text for text in printed)
    for text in printed:
        assert "UFM_" not in text and "secret-" not in text
    assert {name: os.environ[name] for name in secrets} == secrets


def test_missing_transport_binary_is_a_collect_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CollectError, match="srun not found"):
        c.collect(plan(["gb1"]), tmp_path / "snap")


# --------------------------------------------------------------------------- atomicity


def _siblings(snap: Path) -> list[str]:
    return sorted(p.name for p in snap.parent.iterdir() if p.name.startswith(f".{snap.name}."))


def test_new_snapshot_replaces_old_without_leftovers(fake: FakeCluster, tmp_path: Path) -> None:
    fake.healthy("gb1", 1)
    fake.healthy("gb2", 2)
    snap = tmp_path / "snap"
    c.collect(plan(["gb1", "gb2"]), snap)
    c.collect(plan(["gb1"]), snap)
    assert manifest(snap)["nodes"] == ["gb1"]
    assert not (snap / "nodes" / "gb2").exists()  # a new snapshot, not a merge
    assert _siblings(snap) == []


def test_old_snapshot_kept_when_no_node_answers(fake: FakeCluster, tmp_path: Path) -> None:
    fake.healthy("gb1", 1)
    snap = tmp_path / "snap"
    c.collect(plan(["gb1"]), snap)
    before = (snap / sn.MANIFEST).read_bytes()
    with pytest.raises(CollectError, match=r"previous snapshot .* is kept") as err:
        c.collect(plan(["down1", "down2"]), snap)
    assert err.value.exit_code == Exit.COLLECT
    assert (snap / sn.MANIFEST).read_bytes() == before
    assert _siblings(snap) == []


def test_a_directory_that_is_not_a_snapshot_is_never_replaced(
    fake: FakeCluster, tmp_path: Path
) -> None:
    fake.healthy("gb1", 1)
    precious = tmp_path / "etc"
    precious.mkdir()
    (precious / "slurm.conf").write_text("ClusterName=x\n")
    with pytest.raises(OutputError, match="not a topograph-slurm snapshot"):
        c.collect(plan(["gb1"]), precious)
    assert (precious / "slurm.conf").read_text() == "ClusterName=x\n"
    assert _siblings(precious) == []


@pytest.mark.parametrize("fail_at", [1, 2])
def test_write_failure_keeps_old_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    snap = tmp_path / "snap"
    c.write_snapshot(snap, {"format": sn.SNAPSHOT_FORMAT, "old": True}, {"nodes/a/x.txt": "1"})

    real_rename = os.rename
    calls: list[object] = []

    def broken(src: object, dst: object) -> None:
        calls.append(src)  # the old snapshot may move aside; the new one never lands
        if len(calls) == fail_at:
            raise OSError(28, "No space left on device")
        real_rename(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(output.os, "rename", broken)
    with pytest.raises(OutputError, match="No space left"):
        c.write_snapshot(snap, {"format": sn.SNAPSHOT_FORMAT}, {"nodes/a/x.txt": "2"})
    monkeypatch.undo()
    assert json.loads((snap / sn.MANIFEST).read_text())["old"] is True
    assert (snap / "nodes/a/x.txt").read_text() == "1"
    assert _siblings(snap) == []


# --------------------------------------------------------------------------- progress


def test_progress_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert not progress_wanted()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert progress_wanted()
    assert not progress_wanted(quiet=True)


def test_no_progress_output_when_not_a_tty(
    fake: FakeCluster, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fake.healthy("gb1", 1)
    c.collect(plan(["gb1"]), tmp_path / "snap")  # no progress callback: nothing printed
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_progress_bar_counts_every_node(fake: FakeCluster, tmp_path: Path) -> None:
    fake.healthy("gb1", 1)
    bar = ProgressBar(2, enabled=True)
    seen: list[str] = []
    original = bar.advance
    bar.advance = lambda node: (seen.append(node), original(node))[1]  # type: ignore[method-assign]
    with bar:
        c._run_all(plan(["gb1", "down1"]), ["gb1", "down1"], cp.DEFAULT_COMMANDS, 2.0, bar.advance)
    assert sorted(seen) == ["down1", "gb1"]


# --------------------------------------------------------------------------- framing


def test_framing_survives_markers_crlf_and_binary(tmp_path: Path) -> None:
    marker = "@@topograph-test"
    weird = tmp_path / "weird"
    weird.write_bytes(b"line1\r\n@@topograph-test end x\n\x00\xff no newline")
    commands = {"a": ("cat", str(weird)), "b": ("sh", "-c", "echo err >&2; exit 3")}
    script = protocol.node_script(commands, 10, marker)
    out = subprocess.run(["sh", "-c", script], capture_output=True, check=True).stdout
    framed = protocol.parse_framed(out.decode(), marker)
    assert framed["a"].exit_code == 0
    assert framed["a"].stdout == weird.read_bytes().decode("utf-8", errors="replace")
    assert framed["b"].exit_code == 3 and framed["b"].stderr == "err\n"


def test_truncated_frames_are_dropped() -> None:
    text = "@@m begin a 0 1 2\naGk=\n@@m stderr a\n"  # no end line
    assert protocol.parse_framed(text, "@@m") == {}


# --------------------------------------------------------------------------- load_snapshot


def test_load_snapshot_parses_nodes_and_reports_failures(fake: FakeCluster, tmp_path: Path) -> None:
    fake.healthy("gb1", 1)
    fake.healthy("gb2", 2, state="In Progress")
    fake.script("gb3", "echo 'No devices were found'; exit 6\n")
    snap = tmp_path / "snap"
    c.collect(plan(["gb1", "gb2", "gb3", "down1"]), snap)
    loaded = sn.load_snapshot(snap)
    assert list(loaded.nodes) == ["down1", "gb1", "gb2", "gb3"]
    gb1 = loaded.nodes["gb1"]
    assert gb1.fabric_source == sn.KEY_Q and gb1.gpus is not None and len(gb1.gpus) == 4
    assert gb1.topology is not None and gb1.topology.all_nvlink
    assert loaded.unread_nodes == ["down1", "gb3"]
    domains = domain_results(loaded.gpus)
    assert domains["gb1"].kind is DomainKind.MULTI_NODE
    assert domains["gb2"].kind is DomainKind.INVALID
    kinds = {(f.subject, f.kind) for f in loaded.findings}
    assert {("gb3", FindingKind.COLLECT_FAILED), ("down1", FindingKind.COLLECT_FAILED)} <= kinds
    # one line per node and failure, naming every command it hit
    down = [f for f in loaded.findings if f.subject == "down1"]
    assert len(down) == 1 and all(k in down[0].message for k in cp.DEFAULT_COMMANDS)


def test_load_snapshot_falls_back_to_csv_and_flags_garbage(tmp_path: Path) -> None:
    gpus = nvl_node_gpus(RACK, 1)
    entries = [
        {"node": "gb1", "command": sn.KEY_Q, "exit_code": 0, "file": "nodes/gb1/q.txt"},
        {"node": "gb1", "command": sn.KEY_QUERY, "exit_code": 0, "file": "nodes/gb1/csv.txt"},
        {"node": "gb2", "command": sn.KEY_QUERY, "exit_code": 0, "file": "nodes/gb2/csv.txt"},
        {"node": "gb2", "command": sn.KEY_TOPO, "exit_code": 0, "file": "nodes/gb2/topo.txt"},
    ]
    files = {
        "nodes/gb1/q.txt": "",
        "nodes/gb1/csv.txt": render_query_csv(gpus),
        "nodes/gb2/csv.txt": "this is, not, a, fabric\n",
        "nodes/gb2/topo.txt": "garbage\n",
    }
    data = {"format": sn.SNAPSHOT_FORMAT, "version": sn.SNAPSHOT_VERSION, "results": entries}
    c.write_snapshot(tmp_path / "s", data, files)
    loaded = sn.load_snapshot(tmp_path / "s")
    assert loaded.nodes["gb1"].fabric_source == sn.KEY_QUERY
    assert loaded.nodes["gb2"].gpus is None
    assert {f.kind for f in loaded.findings if f.subject == "gb2"} == {
        FindingKind.COLLECT_PARSE_ERROR
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "manifest.json missing"),
        ("{not json", "invalid JSON"),
        ('{"format": "other"}', "not a topograph-slurm-snapshot manifest"),
        ('{"format": "topograph-slurm-snapshot", "version": 99, "results": []}', "version 99"),
    ],
)
def test_load_snapshot_rejects_unusable_snapshots(
    tmp_path: Path, content: str | None, message: str
) -> None:
    if content is not None:
        (tmp_path / sn.MANIFEST).write_text(content)
    with pytest.raises(InputError, match=message):
        sn.load_snapshot(tmp_path)


def test_load_snapshot_refuses_paths_outside_the_snapshot(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("x")
    entry = {"node": "gb1", "command": sn.KEY_Q, "exit_code": 0, "file": "../secret"}
    snap = tmp_path / "s"
    snap.mkdir()
    data = {"format": sn.SNAPSHOT_FORMAT, "version": sn.SNAPSHOT_VERSION, "results": [entry]}
    (snap / sn.MANIFEST).write_text(json.dumps(data))
    with pytest.raises(InputError, match="outside the snapshot"):
        sn.load_snapshot(snap)


@pytest.mark.parametrize("bad", ["../x", "a/b", "-rf", "", "a b"])
def test_node_names_that_are_not_plain_are_rejected(bad: str) -> None:
    with pytest.raises(InputError):
        sn.check_node_name(bad)


def test_expand_nodes_orders_naturally() -> None:
    assert cp.expand_nodes("gb[9-11],gb2") == ["gb2", "gb9", "gb10", "gb11"]
    with pytest.raises(InputError):
        cp.expand_nodes("gb[1-")


# --------------------------------------------------------------------------- srun argv


def test_srun_argv_outside_and_inside_an_allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    p = plan(["gb1"], partition="gpu", srun_args=["--reservation=maint"])
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    argv = transport.srun_argv(p, "gb1", "true", 60)
    assert argv[:4] == ["srun", "--nodes=1", "--ntasks=1", "--nodelist=gb1"]
    assert "--time=3" in argv and "--immediate=60" in argv and "--overlap" not in argv
    assert "--partition=gpu" in argv and "--reservation=maint" in argv
    assert argv[-3:] == ["sh", "-c", "true"]
    batch = transport.srun_batch_argv(p, ["gb1", "gb2", "gb3"], "true", 60)
    assert batch[:7] == [
        "srun",
        "--nodes=3",
        "--ntasks=3",
        "--ntasks-per-node=1",
        "--nodelist=gb[1-3]",
        "--label",
        "--kill-on-bad-exit=0",
    ]
    assert "--immediate=30" in batch and "--partition=gpu" in batch
    assert "--immediate=60" not in batch
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    argv = transport.srun_argv(p, "gb1", "true", 60)
    assert "--overlap" in argv and not any(a.startswith(("--time", "--imm")) for a in argv)
    assert not any(
        a.startswith("--immediate") for a in transport.srun_batch_argv(p, ["a", "b"], "x", 9)
    )


# --------------------------------------------------------------------------- CLI


def test_cli_collect_writes_snapshot_and_summarises(fake: FakeCluster, tmp_path: Path) -> None:
    fake.healthy("gb1", 1)
    snap = tmp_path / "snap"
    args = ["--nodes", "gb1,down1", "--out-dir", str(snap), "--timeout", "2"]
    result = CliRunner().invoke(collect_command, args, obj={})
    assert result.exit_code == 0, result.output
    assert "1 nodes ok, 1 with failures" in result.output
    assert "down1 nvidia-smi-query" in result.output
    strict = CliRunner().invoke(collect_command, [*args, "--strict"], obj={})
    assert strict.exit_code == Exit.COLLECT


def test_cli_collect_all_failed_is_collect_error(fake: FakeCluster, tmp_path: Path) -> None:
    args = ["--nodes", "down[1-2]", "--out-dir", str(tmp_path / "s"), "--timeout", "2"]
    result = CliRunner().invoke(collect_command, args, obj={})
    assert isinstance(result.exception, CollectError)
    assert not (tmp_path / "s").exists()


def test_cli_collect_help_lists_commands_and_options() -> None:
    result = CliRunner().invoke(collect_command, ["--help"])
    assert result.exit_code == 0
    for word in (
        "--via",
        "--nodes",
        "--out-dir",
        "--ibnetdiscover-on",
        "--timeout",
        "--fanout",
        "--srun-partition",
        "nvidia-smi topo -m",
        "--query-gpu=",
    ):
        assert word in result.output


def test_extra_files_only_snapshot(tmp_path: Path) -> None:
    """A UFM-only collect: no nodes, the caller's files and manifest keys, written atomically."""
    files = {"ufm/systems.json": "[]", "ufm/url.txt": "https://ufm\n"}
    outcome = c.collect(
        cp.CollectPlan(nodes=[]),
        tmp_path / "s",
        extra_files=files,
        extra_manifest={"ufm": {"url": "https://ufm", "files": sorted(files)}},
    )
    assert outcome.results == [] and outcome.fabric is None
    assert (tmp_path / "s/ufm/systems.json").read_text() == "[]"
    data = manifest(tmp_path / "s")
    assert data["ufm"] == {"url": "https://ufm", "files": sorted(files)}
    assert sn.load_snapshot(tmp_path / "s").nodes == {}


def test_cli_collect_ufm_only_stores_responses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from topograph_slurm.app import collect as app_collect
    from topograph_slurm.sources.ufm import MIB, FetchOptions, UfmResponses

    seen: dict[str, object] = {}

    def fake_collect_ufm(
        url: str, creds: object, options: FetchOptions, **kw: object
    ) -> UfmResponses:
        seen.update(url=url, creds=creds, options=options, **kw)
        return UfmResponses("[1]", "[2]", "[3]", "[]", url="https://ufm.example")

    monkeypatch.setattr(app_collect.ufm_source, "collect_ufm", fake_collect_ufm)
    snap = tmp_path / "snap"
    args = ["--ufm", "ufm.example", "--ufm-timeout", "7", "--ufm-deadline", "9"]
    args += ["--ufm-max-response-mib", "3", "--out-dir", str(snap)]
    result = CliRunner().invoke(collect_command, args, obj={"config_file": "/dev/null"})
    assert result.exit_code == 0, result.output
    assert seen["url"] == "ufm.example"
    assert seen["options"] == FetchOptions(timeout=7.0, deadline=9.0, max_bytes=3 * MIB)
    assert sorted(p.name for p in (snap / "ufm").iterdir()) == [
        "links.json",
        "ports.json",
        "systems.json",
        "unhealthy_ports.json",
        "url.txt",
    ]
    assert manifest(snap)["ufm"]["url"] == "https://ufm.example"  # type: ignore[index]
    assert manifest(snap)["results"] == []
