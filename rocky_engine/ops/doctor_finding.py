"""What one ``rocky doctor`` check concludes, shared by the report and the check modules.

Its own module so that ``ops/doctor.py`` (the report) and the check modules (``doctor_warehouse``,
``doctor_scheduler``) depend on it without depending on each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocky_engine.wire.doctor import DoctorStatus

Status = DoctorStatus
_RANK: dict[str, int] = {"healthy": 0, "warning": 1, "critical": 2}


@dataclass(frozen=True)
class Finding:
    """What one check concluded."""

    status: Status
    message: str
    suggestions: tuple[str, ...] = ()


def worst(statuses: list[Status]) -> Status:
    return max(statuses, key=lambda s: _RANK[s], default="healthy")
