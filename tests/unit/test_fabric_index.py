"""The kept fabric index (issue 35 item 1): ``generate -o`` keeps what the job-scoped commands
read of its fabric; ``explain``/``order``/``record start`` read it instead of analysing the whole
fabric again while it stands for the source, and analyse afresh, saying why, when it is stale,
damaged or of another version. Answers from the index are those of a fresh analysis."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner, Result

from tests.conftest import REAL_FIXTURES, real_dump_names
from topograph_slurm.analysis.placement.index import build_index, fabric_map_of, path_facts_of
from topograph_slurm.app import fabric as app_fabric
from topograph_slurm.app import view as app_view
from topograph_slurm.app.fabric import read_fabric, source_stamp, stale_because
from topograph_slurm.app.view import from_fabric
from topograph_slurm.cli.main import main
from topograph_slurm.config import Settings
from topograph_slurm.errors import Exit, InputError
from topograph_slurm.sources import fabric_index
from topograph_slurm.sources.sim import parse_sim_spec, write_ibnetdiscover

SIM = "nodes=32,gpus=8,rails=4,su=8,tiers=2,degraded=3"
JOB = ["--nodes", "gpu[0001-0004],gpu[0009-0012]", "--gpus-per-node", "8", "--tp", "16", "--json"]


def _round_trip(settings: Settings) -> None:
    """The view read back from an encoded index equals the fresh one, problems' order too."""
    fresh = from_fabric(read_fabric(settings, print), settings)
    assert fresh.facts is not None
    stamp = source_stamp(settings, "test")
    data = fabric_index.encode(build_index(fresh.fmap, fresh.facts, fresh.gpus_per_node, stamp))
    index = fabric_index.decode(data, "test")
    assert fabric_map_of(index) == fresh.fmap
    facts = path_facts_of(index)
    assert facts == fresh.facts
    assert list(facts.problems) == list(fresh.facts.problems)
    assert index.gpus_per_node == fresh.gpus_per_node


@pytest.mark.parametrize("name", real_dump_names())
def test_a_real_dump_reads_back_as_analysed(name: str) -> None:
    path = REAL_FIXTURES / "ibnetdiscover" / name
    settings = Settings(ibnetdiscover=str(path), slurm_nodes="all", slurm_version="24.11")
    fabric = read_fabric(settings, print)
    if not fabric.analysis.node_count:
        pytest.skip("no node on this fabric: nothing to place")
    _round_trip(settings)


def test_a_degraded_simulation_reads_back_as_analysed() -> None:
    _round_trip(Settings(sim=SIM, slurm_nodes="all", slurm_version="24.11"))


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    """A config with its state directory, and the dump generate and explain both read."""
    dump = tmp_path / "fabric.txt"
    with dump.open("w") as fp:
        write_ibnetdiscover(parse_sim_spec(SIM), fp)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"state_dir: {tmp_path / 'state'}\nslurm_version: '24.11'\nslurm_nodes: all\n"
    )
    return config, dump


def _run(config: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--config", str(config), *args])


def _generate(config: Path, dump: Path) -> None:
    out = config.parent / "topology.conf"
    result = _run(config, "generate", "--ibnetdiscover", str(dump), "-o", str(out))
    assert result.exit_code == Exit.OK, result.output


def _kept(config: Path) -> list[Path]:
    return sorted((config.parent / "state").glob(f"fabric-*{fabric_index.INDEX_SUFFIX}"))


def test_generate_keeps_the_index_and_explain_reads_it_without_the_analysis(
    setup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, dump = setup
    fresh = _run(config, "explain", "--ibnetdiscover", str(dump), *JOB)
    assert fresh.exit_code == Exit.OK and not _kept(config)
    _generate(config, dump)
    assert len(_kept(config)) == 1 and _kept(config)[0].stat().st_mode & 0o777 == 0o644

    def no_analysis(*_: object, **__: object) -> None:
        raise AssertionError("the fabric was analysed again")

    monkeypatch.setattr(app_view, "read_fabric", no_analysis)
    kept = _run(config, "explain", "--ibnetdiscover", str(dump), *JOB)
    assert kept.stderr == ""
    assert (kept.exit_code, kept.stdout) == (fresh.exit_code, fresh.stdout)
    other = str(dump.parent / "." / dump.name)  # another spelling of the same file
    typo = _run(config, "explain", "--ibnetdiscover", other, "--nodes", "gpu9999", "--tp", "8")
    assert typo.exit_code == Exit.INPUT and f"not on the fabric ({other})" in typo.stderr
    order = _run(config, "order", "--ibnetdiscover", str(dump), *JOB[:-1])
    assert order.exit_code == Exit.OK and order.stderr == "", order.output


def test_a_changed_dump_is_analysed_afresh_with_a_note(setup: tuple[Path, Path]) -> None:
    config, dump = setup
    _generate(config, dump)
    before = _run(config, "explain", "--ibnetdiscover", str(dump), *JOB)
    text = dump.read_text()
    dump.write_text(text.replace("4xNDR", "1xNDR", 1))  # one more degraded cable
    after = _run(config, "explain", "--ibnetdiscover", str(dump), *JOB)
    assert "is stale (the dump file changed since): analysing afresh" in after.stderr
    assert after.stdout != before.stdout  # the fresh analysis sees the new fault
    os.utime(dump, ns=(0, 0))  # even with an old mtime: the ctime moved
    assert "is stale" in _run(config, "explain", "--ibnetdiscover", str(dump), *JOB).stderr


def test_a_damaged_index_is_refused_with_a_note(setup: tuple[Path, Path]) -> None:
    config, dump = setup
    _generate(config, dump)
    good = _run(config, "explain", "--ibnetdiscover", str(dump), *JOB)
    (path,) = _kept(config)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    damaged = _run(config, "explain", "--ibnetdiscover", str(dump), *JOB)
    assert "checksum does not match (damaged)" in damaged.stderr
    assert (damaged.exit_code, damaged.stdout) == (good.exit_code, good.stdout)
    path.write_bytes(b"\x00" * 64)
    junk = _run(config, "explain", "--ibnetdiscover", str(dump), *JOB)
    assert "not a fabric index" in junk.stderr and junk.stdout == good.stdout


def test_other_settings_or_another_source_do_not_use_the_index(
    setup: tuple[Path, Path],
) -> None:
    config, dump = setup
    _generate(config, dump)
    other = _run(config, "explain", "--ibnetdiscover", str(dump), "--hcas", "mlx5_0", *JOB)
    assert "the analysis settings differ" in other.stderr
    copy = dump.parent / "copy.txt"
    shutil.copy(dump, copy)
    elsewhere = _run(config, "explain", "--ibnetdiscover", str(copy), *JOB)
    assert elsewhere.stderr == ""  # nothing kept for that file: no note


def test_a_live_sources_index_stands_for_two_hours() -> None:
    settings = Settings(ufm="https://ufm.example")
    now = source_stamp(settings, "ufm:https://ufm.example")
    hour = msgspec.structs.replace(now, analysed=now.analysed - 3600)
    assert stale_because(hour, now) is None
    old = msgspec.structs.replace(now, analysed=now.analysed - app_fabric.LIVE_INDEX_SECONDS - 1)
    assert "fetched 2.0 h ago" in (stale_because(old, now) or "")
    future = msgspec.structs.replace(now, analysed=now.analysed + 60)
    assert stale_because(future, now)  # a clock that went back: not trusted
    release = msgspec.structs.replace(now, release="0.0.1")
    assert "release 0.0.1 kept it" in (stale_because(release, now) or "")


def test_stdin_snapshots_and_the_live_command_are_not_kept() -> None:
    assert app_fabric.kept_source(Settings(ibnetdiscover="-")) is None
    assert app_fabric.kept_source(Settings(snapshot="/srv/snap")) is None
    assert app_fabric.kept_source(Settings()) is None  # the live ibnetdiscover: nobody reads it
    assert app_fabric.kept_source(Settings(sim="demo")) == f"sim:{app_fabric.DEMO_SIM}"


def test_another_version_is_one_input_error(tmp_path: Path) -> None:

    path = tmp_path / "x.index"
    path.write_bytes(msgspec.msgpack.encode([fabric_index.INDEX_FORMAT, 99, "", b""]))
    with pytest.raises(InputError, match="fabric index version 99; this release reads version 1"):
        fabric_index.load_index(path)
    assert fabric_index.load_index(tmp_path / "none.index") is None


@pytest.mark.parametrize("name", real_dump_names())
def test_path_facts_need_not_know_which_ends_are_switches(name: str) -> None:
    """UFM's translation leaves ``Links.b_switch`` unset: the rates are read alike."""
    from topograph_slurm.analysis.placement.explain import path_facts

    path = REAL_FIXTURES / "ibnetdiscover" / name
    analysis = read_fabric(Settings(ibnetdiscover=str(path), slurm_nodes="all"), print).analysis
    if not analysis.node_count:
        pytest.skip("no node on this fabric: nothing to place")
    told = path_facts(analysis)
    analysis.fabric.links.b_switch = None
    found = path_facts(analysis)
    assert found.rails == told.rails and found.problems == told.problems
    assert {leaf: sorted(rates) for leaf, rates in found.uplinks.items()} == {
        leaf: sorted(rates) for leaf, rates in told.uplinks.items()
    }
    assert told.uplinks or len(analysis.tree.leaves) < 2


def test_record_start_writes_the_same_record_from_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The PrologSlurmctld hook, once per job start: from the index kept by the timer's
    generate run, the record (its fingerprint too) is the fresh analysis' one."""
    from tests.support.scontrol import Answer, ReplayScontrol
    from tests.unit.test_record import CROSSING, TP16, slurm_job

    answers = {"show job --json 7": Answer(slurm_job(CROSSING, TP16))}
    scontrol = ReplayScontrol(tmp_path / "bin", answers)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"scontrol: {scontrol.path}\nsim: {SIM!r}\nrecord_dir: {tmp_path / 'records'}\n"
        f"state_dir: {tmp_path / 'state'}\nslurm_version: '24.11'\nslurm_nodes: all\n"
    )
    record = tmp_path / "records" / "job-7.json"

    def started() -> dict[str, object]:
        result = _run(config, "record", "start", "7")
        assert result.exit_code == 0 and result.stderr == "", result.output
        data = json.loads(record.read_text())
        return {key: value for key, value in data.items() if key != "created"}

    fresh = started()
    result = _run(config, "generate", "-o", str(tmp_path / "topology.conf"))
    assert result.exit_code == Exit.OK and _kept(config)
    monkeypatch.setattr(app_view, "read_fabric", lambda *_, **__: pytest.fail("analysed"))
    assert started() == fresh
