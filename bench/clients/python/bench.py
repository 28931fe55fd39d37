"""bench.py work SERVER N CONC PROFILE | latency SERVER RATE SECS CONC"""
import asyncio
import os
import sys
import time

from docket_client import AsyncClient, Worker


async def work(server, n, conc, profile):
    # "prefetch": claim up to 1000 ahead of free handlers (the HTTP path bench's claim batch);
    # "default": the worker's default ("auto").
    # "deep": 10 claims of up to 1000 in flight, 10,000 held ahead — what the HTTP work path
    # (c10-http: 10 loops claiming 1000) keeps in flight.
    options = ({"prefetch": 1000} if profile == "prefetch" else
               {"prefetch": 10_000, "claims": 10} if profile == "deep" else {})
    async with AsyncClient(server) as client:
        t0 = time.perf_counter()
        w = Worker(client, queue="bench", concurrency=conc, wait="1s", report_interval=0,
                   **options)
        w.handle("noop", _noop)
        runner = asyncio.ensure_future(w.run_async())
        while w.stats["completed"] < n:
            await asyncio.sleep(0.005)
        secs = time.perf_counter() - t0
        w.stop()
        await runner
        print(f"RESULT seconds={secs:.6f}")


async def _noop(job):
    return None


async def latency(server, rate, secs, conc):
    total = rate * secs
    sent, started = {}, {}
    async with AsyncClient(server) as client:
        w = Worker(client, queue="lat", concurrency=conc, wait="10s", report_interval=0)

        async def lat(job):
            started[job.payload["id"]] = time.perf_counter()

        w.handle("lat", lat)
        runner = asyncio.ensure_future(w.run_async())
        await asyncio.sleep(0.5)
        start = time.perf_counter()
        for i in range(total):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            t0 = time.perf_counter()
            await client.enqueue("lat", {"id": i, "t": time.time()}, queue="lat")
            sent[i] = (t0, time.perf_counter())
        end = time.perf_counter() + 10
        while len(started) < total and time.perf_counter() < end:
            await asyncio.sleep(0.02)
        w.stop()
        await runner
    with open(os.environ.get("LAT_OUT", "lat.txt"), "w") as f:
        for i in range(total):
            if i in sent and i in started:
                h = started[i]
                f.write(f"{(h - sent[i][1]) * 1000:.3f} {(h - sent[i][0]) * 1000:.3f}\n")
            else:
                f.write("nan nan\n")


if __name__ == "__main__":
    mode, server = sys.argv[1], sys.argv[2]
    if mode == "work":
        asyncio.run(work(server, int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]))
    else:
        asyncio.run(latency(server, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
