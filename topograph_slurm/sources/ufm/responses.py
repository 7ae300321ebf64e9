"""The raw JSON text of UFM's endpoints: what the client fetches, a snapshot stores and the
translation reads.

Responses are kept as text, exactly as UFM sent them, so that ``collect --ufm`` can store them
and ``generate --snapshot`` rebuild the same fabric offline; :func:`load_list` is the one check
that a text is a JSON list, for a fetched body and a stored file alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from topograph_slurm.errors import InputError
from topograph_slurm.sources.ufm.schema import JsonText, as_text, decode_list

#: Endpoint key -> path below the REST prefix (``/ufmRest`` or ``/ufmRestV3``).
ENDPOINTS: dict[str, str] = {
    "systems": "resources/systems",
    "ports": "resources/ports",
    "links": "resources/links",
    "unhealthy_ports": "app/unhealthy_ports",
}
SNAPSHOT_SUBDIR = "ufm"


@dataclass(frozen=True, slots=True)
class UfmResponses:
    """The raw JSON text of every endpoint, exactly as UFM sent it (so it can be stored): text
    from the client, bytes from a snapshot (:data:`.schema.JsonText`)."""

    systems: JsonText
    ports: JsonText
    links: JsonText
    unhealthy_ports: JsonText
    url: str = ""  # base URL without credentials, for messages and the snapshot

    def items(self) -> Iterator[tuple[str, JsonText]]:
        """(endpoint key, text) pairs in :data:`ENDPOINTS` order."""
        for key in ENDPOINTS:
            yield key, getattr(self, key)


def load_list(text: str, source: str) -> list[msgspec.Raw]:
    """Check that *text* is a JSON list, for a fetched body and a stored file alike; its
    entries stay undecoded (the translation decodes them into :mod:`.schema` records). Any
    other text is a ParseError naming line and column."""
    return decode_list(text, source, msgspec.Raw)


def snapshot_files(responses: UfmResponses) -> dict[str, str]:
    """Snapshot-relative path -> text (``ufm/systems.json``, …, ``ufm/url.txt``), for a
    collector that writes the whole snapshot atomically itself (``collect.write_snapshot``)."""
    files = {f"{SNAPSHOT_SUBDIR}/{key}.json": as_text(text) for key, text in responses.items()}
    if responses.url:
        files[f"{SNAPSHOT_SUBDIR}/url.txt"] = responses.url + "\n"
    return files


def _utf8(data: bytes) -> bytes:
    """*data*, checked to be UTF-8 text: ASCII (what UFM sends) at C speed, anything else by
    decoding it (UnicodeDecodeError); kept as bytes, which msgspec decodes directly."""
    if not data.isascii():
        data.decode("utf-8")
    return data


def has_snapshot(directory: Path) -> bool:
    """Whether *directory* holds a UFM snapshot (so the CLI can pick the right loader)."""
    return (directory / SNAPSHOT_SUBDIR / "links.json").is_file()


def load_responses(directory: Path) -> UfmResponses:
    """Read a snapshot of the files :func:`snapshot_files` names (``<directory>/ufm/*.json``);
    a directory holding the ``*.json`` files themselves is read as well."""
    folder = directory / SNAPSHOT_SUBDIR
    if not folder.is_dir() and (directory / "links.json").is_file():
        folder = directory
    texts: dict[str, bytes] = {}
    for key in ENDPOINTS:
        path = folder / f"{key}.json"
        try:
            texts[key] = _utf8(path.read_bytes())
        except FileNotFoundError:
            raise InputError(
                f"{path} missing: {directory} is not a complete UFM snapshot"
            ) from None
        except (OSError, UnicodeDecodeError) as err:
            reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
            raise InputError(f"cannot read {path}: {reason}") from None
    url_file = folder / "url.txt"
    url = url_file.read_text(encoding="utf-8").strip() if url_file.is_file() else ""
    return UfmResponses(url=url or str(folder), **texts)
