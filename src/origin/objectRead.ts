/** GET/HEAD of one object, with conditions and a single range, streamed with backpressure. */
import type { ServerResponse } from "node:http"
import { conditionHeaders, evaluateConditions, ifRangeHolds } from "./conditions.js"
import { header, sendEmpty, type Ctx, type HttpCtx } from "./context.js"
import { contentRange, parseRange } from "./ranges.js"
import type { OpenObject } from "./store.js"

export type ReadFailure = "precondition-failed" | "unsatisfiable" | "multiple-ranges"

export interface ReadDialect {
  /** Provider-specific headers on every successful read (blob type, storage class, …). */
  readonly objectHeaders: (obj: OpenObject) => Record<string, string>
  readonly fail: (ctx: Ctx, failure: ReadFailure, obj: OpenObject, range: string | undefined) => void
}

const READ_CHUNK = 256 * 1024

/** What a read is judged by: the object's validators and size. */
export interface ReadValidators {
  readonly etag: string
  readonly lastModified: Date
  /** `lastModified` as an HTTP date, when the caller has it already. */
  readonly lastModifiedHttp?: string | undefined
  readonly size: number
}

/**
 * The outcome of conditions and the Range header against an object, before any byte is
 * read. Shared with the gateway, which answers from a cached stat instead of a file.
 */
export type ReadDecision =
  | { readonly _tag: "NotModified"; readonly headers: Record<string, string | number> }
  | { readonly _tag: "Fail"; readonly failure: ReadFailure }
  | {
      readonly _tag: "Serve"
      readonly partial: boolean
      /** Inclusive byte bounds; `end` is `start - 1` for an empty object. */
      readonly start: number
      readonly end: number
      readonly length: number
      /** Validators, Accept-Ranges, Content-Type, Content-Length and (partial) Content-Range. */
      readonly headers: Record<string, string | number>
    }

export const decideRead = (ctx: HttpCtx, obj: ReadValidators, rangeHeader: string | undefined): ReadDecision => {
  const lastModified = obj.lastModified.getTime()
  const validators = { ETag: obj.etag, "Last-Modified": obj.lastModifiedHttp ?? obj.lastModified.toUTCString() }
  const outcome = evaluateConditions(
    conditionHeaders((name) => header(ctx, name)),
    obj.etag,
    lastModified,
    true
  )
  if (outcome === "not-modified") return { _tag: "NotModified", headers: validators }
  if (outcome === "precondition-failed") return { _tag: "Fail", failure: "precondition-failed" }

  let range = parseRange(rangeHeader, obj.size)
  if (range._tag !== "Full" && !ifRangeHolds(header(ctx, "if-range"), obj.etag, lastModified)) range = { _tag: "Full" }
  if (range._tag === "Multiple") return { _tag: "Fail", failure: "multiple-ranges" }
  if (range._tag === "Unsatisfiable") return { _tag: "Fail", failure: "unsatisfiable" }

  const start = range._tag === "Partial" ? range.start : 0
  const end = range._tag === "Partial" ? range.end : obj.size - 1
  const length = end - start + 1
  const headers: Record<string, string | number> = {
    ...validators,
    "Accept-Ranges": "bytes",
    "Content-Type": "application/octet-stream",
    "Content-Length": length
  }
  if (range._tag === "Partial") headers["Content-Range"] = contentRange(start, end, obj.size)
  return { _tag: "Serve", partial: range._tag === "Partial", start, end, length, headers }
}

export const serveObject = async (
  ctx: Ctx,
  obj: OpenObject,
  rangeHeader: string | undefined,
  dialect: ReadDialect
): Promise<void> => {
  const close = () => obj.handle.close().catch(() => undefined)
  const decision = decideRead(ctx, obj, rangeHeader)
  if (decision._tag === "NotModified") {
    await close()
    sendEmpty(ctx, 304, { ...decision.headers, ...dialect.objectHeaders(obj) })
    return
  }
  if (decision._tag === "Fail") {
    await close()
    dialect.fail(ctx, decision.failure, obj, rangeHeader)
    return
  }
  const { start, end, length } = decision
  // The object's own headers (a stored Content-Type) win over the defaults; they never carry lengths or ranges.
  ctx.res.writeHead(decision.partial ? 206 : 200, { ...decision.headers, ...dialect.objectHeaders(obj) })

  if (ctx.method === "HEAD" || length === 0) {
    await close()
    ctx.res.end()
    return
  }
  const stats = ctx.state.stats
  const rate = ctx.state.faults.applies(ctx.kind) ? ctx.state.faults.faults.bandwidthBytesPerSec : 0
  // Injected fault: promise the whole length, deliver part of it, then reset.
  const stopAt = ctx.truncateBody === undefined ? end : start + Math.floor(length * ctx.truncateBody) - 1
  streamRange(obj, start, stopAt, ctx.res, rate, (n) => {
    stats.bytesServed += n
  }, stopAt < end).finally(close)
}

/**
 * Copies `[start, end]` of the file to the response through two reusable buffers: a
 * buffer is refilled only after the socket has taken its previous contents (the write
 * callback), so a slow reader holds at most two chunks in this process, and a fast one
 * produces no garbage. With `bytesPerSec > 0` each chunk is released on a schedule.
 */
const streamRange = async (
  obj: OpenObject,
  start: number,
  end: number,
  res: ServerResponse,
  bytesPerSec: number,
  onBytes: (n: number) => void,
  cutShort: boolean
): Promise<void> => {
  const chunk = bytesPerSec > 0 ? Math.max(1024, Math.min(READ_CHUNK, Math.floor(bytesPerSec / 16))) : READ_CHUNK
  const buffers = [Buffer.allocUnsafe(chunk), Buffer.allocUnsafe(chunk)]
  const inFlight: Array<Promise<boolean> | undefined> = [undefined, undefined]
  let closed = false
  const onClose = new Promise<boolean>((resolve) => res.once("close", () => resolve(false)))
  res.once("close", () => {
    closed = true
  })
  const began = performance.now()
  let sent = 0
  try {
    for (let pos = start, i = 0; pos <= end && !closed; i ^= 1) {
      const pending = inFlight[i]
      if (pending !== undefined && !(await Promise.race([pending, onClose]))) return
      const want = Math.min(chunk, end - pos + 1)
      const { bytesRead } = await obj.handle.read(buffers[i]!, 0, want, pos)
      if (bytesRead === 0) {
        // The file shrank under us (an in-place edit); the promised length cannot be met.
        res.destroy()
        return
      }
      if (bytesPerSec > 0) {
        const wait = began + ((sent + bytesRead) / bytesPerSec) * 1000 - performance.now()
        if (wait > 1) await new Promise((r) => setTimeout(r, wait))
        if (closed) return
      }
      const n = bytesRead
      inFlight[i] = new Promise<boolean>((resolve) =>
        res.write(buffers[i]!.subarray(0, n), (err) => {
          if (!err) onBytes(n)
          resolve(!err)
        })
      )
      pos += n
      sent += n
    }
    if (!closed) {
      await Promise.race([Promise.all(inFlight), onClose])
      if (cutShort) res.socket?.resetAndDestroy()
      else res.end()
    }
  } catch {
    res.destroy()
  }
}
