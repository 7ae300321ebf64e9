"""NetQ's REST API, through the appliance client UFM uses (TLS, timeouts, one deadline, size
cap, retries): log in with the account's username and password (a bearer token and the
premises come back), select each premises that has data, and fetch its topology graph.

The paths and bodies are NetQ's (read from NVIDIA topograph's NetQ provider): ``POST
api/netq/auth/v1/login`` with ``{"username", "password"}``, ``GET
api/netq/auth/v1/select/opid/<opid>`` (a new token for that premises), ``POST
api/netq/telemetry/v1/object/topologygraph/fetch-topology?timestamp=0``. The password travels
in the login body only, never in a URL or a message.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import msgspec

from topograph_slurm.errors import AuthError, CollectError
from topograph_slurm.sources.netq.schema import Login
from topograph_slurm.sources.ufm.client import FetchOptions, Session, session
from topograph_slurm.sources.ufm.credentials import NETQ, UfmCredentials, load_credentials
from topograph_slurm.sources.ufm.responses import load_list
from topograph_slurm.sources.ufm.schema import decode_list

LOGIN = "/api/netq/auth/v1/login"
SELECT = "/api/netq/auth/v1/select/opid/"
TOPOLOGY = "/api/netq/telemetry/v1/object/topologygraph/fetch-topology?timestamp=0"
#: The topology request's body, as NetQ's own client sends it.
TOPOLOGY_BODY = b'{"filters": [], "subgroupNestingDepth": 2}'
_JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True, slots=True)
class NetqResponses:
    """What NetQ answered: its URL and one topology graph (JSON text) per premises."""

    url: str
    graphs: tuple[str, ...]


def fetch_netq(
    url: str,
    creds: UfmCredentials,
    options: FetchOptions | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    warn: Callable[[str], None] | None = None,
) -> NetqResponses:
    """Every premises' topology graph from the NetQ at *url*. Failures are the appliance
    client's (AuthError, CollectError, InputError/ParseError); an account that sees no
    premises with data is a CollectError."""
    if creds.kind != "basic":
        raise AuthError(
            f"NetQ credentials from {creds.origin or 'the caller'}: NetQ takes a username and "
            f"password, not a {creds.kind}"
        )
    with session(url, creds, options, sleep=sleep, warn=warn) as netq:
        login = _login(netq, creds)
        graphs = tuple(
            _graph(netq, premises.opid, login.access_token)
            for premises in login.premises
            if premises.config_key_viewed
        )
    if not graphs:
        raise CollectError(f"{netq.target.at}: the account sees no premises with topology data")
    return NetqResponses(netq.target.base, graphs)


def collect_netq(
    url: str,
    credentials_file: Path | None = None,
    options: FetchOptions | None = None,
    *,
    env: Mapping[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> NetqResponses:
    """Credentials (``--netq-credentials`` file, else NETQ_USERNAME/NETQ_PASSWORD) + fetch."""
    creds = load_credentials(credentials_file, os.environ if env is None else env, NETQ)
    return fetch_netq(url, creds, options, warn=warn)


def _login(netq: Session, creds: UfmCredentials) -> Login:
    body = msgspec.json.encode({"username": creds.username, "password": creds.password})
    return _token(netq.request("POST", LOGIN, _JSON, body, check=_check_login), netq, LOGIN)


def _graph(netq: Session, opid: int, token: str) -> str:
    where = f"{SELECT}{opid}"
    selected = _token(netq.request("GET", where, _bearer(token), check=_check_login), netq, where)
    headers = {**_JSON, **_bearer(selected.access_token)}
    return netq.request("POST", TOPOLOGY, headers, TOPOLOGY_BODY, check=load_list)


def _check_login(text: str, source: str) -> object:
    return decode_list(f"[{text}]", source, Login)


def _token(text: str, netq: Session, where: str) -> Login:
    """The login answer; a token a header cannot carry is refused without showing it."""
    login = decode_list(f"[{text}]", f"NetQ {netq.target.base}{where}", Login)[0]
    if not login.access_token or not all(" " < ch < "\x7f" for ch in login.access_token):
        raise AuthError(f"{netq.target.at}: {where} gave no usable access token")
    return login


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
