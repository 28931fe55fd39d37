/** docket's durations are humantime strings (`"250ms"`, `"30s"`, `"1h 5m"`). */
export type Duration = string | number;

const UNITS: Record<string, number> = {
  ns: 1e-6, nsec: 1e-6, us: 1e-3, usec: 1e-3, ms: 1, msec: 1,
  s: 1e3, sec: 1e3, secs: 1e3, second: 1e3, seconds: 1e3,
  m: 6e4, min: 6e4, mins: 6e4, minute: 6e4, minutes: 6e4,
  h: 36e5, hr: 36e5, hrs: 36e5, hour: 36e5, hours: 36e5,
  d: 864e5, day: 864e5, days: 864e5, w: 6048e5, week: 6048e5, weeks: 6048e5,
  M: 2630016e3, month: 2630016e3, months: 2630016e3, y: 31557600e3, year: 31557600e3, years: 31557600e3,
};

/** Milliseconds in a humantime string (`"1m 30s"` → 90000). Throws on anything else. */
export function parseDuration(text: string): number {
  const re = /\s*(\d+)\s*([a-zA-Zµ]+)/y;
  const s = text.trim();
  if (!s) throw new Error("empty duration");
  let total = 0;
  re.lastIndex = 0;
  while (re.lastIndex < s.length) {
    const m = re.exec(s);
    if (!m || !(m[2] in UNITS)) throw new Error(`invalid duration ${JSON.stringify(text)}`);
    total += Number(m[1]) * UNITS[m[2]];
  }
  return total;
}

/** A duration for docket: strings pass as they are, numbers are milliseconds. */
export function formatDuration(d: Duration): string {
  if (typeof d === "string") return d;
  if (!Number.isFinite(d) || d < 0) throw new Error(`invalid duration ${d}`);
  return `${Math.round(d)}ms`;
}
