#!/usr/bin/env node
// A Fairway executor in JavaScript on the Worker of @fairway/client
// (clients/typescript): the package speaks the executor protocol
// (registering, heartbeats, dispatch, reports, commands, a graceful stop);
// this program only says which task it runs and what the task does.
//
//     go run ./cmd/fairway dev                  # first terminal
//     (cd clients/typescript && npm ci)         # installs and builds the package
//     cd examples/node && npm ci
//     node executor.js                          # registers app-id node-example, task node-hello
//     node submit.js --task node-hello --args '{"name":"ada"}'
//
// It runs the task node-hello, at most --slots jobs at once, until SIGINT
// or SIGTERM (or an operator's drain): then it asks for no more jobs, lets
// the running ones finish, waits until JetStream has acknowledged its last
// reports and deregisters. A second signal cancels the running jobs and
// reports them released (they run again elsewhere).

import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { connect, PermanentError, Worker } from "@fairway/client";

const { values: opts } = parseArgs({
  options: {
    "nats-url": { type: "string", default: process.env.FAIRWAY_NATS_URL ?? "nats://127.0.0.1:4222" },
    prefix: { type: "string", default: "fairway" }, // nats.prefix
    "app-id": { type: "string", default: "node-example" }, // one subject token: letters, digits, - and _
    slots: { type: "string", default: "2" },
    "heartbeat-ms": { type: "string", default: "5000" },
    "wakeup-ms": { type: "string", default: "10000" },
  },
});

const now = () => new Date().toISOString();
// The worker's own messages (registered, paused, stopping, deregistered
// instance …), timestamped.
const logger = {
  debug() {},
  info: (m) => console.log(`[${now()}] ${m}`),
  warn: (m) => console.error(`[${now()}] warning: ${m}`),
  error: (m) => console.error(`[${now()}] error: ${m}`),
};

let fw;
try {
  fw = await connect({ servers: opts["nats-url"], prefix: opts.prefix, name: `fairway-node-executor ${opts["app-id"]}` });
} catch (err) {
  console.error(`executor.js: ${err.message}`);
  process.exit(1);
}

const worker = new Worker(fw, {
  appId: opts["app-id"],
  slots: Number(opts.slots),
  heartbeatMs: Number(opts["heartbeat-ms"]),
  wakeupMs: Number(opts["wakeup-ms"]),
  logger,
});

// node-hello greets args.name. With args.steps and args.step_ms it works
// that many steps of that many milliseconds, reporting progress: a long
// job, to watch or to cancel. ctx.signal is aborted when the job is
// cancelled (the worker then reports it cancelled), runs past its timeout
// or the worker is forced to stop (reported released).
worker.task("node-hello", async (job, ctx) => {
  const name = job.args?.name ?? "world";
  if (typeof name !== "string") throw new PermanentError("args.name must be a string"); // failed, not retried
  ctx.log("info", `hello from node, ${name} (attempt ${job.attempt})`);
  const steps = job.args?.steps ?? 4;
  for (let i = 1; i <= steps; i++) {
    await sleep(job.args?.step_ms ?? 0, undefined, { signal: ctx.signal });
    ctx.progress(Math.floor((i * 100) / steps)); // coalesced to one report a second, and the last
  }
  return { greeting: `hello, ${name}`, chars: [...name].length, from: "node" };
});

// run registers (the worker's logger prints "registered app-id …"), runs
// jobs, stops on SIGINT/SIGTERM and resolves once it has stopped.
try {
  await worker.run();
} catch (err) {
  console.error(`executor.js: ${err.message}`);
  await fw.close();
  process.exit(1);
}
await fw.close();
console.log(`[${now()}] executor stopped`);
process.exit(0);
