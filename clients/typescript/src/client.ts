/**
 * The Fairway client: submit jobs, manage them and follow their events
 * over NATS.
 *
 * @module
 */

import { readFile } from "node:fs/promises";
import { hostname } from "node:os";
import { connect as natsConnect } from "@nats-io/transport-node";
import { credsAuthenticator, headers as natsHeaders } from "@nats-io/nats-core";
import type { ConnectionOptions, MsgHdrs, NatsConnection, TlsOptions, Subscription as NatsSubscription } from "@nats-io/nats-core";
import { jetstream, DeliverPolicy } from "@nats-io/jetstream";
import type { JetStreamClient, PubAck } from "@nats-io/jetstream";
import { FairwayError } from "./errors.js";
import { decodeEvents, EventDeduper } from "./events.js";
import { activeTraceparent, loadOtel } from "./trace.js";
import type { ExecutorInfo, FairwayEvent, Job, ListFilter, LogLine, Progress, Reply, Submission, WorkflowJob } from "./types.js";
import { FINAL_STATES } from "./types.js";
import { byteLength, checkName, dec, durationText, natsError, sleep, timeText, uuidv7 } from "./util.js";
import { parseDuration } from "./duration.js";

/** Options of {@link connect}. */
export interface ConnectOptions {
  /** NATS server URL(s). Default `nats://127.0.0.1:4222`. */
  servers?: string | string[];
  /** Path of a `.creds` file (a tenant's, an executor's, the operator's). */
  creds?: string;
  /** User and password. */
  user?: string;
  pass?: string;
  /** A token. */
  token?: string;
  /** TLS options (`{caFile, certFile, keyFile}`, or `{}` to require TLS). */
  tls?: TlsOptions;
  /** The subject prefix (`nats.prefix`). Default `fairway`. */
  prefix?: string;
  /** The connection's name, as the server shows it. */
  name?: string;
  /** Any other option of the NATS connection, passed as is. */
  nats?: Partial<ConnectionOptions>;
  /** Bound on a request whose call gives none, ms. Default 10,000. */
  timeoutMs?: number;
}

/** Options of a submission: its trace context. */
export interface SubmitOptions {
  /**
   * W3C trace context for the job; without it, the active span's when
   * `@opentelemetry/api` is installed.
   */
  traceparent?: string;
  tracestate?: string;
  /** Bound on the call, ms. */
  timeoutMs?: number;
}

/** What {@link Fairway.submit} returns: the job's id and JetStream's acknowledgement. */
export interface SubmitResult {
  id: string;
  stream: string;
  seq: number;
  /** True when JetStream took it for a resend of a message it had. */
  duplicate: boolean;
}

/** The reply of the `submit` verb. */
export interface SubmitReply {
  id: string;
  job: Job;
  /** Set when no live executor runs the task (the job is stored and waits). */
  warning?: string;
}

/** Options of {@link Fairway.wait}. */
export interface WaitOptions {
  /** How long to wait in all, ms. Default: until the job ends. */
  timeoutMs?: number;
  /** How long one `wait` request may be held, ms (at most and by default 30,000). */
  waitMs?: number;
  /** Stops the wait. */
  signal?: AbortSignal;
}

/** The filter of {@link Fairway.subscribe}: empty fields match everything. */
export interface EventFilter {
  group?: string;
  task?: string;
  state?: string;
  /** Replay stored events from this time on (`"all"`: every one still stored); default only new events. */
  since?: Date | "all";
}

/** A running event subscription. */
export interface EventSubscription {
  /** Ends the subscription; safe to call twice. */
  stop(): Promise<void>;
  /** Settles when the subscription ends: rejected with a handler's error. */
  readonly done: Promise<void>;
}

/** The most submissions one message of {@link Fairway.submitMany} carries. */
export const SUBMIT_MANY_BATCH = 100;
/** The most bytes one message of {@link Fairway.submitMany} carries. */
export const SUBMIT_MANY_BYTES = 512 << 10;
/** The longest a coordinator holds a `wait` request. */
export const MAX_WAIT_MS = 30_000;

/**
 * Connects to NATS and returns a {@link Fairway} client.
 *
 * ```ts
 * const fw = await connect({ servers: "nats://127.0.0.1:4222" });
 * const job = await fw.submitAndWait({ group: "acme", task: "ocr", args: { page: 1 } });
 * ```
 */
export async function connect(opts: ConnectOptions = {}): Promise<Fairway> {
  const o: Partial<ConnectionOptions> = {
    servers: opts.servers ?? "nats://127.0.0.1:4222",
    name: opts.name ?? `fairway-ts ${hostname()}`,
    maxReconnectAttempts: -1,
    ...opts.nats,
  };
  if (opts.creds) {
    let data: Uint8Array;
    try {
      data = await readFile(opts.creds);
    } catch (err) {
      throw new Error(`reading the credentials file ${opts.creds}: ${(err as Error).message}`, { cause: err });
    }
    o.authenticator = credsAuthenticator(data);
  }
  if (opts.user !== undefined) o.user = opts.user;
  if (opts.pass !== undefined) o.pass = opts.pass;
  if (opts.token !== undefined) o.token = opts.token;
  if (opts.tls !== undefined) o.tls = opts.tls;
  let nc: NatsConnection;
  try {
    nc = await natsConnect(o);
  } catch (err) {
    throw new Error(`connecting to NATS at ${String(o.servers)}: ${(err as Error).message}`, { cause: err });
  }
  await loadOtel();
  return new Fairway(nc, { prefix: opts.prefix, timeoutMs: opts.timeoutMs, ownsConnection: true });
}

/**
 * A Fairway client on a NATS connection. Make one with {@link connect},
 * or wrap a connection you have with `new Fairway(nc, {prefix})`.
 */
export class Fairway {
  /** The NATS connection. */
  readonly nc: NatsConnection;
  /** The JetStream client. */
  readonly js: JetStreamClient;
  /** The subject prefix. */
  readonly prefix: string;
  readonly #timeoutMs: number;
  readonly #owns: boolean;

  constructor(nc: NatsConnection, opts: { prefix?: string; timeoutMs?: number; ownsConnection?: boolean } = {}) {
    this.nc = nc;
    this.js = jetstream(nc);
    this.prefix = opts.prefix ?? "fairway";
    checkName("prefix", this.prefix);
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
    this.#owns = opts.ownsConnection ?? false;
  }

  /** `<prefix>.<tokens…>`. */
  subject(...tokens: string[]): string {
    return [this.prefix, ...tokens].join(".");
  }

  /** The name of a stream (`FAIRWAY_EVENTS` for kind `EVENTS`). */
  stream(kind: string): string {
    return `${this.prefix.toUpperCase()}_${kind}`;
  }

  /** Closes the connection (drains it first) when {@link connect} made it. */
  async close(): Promise<void> {
    if (this.#owns && !this.nc.isClosed()) await this.nc.drain();
  }

  // -------------------------------------------------------------------
  // Submitting.

  /**
   * Publishes one job to JetStream (`<prefix>.submit.<group>.<task>`) and
   * returns its id once JetStream has stored it: from then on the job
   * survives a coordinator that is down. Refusals the coordinators decide
   * (validation needing the database, a tracker held) come as a `rejected`
   * event, and {@link wait} answers with them; use {@link submitAndWait}
   * or {@link submitRequest} to learn them at once.
   */
  async submit(sub: Submission, opts: SubmitOptions = {}): Promise<SubmitResult> {
    const body = prepare(sub);
    const subject = this.subject("submit", sub.group, sub.task);
    let ack: PubAck;
    try {
      ack = await this.js.publish(subject, JSON.stringify(body), { headers: this.#traceHeaders(opts), timeout: opts.timeoutMs ?? this.#timeoutMs });
    } catch (err) {
      throw publishError(err, subject);
    }
    return { id: body.id!, stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate };
  }

  /**
   * Publishes many jobs and returns their ids, in order, once JetStream has
   * stored all of them. Submissions of one group and task go together as
   * JSON arrays of up to 100 and 512 KiB, as the Go client's SubmitMany
   * does. On error some may have been stored: submitting them again (same
   * ids) is safe.
   */
  async submitMany(subs: Submission[], opts: SubmitOptions = {}): Promise<string[]> {
    const ids: string[] = [];
    type Batch = { subject: string; parts: string[]; bytes: number };
    const open = new Map<string, Batch>();
    const batches: Batch[] = [];
    subs.forEach((sub, i) => {
      let body: Submission;
      let data: string;
      try {
        body = prepare(sub);
        data = JSON.stringify(body);
      } catch (err) {
        if (err instanceof FairwayError) throw new FairwayError(err.code, `job ${i}: ${err.message}`, { field: err.field });
        throw err;
      }
      ids.push(body.id!);
      const key = `${sub.group}.${sub.task}`;
      let b = open.get(key);
      const size = byteLength(data);
      if (b && (b.parts.length === SUBMIT_MANY_BATCH || b.bytes + size + 2 > SUBMIT_MANY_BYTES)) b = undefined;
      if (!b) {
        b = { subject: this.subject("submit", sub.group, sub.task), parts: [], bytes: 1 };
        open.set(key, b);
        batches.push(b);
      }
      b.parts.push(data);
      b.bytes += size + 1;
    });
    const headers = this.#traceHeaders(opts);
    const window = 64;
    for (let i = 0; i < batches.length; i += window) {
      await Promise.all(
        batches.slice(i, i + window).map(async (b) => {
          try {
            await this.js.publish(b.subject, `[${b.parts.join(",")}]`, { headers, timeout: opts.timeoutMs ?? this.#timeoutMs });
          } catch (err) {
            throw publishError(err, b.subject);
          }
        }),
      );
    }
    return ids;
  }

  /**
   * Submits through the request/reply API (`<prefix>.api.<group>.submit`):
   * the reply carries the stored job, or the refusal at once (a
   * {@link FairwayError} with its code and field).
   */
  async submitRequest(sub: Submission, opts: SubmitOptions = {}): Promise<SubmitReply> {
    const body = prepare(sub);
    const reply = await this.request(this.subject("api", sub.group, "submit"), body, opts.timeoutMs, this.#traceHeaders(opts));
    return { id: reply.id ?? reply.job!.id, job: reply.job!, ...(reply.warning ? { warning: reply.warning } : {}) };
  }

  /**
   * Submits a job through the API and waits until it ends; returns the
   * final job (its `result`, or its `error` when it failed: a failed job is
   * returned, not thrown). A refusal throws a {@link FairwayError}; so does
   * a wait that outlasts `timeoutMs` (code `timeout`, with the job as last
   * seen in `err.job`).
   */
  async submitAndWait(sub: Submission, opts: SubmitOptions & WaitOptions = {}): Promise<Job> {
    const started = Date.now();
    const { id, job } = await this.submitRequest(sub, { ...opts, timeoutMs: opts.timeoutMs === undefined ? undefined : Math.min(opts.timeoutMs, this.#timeoutMs) });
    if (job && FINAL_STATES.has(job.state)) return job;
    const left = opts.timeoutMs === undefined ? undefined : Math.max(1, opts.timeoutMs - (Date.now() - started));
    return this.wait(sub.group, id, { ...opts, timeoutMs: left });
  }

  /**
   * Submits jobs that depend on each other at once (the `workflow` verb):
   * all are stored or none. Returns each ref's job id. A refusal names the
   * job as `jobs[i].field`.
   */
  async workflow(group: string, jobs: WorkflowJob[], opts: SubmitOptions = {}): Promise<Record<string, string>> {
    checkName("group", group);
    const body = { jobs: jobs.map((j) => prepareFields({ ...j } as Submission)) };
    const reply = await this.request(this.subject("api", group, "workflow"), body, opts.timeoutMs, this.#traceHeaders(opts));
    return reply.refs ?? {};
  }

  // -------------------------------------------------------------------
  // Managing jobs.

  /** The job `id` of `group`. */
  async get(group: string, id: string): Promise<Job> {
    return (await this.api(group, "get", { id })).job!;
  }

  /**
   * Waits until the job ends and returns it, final. It asks a coordinator
   * to hold the request (`wait`, `waitMs` at a time) and again until the
   * job ends or `timeoutMs` runs out (then a {@link FairwayError} with code
   * `timeout` and the job as last seen). May be called right after
   * {@link submit}: a job not stored yet is waited for; a rejected
   * submission throws its rejection.
   */
  async wait(group: string, id: string, opts: WaitOptions = {}): Promise<Job> {
    checkName("group", group);
    const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
    let last: Job | undefined;
    for (;;) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      const left = deadline - Date.now();
      let waitMs = Math.min(opts.waitMs ?? MAX_WAIT_MS, MAX_WAIT_MS);
      if (left !== Infinity) waitMs = Math.min(waitMs, Math.floor(left - Math.min(left / 5, 1000)));
      if (waitMs < 1) {
        const err = new FairwayError("timeout", `job ${id} of group ${group} did not end within ${opts.timeoutMs} ms${last ? ` (last seen ${last.state})` : ""}`);
        err.job = last;
        throw err;
      }
      const reply = await this.request(this.subject("api", group, "wait"), { id, wait_ms: waitMs }, waitMs + this.#timeoutMs);
      if (reply.job && FINAL_STATES.has(reply.job.state)) return reply.job;
      if (reply.job) last = reply.job;
    }
  }

  /**
   * Waits until the jobs `ids` of `group` end (see {@link wait}), at most
   * `concurrency` (default 32) waits in flight (a coordinator holds at most
   * 128 of a group's requests waiting), and returns them in the order of
   * ids. The first failure (a rejection, a timeout) throws.
   */
  async waitMany(group: string, ids: string[], opts: WaitOptions & { concurrency?: number } = {}): Promise<Job[]> {
    const out: Job[] = new Array(ids.length);
    let next = 0;
    const worker = async () => {
      while (next < ids.length) {
        const i = next++;
        out[i] = await this.wait(group, ids[i]!, opts);
      }
    };
    await Promise.all(Array.from({ length: Math.min(opts.concurrency ?? 32, ids.length) }, worker));
    return out;
  }

  /** Lists a group's jobs, newest first: one page, with the cursor of the next. */
  async list(filter: ListFilter): Promise<{ jobs: Job[]; nextCursor?: string }> {
    const { group, ...rest } = filter;
    const body: Record<string, unknown> = { ...rest, since: timeText(rest.since), until: timeText(rest.until) };
    const reply = await this.api(group, "list", body);
    return { jobs: reply.jobs ?? [], ...(reply.next_cursor ? { nextCursor: reply.next_cursor } : {}) };
  }

  /** Cancels a job: one not started ends at once; a running one's handler sees its signal aborted. */
  async cancel(group: string, id: string): Promise<Job> {
    return (await this.api(group, "cancel", { id })).job!;
  }

  /** Runs a failed or cancelled job again. */
  async retry(group: string, id: string): Promise<Job> {
    return (await this.api(group, "retry", { id })).job!;
  }

  /** Releases a pending job: it becomes waiting, due now. */
  async release(group: string, id: string): Promise<Job> {
    return (await this.api(group, "release", { id })).job!;
  }

  /** A job's log lines, oldest first (every page). */
  async logs(group: string, id: string, opts: { limit?: number } = {}): Promise<LogLine[]> {
    const out: LogLine[] = [];
    let cursor: string | undefined;
    do {
      const reply = await this.api(group, "logs", { id, ...(opts.limit ? { limit: opts.limit } : {}), ...(cursor ? { cursor } : {}) });
      out.push(...(reply.logs ?? []));
      cursor = reply.next_cursor;
    } while (cursor);
    return out;
  }

  /** The executors the coordinators know (the operator API: needs an operator's credential with accounts). */
  async executors(): Promise<ExecutorInfo[]> {
    return (await this.admin("executors", {})).executors ?? [];
  }

  /** Sends a request to a group's API, `<prefix>.api.<group>.<verb>`, and returns its Reply; an error reply throws. */
  async api(group: string, verb: string, body: unknown, timeoutMs?: number): Promise<Reply> {
    checkName("group", group);
    return this.request(this.subject("api", group, verb), body, timeoutMs);
  }

  /** Sends a request to the operator API, `<prefix>.admin.<verb>`. */
  async admin(verb: string, body: unknown, timeoutMs?: number): Promise<Reply> {
    return this.request(this.subject("admin", verb), body, timeoutMs);
  }

  /**
   * Sends a request and decodes its Reply; an `error` in it throws a
   * {@link FairwayError}. A refusal for the group's API rate (code `quota`,
   * "retry in …": the request was not served) is sent again after the
   * delay it names, within the call's timeout.
   */
  async request(subject: string, body: unknown, timeoutMs?: number, headers?: MsgHdrs): Promise<Reply> {
    const deadline = Date.now() + (timeoutMs ?? this.#timeoutMs);
    for (;;) {
      try {
        return await this.#requestOnce(subject, body, Math.max(1, deadline - Date.now()), headers);
      } catch (err) {
        const retryIn = err instanceof FairwayError && err.code === "quota" ? /rate quota.*retry in (\S+)/.exec(err.message)?.[1] : undefined;
        if (retryIn === undefined) throw err;
        let ms = 10;
        try {
          ms = Math.max(parseDuration(retryIn), 10);
        } catch {
          // keep 10 ms
        }
        if (Date.now() + ms >= deadline) throw err;
        await sleep(ms);
      }
    }
  }

  async #requestOnce(subject: string, body: unknown, timeoutMs?: number, headers?: MsgHdrs): Promise<Reply> {
    let data: string;
    try {
      const msg = await this.nc.request(subject, JSON.stringify(body), { timeout: timeoutMs ?? this.#timeoutMs, ...(headers ? { headers } : {}) });
      data = dec(msg.data);
    } catch (err) {
      throw natsError(err, subject, "request");
    }
    let reply: Reply;
    try {
      reply = JSON.parse(data) as Reply;
    } catch (err) {
      throw new Error(`decoding the reply on ${subject}: ${(err as Error).message}`, { cause: err });
    }
    if (reply.error) throw FairwayError.fromWire(reply.error);
    return reply;
  }

  // -------------------------------------------------------------------
  // Events.

  /**
   * Calls `handler` for every event matching `filter`, in stream order,
   * each once (duplicates are dropped by id), through an ordered consumer
   * on stream FAIRWAY_EVENTS (a tenant's own copy with accounts). Messages
   * holding an array of events and those holding one are both read. An
   * async handler is awaited before the next event. A handler that throws
   * ends the subscription, and `done` rejects with its error.
   */
  async subscribe(filter: EventFilter, handler: (ev: FairwayEvent) => void | Promise<void>): Promise<EventSubscription> {
    if (filter.group) checkName("group", filter.group);
    if (filter.task) checkName("task", filter.task);
    if (filter.state) checkName("state", filter.state);
    const stream = this.stream("EVENTS");
    const opts: Record<string, unknown> = {
      filter_subjects: [this.subject("events", filter.group || "*", filter.task || "*", filter.state || "*")],
      deliver_policy: DeliverPolicy.New,
    };
    if (filter.since === "all") opts.deliver_policy = DeliverPolicy.All;
    else if (filter.since) {
      opts.deliver_policy = DeliverPolicy.StartTime;
      opts.opt_start_time = filter.since.toISOString();
    }
    let messages;
    try {
      const consumer = await this.js.consumers.get(stream, opts);
      messages = await consumer.consume();
    } catch (err) {
      throw natsError(new Error(`subscribing to events on stream ${stream}: ${(err as Error).message} (is a coordinator running? it creates the stream)`, { cause: err }), stream, "subscribe");
    }
    const dedup = new EventDeduper();
    let stopped = false;
    const done = (async () => {
      for await (const m of messages) {
        if (stopped) break;
        let evs: FairwayEvent[];
        try {
          evs = decodeEvents(m.string());
        } catch (err) {
          evs = [{ id: m.headers?.get("Nats-Msg-Id") ?? `seq-${m.seq}`, error: `undecodable event on ${m.subject}: ${(err as Error).message}` } as FairwayEvent];
        }
        for (const ev of evs) {
          if (stopped) break;
          if (!dedup.first(ev.id)) continue;
          try {
            await handler(ev);
          } catch (err) {
            stopped = true;
            messages.stop();
            throw err;
          }
        }
      }
    })();
    done.catch(() => {}); // observed through the subscription's done
    return {
      done,
      stop: async () => {
        if (!stopped) {
          stopped = true;
          messages.stop();
        }
        await done.catch(() => {});
      },
    };
  }

  /**
   * Calls `handler` with the progress of running jobs of group and task
   * (empty: every one), as the coordinators publish it on core NATS, at
   * most once a second per job, only while subscribed.
   */
  subscribeProgress(filter: { group?: string; task?: string }, handler: (p: Progress) => void): { stop(): void } {
    const sub: NatsSubscription = this.nc.subscribe(this.subject("progress", filter.group || "*", filter.task || "*"), {
      // nats-core calls this from its protocol parser without a try/catch:
      // nothing may be thrown out of it (the connection would stop reading).
      callback: (err, msg) => {
        try {
          if (err) return;
          const p = msg.json<Progress>();
          if (typeof p !== "object" || p === null || Array.isArray(p)) return;
          handler(p);
        } catch {
          // An undecodable message, or the handler's error: skipped.
        }
      },
    });
    return { stop: () => sub.unsubscribe() };
  }

  #traceHeaders(opts: SubmitOptions): MsgHdrs | undefined {
    const tc = opts.traceparent ? { traceparent: opts.traceparent, tracestate: opts.tracestate } : activeTraceparent();
    if (!tc) return undefined;
    const h = natsHeaders();
    h.set("traceparent", tc.traceparent);
    if (tc.tracestate) h.set("tracestate", tc.tracestate);
    return h;
  }
}

/** Checks the names, converts Dates and ms durations, gives an id. */
function prepare(sub: Submission): Submission {
  if (!sub || typeof sub !== "object") throw new FairwayError("invalid", "a submission must be an object");
  checkName("group", sub.group);
  checkName("task", sub.task);
  const out = prepareFields({ ...sub });
  out.id ??= uuidv7();
  return out;
}

function prepareFields(s: Submission): Submission {
  if (s.args !== undefined && (typeof s.args !== "object" || s.args === null || Array.isArray(s.args))) {
    throw new FairwayError("invalid", "args must be a JSON object", { field: "args" });
  }
  for (const k of ["run_at", "trigger_after", "expires_at"] as const) if (s[k] !== undefined) s[k] = timeText(s[k]);
  for (const k of ["run_in", "unique_for", "timeout"] as const) if (s[k] !== undefined) s[k] = durationText(s[k]);
  for (const k of Object.keys(s) as Array<keyof Submission>) if (s[k] === undefined) delete s[k];
  return s;
}

function publishError(err: unknown, subject: string): unknown {
  const msg = (err as Error)?.message ?? "";
  if (/max_payload|maximum payload/i.test(msg)) {
    return new FairwayError("invalid", `submission too large for the NATS server: ${msg}`, { field: "args", cause: err });
  }
  if (/maximum messages|maximum bytes|resource limits/i.test(msg)) {
    return new FairwayError("quota", `the group's submission stream is full (${msg}): try again later`, { cause: err });
  }
  return natsError(err, subject, "publishing a submission");
}

