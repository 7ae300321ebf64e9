"""Config file → Settings: types checked, unknown keys refused, flags override, and one set of
rules on the values whichever way they came."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from topograph_slurm.cli.main import main
from topograph_slurm.config import RewriteRule, Settings, load_settings, override
from topograph_slurm.errors import ConfigError, Exit


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


def test_full_config_round_trip(tmp_path: Path) -> None:
    settings = load_settings(
        _write(
            tmp_path,
            "format: block\nslurm_version: 25.05\nblock_sizes: [4, 8]\nshrink_limit: 0.2\n"
            "rewrites:\n  - {pattern: '^x', replace: 'y'}\n"
            "ibnetdiscover_command:\n"
            "  {binary: /opt/ib/ibnetdiscover, args: [-C, mlx5_0], timeout: 60}\n",
        )
    )
    assert settings.format == "block" and settings.slurm_version == "25.05"
    assert settings.block_sizes == [4, 8] and settings.shrink_limit == 0.2
    assert settings.rewrites == [RewriteRule("^x", "y")]
    assert settings.ibnetdiscover_command.args == ["-C", "mlx5_0"]
    assert settings.ibnetdiscover_command.timeout == 60.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("formatt: tree\n", "unknown config key formatt"),
        ("ibnetdiscover_command: {bin: x}\n", "unknown config key ibnetdiscover_command.bin"),
        ("max_tiers: two\n", "max_tiers' must be int"),
        ("block_sizes: 4\n", "must be a list"),
        ("format: [\n", "invalid YAML"),
        ("- a\n- b\n", "must be a mapping"),
        ("max_tiers: true\n", "must be int"),
    ],
)
def test_bad_config_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(_write(tmp_path, text))


def test_missing_explicit_config_is_an_error_but_default_is_optional(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(str(tmp_path / "absent.yaml"))
    monkeypatch.setenv("TOPOGRAPH_SLURM_CONFIG", _write(tmp_path, "format: block\n"))
    assert load_settings(None).format == "block"
    monkeypatch.delenv("TOPOGRAPH_SLURM_CONFIG")
    monkeypatch.setattr("topograph_slurm.config.DEFAULT_CONFIG", tmp_path / "none.yaml")
    assert load_settings(None) == Settings()


def test_flags_override_file_values() -> None:
    settings = override(Settings(format="block", max_tiers=2), format="tree", max_tiers=None)
    assert settings.format == "tree" and settings.max_tiers == 2


def test_a_non_utf8_config_is_one_config_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"format: \xff\n")
    with pytest.raises(ConfigError, match=rf"{path}: not UTF-8 text \(byte 0xff at offset 8\)"):
        load_settings(str(path))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("format: " + "[" * 1500 + "]" * 1500 + "\n", "invalid YAML"),
        ("block_sizes: &a [*a]\n", "must be int"),
        ("yaml_names: {tree: 5}\n", "yaml_names.tree must be str, got 5"),
        ("partitions: {1: ib}\n", "keys must be text, got 1"),
        ("format: 1\n", "'format' must be str, got 1"),
        ("output: 2.5\n", "'output' must be str, got 2.5"),
        ("shrink_limit: " + "9" * 400 + "\n", "'shrink_limit' must be float, got 999"),
    ],
    ids=["deep", "self-anchor", "int-value", "int-key", "int-str", "float-str", "huge-float"],
)
def test_hostile_yaml_is_one_config_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(_write(tmp_path, text))


def test_a_version_written_as_a_yaml_number_keeps_its_text(tmp_path: Path) -> None:
    """``25.10`` read as a float would be 25.1; the text the admin wrote is kept."""
    assert load_settings(_write(tmp_path, "slurm_version: 25.10\n")).slurm_version == "25.10"
    assert load_settings(_write(tmp_path, "slurm_version: 24.11\n")).slurm_version == "24.11"


#: (config key, flag, the value as YAML, the value as typed on the command line)
BAD_VALUES = [
    ("max_tiers", "--max-tiers", "0", "0"),
    ("max_tiers", "--max-tiers", "-3", "-3"),
    ("max_tiers", "--max-tiers", "-" + "9" * 400, "-" + "9" * 400),
    ("format", "--format", "ring", "ring"),
    ("block_source", "--block-source", "rails", "rails"),
    ("nvlink_unhealthy", "--nvlink-unhealthy", "ignore", "ignore"),
    ("shrink_limit", "--shrink-limit", "-1", "-1"),
    # a nan shrink limit: the config's rule here; the flag refuses it as no plain decimal
    # (test_hostile_inputs.test_option_numbers_are_ascii_digits_only)
    ("shrink_limit", "--shrink-limit", "1.5", "1.5"),
    ("slurm_version", "--slurm-version", "'x.y'", "x.y"),
    ("hcas", "--hcas", "'mlx5_['", "mlx5_["),
    ("slurm_nodes", "--slurm-nodes", "'n[1-'", "n[1-"),
    ("slurm_nodes", "--slurm-nodes", "'n[1-20000000]'", "n[1-20000000]"),
    ("block_name_pattern", "--block-name-pattern", "'{nope}'", "{nope}"),
    ("block_name_pattern", "--block-name-pattern", "'{first:>999999999}'", "{first:>999999999}"),
    ("block_sizes", "--block-sizes", "[0]", "0"),
    ("yaml_default", "--yaml-default", "'a b'", "a b"),
    ("rewrites", "--rewrite", "[{pattern: x, replace: '\\9'}]", "x=>\\9"),
    ("report", "--report", "''", ""),
    ("ufm_timeout", "--ufm-timeout", "0", "0"),
]


def _rule_text(line: str, subject: str) -> str:
    """What an error line says about the value, without its subject (key or flag)."""
    prefix = f"topograph-slurm: error: {subject}: "
    assert line.startswith(prefix), line
    return line[len(prefix) :]


@pytest.mark.parametrize(("key", "flag", "as_yaml", "as_typed"), BAD_VALUES)
def test_a_bad_value_is_refused_by_the_same_rule_from_config_or_flag(
    tmp_path: Path, key: str, flag: str, as_yaml: str, as_typed: str
) -> None:
    """Config: exit 5 naming the key; flag: exit 2 naming the flag; the rule's words alike."""
    target = tmp_path / "topology.conf"
    config = _write(tmp_path, f"{key}: {as_yaml}\n")
    args = ["generate", "--sim", "demo", "-o", str(target)]
    from_config = _cli(["--config", config, *args])
    from_flag = _cli(["--config", os.devnull, *args, f"{flag}={as_typed}"])
    assert (from_config.exit_code, from_flag.exit_code) == (Exit.CONFIG, Exit.USAGE)
    config_line, flag_line = (r.stderr.rstrip("\n") for r in (from_config, from_flag))
    assert "\n" not in config_line + flag_line
    assert _rule_text(config_line, f"config key {key!r}") == _rule_text(flag_line, flag)
    assert not target.exists()


def test_a_good_flag_overrides_a_bad_config_value(tmp_path: Path) -> None:
    """The rules judge the merged settings: what the run will use."""
    config = _write(tmp_path, "max_tiers: 0\nreport_format: xml\n")
    flags = ["--max-tiers", "2", "--json"]
    result = _cli(["--config", config, "generate", "--sim", "demo", *flags])
    assert result.exit_code == 0, result.output


def test_a_nested_key_is_named_with_its_section(tmp_path: Path) -> None:
    config = _write(tmp_path, "ibnetdiscover_command: {timeout: -5}\n")
    result = _cli(["--config", config, "generate", "--sim", "demo"])
    assert result.exit_code == Exit.CONFIG
    assert result.stderr == (
        "topograph-slurm: error: config key 'ibnetdiscover_command.timeout': "
        "must be a number > 0, got -5.0\n"
    )


def test_collect_checks_the_shared_config_too(tmp_path: Path) -> None:
    config = _write(tmp_path, "format: ring\n")
    snap = tmp_path / "snap"
    result = _cli(["--config", config, "collect", "--nodes", "n1", "--out-dir", str(snap)])
    assert result.exit_code == Exit.CONFIG and "config key 'format'" in result.stderr
    assert not snap.exists()


def _cli(args: list[str]) -> Result:
    return CliRunner().invoke(main, args)
