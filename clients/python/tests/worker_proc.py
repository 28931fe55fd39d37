"""A worker in its own process (for the SIGKILL and SIGTERM tests):
    worker_proc.py SERVER QUEUE SLEEP_SECONDS LEASE
prints "started ID" when a handler starts and "finished ID" when it returns."""
import asyncio
import sys

from docket_client import AsyncClient, Worker

server, queue, sleep, lease = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
worker = Worker(AsyncClient(server), queue=queue, concurrency=4, lease=lease, wait="1s",
                shutdown_grace=30)


@worker.task("slow")
async def slow(job):
    print(f"started {job.id}", flush=True)
    await asyncio.sleep(sleep)
    print(f"finished {job.id}", flush=True)
    return {"by": "proc", "pid_attempt": job.attempt}


worker.run()
print("exited", flush=True)
