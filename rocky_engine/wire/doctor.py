"""The ``rocky doctor`` document (CONTRACT section 8); exit 3 on a Critical check is still a result."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel

DoctorStatus = Literal["healthy", "warning", "critical"]


class DoctorCheck(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"name", "status", "message", "duration_ms"})

    name: str
    status: DoctorStatus
    message: str = ""
    duration_ms: int = 0


class DoctorResult(WireModel):
    """``{version, command: "doctor", overall, checks[], suggestions[]}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"version", "command", "overall", "checks", "suggestions"})

    version: str = __version__
    command: Literal["doctor"] = "doctor"
    overall: DoctorStatus = "healthy"
    checks: list[DoctorCheck] = Field(default_factory=list)
    #: what to do next, one sentence each
    suggestions: list[str | dict[str, Any]] = Field(default_factory=list)

    @property
    def critical(self) -> bool:
        return self.overall == "critical" or any(c.status == "critical" for c in self.checks)
