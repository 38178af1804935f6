"""The client and the worker against a real ``fairway dev`` (and one with tenants)."""

from __future__ import annotations

import _path  # noqa: F401  (src on sys.path)

import asyncio
import os
import time
import uuid
from datetime import datetime, timezone
from typing import Any

import fairway
from servers import DEV_HOW, TENANTS_HOW, require_env
import unittest

registry = fairway.Registry()
CANCELLED: dict[str, asyncio.Event] = {}
GATES: dict[str, asyncio.Event] = {}


@registry.task("py-echo")
async def py_echo(job: fairway.Job) -> Any:
    job.log("info", f"echo attempt {job.attempt}")
    job.progress(50)
    job.progress(100)
    return job.args


@registry.task("py-sleep")
async def py_sleep(job: fairway.Job) -> Any:
    try:
        await asyncio.sleep(job.args.get("ms", 0) / 1000)
    except asyncio.CancelledError:
        CANCELLED.setdefault(job.id, asyncio.Event()).set()
        raise
    return {"slept": job.args.get("ms", 0)}


@registry.task("py-fail")
async def py_fail(job: fairway.Job) -> Any:
    if job.args.get("permanent"):
        raise fairway.Permanent(job.args["message"])
    raise RuntimeError(job.args["message"])


@registry.task("py-snooze")
async def py_snooze(job: fairway.Job) -> Any:
    raise fairway.Snooze(job.args["seconds"])


@registry.task("py-progress")
async def py_progress(job: fairway.Job) -> Any:
    job.progress(40)
    job.log("info", "working")
    job.log("warn", "still working")
    await GATES.setdefault(job.id, asyncio.Event()).wait()
    job.log("info", "done")
    return {"ok": True}


SPANS: list[tuple[str, float, float]] = []


@registry.task("py-one", concurrency=1)
async def py_one(job: fairway.Job) -> Any:
    t0 = time.monotonic()
    await asyncio.sleep(job.args.get("ms", 0) / 1000)
    SPANS.append((job.id, t0, time.monotonic()))
    return None


@registry.task("py-trace")
async def py_trace(job: fairway.Job) -> Any:
    return {"traceparent": job.traceparent}


def short() -> str:
    return uuid.uuid4().hex[:10]


async def poll(fn: Any, what: str, timeout: float = 15.0, every: float = 0.05) -> Any:
    """Calls ``await fn()`` until it returns something true; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = await fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(every)


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


class DevTest(unittest.IsolatedAsyncioTestCase):
    """Each test: a client and a worker (its own app-id) on the dev cluster, in a group of the run's own."""

    group = f"py-{short()}"

    async def asyncSetUp(self) -> None:
        url = require_env(self, "FAIRWAY_TEST_NATS_URL", DEV_HOW)
        self.client = await fairway.connect(url, group=self.group)
        # Only this run's group: jobs other runs or suites left behind are not taken.
        self.worker = fairway.Worker(self.client, f"py-it-{short()}", slots=4, registry=registry, groups=[self.group])
        await asyncio.wait_for(self.worker.start(), 30)

    async def asyncTearDown(self) -> None:
        await self.worker.shutdown(timeout=10)
        await self.client.close()

    async def test_submit_and_wait_result(self) -> None:
        job = await self.client.submit_and_wait("py-echo", {"hello": "world", "n": [1, 2]}, wait_timeout=30, priority="high")
        self.assertEqual(job.state, "success")
        self.assertEqual(job.result, {"hello": "world", "n": [1, 2]})
        self.assertEqual(job.worker, self.worker.app_id)
        self.assertEqual(job.priority, "high")
        self.assertEqual(job.progress, 100)
        lines = await self.client.logs(self.group, job.id)
        self.assertEqual([(l.level, l.message, l.attempt) for l in lines], [("info", "echo attempt 1", 1)])
        # JetStream submission, then wait.
        jid = await self.client.submit("py-echo", {"via": "jetstream"}, id=f"py-js-{short()}")
        self.assertTrue(jid.startswith("py-js-"))
        job = await self.client.wait(self.group, jid, timeout=30)
        self.assertEqual((job.state, job.result), ("success", {"via": "jetstream"}))
        self.assertEqual((await self.client.get(self.group, jid)).state, "success")

    async def test_batch(self) -> None:
        subs = [{"task": "py-echo", "args": {"i": i}} for i in range(250)]
        ids = await self.client.submit_many(subs)
        self.assertEqual(len(set(ids)), 250)
        jobs = await self.client.wait_many(self.group, ids, timeout=60)
        self.assertEqual([j.state for j in jobs], ["success"] * 250)
        self.assertEqual([j.result for j in jobs], [{"i": i} for i in range(250)])
        page = await self.client.list(self.group, task="py-echo", state="success", limit=10)
        self.assertEqual(len(page), 10)
        self.assertTrue(page.next_cursor)

    async def test_workflow_depends_on(self) -> None:
        refs = await self.client.workflow(self.group, [
            {"ref": "second", "task": "py-echo", "args": {"step": 2}, "depends_on": ["first"]},
            {"ref": "first", "task": "py-sleep", "args": {"ms": 300}},
        ])
        self.assertEqual(set(refs), {"first", "second"})
        second = await self.client.get(self.group, refs["second"])
        self.assertEqual(second.depends_on, [refs["first"]])
        self.assertIn(second.state, ("pending", "waiting", "scheduled", "running", "success"))
        first = await self.client.wait(self.group, refs["first"], timeout=30)
        second = await self.client.wait(self.group, refs["second"], timeout=30)
        self.assertEqual((first.state, second.state), ("success", "success"))
        self.assertGreaterEqual(ts(second.started), ts(first.finished))
        graph = await self.client.graph(self.group, refs["second"])
        self.assertEqual({j.id for j in graph}, set(refs.values()))
        # A cycle is refused, naming it.
        with self.assertRaises(fairway.InvalidError) as cm:
            await self.client.workflow(self.group, [
                {"ref": "a", "task": "py-echo", "depends_on": ["b"]},
                {"ref": "b", "task": "py-echo", "depends_on": ["a"]},
            ])
        self.assertIn("depends_on", cm.exception.field)

    async def test_refusals(self) -> None:
        with self.assertRaises(fairway.InvalidError) as cm:
            await self.client.submit_reply("py-never-registered-task", {})
        self.assertEqual((cm.exception.code, cm.exception.field), ("invalid", "task"))
        with self.assertRaises(fairway.FairwayError) as cm2:
            await self.client.submit_and_wait("py-echo", {}, priority="urgent")
        self.assertEqual((cm2.exception.code, cm2.exception.field), ("invalid", "priority"))
        self.assertIn("urgent", cm2.exception.message)
        # Published to JetStream, refused at ingest: wait answers with the rejection.
        jid = await self.client.submit("py-never-registered-task", {})
        with self.assertRaises(fairway.InvalidError) as cm3:
            await self.client.wait(self.group, jid, timeout=30)
        self.assertEqual(cm3.exception.field, "task")
        with self.assertRaises(fairway.NotFoundError):
            await self.client.get(self.group, "no-such-job-" + short())
        tracker = "py-tracker-" + short()
        held = await self.client.submit_reply("py-sleep", {"ms": 5000}, tracker=tracker)
        with self.assertRaises(fairway.DuplicateError) as cm4:
            await self.client.submit_reply("py-sleep", {"ms": 1}, tracker=tracker)
        self.assertEqual(cm4.exception.code, "duplicate")
        self.assertEqual(cm4.exception.job_id, held.id)
        await self.client.cancel(self.group, held.id)

    async def test_events_in_order_without_duplicates(self) -> None:
        stream = self.client.events(group=self.group, task="py-echo")
        await stream.start()
        try:
            ids = await self.client.submit_many([{"task": "py-echo", "args": {"i": i}} for i in range(5)])
            per_job: dict[str, list[fairway.Event]] = {i: [] for i in ids}
            seen: set[str] = set()
            done: set[str] = set()

            async def read() -> None:
                async for ev in stream:
                    self.assertNotIn(ev.id, seen, "a duplicate event")
                    seen.add(ev.id)
                    if ev.job_id in per_job:
                        per_job[ev.job_id].append(ev)
                        if ev.state == "success":
                            done.add(ev.job_id)
                            if done == set(ids):
                                return

            await asyncio.wait_for(read(), 30)
        finally:
            await stream.close()
        for jid, evs in per_job.items():
            states = [e.state for e in evs]
            self.assertEqual(states[0], "waiting", states)
            self.assertEqual(states[-1], "success", states)
            for prev, ev in zip(evs, evs[1:]):
                self.assertEqual(ev.previous_state, prev.state, states)
                self.assertLessEqual(ts(prev.time), ts(ev.time))
            self.assertTrue(all(e.group == self.group and e.task == "py-echo" for e in evs))

    async def test_progress_and_logs_stored(self) -> None:
        jid = await self.client.submit("py-progress", {})
        job = await poll(lambda: self._progress_is(jid, 40), "progress 40 while it runs")
        self.assertEqual(job.state, "running")

        async def logged() -> Any:
            lines = await self.client.logs(self.group, jid)
            return lines if len(lines) >= 2 else None

        lines = await poll(logged, "the log lines while it runs")
        self.assertEqual([(l.level, l.message) for l in lines], [("info", "working"), ("warn", "still working")])
        GATES.setdefault(jid, asyncio.Event()).set()
        job = await self.client.wait(self.group, jid, timeout=30)
        self.assertEqual((job.state, job.result), ("success", {"ok": True}))
        self.assertEqual([l.message for l in await self.client.logs(self.group, jid)], ["working", "still working", "done"])

    async def _progress_is(self, jid: str, pct: int) -> Any:
        try:
            job = await self.client.get(self.group, jid)
        except fairway.NotFoundError:  # not stored yet
            return None
        return job if job.progress == pct else None

    async def test_cancel_reaches_the_handler(self) -> None:
        jid = await self.client.submit("py-sleep", {"ms": 60000})
        CANCELLED[jid] = asyncio.Event()
        await poll(lambda: self._state_is(jid, "running"), "the job running")
        t0 = time.monotonic()
        await self.client.cancel(self.group, jid)
        await asyncio.wait_for(CANCELLED[jid].wait(), 10)
        job = await self.client.wait(self.group, jid, timeout=30)
        self.assertEqual(job.state, "cancelled")
        self.assertLess(time.monotonic() - t0, 10)
        with self.assertRaises(fairway.ConflictError):
            await self.client.cancel(self.group, jid)

    async def _state_is(self, jid: str, state: str) -> Any:
        try:
            job = await self.client.get(self.group, jid)
        except fairway.NotFoundError:  # not stored yet
            return None
        return job if job.state == state else None

    async def test_permanent_error_and_retries(self) -> None:
        perm = await self.client.submit_and_wait("py-fail", {"message": "bad input", "permanent": True}, wait_timeout=30, max_retries=3)
        self.assertEqual((perm.state, perm.attempt, perm.error), ("failed", 1, "bad input"))
        retried = await self.client.submit_and_wait("py-fail", {"message": "flaky"}, wait_timeout=60, max_retries=1)
        self.assertEqual((retried.state, retried.attempt, retried.error), ("failed", 2, "flaky"))

    async def test_snooze(self) -> None:
        jid = await self.client.submit("py-snooze", {"seconds": 120})
        t0 = datetime.now(timezone.utc)

        async def snoozed() -> Any:
            try:
                job = await self.client.get(self.group, jid)
            except fairway.NotFoundError:  # not stored yet
                return None
            return job if job.state == "waiting" and job.attempt >= 1 else None

        job = await poll(snoozed, "the job snoozed")
        self.assertEqual(job.retries, 0)
        self.assertGreater((ts(job.run_at) - t0).total_seconds(), 100)
        await self.client.cancel(self.group, jid)

    async def test_timeout(self) -> None:
        job = await self.client.submit_and_wait("py-sleep", {"ms": 60000}, wait_timeout=30, max_retries=0, timeout="1s")
        self.assertEqual(job.state, "failed")
        self.assertEqual(job.error, "timeout: the attempt ran longer than 1s")

    async def test_traceparent(self) -> None:
        tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        job = await self.client.submit_and_wait("py-trace", {}, wait_timeout=30, traceparent=tp)
        got = job.result["traceparent"]
        self.assertEqual(got.split("-")[1], "0af7651916cd43dd8448eb211c80319c")
        jid = await self.client.submit("py-trace", {}, traceparent=tp)
        job = await self.client.wait(self.group, jid, timeout=30)
        self.assertEqual(job.result["traceparent"].split("-")[1], "0af7651916cd43dd8448eb211c80319c")
        job = await self.client.submit_and_wait("py-trace", {}, wait_timeout=30)
        self.assertEqual(job.result, {"traceparent": ""})


    async def test_concurrency_limit(self) -> None:
        ids = await self.client.submit_many([{"task": "py-one", "args": {"ms": 200}} for _ in range(3)])
        jobs = await self.client.wait_many(self.group, ids, timeout=30)
        self.assertEqual([j.state for j in jobs], ["success"] * 3)
        spans = sorted((t0, t1) for jid, t0, t1 in SPANS if jid in ids)
        self.assertEqual(len(spans), 3)
        for (_, end), (start, _) in zip(spans, spans[1:]):
            self.assertGreaterEqual(start, end, "two py-one ran at once")

    async def test_concurrency_cap(self) -> None:
        # py-one runs one job at a time (its concurrency); that its requests
        # do not long-poll while it is capped (so that the next job starts
        # when a slot frees, not a poll later) is test_worker's check of the
        # requests themselves: timing it here would measure the machine.
        ids = await self.client.submit_many([{"task": "py-one", "args": {"ms": 100}} for _ in range(3)])
        jobs = await self.client.wait_many(self.group, ids, timeout=30)
        self.assertEqual([j.state for j in jobs], ["success"] * 3)
        spans = sorted((t0, t1) for jid, t0, t1 in SPANS if jid in ids)
        self.assertEqual(len(spans), 3)
        for (_, end), (start, _) in zip(spans, spans[1:]):
            self.assertLessEqual(end, start, f"two jobs of a task capped at 1 overlapped: {spans}")

    async def test_prefetch_bound(self) -> None:
        peak = 0
        sampling = True

        async def sample() -> None:
            nonlocal peak
            while sampling:
                peak = max(peak, self.worker.held)
                await asyncio.sleep(0)

        sampler = asyncio.get_running_loop().create_task(sample())
        ids = await self.client.submit_many([{"task": "py-trace", "args": {}} for _ in range(400)])
        jobs = await self.client.wait_many(self.group, ids, timeout=60)
        sampling = False
        await sampler
        self.assertEqual({j.state for j in jobs}, {"success"})
        print("PEAK", peak) if __import__("os").environ.get("PY_DEBUG_PEAK") else None
        self.assertLessEqual(peak, 2 * self.worker.slots)
        self.assertGreaterEqual(peak, 1)

    async def test_pause_resume_drain(self) -> None:
        app = self.worker.app_id
        await self.client.admin("pause", {"executor": app, "task": "py-echo"})
        await self.client.transport.flush()
        jid = await self.client.submit("py-echo", {"paused": True})
        # A bounded look: while paused, the job never runs. (It may be
        # handed over once, to a request that left before the pause came,
        # and is then released at once: scheduled, then waiting again.)
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            try:
                self.assertIn((await self.client.get(self.group, jid)).state, ("waiting", "scheduled"))
            except fairway.NotFoundError:
                pass
            await asyncio.sleep(0.1)
        # Other tasks still run.
        self.assertEqual((await self.client.submit_and_wait("py-trace", {}, wait_timeout=30)).state, "success")
        await self.client.admin("pause", {"executor": app, "task": "py-echo", "resume": True})
        self.assertEqual((await self.client.wait(self.group, jid, timeout=30)).state, "success")
        await self.client.admin("drain", {"executor": app})
        await asyncio.wait_for(self.worker.wait_stopped(), 30)
        self.assertTrue(self.worker.drain_requested)


class GracefulStopTest(unittest.IsolatedAsyncioTestCase):
    group = f"py-{short()}"

    async def test_graceful_and_forced_stop(self) -> None:
        url = require_env(self, "FAIRWAY_TEST_NATS_URL", DEV_HOW)
        async with await fairway.connect(url, group=self.group) as client:
            worker = fairway.Worker(client, f"py-it-{short()}", slots=2, registry=registry, groups=[self.group])
            await worker.start()
            finishing = await client.submit("py-sleep", {"ms": 1500})
            await poll(lambda: self._running(client, finishing), "the job running")
            worker.stop()
            await asyncio.wait_for(worker.wait_stopped(), 30)
            # The worker's report is in JetStream when it stops; the
            # coordinator applies it a moment later.
            self.assertEqual((await client.wait(self.group, finishing, timeout=30)).state, "success")
            executors = await client.admin("executors")
            mine = [e for e in executors.get("executors", []) if e["instance"] == worker.instance]
            self.assertEqual([e["state"] for e in mine], ["deregistered"])

            # Forced: the running job is released, its attempt given back, and runs again elsewhere.
            worker2 = fairway.Worker(client, f"py-it-{short()}", slots=2, registry=registry, groups=[self.group])
            await worker2.start()
            long = await client.submit("py-sleep", {"ms": 60000})
            CANCELLED[long] = asyncio.Event()
            await poll(lambda: self._running(client, long), "the long job running")
            worker2.stop()
            worker2.stop(force=True)
            await asyncio.wait_for(worker2.wait_stopped(), 30)
            self.assertTrue(CANCELLED[long].is_set())
            job = await client.get(self.group, long)
            self.assertEqual((job.state, job.attempt, job.retries), ("waiting", 0, 0))
            await client.cancel(self.group, long)

    async def _running(self, client: fairway.Client, jid: str) -> Any:
        try:
            return (await client.get(self.group, jid)).state == "running"
        except fairway.NotFoundError:  # not stored yet
            return False


class TenantsTest(unittest.IsolatedAsyncioTestCase):
    async def test_creds_login_in_tenants_mode(self) -> None:
        url = require_env(self, "FAIRWAY_TEST_TENANTS_NATS_URL", TENANTS_HOW)
        creds = require_env(self, "FAIRWAY_TEST_CREDS_DIR", TENANTS_HOW)
        for name in ("tenant-acme.creds", "executor-py.creds"):
            self.assertTrue(os.path.exists(os.path.join(creds, name)), f"{name} missing in {creds}: {TENANTS_HOW}")
        exec_client = await fairway.connect(url, creds=os.path.join(creds, "executor-py.creds"))
        worker = fairway.Worker(exec_client, "py", slots=2, registry=registry, tasks=["py-echo"])
        await asyncio.wait_for(worker.start(), 30)
        try:
            async with await fairway.connect(url, creds=os.path.join(creds, "tenant-acme.creds"), group="acme") as acme:
                stream = acme.events(group="acme", task="py-echo", state="success")  # the tenant's own events stream
                await stream.start()
                job = await acme.submit_and_wait("py-echo", {"tenant": "acme"}, wait_timeout=30)
                self.assertEqual((job.state, job.result, job.worker), ("success", {"tenant": "acme"}, "py"))

                async def success_event() -> fairway.Event:
                    async for ev in stream:
                        if ev.job_id == job.id:
                            return ev
                    raise AssertionError("the events stream ended")

                ev = await asyncio.wait_for(success_event(), 30)
                await stream.close()
                self.assertEqual((ev.group, ev.state, ev.previous_state), ("acme", "success", "running"))
                jid = await acme.submit("py-echo", {"via": "jetstream"})
                self.assertEqual((await acme.wait("acme", jid, timeout=30)).state, "success")
                # Another tenant's group is out of reach of acme's credential.
                with self.assertRaises(fairway.NoRespondersError):
                    await acme.submit_reply("py-echo", {}, group="globex")
                with self.assertRaises(fairway.NoRespondersError):
                    await acme.submit("py-echo", {}, group="globex")
        finally:
            await worker.shutdown(timeout=10)
            await exec_client.close()
