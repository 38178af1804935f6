#!/usr/bin/env node
// A Fairway executor in plain JavaScript: the executor protocol of
// docs/nats-api.md, "Executor protocol (for executors in other languages)",
// spoken with the nats.js client and nothing else. Each step below names
// the point of that section it implements.
//
//     go run ./cmd/fairway dev                  # first terminal
//     cd examples/node && npm ci
//     node executor.js                          # registers app-id node-example, task node-hello
//     node submit.js --task node-hello --args '{"name":"ada"}'
//
// It runs the task node-hello, at most --slots jobs at once, until SIGINT
// or SIGTERM: then it asks for no more jobs, lets the running ones finish,
// waits until JetStream has acknowledged its last reports and deregisters.
// A second signal cancels the running jobs and reports them released (they
// run again elsewhere).
//
// What the Go executor (package executor) does beyond this: it batches
// reports and log lines under load, coalesces progress to one report a
// second per job, and starts a tracing span from a job's traceparent.

import { connect, ErrorCode } from "nats";
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: {
    "nats-url": { type: "string", default: process.env.FAIRWAY_NATS_URL ?? "nats://127.0.0.1:4222" },
    prefix: { type: "string", default: "fairway" }, // nats.prefix
    "app-id": { type: "string", default: "node-example" },
    slots: { type: "string", default: "2" },
    "heartbeat-ms": { type: "string", default: "5000" },
    "wakeup-ms": { type: "string", default: "10000" },
  },
});
const P = opts.prefix;
const APP_ID = opts["app-id"]; // one subject token: letters, digits, - and _
const SLOTS = Number(opts.slots);
const INSTANCE = randomUUID(); // this process; a restart is a new instance
const DISPATCH_WAIT_MS = 1000; // how long a coordinator may hold a dispatch request (a long poll)

// ---------------------------------------------------------------------------
// The task. A handler gets the dispatched job and a context: log(level,
// message) adds a line to the job's log, progress(percent) reports how far
// it is, signal is aborted when the job is cancelled (or the executor is
// forced to stop). What it returns is the job's result; what it throws
// fails the attempt (retried), unless the error has permanent: true.

const handlers = {
  // node-hello greets args.name. With args.steps and args.step_ms it works
  // that many steps of that many milliseconds, reporting progress: a long
  // job, to watch or to cancel.
  "node-hello": async (job, { log, progress, signal }) => {
    const name = job.args?.name ?? "world";
    if (typeof name !== "string") {
      throw Object.assign(new Error("args.name must be a string"), { permanent: true });
    }
    log("info", `hello from node, ${name} (attempt ${job.attempt})`);
    const steps = job.args?.steps ?? 4;
    for (let i = 1; i <= steps; i++) {
      await sleep(job.args?.step_ms ?? 0, signal);
      progress(Math.floor((i * 100) / steps));
    }
    return { greeting: `hello, ${name}`, chars: [...name].length, from: "node" };
  },
};
const TASKS = Object.keys(handlers);

// ---------------------------------------------------------------------------
// Subjects (docs/nats-api.md, "Subjects").

const subject = {
  register: `${P}.exec.${APP_ID}.register`,
  deregister: `${P}.exec.${APP_ID}.deregister`,
  dispatch: `${P}.exec.${APP_ID}.dispatch`,
  heartbeat: `${P}.exec.${APP_ID}.heartbeat`,
  results: `${P}.results.${APP_ID}`,
  cancel: `${P}.executor.${APP_ID}.cancel`,
  ping: `${P}.executor.${APP_ID}.ping`,
  pause: `${P}.executor.${APP_ID}.pause`,
  drain: `${P}.executor.${APP_ID}.drain`,
  notifyWork: `${P}.notify.work`,
};

const enc = (v) => new TextEncoder().encode(JSON.stringify(v));
const now = () => new Date().toISOString();
const log = (...a) => console.log(`[${now()}]`, ...a);
const parseJSON = (msg) => {
  try {
    return msg.json();
  } catch {
    return null;
  }
};
const key = (group, id) => `${group}\u0000${id}`; // job ids are unique per group only

// State of this executor.
const held = new Map(); // key(group, id) -> { job, abort: AbortController }
const earlyCancels = new Map(); // key -> { attempt, at }: cancels for jobs not held yet
const paused = new Set(); // tasks an operator paused ("" = every task)
let stopping = false; // SIGINT/SIGTERM/drain: ask for no more jobs
let dispatching; // the dispatch loop, once it runs
let shuttingDown; // the shutdown, once it began
let heartbeats; // the heartbeat timer

// Reasons a job's signal is aborted with.
const CANCELLED = "cancelled";
const SHUTDOWN = "shutdown";
const TIMEOUT = "timeout";

const nc = await connect({ servers: opts["nats-url"], name: `fairway-node-executor ${APP_ID}`, maxReconnectAttempts: -1 }).catch((err) => {
  console.error(`executor.js: connecting to ${opts["nats-url"]}: ${err.message}`);
  process.exit(1);
});
const js = nc.jetstream();

// A wakeup: the dispatch loop sleeps on it when it has nothing to ask for.
let wakeUp = () => {};
const wake = () => wakeUp();
const nextWakeup = (ms) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    wakeUp = () => {
      clearTimeout(t);
      resolve();
    };
  });

// ---------------------------------------------------------------------------
// Commands from the coordinators. Subscribed before registering, and
// flushed, so that no cancel or ping for this instance can be missed.

// "Obey fairway.executor.<app-id>.cancel ({"group","job_id","attempt"}, all
// required: cancel only that attempt of that job, and remember one for a
// job you do not hold yet for that exact attempt)".
nc.subscribe(subject.cancel, {
  callback: (err, msg) => {
    const cmd = err ? {} : (parseJSON(msg) ?? {});
    if (!cmd.group || !cmd.job_id || !(cmd.attempt >= 1)) {
      log("ignoring a cancel command that does not name group, job_id and attempt:", msg.string());
      if (msg.reply) msg.respond(enc({ error: { code: "invalid", message: "a cancel command needs group, job_id and attempt" } }));
      return;
    }
    const h = held.get(key(cmd.group, cmd.job_id));
    if (h && h.job.attempt === cmd.attempt) {
      log(`cancelling job ${cmd.job_id} (attempt ${cmd.attempt})`);
      h.abort.abort(CANCELLED);
    } else if (!h) {
      // Its dispatch reply may still be on its way: remember it a minute.
      for (const [k, { at }] of earlyCancels) if (Date.now() - at > 60_000) earlyCancels.delete(k);
      earlyCancels.set(key(cmd.group, cmd.job_id), { attempt: cmd.attempt, at: Date.now() });
    } // else: a command for another attempt than the one held changes nothing.
    if (msg.reply) msg.respond(enc({}));
  },
});

// "answer fairway.executor.<app-id>.ping (reply to its reply subject,
// fairway.exec.<app-id>.pong.<nonce>) with your instance id when its body
// is empty or names your instance". A coordinator pings before it lets a
// new instance of this app-id replace a running one.
nc.subscribe(subject.ping, {
  callback: (err, msg) => {
    const named = err ? "" : msg.string();
    if (!err && msg.reply && (named === "" || named === INSTANCE)) msg.respond(new TextEncoder().encode(INSTANCE));
  },
});

// "Obey fairway.executor.<app-id>.pause ({"executor","task","resume"})":
// stop asking for jobs of task (every task when empty), or ask again.
nc.subscribe(subject.pause, {
  callback: (err, msg) => {
    const cmd = err ? null : parseJSON(msg);
    if (!cmd) return;
    const task = cmd.task ?? "";
    if (!cmd.resume) {
      paused.add(task);
    } else {
      if (task === "") paused.clear();
      else paused.delete(task);
      wake();
    }
    log(cmd.resume ? "resumed" : "paused", task || "every task");
  },
});

// "Obey fairway.executor.<app-id>.drain ({"executor"}): take no new jobs,
// finish the running ones, deregister and exit, as on SIGTERM."
nc.subscribe(subject.drain, { callback: () => shutdown("an operator asked to drain") });

// "Ask again when a slot frees, on fairway.notify.work, and every
// wakeup-period": coordinators publish an empty message when work arrives.
nc.subscribe(subject.notifyWork, { callback: () => wake() });

await nc.flush();

// ---------------------------------------------------------------------------
// Register: request fairway.exec.<app-id>.register with
// {"executor":{"app_id","instance","host","slots","tasks":[…]}}; "a Reply
// with an error means refused". No answer yet means no coordinator runs:
// ask again every second.

async function register() {
  const body = enc({ executor: { app_id: APP_ID, instance: INSTANCE, host: hostname(), slots: SLOTS, tasks: TASKS, started: now() } });
  for (;;) {
    try {
      const reply = (await nc.request(subject.register, body, { timeout: 2000 })).json();
      if (reply.error) throw new Error(`registration refused: ${reply.error.code}: ${reply.error.message}`);
      return;
    } catch (err) {
      if (err.code !== ErrorCode.NoResponders && err.code !== ErrorCode.Timeout) throw err;
      log("waiting for a coordinator:", err.message);
      await sleep(1000);
    }
  }
}

await register();
log(`registered app-id ${APP_ID}, instance ${INSTANCE}, tasks ${TASKS.join(",")}, slots ${SLOTS}`);

// ---------------------------------------------------------------------------
// Heartbeat to fairway.exec.<app-id>.heartbeat every few seconds:
// {"executor","instance","jobs":[{"group","id"} held],"slots"}. It renews
// the leases of the jobs held; one silent for 3 leases is marked gone.

const heartbeat = () => {
  const jobs = [...held.values()].map(({ job }) => ({ group: job.group, id: job.id }));
  nc.publish(subject.heartbeat, enc({ executor: APP_ID, instance: INSTANCE, jobs, slots: SLOTS }));
};
heartbeat();
heartbeats = setInterval(heartbeat, Number(opts["heartbeat-ms"]));

// ---------------------------------------------------------------------------
// Report to fairway.results.<app-id> (JetStream): a JSON array of reports,
// {"type":"started|progress|log|done","group","job_id","attempt","executor",
// "instance","time",…}. group, job_id and attempt come from the dispatched
// job: a report applies only while this instance holds that attempt.
// Reports go out one after the other, in order, each awaited until
// JetStream acknowledges it and sent again (under the same Nats-Msg-Id, so
// it is stored once) until it is.

let reportChain = Promise.resolve();
let reportSeq = 0;
const reportIDBase = randomUUID();

function report(job, type, fields = {}) {
  const body = enc([{ type, group: job.group, job_id: job.id, attempt: job.attempt, executor: APP_ID, instance: INSTANCE, time: now(), ...fields }]);
  const msgID = `${reportIDBase}-${++reportSeq}`;
  reportChain = reportChain.then(async () => {
    for (;;) {
      try {
        await js.publish(subject.results, body, { msgID, timeout: 10000 });
        return;
      } catch (err) {
        log(`report ${type} of job ${job.id} not acknowledged (${err.message}); sending it again`);
        await sleep(1000);
      }
    }
  });
}

// ---------------------------------------------------------------------------
// Ask for work: request fairway.exec.<app-id>.dispatch with
// {"executor","instance","slots":N,"tasks":[…],"wait_ms","request_id"};
// the reply {"jobs":[Job…]} holds at most N jobs, now scheduled for this
// instance. Ask when slots are free: after a job ends, on notify.work, and
// every wakeup period (a notification may be lost).

async function dispatchLoop() {
  let requestID = "";
  while (!stopping) {
    const free = SLOTS - held.size;
    const tasks = paused.has("") ? [] : TASKS.filter((t) => !paused.has(t));
    if (free <= 0 || tasks.length === 0) {
      await nextWakeup(Number(opts["wakeup-ms"]));
      continue;
    }
    // "A request that got no answer may have claimed jobs: send it again
    // with the same request_id to get them": a new id only after an answer.
    requestID ||= randomUUID();
    const asked = Date.now();
    let reply;
    try {
      const body = { executor: APP_ID, instance: INSTANCE, slots: free, tasks, wait_ms: DISPATCH_WAIT_MS, request_id: requestID };
      reply = (await nc.request(subject.dispatch, enc(body), { timeout: DISPATCH_WAIT_MS + 4000 })).json();
    } catch (err) {
      if (err.code !== ErrorCode.NoResponders && err.code !== ErrorCode.Timeout) log("asking for jobs:", err.message);
      await nextWakeup(err.code === ErrorCode.Timeout ? 0 : 1000); // a timeout: the same request_id again, at once
      continue;
    }
    if (reply.error?.code === "not_registered") {
      // "your instance is not the registered one: register again" (the
      // coordinators took it for gone after a silence, say).
      log("the coordinators do not know this instance; registering again");
      await register();
      requestID = "";
      continue;
    }
    if (reply.error) {
      log(`dispatch refused: ${reply.error.code}: ${reply.error.message}`);
      await nextWakeup(1000);
      continue;
    }
    requestID = "";
    const jobs = reply.jobs ?? [];
    for (const job of jobs) accept(job);
    // A long poll that ran its course found nothing: ask again at once. An
    // empty answer that came quickly means the coordinator does not hold
    // requests: wait for a wakeup.
    if (jobs.length === 0 && Date.now() - asked < DISPATCH_WAIT_MS / 2) await nextWakeup(Number(opts["wakeup-ms"]));
  }
}

// accept takes a dispatched job: runs it, or reports it at once when it
// cannot run here.
function accept(job) {
  const k = key(job.group, job.id);
  if (held.has(k)) return; // handed out twice: the one held goes on
  const abort = new AbortController();
  held.set(k, { job, abort });
  const early = earlyCancels.get(k);
  earlyCancels.delete(k);
  if (stopping || held.size > SLOTS) {
    // "released" puts it back to waiting without counting a failure.
    finish(job, { outcome: "released", error: "released before it started: the executor is shutting down" });
  } else if (early && early.attempt === job.attempt && Date.now() - early.at < 60_000) {
    finish(job, { outcome: "cancelled", error: "cancelled before it started" });
  } else if (!handlers[job.task]) {
    finish(job, { outcome: "permanent", error: `no handler for task ${job.task} on executor ${APP_ID}` });
  } else {
    run(job, abort.signal);
  }
}

// run runs a job's handler and reports its start, log lines, progress and
// outcome.
async function run(job, signal) {
  report(job, "started");
  log(`running job ${job.id} (group ${job.group}, task ${job.task}, attempt ${job.attempt})`);
  const timeout = goDuration(job.timeout); // the job's own bound on an attempt, if submitted with one
  const timer = timeout > 0 ? setTimeout(() => held.get(key(job.group, job.id))?.abort.abort(TIMEOUT), timeout) : null;
  let lastProgress = -1;
  const ctx = {
    signal,
    log: (level, message) => report(job, "log", { logs: [{ group: job.group, job_id: job.id, attempt: job.attempt, time: now(), level, message }] }),
    progress: (pct) => {
      pct = Math.min(100, Math.max(0, Math.round(pct)));
      if (pct !== lastProgress) report(job, "progress", { progress: (lastProgress = pct) });
    },
  };
  let done;
  try {
    const result = await handlers[job.task](job, ctx);
    // A success is one even if a cancel came meanwhile: its work is done.
    done = { outcome: "success", result: result ?? null };
  } catch (err) {
    if (signal.reason === CANCELLED) done = { outcome: "cancelled", error: "cancelled while running" };
    else if (signal.reason === SHUTDOWN) done = { outcome: "released", error: "released while it ran: the executor shut down before the job finished" };
    else if (signal.reason === TIMEOUT) done = { outcome: "error", error: `timeout: the attempt ran longer than ${job.timeout}` };
    else done = { outcome: err?.permanent ? "permanent" : "error", error: String(err?.message ?? err) };
  } finally {
    clearTimeout(timer);
  }
  log(`job ${job.id} ${done.outcome}${done.error ? `: ${done.error}` : ""}`);
  finish(job, done);
}

// finish sends the done report, "outcome":"success|error|permanent|
// cancelled|released|snoozed" with its result or error, and frees the slot.
function finish(job, done) {
  report(job, "done", done);
  held.delete(key(job.group, job.id));
  wake(); // a slot is free: ask for more
}

// ---------------------------------------------------------------------------
// Shutdown: ask for nothing more, let the running jobs finish, wait for the
// last reports to be acknowledged, then "Deregister when you shut down,
// after your last reports are acknowledged: request
// fairway.exec.<app-id>.deregister with {"executor","instance"} (wait
// briefly; it is best effort)".

function shutdown(why) {
  if (shuttingDown) {
    // A second signal: cancel the running jobs, reported released.
    log("stopping now: releasing the running jobs");
    for (const { abort } of held.values()) abort.abort(SHUTDOWN);
    return shuttingDown;
  }
  log(`shutting down (${why}): no new jobs; waiting for ${held.size} running`);
  stopping = true;
  wake();
  shuttingDown = (async () => {
    // "Stop: before you release the jobs you hold as you shut down, request
    // fairway.exec.<app-id>.dispatch with {"executor","instance","stopping":true}
    // and wait for its (empty) reply": the leader hands this instance
    // nothing more, and what it releases counts no attempt.
    try {
      const reply = (await nc.request(subject.dispatch, enc({ executor: APP_ID, instance: INSTANCE, stopping: true }), { timeout: 2000 })).json();
      if (reply.error) throw new Error(`${reply.error.code}: ${reply.error.message}`);
    } catch (err) {
      log(`could not tell the coordinators that this executor stops (${err.message}); its jobs are released all the same`);
    }
    await dispatching; // a reply in flight: its jobs are released at once
    while (held.size > 0) await nextWakeup(1000);
    await reportChain;
    clearInterval(heartbeats);
    try {
      const reply = (await nc.request(subject.deregister, enc({ executor: APP_ID, instance: INSTANCE }), { timeout: 2000 })).json();
      if (reply.error) throw new Error(`${reply.error.code}: ${reply.error.message}`);
      log(`deregistered instance ${INSTANCE}`);
    } catch (err) {
      log(`could not deregister (${err.message}); the coordinators mark this executor gone after a few silent leases`);
    }
    await nc.drain();
  })();
  return shuttingDown;
}
process.on("SIGINT", () => shutdown("SIGINT"));
process.on("SIGTERM", () => shutdown("SIGTERM"));

// ---------------------------------------------------------------------------
// Helpers.

// sleep waits ms milliseconds, or rejects when signal aborts.
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new Error(`aborted: ${signal.reason}`));
    const onAbort = () => {
      clearTimeout(t);
      reject(new Error(`aborted: ${signal.reason}`));
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// goDuration parses a Go duration ("90s", "1h30m", "250ms") into
// milliseconds; 0 for none or one it cannot read.
function goDuration(s) {
  if (!s) return 0;
  const units = { ns: 1e-6, us: 1e-3, "µs": 1e-3, ms: 1, s: 1e3, m: 60e3, h: 3600e3 };
  let ms = 0;
  for (const [, n, unit] of s.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(n) * units[unit];
  return ms;
}

dispatching = dispatchLoop();
await dispatching;
await shuttingDown;
log("executor stopped");
process.exit(0);
