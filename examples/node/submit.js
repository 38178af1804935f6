#!/usr/bin/env node
// Submit Fairway jobs from Node.js with the client of @fairway/client
// (clients/typescript) and follow their events until each one is final.
//
//     go run ./cmd/fairway dev                 # first terminal
//     (cd clients/typescript && npm ci)        # installs and builds the package
//     cd examples/node && npm ci
//     node submit.js --group acme --task echo --args '{"hello":"node"}' --count 3
//
// It prints "submitted job <id>" for each job, its events, then
// "job <id> final state: <state>"; it exits 0 when every job succeeded,
// 1 when one did not or --timeout passed first.

import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { connect } from "@fairway/client";

const { values: opts } = parseArgs({
  options: {
    "nats-url": { type: "string", default: process.env.FAIRWAY_NATS_URL ?? "nats://127.0.0.1:4222" },
    prefix: { type: "string", default: "fairway" }, // nats.prefix
    group: { type: "string", default: "examples" }, // the jobs' group (tenant)
    task: { type: "string", default: "echo" }, // fairway dev runs echo, sleep, fail, panic, snooze; executor.js runs node-hello
    args: { type: "string", default: '{"hello":"node"}' }, // the jobs' args, a JSON object
    count: { type: "string", default: "1" }, // how many jobs
    // jetstream: publish to the submit stream (the asynchronous path);
    // api: the request/reply API, whose reply is the stored job or an
    // error; both: every other job each way.
    via: { type: "string", default: "jetstream" },
    timeout: { type: "string", default: "60" }, // seconds to wait for every job to be final
  },
});
const { group, task } = opts;
let args;
try {
  args = JSON.parse(opts.args);
} catch (err) {
  fail(`--args: not JSON: ${err.message}`);
}
const count = Number(opts.count);
if (!(count >= 1)) fail(`--count ${opts.count}: at least 1`);
if (!["jetstream", "api", "both"].includes(opts.via)) fail(`--via ${opts.via}: use jetstream, api or both`);

const fw = await connect({ servers: opts["nats-url"], prefix: opts.prefix, name: "fairway-node-submit" }).catch((err) => fail(err.message));
setTimeout(() => fail(`not every job was final within ${opts.timeout} s`), Number(opts.timeout) * 1000).unref();

// Follow the events first, from a moment before the first submission, so
// that none can slip by between subscribing and submitting: an ordered
// consumer on stream FAIRWAY_EVENTS, filtered to the group and task, with
// duplicates dropped (delivery is at least once).
const pending = new Map(); // job id -> final state, once known
let allFinal;
const finished = new Promise((resolve) => (allFinal = resolve));
const events = await fw
  .subscribe({ group, task, since: new Date(Date.now() - 1000) }, (ev) => {
    if (!pending.has(ev.job_id)) return;
    console.log(`job ${ev.job_id} event: ${ev.previous_state || "submitted"} -> ${ev.state} (attempt ${ev.attempt})${ev.error ? `: ${ev.error}` : ""}`);
    if (["success", "failed", "cancelled", "rejected"].includes(ev.state)) {
      pending.set(ev.job_id, ev.state);
      if ([...pending.values()].every((s) => s !== null)) allFinal();
    }
  })
  .catch((err) => fail(err.message));

// Submit. Each job gets its id here: submitting it again is then the same
// job (de-duplicated per group), and its events can be recognised before
// the submission returns.
for (let i = 0; i < count; i++) {
  const sub = { group, task, id: `node-${randomUUID()}`, args };
  pending.set(sub.id, null);
  const viaAPI = opts.via === "api" || (opts.via === "both" && i % 2 === 1);
  if (viaAPI) {
    // Request/reply (fairway.api.<group>.submit): the reply is the stored
    // job, with a warning when no live executor runs the task; a refusal
    // throws a FairwayError (code, field, message).
    const reply = await fw.submitRequest(sub).catch((err) => fail(`submitting through the API: ${err.code ?? "error"}: ${err.message}`));
    if (reply.warning) console.error(`warning: ${reply.warning}`);
    console.log(`submitted job ${reply.id} (group ${group}, task ${task}, via the API; state ${reply.job?.state})`);
  } else {
    // Asynchronous (fairway.submit.<group>.<task>): stored once JetStream
    // acknowledges it, even while no coordinator runs. A submission that
    // fails validation comes back as a rejected event.
    const ack = await fw.submit(sub).catch((err) => fail(`submitting: ${err.message}`));
    console.log(`submitted job ${ack.id} (group ${group}, task ${task}, stream ${ack.stream} seq ${ack.seq})`);
  }
}

let following = true;
events.done.then(
  () => following && fail("the event subscription ended"),
  (err) => following && fail(`following the events: ${err.message}`),
);
await finished;
following = false;
await events.stop();

// The result is stored with the job: get it through the request/reply API.
let ok = true;
for (const [id, state] of pending) {
  const job = await fw.get(group, id).catch(() => undefined); // a rejected job was never stored
  if (job?.result !== undefined) console.log(`job ${id} result: ${JSON.stringify(job.result)}`);
  console.log(`job ${id} final state: ${state}`);
  ok &&= state === "success";
}
await fw.close();
process.exit(ok ? 0 : 1);

function fail(message) {
  console.error(`submit.js: ${message}`);
  process.exit(1);
}
