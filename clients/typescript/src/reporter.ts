// The reporter: sends an executor's reports to JetStream, in order, one
// message at a time, batching what is queued meanwhile (executor/reporter.go).

import type { JetStreamClient } from "@nats-io/jetstream";
import { JetStreamApiError } from "@nats-io/jetstream";
import { randomUUID } from "node:crypto";
import { byteLength, isNoResponders } from "./util.js";

/** A report, wire form; `resultJSON` is the result already encoded. */
export interface Report {
  type: "started" | "progress" | "log" | "done";
  group: string;
  job_id: string;
  attempt: number;
  executor: string;
  instance: string;
  time: string;
  progress?: number;
  outcome?: string;
  error?: string;
  snooze?: string;
  logs?: Array<{ time: string; level: string; message: string }>;
  started?: string;
  ran_ms?: number;
  resultJSON?: string;
}

/** Encodes a report, splicing its encoded result in. */
export function encodeReport(r: Report): string {
  const { resultJSON, ...rest } = r;
  const s = JSON.stringify(rest);
  return resultJSON === undefined ? s : `${s.slice(0, -1)},"result":${resultJSON}}`;
}

export const REPORT_ACK_TIMEOUT_MS = 2000;
export const REPORT_RETRY_FIRST_MS = 10;
export const REPORT_RETRY_MAX_MS = 1000;
export const REPORT_BATCH_BYTES = 256 << 10;

/** The pause after a failure that followed `delay` (0 for the first): 10 ms, doubling to 1 s. */
export function nextDelay(delay: number): number {
  return Math.min(Math.max(2 * delay, REPORT_RETRY_FIRST_MS), REPORT_RETRY_MAX_MS);
}

/** Refusals by the stream (not stored: send the reports again later). */
export function isRefusal(err: unknown): boolean {
  if (err instanceof JetStreamApiError) return true;
  const m = (err as Error)?.message ?? "";
  return /maximum messages|maximum bytes|resource limits|stream full|message size exceeds/i.test(m);
}

function isTooLarge(err: unknown): boolean {
  const m = (err as Error)?.message ?? "";
  return /max_payload|message size exceeds maximum|maximum payload/i.test(m);
}

type Out = { id: string; body: string; reports: Report[] };

export class Reporter {
  readonly #js: JetStreamClient;
  readonly #subject: string;
  readonly #idBase = randomUUID() + "-";
  readonly #warn: (msg: string) => void;
  #seq = 0;
  #queue: Report[] = [];
  #unacked: Out | null = null;
  #batchBytes = REPORT_BATCH_BYTES;
  #delay = 0;
  #running: Promise<void> | null = null;
  #closed = false;
  #warnedAt = 0;
  #failures = 0;
  #wakeDelay: (() => void) | null = null;

  constructor(js: JetStreamClient, subject: string, warn: (msg: string) => void) {
    this.#js = js;
    this.#subject = subject;
    this.#warn = warn;
  }

  /** Reports queued or sent and not acknowledged. */
  get pending(): number {
    return this.#queue.length + (this.#unacked?.reports.length ?? 0);
  }

  /** Queues a report; the sender sends it. */
  publish(r: Report): void {
    this.#queue.push(r);
    this.#kick();
  }

  #kick(): void {
    if (this.#running || this.#closed) return;
    this.#running = this.#drain().finally(() => {
      this.#running = null;
      if (this.pending > 0 && !this.#closed) this.#kick();
    });
  }

  /** Waits until every report is acknowledged, at most timeoutMs; false when some are left. */
  async flush(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.pending > 0 && Date.now() < deadline) {
      this.#kick();
      this.#wakeDelay?.();
      const running = this.#running;
      if (!running) break;
      let t: NodeJS.Timeout | undefined;
      await Promise.race([running, new Promise<void>((resolve) => (t = setTimeout(resolve, Math.max(1, deadline - Date.now()))))]);
      clearTimeout(t);
    }
    return this.pending === 0;
  }

  /** Stops sending; what is left is dropped. */
  close(): void {
    this.#closed = true;
    this.#wakeDelay?.();
  }

  async #drain(): Promise<void> {
    for (;;) {
      if (this.#closed) return;
      if (!this.#unacked && !this.#next()) return;
      const err = await this.#send();
      if (err === undefined) {
        this.#delay = 0;
        continue;
      }
      this.#failed(err);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, this.#delay);
        this.#wakeDelay = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.#wakeDelay = null;
    }
  }

  /** Makes the next message from the head of the queue; false when it is empty. */
  #next(): boolean {
    const parts: string[] = [];
    let bytes = 1;
    let n = 0;
    while (n < this.#queue.length) {
      const data = encodeReport(this.#queue[n]!);
      const size = byteLength(data);
      if (n > 0 && bytes + size + 1 > this.#batchBytes) break;
      parts.push(data);
      bytes += size + 1;
      n++;
    }
    if (n === 0) return false;
    this.#seq++;
    this.#unacked = { id: this.#idBase + this.#seq, body: `[${parts.join(",")}]`, reports: this.#queue.slice(0, n) };
    this.#queue = this.#queue.slice(n);
    return true;
  }

  /** Publishes the unacknowledged message; undefined when it is done with (stored, or dropped). */
  async #send(): Promise<unknown> {
    const out = this.#unacked!;
    try {
      await this.#js.publish(this.#subject, out.body, { msgID: out.id, timeout: REPORT_ACK_TIMEOUT_MS, retries: 1 });
      this.#unacked = null;
      return undefined;
    } catch (err) {
      if (isTooLarge(err)) {
        this.#unacked = null;
        if (out.reports.length === 1) {
          this.#warn(`a report of job ${out.reports[0]!.job_id} (${out.reports[0]!.type}) is larger than the server takes; dropping it: ${(err as Error).message}`);
          return undefined;
        }
        this.#batchBytes = Math.max(Math.floor(byteLength(out.body) / 2), 1);
        this.#queue = [...out.reports, ...this.#queue];
        return undefined;
      }
      if (isRefusal(err)) {
        // Not stored: its reports go again, with those queued since.
        this.#unacked = null;
        this.#queue = [...out.reports, ...this.#queue];
        return err;
      }
      if (isNoResponders(err)) {
        // No stream took it (not stored): likewise.
        this.#unacked = null;
        this.#queue = [...out.reports, ...this.#queue];
        return err;
      }
      // No acknowledgement: perhaps stored. Sent again as it was, under its Nats-Msg-Id.
      return err;
    }
  }

  #failed(err: unknown): void {
    this.#delay = nextDelay(this.#delay);
    this.#failures++;
    if (Date.now() - this.#warnedAt < 10_000) return;
    this.#warn(`sending reports to ${this.#subject} failed ${this.#failures} time(s); they are kept and sent again in ${this.#delay} ms: ${(err as Error)?.message ?? err}`);
    this.#warnedAt = Date.now();
    this.#failures = 0;
  }
}
