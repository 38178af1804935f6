/**
 * Decoding event messages and dropping duplicate events.
 *
 * @module
 */

import type { FairwayEvent } from "./types.js";

/**
 * Decodes the body of a message of stream FAIRWAY_EVENTS: a JSON array of
 * events (the default) or one event object (`--event-per-message`).
 * Throws on anything else.
 */
export function decodeEvents(body: string): FairwayEvent[] {
  const v: unknown = JSON.parse(body);
  if (Array.isArray(v)) {
    for (const e of v) if (!isEvent(e)) throw new SyntaxError("an element of the event array is not an event object");
    return v as FairwayEvent[];
  }
  if (isEvent(v)) return [v];
  throw new SyntaxError("an event message is neither an array of events nor an event object");
}

function isEvent(v: unknown): v is FairwayEvent {
  return typeof v === "object" && v !== null && !Array.isArray(v) && typeof (v as { id?: unknown }).id === "string";
}

/**
 * Remembers the ids of the last `capacity` events seen, to drop the
 * duplicates at-least-once delivery brings (an event is redelivered close
 * to its first delivery, so a bounded window suffices).
 */
export class EventDeduper {
  readonly #seen = new Set<string>();
  readonly #capacity: number;
  constructor(capacity = 100_000) {
    this.#capacity = Math.max(1, capacity);
  }
  /** True the first time an id is offered, false for a duplicate. */
  first(id: string): boolean {
    if (this.#seen.has(id)) return false;
    this.#seen.add(id);
    if (this.#seen.size > this.#capacity) {
      // A Set iterates in insertion order: the oldest goes.
      const oldest = this.#seen.values().next().value as string;
      this.#seen.delete(oldest);
    }
    return true;
  }
  get size(): number {
    return this.#seen.size;
  }
}
