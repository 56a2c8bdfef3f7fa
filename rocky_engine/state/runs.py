"""Run records (CONTRACT section 3 "Run record"): what every run but ``load`` leaves behind.

The scheduler reads them back (latest success of a pipeline, a child's record by ``submission_id``),
``rocky history`` lists them, and ``rocky brief`` summarises them.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from rocky_engine.errors import StateError
from rocky_engine.redact import known
from rocky_engine.state._time import from_db, from_db_opt, to_db, to_db_opt, utc

if TYPE_CHECKING:
    from rocky_engine.state.store import StateStore

#: ``models_executed[].status`` of a model or table the run never built: withheld behind a failed upstream,
#: not started after a stop rule (``fail_fast``, the error rate, a hook abort) or a signal
NOT_EXECUTED: frozenset[str] = frozenset({"contained", "not_run", "interrupted"})

#: Statuses a run record can carry (skipped runs write no record).
RUN_STATUSES: tuple[str, ...] = ("Success", "PartialFailure", "Failure")

_TRIGGERS = {"manual": "Manual", "schedule": "Schedule", "webhook": "Webhook", "sensor": "Sensor", "ci": "Ci"}
#: The triggers rocky itself records (``ROCKY_RUN_TRIGGER`` may name others, kept as given).
RUN_TRIGGERS: tuple[str, ...] = tuple(_TRIGGERS.values())

_COLUMNS = (
    "run_id", "pipeline", "pipeline_type", "started_at", "finished_at", "status", "trigger",
    "submission_id", "config_hash", "triggering_identity", "hostname", "idempotency_key", "exit_code",
    "interrupted", "duration_ms", "models_executed", "extra",
)
_INSERT = f"INSERT INTO run_history ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)})"
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM run_history"


#: A datetime normalised to UTC (a naive value is taken as UTC).
UtcDatetime = Annotated[datetime, AfterValidator(utc)]


class ModelExecution(BaseModel):
    """One model (or table) executed by a run."""

    model_config = ConfigDict(extra="ignore")

    model_name: str
    started_at: UtcDatetime
    finished_at: UtcDatetime | None = None
    duration_ms: int = 0
    rows_affected: int | None = None
    status: str = "success"
    #: the hash of the model's SQL (transformation runs; ``rocky history --model`` shows it)
    sql_hash: str | None = None
    #: the retry trail when a try was retried (the document's ``materializations[].attempts`` entries)
    attempts: list[dict[str, Any]] | None = None


class RunRecord(BaseModel):
    """One run as stored in ``run_history``; datetimes are UTC."""

    model_config = ConfigDict(extra="ignore")

    run_id: str
    pipeline: str | None = None
    pipeline_type: str | None = None
    started_at: UtcDatetime
    finished_at: UtcDatetime | None = None
    status: str
    trigger: str = "Manual"
    submission_id: str | None = None
    models_executed: list[ModelExecution] = Field(default_factory=list)
    config_hash: str | None = None
    triggering_identity: str | None = None
    hostname: str | None = None
    idempotency_key: str | None = None
    exit_code: int | None = None
    interrupted: bool = False
    duration_ms: int | None = None
    #: Anything else a runner wants to keep (resumed_from, tables_skipped, ...): JSON-serialisable.
    extra: dict[str, Any] = Field(default_factory=dict)

    def effective_duration_ms(self) -> int:
        """``duration_ms``, else the span between start and finish, else 0."""
        if self.duration_ms is not None:
            return self.duration_ms
        if self.finished_at is not None:
            return max(0, int((self.finished_at - self.started_at).total_seconds() * 1000))
        return 0


def trigger_from_env(environ: Mapping[str, str]) -> str:
    """The run trigger: ``ROCKY_RUN_TRIGGER`` (schedule, webhook, sensor, ci) in PascalCase, else Manual."""
    raw = environ.get("ROCKY_RUN_TRIGGER", "").strip()
    if not raw:
        return "Manual"
    return _TRIGGERS.get(raw.lower(), raw[:1].upper() + raw[1:])


def format_run_id(now: datetime) -> str:
    """``run-YYYYMMDD-HHMMSS-mmm`` in UTC."""
    moment = utc(now)
    return f"run-{moment:%Y%m%d-%H%M%S}-{moment.microsecond // 1000:03d}"


class RunRepo:
    """Reads and writes ``run_history``; reached as ``store.runs``."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._issued: set[str] = set()

    # -------------------------------------------------------------- writing

    def new_run_id(self, now: datetime) -> str:
        """A fresh run id for ``now``; a taken millisecond moves to the next free one.

        Ids are checked against run records and run progress (a crashed run leaves progress and no
        record) and against ids this process already handed out. Unique across processes only for the
        holder of the writer lock, which is the only process that records runs.
        """
        moment = utc(now).replace(microsecond=utc(now).microsecond // 1000 * 1000)
        while True:
            candidate = format_run_id(moment)
            if candidate not in self._issued and not self._taken(candidate):
                self._issued.add(candidate)
                return candidate
            moment += timedelta(milliseconds=1)

    def _taken(self, run_id: str) -> bool:
        rows = self._store.query(
            "SELECT EXISTS (SELECT 1 FROM run_history WHERE run_id = ?) "
            "OR EXISTS (SELECT 1 FROM run_progress WHERE run_id = ?)",
            (run_id, run_id),
        )
        return bool(rows[0][0])

    def insert(self, record: RunRecord) -> None:
        """Record one finished run (one transaction)."""
        self.insert_many([record])

    def replace(self, record: RunRecord) -> None:
        """Rewrite the record of ``record.run_id`` (one transaction): a run whose outcome changed after it
        recorded itself (its state upload or key finalize failed, a signal came late) says so."""
        with self._store.transaction() as conn:
            conn.execute("DELETE FROM run_history WHERE run_id = ?", (record.run_id,))
            conn.execute(_INSERT, _to_row(record))

    def insert_many(self, records: Iterable[RunRecord]) -> None:
        """Record several runs in one transaction (imports, tests, backfills)."""
        rows = [_to_row(r) for r in records]
        if not rows:
            return
        with self._store.transaction() as conn:
            try:
                conn.executemany(_INSERT, rows)
            except sqlite3.IntegrityError as exc:
                raise StateError(
                    f"state store at {self._store.path}: a run with this run_id is already recorded ({exc})",
                    hint="mint run ids with store.runs.new_run_id()",
                ) from exc

    # -------------------------------------------------------------- reading

    def list(
        self,
        limit: int | None = 50,
        since: datetime | None = None,
        model: str | None = None,
        *,
        statuses: Sequence[str] = (),
        triggers: Sequence[str] = (),
        pipeline: str | None = None,
    ) -> builtins.list[RunRecord]:
        """Runs newest first (by start): at most ``limit``, started at or after ``since``, that executed
        ``model``, with one of ``statuses`` / ``triggers``, of ``pipeline`` (each when given).

        Every filter is part of the query, before the limit: a busy project's manual runs cannot crowd
        its scheduled ones out of ``rocky history --trigger Schedule``.
        """
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        if since is not None:
            where.append("started_at >= ?")
            params.append(to_db(since))
        for column, values in (("status", statuses), ("trigger", triggers)):
            if values:
                where.append(f"{column} IN ({', '.join('?' for _ in values)})")
                params.extend(values)
        if pipeline is not None:
            where.append("pipeline = ?")
            params.append(pipeline)
        if model is not None:
            where.append(
                "EXISTS (SELECT 1 FROM json_each(run_history.models_executed) "
                "WHERE json_extract(value, '$.model_name') = ?)"
            )
            params.append(model)
        sql = _SELECT
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started_at DESC, run_id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return self._store.decoded(self._store.query(sql, params), _from_row)

    def recorded(self, column: Literal["pipeline", "trigger"]) -> builtins.list[str]:
        """The distinct non-null values of ``column`` in the recorded runs, sorted."""
        rows = self._store.query(
            f"SELECT DISTINCT {column} FROM run_history WHERE {column} IS NOT NULL ORDER BY {column}"
        )
        return [str(r[0]) for r in rows]

    def get(self, run_id: str) -> RunRecord | None:
        rows = self._store.query(f"{_SELECT} WHERE run_id = ?", (run_id,))
        return self._store.first(rows, _from_row)

    def latest(self, pipeline: str, status: str | None = None) -> RunRecord | None:
        """The run of ``pipeline`` (with ``status`` when given) that finished last; an index seek."""
        if status is None:
            rows = self._store.query(
                f"{_SELECT} WHERE pipeline = ? ORDER BY finished_at DESC LIMIT 1", (pipeline,)
            )
        else:
            rows = self._store.query(
                f"{_SELECT} WHERE pipeline = ? AND status = ? ORDER BY finished_at DESC LIMIT 1",
                (pipeline, status),
            )
        return self._store.first(rows, _from_row)

    def by_submission_id(self, submission_id: str) -> RunRecord | None:
        """The newest run launched with this submission id (the scheduler's child), if it recorded one."""
        rows = self._store.query(
            f"{_SELECT} WHERE submission_id = ? ORDER BY started_at DESC LIMIT 1", (submission_id,)
        )
        return self._store.first(rows, _from_row)


def _to_row(record: RunRecord) -> tuple[Any, ...]:
    # A model's error may quote a secret (a DSN in a driver message): stored redacted (rocky_engine/redact.py)
    secrets = known()
    models = json.dumps(secrets.deep([m.model_dump(mode="json") for m in record.models_executed]),
                        separators=(",", ":"))
    extra = (json.dumps(secrets.deep(record.extra), separators=(",", ":"), default=str) if record.extra
             else None)
    return (
        record.run_id, record.pipeline, record.pipeline_type, to_db(record.started_at),
        to_db_opt(record.finished_at), record.status, record.trigger, record.submission_id,
        record.config_hash, record.triggering_identity, record.hostname, record.idempotency_key,
        record.exit_code, int(record.interrupted), record.duration_ms, models, extra,
    )


def _from_row(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        run_id=row["run_id"],
        pipeline=row["pipeline"],
        pipeline_type=row["pipeline_type"],
        started_at=from_db(row["started_at"]),
        finished_at=from_db_opt(row["finished_at"]),
        status=row["status"],
        trigger=row["trigger"],
        submission_id=row["submission_id"],
        models_executed=json.loads(row["models_executed"] or "[]"),
        config_hash=row["config_hash"],
        triggering_identity=row["triggering_identity"],
        hostname=row["hostname"],
        idempotency_key=row["idempotency_key"],
        exit_code=row["exit_code"],
        interrupted=bool(row["interrupted"]),
        duration_ms=row["duration_ms"],
        extra=json.loads(row["extra"]) if row["extra"] else {},
    )
