#!/usr/bin/env node
// The TypeScript executor of the conformance suite (clients/conformance/README.md),
// on the built package (dist/): `npm run build` first.
//
//   node conformance-executor.mjs --nats-url nats://127.0.0.1:4222 --app-id conf-ts [--creds F] [--slots 4] [--tasks a,b]

import { parseArgs } from "node:util";
import { connect, Worker, PermanentError, SnoozeError, FairwayError } from "./dist/index.js";

const { values: opts } = parseArgs({
  options: {
    "nats-url": { type: "string" },
    creds: { type: "string" },
    "app-id": { type: "string" },
    slots: { type: "string", default: "4" },
    tasks: { type: "string", default: "" },
  },
});
if (!opts["nats-url"] || !opts["app-id"]) {
  console.error("usage: conformance-executor.mjs --nats-url URL --app-id ID [--creds FILE] [--slots N] [--tasks a,b]");
  process.exit(1);
}
const slots = Number(opts.slots);
if (!Number.isInteger(slots) || slots < 1) {
  console.error(`conformance: --slots ${opts.slots} is not a positive integer`);
  process.exit(1);
}

// sleep waits ms, rejecting with the signal's reason when it aborts
// (a cancel, the job's timeout, a forced stop).
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

const tasks = {
  "conf-echo": [
    async (job, ctx) => {
      ctx.log("info", `echo attempt ${job.attempt}`);
      ctx.progress(50);
      ctx.progress(100);
      return job.args ?? {};
    },
  ],
  "conf-sleep": [
    async (job, ctx) => {
      const ms = Number(job.args?.ms ?? 0);
      await sleep(ms, ctx.signal);
      return { slept: ms };
    },
  ],
  "conf-fail": [
    async (job) => {
      const message = String(job.args?.message ?? "conf-fail");
      if (job.args?.permanent) throw new PermanentError(message);
      throw new Error(message);
    },
  ],
  "conf-snooze": [
    async (job) => {
      throw new SnoozeError(Number(job.args?.seconds ?? 1) * 1000);
    },
  ],
  "conf-big": [async (job) => ({ data: "x".repeat(Number(job.args?.bytes ?? 0)) })],
  "conf-trace": [async (job, ctx) => ({ traceparent: ctx.traceparent ?? "" })],
  "conf-one": [
    async (job, ctx) => {
      const ms = Number(job.args?.ms ?? 0);
      await sleep(ms, ctx.signal);
      return { slept: ms };
    },
    { concurrency: 1 },
  ],
};

const only = opts.tasks ? opts.tasks.split(",").map((t) => t.trim()).filter(Boolean) : Object.keys(tasks);
for (const t of only) {
  if (!tasks[t]) {
    console.error(`conformance: unknown task ${t}; known: ${Object.keys(tasks).join(",")}`);
    process.exit(1);
  }
}

let fw;
try {
  fw = await connect({ servers: opts["nats-url"], creds: opts.creds, name: `fairway-ts-conformance ${opts["app-id"]}` });
} catch (err) {
  console.error(`conformance: ${err.message}`);
  process.exit(1);
}
const worker = new Worker(fw, { appId: opts["app-id"], slots, prefetch: slots });
for (const t of only) worker.task(t, tasks[t][0], tasks[t][1]);

// Signals are handled by run() from the start, registration included;
// the suite waits for this line before it sends a second one.
let said = false;
const sayStopping = () => {
  if (!said) process.stdout.write("conformance: stopping\n");
  said = true;
};
process.on("SIGINT", sayStopping);
process.on("SIGTERM", sayStopping);
const running = worker.run({ handleSignals: true });
running.catch(() => {}); // its error is worker.ready's, handled below
try {
  await worker.ready;
} catch (err) {
  if (err instanceof FairwayError) {
    process.stdout.write(`conformance: refused: ${err.code}: ${err.message}\n`);
    await fw.close().catch(() => {});
    process.exit(2);
  }
  console.error(`conformance: ${err?.message ?? err}`);
  process.exit(1);
}
process.stdout.write(`conformance: registered ${opts["app-id"]} ${worker.instance}\n`);

let status = 0;
try {
  await running;
} catch (err) {
  console.error(`conformance: stopping: ${err?.message ?? err}`);
  status = 1;
}
await fw.close().catch(() => {});
process.stdout.write("conformance: stopped\n");
process.exit(status);
