"""The transport seam: everything the rest of the package needs from NATS.

:class:`Transport` is the only way :mod:`fairway.client` and
:mod:`fairway.worker` reach NATS. :class:`fairway.natsconn.NatsTransport`
implements it with the small part of the NATS client protocol that Fairway
needs; a transport built on nats-py (or anything else) can replace it by
implementing the same abstract methods and passing it to
:class:`fairway.Client`.

Errors a transport raises: :class:`~fairway.errors.NoRespondersError`,
:class:`~fairway.errors.RequestTimeoutError`,
:class:`~fairway.errors.MaxPayloadError`,
:class:`~fairway.errors.JetStreamError`,
:class:`~fairway.errors.ConnectionClosedError`, and other
:class:`~fairway.errors.TransportError`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Mapping, Optional

__all__ = ["Msg", "PubAck", "Subscription", "PullConsumer", "Transport", "MsgCallback"]


class Msg:
    """A message received: its subject, reply subject, payload and headers.

    ``status`` is the NATS status of a status message (``"503"``, ``"404"``,
    ``"408"``…) and ``description`` its text; both are empty otherwise.
    """

    __slots__ = ("subject", "reply", "data", "headers", "status", "description")

    def __init__(
        self,
        subject: str,
        reply: str,
        data: bytes,
        headers: Optional[dict[str, str]] = None,
        status: str = "",
        description: str = "",
    ) -> None:
        self.subject = subject
        self.reply = reply
        self.data = data
        self.headers = headers
        self.status = status
        self.description = description

    def header(self, name: str, default: str = "") -> str:
        """The value of header ``name`` (exact case first, then ignoring case)."""
        h = self.headers
        if not h:
            return default
        v = h.get(name)
        if v is not None:
            return v
        low = name.lower()
        for k, val in h.items():
            if k.lower() == low:
                return val
        return default

    def __repr__(self) -> str:
        return f"Msg(subject={self.subject!r}, reply={self.reply!r}, data={self.data[:64]!r}, status={self.status!r})"


MsgCallback = Callable[[Msg], None]


@dataclass(frozen=True)
class PubAck:
    """JetStream's acknowledgement of a published message."""

    stream: str
    seq: int
    duplicate: bool = False
    domain: str = ""


class Subscription(abc.ABC):
    """A subscription. Without a callback it is an async iterator of :class:`Msg`.

    Its queue is bounded: messages that arrive while it is full are dropped
    and counted in :attr:`dropped` (a slow consumer), never blocking the
    connection's reader.
    """

    subject: str
    queue: str

    @property
    @abc.abstractmethod
    def dropped(self) -> int:
        """Messages dropped because the queue was full."""

    @abc.abstractmethod
    async def next_msg(self, timeout: Optional[float] = None) -> Msg:
        """The next message; raises :class:`TimeoutError` after ``timeout`` seconds."""

    @abc.abstractmethod
    async def unsubscribe(self) -> None:
        """Ends the subscription; the iterator then stops."""

    def __aiter__(self) -> AsyncIterator[Msg]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Msg]:
        from .errors import ConnectionClosedError

        while True:
            try:
                yield await self.next_msg()
            except (StopAsyncIteration, ConnectionClosedError):
                return


class PullConsumer(abc.ABC):
    """A JetStream pull consumer bound to a stream: fetch batches of messages."""

    stream: str
    name: str

    @abc.abstractmethod
    async def fetch(self, batch: int = 1, *, expires: float = 5.0, no_wait: bool = False) -> list[Msg]:
        """Up to ``batch`` messages, in stream order: returns as soon as some came.

        It waits at most ``expires`` seconds for the first. With ``no_wait``
        it returns at once with what is there. An empty list means none came
        (the 404/408 status of the pull request, or ``expires``).
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Stops reading (the consumer itself is left to its inactivity threshold)."""


class Transport(abc.ABC):
    """What Fairway needs from a NATS client: core NATS, request/reply and JetStream."""

    @property
    @abc.abstractmethod
    def max_payload(self) -> int:
        """The server's max_payload, in bytes."""

    @property
    @abc.abstractmethod
    def is_connected(self) -> bool:
        """Whether the connection is up now (it may be reconnecting)."""

    @abc.abstractmethod
    async def publish(
        self, subject: str, data: bytes = b"", *, headers: Optional[Mapping[str, str]] = None, reply: str = ""
    ) -> None:
        """Publishes a core NATS message."""

    @abc.abstractmethod
    async def request(
        self, subject: str, data: bytes = b"", *, headers: Optional[Mapping[str, str]] = None, timeout: float = 5.0
    ) -> Msg:
        """Sends a request and returns the first reply.

        Raises NoRespondersError when nobody listens, RequestTimeoutError
        when no reply came within ``timeout`` seconds.
        """

    @abc.abstractmethod
    async def subscribe(
        self,
        subject: str,
        *,
        queue: str = "",
        cb: Optional[MsgCallback] = None,
        pending_msgs: int = 65536,
        pending_bytes: int = 64 << 20,
    ) -> Subscription:
        """Subscribes to ``subject``.

        With ``cb`` (a plain function, called on the reader: it must not
        block) each message is handed to it; without, the subscription is an
        async iterator whose queue holds at most ``pending_msgs`` messages
        and ``pending_bytes`` bytes, beyond which messages are dropped and
        counted.
        """

    @abc.abstractmethod
    async def flush(self, timeout: float = 5.0) -> None:
        """Waits until the server has processed everything sent so far."""

    @abc.abstractmethod
    async def js_publish(
        self,
        subject: str,
        data: bytes,
        *,
        headers: Optional[Mapping[str, str]] = None,
        msg_id: str = "",
        timeout: float = 5.0,
    ) -> PubAck:
        """Publishes to a JetStream stream and waits for its acknowledgement.

        Raises JetStreamError when the stream refused it, NoRespondersError
        when no stream takes the subject.
        """

    @abc.abstractmethod
    async def js_api(self, api: str, body: Optional[Mapping[str, Any]] = None, *, timeout: float = 5.0) -> dict[str, Any]:
        """Calls ``$JS.API.<api>`` and returns its answer; an ``error`` raises JetStreamError."""

    @abc.abstractmethod
    async def create_consumer(self, stream: str, config: Mapping[str, Any], *, timeout: float = 5.0) -> dict[str, Any]:
        """Creates a consumer on ``stream`` (ephemeral unless the config names one) and returns its info."""

    @abc.abstractmethod
    async def pull(self, stream: str, consumer: str) -> PullConsumer:
        """Reads consumer ``consumer`` of ``stream`` by pull requests."""

    @abc.abstractmethod
    async def ack(self, msg: Msg) -> None:
        """Acknowledges a JetStream message."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Flushes what is buffered (briefly) and closes the connection for good."""
