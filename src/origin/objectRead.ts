/** GET/HEAD of one object, with conditions and a single range, streamed with backpressure. */
import type { ServerResponse } from "node:http"
import { sendEmpty } from "../http/context.js"
import { decideRead, type ReadFailure } from "../http/readDecision.js"
import type { Ctx } from "./context.js"
import type { OpenObject } from "./store.js"

export interface ReadDialect {
  /** Provider-specific headers on every successful read (blob type, storage class, …). */
  readonly objectHeaders: (obj: OpenObject) => Record<string, string>
  readonly fail: (ctx: Ctx, failure: ReadFailure, obj: OpenObject, range: string | undefined) => void
}

const READ_CHUNK = 256 * 1024

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
