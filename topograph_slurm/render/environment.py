"""The Jinja environment every renderer shares; all Slurm syntax lives in ``templates/``.

Python hands templates plain data (names, node lists, sizes); the templates decide how that looks
in topology.conf, topology.yaml or Lua. A site can override any template by putting a file of the
same name in ``--templates DIR``; the built-in ones fill the gaps.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import jinja2

from topograph_slurm.errors import ConfigError
from topograph_slurm.model import names

_PACKAGE = Path(__file__).resolve().parent.parent


def builtin_templates() -> Path:
    """The shipped templates: inside the package when installed, top-level in a checkout."""
    for candidate in (_PACKAGE / "templates", _PACKAGE.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise ConfigError("built-in templates not found; reinstall topograph-slurm")


def lua_str(value: object) -> str:
    """Render *value* as a double-quoted Lua string literal that is pure ASCII.

    Every byte outside printable ASCII, and the quote and backslash, becomes a three-digit
    decimal escape (valid in Lua 5.1 through 5.4), so a fabric name can never close the string
    or inject code.
    """
    if not isinstance(value, str):
        raise TypeError(f"lua_str needs a string, got {type(value).__name__}")
    out = ['"']
    for byte in value.encode("utf-8"):
        if 32 <= byte < 127 and byte not in (34, 92):
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03d}")
    out.append('"')
    return "".join(out)


def _escape_char(char: str) -> str:
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(value: object) -> object:
    """*value* with every control or other non-printable character of a string shown as an
    escape (``\\x1b``, ``\\r``, ``\\u202e``), so fabric text (a switch's or HCA's
    description) cannot move the cursor, clear the screen or ring the bell of the terminal
    the report is read on. Non-strings (counts) pass through unchanged.
    """
    if not isinstance(value, str) or value.isprintable():
        return value
    return "".join(char if char.isprintable() else _escape_char(char) for char in value)


def counted(count: int, noun: str) -> str:
    """*count* and *noun*, in the plural unless one: ``1 node``, ``2 nodes``, ``0 nodes``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def lua_int(value: object) -> str:
    """Render a non-negative int as a Lua number literal; anything else is a template bug."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"lua_int needs a non-negative int, got {value!r}")
    return str(value)


def lua_bool(value: object) -> str:
    """Render a bool as ``true``/``false``."""
    if not isinstance(value, bool):
        raise TypeError(f"lua_bool needs a bool, got {value!r}")
    return "true" if value else "false"


#: The templates whose every printed value goes through :func:`printable`: the text a
#: person reads on a terminal (reports, tables, ``record show``). The others' syntax has its
#: own quoting rule (Lua, shell, JSON, HTML) and their values are checked where they are made.
TEXT_SUFFIX = ".txt.j2"


@jinja2.pass_context
def _finalize(context: jinja2.runtime.Context, value: object) -> object:
    """The one escaping rule of the text outputs: every ``{{ value }}`` of a text template
    shown with :func:`printable`, whatever the template remembered to filter."""
    name = context.name or ""
    return printable(value) if name.endswith(TEXT_SUFFIX) else value


def environment(override: Path | None = None) -> jinja2.Environment:
    """A strict environment: undefined variables are errors, no HTML escaping; every value a
    text template prints is escaped (:func:`printable`), so record and fabric strings cannot
    drive the reader's terminal."""
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
        finalize=_finalize,
    )
    env.filters["hostlist"] = names.fold
    env.filters.update(lua_str=lua_str, lua_int=lua_int, lua_bool=lua_bool)
    env.filters["tojson"] = lambda value: json.dumps(value, sort_keys=True)
    env.filters["printable"] = printable
    env.filters["counted"] = counted
    env.filters["sh"] = shlex.quote  # a word of a shell command line (health's scontrol lines)
    return env


def render(env: jinja2.Environment, template: str, **context: Any) -> str:
    """Render one template; a broken site template is a config error, not a traceback."""
    try:
        return env.get_template(template).render(**context)
    except jinja2.TemplateNotFound as err:
        raise ConfigError(f"template {err.name} not found") from None
    except jinja2.TemplateError as err:
        raise ConfigError(f"template {template}: {err}") from None
