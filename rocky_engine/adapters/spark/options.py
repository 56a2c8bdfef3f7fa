"""Where a Spark Connect server is and how to authenticate to it, parsed without pyspark.

A Spark Connect URL is ``sc://host[:port][/;key=value;...]`` (port 15002 by default). pyspark reads these
keys itself: ``token`` (a bearer token; it forces TLS unless the host is ``localhost``), ``use_ssl``,
``user_id``, ``user_agent``, ``session_id`` (a UUID4: reuse a server-side session) and the
``grpc_keepalive_*`` knobs; every other key is sent as a gRPC metadata header on each call. Databricks
Connect is such a URL: ``sc://<workspace>:443/;token=<PAT>;x-databricks-cluster-id=<id>``.

The secrets never travel inside a URL string here: ``token`` (from the URL or the option) is kept apart,
masked in every message, and handed to pyspark's channel builder as a parameter, so no pyspark error
that echoes the URL can carry it. Values come already substituted (``${VAR}`` is the config loader's job).
"""

from __future__ import annotations

import urllib.parse
import uuid
from dataclasses import dataclass, field

from rocky_engine import __version__
from rocky_engine.errors import AdapterError

DEFAULT_PORT = 15002
#: the Databricks Connect header that routes calls to an all-purpose cluster
CLUSTER_ID_HEADER = "x-databricks-cluster-id"
_HINT = "use remote = \"sc://host:port\" (Databricks: sc://<workspace-host>:443 plus token and cluster_id)"


@dataclass(frozen=True, slots=True)
class SparkConnectOptions:
    """A Spark Connect endpoint; ``token`` never appears in ``repr`` or in any message."""

    remote: str
    token: str | None = field(default=None, repr=False)
    cluster_id: str | None = None
    session_id: str | None = None
    #: extra gRPC headers (``x-databricks-...``); the URL's own ``;key=value`` pairs are merged in
    headers: tuple[tuple[str, str], ...] = ()
    #: how adapter and messages name the endpoint, e.g. ``[adapter.spark]``
    adapter: str = "spark"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Parsed options: a secret-free target plus the channel parameters pyspark needs."""

    adapter: str
    host: str
    port: int
    params: tuple[tuple[str, str], ...] = field(repr=False)
    token: str | None = field(repr=False)

    @property
    def where(self) -> str:
        """``host:port``, the one way messages name the server."""
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The URL pyspark parses: host and port only, so nothing secret is ever parsed or echoed."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"sc://{host}:{self.port}"

    @property
    def session_id(self) -> str | None:
        return dict(self.params).get("session_id")

    def mask(self, text: str) -> str:
        """``text`` with the token replaced by ``***`` (a driver message may echo a header)."""
        if self.token:
            text = text.replace(self.token, "***")
            quoted = urllib.parse.quote(self.token, safe="")
            if quoted != self.token:
                text = text.replace(quoted, "***")
        return text


def parse(options: SparkConnectOptions) -> Endpoint:
    """Validate the options into an Endpoint.

    Raises:
        AdapterError: (query-rejected) the URL is malformed, a ``;key=value`` pair is broken, the token is
            given twice, or the session id is not a UUID4. The message never quotes the URL's parameters.
    """
    name = options.adapter
    remote = options.remote.strip()
    if not remote.startswith("sc://"):
        raise AdapterError(
            f"remote of Spark adapter '{name}' must start with sc://",
            failure_kind="query-rejected",
            hint=_HINT,
        )
    base, _, raw_params = remote[len("sc://") :].partition(";")
    base = base.rstrip("/")
    if "/" in base:
        raise AdapterError(
            f"remote of Spark adapter '{name}' has a path; a Spark Connect URL has none",
            failure_kind="query-rejected",
            hint=_HINT,
        )
    try:
        parsed = urllib.parse.urlsplit(f"http://{base}")
        host, port = parsed.hostname, parsed.port
    except ValueError:
        host, port = None, None
        parsed = None
    if not host or parsed is None or parsed.username or parsed.password:
        raise AdapterError(
            f"remote of Spark adapter '{name}' names no valid host[:port]",
            failure_kind="query-rejected",
            hint=_HINT,
        )
    params: dict[str, str] = {}
    for pair in filter(None, raw_params.split(";")):
        key, sep, value = pair.partition("=")
        if not sep or not key or "=" in value:
            # pyspark splits on '=' too; a token with '=' in it must be percent-encoded or given as `token`.
            raise AdapterError(
                f"remote of Spark adapter '{name}' has a parameter that is not key=value (parameter "
                f"{len(params) + 1} after ';')",
                failure_kind="query-rejected",
                hint="percent-encode '=' and ';' inside values, or pass the token as `token`",
            )
        params[key.strip()] = urllib.parse.unquote(value)
    token = params.pop("token", None)
    if options.token:
        if token is not None and token != options.token:
            raise AdapterError(
                f"Spark adapter '{name}' has a token both in remote and in token",
                failure_kind="query-rejected",
                hint="keep one of them",
            )
        token = options.token
    if options.cluster_id:
        params[CLUSTER_ID_HEADER] = options.cluster_id
    if options.session_id:
        params["session_id"] = options.session_id
    for key, value in options.headers:
        params[key] = value
    if "session_id" in params:
        try:
            if uuid.UUID(params["session_id"]).version != 4:
                raise ValueError("not a UUID4")
        except ValueError:
            raise AdapterError(
                f"session_id of Spark adapter '{name}' is not a UUID4",
                failure_kind="query-rejected",
                hint="use a value like the one `python -c 'import uuid; print(uuid.uuid4())'` prints",
            ) from None
    params.setdefault("user_agent", f"rocky/{__version__}")
    return Endpoint(
        adapter=name,
        host=host,
        port=port or DEFAULT_PORT,
        params=tuple(sorted(params.items())),
        token=token or None,
    )


def channel_params(endpoint: Endpoint, *, fresh_session: bool) -> dict[str, str]:
    """The parameters for one pyspark channel builder (``fresh_session``: drop a configured session id).

    Worker sessions must not share the configured server-side session: two clients on one session id
    would share temp views and could interrupt each other's statements.
    """
    params = dict(endpoint.params)
    if fresh_session:
        params.pop("session_id", None)
    if endpoint.token:
        params["token"] = endpoint.token
    return params

