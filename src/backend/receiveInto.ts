/**
 * Plain-HTTP GETs whose bodies are pushed into a sink straight from a socket's reused read
 * buffer: the fill path's origin client. node:http hands every socket read over in a fresh
 * ArrayBuffer; at fill rates that is thousands of off-heap buffers per block, and V8 answers
 * their external-memory pressure with full collections (docs/decisions/cold-path-cpu.md). Here
 * each keep-alive connection owns one buffer (net.Socket `onread`), the response head is parsed
 * by hand, and content-length, chunked and read-to-close bodies are framed in place. TLS stays
 * on node:http (http.ts): this client speaks only `http:`.
 *
 * A chunk passed to a sink is valid only during the call: the next read overwrites it.
 */
import type { OriginRequest } from "./http.js"
import { Connection, type ConnectionPool, Exchange } from "./receiveConnection.js"
import { type Exchanged, type OnHead, ReceiveError } from "./receiveTypes.js"

export { type BodySink, type DirectSink, type DirectTarget, type Exchanged, type OnHead, ReceiveError, STOP } from "./receiveTypes.js"

const IDLE_KEEP = 32
/** An idle keep-alive connection is closed after this, before an origin's own idle cut (S3: ~20 s). */
const IDLE_MS = 15_000

/**
 * Keep-alive connections per origin host and port, each with its read buffer. Concurrency is
 * its callers' to bound (the miss path's semaphores); only idle connections are capped.
 */
export class Receiver implements ConnectionPool {
  readonly #idle = new Map<string, Array<Connection>>()
  #closed = false

  constructor(readonly timeoutMs: number) {}

  /**
   * Sends a bodiless request and receives its response: the body into the sink `onHead`
   * returns, or buffered. Resolves when the message is complete or its sink stopped; rejects
   * with a ReceiveError, with what `onHead` or a sink threw, or with the signal's reason.
   */
  exchange(request: OriginRequest, onHead: OnHead, signal?: AbortSignal): Promise<Exchanged> {
    if (request.protocol !== "http:" || request.body !== undefined || request.stream !== undefined) {
      return Promise.reject(new ReceiveError("only bodiless plain-HTTP requests are received here", "EINVAL"))
    }
    return this.#attempt(request, onHead, signal).catch((error: unknown) =>
      // An idle connection the origin had closed: resend once on a new one, no retry spent.
      error instanceof ReceiveError && error.code === "ESTALE_KEEPALIVE" ? this.#attempt(request, onHead, signal, true) : Promise.reject(error)
    )
  }

  #attempt(request: OriginRequest, onHead: OnHead, signal: AbortSignal | undefined, fresh = false): Promise<Exchanged> {
    if (this.#closed) return Promise.reject(new ReceiveError("the origin client is closed", "ECONNABORTED"))
    if (signal?.aborted) return Promise.reject(signal.reason)
    const key = `${request.hostname}:${request.port}`
    const conn = (fresh ? undefined : this.#takeIdle(key)) ?? new Connection(this, key, request.hostname, request.port, this.timeoutMs)
    return new Promise<Exchanged>((resolve, reject) => {
      const abort = () => conn.fail(signal!.reason)
      signal?.addEventListener("abort", abort, { once: true })
      const x = new Exchange(
        onHead,
        (v) => {
          signal?.removeEventListener("abort", abort)
          resolve(v)
        },
        (e) => {
          signal?.removeEventListener("abort", abort)
          reject(e)
        }
      )
      try {
        conn.start(request, x)
      } catch (error) {
        conn.fail(error)
      }
    })
  }

  #takeIdle(key: string): Connection | undefined {
    const list = this.#idle.get(key)
    for (let conn = list?.pop(); conn !== undefined; conn = list?.pop()) {
      if (!conn.closed && !conn.socket.destroyed) {
        conn.reused = true
        return conn
      }
    }
    return undefined
  }

  /** @internal A connection whose last message ended cleanly. */
  release(conn: Connection) {
    if (this.#closed) return conn.socket.destroy()
    let list = this.#idle.get(conn.key)
    if (list === undefined) this.#idle.set(conn.key, (list = []))
    if (list.length >= IDLE_KEEP) return conn.socket.destroy()
    conn.socket.setTimeout(IDLE_MS)
    conn.socket.unref()
    list.push(conn)
  }

  /** @internal A connection that closed. */
  forget(conn: Connection) {
    const list = this.#idle.get(conn.key)
    const i = list?.indexOf(conn) ?? -1
    if (i >= 0) list!.splice(i, 1)
  }

  /** Closes every idle connection; exchanges in flight end with their sockets' close. */
  close() {
    this.#closed = true
    for (const list of this.#idle.values()) for (const conn of list.splice(0)) conn.socket.destroy()
  }
}
