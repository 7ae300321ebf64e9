"""The UFM REST client: stdlib HTTPS, verification on by default, no redirects, timeouts, and
bounded retries with exponential backoff on connection errors and 5xx.

Every failure becomes one clear error line (AuthError, CollectError, InputError or ParseError)
that never carries a credential, and every body is checked to be a JSON list before anything
is returned, so a caller that stores the responses never stores garbage.
"""

from __future__ import annotations

import http.client
import os
import re
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topograph_slurm.errors import AuthError, CollectError, InputError, ParseError
from topograph_slurm.sources.ufm.credentials import UfmCredentials, load_credentials
from topograph_slurm.sources.ufm.responses import ENDPOINTS, UfmResponses, load_list


class UfmInsecureWarning(UserWarning):
    """TLS verification was switched off (``--ufm-insecure``) or the URL is plain http."""


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
    load_list(text, f"UFM {base}{where}")
    return text
