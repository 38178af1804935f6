/**
 * The Fairway worker (executor): registers with the coordinators, asks
 * them for jobs when it has free slots, runs each job's handler and
 * reports its start, log lines, progress and outcome to JetStream
 * (docs/nats-api.md, "Executor protocol").
 *
 * @module
 */

import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Msg, Subscription } from "@nats-io/nats-core";
import type { Fairway } from "./client.js";
import { formatDuration, parseDuration } from "./duration.js";
import { FairwayError, JobAbortedError, PermanentError, SnoozeError } from "./errors.js";
import type { AbortKind } from "./errors.js";
import { ewma, heldWaitMs, prefetchTarget } from "./prefetch.js";
import { Reporter } from "./reporter.js";
import type { Report } from "./reporter.js";
import type { Job } from "./types.js";
import { byteLength, dec, deferred, enc, encStr, isNoResponders, isTimeout, nowISO, checkName, sleep, within } from "./util.js";

/** A result is at most this many bytes of JSON (1 MiB). */
export const MAX_RESULT_BYTES = 1 << 20;
/** Room a done report needs beside its result. */
const RESULT_HEADROOM = 64 << 10;
const LONG_POLL_MS = 1000;
const DISPATCH_TIMEOUT_MS = LONG_POLL_MS + 1500;
const REGISTER_TIMEOUT_MS = 2000;
const REGISTER_RETRY_MS = 1000;
const STOPPING_TIMEOUT_MS = 2000;
const DEREGISTER_TIMEOUT_MS = 2000;
const REPORT_FLUSH_TIMEOUT_MS = 5000;
const RELEASE_GRACE_MS = 5000;
const START_REPORT_DELAY_MS = 25;
/** The reason a job's signal is aborted with once the job has ended: one
 * shared error, not one per job (an Error's stack costs more than the
 * rest of a short job's bookkeeping). */
const JOB_ENDED = new JobAbortedError("shutdown", "the job has ended");
const LOG_FLUSH_MS = 100;
const PROGRESS_EVERY_MS = 1000;
const LOG_FLUSH_LINES = 100;
const MAX_LOG_MESSAGE = 8 << 10;
const MAX_LOG_CHUNK = 128 << 10;
const EARLY_CANCEL_TTL_MS = 60_000;
const EARLY_CANCEL_MAX = 10_000;
/** How long an attempt this worker ran is remembered (not run again if handed out again), and how many. */
const RAN_TTL_MS = 600_000;
const RAN_MAX = 50_000;
const HEARTBEAT_TRIES = 3;

/** What a task handler gets besides the job. */
export interface JobContext {
  /** The job as dispatched (its `args`, `attempt`, `group`, `id`, …). */
  readonly job: Job;
  /**
   * Aborted when the job is cancelled, runs past its timeout, or the worker
   * is forced to stop; `signal.reason` is a {@link JobAbortedError} saying
   * which. Pass it on to `fetch`, timers, child processes.
   */
  readonly signal: AbortSignal;
  /** The W3C trace context of the job's claim, when it has one: parent of the run's span. */
  readonly traceparent?: string;
  /** Adds a line to the job's log (`fairway jobs logs`, the `logs` verb). */
  log(level: "debug" | "info" | "warn" | "error" | (string & {}), message: string): void;
  /**
   * Reports how far the job is, in percent (clamped to 0..100, rounded).
   * Coalesced: at most one report a second per job, and the last value
   * before the job ends.
   */
  progress(percent: number): void;
}

/**
 * A task's code. What it returns (JSON-encodable, at most 1 MiB encoded)
 * is the job's result. Throwing fails the attempt (retried while retries
 * remain); a {@link PermanentError} fails the job at once; a
 * {@link SnoozeError} (see `snooze()`) puts it back to waiting for a while.
 */
export type Handler = (job: Job, ctx: JobContext) => unknown | Promise<unknown>;

/** Options of {@link Worker.task}. */
export interface TaskOptions {
  /** At most this many jobs of the task run at once on this worker (its max-concurrent). */
  concurrency?: number;
  /** Bounds each attempt of the task's jobs whose submission names no `timeout` of its own, ms. */
  timeoutMs?: number;
}

/** A logger for the worker's own messages. */
export interface WorkerLogger {
  debug(msg: string): void;
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}

/** Options of a {@link Worker}. */
export interface WorkerOptions {
  /** The executor's app-id: unique among running executors, one subject token. With accounts, the credential's name. */
  appId: string;
  /** How many jobs run at once. Default 4. */
  slots?: number;
  /**
   * How many jobs may be held beyond the slots, waiting for one (only for
   * short jobs, sized from the measured run time and round trip). Default
   * `slots`; 0 or negative: none.
   */
  prefetch?: number;
  /** Period of heartbeats, ms. Default 5,000. */
  heartbeatMs?: number;
  /** Period of an idle worker's unprompted request for work, ms. Default 10,000. */
  wakeupMs?: number;
  /** How long a handler may go on after its timeout before its attempt is reported failed anyway, ms. Default 5,000. */
  timeoutGraceMs?: number;
  /** The host name reported. Default `os.hostname()`. */
  host?: string;
  /** Where the worker's own messages go. Default: warnings and errors to `console.error`. */
  logger?: WorkerLogger;
  /** Job log lines waiting to be sent, at most; beyond, lines are dropped and counted. Default 500. */
  logBufferSize?: number;
}

/** Options of {@link Worker.run}. */
export interface RunOptions {
  /** Stop on SIGINT/SIGTERM: the first gracefully, the second forced. Default true. */
  handleSignals?: boolean;
}

interface TaskEntry {
  handler: Handler;
  concurrency?: number;
  timeoutMs?: number;
}

type Outcome = { outcome: "success" | "error" | "permanent" | "cancelled" | "released" | "snoozed"; error?: string; resultJSON?: string; snooze?: string };

interface RunningJob {
  job: Job;
  key: string;
  abort: AbortController;
  holdsSlot: boolean;
  gate?: { promise: Promise<void>; resolve: () => void };
  heldForMs: number;
  startedAt?: number;
  startState: "pending" | "sent" | "folded";
  reported: boolean;
  timeoutMs: number;
  timers: NodeJS.Timeout[];
  releaseReason?: string;
  progress: number;
  pendingProgress?: number;
  progressSentAt: number;
  lines: Array<{ time: string; level: string; message: string }>;
  dropped: number;
}

const RELEASED_UNRUN = "released before it started: the executor is shutting down";

const defaultLogger: WorkerLogger = {
  debug() {},
  info() {},
  warn: (m) => console.error(`fairway worker: ${m}`),
  error: (m) => console.error(`fairway worker: ${m}`),
};

const jobKey = (group: string, id: string) => `${group}\u0000${id}`;

/**
 * A worker runs task code for Fairway.
 *
 * ```ts
 * const fw = await connect({ servers: "nats://127.0.0.1:4222" });
 * const worker = new Worker(fw, { appId: "ocr-1", slots: 4 });
 * worker.task("ocr", async (job, ctx) => {
 *   ctx.log("info", `page ${job.args.page}`);
 *   ctx.progress(50);
 *   return { text: await ocr(job.args, ctx.signal) };
 * }, { concurrency: 2 });
 * await worker.run(); // until SIGINT/SIGTERM, an operator's drain, or stop()
 * ```
 */
export class Worker {
  /** @internal The pause after a failed dispatch request, ms (a test sets it). */
  static dispatchBackoffMs = 1000;
  readonly client: Fairway;
  readonly appId: string;
  readonly slots: number;
  readonly prefetchMax: number;
  /** This process's instance id (a new one per Worker). */
  readonly instance: string = randomUUID();

  readonly #o: Required<Omit<WorkerOptions, "prefetch" | "logger">>;
  readonly #log: WorkerLogger;
  readonly #tasks = new Map<string, TaskEntry>();
  readonly #jobs = new Map<string, RunningJob>();
  readonly #queued: RunningJob[] = [];
  readonly #cancels = new Map<string, { attempt: number; at: number }>();
  /** The attempts this worker ran, oldest first: one handed out again (its reports not yet stored, a coordinator took it for still held) is not run again. */
  readonly #ran = new Map<string, { attempt: number; at: number }>();
  readonly #paused = new Set<string>();
  #pausedAll = false;
  #runningN = 0;
  #avgRun = 0;
  #avgRtt = 0;
  #lastFull = false;
  #dispatchId = "";
  #registeredAgainAt = 0;
  #linesHeld = 0;
  #started = "";
  #state: "new" | "starting" | "running" | "stopping" | "stopped" = "new";
  #forced = false;
  /** Whether the coordinators have been told (or could not be told) that this worker stops. */
  #toldStopping = false;
  #reporter: Reporter;
  #subs: Subscription[] = [];
  #timers: NodeJS.Timeout[] = [];
  #wakeFlag = false;
  #wakeFn: (() => void) | null = null;
  #dispatchLoop: Promise<void> = Promise.resolve();
  #stopped = deferred<void>();
  #stopPromise: Promise<void> | null = null;
  #jobsEmpty: (() => void) | null = null;
  #startAbort = new AbortController();
  #registerMaybeSent = false;
  #ready = deferred<void>();

  constructor(client: Fairway, opts: WorkerOptions) {
    checkName("appId", opts.appId);
    const slots = opts.slots ?? 4;
    if (!Number.isInteger(slots) || slots < 1) throw new FairwayError("invalid", `slots ${slots} is less than 1`, { field: "slots" });
    this.client = client;
    this.appId = opts.appId;
    this.slots = slots;
    this.prefetchMax = Math.max(opts.prefetch ?? slots, 0);
    this.#o = {
      appId: opts.appId,
      slots,
      heartbeatMs: opts.heartbeatMs ?? 5000,
      wakeupMs: opts.wakeupMs ?? 10_000,
      timeoutGraceMs: opts.timeoutGraceMs ?? 5000,
      host: opts.host ?? hostname(),
      logBufferSize: opts.logBufferSize ?? 500,
    };
    this.#log = opts.logger ?? defaultLogger;
    this.#reporter = new Reporter(client.js, client.subject("results", this.appId), (m) => this.#log.warn(m));
    this.#stopped.promise.catch(() => {});
    this.#ready.promise.catch(() => {});
  }

  /**
   * Resolves once the worker is registered (after {@link start}); rejects
   * with the refusal, or the error, when it could not register.
   */
  get ready(): Promise<void> {
    return this.#ready.promise;
  }

  /**
   * Registers the handler of a task (before {@link start}). `concurrency`
   * caps the task's jobs running at once here; `timeoutMs` bounds an
   * attempt when the job names no timeout of its own.
   */
  task(name: string, handler: Handler, opts: TaskOptions = {}): this {
    checkName("task", name);
    if (typeof handler !== "function") throw new TypeError(`task ${name}: the handler is not a function`);
    if (this.#state !== "new") throw new Error(`task ${name}: tasks are registered before the worker starts`);
    if (this.#tasks.has(name)) throw new Error(`task ${name} already has a handler`);
    if (opts.concurrency !== undefined && (!Number.isInteger(opts.concurrency) || opts.concurrency < 1)) {
      throw new FairwayError("invalid", `task ${name}: concurrency ${opts.concurrency} is less than 1`, { field: "concurrency" });
    }
    this.#tasks.set(name, { handler, ...opts });
    return this;
  }

  /** The tasks registered. */
  get tasks(): string[] {
    return [...this.#tasks.keys()].sort();
  }

  /** Jobs held: running, or waiting for a slot, or finished but not yet reported. */
  get held(): number {
    return this.#jobs.size;
  }

  /** Whether the worker is stopping or stopped. */
  get stopping(): boolean {
    return this.#state === "stopping" || this.#state === "stopped";
  }

  /**
   * Subscribes to the worker's commands, registers (retrying while no
   * coordinator answers) and starts asking for jobs. Throws a
   * {@link FairwayError} when the registration is refused.
   */
  async start(): Promise<void> {
    if (this.#state !== "new") throw new Error(`worker ${this.appId}: already started`);
    if (this.#tasks.size === 0) throw new Error(`worker ${this.appId}: no tasks: call task() before start()`);
    this.#state = "starting";
    this.#started = nowISO();
    const nc = this.client.nc;
    // nats-core calls a subscription's callback from its protocol parser
    // without a try/catch: an exception thrown there ends the connection's
    // read loop (nothing more is read: replies, acks, the client sharing
    // the connection). Every callback catches what it throws.
    const guarded = (what: string, cb: (msg: Msg) => void) => (err: Error | null, msg: Msg) => {
      if (err) return;
      try {
        cb(msg);
      } catch (e) {
        try {
          this.#log.error(`handling a message on ${what}: ${(e as Error)?.message ?? e}`);
        } catch {
          // a logger that throws: nothing more to do
        }
      }
    };
    const sub = (verb: string, cb: (msg: Msg) => void) => {
      const subject = this.client.subject("executor", this.appId, verb);
      this.#subs.push(nc.subscribe(subject, { callback: guarded(subject, cb) }));
    };
    sub("cancel", (m) => this.#onCancel(m));
    sub("ping", (m) => this.#onPing(m));
    sub("pause", (m) => this.#onPause(m));
    sub("drain", () => {
      this.#log.info("an operator asked this worker to drain");
      void this.stop().catch(() => {});
    });
    const notify = this.client.subject("notify", "work");
    this.#subs.push(nc.subscribe(notify, { callback: guarded(notify, () => this.#wake()) }));
    try {
      await nc.flush();
      await this.#register(this.#startAbort.signal);
    } catch (err) {
      if (this.#startAbort.signal.aborted) {
        // stop() during the startup: not an error of the start.
        await this.#abandonStart();
        return;
      }
      for (const s of this.#subs) s.unsubscribe();
      this.#subs = [];
      this.#state = "stopped";
      this.#stopped.resolve();
      this.#ready.reject(err);
      throw err;
    }
    if (this.#state !== "starting") {
      // Stopped while the registration was answered: registered, so deregister.
      this.#registerMaybeSent = true;
      await this.#abandonStart();
      return;
    }
    this.#state = "running";
    this.#timers.push(setInterval(() => void this.#heartbeat(), this.#o.heartbeatMs));
    this.#timers.push(setInterval(() => this.#flushLogs(false), LOG_FLUSH_MS));
    void this.#heartbeat();
    this.#dispatchLoop = this.#dispatchLoopRun();
    this.#ready.resolve();
    this.#log.info(`registered app-id ${this.appId}, instance ${this.instance}, tasks ${this.tasks.join(",")}, slots ${this.slots}`);
  }

  /**
   * Starts the worker if it has not started, and resolves once it has
   * stopped: after {@link stop}, an operator's drain, or (with
   * `handleSignals`, the default) SIGINT/SIGTERM: the first stops
   * gracefully, a second forces the stop (running jobs are aborted and
   * reported released).
   */
  async run(opts: RunOptions = {}): Promise<void> {
    const handleSignals = opts.handleSignals ?? true;
    let signals = 0;
    const onSignal = (sig: NodeJS.Signals) => {
      signals++;
      this.#log.info(`${sig}: ${signals === 1 ? "stopping gracefully" : "stopping now, releasing the running jobs"}`);
      void this.stop({ force: signals > 1 });
    };
    if (handleSignals) {
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
    }
    try {
      if (this.#state === "new") await this.start();
      await this.#stopped.promise;
    } finally {
      if (handleSignals) {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
      }
    }
  }

  /**
   * Stops the worker: asks for no more jobs, tells the coordinators it is
   * stopping, releases the jobs held beyond the slots, lets the running
   * jobs finish (with `force`, aborts them: reported `released`, their
   * attempt given back), waits for the last reports' acknowledgements and
   * deregisters. Safe to call again: a later call with `force` forces a
   * graceful stop in progress.
   */
  stop(opts: { force?: boolean } = {}): Promise<void> {
    if (opts.force) this.#force();
    if (this.#stopPromise) return this.#stopPromise;
    if (this.#state === "new") {
      this.#state = "stopped";
      this.#startAbort.abort(new Error("stopped before it registered"));
      this.#stopped.resolve();
      this.#stopPromise = Promise.resolve();
      return this.#stopPromise;
    }
    if (this.#state === "starting") {
      // start() unsubscribes (and deregisters, if it may have registered),
      // then resolves #stopped.
      this.#state = "stopped";
      this.#startAbort.abort(new Error("stopped before it registered"));
      this.#stopPromise = this.#stopped.promise;
      return this.#stopPromise;
    }
    if (this.#state === "stopped") return Promise.resolve();
    this.#state = "stopping";
    this.#stopPromise = this.#shutdown().then(this.#stopped.resolve, (err) => {
      this.#stopped.reject(err);
      throw err;
    });
    return this.#stopPromise;
  }

  /** Stops taking jobs of `task` (of every task without one); running ones finish. */
  pause(task?: string): void {
    this.#setPaused(task ?? "", true);
  }

  /** Takes jobs again after {@link pause}. */
  resume(task?: string): void {
    this.#setPaused(task ?? "", false);
  }

  // -------------------------------------------------------------------
  // Registration, heartbeats, stop.

  async #register(signal?: AbortSignal): Promise<void> {
    const subject = this.client.subject("exec", this.appId, "register");
    const body = { executor: { app_id: this.appId, instance: this.instance, host: this.#o.host, slots: this.slots, tasks: this.tasks, started: this.#started } };
    let loggedAt = 0;
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      try {
        const req = this.client.nc.request(subject, JSON.stringify(body), { timeout: REGISTER_TIMEOUT_MS });
        req.catch(() => {}); // observed below, or abandoned on a stop
        if (signal === this.#startAbort.signal) this.#registerMaybeSent = true;
        const msg = await abortable(req, signal);
        let reply: unknown;
        try {
          reply = JSON.parse(dec(msg.data));
        } catch {
          throw new Error(`worker ${this.appId}: registering on ${subject}: an unreadable reply: ${dec(msg.data).slice(0, 200)}`);
        }
        const error = isObject(reply) ? reply.error : undefined;
        if (isObject(error) && typeof error.code === "string") throw FairwayError.fromWire(error as { code: string; message: string });
        if (!isObject(reply) || (error !== undefined && error !== null)) throw new Error(`worker ${this.appId}: registering on ${subject}: an unreadable reply: ${dec(msg.data).slice(0, 200)}`);
        return;
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (err instanceof FairwayError) throw err;
        if (isNoResponders(err) && signal === this.#startAbort.signal) this.#registerMaybeSent = false; // reached no coordinator
        if (!isNoResponders(err) && !isTimeout(err)) throw new Error(`worker ${this.appId}: registering on ${subject}: ${(err as Error).message}`, { cause: err });
        if (Date.now() - loggedAt > 30_000) {
          this.#log.info(`waiting for a coordinator on ${subject}: ${(err as Error).message}`);
          loggedAt = Date.now();
        }
      }
      await sleep(REGISTER_RETRY_MS, signal);
    }
  }

  /** The end of a start() that stop() interrupted: no subscriptions left, deregistered if it may have registered. */
  async #abandonStart(): Promise<void> {
    this.#state = "stopped";
    for (const s of this.#subs) s.unsubscribe();
    this.#subs = [];
    this.#ready.reject(new Error(`worker ${this.appId}: stopped before it registered`));
    if (this.#registerMaybeSent) {
      try {
        await this.#ask("deregister", { executor: this.appId, instance: this.instance }, DEREGISTER_TIMEOUT_MS);
        this.#log.info(`deregistered instance ${this.instance} (stopped during its start)`);
      } catch (err) {
        this.#log.info(`could not deregister (${(err as Error).message}); the coordinators mark this worker gone after a few silent leases`);
      }
    }
    this.#log.info("stopped before it started");
    this.#stopped.resolve();
  }

  async #registerAgain(): Promise<void> {
    const since = Date.now() - this.#registeredAgainAt;
    if (since < this.#o.wakeupMs) await this.#waitWake(this.#o.wakeupMs - since, true);
    if (this.stopping) return;
    this.#registeredAgainAt = Date.now();
    this.#log.warn(`the coordinators do not know instance ${this.instance}; registering again`);
    const ac = new AbortController();
    const t = setTimeout(() => ac.abort(new Error("registering again timed out")), 4 * REGISTER_TIMEOUT_MS);
    try {
      await this.#register(ac.signal);
    } catch (err) {
      this.#log.error(`registering again failed: ${(err as Error).message}`);
      await this.#waitWake(this.#o.wakeupMs, true);
    } finally {
      clearTimeout(t);
    }
  }

  async #heartbeat(): Promise<void> {
    const jobs = [...this.#jobs.values()].map((rj) => ({ group: rj.job.group, id: rj.job.id }));
    const body = JSON.stringify({ executor: this.appId, instance: this.instance, jobs, slots: this.slots });
    const subject = this.client.subject("exec", this.appId, "heartbeat");
    const wait = Math.min(Math.floor(this.#o.heartbeatMs / (HEARTBEAT_TRIES + 1)), 1000);
    for (let i = 1; i <= HEARTBEAT_TRIES; i++) {
      try {
        await this.client.nc.request(subject, body, { timeout: wait });
        return;
      } catch (err) {
        if (this.client.nc.isClosed()) return;
        if (i === HEARTBEAT_TRIES) this.#log.debug(`no coordinator acknowledged a heartbeat: ${(err as Error).message}`);
      }
    }
  }

  async #ask(verb: string, body: unknown, timeoutMs: number): Promise<void> {
    const subject = this.client.subject("exec", this.appId, verb);
    const msg = await this.client.nc.request(subject, JSON.stringify(body), { timeout: timeoutMs });
    const text = dec(msg.data);
    const reply = text ? (JSON.parse(text) as { error?: { code: string; message: string } }) : {};
    if (reply.error) throw FairwayError.fromWire(reply.error);
  }

  #force(): void {
    this.#forced = true;
    // Not before the coordinators know this instance stops: a release they
    // heard first would count the attempt (a second signal can come while
    // the stopping request is on its way).
    if (!this.#toldStopping) return;
    for (const rj of this.#jobs.values()) {
      if (rj.abort.signal.aborted) continue;
      rj.abort.abort(new JobAbortedError("shutdown", "the worker is stopping: the job is released"));
    }
  }

  async #shutdown(): Promise<void> {
    this.#log.info(`stopping: no new jobs; waiting for ${this.#jobs.size} held`);
    this.#wake();
    try {
      await this.#ask("dispatch", { executor: this.appId, instance: this.instance, stopping: true }, STOPPING_TIMEOUT_MS);
    } catch (err) {
      this.#log.info(`could not tell the coordinators that this worker stops (${(err as Error).message}); its jobs are released all the same`);
    }
    this.#toldStopping = true;
    if (this.#forced) this.#force();
    // Jobs held beyond the slots never started: back to waiting at once.
    for (const rj of [...this.#queued]) rj.abort.abort(new JobAbortedError("shutdown", RELEASED_UNRUN));
    await this.#dispatchLoop; // a reply in flight: its jobs are released
    if (this.#jobs.size > 0) {
      const empty = new Promise<void>((resolve) => (this.#jobsEmpty = resolve));
      // Once forced, a handler that ignores its signal is not waited for beyond the grace.
      for (;;) {
        const forcedAt = this.#forced;
        await within(empty, 200);
        if (this.#jobs.size === 0) break;
        if (forcedAt) {
          await within(empty, RELEASE_GRACE_MS);
          for (const rj of [...this.#jobs.values()]) {
            this.#log.error(`the handler of job ${rj.job.id} did not return after its signal was aborted; reporting it released anyway`);
            this.#complete(rj, { outcome: "released", error: "executor shut down: the handler did not return in time" });
          }
          break;
        }
      }
      this.#jobsEmpty = null;
    }
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    this.#flushLogs(true);
    const flushed = await this.#reporter.flush(REPORT_FLUSH_TIMEOUT_MS);
    if (!flushed) this.#log.error(`${this.#reporter.pending} reports not acknowledged by JetStream within ${REPORT_FLUSH_TIMEOUT_MS} ms; dropping them`);
    this.#reporter.close();
    try {
      await this.#ask("deregister", { executor: this.appId, instance: this.instance }, DEREGISTER_TIMEOUT_MS);
      this.#log.info(`deregistered instance ${this.instance}`);
    } catch (err) {
      this.#log.info(`could not deregister (${(err as Error).message}); the coordinators mark this worker gone after a few silent leases`);
    }
    for (const s of this.#subs) s.unsubscribe();
    this.#subs = [];
    this.#state = "stopped";
    this.#log.info("stopped");
  }

  // -------------------------------------------------------------------
  // Commands.

  #onCancel(msg: Msg): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(dec(msg.data));
    } catch {
      // checked below
    }
    const cmd = isObject(parsed) ? (parsed as { group?: unknown; job_id?: unknown; attempt?: unknown }) : {};
    if (
      typeof cmd.group !== "string" ||
      cmd.group === "" ||
      typeof cmd.job_id !== "string" ||
      cmd.job_id === "" ||
      !(typeof cmd.attempt === "number" && Number.isInteger(cmd.attempt) && cmd.attempt >= 1)
    ) {
      this.#log.warn(`ignoring a cancel command that does not name group, job_id and attempt: ${dec(msg.data).slice(0, 200)}`);
      if (msg.reply) msg.respond(enc({ error: { code: "invalid", message: "a cancel command needs group, job_id and attempt" } }));
      return;
    }
    const key = jobKey(cmd.group, cmd.job_id);
    const rj = this.#jobs.get(key);
    if (rj && rj.job.attempt === cmd.attempt) {
      rj.abort.abort(new JobAbortedError("cancelled", "the job was cancelled"));
    } else if (!rj) {
      const now = Date.now();
      for (const [k, v] of this.#cancels) {
        if (this.#cancels.size < EARLY_CANCEL_MAX && now - v.at <= EARLY_CANCEL_TTL_MS) break;
        this.#cancels.delete(k);
      }
      this.#cancels.delete(key);
      this.#cancels.set(key, { attempt: cmd.attempt, at: now });
    }
    if (msg.reply) msg.respond(encStr("{}"));
  }

  #onPing(msg: Msg): void {
    const named = dec(msg.data);
    if (msg.reply && (named === "" || named === this.instance)) msg.respond(encStr(this.instance));
  }

  #onPause(msg: Msg): void {
    let cmd: unknown;
    try {
      cmd = JSON.parse(dec(msg.data));
    } catch {
      cmd = undefined;
    }
    const task = isObject(cmd) ? (cmd.task ?? "") : undefined;
    const resume = isObject(cmd) ? (cmd.resume ?? false) : undefined;
    if (typeof task !== "string" || (task !== "" && !/^[A-Za-z0-9_-]+$/.test(task)) || typeof resume !== "boolean") {
      this.#log.warn(`ignoring an unreadable pause command: ${dec(msg.data).slice(0, 200)}`);
      return;
    }
    this.#setPaused(task, !resume);
  }

  #setPaused(task: string, paused: boolean): void {
    if (task === "") {
      // Kept apart from the per-task pauses, as the Go executor does: resuming
      // every task leaves a task paused on its own paused.
      this.#pausedAll = paused;
    } else if (paused) this.#paused.add(task);
    else this.#paused.delete(task);
    if (paused) {
      for (const rj of [...this.#queued]) {
        if (task === "" || rj.job.task === task) rj.abort.abort(new JobAbortedError("paused", "task paused on this executor before the job started"));
      }
    } else this.#wake();
    this.#log.info(`${paused ? "paused" : "resumed"} ${task || "every task"}`);
  }

  #isPaused(task: string): boolean {
    return this.#pausedAll || this.#paused.has(task);
  }

  // -------------------------------------------------------------------
  // Dispatch.

  #wake(): void {
    this.#wakeFlag = true;
    this.#wakeFn?.();
  }

  /** Waits for a wakeup (or any, when `plain`: just the time), at most ms, or the stop. */
  async #waitWake(ms: number, plain = false): Promise<void> {
    if (!plain && this.#wakeFlag) {
      this.#wakeFlag = false;
      return;
    }
    if (this.stopping && this.#state !== "stopping") return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.#wakeFn = plain ? () => this.stopping && done() : done;
    });
    this.#wakeFn = null;
    if (!plain) this.#wakeFlag = false;
  }

  /** What to ask for now (see executor/dispatch.go, free). */
  #free(): { free: number; idle: number; waitMs: number; tasks: string[]; taskSlots?: Record<string, number> } {
    const none = { free: 0, idle: 0, waitMs: 0, tasks: [] };
    if (this.stopping || this.#pausedAll) return none;
    const slotStarts = [...this.#jobs.values()].filter((rj) => rj.holdsSlot).map((rj) => rj.startedAt);
    const { target, waitMs: soon } = prefetchTarget({
      prefetchMax: this.prefetchMax,
      avgRunMs: this.#avgRun,
      avgRttMs: this.#avgRtt,
      slots: this.slots,
      running: this.#runningN,
      slotStarts,
      now: Date.now(),
    });
    const free = this.slots + target - this.#jobs.size;
    const idle = Math.min(Math.max(this.slots - this.#runningN - this.#queued.length, 0), Math.max(free, 0));
    const waitMs = idle === 0 ? Math.min(LONG_POLL_MS, soon) : LONG_POLL_MS;
    if (free <= 0) return none;
    const running = this.#countByTask();
    const tasks: string[] = [];
    let taskSlots: Record<string, number> | undefined;
    let capped = false;
    for (const [name, t] of [...this.#tasks].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (this.#paused.has(name)) continue;
      if (t.concurrency === undefined) {
        tasks.push(name);
        continue;
      }
      const left = t.concurrency - (running.get(name) ?? 0);
      if (left <= 0) {
        capped = true; // at its cap: not asked for
        continue;
      }
      tasks.push(name);
      if (left < free) (taskSlots ??= {})[name] = left;
    }
    if (tasks.length === 0) return none;
    // A task left out at its cap is asked for as soon as one of its jobs
    // ends: a request held in a long poll for the other tasks would delay
    // that until it returns. No long poll then: the loop waits for its wake
    // (a job ending, notify.work, the wakeup period) instead.
    return { free, idle, waitMs: capped ? 0 : waitMs, tasks, ...(taskSlots ? { taskSlots } : {}) };
  }

  #countByTask(): Map<string, number> {
    const n = new Map<string, number>();
    for (const rj of this.#jobs.values()) n.set(rj.job.task, (n.get(rj.job.task) ?? 0) + 1);
    return n;
  }

  async #dispatchLoopRun(): Promise<void> {
    const subject = this.client.subject("exec", this.appId, "dispatch");
    let noCoordinatorAt = 0;
    while (!this.stopping) {
      let idle = true;
      const a = this.#free();
      if (a.free > 0) {
        this.#dispatchId ||= randomUUID();
        const body = {
          executor: this.appId,
          instance: this.instance,
          slots: a.free,
          idle: a.idle,
          tasks: a.tasks,
          ...(a.taskSlots ? { task_slots: a.taskSlots } : {}),
          wait_ms: a.waitMs,
          request_id: this.#dispatchId,
        };
        const asked = Date.now();
        try {
          const msg = await this.client.nc.request(subject, JSON.stringify(body), { timeout: DISPATCH_TIMEOUT_MS });
          const rtt = Date.now() - asked;
          const reply = readDispatchReply(dec(msg.data));
          if (typeof reply === "string") {
            // Checked before the request id is given up: asked again under
            // the same id, a request that claimed jobs gets them again.
            this.#log.warn(`asking for jobs on ${subject}: ${reply}`);
            await this.#waitWake(1000, true);
            continue;
          }
          if (reply.error?.code === "not_registered") {
            await this.#registerAgain();
            this.#dispatchId = "";
            continue;
          }
          if (reply.error) throw FairwayError.fromWire(reply.error);
          this.#dispatchId = "";
          noCoordinatorAt = 0;
          const jobs = this.#goodJobs(reply.jobs);
          if (jobs.length > 0 && this.#lastFull) this.#avgRtt = ewma(this.#avgRtt, rtt);
          this.#lastFull = jobs.length === a.free;
          this.#accept(jobs);
          idle = jobs.length === 0 && Date.now() - asked < LONG_POLL_MS / 2;
        } catch (err) {
          if (isNoResponders(err)) {
            if (Date.now() - noCoordinatorAt > 60_000) {
              this.#log.warn(`no coordinator answered a dispatch request on ${subject}; waiting for a wakeup`);
              noCoordinatorAt = Date.now();
            }
          } else if (isTimeout(err)) {
            // Unanswered: asked again at once, under the same id.
            continue;
          } else if (err instanceof FairwayError && err.code === "unavailable") {
            // The leader cannot answer now (its database down, the lead
            // changing hands): asked again each second under the same id,
            // which hands out what an earlier try claimed. Said once a minute.
            if (Date.now() - noCoordinatorAt > 60_000) {
              this.#log.warn(`the coordinators cannot hand out jobs now; asking again every second: ${err.message}`);
              noCoordinatorAt = Date.now();
            }
            // A wakeup ends the pause: work was stored, so the partition
            // answers again (executor/dispatch.go).
            await this.#waitWake(Worker.dispatchBackoffMs);
            continue;
          } else {
            this.#log.warn(`asking for jobs on ${subject}: ${(err as Error).message}`);
            await this.#waitWake(Worker.dispatchBackoffMs, true);
            continue;
          }
        }
      }
      if (!idle) continue;
      await this.#waitWake(this.#o.wakeupMs);
    }
  }

  /** The well-formed jobs of a dispatch reply; the others are skipped, and logged (once a reply). */
  #goodJobs(jobs: unknown[]): Job[] {
    const good: Job[] = [];
    let bad = 0;
    let first: unknown;
    for (const j of jobs) {
      if (isJob(j)) good.push(j);
      else if (bad++ === 0) first = j;
    }
    if (bad > 0) {
      let text: string;
      try {
        text = String(JSON.stringify(first)).slice(0, 200);
      } catch {
        text = String(first);
      }
      this.#log.error(`a dispatch reply held ${bad} malformed job${bad > 1 ? "s" : ""} (without a string id, group and task and an attempt from 1), skipped; the first: ${text}`);
    }
    return good;
  }

  /** Remembers that this worker ran this attempt, for RAN_TTL_MS, at most RAN_MAX of them. */
  #rememberRan(key: string, attempt: number, now: number): void {
    this.#ran.delete(key);
    for (const [k, v] of this.#ran) {
      if (this.#ran.size < RAN_MAX && now - v.at <= RAN_TTL_MS) break;
      this.#ran.delete(k);
    }
    this.#ran.set(key, { attempt, at: now });
  }

  #accept(jobs: Job[]): void {
    const running = this.#countByTask();
    for (const job of jobs) {
      const key = jobKey(job.group, job.id);
      if (this.#jobs.has(key)) {
        this.#log.warn(`dispatch handed out job ${job.id}, which this worker already holds; ignoring it`);
        continue;
      }
      const ran = this.#ran.get(key);
      if (ran && ran.attempt === job.attempt && Date.now() - ran.at <= RAN_TTL_MS) {
        this.#log.warn(`dispatch handed out attempt ${job.attempt} of job ${job.id}, which this worker already ran; ignoring it (its report is on its way)`);
        continue;
      }
      let mode: "run" | "release" | "cancelled" = "run";
      let reason: string | undefined;
      const task = this.#tasks.get(job.task);
      const early = this.#cancels.get(key);
      if (this.stopping) {
        mode = "release";
        reason = RELEASED_UNRUN;
      } else if (this.#jobs.size >= this.slots + this.prefetchMax) {
        mode = "release";
        reason = "released before it started: the executor had no slot for it";
      } else if (task?.concurrency !== undefined && (running.get(job.task) ?? 0) >= task.concurrency) {
        mode = "release";
        reason = "released before it started: its task is at its max-concurrent on this executor";
      } else if (this.#isPaused(job.task)) {
        mode = "release";
        reason = "released before it started: this executor no longer takes its task";
      } else if (early && early.attempt === job.attempt && Date.now() - early.at <= EARLY_CANCEL_TTL_MS) {
        // Only a cancel of exactly this attempt is taken (Go: cancelMemo.take).
        this.#cancels.delete(key);
        mode = "cancelled";
      }
      const rj: RunningJob = {
        job,
        key,
        abort: new AbortController(),
        holdsSlot: false,
        heldForMs: 0,
        startState: "pending",
        reported: false,
        timeoutMs: 0,
        timers: [],
        progress: -1,
        progressSentAt: 0,
        lines: [],
        dropped: 0,
        ...(reason ? { releaseReason: reason } : {}),
      };
      if (mode === "run" && task) this.#takeSlot(rj);
      this.#jobs.set(key, rj);
      running.set(job.task, (running.get(job.task) ?? 0) + 1);
      void this.#run(rj, mode).catch((err) => {
        this.#log.error(`job ${job.id}: ${(err as Error)?.stack ?? err}`);
        this.#complete(rj, { outcome: "error", error: `executor error: ${(err as Error)?.message ?? err}` });
      });
    }
  }

  // -------------------------------------------------------------------
  // Slots.

  #takeSlot(rj: RunningJob): void {
    if (this.#runningN < this.slots && this.#queued.length === 0) {
      this.#runningN++;
      rj.holdsSlot = true;
      return;
    }
    rj.gate = deferred<void>();
    this.#queued.push(rj);
  }

  async #waitForSlot(rj: RunningJob): Promise<boolean> {
    if (rj.holdsSlot) return true;
    rj.heldForMs = heldWaitMs(this.#avgRun, this.#avgRtt);
    const signal = rj.abort.signal;
    let onAbort = () => {};
    const aborted = new Promise<void>((resolve) => {
      onAbort = resolve;
      if (signal.aborted) resolve();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
    const held = setTimeout(
      () =>
        rj.abort.abort(
          new JobAbortedError(
            "held",
            `released before it started: no slot of this executor freed within ${formatDuration(rj.heldForMs)} (its running jobs run long); back to waiting for another executor`,
          ),
        ),
      rj.heldForMs,
    );
    await Promise.race([rj.gate!.promise, aborted]);
    clearTimeout(held);
    signal.removeEventListener("abort", onAbort);
    if (rj.holdsSlot && !signal.aborted) return true;
    if (rj.holdsSlot) {
      rj.holdsSlot = false;
      this.#runningN--;
      this.#startQueued();
      return false;
    }
    this.#leaveLine(rj);
    return false;
  }

  #leaveLine(rj: RunningJob): void {
    const i = this.#queued.indexOf(rj);
    if (i >= 0) this.#queued.splice(i, 1);
  }

  #freeSlot(rj: RunningJob): void {
    if (!rj.holdsSlot) {
      this.#leaveLine(rj);
      return;
    }
    rj.holdsSlot = false;
    this.#runningN--;
    this.#startQueued();
  }

  #startQueued(): void {
    while (this.#runningN < this.slots && this.#queued.length > 0) {
      const rj = this.#queued.shift()!;
      this.#runningN++;
      rj.holdsSlot = true;
      rj.gate!.resolve();
    }
  }

  // -------------------------------------------------------------------
  // Running a job.

  async #run(rj: RunningJob, mode: "run" | "release" | "cancelled"): Promise<void> {
    const job = rj.job;
    if (mode === "release") return this.#complete(rj, { outcome: "released", error: rj.releaseReason ?? RELEASED_UNRUN });
    if (mode === "cancelled") return this.#complete(rj, { outcome: "cancelled", error: "cancelled before it started" });
    const task = this.#tasks.get(job.task);
    if (!task) {
      const msg = `no handler for task ${JSON.stringify(job.task)} on executor ${JSON.stringify(this.appId)}`;
      this.#log.error(msg);
      return this.#complete(rj, { outcome: "permanent", error: msg });
    }
    if (!(await this.#waitForSlot(rj)) || rj.abort.signal.aborted) {
      return this.#complete(rj, this.#unrunOutcome(rj));
    }

    const start = Date.now();
    rj.startedAt = start;
    rj.timers.push(
      setTimeout(() => {
        if (rj.startState === "pending" && !rj.reported) {
          rj.startState = "sent";
          this.#reporter.publish(this.#report(rj, "started", { time: new Date(start).toISOString() }));
        }
      }, START_REPORT_DELAY_MS),
    );
    rj.timeoutMs = this.#timeoutOf(job, task);
    if (rj.timeoutMs > 0) {
      rj.timers.push(setTimeout(() => rj.abort.abort(new JobAbortedError("timeout", `the attempt ran longer than ${formatDuration(rj.timeoutMs)}`)), rj.timeoutMs));
      // A handler that ignores its signal is not waited for beyond the grace.
      rj.timers.push(
        setTimeout(() => {
          this.#log.error(`the handler of job ${job.id} still runs after its timeout and the grace; reporting the attempt failed and freeing its slot`);
          this.#complete(rj, timeoutOutcome(rj.timeoutMs));
        }, rj.timeoutMs + this.#o.timeoutGraceMs),
      );
    }
    const ctx: JobContext = {
      job,
      signal: rj.abort.signal,
      ...(job.traceparent ? { traceparent: job.traceparent } : {}),
      log: (level, message) => this.#addLine(rj, String(level), String(message)),
      progress: (pct) => this.#setProgress(rj, pct),
    };
    let threw = false;
    let error: unknown;
    let result: unknown;
    try {
      result = await task.handler(job, ctx);
    } catch (err) {
      threw = true;
      error = err;
    }
    this.#avgRun = ewma(this.#avgRun, Date.now() - start);
    this.#complete(rj, this.#outcome(rj, threw, error, result));
  }

  #timeoutOf(job: Job, task: TaskEntry): number {
    if (job.timeout) {
      try {
        const ms = parseDuration(job.timeout);
        if (ms > 0) return ms;
      } catch {
        // an unreadable timeout: the task's
      }
    }
    return task.timeoutMs ?? 0;
  }

  #unrunOutcome(rj: RunningJob): Outcome {
    const reason = rj.abort.signal.reason as JobAbortedError | undefined;
    const kind: AbortKind | undefined = reason instanceof JobAbortedError ? reason.kind : undefined;
    switch (kind) {
      case "cancelled":
        return { outcome: "cancelled", error: "cancelled before it started" };
      case "held":
      case "paused":
        return { outcome: "released", error: reason!.message };
      default:
        return { outcome: "released", error: RELEASED_UNRUN };
    }
  }

  #outcome(rj: RunningJob, threw: boolean, error: unknown, result: unknown): Outcome {
    const reason = rj.abort.signal.aborted ? (rj.abort.signal.reason as JobAbortedError) : undefined;
    const kind = reason instanceof JobAbortedError ? reason.kind : undefined;
    if (kind === "cancelled") return { outcome: "cancelled", error: "cancelled while running" };
    if (kind === "shutdown") return { outcome: "released", error: "released while it ran: the executor shut down before the job finished" };
    if (!threw) {
      // A success is one, even past the deadline: its work is done.
      let json: string | undefined;
      try {
        json = JSON.stringify(result === undefined ? null : result);
      } catch (err) {
        return { outcome: "permanent", error: `encoding the result of job ${rj.job.id}: ${(err as Error).message}` };
      }
      if (json === undefined) json = "null"; // a function, a symbol
      const bytes = byteLength(json);
      if (bytes > MAX_RESULT_BYTES) {
        return {
          outcome: "permanent",
          error: `the result of job ${rj.job.id} is ${bytes} bytes: a result is at most ${MAX_RESULT_BYTES} bytes (1 MiB); store a large output elsewhere (object storage, a table) and return where it is`,
        };
      }
      const maxPayload = this.client.nc.info?.max_payload ?? 0;
      if (maxPayload > 0 && bytes > maxPayload - RESULT_HEADROOM) {
        return {
          outcome: "error",
          error: `the result of job ${rj.job.id} is ${bytes} bytes: more than the ${maxPayload - RESULT_HEADROOM} bytes a report can carry (NATS max payload ${maxPayload} bytes)`,
        };
      }
      return { outcome: "success", resultJSON: json };
    }
    if (kind === "timeout") return timeoutOutcome(rj.timeoutMs);
    if (error instanceof SnoozeError) return { outcome: "snoozed", snooze: error.duration };
    const message = error instanceof Error ? error.message : String(error);
    if (error instanceof PermanentError || (error as { permanent?: unknown })?.permanent === true) return { outcome: "permanent", error: message };
    return { outcome: "error", error: message };
  }

  #report(rj: RunningJob, type: Report["type"], fields: Partial<Report> = {}): Report {
    return { type, group: rj.job.group, job_id: rj.job.id, attempt: rj.job.attempt, executor: this.appId, instance: this.instance, time: nowISO(), ...fields };
  }

  /** Sends the job's pending log lines and progress (progress at most once a second unless `all`). */
  #sendPending(rj: RunningJob, all: boolean, now: number): void {
    const hasProgress = rj.pendingProgress !== undefined && (all || now - rj.progressSentAt >= PROGRESS_EVERY_MS);
    if (rj.lines.length === 0 && rj.dropped === 0 && !hasProgress) return;
    if (rj.startState === "pending" && rj.startedAt !== undefined && !rj.reported) {
      rj.startState = "sent";
      this.#reporter.publish(this.#report(rj, "started", { time: new Date(rj.startedAt).toISOString() }));
    }
    if (rj.dropped > 0) {
      rj.lines.push({ time: nowISO(), level: "warn", message: `${rj.dropped} log lines dropped: the executor's log buffer was full` });
      this.#linesHeld++; // counted like a line: subtracted with the others below
      rj.dropped = 0;
    }
    let chunk: typeof rj.lines = [];
    let bytes = 0;
    for (const line of rj.lines) {
      const size = byteLength(line.message) + 128;
      if (chunk.length > 0 && bytes + size > MAX_LOG_CHUNK) {
        this.#reporter.publish(this.#report(rj, "log", { logs: chunk }));
        chunk = [];
        bytes = 0;
      }
      chunk.push(line);
      bytes += size;
    }
    if (chunk.length > 0) this.#reporter.publish(this.#report(rj, "log", { logs: chunk }));
    this.#linesHeld -= rj.lines.length;
    rj.lines = [];
    if (hasProgress) {
      this.#reporter.publish(this.#report(rj, "progress", { progress: rj.pendingProgress! }));
      rj.pendingProgress = undefined;
      rj.progressSentAt = now;
    }
  }

  #flushLogs(all: boolean): void {
    const now = Date.now();
    for (const rj of this.#jobs.values()) if (!rj.reported) this.#sendPending(rj, all, now);
  }

  #addLine(rj: RunningJob, level: string, message: string): void {
    if (rj.reported) return;
    if (this.#linesHeld >= this.#o.logBufferSize) {
      rj.dropped++;
      return;
    }
    if (byteLength(message) > MAX_LOG_MESSAGE) message = Buffer.from(message).subarray(0, MAX_LOG_MESSAGE).toString("utf8") + " … [truncated]";
    rj.lines.push({ time: nowISO(), level, message });
    this.#linesHeld++;
    if (this.#linesHeld >= Math.min(LOG_FLUSH_LINES, this.#o.logBufferSize)) this.#flushLogs(false);
  }

  #setProgress(rj: RunningJob, pct: number): void {
    if (rj.reported || !Number.isFinite(pct)) return;
    pct = Math.min(100, Math.max(0, Math.round(pct)));
    if (pct === rj.progress) return;
    rj.progress = pct;
    rj.pendingProgress = pct;
  }

  /** Sends the job's last lines and progress, then its done report, and frees its slot. Only the first call does anything. */
  #complete(rj: RunningJob, out: Outcome): void {
    if (rj.reported) {
      this.#log.warn(`the handler of job ${rj.job.id} returned after the job was reported; its outcome (${out.outcome}) is dropped`);
      return;
    }
    const now = Date.now();
    let started: string | undefined;
    let ranMs: number | undefined;
    if (rj.startedAt !== undefined) {
      ranMs = now - rj.startedAt;
      if (rj.startState === "pending") {
        rj.startState = "folded";
        started = new Date(rj.startedAt).toISOString();
      }
    }
    this.#sendPending(rj, true, now);
    rj.reported = true;
    for (const t of rj.timers) clearTimeout(t);
    const fields: Partial<Report> = { time: new Date(now).toISOString(), outcome: out.outcome };
    if (out.error !== undefined) fields.error = out.error;
    if (out.resultJSON !== undefined) fields.resultJSON = out.resultJSON;
    if (out.snooze !== undefined) fields.snooze = out.snooze;
    if (started !== undefined) fields.started = started;
    if (ranMs !== undefined) fields.ran_ms = ranMs;
    this.#reporter.publish(this.#report(rj, "done", fields));
    this.#jobs.delete(rj.key);
    this.#rememberRan(rj.key, rj.job.attempt, now);
    this.#freeSlot(rj);
    if (!rj.abort.signal.aborted) rj.abort.abort(JOB_ENDED); // lets go of what listens to it

    if (this.#jobs.size === 0) this.#jobsEmpty?.();
    this.#wake();
  }
}

function timeoutOutcome(ms: number): Outcome {
  return { outcome: "error", error: `timeout: the attempt ran longer than ${formatDuration(ms)}` };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** p, or a rejection with the signal's reason as soon as it aborts. */
function abortable<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

/** A dispatch reply's jobs and error, or what is wrong with it. */
function readDispatchReply(text: string): { jobs: unknown[]; error?: { code: string; message: string } } | string {
  let reply: unknown;
  try {
    reply = JSON.parse(text);
  } catch {
    return `an unreadable dispatch reply: ${text.slice(0, 200)}`;
  }
  if (!isObject(reply)) return `a dispatch reply that is not an object: ${text.slice(0, 200)}`;
  const { jobs, error } = reply;
  if (error !== undefined && error !== null) {
    if (!isObject(error) || typeof error.code !== "string") return `a dispatch reply with a malformed error: ${text.slice(0, 200)}`;
    return { jobs: [], error: { code: error.code, message: typeof error.message === "string" ? error.message : error.code } };
  }
  if (jobs !== undefined && jobs !== null && !Array.isArray(jobs)) return `a dispatch reply whose jobs are not an array: ${text.slice(0, 200)}`;
  return { jobs: (jobs as unknown[] | null | undefined) ?? [] };
}

function isJob(j: unknown): j is Job {
  return (
    isObject(j) &&
    typeof j.id === "string" &&
    j.id !== "" &&
    typeof j.group === "string" &&
    j.group !== "" &&
    typeof j.task === "string" &&
    j.task !== "" &&
    typeof j.attempt === "number" &&
    Number.isInteger(j.attempt) &&
    j.attempt >= 1
  );
}
