#!/usr/bin/env python3
"""An example docket processor (Python standard library only).

docket POSTs {"task_type", "args", "context", "process": {...}} and expects
{"events", "aux_state", "metadata", "response", "action"} or {"error": ...}.

What this processor answers is driven by the request, so tests and demos can script a
process's life:
- init / call / repair: `args` is a step;
- timeout: the first step of `process.aux_state.timeouts` (the rest is kept for later timers).
A step may hold: "events" (payloads to append), "response", "aux_state", "metadata",
"timer" (e.g. "2s"), "remove_timer" ("2s": remove the process then), "unset_timer": true,
"action" (sent as given),
"error" (answer {"error": ...}), "sleep" (seconds before answering).
Without "response" it answers {"history": [event ids it was shown], "last_event_id": n}.

    python3 examples/processor.py 8081
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def answer(req):
    process = req["process"]
    aux = process.get("aux_state")
    if req["task_type"] == "timeout":
        steps = (aux or {}).get("timeouts") or []
        step = steps[0] if steps else {}
        aux = dict(aux or {}, timeouts=steps[1:])
    else:
        step = req.get("args") or {}
        if "aux_state" in step:
            aux = step["aux_state"]
    if step.get("sleep"):
        time.sleep(step["sleep"])
    if "error" in step:
        return {"error": step["error"]}
    out = {
        "events": [{"payload": p, "metadata": {"by": req["task_type"]}} for p in step.get("events", [])],
        "aux_state": aux,
        "response": step.get("response", {
            "history": [e["event_id"] for e in process["history"]],
            "last_event_id": process["last_event_id"],
        }),
    }
    if "metadata" in step:
        out["metadata"] = step["metadata"]
    if "timer" in step:
        out["action"] = {"timeout": step["timer"]}
    if "remove_timer" in step:
        out["action"] = {"timeout": step["remove_timer"], "remove": True}
    if step.get("unset_timer"):
        out["action"] = "unset_timer"
    if "action" in step:  # a raw action, as given
        out["action"] = step["action"]
    return out


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        reply = json.dumps(answer(json.loads(body))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8081
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    # Port 0 takes a free port and says which (tests: no race with another test for a port).
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()
