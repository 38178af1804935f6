"""What the API answers with: jobs, events, log lines."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Optional

__all__ = ["JobInfo", "Event", "LogLine", "SubmitReply", "JobPage", "FINAL_STATES"]

FINAL_STATES = frozenset({"success", "failed", "cancelled"})


def _build(cls: Any, data: dict[str, Any]) -> Any:
    names = cls._names
    obj = cls(**{k: v for k, v in data.items() if k in names and k != "raw"})
    obj.raw = data
    return obj


@dataclass
class JobInfo:
    """A job as the API returns it (see ``schemas/job.json``); ``raw`` holds every field."""

    id: str = ""
    task: str = ""
    group: str = ""
    args: Optional[dict[str, Any]] = None
    state: str = ""
    priority: str = ""
    attempt: int = 0
    retries: int = 0
    max_retries: int = 0
    progress: int = 0
    result: Any = None
    error: str = ""
    subject: str = ""
    submitter: str = ""
    tracker: str = ""
    worker: str = ""
    run_at: str = ""
    submitted: str = ""
    started: str = ""
    finished: str = ""
    expires_at: str = ""
    trigger_after: str = ""
    depends_on: Optional[list[str]] = None
    timeout: str = ""
    traceparent: str = ""
    no_executor: bool = False
    estimated_end: str = ""
    lease_until: str = ""
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    _names: ClassVar[frozenset[str]] = frozenset()

    @property
    def final(self) -> bool:
        """Whether the job ended: ``success``, ``failed`` or ``cancelled``."""
        return self.state in FINAL_STATES

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "JobInfo":
        return _build(cls, data)  # type: ignore[no-any-return]


@dataclass
class Event:
    """A job's state change (see ``schemas/event.json``)."""

    id: str = ""
    job_id: str = ""
    task: str = ""
    group: str = ""
    state: str = ""
    previous_state: str = ""
    attempt: int = 0
    error: str = ""
    code: str = ""
    field: str = ""
    executor: str = ""
    periodic: str = ""
    time: str = ""
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    _names: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Event":
        return _build(cls, data)  # type: ignore[no-any-return]


@dataclass
class LogLine:
    """A line of a job's log."""

    group: str = ""
    job_id: str = ""
    attempt: int = 0
    time: str = ""
    level: str = ""
    message: str = ""
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    _names: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LogLine":
        return _build(cls, data)  # type: ignore[no-any-return]


@dataclass
class SubmitReply:
    """The reply of the ``submit`` verb: the stored job, and a warning when no live executor runs its task."""

    id: str
    job: JobInfo
    warning: str = ""


class JobPage(list):  # type: ignore[type-arg]
    """A page of jobs (newest first); ``next_cursor`` continues it ("" at the end)."""

    next_cursor: str = ""


for _cls in (JobInfo, Event, LogLine):
    _cls._names = frozenset(f.name for f in fields(_cls))  # type: ignore[attr-defined]
