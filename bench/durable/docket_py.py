"""docket Python-client contender of the durable-functions bench (see README.md).

Uses the Python client's workflow support (issue 41): AsyncClient.start_workflow /
workflow_result and Worker.workflow(name)(fn) with ctx.step, as named in the last section of the
durable-functions HTTP contract.

Environment: DOCKET_SERVER (a `docket serve` that run.sh started on a fresh database), N,
STARTERS, OUT (JSON file), WORKER_CONC (workflow runs at once in the worker, default 100: the
DBOS contenders run every started workflow at once, so the worker must not be the one holding
back), DOCKET_PY_WORKFLOW ("async" [default]: `async def` workflow, `await ctx.step` of an
`async def` no-op; "sync": plain `def` workflow and step function, which the worker runs in a
thread), DOCKET_DEFER_STEPS (unset: the client's default, a step's entry sent with the run's next
call to docket; "0": Worker(eager_steps=True), each step recorded before ctx.step returns —
run.sh's contender docket-py-eager; "1": eager_steps=False).

Shape: one process, one asyncio loop. A Worker with only the workflow (so it claims only the
workflow queue, "workflows") is started idle, then STARTERS asyncio tasks each call `await
client.start_workflow("three_steps", i)` for their share of the N runs, then wait for each of
theirs with `client.workflow_result(id, wait=30)` (the server's long poll) until it is finished.
The clock runs from releasing the starters until every run was seen finished; then every run's
state is checked (N completed).
"""
import asyncio
import json
import os
import statistics
import sys
import time
from importlib.metadata import version

from docket_client import AsyncClient, Worker

SERVER = os.environ["DOCKET_SERVER"]
N = int(os.environ.get("N", "2000"))
STARTERS = int(os.environ.get("STARTERS", "10"))
WORKER_CONC = int(os.environ.get("WORKER_CONC", "100"))
STYLE = os.environ.get("DOCKET_PY_WORKFLOW", "async")
DEFER = os.environ.get("DOCKET_DEFER_STEPS", "")
DEFER_OPT = {} if DEFER == "" else {"eager_steps": DEFER == "0"}
TERMINAL = {"completed", "failed", "cancelled"}

step_ms: list = []
workflow_ms: list = []


def noop():
    return None


async def noop_async():
    return None


async def three_steps(ctx, input):
    t0 = time.perf_counter()
    for k in range(3):
        s = time.perf_counter()
        # Eager: returns once POST .../steps answered 200 (this step recorded). Deferred: the call
        # first sends the previous step's entry; its own goes with the next call or the finish.
        await ctx.step(f"noop{k}", noop_async)
        step_ms.append((time.perf_counter() - s) * 1000)
    workflow_ms.append((time.perf_counter() - t0) * 1000)
    return input


def three_steps_sync(ctx, input):
    t0 = time.perf_counter()
    for k in range(3):
        s = time.perf_counter()
        ctx.step(f"noop{k}", noop)
        step_ms.append((time.perf_counter() - s) * 1000)
    workflow_ms.append((time.perf_counter() - t0) * 1000)
    return input


def run_of(answer):
    """start_workflow/workflow_result answer a Run (a dict); accept {"run": Run} too."""
    if isinstance(answer, dict) and "run" in answer and isinstance(answer["run"], dict):
        return answer["run"]
    return answer


def pct(xs, p):
    """Nearest rank."""
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[max(0, min(len(xs) - 1, int(-(-p * len(xs) // 100)) - 1))], 3)


def summary(xs):
    return {"count": len(xs), "p50": pct(xs, 50), "p99": pct(xs, 99), "max": pct(xs, 100),
            "mean": round(statistics.fmean(xs), 3) if xs else None}


async def main() -> None:
    start_ms: list = []
    errors: list = []
    states: dict = {}
    async with AsyncClient(SERVER) as client:
        w = Worker(client, concurrency=WORKER_CONC, wait="1s",
                   report_interval=0, **DEFER_OPT)
        w.workflow("three_steps")(three_steps if STYLE == "async" else three_steps_sync)
        runner = asyncio.ensure_future(w.run_async())
        await asyncio.sleep(0.5)  # the worker's first claim is in (long poll), as DBOS is launched

        async def starter(k: int) -> None:
            ids = []
            try:
                for i in range(k, N, STARTERS):
                    s = time.perf_counter()
                    run = run_of(await client.start_workflow("three_steps", i))
                    start_ms.append((time.perf_counter() - s) * 1000)
                    ids.append(run["id"])
                for rid in ids:
                    while True:
                        run = run_of(await client.workflow_result(rid, wait=30))
                        if run["state"] in TERMINAL:
                            states[rid] = run["state"]
                            break
            except Exception as e:  # noqa: BLE001 - reported in the JSON
                errors.append(repr(e))

        t0 = time.perf_counter()
        await asyncio.gather(*(starter(k) for k in range(STARTERS)))
        secs = time.perf_counter() - t0
        w.stop()
        await runner
        completed = sum(1 for s in states.values() if s == "completed")
        # The journal as the server holds it, for one run: 3 step entries expected.
        sample = None
        if states:
            try:
                r = await client.workflow_steps(next(iter(states)))
                r = r.get("steps", r) if isinstance(r, dict) else r
                sample = len(r)
            except Exception as e:  # noqa: BLE001 - informative only
                sample = repr(e)
    out = {
        "contender": os.environ.get("CONTENDER", "docket-py"),
        "library": f"docket-client {version('docket-client')} (httpx {version('httpx')})",
        "runtime": f"python {'.'.join(map(str, sys.version_info[:3]))}",
        "mode": f"AsyncClient.start_workflow per run from each asyncio starter; "
                f"workflow_result(wait=30); Worker(concurrency={WORKER_CONC}) {STYLE} workflow, "
                f"eager_steps {DEFER_OPT.get('eager_steps', 'default')}",
        "defer_steps": (not DEFER_OPT["eager_steps"]) if DEFER_OPT else "client default",
        "n": N, "starters": STARTERS, "steps_per_workflow": 3, "worker_concurrency": WORKER_CONC,
        "seconds": round(secs, 6),
        "workflows_per_s": round(N / secs, 2),
        "steps_per_s": round(3 * N / secs, 2),
        "step_ms": summary(step_ms),
        "workflow_ms": summary(workflow_ms),
        "workflow_ms_per_step": summary([x / 3 for x in workflow_ms]),
        "start_call_ms": summary(start_ms),
        "verified_success": completed,
        "journal_entries_of_one_run": sample,
        "errors": errors[:5],
        "ok": completed == N and not errors,
    }
    with open(os.environ["OUT"], "w") as f:
        json.dump(out, f, indent=1)
    print(f"RESULT workflows_per_s={out['workflows_per_s']} seconds={secs:.3f} ok={out['ok']}")


if __name__ == "__main__":
    asyncio.run(main())
