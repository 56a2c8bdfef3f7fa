"""What the user asked ``rocky run`` to do, independent of how it was asked (CLI, scheduler, server)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RunOptions:
    pipeline: str | None = None
    filter: str | None = None
    #: ``--model`` selectors (``NAME``, ``+NAME``, ``NAME+``); empty: every model (``run.selection``)
    models: tuple[str, ...] = ()
    parallel: int | None = None
    resume: str | None = None
    resume_latest: bool = False
    idempotency_key: str | None = None
    variables: dict[str, str] = field(default_factory=dict)
    trigger: str = "Manual"
    submission_id: str | None = None
    #: ``--wait-for-lock``: seconds to wait for the state writer lock another process holds (0: fail)
    wait_for_lock: float = 0
