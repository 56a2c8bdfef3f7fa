"""The small documents of ``rocky serve``: health, meta, errors, the webhook's answer, the exit summary."""

from __future__ import annotations

from typing import ClassVar, Literal

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel, published


class HealthDocument(WireModel):
    """``GET /api/v1/health`` (503 while draining)."""

    status: Literal["ok", "draining"]
    version: str = __version__
    scheduler: bool
    draining: bool


class MetaDocument(WireModel):
    """``GET /api/v1/meta``: what this server is and which optional routes are live, for a client that
    probes before it relies on one (upstream Rocky's ``MetaOutput``; ``version`` is ours as well)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "engine_version", "capabilities", "routes", "schemas_hash", "state_schema_version"}
    )

    version: str = __version__
    engine_version: str = __version__
    #: feature tokens; ``webhook_ingress`` only while ``POST /api/v1/hooks/trigger/{pipeline}`` accepts
    capabilities: list[str]
    #: the /api/v1 routes this server answers now (the webhook route only when it is live)
    routes: list[str]
    #: sha256 of the wire format's declarations: moves when an output shape can have changed
    schemas_hash: str
    state_schema_version: int
    #: sha256 of rocky.toml as bound (after ${VAR} substitution); omitted when it does not load
    config_hash: str | None = None
    #: ``full`` when a bearer token guards the server; omitted without one (never the secret)
    token_scope: Literal["full"] | None = None


class ErrorBody(WireModel):
    """Every error answer: ``{code, message}``, plus the facts a route adds: the running job of a ``409
    mutation_in_progress``, as ``job_id`` (our clients) and ``running_job_id`` (the published
    ``ErrorEnvelope``)."""

    code: str
    message: str
    job_id: str | None = published("running_job_id", None)


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
