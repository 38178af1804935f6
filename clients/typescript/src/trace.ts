/**
 * W3C trace context: taken from the active OpenTelemetry context when
 * `@opentelemetry/api` is installed (an optional peer dependency).
 *
 * @module
 */

type OtelApi = {
  trace: { getSpanContext(ctx: unknown): { traceId: string; spanId: string; traceFlags: number; traceState?: { serialize(): string } } | undefined };
  context: { active(): unknown };
  isSpanContextValid(sc: unknown): boolean;
};

let otel: OtelApi | null | undefined;

/** Loads @opentelemetry/api once, if it is installed. */
export async function loadOtel(): Promise<void> {
  if (otel !== undefined) return;
  try {
    const name = "@opentelemetry/api";
    otel = (await import(name)) as OtelApi;
  } catch {
    otel = null;
  }
}

/** The traceparent of the active span, when @opentelemetry/api is present and a span is active. */
export function activeTraceparent(): { traceparent: string; tracestate?: string } | undefined {
  if (!otel) return undefined;
  try {
    const sc = otel.trace.getSpanContext(otel.context.active());
    if (!sc || !otel.isSpanContextValid(sc)) return undefined;
    const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, "0");
    const out: { traceparent: string; tracestate?: string } = { traceparent: `00-${sc.traceId}-${sc.spanId}-${flags}` };
    const ts = sc.traceState?.serialize();
    if (ts) out.tracestate = ts;
    return out;
  } catch {
    return undefined;
  }
}

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** Whether s is a W3C traceparent. */
export function isTraceparent(s: string): boolean {
  return TRACEPARENT.test(s) && !/^[0-9a-f]{2}-0{32}-/.test(s) && !/-0{16}-[0-9a-f]{2}$/.test(s);
}

/** The trace id of a traceparent ("" when it is none). */
export function traceId(traceparent: string | undefined): string {
  return traceparent && isTraceparent(traceparent) ? traceparent.split("-")[1]! : "";
}
