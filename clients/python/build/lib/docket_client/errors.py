"""Errors: every non-2xx answer from docket becomes a :class:`DocketError` carrying docket's
stable error ``code`` (the table in docs/src/api/index.md), the HTTP status and the message."""
from __future__ import annotations

from typing import Any, Optional


class DocketError(Exception):
    """docket answered ``{"error": {"code", "message", "details"?}}`` with a 4xx/5xx status.

    ``code`` is stable (``not_found``, ``lease_lost``, ``cancelled``, ``rate_limited``…);
    ``retry_after`` is the ``Retry-After`` header in seconds on 429, else ``None``.
    """

    def __init__(self, status: int, code: str, message: str, details: Any = None,
                 retry_after: Optional[float] = None) -> None:
        super().__init__(f"{code}: {message} (HTTP {status})")
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.retry_after = retry_after


class NotFound(DocketError):
    """404: ``not_found``, ``namespace_not_found``, ``process_not_found``, ``route_not_found``."""


class Conflict(DocketError):
    """409: ``lease_lost``, ``cancelled``, ``timed_out``, ``invalid_state``, ``conflict``,
    ``process_exists``, ``process_not_running``, ``process_is_running``."""


class Unauthenticated(DocketError):
    """401 ``unauthenticated``: no token, or an unknown, revoked or expired one."""


class Forbidden(DocketError):
    """403 ``forbidden``: the token lacks the scope the request needs."""


class RateLimited(DocketError):
    """429 ``rate_limited``; ``retry_after`` says when to try again (seconds)."""


class InvalidRequest(DocketError):
    """400/412/413/415/422: the request breaks a rule; nothing was written."""


class ServerError(DocketError):
    """5xx: ``internal``, ``unavailable``, ``maintenance_stalled``, ``timeout``."""


def error_for(status: int, body: Any, retry_after: Optional[float]) -> DocketError:
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        code = str(err.get("code", "unknown"))
        message = str(err.get("message", ""))
        details = err.get("details")
    else:
        code, message, details = "unknown", str(body)[:500], None
    cls: type = DocketError
    if status == 404:
        cls = NotFound
    elif status == 409:
        cls = Conflict
    elif status == 401:
        cls = Unauthenticated
    elif status == 403:
        cls = Forbidden
    elif status == 429:
        cls = RateLimited
    elif status >= 500:
        cls = ServerError
    elif status >= 400:
        cls = InvalidRequest
    return cls(status, code, message, details, retry_after)
