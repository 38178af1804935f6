/**
 * The wire types of Fairway's NATS API (schemas/*.json). Field names are
 * the wire's (snake_case), so what you read here is what
 * docs/nats-api.md and the JSON Schemas describe.
 *
 * @module
 */

/** `high` or `low` (the default). */
export type Priority = "high" | "low";

/** A job's state. */
export type JobState =
  | "pending"
  | "waiting"
  | "scheduled"
  | "running"
  | "stuck"
  | "success"
  | "failed"
  | "cancelled"
  | (string & {});

/** The final states: a job in one of them has ended. */
export const FINAL_STATES: ReadonlySet<string> = new Set(["success", "failed", "cancelled"]);

/** A duration: a Go duration string (`"90s"`, `"1h30m"`) or milliseconds. */
export type Duration = string | number;

/** A time: a Date, or an RFC 3339 string. */
export type Time = Date | string;

/**
 * A job to submit (schemas/submission.json). `group` and `task` are
 * required here: they make the subject. Every other field is optional;
 * the coordinators fill in the defaults.
 */
export interface Submission {
  /** The tenant the job is fair to: one subject token (letters, digits, `-`, `_`). */
  group: string;
  /** The code to run. A task no executor ever registered is refused (`invalid`, field `task`). */
  task: string;
  /** Makes the submit idempotent. Generated (UUIDv7) by the client when absent. */
  id?: string;
  /** The task's input: a JSON object (1 MiB at most by default). */
  args?: Record<string, unknown>;
  /** A human description (at most 512 bytes). */
  subject?: string;
  /** Who submitted it (at most 256 bytes). */
  submitter?: string;
  priority?: Priority;
  /** A de-duplication key: refused (`duplicate`) while a non-final job of the group holds it. */
  tracker?: string;
  /** Retries of a failed job (0 to 100). */
  max_retries?: number;
  /** Not eligible before this time. */
  run_at?: Time;
  /** Delay counted from when the coordinator stores the job. Not with `run_at`. */
  run_in?: Duration;
  /** Held until released (the `release` verb) or until `trigger_after`. */
  pending?: boolean;
  /** Releases a pending job at this time; implies `pending`. */
  trigger_after?: Time;
  /** Fails the job (`expired`) if it has not started by then. */
  expires_at?: Time;
  /** Unique within the group by these fields (the group always counts). */
  unique_by?: Array<"task" | "args" | "subject" | "group">;
  /** A window for `unique_by` (1s to 10 years). */
  unique_for?: Duration;
  /** Bounds each attempt (1s to 168h): past it the attempt fails with a timeout error. */
  timeout?: Duration;
  /** Ids of jobs of the same group that must succeed first. */
  depends_on?: string[];
}

/** A job of a workflow: a submission's fields, `ref` naming it for the others' `depends_on`. */
export interface WorkflowJob extends Omit<Submission, "group"> {
  /** Names the job within the workflow; defaults to its id. */
  ref?: string;
}

/** A job as replies and dispatches carry it (schemas/job.json). */
export interface Job {
  id: string;
  task: string;
  group: string;
  args: Record<string, unknown>;
  subject?: string;
  submitter?: string;
  priority: Priority;
  tracker?: string;
  state: JobState;
  retries: number;
  max_retries: number;
  attempt: number;
  run_at: string;
  expires_at?: string;
  trigger_after?: string;
  depends_on?: string[];
  progress: number;
  worker?: string;
  lease_until?: string;
  submitted: string;
  started?: string;
  finished?: string;
  result?: unknown;
  error?: string;
  no_executor?: boolean;
  estimated_end?: string;
  /** The job's own bound on an attempt, a Go duration. */
  timeout?: string;
  /** W3C trace context of the job (of its claim, in a dispatch). */
  traceparent?: string;
}

/** A lifecycle event (schemas/event.json). */
export interface FairwayEvent {
  /** Unique and stable: delivery is at least once, duplicates are dropped by it. */
  id: string;
  job_id: string;
  task: string;
  group: string;
  /** The new state, or `rejected`. */
  state: JobState | "rejected";
  previous_state?: string;
  attempt: number;
  error?: string;
  code?: string;
  field?: string;
  executor?: string;
  periodic?: string;
  time: string;
}

/** A line of a job's log. */
export interface LogLine {
  group?: string;
  job_id?: string;
  attempt?: number;
  time: string;
  level: string;
  message: string;
}

/** A running job's progress, as published on `<prefix>.progress.<group>.<task>`. */
export interface Progress {
  group: string;
  task: string;
  job_id: string;
  attempt: number;
  progress: number;
  started?: string;
  estimated_end?: string;
  time: string;
}

/** The filter of `list` (schemas/api-list-request.json). */
export interface ListFilter {
  /** The group (the tenant API's); required. */
  group: string;
  task?: string;
  state?: JobState;
  priority?: Priority;
  /** Bounds on the submission time. */
  since?: Time;
  until?: Time;
  /** Keeps jobs whose args or error contain it, ignoring case. */
  text?: string;
  /** Page size (default 100, at most 1000). */
  limit?: number;
  /** The `nextCursor` of the page before. */
  cursor?: string;
  /** With `args` and `result`. */
  full?: boolean;
}

/** An executor as the coordinators know it. */
export interface ExecutorInfo {
  app_id: string;
  instance: string;
  host?: string;
  slots: number;
  running?: number;
  tasks: string[];
  started?: string;
  last_heartbeat?: string;
  state?: string;
  left?: string;
}

/** A Reply of the request/reply API (schemas/api-reply.json). */
export interface Reply {
  error?: import("./errors.js").WireError;
  id?: string;
  job?: Job;
  jobs?: Job[];
  logs?: LogLine[];
  executors?: ExecutorInfo[];
  warning?: string;
  next_cursor?: string;
  truncated?: string[];
  refs?: Record<string, string>;
  [k: string]: unknown;
}
