// Integration tests against a real `fairway dev` (FAIRWAY_TEST_NATS_URL).
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { FairwayError, PermanentError, snooze, JobAbortedError, Worker, connect } from "../dist/index.js";
import { GROUP, RUN, natsUrl, startWorker, until, signal } from "./helpers.mjs";
import test from "node:test";

// Fails (never skips) when the dev's URL is not given, saying how to set it.
test("FAIRWAY_TEST_NATS_URL names a running fairway dev", () => natsUrl());

describe("client and worker against fairway dev", () => {
  let h;
  const started = new Map(); // job id -> resolves when its handler started
  const aborts = new Map(); // job id -> the abort reason its handler saw
  const waitStarted = (id) => {
    if (!started.has(id)) started.set(id, signal());
    return started.get(id).promise;
  };
  const markStarted = (id) => {
    if (!started.has(id)) started.set(id, signal());
    started.get(id).resolve();
  };

  before(async () => {
    h = await startWorker([
      ["ts-it-echo", async (job) => job.args],
      [
        "ts-it-work",
        async (job, ctx) => {
          ctx.log("info", `working on ${job.args.name}`);
          ctx.progress(30);
          ctx.progress(60);
          ctx.log("warn", "almost done");
          ctx.progress(100);
          return { done: job.args.name };
        },
      ],
      [
        "ts-it-sleep",
        async (job, ctx) => {
          markStarted(job.id);
          await new Promise((resolve, reject) => {
            const t = setTimeout(resolve, job.args.ms);
            ctx.signal.addEventListener("abort", () => {
              clearTimeout(t);
              aborts.set(job.id, ctx.signal.reason);
              reject(ctx.signal.reason);
            });
          });
          return { slept: job.args.ms };
        },
      ],
      [
        "ts-it-fail",
        async (job) => {
          if (job.args.permanent) throw new PermanentError(job.args.message);
          throw new Error(job.args.message);
        },
      ],
      ["ts-it-snooze", async (job) => snooze(job.args.seconds * 1000)],
    ]);
  });
  after(async () => {
    await h?.close();
  });

  it("submitAndWait returns the final job with its result", async () => {
    const job = await h.fw.submitAndWait({ group: GROUP, task: "ts-it-echo", args: { hello: "world", n: 1 } }, { timeoutMs: 20_000 });
    assert.equal(job.state, "success");
    assert.deepEqual(job.result, { hello: "world", n: 1 });
    assert.equal(job.worker, h.worker.appId);
    assert.equal(job.attempt, 1);
  });

  it("submit publishes to JetStream; wait follows it to its end", async () => {
    const ack = await h.fw.submit({ group: GROUP, task: "ts-it-echo", args: { via: "jetstream" }, priority: "high", subject: "ts test" });
    assert.match(ack.id, /^[0-9a-f-]{36}$/);
    assert.equal(ack.stream, "FAIRWAY_SUBMIT");
    assert.ok(ack.seq > 0);
    const job = await h.fw.wait(GROUP, ack.id, { timeoutMs: 20_000 });
    assert.equal(job.state, "success");
    assert.equal(job.priority, "high");
    assert.equal(job.subject, "ts test");
    assert.deepEqual(job.result, { via: "jetstream" });
  });

  it("submitMany stores a batch, in messages of at most 100", async () => {
    const subs = Array.from({ length: 230 }, (_, i) => ({ group: GROUP, task: "ts-it-echo", args: { i } }));
    const ids = await h.fw.submitMany(subs);
    assert.equal(ids.length, 230);
    assert.equal(new Set(ids).size, 230);
    const jobs = await h.fw.waitMany(GROUP, ids, { timeoutMs: 60_000 });
    jobs.forEach((job, i) => {
      assert.equal(job.state, "success");
      assert.deepEqual(job.result, { i });
    });
  });

  it("a workflow runs a job after the one it depends on", async () => {
    const refs = await h.fw.workflow(GROUP, [
      { ref: "second", task: "ts-it-echo", args: { step: 2 }, depends_on: ["first"] },
      { ref: "first", task: "ts-it-echo", args: { step: 1 } },
    ]);
    assert.ok(refs.first && refs.second);
    const second = await h.fw.wait(GROUP, refs.second, { timeoutMs: 20_000 });
    const first = await h.fw.get(GROUP, refs.first);
    assert.equal(second.state, "success");
    assert.equal(first.state, "success");
    assert.deepEqual(second.depends_on, [refs.first]);
    assert.ok(Date.parse(second.started) >= Date.parse(first.finished), `second started ${second.started} before first finished ${first.finished}`);
  });

  it("a refusal is a FairwayError with its code and field", async () => {
    await assert.rejects(
      h.fw.submitAndWait({ group: GROUP, task: "ts-it-echo", priority: "urgent" }),
      (err) => err instanceof FairwayError && err.code === "invalid" && err.field === "priority" && /urgent/.test(err.message),
    );
    await assert.rejects(
      h.fw.submitRequest({ group: GROUP, task: "ts-never-registered" }),
      (err) => err instanceof FairwayError && err.code === "invalid" && err.field === "task",
    );
    await assert.rejects(
      h.fw.workflow(GROUP, [
        { ref: "a", task: "ts-it-echo", depends_on: ["b"] },
        { ref: "b", task: "ts-it-echo", depends_on: ["a"] },
      ]),
      (err) => err instanceof FairwayError && err.code === "invalid" && /^jobs\[\d\]\.depends_on$/.test(err.field),
    );
    await assert.rejects(h.fw.get(GROUP, "ts-no-such-job"), (err) => err instanceof FairwayError && err.code === "not_found");
    // A rejection of an asynchronous submission comes back from wait.
    const { id } = await h.fw.submit({ group: GROUP, task: "ts-it-echo", run_at: "2026-01-01T00:00:00Z", trigger_after: "2026-01-01T00:00:00Z" });
    await assert.rejects(h.fw.wait(GROUP, id, { timeoutMs: 20_000 }), (err) => err instanceof FairwayError && err.code === "invalid" && !!err.field);
  });

  it("events: a job's states in order, each once", async () => {
    const seen = [];
    const ids = new Set();
    let jobId;
    const ended = signal();
    const pending = [];
    const sub = await h.fw.subscribe({ group: GROUP, task: "ts-it-work" }, (ev) => {
      assert.ok(!ids.has(ev.id), `event ${ev.id} delivered twice`);
      ids.add(ev.id);
      if (jobId === undefined) pending.push(ev);
      else if (ev.job_id === jobId) seen.push(ev);
      if (ev.job_id === jobId && ev.state === "success") ended.resolve();
    });
    try {
      const { id } = await h.fw.submit({ group: GROUP, task: "ts-it-work", args: { name: "events" } });
      jobId = id;
      seen.push(...pending.filter((ev) => ev.job_id === id));
      if (seen.some((ev) => ev.state === "success")) ended.resolve();
      await Promise.race([ended.promise, h.fw.wait(GROUP, id, { timeoutMs: 20_000 }).then(() => until("the success event", () => seen.some((e) => e.state === "success"), 10_000))]);
    } finally {
      await sub.stop();
    }
    const states = seen.map((ev) => ev.state);
    assert.equal(states[0], "waiting", `states ${states}`);
    assert.equal(states.at(-1), "success", `states ${states}`);
    assert.ok(states.includes("scheduled"), `states ${states}`);
    // Each event's previous state is the state before it.
    for (let i = 1; i < seen.length; i++) assert.equal(seen[i].previous_state, seen[i - 1].state, `states ${states}`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].time >= seen[i - 1].time);
  });

  it("subscribe replays stored events with since: 'all' and drops none of a job's", async () => {
    const job = await h.fw.submitAndWait({ group: GROUP, task: "ts-it-echo", args: { replay: true } }, { timeoutMs: 20_000 });
    const got = [];
    const done = signal();
    const sub = await h.fw.subscribe({ group: GROUP, task: "ts-it-echo", state: "success", since: new Date(Date.parse(job.submitted) - 1000) }, (ev) => {
      if (ev.job_id === job.id) {
        got.push(ev);
        done.resolve();
      }
    });
    try {
      await Promise.race([done.promise, until("the replayed success event", () => got.length > 0, 10_000)]);
    } finally {
      await sub.stop();
    }
    assert.equal(got.length, 1);
    assert.equal(got[0].state, "success");
  });

  it("worker: log lines and progress are stored", async () => {
    const job = await h.fw.submitAndWait({ group: GROUP, task: "ts-it-work", args: { name: "logs" } }, { timeoutMs: 20_000 });
    assert.equal(job.state, "success");
    assert.equal(job.progress, 100);
    assert.deepEqual(job.result, { done: "logs" });
    const got = await h.fw.get(GROUP, job.id);
    assert.equal(got.progress, 100);
    const lines = await until("the job's log lines", async () => {
      const l = await h.fw.logs(GROUP, job.id);
      return l.length >= 2 ? l : null;
    });
    assert.deepEqual(
      lines.map((l) => [l.level, l.message, l.attempt]),
      [
        ["info", "working on logs", 1],
        ["warn", "almost done", 1],
      ],
    );
  });

  it("worker: a cancel reaches the handler's signal", async () => {
    const { id } = await h.fw.submit({ group: GROUP, task: "ts-it-sleep", args: { ms: 60_000 } });
    await waitStarted(id);
    const t0 = Date.now();
    await h.fw.cancel(GROUP, id);
    const job = await h.fw.wait(GROUP, id, { timeoutMs: 20_000 });
    assert.equal(job.state, "cancelled");
    assert.ok(Date.now() - t0 < 10_000);
    const reason = aborts.get(id);
    assert.ok(reason instanceof JobAbortedError, `abort reason ${reason}`);
    assert.equal(reason.kind, "cancelled");
  });

  it("worker: a job's timeout aborts its signal and fails the attempt", async () => {
    const job = await h.fw.submitAndWait({ group: GROUP, task: "ts-it-sleep", args: { ms: 60_000 }, timeout: "1s", max_retries: 0 }, { timeoutMs: 30_000 });
    assert.equal(job.state, "failed");
    assert.match(job.error, /^timeout: the attempt ran longer than 1s/);
    assert.equal(aborts.get(job.id)?.kind, "timeout");
  });

  it("worker: PermanentError fails at once, other errors are retried", async () => {
    const perm = await h.fw.submitAndWait({ group: GROUP, task: "ts-it-fail", args: { message: "bad input", permanent: true }, max_retries: 3 }, { timeoutMs: 20_000 });
    assert.equal(perm.state, "failed");
    assert.equal(perm.attempt, 1);
    assert.equal(perm.error, "bad input");
    const retried = await h.fw.submitAndWait({ group: GROUP, task: "ts-it-fail", args: { message: "flaky" }, max_retries: 1 }, { timeoutMs: 60_000 });
    assert.equal(retried.state, "failed");
    assert.equal(retried.attempt, 2);
    assert.equal(retried.error, "flaky");
  });

  it("worker: a snooze puts the job back to waiting, due later, no failure counted", async () => {
    const before = Date.now();
    const { id } = await h.fw.submit({ group: GROUP, task: "ts-it-snooze", args: { seconds: 120 } });
    const job = await until("the snoozed job waiting again", async () => {
      const j = await h.fw.get(GROUP, id).catch((err) => (err.code === "not_found" ? null : Promise.reject(err))); // not stored yet
      return j?.state === "waiting" && j.attempt >= 1 ? j : null;
    });
    assert.equal(job.retries, 0);
    assert.ok(Date.parse(job.run_at) >= before + 100_000, `run_at ${job.run_at}`);
    await h.fw.cancel(GROUP, id);
  });

  it("list finds the group's jobs, newest first", async () => {
    const { id } = await h.fw.submit({ group: GROUP, task: "ts-it-echo", args: { list: true } });
    await h.fw.wait(GROUP, id, { timeoutMs: 20_000 });
    const page = await h.fw.list({ group: GROUP, task: "ts-it-echo", limit: 5 });
    assert.ok(page.jobs.length > 0 && page.jobs.length <= 5);
    assert.equal(page.jobs[0].id, id);
    assert.ok(page.nextCursor);
  });
});

describe("worker robustness against fairway dev", () => {
  it("malformed commands stop no reading on the connection; the worker still runs jobs", async () => {
    const a = await startWorker([["ts-it-cmd", async (job) => job.args]], { appId: `ts-cmd-${RUN}` });
    // A second worker on the same connection, told to drain with junk bodies.
    const b = new Worker(a.fw, { appId: `ts-drain-${RUN}`, heartbeatMs: 2000, wakeupMs: 2000 });
    b.task("ts-it-cmd-drain", async () => null);
    const bRan = b.run({ handleSignals: false });
    await b.ready;
    const other = await connect({ servers: natsUrl() });
    try {
      const junk = ["null", '"x"', "[]", "{not json", "42", ""];
      for (const verb of ["pause", "cancel", "ping"]) {
        for (const body of junk) other.nc.publish(other.subject("executor", a.worker.appId, verb), body);
      }
      for (const body of junk) other.nc.publish(other.subject("executor", b.appId, "drain"), body);
      await other.nc.flush();
      // The drained worker stops, deregistering (its replies are read).
      await within(bRan, 15_000, "the drained worker's run() to resolve");
      // The worker still takes and runs jobs, and answers a ping.
      const job = await other.submitAndWait({ group: GROUP, task: "ts-it-cmd", args: { still: "running" } }, { timeoutMs: 20_000 });
      assert.equal(job.state, "success");
      assert.deepEqual(job.result, { still: "running" });
      const pong = await other.nc.request(other.subject("executor", a.worker.appId, "ping"), "", { timeout: 2000 });
      assert.equal(pong.string(), a.worker.instance);
      // The client sharing the worker's connection still reads its replies.
      assert.equal((await a.fw.get(GROUP, job.id)).state, "success");
    } finally {
      // Bounded: on a connection that stopped reading, these would hang.
      await within(other.close(), 10_000, "closing").catch(() => {});
      await within(b.stop({ force: true }), 15_000, "stopping").catch(() => {});
      await within(a.close(), 15_000, "closing").catch(() => {});
    }
  });

  it("jobs of a task at its concurrency run one at a time", async () => {
    const h = await startWorker(
      [
        ["ts-it-cap", async () => new Promise((r) => setTimeout(r, 100)), { concurrency: 1 }],
        ["ts-it-cap-other", async () => null],
      ],
      { appId: `ts-cap-${RUN}` },
    );
    try {
      await new Promise((r) => setTimeout(r, 300)); // idle: long-polling
      const ids = await h.fw.submitMany(Array.from({ length: 3 }, (_, i) => ({ group: GROUP, task: "ts-it-cap", args: { i } })));
      const jobs = await h.fw.waitMany(GROUP, ids, { timeoutMs: 20_000 });
      for (const j of jobs) assert.equal(j.state, "success");
      // One at a time (that the next starts when one ends, not a long
      // poll later, is the unit test's check of the requests).
      const spans = jobs.map((j) => [Date.parse(j.started), Date.parse(j.finished)]).sort((a, b) => a[0] - b[0]);
      for (let i = 1; i < spans.length; i++) {
        assert.ok(spans[i - 1][1] <= spans[i][0], `two jobs of a task of concurrency 1 overlapped: ${JSON.stringify(spans)}`);
      }
    } finally {
      await h.close();
    }
  });
});

async function within(p, ms, what) {
  let t;
  try {
    return await Promise.race([p, new Promise((_, rej) => (t = setTimeout(() => rej(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)))]);
  } finally {
    clearTimeout(t);
  }
}
