"""The shape of each UFM answer, and the one decoder that holds every answer to it.

UFM answers are large (~100 MB for a 2,048-node × 8-rail fabric) and come from a server we do
not control, so they are decoded by ``msgspec`` straight into typed records: it is several times
faster than ``json`` into dicts, skips the fields topology does not read without building them,
and checks every field it keeps on the way. A list where an object belongs, a string where a
number belongs, a number too large for its field, a null in a required field, or JSON nested
too deep to decode becomes one :class:`ParseError` naming the endpoint, the entry and the field
— never a ``KeyError`` or a ``RecursionError`` later.

Only the fields the translation reads are declared, each as loosely as real UFM versions send
it (port numbers as ``1`` or ``"1"``; speeds as ``"HDR"`` or a lane rate) and no looser. The
fields it reads only for a few records (a port's name and peer, a link end's description) are
separate records, decoded from the same answer when one is needed: a 16,384-node answer holds
~800k ports, and every field decoded is a string built per port.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, TypeVar

import msgspec

from topograph_slurm.errors import ParseError

#: An IB port number (8 bits): ``1`` or ``"1"`` (a text is checked by the translation, once
#: per distinct value: a pattern here would run a regular expression per port).
PortNumber = Annotated[int, msgspec.Meta(ge=0, le=255)] | str
#: A LID (16 bits); a text that is not a number (``"N/A"``) means "none".
Lid = Annotated[int, msgspec.Meta(ge=0, le=0xFFFF)] | str
#: A lane count (``4x``, ``4``) or a signalling rate (``HDR``, ``53.125``).
Width = str | Annotated[int, msgspec.Meta(ge=0, le=64)]
Speed = str | Annotated[float, msgspec.Meta(ge=0, le=10_000)]


class System(msgspec.Struct, gc=False):
    """A ``resources/systems`` entry: a switch chassis or a host with all its HCAs."""

    type: str
    system_guid: str | None = None
    guid: str | None = None
    system_name: str | None = None
    model: str | None = None
    description: str | None = None


class PortId(msgspec.Struct, gc=False):
    """What names a ``resources/ports`` entry: ``guid`` is the node GUID of its switch ASIC or
    HCA, ``number`` its port on it."""

    guid: str | None = None
    number: PortNumber | None = None


class Port(PortId, gc=False):
    """The fields of a ``resources/ports`` entry that its device needs."""

    description: str | None = None
    node_description: str | None = None
    systemID: str | None = None
    lid: Lid | None = None


class PortRate(msgspec.Struct, gc=False):
    """The rate fields of a ``resources/ports`` entry, which only the cables need (decoded
    apart, by the forked child while it waits for the ports' identities)."""

    active_speed: Speed | None = None
    active_width: Width | None = None


#: The speed names of :data:`topograph_slurm.model.rates.SPEEDS` and the usual lane counts.
SpeedName = Literal["SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR", "GDR"]
LaneCount = Literal["1x", "2x", "4x", "8x", "12x"]


class NamedPortRate(msgspec.Struct, gc=False):
    """:class:`PortRate` for the usual answer, every rate named as ibnetdiscover names it:
    msgspec then hands back the literal's own string, so the ports share one object per
    value instead of two new strings each (the rate table is then built by identity). An
    answer with any other value is decoded as :class:`PortRate`."""

    active_speed: SpeedName | None = None
    active_width: LaneCount | None = None


class PortPeer(msgspec.Struct, gc=False):
    """The rarely needed fields of a ``resources/ports`` entry: its name (``<guid>_<port>``,
    for a port without guid or number) and its peer (for a cable no link lists)."""

    name: str | None = None
    peer: str | None = None
    peer_node_description: str | None = None
    peer_port_dname: str | int | None = None


class Link(msgspec.Struct, gc=False):
    """A ``resources/links`` entry: one cable, with its width but no speed."""

    source_guid: str
    source_port: PortNumber
    destination_guid: str
    destination_port: PortNumber
    width: Width | None = None


class LinkEnds(msgspec.Struct, gc=False):
    """The rarely needed fields of a ``resources/links`` entry: its ends' descriptions, for
    an end that is no port UFM lists."""

    source_port_node_description: str | None = None
    source_port_dname: str | int | None = None
    destination_port_node_description: str | None = None
    destination_port_dname: str | int | None = None


class Unhealthy(msgspec.Struct, gc=False):
    """An ``app/unhealthy_ports`` entry."""

    UnhealthyGUID: str
    UnhealthyNode: str | None = None
    UnhealthyPortNumber: PortNumber | None = None
    UnhealthyPort: str | int | None = None  # a port number, or ``<system>/<port>``
    Condition: str | list[str] | None = None
    State: str | None = None
    StatusTime: str | None = None
    PeerNode: str | None = None
    PeerPortNumber: PortNumber | None = None


T = TypeVar("T")

#: JSON's names for the types msgspec reports, so messages speak of the answer, not of Python.
_JSON_NAMES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "array": "list",
    "object": "object",
    "null": "null",
}
_TYPE = re.compile(r"`([^`]*)`")
_AT = re.compile(r"^(?P<what>.*) - at `\$(?P<entry>\[\d+\])?(?P<field>.*)`$")
_BYTE = re.compile(r"\(byte (\d+)\)$")
#: Deeper than any UFM answer goes (entry → field → list → object): a nesting this deep is
#: reported where it starts; msgspec itself gives up at Python's recursion limit.
MAX_DEPTH = 32
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]')


#: An answer as UFM sent it: text from the client, the bytes of a stored file from a snapshot
#: (msgspec reads UTF-8 bytes directly; decoding 600 MB to text first costs half a second).
JsonText = str | bytes


def decode_list(text: JsonText, source: str, item: type[T]) -> list[T]:
    """*text* as a JSON list of *item*; any other shape is one ParseError naming *source*,
    the entry (``source[3]``) and the field."""
    try:
        return msgspec.json.decode(text, type=list[item])  # type: ignore[valid-type]
    except msgspec.ValidationError as err:
        raise _shape_error(str(err), source) from None
    except msgspec.DecodeError as err:
        raise _syntax_error(str(err), as_text(text), source) from None
    except RecursionError:
        entry, field = too_deep(as_text(text))
        raise ParseError(
            f"{_field(field)}JSON nested deeper than {MAX_DEPTH} levels", None, source + entry
        ) from None
    except UnicodeEncodeError:
        raise ParseError("not UTF-8 text (lone surrogate)", None, source) from None


def as_text(text: JsonText) -> str:
    """*text* as a string, for messages (line and column) once decoding failed."""
    return text if isinstance(text, str) else text.decode("utf-8", "replace")


def _json_types(message: str) -> str:
    def name(m: re.Match[str]) -> str:
        return " | ".join(_JSON_NAMES.get(t.strip(), t.strip()) for t in m.group(1).split("|"))

    return _TYPE.sub(name, message)


def _field(path: str) -> str:
    return f"field {path.lstrip('.')!r}: " if path else ""


def _shape_error(message: str, source: str) -> ParseError:
    m = _AT.match(message)
    if m is None:  # the answer itself is not a list
        got = _TYPE.findall(message)[-1] if "got" in message else "value"
        what = _JSON_NAMES.get(got, got)
        return ParseError(
            f"expected a JSON list, got a JSON {what} (not a UFM response?)", None, source
        )
    what, entry, field = m.group("what"), m.group("entry") or "", m.group("field")
    missing = re.fullmatch(r"Object missing required field `(.*)`", what)
    if missing:
        path = f"{field}.{missing.group(1)}".lstrip(".")
        return ParseError(f"missing field {path!r} (not a UFM response?)", None, source + entry)
    if not field and what.startswith("Expected `object`"):
        got = _TYPE.findall(what)[-1]
        return ParseError(
            f"entry is a JSON {_JSON_NAMES.get(got, got)}, not an object", None, source + entry
        )
    what = _json_types(what)
    return ParseError(f"{_field(field)}{what[:1].lower()}{what[1:]}", None, source + entry)


def _syntax_error(message: str, text: str, source: str) -> ParseError:
    """msgspec counts bytes; a person counts lines and columns."""
    m = _BYTE.search(message)
    reason = message.removeprefix("JSON is malformed: ")
    if m is None:  # "Input data was truncated"
        pos, hint, reason = len(text), " (truncated?)", "unexpected end of the answer"
    else:
        pos = len(text.encode("utf-8")[: int(m.group(1))].decode("utf-8", "ignore"))
        reason, hint = _BYTE.sub("", reason).strip(), ""
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return ParseError(f"invalid JSON{hint}: {reason} at column {column}", line, source)


def too_deep(text: str) -> tuple[str, str]:
    """(entry, field) where *text* first nests deeper than :data:`MAX_DEPTH`, for the message
    once the decoder gave up (so speed does not matter here). Strings are skipped whole, so
    brackets inside them do not count."""
    stack: list[list[str | int]] = []  # per open container: [index] or [key]
    last = ""
    for m in _TOKENS.finditer(text):
        token = m.group()
        if token[0] == '"':
            last = token[1:-1]
        elif token in "[{":
            stack.append([0 if token == "[" else ""])
            if len(stack) > MAX_DEPTH:
                break
        elif not stack:
            continue
        elif token == ":":
            stack[-1][0] = last
        elif token == ",":
            label = stack[-1][0]
            stack[-1][0] = label + 1 if isinstance(label, int) else label
        else:
            stack.pop()
    labels = [label for (label,) in stack[:-1]]
    entry = f"[{labels[0]}]" if labels else ""
    field = labels[1] if len(labels) > 1 and isinstance(labels[1], str) else ""
    return entry, field
