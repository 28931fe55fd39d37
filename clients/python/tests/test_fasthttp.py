"""The worker's small HTTP/1.1 client (docket_client._fasthttp) against a local server that
answers in order, in pieces, chunked, and closes connections: pipelined requests get their own
answers, a request the server never saw is sent again, a broken answer is an httpx error."""
import asyncio
import json

import httpx
import pytest

from docket_client._fasthttp import FastHttp


class _Server:
    """Answers each request with its body echoed as {"got": ...}; ``close_after`` closes a
    connection once it has answered that many requests (requests behind are dropped);
    ``chunked``: chunked answers; ``split``: each answer written a byte at a time."""

    def __init__(self, close_after=None, chunked=False, split=False, garbage=False):
        self.close_after, self.chunked, self.split, self.garbage = \
            close_after, chunked, split, garbage
        self.seen = 0
        self.conns = 0

    async def handle(self, reader, writer):
        self.conns += 1
        answered = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                n = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":")[1])
                body = await reader.readexactly(n) if n else b""
                self.seen += 1
                if self.garbage:
                    writer.write(b"SMTP ready\r\n\r\n")
                    await writer.drain()
                    continue
                out = json.dumps({"got": json.loads(body) if body else None}).encode()
                if self.chunked:
                    data = (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                            + b"%x\r\n" % 3 + out[:3] + b"\r\n"
                            + b"%x\r\n" % (len(out) - 3) + out[3:] + b"\r\n0\r\n\r\n")
                else:
                    data = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(out) + out
                if self.split:
                    for i in range(len(data)):
                        writer.write(data[i:i + 1])
                        await writer.drain()
                else:
                    writer.write(data)
                answered += 1
                if self.close_after and answered >= self.close_after:
                    await writer.drain()
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def __aenter__(self):
        self.srv = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.srv.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc):
        self.srv.close()


async def _many(http, n):
    answers = await asyncio.gather(*(http.request("POST", "/x", json.dumps(i).encode())
                                     for i in range(n)))
    return [json.loads(a.body)["got"] for a in answers]


@pytest.mark.parametrize("kind", ["plain", "chunked", "split"])
def test_pipelined_requests_get_their_own_answers(kind):
    async def go():
        srv = _Server(chunked=kind == "chunked", split=kind == "split")
        async with srv as url:
            http = FastHttp(url, {}, max_connections=3, depth=8)
            assert await _many(http, 200) == list(range(200))
            assert srv.conns <= 3
            http.close()
    asyncio.run(go())


def test_a_connection_the_server_closes_sends_the_rest_again():
    async def go():
        srv = _Server(close_after=5)
        async with srv as url:
            http = FastHttp(url, {}, max_connections=2, depth=8)
            assert await _many(http, 60) == list(range(60))
            assert srv.conns > 2
            http.close()
    asyncio.run(go())


def test_errors_are_httpx_errors():
    async def go():
        srv = _Server(garbage=True)
        async with srv as url:
            http = FastHttp(url, {})
            with pytest.raises(httpx.RemoteProtocolError):
                await http.request("POST", "/x", b"1")
            http.close()
        closed = FastHttp(url, {}, connect_timeout=5)
        with pytest.raises(httpx.ConnectError):
            await closed.request("POST", "/x", b"1")
        slow = _Server()

        async def never(reader, writer):
            await asyncio.sleep(30)
        slow.handle = never
        async with slow as url2:
            http = FastHttp(url2, {})
            with pytest.raises(httpx.ReadTimeout):
                await http.request("POST", "/x", b"1", timeout=0.3)
            http.close()
    asyncio.run(go())
