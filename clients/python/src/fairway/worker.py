"""The executor (worker): register with the coordinators, take jobs, run their handlers, report.

It speaks the executor protocol of ``docs/nats-api.md`` the way the Go
executor (package ``executor``) does: dispatch requests with prefetch and
``idle``, per-task concurrency (``task_slots``), reports batched one
message in flight at a time under a ``Nats-Msg-Id`` and sent again with
backoff until JetStream stores them, heartbeats as requests, the
coordinators' pause/drain/cancel/ping commands, and a graceful stop.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import signal
import socket
import time
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Optional, Union

from ._util import check_name, format_duration, now_text, parse_duration
from .errors import (
    ConnectionClosedError,
    FairwayError,
    JetStreamError,
    MaxPayloadError,
    NoRespondersError,
    NotRegisteredError,
    Permanent,
    RequestTimeoutError,
    Snooze,
    TransportError,
    UnavailableError,
)
from .transport import Msg, Subscription, Transport

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Job", "Worker", "Registry", "TaskSpec", "task", "default_registry"]

log = logging.getLogger("fairway.worker")

Handler = Callable[["Job"], Awaitable[Any]]

# Timings, as the Go executor's (executor/executor.go).
REGISTER_TIMEOUT = 2.0
REGISTER_RETRY = 1.0
LONG_POLL = 1.0
DISPATCH_TIMEOUT = LONG_POLL + 1.5
DISPATCH_BACKOFF = 1.0
RELEASE_GRACE = 5.0
REPORT_FLUSH_TIMEOUT = 5.0
DEREGISTER_TIMEOUT = 2.0
STOPPING_TIMEOUT = 2.0
EARLY_CANCEL_TTL = 60.0
EARLY_CANCEL_MAX = 10_000
RAN_TTL = 600.0  # how long an attempt this worker ran is remembered (not run again if handed out again)
RAN_MAX = 50_000  # how many such attempts are remembered
HEARTBEAT_TRIES = 3
HELD_WAIT_MIN = 1.0
START_REPORT_DELAY = 0.025
EWMA_WEIGHT = 0.2
# Reports (executor/reporter.go).
REPORT_ACK_TIMEOUT = 2.0
REPORT_RETRY_FIRST = 0.010
REPORT_RETRY_MAX = 1.0
REPORT_WARN_EVERY = 10.0
REPORT_BATCH_BYTES = 256 << 10
# Logs and progress (executor/joblog.go).
LOG_FLUSH_INTERVAL = 0.1
PROGRESS_EVERY = 1.0
LOG_FLUSH_LINES = 100
MAX_LOG_MESSAGE = 8 << 10  # bytes (UTF-8) of a line's message
# A job's lines are split into log reports of about this many bytes
# (executor/joblog.go minLogChunk, maxLogChunk; the TS worker's MAX_LOG_CHUNK).
MIN_LOG_CHUNK = 64 << 10
MAX_LOG_CHUNK = 128 << 10
# Results (events.MaxResultSize, executor/job.go).
MAX_RESULT_SIZE = 1 << 20
RESULT_HEADROOM = 64 << 10

# Why a job's handler was cancelled.
_CANCEL = "cancel"
_SHUTDOWN = "shutdown"
_TIMEOUT = "timeout"
_HELD = "held"
_PAUSED = "paused"

RELEASED_UNRUN = "released before it started: the executor is shutting down"


class TaskSpec:
    """A task this worker runs: its handler, max-concurrent and default timeout."""

    __slots__ = ("name", "fn", "concurrency", "timeout")

    def __init__(self, name: str, fn: Handler, concurrency: Optional[int] = None, timeout: Optional[float] = None) -> None:
        check_name("task", name)
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"the handler of task {name!r} must be an async function (async def)")
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"task {name!r}: concurrency must be at least 1")
        self.name = name
        self.fn = fn
        self.concurrency = concurrency
        self.timeout = timeout


class Registry:
    """Tasks by name. :func:`fairway.task` registers into :data:`default_registry`."""

    def __init__(self) -> None:
        self.tasks: dict[str, TaskSpec] = {}

    def task(
        self,
        name: Optional[str] = None,
        fn: Optional[Handler] = None,
        *,
        concurrency: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> Any:
        """Registers a handler: ``registry.task("ocr", fn)``, or as a decorator ``@registry.task("ocr")``.

        ``concurrency``: at most this many of the task's jobs run at once on
        the worker. ``timeout``: seconds an attempt may run when the job has
        no timeout of its own.
        """
        if callable(name) and fn is None:  # @registry.task without arguments
            f = name
            self.tasks[f.__name__] = TaskSpec(f.__name__, f, concurrency, timeout)
            return f

        def register(f: Handler) -> Handler:
            n = name or f.__name__
            self.tasks[n] = TaskSpec(n, f, concurrency, timeout)
            return f

        if fn is not None:
            return register(fn)
        return register


default_registry = Registry()


def task(name: Optional[str] = None, *, concurrency: Optional[int] = None, timeout: Optional[float] = None) -> Any:
    """Decorator registering an ``async def handler(job)`` in the default registry, which a Worker given no registry uses."""
    return default_registry.task(name, concurrency=concurrency, timeout=timeout)


class Job:
    """A job a handler runs: its ``args``, ``attempt``, ``traceparent``, and ways to log and report progress."""

    __slots__ = ("id", "group", "task", "args", "attempt", "traceparent", "timeout", "raw", "_w", "_h", "_progress")

    def __init__(self, worker: "Worker", held: "_Held", raw: dict[str, Any]) -> None:
        self._w = worker
        self._h = held
        self.raw = raw
        self.id: str = raw.get("id", "")
        self.group: str = raw.get("group", "")
        self.task: str = raw.get("task", "")
        args = raw.get("args")
        self.args: dict[str, Any] = args if isinstance(args, dict) else {}
        self.attempt: int = int(raw.get("attempt") or 0)
        self.traceparent: str = raw.get("traceparent") or ""
        self.timeout: str = raw.get("timeout") or ""
        self._progress = -1

    def log(self, level: str, message: str) -> None:
        """Adds a line to the job's log (level ``debug``, ``info``, ``warn``, ``error``)."""
        if not self._h.reported:
            self._w._add_log(self._h, level, str(message))

    def info(self, message: str) -> None:
        self.log("info", message)

    def warn(self, message: str) -> None:
        self.log("warn", message)

    def error(self, message: str) -> None:
        self.log("error", message)

    def progress(self, pct: Union[int, float]) -> None:
        """Reports how far the job is, in percent (clamped to 0..100); sent at most once a second, and the last value."""
        p = min(max(int(pct), 0), 100)
        if p != self._progress and not self._h.reported:
            self._progress = p
            self._w._set_progress(self._h, p)

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, group={self.group!r}, task={self.task!r}, attempt={self.attempt})"


class _Held:
    """A job the worker holds, from its dispatch to its done report."""

    __slots__ = (
        "key", "raw", "job", "spec", "task", "holds_slot", "started", "start_wall", "start_sent",
        "cause", "reported", "timers", "timeout", "held_for",
    )

    def __init__(self, key: tuple[str, str], raw: dict[str, Any]) -> None:
        self.key = key
        self.raw = raw
        self.job: Job = None  # type: ignore[assignment]
        self.spec: Optional[TaskSpec] = None
        self.task: Optional[asyncio.Task[None]] = None
        self.holds_slot = False
        self.started = 0.0  # monotonic; 0: not started
        self.start_wall = 0.0  # time.time() when it started
        self.start_sent = False
        self.cause: Optional[str] = None
        self.reported = False
        self.timers: list[asyncio.TimerHandle] = []
        self.timeout = 0.0
        self.held_for = 0.0


class _Reporter:
    """Sends reports to JetStream in order, one message at a time, batching those queued meanwhile."""

    def __init__(self, transport: Transport, subject: str) -> None:
        self._t = transport
        self.subject = subject
        self.queue: deque[bytes] = deque()
        self._kick = asyncio.Event()
        self.idle = asyncio.Event()
        self.idle.set()
        self._unacked: Optional[tuple[bytes, str, list[bytes]]] = None
        self._seq = 0
        self._id_base = str(uuid.uuid4()) + "-"
        self._batch_bytes = REPORT_BATCH_BYTES
        self._delay = 0.0
        self._warned_at = 0.0
        self._failures = 0
        self.sent_messages = 0

    def put(self, data: bytes) -> None:
        self.queue.append(data)
        self.idle.clear()
        self._kick.set()

    async def run(self) -> None:
        while True:
            await self._kick.wait()
            self._kick.clear()
            await self._drain()

    async def _drain(self) -> None:
        while True:
            if self._unacked is None and not self._next():
                self.idle.set()
                return
            try:
                await self._send()
            except Exception as e:
                self._failed(e)
                await asyncio.sleep(self._delay)
                continue
            self._delay = 0.0

    def _next(self) -> bool:
        q = self.queue
        if not q:
            return False
        parts = [q.popleft()]
        size = len(parts[0]) + 2
        while q and size + len(q[0]) + 1 <= self._batch_bytes:
            d = q.popleft()
            parts.append(d)
            size += len(d) + 1
        self._seq += 1
        data = b"[" + b",".join(parts) + b"]"
        self._unacked = (data, self._id_base + str(self._seq), parts)
        return True

    async def _send(self) -> None:
        assert self._unacked is not None
        data, msg_id, parts = self._unacked
        try:
            await self._t.js_publish(self.subject, data, msg_id=msg_id, timeout=REPORT_ACK_TIMEOUT)
        except MaxPayloadError:
            self._too_large(parts, len(data))
            return
        except JetStreamError as e:
            if e.err_code == 10054 or "exceeds maximum" in e.description:  # message size exceeds maximum allowed
                self._too_large(parts, len(data))
                return
            # Refused by the stream (its limits): not stored. Its reports go
            # out again, with those queued since.
            self._unacked = None
            self.queue.extendleft(reversed(parts))
            raise
        except ConnectionClosedError:
            n = len(parts) + len(self.queue)
            self.queue.clear()
            self._unacked = None
            log.error("reports cannot be sent: the NATS connection is closed; dropping %d", n)
            return
        # Other errors (no answer, no responders, disconnected): perhaps
        # stored; sent again as it is, under its Nats-Msg-Id.
        self._unacked = None
        self.sent_messages += 1

    def _too_large(self, parts: list[bytes], size: int) -> None:
        self._unacked = None
        if len(parts) == 1:
            log.error("a report of %d bytes is larger than the server takes; dropping it", size)
            return
        self._batch_bytes = max(size // 2, 1)
        self.queue.extendleft(reversed(parts))

    def _failed(self, err: BaseException) -> None:
        self._delay = min(max(2 * self._delay, REPORT_RETRY_FIRST), REPORT_RETRY_MAX)
        self._failures += 1
        now = time.monotonic()
        if now - self._warned_at < REPORT_WARN_EVERY:
            return
        log.warning(
            "sending reports to JetStream failed; they are kept and sent again (subject %s, failures %d, retry in %s): %s",
            self.subject, self._failures, format_duration(self._delay), err,
        )
        self._warned_at = now
        self._failures = 0

    @property
    def pending(self) -> int:
        return len(self.queue) + (len(self._unacked[2]) if self._unacked else 0)

    async def flush(self, timeout: float) -> bool:
        """Waits until every report is acknowledged; False when ``timeout`` ran out first."""
        try:
            await asyncio.wait_for(self.idle.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False


class Worker:
    """An executor: runs the handlers of its tasks on the jobs the coordinators hand it.

    :param client: a connected :class:`fairway.Client` (its transport and prefix are used).
    :param app_id: the executor's identity (one subject token); with tenants,
        an executor credential's app-id is its name.
    :param slots: jobs run at once.
    :param prefetch: jobs held beyond the slots for short jobs (default:
        ``slots``; 0: none), as the Go executor's ``Prefetch``.
    :param registry: where the tasks are (default: the module-level
        registry of :func:`fairway.task`); :meth:`task` adds more.
    :param tasks: register only these of the registry's tasks.
    :param groups: take only jobs of these groups.
    :param heartbeat: seconds between heartbeats; ``wakeup``: seconds
        between unprompted dispatch requests of an idle worker.
    """

    def __init__(
        self,
        client: "Client",
        app_id: str,
        *,
        slots: int = 4,
        prefetch: Optional[int] = None,
        registry: Optional[Registry] = None,
        tasks: Optional[Iterable[str]] = None,
        groups: Optional[Iterable[str]] = None,
        host: Optional[str] = None,
        heartbeat: float = 5.0,
        wakeup: float = 10.0,
        log_buffer: int = 500,
        timeout_grace: float = 5.0,
    ) -> None:
        check_name("app_id", app_id)
        if slots < 1:
            raise ValueError("slots must be at least 1")
        self.client = client
        self._t: Transport = client.transport
        self.prefix: str = client.prefix
        self.app_id = app_id
        self.slots = slots
        self.prefetch_max = slots if prefetch is None else max(prefetch, 0)
        self._registry = registry if registry is not None else default_registry
        self._own = Registry()
        self._only = set(tasks) if tasks is not None else None
        self.groups = list(groups) if groups is not None else None
        self.host = host or socket.gethostname()
        self.heartbeat_period = heartbeat
        self.wakeup_period = wakeup
        self.log_buffer = log_buffer
        self.timeout_grace = timeout_grace
        self.instance = ""

        self._specs: dict[str, TaskSpec] = {}
        self._task_names: list[str] = []
        self._jobs: dict[tuple[str, str], _Held] = {}
        self._queued: deque[_Held] = deque()
        self._running_n = 0
        self._avg_run = 0.0
        self._avg_rtt = 0.0
        self._last_full = False
        self._request_id = ""
        self._paused: set[str] = set()  # tasks paused one by one
        self._paused_all = False  # every task paused (kept apart, as the Go executor's pausedAll)
        self._early_cancels: dict[tuple[str, str], tuple[int, float]] = {}
        # The attempts this worker ran, oldest first: one handed out again (its
        # reports not yet stored, a coordinator took it for still held) is not
        # run again.
        self._ran: dict[tuple[str, str], tuple[int, float]] = {}
        self._stopping = False
        self._started = False
        self._registered_again_at = 0.0
        self._no_coordinator_at = -math.inf
        self._subs: list[Subscription] = []
        self._bg: list[asyncio.Task[Any]] = []
        self._dispatch_task: Optional[asyncio.Task[None]] = None
        self._wake: Optional[asyncio.Event] = None
        self._stop_event: Optional[asyncio.Event] = None
        self._force_event: Optional[asyncio.Event] = None
        self._jobs_empty: Optional[asyncio.Event] = None
        self._stopped: Optional[asyncio.Event] = None
        self._shutdown_task: Optional[asyncio.Task[None]] = None
        self._reporter: Optional[_Reporter] = None
        # Logs and progress waiting to be sent.
        self._lines: list[tuple[_Held, dict[str, Any]]] = []
        self._dropped: dict[tuple[str, str], tuple[_Held, int]] = {}
        self._progress: dict[tuple[str, str], tuple[_Held, int]] = {}
        self._progress_at: dict[tuple[str, str], float] = {}
        self._flush_handle: Optional[asyncio.TimerHandle] = None
        self._start_sweep: Optional[asyncio.TimerHandle] = None
        self.drain_requested = False
        self.stop_reason = ""
        self._live = False  # registered and running its loops
        self._signals = 0
        self._stop_pending: Optional[tuple[str, bool]] = None

    # ------------------------------------------------------------------
    # Tasks

    def task(
        self, name: Optional[str] = None, fn: Optional[Handler] = None, *, concurrency: Optional[int] = None, timeout: Optional[float] = None
    ) -> Any:
        """Registers a handler on this worker: ``worker.task("ocr", fn)`` or ``@worker.task("ocr", concurrency=1)``."""
        if self._started:
            raise RuntimeError("add tasks before the worker starts")
        return self._own.task(name, fn, concurrency=concurrency, timeout=timeout)

    def _collect_tasks(self) -> None:
        specs = {**self._registry.tasks, **self._own.tasks}
        if self._only is not None:
            specs = {k: v for k, v in specs.items() if k in self._only}
        if not specs:
            raise ValueError(f"worker {self.app_id!r}: no tasks: register handlers with @fairway.task or worker.task before running")
        self._specs = specs
        self._task_names = sorted(specs)

    def _subject(self, verb: str) -> str:
        return f"{self.prefix}.exec.{self.app_id}.{verb}"

    # ------------------------------------------------------------------
    # Life

    async def start(self) -> None:
        """Subscribes to the commands, registers (waiting for a coordinator) and starts taking jobs.

        A refused registration raises :class:`FairwayError`.
        """
        if self._started:
            raise RuntimeError("the worker has already started")
        self._collect_tasks()
        self._started = True
        self.instance = str(uuid.uuid4())
        self._started_wall = now_text()
        self._wake = asyncio.Event()
        self._stop_event = asyncio.Event()
        self._force_event = asyncio.Event()
        self._jobs_empty = asyncio.Event()
        self._jobs_empty.set()
        self._stopped = asyncio.Event()
        self._reporter = _Reporter(self._t, f"{self.prefix}.results.{self.app_id}")
        ex = f"{self.prefix}.executor.{self.app_id}"
        try:
            for subject, cb in (
                (ex + ".cancel", self._on_cancel),
                (ex + ".ping", self._on_ping),
                (ex + ".pause", self._on_pause),
                (ex + ".drain", self._on_drain),
                (f"{self.prefix}.notify.work", lambda m: self._signal()),
            ):
                self._subs.append(await self._t.subscribe(subject, cb=cb))
            # The server has the subscriptions before any job comes: no cancel is missed.
            await self._t.flush(REGISTER_TIMEOUT * 2)
            registered = await self._register()
        except BaseException:
            await self._unsubscribe_all()
            self._stopped.set()
            raise
        if not registered:
            # Stopped (stop(), a signal) before any coordinator took the
            # registration: never registered, so nothing to deregister.
            reason = self._stop_pending[0] if self._stop_pending else "stop"
            self.stop_reason = reason
            self._stopping = True
            log.info("worker %s stopped (%s) before it registered", self.app_id, reason)
            await self._unsubscribe_all()
            self._stopped.set()
            return
        loop = asyncio.get_running_loop()
        self._bg = [loop.create_task(self._reporter.run()), loop.create_task(self._heartbeat_loop())]
        self._dispatch_task = loop.create_task(self._dispatch_loop())
        log.info("worker %s registered: instance %s, tasks %s, slots %d", self.app_id, self.instance, ",".join(self._task_names), self.slots)
        self._live = True
        if self._stop_pending:
            reason, force = self._stop_pending
            self.stop(reason=reason)
            if force:
                self.stop(force=True)

    async def _unsubscribe_all(self) -> None:
        for s in self._subs:
            try:
                await s.unsubscribe()
            except Exception:
                pass
        self._subs.clear()

    async def run(self, *, handle_signals: bool = True) -> None:
        """Starts the worker and returns once it stopped gracefully (:meth:`stop`, a drain, a signal).

        With ``handle_signals`` the first SIGINT/SIGTERM stops gracefully
        (running jobs finish, reports are acknowledged, it deregisters) and
        a second cancels the running jobs, reported ``released``.
        """
        loop = asyncio.get_running_loop()
        installed: list[int] = []
        if handle_signals:
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, self._on_signal, sig)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
        try:
            if not self._started:
                await self.start()
            await self.wait_stopped()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    def _on_signal(self, sig: int) -> None:
        name = signal.Signals(sig).name
        self._signals += 1
        if self._signals > 1:
            log.info("%s again: cancelling the running jobs (released)", name)
            self.stop(force=True)
        else:
            log.info("%s: stopping: no new jobs; %d running finish", name, self._running_n)
            self.stop(reason=name)

    def stop(self, *, force: bool = False, reason: str = "stop") -> None:
        """Stops the worker: gracefully, or (``force``, or a second call… with force) cancelling the running jobs.

        Returns at once; :meth:`wait_stopped` (or :meth:`run`) returns once stopped.
        """
        if not self._started or self._stop_event is None:
            return
        if not self._live:
            # Still registering: registration gives up (start() returns, the
            # worker stopped, nothing to deregister), or, when it succeeded
            # meanwhile, the worker stops once registered.
            self._stop_pending = (reason, self._stop_pending[1] or force) if self._stop_pending else (reason, force)
            self._stop_event.set()
            return
        if force and self._force_event is not None:
            self._force_event.set()
        if self._shutdown_task is None:
            self.stop_reason = reason
            self._stopping = True
            self._signal()
            self._stop_event.set()
            self._shutdown_task = asyncio.get_running_loop().create_task(self._shutdown())

    @property
    def stopping(self) -> bool:
        """Whether a stop began (:meth:`stop`, a signal, an operator's drain)."""
        return self._stopping or self._stop_pending is not None

    async def wait_stopping(self) -> None:
        """Returns once a stop began (the worker still finishes its running jobs then)."""
        assert self._stop_event is not None, "the worker has not started"
        await self._stop_event.wait()

    async def wait_stopped(self) -> None:
        """Returns once the worker stopped."""
        assert self._stopped is not None, "the worker has not started"
        await self._stopped.wait()
        if self._shutdown_task is not None:
            await self._shutdown_task

    async def shutdown(self, timeout: Optional[float] = None) -> None:
        """Stops gracefully and waits; after ``timeout`` seconds the running jobs are cancelled (released)."""
        self.stop()
        if timeout is None:
            await self.wait_stopped()
            return
        try:
            await asyncio.wait_for(asyncio.shield(self.wait_stopped()), timeout)
        except asyncio.TimeoutError:
            self.stop(force=True)
            await self.wait_stopped()

    @property
    def running(self) -> int:
        """Jobs whose handler runs now."""
        return self._running_n

    @property
    def held(self) -> int:
        """Jobs held: running, or prefetched and waiting for a slot."""
        return len(self._jobs)

    def _stop_requested(self) -> bool:
        return self._stopping or self._stop_pending is not None

    async def _register(self) -> bool:
        """Registers, trying again while no coordinator answers; False when the worker stops first."""
        assert self._stop_event is not None
        body = json.dumps({"executor": {
            "app_id": self.app_id, "instance": self.instance, "host": self.host, "slots": self.slots,
            "tasks": self._task_names, "started": self._started_wall,
        }}).encode()
        subject = self._subject("register")
        logged = 0.0
        while True:
            if self._stop_requested():
                return False
            req = asyncio.ensure_future(self._t.request(subject, body, timeout=REGISTER_TIMEOUT))
            stop = asyncio.ensure_future(self._stop_event.wait())
            try:
                await asyncio.wait([req, stop], return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
                if not req.done():
                    req.cancel()
            if not req.done() or req.cancelled():
                # Stopped while the request was out. A registration a
                # coordinator took meanwhile ends as a silent instance.
                return False
            try:
                msg = req.result()
            except (NoRespondersError, RequestTimeoutError) as e:
                if self._stop_requested():
                    return False
                if time.monotonic() - logged > 30:
                    log.info("waiting for a coordinator on %s: %s", subject, e)
                    logged = time.monotonic()
                await self._sleep(REGISTER_RETRY)
                continue
            reply = json.loads(msg.data) if msg.data else {}
            if isinstance(reply, dict) and reply.get("error"):
                raise FairwayError.from_reply(reply["error"])
            return True

    async def _register_again(self) -> None:
        since = time.monotonic() - self._registered_again_at
        if since < self.wakeup_period:
            await self._sleep(self.wakeup_period - since)
            if self._stopping:
                return
        self._registered_again_at = time.monotonic()
        log.warning("the coordinators do not know this worker instance (taken for gone, or replaced); registering again")
        try:
            if await self._register():
                log.info("worker registered again: instance %s", self.instance)
        except Exception as e:
            log.error("registering again failed; no jobs until it succeeds: %s", e)
            await self._sleep(self.wakeup_period)

    async def _sleep(self, seconds: float) -> None:
        """Sleeps, or less when the worker stops."""
        assert self._stop_event is not None
        try:
            await asyncio.wait_for(self._stop_event.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _pause(self, seconds: float) -> None:
        """Sleeps, or less on a wakeup (notify.work, a job's end) or when the worker stops."""
        assert self._wake is not None and self._stop_event is not None
        wake = asyncio.ensure_future(self._wake.wait())
        stop = asyncio.ensure_future(self._stop_event.wait())
        try:
            await asyncio.wait({wake, stop}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            wake.cancel()
            stop.cancel()
        self._wake.clear()

    async def _ask(self, subject: str, body: dict[str, Any], timeout: float) -> None:
        msg = await self._t.request(subject, json.dumps(body).encode(), timeout=timeout)
        if msg.data:
            reply = json.loads(msg.data)
            if reply.get("error"):
                raise FairwayError.from_reply(reply["error"])

    async def _shutdown(self) -> None:
        assert self._force_event is not None and self._jobs_empty is not None and self._stopped is not None
        try:
            # Before any job is released: else the leader could hand it straight back.
            try:
                await self._ask(self._subject("dispatch"), {"executor": self.app_id, "instance": self.instance, "stopping": True}, STOPPING_TIMEOUT)
            except Exception as e:
                log.info("could not tell the coordinators that this worker stops (%s); its jobs are released all the same", e)
            for h in list(self._queued):
                self._cancel_job(h, _SHUTDOWN)
            if self._dispatch_task is not None:
                await asyncio.gather(self._dispatch_task, return_exceptions=True)
            if self._jobs:
                jobs_empty = asyncio.ensure_future(self._jobs_empty.wait())
                forced = asyncio.ensure_future(self._force_event.wait())
                await asyncio.wait([jobs_empty, forced], return_when=asyncio.FIRST_COMPLETED)
                if not jobs_empty.done():
                    for h in list(self._jobs.values()):
                        self._cancel_job(h, _SHUTDOWN)
                    try:
                        await asyncio.wait_for(asyncio.shield(jobs_empty), RELEASE_GRACE)
                    except asyncio.TimeoutError:
                        for h in list(self._jobs.values()):
                            log.error("job %s: its handler did not return after it was cancelled; reporting it released anyway", h.key[1])
                            self._complete(h, "released", error="executor shut down: the handler did not return in time")
                jobs_empty.cancel()
                forced.cancel()
            self._flush_logs(everything=True)
            assert self._reporter is not None
            if not await self._reporter.flush(REPORT_FLUSH_TIMEOUT):
                log.error(
                    "%d reports not acknowledged by JetStream within %gs (does stream %s_RESULTS exist? coordinators create it)",
                    self._reporter.pending, REPORT_FLUSH_TIMEOUT, self.prefix.upper(),
                )
            for t in self._bg:
                t.cancel()
            await asyncio.gather(*self._bg, return_exceptions=True)
            await self._unsubscribe_all()
            try:
                await self._ask(self._subject("deregister"), {"executor": self.app_id, "instance": self.instance}, DEREGISTER_TIMEOUT)
                log.info("worker %s deregistered (instance %s)", self.app_id, self.instance)
            except Exception as e:
                log.info("could not deregister (%s); the coordinators mark this worker gone after a few silent leases", e)
        finally:
            self._stopped.set()

    # ------------------------------------------------------------------
    # Heartbeats

    async def _heartbeat_loop(self) -> None:
        subject = self._subject("heartbeat")
        while True:
            await asyncio.sleep(self.heartbeat_period)
            jobs = sorted(self._jobs)
            body = json.dumps({
                "executor": self.app_id, "instance": self.instance,
                "jobs": [{"group": g, "id": i} for g, i in jobs], "slots": self.slots,
            }).encode()
            wait = min(self.heartbeat_period / (HEARTBEAT_TRIES + 1), 1.0)
            for attempt in range(1, HEARTBEAT_TRIES + 1):
                try:
                    await self._t.request(subject, body, timeout=wait)
                    break
                except (TransportError, TimeoutError) as e:
                    if attempt == HEARTBEAT_TRIES:
                        log.debug("no coordinator acknowledged a heartbeat after %d tries: %s", attempt, e)

    # ------------------------------------------------------------------
    # Dispatch

    def _signal(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _prefetch(self, now: float) -> tuple[int, float]:
        """Jobs to hold beyond the slots now, and how long a request for them may wait (executor/prefetch.go)."""
        if self.prefetch_max <= 0 or self._avg_run <= 0 or self._avg_rtt <= 0:
            return 0, 0.0
        soon = max(self.slots - self._running_n, 0)
        long = 2 * self._avg_run
        until = 0.0
        for h in self._jobs.values():
            if not h.holds_slot:
                continue
            left = long - (now - h.started) if h.started else long
            if left >= 0:
                soon += 1
            until = max(until, left)
        want = 2 * min(soon, self.slots) * self._avg_rtt / self._avg_run
        if want < 0.5:
            return 0, 0.0
        return int(min(math.ceil(want), self.prefetch_max)), until

    def _held_wait(self) -> float:
        return max(4 * self._avg_run, 2 * self._avg_rtt, HELD_WAIT_MIN)

    def _running_by_task(self) -> dict[str, int]:
        n: dict[str, int] = {}
        for h in self._jobs.values():
            t = h.job.task
            n[t] = n.get(t, 0) + 1
        return n

    def _what_to_ask(self) -> Optional[dict[str, Any]]:
        if self._stopping or self._paused_all:
            return None
        target, soon = self._prefetch(time.monotonic())
        free = self.slots + target - len(self._jobs)
        if free <= 0:
            return None
        idle = min(max(self.slots - self._running_n - len(self._queued), 0), free)
        wait = LONG_POLL if idle > 0 else min(LONG_POLL, soon)
        tasks = [t for t in self._task_names if t not in self._paused]
        task_slots: dict[str, int] = {}
        at_cap = False
        if any(self._specs[t].concurrency for t in tasks):
            running = self._running_by_task()
            asked = []
            for t in tasks:
                limit = self._specs[t].concurrency
                if not limit:
                    asked.append(t)
                    continue
                left = limit - running.get(t, 0)
                if left <= 0:
                    at_cap = True
                    continue
                asked.append(t)
                if left < free:
                    task_slots[t] = left
            tasks = asked
        if not tasks:
            return None
        if at_cap:
            # A task is left out at its max-concurrent: no long poll for the
            # others, else a slot of the capped task freeing meanwhile waits
            # for the poll's end. The loop waits for its wake instead (a job
            # ending, notify.work, the wakeup period) and asks at once then.
            wait = 0.0
        body: dict[str, Any] = {
            "executor": self.app_id, "instance": self.instance, "slots": free, "idle": idle,
            "tasks": tasks, "wait_ms": int(wait * 1000),
        }
        if task_slots:
            body["task_slots"] = task_slots
        if self.groups is not None:
            body["groups"] = self.groups
        return body

    async def _dispatch_loop(self) -> None:
        assert self._wake is not None
        subject = self._subject("dispatch")
        while not self._stopping:
            idle = True
            body = self._what_to_ask()
            if body is not None:
                if not self._request_id:
                    self._request_id = str(uuid.uuid4())
                body["request_id"] = self._request_id
                asked = time.monotonic()
                try:
                    got = await self._dispatch(subject, body, asked)
                    idle = got == 0 and time.monotonic() - asked < LONG_POLL / 2
                    if got:
                        # Let the handlers just started run a step: short ones
                        # end now, and the next request asks for their slots.
                        await asyncio.sleep(0)
                except NotRegisteredError:
                    await self._register_again()
                    continue
                except RequestTimeoutError:
                    # The coordinator holding it is gone, or swamped: the same request id again, at once.
                    log.info("a dispatch request went unanswered; asking again")
                    continue
                except NoRespondersError:
                    if time.monotonic() - self._no_coordinator_at > 60:
                        log.warning("no coordinator answered a dispatch request; waiting for a wakeup")
                        self._no_coordinator_at = time.monotonic()
                except ConnectionClosedError:
                    return
                except UnavailableError as e:
                    # The leader cannot answer now (its database down, the
                    # lead changing hands): asked again each second under the
                    # same request id, which hands out what an earlier try
                    # claimed. Said once a minute.
                    if time.monotonic() - self._no_coordinator_at > 60:
                        log.warning("the coordinators cannot hand out jobs now; asking again every second: %s", e)
                        self._no_coordinator_at = time.monotonic()
                    # A wakeup ends the pause: work was stored, so the
                    # partition answers again (executor/dispatch.go).
                    await self._pause(DISPATCH_BACKOFF)
                    continue
                except Exception as e:
                    log.warning("asking for jobs: %s", e)
                    await self._sleep(DISPATCH_BACKOFF)
                    continue
            if not idle:
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), self.wakeup_period)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()

    async def _dispatch(self, subject: str, body: dict[str, Any], asked: float) -> int:
        msg = await self._t.request(subject, json.dumps(body).encode(), timeout=DISPATCH_TIMEOUT)
        rtt = time.monotonic() - asked
        # An unreadable reply raises before the request id is cleared: the
        # next request goes out under the same id and gets the jobs a
        # coordinator may have claimed for it (as the Go executor).
        reply = json.loads(msg.data)
        if not isinstance(reply, dict):
            raise ValueError(f"malformed dispatch reply: a JSON {type(reply).__name__}, not an object")
        if reply.get("error"):
            raise FairwayError.from_reply(reply["error"])
        jobs = reply.get("jobs")
        if jobs is None:
            jobs = []
        if not isinstance(jobs, list):
            raise ValueError(f"malformed dispatch reply: jobs is a JSON {type(jobs).__name__}, not an array")
        self._request_id = ""
        self._no_coordinator_at = -math.inf
        good: list[dict[str, Any]] = []
        bad: list[str] = []
        for raw in jobs:
            problem = _job_problem(raw)
            if problem:
                bad.append(problem)
            else:
                good.append(raw)
        if bad:
            # Once per reply; a job of those is the coordinators' again once its lease runs out.
            log.error("dispatch reply: skipping %d malformed job(s) of %d (first: %s)", len(bad), len(jobs), bad[0])
        if good and self._last_full:
            self._avg_rtt = _ewma(self._avg_rtt, rtt)
        self._last_full = len(jobs) == body["slots"]
        if good:
            self._accept(good)
        return len(good)

    def _accept(self, jobs: list[dict[str, Any]]) -> None:
        running = self._running_by_task()
        now = time.monotonic()
        for raw in jobs:
            key = (raw["group"], raw["id"])
            if key in self._jobs:
                log.warning("dispatch handed out job %s, which this worker already holds; ignoring it", key[1])
                continue
            ran = self._ran.get(key)
            if ran is not None and ran[0] == raw["attempt"] and now - ran[1] <= RAN_TTL:
                log.warning("dispatch handed out attempt %d of job %s, which this worker already ran; ignoring it (its report is on its way)", ran[0], key[1])
                continue
            h = _Held(key, raw)
            h.job = Job(self, h, raw)
            task_name = h.job.task
            spec = self._specs.get(task_name)
            h.spec = spec
            self._jobs[key] = h
            self._jobs_empty.clear()  # type: ignore[union-attr]
            n_task = running.get(task_name, 0)
            running[task_name] = n_task + 1
            if self._stopping:
                self._complete(h, "released", error=RELEASED_UNRUN)
            elif len(self._jobs) > self.slots + self.prefetch_max:
                log.warning("dispatch handed out more jobs than there are slots; releasing job %s", key[1])
                self._complete(h, "released", error="released before it started: the executor had no slot for it")
            elif spec is not None and spec.concurrency and n_task >= spec.concurrency:
                self._complete(h, "released", error="released before it started: its task is at its max-concurrent on this executor")
            elif task_name in self._paused or self._paused_all:
                self._complete(h, "released", error="released before it started: this executor no longer takes its task")
            elif self._take_early_cancel(key, h.job.attempt, now):
                self._complete(h, "cancelled", error="cancelled before it started")
            elif spec is None:
                msg = f"no handler for task {task_name!r} on executor {self.app_id!r}"
                log.error(msg)
                self._complete(h, "permanent", error=msg)
            elif self._running_n < self.slots and not self._queued:
                self._running_n += 1
                h.holds_slot = True
                self._start(h)
            else:
                h.held_for = self._held_wait()
                h.timers.append(asyncio.get_running_loop().call_later(h.held_for, self._cancel_job, h, _HELD))
                self._queued.append(h)

    def _remember_ran(self, key: tuple[str, str], attempt: int) -> None:
        """Remembers that this worker ran this attempt, for RAN_TTL, at most RAN_MAX of them."""
        now = time.monotonic()
        self._ran.pop(key, None)
        while self._ran:
            oldest = next(iter(self._ran))
            if len(self._ran) < RAN_MAX and now - self._ran[oldest][1] <= RAN_TTL:
                break
            del self._ran[oldest]
        self._ran[key] = (attempt, now)

    def _take_early_cancel(self, key: tuple[str, str], attempt: int, now: float) -> bool:
        e = self._early_cancels.get(key)
        if e is None or e[0] != attempt or now - e[1] > EARLY_CANCEL_TTL:
            return False
        del self._early_cancels[key]
        return True

    def _free_slot(self, h: _Held) -> None:
        if not h.holds_slot:
            try:
                self._queued.remove(h)
            except ValueError:
                pass
            return
        h.holds_slot = False
        self._running_n -= 1
        while self._running_n < self.slots and self._queued:
            nxt = self._queued.popleft()
            for t in nxt.timers:
                t.cancel()
            nxt.timers.clear()
            self._running_n += 1
            nxt.holds_slot = True
            self._start(nxt)

    # ------------------------------------------------------------------
    # Running

    def _start(self, h: _Held) -> None:
        loop = asyncio.get_running_loop()
        h.started = time.monotonic()
        h.start_wall = time.time()
        # Its start is reported on its own only if it still runs after
        # START_REPORT_DELAY (one sweep for every job started meanwhile); a
        # shorter job's start goes with its end: one report instead of two.
        if self._start_sweep is None:
            self._start_sweep = loop.call_later(START_REPORT_DELAY, self._sweep_starts)
        timeout = 0.0
        if h.job.timeout:
            try:
                timeout = parse_duration(h.job.timeout)
            except ValueError:
                timeout = 0.0
        if timeout <= 0 and h.spec is not None and h.spec.timeout:
            timeout = h.spec.timeout
        if timeout > 0:
            h.timeout = timeout
            h.timers.append(loop.call_later(timeout, self._cancel_job, h, _TIMEOUT))
            h.timers.append(loop.call_later(timeout + self.timeout_grace, self._abandon, h))
        h.task = loop.create_task(self._run(h))

    def _sweep_starts(self) -> None:
        """Reports the start of the jobs that have run START_REPORT_DELAY, and comes again while others run."""
        self._start_sweep = None
        now = time.monotonic()
        again = False
        for h in self._jobs.values():
            if h.started and not h.start_sent and not h.reported:
                if now - h.started >= START_REPORT_DELAY:
                    h.start_sent = True
                    self._report(h, "started", time=_rfc3339(h.start_wall))
                else:
                    again = True
        if again:
            self._start_sweep = asyncio.get_running_loop().call_later(START_REPORT_DELAY, self._sweep_starts)

    def _abandon(self, h: _Held) -> None:
        if h.reported:
            return
        log.error("job %s: handler still running %gs after its timeout; reporting the attempt failed and freeing its slot", h.key[1], self.timeout_grace)
        self._complete(h, "error", error=_timeout_error(h))

    def _cancel_job(self, h: _Held, cause: str) -> None:
        """Cancels a held job: its handler's task, or the job itself when it has not started."""
        if h.reported:
            return
        if h.cause is None:
            h.cause = cause
        if h.task is not None:
            h.task.cancel()
            return
        # Never started (held beyond the slots).
        if cause == _CANCEL:
            self._complete(h, "cancelled", error="cancelled before it started")
        elif cause == _SHUTDOWN:
            self._complete(h, "released", error=RELEASED_UNRUN)
        elif cause == _HELD:
            self._complete(h, "released", error=(
                f"released before it started: no slot of this executor freed within {format_duration(h.held_for)} "
                "(its running jobs run long); back to waiting for another executor"))
        elif cause == _PAUSED:
            self._complete(h, "released", error="task paused on this executor before the job started")
        else:
            self._complete(h, "released", error=RELEASED_UNRUN)

    async def _run(self, h: _Held) -> None:
        """Runs the handler and reports its outcome; whatever fails, the job reaches _complete (its slot frees)."""
        assert h.spec is not None
        reraise: Optional[BaseException] = None
        try:
            outcome, error, result, snooze, reraise = await self._outcome(h)
            ran = time.monotonic() - h.started
            self._avg_run = _ewma(self._avg_run, ran)
            if outcome not in ("success", "snoozed"):
                log.info("job %s (task %s, attempt %d) %s: %s", h.key[1], h.job.task, h.job.attempt, outcome, error)
            self._complete(h, outcome, error=error, result=result, snooze=snooze, ran=ran)
        except BaseException as e:
            log.exception("job %s: handling its outcome failed", h.key[1])
            if not h.reported:
                self._complete(h, "error", error=f"the worker failed handling the outcome of job {h.key[1]}: {_describe(e)}")
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
        if reraise is not None:
            raise reraise

    async def _outcome(self, h: _Held) -> tuple[str, str, Optional[bytes], str, Optional[BaseException]]:
        """Runs the handler: (outcome, error, result as JSON bytes, snooze, an exception to raise again after reporting)."""
        assert h.spec is not None
        released = "released while it ran: the executor shut down before the job finished"
        try:
            value = await h.spec.fn(h.job)
        except asyncio.CancelledError as e:
            if h.cause == _CANCEL:
                return "cancelled", "cancelled while running", None, "", None
            if h.cause == _TIMEOUT:
                return "error", _timeout_error(h), None, "", None
            if h.cause is not None:
                return "released", released, None, "", None
            # Not cancelled by the worker (an inner TaskGroup or future of the
            # handler): a failed attempt, counted against max_retries, not a
            # release that would hand it out again forever.
            detail = _safe_str(e)
            return "error", ("the handler raised CancelledError, though the worker did not cancel it "
                             "(a task or future the handler awaited was cancelled)" + (f": {detail}" if detail else "")), None, "", None
        except Snooze as e:
            return "snoozed", "", None, format_duration(e.seconds), None
        except Permanent as e:
            return "permanent", (_safe_str(e) or type(e).__name__), None, "", None
        except Exception as e:
            return "error", _describe(e, bare=True), None, "", None
        except BaseException as e:  # KeyboardInterrupt, SystemExit, GeneratorExit…
            again = e if isinstance(e, (KeyboardInterrupt, SystemExit)) else None
            return "error", f"the handler raised {_describe(e)}", None, "", again
        if h.cause == _CANCEL:
            # Cancelled as it returned: the cancel wins, as in the Go executor.
            return "cancelled", "cancelled while running", None, "", None
        if h.cause == _SHUTDOWN:
            return "released", released, None, "", None
        try:
            result = _utf8(json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError, RecursionError) as e:
            return "error", f"encoding the result of job {h.key[1]}: {_describe(e, bare=True)}", None, "", None
        size = len(result)
        if size > MAX_RESULT_SIZE:
            return "permanent", (
                f"the result of job {h.key[1]} is {size} bytes: a result is at most {MAX_RESULT_SIZE} bytes (1 MiB); "
                "store a large output elsewhere (object storage, a table) and return where it is"), None, "", None
        limit = self._t.max_payload - RESULT_HEADROOM
        if size > limit:
            return "error", (
                f"the result of job {h.key[1]} is {size} bytes: more than the {limit} bytes a report can carry "
                f"(NATS max payload {self._t.max_payload} bytes)"), None, "", None
        return "success", "", result, "", None

    def _complete(
        self, h: _Held, outcome: str, *, error: str = "", result: Optional[bytes] = None, snooze: str = "", ran: Optional[float] = None
    ) -> None:
        """Sends the job's pending lines and progress, then its done report, and frees its slot. Once per job."""
        if h.reported:
            if outcome != "released" or h.task is None:
                log.warning("job %s: handler returned after the job was reported; its outcome (%s) is dropped", h.key[1], outcome)
            return
        h.reported = True
        try:
            for t in h.timers:
                t.cancel()
            h.timers.clear()
            fields: dict[str, Any] = {"outcome": outcome}
            if error:
                fields["error"] = error
            if snooze:
                fields["snooze"] = snooze
            if h.started:
                if ran is None:
                    ran = time.monotonic() - h.started
                fields["ran_ms"] = round(ran * 1000, 3)
                if not h.start_sent:
                    h.start_sent = True
                    fields["started"] = _rfc3339(h.start_wall)
            try:
                self._flush_job_logs(h)
            except Exception:
                log.exception("job %s: sending its last log lines failed", h.key[1])
            try:
                self._report(h, "done", raw=(("result", result),) if result is not None else (), **fields)
            except Exception as e:
                log.exception("job %s: encoding its done report failed; reporting an error instead", h.key[1])
                fallback = {k: v for k, v in fields.items() if k in ("ran_ms", "started")}
                self._report(h, "done", outcome="error", error=f"the worker failed encoding the {outcome} report of job {h.key[1]}: {_describe(e)}", **fallback)
        finally:
            # Whatever failed above, the job is let go: its slot frees.
            self._jobs.pop(h.key, None)
            self._remember_ran(h.key, h.job.attempt)
            self._free_slot(h)
            if not self._jobs:
                self._jobs_empty.set()  # type: ignore[union-attr]
            self._signal()

    def _report(self, h: _Held, type_: str, *, raw: Iterable[tuple[str, bytes]] = (), **fields: Any) -> None:
        """Queues a report; ``raw``: fields already encoded as JSON (a result, log lines)."""
        assert self._reporter is not None
        self._reporter.put(self._encode_report(h, type_, raw=raw, **fields))

    def _encode_report(self, h: _Held, type_: str, *, raw: Iterable[tuple[str, bytes]] = (), **fields: Any) -> bytes:
        rep = {
            "type": type_, "group": h.key[0], "job_id": h.key[1], "attempt": h.job.attempt,
            "executor": self.app_id, "instance": self.instance, "time": fields.pop("time", None) or now_text(),
        }
        rep.update(fields)
        data = _utf8(json.dumps(rep, separators=(",", ":"), ensure_ascii=False))
        extra = b"".join(b',"' + k.encode() + b'":' + v for k, v in raw)
        if extra:
            data = data[:-1] + extra + b"}"
        return data

    # ------------------------------------------------------------------
    # Logs and progress

    def _add_log(self, h: _Held, level: str, message: str) -> None:
        encoded = _utf8(message)
        if len(encoded) > MAX_LOG_MESSAGE:
            message = encoded[:MAX_LOG_MESSAGE].decode("utf-8", "ignore") + f"… [truncated: {MAX_LOG_MESSAGE} of {len(encoded)} bytes shown]"
        if len(self._lines) >= self.log_buffer:
            d = self._dropped.get(h.key)
            self._dropped[h.key] = (h, (d[1] if d else 0) + 1)
            return
        self._lines.append((h, {"group": h.key[0], "job_id": h.key[1], "attempt": h.job.attempt, "time": now_text(), "level": level, "message": message}))
        if len(self._lines) >= LOG_FLUSH_LINES:
            asyncio.get_running_loop().call_soon(self._flush_logs)
        else:
            self._schedule_flush()

    def _set_progress(self, h: _Held, pct: int) -> None:
        self._progress[h.key] = (h, pct)
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_later(LOG_FLUSH_INTERVAL, self._flush_logs)

    def _log_chunk(self) -> int:
        return min(max(self._t.max_payload // 2, MIN_LOG_CHUNK), MAX_LOG_CHUNK)

    def _report_logs(self, h: _Held, lines: list[dict[str, Any]]) -> None:
        """Reports a job's lines, split into reports of at most about _log_chunk() bytes (executor/joblog.go)."""
        chunk = self._log_chunk()
        parts: list[bytes] = []
        size = 0
        for line in lines:
            enc = _utf8(json.dumps(line, separators=(",", ":"), ensure_ascii=False))
            if parts and size + len(enc) + 1 > chunk:
                self._report(h, "log", raw=(("logs", b"[" + b",".join(parts) + b"]"),))
                parts, size = [], 0
            parts.append(enc)
            size += len(enc) + 1
        if parts:
            self._report(h, "log", raw=(("logs", b"[" + b",".join(parts) + b"]"),))

    def _flush_logs(self, everything: bool = False) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        lines, self._lines = self._lines, []
        per_job: dict[tuple[str, str], tuple[_Held, list[dict[str, Any]]]] = {}
        for h, line in lines:
            per_job.setdefault(h.key, (h, []))[1].append(line)
        for key, (h, n) in list(self._dropped.items()):
            per_job.setdefault(key, (h, []))[1].append(_dropped_line(h, n))
        self._dropped.clear()
        for h, job_lines in per_job.values():
            if not h.reported:
                self._report_logs(h, job_lines)
        now = time.monotonic()
        for key, (h, pct) in list(self._progress.items()):
            if not everything and now - self._progress_at.get(key, 0.0) < PROGRESS_EVERY:
                continue
            del self._progress[key]
            self._progress_at[key] = now
            if not h.reported:
                self._report(h, "progress", progress=pct)
        if self._progress or self._lines:
            self._schedule_flush()

    def _flush_job_logs(self, h: _Held) -> None:
        key = h.key
        mine = [line for hh, line in self._lines if hh is h]
        if mine:
            self._lines = [(hh, line) for hh, line in self._lines if hh is not h]
        d = self._dropped.pop(key, None)
        if d is not None:
            mine.append(_dropped_line(h, d[1]))
        if mine:
            self._report_logs(h, mine)
        p = self._progress.pop(key, None)
        if p is not None:
            self._report(h, "progress", progress=p[1])
        self._progress_at.pop(key, None)

    # ------------------------------------------------------------------
    # Commands

    def _on_cancel(self, msg: Msg) -> None:
        try:
            cmd = json.loads(msg.data)
            group, job_id, attempt = cmd.get("group"), cmd.get("job_id"), int(cmd.get("attempt") or 0)
        except (ValueError, TypeError, AttributeError):
            group, job_id, attempt = None, None, 0
        if not group or not job_id or attempt < 1:
            log.warning("ignoring a cancel command that does not name group, job_id and attempt: %r", msg.data[:200])
            if msg.reply:
                self._respond(msg.reply, json.dumps({"error": {"code": "invalid", "message": "a cancel command needs group, job_id and attempt"}}).encode())
            return
        key = (group, job_id)
        h = self._jobs.get(key)
        if h is not None and h.job.attempt == attempt:
            log.info("cancelling job %s (attempt %d)", job_id, attempt)
            self._cancel_job(h, _CANCEL)
        elif h is None:
            now = time.monotonic()
            if len(self._early_cancels) >= EARLY_CANCEL_MAX:
                for k, (_, at) in list(self._early_cancels.items()):
                    if now - at > EARLY_CANCEL_TTL or len(self._early_cancels) >= EARLY_CANCEL_MAX:
                        del self._early_cancels[k]
            self._early_cancels[key] = (attempt, now)
        if msg.reply:
            self._respond(msg.reply, b"{}")

    def _respond(self, subject: str, data: bytes) -> None:
        pub = getattr(self._t, "publish_nowait", None)
        if pub is not None:
            try:
                pub(subject, data)
            except TransportError as e:
                log.debug("answering on %s: %s", subject, e)
            return
        asyncio.get_running_loop().create_task(self._t.publish(subject, data))

    def _on_ping(self, msg: Msg) -> None:
        if msg.reply and (not msg.data or msg.data.decode(errors="replace") == self.instance):
            self._respond(msg.reply, self.instance.encode())

    def _on_pause(self, msg: Msg) -> None:
        try:
            cmd = json.loads(msg.data)
        except ValueError:
            return
        if not isinstance(cmd, dict):
            return
        t = cmd.get("task") or ""
        if not isinstance(t, str):
            return
        if cmd.get("resume"):
            # Resuming every task leaves the tasks paused one by one paused (executor/subscriptions.go setPaused).
            if t:
                self._paused.discard(t)
            else:
                self._paused_all = False
            log.info("resumed %s", t or "every task")
            self._signal()
            return
        if t:
            self._paused.add(t)
        else:
            self._paused_all = True
        log.info("paused %s", t or "every task")
        for h in list(self._queued):
            if not t or h.job.task == t:
                self._cancel_job(h, _PAUSED)

    def _on_drain(self, msg: Msg) -> None:
        if not self.drain_requested:
            self.drain_requested = True
            log.info("an operator asked this worker to drain: no new jobs; running ones finish, then it stops")
            self.stop(reason="drain")


def _job_problem(raw: Any) -> str:
    """What makes a job of a dispatch reply unusable, or "" when it is fine."""
    if not isinstance(raw, dict):
        return f"a JSON {type(raw).__name__}, not an object"
    for k in ("id", "group", "task"):
        v = raw.get(k)
        if not isinstance(v, str) or not v:
            return f"{k} missing or not a string (job {str(raw.get('id'))[:100]!r})"
    a = raw.get("attempt")
    if not isinstance(a, int) or isinstance(a, bool) or a < 1:
        return f"attempt missing or not a positive integer (job {raw['id'][:100]!r})"
    for k in ("traceparent", "timeout"):
        if raw.get(k) is not None and not isinstance(raw.get(k), str):
            return f"{k} not a string (job {raw['id'][:100]!r})"
    return ""


def _utf8(text: str) -> bytes:
    """UTF-8 that never fails: a lone surrogate (os.fsdecode of bytes that are not UTF-8) becomes a JSON escape (\\udce9)."""
    return text.encode("utf-8", "backslashreplace")


def _safe_str(e: BaseException) -> str:
    """str(e), or "" when its __str__ fails."""
    try:
        return str(e)
    except Exception:
        return ""


def _describe(e: BaseException, bare: bool = False) -> str:
    """An exception's text (``bare``: its message alone when it has one), even when its __str__ fails."""
    text = _safe_str(e)
    if bare and text:
        return text
    if not text:
        try:
            return repr(e)
        except Exception:
            return type(e).__name__
    return f"{type(e).__name__}: {text}"


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def _ewma(avg: float, sample: float) -> float:
    return sample if avg == 0 else avg + EWMA_WEIGHT * (sample - avg)


def _timeout_error(h: _Held) -> str:
    text = h.job.timeout or format_duration(h.timeout)
    return f"timeout: the attempt ran longer than {text}"


def _dropped_line(h: _Held, n: int) -> dict[str, Any]:
    return {"group": h.key[0], "job_id": h.key[1], "attempt": h.job.attempt, "time": now_text(), "level": "warn",
            "message": f"{n} log lines dropped: the executor's log buffer was full"}
