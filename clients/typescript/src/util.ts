// Internal helpers.

import { randomBytes } from "node:crypto";
import { NoRespondersError, PermissionViolationError, TimeoutError, RequestError } from "@nats-io/nats-core";
import { FairwayError } from "./errors.js";
import { formatDuration } from "./duration.js";
import type { Duration, Time } from "./types.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export const enc = (v: unknown): Uint8Array => encoder.encode(JSON.stringify(v));
export const encStr = (s: string): Uint8Array => encoder.encode(s);
export const dec = (b: Uint8Array): string => decoder.decode(b);
export const byteLength = (s: string): number => Buffer.byteLength(s, "utf8");
export const nowISO = (): string => new Date().toISOString();

/** A UUIDv7 (time-ordered), as the Go client generates for job ids. */
export function uuidv7(): string {
  const b = randomBytes(16);
  const ts = Date.now();
  b[0] = Math.floor(ts / 2 ** 40) & 0xff;
  b[1] = Math.floor(ts / 2 ** 32) & 0xff;
  b[2] = (ts >>> 24) & 0xff;
  b[3] = (ts >>> 16) & 0xff;
  b[4] = (ts >>> 8) & 0xff;
  b[5] = ts & 0xff;
  b[6] = (b[6]! & 0x0f) | 0x70;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Waits ms, or rejects with the signal's reason when it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A promise with its resolve function, and a way to know it settled. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function chain(err: unknown): unknown[] {
  const out: unknown[] = [];
  for (let e = err, i = 0; e && i < 8; e = (e as { cause?: unknown }).cause, i++) out.push(e);
  return out;
}

export function isNoResponders(err: unknown): boolean {
  return chain(err).some((e) => e instanceof NoRespondersError || (e instanceof RequestError && e.isNoResponders()) || (e as Error)?.message?.includes?.("no responders"));
}

export function isTimeout(err: unknown): boolean {
  return chain(err).some((e) => e instanceof TimeoutError || (e as Error)?.name === "TimeoutError" || /timeout/i.test((e as Error)?.message ?? ""));
}

export function isPermission(err: unknown): boolean {
  return chain(err).some((e) => e instanceof PermissionViolationError || /permissions? violation/i.test((e as Error)?.message ?? ""));
}

/** Maps a NATS failure of a request or publish on subject to a FairwayError, or returns err. */
export function natsError(err: unknown, subject: string, what: string): unknown {
  if (err instanceof FairwayError) return err;
  if (isPermission(err)) {
    return new FairwayError("permission", `${what} on ${subject}: permission denied (${(err as Error).message}): a tenant's credential reaches only its own group`, { cause: err });
  }
  if (isNoResponders(err) || isTimeout(err)) {
    return new FairwayError(
      "unavailable",
      `${what}: no coordinator or stream answered on ${subject} (${(err as Error).message}): is Fairway running (fairway dev), and is the NATS URL right? A tenant's credential reaches only its own group`,
      { cause: err },
    );
  }
  return err;
}

export function timeText(t: Time | undefined): string | undefined {
  if (t === undefined) return undefined;
  return t instanceof Date ? t.toISOString() : t;
}

export function durationText(d: Duration | undefined): string | undefined {
  if (d === undefined) return undefined;
  return typeof d === "number" ? formatDuration(d) : d;
}

/** Group and task names are one subject token. */
export function checkName(field: string, v: unknown): void {
  if (typeof v !== "string" || !/^[A-Za-z0-9_-]+$/.test(v)) {
    throw new FairwayError("invalid", `${field} ${JSON.stringify(v)} is not a valid name: use letters, digits, - and _`, { field });
  }
}

/** Waits for p, at most ms (clearing its timer either way). */
export async function within(p: Promise<unknown>, ms: number): Promise<void> {
  let t: NodeJS.Timeout | undefined;
  try {
    await Promise.race([p, new Promise<void>((resolve) => (t = setTimeout(resolve, ms)))]);
  } finally {
    clearTimeout(t);
  }
}
