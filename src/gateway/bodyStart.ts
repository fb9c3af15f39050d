/**
 * The steps a GET body served around node:http's own writer shares, whether its bytes come
 * from local blocks (localBody.ts) or are relayed from the workers (remoteBody.ts): the head
 * written only while the response is still wanted, the head's bytes taken over to go out with
 * the first body bytes, the rest read through the route when the fast path runs out, and a
 * short body (never wrong bytes) when the promised bytes cannot come.
 */
import type { ObjectStat } from "../backend/BackendStore.js"
import type { ObjectId } from "../core/ids.js"
import { type GwCtx, writePayload } from "./context.js"

/** What node:http keeps of a response before it writes it (Node 20's ServerResponse). */
interface Outgoing {
  _header?: string | null
  _headerSent?: boolean
}

/**
 * The head `writeHead` rendered, taken over to go out with the first body bytes (one send, the
 * head in the body's first segments, where node would write it on its own first). Node then
 * treats it as sent. Undefined when this node renders or sends heads some other way: the caller
 * flushes it through node instead.
 */
export const takeHead = (res: GwCtx["res"]): Uint8Array | undefined => {
  const out = res as unknown as Outgoing
  if (typeof out._header !== "string" || out._headerSent !== false || res.writableLength > 0) return undefined
  const bytes = Buffer.from(out._header, "latin1")
  out._headerSent = true
  return bytes
}

/** The GET body to serve: `[start, start+length)` of `stat`'s version under `head`. */
export interface BodyAsk {
  readonly status: number
  readonly head: Record<string, string | number>
  readonly object: ObjectId
  readonly stat: ObjectStat
  readonly start: number
  readonly length: number
  readonly cacheable: boolean
}

/** A head written for a body the caller sends itself: `rendered` is to go out with its first bytes (undefined: node flushed it). */
export interface StartedBody {
  readonly rendered: Uint8Array | undefined
}

/**
 * Writes the head, unless the response was answered, closed or passed its deadline while the
 * first piece was prepared (undefined: nothing was written, the caller's path answers or drops it).
 */
export const startBody = (ctx: GwCtx, ask: BodyAsk): StartedBody | undefined => {
  const { res } = ctx
  if (res.headersSent || res.destroyed || ctx.aborts.aborted) return undefined
  res.writeHead(ask.status, ask.head)
  const rendered = takeHead(res)
  if (rendered === undefined) res.flushHeaders()
  return { rendered }
}

/** The head promised bytes that cannot come: a short body tells the client, never wrong bytes. */
export const cutBody = (ctx: GwCtx): void => {
  ctx.g.counters.aborted++
  ctx.res.destroy()
}

/** The rest of a body the fast path no longer holds, through the route (head already sent). */
export const streamRest = async (ctx: GwCtx, object: ObjectId, stat: ObjectStat, offset: number, length: number, cacheable: boolean): Promise<void> => {
  const { res, g } = ctx
  const reader = g.route.open({ object, stat, offset, length, cacheable })
  try {
    for (let bytes = await reader.next(); bytes !== undefined; bytes = await reader.next()) {
      g.counters.bytesOut += bytes.length
      const taken = writePayload(res, bytes)
      if (taken !== true && !(await taken)) return
    }
    res.end()
  } catch {
    cutBody(ctx)
  } finally {
    reader.close()
  }
}
