// Unit tests of the Worker against a fake NATS connection and coordinator:
// no server needed.
import test from "node:test";
import assert from "node:assert/strict";
import { Worker } from "../dist/index.js";

const te = new TextEncoder();
const td = new TextDecoder();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, fn, ms = 5000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(10);
  }
}

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * A fake cluster: a NATS connection whose requests a fake coordinator
 * answers, and a JetStream that stores the reports. `on[verb]` may replace
 * the answer of a verb: (body) => reply text, or a promise of it.
 */
function fakeCluster() {
  const subs = [];
  const requests = []; // { verb, body }
  const reports = [];
  const queue = []; // jobs to hand out
  let pushed = () => {};
  const on = {};
  const dispatch = async (body) => {
    if (body.stopping) return "{}";
    const take = () => {
      const out = [];
      const perTask = new Map();
      for (let i = 0; i < queue.length && out.length < body.slots; ) {
        const j = queue[i];
        const cap = body.task_slots?.[j.task] ?? Infinity;
        if (body.tasks.includes(j.task) && (perTask.get(j.task) ?? 0) < cap) {
          out.push(j);
          perTask.set(j.task, (perTask.get(j.task) ?? 0) + 1);
          queue.splice(i, 1);
        } else i++;
      }
      return out;
    };
    let jobs = take();
    if (jobs.length === 0 && body.wait_ms > 0) {
      // A long poll: held until a job is eligible, at most wait_ms.
      const deadline = Date.now() + body.wait_ms;
      while (jobs.length === 0 && Date.now() < deadline) {
        await new Promise((r) => {
          const t = setTimeout(r, deadline - Date.now());
          pushed = () => {
            clearTimeout(t);
            r();
          };
        });
        jobs = take();
      }
    }
    return JSON.stringify({ jobs });
  };
  const deliver = (subject, text, reply) => {
    for (const s of subs.filter((s) => s.subject === subject)) {
      s.callback(null, { subject, data: te.encode(text), reply: reply ? "_INBOX.x" : "", respond: () => true, json: () => JSON.parse(text) });
    }
  };
  const nc = {
    subscribe(subject, opts) {
      const s = { subject, callback: opts.callback };
      subs.push(s);
      return {
        unsubscribe() {
          const i = subs.indexOf(s);
          if (i >= 0) subs.splice(i, 1);
        },
      };
    },
    async flush() {},
    async request(subject, data, opts) {
      const verb = subject.split(".").at(-1);
      const body = JSON.parse(typeof data === "string" ? data : td.decode(data));
      requests.push({ verb, body, at: Date.now() });
      const h = on[verb] ?? (verb === "dispatch" ? dispatch : async () => "{}");
      const text = await h(body, opts);
      return { data: te.encode(text) };
    },
    info: { max_payload: 1 << 20 },
    isClosed: () => false,
  };
  const js = {
    async publish(subject, body) {
      const r = JSON.parse(body);
      reports.push(...(Array.isArray(r) ? r : [r]));
      return { stream: "FAIRWAY_RESULTS", seq: reports.length, duplicate: false };
    },
  };
  const client = { nc, js, prefix: "fairway", subject: (...t) => ["fairway", ...t].join(".") };
  return {
    client,
    subs,
    requests,
    reports,
    on,
    /** Queues jobs and tells the worker (fairway.notify.work). */
    push(...jobs) {
      queue.push(...jobs);
      pushed();
      deliver("fairway.notify.work", "", false);
    },
    /** Sends a command to the worker (its callback runs now, as nats-core's parser calls it). */
    command(appId, verb, text, reply = false) {
      deliver(`fairway.executor.${appId}.${verb}`, text, reply);
    },
    done: (id) => reports.find((r) => r.type === "done" && r.job_id === id),
  };
}

let n = 0;
const job = (task, attempt = 1, extra = {}) => ({ id: `j${++n}`, group: "g", task, attempt, args: {}, ...extra });

function newWorker(c, opts = {}) {
  return new Worker(c.client, { appId: "w", slots: 4, prefetch: 0, heartbeatMs: 60_000, wakeupMs: 10_000, logger: quiet, ...opts });
}

test("worker: a malformed command never throws out of its subscription callback, and is ignored", async () => {
  const c = fakeCluster();
  const w = newWorker(c);
  w.task("echo", async () => "ok");
  await w.start();
  try {
    const junk = ["null", '"x"', "[]", "{not json", "42", "", "\u0000\xff"];
    const bodies = {
      pause: [...junk, '{"task":7}', '{"task":"a.b"}', '{"resume":"yes"}', '{"task":null,"resume":1}'],
      cancel: [...junk, "{}", '{"group":"g","job_id":"j","attempt":"1"}', '{"group":1,"job_id":"j","attempt":1}', '{"group":"g","job_id":"j","attempt":0}'],
      ping: junk, // any drain stops the worker: below
    };
    for (const [verb, list] of Object.entries(bodies)) {
      for (const body of list) assert.doesNotThrow(() => c.command("w", verb, body, true), `${verb} ${body}`);
    }
    // Not paused by any of them: a job still runs.
    const j = job("echo");
    c.push(j);
    await until("the job's done report", () => c.done(j.id));
    assert.equal(c.done(j.id).outcome, "success", JSON.stringify(c.done(j.id)));
    // Any drain, whatever its body, stops the worker (as in Go).
    assert.doesNotThrow(() => c.command("w", "drain", "null"));
    await until("the drained worker stopped", () => w.stopping && c.subs.length === 0);
  } finally {
    await w.stop({ force: true });
  }
});

test("worker: stop() while the registration is answered unsubscribes and deregisters; run() resolves", async () => {
  const c = fakeCluster();
  let answer;
  c.on.register = () => new Promise((r) => (answer = r));
  const w = newWorker(c);
  w.task("echo", async () => "ok");
  const ran = w.run({ handleSignals: false });
  await until("the register request", () => answer);
  const stopped = w.stop();
  answer("{}"); // registered just as it stops
  await stopped;
  await ran; // resolves, not rejects
  assert.equal(c.subs.length, 0, `subscriptions left: ${c.subs.map((s) => s.subject)}`);
  assert.ok(c.requests.some((r) => r.verb === "deregister" && r.body.instance === w.instance), "deregistered");
  assert.ok(!c.requests.some((r) => r.verb === "dispatch"), "asked for no job");
  await assert.rejects(w.ready);
});

test("worker: stop() while no coordinator answers the registration ends promptly; run() resolves", async () => {
  const c = fakeCluster();
  // A request nobody answers: it times out after its timeout.
  c.on.register = (_body, opts) => new Promise((_, rej) => setTimeout(() => rej(Object.assign(new Error("TIMEOUT"), { name: "TimeoutError" })), opts.timeout));
  const w = newWorker(c);
  w.task("echo", async () => "ok");
  const ran = w.run({ handleSignals: false });
  await until("the register request", () => c.requests.some((r) => r.verb === "register"));
  const t0 = Date.now();
  await w.stop();
  await ran;
  assert.ok(Date.now() - t0 < 500, `stop took ${Date.now() - t0} ms`);
  assert.equal(c.subs.length, 0);
});

/** Answers c's dispatch requests with replies in turn, then with none (held 50 ms); returns the request ids seen. */
function scriptDispatch(c, replies) {
  const seen = [];
  c.on.dispatch = async (body) => {
    if (body.stopping) return "{}";
    seen.push(body.request_id);
    if (replies.length > 0) return replies.shift();
    await sleep(50);
    return '{"jobs":[]}';
  };
  return seen;
}

test("worker: a malformed dispatch reply is not accepted; bad jobs are skipped, good ones run", async () => {
  const c = fakeCluster();
  const replies = [
    JSON.stringify({ jobs: "abc" }),
    JSON.stringify({ jobs: { id: "x" } }),
    "null",
    "[]",
    JSON.stringify({
      jobs: [null, 7, "s", [], { id: "b1", group: "g", task: "echo" }, { id: 5, group: "g", task: "echo", attempt: 1 }, { id: "b3", group: "g", task: "echo", attempt: "1" }, job("echo", 1, { id: "good" })],
    }),
  ];
  const seen = scriptDispatch(c, replies);
  const errors = [];
  const w = newWorker(c, { logger: { ...quiet, warn: (m) => errors.push(m), error: (m) => errors.push(m) } });
  const ran = [];
  w.task("echo", async (j) => ran.push(j.id));
  await w.start();
  try {
    await until("the good job's done report", () => c.done("good"), 8000);
    assert.deepEqual(ran, ["good"]);
    // Only the good job was accepted: one done report, no report on the others.
    assert.deepEqual(c.reports.filter((r) => r.type === "done").map((r) => r.job_id), ["good"]);
    // The malformed replies kept the request id: asked again under it.
    assert.equal(new Set(seen.slice(0, 5)).size, 1, `request ids ${seen}`);
    assert.equal(errors.filter((m) => /malformed job/.test(m)).length, 1, errors.join("\n"));
  } finally {
    await w.stop({ force: true });
  }
});

test("worker: an unavailable reply keeps the request id and is said once", async () => {
  const c = fakeCluster();
  const unavailable = JSON.stringify({ error: { code: "unavailable", message: "claiming in journal partition 0: its leader cannot answer now" } });
  const replies = [unavailable, unavailable, JSON.stringify({ jobs: [job("echo", 1, { id: "good" })] })];
  const seen = scriptDispatch(c, replies);
  const warnings = [];
  const w = newWorker(c, { logger: { ...quiet, warn: (m) => warnings.push(m), error: (m) => warnings.push(m) } });
  w.task("echo", async () => {});
  await w.start();
  try {
    await until("the job's done report", () => c.done("good"), 8000);
    await until("a request after the jobs", () => seen.length >= 4, 8000);
    // Asked again under the same id until a reply handed jobs out: a
    // claim whose answer was lost is handed out then.
    assert.equal(new Set(seen.slice(0, 3)).size, 1, `request ids ${seen}`);
    assert.notEqual(seen[3], seen[2]);
    assert.equal(warnings.filter((m) => /cannot hand out jobs now/.test(m)).length, 1, warnings.join("\n"));
  } finally {
    await w.stop({ force: true });
  }
});

test("worker: a wakeup ends the pause after an unavailable reply", async () => {
  const c = fakeCluster();
  const unavailable = JSON.stringify({ error: { code: "unavailable", message: "claiming in journal partition 0: its leader cannot answer now" } });
  const j = job("echo");
  const seen = scriptDispatch(c, [unavailable, JSON.stringify({ jobs: [j] })]);
  const w = newWorker(c, { wakeupMs: 3_600_000 });
  w.task("echo", async () => {});
  const backoff = Worker.dispatchBackoffMs;
  Worker.dispatchBackoffMs = 3_600_000; // only the wakeup can end it
  await w.start();
  try {
    await until("the request answered unavailable", () => seen.length >= 1, 8000);
    c.push(); // a notification of work: the pause ends, the job is asked for
    await until("the job's done report", () => c.done(j.id), 8000);
    assert.equal(seen[1], seen[0], `asked again under its id: ${seen}`);
  } finally {
    Worker.dispatchBackoffMs = backoff;
    await w.stop({ force: true });
  }
});

test("worker: the dropped-lines marker is counted in the log buffer", async () => {
  const c = fakeCluster();
  const w = newWorker(c, { logBufferSize: 0 }); // every line dropped
  const j = job("logs");
  const lines = () => c.reports.filter((r) => r.type === "log" && r.job_id === j.id).flatMap((r) => r.logs.map((l) => l.message));
  w.task("logs", async (_j, ctx) => {
    for (let i = 0; i < 3; i++) ctx.log("info", `first ${i}`);
    await until("a flush: the first marker goes", () => lines().length > 0);
    for (let i = 0; i < 3; i++) ctx.log("info", `second ${i}`);
    return null;
  });
  await w.start();
  try {
    c.push(j);
    await until("the done report", () => c.done(j.id));
    assert.deepEqual(lines(), ["3 log lines dropped: the executor's log buffer was full", "3 log lines dropped: the executor's log buffer was full"]);
  } finally {
    await w.stop({ force: true });
  }
});

test("worker: a remembered cancel is kept for the attempt it names", async () => {
  const c = fakeCluster();
  const w = newWorker(c);
  w.task("echo", async () => "ok");
  await w.start();
  try {
    c.command("w", "cancel", JSON.stringify({ group: "g", job_id: "jc", attempt: 2 }));
    c.push(job("echo", 1, { id: "jc" }));
    await until("attempt 1's done report", () => c.done("jc"));
    assert.equal(c.done("jc").outcome, "success");
    c.push(job("echo", 2, { id: "jc" }));
    await until("attempt 2's done report", () => c.reports.find((r) => r.type === "done" && r.job_id === "jc" && r.attempt === 2));
    assert.equal(c.reports.find((r) => r.type === "done" && r.attempt === 2).outcome, "cancelled");
  } finally {
    await w.stop({ force: true });
  }
});

test("worker: resuming every task leaves a task paused on its own paused", async () => {
  const c = fakeCluster();
  const w = newWorker(c);
  w.task("ocr", async () => "ok");
  w.task("echo", async () => "ok");
  await w.start();
  try {
    c.command("w", "pause", JSON.stringify({ task: "ocr" }));
    c.command("w", "pause", "{}");
    const from = c.requests.length;
    c.command("w", "pause", JSON.stringify({ resume: true }));
    const req = await until("a dispatch request after the resume", () => c.requests.slice(from).find((r) => r.verb === "dispatch" && !r.body.stopping));
    assert.deepEqual(req.body.tasks, ["echo"]);
    w.resume("ocr");
    await until("ocr asked for again", () => c.requests.slice(from).some((r) => r.verb === "dispatch" && r.body.tasks?.includes("ocr")), 3000);
  } finally {
    await w.stop({ force: true });
  }
});

test("worker: a task at its cap is asked for again as soon as its job ends, not after a long poll", async () => {
  const c = fakeCluster();
  const w = newWorker(c);
  w.task("capped", async () => sleep(100), { concurrency: 1 });
  w.task("other", async () => "ok");
  await w.start();
  try {
    await until("a first dispatch request", () => c.requests.some((r) => r.verb === "dispatch"));
    const jobs = [job("capped"), job("capped"), job("capped")];
    c.push(...jobs);
    await until("the three jobs' done reports", () => jobs.every((j) => c.done(j.id)), 5000);
    // While capped, the request did not long-poll (that it then asks at
    // once is the loop's wake on a job's end; timing it would measure the
    // machine).
    const capped = c.requests.filter((r) => r.verb === "dispatch" && r.body.tasks && !r.body.tasks.includes("capped"));
    assert.ok(capped.length > 0 && capped.every((r) => r.body.wait_ms === 0), JSON.stringify(capped.map((r) => r.body)));
  } finally {
    await w.stop({ force: true });
  }
});

test("worker: a forced stop releases the running jobs only after the coordinators heard that it stops", async () => {
  // A second signal can come while the stopping request is on its way: a
  // release the leader heard first would count the attempt.
  const c = fakeCluster();
  const order = [];
  let answerStopping;
  c.on.dispatch = async (body) => {
    if (body.stopping) {
      order.push("stopping asked");
      await new Promise((r) => (answerStopping = r));
      order.push("stopping answered");
      return "{}";
    }
    if (order.length > 0) return '{"jobs":[]}';
    order.push("dispatched");
    return JSON.stringify({ jobs: [job("long", 1, { id: "held" })] });
  };
  const w = newWorker(c);
  let running;
  const started = new Promise((r) => (running = r));
  w.task("long", (j, ctx) => {
    running();
    return new Promise((_, reject) => ctx.signal.addEventListener("abort", () => {
      order.push("handler aborted");
      reject(ctx.signal.reason);
    }));
  });
  await w.start();
  await started;
  const graceful = w.stop();
  await until("the stopping request", () => answerStopping);
  const forced = w.stop({ force: true });
  try {
    await sleep(50); // time for a release that does not wait for the answer
    assert.deepEqual(order, ["dispatched", "stopping asked"]);
  } finally {
    answerStopping();
    await Promise.all([graceful, forced]);
  }
  assert.deepEqual(order, ["dispatched", "stopping asked", "stopping answered", "handler aborted"]);
  assert.equal(c.done("held").outcome, "released", JSON.stringify(c.done("held")));
});

test("worker: an attempt it ran, handed out again, is not run again; the next attempt is", async () => {
  const c = fakeCluster();
  const warned = [];
  const w = newWorker(c, { logger: { ...quiet, warn: (m) => warned.push(m) } });
  const runs = [];
  w.task("echo", async (j) => {
    runs.push(j.attempt);
    return "ok";
  });
  await w.start();
  try {
    c.push(job("echo", 1, { id: "jr" }));
    await until("attempt 1's done report", () => c.done("jr"));
    // Handed out again (a coordinator that took it for still held, its
    // report not yet stored), then its next attempt.
    c.push(job("echo", 1, { id: "jr" }), job("echo", 2, { id: "jr" }));
    await until("attempt 2's done report", () => c.reports.find((r) => r.type === "done" && r.job_id === "jr" && r.attempt === 2));
    assert.deepEqual(runs, [1, 2]);
    assert.equal(c.reports.filter((r) => r.type === "done" && r.job_id === "jr").length, 2);
    assert.equal(warned.filter((m) => m.includes("already ran")).length, 1);
  } finally {
    await w.stop({ force: true });
  }
});
