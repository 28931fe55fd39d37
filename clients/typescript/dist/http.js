/**
 * The client's requests on Node's `node:http` / `node:https`, through one kept-alive `Agent`
 * (connections reused, the most recently used first, at most `maxSockets` at once). The event
 * stream, which streams, goes through `fetch`.
 */
import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { isIP } from "node:net";
/** Connections at once when the caller names no bound. */
const DEFAULT_MAX_SOCKETS = 256;
/** The header lines of `head` ("name: value\r\n" each) as node:http's headers. */
function parseHead(head) {
    const h = {};
    for (const line of head.split("\r\n")) {
        const colon = line.indexOf(":");
        if (colon <= 0)
            continue;
        h[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    return h;
}
/** node:http's answer headers as one string per name (repeated ones joined with ", "). */
function flatHeaders(h) {
    const out = {};
    for (const k in h) {
        const v = h[k];
        if (v !== undefined)
            out[k] = Array.isArray(v) ? v.join(", ") : v;
    }
    return out;
}
/** Connections to one server, kept alive and reused by node:http(s)'s `Agent`. */
export class HttpPool {
    o;
    agent;
    send;
    /** The last `head` seen and its parsed headers: callers pass the same string most times. */
    lastHead = "";
    lastHeaders = {};
    constructor(o) {
        this.o = o;
        const agentOpts = { keepAlive: true, scheduling: "lifo", maxSockets: o.maxSockets ?? DEFAULT_MAX_SOCKETS };
        this.agent = o.tls
            ? new HttpsAgent({ ...agentOpts, ...(o.ca ? { ca: o.ca } : {}), servername: isIP(o.host) ? "" : o.host })
            : new HttpAgent(agentOpts);
        this.send = o.tls ? httpsRequest : httpRequest;
    }
    headersOf(head) {
        if (head !== this.lastHead) {
            this.lastHeaders = parseHead(head);
            this.lastHead = head;
        }
        return this.lastHeaders;
    }
    /**
     * One request: `head` holds the request's header lines after the request line, each ending
     * in CRLF (content-length is added). Rejects on no answer within `timeoutMs`, on `signal`,
     * and when the connection fails.
     */
    request(method, path, head, body, timeoutMs, signal) {
        return new Promise((resolve, reject) => {
            if (signal?.aborted) {
                reject(signal.reason ?? new Error("aborted"));
                return;
            }
            const headers = { ...this.headersOf(head), "content-length": body === undefined ? 0 : Buffer.byteLength(body) };
            const req = this.send({ host: this.o.host, port: this.o.port, path, method, headers, agent: this.agent, setHost: false });
            let settled = false;
            const finish = (e, a) => {
                if (settled)
                    return;
                settled = true;
                clearTimeout(timer);
                signal?.removeEventListener("abort", onAbort);
                if (a)
                    resolve(a);
                else {
                    req.destroy();
                    reject(e);
                }
            };
            const onAbort = () => finish(signal.reason ?? new Error("aborted"), undefined);
            const timer = setTimeout(() => finish(new Error(`docket request ${method} ${path.split("?")[0]}: no answer within ${timeoutMs} ms`), undefined), timeoutMs);
            signal?.addEventListener("abort", onAbort, { once: true });
            req.on("error", (e) => finish(e, undefined));
            req.on("response", (res) => {
                const parts = [];
                res.on("data", (d) => { parts.push(d); });
                res.on("error", (e) => finish(e, undefined));
                res.on("aborted", () => finish(new Error("docket closed the connection before answering"), undefined));
                res.on("end", () => {
                    if (!res.complete) {
                        finish(new Error("docket closed the connection before answering"), undefined);
                        return;
                    }
                    finish(undefined, { status: res.statusCode ?? 0, headers: flatHeaders(res.headers), text: Buffer.concat(parts).toString("utf8") });
                });
            });
            req.end(body);
        });
    }
    /** Closes every idle connection (those in use are kept, and reused until closed again). */
    close() {
        for (const socks of Object.values(this.agent.freeSockets))
            for (const s of socks ?? [])
                s.destroy();
    }
}
