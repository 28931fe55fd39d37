/** docket's durations are humantime strings (`"250ms"`, `"30s"`, `"1h 5m"`). */
export type Duration = string | number;
/** Milliseconds in a humantime string (`"1m 30s"` → 90000). Throws on anything else. */
export declare function parseDuration(text: string): number;
/** A duration for docket: strings pass as they are, numbers are milliseconds. */
export declare function formatDuration(d: Duration): string;
