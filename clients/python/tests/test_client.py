"""The client against real servers (SQLite, PostgreSQL and MariaDB)."""
import asyncio
import time
import uuid
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from docket_client import (AsyncClient, Client, Conflict, InvalidRequest, NotFound,
                           Unauthenticated, Worker, parse_duration, task_spec)


def test_enqueue_takes_every_option(client, queue):
    run_at = datetime.now(timezone.utc) + timedelta(hours=1)
    t = client.enqueue("email", {"to": "a@b.c"}, queue=queue, priority=7, run_at=run_at,
                       unique_key=f"{queue}-u", concurrency_key="k", concurrency_limit=2,
                       timeout=90, backoff={"initial": "2s", "max": "1m"}, stage="render",
                       user_id="u-1", trace_id="0af7651916cd43dd8448eb211c80319c",
                       max_attempts=4, expires_in="2h", progress={"p": 0})
    got = client.get_task(t["id"])
    assert got["queue"] == queue and got["kind"] == "email" and got["payload"] == {"to": "a@b.c"}
    assert got["priority"] == 7 and got["state"] == "scheduled"
    assert abs(datetime.fromisoformat(got["run_at"].replace("Z", "+00:00")) - run_at) < timedelta(seconds=1)
    assert got["unique_key"] == f"{queue}-u" and got["concurrency_key"] == "k"
    assert got["concurrency_limit"] == 2 and parse_duration(got["timeout"]) == 90
    assert parse_duration(got["backoff"]["initial"]) == 2 and got["stage"] == "render"
    assert got["user_id"] == "u-1" and got["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert got["max_attempts"] == 4 and got["expires_at"] and got["progress"] == {"p": 0}
    assert got["version"]
    # The unique key returns the first task.
    again = client.enqueue("email", None, queue=queue, unique_key=f"{queue}-u")
    assert again["id"] == t["id"] and again["inserted"] is False
    # run_in and bad options
    later = client.enqueue("x", queue=queue, run_in=timedelta(minutes=5))
    assert later["state"] == "scheduled"
    with pytest.raises(TypeError):
        client.enqueue("x", queue=queue, colour="red")


def test_enqueue_debounce_replaces_the_waiting_task(client, queue):
    """debounce=: a waiting task with the key is replaced (same id, new payload, run_at not
    earlier); another key makes a new task; with run_in it is refused (issue 43)."""
    debounce = {"key": f"{queue}-d", "period": "10s", "max_wait": timedelta(minutes=1)}
    first = client.enqueue("sync", {"n": 1}, queue=queue, debounce=debounce)
    assert first["inserted"] is True and first["replaced"] is False
    assert first["debounce_key"] == f"{queue}-d" and first["state"] == "scheduled"
    second = client.enqueue("sync", {"n": 2}, queue=queue, debounce=debounce)
    assert second["id"] == first["id"] and second["inserted"] is False and second["replaced"] is True
    def at(t):
        return datetime.fromisoformat(t["run_at"].replace("Z", "+00:00"))

    assert second["payload"] == {"n": 2} and at(second) >= at(first)
    got = client.get_task(first["id"])
    assert got["payload"] == {"n": 2} and got["debounce_key"] == f"{queue}-d"
    other = client.enqueue("sync", {"n": 3}, queue=queue,
                           debounce={"key": f"{queue}-e", "period": 10})
    assert other["id"] != first["id"] and other["inserted"] is True and other["replaced"] is False
    with pytest.raises(InvalidRequest) as e:
        client.enqueue("sync", None, queue=queue, run_in="5s", debounce=debounce)
    assert e.value.code == "invalid_task" and e.value.status == 422


def test_enqueue_many_list_and_page(client, queue):
    tasks = client.enqueue_many([task_spec("n", i, queue=queue) for i in range(25)])
    assert [t["payload"] for t in tasks] == list(range(25))
    page = client.list_tasks(queue=queue, limit=10)
    assert len(page["tasks"]) == 10
    rest = client.list_tasks(queue=queue, limit=100, after=page["next_after"])
    assert len(rest["tasks"]) == 15
    assert client.list_tasks(queue=queue, state=["available", "running"], kind="n", limit=100)["tasks"]


def test_list_finds_by_trace_id_unique_key_and_worker(client, queue):
    """list_tasks(trace_id=, unique_key=, worker=): exactly their tasks, running or finished,
    alone and with the other filters (issue 37 item 7)."""
    trace, worker = uuid.uuid4().hex, f"w-{queue}"
    a = client.enqueue("s", 1, queue=queue, trace_id=trace, unique_key=f"{queue}-a")["id"]
    b = client.enqueue("s", 2, queue=queue, unique_key=f"{queue}-b")["id"]
    c = client.enqueue("s", 3, queue=queue)["id"]
    # The same trace in another queue: a trace id names no single task.
    d = client.enqueue("s", 4, queue=f"{queue}-x", trace_id=trace)["id"]
    claimed = client.claim(queue, worker, limit=2, kinds=["s"])
    assert sorted(t["id"] for t in claimed) == [a, b]
    done = next(t for t in claimed if t["id"] == a)
    client.complete(a, done["lease"]["token"], "ok")
    assert client.get_task(a)["state"] == "completed" and client.get_task(c)["state"] == "available"

    def ids(**f):
        return [t["id"] for t in client.list_tasks(limit=100, **f)["tasks"]]

    assert ids(trace_id=trace) == [a, d]
    assert ids(trace_id=trace.upper()) == [a, d]
    assert ids(trace_id=trace, queue=queue) == [a]
    assert ids(trace_id=uuid.uuid4().hex) == []
    assert ids(unique_key=f"{queue}-a") == [a]
    assert ids(unique_key=f"{queue}-b", state="running") == [b]
    assert ids(unique_key=f"{queue}-b", state=["completed", "available"]) == []
    assert ids(worker=worker) == [a, b]
    assert ids(worker=worker, order="desc") == [b, a]
    assert ids(worker=worker, state="completed") == [a]
    assert ids(worker=worker, trace_id=trace) == [a]
    assert ids(worker=worker, unique_key=f"{queue}-b") == [b]
    assert ids(worker=f"nobody-{queue}") == []


def test_tags_filter_lists_and_bulk_counts(client, queue):
    """tags=: list_tasks(tag=) and a bulk dry run find the tasks with a tag, in id order; 21
    tags or an empty one are refused and nothing is written (issue 43)."""
    a = client.enqueue("t", 1, queue=queue, tags=[f"{queue}:a", f"shared-{queue}"])["id"]
    b = client.enqueue("t", 2, queue=queue, tags=(f"{queue}:a",))["id"]
    c = client.enqueue("t", 3, queue=queue, tags=[f"{queue}:b"])
    assert c["tags"] == [f"{queue}:b"]
    assert client.get_task(a)["tags"] == [f"{queue}:a", f"shared-{queue}"]

    def ids(**f):
        return [t["id"] for t in client.list_tasks(limit=100, **f)["tasks"]]

    assert ids(tag=f"{queue}:a") == [a, b]
    assert ids(tag=f"shared-{queue}") == [a]
    for bad in ([f"{queue}:{i}" for i in range(21)], [""]):
        with pytest.raises(InvalidRequest) as e:
            client.enqueue("t", None, queue=queue, tags=bad)
        assert 400 <= e.value.status < 500 and e.value.code == "invalid_task"
    assert ids(queue=queue) == [a, b, c["id"]]
    assert client.bulk("cancel", {"tag": f"{queue}:a"}, dry_run=True)["total"] == 2


def test_worker_labels_requires_prefer_and_claim_labels(client, server, queue):
    """requires= and prefer= are echoed; a claim without labels takes only the task that
    requires and prefers nothing, one with {"gpu": "a100", "region": "eu"} the other two; 21
    labels or an empty value are refused and nothing is written; a Worker's labels go with its
    claims and its reports (GET /v1/workers) (issue 43)."""
    gpu = client.enqueue("t", 1, queue=queue, requires={"gpu": "a100"})
    plain = client.enqueue("t", 2, queue=queue)
    [eu] = client.enqueue_many([task_spec("t", 3, queue=queue,
                                          prefer={"labels": {"region": "eu"}, "for": 3600})])
    assert gpu["requires"] == {"gpu": "a100"} and gpu.get("prefer") is None
    assert eu["prefer"] == {"labels": {"region": "eu"}, "for": "1h"} and eu.get("requires") is None
    assert plain.get("requires") is None and plain.get("prefer") is None
    assert client.get_task(gpu["id"])["requires"] == {"gpu": "a100"}
    assert client.get_task(eu["id"])["prefer"] == {"labels": {"region": "eu"}, "for": "1h"}

    many = {f"l{i}": "x" for i in range(21)}
    for bad in (dict(requires=many), dict(requires={"gpu": ""}),
                dict(prefer={"labels": {"region": ""}, "for": "1h"})):
        with pytest.raises(InvalidRequest) as e:
            client.enqueue("t", None, queue=queue, **bad)
        assert (e.value.status, e.value.code) == (422, "invalid_task"), bad
    for bad in (many, {"gpu": ""}):
        with pytest.raises(InvalidRequest) as e:
            client.claim(queue, "py", limit=10, labels=bad)
        assert (e.value.status, e.value.code) == (400, "invalid_request"), bad
    page = client.list_tasks(queue=queue, limit=100)["tasks"]
    assert [(t["id"], t["state"]) for t in page] == \
        [(gpu["id"], "available"), (plain["id"], "available"), (eu["id"], "available")]

    assert [t["id"] for t in client.claim(queue, "py", limit=10)] == [plain["id"]]
    got = client.claim(queue, "py", limit=10, labels={"gpu": "a100", "region": "eu"})
    assert sorted(t["id"] for t in got) == [gpu["id"], eu["id"]]

    async def worker_takes_what_it_may():
        async with AsyncClient(server) as c:
            need = await c.enqueue("t", 4, queue=f"{queue}-w", requires={"gpu": "a100"})
            w = Worker(c, queue=f"{queue}-w", concurrency=1, wait="200ms", name=f"{queue}-w",
                       labels={"gpu": "a100"})
            w.handle("t", lambda job: job.payload)
            runner = asyncio.ensure_future(w.run_async())
            try:
                end = time.monotonic() + 30
                while (await c.get_task(need["id"]))["state"] != "completed":
                    assert not runner.done() and time.monotonic() < end, "not completed in time"
                    await asyncio.sleep(0.05)
            finally:
                w.stop()
                await asyncio.wait_for(runner, 30)
            [seen] = [x for x in await c.list_workers() if x["name"] == f"{queue}-w"]
            assert seen["report"].get("labels") == {"gpu": "a100"}
    asyncio.run(worker_takes_what_it_may())


def test_errors_carry_docket_codes(client, queue):
    with pytest.raises(NotFound) as e:
        client.get_task(987654321)
    assert e.value.code == "not_found" and e.value.status == 404
    with pytest.raises(InvalidRequest) as e:
        client.enqueue("", queue=queue)
    assert e.value.code in ("invalid_task", "invalid_request")
    t = client.enqueue("x", queue=queue)
    with pytest.raises(Conflict) as e:
        client.complete(t["id"], "not-a-lease", {})
    assert e.value.code == "lease_lost"


def test_patch_with_version_and_cancel_retry_run_now(client, queue):
    t = client.enqueue("x", 1, queue=queue, run_in="1h")
    v1 = client.get_task(t["id"])["version"]
    p = client.update_task(t["id"], version=v1, priority=5, payload=2)
    assert p["priority"] == 5 and p["payload"] == 2 and p["version"] != v1
    with pytest.raises(InvalidRequest) as e:
        client.update_task(t["id"], version=v1, priority=6)
    assert e.value.code == "version_mismatch" and e.value.status == 412
    assert client.run_now(t["id"])["state"] == "available"
    assert client.cancel_task(t["id"])["state"] == "cancelled"
    assert client.retry_task(t["id"])["state"] == "available"


def test_the_work_path_by_hand(client, queue):
    a, b = client.enqueue_many([task_spec("w", 1, queue=queue), task_spec("w", 2, queue=queue)])
    claimed = client.claim(queue, "hand", limit=10, lease="30s", wait="1s", kinds=["w"])
    assert sorted(t["id"] for t in claimed) == sorted([a["id"], b["id"]])
    first, second = claimed
    beat = client.heartbeat(first["id"], first["lease"]["token"], progress={"half": True},
                            extend=60)
    assert beat["id"] == first["id"] and beat["lease_expires_at"] > first["lease"]["expires_at"]
    assert client.get_task(first["id"])["progress"] == {"half": True}
    out = client.complete_many([{"id": first["id"], "lease": first["lease"]["token"], "result": 1}])
    assert out[0]["outcome"] == "ok"
    out = client.fail_many([{"id": second["id"], "lease": second["lease"]["token"],
                             "error": "no", "permanent": True}])
    assert out[0]["outcome"] == "ok"
    assert client.get_task(first["id"])["state"] == "completed"
    assert client.get_task(second["id"])["state"] == "discarded"


def test_claim_with_lean_tasks_and_reports(client, queue):
    ids = [t["id"] for t in client.enqueue_many(
        [task_spec("k", i, queue=queue, max_attempts=1) for i in range(3)])]
    first = client.claim_with(queue, "py", limit=2, lean=True)
    assert first["tasks"] == []
    assert [(t["id"], t["payload"], t["attempt"]) for t in first["lean"]] == \
        [(ids[0], 0, 1), (ids[1], 1, 1)]
    assert "created_at" not in first["lean"][0]  # lean: no more than a handler needs
    lease = [t["lease"]["token"] for t in first["lean"]]
    second = client.claim_with(queue, "py", limit=5, lean=True,
                               complete=[{"id": ids[0], "lease": lease[0], "result": "r"}],
                               fail=[{"id": ids[1], "lease": lease[1], "error": "e"}])
    assert [(o["id"], o["outcome"], o["state"]) for o in second["completed"]] == \
        [(ids[0], "ok", "completed")]
    assert [(o["id"], o["outcome"], o["state"]) for o in second["failed"]] == \
        [(ids[1], "ok", "discarded")]
    assert [t["id"] for t in second["lean"]] == [ids[2]]
    assert client.get_task(ids[0])["result"] == "r"
    # One bad item refuses the request: nothing reported, nothing claimed.
    with pytest.raises(InvalidRequest):
        client.claim_with(queue, "py", complete=[{"id": ids[2], "lease": ""}])
    assert client.get_task(ids[2])["state"] == "running"


def test_queues_schedules_and_status(client, queue):
    client.put_queue(queue, concurrency_limit=3, max_attempts=5)
    assert client.get_queue(queue)["settings"]["concurrency_limit"] == 3
    client.pause_queue(queue)
    assert client.get_queue(queue)["settings"]["paused"] is True
    client.resume_queue(queue)
    client.enqueue("x", queue=queue)
    assert any(q["name"] == queue for q in client.list_queues())
    name = f"{queue}-nightly"
    s = client.put_schedule(name, task_spec("report", None, queue=queue), cron="0 3 * * *",
                            timezone="Europe/Berlin")
    assert s["name"] == name
    assert client.get_schedule(name)["cron"] == "0 3 * * *"
    client.pause_schedule(name)
    assert client.get_schedule(name)["paused"] is True
    client.resume_schedule(name)
    assert any(x["name"] == name for x in client.list_schedules())
    client.delete_schedule(name)
    with pytest.raises(NotFound):
        client.get_schedule(name)
    assert "queues" in client.status()
    assert client.health()["status"] == "ok"


def test_async_client_has_the_same_methods(aclient_factory, queue):
    async def go():
        async with aclient_factory() as c:
            t = await c.enqueue("a", {"x": 1}, queue=queue)
            got = await c.get_task(t["id"])
            assert got["payload"] == {"x": 1}
            with pytest.raises(NotFound):
                await c.get_task(987654321)
            claimed = await c.claim(queue, "async", limit=1, wait="1s")
            await c.complete(claimed[0]["id"], claimed[0]["lease"]["token"], "done")
            assert (await c.get_task(t["id"]))["result"] == "done"
    asyncio.run(go())


def test_tokens_and_tls():
    import os
    url, ca, token = (os.environ["DOCKET_TEST_TLS_URL"], os.environ["DOCKET_TEST_CA"],
                      os.environ["DOCKET_TEST_TOKEN"])
    with Client(url, token=token, ca_file=ca) as c:
        created = c.create_token("py-enqueue", ["enqueue"])
        assert created["token"]
        assert any(t["name"] == "py-enqueue" for t in c.list_tokens())
        t = c.enqueue("tls", 1, queue="py-tls")
        assert c.get_task(t["id"])["payload"] == 1
    with Client(url, token=created["token"], ca_file=ca) as c:
        c.enqueue("tls", 2, queue="py-tls")
        with pytest.raises(Exception) as e:
            c.list_tokens()
        assert getattr(e.value, "code", None) == "forbidden"
    with Client(url, token="", ca_file=ca) as c:
        with pytest.raises(Unauthenticated) as e:
            c.enqueue("tls", 3, queue="py-tls")
        assert e.value.code == "unauthenticated"
    with Client(url, token=token) as c:  # the private CA is not trusted
        with pytest.raises(httpx.ConnectError):
            c.status()
    os.environ["DOCKET_TOKEN"] = token
    try:
        with Client(url, ca_file=ca) as c:
            c.revoke_token("py-enqueue")
    finally:
        del os.environ["DOCKET_TOKEN"]


def test_batches_with_callbacks(client, queue):
    made = client.create_batch(
        [task_spec("row", 1, queue=queue), task_spec("row", 2, queue=queue)],
        callbacks={"completed": {"kind": "report", "queue": queue + "-cb", "payload": {"to": "ops"}}},
        name="import")
    batch = made["batch"]
    assert batch["total"] == 2 and batch["open"] is False
    assert all(t["batch_id"] == batch["id"] for t in made["tasks"])
    added = client.add_to_batch(batch["id"], [task_spec("row", 3, queue=queue)])
    assert added["batch"]["total"] == 3
    claimed = client.claim(queue, "py", limit=10)
    assert len(claimed) == 3
    client.complete_many([{"id": t["id"], "lease": t["lease"]["token"]} for t in claimed])
    deadline = time.time() + 20
    while client.get_batch(batch["id"])["settled_at"] is None:
        assert time.time() < deadline, "the batch did not settle"
        time.sleep(0.05)
    done = client.get_batch(batch["id"])
    assert done["done"] == 3 and list(done["fired"]) == ["completed"]
    report = client.get_task(done["fired"]["completed"])
    assert report["payload"]["to"] == "ops" and report["payload"]["batch"]["completed"] == 3
    assert any(b["id"] == batch["id"] for b in client.list_batches(limit=100))
    with pytest.raises(Conflict):
        client.add_to_batch(batch["id"], [task_spec("row", 4, queue=queue)])
    with pytest.raises(InvalidRequest):
        client.create_batch([dict(task_spec("row", 5, queue=queue), unique_key="u")])
    opened = client.create_batch([], open=True)["batch"]
    assert opened["open"] is True and client.seal_batch(opened["id"])["open"] is False


def test_fair_queue_takes_partitions_in_turn(client, queue):
    client.put_queue(queue, fair=True, partition_weights={"b": 1})
    client.enqueue_many([task_spec("a", i, queue=queue, partition_key="a") for i in range(5)])
    client.enqueue("b", None, queue=queue, partition_key="b")
    got = client.claim(queue, "py", limit=2)
    assert sorted(t["kind"] for t in got) == ["a", "b"]
    assert {t["partition_key"] for t in got} == {"a", "b"}


def test_dead_letter_queue_takes_discarded_tasks(client, queue):
    """dead_letter=: a task discarded after its last attempt is also enqueued in the
    dead-letter queue with dead_letter_of naming it; the original stays discarded and can be
    retried; a queue cannot be its own dead-letter queue (issue 43)."""
    dead = f"{queue}-dead"
    client.put_queue(queue, dead_letter=dead)
    assert client.get_queue(queue)["settings"]["dead_letter"] == dead
    t = client.enqueue("charge", {"order": 7}, queue=queue, max_attempts=1)
    [claimed] = client.claim(queue, "py")
    assert claimed["id"] == t["id"]
    client.fail(t["id"], claimed["lease"]["token"], "card declined")
    letters = client.list_tasks(queue=dead, limit=100)["tasks"]
    assert len(letters) == 1, letters
    letter = letters[0]
    assert (letter["kind"], letter["payload"], letter["state"]) == ("charge", {"order": 7}, "available")
    of = letter["dead_letter_of"]
    assert (of["task_id"], of["queue"], of["kind"], of["attempts"]) == (t["id"], queue, "charge", 1)
    assert of["errors"][0]["message"] == "card declined" and of["discarded_at"]
    assert client.get_task(t["id"])["state"] == "discarded"
    assert client.retry_task(t["id"])["state"] == "available"
    with pytest.raises(InvalidRequest) as e:
        client.put_queue(queue, dead_letter=queue)
    assert 400 <= e.value.status < 500


def test_rate_limits_hold_tasks_over_the_limit(client, queue):
    name = "rl-" + queue
    made = client.put_rate_limit(name, "window", 2, period="1h")
    assert (made["kind"], made["limit"], made["period"]) == ("window", 2, "1h")
    for i in range(3):
        t = client.enqueue("call", i, queue=queue, rate_limit=f"{name}:acme")
        assert t["rate_limit"] == f"{name}:acme"
    assert len(client.claim(queue, "py", limit=10)) == 2
    assert client.claim(queue, "py", limit=10) == []
    got = client.get_rate_limit(name)
    assert (got["admitted"], got["keys"], got["blocked"]) == (2, 1, 1)
    assert name in [l["name"] for l in client.list_rate_limits()]
    with pytest.raises(InvalidRequest):
        client.put_rate_limit(name, "window", 2)
    client.delete_rate_limit(name)
    assert len(client.claim(queue, "py", limit=10)) == 1


def test_workflows_release_in_dependency_order(client, queue):
    made = client.create_workflow([
        dict(task_spec("extract", None, queue=queue), ref="x"),
        dict(task_spec("load", None, queue=queue), ref="y", depends_on=["x"]),
    ], name="etl")
    wf = made["workflow"]
    assert [t["waiting"] for t in wf["tasks"]] == [False, True]
    first = client.claim(queue, "py", limit=10)
    assert [t["kind"] for t in first] == ["extract"]
    client.complete(first[0]["id"], first[0]["lease"]["token"], {"rows": 3})
    second = client.claim(queue, "py", limit=10, wait="10s")
    assert [t["kind"] for t in second] == ["load"] and second[0]["deps"] == {"x": {"rows": 3}}
    assert [t["state"] for t in client.get_workflow(wf["batch"]["id"])["tasks"]] == \
        ["completed", "running"]
    wid = wf["batch"]["id"]
    added = client.add_to_workflow(
        wid, [dict(task_spec("report", None, queue=queue), ref="z", depends_on=["y"])],
        workflows=[{"ref": "s", "depends_on": ["z"],
                    "tasks": [dict(task_spec("q", None, queue=queue), ref="q")]}])
    assert [t["ref"] for t in added["workflow"]["tasks"]] == ["x", "y", "z", "s/q"]
    assert client.cancel_workflow(wid)["batch"]["id"] == wid
    # z and s/q were cancelled; a retry makes them wait for y again.
    retried = client.retry_workflow(wid)
    assert [t["waiting"] for t in retried["tasks"]] == [False, False, True, True]
    with pytest.raises(InvalidRequest):
        client.create_workflow([dict(task_spec("a", None), ref="a", depends_on=["a"])])


def test_bulk_actions_over_a_filter(client, queue):
    client.enqueue_many([task_spec("k", {"i": i}, queue=queue) for i in range(30)])
    counted = client.bulk("cancel", {"queue": queue}, dry_run=True)
    assert (counted["total"], counted["more"]) == (30, False)
    job = client.bulk("cancel", {"queue": queue, "states": ["available"]})
    deadline = time.time() + 60
    while job["state"] != "completed":
        assert time.time() < deadline, job
        time.sleep(0.1)
        job = client.get_bulk(job["id"])
    assert (job["done"], job["skipped"], job["action"]) == (30, 0, "cancel")
    with pytest.raises(InvalidRequest):
        client.bulk("retry", {"queue": queue, "states": ["running"]})
