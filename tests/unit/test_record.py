"""`topograph-slurm record`: the job record written at start (the PrologSlurmctld hook), the
gate, the TaskProlog's exports, show and diff; a fake ``scontrol`` on PATH replays Slurm's job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support.scontrol import Answer, ReplayScontrol
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit

SIM = "nodes=16,gpus=8,rails=2,su=8,tiers=2"  # two leaves of 8 nodes under one spine
REPO = Path(__file__).resolve().parents[2]


def slurm_job(nodes: list[str], admin_comment: str = "") -> str:
    """`scontrol show job --json 7` as 24.11/26.05 print it (trimmed to the fields read)."""
    job = {
        "job_id": 7,
        "job_state": ["RUNNING"],
        "nodes": ",".join(nodes),
        "job_resources": {
            "nodes": {"allocation": [{"index": i, "name": n} for i, n in enumerate(nodes)]}
        },
        "gres_detail": ["gpu:8(IDX:0-7)"] * len(nodes),
        "admin_comment": admin_comment,
    }
    return json.dumps({"jobs": [job]})


def setup(
    tmp_path: Path, nodes: list[str], comment: str = "", extra: str = "", hold: int = 0
) -> Path:
    """A config naming the fake scontrol (its ``requeuehold`` exiting *hold*), the simulated
    fabric and the record directory."""
    answers = {
        "show job --json 7": Answer(slurm_job(nodes, comment)),
        "requeuehold 7": Answer(stderr="scontrol: error: Job is not running\n" * hold, code=hold),
    }
    scontrol = ReplayScontrol(tmp_path / "bin", answers)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"scontrol: {scontrol.path}\nsim: {SIM!r}\nrecord_dir: {tmp_path / 'records'}\n{extra}"
    )
    return config


def run(config: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["--config", str(config), *args], env=env)


CROSSING = ["gpu0001", "gpu0009"]  # TP 16 over two nodes of different leaves
INSIDE = ["gpu0001", "gpu0002"]
TP16 = "topograph:tp=16,gpn=8,group=2,src=user"


def test_start_writes_the_record_in_rank_order_with_crossings(tmp_path: Path) -> None:
    config = setup(tmp_path, CROSSING, TP16)
    result = run(config, "record", "start", env={"SLURM_JOB_ID": "7"})
    assert result.exit_code == 0, result.output
    path = tmp_path / "records" / "job-7.json"
    data = json.loads(path.read_text())
    assert (data["format"], data["version"], data["part"]) == ("topograph-slurm/record", 1, "job")
    assert [n["node"] for n in data["nodes"]] == CROSSING
    assert data["nodes"][0]["leaf"] != data["nodes"][1]["leaf"]
    assert data["nodes"][0]["spine"] == data["nodes"][1]["spine"] != ""
    assert data["layout"] == {"tp": 16, "pp": 1, "gpus_per_node": 8, "source": "admin-comment"}
    assert data["tp_home"] == "leaf" and data["crossings"]["tp"]["leaf"] == 1
    assert data["tp_inside"] is False and data["refused"] == ""
    assert len(data["fingerprint"]) == 64
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_byte_that_is_not_utf8_in_the_job_is_read_as_replacement(tmp_path: Path) -> None:
    """Slurm copies a comment's bytes into its JSON unchanged; the PrologSlurmctld read the
    job (exit 70 once), its record names the nodes as with a clean answer."""
    config = setup(tmp_path, CROSSING, TP16)
    answer = slurm_job(CROSSING, TP16).replace(
        '"job_id": 7', '"comment": "caf\\u00e9", "job_id": 7'
    )
    raw = answer.encode().replace(b"\\u00e9", b"\xe9")  # latin-1 é: not UTF-8
    ReplayScontrol(tmp_path / "bin", {"show job --json 7": Answer(raw)})
    result = run(config, "record", "start", "7")
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "records" / "job-7.json").read_text())
    assert [n["node"] for n in data["nodes"]] == CROSSING and data["layout"]["tp"] == 16


def test_a_job_answer_of_another_shape_is_an_incomplete_record_not_a_crash(
    tmp_path: Path,
) -> None:
    """``{"jobs": [1, 2]}`` (exit 70 once): the hook still exits 0, the record says why."""
    config = setup(tmp_path, CROSSING, TP16)
    ReplayScontrol(tmp_path / "bin", {"show job --json 7": Answer('{"jobs": [1, 2]}')})
    result = run(config, "record", "start", "7")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "records" / "job-7.json").read_text()
    assert "unexpected `scontrol show job --json` output" in text


def test_without_a_tp_record_tp_is_one_nodes_gpus(tmp_path: Path) -> None:
    config = setup(tmp_path, CROSSING)
    assert run(config, "record", "start", "7").exit_code == 0
    data = json.loads((tmp_path / "records" / "job-7.json").read_text())
    assert data["layout"]["tp"] == 8 and data["layout"]["source"] == "gpus-per-node"
    assert data["tp_home"] == "node" and data["tp_inside"] is True


def test_the_gate_holds_a_crossing_job_exits_0_and_still_writes_the_record(
    tmp_path: Path,
) -> None:
    """Held by requeuehold, the refused job needs no failing hook: exit 0 (a failing one
    would have Slurm requeue it once more, docs/record.md)."""
    config = setup(tmp_path, CROSSING, TP16, "record_refuse: [tp-crossing]\n")
    result = run(config, "record", "start", "7")
    assert result.exit_code == 0, result.output
    assert result.stderr.strip().splitlines() == [
        "topograph-slurm: job 7 refused: tp-crossing: 1 of 1 TP groups of 16 GPUs cross out of leaf"
    ]
    data = json.loads((tmp_path / "records" / "job-7.json").read_text())
    assert data["refused"].startswith("tp-crossing: 1 of 1")
    calls = (tmp_path / "bin" / "scontrol.calls").read_text().splitlines()
    assert calls[0] == "show job --json 7" and calls[-1] == "requeuehold 7"


def test_a_refused_job_slurm_will_not_hold_is_still_refused(tmp_path: Path) -> None:
    """The hold failed: exit 11, so that Slurm's own requeue keeps the job from running."""
    config = setup(tmp_path, CROSSING, TP16, "record_refuse: [tp-crossing]\n", hold=1)
    result = run(config, "record", "start", "7")
    assert result.exit_code == Exit.JOB_REFUSED, result.output
    warning, refused = result.stderr.strip().splitlines()
    assert "not held (Slurm requeues it and retries)" in warning
    assert "Job is not running" in warning and refused.startswith("topograph-slurm: job 7 refused")


def test_the_gate_lets_a_job_inside_its_home_run(tmp_path: Path) -> None:
    config = setup(tmp_path, INSIDE, TP16)
    assert run(config, "record", "start", "7", "--refuse", "tp-crossing").exit_code == 0


@pytest.mark.parametrize("bad", ["record_refuse: [everything]\n", "record_dir: [\n", "nope: 1\n"])
def test_a_broken_config_lets_the_job_run_and_writes_nothing(tmp_path: Path, bad: str) -> None:
    """The hook's own trouble: one line, exit 0 (a non-zero exit would hold every job)."""
    config = setup(tmp_path, INSIDE, TP16, bad)
    for command in ("start", "task"):
        result = run(config, "record", command, "7")
        assert result.exit_code == 0, result.output
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "config" in result.stderr
    assert result.stdout == "export TOPOGRAPH_RECORD_MISSING=1\nexport TOPOGRAPH_BINDING=unknown\n"
    assert not (tmp_path / "records").exists()


def test_an_unknown_refusal_flag_is_a_usage_error(tmp_path: Path) -> None:
    result = run(setup(tmp_path, INSIDE), "record", "start", "7", "--refuse", "all")
    assert result.exit_code == Exit.USAGE, result.output
    assert not (tmp_path / "records").exists()


@pytest.mark.parametrize("job_id", ["7x", "../7", "٧", "", "-1"])
def test_a_job_id_that_is_no_number_is_one_line_exit_0_and_writes_nothing(
    tmp_path: Path, job_id: str
) -> None:
    config = setup(tmp_path, INSIDE)
    result = run(config, "record", "start", env={"SLURM_JOB_ID": job_id})  # as Slurm gives it
    assert result.exit_code == 0, result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "records").exists()


def test_a_fabric_that_cannot_be_read_still_writes_a_record_and_exits_0(tmp_path: Path) -> None:
    """The failure policy: the hook's own trouble never fails the job."""
    config = setup(tmp_path, INSIDE, TP16)
    config.write_text(config.read_text().replace(f"sim: {SIM!r}", "ibnetdiscover: /nonexistent"))
    result = run(config, "record", "start", "7", "--refuse", "tp-crossing")
    assert result.exit_code == 0, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "/nonexistent" in result.stderr
    data = json.loads((tmp_path / "records" / "job-7.json").read_text())
    assert [f["kind"] for f in data["findings"]] == ["record-incomplete"]
    assert data["nodes"] == [] and data["refused"] == ""


def test_a_record_dir_that_cannot_be_written_lets_the_job_run(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    config = setup(tmp_path, INSIDE, TP16)
    result = run(config, "record", "start", "7", "--record-dir", str(blocker / "r"))
    assert result.exit_code == 0, result.output
    assert "record not written" in result.stderr


def test_a_requeued_job_rewrites_its_record_with_the_restart_count(tmp_path: Path) -> None:
    config = setup(tmp_path, INSIDE, TP16)
    run(config, "record", "start", "7")
    env = {"SLURM_JOB_RESTART_COUNT": "2"}
    assert run(config, "record", "start", "7", env=env).exit_code == 0
    data = json.loads((tmp_path / "records" / "job-7.json").read_text())
    assert data["restart_count"] == 2


def test_the_topology_files_sha256_is_recorded(tmp_path: Path) -> None:
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s1 Nodes=gpu[0001-0016]\n")
    config = setup(tmp_path, INSIDE, TP16)
    config.write_text(config.read_text().replace(f"sim: {SIM!r}\n", ""))
    assert run(config, "record", "start", "7", "--topology", str(conf)).exit_code == 0
    data = json.loads((tmp_path / "records" / "job-7.json").read_text())
    import hashlib

    assert data["topology_sha256"] == hashlib.sha256(conf.read_bytes()).hexdigest()
    assert data["nodes"][0]["leaf"] == "s1"


def test_with_a_fabric_source_the_topology_file_is_only_hashed(tmp_path: Path) -> None:
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s1 Nodes=gpu[0001-0016]\n")
    config = setup(tmp_path, INSIDE, TP16)
    assert run(config, "record", "start", "7", "--topology", str(conf)).exit_code == 0
    data = json.loads((tmp_path / "records" / "job-7.json").read_text())
    assert data["nodes"][0]["leaf"] == "leaf-su001-r0" and len(data["topology_sha256"]) == 64
    assert data["findings"] == []


# ------------------------------------------------------------------------------- record task


def started(tmp_path: Path, nodes: list[str], comment: str = TP16) -> Path:
    config = setup(tmp_path, nodes, comment)
    assert run(config, "record", "start", "7").exit_code in (0, Exit.JOB_REFUSED)
    (tmp_path / "records" / "job-7.d" / "tasks").mkdir(parents=True)  # as the Prolog makes it
    return config


def exports(stdout: str) -> dict[str, str]:
    found = {}
    for line in stdout.splitlines():
        assert line.startswith("export TOPOGRAPH_"), line
        name, _, value = line.removeprefix("export ").partition("=")
        found[name] = value
    return found


def test_task_exports_the_records_values(tmp_path: Path) -> None:
    config = started(tmp_path, ["gpu0001", "gpu0009", "gpu0002", "gpu0010"])
    result = run(config, "record", "task", env={"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "gpu0001"})
    assert result.exit_code == 0 and result.stderr == "", result.output
    found = exports(result.stdout)
    assert found["TOPOGRAPH_BINDING"] == "no-gpu"  # no GPU given to this task
    assert found["TOPOGRAPH_RECORD"] == str(tmp_path / "records" / "job-7.json")
    assert found["TOPOGRAPH_TP_CROSSINGS"] == "2"
    assert found["TOPOGRAPH_CROSSINGS"] == "tp=2,dp=0"
    assert found["TOPOGRAPH_LEAVES"] == "2" and found["TOPOGRAPH_DEGRADED"] == "0"
    assert found["TOPOGRAPH_LAYOUT"] == "tp=16,pp=1,gpn=8,src=admin-comment"
    assert len(found["TOPOGRAPH_FINGERPRINT"]) == 64


def test_task_exports_its_own_nodes_leaf_and_block(tmp_path: Path) -> None:
    """Each task gets its own node's units; a unit the record does not know (the simulated
    fabric has no blocks) is left out, as is every unit of a node the record does not hold."""
    config = started(tmp_path, CROSSING)
    record = json.loads((tmp_path / "records" / "job-7.json").read_text())
    units = {n["node"]: n for n in record["nodes"]}
    for node in CROSSING:
        found = exports(run(config, "record", "task", "--job", "7", "--node", node).stdout)
        assert found["TOPOGRAPH_LEAF"] == units[node]["leaf"] != ""
        assert units[node]["block"] == "" and units[node]["domain"] == ""
        assert not {"TOPOGRAPH_BLOCK", "TOPOGRAPH_DOMAIN"} & found.keys()
    other = exports(run(config, "record", "task", "--job", "7", "--node", "gpu0003").stdout)
    assert not {"TOPOGRAPH_LEAF", "TOPOGRAPH_BLOCK", "TOPOGRAPH_DOMAIN"} & other.keys()
    assert other["TOPOGRAPH_NODES"] == "2"


def test_task_exports_the_nvlink_domain_from_a_snapshot(tmp_path: Path) -> None:
    """Blocks read from nvidia-smi's cliques are NVLink domains: TOPOGRAPH_DOMAIN is the
    node's rack, found from SLURMD_NODENAME as the TaskProlog runs."""
    from tests.unit.test_generate_snapshot import make_snapshot

    snap = make_snapshot(tmp_path / "snap", ib=True, sick="")
    config = setup(tmp_path, ["gpu0001", "gpu0005"], TP16)
    config.write_text(config.read_text().replace(f"sim: {SIM!r}", f"snapshot: {snap}"))
    assert run(config, "record", "start", "--job", "7").exit_code == 0
    env = {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "gpu0005"}
    found = exports(run(config, "record", "task", env=env).stdout)
    assert found["TOPOGRAPH_DOMAIN"] == found["TOPOGRAPH_BLOCK"] == "nvl-gpu0005"
    assert found["TOPOGRAPH_LEAF"] != ""


def test_task_unit_exports_stay_one_printable_line() -> None:
    """A unit name is the fabric's (a switch's node description): it is exported as one line of
    printable ASCII, like every other value."""
    from topograph_slurm.render.environment import environment
    from topograph_slurm.render.record import node_units, render_exports

    rows = [("gpu[0001-0002]", "b1", "leaf 1\nexport LD_PRELOAD=x", "")]
    text = render_exports(environment(None), node_units(rows, "gpu0002"))
    assert text == "export TOPOGRAPH_BLOCK=b1\nexport TOPOGRAPH_LEAF=leaf 1?export LD_PRELOAD=x\n"


def test_task_exports_are_literal_as_slurm_reads_them(tmp_path: Path) -> None:
    """slurmstepd takes everything after `=` as the value, quotes included (seen on 24.11
    and 26.05): a record directory with a space is exported as it is, never shell-quoted."""
    config = setup(tmp_path, CROSSING, TP16, extra=f"record_dir: {tmp_path / 'job records'}\n")
    config.write_text(config.read_text().replace(f"record_dir: {tmp_path / 'records'}\n", ""))
    assert run(config, "record", "start", "7").exit_code == 0
    stdout = run(config, "record", "task", "7", "--this-node", "gpu0001").stdout
    assert f"export TOPOGRAPH_RECORD={tmp_path / 'job records' / 'job-7.json'}\n" in stdout
    assert "'" not in stdout


@pytest.mark.parametrize("job_id", ["8", "x"])
def test_task_without_a_record_says_missing_and_exits_0(tmp_path: Path, job_id: str) -> None:
    config = started(tmp_path, CROSSING)
    result = run(config, "record", "task", job_id, "--this-node", "gpu0001")
    assert result.exit_code == 0
    assert result.stdout.startswith("export TOPOGRAPH_RECORD_MISSING=1\n")
    binding = "no-gpu" if job_id == "8" else "unknown"  # no GPU given; no job to write under
    assert result.stdout.endswith(f"\nexport TOPOGRAPH_BINDING={binding}\n")
    assert len(result.stderr.strip().splitlines()) == 1


def test_task_with_a_corrupt_record_says_missing_and_exits_0(tmp_path: Path) -> None:
    config = started(tmp_path, CROSSING)
    (tmp_path / "records" / "job-7.exports").write_text('{"format": "topograph-slurm/record"')
    result = run(config, "record", "task", "7", "--this-node", "gpu0001")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "export TOPOGRAPH_RECORD_MISSING=1"


def test_task_is_quick_and_imports_no_fabric_code(tmp_path: Path) -> None:
    """It runs once per task: no placement or fabric reading, no numpy imported."""
    config = started(tmp_path, CROSSING)
    code = (
        "import sys, runpy; sys.argv = ['topograph-slurm', '--config', sys.argv[1], 'record', "
        "'task', '--job', '7']\n"
        "try:\n    runpy.run_module('topograph_slurm', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "heavy = [m for m in ('numpy', 'topograph_slurm.analysis.placement.explain', "
        "'topograph_slurm.app.placement', 'topograph_slurm.app.fabric') if m in sys.modules]\n"
        "print('HEAVY', heavy, file=sys.stderr)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    begin = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code, str(config)], capture_output=True, text=True, env=env
    )
    elapsed = time.monotonic() - begin
    assert "export TOPOGRAPH_RECORD=" in done.stdout, done.stderr
    assert "HEAVY []" in done.stderr, done.stderr
    assert elapsed < 3.0, elapsed


# -------------------------------------------------------------------------- show and diff


def test_show_prints_the_record_as_text_and_json(tmp_path: Path) -> None:
    config = started(tmp_path, CROSSING)
    text = run(config, "record", "show", "7")
    assert text.exit_code == 0, text.output
    assert "verdict: 1 of 1 TP groups of 16 GPUs cross out of leaf" in text.stdout
    assert "gpu0009" in text.stdout
    as_json = run(config, "record", "show", str(tmp_path / "records" / "job-7.json"), "--json")
    assert json.loads(as_json.stdout)["job_id"] == "7"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "no job record"),
        ("{not json", "not a job record"),
        ('{"format": "other"}', "not a topograph-slurm/record file"),
        ('{"format": "topograph-slurm/record", "version": 9, "part": "job"}', "version 9"),
        ('{"format": "topograph-slurm/record", "version": 1, "part": "task"}', "'task' record"),
        (
            '{"format": "topograph-slurm/record", "version": 1, "part": "job", "nodes": 3}',
            "malformed job record",
        ),
    ],
)
def test_an_unreadable_record_is_one_line_exit_3(
    tmp_path: Path, content: str | None, fragment: str
) -> None:
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    config = setup(tmp_path, INSIDE)
    for args in (["show", str(path)], ["diff", str(path), str(path)]):
        result = run(config, "record", *args)
        assert result.exit_code == Exit.INPUT, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0], lines


def record_of(tmp_path: Path, name: str, nodes: list[str], comment: str = TP16) -> str:
    sub = tmp_path / name
    sub.mkdir()
    config = started(sub, nodes, comment)
    assert config.exists()
    return str(sub / "records" / "job-7.json")


def test_diff_of_the_same_placement_is_exit_0(tmp_path: Path) -> None:
    a, b = record_of(tmp_path, "a", INSIDE), record_of(tmp_path, "b", INSIDE)
    result = run(setup(tmp_path, INSIDE), "record", "diff", a, b)
    assert result.exit_code == 0, result.output
    assert "the same placement" in result.stdout


def test_diff_names_other_leaves_and_more_crossings_exit_1(tmp_path: Path) -> None:
    a, b = record_of(tmp_path, "a", INSIDE), record_of(tmp_path, "b", CROSSING)
    result = run(setup(tmp_path, INSIDE), "record", "diff", a, b)
    assert result.exit_code == Exit.DIFFERS, result.output
    assert "* leaf count: 1 -> 2" in result.stdout
    assert "* tp crossings: node=1 -> node=1,leaf=1" in result.stdout
    assert "  fingerprint:" in result.stdout
    as_json = run(setup(tmp_path, INSIDE), "record", "diff", a, b, "--json")
    assert as_json.exit_code == Exit.DIFFERS, as_json.output
    data = json.loads(as_json.stdout)
    assert (data["format"], data["version"], data["matters"]) == (
        "topograph-slurm-record-diff",
        1,
        True,
    )
    assert {"what": "leaf count", "a": "1", "b": "2", "matters": True} in data["changes"]


def test_diff_of_other_nodes_in_the_same_places_is_exit_0(tmp_path: Path) -> None:
    a = record_of(tmp_path, "a", INSIDE)
    b = record_of(tmp_path, "b", ["gpu0003", "gpu0004"])
    result = run(setup(tmp_path, INSIDE), "record", "diff", a, b)
    assert result.exit_code == 0, result.output
    assert "  nodes: gpu0001,gpu0002 -> gpu0003,gpu0004" in result.stdout


# ------------------------------------------------------------------------ bench and the diff


def bench_record(tmp_path: Path, leaf: float) -> Path:
    levels = [
        {"level": "node", "median": 300.0},
        {"level": "leaf", "median": leaf},
        {"level": "rack", "median": 1.0},  # no level of this fabric
    ]
    path = tmp_path / "bench.json"
    data = {"format": "topograph-slurm-bench", "version": 1, "findings": [], "levels": levels}
    path.write_text(json.dumps(data))
    return path


def test_the_bench_medians_of_the_jobs_levels_are_recorded(tmp_path: Path) -> None:
    config = setup(tmp_path, INSIDE, TP16, f"record_bench: {bench_record(tmp_path, 90.0)}\n")
    assert run(config, "record", "start", "7").exit_code == 0
    data = json.loads((tmp_path / "records" / "job-7.json").read_text())
    assert data["bench"] == {"node": 300.0, "leaf": 90.0}


def test_a_damaged_bench_record_is_a_finding_not_a_failure(tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    bench.write_text("{")
    config = setup(tmp_path, INSIDE, TP16)
    result = run(config, "record", "start", "7", "--bench", str(bench))
    assert result.exit_code == 0 and "no bench medians" in result.stderr, result.output
    data = json.loads((tmp_path / "records" / "job-7.json").read_text())
    assert data["bench"] == {} and data["nodes"]
    assert [f["kind"] for f in data["findings"]] == ["record-incomplete"]


def test_diff_names_a_degraded_link_and_bench_drift() -> None:
    from topograph_slurm.analysis.record.diff import diff_records
    from topograph_slurm.model.record import JobRecord
    from topograph_slurm.model.result import Finding

    a = JobRecord(job_id="1", bench={"leaf": 100.0, "node": 300.0})
    slow = Finding("degraded-link", "gpu0001", "a rail runs at 4xHDR, the norm is 4xNDR")
    missing = Finding("record-incomplete", "job 2", "no topology sha256")
    b = JobRecord(job_id="2", bench={"leaf": 80.0, "node": 290.0}, findings=[slow, missing])
    found = diff_records(a, b, "1", "2")
    assert found.matters
    assert [(c.what, c.a, c.b) for c in found.changes] == [
        ("problems on its paths", "none", "degraded-link@gpu0001"),
        ("bench median leaf", "100", "80"),
    ]


def test_a_degraded_rail_on_the_jobs_path_is_recorded_exported_and_diffed(tmp_path: Path) -> None:
    healthy = record_of(tmp_path, "a", INSIDE)
    sub = tmp_path / "b"
    sub.mkdir()
    config = setup(sub, INSIDE, TP16)
    config.write_text(config.read_text().replace(SIM, SIM + ",degraded=1"))  # gpu0001's rail
    assert run(config, "record", "start", "7").exit_code == 0
    data = json.loads((sub / "records" / "job-7.json").read_text())
    assert {(f["kind"], f["subject"]) for f in data["findings"]} == {("degraded-link", "gpu0001")}
    found = exports(run(config, "record", "task", "7").stdout)
    assert found["TOPOGRAPH_DEGRADED"] == str(len(data["findings"]))
    result = run(config, "record", "diff", healthy, str(sub / "records" / "job-7.json"))
    assert result.exit_code == Exit.DIFFERS
    assert "* problems on its paths: none -> degraded-link@gpu0001" in result.stdout


def test_the_old_job_and_node_flags_still_work_with_one_warning_line_each(tmp_path: Path) -> None:
    """A hook script of the last release (``--job``, ``--node``) still records; the new
    scripts pass neither (JOBID comes from $SLURM_JOB_ID), so no warning reaches Slurm's log."""
    config = setup(tmp_path, INSIDE, TP16)
    started = run(config, "record", "start", "--job", "7")
    assert started.exit_code == 0, started.output
    assert started.stderr.splitlines() == [
        "topograph-slurm: warning: --job is now a JOBID argument; the old spelling goes in the "
        "next release"
    ]
    assert (tmp_path / "records" / "job-7.json").exists()
    task = run(config, "record", "task", "7", "--node", "gpu0001")
    assert task.stdout.startswith("export TOPOGRAPH_RECORD=")
    assert task.stderr.splitlines()[0] == (
        "topograph-slurm: warning: --node is now --this-node; the old spelling goes in the next "
        "release"
    )


def test_jobid_defaults_to_slurm_job_id_as_the_hooks_get_it(tmp_path: Path) -> None:
    config = setup(tmp_path, INSIDE, TP16)
    result = run(config, "record", "start", env={"SLURM_JOB_ID": "7"})
    assert result.exit_code == 0 and result.stderr == "", result.output
    task = run(config, "record", "task", "--this-node", "gpu0001", env={"SLURM_JOB_ID": "7"})
    assert exports(task.stdout)["TOPOGRAPH_NODES"] == "2"
