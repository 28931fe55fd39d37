"""A processor for docket's durable processes, without hand-writing the protocol
(docs/src/concepts/processes.md, "The processor contract").

    proc = Processor()

    @proc.init
    def init(req: Request) -> Result:
        return Result(events=[{"created": req.args}], aux_state={"n": 0},
                      response="ok", action=timer("5m"))

    @proc.call
    def call(req): ...            # also @proc.timeout, @proc.repair; sync or async

    proc.serve(port=8081)         # a small threaded HTTP server (standard library)
    # or, inside any web framework: answer = proc.handle(json_body) (a dict to send back)

A handler returns a :class:`Result` (or a plain dict in the contract's shape, or ``None`` for no
change); raising :class:`ProcessorFailure` answers ``{"error": ...}`` — docket puts the process
in ``error`` (init/call) or retries the timer per the namespace's retry policy. Any other
exception is answered the same way with its text.
"""
from __future__ import annotations

import asyncio
import inspect
import json
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Union

from .durations import Duration, format_duration

Action = Union[str, Dict[str, Any], None]


def timer(after: Duration, remove: bool = False) -> Dict[str, Any]:
    """Action: wake the process (``timeout`` task) after ``after``; ``remove`` deletes it then."""
    action: Dict[str, Any] = {"timeout": format_duration(after)}
    if remove:
        action["remove"] = True
    return action


def timer_at(at: datetime, remove: bool = False) -> Dict[str, Any]:
    """Action: wake the process at ``at`` (UTC when naive)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    action: Dict[str, Any] = {"set_timer": at.astimezone(timezone.utc).isoformat()
                              .replace("+00:00", "Z")}
    if remove:
        action["remove"] = True
    return action


UNSET_TIMER = "unset_timer"


class ProcessorFailure(Exception):
    """Raise from a handler to answer ``{"error": error}`` (any JSON)."""

    def __init__(self, error: Any) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class Request:
    """docket's ``ProcessorRequest``: ``task_type`` (``init``/``call``/``repair``/``timeout``),
    the caller's ``args`` and ``context``, and the ``process`` (``id``, ``namespace``,
    ``status``, ``aux_state``, ``metadata``, ``history``, ``last_event_id``…)."""

    task_type: str
    args: Any
    context: Any
    process: Dict[str, Any]

    @property
    def process_id(self) -> str:
        return self.process["id"]

    @property
    def aux_state(self) -> Any:
        return self.process.get("aux_state")

    @property
    def history(self) -> List[Dict[str, Any]]:
        return self.process.get("history") or []

    @property
    def events(self) -> List[Any]:
        """The payloads of the history sent (in order)."""
        return [e.get("payload") for e in self.history]


_KEEP = object()


@dataclass
class Result:
    """docket's ``ProcessorResult``: ``events`` (payloads, or ``{"payload", "metadata"}``
    dicts), a new ``aux_state`` / ``metadata`` (left out: unchanged), the caller's
    ``response``, and an ``action`` (:func:`timer`, :func:`timer_at`, :data:`UNSET_TIMER`;
    ``None``: keep the timers)."""

    events: List[Any] = field(default_factory=list)
    aux_state: Any = _KEEP
    metadata: Any = _KEEP
    response: Any = None
    action: Action = None

    def to_json(self) -> Dict[str, Any]:
        events = [e if isinstance(e, dict) and set(e) <= {"payload", "metadata"} and "payload" in e
                  else {"payload": e} for e in self.events]
        out: Dict[str, Any] = {"events": events, "response": self.response}
        if self.aux_state is not _KEEP:
            out["aux_state"] = self.aux_state
        if self.metadata is not _KEEP:
            out["metadata"] = self.metadata
        if self.action is not None:
            out["action"] = self.action
        return out


Handler = Callable[[Request], Any]


class Processor:
    """Handlers for ``init``, ``call``, ``repair`` and ``timeout``; a missing one answers an
    error naming it."""

    def __init__(self) -> None:
        self._handlers: Dict[str, Handler] = {}
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._loop_lock = threading.Lock()

    def on(self, task_type: str) -> Callable[[Handler], Handler]:
        if task_type not in ("init", "call", "repair", "timeout"):
            raise ValueError(f"unknown task_type {task_type!r}")

        def register(fn: Handler) -> Handler:
            self._handlers[task_type] = fn
            return fn
        return register

    def init(self, fn: Handler) -> Handler:
        return self.on("init")(fn)

    def call(self, fn: Handler) -> Handler:
        return self.on("call")(fn)

    def repair(self, fn: Handler) -> Handler:
        return self.on("repair")(fn)

    def timeout(self, fn: Handler) -> Handler:
        return self.on("timeout")(fn)

    def handle(self, body: Dict[str, Any]) -> Dict[str, Any]:
        """One request body → the answer to send (always HTTP 200, JSON)."""
        try:
            req = Request(task_type=body["task_type"], args=body.get("args"),
                          context=body.get("context"), process=body["process"])
        except (KeyError, TypeError) as e:
            return {"error": f"not a processor request: {e}"}
        fn = self._handlers.get(req.task_type)
        if fn is None:
            return {"error": f"no {req.task_type} handler"}
        try:
            out = fn(req)
            if inspect.isawaitable(out):
                out = self._run_coroutine(out)
        except ProcessorFailure as e:
            return {"error": e.error}
        except Exception as e:  # noqa: BLE001 - the process records it
            return {"error": f"{type(e).__name__}: {e}"}
        if out is None:
            return {"events": []}
        if isinstance(out, Result):
            return out.to_json()
        return out

    def _run_coroutine(self, coro: Any) -> Any:
        # Async handlers share one event loop on a background thread.
        with self._loop_lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def server(self, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
        """A threaded HTTP server answering docket's POSTs (not started; ``port`` 0 takes a free
        one: ``server.server_address[1]``)."""
        proc = self

        class _Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    body = json.loads(self.rfile.read(length))
                    answer = proc.handle(body)
                except ValueError as e:
                    answer = {"error": f"invalid JSON: {e}"}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return ThreadingHTTPServer((host, port), _Handler)

    def serve(self, host: str = "127.0.0.1", port: int = 8081) -> None:
        """Serve until interrupted (blocking)."""
        srv = self.server(host, port)
        try:
            srv.serve_forever()
        finally:
            srv.server_close()


__all__ = ["Processor", "Request", "Result", "ProcessorFailure", "timer", "timer_at",
           "UNSET_TIMER"]
