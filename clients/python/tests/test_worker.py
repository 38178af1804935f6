"""The worker against a fake transport: what it sends, and that every job it holds ends (its slot freed)."""

from __future__ import annotations

import _path  # noqa: F401  (src on sys.path)

import asyncio
import json
import os
import signal
import time
import unittest
from typing import Any, Callable, Optional

import fairway
from fairway import worker as worker_mod
from fairway.errors import MaxPayloadError, NoRespondersError, RequestTimeoutError
from fairway.transport import Msg

GROUP = "g"
# A dispatch reply of a coordinator whose partition's leader cannot answer.
UNAVAILABLE = {"error": {"code": "unavailable", "message": "claiming in journal partition 0: its leader cannot answer now"}}
SURROGATE = os.fsdecode(b"caf\xe9")  # 'caf\udce9': a lone surrogate, as a file name that is not UTF-8 decodes


class FakeSub:
    def __init__(self, subject: str, cb: Any) -> None:
        self.subject = subject
        self.cb = cb

    async def unsubscribe(self) -> None:
        pass


class FakeTransport:
    """Answers the executor protocol's requests from a script; keeps what the worker sent."""

    def __init__(self, max_payload: int = 1 << 20) -> None:
        self._max_payload = max_payload
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.published: list[bytes] = []
        self.replies: list[Any] = []  # dispatch replies to hand out, in order (dicts, or bytes as they are)
        self.register: Callable[[], Any] = lambda: b"{}"
        self.subs: dict[str, FakeSub] = {}

    @property
    def max_payload(self) -> int:
        return self._max_payload

    @property
    def is_connected(self) -> bool:
        return True

    async def publish(self, subject: str, data: bytes = b"", **kw: Any) -> None:
        pass

    def publish_nowait(self, subject: str, data: bytes) -> None:
        pass

    async def request(self, subject: str, data: bytes = b"", *, headers: Any = None, timeout: float = 5.0) -> Msg:
        verb = subject.rsplit(".", 1)[1]
        body = json.loads(data) if data else {}
        self.requests.append((verb, body))
        if verb == "register":
            out = self.register()
            if isinstance(out, BaseException):
                raise out
            if out is None:  # nobody answers
                await asyncio.sleep(timeout)
                raise RequestTimeoutError(subject, timeout)
            return Msg(subject, "", out)
        if verb == "dispatch" and not body.get("stopping"):
            if self.replies:
                r = self.replies.pop(0)
                return Msg(subject, "", r if isinstance(r, bytes) else json.dumps(r).encode())
            await asyncio.sleep(min(body.get("wait_ms", 0) / 1000, 0.05))
            return Msg(subject, "", b'{"jobs":[]}')
        return Msg(subject, "", b"{}")

    async def subscribe(self, subject: str, *, cb: Any = None, **kw: Any) -> FakeSub:
        s = FakeSub(subject, cb)
        self.subs[subject.rsplit(".", 1)[1]] = s
        return s

    async def flush(self, timeout: float = 5.0) -> None:
        pass

    async def js_publish(self, subject: str, data: bytes, *, headers: Any = None, msg_id: str = "", timeout: float = 5.0) -> Any:
        if len(data) > self._max_payload:
            raise MaxPayloadError(len(data), self._max_payload)
        self.published.append(data)
        return None

    def reports(self, type_: Optional[str] = None) -> list[dict[str, Any]]:
        out = []
        for data in self.published:
            for rep in json.loads(data):  # every message must be valid JSON
                if type_ is None or rep["type"] == type_:
                    out.append(rep)
        return out

    def dispatches(self) -> list[dict[str, Any]]:
        return [b for v, b in self.requests if v == "dispatch" and not b.get("stopping")]


class FakeClient:
    def __init__(self, transport: FakeTransport) -> None:
        self.transport = transport
        self.prefix = "fairway"


def job(jid: str, task: str, **args: Any) -> dict[str, Any]:
    return {"id": jid, "group": GROUP, "task": task, "attempt": 1, "args": args}


async def until(cond: Callable[[], Any], what: str, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


class WorkerTestCase(unittest.IsolatedAsyncioTestCase):
    def make(self, registry: fairway.Registry, **kw: Any) -> tuple[fairway.Worker, FakeTransport]:
        t = FakeTransport(kw.pop("max_payload", 1 << 20))
        w = fairway.Worker(FakeClient(t), "py-unit", registry=registry, heartbeat=60, wakeup=kw.pop("wakeup", 0.2), **kw)  # type: ignore[arg-type]
        self.addAsyncCleanup(self._stop, w)
        return w, t

    async def _stop(self, w: fairway.Worker) -> None:
        if w._started:
            w.stop()
            w.stop(force=True)
            await asyncio.wait_for(w.wait_stopped(), 15)

    async def done(self, w: fairway.Worker, t: FakeTransport, n: int) -> dict[str, dict[str, Any]]:
        """Waits until n jobs were reported done and the worker holds none."""
        await until(lambda: len(t.reports("done")) >= n and w.held == 0 and w.running == 0, f"{n} done reports and no job held")
        return {r["job_id"]: r for r in t.reports("done")}


class SurrogateTest(WorkerTestCase):
    async def test_lone_surrogates_are_reported_and_free_the_slot(self) -> None:
        reg = fairway.Registry()

        @reg.task("result")
        async def result(j: fairway.Job) -> Any:
            return {"path": SURROGATE}

        @reg.task("error")
        async def error(j: fairway.Job) -> Any:
            raise RuntimeError(f"cannot open {SURROGATE}")

        @reg.task("log")
        async def log_(j: fairway.Job) -> Any:
            j.log("info", f"opening {SURROGATE}")
            j.log("info", SURROGATE * 5000)  # over the line limit: cut by bytes, still encodable
            return "ok"

        @reg.task("perm")
        async def perm(j: fairway.Job) -> Any:
            raise fairway.Permanent(SURROGATE)

        w, t = self.make(reg, slots=1, prefetch=0)
        t.replies = [{"jobs": [job("j1", "result")]}, {"jobs": [job("j2", "error")]}, {"jobs": [job("j3", "log")]}, {"jobs": [job("j4", "perm")]}]
        await w.start()
        done = await self.done(w, t, 4)
        self.assertEqual(done["j1"]["outcome"], "success")
        self.assertEqual(done["j1"]["result"], {"path": SURROGATE})  # sent as the JSON escape \udce9
        self.assertEqual((done["j2"]["outcome"], done["j2"]["error"][:11]), ("error", "cannot open"))
        self.assertEqual((done["j3"]["outcome"], done["j4"]["outcome"]), ("success", "permanent"))
        lines = [l["message"] for r in t.reports("log") if r["job_id"] == "j3" for l in r["logs"]]
        self.assertEqual(len(lines), 2)
        self.assertTrue(lines[0].startswith("opening caf"))
        for data in t.published:
            data.decode("utf-8")  # valid UTF-8 on the wire

    async def test_a_failing_done_report_still_frees_the_slot(self) -> None:
        reg = fairway.Registry()

        @reg.task("ok")
        async def ok(j: fairway.Job) -> Any:
            return 1

        w, t = self.make(reg, slots=1, prefetch=0)
        real = w._encode_report

        def broken(h: Any, type_: str, **kw: Any) -> bytes:
            if type_ == "done":
                raise RuntimeError("encoder broke")
            return real(h, type_, **kw)

        w._encode_report = broken  # type: ignore[method-assign]
        t.replies = [{"jobs": [job("j1", "ok")]}, {"jobs": [job("j2", "ok")]}]
        with self.assertLogs("fairway.worker", "ERROR"):
            await w.start()
            # One slot: the second job is asked for only once the first let its slot go.
            await until(lambda: not t.replies and w.held == 0, "both jobs let go")
        self.assertEqual(w.running, 0)


class CancelledTest(WorkerTestCase):
    async def test_a_cancellation_the_worker_did_not_cause_is_an_error(self) -> None:
        reg = fairway.Registry()

        @reg.task("inner")
        async def inner(j: fairway.Job) -> Any:
            f = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(f.cancel)
            await f  # a future of the handler's, cancelled: CancelledError

        class Boom(BaseException):
            pass

        @reg.task("boom")
        async def boom(j: fairway.Job) -> Any:
            raise Boom("kaboom")

        w, t = self.make(reg, slots=2, prefetch=0)
        t.replies = [{"jobs": [job("j1", "inner"), job("j2", "boom")]}]
        await w.start()
        done = await self.done(w, t, 2)
        self.assertEqual(done["j1"]["outcome"], "error")
        self.assertIn("CancelledError", done["j1"]["error"])
        self.assertEqual(done["j2"]["outcome"], "error")
        self.assertIn("Boom: kaboom", done["j2"]["error"])


class RegisterStopTest(WorkerTestCase):
    async def test_sigterm_while_no_coordinator_answers_ends_run(self) -> None:
        reg = fairway.Registry()

        @reg.task("t")
        async def t_(j: fairway.Job) -> Any:
            return None

        w, t = self.make(reg)
        t.register = lambda: NoRespondersError("fairway.exec.py-unit.register")
        run = asyncio.ensure_future(w.run(handle_signals=True))
        await until(lambda: len(t.requests) >= 2, "registration retried")
        t0 = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(run, 3)
        self.assertLess(time.monotonic() - t0, 1.5)
        self.assertEqual({v for v, _ in t.requests}, {"register"}, "never registered: nothing deregistered")
        self.assertTrue(w.stopping)

    async def test_stop_while_a_registration_request_hangs(self) -> None:
        reg = fairway.Registry()

        @reg.task("t")
        async def t_(j: fairway.Job) -> Any:
            return None

        w, t = self.make(reg)
        t.register = lambda: None  # the request times out (2 s)
        start = asyncio.ensure_future(w.start())
        await until(lambda: t.requests, "a registration request")
        t0 = time.monotonic()
        w.stop()
        await asyncio.wait_for(start, 3)
        await asyncio.wait_for(w.wait_stopped(), 1)
        self.assertLess(time.monotonic() - t0, 0.5)


class LogSplitTest(WorkerTestCase):
    async def test_many_long_lines_are_split_under_the_limit(self) -> None:
        reg = fairway.Registry()

        @reg.task("chatty")
        async def chatty(j: fairway.Job) -> Any:
            for i in range(150):
                j.log("info", f"{i:04d}" + "x" * (8 << 10))
            j.log("info", "é" * 8000)  # 16000 bytes in 8000 characters: cut by bytes
            return None

        w, t = self.make(reg, slots=1, prefetch=0, log_buffer=1000)
        t.replies = [{"jobs": [job("j1", "chatty")]}]
        await w.start()
        done = await self.done(w, t, 1)
        self.assertEqual(done["j1"]["outcome"], "success")
        logs = t.reports("log")
        lines = [l["message"] for r in logs for l in r["logs"]]
        self.assertEqual(len(lines), 151, "no line lost")
        self.assertEqual([m[:4] for m in lines[:150]], [f"{i:04d}" for i in range(150)])
        self.assertGreater(len(logs), 1)
        for r in logs:
            self.assertLessEqual(len(json.dumps(r, ensure_ascii=False).encode()), (128 << 10) + (2 << 10))
        self.assertTrue(lines[150].startswith("é" * 100))
        self.assertLessEqual(len(lines[150].encode()), (8 << 10) + 100)
        self.assertLess(len(lines[150]), 8000)


class DispatchReplyTest(WorkerTestCase):
    async def test_malformed_jobs_are_skipped_and_the_good_ones_run(self) -> None:
        reg = fairway.Registry()
        ran: list[str] = []

        @reg.task("t")
        async def t_(j: fairway.Job) -> Any:
            ran.append(j.id)

        w, t = self.make(reg, slots=8, prefetch=0)
        bad_attempt = job("b3", "t")
        bad_attempt["attempt"] = "one"
        no_attempt = job("b4", "t")
        del no_attempt["attempt"]
        t.replies = [
            b"[1,2]",  # not an object: the same request id again
            {"jobs": {"id": "x"}},  # jobs not an array: the same request id again
            {"jobs": [job("a1", "t"), "b1", {"id": 7, "group": GROUP, "task": "t", "attempt": 1}, bad_attempt, no_attempt, None, job("a2", "t")]},
        ]
        with self.assertLogs("fairway.worker", "ERROR") as cm:
            await w.start()
            done = await self.done(w, t, 2)
            await until(lambda: len(t.dispatches()) >= 4, "a request after the good reply")
        self.assertEqual(sorted(done), ["a1", "a2"])
        self.assertEqual(sorted(ran), ["a1", "a2"])
        self.assertEqual(len([m for m in cm.output if "malformed job" in m]), 1, "logged once")
        ids = [b["request_id"] for b in t.dispatches()]
        self.assertEqual(ids[0], ids[1])
        self.assertEqual(ids[1], ids[2])
        self.assertNotEqual(ids[2], ids[3])

    def noop_worker(self) -> tuple[Any, Any]:
        """A worker of one task "t" that does nothing, and its transport."""
        reg = fairway.Registry()

        @reg.task("t")
        async def t_(j: fairway.Job) -> Any:
            return None

        return self.make(reg, slots=8, prefetch=0)

    async def test_unavailable_keeps_the_request_id_and_is_said_once(self) -> None:
        w, t = self.noop_worker()
        t.replies = [UNAVAILABLE, UNAVAILABLE, {"jobs": [job("a1", "t")]}]
        with self.assertLogs("fairway.worker", "WARNING") as cm:
            await w.start()
            done = await self.done(w, t, 1)
            await until(lambda: len(t.dispatches()) >= 4, "a request after the jobs")
        self.assertEqual(sorted(done), ["a1"])
        # Asked again under the same id until a reply handed jobs out: a
        # claim whose answer was lost is handed out then.
        ids = [b["request_id"] for b in t.dispatches()]
        self.assertEqual(ids[0], ids[1])
        self.assertEqual(ids[1], ids[2])
        self.assertNotEqual(ids[2], ids[3])
        self.assertEqual(len([m for m in cm.output if "cannot hand out jobs now" in m]), 1, cm.output)

    async def test_a_wakeup_ends_the_pause_after_unavailable(self) -> None:
        w, t = self.noop_worker()
        t.replies = [UNAVAILABLE, {"jobs": [job("a1", "t")]}]
        backoff = worker_mod.DISPATCH_BACKOFF
        worker_mod.DISPATCH_BACKOFF = 3600.0  # only the wakeup can end it
        try:
            with self.assertLogs("fairway.worker", "WARNING"):
                await w.start()
                await until(lambda: len(t.dispatches()) >= 1, "the request answered unavailable")
                t.subs["work"].cb(Msg("fairway.notify.work", "", b""))
                done = await self.done(w, t, 1)
        finally:
            worker_mod.DISPATCH_BACKOFF = backoff
        self.assertEqual(sorted(done), ["a1"])
        ids = [b["request_id"] for b in t.dispatches()]
        self.assertEqual(ids[0], ids[1], "asked again under its id")


class PauseTest(WorkerTestCase):
    async def test_resume_all_keeps_a_task_paused_on_its_own(self) -> None:
        reg = fairway.Registry()
        for name in ("ocr", "thumb"):
            reg.task(name, _sleepy)

        w, t = self.make(reg)
        await w.start()
        pause = t.subs["pause"].cb

        def cmd(**body: Any) -> None:
            pause(Msg("fairway.executor.py-unit.pause", "", json.dumps(body).encode()))

        cmd(task="ocr")
        cmd()
        self.assertIsNone(w._what_to_ask())
        cmd(resume=True)
        self.assertEqual(w._what_to_ask()["tasks"], ["thumb"])  # type: ignore[index]
        cmd(task="ocr", resume=True)
        self.assertEqual(w._what_to_ask()["tasks"], ["ocr", "thumb"])  # type: ignore[index]


async def _sleepy(j: fairway.Job) -> Any:
    await asyncio.sleep(j.args.get("ms", 0) / 1000)


class CapTest(WorkerTestCase):
    async def test_no_long_poll_while_a_task_is_at_its_cap(self) -> None:
        reg = fairway.Registry()
        reg.task("capped", _sleepy, concurrency=1)
        reg.task("free", _sleepy)
        w, t = self.make(reg, slots=4, prefetch=0, wakeup=10)
        await w.start()
        self.assertEqual(w._what_to_ask()["wait_ms"], int(worker_mod.LONG_POLL * 1000))  # type: ignore[index]
        t.replies = [{"jobs": [job("c1", "capped", ms=300)]}]
        w._signal()
        await until(lambda: w.running == 1, "the capped job running")
        ask = w._what_to_ask()
        assert ask is not None
        self.assertEqual((ask["tasks"], ask["wait_ms"]), (["free"], 0))
        # The capped task's job ending wakes the loop: it asks for the task at once.
        t.replies = [{"jobs": [job("c2", "capped", ms=0)]}]
        t0 = time.monotonic()
        await self.done(w, t, 2)
        self.assertLess(time.monotonic() - t0, 0.6)


class RanTest(WorkerTestCase):
    async def test_an_attempt_handed_out_again_is_not_run_again(self) -> None:
        reg = fairway.Registry()
        ran: list[tuple[str, int]] = []

        @reg.task("t")
        async def t_(j: fairway.Job) -> Any:
            ran.append((j.id, j.attempt))

        w, t = self.make(reg, slots=4, prefetch=0)
        again = job("a", "t")
        again["attempt"] = 2
        # Attempt 1, then attempt 1 again (a coordinator that took it for
        # still held, its report not yet stored), then attempt 2.
        t.replies = [{"jobs": [job("a", "t")]}]
        with self.assertLogs("fairway.worker", "WARNING") as cm:
            await w.start()
            await self.done(w, t, 1)
            t.replies = [{"jobs": [job("a", "t")]}, {"jobs": [again]}]
            await self.done(w, t, 2)
        self.assertEqual(ran, [("a", 1), ("a", 2)])
        self.assertEqual([r["attempt"] for r in t.reports("done")], [1, 2])
        self.assertEqual(len([m for m in cm.output if "already ran" in m]), 1)
