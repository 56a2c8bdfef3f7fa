"""Response plumbing shared by the routes: JSON bodies, ``{code, message}`` errors, bounded body reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from rocky_engine.output import redacted_document_text
from rocky_engine.wire.base import WireModel
from rocky_engine.wire.server import ErrorBody

JSON_TYPE = "application/json"

#: status -> the ``code`` of an error raised by the router itself (unknown route, wrong method)
ROUTER_CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
}


class BodyTooLarge(Exception):
    """The request body is over the route's limit (answered with 413)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"request body is over {limit} bytes")


def json_response(
    doc: WireModel | Mapping[str, Any], status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON document (a wire model, or the JSON-ready dict of one) as the CLI writes it."""
    body = redacted_document_text(doc).encode()
    return Response(body, status_code=status, headers=dict(headers or {}), media_type=JSON_TYPE)


def json_text_response(text: str, status: int = 200) -> Response:
    """A JSON document already written (and redacted) as :func:`json_response` would write it."""
    return Response(text.encode(), status_code=status, media_type=JSON_TYPE)


def error_response(
    status: int,
    code: str,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    job_id: str | None = None,
) -> Response:
    """The contract's error body ``{code, message}`` (plus the running ``job_id`` of a refused job)."""
    return json_response(ErrorBody(code=code, message=message, job_id=job_id), status, headers)


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused past ``limit`` bytes without reading the rest.

    Raises:
        BodyTooLarge: Content-Length or the bytes received so far exceed ``limit``.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise BodyTooLarge(limit)
        except ValueError:
            pass  # a malformed length: the server's HTTP parser decides; we count what arrives
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def query_int(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    """An integer query parameter within ``[lo, hi]``.

    Raises:
        ValueError: not an integer, or out of range (the message names the parameter).
    """
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"query parameter '{name}' must be an integer, got '{raw}'") from None
    if not lo <= value <= hi:
        raise ValueError(f"query parameter '{name}' must be between {lo} and {hi}, got {value}")
    return value
