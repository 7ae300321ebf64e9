"""``generate --filter-dir`` and ``spank build`` through the CLI (click's CliRunner).

The Lua and C themselves are tested in test_filter_lua.py and on real Slurm in
tests/integration/test_tp_filter.py; here: what the sysadmin's cron job and CI see — which
files appear, that unchanged files are left alone, ``--check``, and one-line errors with the
documented exit codes that write nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from tests.support.sim_gpu import (
    gb200_tray_topology,
    nvl_node_gpus,
    render_query_q,
    render_topo_matrix,
)
from tests.support.snapshots import write_node_outputs
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.render.environment import builtin_templates
from topograph_slurm.render.filters import FILTER_FILES
from topograph_slurm.sources.snapshot import KEY_Q, KEY_TOPO

SIM = "nodes=16,rails=1,su=4"  # four leaves of 4 nodes: measured base block 4
FILES = sorted(FILTER_FILES)


def config(tmp_path: Path, **partition: object) -> Path:
    """A config whose filter section has one block partition (base_block left to the fabric;
    a key given as None is left out)."""
    given = {"topology": "block", "gpus_per_node": 4, **partition}
    spec = {key: value for key, value in given.items() if value is not None}
    facts = {"partitions": {"gpu": spec}, "default_partition": "gpu", "switch_wait": 300}
    facts["spank_path"] = "/usr/lib/topograph/tpsize.so"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"filter": facts}))
    return path


def generate(
    cfg: Path | str, out: Path, *extra: str, sim: str = SIM, snap: Path | None = None
) -> Result:
    source = ["--snapshot", str(snap)] if snap else ["--sim", sim]
    args = ["--config", str(cfg), "generate", *source, "--format", "block"]
    args += ["--slurm-version", "26.05", "--filter-dir", str(out), *extra]
    return CliRunner().invoke(main, args)


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """File name -> (inode, mtime_ns) of the visible files."""
    return {
        p.name: (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in directory.iterdir()
        if not p.name.startswith(".")
    }


def assert_one_line_error(result: Result, code: int, *fragments: str) -> None:
    assert result.exit_code == code, result.output
    assert result.stderr.startswith("topograph-slurm: error: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in result.stderr


# --------------------------------------------------------------------------------------------
# generate --filter-dir
# --------------------------------------------------------------------------------------------


def test_filter_dir_gets_every_file(tmp_path: Path) -> None:
    out = tmp_path / "filters"
    result = generate(config(tmp_path), out)
    assert result.exit_code == 0, result.output
    assert sorted(snapshot(out)) == FILES
    assert "5 of 5 filter files written" in result.stderr
    job_submit = (out / "job_submit.lua").read_text()
    assert "base_block = 4," in job_submit  # measured on the fabric, not in the config
    assert "can_set_segment_size = true," in job_submit  # 26.05 >= 25.11.2
    assert (out / "plugstack.conf").read_text().endswith("optional /usr/lib/topograph/tpsize.so\n")
    assert "SPANK_PLUGIN(tpsize, 1);" in (out / "tpsize.c").read_text()


def test_measured_block_size_follows_the_fabric_unless_configured(tmp_path: Path) -> None:
    wide = tmp_path / "wide"
    assert generate(config(tmp_path), wide, sim="nodes=32,rails=1,su=8").exit_code == 0
    assert "base_block = 8," in (wide / "topograph_tp.lua").read_text()
    fixed = tmp_path / "fixed"
    cfg = config(tmp_path, base_block=2)
    assert generate(cfg, fixed, sim="nodes=32,rails=1,su=8").exit_code == 0
    assert "base_block = 2," in (fixed / "topograph_tp.lua").read_text()


def test_only_on_change_and_check(tmp_path: Path) -> None:
    cfg, out = config(tmp_path), tmp_path / "filters"
    topo = ("-o", str(tmp_path / "topology.conf"))  # --check needs -o (cron keeps both current)
    assert generate(cfg, out, *topo).exit_code == 0
    before = snapshot(out)
    again = generate(cfg, out, *topo)
    assert again.exit_code == 0 and "0 of 5 filter files written" in again.stderr
    assert snapshot(out) == before  # same inode and mtime: slurmctld sees no change
    assert generate(cfg, out, *topo, "--check").exit_code == Exit.OK

    stale = (out / "job_submit.lua").read_text().replace("base_block = 4,", "base_block = 8,")
    (out / "job_submit.lua").write_text(stale)
    check = generate(cfg, out, *topo, "--check")
    assert check.exit_code == Exit.DIFFERS
    assert "-      base_block = 8," in check.stdout and "+      base_block = 4," in check.stdout
    assert "1 of 5 filter files out of date" in check.stderr
    assert (out / "job_submit.lua").read_text() == stale  # --check never writes

    fixed = generate(cfg, out, *topo)
    assert fixed.exit_code == 0 and "1 of 5 filter files written" in fixed.stderr
    assert "base_block = 4," in (out / "job_submit.lua").read_text()


def test_site_rules_from_templates_dir_are_used_verbatim(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    rules = (builtin_templates() / "topograph_tp.lua").read_text()
    (site / "topograph_tp.lua").write_text("-- site rules: {{ not jinja }}\n" + rules)
    out = tmp_path / "filters"
    result = generate(config(tmp_path), out, "--templates", str(site))
    assert result.exit_code == 0, result.output
    for name in ("topograph_tp.lua", "job_submit.lua", "cli_filter.lua"):
        text = (out / name).read_text()
        assert "-- site rules: {{ not jinja }}\n" in text
        assert "gpus_per_node = 4," in text  # the facts still come first


def test_missing_filter_section_is_a_config_error_and_writes_nothing(tmp_path: Path) -> None:
    out, topo = tmp_path / "filters", tmp_path / "topology.conf"
    result = generate(os.devnull, out, "-o", str(topo))
    assert_one_line_error(result, Exit.CONFIG, "'filter' section")
    assert not out.exists() and not topo.exists()


@pytest.mark.parametrize(
    ("partition", "fragment"),
    [
        ({"topology": "ring", "gpus_per_node": 4}, "topology must be one of"),
        ({"topology": "block", "gpus_per_node": 0}, "gpus_per_node must be a positive integer"),
        ({"topology": "block", "gpus_per_node": 4, "colour": "red"}, "unknown keys: colour"),
    ],
)
def test_bad_filter_facts_write_nothing(
    tmp_path: Path, partition: dict[str, object], fragment: str
) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"filter": {"partitions": {"gpu": partition}}}))
    out = tmp_path / "filters"
    out.mkdir()
    (out / "job_submit.lua").write_text("-- the site's working filter\n")
    result = generate(cfg, out)
    assert_one_line_error(result, Exit.CONFIG, fragment)
    assert (out / "job_submit.lua").read_text() == "-- the site's working filter\n"
    assert sorted(snapshot(out)) == ["job_submit.lua"]


# --------------------------------------------------------------------------------------------
# gpus_per_node measured from a snapshot's nvidia-smi topo -m
# --------------------------------------------------------------------------------------------


def gpu_snapshot(root: Path, gpus: list[int]) -> Path:
    """A snapshot of racks of 4 nodes (gpu0001...), one NVLink clique per rack; node i has
    gpus[i] GPUs in both its ``nvidia-smi -q`` and its ``topo -m`` output."""
    outputs = {}
    for i, count in enumerate(gpus):
        cluster = f"{i // 4 + 1:08x}-7b3d-4e9f-a1c6-0d2e4b6a8c10"
        outputs[f"gpu{i + 1:04d}"] = {
            KEY_Q: render_query_q(nvl_node_gpus(cluster, 1, count)),
            KEY_TOPO: render_topo_matrix(gb200_tray_topology(count)),
        }
    return write_node_outputs(root, outputs)


def test_gpus_per_node_comes_from_topo_m_unless_configured(tmp_path: Path) -> None:
    snap = gpu_snapshot(tmp_path / "snap", [4] * 8)
    measured = tmp_path / "measured"
    result = generate(config(tmp_path, gpus_per_node=None), measured, snap=snap)
    assert result.exit_code == 0, result.output
    assert "gpus_per_node = 4," in (measured / "topograph_tp.lua").read_text()
    assert "gpus-per-node-disagree" not in result.stderr
    configured = tmp_path / "configured"
    result = generate(config(tmp_path, gpus_per_node=8), configured, snap=snap)
    assert result.exit_code == 0, result.output
    assert "gpus_per_node = 8," in (configured / "job_submit.lua").read_text()


def test_disagreeing_gpu_counts_use_the_most_common_and_warn(tmp_path: Path) -> None:
    snap = gpu_snapshot(tmp_path / "snap", [8, 8, 8, 8, 8, 8, 4, 4])
    out = tmp_path / "filters"
    result = generate(config(tmp_path, gpus_per_node=None), out, snap=snap)
    assert result.exit_code == 0, result.output
    assert "gpus_per_node = 8," in (out / "cli_filter.lua").read_text()
    [warning] = [line for line in result.stderr.splitlines() if "gpus-per-node-disagree" in line]
    assert warning.startswith("topograph-slurm: warning: [gpus-per-node-disagree] gpu: ")
    assert (
        "8 GPUs on 6 nodes (gpu0001, gpu0002, gpu0003, ...); 4 GPUs on 2 nodes (gpu0007, gpu0008)"
        in warning
    )
    configured = generate(config(tmp_path), tmp_path / "configured", snap=snap)
    assert configured.exit_code == 0, configured.output
    assert "gpus-per-node-disagree" not in configured.stderr  # the config chose


def test_the_gpu_count_disagreement_is_a_finding_in_the_report(tmp_path: Path) -> None:
    snap = gpu_snapshot(tmp_path / "snap", [8, 8, 8, 8, 8, 8, 4, 4])
    report = tmp_path / "report.json"
    result = generate(
        config(tmp_path, gpus_per_node=None),
        tmp_path / "filters",
        "--report",
        str(report),
        "--json",
        snap=snap,
    )
    assert result.exit_code == 0, result.output
    findings = json.loads(report.read_text())["findings"]
    [finding] = [f for f in findings if f["kind"] == "gpus-per-node-disagree"]
    assert finding["subject"] == "gpu" and "using 8" in finding["message"]


def test_without_topo_m_the_config_must_set_gpus_per_node(tmp_path: Path) -> None:
    out = tmp_path / "filters"
    result = generate(config(tmp_path, gpus_per_node=None), out)
    assert_one_line_error(result, Exit.CONFIG, "gpus_per_node must be a positive integer")
    assert not out.exists()


# --------------------------------------------------------------------------------------------
# spank build
# --------------------------------------------------------------------------------------------


def spank_build(*args: str) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, "spank", "build", *args])


@pytest.fixture
def source(tmp_path: Path) -> Path:
    out = tmp_path / "filters"
    assert generate(config(tmp_path), out).exit_code == 0
    return out / "tpsize.c"


def test_missing_compiler_is_one_line(source: Path, tmp_path: Path) -> None:
    result = spank_build(
        "--source", str(source), "--out-dir", str(tmp_path / "so"), "--cc", "no-such-cc"
    )
    assert_one_line_error(result, Exit.COLLECT, "C compiler 'no-such-cc' not found")
    assert not (tmp_path / "so").exists()


def test_missing_source_or_header_is_one_line(source: Path, tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    missing = spank_build("--source", str(tmp_path / "absent.c"), "--out-dir", str(tmp_path))
    assert_one_line_error(missing, Exit.COLLECT, "run generate --filter-dir first")
    empty = tmp_path / "include"
    empty.mkdir()
    no_header = spank_build(
        "--source", str(source), "--out-dir", str(tmp_path / "so"), "--include-dir", str(empty)
    )
    assert_one_line_error(no_header, Exit.COLLECT, "slurm/spank.h not found")
    assert not list(tmp_path.rglob("*.so"))


def test_builds_a_loadable_plugin(source: Path, tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    if not Path("/usr/include/slurm/spank.h").is_file():
        pytest.skip("slurm/spank.h absent (Debian/Ubuntu package libslurm-dev)")
    outdir = tmp_path / "so"
    result = spank_build("--source", str(source), "--out-dir", str(outdir))
    assert result.exit_code == 0, result.output
    plugin = outdir / "tpsize.so"
    assert result.stdout == f"optional {plugin.resolve()}\n"  # the plugstack.conf line
    assert sorted(p.name for p in outdir.iterdir()) == ["tpsize.so"]  # no temp file left
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(plugin)], capture_output=True, text=True, check=False
    )
    if symbols.returncode == 0:  # nm comes with binutils, which gcc pulls in
        for name in ("slurm_spank_init", "plugin_name", "plugin_type", "plugin_version"):
            assert f" {name}\n" in symbols.stdout, symbols.stdout


@pytest.mark.parametrize("template", ["job_submit.lua.j2", "topograph_facts.lua.j2"])
def test_a_broken_site_filter_template_is_a_config_error(tmp_path: Path, template: str) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / template).write_text("{% if %}\n")
    out = tmp_path / "filters"
    result = generate(config(tmp_path), out, "--templates", str(site))
    assert_one_line_error(result, Exit.CONFIG, template)
    assert not out.exists() or not any(out.iterdir())
