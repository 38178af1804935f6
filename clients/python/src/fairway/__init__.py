"""Fairway for Python: an asyncio client and executor (worker) library.

Submit jobs and follow them::

    import fairway

    async with await fairway.connect("nats://127.0.0.1:4222", group="acme") as client:
        job = await client.submit_and_wait("ocr", {"file": "a.png"})

Run them::

    @fairway.task("ocr", concurrency=2)
    async def ocr(job: fairway.Job):
        job.log("info", f"reading {job.args['file']}")
        job.progress(50)
        return {"text": "..."}

    client = await fairway.connect("nats://127.0.0.1:4222")
    await fairway.Worker(client, app_id="ocr-1", slots=4).run()

Everything goes through one transport seam, :class:`fairway.transport.Transport`;
the package carries its own small NATS client (:mod:`fairway.natsconn`).
"""

from __future__ import annotations

from typing import Any, Optional, Union

from ._util import format_duration, parse_duration, uuid7
from ._version import __version__
from .client import Client, EventStream, connect, current_traceparent
from .errors import (
    AuthorizationError,
    ConflictError,
    ConnectionClosedError,
    DuplicateError,
    FairwayError,
    InternalError,
    InvalidError,
    JetStreamError,
    MaxPayloadError,
    NoRespondersError,
    NotFoundError,
    NotRegisteredError,
    Permanent,
    QuotaError,
    RequestTimeoutError,
    Snooze,
    TransportError,
    UnavailableError,
    WaitTimeoutError,
)
from .models import FINAL_STATES, Event, JobInfo, JobPage, LogLine, SubmitReply
from .transport import Msg, PubAck, PullConsumer, Subscription, Transport
from .worker import Job, Registry, TaskSpec, Worker, default_registry, task

__all__ = [
    "__version__",
    "connect",
    "Client",
    "EventStream",
    "Worker",
    "Job",
    "task",
    "Registry",
    "TaskSpec",
    "default_registry",
    "run",
    "JobInfo",
    "Event",
    "LogLine",
    "JobPage",
    "SubmitReply",
    "FINAL_STATES",
    "FairwayError",
    "InvalidError",
    "NotFoundError",
    "DuplicateError",
    "ConflictError",
    "UnavailableError",
    "QuotaError",
    "InternalError",
    "NotRegisteredError",
    "WaitTimeoutError",
    "TransportError",
    "ConnectionClosedError",
    "NoRespondersError",
    "RequestTimeoutError",
    "MaxPayloadError",
    "AuthorizationError",
    "JetStreamError",
    "Permanent",
    "Snooze",
    "Transport",
    "Msg",
    "PubAck",
    "Subscription",
    "PullConsumer",
    "current_traceparent",
    "parse_duration",
    "format_duration",
    "uuid7",
]


def run(
    servers: Union[str, list[str]] = "nats://127.0.0.1:4222",
    *,
    app_id: str,
    slots: int = 4,
    prefetch: Optional[int] = None,
    registry: Optional[Registry] = None,
    prefix: str = "fairway",
    **connect_options: Any,
) -> None:
    """Connects, runs a :class:`Worker` of the registered tasks until SIGINT/SIGTERM, and closes: a worker's ``main``."""
    import asyncio

    async def main() -> None:
        client = await connect(servers, prefix=prefix, **connect_options)
        try:
            await Worker(client, app_id, slots=slots, prefetch=prefetch, registry=registry).run()
        finally:
            await client.close()

    asyncio.run(main())
