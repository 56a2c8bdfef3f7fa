"""``[adapter.NAME]`` models: DuckDB, PostgreSQL and Spark warehouses, the Fivetran discovery adapter.

Secrets (``dsn``, ``password``, ``token``, ``api_key``, ``api_secret``) are ``SecretStr`` so that a repr, a
log line or a ``model_dump_json`` never shows them; only the adapter itself asks for the real value
(``conninfo()``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, SecretStr, model_validator

from rocky_engine.config.base import LenientModel

#: Adapter types this engine implements, in the order error messages list them.
ADAPTER_TYPES: tuple[str, ...] = ("duckdb", "postgres", "spark", "fivetran")
#: Adapter types that are warehouses (a pipeline or connector can write to them).
WAREHOUSE_TYPES: frozenset[str] = frozenset({"duckdb", "postgres", "spark"})

#: Types people bring from other Rocky deployments, with the reason this engine refuses them.
REFUSED_ADAPTER_TYPES: dict[str, str] = {
    "bigquery": "BigQuery is not supported: it does not accept local Parquet files",
}


class RetryConfig(LenientModel):
    """``[adapter.NAME.retry]``: statement retries with exponential backoff and a circuit breaker."""

    max_retries: int = Field(default=3, ge=0)
    initial_backoff_ms: int = Field(default=1000, ge=0)
    max_backoff_ms: int = Field(default=30000, ge=0)
    backoff_multiplier: float = Field(default=2.0, ge=1.0)
    jitter: bool = True
    #: consecutive failures that open the breaker; 0 disables it
    circuit_breaker_threshold: int = Field(default=5, ge=0)
    #: seconds before a half-open probe; None keeps the breaker open for the rest of the run
    circuit_breaker_recovery_timeout_secs: int | None = Field(default=None, ge=1)


class DuckDbAdapterConfig(LenientModel):
    """An embedded DuckDB database file (or in-memory when ``path`` is omitted)."""

    type: Literal["duckdb"] = "duckdb"
    path: str | None = None
    retry: RetryConfig = Field(default_factory=RetryConfig)

    @property
    def in_memory(self) -> bool:
        return self.path is None or self.path in ("", ":memory:")

    def ignored_key_note(self, suggestion: str | None) -> str | None:
        # No path is a legal in-memory database; a misspelled path is the likely mistake, so say the cost.
        if suggestion == "path" and self.path is None:
            return "without 'path' this adapter is an in-memory database, discarded when rocky exits"
        return None

    @property
    def catalog(self) -> str:
        """DuckDB names the attached catalog after the file stem (``poc.duckdb`` is catalog ``poc``)."""
        if self.in_memory or self.path is None:
            return "memory"
        return Path(self.path).stem

    def resolved_path(self, root: Path) -> Path | None:
        """The database file, relative paths taken from the directory of rocky.toml; None in memory."""
        if self.in_memory or self.path is None:
            return None
        path = Path(self.path).expanduser()
        return path if path.is_absolute() else root / path


class PostgresAdapterConfig(LenientModel):
    """A PostgreSQL server, by ``dsn`` or by host/port/user/password/dbname (libpq reads PG* for the rest)."""

    type: Literal["postgres"] = "postgres"
    dsn: SecretStr | None = None
    host: str | None = None
    port: int = Field(default=5432, ge=1, le=65535)
    user: str | None = None
    password: SecretStr | None = None
    dbname: str | None = None
    retry: RetryConfig = Field(default_factory=RetryConfig)

    @model_validator(mode="after")
    def _dsn_or_fields(self) -> PostgresAdapterConfig:
        # Mixing both would leave it unclear which host wins; libpq itself would pick silently.
        separate = (self.host, self.user, self.password, self.dbname)
        if self.dsn is not None and any(v is not None for v in separate):
            raise ValueError("set either dsn or host/port/user/password/dbname, not both")
        return self

    def conninfo(self) -> str:
        """The libpq connection string, with the real secret values (for the adapter only; never log it)."""
        if self.dsn is not None:
            return self.dsn.get_secret_value()
        parts: list[str] = []
        for key, value in (
            ("host", self.host),
            ("port", str(self.port)),
            ("user", self.user),
            ("password", self.password.get_secret_value() if self.password else None),
            ("dbname", self.dbname),
        ):
            if value is not None:
                parts.append(f"{key}={_quote_libpq(value)}")
        return " ".join(parts)

    @property
    def catalog(self) -> str:
        """The database name: ``dbname``, else the one in the dsn, else libpq's default ``postgres``."""
        if self.dbname:
            return self.dbname
        if self.dsn is not None:
            parsed = _dbname_from_dsn(self.dsn.get_secret_value())
            if parsed:
                return parsed
        return "postgres"


class SparkAdapterConfig(LenientModel):
    """A Spark Connect endpoint: a local server, a cluster, or Databricks Connect (``remote`` + token +
    cluster id). ``adapters/spark/options.py`` parses it; the token never leaves ``SecretStr`` but there."""

    type: Literal["spark"] = "spark"
    remote: str
    token: SecretStr | None = None
    cluster_id: str | None = None
    #: reuse a server-side session (a UUID4); worker sessions always get fresh ones
    session_id: str | None = None
    #: extra gRPC headers sent on every call (``x-databricks-...``)
    headers: dict[str, str] = Field(default_factory=dict)
    #: the catalog models land in; Spark's built-in one is ``spark_catalog`` (Databricks: ``main``...)
    catalog: str = "spark_catalog"
    #: the format the server creates tables in, declared so that ``rocky validate`` (which never
    #: connects) knows the capability level; a run refuses a server that disagrees. None: not declared,
    #: validate assumes Parquet (no MERGE)
    table_format: str | None = None
    #: a directory the engine and the Spark server both see at this path: replication into Spark stages
    #: Parquet there instead of uploading Arrow (docs/adapters.md). None: Arrow through the connection
    staging_dir: Path | None = None
    retry: RetryConfig = Field(default_factory=RetryConfig)


class FivetranAdapterConfig(LenientModel):
    """The Fivetran REST API, used only to discover which connector schemas exist."""

    type: Literal["fivetran"] = "fivetran"
    kind: Literal["discovery"] = "discovery"
    api_key: SecretStr
    api_secret: SecretStr
    destination_id: str
    base_url: str = "https://api.fivetran.com"
    retry: RetryConfig = Field(default_factory=RetryConfig)


AdapterConfig = Annotated[
    DuckDbAdapterConfig | PostgresAdapterConfig | SparkAdapterConfig | FivetranAdapterConfig,
    Field(discriminator="type"),
]

ADAPTER_CLASSES: dict[
    str, type[DuckDbAdapterConfig | PostgresAdapterConfig | SparkAdapterConfig | FivetranAdapterConfig]
] = {
    "duckdb": DuckDbAdapterConfig,
    "postgres": PostgresAdapterConfig,
    "spark": SparkAdapterConfig,
    "fivetran": FivetranAdapterConfig,
}


def _quote_libpq(value: str) -> str:
    if value and not any(c in value for c in " '\\="):
        return value
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def _dbname_from_dsn(dsn: str) -> str | None:
    """The database named by a URI (``postgresql://h/db``) or keyword (``dbname=db``) connection string."""
    if dsn.startswith(("postgresql://", "postgres://")):
        path = urlsplit(dsn).path.lstrip("/")
        return unquote(path) or None
    for token in _libpq_tokens(dsn):
        key, _, value = token.partition("=")
        if key.strip() == "dbname":
            return value or None
    return None


def _libpq_tokens(dsn: str) -> list[str]:
    """Split a keyword/value conninfo, honouring single quotes and backslash escapes."""
    tokens: list[str] = []
    current: list[str] = []
    quoted = False
    i = 0
    while i < len(dsn):
        c = dsn[i]
        if c == "\\" and i + 1 < len(dsn):
            current.append(dsn[i + 1])
            i += 2
            continue
        if c == "'":
            quoted = not quoted
        elif c.isspace() and not quoted:
            if current:
                tokens.append("".join(current))
                current = []
        else:
            current.append(c)
        i += 1
    if current:
        tokens.append("".join(current))
    # "key = value" with spaces around '=' is legal libpq; glue those pieces back together.
    glued: list[str] = []
    for token in tokens:
        if glued and (glued[-1].endswith("=") or token.startswith("=")):
            glued[-1] += token
        else:
            glued.append(token)
    return glued
