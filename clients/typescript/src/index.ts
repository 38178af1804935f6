/**
 * `@fairway/client`: a client and a worker (executor) for Fairway, the
 * durable, fair, multi-tenant job-processing cluster, over NATS
 * JetStream.
 *
 * - {@link connect} → a {@link Fairway} client: submit jobs, wait for
 *   them, manage them, follow their events.
 * - {@link Worker}: run task code, with prefetch, per-task concurrency,
 *   progress, logs, cancellation, timeouts and graceful stops.
 *
 * @packageDocumentation
 */

export { connect, Fairway, SUBMIT_MANY_BATCH, SUBMIT_MANY_BYTES, MAX_WAIT_MS } from "./client.js";
export type { ConnectOptions, SubmitOptions, SubmitResult, SubmitReply, WaitOptions, EventFilter, EventSubscription } from "./client.js";
export { Worker, MAX_RESULT_BYTES } from "./worker.js";
export type { Handler, JobContext, TaskOptions, WorkerOptions, WorkerLogger, RunOptions } from "./worker.js";
export { FairwayError, PermanentError, SnoozeError, JobAbortedError, snooze } from "./errors.js";
export type { ErrorCode, WireError, AbortKind } from "./errors.js";
export { parseDuration, formatDuration } from "./duration.js";
export { decodeEvents, EventDeduper } from "./events.js";
export { prefetchTarget, heldWaitMs, ewma } from "./prefetch.js";
export type { PrefetchInput } from "./prefetch.js";
export { isTraceparent, traceId } from "./trace.js";
export { FINAL_STATES } from "./types.js";
export type {
  Priority,
  JobState,
  Duration,
  Time,
  Submission,
  WorkflowJob,
  Job,
  FairwayEvent,
  LogLine,
  Progress,
  ListFilter,
  ExecutorInfo,
  Reply,
} from "./types.js";
