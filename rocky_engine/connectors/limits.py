"""The limits of one attempt and the lifetime of the batch claim (seeds/child-connectors.md "Limits").

Both the manifest and ``[connector.NAME.limits]`` may set each key; the smaller value wins, a key set on
one side only is used as it is, and a key set nowhere takes its default (``cpu_time_secs`` and
``memory_bytes`` have none: no rlimit is set).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rocky_engine.config.connectors import ConnectorLimits
from rocky_engine.wire.connector import RequestLimits

DEFAULT_WALL_TIME_SECS = 3600
DEFAULT_OUTPUT_BYTES = 5 * 1024**3
#: ``RLIMIT_CPU``'s hard limit sits this far above the soft one, so SIGXCPU can be caught before SIGKILL.
CPU_HARD_MARGIN_SECS = 5


@dataclass(frozen=True)
class EffectiveLimits:
    """The limits one attempt runs under."""

    wall_time_secs: int = DEFAULT_WALL_TIME_SECS
    output_bytes: int = DEFAULT_OUTPUT_BYTES
    cpu_time_secs: int | None = None
    memory_bytes: int | None = None

    def request(self) -> RequestLimits:
        """The ``limits`` object of the request on stdin (unset keys left out)."""
        return RequestLimits(
            wall_time_secs=self.wall_time_secs, output_bytes=self.output_bytes,
            cpu_time_secs=self.cpu_time_secs, memory_bytes=self.memory_bytes,
        )


def _smaller(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def effective_limits(manifest: ConnectorLimits, config: ConnectorLimits) -> EffectiveLimits:
    """Merge the manifest's limits with the project's: the smaller wins, then defaults."""
    wall = _smaller(manifest.wall_time_secs, config.wall_time_secs)
    output = _smaller(manifest.output_bytes, config.output_bytes)
    return EffectiveLimits(
        wall_time_secs=wall if wall is not None else DEFAULT_WALL_TIME_SECS,
        output_bytes=output if output is not None else DEFAULT_OUTPUT_BYTES,
        cpu_time_secs=_smaller(manifest.cpu_time_secs, config.cpu_time_secs),
        memory_bytes=_smaller(manifest.memory_bytes, config.memory_bytes),
    )


def claim_ttl_hours(wall_time_secs: int, retries: int) -> int:
    """How long the batch claim lives: wall time x (retries + 1), plus one hour, rounded up to whole
    hours, at least one hour. Long enough that a live run never loses its claim to a second run."""
    seconds = wall_time_secs * (retries + 1) + 3600
    return max(1, math.ceil(seconds / 3600))
