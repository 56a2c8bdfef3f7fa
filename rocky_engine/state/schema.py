"""The state store schema: an ordered list of migrations; the schema version is its length.

Rules for later changes: never edit a released migration, append a new script instead (``ALTER TABLE ...
ADD COLUMN``, new tables, new indexes). A store at version N is brought to ``SCHEMA_VERSION`` by running
scripts N+1.. in one transaction on open. Each script must be plain SQL without its own BEGIN/COMMIT.

Timestamps are TEXT in the form written by ``state._time.to_db`` (fixed-width UTC), so they sort
chronologically. JSON columns are TEXT.
"""

from __future__ import annotations

#: Tables that describe one machine: remote backends never upload or overwrite them (CONTRACT section 5).
LOCAL_ONLY_TABLES: tuple[str, ...] = ("schedule_state", "schedule_claims", "jobs")

_V1 = """
CREATE TABLE metadata (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE watermarks (
    key        TEXT PRIMARY KEY,           -- "catalog.schema.table"
    value      TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE run_history (
    run_id              TEXT PRIMARY KEY,  -- run-YYYYMMDD-HHMMSS-mmm
    pipeline            TEXT,
    pipeline_type       TEXT,
    started_at          TEXT NOT NULL,
    finished_at         TEXT,
    status              TEXT NOT NULL,     -- Success | PartialFailure | Failure
    trigger             TEXT NOT NULL DEFAULT 'Manual',
    submission_id       TEXT,
    config_hash         TEXT,
    triggering_identity TEXT,
    hostname            TEXT,
    idempotency_key     TEXT,
    exit_code           INTEGER,
    interrupted         INTEGER NOT NULL DEFAULT 0,
    duration_ms         INTEGER,
    models_executed     TEXT NOT NULL DEFAULT '[]',
    extra               TEXT
);
-- rocky history: newest first.
CREATE INDEX run_history_started ON run_history (started_at DESC, run_id DESC);
-- The scheduler resolves a submitted claim from the child's run record.
CREATE INDEX run_history_submission ON run_history (submission_id) WHERE submission_id IS NOT NULL;
-- "latest success of pipeline P" (after / freshness demand) stays an index seek at 100k runs.
CREATE INDEX run_history_pipeline_status ON run_history (pipeline, status, finished_at DESC);
CREATE INDEX run_history_pipeline ON run_history (pipeline, finished_at DESC);

CREATE TABLE run_progress (
    run_id      TEXT NOT NULL,
    key         TEXT NOT NULL,             -- asset / table key of one task of the run
    pipeline    TEXT,
    status      TEXT NOT NULL,             -- success | failed | skipped
    rows        INTEGER,
    finished_at TEXT NOT NULL,
    error       TEXT,
    PRIMARY KEY (run_id, key)
);
-- --resume-latest: the newest run of a pipeline that recorded progress (it may have no run record).
CREATE INDEX run_progress_pipeline ON run_progress (pipeline, run_id DESC);

CREATE TABLE check_history (
    id          INTEGER PRIMARY KEY,
    run_id      TEXT NOT NULL,
    table_key   TEXT NOT NULL,
    check_name  TEXT NOT NULL,             -- row_count values are the anomaly baseline
    passed      INTEGER NOT NULL,
    value       NUMERIC,
    severity    TEXT,
    detail      TEXT,
    recorded_at TEXT NOT NULL
);
CREATE INDEX check_history_table ON check_history (table_key, check_name, recorded_at DESC);
CREATE INDEX check_history_run ON check_history (run_id);

CREATE TABLE idempotency_keys (
    key         TEXT PRIMARY KEY,
    state       TEXT NOT NULL CHECK (state IN ('in_flight', 'succeeded', 'failed')),
    run_id      TEXT NOT NULL,
    claimed_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    finished_at TEXT
);
CREATE INDEX idempotency_keys_finished ON idempotency_keys (finished_at);

CREATE TABLE loaded_files (
    scope        TEXT NOT NULL,            -- load pipeline or connector name
    file_key     TEXT NOT NULL,            -- path or URI relative to the source
    size_bytes   INTEGER,
    modified_at  TEXT,
    content_hash TEXT,
    rows         INTEGER,
    run_id       TEXT,
    loaded_at    TEXT NOT NULL,
    PRIMARY KEY (scope, file_key)
);

CREATE TABLE connector_state (
    name           TEXT PRIMARY KEY,
    commit_seq     INTEGER NOT NULL DEFAULT 0,
    schema_version INTEGER NOT NULL,
    value          TEXT NOT NULL,          -- JSON, at most 1 MiB
    run_id         TEXT,
    committed_at   TEXT NOT NULL
);

CREATE TABLE schedule_state (
    pipeline             TEXT PRIMARY KEY,
    cron                 TEXT,             -- the expression the anchor belongs to
    timezone             TEXT,
    cron_anchor          TEXT,             -- last occurrence accounted for (fired or skipped)
    last_fire            TEXT,
    last_fire_source     TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    last_attempt_at      TEXT,
    last_outcome         TEXT,             -- success | partial | failure
    paused               INTEGER NOT NULL DEFAULT 0,
    paused_at            TEXT,
    last_evaluated_at    TEXT,
    extra                TEXT
);

CREATE TABLE schedule_claims (
    claim_key     TEXT PRIMARY KEY,        -- pipeline + source + logical time, or the webhook demand id
    pipeline      TEXT NOT NULL,
    source        TEXT NOT NULL,           -- cron | after | freshness | webhook
    logical_ts    TEXT,
    submission_id TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('submitted', 'completed', 'released')),
    outcome       TEXT,                    -- success | partial | failure once completed
    exit_code     INTEGER,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX schedule_claims_state ON schedule_claims (state, pipeline);
CREATE INDEX schedule_claims_submission ON schedule_claims (submission_id);

CREATE TABLE jobs (
    job_id       TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,            -- run | ...
    state        TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    submitted_at TEXT NOT NULL,
    started_at   TEXT,
    finished_at  TEXT,
    pipeline     TEXT,
    request      TEXT,                     -- JSON body that created the job
    result       TEXT,                     -- JSON result document
    error        TEXT,
    pid          INTEGER
);
CREATE INDEX jobs_submitted ON jobs (submitted_at DESC);
"""

# rocky serve's jobs: which server process owns a job (a restarted or second server must not fail a job
# whose owner is alive), the attempt of a scheduled run, and an index for "the unfinished ones".
_V2 = """
ALTER TABLE jobs ADD COLUMN owner TEXT;                -- JSON {pid, hostname, started_at} of the server
ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1;
CREATE INDEX jobs_state ON jobs (state);
"""

# Who holds an in-flight idempotency claim (JSON {host, pid, start}): a claim whose holder is provably dead
# on this host is adopted at once instead of blocking its key until the TTL (state.idempotency_decision).
_V3 = """
ALTER TABLE idempotency_keys ADD COLUMN holder TEXT;
"""

#: Ordered migrations; index i holds the script that takes a store from version i to i + 1.
MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3)

#: The schema version this engine writes.
SCHEMA_VERSION: int = len(MIGRATIONS)
