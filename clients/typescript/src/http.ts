/**
 * A small HTTP/1.1 client on kept-alive connections, for the client's requests: one request at
 * a time per connection, each written in one piece, answers read by their `content-length` (or
 * chunked, or to the connection's end). On Node 20 it spends a quarter of node:http's CPU per
 * request and a twentieth of `fetch`'s — a worker's cost is its round trips (a workflow run of
 * three steps makes three). The event stream, which streams, goes through `fetch`.
 */
import { connect as netConnect, isIP, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";

/** An answer: status, headers (lower-case names, repeated ones joined with ", ") and body text. */
export interface HttpAnswer { status: number; headers: Record<string, string>; text: string }

export interface HttpPoolOptions {
  host: string;
  port: number;
  tls: boolean;
  /** PEM CA certificates to trust (TLS), besides the system's. */
  ca?: string;
  /** Most connections at once [unbounded]; more requests wait for one. */
  maxSockets?: number;
}

const CRLF = Buffer.from("\r\n");
const HEAD_END = Buffer.from("\r\n\r\n");
const MAX_HEAD = 64 * 1024;

const enum Phase { Head, Length, ChunkSize, ChunkData, Trailer, ToEnd }

interface Pending {
  resolve: (a: HttpAnswer) => void;
  reject: (e: unknown) => void;
  method: string;
  timer?: NodeJS.Timeout;
  signal?: AbortSignal;
  onAbort?: () => void;
  settled?: boolean;
}

class Conn {
  readonly sock: Socket;
  private chunks: Buffer[] = [];
  private have = 0;
  private phase = Phase.Head;
  private need = 0;
  private status = 0;
  private headers: Record<string, string> = {};
  private parts: Buffer[] = [];
  private keepAlive = true;
  cur?: Pending;
  dead = false;

  constructor(private readonly pool: HttpPool, o: HttpPoolOptions) {
    if (o.tls) {
      this.sock = tlsConnect({ host: o.host, port: o.port, servername: isIP(o.host) ? undefined : o.host, ...(o.ca ? { ca: o.ca } : {}) });
    } else {
      this.sock = netConnect({ host: o.host, port: o.port });
    }
    this.sock.setNoDelay(true);
    this.sock.on("data", (d: Buffer) => this.onData(d));
    this.sock.on("error", (e) => this.die(e));
    this.sock.on("close", () => this.die(new Error("docket closed the connection before answering")));
    this.sock.on("end", () => {
      // docket closed its side: an answer read to the end is complete; an idle connection is
      // forgotten at once (not taken for the next request before its "close"); a request under
      // way fails.
      if (this.cur && this.phase === Phase.ToEnd) this.done(Buffer.concat(this.chunks));
      this.die(new Error("docket closed the connection before answering"));
    });
  }

  send(p: Pending, wire: string): void {
    this.cur = p;
    this.phase = Phase.Head;
    this.sock.ref();
    this.sock.write(wire);
  }

  /** The connection is over: what is under way fails, the pool forgets it. */
  die(e: unknown): void {
    if (this.dead) return;
    this.dead = true;
    this.sock.destroy();
    const p = this.cur;
    this.cur = undefined;
    this.pool.forget(this);
    if (p) this.pool.settle(p, e, undefined);
  }

  private flat(): Buffer {
    if (this.chunks.length === 1) return this.chunks[0];
    const b = Buffer.concat(this.chunks, this.have);
    this.chunks = [b];
    return b;
  }

  private rest(buf: Buffer, from: number): void {
    const r = buf.subarray(from);
    this.chunks = r.length ? [r] : [];
    this.have = r.length;
  }

  private onData(d: Buffer): void {
    if (!this.cur) { this.die(new Error("docket sent data nobody asked for")); return; }
    this.chunks.push(d);
    this.have += d.length;
    try {
      this.advance();
    } catch (e) {
      this.die(e);
    }
  }

  private advance(): void {
    for (;;) {
      if (!this.cur) return;
      switch (this.phase) {
        case Phase.Head: {
          const buf = this.flat();
          const end = buf.indexOf(HEAD_END);
          if (end < 0) {
            if (buf.length > MAX_HEAD) throw new Error("docket's answer has a head over 64 KiB");
            return;
          }
          this.head(buf.toString("latin1", 0, end));
          this.rest(buf, end + 4);
          if (this.status < 200) continue; // 1xx: the real answer follows
          const te = this.headers["transfer-encoding"], cl = this.headers["content-length"];
          this.parts = [];
          if (this.cur.method === "HEAD" || this.status === 204 || this.status === 304) { this.done(Buffer.alloc(0)); continue; }
          if (te && /chunked/i.test(te)) { this.phase = Phase.ChunkSize; continue; }
          if (cl !== undefined) {
            this.need = Number(cl);
            if (!Number.isSafeInteger(this.need) || this.need < 0) throw new Error(`docket's answer has a bad content-length ${cl}`);
            this.phase = Phase.Length;
            continue;
          }
          this.keepAlive = false;
          this.phase = Phase.ToEnd;
          return;
        }
        case Phase.Length: {
          if (this.have < this.need) return;
          const buf = this.flat();
          const body = buf.subarray(0, this.need);
          this.rest(buf, this.need);
          this.done(body);
          continue;
        }
        case Phase.ChunkSize: {
          const buf = this.flat();
          const eol = buf.indexOf(CRLF);
          if (eol < 0) return;
          const size = parseInt(buf.toString("latin1", 0, eol).split(";")[0].trim(), 16);
          if (!Number.isSafeInteger(size) || size < 0) throw new Error("docket's answer has a bad chunk size");
          this.rest(buf, eol + 2);
          if (size === 0) { this.phase = Phase.Trailer; continue; }
          this.need = size;
          this.phase = Phase.ChunkData;
          continue;
        }
        case Phase.ChunkData: {
          if (this.have < this.need + 2) return;
          const buf = this.flat();
          this.parts.push(buf.subarray(0, this.need));
          this.rest(buf, this.need + 2);
          this.phase = Phase.ChunkSize;
          continue;
        }
        case Phase.Trailer: {
          const buf = this.flat();
          if (buf.length >= 2 && buf[0] === 13 && buf[1] === 10) {
            this.rest(buf, 2);
          } else {
            const end = buf.indexOf(HEAD_END);
            if (end < 0) return;
            this.rest(buf, end + 4);
          }
          this.done(Buffer.concat(this.parts));
          continue;
        }
        case Phase.ToEnd:
          return;
      }
    }
  }

  private head(text: string): void {
    // "HTTP/1.1 200 OK": the version's minor digit at 7, the status at 9..12.
    if (!text.startsWith("HTTP/1.")) throw new Error(`docket's answer is not HTTP/1.x: ${text.slice(0, 100)}`);
    this.status = Number(text.slice(9, 12));
    if (!(this.status >= 100 && this.status <= 999)) throw new Error(`docket's answer has no status: ${text.slice(0, 100)}`);
    const h: Record<string, string> = {};
    let at = text.indexOf("\r\n");
    while (at >= 0) {
      const from = at + 2;
      at = text.indexOf("\r\n", from);
      const line = at < 0 ? text.slice(from) : text.slice(from, at);
      const colon = line.indexOf(":");
      if (colon <= 0) continue;
      const k = line.slice(0, colon).toLowerCase(), v = line.slice(colon + 1).trim();
      const had = h[k];
      h[k] = had === undefined ? v : `${had}, ${v}`;
    }
    this.headers = h;
    const conn = h.connection;
    this.keepAlive = text.charCodeAt(7) === 49 /* 1.1 */ ? !(conn && /close/i.test(conn)) : !!(conn && /keep-alive/i.test(conn));
  }

  private done(body: Buffer): void {
    const p = this.cur;
    if (!p) return;
    this.cur = undefined;
    const answer = { status: this.status, headers: this.headers, text: body.toString("utf8") };
    if (this.keepAlive && this.have === 0 && this.phase !== Phase.ToEnd) {
      this.pool.release(this);
    } else {
      this.dead = true;
      this.pool.forget(this);
      this.sock.destroy();
    }
    this.pool.settle(p, undefined, answer);
  }
}

/** Connections to one server, kept alive and reused (the most recently used first). */
export class HttpPool {
  private idle: Conn[] = [];
  private open = 0;
  private queue: (() => void)[] = [];
  private readonly max: number;

  constructor(private readonly o: HttpPoolOptions) {
    this.max = o.maxSockets ?? Infinity;
  }

  /**
   * One request: `head` holds the request's header lines after the request line, each ending
   * in CRLF (content-length is added). Rejects on no answer within `timeoutMs`, on `signal`,
   * and when the connection fails.
   */
  request(method: string, path: string, head: string, body: string | undefined, timeoutMs: number, signal?: AbortSignal): Promise<HttpAnswer> {
    return new Promise<HttpAnswer>((resolve, reject) => {
      if (signal?.aborted) { reject(signal.reason ?? new Error("aborted")); return; }
      const wire = `${method} ${path} HTTP/1.1\r\n${head}content-length: ${body === undefined ? 0 : Buffer.byteLength(body)}\r\n\r\n${body ?? ""}`;
      const p: Pending = { resolve, reject, method, signal };
      let conn: Conn | undefined;
      const go = () => {
        if (p.settled) { this.next(); return; } // timed out or aborted while it waited for a connection
        conn = this.take();
        conn.send(p, wire);
      };
      p.timer = setTimeout(() => {
        const e = new Error(`docket request ${method} ${path.split("?")[0]}: no answer within ${timeoutMs} ms`);
        if (conn && conn.cur === p) conn.die(e); else this.settle(p, e, undefined);
      }, timeoutMs);
      if (signal) {
        p.onAbort = () => {
          const e = signal.reason ?? new Error("aborted");
          if (conn && conn.cur === p) conn.die(e); else this.settle(p, e, undefined);
        };
        signal.addEventListener("abort", p.onAbort, { once: true });
      }
      if (this.idle.length || this.open < this.max) go();
      else this.queue.push(go);
    });
  }

  private take(): Conn {
    for (;;) {
      const c = this.idle.pop();
      if (!c) break;
      if (!c.dead && !c.sock.destroyed) return c;
    }
    this.open++;
    return new Conn(this, this.o);
  }

  /** @internal A connection that answered and may take the next request. */
  release(c: Conn): void {
    const go = this.queue.shift();
    if (go) {
      this.idle.push(c);
      go();
      return;
    }
    c.sock.unref(); // an idle connection does not keep the process alive
    this.idle.push(c);
  }

  /** @internal A connection that is gone. */
  forget(c: Conn): void {
    const i = this.idle.indexOf(c);
    if (i >= 0) this.idle.splice(i, 1);
    this.open--;
    this.next();
  }

  private next(): void {
    while (this.queue.length && (this.idle.length || this.open < this.max)) this.queue.shift()!();
  }

  /** @internal Ends a request once: its answer or its error. */
  settle(p: Pending, e: unknown, a: HttpAnswer | undefined): void {
    if (p.settled) return;
    p.settled = true;
    clearTimeout(p.timer);
    if (p.onAbort) p.signal?.removeEventListener("abort", p.onAbort);
    if (a) p.resolve(a); else p.reject(e);
  }

  /** Closes every idle connection. */
  close(): void {
    for (const c of this.idle.splice(0)) { c.dead = true; c.sock.destroy(); this.open--; }
  }
}
