"""The small documents of ``rocky serve``: health, errors, the webhook's answer, the exit summary."""

from __future__ import annotations

from typing import Literal

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel


class HealthDocument(WireModel):
    """``GET /api/v1/health`` (503 while draining)."""

    status: Literal["ok", "draining"]
    version: str = __version__
    scheduler: bool
    draining: bool


class ErrorBody(WireModel):
    """Every error answer: ``{code, message}``, plus the facts a route adds (the running ``job_id``)."""

    code: str
    message: str
    job_id: str | None = None


class DemandAnswer(WireModel):
    """``202`` of ``POST /api/v1/hooks/trigger/{pipeline}``."""

    demand: Literal["accepted", "duplicate"]
    demand_uid: str | None = None


class ServeResult(WireModel):
    """``{version, command: "serve", address, scheduler, drained, child_terminated}``, written on exit."""

    version: str = __version__
    command: Literal["serve"] = "serve"
    address: str
    scheduler: bool
    drained: bool = True
    #: the drain window ran out with a child still running; it was terminated and recorded as failed
    child_terminated: bool = False
