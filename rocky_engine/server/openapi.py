"""``GET /api/v1/openapi.json``: an OpenAPI 3.1 document describing every route of ``rocky serve``.

Written by hand next to the routes (``app.ROUTES``); a test checks that every route is described here and
nothing else is, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from rocky_engine import __version__

_ERROR = {"$ref": "#/components/schemas/Error"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _err(description: str) -> dict[str, Any]:
    return _json(_ERROR, description)


_UNAUTHORIZED = _err("Missing or wrong Bearer token (WWW-Authenticate: Bearer)")

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["code", "message"],
        "properties": {
            "code": {"type": "string", "examples": ["mutation_in_progress"]},
            "message": {"type": "string"},
            "job_id": {"type": "string", "description": "the running job (409 mutation_in_progress)"},
            "running_job_id": {"type": "string", "description": "the same as job_id (the published "
                               "client's name for it)"},
        },
    },
    "Job": {
        "type": "object",
        "required": ["job_id", "kind", "trigger", "state", "submitted_at", "started_at", "finished_at",
                     "result"],
        "properties": {
            "job_id": {"type": "string", "description": "API job id, or a scheduled run's submission id"},
            "kind": {"type": "string", "enum": ["run"], "description": "every job of this server is a run"},
            "trigger": {"type": "string", "enum": ["manual", "schedule", "webhook"],
                        "description": "what started the run: the API (manual) or the resident scheduler"},
            "state": {"type": "string", "enum": ["queued", "running", "succeeded", "failed"]},
            "submitted_at": {"type": "string", "format": "date-time"},
            "started_at": {"type": ["string", "null"], "format": "date-time"},
            "finished_at": {"type": ["string", "null"], "format": "date-time"},
            "result": {
                "type": ["object", "null"],
                "description": "outcome (success|partial|failure), exit_code, duration_ms, run_id, status, "
                "drained, timed_out, recovered",
            },
            "pipeline": {"type": "string"},
            "error": {"type": "string"},
            "pid": {"type": "integer"},
            "attempts": {"type": "integer"},
        },
    },
    "RunRequest": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "pipeline": {"type": "string", "description": "required when the project has several pipelines"},
            "filter": {"type": "string", "description": "key=value, as rocky run --filter"},
        },
    },
}

_JOB_ID = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}
_PIPELINE = {"name": "pipeline", "in": "path", "required": True, "schema": {"type": "string"}}


def _paths() -> dict[str, Any]:
    bearer: list[dict[str, list[str]]] = [{"bearer": []}]
    return {
        "/api/v1/health": {"get": {
            "summary": "Liveness (no token needed)",
            "security": [],
            "responses": {
                "200": _json({"type": "object"}, "Serving: {status: ok, version, scheduler, draining}"),
                "503": _json({"type": "object"}, "Draining for shutdown: {status: draining, ...}"),
            },
        }},
        "/api/v1/openapi.json": {"get": {
            "summary": "This document", "security": bearer,
            "responses": {"200": _json({"type": "object"}, "OpenAPI 3.1"), "401": _UNAUTHORIZED},
        }},
        "/api/v1/meta": {"get": {
            "summary": "Engine version, live optional routes (webhook ingress only when it accepts), "
            "capabilities, state schema version and fingerprints",
            "security": bearer,
            "responses": {"200": _json({"type": "object"}, "{version, engine_version, capabilities, routes, "
                                       "schemas_hash, state_schema_version, config_hash?, token_scope?}"),
                          "401": _UNAUTHORIZED},
        }},
        "/api/v1/jobs/run": {"post": {
            "summary": "Run a pipeline as a child `rocky run` job",
            "security": bearer,
            "requestBody": {"required": False, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/RunRequest"}}}},
            "responses": {
                "202": _json({"type": "object", "required": ["job_id"],
                              "properties": {"job_id": {"type": "string"}}}, "Started"),
                "400": _err("Malformed body, or pipeline omitted in a multi-pipeline project"),
                "401": _UNAUTHORIZED,
                "403": _err("cross_origin: sent by a browser page of another origin (--allowed-origin)"),
                "404": _err("Unknown pipeline (pipeline_not_found)"),
                "409": _err("mutation_in_progress: another job, a scheduler tick or another process holds "
                            "the state store writer"),
                "500": _err("config_error / state_error"),
                "503": _err("draining: the server is shutting down"),
            },
        }},
        "/api/v1/jobs": {"get": {
            "summary": "Recent jobs, newest first", "security": bearer,
            "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "default": 50}}],
            "responses": {
                "200": _json({"type": "object", "properties": {"jobs": {"type": "array", "items": {
                    "$ref": "#/components/schemas/Job"}}}}, "Jobs"),
                "400": _err("Bad limit"), "401": _UNAUTHORIZED,
            },
        }},
        "/api/v1/jobs/{job_id}": {"get": {
            "summary": "One job (API run, or a scheduled run by its submission id)", "security": bearer,
            "parameters": [_JOB_ID],
            "responses": {"200": _json({"$ref": "#/components/schemas/Job"}, "The job"),
                          "401": _UNAUTHORIZED, "404": _err("job_not_found")},
        }},
        "/api/v1/runs": {"get": {
            "summary": "Run history (as rocky history --audit --output json)", "security": bearer,
            "parameters": [
                {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 50}},
                {"name": "since", "in": "query", "schema": {"type": "string"},
                 "description": "YYYY-MM-DD (UTC) or RFC 3339"},
            ],
            "responses": {"200": _json({"type": "object"}, "{version, command: history, runs[]}"),
                          "400": _err("Bad limit or since"), "401": _UNAUTHORIZED,
                          "503": _err("state_unavailable")},
        }},
        "/api/v1/schedule": {"get": {
            "summary": "Scheduler state: tick lock, per-pipeline schedule and cursor, claims (read-only)",
            "security": bearer,
            "responses": {"200": _json({"type": "object"}, "{version, now, tick_lock {state free|held|"
                                       "wedged|never}, pipelines[], claims[], scheduler, config_error?}"),
                          "401": _UNAUTHORIZED, "503": _err("state_unavailable")},
        }},
        "/api/v1/schedule/spool": {"get": {
            "summary": "Webhook demands accepted and not yet consumed by a tick", "security": bearer,
            "responses": {"200": _json({"type": "object"}, "{version, command, action: spool, spool, "
                                       "demands[]}"),
                          "401": _UNAUTHORIZED, "500": _err("spool_unreadable: cannot tell what is waiting")},
        }},
        "/api/v1/hooks/trigger/{pipeline}": {"post": {
            "summary": "Queue a run demand (signed webhook; only under --scheduler)",
            "description": "Checks in order: ingress enabled (404; without a secret it is enabled only on "
            "loopback without a token, and then 403 for a browser request), body size (413), signature "
            "(401), rate "
            "limit (429 + Retry-After), delivery id (400), pipeline exists (404), durable spool write. "
            "Sign with X-Rocky-Signature (hex HMAC-SHA256 of the raw body) or Standard Webhooks "
            "(webhook-id, webhook-timestamp within 5 minutes, webhook-signature v1,<base64>). "
            "X-Rocky-Delivery dedupes for 24 h after consumption; without it the body hash dedupes while "
            "queued.",
            "security": [],
            "parameters": [
                _PIPELINE,
                {"name": "X-Rocky-Signature", "in": "header", "schema": {"type": "string"}},
                {"name": "X-Rocky-Delivery", "in": "header", "schema": {"type": "string"}},
                {"name": "webhook-id", "in": "header", "schema": {"type": "string"}},
                {"name": "webhook-timestamp", "in": "header", "schema": {"type": "string"}},
                {"name": "webhook-signature", "in": "header", "schema": {"type": "string"}},
            ],
            "requestBody": {"required": False, "content": {"*/*": {"schema": {}}}},
            "responses": {
                "202": _json({"type": "object", "required": ["demand"], "properties": {
                    "demand": {"type": "string", "enum": ["accepted", "duplicate"]},
                    "demand_uid": {"type": "string"}}}, "Durably queued (or a duplicate)"),
                "400": _err("Unusable delivery id"),
                "401": _err("invalid_signature"),
                "403": _err("signature_required: an unsigned webhook (loopback, no secret, no token) sent "
                            "by a browser (Origin or Sec-Fetch-Site present)"),
                "404": _err("Ingress off, or (after the signature) pipeline_not_found"),
                "413": _err("Body over 1 MiB"),
                "429": _err("rate_limited (Retry-After)"),
                "503": _err("spool_unavailable"),
            },
        }},
        "/metrics": {"get": {
            "summary": "Prometheus metrics (text format 0.0.4)", "security": bearer,
            "responses": {"200": {"description": "metrics", "content": {"text/plain": {"schema": {
                "type": "string"}}}}, "401": _UNAUTHORIZED},
        }},
    }


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "rocky serve",
            "version": __version__,
            "description": "Rocky's HTTP API: jobs, run history, the resident scheduler's state, signed "
            "webhook ingress and metrics. Errors are {code, message}. Before any route runs, every request "
            "may be refused: 421 host_not_allowed (a Host header that does not name this server), 403 "
            "cross_origin (a POST a browser sent from another origin), 431 header_too_large or "
            "too_many_headers, 414 uri_too_long, 400 bad_request (malformed HTTP), 408 request_timeout, "
            "503 too_many_connections.",
        },
        "paths": _paths(),
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "--token / ROCKY_SERVE_TOKEN"}},
        },
    }
