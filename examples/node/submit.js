#!/usr/bin/env node
// Submit Fairway jobs from Node.js and follow their events until each one
// is final (docs/nats-api.md: "Submit asynchronously", "Request/reply API",
// "Events").
//
//     go run ./cmd/fairway dev                 # first terminal
//     cd examples/node && npm ci
//     node submit.js --group acme --task echo --args '{"hello":"node"}' --count 3
//
// It prints "submitted job <id>" for each job, its events, then
// "job <id> final state: <state>"; it exits 0 when every job succeeded,
// 1 when one did not or --timeout passed first.

import { connect, DeliverPolicy, ErrorCode } from "nats";
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";

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
const { prefix: P, group, task } = opts;
let args;
try {
  args = JSON.parse(opts.args);
} catch (err) {
  fail(`--args: not JSON: ${err.message}`);
}
const count = Number(opts.count);
if (!(count >= 1)) fail(`--count ${opts.count}: at least 1`);
if (!["jetstream", "api", "both"].includes(opts.via)) fail(`--via ${opts.via}: use jetstream, api or both`);

const nc = await connect({ servers: opts["nats-url"], name: "fairway-node-submit" }).catch((err) => fail(`connecting to ${opts["nats-url"]}: ${err.message}`));
const js = nc.jetstream();
setTimeout(() => fail(`not every job was final within ${opts.timeout} s`), Number(opts.timeout) * 1000).unref();

// Follow the events first, from a moment before the first submission: an
// ordered consumer (ephemeral, in stream order, nothing to clean up) on the
// events stream, filtered to the group and task. Starting it at a time
// rather than at "new" means no event can slip by between creating the
// consumer and submitting. Stream FAIRWAY_EVENTS, subjects
// fairway.events.<group>.<task>.<state>.
const since = new Date(Date.now() - 1000).toISOString();
const consumer = await js.consumers.get(`${P.toUpperCase()}_EVENTS`, {
  filterSubjects: [`${P}.events.${group}.${task}.>`],
  deliver_policy: DeliverPolicy.StartTime,
  opt_start_time: since,
});
const events = await consumer.consume();

// Submit. Each job gets its id here, in the body: publishing it again is
// then the same job (de-duplicated per group, in PostgreSQL), and its events
// can be recognised before the submission returns.
const pending = new Map(); // job id -> final state, once known
for (let i = 0; i < count; i++) {
  const id = `node-${randomUUID()}`;
  pending.set(id, null);
  const body = { id, args };
  const viaAPI = opts.via === "api" || (opts.via === "both" && i % 2 === 1);
  if (viaAPI) {
    // Request/reply: fairway.api.<group>.submit with the Submission (the
    // body names the task); the reply is {"id","job"} or {"error"}, and a
    // "warning" when no live executor runs the task.
    const reply = (await request(`${P}.api.${group}.submit`, { ...body, task })).json();
    if (reply.error) fail(`submitting through the API: ${reply.error.code}: ${reply.error.message}`);
    if (reply.warning) console.error(`warning: ${reply.warning}`);
    console.log(`submitted job ${reply.id} (group ${group}, task ${task}, via the API; state ${reply.job?.state})`);
  } else {
    // Asynchronous: publish to fairway.submit.<group>.<task> with
    // JetStream and wait for its acknowledgement; from then on the job
    // survives a coordinator that is down. No Nats-Msg-Id: JetStream's
    // de-duplication spans every group; the id in the body is the one that
    // counts. A submission that fails validation comes back as a rejected
    // event.
    let ack;
    try {
      ack = await js.publish(`${P}.submit.${group}.${task}`, new TextEncoder().encode(JSON.stringify(body)));
    } catch (err) {
      if (err.code === ErrorCode.NoResponders) fail(`no stream takes ${P}.submit.${group}.${task}: is a coordinator running? (it creates the stream)`);
      throw err;
    }
    console.log(`submitted job ${id} (group ${group}, task ${task}, stream ${ack.stream} seq ${ack.seq})`);
  }
}

// Read the events until every job is final (success, failed, cancelled)
// or rejected. A message holds an array of events (a batch of one subject),
// or one event when the coordinators run with --event-per-message.
// Delivery is at least once: drop an event seen already, by its id.
const seen = new Set();
follow: for await (const m of events) {
  const body = m.json();
  for (const ev of Array.isArray(body) ? body : [body]) {
    if (seen.has(ev.id) || !pending.has(ev.job_id)) continue;
    seen.add(ev.id);
    console.log(`job ${ev.job_id} event: ${ev.previous_state || "submitted"} -> ${ev.state} (attempt ${ev.attempt})${ev.error ? `: ${ev.error}` : ""}`);
    if (["success", "failed", "cancelled", "rejected"].includes(ev.state)) {
      pending.set(ev.job_id, ev.state);
      if ([...pending.values()].every((s) => s !== null)) break follow;
    }
  }
}

// The result is stored with the job: get it through the request/reply API,
// fairway.api.<group>.get with {"id"}.
let ok = true;
for (const [id, state] of pending) {
  const reply = (await request(`${P}.api.${group}.get`, { id })).json();
  if (reply.job?.result !== undefined) console.log(`job ${id} result: ${JSON.stringify(reply.job.result)}`);
  console.log(`job ${id} final state: ${state}`);
  ok &&= state === "success";
}
await nc.close();
process.exit(ok ? 0 : 1);

function request(subject, body) {
  return nc.request(subject, new TextEncoder().encode(JSON.stringify(body)), { timeout: 10000 });
}

function fail(message) {
  console.error(`submit.js: ${message}`);
  process.exit(1);
}
