"""The Fairway client: submit jobs, manage them and follow their events over NATS."""

from __future__ import annotations

import asyncio
import json
import random
import re
import ssl
import time
from collections import deque
from datetime import datetime
from typing import Any, Iterable, Mapping, Optional, Union

from ._util import check_name, duration_text, parse_duration, time_text, uuid7
from .errors import (
    FairwayError,
    InvalidError,
    JetStreamError,
    NoRespondersError,
    QuotaError,
    RequestTimeoutError,
    TransportError,
    UnavailableError,
    WaitTimeoutError,
)
from .models import Event, JobInfo, JobPage, LogLine, SubmitReply
from .transport import Msg, PullConsumer, Transport

__all__ = ["Client", "connect", "EventStream", "current_traceparent"]

MAX_WAIT_MS = 30_000
SUBMIT_MANY_BATCH = 100
SUBMIT_BATCH_BYTES = 512 << 10
DEFAULT_MAX_ARGS = 1 << 20

# Submission fields (schemas/submission.json) besides id, task, group and args,
# and how each is written on the wire.
_TIME_FIELDS = {"run_at", "trigger_after", "expires_at"}
_DURATION_FIELDS = {"run_in", "unique_for", "timeout"}
_PLAIN_FIELDS = {"subject", "submitter", "priority", "tracker", "max_retries", "pending", "unique_by", "depends_on"}
SUBMISSION_OPTIONS = frozenset(_TIME_FIELDS | _DURATION_FIELDS | _PLAIN_FIELDS)

_otel_trace: Any = None
_otel_checked = False


def current_traceparent() -> str:
    """The W3C traceparent of OpenTelemetry's current span, or "" (none, or opentelemetry not installed)."""
    global _otel_trace, _otel_checked
    if not _otel_checked:
        _otel_checked = True
        try:
            from opentelemetry import trace

            _otel_trace = trace
        except ImportError:
            _otel_trace = None
    if _otel_trace is None:
        return ""
    ctx = _otel_trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return ""
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


_RETRY_IN = re.compile(r"retry in ([0-9.]+(?:ns|us|µs|ms|s|m|h)+)")


def _rate_retry(err: FairwayError) -> Optional[float]:
    """The pause an API-rate refusal asks for, or None for any other refusal."""
    if err.code != "quota" or "api-rate" not in err.message:
        return None
    m = _RETRY_IN.search(err.message)
    delay = 0.01
    if m:
        try:
            delay = parse_duration(m.group(1))
        except ValueError:
            pass
    return min(max(delay, 0.005), 1.0) * (1 + random.random() / 4)


def _trace_headers(traceparent: Optional[str]) -> Optional[dict[str, str]]:
    tp = traceparent if traceparent is not None else current_traceparent()
    return {"traceparent": tp} if tp else None


class Client:
    """A Fairway client over a :class:`~fairway.transport.Transport`.

    Use :func:`connect` to make one. ``group`` is the default group of the
    calls that take one; ``timeout`` bounds each request (seconds).
    """

    def __init__(
        self,
        transport: Transport,
        *,
        prefix: str = "fairway",
        group: Optional[str] = None,
        timeout: float = 10.0,
        max_args_size: int = DEFAULT_MAX_ARGS,
        owns_transport: bool = True,
    ) -> None:
        check_name("prefix", prefix)
        if group is not None:
            check_name("group", group)
        self.transport = transport
        self.prefix = prefix
        self.group = group
        self.timeout = timeout
        self.max_args_size = max_args_size
        self._owns = owns_transport

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connection (when the client made it)."""
        if self._owns:
            await self.transport.close()

    # ------------------------------------------------------------------
    # Subjects

    def submit_subject(self, group: str, task: str) -> str:
        return f"{self.prefix}.submit.{group}.{task}"

    def api_subject(self, group: str, verb: str) -> str:
        return f"{self.prefix}.api.{group}.{verb}"

    @property
    def event_stream(self) -> str:
        """The events stream's name (``FAIRWAY_EVENTS``; with tenants, the tenant's own copy has the same name)."""
        return self.prefix.upper() + "_EVENTS"

    def _group(self, group: Optional[str]) -> str:
        g = group or self.group
        if not g:
            raise InvalidError("invalid", "a group is needed: pass group= or connect(..., group=...)", "group")
        check_name("group", g)
        return g

    # ------------------------------------------------------------------
    # Requests

    async def _request(
        self, subject: str, body: Any, *, timeout: Optional[float] = None, headers: Optional[Mapping[str, str]] = None
    ) -> dict[str, Any]:
        timeout = self.timeout if timeout is None else timeout
        data = json.dumps(body, separators=(",", ":")).encode()
        give_up = time.monotonic() + timeout
        while True:
            try:
                msg = await self.transport.request(subject, data, headers=headers, timeout=timeout)
            except NoRespondersError:
                raise NoRespondersError(subject) from None
            try:
                reply: dict[str, Any] = json.loads(msg.data)
            except ValueError:
                raise TransportError(f"undecodable reply on {subject}: {msg.data[:200]!r}") from None
            err = reply.get("error")
            if not err:
                return reply
            fe = FairwayError.from_reply(err)
            # Over the group's API rate (coordinator.quota.api-rate): the
            # coordinator says when to ask again; asked again within the
            # call's timeout. Other refusals, other quotas included, raise.
            delay = _rate_retry(fe)
            if delay is None or time.monotonic() + delay > give_up:
                raise fe
            await asyncio.sleep(delay)

    async def api(
        self, group: Optional[str], verb: str, body: Optional[Mapping[str, Any]] = None, *, timeout: Optional[float] = None
    ) -> dict[str, Any]:
        """Calls a verb of the tenant API (``<prefix>.api.<group>.<verb>``) and returns its reply's fields.

        A reply with an ``error`` raises :class:`FairwayError` (its subclass for the code).
        """
        g = self._group(group)
        return await self._request(self.api_subject(g, verb), dict(body or {}), timeout=timeout)

    async def admin(self, verb: str, body: Optional[Mapping[str, Any]] = None, *, timeout: Optional[float] = None) -> dict[str, Any]:
        """Calls a verb of the operator API (``<prefix>.admin.<verb>``)."""
        return await self._request(f"{self.prefix}.admin.{verb}", dict(body or {}), timeout=timeout)

    # ------------------------------------------------------------------
    # Submitting

    def submission(
        self, task: str, args: Optional[Mapping[str, Any]] = None, *, group: Optional[str] = None, id: Optional[str] = None, **options: Any
    ) -> dict[str, Any]:
        """Builds and checks a Submission body (see ``schemas/submission.json``), with an id (UUIDv7) when none is given.

        Options: ``priority`` (``"high"``/``"low"``), ``run_at``, ``trigger_after``,
        ``expires_at`` (datetime or RFC 3339), ``run_in``, ``unique_for``, ``timeout``
        (seconds, timedelta or a Go duration), ``tracker``, ``unique_by`` (list of
        ``task``/``args``/``subject``/``group``), ``max_retries``, ``pending``,
        ``depends_on`` (job ids), ``subject``, ``submitter``.
        """
        g = self._group(group)
        check_name("task", task)
        if args is not None and not isinstance(args, Mapping):
            raise InvalidError("invalid", "args must be a JSON object (a mapping)", "args")
        sub: dict[str, Any] = {"id": id or uuid7(), "task": task, "group": g, "args": dict(args) if args is not None else {}}
        for k, v in options.items():
            if k not in SUBMISSION_OPTIONS:
                raise TypeError(f"unknown submission option {k!r} (known: {', '.join(sorted(SUBMISSION_OPTIONS))})")
            if v is None:
                continue
            if k in _TIME_FIELDS:
                sub[k] = time_text(v)
            elif k in _DURATION_FIELDS:
                sub[k] = duration_text(v)
            elif k in ("unique_by", "depends_on"):
                sub[k] = list(v)
            else:
                sub[k] = v
        return sub

    def _encode_submission(self, sub: Mapping[str, Any]) -> bytes:
        args = json.dumps(sub.get("args") or {}, separators=(",", ":"))
        if len(args) > self.max_args_size:
            raise InvalidError(
                "invalid", f"args are {len(args)} bytes: more than the {self.max_args_size} bytes a job's args may be", "args"
            )
        return json.dumps(sub, separators=(",", ":")).encode()

    async def _js_publish(self, subject: str, data: bytes, headers: Optional[Mapping[str, str]]) -> None:
        try:
            await self.transport.js_publish(subject, data, headers=headers, timeout=self.timeout)
        except NoRespondersError:
            raise NoRespondersError(subject) from None
        except JetStreamError as e:
            raise JetStreamError(e.code, e.err_code, f"publishing to {subject}: {e.description}") from None

    async def submit(
        self,
        task: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        group: Optional[str] = None,
        id: Optional[str] = None,
        traceparent: Optional[str] = None,
        **options: Any,
    ) -> str:
        """Publishes a job to JetStream (``<prefix>.submit.<group>.<task>``) and returns its id once stored.

        Validation that needs the database happens at ingest and shows as a
        ``rejected`` event (and in :meth:`wait`). ``traceparent`` (W3C) goes
        in the message's header; without it, OpenTelemetry's current span's.
        A submission of the same ``id`` again is the same job.
        """
        sub = self.submission(task, args, group=group, id=id, **options)
        await self._js_publish(self.submit_subject(sub["group"], task), self._encode_submission(sub), _trace_headers(traceparent))
        return str(sub["id"])

    async def submit_reply(
        self,
        task: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        group: Optional[str] = None,
        id: Optional[str] = None,
        traceparent: Optional[str] = None,
        **options: Any,
    ) -> SubmitReply:
        """Submits through the request/reply API: the job is stored (or refused, raised) when it returns."""
        sub = self.submission(task, args, group=group, id=id, **options)
        data = self._encode_submission(sub)
        subject = self.api_subject(sub["group"], "submit")
        reply = await self._request(subject, json.loads(data), headers=_trace_headers(traceparent))
        return SubmitReply(id=str(reply.get("id", sub["id"])), job=JobInfo.from_dict(reply.get("job") or {}), warning=str(reply.get("warning") or ""))

    async def submit_and_wait(
        self,
        task: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        group: Optional[str] = None,
        wait_timeout: Optional[float] = None,
        **options: Any,
    ) -> JobInfo:
        """Submits through the API (a refusal raises at once) and waits until the job ends; returns it, final.

        A failed or cancelled job is returned, not raised: look at ``state``
        and ``error``. ``wait_timeout`` (seconds, default: no bound) raises
        :class:`WaitTimeoutError` carrying the job as last seen; ``timeout``
        is, as in :meth:`submit`, the job's bound on each attempt.
        """
        rep = await self.submit_reply(task, args, group=group, **options)
        if rep.job.final:
            return rep.job
        return await self.wait(rep.job.group or self._group(group), rep.id, timeout=wait_timeout)

    async def submit_many(self, submissions: Iterable[Mapping[str, Any]], *, traceparent: Optional[str] = None) -> list[str]:
        """Publishes many jobs and returns their ids, in order, once JetStream stored all of them.

        Each element is a mapping with ``task`` (required), ``args``,
        ``group`` (default: the client's), ``id`` and any submission option.
        Jobs of one group and task go as JSON arrays of at most 100
        submissions and 512 KiB per message. On an error some may be stored;
        submitting the same ids again is safe.
        """
        headers = _trace_headers(traceparent)
        ids: list[str] = []
        open_batches: dict[tuple[str, str], list[Any]] = {}
        msgs: list[tuple[str, list[bytes]]] = []
        for i, item in enumerate(submissions):
            opts = dict(item)
            task = opts.pop("task", None)
            if not task:
                raise InvalidError("invalid", f"submission {i} names no task", "task")
            try:
                sub = self.submission(task, opts.pop("args", None), group=opts.pop("group", None), id=opts.pop("id", None), **opts)
                data = self._encode_submission(sub)
            except FairwayError as e:
                raise type(e)(e.code, f"submission {i}: {e.message}", e.field) from None
            ids.append(str(sub["id"]))
            key = (sub["group"], task)
            b = open_batches.get(key)
            if b is not None and (len(b[1]) >= SUBMIT_MANY_BATCH or b[2] + len(data) + 2 > SUBMIT_BATCH_BYTES):
                b = None
            if b is None:
                b = [self.submit_subject(*key), [], 1]
                open_batches[key] = b
                msgs.append((b[0], b[1]))
            b[1].append(data)
            b[2] += len(data) + 1
        sem = asyncio.Semaphore(64)

        async def send(subject: str, parts: list[bytes]) -> None:
            async with sem:
                await self._js_publish(subject, b"[" + b",".join(parts) + b"]", headers)

        await asyncio.gather(*(send(s, p) for s, p in msgs))
        return ids

    async def workflow(self, group: Optional[str], jobs: Iterable[Mapping[str, Any]], *, traceparent: Optional[str] = None) -> dict[str, str]:
        """Stores jobs that depend on each other at once (all or none); returns each ref's job id.

        Each job is a mapping with ``task``, ``args``, an optional ``ref``
        (default: its id), ``depends_on`` (refs, or ids of jobs stored
        before) and any submission option.
        """
        g = self._group(group)
        body = []
        for i, item in enumerate(jobs):
            opts = dict(item)
            ref = opts.pop("ref", None)
            task = opts.pop("task", None)
            if not task:
                raise InvalidError("invalid", f"jobs[{i}] names no task", f"jobs[{i}].task")
            opts.pop("group", None)
            sub = self.submission(task, opts.pop("args", None), group=g, id=opts.pop("id", None), **opts)
            if ref:
                sub["ref"] = ref
            body.append(sub)
        reply = await self._request(self.api_subject(g, "workflow"), {"jobs": body}, headers=_trace_headers(traceparent))
        return dict(reply.get("refs") or {})

    # ------------------------------------------------------------------
    # Jobs

    async def _job(self, group: Optional[str], verb: str, body: dict[str, Any]) -> JobInfo:
        reply = await self.api(group, verb, body)
        return JobInfo.from_dict(reply.get("job") or {})

    async def get(self, group: Optional[str], id: str) -> JobInfo:
        """The job ``id`` of ``group``."""
        return await self._job(group, "get", {"id": id})

    async def cancel(self, group: Optional[str], id: str) -> JobInfo:
        """Cancels a job (state ``cancelled``, or still ``running`` until its handler returns)."""
        return await self._job(group, "cancel", {"id": id})

    async def release(self, group: Optional[str], id: str) -> JobInfo:
        """Releases a pending job (it becomes ``waiting``)."""
        return await self._job(group, "release", {"id": id})

    async def retry(self, group: Optional[str], id: str) -> JobInfo:
        """Runs a failed or cancelled job again."""
        return await self._job(group, "retry", {"id": id})

    async def set_priority(self, group: Optional[str], id: str, priority: str) -> JobInfo:
        """Changes a job's priority (``high`` or ``low``)."""
        return await self._job(group, "priority", {"id": id, "priority": priority})

    async def graph(self, group: Optional[str], id: str) -> list[JobInfo]:
        """The job with the jobs it depends on and those that depend on it."""
        reply = await self.api(group, "graph", {"id": id})
        return [JobInfo.from_dict(j) for j in reply.get("jobs") or []]

    async def wait(self, group: Optional[str], id: str, *, timeout: Optional[float] = None) -> JobInfo:
        """Waits until job ``id`` ends and returns it (``success``, ``failed`` or ``cancelled``).

        It may be called right after :meth:`submit`: a job not stored yet is
        waited for; a rejected submission raises its refusal
        (:class:`FairwayError`, code ``invalid`` with its field). With
        ``timeout`` (seconds) it raises :class:`WaitTimeoutError` when the
        job has not ended by then.
        """
        g = self._group(group)
        subject = self.api_subject(g, "wait")
        deadline = None if timeout is None else time.monotonic() + timeout
        last: Optional[JobInfo] = None
        backoff = 0.0
        while True:
            wait_ms = MAX_WAIT_MS
            if deadline is not None:
                left = deadline - time.monotonic()
                wait_ms = min(wait_ms, int((left - min(left / 5, 1.0)) * 1000))
                if wait_ms < 1:
                    raise WaitTimeoutError(g, id, timeout or 0.0, last)
            try:
                reply = await self._request(subject, {"id": id, "wait_ms": wait_ms}, timeout=wait_ms / 1000 + self.timeout)
            except RequestTimeoutError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise WaitTimeoutError(g, id, timeout or 0.0, last) from None
                continue
            except (QuotaError, UnavailableError):
                # Over the group's API rate, or the coordinator busy: ask again shortly.
                backoff = min(max(backoff * 2, 0.02), 1.0)
                await asyncio.sleep(backoff * (0.5 + random.random()))
                continue
            backoff = 0.0
            job = reply.get("job")
            if job:
                last = JobInfo.from_dict(job)
                if last.final:
                    return last

    async def wait_many(
        self, group: Optional[str], ids: Iterable[str], *, timeout: Optional[float] = None, concurrency: int = 16
    ) -> list[JobInfo]:
        """Waits until every job of ``ids`` ended (see :meth:`wait`), ``concurrency`` waits at a time; returns them in order."""
        g = self._group(group)
        sem = asyncio.Semaphore(concurrency)

        async def one(i: str) -> JobInfo:
            async with sem:
                return await self.wait(g, i, timeout=timeout)

        return list(await asyncio.gather(*(one(i) for i in ids)))

    async def list(
        self,
        group: Optional[str] = None,
        *,
        task: Optional[str] = None,
        state: Optional[str] = None,
        priority: Optional[str] = None,
        since: Union[str, datetime, None] = None,
        until: Union[str, datetime, None] = None,
        text: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        full: bool = False,
    ) -> JobPage:
        """A page of the group's jobs, newest first; ``page.next_cursor`` continues it."""
        body: dict[str, Any] = {}
        for k, v in (("task", task), ("state", state), ("priority", priority), ("text", text), ("limit", limit), ("cursor", cursor)):
            if v is not None:
                body[k] = v
        if since is not None:
            body["since"] = time_text(since)
        if until is not None:
            body["until"] = time_text(until)
        if full:
            body["full"] = True
        reply = await self.api(group, "list", body)
        page = JobPage(JobInfo.from_dict(j) for j in reply.get("jobs") or [])
        page.next_cursor = str(reply.get("next_cursor") or "")
        return page

    async def logs(self, group: Optional[str], id: str) -> list[LogLine]:
        """Every log line of a job, oldest first (all pages)."""
        lines: list[LogLine] = []
        cursor = ""
        while True:
            body: dict[str, Any] = {"id": id}
            if cursor:
                body["cursor"] = cursor
            reply = await self.api(group, "logs", body)
            lines.extend(LogLine.from_dict(x) for x in reply.get("logs") or [])
            cursor = str(reply.get("next_cursor") or "")
            if not cursor:
                return lines

    # ------------------------------------------------------------------
    # Events

    def events(
        self,
        group: Optional[str] = None,
        task: Optional[str] = None,
        state: Optional[str] = None,
        *,
        since: Union[str, datetime, None] = None,
        batch: int = 256,
    ) -> "EventStream":
        """Follows job events (an async iterator of :class:`Event`), in order, without duplicates.

        ``group``/``task``/``state`` filter (default: all). ``since``: None
        for new events only, ``"all"`` for every stored one, or a time.
        Close it (``async with`` or :meth:`EventStream.close`) when done.
        """
        for name, v in (("group", group), ("task", task)):
            if v:
                check_name(name, v)
        filt = f"{self.prefix}.events.{group or '*'}.{task or '*'}.{state or '*'}"
        return EventStream(self, filt, since, batch)


class EventStream:
    """An async iterator of events read by a pull consumer on the events stream."""

    def __init__(self, client: Client, filter_subject: str, since: Union[str, datetime, None], batch: int) -> None:
        self._client = client
        self.filter_subject = filter_subject
        self._since = since
        self._batch = batch
        self._pull: Optional[PullConsumer] = None
        self._pending: deque[Event] = deque()
        self._seen: set[str] = set()
        self._seen_order: deque[str] = deque()
        self._last_seq = 0
        self._closed = False
        self.duplicates = 0

    async def __aenter__(self) -> "EventStream":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __aiter__(self) -> "EventStream":
        return self

    def _config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "ack_policy": "none",
            "filter_subject": self.filter_subject,
            "inactive_threshold": int(300 * 1e9),
            "mem_storage": True,
            "num_replicas": 1,
            "max_waiting": 4,
        }
        if self._last_seq:
            cfg["deliver_policy"] = "by_start_sequence"
            cfg["opt_start_seq"] = self._last_seq + 1
        elif self._since is None:
            cfg["deliver_policy"] = "new"
        elif self._since == "all":
            cfg["deliver_policy"] = "all"
        else:
            cfg["deliver_policy"] = "by_start_time"
            cfg["opt_start_time"] = time_text(self._since)
        return cfg

    async def start(self) -> None:
        """Creates the consumer (done by the first iteration otherwise): events from then on are kept."""
        if self._pull is not None:
            return
        t = self._client.transport
        stream = self._client.event_stream
        try:
            info = await t.create_consumer(stream, self._config())
        except JetStreamError as e:
            raise JetStreamError(
                e.code, e.err_code, f"following events on stream {stream}: {e.description} (is a coordinator running? it creates the stream)"
            ) from None
        name = str(info.get("name") or info.get("config", {}).get("name") or "")
        self._pull = await t.pull(stream, name)

    def _remember(self, ev_id: str) -> bool:
        if ev_id in self._seen:
            self.duplicates += 1
            return False
        self._seen.add(ev_id)
        self._seen_order.append(ev_id)
        if len(self._seen_order) > 50_000:
            self._seen.discard(self._seen_order.popleft())
        return True

    def _take(self, msg: Msg) -> None:
        if msg.reply.startswith("$JS.ACK."):
            tokens = msg.reply.split(".")
            try:
                # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.… or, with a domain and account hash, two tokens more
                self._last_seq = int(tokens[5] if len(tokens) < 12 else tokens[7])
            except (IndexError, ValueError):
                pass
        try:
            data = json.loads(msg.data)
        except ValueError:
            ev = Event(id=msg.header("Nats-Msg-Id"), error=f"undecodable event on {msg.subject}")
            self._pending.append(ev)
            return
        items = data if isinstance(data, list) else [data]
        for item in items:
            if not isinstance(item, dict):
                continue
            ev_id = str(item.get("id") or "")
            if ev_id and not self._remember(ev_id):
                continue
            self._pending.append(Event.from_dict(item))

    async def __anext__(self) -> Event:
        while not self._pending:
            if self._closed:
                raise StopAsyncIteration
            if self._pull is None:
                await self.start()
            assert self._pull is not None
            try:
                msgs = await self._pull.fetch(self._batch, expires=5.0)
            except (JetStreamError, NoRespondersError):
                if self._closed:
                    raise StopAsyncIteration from None
                # The consumer is gone (its server restarted, say): again from the next event.
                await self._reset()
                continue
            except TransportError:
                if self._closed:
                    raise StopAsyncIteration from None
                await asyncio.sleep(0.5)
                continue
            for m in msgs:
                self._take(m)
        return self._pending.popleft()

    async def _reset(self) -> None:
        old, self._pull = self._pull, None
        if old is not None:
            await old.close()
        await asyncio.sleep(0.2)

    async def close(self) -> None:
        """Stops following (the ephemeral consumer is removed after a period of inactivity)."""
        self._closed = True
        if self._pull is not None:
            await self._pull.close()


async def connect(
    servers: Union[str, list[str]] = "nats://127.0.0.1:4222",
    *,
    creds: str = "",
    user: str = "",
    password: str = "",
    token: str = "",
    nkey_seed: str = "",
    tls: Union[bool, ssl.SSLContext, None] = None,
    tls_ca_file: str = "",
    tls_cert_file: str = "",
    tls_key_file: str = "",
    prefix: str = "fairway",
    group: Optional[str] = None,
    timeout: float = 10.0,
    name: str = "fairway-python",
    transport: Optional[Transport] = None,
    **nats_options: Any,
) -> Client:
    """Connects to NATS and returns a :class:`Client` (an async context manager).

    ``servers``: one URL or a list (``nats://``, ``tls://``). Log in with
    ``creds`` (a ``.creds`` file: needs ``fairway-client[creds]``), ``user`` and
    ``password``, or ``token``. TLS: ``tls=True`` or an :class:`ssl.SSLContext`,
    ``tls_ca_file``, ``tls_cert_file``/``tls_key_file`` for a client
    certificate; a ``tls://`` URL or a server that requires TLS turns it on.
    ``transport``: use this :class:`~fairway.transport.Transport` instead of
    connecting (the other connection arguments are then ignored).
    """
    if transport is None:
        from .natsconn import connect_nats

        transport = await connect_nats(
            servers,
            creds=creds,
            user=user,
            password=password,
            token=token,
            nkey_seed=nkey_seed,
            tls=tls,
            tls_ca_file=tls_ca_file,
            tls_cert_file=tls_cert_file,
            tls_key_file=tls_key_file,
            name=name,
            **nats_options,
        )
    return Client(transport, prefix=prefix, group=group, timeout=timeout)
