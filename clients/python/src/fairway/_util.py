"""Small helpers: Go durations, UUIDv7 ids, RFC 3339 times, names."""

from __future__ import annotations

import os
import re
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Union

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")

Duration = Union[str, float, int, timedelta]


def parse_duration(text: str) -> float:
    """Seconds of a Go duration (``"1h30m"``, ``"250ms"``, ``"1.5s"``); ValueError when it does not parse."""
    s = text.strip()
    if not s:
        raise ValueError("empty duration")
    sign = 1.0
    if s[0] in "+-":
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    total = 0.0
    pos = 0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            raise ValueError(f"invalid duration {text!r}")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise ValueError(f"invalid duration {text!r}")
    return sign * total


def format_duration(seconds: float) -> str:
    """A Go duration string for ``seconds`` (``90`` → ``"1m30s"``, ``0.25`` → ``"250ms"``)."""
    ns = int(round(seconds * 1e9))
    if ns == 0:
        return "0s"
    neg = ns < 0
    ns = abs(ns)
    if ns < 1_000_000_000:
        if ns % 1_000_000 == 0:
            out = f"{ns // 1_000_000}ms"
        elif ns % 1000 == 0:
            out = f"{ns // 1000}µs"
        else:
            out = f"{ns}ns"
    else:
        h, rem = divmod(ns, 3600 * 10**9)
        m, rem = divmod(rem, 60 * 10**9)
        sec = rem / 1e9
        s = f"{sec:.9f}".rstrip("0").rstrip(".")
        out = (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + f"{s}s"
    return ("-" if neg else "") + out


def duration_text(value: Duration) -> str:
    """A Go duration string from seconds, a timedelta, or a duration string (checked)."""
    if isinstance(value, str):
        parse_duration(value)
        return value
    if isinstance(value, timedelta):
        return format_duration(value.total_seconds())
    return format_duration(float(value))


def time_text(value: Union[str, datetime]) -> str:
    """An RFC 3339 time from a datetime (naive ones are taken as UTC) or a string."""
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def now_text() -> str:
    """The time now, RFC 3339 with microseconds, UTC."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def uuid7() -> str:
    """A UUIDv7 (time-ordered), as Fairway generates job ids."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


def check_name(field: str, name: str) -> None:
    """Raises InvalidError unless ``name`` is one subject token (letters, digits, ``-``, ``_``)."""
    from .errors import InvalidError

    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidError("invalid", f"{field} {name!r} must be letters, digits, '-' or '_'", field)
