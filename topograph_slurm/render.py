"""The Jinja environment every renderer shares; all Slurm syntax lives in ``templates/``.

Python hands templates plain data (names, node lists, sizes); the templates decide how that looks
in topology.conf, topology.yaml or Lua. A site can override any template by putting a file of the
same name in ``--templates DIR``; the built-in ones fill the gaps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jinja2
from ClusterShell.NodeSet import NodeSet

from topograph_slurm.errors import ConfigError

_PACKAGE = Path(__file__).resolve().parent


def builtin_templates() -> Path:
    """The shipped templates: inside the package when installed, top-level in a checkout."""
    for candidate in (_PACKAGE / "templates", _PACKAGE.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise ConfigError("built-in templates not found; reinstall topograph-slurm")


def hostlist(names: Iterable[str]) -> str:
    """Fold node names into a Slurm hostlist (``gpu[001-064]``), ranges on the last number only,
    since Slurm's hostlist parser does not read ClusterShell's multi-axis ranges."""
    nodes = NodeSet.fromlist(sorted(names))
    nodes.fold_axis = [-1]
    return str(nodes)


def lua_str(value: object) -> str:
    """A Lua string literal for *value*: data from the fabric never becomes Lua code."""
    text = str(value)
    out = []
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 32 <= code < 127:
            out.append(char)
        else:
            out.extend(f"\\{byte:03d}" for byte in char.encode("utf-8"))
    return '"' + "".join(out) + '"'


def environment(override: Path | None = None) -> jinja2.Environment:
    """A strict environment: undefined variables are errors, no HTML escaping."""
    paths = [builtin_templates()]
    if override is not None:
        if not override.is_dir():
            raise ConfigError(f"templates directory {override} does not exist")
        paths.insert(0, override)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(path) for path in paths]),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["hostlist"] = hostlist
    env.filters["lua_str"] = lua_str
    env.filters["tojson"] = lambda value: json.dumps(value, sort_keys=True)
    return env


def render(env: jinja2.Environment, template: str, **context: Any) -> str:
    """Render one template; a broken site template is a config error, not a traceback."""
    try:
        return env.get_template(template).render(**context)
    except jinja2.TemplateNotFound as err:
        raise ConfigError(f"template {err.name} not found") from None
    except jinja2.TemplateError as err:
        raise ConfigError(f"template {template}: {err}") from None
