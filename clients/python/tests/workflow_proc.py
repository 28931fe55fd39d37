"""A worker of durable functions in its own process (for the SIGKILL test):
    workflow_proc.py SERVER QUEUE LOG SLOW_STEP
The workflow "five" runs five steps; each appends "<step> <pid> <output>" to LOG when it ends
("<step> <pid> started" when it starts). Step SLOW_STEP (0: none) prints "in step N" and
sleeps a minute: the test kills the process there."""
import os
import random
import sys
import time

from docket_client import AsyncClient, Worker

server, queue, log_path, slow = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# A 2 s lease (a heartbeat every ~0.7 s): a killed worker's run is taken over soon after.
worker = Worker(AsyncClient(server), workflow_queue=queue, concurrency=4, lease="2s",
                wait="1s", shutdown_grace=5, report_interval=0)


def write(line):
    with open(log_path, "a") as f:
        f.write(line + "\n")


def make_step(i):
    def step():
        write(f"{i} {os.getpid()} started")
        if i == slow:
            print(f"in step {i}", flush=True)
            time.sleep(60)
        out = f"s{i}-{os.getpid()}-{random.randrange(10**9)}"
        write(f"{i} {os.getpid()} {out}")
        return out
    return step


@worker.workflow("five")
def five(ctx, n):  # a sync workflow: its steps run in its thread
    return [ctx.step(f"step{i}", make_step(i)) for i in range(1, 6)]


print("ready", flush=True)
worker.run()
