"""A small HTTP/1.1 client for the worker's hot path: JSON requests to one docket server over a
few kept-alive, pipelined connections; answers parsed in the protocol's callback.

httpx costs a few hundred microseconds of CPU per request (its connection pool, h11, anyio);
a durable function makes a request or more per step, so the worker sends the calls of a run
(``resume``, ``steps``, ``suspend``, ``finish``) through this instead. Requests made in one turn
of the event loop to one connection go out in one write, and the answers that arrive together
are read with one ``recv`` (HTTP/1.1 pipelining: answers come back in order) — at a few hundred
runs in flight a fraction of the system calls of one connection per request. An idle connection
is used first, then a new one (up to ``max_connections``), then the least busy one (at most
``depth`` requests in flight each). Only calls that answer at once are sent this way (never a
long poll, which would hold up the requests behind it), and each may be sent again (the
worker's calls of a run are idempotent), so a connection that breaks fails its requests with
httpx's errors (``httpx.TransportError`` subclasses) and callers retry as they do for httpx.
:class:`AsyncClient` uses it only for plain ``http://`` and ``https://`` servers, without a
proxy.
"""
from __future__ import annotations

import asyncio
import collections
import ssl
from typing import Deque, Dict, List, Optional, Union
from urllib.parse import urlsplit

import httpx


class _Answer:
    __slots__ = ("status", "headers", "body", "close")

    def __init__(self, status: int, headers: Dict[str, str], body: bytes, close: bool) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.close = close


class _Unsent(httpx.ReadError):
    """The connection ended before any of this request's answer arrived: safe to send again
    at once on another connection (it may not even have been sent). ``progress``: the
    connection had answered requests before (a server that closes kept-alive connections, not
    one that answers nothing)."""

    progress = False


class _Conn(asyncio.Protocol):
    """One connection: requests in flight in order, their answers matched as they come."""

    def __init__(self, pool: "FastHttp") -> None:
        self.pool = pool
        self.transport: Optional[asyncio.Transport] = None
        self.buf = bytearray()
        self.inflight: Deque[asyncio.Future] = collections.deque()
        self.out: List[bytes] = []
        self.flush_at_turn = False
        self.closed = False
        self.answered = 0
        self._head: Optional[tuple] = None

    # --- asyncio.Protocol -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.out and not self.flush_at_turn:
            self.flush()

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.fail(f"connection closed: {exc or 'by the server'}")

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while self.inflight:
            try:
                answer = self._parse()
            except ValueError as e:
                self.fail(f"not an answer docket gives: {e}", protocol=True)
                return
            if answer is None:
                break
            fut = self.inflight.popleft()
            self.answered += 1
            if not fut.done():
                fut.set_result(answer)
            if answer.close:
                self.fail("the server closed the connection")
                return
            if self.pool._waiting:  # room on this connection for a request that waits
                self.pool._wake_one()
        if not self.inflight:
            self.pool._idle(self)

    # --- requests -------------------------------------------------------------------------
    def send(self, data: bytes, fut: asyncio.Future) -> None:
        self.inflight.append(fut)
        self.out.append(data)
        if self.transport is not None and not self.flush_at_turn:
            # Written at the end of this turn of the loop, with what else is sent meanwhile.
            self.flush_at_turn = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self.flush_at_turn = False
        if self.out and self.transport is not None and not self.closed:
            data = self.out[0] if len(self.out) == 1 else b"".join(self.out)
            self.out.clear()
            self.transport.write(data)

    def fail(self, why: str, protocol: bool = False, timeout: bool = False) -> None:
        """Ends the connection; its requests in flight fail (those with nothing answered yet
        as :class:`_Unsent`)."""
        if not self.closed:
            self.closed = True
            self.pool._gone(self)
            if self.transport is not None:
                self.transport.abort()
        started = bool(self.buf) or self._head is not None
        while self.inflight:
            fut = self.inflight.popleft()
            if fut.done():
                started = False
                continue
            if timeout:
                fut.set_exception(httpx.ReadTimeout(why))
            elif protocol:
                fut.set_exception(httpx.RemoteProtocolError(why))
            elif started:
                fut.set_exception(httpx.ReadError(why))
            else:
                err = _Unsent(why)
                err.progress = self.answered > 0
                fut.set_exception(err)
            started = False

    # --- answers --------------------------------------------------------------------------
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

    def _dechunk(self, pos: int) -> Optional[tuple]:
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
    """Kept-alive, pipelined connections to one server: at most ``max_connections``, at most
    ``depth`` requests in flight on each."""

    def __init__(self, base_url: str, headers: Dict[str, str],
                 verify: Union[bool, ssl.SSLContext] = True, timeout: float = 75.0,
                 connect_timeout: float = 30.0, max_connections: int = 32,
                 depth: int = 8) -> None:
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
        self.max_connections = max(1, max_connections)
        self.depth = max(1, depth)
        self._conns: List[_Conn] = []      # open or opening
        self._free: List[_Conn] = []       # with nothing in flight (maybe stale entries)
        self._waiting: Deque[asyncio.Future] = collections.deque()  # every connection full

    # --- the pool -------------------------------------------------------------------------
    def _idle(self, conn: _Conn) -> None:
        self._free.append(conn)
        self._wake_one()

    def _gone(self, conn: _Conn) -> None:
        try:
            self._conns.remove(conn)
        except ValueError:
            pass
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiting:
            fut = self._waiting.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def _open(self) -> _Conn:
        conn = _Conn(self)
        self._conns.append(conn)
        asyncio.ensure_future(self._connect(conn))
        return conn

    async def _connect(self, conn: _Conn) -> None:
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.create_connection(
                lambda: conn, self.host, self.port, ssl=self.ssl,
                server_hostname=self.host if self.ssl else None), self.connect_timeout)
        except asyncio.TimeoutError:
            self._refused(conn, httpx.ConnectTimeout(
                f"connecting to {self.host}:{self.port} timed out"))
        except OSError as e:
            self._refused(conn, httpx.ConnectError(f"connecting to {self.host}:{self.port}: {e}"))
        except BaseException as e:  # cancelled (the loop ends)
            self._refused(conn, httpx.ConnectError(f"connecting: {e!r}"))
            raise

    def _refused(self, conn: _Conn, err: Exception) -> None:
        conn.closed = True
        self._gone(conn)
        while conn.inflight:
            fut = conn.inflight.popleft()
            if not fut.done():
                fut.set_exception(err)

    def _pick(self) -> Optional[_Conn]:
        # A connection being written this turn (one write more), an idle one, a new one, the
        # least busy one; None: every connection has `depth` in flight.
        while self._free:
            conn = self._free.pop()
            if not conn.closed and not conn.inflight:
                return conn
        best: Optional[_Conn] = None
        for conn in self._conns:
            if conn.closed:
                continue
            n = len(conn.inflight)
            if conn.flush_at_turn and n < self.depth:
                return conn
            if best is None or n < len(best.inflight):
                best = conn
        if len(self._conns) < self.max_connections and (best is None or best.inflight):
            return self._open()
        if best is not None and len(best.inflight) < self.depth:
            return best
        return None

    # --- requests -------------------------------------------------------------------------
    async def request(self, method: str, path: str, body: Optional[bytes] = None,
                      timeout: Optional[float] = None) -> _Answer:
        """One request → the answer (any status). Raises httpx.TransportError subclasses."""
        head = f"{method} {self.prefix}{path} HTTP/1.1\r\n".encode("latin-1") + self._fixed
        if body is not None:
            data = head + b"content-type: application/json\r\ncontent-length: " + \
                str(len(body)).encode() + b"\r\n\r\n" + body
        else:
            data = head + b"\r\n"
        loop = asyncio.get_running_loop()
        tries = 0
        while True:
            conn = self._pick()
            if conn is None:
                wait = loop.create_future()
                self._waiting.append(wait)
                await wait
                continue
            fut = loop.create_future()
            conn.send(data, fut)
            limit = timeout or self.timeout
            timer = loop.call_later(limit, conn.fail, f"no answer in {limit:.0f} s", False, True)
            try:
                return await fut
            except _Unsent as e:
                if not e.progress:
                    tries += 1
                    if tries >= 3:
                        raise
            finally:
                timer.cancel()

    def close(self) -> None:
        for conn in list(self._conns):
            conn.fail("the client closed")
        self._conns.clear()
        self._free.clear()


__all__ = ["FastHttp"]
