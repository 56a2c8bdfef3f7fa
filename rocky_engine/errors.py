"""The one error root of the engine and its documented subclasses.

Every error a user can meet is a ``RockyError`` whose message says what was wrong and what to do. The CLI
prints ``error: <message>`` on stderr and exits with ``exit_code`` (1 unless a subclass says otherwise).
A traceback reaching a user is a bug.

Tree::

    RockyError
    ├── UsageError              bad flags or flag combinations
    ├── ConfigError             rocky.toml / sidecars / manifests: file, key and fix
    ├── ModelError              transformation model files
    │   ├── CircularDependencyError
    │   └── UnknownDependencyError
    ├── StateError              the state store
    │   ├── StateLockedError    another writer holds the flock
    │   ├── StateSchemaError    the store is newer than this engine
    │   └── StateDamagedError   the file, or a value stored in it, is damaged
    ├── AdapterError            a warehouse statement failed (carries failure_kind)
    │   └── CapabilityRefused   the warehouse's capability level cannot do what the config asks
    ├── ConnectorError          child connector protocol / validation
    ├── HookAbort               a command hook with on_failure = "abort" failed
    └── RunInterrupted          SIGINT / SIGTERM (exit 130)
"""

from __future__ import annotations

from pathlib import Path

_BREAKS = frozenset("\r\n\t\v\f\x1c\x1d\x1e\x85\u2028\u2029")


def one_line(text: str) -> str:
    """``text`` as one line of printable characters: line breaks become spaces, any other control
    character is written ``\\xNN``. A message may quote what the user wrote (a key, a value, a stored
    cell), and a byte from a damaged file must neither split the one-line error nor drive the terminal."""
    if text.isprintable():
        return text
    return "".join(
        ch if ch.isprintable() else " " if ch in _BREAKS else f"\\x{ord(ch):02x}" if ord(ch) < 256
        else f"\\u{ord(ch):04x}"
        for ch in text
    )


class RockyError(Exception):
    """Base of every error the engine raises on purpose; its message and hint are always one line."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        message = one_line(message)
        hint = None if hint is None else one_line(hint)
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}; {hint}")

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message}; {self.hint}"


class UsageError(RockyError):
    """A flag or a combination of flags that cannot work."""


class ConfigError(RockyError):
    """A configuration file that cannot be loaded; names the file and the key."""

    def __init__(
        self,
        message: str,
        *,
        file: Path | str | None = None,
        key: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.file = str(file) if file is not None else None
        self.key = key
        where = ""
        if self.file and key:
            where = f"{self.file}: {key}: "
        elif self.file:
            where = f"{self.file}: "
        elif key:
            where = f"{key}: "
        super().__init__(f"{where}{message}", hint=hint)


class ModelError(RockyError):
    """A transformation model that cannot be loaded or planned."""


class CircularDependencyError(ModelError):
    """The model DAG has a cycle."""

    def __init__(self, members: list[str]) -> None:
        self.members = members
        super().__init__(
            f"circular dependency detected involving: {members}",
            hint="remove one of the depends_on edges or table references that form the cycle",
        )


class UnknownDependencyError(ModelError):
    """A model names a dependency that is not a model."""

    def __init__(self, dependency: str, model: str, suggestion: str | None = None) -> None:
        self.dependency = dependency
        self.model = model
        self.suggestion = suggestion
        msg = f"unknown dependency '{dependency}' referenced by '{model}'"
        if suggestion:
            msg += f" (did you mean '{suggestion}'?)"
        super().__init__(msg)


class StateError(RockyError):
    """The state store cannot be opened, read or written."""


class StateLockedError(StateError):
    """Another process holds the writer lock of the state store."""

    def __init__(
        self, path: Path | str, *, holder: str = "an unknown process", hint: str | None = None
    ) -> None:
        self.path = str(path)
        #: the other writer, from the lock file: ``pid N (rocky run), since <UTC time>``
        self.holder = holder
        super().__init__(
            f"state store at {path} is locked by another process ({holder}); only one rocky writer can run "
            "at a time against the same state file",
            hint=hint,
        )


class StateSchemaError(StateError):
    """The state store was written by a newer engine."""


class StateDamagedError(StateError):
    """The state file is corrupt, or a value stored in it no longer parses: nothing can use it as it is."""


class AdapterError(RockyError):
    """A warehouse operation failed; ``failure_kind`` classifies it (CONTRACT section 3)."""

    def __init__(
        self, message: str, *, failure_kind: str = "unknown", hint: str | None = None,
        cooldown_seconds: int | None = None,
    ) -> None:
        self.failure_kind = failure_kind
        #: seconds before a retry can work (an open breaker's wait for its probe), the run's
        #: ``errors[].cooldown_seconds``
        self.cooldown_seconds = cooldown_seconds
        super().__init__(message, hint=hint)


class CapabilityRefused(AdapterError):
    """What the configuration asks (an atomic merge) is more than the warehouse's capability level can do,
    so it is refused before any statement is issued: ``compile-error``, the contract's kind for a failure
    that never reached the warehouse (its failure kinds name no config problem)."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, failure_kind="compile-error", hint=hint)


class ConnectorError(RockyError):
    """A child connector run or result that cannot be accepted."""


class HookAbort(RockyError):
    """A command hook with ``on_failure = "abort"`` failed: the run stops before its next materialization."""

    def __init__(self, message: str, *, event: str, hint: str | None = None) -> None:
        self.event = event
        super().__init__(message, hint=hint)


class RunInterrupted(RockyError):
    """SIGINT or SIGTERM stopped the command."""

    exit_code = 130

    def __init__(self, message: str = "interrupted") -> None:
        super().__init__(message)
