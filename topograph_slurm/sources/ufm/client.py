"""The REST client of the fabric appliances (UFM, NetQ; ``session`` serves both): stdlib
http.client over TLS (verification on by default), no redirects, a per-operation timeout,
one deadline for the whole fetch, a size cap per response, and bounded retries with
exponential backoff on connection errors and 5xx.

Why two time limits: ``timeout`` bounds each socket operation (connect, handshake, each read),
so a UFM that goes silent is noticed; but a server that trickles one byte every few seconds
never lets it fire. ``deadline`` bounds the whole fetch — every endpoint, attempt and backoff —
by shutting the socket in flight when it passes, so a cron run always ends.

Every failure becomes one clear error line (AuthError, CollectError, InputError or ParseError)
that never carries a credential, and every body is checked to be a JSON list before anything
is returned, so a caller that stores the responses never stores garbage.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import os
import re
import socket
import ssl
import threading
import time
import urllib.parse
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from topograph_slurm.errors import (
    AuthError,
    CollectError,
    InputError,
    ParseError,
    TopographError,
    UsageError,
)
from topograph_slurm.model.numbers import natural
from topograph_slurm.sources.ufm.credentials import UFM, Appliance, UfmCredentials, load_credentials
from topograph_slurm.sources.ufm.responses import ENDPOINTS, UfmResponses, load_list

MIB = 1024 * 1024
_CHUNK = 1 << 16  # bytes per read: the size cap is checked, and memory grows, chunk by chunk


class UfmInsecureWarning(UserWarning):
    """TLS verification was switched off (``--ufm-insecure``) or the URL is plain http."""


@dataclass(frozen=True, slots=True)
class FetchOptions:
    """How to talk to UFM; defaults suit a cron job against a healthy UFM."""

    ca_bundle: Path | None = None
    insecure: bool = False
    timeout: float = 30.0  # seconds per socket operation (connect, TLS handshake, each read)
    retries: int = 3  # extra attempts after the first, on connection errors and 5xx
    backoff: float = 0.5  # seconds before the first retry; doubles each time
    deadline: float = 300.0  # seconds for the whole fetch: all endpoints, retries, backoff
    max_bytes: int = 512 * MIB  # largest response body accepted, per endpoint

    def __post_init__(self) -> None:
        """Flags are range-checked by click; config values and library callers come here."""
        for name, value in (("timeout", self.timeout), ("deadline", self.deadline)):
            if not (value > 0 and math.isfinite(value)):  # NaN fails `> 0` too
                raise UsageError(
                    f"--ufm-{name} (config ufm_{name}) must be a number of seconds above 0, "
                    f"got {value}"
                )
        if self.max_bytes < 1:
            raise UsageError(
                "--ufm-max-response-mib (config ufm_max_response_mib) must be at least 1"
            )


@dataclass(frozen=True, slots=True)
class _Target:
    """Where the appliance is: ``base`` (``scheme://host[:port][/path]``) for messages and
    the result; ``appliance`` names it and its flags in every message."""

    base: str
    tls: bool
    host: str
    port: int
    path: str
    appliance: Appliance = UFM

    @property
    def at(self) -> str:
        """``UFM at https://host``: how every message names the server."""
        return f"{self.appliance.name} at {self.base}"

    def flag(self, name: str) -> str:
        """The flag that sets *name* for this appliance (``--ufm-deadline``)."""
        return f"--{self.appliance.stem}-{name}"


class _Retryable(Exception):
    """A failure worth another attempt; ``error`` is raised when attempts run out."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class _Deadline:
    """The one time limit of a fetch. A timer shuts the socket in flight when it passes; the
    blocked read then fails at once and :meth:`error` names the deadline instead."""

    def __init__(self, seconds: float, target: _Target) -> None:
        self.seconds = seconds
        self._target = target
        self._end = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    @contextlib.contextmanager
    def running(self) -> Iterator[_Deadline]:
        self._timer.start()
        try:
            yield self
        finally:
            self._timer.cancel()

    def remaining(self) -> float:
        return self._end - time.monotonic()

    @property
    def expired(self) -> bool:
        return self._fired or self.remaining() <= 0

    def watch(self, sock: socket.socket | None) -> None:
        """The socket in flight, or None once it is closed (so a late timer never shuts a
        reused descriptor); shut at once when the time is already up."""
        with self._lock:
            self._sock = sock
            if sock is not None and self._fired:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self._fired = True
            if self._sock is not None:
                _shut(self._sock)

    def error(self, where: str) -> CollectError:
        return CollectError(
            f"{self._target.at}: no complete answer within the {self.seconds:g}s deadline "
            f"({self._target.flag('deadline')}), stopped at {where}"
        )


def _shut(sock: socket.socket) -> None:
    """Wake any thread blocked on *sock* (the plain-socket shutdown, also under TLS)."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Connection(http.client.HTTPConnection):
    """One HTTP(S) connection whose socket the deadline can reach: http.client's own
    HTTPSConnection wraps it in TLS inside ``connect()``, out of sight. No redirects are ever
    followed (http.client has none), so the Authorization header goes to UFM only."""

    def __init__(
        self, target: _Target, timeout: float, tls: ssl.SSLContext | None, deadline: _Deadline
    ) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._tls = tls
        self._deadline = deadline
        if tls is not None:
            self.default_port = 443  # the Host header carries no ":443"

    def connect(self) -> None:
        super().connect()
        self._deadline.watch(self.sock)
        if self._tls is not None:
            wrapped = self._tls.wrap_socket(
                self.sock, server_hostname=self.host, do_handshake_on_connect=False
            )
            self.sock = wrapped
            self._deadline.watch(wrapped)
            wrapped.do_handshake()

    def close(self) -> None:
        self._deadline.watch(None)
        super().close()


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
    credentials), CollectError (network, TLS, 404, 5xx after retries, the deadline, the size
    cap) or InputError/ParseError (truncated body, invalid JSON, not a list).
    """
    with session(url, creds, options, sleep=sleep, warn=warn) as ufm:
        texts = {key: ufm.get(path) for key, path in ENDPOINTS.items()}
    return UfmResponses(url=ufm.target.base, **texts)


@contextlib.contextmanager
def session(
    url: str,
    creds: UfmCredentials,
    options: FetchOptions | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    warn: Callable[[str], None] | None = None,
) -> Iterator[Session]:
    """One fetch from the appliance *creds* are for (UFM, NetQ): its requests share the TLS
    context and the one deadline, which ends with the ``with`` block."""
    opts = options or FetchOptions()
    target = _target(url, creds.appliance)
    name = target.appliance.name
    emit = warn or (lambda message: warnings.warn(message, UfmInsecureWarning, stacklevel=4))
    if not target.tls:
        emit(
            f"{name} URL {target.base} is plain http: credentials and fabric data travel "
            "unencrypted"
        )
    tls = _ssl_context(target, creds, opts, emit) if target.tls else None
    with _Deadline(opts.deadline, target).running() as deadline:
        yield Session(target, creds, opts, tls, deadline, sleep)


def collect_ufm(
    url: str,
    credentials_file: Path | None = None,
    options: FetchOptions | None = None,
    *,
    env: Mapping[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> UfmResponses:
    """Credentials (file, else the environment) + fetch, in one call for the CLI's
    ``--ufm URL --ufm-credentials FILE`` and the options built from the other flags."""
    creds = load_credentials(credentials_file, os.environ if env is None else env)
    return fetch_ufm(url, creds, options, warn=warn)


def _target(url: str, appliance: Appliance = UFM) -> _Target:
    """Where to connect, from what the user typed; refuses credentials in the URL, and any
    character http.client would reject with the URL in its message."""
    text = url.strip()
    if not all(" " < ch < "\x7f" for ch in text):
        raise InputError(
            f"the {appliance.name} URL contains a space, a control or a non-ASCII character"
        )
    if "://" not in text:
        text = "https://" + text
    parts = urllib.parse.urlsplit(text)
    if parts.username is not None or parts.password is not None:
        raise AuthError(
            f"do not put {appliance.name} credentials in the URL; use a credentials file or env"
        )
    path = re.sub(r"/+(ufmRest\w*)?/*$", "", parts.path)
    base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise InputError(f"not a {appliance.name} URL: {base!r} (expected https://HOST[:PORT])")
    try:
        port = parts.port
    except ValueError:
        raise InputError(f"not a {appliance.name} URL: {base!r} has an invalid port") from None
    tls = parts.scheme == "https"
    return _Target(base, tls, parts.hostname, port or (443 if tls else 80), path, appliance)


def _ssl_context(
    target: _Target, creds: UfmCredentials, opts: FetchOptions, emit: Callable[[str], None]
) -> ssl.SSLContext:
    name = target.appliance.name
    try:
        ctx = ssl.create_default_context(cafile=str(opts.ca_bundle) if opts.ca_bundle else None)
    except (OSError, ssl.SSLError) as err:
        raise InputError(f"cannot load {name} CA bundle {opts.ca_bundle}: {_reason(err)}") from None
    if opts.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        emit(
            f"TLS verification of the {name} certificate is OFF ({target.flag('insecure')}): "
            f"anyone on the path can impersonate {name} and read the credentials"
        )
    if creds.client_cert is not None:
        try:
            ctx.load_cert_chain(
                str(creds.client_cert), str(creds.client_key) if creds.client_key else None
            )
        except (OSError, ssl.SSLError) as err:
            raise AuthError(
                f"cannot load {name} client certificate {creds.client_cert}: {_reason(err)}"
            ) from None
    return ctx


@dataclass(slots=True)
class Session:
    """One fetch: where, who, how, and the deadline every request shares."""

    target: _Target
    creds: UfmCredentials
    opts: FetchOptions
    tls: ssl.SSLContext | None
    deadline: _Deadline
    sleep: Callable[[float], None]

    def get(self, path: str) -> str:
        """One UFM endpoint as checked JSON list text."""
        where = f"{self.creds.prefix}/{path}"
        return self.request("GET", where, self.creds.headers(), check=load_list)

    def request(
        self,
        method: str,
        where: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
        check: Callable[[str, str], object] = load_list,
    ) -> str:
        """One request to *where* (the path below the URL, query included) as UTF-8 text that
        *check* accepted (it raises on a wrong shape), retried with exponential backoff on
        connection errors, 5xx and truncated bodies while attempts and the deadline last."""
        attempts = max(0, self.opts.retries) + 1
        for attempt in range(1, attempts + 1):
            try:
                raw = self._get_once(method, where, headers, body)
                return _decode_checked(raw, self.target, where, check)
            except _Retryable as failure:
                self._retry_or_raise(failure.error, attempt, attempts)
        raise AssertionError("unreachable")

    def _retry_or_raise(self, error: Exception, done: int, attempts: int) -> None:
        """Sleep before the next attempt, or raise the final error of this endpoint."""
        if done >= attempts:
            raise _final(error, done) from None
        pause = self.opts.backoff * (2 ** (done - 1))
        if pause >= self.deadline.remaining():
            note = f"no time left for another within the {self.deadline.seconds:g}s deadline"
            raise _final(error, done, note) from None
        self.sleep(pause)

    def _get_once(
        self, method: str, where: str, headers: Mapping[str, str], body: bytes | None
    ) -> bytearray:
        """One request; the body or an error (a deadline that passed meanwhile wins)."""
        timeout = min(self.opts.timeout, max(self.deadline.remaining(), 0.001))
        conn = _Connection(self.target, timeout, self.tls, self.deadline)
        try:
            answer = self._exchange(conn, method, where, headers, body)
        except (_Retryable, TopographError):
            if self.deadline.expired:
                raise self.deadline.error(where) from None
            raise
        finally:
            conn.close()
        if self.deadline.expired:  # the timer may have cut short a body without a length
            raise self.deadline.error(where)
        return answer

    def _exchange(
        self,
        conn: _Connection,
        method: str,
        where: str,
        headers: Mapping[str, str],
        body: bytes | None,
    ) -> bytearray:
        target = self.target
        try:
            conn.connect()
        except OSError as err:
            raise _connect_error(err, target, self.opts.timeout) from None
        try:
            sent = {"Accept": "application/json", **headers}
            conn.request(method, target.path + where, body=body, headers=sent)
            response = conn.getresponse()
            if not 200 <= response.status < 300:
                raise _status_error(response, target, self.creds, where)
            return _read_capped(response, target, where, self.opts.max_bytes)
        except TimeoutError:
            message = f"{target.at}: {where} timed out after {self.opts.timeout:g}s"
            raise _Retryable(CollectError(message)) from None
        except (OSError, http.client.HTTPException) as err:
            message = f"{target.at}: {where}: connection failed: {_reason(err)}"
            raise _Retryable(CollectError(message)) from None


def _final(error: Exception, attempts: int, note: str = "") -> Exception:
    """The retryable error, with the attempt count (and why no more) added to its one line."""
    if isinstance(error, CollectError | InputError) and (attempts > 1 or note):
        detail = f"after {attempts} attempt{'s' if attempts > 1 else ''}"
        return type(error)(f"{error} ({detail}{'; ' + note if note else ''})")
    return error


def _read_capped(
    response: http.client.HTTPResponse, target: _Target, where: str, limit: int
) -> bytearray:
    """The body, read chunk by chunk and refused as soon as it passes *limit* bytes (before
    reading anything when Content-Length already says so)."""
    declared = _content_length(response)
    if declared is not None and declared > limit:
        raise _too_large(target, where, limit, f"announces {declared} bytes, over")
    body = bytearray()
    try:
        while chunk := response.read1(_CHUNK):
            body += chunk
            if len(body) > limit:
                raise _too_large(target, where, limit, "is larger than")
    except http.client.IncompleteRead:  # a chunked body that ended early
        raise _truncated(target, where, f"got {len(body)} bytes, then the end") from None
    if declared is not None and len(body) < declared:
        raise _truncated(target, where, f"got {len(body)} of {declared} bytes")
    return body


def _truncated(target: _Target, where: str, detail: str) -> _Retryable:
    return _Retryable(InputError(f"{target.at}: truncated response for {where} ({detail})"))


def _content_length(response: http.client.HTTPResponse) -> int | None:
    value = response.getheader("Content-Length")
    return natural(value) if value is not None else None


def _too_large(target: _Target, where: str, limit: int, size: str) -> CollectError:
    cap = f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"
    stem = target.appliance.stem
    return CollectError(
        f"{target.at}: {where} {size} the {cap} limit per response "
        f"(--{stem}-max-response-mib / {stem}_max_response_mib)"
    )


def _status_error(
    response: http.client.HTTPResponse, target: _Target, creds: UfmCredentials, where: str
) -> Exception:
    at = target.at
    code = response.status
    origin = creds.origin or "the caller"
    if code == 401:
        hint = " (token revoked or expired?)" if creds.kind == "token" else ""
        return AuthError(
            f"{at} rejected the {creds.kind} credentials from {origin} (HTTP 401 on {where}){hint}"
        )
    if code == 403:
        return AuthError(
            f"{at}: the {creds.kind} credentials from {origin} may not read {where} (HTTP 403)"
        )
    if code == 404:
        return CollectError(f"{at} has no {where} (404){target.appliance.missing}")
    if 300 <= code < 400:
        location = _printable(response.getheader("Location", "?"))
        return CollectError(
            f"{at}: {where} redirects to {location} (HTTP {code}); give the final https URL"
        )
    if code >= 500:
        return _Retryable(CollectError(f"{at}: {where} failed with HTTP {code}"))
    return CollectError(f"{at}: {where} failed with HTTP {code}")


def _connect_error(err: OSError, target: _Target, timeout: float) -> Exception:
    """A connect or TLS handshake failure as one line; TLS failures are final, the rest
    retryable."""
    if isinstance(err, ssl.SSLCertVerificationError):
        return CollectError(
            f"{target.at}: TLS certificate verification failed: "
            f"{err.verify_message or _reason(err)}; "
            f"give {target.flag('ca-bundle')} FILE (or, unsafely, {target.flag('insecure')})"
        )
    if isinstance(err, ssl.SSLError):
        return CollectError(f"{target.at}: TLS handshake failed: {_reason(err)}")
    if isinstance(err, TimeoutError):
        return _Retryable(CollectError(f"{target.at}: timed out after {timeout:g}s"))
    if isinstance(err, ConnectionRefusedError):
        return _Retryable(CollectError(f"cannot connect to {target.at}: connection refused"))
    if isinstance(err, socket.gaierror):
        return CollectError(f"cannot connect to {target.at}: unknown host ({_reason(err)})")
    return _Retryable(CollectError(f"cannot connect to {target.at}: {_reason(err)}"))


def _printable(text: str) -> str:
    """*text* (from the server or the OS) on one line: control characters become spaces."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def _reason(err: BaseException) -> str:
    """A short, single-line reason (OSError.strerror, SSL reason, or str)."""
    if isinstance(err, ssl.SSLError) and err.reason:
        return _printable(str(err.reason))
    if isinstance(err, OSError) and err.strerror:
        return _printable(err.strerror)
    return _printable(str(err)) or type(err).__name__


def _decode_checked(
    body: bytearray, target: _Target, where: str, check: Callable[[str, str], object]
) -> str:
    source = f"{target.appliance.name} {target.base}{where}"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ParseError("response is not UTF-8 text", None, source) from None
    check(text, source)
    return text
