/**
 * Errors of the Fairway client and worker.
 *
 * @module
 */

import { formatDuration, parseDuration } from "./duration.js";

/**
 * The error codes a coordinator answers with (docs/nats-api.md, "Error
 * codes"), and `timeout`, which this client uses when a wait ran out
 * before the job ended.
 */
export type ErrorCode =
  | "invalid"
  | "not_found"
  | "duplicate"
  | "conflict"
  | "unavailable"
  | "quota"
  | "internal"
  | "not_registered"
  | "permission"
  | "timeout"
  | (string & {});

/** The wire form of an error: `{"code","field","message","job_id","request_id"}`. */
export interface WireError {
  code: string;
  field?: string;
  message: string;
  job_id?: string;
  request_id?: string;
}

/**
 * A refusal or failure reported by Fairway: a coordinator's `{"error":…}`
 * reply (with its `code`, and `field` for `invalid`), or a NATS failure
 * mapped to a code (`unavailable` when no coordinator or stream answered,
 * `permission` when the credential may not reach the subject).
 */
export class FairwayError extends Error {
  /** The error code, e.g. `invalid`, `not_found`, `duplicate`, `unavailable`. */
  readonly code: ErrorCode;
  /** The field an `invalid` error is about (`priority`, `jobs[2].depends_on`, …). */
  readonly field?: string;
  /** For `duplicate`: the job that holds the tracker or unique key. */
  readonly jobId?: string;
  /** For `internal` and `unavailable`: the id the coordinator logged the detail under. */
  readonly requestId?: string;
  /** For a wait that ran out (`timeout`): the job as it was last seen, if any. */
  job?: unknown;

  constructor(code: ErrorCode, message: string, opts: { field?: string; jobId?: string; requestId?: string; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "FairwayError";
    this.code = code;
    if (opts.field !== undefined) this.field = opts.field;
    if (opts.jobId !== undefined) this.jobId = opts.jobId;
    if (opts.requestId !== undefined) this.requestId = opts.requestId;
  }

  /** Makes a FairwayError from a wire error object. */
  static fromWire(e: WireError): FairwayError {
    return new FairwayError(e.code, e.message ?? e.code, { field: e.field, jobId: e.job_id, requestId: e.request_id });
  }

  /** The wire form, as a Reply's `error` carries it. */
  toJSON(): WireError {
    const out: WireError = { code: this.code, message: this.message };
    if (this.field) out.field = this.field;
    if (this.jobId) out.job_id = this.jobId;
    if (this.requestId) out.request_id = this.requestId;
    return out;
  }
}

/**
 * Thrown by a task handler: the job fails at once, without retries
 * (outcome `permanent`). Use it for failures that running the job again
 * cannot fix (bad args, say).
 */
export class PermanentError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PermanentError";
  }
}

/**
 * Thrown by a task handler: the job goes back to waiting, due after the
 * delay, and no failure is counted (outcome `snoozed`). The delay is a
 * number of milliseconds or a Go duration string (`"30s"`, `"1h30m"`);
 * the coordinators accept 1 s to 10 years.
 */
export class SnoozeError extends Error {
  /** The delay in milliseconds. */
  readonly delayMs: number;
  constructor(delay: number | string) {
    const ms = typeof delay === "string" ? parseDuration(delay) : delay;
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`SnoozeError: invalid delay ${String(delay)}`);
    super(`snoozed for ${formatDuration(ms)}`);
    this.name = "SnoozeError";
    this.delayMs = ms;
  }
  /** The delay as a Go duration string, as a report carries it. */
  get duration(): string {
    return formatDuration(this.delayMs);
  }
}

/**
 * Snoozes the running job: throws a {@link SnoozeError}. `delay` is
 * milliseconds or a Go duration string.
 *
 * ```ts
 * if (!ready) snooze("30s");
 * ```
 */
export function snooze(delay: number | string): never {
  throw new SnoozeError(delay);
}

/** Why a job's AbortSignal was aborted: `signal.reason` is a {@link JobAbortedError} with one of these. */
export type AbortKind = "cancelled" | "timeout" | "shutdown" | "paused" | "held";

/**
 * The reason a job's `signal` carries when it is aborted: the job was
 * cancelled, ran past its timeout, the worker was forced to stop
 * (`shutdown`), its task was paused before it started, or no slot freed
 * for a job held beyond the slots (`held`).
 */
export class JobAbortedError extends Error {
  readonly kind: AbortKind;
  constructor(kind: AbortKind, message: string) {
    super(message);
    this.name = "JobAbortedError";
    this.kind = kind;
  }
}
