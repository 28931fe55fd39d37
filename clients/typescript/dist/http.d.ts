/** An answer: status, headers (lower-case names, repeated ones joined with ", ") and body text. */
export interface HttpAnswer {
    status: number;
    headers: Record<string, string>;
    text: string;
}
export interface HttpPoolOptions {
    host: string;
    port: number;
    tls: boolean;
    /** PEM CA certificates to trust (TLS), besides the system's. */
    ca?: string;
    /** Most connections at once [256]; more requests wait for one. */
    maxSockets?: number;
}
/** Connections to one server, kept alive and reused by node:http(s)'s `Agent`. */
export declare class HttpPool {
    private readonly o;
    private readonly agent;
    private readonly send;
    /** The last `head` seen and its parsed headers: callers pass the same string most times. */
    private lastHead;
    private lastHeaders;
    constructor(o: HttpPoolOptions);
    private headersOf;
    /**
     * One request: `head` holds the request's header lines after the request line, each ending
     * in CRLF (content-length is added). Rejects on no answer within `timeoutMs`, on `signal`,
     * and when the connection fails.
     */
    request(method: string, path: string, head: string, body: string | undefined, timeoutMs: number, signal?: AbortSignal): Promise<HttpAnswer>;
    /** Closes every idle connection (those in use are kept, and reused until closed again). */
    close(): void;
}
