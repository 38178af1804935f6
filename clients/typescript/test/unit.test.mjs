// Unit tests of the pure parts: no server needed.
import test from "node:test";
import assert from "node:assert/strict";
import { NoRespondersError, PermissionViolationError, RequestError, TimeoutError } from "@nats-io/nats-core";
import {
  parseDuration,
  formatDuration,
  decodeEvents,
  EventDeduper,
  prefetchTarget,
  heldWaitMs,
  ewma,
  FairwayError,
  SnoozeError,
  PermanentError,
  snooze,
  isTraceparent,
  traceId,
} from "../dist/index.js";
import { natsError } from "../dist/util.js";
import { Reporter, encodeReport, nextDelay } from "../dist/reporter.js";

test("parseDuration reads Go durations", () => {
  const cases = {
    "0": 0,
    "1s": 1000,
    "250ms": 250,
    "1.5s": 1500,
    "1h30m": 5_400_000,
    "2h45m10.5s": 9_910_500,
    "-2m": -120_000,
    "+3s": 3000,
    "100us": 0.1,
    "100µs": 0.1,
    "1500ns": 0.0015,
    ".5s": 500,
    "1m0s": 60_000,
  };
  for (const [s, ms] of Object.entries(cases)) assert.equal(parseDuration(s), ms, s);
  for (const bad of ["", "1", "s", "1x", "1s2", "1.s.", "--1s", "1 s", "one"]) {
    assert.throws(() => parseDuration(bad), RangeError, bad);
  }
});

test("formatDuration writes what Go's Duration.String writes", () => {
  const cases = [
    [0, "0s"],
    [1000, "1s"],
    [1500, "1.5s"],
    [60_000, "1m0s"],
    [90_000, "1m30s"],
    [3_600_000, "1h0m0s"],
    [5_400_000, "1h30m0s"],
    [250, "250ms"],
    [1.5, "1.5ms"],
    [0.001, "1µs"],
    [0.000001, "1ns"],
    [-1500, "-1.5s"],
    [10 * 365 * 24 * 3_600_000, "87600h0m0s"],
    [30_000, "30s"],
  ];
  for (const [ms, s] of cases) assert.equal(formatDuration(ms), s, String(ms));
  for (const ms of [1, 999, 1000, 61_001, 3_725_000, 0.5]) assert.equal(parseDuration(formatDuration(ms)), ms, `round trip ${ms}`);
});

test("decodeEvents reads an array, a single object, and refuses others", () => {
  const a = { id: "e1", job_id: "j", task: "t", group: "g", state: "waiting", attempt: 0, time: "2026-01-01T00:00:00Z" };
  const b = { ...a, id: "e2", state: "scheduled" };
  assert.deepEqual(decodeEvents(JSON.stringify([a, b])), [a, b]);
  assert.deepEqual(decodeEvents(JSON.stringify(a)), [a]);
  assert.deepEqual(decodeEvents("[]"), []);
  assert.throws(() => decodeEvents("42"), SyntaxError);
  assert.throws(() => decodeEvents('[{"no":"id"}]'), SyntaxError);
  assert.throws(() => decodeEvents("{"), SyntaxError);
});

test("EventDeduper drops repeats in order and forgets the oldest beyond its capacity", () => {
  const d = new EventDeduper(3);
  const seen = ["a", "b", "a", "c", "b", "d", "a"].filter((id) => d.first(id));
  // "a" was forgotten once "d" came (capacity 3: b, c, d), so it passes again.
  assert.deepEqual(seen, ["a", "b", "c", "d", "a"]);
  assert.equal(d.size, 3);
});

test("prefetchTarget holds jobs only for short jobs, at most prefetchMax", () => {
  const base = { prefetchMax: 4, slots: 4, running: 4, now: 10_000 };
  // No measurement yet: none.
  assert.deepEqual(prefetchTarget({ ...base, avgRunMs: 0, avgRttMs: 2, slotStarts: [] }), { target: 0, waitMs: 0 });
  // Short jobs (10 ms) and a 2 ms round trip: 2*4*2/10 = 1.6 -> 2.
  const fresh = [9_999, 9_999, 9_999, 9_999];
  assert.equal(prefetchTarget({ ...base, avgRunMs: 10, avgRttMs: 2, slotStarts: fresh }).target, 2);
  // Very short jobs: capped at prefetchMax.
  assert.equal(prefetchTarget({ ...base, avgRunMs: 1, avgRttMs: 5, slotStarts: fresh }).target, 4);
  // Long jobs (10 s) against a 2 ms round trip: none.
  assert.equal(prefetchTarget({ ...base, avgRunMs: 10_000, avgRttMs: 2, slotStarts: fresh }).target, 0);
  // Every slot's job has run far longer than twice the average: no slot frees soon, none.
  const old = [0, 0, 0, 0];
  assert.equal(prefetchTarget({ ...base, avgRunMs: 10, avgRttMs: 2, slotStarts: old }).target, 0);
  // prefetch disabled.
  assert.equal(prefetchTarget({ ...base, prefetchMax: 0, avgRunMs: 1, avgRttMs: 5, slotStarts: fresh }).target, 0);
  // The wait is until the last running job turns long.
  const r = prefetchTarget({ ...base, avgRunMs: 10, avgRttMs: 2, slotStarts: [9_995, 9_999, 9_999, undefined] });
  assert.equal(r.waitMs, 20);
});

test("heldWaitMs and ewma", () => {
  assert.equal(heldWaitMs(0, 0), 1000);
  assert.equal(heldWaitMs(500, 10), 2000);
  assert.equal(heldWaitMs(10, 900), 1800);
  assert.equal(ewma(0, 50), 50);
  assert.equal(ewma(100, 200), 120);
});

test("FairwayError maps wire errors and NATS failures", () => {
  const e = FairwayError.fromWire({ code: "invalid", field: "priority", message: 'unknown priority "urgent"' });
  assert.ok(e instanceof Error);
  assert.equal(e.code, "invalid");
  assert.equal(e.field, "priority");
  assert.equal(e.message, 'unknown priority "urgent"');
  assert.deepEqual(e.toJSON(), { code: "invalid", field: "priority", message: 'unknown priority "urgent"' });
  const dup = FairwayError.fromWire({ code: "duplicate", message: "tracker held", job_id: "j1" });
  assert.equal(dup.jobId, "j1");

  const nr = natsError(new RequestError("no responders", { cause: new NoRespondersError("fairway.api.g.get") }), "fairway.api.g.get", "request");
  assert.ok(nr instanceof FairwayError);
  assert.equal(nr.code, "unavailable");
  assert.match(nr.message, /fairway\.api\.g\.get/);
  const to = natsError(new TimeoutError(), "s", "request");
  assert.equal(to.code, "unavailable");
  const perm = natsError(new PermissionViolationError("Permissions Violation for Publish to fairway.api.x.get", "publish", "fairway.api.x.get"), "fairway.api.x.get", "request");
  assert.equal(perm.code, "permission");
  const other = new Error("something else");
  assert.equal(natsError(other, "s", "request"), other);
});

test("SnoozeError and PermanentError", () => {
  assert.equal(new SnoozeError(30_000).duration, "30s");
  assert.equal(new SnoozeError("1h30m").duration, "1h30m0s");
  assert.equal(new SnoozeError(1500).delayMs, 1500);
  assert.throws(() => snooze("2s"), (e) => e instanceof SnoozeError && e.delayMs === 2000);
  assert.throws(() => new SnoozeError(-1), RangeError);
  assert.equal(new PermanentError("bad args").name, "PermanentError");
});

test("traceparent helpers", () => {
  const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  assert.ok(isTraceparent(tp));
  assert.equal(traceId(tp), "0af7651916cd43dd8448eb211c80319c");
  assert.ok(!isTraceparent("00-00000000000000000000000000000000-b7ad6b7169203331-01"));
  assert.equal(traceId(""), "");
});

test("encodeReport splices the encoded result; nextDelay doubles from 10 ms to 1 s", () => {
  const r = { type: "done", group: "g", job_id: "j", attempt: 1, executor: "e", instance: "i", time: "t", outcome: "success", resultJSON: '{"a":[1,2]}' };
  assert.deepEqual(JSON.parse(encodeReport(r)).result, { a: [1, 2] });
  assert.equal(JSON.parse(encodeReport({ ...r, resultJSON: undefined })).result, undefined);
  const delays = [];
  for (let d = 0, i = 0; i < 9; i++) delays.push((d = nextDelay(d)));
  assert.deepEqual(delays, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
});

// A fake JetStream that refuses, or does not acknowledge, the first messages.
function fakeJS(script) {
  const calls = [];
  return {
    calls,
    async publish(subject, body, opts) {
      calls.push({ subject, body: JSON.parse(body), msgID: opts.msgID });
      const step = script.shift();
      if (step === "refuse") throw new Error("maximum messages per subject exceeded");
      if (step === "timeout") throw new TimeoutError();
      return { stream: "FAIRWAY_RESULTS", seq: calls.length, duplicate: false };
    },
  };
}

const rep = (id, type = "done") => ({ type, group: "g", job_id: id, attempt: 1, executor: "e", instance: "i", time: "t" });

test("Reporter re-sends a refused message's reports at the head, with those queued since", async () => {
  const js = fakeJS(["refuse", "refuse"]);
  const r = new Reporter(js, "fairway.results.e", () => {});
  r.publish(rep("a"));
  r.publish(rep("b"));
  assert.equal(await r.flush(5000), true);
  // The first message carried a alone; refused twice, then a and b together, in order.
  const ids = js.calls.map((c) => c.body.map((x) => x.job_id).join(","));
  assert.deepEqual(ids, ["a", "a,b", "a,b"]);
  // A refused message is not stored: the next goes under a new Nats-Msg-Id.
  assert.equal(new Set(js.calls.map((c) => c.msgID)).size, 3);
  assert.equal(r.pending, 0);
});

test("Reporter re-sends an unacknowledged message as it was, under its Nats-Msg-Id", async () => {
  const js = fakeJS(["timeout"]);
  const r = new Reporter(js, "fairway.results.e", () => {});
  r.publish(rep("a"));
  r.publish(rep("b"));
  assert.equal(await r.flush(5000), true);
  assert.equal(js.calls[0].msgID, js.calls[1].msgID);
  assert.deepEqual(js.calls[1].body.map((x) => x.job_id), ["a"]);
  assert.deepEqual(js.calls[2].body.map((x) => x.job_id), ["b"]);
});

test("Reporter batches what is queued while a message is in flight", async () => {
  const js = fakeJS([]);
  const r = new Reporter(js, "fairway.results.e", () => {});
  for (let i = 0; i < 50; i++) r.publish(rep(`j${i}`, "log"));
  assert.equal(await r.flush(5000), true);
  assert.ok(js.calls.length <= 2, `50 reports in ${js.calls.length} messages`);
  assert.deepEqual(js.calls.flatMap((c) => c.body.map((x) => x.job_id)), Array.from({ length: 50 }, (_, i) => `j${i}`));
});
