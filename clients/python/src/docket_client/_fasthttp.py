"""A small HTTP/1.1 client for the worker's hot path: JSON requests to one docket server over
kept-alive connections, one write per request, answers parsed in the protocol's callback.

httpx costs a few hundred microseconds of CPU per request (its connection pool, h11, anyio);
a durable function makes a request or more per step, so the worker sends the calls of a run
(``resume``, ``steps``, ``suspend``, ``finish``) through this instead. Anything it cannot do
(a proxy, HTTP/2) is not asked of it: :class:`AsyncClient` uses it only for plain ``http://`` and
``https://`` servers, and errors are raised as httpx's (``httpx.TransportError`` subclasses)
so callers handle both alike.
"""
from __future__ import annotations

import asyncio
import collections
import ssl
from typing import Deque, Dict, List, Optional, Tuple, Union
from urllib.parse import urlsplit

import httpx


class _Answer:
    __slots__ = ("status", "headers", "body", "close")

    def __init__(self, status: int, headers: Dict[str, str], body: bytes, close: bool) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.close = close


class _Conn(asyncio.Protocol):
    """One connection; one request at a time."""

    def __init__(self) -> None:
        self.transport: Optional[asyncio.Transport] = None
        self.buf = bytearray()
        self.waiter: Optional[asyncio.Future] = None
        self.closed = False
        self.received = False  # bytes of the current answer arrived
        self._head: Optional[Tuple[int, Dict[str, str], int, int, bool]] = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.closed = True
        w = self.waiter
        if w is not None and not w.done():
            w.set_exception(httpx.ReadError(f"connection closed: {exc or 'by the server'}"))

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self.received = True
        w = self.waiter
        if w is None or w.done():
            return
        try:
            answer = self._parse()
        except ValueError as e:
            w.set_exception(httpx.RemoteProtocolError(str(e)))
            return
        if answer is not None:
            w.set_result(answer)

    def _parse(self) -> Optional[_Answer]:
        buf = self.buf
        if self._head is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > 65536:
                    raise ValueError("answer head too long")
                return None
            head = bytes(buf[:end]).lower()
            if not head.startswith(b"http/1."):
                raise ValueError(f"not an HTTP/1.1 answer: {head[:40]!r}")
            status = int(head[9:12])
            close = head.startswith(b"http/1.0") or b"\r\nconnection: close" in head
            if b"\r\ntransfer-encoding:" in head and b"chunked" in head:
                length = -1
            else:
                at = head.find(b"\r\ncontent-length:")
                if at < 0:
                    length = 0
                else:
                    eol = head.find(b"\r\n", at + 17)
                    length = int(head[at + 17:eol if eol > 0 else len(head)])
            headers: Dict[str, str] = {}
            if status >= 400:  # the headers an error needs (retry-after)
                for line in bytes(buf[:end]).decode("latin-1").split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    headers[k.strip().lower()] = v.strip()
            self._head = (status, headers, end + 4, length, close)
        status, headers, start, length, close = self._head
        if length >= 0:
            if len(buf) - start < length:
                return None
            body = bytes(buf[start:start + length])
            del buf[:start + length]
        else:
            decoded = self._dechunk(start)
            if decoded is None:
                return None
            body, used = decoded
            del buf[:used]
        self._head = None
        return _Answer(status, headers, body, close)

    def _dechunk(self, pos: int) -> Optional[Tuple[bytes, int]]:
        buf, out = self.buf, bytearray()
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                return None
            size = int(bytes(buf[pos:eol]).split(b";")[0].strip() or b"0", 16)
            pos = eol + 2
            if size == 0:
                end = buf.find(b"\r\n\r\n", pos - 2)
                if end < 0:
                    return None
                return bytes(out), end + 4
            if len(buf) < pos + size + 2:
                return None
            out += buf[pos:pos + size]
            pos += size + 2


class FastHttp:
    """Kept-alive connections to one server (at most ``max_connections``)."""

    def __init__(self, base_url: str, headers: Dict[str, str],
                 verify: Union[bool, ssl.SSLContext] = True, timeout: float = 75.0,
                 connect_timeout: float = 30.0, max_connections: int = 100) -> None:
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"not an http(s) URL: {base_url}")
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.ssl: Union[bool, ssl.SSLContext, None] = None
        if u.scheme == "https":
            if isinstance(verify, ssl.SSLContext):
                self.ssl = verify
            elif verify:
                self.ssl = ssl.create_default_context()
            else:
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                self.ssl = ctx
        host_header = u.netloc.rsplit("@", 1)[-1]
        fixed = [f"host: {host_header}"] + [f"{k}: {v}" for k, v in headers.items()]
        self._fixed = ("\r\n".join(fixed) + "\r\n").encode("latin-1")
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_connections = max_connections
        self._idle: List[_Conn] = []
        self._open = 0
        self._waiting: Deque[asyncio.Future] = collections.deque()

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(
                _Conn, self.host, self.port, ssl=self.ssl,
                server_hostname=self.host if self.ssl else None), self.connect_timeout)
        except asyncio.TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {self.host}:{self.port} timed out") \
                from None
        except OSError as e:
            raise httpx.ConnectError(f"connecting to {self.host}:{self.port}: {e}") from None
        return conn

    async def _acquire(self) -> Tuple[_Conn, bool]:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn, True
            self._open -= 1
        if self._open >= self.max_connections:
            fut = asyncio.get_running_loop().create_future()
            self._waiting.append(fut)
            try:
                return await fut, True
            except BaseException:
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    self._release(fut.result())
                raise
        self._open += 1
        try:
            return await self._connect(), False
        except BaseException:
            self._open -= 1
            self._wake()
            raise

    def _release(self, conn: _Conn) -> None:
        while self._waiting:
            fut = self._waiting.popleft()
            if not fut.done():
                fut.set_result(conn)
                return
        self._idle.append(conn)

    def _discard(self, conn: _Conn) -> None:
        self._open -= 1
        conn.closed = True
        if conn.transport is not None:
            conn.transport.abort()
        self._wake()

    def _wake(self) -> None:
        # A slot freed: one waiter opens a connection of its own.
        while self._waiting:
            fut = self._waiting.popleft()
            if not fut.done():
                fut.set_exception(_Retry())
                return

    async def request(self, method: str, path: str, body: Optional[bytes] = None,
                      timeout: Optional[float] = None) -> _Answer:
        """One request → the answer (any status). Raises httpx.TransportError subclasses."""
        head = f"{method} {self.prefix}{path} HTTP/1.1\r\n".encode("latin-1") + self._fixed
        if body is not None:
            data = head + b"content-type: application/json\r\ncontent-length: " + \
                str(len(body)).encode() + b"\r\n\r\n" + body
        else:
            data = head + b"\r\n"
        tries = 0
        while True:
            try:
                conn, reused = await self._acquire()
            except _Retry:
                continue  # a connection slot freed: open one
            tries += 1
            answer = await self._exchange(conn, data, timeout or self.timeout, reused,
                                          last=tries >= 3)
            if answer is not None:
                return answer

    async def _exchange(self, conn: _Conn, data: bytes, timeout: float, reused: bool,
                        last: bool) -> Optional[_Answer]:
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        conn.waiter, conn.received = waiter, False
        handle = loop.call_later(timeout, _expire, waiter, timeout)
        try:
            assert conn.transport is not None
            conn.transport.write(data)
            answer = await waiter
        except (httpx.ReadError, httpx.RemoteProtocolError):
            self._discard(conn)
            # A kept-alive connection the server had closed before the request reached it
            # (nothing came back): the request goes again on another connection.
            if reused and not conn.received and not last:
                return None
            raise
        except BaseException:
            self._discard(conn)
            raise
        finally:
            handle.cancel()
            conn.waiter = None
        if answer.close or conn.closed:
            self._discard(conn)
        else:
            self._release(conn)
        return answer

    def close(self) -> None:
        for conn in self._idle:
            if conn.transport is not None:
                conn.transport.close()
        self._idle.clear()
        self._open = 0


class _Retry(Exception):
    pass


def _expire(waiter: asyncio.Future, timeout: float) -> None:
    if not waiter.done():
        waiter.set_exception(httpx.ReadTimeout(f"no answer in {timeout:.0f} s"))


__all__ = ["FastHttp"]
