"""The worker against real servers: results, retries, permanent failures, timeouts,
cancellation, stage hand-off, SIGKILL and SIGTERM."""
import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import datetime

import pytest

from conftest import SERVERS
from docket_client import AsyncClient, NextStage, Permanent, Retry, Worker, auto_prefetch


def wait_for(fn, timeout=30.0, every=0.05):
    end = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(every)


async def run_until(worker, cond, timeout=30.0):
    """Runs the worker until cond() (a coroutine function) is true, then stops it."""
    runner = asyncio.ensure_future(worker.run_async())
    end = time.monotonic() + timeout
    try:
        while not await cond():
            if runner.done():
                runner.result()
                raise AssertionError("worker stopped early")
            if time.monotonic() > end:
                raise AssertionError("condition not met in time")
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await asyncio.wait_for(runner, 30)


def t(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def test_enqueue_work_result(server, queue):
    async def go():
        async with AsyncClient(server) as c:
            ids = [x["id"] for x in await c.enqueue_many(
                [{"kind": "add", "payload": [i, i], "queue": queue} for i in range(50)]
                + [{"kind": "upper", "payload": "abc", "queue": queue}])]
            w = Worker(c, queue=queue, concurrency=8, wait="1s", name=f"{queue}-w")
            seen = []

            @w.task("add")
            async def add(job):
                seen.append(job.attempt)
                return sum(job.payload)

            @w.task("upper")
            def upper(job):  # a sync handler runs in a thread
                return job.payload.upper()

            async def all_done():
                page = await c.list_tasks(queue=queue, state="completed", limit=100)
                return len(page["tasks"]) == 51
            await run_until(w, all_done)
            for i, task_id in enumerate(ids[:50]):
                got = await c.get_task(task_id)
                assert got["result"] == 2 * i and got["worker"] == f"{queue}-w"
            assert (await c.get_task(ids[50]))["result"] == "ABC"
            assert set(seen) == {1}
            [me] = [x for x in await c.list_workers() if x["name"] == f"{queue}-w"]
            assert "labels" not in me["report"]  # a worker without labels reports none
    asyncio.run(go())


def test_claims_only_its_kinds_and_stages(server, queue):
    async def go():
        async with AsyncClient(server) as c:
            mine = await c.enqueue("mine", None, queue=queue, stage="a")
            other_kind = await c.enqueue("other", None, queue=queue)
            other_stage = await c.enqueue("mine", None, queue=queue, stage="b")
            w = Worker(c, queue=queue, wait="200ms")
            w.handle("mine", lambda job: "ok", stage="a")

            async def done():
                return (await c.get_task(mine["id"]))["state"] == "completed"
            await run_until(w, done)
            await asyncio.sleep(0.3)
            assert (await c.get_task(other_kind["id"]))["state"] == "available"
            assert (await c.get_task(other_stage["id"]))["state"] == "available"
    asyncio.run(go())


def test_retry_with_the_handlers_delay_then_success(server, queue):
    async def go():
        async with AsyncClient(server) as c:
            task = await c.enqueue("flaky", None, queue=queue, max_attempts=5)
            w = Worker(c, queue=queue, wait="200ms")

            @w.task("flaky")
            async def flaky(job):
                if job.attempt < 3:
                    raise Retry(delay=1.5, message=f"not yet ({job.attempt})")
                return "third time"

            async def done():
                return (await c.get_task(task["id"]))["state"] == "completed"
            await run_until(w, done)
            got = await c.get_task(task["id"])
            assert got["attempt"] == 3 and got["result"] == "third time"
            assert [e["message"] for e in got["errors"]] == ["not yet (1)", "not yet (2)"]
            runs = got["runs"]
            # the second attempt started no sooner than 1.5 s after the first ended
            gap = t(runs[1]["started_at"]) - t(runs[0]["finished_at"])
            assert gap.total_seconds() >= 1.4, runs
    asyncio.run(go())


def test_permanent_failure_and_traceback(server, queue):
    async def go():
        async with AsyncClient(server) as c:
            perm = await c.enqueue("bad", "p", queue=queue, max_attempts=10)
            boom = await c.enqueue("boom", "b", queue=queue, max_attempts=1)
            w = Worker(c, queue=queue, wait="200ms")

            @w.task("bad")
            async def bad(job):
                raise Permanent("card declined")

            @w.task("boom")
            async def boom_handler(job):
                return {}["missing"]

            async def done():
                a = await c.get_task(perm["id"])
                b = await c.get_task(boom["id"])
                return a["state"] == "discarded" and b["state"] == "discarded"
            await run_until(w, done)
            a = await c.get_task(perm["id"])
            assert a["attempt"] == 1 and a["errors"][0]["message"].startswith("Permanent: card declined")
            b = await c.get_task(boom["id"])
            err = b["errors"][0]["message"]
            assert err.startswith("KeyError: 'missing'") and "Traceback" in err and "boom_handler" in err
    asyncio.run(go())


def test_timeout_cancels_the_handler(server, queue):
    async def go():
        async with AsyncClient(server) as c:
            task = await c.enqueue("sleepy", None, queue=queue, timeout="1s", max_attempts=1)
            w = Worker(c, queue=queue, wait="200ms")
            cancelled = []

            @w.task("sleepy")
            async def sleepy(job):
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    cancelled.append(job.id)
                    raise

            async def done():
                return (await c.get_task(task["id"]))["state"] == "discarded"
            started = time.monotonic()
            await run_until(w, done, timeout=20)
            assert time.monotonic() - started < 10
            assert cancelled == [task["id"]]
            got = await c.get_task(task["id"])
            assert "timeout" in got["errors"][0]["message"]
    asyncio.run(go())


def test_cancellation_is_seen_at_the_next_heartbeat(server, queue):
    async def go():
        async with AsyncClient(server) as c:
            task = await c.enqueue("long", None, queue=queue, timeout="60s")
            w = Worker(c, queue=queue, wait="200ms", lease="1s")  # a heartbeat every ~0.33 s
            events = []

            @w.task("long")
            async def long(job):
                job.progress({"step": 1})
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    events.append(("cancelled", job.cancelled.is_set()))
                    raise

            async def cancel_when_running():
                got = await c.get_task(task["id"])
                if got["state"] == "running" and not events and got.get("progress") == {"step": 1}:
                    await c.cancel_task(task["id"])
                return (await c.get_task(task["id"]))["state"] == "cancelled" and events
            await run_until(w, cancel_when_running, timeout=20)
            assert events == [("cancelled", True)]
            assert (await c.get_task(task["id"]))["attempt"] == 1
    asyncio.run(go())


def test_stage_hand_off(server, queue):
    async def go():
        async with AsyncClient(server) as c:
            task = await c.enqueue("order", {"n": 1}, queue=queue, stage="reserve")
            w = Worker(c, queue=queue, wait="200ms")

            @w.task("order", stage="reserve")
            async def reserve(job):
                return NextStage("charge", payload={"n": job.payload["n"], "reserved": True})

            @w.task("order", stage="charge")
            async def charge(job):
                assert job.stage == "charge"
                return {"charged": job.payload}

            async def done():
                return (await c.get_task(task["id"]))["state"] == "completed"
            await run_until(w, done)
            got = await c.get_task(task["id"])
            assert got["result"] == {"charged": {"n": 1, "reserved": True}}
            assert got["stage"] == "charge" and "reserve" in got["stages_done"]
    asyncio.run(go())


def _spawn_worker(server, queue, sleep, lease):
    here = os.path.dirname(__file__)
    return subprocess.Popen([sys.executable, os.path.join(here, "worker_proc.py"), server, queue,
                             str(sleep), lease], stdout=subprocess.PIPE, text=True)


def _read_started(proc, n, timeout=20):
    started = []
    end = time.monotonic() + timeout
    while len(started) < n and time.monotonic() < end:
        line = proc.stdout.readline()
        if line.startswith("started"):
            started.append(int(line.split()[1]))
    assert len(started) == n, started
    return started


def test_sigkill_loses_nothing(server, client, queue):
    ids = [t["id"] for t in client.enqueue_many(
        [{"kind": "slow", "payload": i, "queue": queue, "max_attempts": 5} for i in range(4)])]
    # A 3 s lease (a heartbeat a second): a busy machine does not lose it before the kill.
    proc = _spawn_worker(server, queue, 30, "3s")
    _read_started(proc, 4)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # A second worker finishes them after the rescuer takes them back from the dead one.
    proc2 = _spawn_worker(server, queue, 0.1, "5s")
    try:
        wait_for(lambda: all(client.get_task(i)["state"] == "completed" for i in ids), timeout=40)
    finally:
        proc2.send_signal(signal.SIGTERM)
        proc2.wait(timeout=30)
    for i in ids:
        got = client.get_task(i)
        assert got["attempt"] == 2 and got["errors"][0]["message"] == "lease expired", got


def test_sigterm_finishes_what_it_holds(server, client, queue):
    ids = [t["id"] for t in client.enqueue_many(
        [{"kind": "slow", "payload": i, "queue": queue} for i in range(6)])]
    proc = _spawn_worker(server, queue, 1.5, "30s")
    started = _read_started(proc, 4)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "exited" in out
    assert sorted(int(line.split()[1]) for line in out.splitlines()
                  if line.startswith("finished")) == sorted(started)
    for i in ids:
        state = client.get_task(i)["state"]
        assert state == ("completed" if i in started else "available"), (i, state)


def test_prefetch_holds_tasks_and_hands_back_the_unstarted_on_stop(server, queue):
    async def go():
        async with AsyncClient(server) as c:
            ids = [t["id"] for t in await c.enqueue_many(
                [{"kind": "one", "payload": i, "queue": queue} for i in range(4)])]
            w = Worker(c, queue=queue, concurrency=1, prefetch=3, wait="200ms")
            started = []

            @w.task("one")
            async def one(job):
                started.append(job.id)
                await asyncio.sleep(1.0)
                return "done"

            runner = asyncio.ensure_future(w.run_async())
            for _ in range(200):  # one claim took all four: one runs, three wait in the worker
                if started and len(w._running) == 4:
                    break
                await asyncio.sleep(0.02)
            assert started and len(w._running) == 4
            held = [(await c.get_task(i))["state"] for i in ids]
            assert held == ["running"] * 4, held
            w.stop()
            await asyncio.wait_for(runner, 30)
            assert started == [ids[0]]
            first = await c.get_task(ids[0])
            assert first["state"] == "completed" and first["result"] == "done"
            for i in ids[1:]:
                t = await c.get_task(i)  # released: no attempt counted, no error
                assert (t["state"], t["attempt"], t["errors"]) == ("available", 0, []), t
    asyncio.run(go())


def test_prefetch_auto_holds_short_tasks_ahead_and_never_long_ones(server, queue):
    """Short handlers: the worker holds ahead (up to 1000); handlers of 300 ms with
    concurrency 2 hold none: this worker never has more tasks running in docket than handlers."""
    async def go():
        async with AsyncClient(server) as c:
            quick = f"{queue}-quick"
            await c.enqueue_many([{"kind": "quick", "payload": i, "queue": quick}
                                  for i in range(300)])
            wq = Worker(c, queue=quick, concurrency=2, wait="200ms", report_interval=0)

            @wq.task("quick")
            async def quick_handler(job):
                return job.payload

            assert wq.prefetch == "auto"
            assert wq.prefetching == 0, "nothing held ahead before a handler ran"

            async def all_quick():
                return wq.stats["completed"] == 300
            await run_until(wq, all_quick)
            assert wq.prefetching >= 100, f"short tasks: {wq.prefetching} held ahead"
            assert auto_prefetch(2, 0.00001) == 1000
            assert auto_prefetch(2, 0.3) == 0
            assert auto_prefetch(10, 0.05) == 20
            assert auto_prefetch(10, None) == 0

            slow, name = f"{queue}-slow", f"{queue}-slow-w"
            await c.enqueue_many([{"kind": "slow", "payload": i, "queue": slow}
                                  for i in range(6)])
            ws = Worker(c, queue=slow, name=name, concurrency=2, wait="200ms",
                        report_interval=0)
            most = [0]

            @ws.task("slow")
            async def slow_handler(job):
                held = await c.list_tasks(queue=slow, state="running", worker=name, limit=100)
                most[0] = max(most[0], len(held["tasks"]))
                await asyncio.sleep(0.3)

            async def all_slow():
                return ws.stats["completed"] == 6
            await run_until(ws, all_slow)
            assert 1 <= most[0] <= 2, f"at most 2 of this worker's tasks running, saw {most[0]}"
            assert ws.prefetching == 0
        for bad in (-1, 1.5, "fast", True, None):
            with pytest.raises(ValueError, match="prefetch"):
                Worker(prefetch=bad)
        assert Worker(prefetch=0).prefetching == 0 and Worker(prefetch=0).batch == 10
        assert Worker().batch == 1000 and Worker(prefetch=5).batch == 15
        assert Worker(claims=0).claims == 1 and Worker(claims=99).claims == 16
    asyncio.run(go())


def test_two_claims_in_flight_every_task_once_and_a_stop_mid_stream_strands_nothing(
        server, queue):
    async def go():
        async with AsyncClient(server) as c:
            ids = [t_["id"] for t_ in await c.enqueue_many(
                [{"kind": "n", "payload": i, "queue": queue} for i in range(3000)])]
            w = Worker(c, queue=queue, concurrency=4, claims=2, wait="200ms",
                       report_interval=0)
            seen = {}

            @w.task("n")
            async def n(job):
                seen[job.id] = seen.get(job.id, 0) + 1
                return job.payload * 2

            async def enough():
                return w.stats["completed"] >= 1000
            await run_until(w, enough)
            assert w.stats["lost"] == 0
            assert all(v == 1 for v in seen.values()), "a task ran twice"
            done = (await c.list_tasks(queue=queue, state="completed", limit=10_000))["tasks"]
            assert len(done) == w.stats["completed"], \
                "every completion reported is recorded, no more"
            hurt = []
            for t_ in (await c.list_tasks(queue=queue, limit=10_000))["tasks"]:
                if t_["state"] == "completed":
                    ok = t_["attempt"] == 1 and t_["result"] == t_["payload"] * 2 \
                        and t_["id"] in seen
                else:
                    ok = t_["state"] == "available" and t_["attempt"] == 0
                if not ok or t_.get("errors"):
                    hurt.append((t_["id"], t_["state"], t_["attempt"]))
            assert hurt == [], f"{len(hurt)} of {len(ids)} tasks hurt by the stop: {hurt[:5]}"
    asyncio.run(go())


def test_reports_are_retried_while_the_lease_lasts(server, queue):
    """A proxy answers the first requests carrying completions (batched, or with a claim) with
    503: the worker sends them again and the tasks end completed, once."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import httpx as _httpx

    refused = {"left": 3, "seen": 0}

    class Proxy(BaseHTTPRequestHandler):
        def _forward(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            # Batched completions, and claims that carry what finished.
            carries = self.path == "/v1/tasks/complete" or (
                self.path.endswith("/claim") and "complete" in json.loads(body or b"{}"))
            if self.command == "POST" and carries and refused["left"] > 0:
                refused["left"] -= 1
                refused["seen"] += 1
                self.send_response(503)
                data = b'{"error": {"code": "unavailable", "message": "injected"}}'
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "if-match")}
            r = _httpx.request(self.command, server + self.path, content=body, headers=headers,
                               timeout=75)
            self.send_response(r.status_code)
            self.send_header("Content-Type", r.headers.get("content-type", "application/json"))
            self.send_header("Content-Length", str(len(r.content)))
            self.end_headers()
            self.wfile.write(r.content)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        def log_message(self, *args):
            pass

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    via = f"http://127.0.0.1:{proxy.server_address[1]}"

    async def go():
        async with AsyncClient(server) as direct, AsyncClient(via) as c:
            ids = [t["id"] for t in await direct.enqueue_many(
                [{"kind": "ok", "payload": i, "queue": queue} for i in range(5)])]
            w = Worker(c, queue=queue, concurrency=5, wait="200ms", lease="30s")
            w.handle("ok", lambda job: job.payload)

            async def done():
                tasks = [await direct.get_task(i) for i in ids]
                return all(t["state"] == "completed" for t in tasks)
            await run_until(w, done, timeout=30)
            assert refused["seen"] == 3
            for i in ids:
                t = await direct.get_task(i)
                assert t["attempt"] == 1 and t["errors"] == [], t
    try:
        asyncio.run(go())
    finally:
        proxy.shutdown()


def test_stop_as_tasks_arrive_strands_nothing():
    """Issue 37: a worker (concurrency 4) told to stop within ±30 ms of the moment 20 tasks
    become available, 30 times: every stop ends within its grace, no task is left running
    and none lost an attempt (a claim given up on is released by its claim_id). The backends'
    rounds run at once, each on its own server and queue: a round mostly waits, and one after
    another they took 90 s."""
    import random

    async def go(backend, server):
        rng = random.Random(37)
        queue = f"py-{uuid.uuid4().hex[:12]}"
        ids = []
        for round_ in range(30):
            async with AsyncClient(server) as c:
                w = Worker(c, queue=queue, concurrency=4, wait="5s", shutdown_grace=5,
                           report_interval=0)

                @w.task("k")
                async def k(job):
                    return job.payload

                runner = asyncio.ensure_future(w.run_async())
                await asyncio.sleep(0.3)  # its claim is long-polling
                off = rng.uniform(-0.03, 0.03)
                specs = [{"kind": "k", "payload": i, "queue": queue} for i in range(20)]
                if off < 0:
                    w.stop()
                    await asyncio.sleep(-off)
                    ids += [t["id"] for t in await c.enqueue_many(specs)]
                else:
                    made = asyncio.ensure_future(c.enqueue_many(specs))
                    await asyncio.sleep(off)
                    w.stop()
                    ids += [t["id"] for t in await made]
                done_, _ = await asyncio.wait({runner}, timeout=5 + 5)
                assert done_, f"{backend}, round {round_}: the stop took over its 5 s grace"
                runner.result()
        async with AsyncClient(server) as c:
            left = []
            for i in ids:
                t_ = await c.get_task(i)
                if t_["state"] not in ("available", "completed") or t_["errors"] \
                        or t_["attempt"] != (1 if t_["state"] == "completed" else 0):
                    left.append((i, t_["state"], t_["attempt"], t_["errors"][:1]))
            assert not left, f"{backend}: {len(left)} of {len(ids)} tasks hurt by a stop: {left[:5]}"

    async def every():
        await asyncio.gather(*(go(b, u) for b, u in sorted(SERVERS.items())))
    asyncio.run(every())
