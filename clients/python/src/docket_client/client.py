"""HTTP clients for docket's API (``/v1``): :class:`Client` (blocking) and :class:`AsyncClient`
(asyncio). Both have the same methods — each is written once in :class:`_Api` and returns what
``_call`` returns: a value for ``Client``, an awaitable for ``AsyncClient``.

Shapes are the OpenAPI document's (``crates/docket-server/openapi.json``); the TypedDicts in
:mod:`docket_client.models` are generated from it. Durations are humantime strings or seconds.
"""
from __future__ import annotations

import json
import os
import ssl
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Optional, Sequence, Union
from urllib.parse import quote

import httpx

from .durations import Duration, format_duration
from .errors import DocketError, error_for

DEFAULT_SERVER = "http://127.0.0.1:7070"

Json = Any
Time = Union[str, datetime]

# NewTask's fields (models.NewTask); `enqueue` takes each as a keyword.
TASK_OPTIONS = (
    "queue", "priority", "run_at", "run_in", "unique_key", "concurrency_key", "concurrency_limit",
    "rate_limit", "partition_key",
    "timeout", "backoff", "stage", "user_id", "trace_id", "max_attempts", "expires_at",
    "expires_in", "node", "progress", "debounce", "tags", "requires", "prefer",
)


_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


def _seg(name: Union[str, int]) -> str:
    # Names may hold '/', '?', '#', spaces: one path segment each.
    text = str(name)
    if _SAFE.issuperset(text):  # ids and names as most are: nothing to quote
        return text
    return quote(text, safe="")


def _time(value: Time) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    return value


def task_spec(kind: str, payload: Json = None, **options: Any) -> Dict[str, Any]:
    """A ``NewTask`` body: ``kind``, ``payload`` and the options in :data:`TASK_OPTIONS`
    (``None`` ones left out; durations may be seconds or ``timedelta``; times ``datetime``)."""
    unknown = set(options) - set(TASK_OPTIONS)
    if unknown:
        raise TypeError(f"unknown task option(s): {', '.join(sorted(unknown))}")
    spec: Dict[str, Any] = {"kind": kind, "payload": payload}
    for key, value in options.items():
        if value is None:
            continue
        if key in ("run_in", "timeout", "expires_in"):
            value = format_duration(value)
        elif key == "debounce":  # {"key", "period", "max_wait"?}: its durations as the others
            value = _drop_none(dict(value, period=_dur(value.get("period")),
                                    max_wait=_dur(value.get("max_wait"))))
        elif key in ("run_at", "expires_at"):
            value = _time(value)
        elif key == "tags" and not isinstance(value, str):  # any sequence of strings: a list
            value = list(value)
        elif key == "requires":  # labels: any mapping of strings to strings
            value = dict(value)
        elif key == "prefer":  # {"labels", "for"}: "for" a duration as the others
            value = dict(value)
            if "labels" in value:
                value["labels"] = dict(value["labels"])
            if value.get("for") is not None:
                value["for"] = format_duration(value["for"])
        spec[key] = value
    return spec


def _drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _dur(value: Optional[Duration]) -> Optional[str]:
    return None if value is None else format_duration(value)


class _Config:
    def __init__(self, server: Optional[str], token: Optional[str], ca_file: Optional[str],
                 timeout: float) -> None:
        self.server = (server or os.environ.get("DOCKET_SERVER") or DEFAULT_SERVER).rstrip("/")
        self.token = token if token is not None else os.environ.get("DOCKET_TOKEN")
        self.headers = {"user-agent": "docket-client-python/0.1"}
        if self.token:
            self.headers["authorization"] = f"Bearer {self.token}"
        self.verify: Union[bool, ssl.SSLContext] = True
        if ca_file:
            self.verify = ssl.create_default_context(cafile=ca_file)
        # Long polls wait up to 60 s on the server: the read timeout must outlast them.
        self.timeout = httpx.Timeout(timeout, read=max(timeout, 75.0))




def _parse(resp: httpx.Response) -> Json:
    if resp.status_code >= 400:
        try:
            body = resp.json()
        except ValueError:
            body = resp.text
        ra = resp.headers.get("retry-after")
        raise error_for(resp.status_code, body, float(ra) if ra and ra.isdigit() else None)
    if resp.status_code == 204 or not resp.content:
        return None
    return resp.json()


class _Api:
    """Every operation, written once (see the module docstring)."""

    def _call(self, method: str, path: str, body: Any = None, params: Optional[dict] = None,
              headers: Optional[dict] = None, then: Optional[Callable[[Any], Any]] = None,
              raw: bool = False) -> Any:
        raise NotImplementedError

    # --- tasks -------------------------------------------------------------------------
    def enqueue(self, kind: str, payload: Json = None, **options: Any) -> Any:
        """``POST /v1/tasks``: one task → the stored ``Task`` (``inserted`` false when a unique
        key returned an existing one; ``replaced`` true when ``debounce={"key", "period",
        "max_wait"}`` replaced the waiting task with that key). Options: :data:`TASK_OPTIONS`."""
        return self._call("POST", "/v1/tasks", task_spec(kind, payload, **options))

    def enqueue_many(self, specs: Sequence[Dict[str, Any]]) -> Any:
        """``POST /v1/tasks`` with ``{"tasks": [...]}`` (≤ 10,000, one transaction) → the tasks.
        Each spec is a ``NewTask`` dict (see :func:`task_spec`)."""
        return self._call("POST", "/v1/tasks", {"tasks": list(specs)}, then=lambda r: r["tasks"])

    def get_task(self, task_id: int) -> Any:
        """``GET /v1/tasks/{id}`` → ``Task`` (its ``version`` is the ``ETag``)."""
        return self._call("GET", f"/v1/tasks/{int(task_id)}", raw=True,
                          then=lambda r: dict(_parse(r), version=r.headers.get("etag")))

    def list_tasks(self, queue: Optional[str] = None, state: Union[str, Sequence[str], None] = None,
                   kind: Optional[str] = None, limit: Optional[int] = None,
                   after: Optional[int] = None, *, trace_id: Optional[str] = None,
                   unique_key: Optional[str] = None, worker: Optional[str] = None,
                   tag: Optional[str] = None, **filters: Any) -> Any:
        """``GET /v1/tasks`` → ``TaskPage`` ``{"tasks", "next_after"}`` (keyset paging: pass
        ``after=page["next_after"]``). ``state`` takes one state or several. ``trace_id`` (any
        case), ``unique_key`` and ``worker`` (the worker of a task's last attempt) find tasks by
        those fields, ``tag`` by one of their tags; ``trace_id``, ``worker`` and ``text`` read
        at most 100,000 ids per page (``next_after`` goes on past them). Other filters
        (``text``, ``user_id``, ``concurrency_key``, ``order``) are passed as they are."""
        if state is not None and not isinstance(state, str):
            state = ",".join(state)
        params = _drop_none(dict(queue=queue, state=state, kind=kind, limit=limit, after=after,
                                 trace_id=trace_id, unique_key=unique_key, worker=worker,
                                 tag=tag, **filters))
        return self._call("GET", "/v1/tasks", params=params)

    def update_task(self, task_id: int, version: Optional[str] = None, **patch: Any) -> Any:
        """``PATCH /v1/tasks/{id}``; with ``version`` (an ``ETag``) it applies only at that
        version, else :class:`~docket_client.errors.InvalidRequest` ``version_mismatch`` (412)."""
        for key in ("run_in",):
            if key in patch and patch[key] is not None:
                patch[key] = format_duration(patch[key])
        if "run_at" in patch and patch["run_at"] is not None:
            patch["run_at"] = _time(patch["run_at"])
        headers = {"if-match": version} if version else None
        return self._call("PATCH", f"/v1/tasks/{int(task_id)}", patch, headers=headers, raw=True,
                          then=lambda r: dict(_parse(r), version=r.headers.get("etag")))

    def cancel_task(self, task_id: int) -> Any:
        """``POST /v1/tasks/{id}/cancel``: a waiting task is cancelled; a running one at its
        next heartbeat or report."""
        return self._call("POST", f"/v1/tasks/{int(task_id)}/cancel")

    def retry_task(self, task_id: int) -> Any:
        """``POST /v1/tasks/{id}/retry``: a finished task runs again."""
        return self._call("POST", f"/v1/tasks/{int(task_id)}/retry")

    def run_now(self, task_id: int) -> Any:
        """``POST /v1/tasks/{id}/run-now``: a scheduled or retryable task becomes available."""
        return self._call("POST", f"/v1/tasks/{int(task_id)}/run-now")

    def bulk(self, action: str, filter: Optional[dict] = None, dry_run: bool = False) -> Any:
        """``POST /v1/tasks/bulk`` (admin): ``action`` (cancel, retry, run-now, delete) over
        every task ``filter`` matches now (queue, states, kind, user_id, unique_key,
        concurrency_key, tag), in the background; the bulk action to poll with :meth:`get_bulk`.
        ``dry_run``: only ``{action, total, more}``."""
        return self._call("POST", "/v1/tasks/bulk",
                          {"action": action, "filter": filter or {}, "dry_run": dry_run})

    def get_bulk(self, bulk_id: int) -> Any:
        """``GET /v1/tasks/bulk/{id}``: state, total, done, skipped."""
        return self._call("GET", f"/v1/tasks/bulk/{int(bulk_id)}")

    # --- the work path -----------------------------------------------------------------
    def claim(self, queue: str, worker: str, limit: int = 1, lease: Optional[Duration] = None,
              wait: Optional[Duration] = None, kinds: Optional[Sequence[str]] = None,
              stages: Optional[Sequence[str]] = None, claim_id: Optional[str] = None,
              labels: Optional[Dict[str, str]] = None) -> Any:
        """``POST /v1/queues/{queue}/claim`` → a list of ``Task`` with ``lease``
        ``{"token", "expires_at", "trace_id"}``; ``wait`` long-polls (≤ 60 s). ``claim_id`` (a
        random UUID) lets :meth:`release_claim` hand back what the claim took should its answer
        never arrive. ``labels`` (``{"gpu": "a100", "region": "eu"}``) are the claim's: it takes
        the tasks whose ``requires`` (and, for a while, ``prefer``) they include; without labels
        only tasks that require nothing and prefer nothing (or whose preference ran out)."""
        body = _drop_none(dict(worker=worker, limit=limit, lease=_dur(lease), wait=_dur(wait),
                               kinds=list(kinds) if kinds else None,
                               stages=list(stages) if stages else None, claim_id=claim_id,
                               labels=dict(labels) if labels else None))
        return self._call("POST", f"/v1/queues/{_seg(queue)}/claim", body,
                          then=lambda r: r["tasks"])

    def claim_with(self, queue: str, worker: str, limit: int = 1,
                   lease: Optional[Duration] = None, wait: Optional[Duration] = None,
                   kinds: Optional[Sequence[str]] = None, stages: Optional[Sequence[str]] = None,
                   claim_id: Optional[str] = None, lean: bool = False,
                   complete: Optional[Sequence[Dict[str, Any]]] = None,
                   fail: Optional[Sequence[Dict[str, Any]]] = None,
                   labels: Optional[Dict[str, str]] = None) -> Any:
        """``POST /v1/queues/{queue}/claim``, the whole ``ClaimResponse``. ``complete``/``fail``
        report what finished in the same round trip (the items of :meth:`complete_many` and
        :meth:`fail_many`; recorded and committed before the claim looks; outcomes in
        ``completed``/``failed``, in order; one bad item refuses the request, nothing written).
        ``lean`` answers ``LeanTask`` s in ``lean`` (``tasks`` then empty): id, kind, payload,
        attempt, max_attempts, stage, timeout, attempted_at, lease (and trace_id, process,
        batch_id, deps where present). ``labels``: the claim's, as :meth:`claim`'s."""
        body = _drop_none(dict(worker=worker, limit=limit, lease=_dur(lease), wait=_dur(wait),
                               kinds=list(kinds) if kinds else None,
                               stages=list(stages) if stages else None, claim_id=claim_id,
                               labels=dict(labels) if labels else None,
                               lean=lean or None, complete=list(complete) if complete else None,
                               fail=list(fail) if fail else None))
        return self._call("POST", f"/v1/queues/{_seg(queue)}/claim", body)

    def release_claim(self, queue: str, claim_id: str) -> Any:
        """``POST /v1/queues/{queue}/claims/{claim_id}/release`` → the ids handed back: what a
        claim sent with ``claim_id`` took, available again at once, no attempt counted (also
        when this arrives before the claim commits)."""
        return self._call("POST", f"/v1/queues/{_seg(queue)}/claims/{_seg(claim_id)}/release",
                          then=lambda r: r["released"])

    def release_many(self, items: Sequence[Dict[str, Any]]) -> Any:
        """``POST /v1/tasks/release``: ``[{"id", "lease"}]`` of tasks held but not started →
        one ``ItemOutcome`` per item (``ok``: available again, no attempt counted;
        ``lease_lost``)."""
        return self._call("POST", "/v1/tasks/release", {"items": list(items)},
                          then=lambda r: r["results"])

    def heartbeat(self, task_id: int, lease: str, progress: Json = None,
                  extend: Optional[Duration] = None) -> Any:
        """``POST /v1/tasks/{id}/heartbeat`` → the ``Task`` (new ``lease_expires_at``); raises
        :class:`~docket_client.errors.Conflict` ``cancelled``/``lease_lost``/``timed_out``."""
        body: Dict[str, Any] = {"lease": lease}
        if progress is not None:
            body["progress"] = progress
        if extend is not None:
            body["extend"] = format_duration(extend)
        return self._call("POST", f"/v1/tasks/{int(task_id)}/heartbeat", body)

    def complete(self, task_id: int, lease: str, result: Json = None, **next_stage: Any) -> Any:
        """``POST /v1/tasks/{id}/complete``; ``next_stage=`` (with ``payload``, ``priority``,
        ``run_at``/``run_in``) hands the task on to its next stage instead."""
        body = dict(lease=lease, result=result, **_drop_none(next_stage))
        if "run_in" in body:
            body["run_in"] = format_duration(body["run_in"])
        return self._call("POST", f"/v1/tasks/{int(task_id)}/complete", body)

    def fail(self, task_id: int, lease: str, error: str, retry_in: Optional[Duration] = None,
             permanent: bool = False, worker: Optional[str] = None) -> Any:
        """``POST /v1/tasks/{id}/fail``: retried per its backoff (or after ``retry_in``), or
        discarded when ``permanent`` or out of attempts."""
        body = _drop_none(dict(lease=lease, error=error, retry_in=_dur(retry_in),
                               permanent=permanent or None, worker=worker))
        return self._call("POST", f"/v1/tasks/{int(task_id)}/fail", body)

    def complete_many(self, items: Sequence[Dict[str, Any]]) -> Any:
        """``POST /v1/tasks/complete``: ``[{"id", "lease", "result", ...}]`` → one
        ``ItemOutcome`` per item (``ok``, ``lease_lost``, ``cancelled``, ``timed_out``,
        ``not_found``)."""
        return self._call("POST", "/v1/tasks/complete", {"items": list(items)},
                          then=lambda r: r["results"])

    def fail_many(self, items: Sequence[Dict[str, Any]]) -> Any:
        """``POST /v1/tasks/fail``: ``[{"id", "lease", "error", ...}]`` → ``ItemOutcome``s."""
        return self._call("POST", "/v1/tasks/fail", {"items": list(items)},
                          then=lambda r: r["results"])

    def report_worker(self, name: str, report: Dict[str, Any]) -> Any:
        """``POST /v1/workers/{name}/report`` (a ``WorkerReport``)."""
        return self._call("POST", f"/v1/workers/{_seg(name)}/report", report)

    def list_workers(self) -> Any:
        """``GET /v1/workers`` → ``[WorkerView]``."""
        return self._call("GET", "/v1/workers", then=lambda r: r["workers"])

    # --- queues ------------------------------------------------------------------------
    def list_queues(self) -> Any:
        """``GET /v1/queues`` → ``[QueueStats]``."""
        return self._call("GET", "/v1/queues", then=lambda r: r["queues"])

    def get_queue(self, queue: str) -> Any:
        """``GET /v1/queues/{queue}`` → ``QueueStats`` ``{"name", "counts", "settings"}``."""
        return self._call("GET", f"/v1/queues/{_seg(queue)}")

    def put_queue(self, queue: str, **settings: Any) -> Any:
        """``PUT /v1/queues/{queue}`` with ``QueueSettings`` fields."""
        return self._call("PUT", f"/v1/queues/{_seg(queue)}", settings)

    def pause_queue(self, queue: str) -> Any:
        return self._call("POST", f"/v1/queues/{_seg(queue)}/pause")

    def resume_queue(self, queue: str) -> Any:
        return self._call("POST", f"/v1/queues/{_seg(queue)}/resume")

    # --- batches -----------------------------------------------------------------------
    def create_batch(self, tasks: List[Dict[str, Any]], callbacks: Optional[Dict[str, Any]] = None,
                     name: Optional[str] = None, open: bool = False) -> Any:
        """``POST /v1/batches``: ``tasks`` (``NewTask`` dicts) in one transaction, and
        ``callbacks`` (``completed``, ``succeeded``, ``discarded``, ``cancelled``: ``NewTask``
        dicts) enqueued once when every task finished. ``open=True`` waits for
        :meth:`seal_batch`. Answers ``{"batch", "tasks"}``."""
        body = _drop_none(dict(name=name, tasks=tasks, callbacks=callbacks, open=open or None))
        return self._call("POST", "/v1/batches", body)

    def add_to_batch(self, batch_id: int, tasks: List[Dict[str, Any]], seal: bool = False) -> Any:
        """``POST /v1/batches/{id}/tasks``: more tasks for a batch that has not settled (409
        ``conflict`` once it has)."""
        return self._call("POST", f"/v1/batches/{int(batch_id)}/tasks", dict(tasks=tasks, seal=seal))

    def seal_batch(self, batch_id: int) -> Any:
        """``POST /v1/batches/{id}/seal``: its callbacks may run once every task finished."""
        return self._call("POST", f"/v1/batches/{int(batch_id)}/seal")

    def get_batch(self, batch_id: int) -> Any:
        """``GET /v1/batches/{id}``: ``total``, ``done``, ``counts`` by state, ``fired``."""
        return self._call("GET", f"/v1/batches/{int(batch_id)}")

    def list_batches(self, before: Optional[int] = None, limit: Optional[int] = None) -> Any:
        """``GET /v1/batches``: newest first."""
        params = _drop_none(dict(before=before, limit=limit))
        return self._call("GET", "/v1/batches", params=params, then=lambda r: r["batches"])

    # --- rate limits -------------------------------------------------------------------
    def put_rate_limit(self, name: str, kind: str, limit: int,
                       period: Optional[Duration] = None) -> Any:
        """``PUT /v1/rate-limits/{name}`` (admin): ``kind`` is ``"window"``, ``"bucket"``
        (both need ``period``) or ``"concurrent"``. Tasks name it in ``rate_limit``
        (``name`` or ``name:partition``)."""
        body = _drop_none(dict(kind=kind, limit=limit, period=_dur(period)))
        return self._call("PUT", f"/v1/rate-limits/{_seg(name)}", body)

    def get_rate_limit(self, name: str) -> Any:
        """``GET /v1/rate-limits/{name}``: with ``keys``, ``admitted``, ``delayed``,
        ``blocked``."""
        return self._call("GET", f"/v1/rate-limits/{_seg(name)}")

    def list_rate_limits(self) -> Any:
        """``GET /v1/rate-limits``: every limit, by name."""
        return self._call("GET", "/v1/rate-limits", then=lambda r: r["rate_limits"])

    def delete_rate_limit(self, name: str) -> Any:
        """``DELETE /v1/rate-limits/{name}`` (admin): its tasks run unlimited."""
        return self._call("DELETE", f"/v1/rate-limits/{_seg(name)}")

    # --- workflows ---------------------------------------------------------------------
    def create_workflow(self, tasks: List[Dict[str, Any]], name: Optional[str] = None,
                        callbacks: Optional[Dict[str, Any]] = None,
                        workflows: Optional[List[Dict[str, Any]]] = None) -> Any:
        """``POST /v1/workflows``: ``tasks`` are task specs with ``ref`` and ``depends_on``
        (refs, or ``{"ref", "ignore_failure"}``); a task runs once its dependencies completed.
        ``workflows`` are sub-workflows (``{"ref", "depends_on"?, "tasks"}``), waited on as a
        whole. Answers ``{"workflow": {"batch", "tasks"}, "tasks"}``."""
        body = _drop_none(dict(name=name, tasks=tasks, callbacks=callbacks, workflows=workflows))
        return self._call("POST", "/v1/workflows", body)

    def add_to_workflow(self, workflow_id: int, tasks: List[Dict[str, Any]],
                        workflows: Optional[List[Dict[str, Any]]] = None) -> Any:
        """``POST /v1/workflows/{id}/tasks``: tasks (and sub-workflows) added at run time; their
        ``depends_on`` may name the workflow's refs. Answers ``{"workflow", "tasks"}``."""
        body = _drop_none(dict(tasks=tasks, workflows=workflows))
        return self._call("POST", f"/v1/workflows/{int(workflow_id)}/tasks", body)

    def retry_workflow(self, workflow_id: Union[int, str]) -> Any:
        """A run id (``str``): :meth:`retry_workflow_run`. A task workflow's id (``int``):
        ``POST /v1/workflows/{id}/retry``: discarded and cancelled tasks run again, those with
        dependencies once these complete; callbacks fire again when it next finishes."""
        if isinstance(workflow_id, str):
            return self.retry_workflow_run(workflow_id)
        return self._call("POST", f"/v1/workflows/{int(workflow_id)}/retry")

    def get_workflow(self, workflow_id: int) -> Any:
        """``GET /v1/workflows/{id}``: its batch and each task's ref, state and edges."""
        return self._call("GET", f"/v1/workflows/{int(workflow_id)}")

    def cancel_workflow(self, workflow_id: Union[int, str]) -> Any:
        """A run id (``str``): :meth:`cancel_workflow_run`. A task workflow's id (``int``):
        ``POST /v1/workflows/{id}/cancel``: cancels every unfinished task."""
        if isinstance(workflow_id, str):
            return self.cancel_workflow_run(workflow_id)
        return self._call("POST", f"/v1/workflows/{int(workflow_id)}/cancel")

    # --- durable functions (workflow runs) ---------------------------------------------
    def start_workflow(self, workflow: str, input: Json = None,  # noqa: A002
                       id: Optional[str] = None, queue: Optional[str] = None,  # noqa: A002
                       priority: Optional[int] = None, max_attempts: Optional[int] = None,
                       timeout: Optional[Duration] = None) -> Any:
        """``POST /v1/workflow-runs``: start a run of ``workflow`` (a function registered in a
        worker with ``@worker.workflow(name)``) → the ``Run``, with ``created`` (false when a
        run with this ``id`` existed: that run is answered, nothing started). ``queue``
        [``"workflows"``], ``max_attempts``: how often its task may crash or time out and be
        replayed [25]; ``timeout``: one worker's time on it without a report [the queue's]."""
        body = _drop_none(dict(workflow=workflow, input=input, id=id, queue=queue,
                               priority=priority, max_attempts=max_attempts,
                               timeout=_dur(timeout)))
        body["input"] = input
        return self._call("POST", "/v1/workflow-runs", body,
                          then=lambda r: dict(r["run"], created=r["created"]))

    def workflow_run(self, run_id: str) -> Any:
        """``GET /v1/workflow-runs/{id}`` → the ``Run`` (``NotFound`` when there is none)."""
        return self._call("GET", f"/v1/workflow-runs/{_seg(run_id)}")

    def workflow_result(self, run_id: str, wait: Optional[Duration] = 30) -> Any:
        """``GET /v1/workflow-runs/{id}/result?wait=``: the ``Run`` once it finished or after
        ``wait`` (≤ 60 s), whichever comes first — check its ``state`` (``completed``:
        ``result``; ``failed``/``cancelled``: ``error``)."""
        params = _drop_none(dict(wait=_dur(wait)))
        return self._call("GET", f"/v1/workflow-runs/{_seg(run_id)}/result", params=params)

    def workflow_steps(self, run_id: str) -> Any:
        """``GET /v1/workflow-runs/{id}/steps`` → the run's journal: entries by ``seq``
        (``kind``, ``name``, ``state``, ``output``, ``error``, ``attempts``, ``child_id``,
        ``started_at``, ``finished_at``, ``wake_at``)."""
        return self._call("GET", f"/v1/workflow-runs/{_seg(run_id)}/steps",
                          then=lambda r: r["steps"])

    def send_event(self, run_id: str, name: str, payload: Json = None) -> Any:
        """``POST /v1/workflow-runs/{id}/events`` → ``{"id", "delivered"}`` (``delivered``: the
        run was waiting for it and was woken; else it waits in the run's mailbox for a
        ``ctx.wait_for_event(name)``). A finished run: ``Conflict`` ``invalid_state``."""
        return self._call("POST", f"/v1/workflow-runs/{_seg(run_id)}/events",
                          {"name": name, "payload": payload})

    def cancel_workflow_run(self, run_id: str) -> Any:
        """``POST /v1/workflow-runs/{id}/cancel`` → the ``Run``, cancelled with its unfinished
        children (a worker running it stops at its next call to docket)."""
        return self._call("POST", f"/v1/workflow-runs/{_seg(run_id)}/cancel")

    def retry_workflow_run(self, run_id: str) -> Any:
        """``POST /v1/workflow-runs/{id}/retry`` → the ``Run``: a failed or cancelled run runs
        again, replaying its journal (a non-determinism error: once the code is fixed)."""
        return self._call("POST", f"/v1/workflow-runs/{_seg(run_id)}/retry")

    def list_workflow_runs(self, workflow: Optional[str] = None, state: Optional[str] = None,
                           parent_id: Optional[str] = None,
                           created_after: Optional[Time] = None,
                           created_before: Optional[Time] = None,
                           limit: Optional[int] = None) -> Any:
        """``GET /v1/workflow-runs`` → runs, newest first (≤ ``limit``, 1..=1000 [100]); the next
        page: ``created_before=`` the last one's ``created_at``."""
        params = _drop_none(dict(workflow=workflow, state=state, parent_id=parent_id,
                                 created_after=None if created_after is None
                                 else _time(created_after),
                                 created_before=None if created_before is None
                                 else _time(created_before), limit=limit))
        return self._call("GET", "/v1/workflow-runs", params=params, then=lambda r: r["runs"])

    # The worker's side of a run (docket_client.Worker does these; by hand for other runtimes).
    def workflow_resume(self, run_id: str, lease: str) -> Any:
        """``POST /v1/workflow-runs/{id}/resume`` → ``{"run", "steps", "now"}``."""
        return self._call("POST", f"/v1/workflow-runs/{_seg(run_id)}/resume", {"lease": lease})

    def workflow_record(self, run_id: str, lease: str, steps: Sequence[Dict[str, Any]]) -> Any:
        """``POST /v1/workflow-runs/{id}/steps`` → ``{"recorded": n}``."""
        return self._call("POST", f"/v1/workflow-runs/{_seg(run_id)}/steps",
                          {"lease": lease, "steps": list(steps)})

    def workflow_suspend(self, run_id: str, lease: str, wait: Dict[str, Any],
                         steps: Sequence[Dict[str, Any]] = ()) -> Any:
        """``POST /v1/workflow-runs/{id}/suspend`` → ``{"outcome", "payload"?, "entry"}``."""
        return self._call("POST", f"/v1/workflow-runs/{_seg(run_id)}/suspend",
                          {"lease": lease, "steps": list(steps), "wait": wait})

    def workflow_finish(self, run_id: str, lease: str, result: Json = None,
                        error: Optional[str] = None,
                        steps: Sequence[Dict[str, Any]] = ()) -> Any:
        """``POST /v1/workflow-runs/{id}/finish`` (``result``, or ``error``) → ``{"run"}``."""
        body: Dict[str, Any] = {"lease": lease, "steps": list(steps)}
        if error is not None:
            body["error"] = error
        else:
            body["result"] = result
        return self._call("POST", f"/v1/workflow-runs/{_seg(run_id)}/finish", body)

    # --- schedules ---------------------------------------------------------------------
    def put_schedule(self, name: str, task: Dict[str, Any], every: Optional[Duration] = None,
                     cron: Optional[str] = None, **options: Any) -> Any:
        """``POST /v1/schedules``: create or replace the schedule ``name`` enqueuing ``task`` (a
        ``NewTask``) ``every`` interval or on ``cron``; options as in ``ScheduleSpec``."""
        body = _drop_none(dict(name=name, task=task, every=_dur(every), cron=cron, **options))
        return self._call("POST", "/v1/schedules", body)

    def list_schedules(self) -> Any:
        return self._call("GET", "/v1/schedules", then=lambda r: r["schedules"])

    def get_schedule(self, name: str) -> Any:
        return self._call("GET", f"/v1/schedules/{_seg(name)}")

    def delete_schedule(self, name: str) -> Any:
        return self._call("DELETE", f"/v1/schedules/{_seg(name)}")

    def pause_schedule(self, name: str) -> Any:
        return self._call("POST", f"/v1/schedules/{_seg(name)}/pause")

    def resume_schedule(self, name: str) -> Any:
        return self._call("POST", f"/v1/schedules/{_seg(name)}/resume")

    # --- processes ---------------------------------------------------------------------
    def put_namespace(self, namespace: str, processor_url: str, **config: Any) -> Any:
        """``PUT /v1/namespaces/{ns}``: the processor's URL and ``NamespaceConfig`` fields."""
        body = dict(processor={"url": processor_url}, **config)
        return self._call("PUT", f"/v1/namespaces/{_seg(namespace)}", body)

    def get_namespace(self, namespace: str) -> Any:
        return self._call("GET", f"/v1/namespaces/{_seg(namespace)}")

    def init_process(self, namespace: str, process_id: str, args: Json = None,
                     context: Json = None, idempotency_key: Optional[str] = None) -> Any:
        """``POST /v1/namespaces/{ns}/processes``: run the processor's ``init`` → its
        ``response``. Raises ``process_exists`` (409), ``processor_error`` (422)."""
        body = _drop_none(dict(id=process_id, args=args, context=context,
                               idempotency_key=idempotency_key))
        return self._call("POST", f"/v1/namespaces/{_seg(namespace)}/processes", body,
                          then=lambda r: r["response"])

    def call_process(self, namespace: str, process_id: str, args: Json = None,
                     context: Json = None, idempotency_key: Optional[str] = None,
                     range: Optional[Dict[str, Any]] = None) -> Any:  # noqa: A002
        """``POST …/processes/{id}/call``: a synchronous call → the processor's ``response``."""
        body = _drop_none(dict(args=args, context=context, idempotency_key=idempotency_key,
                               range=range))
        return self._call("POST", f"/v1/namespaces/{_seg(namespace)}/processes/"
                          f"{_seg(process_id)}/call", body, then=lambda r: r["response"])

    def repair_process(self, namespace: str, process_id: str, args: Json = None,
                       context: Json = None) -> Any:
        """``POST …/processes/{id}/repair``: an ``error`` process through the processor."""
        body = _drop_none(dict(args=args, context=context))
        return self._call("POST", f"/v1/namespaces/{_seg(namespace)}/processes/"
                          f"{_seg(process_id)}/repair", body)

    def get_process(self, namespace: str, process_id: str) -> Any:
        """``GET …/processes/{id}`` → ``ProcessView`` ``{"process", "history", "last_event_id"}``."""
        return self._call("GET", f"/v1/namespaces/{_seg(namespace)}/processes/"
                          f"{_seg(process_id)}")

    def trace_process(self, namespace: str, process_id: str) -> Any:
        """``GET …/processes/{id}/trace`` → ``ProcessTrace`` (its tasks and their runs)."""
        return self._call("GET", f"/v1/namespaces/{_seg(namespace)}/processes/"
                          f"{_seg(process_id)}/trace")

    def list_processes(self, namespace: str, **params: Any) -> Any:
        return self._call("GET", f"/v1/namespaces/{_seg(namespace)}/processes",
                          params=_drop_none(params))

    # --- tokens ------------------------------------------------------------------------
    def create_token(self, name: str, scopes: Sequence[str], **options: Any) -> Any:
        """``POST /v1/tokens`` (admin) → ``TokenCreated``; the secret is in it once."""
        return self._call("POST", "/v1/tokens", dict(name=name, scopes=list(scopes), **options))

    def list_tokens(self) -> Any:
        return self._call("GET", "/v1/tokens", then=lambda r: r["tokens"])

    def revoke_token(self, name: str) -> Any:
        return self._call("DELETE", f"/v1/tokens/{_seg(name)}")

    # --- the cluster -------------------------------------------------------------------
    def status(self) -> Any:
        """``GET /v1/status`` → ``StatusView``."""
        return self._call("GET", "/v1/status")

    def health(self) -> Any:
        """``GET /healthz`` → ``Health``."""
        return self._call("GET", "/healthz")


class _Sse:
    """Server-sent events, a line at a time: ``feed`` returns each notification once its
    event's blank line arrives."""

    def __init__(self) -> None:
        self.lines: List[str] = []

    def feed(self, line: str) -> Optional[Dict[str, Any]]:
        if line:
            self.lines.append(line)
            return None
        data = "\n".join(x[5:].lstrip(" ") for x in self.lines if x.startswith("data:"))
        self.lines = []
        item = json.loads(data) if data else None
        return item if isinstance(item, dict) and "seq" in item else None


class Client(_Api):
    """Blocking client. ``server`` defaults to ``$DOCKET_SERVER`` or ``http://127.0.0.1:7070``,
    ``token`` to ``$DOCKET_TOKEN``; ``ca_file`` trusts a private CA for ``https://``.
    Raises :class:`~docket_client.errors.DocketError` subclasses; ``httpx.TransportError`` when
    the server cannot be reached."""

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None,
                 ca_file: Optional[str] = None, timeout: float = 30.0) -> None:
        self.config = _Config(server, token, ca_file, timeout)
        self._http = httpx.Client(base_url=self.config.server, headers=self.config.headers,
                                  verify=self.config.verify, timeout=self.config.timeout)

    def _call(self, method, path, body=None, params=None, headers=None, then=None, raw=False):
        resp = self._http.request(method, path, json=body, params=params, headers=headers)
        value = resp if raw else _parse(resp)
        return then(value) if then else value

    def events(self, namespace: Optional[str] = None, after: Optional[int] = None
               ) -> Iterator[Dict[str, Any]]:
        """``GET /v1/events`` (server-sent events) as an endless iterator of ``Notification``
        ``{"seq", "namespace", "process_id", "kind", "event_id", "data", "created_at"}``,
        reconnecting after the last ``seq`` seen."""
        while True:
            params = _drop_none(dict(namespace=namespace, after=after))
            with self._http.stream("GET", "/v1/events", params=params,
                                   timeout=httpx.Timeout(self.config.timeout.connect,
                                                         read=None)) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    _parse(resp)
                sse = _Sse()
                for line in resp.iter_lines():
                    item = sse.feed(line)
                    if item is not None:
                        after = item["seq"]
                        yield item

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncClient(_Api):
    """asyncio client: the same methods as :class:`Client`, each awaited."""

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None,
                 ca_file: Optional[str] = None, timeout: float = 30.0,
                 max_connections: int = 100) -> None:
        self.config = _Config(server, token, ca_file, timeout)
        limits = httpx.Limits(max_connections=max_connections,
                              max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(base_url=self.config.server, headers=self.config.headers,
                                       verify=self.config.verify, timeout=self.config.timeout,
                                       limits=limits)

    async def _call(self, method, path, body=None, params=None, headers=None, then=None,
                    raw=False):
        resp = await self._http.request(method, path, json=body, params=params, headers=headers)
        value = resp if raw else _parse(resp)
        return then(value) if then else value

    async def events(self, namespace: Optional[str] = None, after: Optional[int] = None
                     ) -> AsyncIterator[Dict[str, Any]]:
        """As :meth:`Client.events`, an async iterator."""
        while True:
            params = _drop_none(dict(namespace=namespace, after=after))
            async with self._http.stream("GET", "/v1/events", params=params,
                                         timeout=httpx.Timeout(self.config.timeout.connect,
                                                               read=None)) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    _parse(resp)
                sse = _Sse()
                async for line in resp.aiter_lines():
                    item = sse.feed(line)
                    if item is not None:
                        after = item["seq"]
                        yield item

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


__all__ = ["Client", "AsyncClient", "DocketError", "task_spec", "TASK_OPTIONS"]
