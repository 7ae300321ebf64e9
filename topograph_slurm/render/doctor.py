"""``doctor``'s report: the verdicts as text (``templates/doctor.txt.j2``) or as versioned
JSON (:data:`~topograph_slurm.model.doctor.DOCTOR_FORMAT`, docs/doctor.md)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict

import jinja2

from topograph_slurm.model.doctor import DOCTOR_FORMAT, DOCTOR_VERSION, FAIL, OK, WARN, DoctorReport
from topograph_slurm.render.environment import render

TEMPLATE = "doctor.txt.j2"


def counts(report: DoctorReport) -> dict[str, int]:
    """How many checks ended ok, warn and fail."""
    found = Counter(check.status for check in report.checks)
    return {status: found[status] for status in (OK, WARN, FAIL)}


def render_doctor(env: jinja2.Environment, report: DoctorReport, as_json: bool) -> str:
    """The report as text or JSON."""
    if as_json:
        data = {
            "format": DOCTOR_FORMAT,
            "version": DOCTOR_VERSION,
            "source": report.source,
            "slurm_release": report.release,
            "counts": counts(report),
            "checks": [asdict(check) for check in report.checks],
        }
        return json.dumps(data, indent=2) + "\n"
    return render(env, TEMPLATE, report=report, counts=counts(report))
