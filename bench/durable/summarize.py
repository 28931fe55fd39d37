"""summarize.py RESULTS_DIR: the run JSONs (<contender>-<repeat>.json) -> summary.md (printed too).

Per contender: runs that ended ok out of all; workflows/s and steps/s as the median of the ok runs
with min-max; step and workflow-body latencies as the median over the ok runs of each run's
p50/p99; the machine's busy fraction and the command's CPU seconds (median).
"""
import glob
import json
import os
import statistics
import sys


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=1):
    return "–" if x is None else f"{x:.{nd}f}"


def main():
    d = sys.argv[1]
    runs = {}
    for p in sorted(glob.glob(os.path.join(d, "*.json"))):
        if os.path.basename(p) == "meta.json":
            continue
        try:
            with open(p) as f:
                r = json.load(f)
        except ValueError:
            continue
        name = r.get("contender") or os.path.basename(p).rsplit("-", 1)[0]
        runs.setdefault(name, []).append(r)
    meta = {}
    meta_path = os.path.join(d, "meta.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
    lines = ["# Durable functions: workflows of 3 no-op steps", ""]
    if meta:
        lines += [f"Command: `{meta.get('command', '')}`  ",
                  f"Date: {meta.get('date', '')}; N={meta.get('n')} workflows per run, "
                  f"{meta.get('starters')} concurrent starters, {meta.get('repeats')} runs per "
                  f"contender; PostgreSQL: {meta.get('postgres', '')}; machine: "
                  f"{meta.get('cores')} cores (shared).", ""]
    lines += [
        "| contender | library (runtime) | ok runs | workflows/s median (min–max) | steps/s "
        "median | step p50 ms | step p99 ms | workflow body p50 / p99 ms | start call p50 / "
        "p99 ms | process CPU s | machine busy |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rs in runs.items():
        ok = [r for r in rs if r.get("ok")]
        lib = next((f"{r.get('library')} ({r.get('runtime')})" for r in rs if r.get("library")), "?")
        if not ok:
            err = next((e for r in rs for e in r.get("errors", [])), "")
            lines.append(f"| {name} | {lib} | 0/{len(rs)} | failed: {str(err)[:120]} "
                         "| | | | | | | |")
            continue
        wps = [r["workflows_per_s"] for r in ok]
        g = lambda key, sub: med([r.get(key, {}).get(sub) for r in ok])  # noqa: E731
        m = lambda key: med([r.get("machine", {}).get(key) for r in ok])  # noqa: E731
        lines.append(
            f"| {name} | {lib} | {len(ok)}/{len(rs)} | {fmt(med(wps))} ({fmt(min(wps))}–"
            f"{fmt(max(wps))}) | {fmt(med([r['steps_per_s'] for r in ok]))} | "
            f"{fmt(g('step_ms', 'p50'))} | {fmt(g('step_ms', 'p99'))} | "
            f"{fmt(g('workflow_ms', 'p50'))} / {fmt(g('workflow_ms', 'p99'))} | "
            f"{fmt(g('start_call_ms', 'p50'))} / {fmt(g('start_call_ms', 'p99'))} | "
            f"{fmt(m('command_cpu_s'))} | {fmt(m('machine_busy_fraction'), 2)} |")
    lines += [
        "",
        "workflows/s = N / (time from releasing the starters until every workflow's result was "
        "seen by its starter; each run then checked N workflows SUCCESS/completed in the "
        "database). Step time = in the workflow code, from calling the step until the call "
        "returns, which is after the step's output was recorded (DBOS: its operation_outputs "
        "row written; docket -eager: POST /v1/workflow-runs/{id}/steps answered; docket with "
        "the workers' default deferred entries: the call sends the previous step's entry, its "
        "own goes with the next call or the finish). Workflow body = "
        "from the workflow function's first line to its return (3 steps); it leaves out "
        "queueing before the function starts and recording the result after. Percentiles are "
        "nearest rank over every step (3N) or workflow (N) of a run; the table gives the median "
        "of the runs' values. Process CPU s: user+sys of the contender's process (starters "
        "and worker; for docket not the server). Machine busy: fraction of all cores busy "
        "during the run (others' work included).",
    ]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(d, "summary.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
