"""Config file → Settings: types checked, unknown keys refused, flags override."""

from __future__ import annotations

from pathlib import Path

import pytest

from topograph_slurm.config import RewriteRule, Settings, load_settings, override
from topograph_slurm.errors import ConfigError


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
