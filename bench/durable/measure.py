"""measure.py OUT_JSON [--serve-pid PID] -- CMD...: run one contender, then add to its JSON
what the machine did meanwhile (it is shared: other work on the 2 cores shows here).

Added under "machine": the command's own CPU seconds (user+sys of it and its children), the
`docket serve` process's CPU seconds (docket contenders), all postgres processes' CPU seconds
(every backend on the cluster, so other users' queries count too; sampled every 0.5 s), the whole machine's busy
fraction from /proc/stat (of all cores), load average before/after, wall seconds of the command
(including runtime start-up and DBOS's launch/migrations, which the contender's own "seconds"
leave out). Exit status: the command's (124 from `timeout`), 3 if it wrote no JSON.
"""
import json
import os
import resource
import subprocess
import sys
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime
    except (OSError, IndexError, ValueError):
        return None


def postgres_pids():
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "postgres":
                    continue
        except OSError:
            continue
        yield pid


class PostgresSampler(threading.Thread):
    """CPU seconds of every postgres process during the run, sampled every 0.5 s (a backend that
    ends loses at most its last 0.5 s; one that was there at the start counts from the start,
    one born later from its birth)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.base, self.last = {}, {}
        self.done = threading.Event()
        self.sample(first=True)

    def sample(self, first=False):
        for pid in postgres_pids():
            c = proc_cpu(pid)
            if c is None:
                continue
            if pid not in self.base:
                self.base[pid] = c if first else 0.0
            self.last[pid] = c

    def run(self):
        while not self.done.wait(0.5):
            self.sample()

    def stop(self):
        self.done.set()
        self.join()
        self.sample()
        return sum(self.last[p] - self.base[p] for p in self.last)


def machine():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v), idle


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def main():
    args = sys.argv[1:]
    out = args.pop(0)
    serve_pid = None
    if args and args[0] == "--serve-pid":
        serve_pid = int(args[1])
        args = args[2:]
    if args and args[0] == "--":
        args = args[1:]
    load0, (tot0, idle0) = loadavg(), machine()
    pg = PostgresSampler()
    pg.start()
    sv0 = proc_cpu(serve_pid) if serve_pid else None
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    rc = subprocess.call(args)
    wall = time.perf_counter() - w0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    sv1 = proc_cpu(serve_pid) if serve_pid else None
    pg_cpu = pg.stop()
    tot1, idle1 = machine()
    load1 = loadavg()
    m = {
        "command_wall_s": round(wall, 3),
        "command_cpu_s": round((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), 3),
        "docket_serve_cpu_s": round(sv1 - sv0, 3) if sv0 is not None and sv1 is not None else None,
        # Sampled every 0.5 s: a backend's last < 0.5 s before it ended is missed.
        "postgres_cpu_s": round(pg_cpu, 3),
        "machine_busy_fraction": round(1 - (idle1 - idle0) / max(1, tot1 - tot0), 3),
        "cores": os.cpu_count(),
        "loadavg_before": load0, "loadavg_after": load1,
        "exit_status": rc,
    }
    try:
        with open(out) as f:
            d = json.load(f)
    except (OSError, ValueError):
        d = {"ok": False, "errors": [f"the contender wrote no result (exit status {rc})"]}
        rc = rc or 3
    d["machine"] = m
    if rc != 0:
        d["ok"] = False
    with open(out, "w") as f:
        json.dump(d, f, indent=1)
    sys.exit(rc)


if __name__ == "__main__":
    main()
