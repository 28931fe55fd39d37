"""docket's durations are humantime strings (``"250ms"``, ``"30s"``, ``"1h 5m"``); these turn
them into seconds and back."""
from __future__ import annotations

import re
from datetime import timedelta
from typing import Union

_UNITS = {
    "ns": 1e-9, "nsec": 1e-9, "us": 1e-6, "usec": 1e-6, "µs": 1e-6, "ms": 1e-3, "msec": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
    "M": 2630016.0, "month": 2630016.0, "months": 2630016.0,
    "y": 31557600.0, "year": 31557600.0, "years": 31557600.0,
}
_PART = re.compile(r"\s*(\d+)\s*([a-zA-Zµ]+)")

Duration = Union[str, int, float, timedelta]


def parse_duration(text: str) -> float:
    """Seconds in a humantime string (``"1m 30s"`` → 90.0). Raises ``ValueError``."""
    pos, total, text = 0, 0.0, text.strip()
    if not text:
        raise ValueError("empty duration")
    while pos < len(text):
        m = _PART.match(text, pos)
        if not m or m.group(2) not in _UNITS:
            raise ValueError(f"invalid duration {text!r}")
        total += int(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total


def format_duration(value: Duration) -> str:
    """A duration for docket: strings pass as they are; numbers are seconds; timedeltas too.
    Sent in whole milliseconds (docket's finest useful unit)."""
    if isinstance(value, str):
        return value
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return f"{round(seconds * 1000)}ms"
