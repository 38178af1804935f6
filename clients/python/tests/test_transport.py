"""The NATS transport against real nats-server processes."""

from __future__ import annotations

import _path  # noqa: F401  (src on sys.path)

import asyncio
import json
import os
import ssl
import tempfile
import shutil
import time
import unittest

from fairway.errors import (
    AuthorizationError,
    JetStreamError,
    MaxPayloadError,
    NoRespondersError,
    RequestTimeoutError,
    TransportError,
)
from fairway.natsconn import NatsTransport, connect_nats
from servers import NATS_HOW, TENANTS_HOW, NatsServer, make_certs, require_env


class ServerTest(unittest.IsolatedAsyncioTestCase):
    config = ""
    jetstream = False

    def setUp(self) -> None:
        self.binary = require_env(self, "NATS_SERVER_BIN", NATS_HOW)
        self.server = NatsServer(self.binary, self.config, jetstream=self.jetstream).start()
        self.addCleanup(self.server.close)
        self.conns: list[NatsTransport] = []

    async def asyncTearDown(self) -> None:
        for c in self.conns:
            await c.close()

    async def connect(self, **opts: object) -> NatsTransport:
        c = await connect_nats(opts.pop("url", self.server.url), **opts)  # type: ignore[arg-type]
        self.conns.append(c)
        return c


class CoreTest(ServerTest):
    async def test_pub_sub_with_headers(self) -> None:
        nc = await self.connect()
        sub = await nc.subscribe("t.>")
        got_cb: list[bytes] = []
        await nc.subscribe("t.cb", cb=lambda m: got_cb.append(m.data))
        await nc.flush()
        await nc.publish("t.a", b"plain")
        await nc.publish("t.b", b"with headers", headers={"X-One": "1", "Nats-Msg-Id": "abc"}, reply="r.1")
        await nc.publish("t.cb", b"to the callback")
        await nc.publish("t.empty", b"")
        m1 = await sub.next_msg(timeout=2)
        self.assertEqual((m1.subject, m1.data, m1.headers), ("t.a", b"plain", None))
        m2 = await sub.next_msg(timeout=2)
        self.assertEqual((m2.subject, m2.reply, m2.data), ("t.b", "r.1", b"with headers"))
        self.assertEqual(m2.header("x-one"), "1")
        self.assertEqual(m2.headers, {"X-One": "1", "Nats-Msg-Id": "abc"})
        m3 = await sub.next_msg(timeout=2)
        self.assertEqual(m3.data, b"to the callback")
        m4 = await sub.next_msg(timeout=2)
        self.assertEqual((m4.subject, m4.data), ("t.empty", b""))
        self.assertEqual(got_cb, [b"to the callback"])
        await sub.unsubscribe()
        await nc.publish("t.a", b"after unsubscribe")
        await nc.flush()
        self.assertEqual(sub.pending, 0)

    async def test_large_message_and_max_payload(self) -> None:
        nc = await self.connect()
        self.assertEqual(nc.max_payload, 8 * 1024 * 1024)
        sub = await nc.subscribe("big")
        await nc.flush()
        data = os.urandom(3 << 20)
        await nc.publish("big", data)
        self.assertEqual((await sub.next_msg(timeout=5)).data, data)
        with self.assertRaises(MaxPayloadError):
            await nc.publish("big", b"x" * (9 << 20))

    async def test_request_reply_and_no_responders(self) -> None:
        nc = await self.connect()

        def echo(m):  # type: ignore[no-untyped-def]
            nc.publish_nowait(m.reply, b"re: " + m.data, headers={"Answered": "yes"})

        await nc.subscribe("svc.echo", cb=echo)
        await nc.flush()
        replies = await asyncio.gather(*(nc.request("svc.echo", str(i).encode(), timeout=2) for i in range(50)))
        self.assertEqual([r.data for r in replies], [f"re: {i}".encode() for i in range(50)])
        self.assertEqual(replies[0].header("Answered"), "yes")
        with self.assertRaises(NoRespondersError):
            await nc.request("svc.nobody", b"?", timeout=2)
        # Someone listens but does not answer: a timeout, not no-responders.
        await nc.subscribe("svc.silent", cb=lambda m: None)
        await nc.flush()
        t0 = time.monotonic()
        with self.assertRaises(RequestTimeoutError):
            await nc.request("svc.silent", b"?", timeout=0.3)
        self.assertLess(time.monotonic() - t0, 2)

    async def test_slow_consumer_drops_and_counts(self) -> None:
        reported = []
        nc = await self.connect(on_slow_consumer=lambda s: reported.append(s.subject))
        slow = await nc.subscribe("flood", pending_msgs=10)
        fast = await nc.subscribe("flood")
        await nc.flush()
        for i in range(100):
            await nc.publish("flood", str(i).encode())
        await nc.flush()
        self.assertEqual(slow.pending, 10)
        self.assertEqual(slow.dropped, 90)
        self.assertEqual(fast.dropped, 0)
        self.assertEqual(reported, ["flood"])
        # The connection is alive and the other subscription got everything.
        self.assertTrue(nc.is_connected)
        got = [int((await fast.next_msg(timeout=2)).data) for _ in range(100)]
        self.assertEqual(got, list(range(100)))
        self.assertEqual([int((await slow.next_msg(timeout=2)).data) for _ in range(10)], list(range(10)))
        # Once read, it takes messages again.
        await nc.publish("flood", b"again")
        await nc.flush()
        self.assertEqual((await slow.next_msg(timeout=2)).data, b"again")

    async def test_reconnect_after_restart(self) -> None:
        disconnected, reconnected = asyncio.Event(), asyncio.Event()
        nc = await self.connect(on_disconnected=disconnected.set, on_reconnected=reconnected.set, reconnect_wait=0.05)
        sub = await nc.subscribe("re.sub")
        await nc.subscribe("re.svc", cb=lambda m: nc.publish_nowait(m.reply, b"pong"))
        await nc.flush()
        self.server.stop()
        await asyncio.wait_for(disconnected.wait(), 5)
        self.assertFalse(nc.is_connected)
        # Published while disconnected: buffered and sent on reconnect.
        await nc.publish("re.sub", b"while away")
        self.server.start()
        await asyncio.wait_for(reconnected.wait(), 10)
        self.assertTrue(nc.is_connected)
        self.assertEqual(nc.reconnects, 1)
        self.assertEqual((await sub.next_msg(timeout=2)).data, b"while away")
        await nc.publish("re.sub", b"after")
        self.assertEqual((await sub.next_msg(timeout=2)).data, b"after")
        self.assertEqual((await nc.request("re.svc", b"ping", timeout=2)).data, b"pong")

    async def test_connect_failure(self) -> None:
        self.server.stop()
        with self.assertRaises(TransportError):
            await connect_nats(self.server.url, connect_timeout=1)


class UserPasswordTest(ServerTest):
    config = 'authorization { user: alice, password: "s3cret" }'

    async def test_user_password(self) -> None:
        nc = await self.connect(user="alice", password="s3cret")
        await nc.flush()
        nc2 = await self.connect(url=f"nats://alice:s3cret@127.0.0.1:{self.server.port}")
        await nc2.flush()
        with self.assertRaises(AuthorizationError):
            await connect_nats(self.server.url, user="alice", password="wrong")
        with self.assertRaises(AuthorizationError):
            await connect_nats(self.server.url)


class TokenTest(ServerTest):
    config = 'authorization { token: "t0ken" }'

    async def test_token(self) -> None:
        nc = await self.connect(token="t0ken")
        sub = await nc.subscribe("x")
        await nc.publish("x", b"1")
        self.assertEqual((await sub.next_msg(timeout=2)).data, b"1")
        nc2 = await self.connect(url=f"nats://t0ken@127.0.0.1:{self.server.port}")
        await nc2.flush()
        with self.assertRaises(AuthorizationError):
            await connect_nats(self.server.url, token="nope")


class TLSTest(ServerTest):
    def setUp(self) -> None:
        self.certdir = tempfile.mkdtemp(prefix="fairway-py-certs-")
        self.addCleanup(shutil.rmtree, self.certdir, True)
        self.certs = make_certs(self.certdir)
        c = self.certs
        self.config = (
            f'tls {{ cert_file: "{c["server.pem"]}", key_file: "{c["server.key"]}", ca_file: "{c["ca.pem"]}", verify: true }}'
        )
        super().setUp()

    async def test_tls_with_client_certificate(self) -> None:
        c = self.certs
        nc = await self.connect(tls_ca_file=c["ca.pem"], tls_cert_file=c["client.pem"], tls_key_file=c["client.key"])
        sub = await nc.subscribe("secure")
        await nc.publish("secure", b"hello")
        self.assertEqual((await sub.next_msg(timeout=2)).data, b"hello")
        self.assertTrue(nc.server_info.get("tls_required"))
        # tls:// and an SSLContext of one's own.
        ctx = ssl.create_default_context(cafile=c["ca.pem"])
        ctx.load_cert_chain(c["client.pem"], c["client.key"])
        nc2 = await self.connect(url=f"tls://127.0.0.1:{self.server.port}", tls=ctx)
        await nc2.flush()

    async def test_tls_untrusted_or_without_certificate(self) -> None:
        # The server's CA is not trusted.
        with self.assertRaises(TransportError):
            await connect_nats(self.server.url, tls=True, connect_timeout=2)
        # Trusted, but no client certificate: the server refuses.
        with self.assertRaises((TransportError, ssl.SSLError, OSError)):
            nc = await connect_nats(self.server.url, tls_ca_file=self.certs["ca.pem"], connect_timeout=2, max_reconnect_attempts=0)
            await nc.flush(1)
            await nc.close()


async def collect(pull, n: int, batch: int = 0) -> list:  # type: ignore[no-untyped-def]
    """Fetches until n messages came (a fetch returns as soon as some did)."""
    out: list = []  # type: ignore[type-arg]
    deadline = time.monotonic() + 5
    while len(out) < n and time.monotonic() < deadline:
        out += await pull.fetch(batch or n - len(out), expires=1)
    return out


class JetStreamTest(ServerTest):
    jetstream = True

    async def test_publish_ack_and_pull(self) -> None:
        nc = await self.connect()
        info = await nc.js_api("STREAM.CREATE.ORDERS", {"name": "ORDERS", "subjects": ["orders.>"], "duplicate_window": int(60e9)})
        self.assertEqual(info["config"]["name"], "ORDERS")
        ack = await nc.js_publish("orders.new", b'{"n":1}', msg_id="m-1")
        self.assertEqual((ack.stream, ack.seq, ack.duplicate), ("ORDERS", 1, False))
        dup = await nc.js_publish("orders.new", b'{"n":1}', msg_id="m-1")
        self.assertEqual((dup.seq, dup.duplicate), (1, True))
        for i in range(2, 6):
            await nc.js_publish("orders.new", json.dumps({"n": i}).encode(), headers={"X-N": str(i)})
        with self.assertRaises(NoRespondersError):
            await nc.js_publish("nostream.x", b"{}")
        # A durable pull consumer with explicit acks.
        cinfo = await nc.create_consumer("ORDERS", {"durable_name": "work", "ack_policy": "explicit", "ack_wait": int(30e9)})
        self.assertEqual(cinfo["name"], "work")
        pull = await nc.pull("ORDERS", "work")
        msgs = await collect(pull, 3)
        self.assertEqual([json.loads(m.data)["n"] for m in msgs], [1, 2, 3])
        self.assertEqual(msgs[2].header("X-N"), "3")
        self.assertTrue(msgs[0].reply.startswith("$JS.ACK.ORDERS.work."))
        for m in msgs:
            await nc.ack(m)
        rest = await collect(pull, 2, batch=10)
        self.assertEqual([json.loads(m.data)["n"] for m in rest], [4, 5])
        for m in rest:
            await nc.ack(m)
        # Messages published while a fetch waits come at once, not when it expires.
        later = asyncio.get_running_loop().call_later(0.2, lambda: asyncio.ensure_future(nc.js_publish("orders.new", b'{"n":6}')))
        t0 = time.monotonic()
        got = await pull.fetch(100, expires=5)
        self.assertEqual([json.loads(m.data)["n"] for m in got], [6])
        self.assertLess(time.monotonic() - t0, 2)
        later.cancel()
        await nc.ack(got[0])
        t0 = time.monotonic()
        self.assertEqual(await pull.fetch(5, no_wait=True), [])  # 404 at once
        self.assertLess(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        self.assertEqual(await pull.fetch(5, expires=0.4), [])  # 408 when it expires
        self.assertGreater(time.monotonic() - t0, 0.3)
        await nc.flush()
        state = await nc.js_api("CONSUMER.INFO.ORDERS.work")
        self.assertEqual(state["num_ack_pending"], 0)
        self.assertEqual(state["ack_floor"]["stream_seq"], 6)
        await pull.close()

    async def test_ephemeral_consumer_and_refusal(self) -> None:
        nc = await self.connect()
        await nc.js_api("STREAM.CREATE.TINY", {"name": "TINY", "subjects": ["tiny.*"], "max_msgs": 2, "discard": "new"})
        await nc.js_publish("tiny.a", b"1")
        await nc.js_publish("tiny.b", b"2")
        with self.assertRaises(JetStreamError) as cm:
            await nc.js_publish("tiny.a", b"3")
        self.assertIn("maximum messages", cm.exception.description)
        info = await nc.create_consumer("TINY", {"ack_policy": "none", "deliver_policy": "all", "filter_subject": "tiny.b", "inactive_threshold": int(10e9)})
        pull = await nc.pull("TINY", info["name"])
        msgs = await pull.fetch(10, expires=0.5)
        self.assertEqual([(m.subject, m.data) for m in msgs], [("tiny.b", b"2")])
        self.assertEqual(await pull.fetch(10, expires=0.3), [])
        with self.assertRaises(JetStreamError):
            await nc.js_api("STREAM.INFO.NOPE")


class CredsTest(unittest.IsolatedAsyncioTestCase):
    async def test_creds_login(self) -> None:
        url = require_env(self, "FAIRWAY_TEST_TENANTS_NATS_URL", TENANTS_HOW)
        creds = require_env(self, "FAIRWAY_TEST_CREDS_DIR", TENANTS_HOW)
        nc = await connect_nats(url, creds=os.path.join(creds, "tenant-acme.creds"))
        try:
            self.assertTrue(nc.server_info.get("nonce"))
            sub = await nc.subscribe("_INBOX.py-creds-test")
            await nc.publish("_INBOX.py-creds-test", b"signed in")
            self.assertEqual((await sub.next_msg(timeout=2)).data, b"signed in")
        finally:
            await nc.close()
        # Without credentials the operator-mode server refuses.
        with self.assertRaises(AuthorizationError):
            await connect_nats(url, connect_timeout=2)


class ReporterTest(ServerTest):
    """The worker's report sender against a real results stream that refuses, then takes, messages."""

    jetstream = True

    async def test_refused_reports_are_sent_again_in_order(self) -> None:
        from fairway.worker import _Reporter

        nc = await self.connect()
        await nc.js_api("STREAM.CREATE.FAIRWAY_RESULTS", {
            "name": "FAIRWAY_RESULTS", "subjects": ["fairway.results.>"], "max_msgs": 1, "discard": "new", "duplicate_window": int(60e9),
        })
        await nc.js_publish("fairway.results.other", b"[]")  # the stream is full: every publish is refused
        rep = _Reporter(nc, "fairway.results.py-rep")
        task = asyncio.get_running_loop().create_task(rep.run())
        self.addCleanup(task.cancel)
        for i in range(3):
            rep.put(json.dumps({"n": i}).encode())
        await asyncio.sleep(0.3)
        self.assertFalse(rep.idle.is_set())
        self.assertEqual(rep.pending, 3)
        self.assertGreater(rep._delay, 0.01)  # backing off
        for i in range(3, 500):  # queued meanwhile: they go after, in as few messages as fit
            rep.put(json.dumps({"n": i, "pad": "x" * 1000}).encode())
        await nc.js_api("STREAM.UPDATE.FAIRWAY_RESULTS", {
            "name": "FAIRWAY_RESULTS", "subjects": ["fairway.results.>"], "max_msgs": -1, "discard": "new", "duplicate_window": int(60e9),
        })
        self.assertTrue(await rep.flush(10))
        info = await nc.create_consumer("FAIRWAY_RESULTS", {"ack_policy": "none", "deliver_policy": "all", "filter_subject": "fairway.results.py-rep"})
        pull = await nc.pull("FAIRWAY_RESULTS", info["name"])
        msgs = await collect(pull, rep.sent_messages, batch=100)
        got = [r["n"] for m in msgs for r in json.loads(m.data)]
        self.assertEqual(got, list(range(500)))
        self.assertLessEqual(len(msgs), 4)  # 256 KiB to a message at most: ~500 KB in 2 or 3
        ids = [m.header("Nats-Msg-Id") for m in msgs]
        self.assertEqual(len(set(ids)), len(ids))
        self.assertTrue(all(len(m.data) <= 256 * 1024 + 2 for m in msgs))

    async def test_too_large_messages_split_and_single_dropped(self) -> None:
        from fairway.worker import _Reporter

        nc = await self.connect()
        await nc.js_api("STREAM.CREATE.FAIRWAY_RESULTS", {"name": "FAIRWAY_RESULTS", "subjects": ["fairway.results.>"], "max_msg_size": 4000})
        rep = _Reporter(nc, "fairway.results.py-rep")
        rep.put(b'{"n":0,"big":"' + b"x" * 5000 + b'"}')  # alone too large: dropped, said
        for i in range(1, 11):
            rep.put(json.dumps({"n": i, "pad": "y" * 900}).encode())  # together too large: split
        task = asyncio.get_running_loop().create_task(rep.run())
        self.addCleanup(task.cancel)
        rep._kick.set()
        self.assertTrue(await rep.flush(10))
        info = await nc.create_consumer("FAIRWAY_RESULTS", {"ack_policy": "none", "deliver_policy": "all"})
        pull = await nc.pull("FAIRWAY_RESULTS", info["name"])
        msgs = await collect(pull, rep.sent_messages, batch=100)
        self.assertEqual([r["n"] for m in msgs for r in json.loads(m.data)], list(range(1, 11)))
