"""Project-wide sections of rocky.toml: ``[state]``, ``[schedule]`` and ``[freshness]``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt

from rocky_engine.config.base import LenientModel, TypedModel

StateBackend = Literal["local", "s3", "valkey", "tiered", "gcs"]


class IdempotencyConfig(TypedModel):
    """``[state.idempotency]``: how long run keys are kept and what counts as already done."""

    retention_days: int = Field(default=30, ge=1)
    #: "success": only a succeeded run blocks a retry under the same key; "any": a failed one does too
    dedup_on: Literal["success", "any"] = "success"
    #: an in-flight claim older than this is presumed dead and may be adopted
    in_flight_ttl_hours: int = Field(default=24, ge=1)


class StateConfig(TypedModel):
    """``[state]``: where the state store lives between runs (``gcs`` parses; remote state refuses it)."""

    backend: StateBackend = "local"
    s3_bucket: str | None = None
    s3_prefix: str = "rocky/state/"
    s3_endpoint_url: str | None = None
    valkey_url: str | None = None
    valkey_prefix: str = "rocky:state:"
    transfer_timeout_seconds: int = Field(default=300, ge=1)
    on_upload_failure: Literal["skip", "fail"] = "skip"
    concurrency_control: Literal["off", "cas"] = "off"
    on_schema_mismatch: Literal["recreate", "fail"] = "recreate"
    idempotency: IdempotencyConfig = Field(default_factory=IdempotencyConfig)


class ScheduleDefaults(TypedModel):
    """``[schedule]``: project defaults for ``[pipeline.*.schedule]``."""

    timezone: str = "UTC"


class FreshnessDefaults(LenientModel):
    """``[freshness]``: the budget of ``freshness = true`` schedules that no model budget covers."""

    #: strictly an integer: the budget of every freshness schedule must not come from a coerced "3600"
    expected_lag_seconds: StrictInt | None = Field(default=None, ge=1)
