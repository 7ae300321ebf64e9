"""NVIDIA UFM REST API as a fabric source: the same :class:`Fabric` ibnetdiscover gives.

On most DGX SuperPODs UFM already knows the fabric, and admins would rather ask it over HTTPS
than run ``ibnetdiscover`` as root on a compute node. This module has three parts, kept apart so
that each is testable and a snapshot can be rebuilt offline:

* **credentials** (:func:`load_credentials`): basic user/password (``/ufmRest``), an access token
  (``/ufmRestV3`` with ``Authorization: Basic <token>``) or a client certificate (``/ufmRest``),
  from a private file or the environment — never argv, never echoed in any message;
* **fetching** (:func:`fetch_ufm`): stdlib HTTPS with verification on by default, timeouts,
  bounded retries with exponential backoff on connection errors and 5xx, and one clear error
  line per failure; the raw JSON text of every endpoint is kept (:class:`UfmResponses`) so
  ``collect --ufm`` can store it (:func:`store_responses`) and ``generate --snapshot`` reload it;
* **translation** (:func:`fabric_from_ufm`): systems, ports, links and unhealthy ports become
  switches, CAs, links and notes, exactly as the ibnetdiscover parser would model them.

UFM shapes (REST API guide 6.x, checked against UFM sample responses):

* ``resources/systems``: one entry per *system* (a switch chassis, or a host with all its HCAs):
  ``system_guid``, ``guid``, ``system_name``, ``type`` (``switch``/``host``/…), ``model``,
  ``description``, ``ports`` (``<node guid>_<port>`` names);
* ``resources/ports``: one entry per port: ``guid`` (the node GUID), ``number``, ``name``,
  ``node_description`` (an HCA's real node description; ``<switch>:<port label>`` for switches),
  ``description`` (``Switch IB Port`` / ``Computer IB Port``), ``systemID``, ``system_name``,
  ``lid``, ``active_speed`` (``HDR``), ``active_width`` (``4x``), ``peer`` (``<guid>_<port>``);
* ``resources/links``: one entry per cable: ``source_guid``/``source_port``,
  ``destination_guid``/``destination_port``, ``width``, ``severity``, port node descriptions —
  but no speed, which therefore comes from the ports;
* ``app/unhealthy_ports``: ``UnhealthyGUID``, ``UnhealthyPortNumber``, ``UnhealthyNode``,
  ``Condition``, ``State``, ``StatusTime``, ``PeerNode``, ``PeerPortNumber``.

Switch descriptions: ibnetdiscover shows a Mellanox switch as ``MF0;<name>:<model>/U1`` and
naming takes ``<name>``; UFM splits that into ``system_name`` and ``model``, so the description
is rebuilt in that form and both sources give every switch the same Slurm name.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import socket
import ssl
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from topograph_slurm.errors import AuthError, CollectError, InputError, OutputError, ParseError
from topograph_slurm.model.fabric import Ca, Fabric, Link, Links, Note, Switch, normalize_guid

#: Endpoint key -> path below the REST prefix (``/ufmRest`` or ``/ufmRestV3``).
ENDPOINTS: dict[str, str] = {
    "systems": "resources/systems",
    "ports": "resources/ports",
    "links": "resources/links",
    "unhealthy_ports": "app/unhealthy_ports",
}
SNAPSHOT_SUBDIR = "ufm"

# --------------------------------------------------------------------------------------------
# Credentials


class UfmInsecureWarning(UserWarning):
    """TLS verification was switched off (``--ufm-insecure``) or the URL is plain http."""


_ENV_KEYS = {
    "UFM_USERNAME": "username",
    "UFM_PASSWORD": "password",
    "UFM_TOKEN": "token",
    "UFM_CLIENT_CERT": "client_cert",
    "UFM_CLIENT_KEY": "client_key",
}
_FILE_KEYS = {
    "username": "username",
    "user": "username",
    "password": "password",
    "token": "token",
    "access_token": "token",
    "client_cert": "client_cert",
    "cert": "client_cert",
    "client_key": "client_key",
    "key": "client_key",
}


@dataclass(frozen=True, slots=True)
class UfmCredentials:
    """One way to authenticate to UFM. Secrets are excluded from ``repr`` so that a traceback
    or a debug print can never show them."""

    username: str = ""
    password: str = field(default="", repr=False)
    token: str = field(default="", repr=False)
    client_cert: Path | None = None
    client_key: Path | None = None
    origin: str = ""  # where they came from (a path or "environment"), for error messages

    @property
    def kind(self) -> str:
        """``basic``, ``token`` or ``cert``."""
        if self.token:
            return "token"
        if self.client_cert is not None:
            return "cert"
        return "basic"

    @property
    def prefix(self) -> str:
        """The REST prefix this authentication method is served under."""
        return "/ufmRestV3" if self.kind == "token" else "/ufmRest"

    def headers(self) -> dict[str, str]:
        """HTTP headers carrying the credentials (none for a client certificate)."""
        if self.kind == "token":
            return {"Authorization": f"Basic {self.token}"}
        if self.kind == "basic":
            raw = f"{self.username}:{self.password}".encode()
            return {"Authorization": "Basic " + base64.b64encode(raw).decode("ascii")}
        return {}

    def secrets(self) -> tuple[str, ...]:
        """Every secret string, so callers (and tests) can check no message contains one."""
        return tuple(s for s in (self.password, self.token) if s)


def load_credentials(path: Path | None, env: Mapping[str, str]) -> UfmCredentials:
    """Credentials from *path* (YAML mapping or ``key=value`` lines) or, without a path, from
    ``UFM_USERNAME``/``UFM_PASSWORD``, ``UFM_TOKEN`` or ``UFM_CLIENT_CERT``/``UFM_CLIENT_KEY``.

    A file readable by group or others is refused: a password in a 0644 file is a leaked
    password. Every error is one AuthError line that names the file and the key, never a value.
    """
    if path is not None:
        values = _read_credentials_file(path)
        origin = str(path)
    else:
        values = {_ENV_KEYS[k]: v for k, v in env.items() if k in _ENV_KEYS and v}
        origin = "environment"
        if not values:
            raise AuthError(
                "no UFM credentials: give --ufm-credentials FILE or set UFM_USERNAME and "
                "UFM_PASSWORD, UFM_TOKEN, or UFM_CLIENT_CERT (and UFM_CLIENT_KEY)"
            )
    return _credentials_from(values, origin, path.parent if path is not None else None)


def _check_private(path: Path, what: str) -> None:
    try:
        mode = path.stat().st_mode
    except OSError as err:
        raise AuthError(f"cannot read {what} {path}: {err.strerror}") from None
    if mode & 0o077:
        raise AuthError(
            f"{what} {path} is readable by group or others (mode {mode & 0o777:04o}); "
            f"run: chmod 600 {path}"
        )


def _read_credentials_file(path: Path) -> dict[str, str]:
    _check_private(path, "UFM credentials file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise AuthError(f"cannot read UFM credentials file {path}: {reason}") from None
    return _parse_credentials_text(text, path)


def _parse_credentials_text(text: str, path: Path) -> dict[str, str]:
    """YAML mapping, else ``key=value`` lines; YAML errors are reported by line only, because
    PyYAML's own message quotes the offending text (which may be the password)."""
    data: object = None
    if not re.search(r"^\s*[A-Za-z_]+\s*=", text, re.MULTILINE):
        try:  # BaseLoader: every scalar stays a string (a password 0123 is not octal 83)
            data = yaml.load(text, Loader=yaml.BaseLoader)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise AuthError(f"UFM credentials file {path}: invalid YAML{where}") from None
    if isinstance(data, dict):
        raw = {str(k): "" if v is None else str(v) for k, v in data.items()}
    elif data is None or isinstance(data, str):
        raw = _key_value_lines(text, path)
    else:
        raise AuthError(f"UFM credentials file {path}: expected a mapping of keys to values")
    values: dict[str, str] = {}
    for key, value in raw.items():
        canonical = _FILE_KEYS.get(key.strip().lower())
        if canonical is None:
            known = ", ".join(sorted(set(_FILE_KEYS)))
            raise AuthError(f"UFM credentials file {path}: unknown key {key!r} (known: {known})")
        if value.strip():
            values[canonical] = value.strip()
    return values


def _key_value_lines(text: str, path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        if not sep:
            raise AuthError(f"UFM credentials file {path}:{lineno}: expected key=value")
        out[key.strip()] = value.strip().strip("'\"")
    return out


def _credentials_from(values: dict[str, str], origin: str, base: Path | None) -> UfmCredentials:
    kinds = [
        k
        for k, present in (
            ("username/password", "username" in values or "password" in values),
            ("token", "token" in values),
            ("client certificate", "client_cert" in values or "client_key" in values),
        )
        if present
    ]
    if len(kinds) != 1:
        what = " and ".join(kinds) if kinds else "nothing usable"
        raise AuthError(f"UFM credentials from {origin}: give exactly one method, found {what}")
    if kinds[0] == "username/password":
        if not values.get("username") or not values.get("password"):
            raise AuthError(f"UFM credentials from {origin}: username and password both needed")
        return UfmCredentials(values["username"], values["password"], origin=origin)
    if kinds[0] == "token":
        return UfmCredentials(token=values["token"], origin=origin)
    return _cert_credentials(values, origin, base)


def _cert_credentials(values: dict[str, str], origin: str, base: Path | None) -> UfmCredentials:
    if "client_cert" not in values:
        raise AuthError(f"UFM credentials from {origin}: client_key given without client_cert")

    def resolve(text: str) -> Path:
        p = Path(text).expanduser()
        return p if p.is_absolute() or base is None else base / p

    cert = resolve(values["client_cert"])
    key = resolve(values["client_key"]) if "client_key" in values else None
    if not cert.is_file():
        raise AuthError(f"UFM client certificate {cert} not found")
    if key is not None:
        _check_private(key, "UFM client key")
    return UfmCredentials(client_cert=cert, client_key=key, origin=origin)


# --------------------------------------------------------------------------------------------
# Fetching


@dataclass(frozen=True, slots=True)
class UfmResponses:
    """The raw JSON text of every endpoint, exactly as UFM sent it (so it can be stored)."""

    systems: str
    ports: str
    links: str
    unhealthy_ports: str
    url: str = ""  # base URL without credentials, for messages and the snapshot

    def items(self) -> Iterator[tuple[str, str]]:
        """(endpoint key, text) pairs in :data:`ENDPOINTS` order."""
        for key in ENDPOINTS:
            yield key, getattr(self, key)


@dataclass(frozen=True, slots=True)
class FetchOptions:
    """How to talk to UFM; defaults suit a cron job against a healthy UFM."""

    ca_bundle: Path | None = None
    insecure: bool = False
    timeout: float = 30.0
    retries: int = 3  # extra attempts after the first, on connection errors and 5xx
    backoff: float = 0.5  # seconds before the first retry; doubles each time


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: urllib would forward the Authorization header to wherever UFM (or
    something pretending to be it) points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Retryable(Exception):
    """A failure worth another attempt; ``error`` is raised when attempts run out."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def fetch_ufm(
    url: str,
    creds: UfmCredentials,
    options: FetchOptions | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    warn: Callable[[str], None] | None = None,
) -> UfmResponses:
    """GET systems, ports, links and unhealthy ports from the UFM at *url*.

    Every body is checked to be a JSON list before anything is returned, so a caller that
    stores the result never stores garbage. Failures raise AuthError (401/403, unusable
    credentials), CollectError (network, TLS, 404, 5xx after retries) or InputError/ParseError
    (truncated body, invalid JSON, not a list).
    """
    opts = options or FetchOptions()
    base = _base_url(url)
    emit = warn or (lambda message: warnings.warn(message, UfmInsecureWarning, stacklevel=3))
    if base.startswith("http://"):
        emit(f"UFM URL {base} is plain http: credentials and fabric data travel unencrypted")
    opener = _opener(base, creds, opts, emit)
    texts = {
        key: _get_with_retries(opener, base, creds, path, opts, sleep)
        for key, path in ENDPOINTS.items()
    }
    return UfmResponses(url=base, **texts)


def collect_ufm(
    url: str,
    credentials_file: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    ca_bundle: Path | None = None,
    insecure: bool = False,
    timeout: float = 30.0,
    retries: int = 3,
    warn: Callable[[str], None] | None = None,
) -> UfmResponses:
    """Credentials (file, else the environment) + fetch, in one call for the CLI's
    ``--ufm URL --ufm-credentials FILE --ufm-ca-bundle FILE --ufm-insecure --ufm-timeout S``."""
    creds = load_credentials(credentials_file, os.environ if env is None else env)
    options = FetchOptions(ca_bundle=ca_bundle, insecure=insecure, timeout=timeout, retries=retries)
    return fetch_ufm(url, creds, options, warn=warn)


def _base_url(url: str) -> str:
    """``https://host[:port]`` from what the user typed; refuses credentials in the URL."""
    text = url.strip()
    if "://" not in text:
        text = "https://" + text
    parts = urllib.parse.urlsplit(text)
    if parts.username is not None or parts.password is not None:
        raise AuthError("do not put UFM credentials in the URL; use a credentials file or env")
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise InputError(f"not a UFM URL: {url!r} (expected https://HOST[:PORT])")
    path = re.sub(r"/+(ufmRest\w*)?/*$", "", parts.path)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _ssl_context(
    creds: UfmCredentials, opts: FetchOptions, emit: Callable[[str], None]
) -> ssl.SSLContext:
    try:
        ctx = ssl.create_default_context(cafile=str(opts.ca_bundle) if opts.ca_bundle else None)
    except (OSError, ssl.SSLError) as err:
        raise InputError(f"cannot load UFM CA bundle {opts.ca_bundle}: {_reason(err)}") from None
    if opts.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        emit(
            "TLS verification of the UFM certificate is OFF (--ufm-insecure): anyone on the "
            "path can impersonate UFM and read the credentials"
        )
    if creds.client_cert is not None:
        try:
            ctx.load_cert_chain(
                str(creds.client_cert), str(creds.client_key) if creds.client_key else None
            )
        except (OSError, ssl.SSLError) as err:
            raise AuthError(
                f"cannot load UFM client certificate {creds.client_cert}: {_reason(err)}"
            ) from None
    return ctx


def _opener(
    base: str, creds: UfmCredentials, opts: FetchOptions, emit: Callable[[str], None]
) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
    if base.startswith("https://"):
        handlers.append(urllib.request.HTTPSHandler(context=_ssl_context(creds, opts, emit)))
    return urllib.request.build_opener(*handlers)


def _get_with_retries(
    opener: urllib.request.OpenerDirector,
    base: str,
    creds: UfmCredentials,
    path: str,
    opts: FetchOptions,
    sleep: Callable[[float], None],
) -> str:
    """One endpoint, retried with exponential backoff on connection errors and 5xx."""
    url = f"{base}{creds.prefix}/{path}"
    attempts = max(0, opts.retries) + 1
    for attempt in range(attempts):
        try:
            return _get_once(opener, url, base, creds, path, opts.timeout)
        except _Retryable as failure:
            if attempt + 1 >= attempts:
                raise _final(failure.error, attempts) from None
            sleep(opts.backoff * (2**attempt))
    raise AssertionError("unreachable")


def _final(error: Exception, attempts: int) -> Exception:
    """The retryable error, with the attempt count added to its one line."""
    if attempts > 1 and isinstance(error, CollectError | InputError):
        return type(error)(f"{error} (after {attempts} attempts)")
    return error


def _get_once(
    opener: urllib.request.OpenerDirector,
    url: str,
    base: str,
    creds: UfmCredentials,
    path: str,
    timeout: float,
) -> str:
    headers = {"Accept": "application/json", **creds.headers()}
    request = urllib.request.Request(url, headers=headers, method="GET")
    where = f"{creds.prefix}/{path}"
    try:
        with opener.open(request, timeout=timeout) as response:
            body = _read_body(response, base, where)
    except urllib.error.HTTPError as err:
        raise _http_error(err, base, creds, where) from None
    except urllib.error.URLError as err:
        raise _url_error(err.reason, base, timeout) from None
    except TimeoutError:
        raise _Retryable(
            CollectError(f"UFM at {base}: {where} timed out after {timeout:g}s")
        ) from None
    except (ConnectionError, http.client.HTTPException, OSError) as err:
        raise _Retryable(
            CollectError(f"UFM at {base}: {where}: connection failed: {_reason(err)}")
        ) from None
    return _decode_json_list(body, base, where)


def _read_body(response: http.client.HTTPResponse, base: str, where: str) -> bytes:
    try:
        return response.read()
    except http.client.IncompleteRead as err:
        expected = len(err.partial) + (err.expected or 0)
        raise _Retryable(
            InputError(
                f"UFM at {base}: truncated response for {where} "
                f"(got {len(err.partial)} of {expected} bytes)"
            )
        ) from None


def _http_error(
    err: urllib.error.HTTPError, base: str, creds: UfmCredentials, where: str
) -> Exception:
    code = err.code
    err.close()
    origin = creds.origin or "the caller"
    if code == 401:
        hint = " (token revoked or expired?)" if creds.kind == "token" else ""
        return AuthError(
            f"UFM at {base} rejected the {creds.kind} credentials from {origin} "
            f"(HTTP 401 on {where}){hint}"
        )
    if code == 403:
        return AuthError(
            f"UFM at {base}: the {creds.kind} credentials from {origin} may not read {where} "
            "(HTTP 403)"
        )
    if code == 404:
        return CollectError(f"UFM at {base} has no {where} (404): is this UFM >= 6?")
    if 300 <= code < 400:
        location = err.headers.get("Location", "?") if err.headers else "?"
        return CollectError(
            f"UFM at {base}: {where} redirects to {location} (HTTP {code}); "
            "give the final https URL"
        )
    if code >= 500:
        return _Retryable(CollectError(f"UFM at {base}: {where} failed with HTTP {code}"))
    return CollectError(f"UFM at {base}: {where} failed with HTTP {code}")


def _url_error(reason: object, base: str, timeout: float) -> Exception:
    """A URLError's reason as one line; TLS failures are final, the rest retryable."""
    if isinstance(reason, ssl.SSLCertVerificationError):
        return CollectError(
            f"UFM at {base}: TLS certificate verification failed: "
            f"{reason.verify_message or _reason(reason)}; "
            "give --ufm-ca-bundle FILE (or, unsafely, --ufm-insecure)"
        )
    if isinstance(reason, ssl.SSLError):
        return CollectError(f"UFM at {base}: TLS handshake failed: {_reason(reason)}")
    if isinstance(reason, TimeoutError):
        return _Retryable(CollectError(f"UFM at {base}: timed out after {timeout:g}s"))
    if isinstance(reason, ConnectionRefusedError):
        return _Retryable(CollectError(f"cannot connect to UFM at {base}: connection refused"))
    if isinstance(reason, socket.gaierror):
        return CollectError(f"cannot connect to UFM at {base}: unknown host ({_reason(reason)})")
    text = _reason(reason) if isinstance(reason, BaseException) else str(reason)
    return _Retryable(CollectError(f"cannot connect to UFM at {base}: {text}"))


def _reason(err: BaseException) -> str:
    """A short, single-line reason (OSError.strerror, SSL reason, or str)."""
    if isinstance(err, ssl.SSLError) and err.reason:
        return str(err.reason)
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return " ".join(str(err).split()) or type(err).__name__


def _decode_json_list(body: bytes, base: str, where: str) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ParseError("response is not UTF-8 text", None, f"UFM {base}{where}") from None
    _load_list(text, f"UFM {base}{where}")
    return text


def _load_list(text: str, source: str) -> list[Any]:
    """Parse *text* as a JSON list; anything else is a ParseError naming line and column."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        hint = " (truncated?)" if err.pos >= len(text.rstrip()) else ""
        raise ParseError(
            f"invalid JSON{hint}: {err.msg} at column {err.colno}", err.lineno, source
        ) from None
    if not isinstance(data, list):
        raise ParseError(
            f"expected a JSON list, got a JSON {_json_type(data)} (not a UFM response?)",
            None,
            source,
        )
    return data


def _json_type(value: object) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


# --------------------------------------------------------------------------------------------
# Snapshots


def snapshot_files(responses: UfmResponses) -> dict[str, str]:
    """Snapshot-relative path -> text (``ufm/systems.json``, …, ``ufm/url.txt``), for a
    collector that writes the whole snapshot atomically itself (``collect.write_snapshot``)."""
    files = {f"{SNAPSHOT_SUBDIR}/{key}.json": text for key, text in responses.items()}
    if responses.url:
        files[f"{SNAPSHOT_SUBDIR}/url.txt"] = responses.url + "\n"
    return files


def store_responses(responses: UfmResponses, directory: Path) -> Path:
    """Write every raw response to ``<directory>/ufm/<endpoint>.json`` (temp file + rename, so
    a crash never leaves half a snapshot file). Returns the ``ufm`` folder."""
    folder = directory / SNAPSHOT_SUBDIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for rel, text in snapshot_files(responses).items():
            _atomic_write(directory / rel, text)
    except OSError as err:
        raise OutputError(f"cannot write UFM snapshot under {folder}: {err.strerror}") from None
    return folder


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fp:
            fp.write(text)
            fp.flush()
            os.fsync(fp.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def has_snapshot(directory: Path) -> bool:
    """Whether *directory* holds a UFM snapshot (so the CLI can pick the right loader)."""
    return (directory / SNAPSHOT_SUBDIR / "links.json").is_file()


def load_responses(directory: Path) -> UfmResponses:
    """Read a snapshot written by :func:`store_responses` (``<directory>/ufm/*.json``)."""
    folder = directory / SNAPSHOT_SUBDIR
    if not folder.is_dir() and (directory / "links.json").is_file():
        folder = directory
    texts: dict[str, str] = {}
    for key in ENDPOINTS:
        path = folder / f"{key}.json"
        try:
            texts[key] = path.read_text(encoding="utf-8")
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


# --------------------------------------------------------------------------------------------
# Translation into the Fabric model

SPEED_ORDER = ("???", "SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR", "GDR")
_SPEED_RANK = {name: rank for rank, name in enumerate(SPEED_ORDER)}
# Per-lane signalling rates (Gb/s) some UFM versions print instead of names.
_LANE_RATES = {
    2.5: "SDR",
    5.0: "DDR",
    10.0: "QDR",
    10.3125: "FDR10",
    14.0: "FDR",
    14.0625: "FDR",
    25.0: "EDR",
    25.78125: "EDR",
    50.0: "HDR",
    53.125: "HDR",
    100.0: "NDR",
    106.25: "NDR",
    200.0: "XDR",
    212.5: "XDR",
}
_UNKNOWN = {"", "n/a", "na", "unknown", "none", "?", "???", "-"}
_RATE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(g|gb|gbps|gb/s)?\s*$", re.IGNORECASE)
_SIMPLE_NAME = re.compile(r"^[^\s:;]+$")
_AGGREGATION = re.compile(r"aggregation node", re.IGNORECASE)


def ufm_speed(text: object, width: str = "") -> str:
    """UFM's ``active_speed`` as ibnetdiscover names it: ``HDR`` stays; a number is read as
    the port rate first (``200 Gb/s`` at *width* ``4x`` is HDR, as ibstat prints rates), else
    as a lane rate (``53.125 Gbps`` is HDR); unknown is ``???``."""
    raw = str(text if text is not None else "").strip()
    if raw.lower() in _UNKNOWN:
        return "???"
    upper = raw.upper()
    if upper in _SPEED_RANK:
        return upper
    m = _RATE_RE.match(raw)
    if m:
        rate, lanes = float(m.group(1)), _lanes(width)
        if lanes and rate / lanes in _LANE_RATES:  # a port rate, as ibstat prints it
            return _LANE_RATES[rate / lanes]
        if rate in _LANE_RATES:
            return _LANE_RATES[rate]
    return upper


def ufm_width(text: object) -> str:
    """``4x`` / ``4X`` / ``x4`` / ``4`` → ``4x``; unknown → ``???`` (as ibnetdiscover prints)."""
    raw = str(text if text is not None else "").strip().lower()
    digits = raw.strip("x")
    return f"{int(digits)}x" if digits.isdigit() else "???"


def _lanes(width: str) -> int:
    digits = width.lower().rstrip("x")
    return int(digits) if digits.isdigit() else 0


def _slower(a: str, b: str) -> str:
    return a if _SPEED_RANK.get(a, 0) <= _SPEED_RANK.get(b, 0) else b


@dataclass(slots=True)
class _Port:
    guid: str
    number: int
    switch: bool
    description: str  # node description of a CA port; unused for switch ports
    system: str  # system guid the port belongs to
    lid: int | None
    speed: str
    width: str
    peer: tuple[str, int] | None = None


@dataclass(slots=True)
class _System:
    guid: str
    type: str
    name: str
    model: str


@dataclass(slots=True)
class _Build:
    """Parse state: decoded responses plus the fabric under construction."""

    source: str
    systems: dict[str, _System] = field(default_factory=dict)
    ports: dict[tuple[str, int], _Port] = field(default_factory=dict)
    fabric: Fabric = field(default_factory=Fabric)
    mismatches: int = 0
    first_mismatch: str = ""


def fabric_from_ufm(responses: UfmResponses, source: str = "") -> Fabric:
    """Build the :class:`Fabric` the ibnetdiscover parser would build for the same fabric.

    Switches and CAs come from the ports (one node GUID each; a director chassis is many switch
    ASICs, a host many HCAs), named from their systems; cables from the links, with speed from
    the ports at both ends (the slower wins); unhealthy ports become ``unhealthy-port`` notes.
    Malformed responses raise ParseError naming the endpoint and entry.
    """
    st = _Build(source or responses.url or "ufm")
    st.fabric.source = st.source
    for entry, where in _entries(responses.systems, st.source, "systems"):
        _add_system(st, entry, where)
    for entry, where in _entries(responses.ports, st.source, "ports"):
        _add_port(st, entry, where)
    _add_devices(st)
    cables: dict[tuple[str, int, str, int], Link] = {}
    for entry, where in _entries(responses.links, st.source, "links"):
        link = _link(st, entry, where)
        cables.setdefault((link.a_guid, link.a_port, link.b_guid, link.b_port), link)
    _add_port_only_cables(st, cables)
    st.fabric.links = Links.of(
        sorted(cables.values(), key=lambda k: (k.a_guid, k.a_port, k.b_guid, k.b_port))
    )
    _note_isolated(st)
    if st.mismatches:
        st.fabric.notes.append(
            Note(
                "link-mismatch",
                "",
                f"{st.mismatches} cable(s) reported with different speeds at their two ends; "
                f"the slower was kept (first: {st.first_mismatch})",
            )
        )
    for entry, where in _entries(responses.unhealthy_ports, st.source, "unhealthy_ports"):
        st.fabric.notes.append(_unhealthy_note(entry, where))
    if not st.fabric.switches and not st.fabric.cas:
        raise ParseError("UFM reports no InfiniBand devices", None, st.source)
    return st.fabric


def _entries(text: str, source: str, key: str) -> Iterator[tuple[dict[str, Any], str]]:
    data = _load_list(text, f"{source}/{key}")
    for index, entry in enumerate(data):
        where = f"{source}/{key}[{index}]"
        if not isinstance(entry, dict):
            raise ParseError(f"entry is a JSON {_json_type(entry)}, not an object", None, where)
        yield entry, where


def _field(entry: Mapping[str, Any], where: str, *names: str) -> Any:
    """The first present field of *names*; missing → ParseError (unexpected schema)."""
    for name in names:
        if name in entry and entry[name] is not None:
            return entry[name]
    raise ParseError(f"missing field {names[0]!r} (not a UFM response?)", None, where)


def _guid(value: object, where: str) -> str:
    try:
        return normalize_guid(str(value))
    except ValueError:
        raise ParseError(f"bad GUID {value!r}", None, where) from None


def _int(value: object, where: str, what: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise ParseError(f"bad {what} {value!r}", None, where) from None


def _lid(value: object) -> int | None:
    try:
        lid = int(str(value).strip())
    except ValueError:
        return None
    return None if lid in (0, 0xFFFF) else lid


def _add_system(st: _Build, entry: Mapping[str, Any], where: str) -> None:
    guid = _guid(_field(entry, where, "system_guid", "guid"), where)
    kind = str(_field(entry, where, "type")).strip().lower()
    name = str(entry.get("system_name") or "").strip()
    model = str(entry.get("model") or entry.get("description") or "").strip()
    st.systems[guid] = _System(guid, kind, name, model)


def _add_port(st: _Build, entry: Mapping[str, Any], where: str) -> None:
    name = str(entry.get("name") or "")
    guid_raw = entry.get("guid") or name.rpartition("_")[0]
    if not guid_raw:
        raise ParseError("missing field 'guid' (not a UFM response?)", None, where)
    guid = _guid(guid_raw, where)
    number_raw = entry.get("number", name.rpartition("_")[2] if "_" in name else None)
    if number_raw is None:
        raise ParseError("missing field 'number' (not a UFM response?)", None, where)
    number = _int(number_raw, where, "port number")
    system = _guid(entry["systemID"], where) if entry.get("systemID") else guid
    width = ufm_width(entry.get("active_width"))
    port = _Port(
        guid=guid,
        number=number,
        switch=_is_switch_port(st, entry, system),
        description=str(entry.get("node_description") or ""),
        system=system,
        lid=_lid(entry.get("lid")),
        speed=ufm_speed(entry.get("active_speed"), width),
        width=width,
        peer=_peer(entry.get("peer")),
    )
    st.ports[(guid, number)] = port


def _peer(value: object) -> tuple[str, int] | None:
    """``<guid>_<port>`` → (guid, port); ``N/A``, empty or odd values → None."""
    guid, sep, number = str(value or "").strip().rpartition("_")
    if not sep or not number.isdigit():
        return None
    try:
        return normalize_guid(guid), int(number)
    except ValueError:
        return None


def _is_switch_port(st: _Build, entry: Mapping[str, Any], system: str) -> bool:
    """The port's own ``description`` (``Switch IB Port``) decides; without one, its system's
    type. A SHARP aggregation node sits inside a switch but is a CA: were it taken for a switch
    it would share the switch's name and rename both to ``sw-<guid>``."""
    if _AGGREGATION.search(str(entry.get("node_description") or "")):
        return False
    desc = str(entry.get("description") or "").lower()
    if desc:
        return "switch" in desc
    sys = st.systems.get(system)
    return sys is not None and sys.type == "switch"


def _switch_description(st: _Build, system_guid: str, guid: str) -> str:
    """``MF0;<name>:<model>/U1`` as the switch itself reports it, so naming matches ibnetdiscover.

    A name with blanks is kept as is (ibnetdiscover's naming ignores multi-word descriptions);
    an unnamed switch (UFM then uses the GUID as name) gets an empty description."""
    sys = st.systems.get(system_guid)
    if sys is None:
        return ""
    name = sys.name
    if not name or _is_guid_text(name, guid, system_guid):
        return ""
    if sys.model and _SIMPLE_NAME.match(name):
        return f"MF0;{name}:{sys.model}/U1"
    return name


def _is_guid_text(name: str, *guids: str) -> bool:
    try:
        return normalize_guid(name) in guids
    except ValueError:
        return False


def _add_devices(st: _Build) -> None:
    """One Switch or Ca per node GUID seen in the ports (port count = highest port number),
    plus switch systems that listed no port at all."""
    fab = st.fabric
    for (guid, number), port in sorted(st.ports.items()):
        if port.switch:
            sw = fab.switches.get(guid)
            if sw is None:
                desc = _switch_description(st, port.system, guid)
                fab.switches[guid] = Switch(guid, desc, number, port.lid)
            else:
                sw.nports = max(sw.nports, number)
                sw.lid = sw.lid if sw.lid is not None else port.lid
        else:
            ca = fab.cas.get(guid)
            if ca is None:
                fab.cas[guid] = Ca(guid, port.description, number)
            else:
                ca.nports = max(ca.nports, number)
    with_ports = {port.system for port in st.ports.values()}
    for guid, sys in st.systems.items():
        if sys.type == "switch" and guid not in with_ports and fab.kind_of(guid) is None:
            fab.switches[guid] = Switch(guid, _switch_description(st, guid, guid), 0, None)


def _link(st: _Build, entry: Mapping[str, Any], where: str) -> Link:
    a = _guid(_field(entry, where, "source_guid"), where)
    ap = _int(_field(entry, where, "source_port"), where, "source_port")
    b = _guid(_field(entry, where, "destination_guid"), where)
    bp = _int(_field(entry, where, "destination_port"), where, "destination_port")
    pa, pb = st.ports.get((a, ap)), st.ports.get((b, bp))
    width = ufm_width(entry.get("width") or (pa.width if pa else "") or (pb.width if pb else ""))
    speeds = [p.speed for p in (pa, pb) if p is not None]
    speed = speeds[0] if len(speeds) == 1 else _slower(*speeds) if speeds else "???"
    if len(speeds) == 2 and speeds[0] != speeds[1]:
        if not st.mismatches:
            st.first_mismatch = f"{a}[{ap}]-{b}[{bp}] {speeds[0]} vs {speeds[1]}"
        st.mismatches += 1
    for guid, port, desc_key in ((a, ap, "source"), (b, bp, "destination")):
        if st.fabric.kind_of(guid) is None:
            _add_link_only_device(st, guid, port, entry, desc_key, where)
    return Link.between(a, ap, b, bp, width, speed)


def _add_port_only_cables(st: _Build, cables: dict[tuple[str, int, str, int], Link]) -> None:
    """Cables both of whose ports name each other as peer but that the links endpoint left
    out (UFM lists only some link states there): added, with one summary Note."""
    added = 0
    for (guid, number), port in sorted(st.ports.items()):
        if port.peer is None or st.fabric.kind_of(port.peer[0]) is None:
            continue
        link = Link.between(guid, number, *port.peer, port.width, port.speed)
        key = (link.a_guid, link.a_port, link.b_guid, link.b_port)
        if key in cables:
            continue
        other = st.ports.get(port.peer)
        speed = _slower(port.speed, other.speed) if other is not None else port.speed
        cables[key] = Link.between(guid, number, *port.peer, port.width, speed)
        added += 1
    if added:
        st.fabric.notes.append(
            Note(
                "ports-only-links",
                "",
                f"{added} cable(s) appear in UFM ports but not in UFM links; taken from the ports",
            )
        )


def _add_link_only_device(
    st: _Build, guid: str, port: int, entry: Mapping[str, Any], end: str, where: str
) -> None:
    """A link end with no port record: create it from what the link says, with a Note."""
    desc = str(entry.get(f"{end}_port_node_description") or "").strip()
    sys = st.systems.get(guid)
    dname = str(entry.get(f"{end}_port_dname") or port)
    is_switch = (sys is not None and sys.type == "switch") or desc.endswith(f":{dname}")
    if is_switch:
        sw_desc = _switch_description(st, guid, guid) if sys else desc.rpartition(":")[0]
        st.fabric.switches[guid] = Switch(guid, sw_desc, port, None)
    else:
        st.fabric.cas[guid] = Ca(guid, desc, port)
    st.fabric.notes.append(
        Note(
            "no-block",
            guid,
            f"{guid} ({desc!r}) appears only in UFM links ({where}); "
            "created from the link's node description",
        )
    )


def _note_isolated(st: _Build) -> None:
    linked = {g for link in st.fabric.links for g in (link.a_guid, link.b_guid)}
    for guid in sorted(set(st.fabric.switches) | set(st.fabric.cas)):
        if guid not in linked:
            st.fabric.notes.append(Note("isolated", guid, f"{guid} has no active link"))


def _unhealthy_note(entry: Mapping[str, Any], where: str) -> Note:
    guid = _guid(_field(entry, where, "UnhealthyGUID"), where)
    node = str(entry.get("UnhealthyNode") or guid)
    port = entry.get("UnhealthyPortNumber", entry.get("UnhealthyPort", "?"))
    condition = entry.get("Condition") or "?"
    if isinstance(condition, list):
        condition = ",".join(str(c) for c in condition)
    peer = entry.get("PeerNode")
    peer_text = f"; peer {peer} port {entry.get('PeerPortNumber', '?')}" if peer else ""
    since = f" since {entry['StatusTime']}" if entry.get("StatusTime") else ""
    return Note(
        "unhealthy-port",
        guid,
        f"{node} port {port} is marked unhealthy in UFM ({condition}, "
        f"{entry.get('State', '?')}){since}{peer_text}",
    )


# --------------------------------------------------------------------------------------------
# Reading real ``systems`` responses on their own (inventory, tests)


@dataclass(frozen=True, slots=True)
class UfmSystem:
    """The fields of one ``resources/systems`` entry that topology cares about."""

    guid: str
    name: str
    type: str
    model: str


def parse_systems(text: str, source: str = "systems") -> list[UfmSystem]:
    """The systems of a ``GET resources/systems`` response, in response order."""
    out = []
    for entry, where in _entries(text, source, "systems"):
        guid = _guid(_field(entry, where, "system_guid", "guid"), where)
        out.append(
            UfmSystem(
                guid=guid,
                name=str(entry.get("system_name") or "").strip(),
                type=str(_field(entry, where, "type")).strip().lower(),
                model=str(entry.get("model") or entry.get("description") or "").strip(),
            )
        )
    return out


__all__ = [
    "ENDPOINTS",
    "FetchOptions",
    "UfmCredentials",
    "UfmInsecureWarning",
    "UfmResponses",
    "UfmSystem",
    "collect_ufm",
    "fabric_from_ufm",
    "fetch_ufm",
    "has_snapshot",
    "load_credentials",
    "load_responses",
    "parse_systems",
    "snapshot_files",
    "store_responses",
    "ufm_speed",
    "ufm_width",
]
