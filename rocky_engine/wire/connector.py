"""The child connector protocol's two documents (seeds/child-connectors.md "The request and the result").

Rocky writes the request on the program's stdin; the program writes ``_rocky_result.json`` in its
``output_dir`` and exits 0. Protocol 0::

    request  {"protocol_version": 0, "run_id": "...", "output_dir": "/abs/...", "state": {"schema_version":
              1, "value": {...}} | null, "limits": {"wall_time_secs": 1800, "output_bytes": 5368709120}}
    result   {"protocol_version": 0, "files": [{"path": "a.parquet", "bytes": 48213, "rows": 120}],
              "state": {"schema_version": 1, "value": {...}}}

Reading a result is strict about types (``true`` is not a row count) and ignores unknown keys, so a later
protocol revision can add fields. The rules that need the disk or the manifest (paths inside scratch, sizes,
Parquet footers, the state's version and size) are checked by ``rocky_engine/connectors/result.py``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, StrictInt

from rocky_engine.wire.base import WireModel

PROTOCOL_VERSION = 0
RESULT_FILE = "_rocky_result.json"


class ConnectorState(WireModel):
    """A connector's saved state: its own versioned value, handed back on the next run."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"value"})

    schema_version: StrictInt
    value: Any


class RequestLimits(WireModel):
    """The limits the attempt runs under (unset ones left out)."""

    wall_time_secs: int
    output_bytes: int
    cpu_time_secs: int | None = None
    memory_bytes: int | None = None


class ConnectorRequest(WireModel):
    """What the program reads on stdin."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"protocol_version", "state"})

    protocol_version: int = PROTOCOL_VERSION
    #: also in the program's environment as ``ROCKY_RUN_ID``
    run_id: str
    #: the attempt's scratch directory: the program writes its files and the result here
    output_dir: str
    #: None on the first run
    state: ConnectorState | None
    limits: RequestLimits


class ResultFileEntry(WireModel):
    """One Parquet file of the batch, as the program reports it."""

    path: str = Field(min_length=1)
    bytes: StrictInt = Field(ge=0)
    rows: StrictInt = Field(ge=0)


class ConnectorResultDocument(WireModel):
    """``_rocky_result.json``. Field order is the order the rules are checked in."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"files"})

    protocol_version: StrictInt
    state: ConnectorState
    files: list[ResultFileEntry] | None = None
