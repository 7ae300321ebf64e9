"""The gate ``record start`` applies (``record_refuse``): why it refuses a job, if it does."""

from __future__ import annotations

from collections.abc import Collection

from topograph_slurm.analysis.placement.explain import Explanation
from topograph_slurm.model.record import REFUSE_TP_CROSSING


def refusal(refuse: Collection[str], explanation: Explanation) -> str:
    """Explain's verdict line when *refuse* names ``tp-crossing`` and TP groups cross their
    home; empty when the job may run."""
    if REFUSE_TP_CROSSING in refuse and not explanation.tp_inside:
        return f"tp-crossing: {explanation.verdict}"
    return ""
