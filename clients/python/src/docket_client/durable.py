"""Durable functions: workflows written as code, whose runs docket keeps (docs/src/durable/).

    worker = Worker()                     # claims the queue "workflows"

    @worker.workflow("checkout")
    async def checkout(ctx, order):
        charge = await ctx.step("charge", lambda: payments.charge(order))
        await ctx.sleep("1h")
        approved = await ctx.wait_for_event("approved", timeout="2d")
        return {"charge": charge, "approved": approved is not None}

    client.start_workflow("checkout", {"id": 42}, id="order-42")

A run's task is claimed like any other (kind = the workflow's name); the function runs from the
top with a :class:`WorkflowContext` that numbers every durable call (``seq`` 0, 1, 2, …). A call
the run's journal already holds returns what was recorded (replay); past the journal's end it is
made for real and recorded. Sleeping and waiting hand the task back to docket (the function stops
here and runs again from the top when the wait is over), so a waiting run holds no worker.

What is recorded when:
- a step's outcome (after its in-process retries) is sent before the next step starts, with a
  sleep/wait/child start, or with the run's end — whichever comes first: a worker that dies in
  step 3 leaves steps 1 and 2 recorded, never run again;
- ``now()``, ``random()``, ``uuid()``, ``patched()`` the same way (they touch nothing outside);
- a child's start at once (docket creates the child in the same transaction).

Sync workflow functions (``def``) run in a thread of their own with a :class:`SyncWorkflowContext`
(the same methods, blocking); ``async def`` ones run on the worker's event loop with a
:class:`WorkflowContext` (its durable methods are awaited).
"""
from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import random as _random
import time
import traceback
import uuid as _uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

import httpx

from .durations import Duration, parse_duration
from .errors import Conflict, DocketError, NotFound, RateLimited

log = logging.getLogger("docket_client.durable")

#: A step's attempts in process before its error is recorded (``ctx.step(max_attempts=)``).
STEP_MAX_ATTEMPTS = 3
#: The first pause between a step's attempts (seconds); doubled after each, at most
#: :data:`STEP_MAX_BACKOFF`.
STEP_BACKOFF = 1.0
STEP_MAX_BACKOFF = 60.0

Json = Any


class StepFailed(Exception):
    """A step spent its attempts: ``step`` (its name), ``error`` (its last error's text, as
    recorded), ``attempts``. Raised by ``ctx.step`` — on the first execution and on every replay
    of the run — and may be caught; uncaught, the run fails with it."""

    def __init__(self, step: str, error: str, attempts: int = 0) -> None:
        super().__init__(f"step {step!r} failed after {attempts} attempt(s): {error}"
                         if attempts else f"step {step!r} failed: {error}")
        self.step = step
        self.error = error
        self.attempts = attempts


class ChildFailed(Exception):
    """A child run awaited did not complete: ``child_id``, ``state`` (``failed`` or
    ``cancelled``), ``error``."""

    def __init__(self, child_id: str, state: str, error: Optional[str]) -> None:
        super().__init__(f"child run {child_id} {state}: {error}")
        self.child_id = child_id
        self.state = state
        self.error = error


class NonDeterminismError(Exception):
    """The code asked for another durable call than the run's journal holds at that place (the
    code changed under a run that was under way — guard the change with ``ctx.patched(id)``).
    The run fails with it; ``client.retry_workflow_run(id)`` replays it once the code is
    fixed."""


class WorkflowRefused(Exception):
    """docket refused what the run recorded (an output too large, a bad name: a 4xx answer);
    the run fails with it."""


class _Suspended(BaseException):
    # The run sleeps or waits: docket took the task back; this execution ends here. A
    # BaseException so that the function's `except Exception` does not catch it.
    pass


class _Stopped(BaseException):
    # The worker no longer holds the run's task (lease lost, run cancelled, worker stopping):
    # this execution ends quietly, nothing more is reported.
    pass


def _iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _parse_time(text: str) -> datetime:
    # RFC 3339 with up to nanoseconds (Python ≤ 3.10 takes at most microseconds).
    text = text.strip().replace("z", "Z").replace("Z", "+00:00")
    if "." in text:
        head, rest = text.split(".", 1)
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        text = f"{head}.{rest[:i][:6].ljust(6, '0')}{rest[i:]}"
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def _json(value: Any, what: str) -> Any:
    """The value as a replay would see it (JSON's round trip: tuples become lists, keys
    strings); raises TypeError when it is not JSON."""
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        if not math.isfinite(value):
            raise TypeError(f"{what} is not JSON: {value!r}")
        return value
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what} is not JSON: {e}") from None


def _seconds(d: Duration) -> float:
    if isinstance(d, timedelta):
        return d.total_seconds()
    if isinstance(d, str):
        return parse_duration(d)
    return float(d)


def _error_line(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def error_text(e: BaseException) -> str:
    """A run's error: the message first, then the traceback (at most 64 KiB)."""
    if isinstance(e, NonDeterminismError):
        return str(e)
    text = _error_line(e) + "\n" + "".join(
        traceback.format_exception(type(e), e, e.__traceback__))
    return text[:64_000]


# 409 codes that say the task is no longer this worker's: the execution stops quietly.
_LEASE_REFUSALS = frozenset({"lease_lost", "cancelled", "timed_out", "cancel_requested"})


def _describe(kind: Any, name: Any) -> str:
    return f"{kind} {json.dumps(name, ensure_ascii=False)}"


class _Execution:
    """One execution of a run: the journal, the call counter, what waits to be sent, and the
    calls to docket under the task's lease. Shared by both contexts."""

    def __init__(self, client: Any, workflow: str, run_id: str, lease: str, input: Json,
                 journal: Optional[Dict[int, Dict[str, Any]]] = None,
                 server_now: Optional[datetime] = None,
                 lease_end: Optional[Callable[[], float]] = None,
                 eager_steps: bool = False, queue: Optional[str] = None) -> None:
        self.client = client
        self.queue = queue  # the run's queue (its children's unless they name one)
        # Record each step before ctx.step returns (else with the next call to docket: before
        # the next step runs, or with a wait, a child's start, the end).
        self.eager_steps = eager_steps
        self.workflow = workflow
        self.run_id = run_id
        self.lease = lease
        self.input = input
        self.journal: Dict[int, Dict[str, Any]] = journal or {}
        self.journal_len = (max(self.journal) + 1) if self.journal else 0
        self.server_now = server_now
        self.seq = 0
        self.pending: List[Dict[str, Any]] = []
        self.step_pending = False  # a step's outcome is in `pending`
        self.stopped = False
        # A non-determinism error met (the run ends with it, even when the function caught it).
        self.poison: Optional[str] = None
        self._lease_end = lease_end or (lambda: time.monotonic() + 60.0)

    # --- the journal ------------------------------------------------------------------
    def next(self, kind: str, name: str) -> Tuple[int, Optional[Dict[str, Any]]]:
        """Takes the next seq for a call of ``kind``/``name``: its journal entry (replay) or
        None (a call to make). Raises NonDeterminismError when the journal holds another
        call there."""
        if self.stopped:
            raise _Stopped()
        if self.poison is not None:
            raise NonDeterminismError(self.poison)
        seq = self.seq
        entry = self.journal.get(seq) if seq < self.journal_len else None
        if entry is not None and (entry.get("kind") != kind or entry.get("name") != name):
            self.poison = (
                f"non-determinism: workflow {self.workflow} run {self.run_id}: journal entry "
                f"{seq} is {_describe(entry.get('kind'), entry.get('name'))} but the code "
                f"asked for {_describe(kind, name)}")
            raise NonDeterminismError(self.poison)
        self.seq = seq + 1
        return seq, entry

    @property
    def replaying(self) -> bool:
        return self.seq < self.journal_len

    def leftover(self) -> Optional[str]:
        """At the function's return: the journal's entries it did not ask for (the code
        changed), as a non-determinism error."""
        if self.seq >= self.journal_len:
            return None
        entry = self.journal.get(self.seq) or {}
        return (f"non-determinism: workflow {self.workflow} run {self.run_id}: the code returned "
                f"after {self.seq} call(s) but the journal has {self.journal_len}; entry "
                f"{self.seq} is {_describe(entry.get('kind'), entry.get('name'))}")

    def record_value(self, kind: str, name: str, make: Callable[[], Any]) -> Any:
        """now/random/uuid: the recorded value, or a new one kept to be sent with the next
        call."""
        seq, entry = self.next(kind, name)
        if entry is not None:
            return entry.get("output")
        value = make()
        self.pending.append({"seq": seq, "kind": kind, "name": name, "output": value})
        return value

    def patched(self, patch_id: str) -> bool:
        if self.stopped:
            raise _Stopped()
        if self.poison is not None:
            raise NonDeterminismError(self.poison)
        seq = self.seq
        if seq < self.journal_len:
            entry = self.journal.get(seq) or {}
            if entry.get("kind") == "patch" and entry.get("name") == patch_id:
                self.seq += 1
                return True
            return False  # a run made before the patch: the old path, the seq not taken
        self.seq += 1
        self.pending.append({"seq": seq, "kind": "patch", "name": patch_id})
        return True

    def step_done(self, seq: int, name: str, started_at: str, attempts: int, output: Any = None,
                  error: Optional[str] = None) -> None:
        entry: Dict[str, Any] = {"seq": seq, "kind": "step", "name": name, "attempts": attempts,
                                 "started_at": started_at}
        if error is not None:
            entry["error"] = error
        else:
            entry["output"] = output
        self.pending.append(entry)
        self.step_pending = True

    @staticmethod
    def replayed_step(name: str, entry: Dict[str, Any]) -> Any:
        if entry.get("state") == "failed" or entry.get("error") is not None:
            raise StepFailed(name, entry.get("error") or "", entry.get("attempts") or 0)
        return entry.get("output")

    # --- calls to docket ----------------------------------------------------------------
    def _take(self) -> List[Dict[str, Any]]:
        steps, self.pending, self.step_pending = self.pending, [], False
        return steps

    async def _send(self, call: Callable[..., Awaitable[Any]], *args: Any, **kw: Any) -> Any:
        # Until answered or the lease is over: a 409 (the task is not ours now) stops quietly,
        # `nondeterministic` is the run's error, another 4xx fails the run.
        delay = 0.1
        while True:
            if self.stopped:
                raise _Stopped()
            try:
                return await call(*args, **kw)
            except Conflict as e:
                if e.code == "nondeterministic":
                    self.poison = e.message
                    self.pending, self.step_pending = [], False
                    raise NonDeterminismError(e.message) from None
                if e.code not in _LEASE_REFUSALS:  # a child's id taken, …: the run's error
                    raise WorkflowRefused(f"docket refused the run's record: {e}") from None
                log.debug("run %s: %s, stopping", self.run_id, e.code)
                self.stopped = True
                raise _Stopped() from None
            except NotFound:
                self.stopped = True
                raise _Stopped() from None
            except (DocketError, httpx.TransportError) as e:
                if isinstance(e, DocketError) and e.status < 500 and not isinstance(
                        e, RateLimited):
                    raise WorkflowRefused(f"docket refused the run's record: {e}") from None
                pause = (e.retry_after or delay) if isinstance(e, RateLimited) else delay
                if time.monotonic() + pause > self._lease_end():
                    log.warning("run %s: docket unreachable until the lease ended (%s): "
                                "stopping", self.run_id, e)
                    self.stopped = True
                    raise _Stopped() from None
                log.warning("run %s: call failed, retrying: %s", self.run_id, e)
                await asyncio.sleep(pause)
                delay = min(delay * 2, 2.0)

    async def flush(self) -> None:
        """Sends what waits (before a step runs for real: the last step's outcome is
        recorded before the next one's effects)."""
        steps = self.pending
        if not steps:
            return
        try:
            await self._send(self.client.workflow_record, self.run_id, self.lease, steps)
        except WorkflowRefused:
            self.pending, self.step_pending = [], False
            raise
        self.pending, self.step_pending = [], False

    async def record_now(self, entry: Dict[str, Any]) -> None:
        """Records what waits and ``entry`` at once (a child's start)."""
        steps = self.pending + [entry]
        try:
            await self._send(self.client.workflow_record, self.run_id, self.lease, steps)
        finally:
            self.pending, self.step_pending = [], False

    async def wait(self, kind: str, name: str, extra: Dict[str, Any]) -> Tuple[str, Any]:
        """A sleep, a wait for an event or for a child: (outcome, payload) with outcome
        ``due``, ``event`` or ``timed_out``; raises _Suspended when docket took the task
        back."""
        seq, entry = self.next(kind, name)
        if entry is not None:
            state = entry.get("state")
            if kind == "sleep":
                wake = entry.get("wake_at")
                if state == "completed" or (wake and self.server_now is not None
                                            and _parse_time(wake) <= self.server_now):
                    return "due", None
            elif state == "completed":
                return "event", entry.get("output")
            elif state == "timed_out":
                return "timed_out", None
        wait = {"seq": seq, "kind": kind, "name": name}
        wait.update(extra)
        steps = self.pending
        try:
            answer = await self._send(self.client.workflow_suspend, self.run_id, self.lease,
                                      wait, steps)
        except WorkflowRefused:
            self.pending, self.step_pending = [], False
            raise
        self.pending, self.step_pending = [], False
        outcome = answer.get("outcome")
        if outcome == "suspended":
            self.stopped = True
            raise _Suspended()
        return outcome, answer.get("payload")

    async def finish(self, result: Any = None, error: Optional[str] = None) -> None:
        steps = self.pending
        if error is None:
            try:
                result = _json(result, "the workflow's result")
            except TypeError as e:
                error = f"TypeError: {e}"
        try:
            await self._send(self.client.workflow_finish, self.run_id, self.lease,
                             result=result, error=error, steps=steps)
        except WorkflowRefused as e:
            # What waited (or the result) was refused: the run fails with the refusal.
            self.pending = []
            await self._send(self.client.workflow_finish, self.run_id, self.lease,
                             error=str(e)[:64_000], steps=[])
        self.pending, self.step_pending = [], False
        self.stopped = True


def _is_async(fn: Any) -> bool:
    code = getattr(fn, "__code__", None)  # a plain function or lambda: its flags, at once
    if code is not None and not hasattr(fn, "__wrapped__"):
        return bool(code.co_flags & inspect.CO_COROUTINE)
    return inspect.iscoroutinefunction(fn)


def _random15() -> float:
    # 15 significant digits: a float docket's JSON gives back exactly (it may be a unit in the
    # last place off for 17-digit ones), so the replay sees what the first execution saw.
    v = float(f"{_random.random():.15g}")
    return v if v < 1.0 else 0.999999999999999


def _backoff(attempt: int, initial: float, factor: float, most: float) -> float:
    return min(initial * factor ** (attempt - 1), most)


def _step_error(e: BaseException) -> Tuple[str, bool, Optional[float]]:
    """(text, give up now, delay before the next attempt)."""
    from .worker import Permanent, Retry
    if isinstance(e, Permanent):
        return _error_line(e), True, None
    if isinstance(e, Retry):
        return _error_line(e), False, _seconds(e.delay)
    return _error_line(e), False, None


class _ChildInfo:
    def __init__(self, child_id: str, workflow: str) -> None:
        self.id = child_id
        self.workflow = workflow


def _child_result(child_id: str, payload: Any) -> Any:
    payload = payload or {}
    state = payload.get("state")
    if state == "completed":
        return payload.get("result")
    raise ChildFailed(child_id, state or "failed", payload.get("error"))


class _ContextBase:
    def __init__(self, exe: _Execution, job: Any = None) -> None:
        self._exe = exe
        #: The worker's :class:`~docket_client.worker.Job` for the run's task.
        self.job = job

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self._exe.run_id

    @property
    def workflow(self) -> str:
        """The workflow's name."""
        return self._exe.workflow

    @property
    def input(self) -> Json:
        """What the run was started with."""
        return self._exe.input

    @property
    def is_replaying(self) -> bool:
        """True while the function replays calls the journal holds (for logging: never
        branch on it)."""
        return self._exe.replaying

    def now(self) -> datetime:
        """The time (UTC), recorded: a replay gets the same."""
        return _parse_time(self._exe.record_value(
            "now", "now", lambda: _iso(datetime.now(timezone.utc))))

    def random(self) -> float:
        """A number in [0, 1), recorded."""
        return float(self._exe.record_value("random", "random", _random15))

    def uuid(self) -> str:
        """A random UUID (text), recorded."""
        return str(self._exe.record_value("uuid", "uuid", lambda: str(_uuid.uuid4())))

    def patched(self, patch_id: str) -> bool:
        """True when this run takes the code's new path (runs started after the change, and
        the first execution of any run that gets here now); False for a run that passed
        this point before the change (its journal has another call here). ``if
        ctx.patched("charge-v2"): new() else: old()``."""
        return self._exe.patched(patch_id)

    @staticmethod
    def _until(duration: Duration) -> str:
        return _iso(datetime.now(timezone.utc) + timedelta(seconds=max(0.0, _seconds(duration))))

    @staticmethod
    def _timeout(timeout: Optional[Duration]) -> Dict[str, Any]:
        if timeout is None:
            return {}
        return {"timeout": f"{max(0, round(_seconds(timeout) * 1000))}ms"}

    def _child_entry(self, workflow: str, input: Json, id: Optional[str],  # noqa: A002
                     queue: Optional[str]) -> Tuple[Optional[_ChildInfo], Dict[str, Any]]:
        seq, entry = self._exe.next("child", workflow)
        if entry is not None:
            return _ChildInfo(entry.get("child_id") or f"{self.run_id}:{seq}", workflow), {}
        child: Dict[str, Any] = {"id": id or f"{self.run_id}:{seq}",
                                 "input": _json(input, "a child's input")}
        queue = queue if queue is not None else self._exe.queue
        if queue is not None:
            child["queue"] = queue
        return None, {"seq": seq, "kind": "child", "name": workflow, "child": child}


class ChildHandle:
    """A child run started with ``await ctx.start_child(...)``: ``id``, ``workflow``;
    ``await handle.result()`` waits for its end (its result; raises :class:`ChildFailed`)."""

    def __init__(self, ctx: "WorkflowContext", child_id: str, workflow: str) -> None:
        self._ctx = ctx
        self.id = child_id
        self.workflow = workflow

    async def result(self) -> Any:
        outcome, payload = await self._ctx._exe.wait(
            "child_wait", self.workflow, {"child_id": self.id})
        return _child_result(self.id, payload)


class WorkflowContext(_ContextBase):
    """What an ``async def`` workflow function gets. Durable calls that talk to docket are
    awaited (``step``, ``sleep``, ``wait_for_event``, ``start_child``, ``child``); ``now``,
    ``random``, ``uuid``, ``patched`` are not."""

    async def step(self, name: str, fn: Callable[..., Any], *args: Any,
                   max_attempts: int = STEP_MAX_ATTEMPTS, backoff: Duration = STEP_BACKOFF,
                   max_backoff: Duration = STEP_MAX_BACKOFF, backoff_factor: float = 2.0) -> Any:
        """Runs ``fn(*args)`` once for the run (its result is recorded; a replay returns it):
        ``async def`` functions are awaited, plain ones run in a thread. An exception retries
        it here after ``backoff`` seconds (×``backoff_factor`` each time, at most
        ``max_backoff``; ``Retry(delay)`` sets the next pause, ``Permanent`` stops at once), up
        to ``max_attempts``; then the error is recorded and :class:`StepFailed` raised. The
        result must be JSON (the function gets what JSON gives back: lists for tuples)."""
        exe = self._exe
        seq, entry = exe.next("step", name)
        if entry is not None:
            return exe.replayed_step(name, entry)
        if exe.step_pending:
            await exe.flush()
        started = _iso(datetime.now(timezone.utc))
        initial, most = _seconds(backoff), _seconds(max_backoff)
        is_async = _is_async(fn)
        attempt = 0
        while True:
            attempt += 1
            try:
                out = await fn(*args) if is_async else await asyncio.to_thread(fn, *args)
                if inspect.isawaitable(out):
                    out = await out
                out = _json(out, f"step {name!r}'s result")
            except Exception as e:  # noqa: BLE001 - a step's error is retried, then recorded
                if isinstance(e, TypeError) and str(e).startswith(f"step {name!r}'s result"):
                    raise
                text, give_up, delay = _step_error(e)
                if give_up or attempt >= max_attempts:
                    exe.step_done(seq, name, started, attempt, error=text)
                    if exe.eager_steps:
                        await exe.flush()
                    raise StepFailed(name, text, attempt) from e
                await asyncio.sleep(delay if delay is not None
                                    else _backoff(attempt, initial, backoff_factor, most))
                if exe.stopped:
                    raise _Stopped() from None
                continue
            exe.step_done(seq, name, started, attempt, output=out)
            if exe.eager_steps:
                await exe.flush()
            return out

    async def sleep(self, duration: Duration) -> None:
        """Sleeps ``duration`` (seconds, ``timedelta`` or ``"5m"``) durably: the task goes back
        to docket and the function runs again (replaying) when the time has come."""
        await self._exe.wait("sleep", "sleep", {"until": self._until(duration)})

    async def sleep_until(self, when: datetime) -> None:
        """Sleeps until ``when`` (UTC when naive)."""
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        await self._exe.wait("sleep", "sleep", {"until": _iso(when)})

    async def wait_for_event(self, name: str, timeout: Optional[Duration] = None) -> Any:
        """Waits for an event ``name`` sent to this run (``client.send_event(run_id, name,
        payload)``; events sent before the wait wait in the run's mailbox, oldest first) and
        returns its payload; ``None`` when ``timeout`` passes first (None: wait forever)."""
        outcome, payload = await self._exe.wait("event", name, self._timeout(timeout))
        return payload if outcome == "event" else None

    async def start_child(self, workflow: str, input: Json = None,  # noqa: A002
                          id: Optional[str] = None,  # noqa: A002
                          queue: Optional[str] = None) -> ChildHandle:
        """Starts a run of ``workflow`` as this run's child (id ``"<run id>:<seq>"`` unless
        given; queue: this run's unless given); ``await handle.result()`` waits for it. A
        child not awaited runs on its own (it is cancelled with its parent)."""
        info, entry = self._child_entry(workflow, input, id, queue)
        if info is None:
            await self._exe.record_now(entry)
            info = _ChildInfo(entry["child"]["id"], workflow)
        return ChildHandle(self, info.id, info.workflow)

    async def child(self, workflow: str, input: Json = None,  # noqa: A002
                    id: Optional[str] = None, queue: Optional[str] = None) -> Any:  # noqa: A002
        """Starts a child and waits for its result (:meth:`start_child` then ``result()``)."""
        return await (await self.start_child(workflow, input, id, queue)).result()


class SyncChildHandle:
    """A child run started with ``ctx.start_child(...)`` in a sync workflow; ``result()``
    blocks until its end."""

    def __init__(self, ctx: "SyncWorkflowContext", child_id: str, workflow: str) -> None:
        self._ctx = ctx
        self.id = child_id
        self.workflow = workflow

    def result(self) -> Any:
        outcome, payload = self._ctx._call(self._ctx._exe.wait(
            "child_wait", self.workflow, {"child_id": self.id}))
        return _child_result(self.id, payload)


class SyncWorkflowContext(_ContextBase):
    """What a plain (``def``) workflow function gets: :class:`WorkflowContext`'s methods,
    blocking. The function runs in a thread of the worker's; its calls to docket run on the
    worker's event loop."""

    def __init__(self, exe: _Execution, loop: asyncio.AbstractEventLoop, job: Any = None) -> None:
        super().__init__(exe, job)
        self._loop = loop

    def _call(self, coro: Awaitable[Any]) -> Any:
        if self._exe.stopped:
            coro.close()  # type: ignore[attr-defined]
            raise _Stopped()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()  # type: ignore

    def step(self, name: str, fn: Callable[..., Any], *args: Any,
             max_attempts: int = STEP_MAX_ATTEMPTS, backoff: Duration = STEP_BACKOFF,
             max_backoff: Duration = STEP_MAX_BACKOFF, backoff_factor: float = 2.0) -> Any:
        """As :meth:`WorkflowContext.step`; ``fn`` runs in this thread (an ``async def`` one
        on the worker's event loop)."""
        exe = self._exe
        seq, entry = exe.next("step", name)
        if entry is not None:
            return exe.replayed_step(name, entry)
        if exe.step_pending:
            self._call(exe.flush())
        started = _iso(datetime.now(timezone.utc))
        initial, most = _seconds(backoff), _seconds(max_backoff)
        is_async = _is_async(fn)
        attempt = 0
        while True:
            attempt += 1
            try:
                out = self._call(fn(*args)) if is_async else fn(*args)
                if inspect.isawaitable(out):
                    out = self._call(out)
                out = _json(out, f"step {name!r}'s result")
            except Exception as e:  # noqa: BLE001 - a step's error is retried, then recorded
                if isinstance(e, TypeError) and str(e).startswith(f"step {name!r}'s result"):
                    raise
                text, give_up, delay = _step_error(e)
                if give_up or attempt >= max_attempts:
                    exe.step_done(seq, name, started, attempt, error=text)
                    if exe.eager_steps:
                        self._call(exe.flush())
                    raise StepFailed(name, text, attempt) from e
                time.sleep(delay if delay is not None
                           else _backoff(attempt, initial, backoff_factor, most))
                if exe.stopped:
                    raise _Stopped() from None
                continue
            exe.step_done(seq, name, started, attempt, output=out)
            if exe.eager_steps:
                self._call(exe.flush())
            return out

    def sleep(self, duration: Duration) -> None:
        """As :meth:`WorkflowContext.sleep`."""
        self._call(self._exe.wait("sleep", "sleep", {"until": self._until(duration)}))

    def sleep_until(self, when: datetime) -> None:
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        self._call(self._exe.wait("sleep", "sleep", {"until": _iso(when)}))

    def wait_for_event(self, name: str, timeout: Optional[Duration] = None) -> Any:
        """As :meth:`WorkflowContext.wait_for_event`."""
        outcome, payload = self._call(self._exe.wait("event", name, self._timeout(timeout)))
        return payload if outcome == "event" else None

    def start_child(self, workflow: str, input: Json = None,  # noqa: A002
                    id: Optional[str] = None,  # noqa: A002
                    queue: Optional[str] = None) -> SyncChildHandle:
        """As :meth:`WorkflowContext.start_child`."""
        info, entry = self._child_entry(workflow, input, id, queue)
        if info is None:
            self._call(self._exe.record_now(entry))
            info = _ChildInfo(entry["child"]["id"], workflow)
        return SyncChildHandle(self, info.id, info.workflow)

    def child(self, workflow: str, input: Json = None, id: Optional[str] = None,  # noqa: A002
              queue: Optional[str] = None) -> Any:
        return self.start_child(workflow, input, id, queue).result()


WorkflowFn = Callable[..., Any]


async def run_workflow(client: Any, fn: WorkflowFn, task: Dict[str, Any], *,
                       job: Any = None, lease_end: Optional[Callable[[], float]] = None,
                       executor: Any = None, eager_steps: bool = False,
                       queue: Optional[str] = None) -> str:
    """Runs one claimed task of a workflow: replays or starts the function and ends the
    execution as docket's contract says (finish, suspend, or stop quietly). Returns what
    happened: ``finished``, ``suspended`` or ``stopped``. Never reports the task."""
    payload = task.get("payload") or {}
    run_id = payload["workflow_run"]
    lease = task["lease"]["token"]
    exe = _Execution(client, task["kind"], run_id, lease, payload.get("input"),
                     lease_end=lease_end, eager_steps=eager_steps,
                     queue=queue or task.get("queue"))
    try:
        if task.get("attempt", 1) != 1 or task.get("stage"):
            resumed = await exe._send(client.workflow_resume, run_id, lease)
            run = resumed["run"]
            exe.input = run.get("input")
            exe.journal = {e["seq"]: e for e in resumed.get("steps") or []}
            exe.journal_len = (max(exe.journal) + 1) if exe.journal else 0
            exe.server_now = _parse_time(resumed["now"])
            if run.get("state") in ("completed", "failed", "cancelled"):
                # Ended before (the answer to its finish was lost): end the task the same way.
                if run["state"] == "completed":
                    await exe._send(client.workflow_finish, run_id, lease,
                                    result=run.get("result"))
                else:
                    await exe._send(client.workflow_finish, run_id, lease,
                                    error=run.get("error") or run["state"])
                return "finished"
        if inspect.iscoroutinefunction(fn):
            ctx: Any = WorkflowContext(exe, job)
            result = await fn(ctx, exe.input)
        else:
            loop = asyncio.get_running_loop()
            ctx = SyncWorkflowContext(exe, loop, job)
            result = await loop.run_in_executor(executor, fn, ctx, exe.input)
            if inspect.isawaitable(result):
                result = await result
    except _Suspended:
        return "suspended"
    except _Stopped:
        return "stopped"
    except asyncio.CancelledError:
        exe.stopped = True
        raise
    except Exception as e:  # noqa: BLE001 - the function's error is the run's
        if exe.poison is not None:
            log.error("run %s: %s", run_id, exe.poison)
            return await _end(exe, error=exe.poison)
        return await _end(exe, error=error_text(e))
    if exe.poison is not None:  # the function caught it: the run fails all the same
        log.error("run %s: %s", run_id, exe.poison)
        return await _end(exe, error=exe.poison)
    left = exe.leftover()
    if left is not None:
        log.error("run %s: %s", run_id, left)
        return await _end(exe, error=left)
    return await _end(exe, result=result)


async def _end(exe: _Execution, result: Any = None, error: Optional[str] = None) -> str:
    try:
        await exe.finish(result=result, error=error)
    except _Stopped:
        return "stopped"
    except NonDeterminismError as e:  # docket's check of what waited to be recorded
        exe.pending = []
        try:
            await exe.finish(error=str(e))
        except _Stopped:
            return "stopped"
    return "finished"


__all__ = ["WorkflowContext", "SyncWorkflowContext", "ChildHandle", "SyncChildHandle",
           "StepFailed", "ChildFailed", "NonDeterminismError", "WorkflowRefused",
           "run_workflow", "STEP_MAX_ATTEMPTS", "STEP_BACKOFF", "STEP_MAX_BACKOFF"]
