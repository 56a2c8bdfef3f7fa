"""How much a request may cost: the HTTP connection layer of ``rocky serve`` with every bound enforced
before the bytes it bounds are buffered (docs/server.md, "Limits").

uvicorn's httptools protocol (the fast C parser, llhttp) is pinned and extended here. httptools itself
buffers a header of any size before the application sees it, so what arrives is fed to it in slices and
counted:

- **Head size** (``--max-header-bytes``): the bytes fed while a request head is incomplete are counted,
  and past the limit the request is refused before the next slice is parsed, so the parser never holds
  more than twice the limit; a head that completed within one slice is measured when it completes.
  ``431 header_too_large``.
- **Header count** and **request-target length**: counted as the parser reports them, before the
  application runs: ``431 too_many_headers``, ``414 uri_too_long``.
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

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from rocky_engine.server.guard import Refusal, RefusalLog
from rocky_engine.server.settings import RequestLimits

#: refused connections lingering at once (each holds a socket for at most linger_seconds); past it, a
#: refusal closes at once, and a client still writing may see a reset instead of the answer
MAX_LINGERING = 256


class BoundedConfig(uvicorn.Config):
    """uvicorn's configuration with Rocky's protocol and limits (the one place both are set)."""

    def __init__(self, app: Any, limits: RequestLimits, refusals: RefusalLog, **kwargs: Any) -> None:
        super().__init__(
            app,
            http=BoundedHttpToolsProtocol,
            ws="none",
            limit_concurrency=limits.max_connections + 1,
            timeout_keep_alive=limits.keep_alive_seconds,
            log_config=None,
            access_log=False,
            **kwargs,
        )
        self.limits = limits
        self.refusals = refusals
        #: refused connections still being read and dropped (bounded: past it, a refusal closes at once)
        self.lingering: set[BoundedHttpToolsProtocol] = set()
        # uvicorn logs a warning per malformed request and per request over limit_concurrency; Rocky
        # counts and logs its own refusals once each, so a flood cannot flood the log through uvicorn.
        logging.getLogger("uvicorn.error").setLevel(logging.ERROR)


class _Refused(Exception):
    """Raised from a parser callback: httptools aborts the parse and uvicorn calls send_400_response."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with Rocky's limits (see the module docstring)."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        assert isinstance(config, BoundedConfig), "BoundedHttpToolsProtocol needs a BoundedConfig"
        self.bounded = config
        self.limits = config.limits
        #: bytes fed to the parser while the current head is incomplete (None: inside a body)
        self._head_bytes: int | None = 0
        self._header_count = 0
        #: messages the parser began and completed on this connection (more begun: one is arriving)
        self._begun = 0
        self._completed = 0
        #: the cycle of the message arriving or last arrived (None until its head is complete)
        self._current: RequestResponseCycle | None = None
        #: why the parser was stopped (read by send_400_response)
        self._refusal: Refusal | None = None
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
        for start in range(0, len(data), step):
            if self._refused or self.transport.is_closing():
                return
            piece = data[start:start + step] if len(data) > step else data
            if self._head_bytes is not None:
                self._head_bytes += len(piece)
            super().data_received(piece)
            if self._head_bytes is not None and self._head_bytes > step and not self._refused:
                self._refuse(self._too_large())  # still no end of the head after the limit
                return

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_deadline()  # the next request on this connection gets its own window

    def send_400_response(self, msg: str) -> None:
        # uvicorn calls this for every request the parser refused, or a callback below stopped.
        self._refuse(self._refusal or Refusal(400, "bad_request", "malformed HTTP request",
                                              detail="malformed request"))

    # ------------------------------------------------------------------ parser callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._begun += 1
        self._header_count = 0
        self._current = None
        if self._head_bytes is None:
            self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self.limits.max_request_line_bytes:
            self._stop(Refusal(414, "uri_too_long", f"the request target is over "
                               f"{self.limits.max_request_line_bytes} bytes",
                               detail=f"target over {self.limits.max_request_line_bytes} bytes"))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            self._stop(Refusal(431, "too_many_headers", f"the request has more than "
                               f"{self.limits.max_headers} header fields",
                               detail=f"over {self.limits.max_headers} headers"))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        size = len(self.url) + 16 + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > self.limits.max_header_bytes:
            self._stop(self._too_large())  # a head that arrived whole within one slice
        self._head_bytes = None
        super().on_headers_complete()
        self._current = self.cycle

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._completed += 1
        self._head_bytes = 0

    def _too_large(self) -> Refusal:
        limit = self.limits.max_header_bytes
        return Refusal(431, "header_too_large", f"the request head (request line and headers) is over "
                       f"{limit} bytes (--max-header-bytes)", detail=f"head over {limit} bytes")

    def _stop(self, refusal: Refusal) -> None:
        self._refusal = refusal
        raise _Refused(refusal.message)

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
        if self._refused or self.transport.is_closing():
            return
        if self._begun == self._completed:
            if not self._pending():
                self.transport.close()  # nothing sent since the last answer: idle, closed without a word
            return  # else every request is in full: the application answers at its own pace
        seconds = f"{self.limits.request_timeout_seconds:g}"
        self._refuse(Refusal(
            408, "request_timeout", f"the request did not arrive in full within {seconds} s "
            "(--request-timeout-seconds)", detail=f"request not in after {seconds} s",
        ))

    def _pending(self) -> bool:
        """A response of this connection is still to be written, or is being written."""
        return bool(self.pipeline) or (self.cycle is not None and not self.cycle.response_complete)

    # ------------------------------------------------------------------ refusing

    def _refuse(self, refusal: Refusal) -> None:
        """Answer ``refusal``, then linger and close. When an earlier response of this connection is still
        owed, or this request's own answer has begun, nothing can be said in order: the connection just
        closes (its pending requests see http.disconnect)."""
        if self._refused:
            return
        self._refused = True
        self._cancel_deadline()
        self.connections.discard(self)  # a refused connection no longer holds one of the served slots
        self.bounded.refusals.record(refusal)
        current = self._current
        answering = current is not None and current.response_started and not current.response_complete
        earlier_owed = bool(self.pipeline) or (
            self.cycle is not None and self.cycle is not current and not self.cycle.response_complete
        )
        for cycle in (self.cycle, current):
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True  # the application's receive() now says http.disconnect
                cycle.message_event.set()
        if answering or earlier_owed or len(self.bounded.lingering) >= MAX_LINGERING \
                or not self.transport.can_write_eof():
            self.transport.close()
            return
        if current is None or not current.response_started:
            self.transport.write(_raw_response(refusal))
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
