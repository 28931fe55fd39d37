"""docket-client: the Python client, worker and processor helper for docket.

- :class:`Client` / :class:`AsyncClient` — every API operation (tasks, the work path, queues,
  schedules, processes, events, tokens);
- :class:`Worker` — handlers per kind (``@worker.task("kind")``), batched claims and reports,
  heartbeats, timeouts, cancellation, graceful stop;
- :class:`Processor` — ``init``/``call``/``repair``/``timeout`` handlers for durable processes;
- durable functions — ``@worker.workflow("name")`` functions with a :class:`WorkflowContext`
  (``ctx.step``, ``ctx.sleep``, ``ctx.wait_for_event``, ``ctx.start_child``…), runs started
  with ``client.start_workflow`` (:mod:`docket_client.durable`).
"""
from . import models
from .client import TASK_OPTIONS, AsyncClient, Client, task_spec
from .durable import (ChildFailed, ChildHandle, NonDeterminismError, StepFailed,
                      SyncChildHandle, SyncWorkflowContext, WorkflowContext, WorkflowRefused)
from .durations import format_duration, parse_duration
from .errors import (Conflict, DocketError, Forbidden, InvalidRequest, NotFound, RateLimited,
                     ServerError, Unauthenticated)
from .processor import (UNSET_TIMER, Processor, ProcessorFailure, Request, Result, timer,
                        timer_at)
from .worker import (PREFETCH_AUTO_MAX, PREFETCH_AUTO_WAIT, Job, NextStage, Permanent, Retry,
                     Worker, auto_prefetch)

__version__ = "0.1.0"

__all__ = [
    "Client", "AsyncClient", "task_spec", "TASK_OPTIONS", "format_duration", "parse_duration",
    "DocketError", "NotFound", "Conflict", "Unauthenticated", "Forbidden", "RateLimited",
    "InvalidRequest", "ServerError", "Worker", "Job", "Retry", "Permanent", "NextStage",
    "auto_prefetch", "PREFETCH_AUTO_WAIT", "PREFETCH_AUTO_MAX",
    "Processor", "Request", "Result", "ProcessorFailure", "timer", "timer_at", "UNSET_TIMER",
    "WorkflowContext", "SyncWorkflowContext", "ChildHandle", "SyncChildHandle", "StepFailed",
    "ChildFailed", "NonDeterminismError", "WorkflowRefused",
    "models",
]
