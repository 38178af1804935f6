// Shared helpers of the integration tests.
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { connect, Worker } from "../dist/index.js";

/** The value of an env variable the integration tests need; throws, saying how to set it, when it is missing. */
export function requireEnv(name, how) {
  const v = process.env[name];
  if (!v) {
    throw new Error(
      `${name} is not set: the integration tests need a running fairway dev. ${how}\n` +
        `  e.g. fairway dev --dev-dir /tmp/ts-dev1 --nats-addr 127.0.0.1:14222 --pg-port 14432 --http-addr "" --web-addr "" &\n` +
        `       export FAIRWAY_TEST_NATS_URL=nats://127.0.0.1:14222`,
    );
  }
  return v;
}

export function natsUrl() {
  return requireEnv("FAIRWAY_TEST_NATS_URL", "Set it to the NATS URL of a plain `fairway dev` (no tenants).");
}

export function tenants() {
  const how =
    "Set FAIRWAY_TEST_TENANTS_NATS_URL to the NATS URL of a `fairway dev --tenants acme,globex`, and FAIRWAY_TEST_CREDS_DIR to its creds directory " +
    "(<dev-dir>/creds, holding tenant-acme.creds, tenant-globex.creds, operator.creds and executor-ts.creds made by " +
    "`fairway creds add executor ts --tasks ts-echo --groups acme --dev-dir <dev-dir>`).";
  const url = requireEnv("FAIRWAY_TEST_TENANTS_NATS_URL", how);
  const dir = requireEnv("FAIRWAY_TEST_CREDS_DIR", how);
  const creds = (name) => {
    const f = join(dir, `${name}.creds`);
    if (!existsSync(f)) throw new Error(`${f} does not exist. ${how}`);
    return f;
  };
  return { url, creds };
}

/** A unique suffix for this run: app-ids must not collide with another run's. */
export const RUN = randomUUID().slice(0, 8);

/** The group of the plain dev's tests. */
export const GROUP = "ts-tests";

/** Polls fn until it returns a truthy value, every 50 ms, at most ms; throws with what saying what was waited for. */
export async function until(what, fn, ms = 10_000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Connects a client and starts a worker with the given tasks; returns both and a cleanup. */
export async function startWorker(tasks, opts = {}) {
  const fw = await connect({ servers: opts.url ?? natsUrl(), ...(opts.creds ? { creds: opts.creds } : {}) });
  const worker = new Worker(fw, { appId: opts.appId ?? `ts-test-${RUN}`, slots: opts.slots ?? 4, heartbeatMs: 2000, wakeupMs: 2000 });
  for (const [name, handler, topts] of tasks) worker.task(name, handler, topts);
  await worker.start();
  return {
    fw,
    worker,
    async close() {
      await worker.stop({ force: true });
      await fw.close();
    },
  };
}

/** A promise and its resolve. */
export function signal() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}
