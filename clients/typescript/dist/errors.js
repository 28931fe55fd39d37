/**
 * Every non-2xx answer from docket becomes a {@link DocketError} carrying docket's stable error
 * `code` (docs/src/api/index.md has the table), the HTTP status and the message.
 */
export class DocketError extends Error {
    /** HTTP status (400…599). */
    status;
    /** docket's stable code: `not_found`, `lease_lost`, `cancelled`, `rate_limited`, … */
    code;
    /** `error.details` when docket gave any (e.g. `index` of a bad task in a batch). */
    details;
    /** `Retry-After` in seconds on 429, else undefined. */
    retryAfter;
    constructor(status, code, message, details, retryAfter) {
        super(`${code}: ${message} (HTTP ${status})`);
        this.name = "DocketError";
        this.status = status;
        this.code = code;
        this.details = details;
        this.retryAfter = retryAfter;
    }
}
/** Builds the error for an answer's status and JSON body. */
export function errorFor(status, body, retryAfter) {
    const err = body?.error;
    if (err && typeof err === "object") {
        return new DocketError(status, String(err.code ?? "unknown"), String(err.message ?? ""), err.details, retryAfter);
    }
    return new DocketError(status, "unknown", String(body).slice(0, 500), undefined, retryAfter);
}
