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


class StateRetry(TypedModel):
    """``[state.retry]``: retries of a state transfer (download, upload) that failed transiently.

    The shape of ``[adapter.NAME.retry]`` (upstream Rocky shares it between the two). Every retry shares the
    transfer's ``transfer_timeout_seconds`` budget, so the wall-clock ceiling stays where it was.
    """

    max_retries: int = Field(default=3, ge=0)
    initial_backoff_ms: int = Field(default=1000, ge=0)
    max_backoff_ms: int = Field(default=30000, ge=0)
    backoff_multiplier: float = Field(default=2.0, ge=1.0)
    jitter: bool = True
    #: consecutive failed attempts (over every transfer of this process) after which transfers fail fast
    circuit_breaker_threshold: int = Field(default=5, ge=0)
    #: seconds after which an open breaker lets one attempt through; None: open for the rest of the run
    circuit_breaker_recovery_timeout_secs: int | None = Field(default=None, ge=1)
    #: retries allowed over all transfers of one run; None: only max_retries per transfer bounds them
    max_retries_per_run: int | None = Field(default=None, ge=0)


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
    #: None: the storage clients' own request retries (3 attempts); set: one attempt per request and
    #: these transfer retries instead, so the two never multiply
    retry: StateRetry | None = None


class ScheduleDefaults(TypedModel):
    """``[schedule]``: project defaults for ``[pipeline.*.schedule]``."""

    timezone: str = "UTC"


class FreshnessDefaults(LenientModel):
    """``[freshness]``: the budget of ``freshness = true`` schedules that no model budget covers."""

    #: strictly an integer: the budget of every freshness schedule must not come from a coerced "3600"
    expected_lag_seconds: StrictInt | None = Field(default=None, ge=1)
