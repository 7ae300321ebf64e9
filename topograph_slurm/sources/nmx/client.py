"""NMX's REST API (NVLink management, part of NetQ), read only, through the appliance client
UFM and NetQ use (TLS with a CA bundle, timeouts, one deadline, size cap, retries) and basic
authentication as NVIDIA topograph's NetQ provider sends it.

Three GETs: ``/nmx/v1/compute-nodes`` (every tray and its DomainUUID), then per domain
``/nmx/v1/gpus?domain=<uuid>`` and ``/nmx/v1/partitions?domain=<uuid>``. NMX's writes
(partition create/update/delete, asynchronous operations) are never sent.
"""

from __future__ import annotations

import os
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from topograph_slurm.errors import AuthError
from topograph_slurm.sources.nmx.schema import ComputeNode
from topograph_slurm.sources.ufm.client import FetchOptions, session
from topograph_slurm.sources.ufm.credentials import NMX, UfmCredentials, load_credentials
from topograph_slurm.sources.ufm.responses import load_list
from topograph_slurm.sources.ufm.schema import decode_list

COMPUTE_NODES = "/nmx/v1/compute-nodes"
GPUS = "/nmx/v1/gpus"
PARTITIONS = "/nmx/v1/partitions"


@dataclass(frozen=True, slots=True)
class NmxResponses:
    """What NMX answered (JSON text): the trays, and each domain's GPUs and partitions."""

    url: str
    compute_nodes: str
    gpus: tuple[str, ...]
    partitions: tuple[str, ...]


def fetch_nmx(
    url: str,
    creds: UfmCredentials,
    options: FetchOptions | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    warn: Callable[[str], None] | None = None,
) -> NmxResponses:
    """The trays, GPUs and partitions of every NVLink domain the NMX at *url* knows.
    Failures are the appliance client's (AuthError, CollectError, InputError/ParseError)."""
    if creds.kind != "basic":
        raise AuthError(
            f"NMX credentials from {creds.origin or 'the caller'}: NMX takes a username and "
            f"password, not a {creds.kind}"
        )
    with session(url, creds, options, sleep=sleep, warn=warn) as nmx:
        headers = creds.headers()
        nodes = nmx.request("GET", COMPUTE_NODES, headers, check=load_list)
        source = f"NMX {nmx.target.base}{COMPUTE_NODES}"
        domains = sorted({node.domain for node in decode_list(nodes, source, ComputeNode)})
        gpus, partitions = [], []
        for domain in domains:
            query = "?domain=" + urllib.parse.quote(domain, safe="")
            gpus.append(nmx.request("GET", GPUS + query, headers, check=load_list))
            partitions.append(nmx.request("GET", PARTITIONS + query, headers, check=load_list))
    return NmxResponses(nmx.target.base, nodes, tuple(gpus), tuple(partitions))


def collect_nmx(
    url: str,
    credentials_file: Path | None = None,
    options: FetchOptions | None = None,
    *,
    env: Mapping[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> NmxResponses:
    """Credentials (``--nmx-credentials`` file, else NMX_USERNAME/NMX_PASSWORD) + fetch."""
    creds = load_credentials(credentials_file, os.environ if env is None else env, NMX)
    return fetch_nmx(url, creds, options, warn=warn)
