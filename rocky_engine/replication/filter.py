"""``rocky run --filter key=value`` for replication: which source tables a run copies.

Keys: ``id`` (the source id, i.e. the source schema name), ``table`` (the table name), or a
schema-pattern component (a variadic component matches when any of its parts equals the value).
A filter that matches nothing is not an error: the run has nothing to do and exits 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rocky_engine.config.schema_pattern import ComponentValue
from rocky_engine.errors import UsageError


def _valid_keys(components: Sequence[str]) -> str:
    return "id=, table=, or a component: " + (", ".join(f"{c}=" for c in components) or "(none)")


@dataclass(frozen=True, slots=True)
class ReplicationFilter:
    """One parsed ``--filter``."""

    key: str
    value: str

    @classmethod
    def parse(cls, text: str, components: Sequence[str]) -> ReplicationFilter:
        """Parse ``key=value`` against the pipeline's component names.

        Raises:
            UsageError: no ``=``, an empty key or value, or a key that is neither id, table nor a component.
        """
        key, sep, value = text.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise UsageError(
                f"--filter '{text}' must be key=value ({_valid_keys(components)})",
                hint="e.g. --filter id=raw__orders or --filter table=orders",
            )
        if key not in ("id", "table", *components):
            raise UsageError(
                f"--filter key '{key}' is not id, table or a schema_pattern component; valid keys: "
                f"{_valid_keys(components)}"
            )
        if not value:
            raise UsageError(f"--filter '{text}' has no value after '='", hint=f"write {key}=<value>")
        return cls(key, value)

    def matches_source(self, source_id: str, components: Mapping[str, ComponentValue]) -> bool:
        """Whether a source can hold matching tables (``table=`` filters match every source)."""
        if self.key == "id":
            return source_id == self.value
        if self.key == "table":
            return True
        value = components.get(self.key)
        if isinstance(value, list):
            return self.value in value
        return value == self.value

    def matches_table(self, table: str) -> bool:
        return self.key != "table" or table == self.value

    def __str__(self) -> str:
        return f"{self.key}={self.value}"
