"""Issue 18's request limits against real ``rocky serve`` processes and raw sockets: the head size (a 16 MiB
header is 431 and costs the server no memory), header count, request target, connections, and time
(slowloris, idle connections)."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from rocky_engine.server.settings import RequestLimits
from tests.engine.server.kit import InProcessServer, ServeProcess, serving, simple_project, wait_for

pytestmark = pytest.mark.slow
MIB = 1024 * 1024


def _port(srv: ServeProcess) -> int:
    return int(srv.url.rsplit(":", 1)[1])


def rss_mb(srv: ServeProcess) -> float:
    assert srv.proc is not None
    for line in Path(f"/proc/{srv.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class RawClient:
    """One raw TCP connection that writes ``head`` (then ``filler`` bytes of header value, then the end of
    the head) while a thread reads whatever the server answers, as a real client would."""

    def __init__(self, port: int, head: bytes, filler: int = 0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.head = head
        self.filler = filler
        self.answer = b""
        self.read_error: OSError | None = None
        self.write_error: OSError | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._writer = threading.Thread(target=self._write, daemon=True)

    def start(self) -> RawClient:
        self._reader.start()
        self._writer.start()
        return self

    def _read(self) -> None:
        try:
            while chunk := self.sock.recv(65536):
                self.answer += chunk
        except OSError as exc:
            self.read_error = exc

    def _write(self) -> None:
        block = b"a" * 65536
        try:
            if not self.filler:
                self.sock.sendall(self.head + b"\r\n\r\n")  # one write: it may arrive in one read
                return
            self.sock.sendall(self.head)
            sent = 0
            while sent < self.filler:
                self.sock.sendall(block)
                sent += len(block)
            self.sock.sendall(b"\r\n\r\n")
        except OSError as exc:  # the server closed after its linger: expected once it has answered
            self.write_error = exc

    def join(self, timeout: float = 120) -> RawClient:
        self._writer.join(timeout)
        self._reader.join(timeout)
        self.sock.close()
        return self

    def alive(self) -> bool:
        return self._reader.is_alive() or self._writer.is_alive()

    def status(self) -> int:
        assert self.answer.startswith(b"HTTP/1.1 "), (self.answer[:200], self.read_error)
        return int(self.answer[9:12])

    def error(self) -> dict[str, str]:
        doc: dict[str, str] = json.loads(self.answer.split(b"\r\n\r\n", 1)[1])
        return doc


def _head(path: str = "/api/v1/health", method: str = "GET", extra: bytes = b"") -> bytes:
    """A request head without its final CRLF CRLF (RawClient writes it): request line, Host, ``extra``."""
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1".encode() + extra


def read_answer(sock: socket.socket) -> bytes:
    """One JSON answer (every body of this server ends with a newline), or what came before EOF."""
    answer = b""
    while not answer.endswith(b"}\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        answer += chunk
    return answer


def _fields(count: int) -> bytes:
    return b"".join(b"\r\nX-%d: v" % i for i in range(count))


def test_30_concurrent_16_mib_headers_are_431_and_the_server_stays_small(tmp_path: Path) -> None:
    simple_project(tmp_path)
    with serving(tmp_path) as srv, srv.client() as c:
        assert c.get("/api/v1/health").status_code == 200
        before = rss_mb(srv)
        big = _head(extra=b"\r\nX-Big: ")
        clients = [RawClient(_port(srv), big, filler=16 * MIB).start() for _ in range(30)]
        peak = before
        while any(cl.alive() for cl in clients):
            peak = max(peak, rss_mb(srv))
            time.sleep(0.01)
        for cl in clients:
            cl.join()
        after = rss_mb(srv)
        still = c.get("/api/v1/health").status_code
    assert [cl.status() for cl in clients] == [431] * 30
    assert clients[0].error() == {
        "code": "header_too_large",
        "message": "the request head (request line and headers) is over 32768 bytes (--max-header-bytes)",
    }
    assert peak - before < 20, f"RSS {before:.0f} MB -> peak {peak:.0f} MB"
    assert after - before < 20
    assert still == 200


def test_a_client_that_writes_16_mib_before_reading_still_reads_its_431(tmp_path: Path) -> None:
    # Closing with unread bytes would reset the connection and destroy the answer: the server lingers.
    simple_project(tmp_path)
    with serving(tmp_path) as srv, socket.create_connection(("127.0.0.1", _port(srv)), timeout=60) as s:
        s.sendall(_head(extra=b"\r\nX-Big: ") + b"a" * (16 * MIB) + b"\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 431 ") and b'"header_too_large"' in answer


def test_an_8_mib_signature_is_431_before_the_signature_check(tmp_path: Path) -> None:
    simple_project(tmp_path)
    with serving(tmp_path, "--scheduler", "--poll-interval-seconds", "3600",
                 env={"ROCKY_WEBHOOK_SECRET": "s"}) as srv:
        head = _head("/api/v1/hooks/trigger/orders", "POST", b"\r\nContent-Length: 0\r\nX-Rocky-Signature: ")
        client = RawClient(_port(srv), head, filler=8 * MIB).start().join()
    assert client.status() == 431 and client.error()["code"] == "header_too_large"


def test_header_count_request_target_and_head_size_flags(tmp_path: Path) -> None:
    simple_project(tmp_path)
    with serving(tmp_path, "--max-header-bytes", "16384") as srv:
        port = _port(srv)
        many = RawClient(port, _head(extra=_fields(100))).start()
        fifty_thousand = RawClient(port, _head(extra=b"\r\nX: v" * 50_000)).start()
        long_target = RawClient(port, _head("/api/v1/health?" + "q" * 8200)).start()
        small_head = RawClient(port, _head(extra=b"\r\nX-Pad: " + b"p" * 16384)).start()
        exactly_100 = RawClient(port, _head(extra=_fields(99))).start()
        malformed = RawClient(port, b"NOT HTTP AT ALL").start()
        # 40 KiB in one write, one read: refused as too large before the parser reaches the broken last
        # line (which would be a 400), because what arrives is fed to the parser in slices of the limit.
        one_piece = RawClient(port, _head(extra=b"\r\nX-Pad: " + b"p" * 40000 + b"\r\nbroken")).start()
        for cl in (many, fifty_thousand, long_target, small_head, exactly_100, malformed, one_piece):
            cl.join()
    assert many.status() == 431 and many.error() == {
        "code": "too_many_headers", "message": "the request has more than 100 header fields"}
    assert fifty_thousand.status() == 431 and fifty_thousand.error()["code"] == "too_many_headers"
    assert long_target.status() == 414 and long_target.error() == {
        "code": "uri_too_long", "message": "the request target is over 8192 bytes"}
    assert small_head.status() == 431 and "over 16384 bytes" in small_head.error()["message"]
    assert exactly_100.status() == 200  # Host plus 99: the limit itself is accepted
    assert malformed.status() == 400 and malformed.error()["code"] == "bad_request"
    assert one_piece.status() == 431 and one_piece.error()["code"] == "header_too_large"


def test_the_connection_cap_holds_and_frees_up(tmp_path: Path) -> None:
    simple_project(tmp_path)
    with serving(tmp_path, "--max-connections", "4", "--request-timeout-seconds", "60") as srv:
        port = _port(srv)
        held = []
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(_head() + b"\r\n\r\n")
            served = read_answer(s)
            assert served.startswith(b"HTTP/1.1 200 ")  # accepted and served: the slot is taken
            s.sendall(_head() + b"\r\n")  # and kept busy with a request still arriving
            held.append(s)
        before = rss_mb(srv)
        # 200 more connections, each pushing most of a head: every one is refused unread.
        flood = [RawClient(port, _head(extra=b"\r\nX-Pad: " + b"p" * 30000)).start() for _ in range(200)]
        for cl in flood:
            cl.join()
        grown = rss_mb(srv) - before
        refused = httpx.get(f"{srv.url}/api/v1/health", timeout=30)
        # Refused connections still lingering take no served slot: a held one finishes its request.
        lingering = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(8)]
        held[0].sendall(b"\r\n")
        answered = read_answer(held[0])
        for s in lingering:
            s.close()
        held.pop().close()
        freed = wait_for(lambda: httpx.get(f"{srv.url}/api/v1/health", timeout=30).status_code == 200,
                         what="a free connection slot")
        for s in held:
            s.close()
    assert refused.status_code == 503 and refused.json() == {
        "code": "too_many_connections",
        "message": "the server already serves its limit of 4 connections (--max-connections); retry shortly",
    }
    assert {cl.status() for cl in flood} == {503}
    assert answered.startswith(b"HTTP/1.1 200 ")
    assert grown < 20 and freed


def test_a_slowloris_client_is_cut_off_by_the_request_timeout(tmp_path: Path) -> None:
    simple_project(tmp_path)
    with serving(tmp_path, "--request-timeout-seconds", "3") as srv:
        port = _port(srv)
        slow = socket.create_connection(("127.0.0.1", port), timeout=30)
        started = time.monotonic()
        slow.sendall(_head() + b"\r\n")
        slow.setblocking(False)
        answer = b""
        while not answer.endswith(b"}\n") and time.monotonic() - started < 30:
            try:
                slow.send(b"X")  # one header byte a second
            except OSError:
                break
            time.sleep(1)
            try:
                answer += slow.recv(65536)
            except BlockingIOError:
                pass
        cut_after = time.monotonic() - started
        others_served = httpx.get(f"{srv.url}/api/v1/health", timeout=30).status_code
        idle = socket.create_connection(("127.0.0.1", port), timeout=30)
        opened = time.monotonic()
        idle_answer = idle.recv(65536)
        idle_after = time.monotonic() - opened
        slow.close()
        idle.close()
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {
        "code": "request_timeout",
        "message": "the request did not arrive in full within 3 s (--request-timeout-seconds)",
    }
    assert 3 <= cut_after < 15, cut_after  # the timeout, plus the client's 1 s polling, plus load
    assert others_served == 200
    assert idle_answer == b"" and 2.5 <= idle_after < 15  # closed without a word


def test_an_idle_kept_alive_connection_is_closed_after_5_seconds(tmp_path: Path) -> None:
    simple_project(tmp_path)
    with serving(tmp_path) as srv, socket.create_connection(("127.0.0.1", _port(srv)), timeout=60) as s:
        s.sendall(_head() + b"\r\n\r\n")
        first = read_answer(s)
        answered = time.monotonic()
        closed = s.recv(65536)
        idle_for = time.monotonic() - answered
    assert first.startswith(b"HTTP/1.1 200 ")
    assert closed == b"" and 4.5 <= idle_for < 20, idle_for


def test_a_body_that_stops_arriving_is_408_and_the_route_gives_up_quietly(tmp_path: Path) -> None:
    simple_project(tmp_path)
    with serving(tmp_path, "--request-timeout-seconds", "2") as srv, \
            socket.create_connection(("127.0.0.1", _port(srv)), timeout=60) as s:
        s.sendall(_head("/api/v1/jobs/run", "POST", b"\r\nContent-Length: 100\r\n\r\n") + b'{"pipel')
        answer = read_answer(s)
        jobs = httpx.get(f"{srv.url}/api/v1/jobs", timeout=30).json()["jobs"]
        log = srv.log()
    assert answer.startswith(b"HTTP/1.1 408 ") and b'"request_timeout"' in answer
    assert jobs == []
    assert "internal error" not in log and "Traceback" not in log


def test_a_request_that_arrived_in_full_is_not_cut_off_while_the_server_works_on_it(tmp_path: Path) -> None:
    config = simple_project(tmp_path)
    srv = InProcessServer(config, limits=RequestLimits(request_timeout_seconds=1))
    with srv, socket.create_connection(("127.0.0.1", int(srv.url.rsplit(":", 1)[1])), timeout=60) as s:
        srv.ctx.read_permit.acquire()  # GET /api/v1/runs now waits for the store
        release = threading.Timer(2.5, srv.ctx.read_permit.release)
        release.start()
        started = time.monotonic()
        s.sendall(_head("/api/v1/runs") + b"\r\n\r\n")
        slow_answer = read_answer(s)
        took = time.monotonic() - started
        # The next request on the connection gets its own window, counted from that answer.
        s.sendall(_head())
        answered = time.monotonic()
        stalled = read_answer(s)
        cut_after = time.monotonic() - answered
        release.join()
    assert slow_answer.startswith(b"HTTP/1.1 200 ") and took >= 2.4
    assert stalled.startswith(b"HTTP/1.1 408 ") and cut_after < 10


def test_pipelined_requests_in_one_write_are_all_answered_in_order(tmp_path: Path) -> None:
    config = simple_project(tmp_path)
    srv = InProcessServer(config)
    with srv, socket.create_connection(("127.0.0.1", int(srv.url.rsplit(":", 1)[1])), timeout=60) as s:
        last = _head("/api/v1/health", extra=b"\r\nConnection: close") + b"\r\n\r\n"
        s.sendall(_head() + b"\r\n\r\n" + _head("/api/v1/jobs") + b"\r\n\r\n" + last)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert answer.count(b"HTTP/1.1 200 ") == 3
    assert answer.index(b'"status": "ok"') < answer.index(b'"jobs"') < answer.rindex(b'"status": "ok"')
