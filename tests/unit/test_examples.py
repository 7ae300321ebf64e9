"""examples/config.yaml is a real config and names every key the loader knows; ``--version``.

The example's active lines are the defaults; a line of ``#`` directly followed by YAML
(``#sim: demo``, ``#  partitions:``) is a setting left off. Both readings must load through
the real loader and pass its rules, and together they must name every key: the keys are
taken from the settings' dataclasses, so a new config key without an example fails here.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from topograph_slurm.cli.main import main
from topograph_slurm.config import Settings, load_settings, override
from topograph_slurm.render.filters import FilterFacts, PartitionFacts, filter_facts

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config.yaml"
#: ``#key: value`` or ``#  nested: value`` (a setting left off); ``# text`` is prose.
LEFT_OFF = re.compile(r"^#(?=\S|\s{2,}\S)", re.MULTILINE)


def _with_every_setting(tmp_path: Path) -> Path:
    """The example with every setting that is left off switched on (a key set twice takes the
    later value, as YAML's loader does)."""
    path = tmp_path / "every.yaml"
    path.write_text(LEFT_OFF.sub("", EXAMPLE.read_text()))
    return path


def _dataclass(hint: Any) -> type | None:
    """The dataclass a field holds, directly, optionally or as list items."""
    for candidate in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(candidate):
            return candidate  # type: ignore[return-value]
        if typing.get_origin(candidate) is list:
            return _dataclass(typing.get_args(candidate)[0])
    return None


def _keys(cls: type, prefix: str = "") -> set[str]:
    """Every key path the loader accepts for *cls*: its fields and their dataclasses' fields."""
    hints = typing.get_type_hints(cls)
    keys = set()
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = prefix + spec.name
        keys.add(key)
        inner = _dataclass(hints[spec.name])
        if inner is not None:
            keys |= _keys(inner, key + ".")
    return keys


def _filter_keys() -> set[str]:
    """The ``filter`` section's keys: the facts the filters take, each partition's too."""
    facts = {f.name for f in dataclasses.fields(FilterFacts) if not f.name.startswith("_")}
    part = {f.name for f in dataclasses.fields(PartitionFacts) if f.name != "name"}
    return {f"filter.{key}" for key in facts} | {f"filter.partitions.*.{key}" for key in part}


def _written(data: Any, prefix: str = "") -> set[str]:
    """The key paths a YAML document sets (list items and partition names folded)."""
    keys: set[str] = set()
    if isinstance(data, list):
        for item in data:
            keys |= _written(item, prefix)
    elif isinstance(data, dict):
        for key, value in data.items():
            path = prefix + str(key)
            keys.add(path)
            if prefix == "filter.partitions.":
                path = "filter.partitions.*"
            keys |= _written(value, path + ".")
    return keys


def test_the_example_loads_and_its_active_lines_are_the_defaults() -> None:
    settings = load_settings(str(EXAMPLE))
    override(settings)  # every value passes the rules the flags pass
    assert settings == Settings()


def test_every_setting_of_the_example_loads_and_passes_the_rules(tmp_path: Path) -> None:
    settings = load_settings(str(_with_every_setting(tmp_path)))
    override(settings)
    assert settings.sim == "demo" and settings.rewrites[0].replace == "\\1 "
    assert settings.filter is not None
    facts, _ = filter_facts(settings.filter, {"block": 18, "tree": 32}, settings.slurm_version)
    assert {p.name for p in facts.partitions} == set(settings.filter["partitions"])


def test_the_example_names_every_key_the_loader_knows(tmp_path: Path) -> None:
    known = _keys(Settings) | _filter_keys()
    data = yaml.safe_load(_with_every_setting(tmp_path).read_text())
    written = _written(data)
    assert sorted(known - written) == []  # a key without an example


def test_version_is_the_installed_package_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"topograph-slurm, version {metadata.version('topograph-slurm')}\n"
