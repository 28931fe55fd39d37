/**
 * A small HTTP/1.1 client on kept-alive connections, for the client's requests: one request at
 * a time per connection, each written in one piece, answers read by their `content-length` (or
 * chunked, or to the connection's end). On Node 20 it spends a quarter of node:http's CPU per
 * request and a twentieth of `fetch`'s — a worker's cost is its round trips (a workflow run of
 * three steps makes three). The event stream, which streams, goes through `fetch`.
 */
import { type Socket } from "node:net";
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
    /** Most connections at once [unbounded]; more requests wait for one. */
    maxSockets?: number;
}
interface Pending {
    resolve: (a: HttpAnswer) => void;
    reject: (e: unknown) => void;
    method: string;
    timer?: NodeJS.Timeout;
    signal?: AbortSignal;
    onAbort?: () => void;
    settled?: boolean;
}
declare class Conn {
    private readonly pool;
    readonly sock: Socket;
    private chunks;
    private have;
    private phase;
    private need;
    private status;
    private headers;
    private parts;
    private keepAlive;
    cur?: Pending;
    dead: boolean;
    constructor(pool: HttpPool, o: HttpPoolOptions);
    send(p: Pending, wire: string): void;
    /** The connection is over: what is under way fails, the pool forgets it. */
    die(e: unknown): void;
    private flat;
    private rest;
    private onData;
    private advance;
    private head;
    private done;
}
/** Connections to one server, kept alive and reused (the most recently used first). */
export declare class HttpPool {
    private readonly o;
    private idle;
    private open;
    private queue;
    private readonly max;
    constructor(o: HttpPoolOptions);
    /**
     * One request: `head` holds the request's header lines after the request line, each ending
     * in CRLF (content-length is added). Rejects on no answer within `timeoutMs`, on `signal`,
     * and when the connection fails.
     */
    request(method: string, path: string, head: string, body: string | undefined, timeoutMs: number, signal?: AbortSignal): Promise<HttpAnswer>;
    private take;
    /** @internal A connection that answered and may take the next request. */
    release(c: Conn): void;
    /** @internal A connection that is gone. */
    forget(c: Conn): void;
    private next;
    /** @internal Ends a request once: its answer or its error. */
    settle(p: Pending, e: unknown, a: HttpAnswer | undefined): void;
    /** Closes every idle connection. */
    close(): void;
}
export {};
