/**
 * Go durations (`time.ParseDuration`, `time.Duration.String`), as the
 * wire carries them: a job's `timeout`, a snooze's delay, `run_in`.
 *
 * @module
 */

const UNITS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  "\u00b5s": 1e-3, // µ (micro sign)
  "\u03bcs": 1e-3, // μ (Greek mu)
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * Parses a Go duration (`"1h30m"`, `"250ms"`, `"1.5s"`, `"-2m"`, `"0"`)
 * into milliseconds. Throws a RangeError for text Go would refuse.
 */
export function parseDuration(s: string): number {
  const orig = s;
  if (typeof s !== "string" || s === "") throw new RangeError(`invalid duration ${JSON.stringify(orig)}`);
  let sign = 1;
  if (s[0] === "-" || s[0] === "+") {
    if (s[0] === "-") sign = -1;
    s = s.slice(1);
  }
  if (s === "0") return 0;
  if (s === "") throw new RangeError(`invalid duration ${JSON.stringify(orig)}`);
  const re = /^(\d*\.?\d*)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)/;
  let total = 0;
  while (s.length > 0) {
    const m = re.exec(s);
    if (!m || m[1] === "" || m[1] === ".") {
      if (/^(\d*\.?\d*)$/.test(s)) throw new RangeError(`missing unit in duration ${JSON.stringify(orig)}`);
      throw new RangeError(`invalid duration ${JSON.stringify(orig)}`);
    }
    total += Number(m[1]) * UNITS[m[2]!]!;
    s = s.slice(m[0].length);
  }
  return sign * total;
}

/**
 * Formats milliseconds as Go's `time.Duration.String` does: `"1h0m0s"`,
 * `"1m30s"`, `"1.5s"`, `"250ms"`, `"0s"`. Sub-nanosecond parts are
 * rounded away.
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) throw new RangeError(`invalid duration ${ms}`);
  let ns = BigInt(Math.round(ms * 1e6));
  if (ns === 0n) return "0s";
  const neg = ns < 0n;
  if (neg) ns = -ns;
  let out: string;
  if (ns < 1_000_000_000n) {
    // Below a second: the largest unit that keeps an integer part.
    let unit: string;
    let div: bigint;
    if (ns < 1000n) {
      unit = "ns";
      div = 1n;
    } else if (ns < 1_000_000n) {
      unit = "\u00b5s";
      div = 1000n;
    } else {
      unit = "ms";
      div = 1_000_000n;
    }
    out = fraction(ns, div) + unit;
  } else {
    const h = ns / 3_600_000_000_000n;
    ns -= h * 3_600_000_000_000n;
    const m = ns / 60_000_000_000n;
    ns -= m * 60_000_000_000n;
    const s = fraction(ns, 1_000_000_000n) + "s";
    out = h > 0n ? `${h}h${m}m${s}` : m > 0n ? `${m}m${s}` : s;
  }
  return neg ? "-" + out : out;
}

/** n / div as a decimal without trailing zeros. */
function fraction(n: bigint, div: bigint): string {
  const int = n / div;
  let rest = n % div;
  if (rest === 0n) return int.toString();
  const digits = div.toString().length - 1;
  let frac = rest.toString().padStart(digits, "0").replace(/0+$/, "");
  return `${int}.${frac}`;
}
