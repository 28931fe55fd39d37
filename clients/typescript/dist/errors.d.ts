/**
 * Every non-2xx answer from docket becomes a {@link DocketError} carrying docket's stable error
 * `code` (docs/src/api/index.md has the table), the HTTP status and the message.
 */
export declare class DocketError extends Error {
    /** HTTP status (400…599). */
    readonly status: number;
    /** docket's stable code: `not_found`, `lease_lost`, `cancelled`, `rate_limited`, … */
    readonly code: string;
    /** `error.details` when docket gave any (e.g. `index` of a bad task in a batch). */
    readonly details: unknown;
    /** `Retry-After` in seconds on 429, else undefined. */
    readonly retryAfter?: number;
    constructor(status: number, code: string, message: string, details?: unknown, retryAfter?: number);
}
/** Builds the error for an answer's status and JSON body. */
export declare function errorFor(status: number, body: unknown, retryAfter?: number): DocketError;
