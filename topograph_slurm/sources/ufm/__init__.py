"""NVIDIA UFM REST API as a fabric source: the same :class:`Fabric` ibnetdiscover gives.

On most DGX SuperPODs UFM already knows the fabric, and admins would rather ask it over HTTPS
than run ``ibnetdiscover`` as root on a compute node. The parts are kept apart so that each is
testable and a snapshot can be rebuilt offline:

* :mod:`.credentials` (:func:`load_credentials`): basic user/password (``/ufmRest``), an access
  token (``/ufmRestV3`` with ``Authorization: Basic <token>``) or a client certificate
  (``/ufmRest``), from a private file or the environment — never argv, never echoed;
* :mod:`.client` (:func:`fetch_ufm`, :func:`collect_ufm`): HTTPS with verification, timeouts,
  one deadline for the whole fetch, a size cap per response, bounded retries and one clear
  error line per failure;
* :mod:`.responses` (:class:`UfmResponses`): the raw JSON text of every endpoint, which
  ``collect --ufm`` stores (:func:`snapshot_files`) and ``generate --snapshot`` reloads
  (:func:`load_responses`);
* :mod:`.translate` (:func:`fabric_from_ufm`): systems, ports, links and unhealthy ports become
  switches, CAs, links and notes, exactly as the ibnetdiscover parser would model them; the
  devices are read there, the cables in :mod:`.cables` (by a forked child for a large answer),
  both a column at a time with the helpers of :mod:`.columns`.
"""

from __future__ import annotations

from topograph_slurm.sources.ufm.cables import ufm_speed, ufm_width
from topograph_slurm.sources.ufm.client import (
    MIB,
    FetchOptions,
    UfmInsecureWarning,
    collect_ufm,
    fetch_ufm,
)
from topograph_slurm.sources.ufm.credentials import (
    CREDENTIAL_ENV_VARS,
    UfmCredentials,
    load_credentials,
)
from topograph_slurm.sources.ufm.responses import (
    ENDPOINTS,
    UfmResponses,
    has_snapshot,
    load_responses,
    snapshot_files,
)
from topograph_slurm.sources.ufm.translate import fabric_from_ufm

__all__ = [
    "CREDENTIAL_ENV_VARS",
    "ENDPOINTS",
    "MIB",
    "FetchOptions",
    "UfmCredentials",
    "UfmInsecureWarning",
    "UfmResponses",
    "collect_ufm",
    "fabric_from_ufm",
    "fetch_ufm",
    "has_snapshot",
    "load_credentials",
    "load_responses",
    "snapshot_files",
    "ufm_speed",
    "ufm_width",
]
