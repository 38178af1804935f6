/**
 * Prefetch sizing, as the Go executor's (executor/prefetch.go): how many
 * jobs to hold beyond the slots so that a slot freed by a short job starts
 * the next one at once.
 *
 * @module
 */

/** The weight of a new sample in the running averages. */
export const EWMA_WEIGHT = 0.2;

/** An exponentially weighted moving average; the first sample is taken as is. */
export function ewma(avg: number, sample: number): number {
  return avg === 0 ? sample : avg + EWMA_WEIGHT * (sample - avg);
}

/** What {@link prefetchTarget} needs to know. */
export interface PrefetchInput {
  /** Jobs that may be held beyond the slots, at most (the worker's `prefetch`). */
  prefetchMax: number;
  /** Average run of a handler, ms (0: not measured yet). */
  avgRunMs: number;
  /** Average dispatch round trip, ms (0: not measured yet). */
  avgRttMs: number;
  /** The worker's slots. */
  slots: number;
  /** Jobs holding a slot now. */
  running: number;
  /** For each job holding a slot: when its handler started (ms epoch), or undefined when it has not yet. */
  slotStarts: Array<number | undefined>;
  /** Now, ms epoch. */
  now: number;
}

/**
 * How many jobs to hold beyond the slots now, and how long a request for
 * them may wait (ms) at the leader: enough to keep every slot busy during
 * two dispatch round trips, counted from the measured run time and round
 * trip, at most `prefetchMax`. Long jobs (or no measurement yet) get none;
 * a slot whose job has run more than twice the average counts as one that
 * will not free soon.
 */
export function prefetchTarget(p: PrefetchInput): { target: number; waitMs: number } {
  if (p.prefetchMax <= 0 || p.avgRunMs <= 0 || p.avgRttMs <= 0) return { target: 0, waitMs: 0 };
  let soon = Math.max(p.slots - p.running, 0);
  const long = 2 * p.avgRunMs;
  let until = 0;
  for (const started of p.slotStarts) {
    const left = started === undefined ? long : long - (p.now - started);
    if (left >= 0) soon++;
    until = Math.max(until, left);
  }
  const want = (2 * Math.min(soon, p.slots) * p.avgRttMs) / p.avgRunMs;
  if (want < 0.5) return { target: 0, waitMs: 0 };
  return { target: Math.min(Math.ceil(want), p.prefetchMax), waitMs: Math.max(0, Math.round(until)) };
}

/**
 * How long a job held beyond the slots waits for one before it is handed
 * back for another executor: four average runs, two round trips, 1 s at
 * least.
 */
export function heldWaitMs(avgRunMs: number, avgRttMs: number): number {
  return Math.max(4 * avgRunMs, 2 * avgRttMs, 1000);
}
