"""A small NATS client on asyncio: the part of the protocol Fairway needs.

It speaks the NATS client protocol (INFO, CONNECT, PING/PONG, PUB/HPUB,
SUB/UNSUB, MSG/HMSG, +OK/-ERR) over TCP or TLS, logs in with a user and
password, a token, an nkey or a ``.creds`` file (user JWT and the nonce
signed with its nkey seed), reconnects with backoff to its servers and
subscribes again, muxes requests over one inbox subscription, and carries
the JetStream calls Fairway uses: publish with acknowledgement, consumer
creation, pull requests and acks. One reader task per connection parses
everything; subscriptions have bounded queues (a slow consumer loses
messages, counted, and never blocks the reader).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import secrets
import ssl
import time
import urllib.parse
from collections import deque
from typing import Any, Callable, Mapping, Optional, Union

from ._version import __version__
from .errors import (
    AuthorizationError,
    ConnectionClosedError,
    JetStreamError,
    MaxPayloadError,
    NoRespondersError,
    RequestTimeoutError,
    TransportError,
)
from .transport import Msg, MsgCallback, PubAck, PullConsumer, Subscription, Transport

__all__ = ["NatsTransport", "connect_nats", "new_inbox"]

log = logging.getLogger("fairway.nats")

_CRLF = b"\r\n"
_PING = b"PING\r\n"
_PONG = b"PONG\r\n"
_DISCONNECTED, _CONNECTING, _CONNECTED, _RECONNECTING, _CLOSED = range(5)
_NUID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _nuid(n: int = 22) -> str:
    return "".join(secrets.choice(_NUID_ALPHABET) for _ in range(n))


def new_inbox(prefix: str = "_INBOX") -> str:
    """A fresh inbox subject."""
    return f"{prefix}.{_nuid()}"


class _Server:
    __slots__ = ("url", "scheme", "host", "port", "user", "password", "token", "discovered", "failures")

    def __init__(self, url: str, discovered: bool = False) -> None:
        if "://" not in url:
            url = "nats://" + url
        u = urllib.parse.urlparse(url)
        if u.scheme not in ("nats", "tls"):
            raise ValueError(f"unsupported NATS URL scheme {u.scheme!r} in {url!r}: use nats:// or tls://")
        self.url = url
        self.scheme = u.scheme
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 4222
        self.user = urllib.parse.unquote(u.username) if u.username else ""
        self.password = urllib.parse.unquote(u.password) if u.password else ""
        self.token = ""
        if self.user and not u.password:
            self.token, self.user = self.user, ""
        self.discovered = discovered
        self.failures = 0

    def __repr__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


def _parse_headers(raw: bytes) -> tuple[dict[str, str], str, str]:
    """Headers, status and description of an HMSG header block."""
    text = raw.decode("utf-8", "replace")
    lines = text.split("\r\n")
    first = lines[0]
    status = description = ""
    if len(first) > 8:  # "NATS/1.0 503 No Responders"
        rest = first[8:].strip()
        status, _, description = rest.partition(" ")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        k, sep, v = line.partition(":")
        if sep:
            k = k.strip()
            v = v.strip()
            if k in headers:
                headers[k] = headers[k] + "," + v
            else:
                headers[k] = v
    return headers, status, description


def _encode_headers(headers: Mapping[str, str]) -> bytes:
    parts = ["NATS/1.0\r\n"]
    for k, v in headers.items():
        if "\r" in k or "\n" in k or ":" in k or "\r" in v or "\n" in v:
            raise ValueError(f"invalid header {k!r}: {v!r}")
        parts.append(f"{k}: {v}\r\n")
    parts.append("\r\n")
    return "".join(parts).encode()


class _Sub(Subscription):
    """A subscription of :class:`NatsTransport`."""

    def __init__(
        self,
        conn: "NatsTransport",
        sid: int,
        subject: str,
        queue: str,
        cb: Optional[MsgCallback],
        pending_msgs: int,
        pending_bytes: int,
    ) -> None:
        self._conn = conn
        self.sid = sid
        self.subject = subject
        self.queue = queue
        self.cb = cb
        self._pending_msgs = pending_msgs
        self._pending_bytes = pending_bytes
        self._q: deque[Msg] = deque()
        self._bytes = 0
        self._waiter: Optional[asyncio.Future[None]] = None
        self._dropped = 0
        self._slow = False  # reported as slow since it last had room
        self.closed = False

    @property
    def dropped(self) -> int:
        return self._dropped

    @property
    def pending(self) -> int:
        """Messages queued, not read yet."""
        return len(self._q)

    def _deliver(self, msg: Msg) -> None:
        cb = self.cb
        if cb is not None:
            try:
                cb(msg)
            except Exception:  # a callback's bug must not kill the reader
                log.exception("subscription callback on %s failed", self.subject)
            return
        size = len(msg.data)
        if len(self._q) >= self._pending_msgs or self._bytes + size > self._pending_bytes:
            self._dropped += 1
            if not self._slow:
                self._slow = True
                self._conn._slow_consumer(self)
            return
        self._slow = False
        self._q.append(msg)
        self._bytes += size
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def next_msg(self, timeout: Optional[float] = None) -> Msg:
        while not self._q:
            if self.closed:
                raise StopAsyncIteration
            loop = asyncio.get_running_loop()
            self._waiter = w = loop.create_future()
            timer = loop.call_later(timeout, _expire, w) if timeout is not None else None
            try:
                await w
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
            if w.result() is _TIMEOUT and not self._q:
                raise TimeoutError(f"no message on {self.subject} within {timeout:g}s")
        msg = self._q.popleft()
        self._bytes -= len(msg.data)
        return msg

    def _close(self) -> None:
        self.closed = True
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def unsubscribe(self) -> None:
        if self.closed:
            return
        self._close()
        self._conn._unsubscribe(self)


_TIMEOUT = object()


def _expire(fut: "asyncio.Future[Any]") -> None:
    if not fut.done():
        fut.set_result(_TIMEOUT)


class _Pull(PullConsumer):
    """Fetches from a pull consumer through an inbox subscription of its own.

    At most one pull request is open at a time: a fetch that returns before
    its request ended (it returns as soon as messages came) leaves it open,
    and the next fetch reads what it brings before asking again.
    """

    def __init__(self, conn: "NatsTransport", stream: str, name: str, sub: _Sub, prefix: str) -> None:
        self._conn = conn
        self.stream = stream
        self.name = name
        self._sub = sub
        self._prefix = prefix
        self._n = 0
        self._lock = asyncio.Lock()
        self._reply = ""  # the open request's reply subject ("" when none is open)
        self._remaining = 0
        self._open_until = 0.0

    def _ask(self, batch: int, expires: float, no_wait: bool) -> None:
        self._n += 1
        self._reply = f"{self._prefix}.{self._n}"
        body: dict[str, Any] = {"batch": batch}
        if no_wait:
            body["no_wait"] = True
            self._open_until = time.monotonic() + 5.0
        else:
            body["expires"] = int(expires * 1e9)
            self._open_until = time.monotonic() + expires + 1.0
        self._remaining = batch
        self._conn._send_pub(f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{self.name}", self._reply, None, json.dumps(body).encode())

    def _take(self, msg: Msg, out: list[Msg]) -> str:
        """Handles one message: the status that ended the open request, else ""."""
        if msg.status:
            if msg.subject != self._reply or msg.status == "100":
                return ""  # the end of an earlier request, or a heartbeat
            self._reply = ""
            if msg.status in ("404", "408") or (msg.status == "409" and out):
                return msg.status
            raise JetStreamError(int(msg.status), 0, msg.description or f"pull request: status {msg.status}")
        out.append(msg)
        self._remaining -= 1
        if self._remaining <= 0:
            self._reply = ""
        return ""

    async def fetch(self, batch: int = 1, *, expires: float = 5.0, no_wait: bool = False) -> list[Msg]:
        """Up to ``batch`` messages, returned as soon as some came (or the request ended, or ``expires``)."""
        batch = max(int(batch), 1)
        async with self._lock:
            out: list[Msg] = []
            deadline = time.monotonic() + (0.0 if no_wait else expires)
            asked = False
            ended = ""
            sub = self._sub
            while True:
                while len(out) < batch and sub.pending:
                    ended = self._take(await sub.next_msg(), out) or ended
                if out:
                    return out
                now = time.monotonic()
                if self._reply and now > self._open_until:
                    self._reply = ""  # its end got lost (a reconnect, say)
                if not self._reply:
                    if asked and (no_wait or ended == "404" or now >= deadline):
                        return out
                    self._ask(batch, max(deadline - now, 0.05), no_wait)
                    asked = True
                elif no_wait and not asked:
                    return out  # a request is open: whatever there is came already
                wait = (self._open_until if no_wait else deadline) - time.monotonic()
                if wait <= 0:
                    return out
                try:
                    msg = await sub.next_msg(timeout=wait)
                except TimeoutError:
                    return out
                except StopAsyncIteration:
                    raise ConnectionClosedError("the pull subscription was closed") from None
                ended = self._take(msg, out) or ended

    async def close(self) -> None:
        await self._sub.unsubscribe()


class NatsTransport(Transport):
    """A NATS connection implementing :class:`~fairway.transport.Transport`.

    Create it with :func:`connect_nats` (or ``await NatsTransport(...).connect()``).

    :param servers: URLs (``nats://host:port``, ``tls://host:port``, or
        ``host:port``); a comma-separated string is split. Credentials in a
        URL (``nats://user:pass@host``, ``nats://token@host``) are used when
        none are given.
    :param creds: a ``.creds`` file (user JWT and nkey seed): needs PyNaCl.
    :param nkey_seed: an nkey seed (``SU…``) for nkey authentication.
    :param tls: ``True`` for TLS with the system's CAs, an
        :class:`ssl.SSLContext`, or ``None``: TLS only when the URL says
        ``tls://`` or the server requires it.
    :param tls_ca_file, tls_cert_file, tls_key_file: a CA to trust and a
        client certificate, used to build the TLS context.
    :param max_reconnect_attempts: rounds over the servers before giving
        up; ``-1`` (the default) never gives up.
    :param reconnect_wait: the first pause between rounds, doubling up to
        ``reconnect_max_wait``.
    :param reconnect_buffer: bytes kept while disconnected, sent on
        reconnect; publishing beyond raises TransportError.
    :param on_slow_consumer, on_error, on_disconnected, on_reconnected:
        callbacks (plain functions).
    """

    def __init__(
        self,
        servers: Union[str, list[str]] = "nats://127.0.0.1:4222",
        *,
        name: str = "fairway-python",
        user: str = "",
        password: str = "",
        token: str = "",
        creds: str = "",
        nkey_seed: str = "",
        tls: Union[bool, ssl.SSLContext, None] = None,
        tls_ca_file: str = "",
        tls_cert_file: str = "",
        tls_key_file: str = "",
        tls_hostname: str = "",
        connect_timeout: float = 5.0,
        max_reconnect_attempts: int = -1,
        reconnect_wait: float = 0.1,
        reconnect_max_wait: float = 2.0,
        reconnect_buffer: int = 8 << 20,
        ping_interval: float = 20.0,
        max_outstanding_pings: int = 3,
        inbox_prefix: str = "_INBOX",
        no_echo: bool = False,
        on_slow_consumer: Optional[Callable[[Subscription], None]] = None,
        on_error: Optional[Callable[[Exception], None]] = None,
        on_disconnected: Optional[Callable[[], None]] = None,
        on_reconnected: Optional[Callable[[], None]] = None,
    ) -> None:
        if isinstance(servers, str):
            servers = [s.strip() for s in servers.split(",") if s.strip()]
        if not servers:
            raise ValueError("no NATS server given")
        self._servers = [_Server(s) for s in servers]
        self._name = name
        self._user, self._password, self._token = user, password, token
        self._jwt = ""
        self._seed: bytes = b""
        if creds:
            from .nkeys import read_creds

            self._jwt, self._seed = read_creds(creds)
            from .nkeys import _signing_key

            _signing_key(self._seed)  # fail now, not at the first login, without PyNaCl
        elif nkey_seed:
            self._seed = nkey_seed.encode()
        self._tls_opt = tls
        self._tls_ctx: Optional[ssl.SSLContext] = None
        self._tls_ca_file, self._tls_cert_file, self._tls_key_file = tls_ca_file, tls_cert_file, tls_key_file
        self._tls_hostname = tls_hostname
        self._connect_timeout = connect_timeout
        self._max_reconnect = max_reconnect_attempts
        self._reconnect_wait = reconnect_wait
        self._reconnect_max_wait = reconnect_max_wait
        self._reconnect_buffer = reconnect_buffer
        self._ping_interval = ping_interval
        self._max_pings = max_outstanding_pings
        self._inbox_prefix = inbox_prefix
        self._no_echo = no_echo
        self.on_slow_consumer = on_slow_consumer
        self.on_error = on_error
        self.on_disconnected = on_disconnected
        self.on_reconnected = on_reconnected

        self._state = _DISCONNECTED
        self._info: dict[str, Any] = {}
        self._max_payload = 1 << 20
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._reader_task: Optional[asyncio.Task[None]] = None
        self._ping_task: Optional[asyncio.Task[None]] = None
        self._reconnect_task: Optional[asyncio.Task[None]] = None
        self._out: list[bytes] = []
        self._out_size = 0
        self._flush_scheduled = False
        self._pongs: deque[Optional[asyncio.Future[None]]] = deque()  # one per PING sent, None for the keep-alive ones
        self._pings_out = 0
        self._subs: dict[int, _Sub] = {}
        self._sid = 0
        self._resp_sub: Optional[_Sub] = None
        self._resp_prefix = ""
        self._resp_map: dict[str, asyncio.Future[Any]] = {}
        self._resp_n = 0
        self._current: Optional[_Server] = None
        self._last_error: Optional[BaseException] = None
        self._closed_event: Optional[asyncio.Event] = None
        self.reconnects = 0
        self.slow_consumer_events = 0

    # ------------------------------------------------------------------
    # Connecting

    @property
    def max_payload(self) -> int:
        return self._max_payload

    @property
    def is_connected(self) -> bool:
        return self._state == _CONNECTED

    @property
    def is_closed(self) -> bool:
        return self._state == _CLOSED

    @property
    def server_info(self) -> dict[str, Any]:
        """The server's latest INFO."""
        return self._info

    @property
    def connected_url(self) -> str:
        return repr(self._current) if self._current else ""

    async def connect(self) -> "NatsTransport":
        """Connects to the first server that answers; raises the last error when none does."""
        self._closed_event = asyncio.Event()
        self._state = _CONNECTING
        errors: list[str] = []
        for srv in list(self._servers):
            try:
                await self._connect_to(srv)
                break
            except (OSError, TransportError, asyncio.TimeoutError, ssl.SSLError, ValueError) as e:
                errors.append(f"{srv}: {e}")
                srv.failures += 1
                self._last_error = e
        else:
            self._state = _CLOSED
            err = self._last_error
            msg = "connecting to NATS failed: " + "; ".join(errors)
            if isinstance(err, AuthorizationError):
                raise AuthorizationError(msg) from err
            raise TransportError(msg) from err
        self._ping_task = asyncio.get_running_loop().create_task(self._ping_loop())
        return self

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls_ctx is None:
            if isinstance(self._tls_opt, ssl.SSLContext):
                self._tls_ctx = self._tls_opt
            else:
                ctx = ssl.create_default_context(cafile=self._tls_ca_file or None)
                if self._tls_cert_file:
                    ctx.load_cert_chain(self._tls_cert_file, self._tls_key_file or None)
                self._tls_ctx = ctx
        return self._tls_ctx

    async def _connect_to(self, srv: _Server) -> None:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(srv.host, srv.port, limit=1 << 20), self._connect_timeout
        )
        try:
            line = await asyncio.wait_for(reader.readline(), self._connect_timeout)
            if not line.startswith(b"INFO "):
                raise TransportError(f"{srv}: expected INFO from the server, got {line[:80]!r}")
            info = json.loads(line[5:])
            want_tls = (
                srv.scheme == "tls"
                or bool(self._tls_opt)
                or bool(self._tls_ca_file or self._tls_cert_file)
                or bool(info.get("tls_required"))
            )
            if want_tls:
                if not info.get("tls_required") and not info.get("tls_available"):
                    raise TransportError(f"{srv}: TLS is asked for but the server does not offer it")
                await asyncio.wait_for(
                    writer.start_tls(self._tls_context(), server_hostname=self._tls_hostname or srv.host),
                    self._connect_timeout,
                )
            if not info.get("headers", False):
                raise TransportError(f"{srv}: the server does not support headers (NATS 2.2 or later needed)")
            await self._handshake(srv, info, reader, writer)
        except BaseException:
            writer.close()
            raise
        self._info = info
        self._max_payload = int(info.get("max_payload") or (1 << 20))
        self._reader, self._writer = reader, writer
        self._current = srv
        srv.failures = 0
        self._add_discovered(info)
        self._state = _CONNECTED
        self._pings_out = 0
        # Subscriptions again (after a reconnect), then what waited meanwhile.
        parts = [self._sub_proto(s) for s in self._subs.values()]
        if parts:
            writer.write(b"".join(parts))
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop(reader))
        self._flush_out()

    async def _handshake(
        self, srv: _Server, info: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        opts: dict[str, Any] = {
            "verbose": False,
            "pedantic": False,
            "tls_required": bool(info.get("tls_required")),
            "name": self._name,
            "lang": "python-fairway",
            "version": __version__,
            "protocol": 1,
            "headers": True,
            "no_responders": True,
            "echo": not self._no_echo,
        }
        user, password, token = self._user or srv.user, self._password or srv.password, self._token or srv.token
        if self._seed:
            from .nkeys import public_key, sign_nonce

            nonce = info.get("nonce", "")
            if self._jwt:
                opts["jwt"] = self._jwt
            else:
                opts["nkey"] = public_key(self._seed)
            if nonce:
                opts["sig"] = sign_nonce(self._seed, nonce)
        elif user:
            opts["user"] = user
            opts["pass"] = password
        elif token:
            opts["auth_token"] = token
        writer.write(b"CONNECT " + json.dumps(opts).encode() + _CRLF + _PING)
        await writer.drain()
        deadline = time.monotonic() + self._connect_timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TransportError(f"{srv}: no PONG after CONNECT within {self._connect_timeout:g}s")
            line = await asyncio.wait_for(reader.readline(), left)
            if not line:
                raise TransportError(f"{srv}: the server closed the connection during the handshake")
            line = line.rstrip(b"\r\n")
            if line == b"PONG":
                return
            if line == b"PING":
                writer.write(_PONG)
            elif line.startswith(b"-ERR"):
                text = line[4:].strip().strip(b"'").decode(errors="replace")
                if "authorization" in text.lower() or "authentication" in text.lower() or "expired" in text.lower():
                    raise AuthorizationError(f"{srv}: {text}")
                raise TransportError(f"{srv}: {text}")
            elif line.startswith(b"INFO "):
                info.update(json.loads(line[5:]))

    def _add_discovered(self, info: dict[str, Any]) -> None:
        known = {(s.host, s.port) for s in self._servers}
        scheme = self._current.scheme if self._current else "nats"
        for url in info.get("connect_urls") or []:
            try:
                srv = _Server(f"{scheme}://{url}", discovered=True)
            except ValueError:
                continue
            if (srv.host, srv.port) not in known:
                self._servers.append(srv)
                known.add((srv.host, srv.port))

    # ------------------------------------------------------------------
    # Reading

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        buf = bytearray()
        need: Optional[tuple[str, int, str, int, int]] = None  # subject, sid, reply, header len, total len
        subs = self._subs
        try:
            while True:
                chunk = await reader.read(1 << 16)
                if not chunk:
                    raise TransportError("the server closed the connection")
                buf += chunk
                pos = 0
                n = len(buf)
                while pos < n:
                    if need is not None:
                        subject, sid, reply, hlen, total = need
                        if n - pos < total + 2:
                            break
                        sub = subs.get(sid)
                        if sub is not None:
                            if hlen:
                                headers, status, desc = _parse_headers(bytes(buf[pos : pos + hlen]))
                                msg = Msg(subject, reply, bytes(buf[pos + hlen : pos + total]), headers, status, desc)
                            else:
                                msg = Msg(subject, reply, bytes(buf[pos : pos + total]))
                            sub._deliver(msg)
                        pos += total + 2
                        need = None
                        continue
                    end = buf.find(_CRLF, pos)
                    if end < 0:
                        break
                    line = bytes(buf[pos:end])
                    pos = end + 2
                    c = line[:1]
                    if c == b"M" or c == b"H":  # MSG / HMSG
                        parts = line.split(b" ")
                        if parts[0] == b"MSG":
                            if len(parts) == 4:
                                need = (parts[1].decode(), int(parts[2]), "", 0, int(parts[3]))
                            else:
                                need = (parts[1].decode(), int(parts[2]), parts[3].decode(), 0, int(parts[4]))
                        else:
                            if len(parts) == 5:
                                need = (parts[1].decode(), int(parts[2]), "", int(parts[3]), int(parts[4]))
                            else:
                                need = (parts[1].decode(), int(parts[2]), parts[3].decode(), int(parts[4]), int(parts[5]))
                    elif line == b"PING":
                        self._send(_PONG)
                    elif line == b"PONG":
                        self._pings_out = 0
                        if self._pongs:
                            f = self._pongs.popleft()
                            if f is not None and not f.done():
                                f.set_result(None)
                    elif line == b"+OK":
                        pass
                    elif line.startswith(b"INFO "):
                        try:
                            info = json.loads(line[5:])
                        except ValueError:
                            continue
                        self._info.update(info)
                        self._add_discovered(info)
                        if info.get("ldm"):
                            log.info("the NATS server %s enters lame duck mode", self._current)
                    elif line.startswith(b"-ERR"):
                        self._server_error(line[4:].strip().strip(b"'").decode(errors="replace"))
                if pos:
                    del buf[:pos]
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if self._state in (_CONNECTED,) and self._reader is reader:
                self._lost(e)

    def _server_error(self, text: str) -> None:
        low = text.lower()
        err: Exception
        if "permissions violation" in low:
            err = AuthorizationError(text)
        else:
            err = TransportError(text)
        log.warning("NATS server error: %s", text)
        _hook("on_error", self.on_error, err)
        # Every other -ERR ends the connection; the server closes it and
        # the reader notices.

    def _slow_consumer(self, sub: _Sub) -> None:
        self.slow_consumer_events += 1
        log.warning(
            "slow consumer on %s: its queue is full (%d messages); dropping messages (%d so far)",
            sub.subject,
            sub.pending,
            sub.dropped,
        )
        _hook("on_slow_consumer", self.on_slow_consumer, sub)

    # ------------------------------------------------------------------
    # Reconnecting

    def _lost(self, err: BaseException) -> None:
        """The connection broke: reconnect in the background."""
        if self._state != _CONNECTED:
            return
        self._state = _RECONNECTING
        self._last_error = err
        log.warning("NATS connection to %s lost (%s); reconnecting", self._current, err)
        w = self._writer
        self._writer = self._reader = None
        if w is not None:
            w.close()
        while self._pongs:
            f = self._pongs.popleft()
            if f is not None and not f.done():
                f.set_exception(TransportError("disconnected before the server answered"))
        _hook("on_disconnected", self.on_disconnected)
        self._reconnect_task = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        rounds = 0
        delay = self._reconnect_wait
        while self._state == _RECONNECTING:
            # The server just left first, others before it.
            order = sorted(self._servers, key=lambda s: s is self._current)
            for srv in order:
                if self._state != _RECONNECTING:
                    return
                try:
                    await self._connect_to(srv)
                except (OSError, TransportError, asyncio.TimeoutError, ssl.SSLError, ValueError) as e:
                    srv.failures += 1
                    self._last_error = e
                    continue
                self.reconnects += 1
                log.info("NATS reconnected to %s", srv)
                _hook("on_reconnected", self.on_reconnected)
                return
            rounds += 1
            if 0 <= self._max_reconnect <= rounds:
                log.error("NATS: giving up reconnecting after %d rounds: %s", rounds, self._last_error)
                await self._close_now(ConnectionClosedError(f"reconnecting failed: {self._last_error}"))
                return
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, self._reconnect_max_wait)

    async def _ping_loop(self) -> None:
        while self._state != _CLOSED:
            await asyncio.sleep(self._ping_interval)
            if self._state != _CONNECTED:
                continue
            if self._pings_out >= self._max_pings:
                self._lost(TransportError(f"{self._pings_out} PINGs unanswered: stale connection"))
                continue
            self._pings_out += 1
            self._pongs.append(None)
            self._send(_PING)

    # ------------------------------------------------------------------
    # Writing

    def _send(self, data: bytes) -> None:
        state = self._state
        if state == _CLOSED:
            raise ConnectionClosedError("the NATS connection is closed")
        if state != _CONNECTED and self._out_size + len(data) > self._reconnect_buffer:
            raise TransportError(
                f"not connected to NATS, and the reconnect buffer ({self._reconnect_buffer} bytes) is full"
            )
        self._out.append(data)
        self._out_size += len(data)
        if not self._flush_scheduled and state == _CONNECTED:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_out)

    def _flush_out(self) -> None:
        self._flush_scheduled = False
        w = self._writer
        if self._state != _CONNECTED or w is None or not self._out:
            return
        data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
        self._out.clear()
        self._out_size = 0
        try:
            w.write(data)
        except Exception as e:  # the socket broke
            self._lost(e)

    async def _backpressure(self) -> None:
        w = self._writer
        if w is not None and w.transport.get_write_buffer_size() > (4 << 20):
            try:
                await w.drain()
            except Exception as e:
                self._lost(e)

    def _send_pub(self, subject: str, reply: str, headers: Optional[Mapping[str, str]], data: bytes) -> None:
        if headers:
            hdr = _encode_headers(headers)
            total = len(hdr) + len(data)
            if total > self._max_payload:
                raise MaxPayloadError(total, self._max_payload)
            if reply:
                line = f"HPUB {subject} {reply} {len(hdr)} {total}\r\n".encode()
            else:
                line = f"HPUB {subject} {len(hdr)} {total}\r\n".encode()
            self._send(line + hdr + data + _CRLF)
        else:
            if len(data) > self._max_payload:
                raise MaxPayloadError(len(data), self._max_payload)
            if reply:
                line = f"PUB {subject} {reply} {len(data)}\r\n".encode()
            else:
                line = f"PUB {subject} {len(data)}\r\n".encode()
            self._send(line + data + _CRLF)

    def publish_nowait(
        self, subject: str, data: bytes = b"", *, headers: Optional[Mapping[str, str]] = None, reply: str = ""
    ) -> None:
        """Publishes without awaiting (for callbacks): the write is buffered."""
        self._send_pub(subject, reply, headers, data)

    async def publish(
        self, subject: str, data: bytes = b"", *, headers: Optional[Mapping[str, str]] = None, reply: str = ""
    ) -> None:
        self._send_pub(subject, reply, headers, data)
        await self._backpressure()

    async def flush(self, timeout: float = 5.0) -> None:
        if self._state == _CLOSED:
            raise ConnectionClosedError("the NATS connection is closed")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._state != _CONNECTED:
            raise TransportError("not connected to NATS")
        self._pongs.append(fut)
        self._send(_PING)
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise RequestTimeoutError("PING", timeout) from None

    # ------------------------------------------------------------------
    # Subscriptions

    def _sub_proto(self, s: _Sub) -> bytes:
        if s.queue:
            return f"SUB {s.subject} {s.queue} {s.sid}\r\n".encode()
        return f"SUB {s.subject} {s.sid}\r\n".encode()

    def _subscribe(
        self,
        subject: str,
        queue: str = "",
        cb: Optional[MsgCallback] = None,
        pending_msgs: int = 65536,
        pending_bytes: int = 64 << 20,
    ) -> _Sub:
        if self._state == _CLOSED:
            raise ConnectionClosedError("the NATS connection is closed")
        if not subject or " " in subject:
            raise ValueError(f"invalid subject {subject!r}")
        self._sid += 1
        s = _Sub(self, self._sid, subject, queue, cb, pending_msgs, pending_bytes)
        self._subs[s.sid] = s
        if self._state == _CONNECTED:
            self._send(self._sub_proto(s))
        return s

    async def subscribe(
        self,
        subject: str,
        *,
        queue: str = "",
        cb: Optional[MsgCallback] = None,
        pending_msgs: int = 65536,
        pending_bytes: int = 64 << 20,
    ) -> Subscription:
        return self._subscribe(subject, queue, cb, pending_msgs, pending_bytes)

    def _unsubscribe(self, s: _Sub) -> None:
        if self._subs.pop(s.sid, None) is not None and self._state == _CONNECTED:
            self._send(f"UNSUB {s.sid}\r\n".encode())

    # ------------------------------------------------------------------
    # Requests

    def _on_response(self, msg: Msg) -> None:
        token = msg.subject[len(self._resp_prefix) :]
        fut = self._resp_map.pop(token, None)
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def _request_start(
        self, subject: str, data: bytes, headers: Optional[Mapping[str, str]]
    ) -> tuple[str, "asyncio.Future[Any]"]:
        if self._resp_sub is None:
            self._resp_prefix = f"{self._inbox_prefix}.{_nuid()}."
            self._resp_sub = self._subscribe(self._resp_prefix + "*", cb=self._on_response)
        self._resp_n += 1
        token = str(self._resp_n)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._resp_map[token] = fut
        try:
            self._send_pub(subject, self._resp_prefix + token, headers, data)
        except BaseException:
            del self._resp_map[token]
            raise
        return token, fut

    async def request(
        self, subject: str, data: bytes = b"", *, headers: Optional[Mapping[str, str]] = None, timeout: float = 5.0
    ) -> Msg:
        token, fut = self._request_start(subject, data, headers)
        timer = asyncio.get_running_loop().call_later(timeout, _expire, fut)
        try:
            msg = await fut
        finally:
            timer.cancel()
            self._resp_map.pop(token, None)
        if msg is _TIMEOUT:
            raise RequestTimeoutError(subject, timeout)
        if msg.status == "503":
            raise NoRespondersError(subject)
        return msg

    # ------------------------------------------------------------------
    # JetStream

    async def js_publish(
        self,
        subject: str,
        data: bytes,
        *,
        headers: Optional[Mapping[str, str]] = None,
        msg_id: str = "",
        timeout: float = 5.0,
    ) -> PubAck:
        if msg_id:
            headers = dict(headers or {})
            headers["Nats-Msg-Id"] = msg_id
        msg = await self.request(subject, data, headers=headers, timeout=timeout)
        try:
            ack = json.loads(msg.data)
        except ValueError:
            raise TransportError(f"not a JetStream acknowledgement on {subject}: {msg.data[:200]!r}") from None
        err = ack.get("error")
        if err:
            raise JetStreamError(int(err.get("code") or 0), int(err.get("err_code") or 0), str(err.get("description") or ""))
        return PubAck(
            stream=str(ack.get("stream", "")),
            seq=int(ack.get("seq") or 0),
            duplicate=bool(ack.get("duplicate", False)),
            domain=str(ack.get("domain") or ""),
        )

    async def js_api(self, api: str, body: Optional[Mapping[str, Any]] = None, *, timeout: float = 5.0) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else b""
        try:
            msg = await self.request("$JS.API." + api, data, timeout=timeout)
        except NoRespondersError:
            raise JetStreamError(503, 0, "JetStream is not enabled (no responders on $JS.API)") from None
        reply: dict[str, Any] = json.loads(msg.data) if msg.data else {}
        err = reply.get("error")
        if err:
            raise JetStreamError(int(err.get("code") or 0), int(err.get("err_code") or 0), str(err.get("description") or ""))
        return reply

    async def create_consumer(self, stream: str, config: Mapping[str, Any], *, timeout: float = 5.0) -> dict[str, Any]:
        name = config.get("name") or config.get("durable_name")
        api = f"CONSUMER.CREATE.{stream}"
        if name:
            api += f".{name}"
            filt = config.get("filter_subject")
            if filt:
                api += f".{filt}"
        return await self.js_api(api, {"stream_name": stream, "config": dict(config)}, timeout=timeout)

    async def pull(self, stream: str, consumer: str) -> PullConsumer:
        prefix = new_inbox(self._inbox_prefix)
        sub = self._subscribe(prefix + ".*")
        return _Pull(self, stream, consumer, sub, prefix)

    async def ack(self, msg: Msg) -> None:
        if not msg.reply:
            raise TransportError("the message has no reply subject to acknowledge")
        self._send_pub(msg.reply, "", None, b"+ACK")

    # ------------------------------------------------------------------
    # Closing

    async def close(self) -> None:
        if self._state == _CLOSED:
            return
        if self._state == _CONNECTED:
            try:
                await self.flush(timeout=2.0)
            except Exception:
                pass
        await self._close_now(None)

    async def _close_now(self, err: Optional[BaseException]) -> None:
        self._state = _CLOSED
        for t in (self._ping_task, self._reader_task, self._reconnect_task):
            if t is not None and t is not asyncio.current_task():
                t.cancel()
        w = self._writer
        self._writer = None
        if w is not None:
            w.close()
            try:
                await asyncio.wait_for(w.wait_closed(), 1.0)
            except Exception:
                pass
        for s in list(self._subs.values()):
            s._close()
        self._subs.clear()
        for fut in list(self._resp_map.values()):
            if not fut.done():
                fut.set_exception(err or ConnectionClosedError("the NATS connection was closed"))
        self._resp_map.clear()
        while self._pongs:
            f = self._pongs.popleft()
            if f is not None and not f.done():
                f.set_exception(ConnectionClosedError("the NATS connection was closed"))
        if self._closed_event is not None:
            self._closed_event.set()

    async def wait_closed(self) -> None:
        """Returns once the connection is closed for good."""
        if self._closed_event is not None:
            await self._closed_event.wait()


async def connect_nats(servers: Union[str, list[str]] = "nats://127.0.0.1:4222", **options: Any) -> NatsTransport:
    """Connects a :class:`NatsTransport` (see its parameters)."""
    if os.environ.get("FAIRWAY_NATS_DEBUG"):
        logging.getLogger("fairway.nats").setLevel(logging.DEBUG)
    return await NatsTransport(servers, **options).connect()


def _hook(name: str, fn: Optional[Callable[..., Any]], *args: Any) -> None:
    """Calls a user's callback, if set; what it raises is logged, never the connection's."""
    if fn is None:
        return
    try:
        fn(*args)
    except Exception:
        log.exception("%s callback failed", name)
