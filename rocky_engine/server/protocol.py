"""How much a request may cost: the HTTP connection layer of ``rocky serve`` with every bound enforced
before the bytes it bounds are buffered (docs/server.md, "Limits").

uvicorn's h11 protocol is pinned (httptools, picked by default when installed, buffers a header of any
size before the application sees it) and extended here:

- **Head size** (``--max-header-bytes``): h11 refuses a head still incomplete past the limit, and the
  parsed head is measured too (a head that arrived whole in one read is never checked by h11), so at most
  the limit plus one slice of it is ever buffered: what arrives is fed to h11 in slices of the limit.
  ``431 header_too_large``.
- **Header count** and **request-target length**: checked on the parsed head, before the application
  runs: ``431 too_many_headers``, ``414 uri_too_long``.
- **Connections** (``--max-connections``): a connection beyond the limit is answered ``503
  too_many_connections`` at once and closed without being read. uvicorn's own ``limit_concurrency`` (set
  one above, since it counts the asking connection) bounds the requests still running for connections
  that went away.
- **Time** (``--request-timeout-seconds``): the head and body of a request must arrive within the timeout
  of the connection opening (or of the previous response), else ``408 request_timeout`` and the
  connection is closed; a connection that sent nothing is closed silently. A slowloris client that sends
  one byte a second is cut off by it. An idle kept-alive connection closes after ``keep_alive_seconds``.

Refusals are written directly (``{code, message}``, ``Connection: close``), then the connection lingers:
what the client still sends is read and dropped for ``linger_seconds`` (or until it closes), so a client
writing a 16 MiB header reads its 431 instead of a connection reset.
"""

from __future__ import annotations

import asyncio
import http
import logging
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from rocky_engine.server.guard import Refusal, RefusalLog
from rocky_engine.server.settings import RequestLimits

#: h11's states in which the peer has sent its whole request (the application answers at its own pace)
_REQUEST_IN = (h11.DONE, h11.MUST_CLOSE, h11.CLOSED)
#: refused connections lingering at once (each holds a socket for at most linger_seconds); past it, a
#: refusal closes at once, and a client still writing may see a reset instead of the answer
MAX_LINGERING = 256


class BoundedConfig(uvicorn.Config):
    """uvicorn's configuration with Rocky's protocol and limits (the one place both are set)."""

    def __init__(self, app: Any, limits: RequestLimits, refusals: RefusalLog, **kwargs: Any) -> None:
        super().__init__(
            app,
            http=BoundedH11Protocol,
            ws="none",
            h11_max_incomplete_event_size=limits.max_header_bytes,
            limit_concurrency=limits.max_connections + 1,
            timeout_keep_alive=limits.keep_alive_seconds,
            log_config=None,
            access_log=False,
            **kwargs,
        )
        self.limits = limits
        self.refusals = refusals
        #: refused connections still being read and dropped (bounded: past it, a refusal closes at once)
        self.lingering: set[BoundedH11Protocol] = set()
        # uvicorn logs a warning per malformed request and per request over limit_concurrency; Rocky
        # counts and logs its own refusals once each, so a flood cannot flood the log through uvicorn.
        logging.getLogger("uvicorn.error").setLevel(logging.ERROR)


class BoundedConnection(h11.Connection):
    """h11's server side with the head-size, header-count and target-length limits on parsed heads."""

    def __init__(self, limits: RequestLimits) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=limits.max_header_bytes)
        self.limits = limits
        #: why the last event was refused (read by the protocol to answer it)
        self.refusal: Refusal | None = None

    def next_event(self) -> Any:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            self.refusal = self._protocol_refusal(exc)
            raise
        if isinstance(event, h11.Request):
            self.refusal = self._head_refusal(event)
            if self.refusal is not None:
                raise h11.RemoteProtocolError(self.refusal.message, self.refusal.status)
        return event

    def _protocol_refusal(self, exc: h11.RemoteProtocolError) -> Refusal:
        if exc.error_status_hint == 431:
            return self._too_large()
        text = str(exc)[:200]
        return Refusal(400, "bad_request", f"malformed HTTP request: {text}", detail=text)

    def _too_large(self) -> Refusal:
        limit = self.limits.max_header_bytes
        return Refusal(431, "header_too_large", f"the request head (request line and headers) is over "
                       f"{limit} bytes (--max-header-bytes)", detail=f"head over {limit} bytes")

    def _head_refusal(self, event: h11.Request) -> Refusal | None:
        raw = event.headers.raw_items()
        size = len(event.method) + len(event.target) + 12 + sum(len(k) + len(v) + 4 for k, v in raw)
        if size > self.limits.max_header_bytes:
            return self._too_large()
        if len(raw) > self.limits.max_headers:
            return Refusal(431, "too_many_headers", f"the request has {len(raw)} header fields; at most "
                           f"{self.limits.max_headers} are accepted",
                           detail=f"over {self.limits.max_headers} headers")
        if len(event.target) > self.limits.max_request_line_bytes:
            return Refusal(414, "uri_too_long", f"the request target is over "
                           f"{self.limits.max_request_line_bytes} bytes",
                           detail=f"target over {self.limits.max_request_line_bytes} bytes")
        return None


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with Rocky's limits (see the module docstring)."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        assert isinstance(config, BoundedConfig), "BoundedH11Protocol needs a BoundedConfig"
        self.bounded = config
        self.limits = config.limits
        self.conn = BoundedConnection(config.limits)
        self._refused = False
        self._deadline: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ connection life

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            cap = self.limits.max_connections
            self._refuse(Refusal(
                503, "too_many_connections", f"the server already serves its limit of {cap} connections "
                "(--max-connections); retry shortly", detail=f"over {cap} connections",
            ))
            return
        self._arm_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        self.bounded.lingering.discard(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering: read and dropped
        step = self.limits.max_header_bytes
        if len(data) <= step:
            super().data_received(data)
            return
        # In slices, so h11 checks its buffer against the head limit at least once per limit's worth.
        for start in range(0, len(data), step):
            if self._refused or self.transport.is_closing():
                return
            super().data_received(data[start:start + step])

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_deadline()  # the next request on this connection gets its own window

    def send_400_response(self, msg: str) -> None:
        # uvicorn calls this for every request h11 (or BoundedConnection) refused.
        refusal = self.conn.refusal if isinstance(self.conn, BoundedConnection) else None
        self._refuse(refusal or Refusal(400, "bad_request", f"malformed HTTP request: {msg}"))

    # ------------------------------------------------------------------ the request deadline

    def _arm_deadline(self) -> None:
        self._cancel_deadline()
        self._deadline = self.loop.call_later(self.limits.request_timeout_seconds, self._deadline_passed)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _deadline_passed(self) -> None:
        self._deadline = None
        if self._refused or self.transport.is_closing() or self.conn.their_state in _REQUEST_IN:
            return
        cycle = self.cycle
        if cycle is not None and cycle.response_started and not cycle.response_complete:
            self.transport.close()  # answering already: nothing else can be said on this connection
            return
        if self.conn.their_state is h11.IDLE and not self.conn.trailing_data[0]:
            self.transport.close()  # nothing sent at all: an idle connection, closed without a word
            return
        seconds = f"{self.limits.request_timeout_seconds:g}"
        self._refuse(Refusal(
            408, "request_timeout", f"the request did not arrive in full within {seconds} s "
            "(--request-timeout-seconds)", detail=f"request not in after {seconds} s",
        ))

    # ------------------------------------------------------------------ refusing

    def _refuse(self, refusal: Refusal) -> None:
        """Answer ``refusal`` (unless a response already started), then linger and close."""
        if self._refused:
            return
        self._refused = True
        self._cancel_deadline()
        self.connections.discard(self)  # a refused connection no longer holds one of the served slots
        self.bounded.refusals.record(refusal)
        cycle = self.cycle
        started = cycle is not None and cycle.response_started
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the application's receive() now says http.disconnect
            cycle.message_event.set()
        if not started:
            self.transport.write(_raw_response(refusal))
        if len(self.bounded.lingering) >= MAX_LINGERING or not self.transport.can_write_eof():
            self.transport.close()
            return
        self.bounded.lingering.add(self)
        self.transport.write_eof()
        self.transport.resume_reading()
        self.loop.call_later(self.limits.linger_seconds, self.transport.close)


def _raw_response(refusal: Refusal) -> bytes:
    response = refusal.response()
    phrase = http.HTTPStatus(refusal.status).phrase
    head = [f"HTTP/1.1 {refusal.status} {phrase}".encode()]
    head += [name + b": " + value for name, value in response.raw_headers]
    return b"\r\n".join(head) + b"\r\n\r\n" + bytes(response.body)
