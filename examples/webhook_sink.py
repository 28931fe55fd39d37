#!/usr/bin/env python3
"""A webhook sink for docket's process notifications (Python standard library only).

Appends every notification it receives to FILE, one JSON object per line, and answers 200 —
except the first FAIL_FIRST requests, which get 500 (to show that docket retries in order).

    python3 examples/webhook_sink.py 8082 notifications.jsonl [FAIL_FIRST]
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
OUT = sys.argv[2]
fail_left = int(sys.argv[3]) if len(sys.argv) > 3 else 0
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        global fail_left
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with lock:
            if fail_left > 0:
                fail_left -= 1
                status = 500
            else:
                with open(OUT, "a") as f:
                    for n in body["notifications"]:
                        f.write(json.dumps(n) + "\n")
                status = 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
