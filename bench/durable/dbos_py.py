"""DBOS Transact Python contender of the durable-functions bench (see README.md).

Environment: DATABASE_URL (a fresh, empty PostgreSQL database), N, STARTERS, OUT (JSON file),
DBOS_PY_MODE ("start" [default] or "queue"), for "queue": DBOS_QUEUE_CONC (the queue's
worker_concurrency, 100) and DBOS_QUEUE_POLL (its polling_interval_sec, 1.0 = DBOS's default).
Run by run.sh with the venv it installs (PyPI `dbos` 3.4.x).

Shape: one process. DBOS is launched (system schema created, not timed), then STARTERS threads
each call DBOS.start_workflow(three_steps, i) for their share of the N workflows (DBOS runs each
started workflow at once on its own executor thread in this process: that is its worker), then
each starter waits for its workflows with handle.get_result(). The clock runs from releasing the
starters until every get_result returned; then the database is checked: N rows SUCCESS in
dbos.workflow_status.

Mode "queue" (run.sh's contender dbos-py-queue): the starters call queue.enqueue(three_steps, i)
on a queue registered after launch; this process's queue thread dequeues them (at most
worker_concurrency running at once) every polling interval; get_result() then polls the
database (DBOS's default 1 s interval).
"""
import json
import os
import statistics
import sys
import threading
import time

from importlib.metadata import version

import psycopg
from dbos import DBOS

URL = os.environ["DATABASE_URL"]
N = int(os.environ.get("N", "2000"))
STARTERS = int(os.environ.get("STARTERS", "10"))
MODE = os.environ.get("DBOS_PY_MODE", "start")
QUEUE_CONC = int(os.environ.get("DBOS_QUEUE_CONC", "100"))
QUEUE_POLL = float(os.environ.get("DBOS_QUEUE_POLL", "1.0"))

# Appended from DBOS's executor threads (list.append is atomic under the GIL).
step_ms: list = []
workflow_ms: list = []

DBOS(config={"name": "durable-bench", "system_database_url": URL, "log_level": "WARNING"})


@DBOS.step()
def noop_step(k: int) -> None:
    return None


@DBOS.workflow()
def three_steps(i: int) -> int:
    t0 = time.perf_counter()
    for k in range(3):
        s = time.perf_counter()
        noop_step(k)  # returns once DBOS has written the step's output row
        step_ms.append((time.perf_counter() - s) * 1000)
    workflow_ms.append((time.perf_counter() - t0) * 1000)
    return i


def pct(xs, p):
    """Nearest rank."""
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[max(0, min(len(xs) - 1, int(-(-p * len(xs) // 100)) - 1))], 3)


def summary(xs):
    return {"count": len(xs), "p50": pct(xs, 50), "p99": pct(xs, 99), "max": pct(xs, 100),
            "mean": round(statistics.fmean(xs), 3) if xs else None}


def main() -> None:
    DBOS.launch()
    queue = None
    if MODE == "queue":
        queue = DBOS.register_queue("bench", worker_concurrency=QUEUE_CONC,
                                    polling_interval_sec=QUEUE_POLL)
    start_ms: list = []
    errors: list = []
    barrier = threading.Barrier(STARTERS + 1)

    def starter(k: int) -> None:
        mine = range(k, N, STARTERS)
        handles = []
        barrier.wait()
        try:
            for i in mine:
                s = time.perf_counter()
                handles.append(queue.enqueue(three_steps, i) if queue is not None
                               else DBOS.start_workflow(three_steps, i))
                start_ms.append((time.perf_counter() - s) * 1000)
            for h in handles:
                h.get_result()
        except Exception as e:  # noqa: BLE001 - reported in the JSON
            errors.append(repr(e))

    threads = [threading.Thread(target=starter, args=(k,)) for k in range(STARTERS)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    DBOS.destroy()
    with psycopg.connect(URL) as conn:
        success = conn.execute(
            "select count(*) from dbos.workflow_status where status = 'SUCCESS'").fetchone()[0]
        steps = conn.execute("select count(*) from dbos.operation_outputs").fetchone()[0]
    out = {
        "contender": os.environ.get("CONTENDER", "dbos-py"),
        "library": f"dbos {version('dbos')}",
        "runtime": f"python {'.'.join(map(str, sys.version_info[:3]))}",
        "mode": ("DBOS.start_workflow per workflow from each starter thread; handle.get_result()"
                 if queue is None else
                 f"queue.enqueue per workflow from each starter thread (worker_concurrency "
                 f"{QUEUE_CONC}, polling_interval_sec {QUEUE_POLL}); handle.get_result()"),
        "n": N, "starters": STARTERS, "steps_per_workflow": 3,
        "seconds": round(secs, 6),
        "workflows_per_s": round(N / secs, 2),
        "steps_per_s": round(3 * N / secs, 2),
        "step_ms": summary(step_ms),
        "workflow_ms": summary(workflow_ms),
        "workflow_ms_per_step": summary([x / 3 for x in workflow_ms]),
        "start_call_ms": summary(start_ms),
        "verified_success": success,
        "recorded_step_rows": steps,
        "errors": errors[:5],
        "ok": success == N and not errors,
    }
    with open(os.environ["OUT"], "w") as f:
        json.dump(out, f, indent=1)
    print(f"RESULT workflows_per_s={out['workflows_per_s']} seconds={secs:.3f} ok={out['ok']}")


if __name__ == "__main__":
    main()
