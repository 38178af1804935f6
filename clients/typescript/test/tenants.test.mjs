// Integration tests against a `fairway dev --tenants acme,globex`
// (FAIRWAY_TEST_TENANTS_NATS_URL, FAIRWAY_TEST_CREDS_DIR).
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { connect, FairwayError } from "../dist/index.js";
import { startWorker, tenants } from "./helpers.mjs";
import test from "node:test";

// Fails (never skips) when the tenants dev is not given, saying how to set it.
test("FAIRWAY_TEST_TENANTS_NATS_URL and FAIRWAY_TEST_CREDS_DIR name a tenants fairway dev", () => tenants());

describe("tenants: credentials", () => {
  let h;
  let acme;
  before(async () => {
    const t = tenants();
    // In tenants mode an executor credential's app-id is its name.
    h = await startWorker([["ts-echo", async (job) => ({ echoed: job.args })]], { url: t.url, creds: t.creds("executor-ts"), appId: "ts" });
    acme = await connect({ servers: t.url, creds: t.creds("tenant-acme") });
  });
  after(async () => {
    await acme?.close();
    await h?.close();
  });

  it("tenant-acme submits to acme and the executor credential runs it", async () => {
    const job = await acme.submitAndWait({ group: "acme", task: "ts-echo", args: { x: 1 } }, { timeoutMs: 20_000 });
    assert.equal(job.state, "success");
    assert.deepEqual(job.result, { echoed: { x: 1 } });
    assert.equal(job.worker, "ts");
    const { id } = await acme.submit({ group: "acme", task: "ts-echo", args: { x: 2 } });
    const viaJS = await acme.wait("acme", id, { timeoutMs: 20_000 });
    assert.deepEqual(viaJS.result, { echoed: { x: 2 } });
  });

  it("tenant-acme cannot submit to globex", async () => {
    const refused = (err) => err instanceof FairwayError && ["permission", "unavailable"].includes(err.code) && /globex/.test(err.message);
    await assert.rejects(acme.submitRequest({ group: "globex", task: "ts-echo" }, { timeoutMs: 3000 }), refused);
    await assert.rejects(acme.submit({ group: "globex", task: "ts-echo" }, { timeoutMs: 3000 }), refused);
  });

  it("tenant-acme follows its own events", async () => {
    const seen = [];
    let done;
    const ended = new Promise((r) => (done = r));
    const sub = await acme.subscribe({ group: "acme", task: "ts-echo" }, (ev) => {
      seen.push(ev);
      if (ev.state === "success") done();
    });
    try {
      await acme.submitAndWait({ group: "acme", task: "ts-echo", args: { ev: true } }, { timeoutMs: 20_000 });
      await ended;
    } finally {
      await sub.stop();
    }
    assert.ok(seen.every((ev) => ev.group === "acme"));
  });
});
