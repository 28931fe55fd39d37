"""A worker: handlers per kind, claimed in long-polled batches, heartbeats while a handler runs,
completions and failures reported in batches, graceful stop on SIGTERM.

    worker = Worker(queue="emails", concurrency=10)

    @worker.task("send")
    async def send(job: Job):
        ...                       # return the result; raise Retry/Permanent, or any exception
        return {"sent": True}

    worker.run()                  # until SIGTERM/SIGINT: then finishes (or hands back) its tasks

Rules (each after docket's own ``docket worker`` and the HTTP work path, docs/src/api/index.md):
- only the registered kinds (and stages, when a handler names one) are claimed;
- a handler runs at most until the task's ``timeout`` (then it is cancelled and the attempt
  fails with ``timeout``); a heartbeat every third of the lease keeps the lease; a heartbeat
  answered ``cancelled``/``lease_lost``/``timed_out`` cancels the handler and nothing is reported;
- a report that cannot be delivered is retried until the task's lease runs out;
- on stop, no new claims: a claim still waiting is given up and released by its ``claim_id``
  (what it took is available again at once, no attempt counted), held tasks not started are
  released the same way, running ones get ``shutdown_grace`` to finish; then their handlers are
  cancelled and the tasks handed back (failed with ``retry_in: 0``, so they run again at once);
- ``prefetch="auto"`` (the default) holds ahead what the handlers start within
  ``PREFETCH_AUTO_WAIT`` at their recent pace (:func:`auto_prefetch`, the same rule in every
  docket client); several claims (``claims``, 2) are in flight while the queue has work, one
  long poll when it has none.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import logging
import math
import numbers
import os
import signal
import socket
import time
import traceback
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import (Any, Awaitable, Callable, Dict, List, Literal, Optional, Sequence, Tuple,
                    Union)

import httpx

from .client import AsyncClient
from .durable import WorkflowFn, run_workflow
from .durations import Duration, format_duration, parse_duration
from .errors import Conflict, DocketError, NotFound, RateLimited

log = logging.getLogger("docket_client.worker")

#: Heartbeats per lease: one every third of it, never more often than ``MIN_HEARTBEAT_EVERY``
#: seconds. docket's rule (``docket_core::lease::heartbeat_every``; the engine's worker and
#: ``docket worker`` use it): one late or lost heartbeat still leaves a third of the lease.
HEARTBEATS_PER_LEASE = 3
MIN_HEARTBEAT_EVERY = 0.1


def heartbeat_every(lease: float) -> float:
    """Seconds between heartbeats for a lease of ``lease`` seconds (docket's rule)."""
    return max(lease / HEARTBEATS_PER_LEASE, MIN_HEARTBEAT_EVERY)


#: The lease of a claim of workflows' tasks unless the worker's ``lease`` says otherwise.
WORKFLOW_LEASE = "30s"

#: ``prefetch="auto"`` holds ahead what the handlers start within this many seconds at their
#: recent pace.
PREFETCH_AUTO_WAIT = 0.1
#: The most tasks ``prefetch="auto"`` holds ahead.
PREFETCH_AUTO_MAX = 1000


def auto_prefetch(concurrency: int, avg: Optional[float]) -> int:
    """Tasks held ahead under ``prefetch="auto"`` (the same rule in every docket client): as many
    as ``concurrency`` handlers taking ``avg`` seconds each start within
    :data:`PREFETCH_AUTO_WAIT` — ``floor(concurrency × 0.1 / avg)``, at most
    :data:`PREFETCH_AUTO_MAX`; none before a handler has finished (``avg`` is ``None``). A held
    task's lease and timeout run while it waits, so long tasks are never held (handlers of
    ≥ 0.1 s × concurrency hold none) and short ones are fetched in claims of up to a thousand."""
    if avg is None or not math.isfinite(avg):
        return 0
    return min(PREFETCH_AUTO_MAX,
               math.floor(concurrency * PREFETCH_AUTO_WAIT / max(avg, 1e-6)))


class Retry(Exception):
    """Raise from a handler to fail this attempt and retry after ``delay`` (seconds, a
    ``timedelta`` or a humantime string) instead of the task's backoff."""

    def __init__(self, delay: Duration, message: str = "retry requested") -> None:
        super().__init__(message)
        self.delay = delay


class Permanent(Exception):
    """Raise from a handler to fail the task for good (discarded, no more attempts)."""


@dataclass
class NextStage:
    """Return from a handler to hand the task on to ``stage`` (asyncflow's multi-stage tasks):
    same task, new ``payload`` (kept when ``None``), optionally ``priority`` and ``run_in``."""

    stage: str
    payload: Any = None
    priority: Optional[int] = None
    run_in: Optional[Duration] = None
    result: Any = None


@dataclass
class Job:
    """What a handler gets: the claimed ``task`` (the API's ``Task`` dict with its ``lease``)."""

    task: Dict[str, Any]
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    _progress: Any = None
    _progress_set: bool = False
    _worker: Optional["Worker"] = None

    @property
    def id(self) -> int:
        return self.task["id"]

    @property
    def kind(self) -> str:
        return self.task["kind"]

    @property
    def payload(self) -> Any:
        return self.task.get("payload")

    @property
    def attempt(self) -> int:
        return self.task["attempt"]

    @property
    def stage(self) -> Optional[str]:
        return self.task.get("stage")

    @property
    def lease(self) -> str:
        return self.task["lease"]["token"]

    @property
    def trace_id(self) -> Optional[str]:
        return (self.task.get("lease") or {}).get("trace_id") or self.task.get("trace_id")

    def progress(self, value: Any) -> None:
        """Record progress (any JSON): sent with the next heartbeat (``await job.heartbeat()``
        sends it now)."""
        self._progress, self._progress_set = value, True

    async def heartbeat(self) -> None:
        """Send a heartbeat now (with the progress set so far)."""
        if self._worker is not None:
            await self._worker._beat(self)


Handler = Callable[[Job], Union[Any, Awaitable[Any]]]


def _utc(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc).timestamp()


@functools.lru_cache(maxsize=64)
def _task_timeout(text: Optional[str]) -> float:
    """A task's timeout in seconds (60 s when absent or unreadable); the tasks of a queue share
    a few values, so each is parsed once."""
    try:
        return parse_duration(text or "60s")
    except ValueError:
        return 60.0


@functools.lru_cache(maxsize=64)
def _lease_len(expires_at: str, attempted_at: str) -> float:
    """Seconds from a claim to its lease's end: the tasks of one claim share both times."""
    return max(0.1, _utc(expires_at) - _utc(attempted_at))


@dataclass
class _Running:
    job: Job
    handler_task: Optional["asyncio.Task[Any]"]
    deadline: float          # monotonic: the attempt's timeout
    lease_end: float         # monotonic: when the lease runs out unless extended
    lease_len: float         # seconds a heartbeat extends it by
    beat_every: float
    next_beat: float
    done: bool = False
    started: bool = False
    ran_for: Optional[float] = None  # seconds the handler ran (set when it ends)
    workflow: bool = False   # a run's task: docket ends it (finish/suspend), never a report
    source: Optional["_Source"] = None


class _Source:
    """A queue the worker claims (its tasks' queue; its workflows' when that is another), with
    its own room: handlers at once, held tasks, claims in flight."""

    def __init__(self, queue: str, kinds: List[str], stages: Optional[List[str]],
                 concurrency: int, workflows: bool, lease: Optional[str]) -> None:
        self.queue = queue
        self.lease = lease
        self.kinds = kinds
        self.stages = stages
        self.concurrency = concurrency
        self.workflows = workflows  # this source claims the workflows' tasks (maybe tasks too)
        self.busy = False     # the last claim answered found tasks
        self.asked = 0        # tasks asked by the claims in flight
        self.held = 0         # tasks held (running or waiting in `buffer`)
        self.executing = 0    # handlers running
        self.buffer: "collections.deque[_Running]" = collections.deque()
        self.avg_run: Optional[float] = None  # moving average of run time, seconds


class Worker:
    """Runs handlers for one queue, and durable functions (workflows) from theirs.

    ``client``: an :class:`AsyncClient` (default: one from ``$DOCKET_SERVER``/``$DOCKET_TOKEN``).
    ``concurrency``: handlers at once. ``prefetch``: tasks claimed ahead of free handlers and held
    locally (their leases run, heartbeats keep them, the handler's timeout counts from the claim;
    on stop, the ones not started are handed back) ["auto"] — like graphile-worker's local queue:
    fewer, larger claims for short tasks. ``"auto"``: what the handlers start within
    :data:`PREFETCH_AUTO_WAIT` (0.1 s) at their recent pace (:func:`auto_prefetch`: none for long
    tasks, up to 1000 for short ones; :attr:`prefetching` is the current value); a whole number
    ≥ 0: that many (0: none). ``batch``: most tasks per claim [concurrency + prefetch (1000 for
    "auto"), ≤ 1000]. ``claims``: claims in flight at once while the queue has work [2, 1–16]:
    the first claim loop long-polls when the queue is empty, the others claim only while the last
    claim found tasks and never wait, so an idle worker holds one request; each asks for at most
    its share of the free room (``(concurrency + prefetch) / claims``), so together they never
    take more than the worker holds. ``wait``: long-poll per claim [10 s]. ``lease``: lease per
    claim [the task's timeout]. ``labels``: the worker's labels, carried by every claim
    (``{"gpu": "a100", "region": "eu"}``): it takes the tasks whose ``requires`` (and, for a
    while, ``prefer``) they include [none: only tasks that require nothing and prefer nothing,
    or whose preference ran out]; its reports carry them too. ``shutdown_grace``: seconds tasks
    in hand get on stop [30]. ``report_interval``: seconds between reports to ``/v1/workers``
    [10; 0 = none].
    ``workflows``: ``{name: fn}`` durable functions (also ``@worker.workflow(name)``),
    claimed from ``workflow_queue`` ["workflows"] (with claims of their own, the same options,
    ``workflow_concurrency`` [concurrency] executions at once; the same claims as the tasks when
    ``queue`` names the same queue). A worker with only workflows claims only their queue.
    ``eager_steps``: record each step's outcome before ``ctx.step`` returns [False: before the
    next step starts, or with the run's next call to docket — one call fewer per step].
    ``max_report_batch``: items per batched complete/fail sent on their own [500] (a claim
    carries up to ``max(max_report_batch, batch)``). ``full_tasks``: claim tasks with every field
    [False: lean tasks — id, kind, payload, attempt, max_attempts, stage, timeout, attempted_at,
    lease, and trace_id, process, batch_id, deps where present; ``client.get_task(job.id)`` reads
    the rest].

    What finished goes with the next claim (one round trip for both) while the queue has work;
    during a long poll, with every handler busy and at the stop it is sent on its own.
    """

    def __init__(self, client: Optional[AsyncClient] = None, queue: str = "default",
                 concurrency: int = 10, name: Optional[str] = None, batch: Optional[int] = None,
                 prefetch: Union[int, Literal["auto"]] = "auto",
                 wait: Duration = "10s", lease: Optional[Duration] = None,
                 shutdown_grace: float = 30.0, report_interval: float = 10.0,
                 max_report_batch: int = 500, full_tasks: bool = False,
                 claims: int = 2, workflows: Optional[Dict[str, WorkflowFn]] = None,
                 workflow_queue: str = "workflows",
                 workflow_concurrency: Optional[int] = None, eager_steps: bool = False,
                 labels: Optional[Dict[str, str]] = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not (isinstance(prefetch, str) and prefetch == "auto") and not (
                isinstance(prefetch, numbers.Integral) and not isinstance(prefetch, bool)
                and prefetch >= 0):
            raise ValueError(f'prefetch must be "auto" or a whole number ≥ 0, not {prefetch!r}')
        self.client = client
        self.queue = queue
        self.workflow_queue = workflow_queue
        self.concurrency = concurrency
        self.workflow_concurrency = max(1, workflow_concurrency or concurrency)
        self.eager_steps = eager_steps
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        #: ``"auto"`` or the number of tasks held ahead (see :attr:`prefetching`).
        self.prefetch: Union[int, Literal["auto"]] = \
            "auto" if isinstance(prefetch, str) else int(prefetch)
        most = concurrency + (PREFETCH_AUTO_MAX if self.prefetch == "auto" else self.prefetch)
        self.batch = max(1, min(batch or min(most, 1000), 10_000))
        self.claims = max(1, min(int(claims), 16))
        self._sources: List[_Source] = []
        self.wait = format_duration(wait)
        self.lease = None if lease is None else format_duration(lease)
        self.labels: Optional[Dict[str, str]] = dict(labels) if labels else None
        self.shutdown_grace = shutdown_grace
        self.report_interval = report_interval
        self.max_report_batch = max_report_batch
        self.full_tasks = full_tasks
        # Claims in flight that carry reports: they do not wait (the queue had work a moment
        # ago), so what finishes meanwhile goes with the next one. With none (a long poll, no
        # free handler, the stop) the reporter sends them on its own.
        self._carriers = 0
        # Set (and replaced) to wake every claim lane waiting for room or work.
        self._wakeup: Optional[asyncio.Event] = None
        self._sleepers = 0
        self._handlers: Dict[Tuple[str, Optional[str]], Handler] = {}
        self._workflows: Dict[str, WorkflowFn] = {}
        self._async_handlers: Dict[Handler, bool] = {}
        for wf_name, wf_fn in (workflows or {}).items():
            self.handle_workflow(wf_name, wf_fn)
        self._wf_executor: Any = None  # threads for sync workflow functions
        self._running: Dict[int, _Running] = {}
        self._stopping: Optional[asyncio.Event] = None  # made in run_async (needs a loop)
        self._reports: List[Tuple[str, Dict[str, Any], float]] = []
        self._report_ready: Optional[asyncio.Event] = None
        self._drained = False  # the claim loop and the drain are over: the reporter may end
        self._started_at = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
        self.stats = {"completed": 0, "failed": 0, "lost": 0,
                      # workflow executions: ended the run, handed back to wait, stopped (the
                      # task was no longer this worker's: lease lost, run cancelled, stop)
                      "finished": 0, "suspended": 0, "stopped": 0}

    @property
    def prefetching(self) -> int:
        """Tasks held ahead of free handlers now: ``prefetch``, or under ``"auto"``
        :func:`auto_prefetch`'s for the handlers' recent run time (of the task queue's
        handlers; of the workflows for a worker of workflows only)."""
        src = self._sources[0] if self._sources else None
        return self._prefetching(src)

    def _prefetching(self, src: Optional["_Source"]) -> int:
        if self.prefetch == "auto":
            if src is None:
                return 0
            return auto_prefetch(src.concurrency, src.avg_run)
        return self.prefetch  # type: ignore[return-value]

    def _make_sources(self) -> List["_Source"]:
        tasks = sorted({k for k, _ in self._handlers})
        stages = {s for _, s in self._handlers}
        # One handler without a stage takes every stage of its kind.
        task_stages = None if None in stages else sorted(x for x in stages if x is not None)
        wfs = sorted(self._workflows)
        # A run's task has a long timeout (an hour): claimed with a short lease, kept by
        # heartbeats, a dead worker's run is taken over within it.
        wf_lease = self.lease or WORKFLOW_LEASE
        if tasks and wfs and self.queue == self.workflow_queue:
            # One queue: the same claims (a run's task has no stage at first, then "resume").
            return [_Source(self.queue, tasks + wfs, None, self.concurrency, True, wf_lease)]
        out = []
        if tasks:
            out.append(_Source(self.queue, tasks, task_stages, self.concurrency, False,
                               self.lease))
        if wfs:
            out.append(_Source(self.workflow_queue, wfs, None, self.workflow_concurrency, True,
                               wf_lease))
        return out

    # --- registration --------------------------------------------------------------------
    def task(self, kind: str, stage: Optional[str] = None) -> Callable[[Handler], Handler]:
        """Decorator: ``fn`` handles tasks of ``kind`` (at ``stage``, when given)."""
        def register(fn: Handler) -> Handler:
            self.handle(kind, fn, stage)
            return fn
        return register

    def handle(self, kind: str, fn: Handler, stage: Optional[str] = None) -> None:
        """Register ``fn`` for ``kind`` (and ``stage``). Sync functions run in a thread."""
        if kind in self._workflows and self.queue == self.workflow_queue:
            raise ValueError(f"{kind!r} is a workflow of queue {self.queue!r} already")
        self._handlers[(kind, stage)] = fn

    def workflow(self, name: Union[str, WorkflowFn, None] = None
                 ) -> Any:
        """Decorator: the function is the workflow ``name`` (default: the function's name),
        ``def fn(ctx, input)`` or ``async def`` (see :mod:`docket_client.durable`). Its runs'
        tasks (kind = ``name``) are claimed from this worker's queue."""
        if callable(name):
            self.handle_workflow(name.__name__, name)
            return name

        def register(fn: WorkflowFn) -> WorkflowFn:
            self.handle_workflow(name or fn.__name__, fn)  # type: ignore[arg-type]
            return fn
        return register

    def handle_workflow(self, name: str, fn: WorkflowFn) -> None:
        """Register ``fn`` as the workflow ``name``."""
        if self.queue == self.workflow_queue and any(k == name for k, _ in self._handlers):
            raise ValueError(f"{name!r} is a task kind of queue {self.queue!r} already")
        self._workflows[name] = fn

    def _kinds(self) -> List[str]:
        return sorted({k for k, _ in self._handlers} | set(self._workflows))

    def _handler_for(self, task: Dict[str, Any]) -> Optional[Handler]:
        return self._handlers.get((task["kind"], task.get("stage"))) or \
            self._handlers.get((task["kind"], None))

    # --- running -------------------------------------------------------------------------
    def run(self) -> None:
        """Run until SIGTERM or SIGINT, then stop gracefully (blocking)."""
        asyncio.run(self.run_async(install_signals=True))

    def stop(self) -> None:
        """Ask a running worker to stop gracefully (from the worker's event loop)."""
        if self._stopping is not None:
            self._stopping.set()
            self._wake()

    def _wake(self) -> None:
        # Wakes every claim lane waiting (a handler ended, a claim found work, the stop).
        if self._sleepers and self._wakeup is not None:
            self._wakeup.set()
            self._wakeup = asyncio.Event()

    async def run_async(self, install_signals: bool = False) -> None:
        """Run until :meth:`stop` (or a signal, with ``install_signals``)."""
        if not self._handlers and not self._workflows:
            raise ValueError("no handler or workflow registered")
        if any(not inspect.iscoroutinefunction(f) for f in self._workflows.values()) \
                and self._wf_executor is None:
            from concurrent.futures import ThreadPoolExecutor
            self._wf_executor = ThreadPoolExecutor(max_workers=self.concurrency,
                                                   thread_name_prefix="docket-workflow")
        own_client = self.client is None
        if own_client:
            self.client = AsyncClient()
        self._stopping = asyncio.Event()
        self._report_ready = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._sleepers = self._carriers = 0
        self._sources = self._make_sources()
        loop = asyncio.get_running_loop()
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
        self._drained = False
        background = [asyncio.ensure_future(c) for c in
                      (self._reporter(), self._heartbeats(), self._presence())]
        try:
            await self._claim_loop()
            await self._drain()
        finally:
            self._stopping.set()
            self._drained = True
            self._report_ready.set()
            await asyncio.gather(background[0], return_exceptions=True)  # last reports out
            for b in background[1:]:
                b.cancel()
            await asyncio.gather(*background[1:], return_exceptions=True)
            await self._send_presence("stop")
            if install_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
            if self._wf_executor is not None:
                self._wf_executor.shutdown(wait=False)
                self._wf_executor = None
            if own_client:
                await self.client.aclose()

    async def _claim_loop(self) -> None:
        assert self._report_ready is not None
        lanes = [asyncio.ensure_future(self._claim_lane(i == 0, src))
                 for src in self._sources for i in range(self.claims)]
        try:
            await asyncio.gather(*lanes)
        finally:
            # One lane failing (an error other than the server's or the network's) ends them all.
            for lane in lanes:
                lane.cancel()
            await asyncio.gather(*lanes, return_exceptions=True)
            self._report_ready.set()

    async def _claim_lane(self, first: bool, src: "_Source") -> None:
        # One claim loop of a queue. The first long-polls while the queue is empty; the others
        # claim only while it has work and never wait.
        assert self._stopping is not None and self._report_ready is not None
        assert self._wakeup is not None
        kinds, stages = src.kinds, src.stages
        while not self._stopping.is_set():
            room = src.concurrency + self._prefetching(src)
            share = max(1, -(-room // self.claims))
            free = room - src.held - src.asked
            # The first lane alone asks for all the room when the queue was idle; with the
            # queue busy every lane asks for its share, so a claim is answered while the
            # others' tasks run.
            limit = min(free, self.batch, room if first else share)
            # The others wait until half a share is free: claims of a task or two cost a round
            # trip each.
            least = 1 if first else -(-min(share, self.batch) // 2)
            if limit < least or (not first and not src.busy):
                if self._carriers == 0:
                    self._report_ready.set()
                wakeup = self._wakeup
                self._sleepers += 1
                try:
                    await wakeup.wait()
                finally:
                    self._sleepers -= 1
                continue
            # One round trip reports what finished and asks for more. Such a claim does not
            # wait and is not given up at a stop, so its reports are never in doubt.
            carried = self._reports[:max(self.max_report_batch, self.batch)]
            del self._reports[:len(carried)]
            waits = first and not src.busy and not carried
            if waits:
                self._report_ready.set()
            else:
                self._carriers += 1
            src.asked += limit
            claim_id = str(uuid.uuid4())
            given_up = False
            try:
                claim = asyncio.ensure_future(self.client.claim_with(
                    src.queue, self.name, limit=limit, lease=src.lease,
                    wait=self.wait if waits else "0s", kinds=kinds, stages=stages,
                    labels=self.labels, claim_id=claim_id, lean=not self.full_tasks,
                    complete=[i for w, i, _ in carried if w == "complete"],
                    fail=[i for w, i, _ in carried if w == "fail"]))
                if waits:
                    stop = asyncio.ensure_future(self._stopping.wait())
                    done, _ = await asyncio.wait({claim, stop},
                                                 return_when=asyncio.FIRST_COMPLETED)
                    stop.cancel()
                    if claim not in done:
                        claim.cancel()
                        await asyncio.gather(claim, return_exceptions=True)
                        given_up = True
                else:
                    await asyncio.wait({claim})
            finally:
                src.asked -= limit
                if not waits:
                    self._carriers -= 1
                if self._carriers == 0:
                    self._report_ready.set()
                # The lanes waiting look again once this one yields: at the tasks it found
                # (they may claim now) or at the room it asked for, free again (else, with room
                # for one task, the first could wait on a claim that found nothing).
                self._wake()
            error: Optional[BaseException] = None
            answer: Any = None
            if not given_up:
                try:
                    answer = claim.result()
                except (DocketError, httpx.TransportError) as e:
                    error = e
            if given_up or error is not None:
                src.busy = False
                if carried:
                    self._reports[:0] = carried
                    self._report_ready.set()
                if self._stopping.is_set():
                    # Stopping mid-poll: the server may have claimed tasks for an answer that
                    # will not be read. Released by the claim's id, they are available again
                    # at once (docket finds them even if the release overtakes the claim).
                    await self._release_claim(src.queue, claim_id)
                    break
                if isinstance(error, RateLimited):
                    await self._pause(error.retry_after or 1.0)
                else:
                    log.warning("claim failed: %s", error)
                    await self._pause(1.0)
                continue
            for what in ("complete", "fail"):
                outcomes = answer.get("completed" if what == "complete" else "failed")
                if outcomes:
                    self._settle(what, outcomes)
            tasks = answer.get("lean") if answer.get("lean") is not None \
                else answer.get("tasks", [])
            src.busy = bool(tasks)
            for task in tasks:
                self._start(task, src)

    @staticmethod
    def _ran(src: "_Source", seconds: float) -> None:
        # Folds a handler's run time into the moving average prefetch="auto" follows.
        src.avg_run = seconds if src.avg_run is None else \
            src.avg_run + (seconds - src.avg_run) * 0.1

    def _settle(self, what: str, outcomes: List[Dict[str, Any]]) -> None:
        # Counts reports answered (one outcome per item) and warns of those not ok.
        for outcome in outcomes:
            if outcome["outcome"] != "ok":
                self.stats["lost"] += 1
                log.warning("task %s: report answered %s", outcome["id"], outcome["outcome"])
        self.stats["completed" if what == "complete" else "failed"] += len(outcomes)

    async def _wait_either(self, aw: Awaitable[Any]) -> None:
        assert self._stopping is not None
        a, b = asyncio.ensure_future(aw), asyncio.ensure_future(self._stopping.wait())
        _, pending = await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)
        for p in pending:
            p.cancel()

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._wait_either(asyncio.sleep(seconds)), seconds + 1)
        except asyncio.TimeoutError:
            pass

    def _start(self, task: Dict[str, Any], src: "_Source") -> None:
        now = time.monotonic()
        t = task.get("timeout")
        timeout = _task_timeout(t if isinstance(t, str) else None)
        lease = task["lease"]
        try:
            lease_len = _lease_len(lease["expires_at"], task["attempted_at"])
        except (KeyError, TypeError, ValueError):
            lease_len = timeout
        job = Job(task=task, _worker=self)
        run = _Running(job, None, deadline=now + timeout,  # type: ignore[arg-type]
                       lease_end=now + lease_len, lease_len=lease_len,
                       beat_every=heartbeat_every(lease_len),
                       next_beat=now + heartbeat_every(lease_len))
        run.source = src
        self._running[job.id] = run
        src.held += 1
        src.buffer.append(run)
        self._pump(src)

    def _pump(self, src: "_Source") -> None:
        # Starts held tasks while handlers are free.
        while src.executing < src.concurrency and src.buffer:
            run = src.buffer.popleft()
            if run.done:
                continue
            if run.job.cancelled.is_set():  # docket took it back while it waited here
                self._forget(run)
                self._wake()
                continue
            run.started = True
            src.executing += 1
            timeout = max(0.0, run.deadline - time.monotonic())
            wf = self._workflows.get(run.job.kind) if src.workflows else None
            if wf is not None:
                run.workflow = True
                run.handler_task = asyncio.ensure_future(self._run_workflow(run, wf, timeout))
            else:
                handler = self._handler_for(run.job.task)
                run.handler_task = asyncio.ensure_future(
                    self._run_handler(run, handler, timeout))
            run.handler_task.add_done_callback(lambda t, run=run: self._finished(run, t))

    async def _run_handler(self, run: _Running, handler: Optional[Handler], timeout: float
                           ) -> Tuple[str, Dict[str, Any]]:
        began = time.perf_counter()
        try:
            return await self._call_handler(run.job, handler, timeout)
        finally:
            run.ran_for = time.perf_counter() - began

    async def _run_workflow(self, run: _Running, fn: WorkflowFn, timeout: float
                            ) -> Tuple[str, Dict[str, Any]]:
        # docket ends a run's task itself (finish, suspend): nothing is reported, but a
        # timeout hands it back (the next attempt replays).
        began = time.perf_counter()
        # The task's timeout cancels the execution (a timer, not wait_for: no task more per run).
        me = asyncio.current_task()
        expired = []

        def expire() -> None:
            expired.append(True)
            if me is not None:
                me.cancel()
        timer = asyncio.get_running_loop().call_later(timeout, expire)
        try:
            what = await run_workflow(
                self.client, fn, run.job.task, job=run.job, lease_end=lambda: run.lease_end,
                executor=self._wf_executor, eager_steps=self.eager_steps,
                queue=run.source.queue if run.source else None)
        except asyncio.CancelledError:
            if not expired:
                raise
            return "fail", {"error": f"timeout: the workflow ran past the task's timeout "
                                     f"({run.job.task.get('timeout')})"}
        finally:
            timer.cancel()
            run.ran_for = time.perf_counter() - began
        self.stats[what] += 1
        return "", {}

    def _is_async(self, handler: Handler) -> bool:
        # inspect's answer for each handler, once: it costs more than a no-op handler.
        try:
            known = self._async_handlers.get(handler)
            if known is None:
                known = self._async_handlers[handler] = inspect.iscoroutinefunction(handler)
            return known
        except TypeError:  # an unhashable callable
            return inspect.iscoroutinefunction(handler)

    async def _call_handler(self, job: Job, handler: Optional[Handler], timeout: float
                            ) -> Tuple[str, Dict[str, Any]]:
        if handler is None:
            return "fail", {"error": f"no handler for kind {job.kind!r} stage {job.stage!r}"}
        # The task's timeout cancels this attempt's task: a timer, not wait_for, which wraps
        # the handler in a task more per attempt (a fifth of the worker's CPU on short tasks).
        me = asyncio.current_task()
        expired: List[bool] = []

        def expire() -> None:
            expired.append(True)
            if me is not None:
                me.cancel()
        timer = asyncio.get_running_loop().call_later(timeout, expire)
        try:
            if self._is_async(handler):
                result = await handler(job)  # type: ignore[misc]
            else:
                result = await asyncio.to_thread(handler, job)
                if inspect.isawaitable(result):
                    result = await result
        except asyncio.CancelledError:
            if not expired:
                raise
            return "fail", {"error": f"timeout: the handler ran past the task's timeout "
                                     f"({job.task.get('timeout')})"}
        except Retry as e:
            return "fail", {"error": str(e), "retry_in": format_duration(e.delay)}
        except Permanent as e:
            return "fail", {"error": _error_text(e), "permanent": True}
        except Exception as e:  # noqa: BLE001 - any handler error fails the attempt
            return "fail", {"error": _error_text(e)}
        finally:
            timer.cancel()
        if isinstance(result, NextStage):
            item: Dict[str, Any] = {"next_stage": result.stage, "result": result.result}
            if result.payload is not None:
                item["payload"] = result.payload
            if result.priority is not None:
                item["priority"] = result.priority
            if result.run_in is not None:
                item["run_in"] = format_duration(result.run_in)
            return "complete", item
        return "complete", {"result": result}

    def _forget(self, run: _Running) -> None:
        # The task is no longer held (ended, handed back, taken back).
        if not run.done:
            run.done = True
            if run.source is not None:
                run.source.held -= 1
        self._running.pop(run.job.id, None)

    def _finished(self, run: _Running, t: "asyncio.Task[Any]") -> None:
        self._forget(run)
        src = run.source
        assert src is not None
        src.executing -= 1
        self._pump(src)
        self._wake()
        assert self._report_ready is not None
        if t.cancelled():
            if run.workflow:
                self.stats["stopped"] += 1
            return  # cancelled by docket (heartbeat answer) or handed back on stop
        if run.ran_for is not None:  # every outcome but a cancellation: timeouts, failures too
            self._ran(src, run.ran_for)
        exc = t.exception()
        if exc is not None:
            if run.workflow:
                log.error("task %s: the workflow's execution failed: %s", run.job.id,
                          _error_text(exc))
            what, item = "fail", {"error": _error_text(exc)}
        else:
            what, item = t.result()
            if not what:
                return  # a workflow execution: docket ended the task (or took it back)
        item["id"], item["lease"] = run.job.id, run.job.lease
        if what == "fail":
            item["worker"] = self.name
        self._reports.append((what, item, run.lease_end))
        self._report_ready.set()

    async def _reporter(self) -> None:
        assert self._report_ready is not None and self._stopping is not None
        while True:
            # The state is read before waiting, never after a wake-up alone: two wake-ups that
            # came together are one, and a stop that came while a batch was out used to leave
            # this waiting for a third that never came (the stop did not end).
            if self._reports and not (self._carriers > 0 and not self._drained):
                batch, self._reports = self._reports[:self.max_report_batch], \
                    self._reports[self.max_report_batch:]
                await self._deliver(batch)
                continue
            # Not at the stop itself: a claim answered as the stop came still starts its
            # tasks, and their reports must go out too.
            if self._drained and not self._running and not self._reports:
                return
            self._report_ready.clear()
            await self._report_ready.wait()

    async def _deliver(self, batch: List[Tuple[str, Dict[str, Any], float]]) -> None:
        # Until delivered or the lease is over (then the rescuer owns the task anyway). What
        # went through is done; only a part that met an outage (5xx, 429, no answer) is sent
        # again, and a part refused for what it is (4xx) is dropped.
        delay = 0.1
        while batch:
            parts = [(what, [i for w, i, _ in batch if w == what],
                      self.client.complete_many if what == "complete" else self.client.fail_many)
                     for what in ("complete", "fail")]
            parts = [p for p in parts if p[1]]
            answers = await asyncio.gather(*(send(items) for _, items, send in parts),
                                           return_exceptions=True)
            again = set()
            for (what, items, _), answer in zip(parts, answers):
                if isinstance(answer, BaseException):
                    if not isinstance(answer, (DocketError, httpx.TransportError)):
                        raise answer
                    if isinstance(answer, DocketError) and answer.status < 500 \
                            and answer.status != 429:
                        log.error("report refused, dropped: %s", answer)
                    else:
                        log.warning("report failed, retrying: %s", answer)
                        again.add(what)
                    continue
                self._settle(what, answer)
            if not again:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            now = time.monotonic()
            batch = [b for b in batch if b[0] in again and b[2] > now]

    async def _beat(self, run_or_job: Union[_Running, Job]) -> None:
        run = run_or_job if isinstance(run_or_job, _Running) else self._running.get(run_or_job.id)
        if run is None or run.done:
            return
        job = run.job
        try:
            lease = await self.client.heartbeat(
                job.id, job.lease, progress=job._progress if job._progress_set else None)
            run.lease_end = time.monotonic() + run.lease_len
            del lease
        except (Conflict, NotFound) as e:  # cancelled, lease_lost, timed_out: not ours now
            log.info("task %s: %s; stopping its handler", job.id, e.code)
            job.cancelled.set()
            if run.handler_task is not None:
                run.handler_task.cancel()
        except (DocketError, httpx.TransportError) as e:
            log.warning("task %s: heartbeat failed: %s", job.id, e)

    async def _heartbeats(self) -> None:
        while True:
            now = time.monotonic()
            due = [r for r in list(self._running.values()) if r.next_beat <= now and not r.done]
            for r in due:
                r.next_beat = now + r.beat_every
            if due:
                await asyncio.gather(*(self._beat(r) for r in due), return_exceptions=True)
            soonest = min((r.next_beat for r in self._running.values()), default=now + 1.0)
            await asyncio.sleep(min(1.0, max(0.05, soonest - time.monotonic())))

    async def _release_claim(self, queue: str, claim_id: str) -> None:
        # Within the grace (at most 10 s): a server away that long gets the leases back when
        # they end instead.
        end = time.monotonic() + min(self.shutdown_grace, 10.0)
        delay = 0.1
        while True:
            try:
                released = await self.client.release_claim(queue, claim_id)
                if released:
                    log.info("stopped mid-claim: handed back %d task(s)", len(released))
                return
            except (DocketError, httpx.TransportError) as e:
                if isinstance(e, DocketError) and e.status < 500 and e.status != 429 \
                        or time.monotonic() + delay > end:
                    log.warning("could not hand back the claim (its leases will end): %s", e)
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def _release_held(self, runs: List[_Running]) -> None:
        # Held, never started: available again at once, the attempt not counted. A server
        # without the release route (before 0.1 + issue 37) gets them failed with retry_in 0.
        items = [{"id": r.job.id, "lease": r.job.lease} for r in runs]
        try:
            for i in range(0, len(items), self.max_report_batch):
                await self.client.release_many(items[i:i + self.max_report_batch])
        except (DocketError, httpx.TransportError) as e:
            log.warning("releasing held tasks failed (%s): handing them back as failures", e)
            for run in runs:
                self._hand_back(run)

    async def _drain(self) -> None:
        # Held tasks not started go back at once; the running ones get the grace period.
        held = []
        for src in self._sources:
            while src.buffer:
                run = src.buffer.popleft()
                if run.done:
                    continue
                self._forget(run)
                held.append(run)
        if held:
            await self._release_held(held)
        if not self._running:
            assert self._report_ready is not None
            self._report_ready.set()
            return
        log.info("stopping: %d task(s) in hand, %.0f s to finish", len(self._running),
                 self.shutdown_grace)
        end = time.monotonic() + self.shutdown_grace
        while self._running and time.monotonic() < end:
            await asyncio.sleep(0.05)
        left = list(self._running.values())
        for run in left:
            if run.handler_task is not None and run.handler_task.done():
                continue  # it ended: its done callback reports it
            if run.handler_task is not None:
                run.handler_task.cancel()
            self._hand_back(run)
        await asyncio.sleep(0)
        assert self._report_ready is not None
        self._report_ready.set()

    def _hand_back(self, run: _Running) -> None:
        # Failed with retry_in 0: it runs again at once.
        self._reports.append(("fail", {"id": run.job.id, "lease": run.job.lease,
                                       "error": "worker stopped: handed back",
                                       "retry_in": "0ms", "worker": self.name}, run.lease_end))

    async def _presence(self) -> None:
        if self.report_interval <= 0:
            return
        while True:
            await self._send_presence("work" if self._running else "idle")
            await asyncio.sleep(self.report_interval)

    async def _send_presence(self, state: str) -> None:
        if self.report_interval <= 0 or self.client is None:
            return
        src = self._sources[0] if self._sources else None
        report = {"state": state, "tasks": sorted(self._running)[:10_000],
                  "queue": src.queue if src else self.queue,
                  "kinds": self._kinds(), "concurrency": src.concurrency if src else
                  self.concurrency,
                  "host": socket.gethostname(), "pid": os.getpid(),
                  "started_at": self._started_at,
                  "interval": format_duration(self.report_interval)}
        if self.labels:
            report["labels"] = self.labels
        try:
            await self.client.report_worker(self.name, report)
        except (DocketError, httpx.TransportError) as e:
            log.debug("worker report failed: %s", e)


def _error_text(e: BaseException) -> str:
    # The message first (docket's `errors` list shows it), then the traceback.
    text = f"{type(e).__name__}: {e}\n" + "".join(
        traceback.format_exception(type(e), e, e.__traceback__))
    return text[:64_000]


__all__ = ["Worker", "Job", "Retry", "Permanent", "NextStage", "auto_prefetch",
           "PREFETCH_AUTO_WAIT", "PREFETCH_AUTO_MAX"]
