/**
 * A GET's body from the co-located worker's resident blocks: the head written by node:http,
 * then each block's piece sent by sendfile from the cache file to the client's socket. The
 * first piece is pinned before anything is written, so a range not resident here costs one
 * lookup and goes to the route untouched; a later piece that is not resident (evicted since)
 * is read through the route from there. Every piece is of the version the head's ETag names
 * (blocks are keyed by version), so an overwrite at the origin never mixes bytes.
 */
import type { ObjectStat } from "../backend/BackendStore.js"
import type { ObjectId } from "../core/ids.js"
import { type GwCtx, writePayload } from "./context.js"
import type { LocalBlocksShape, LocalPiece } from "./localBlocks.js"

const pieceAt = (local: LocalBlocksShape, object: ObjectId, version: string, pos: number, end: number) => {
  const bs = local.blockSize
  const to = Math.min(end, (Math.floor(pos / bs) + 1) * bs)
  return local.resident(object, version, pos, to - pos)
}

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

/**
 * Serves `[start, start+length)` of `stat`'s version from local blocks. False when the first
 * block's piece is not resident here (nothing was written: the caller serves the read).
 */
export const serveLocal = async (
  ctx: GwCtx,
  local: LocalBlocksShape,
  status: number,
  head: Record<string, string | number>,
  object: ObjectId,
  stat: ObjectStat,
  start: number,
  length: number,
  cacheable: boolean
): Promise<boolean> => {
  const { res, g } = ctx
  const socket = res.socket
  if (socket === null || local.fdOf(socket) < 0) return false
  const end = start + length
  const first = pieceAt(local, object, stat.version, start, end)
  let piece: LocalPiece | undefined = first instanceof Promise ? await first : first
  if (piece === undefined) return false
  try {
    // Past the deadline or gone while the blocks were opened: the caller's path answers (or drops) it.
    if (res.headersSent || res.destroyed || ctx.aborts.aborted) return false
    res.writeHead(status, head)
    let rendered = takeHead(res)
    if (rendered === undefined) res.flushHeaders()
    g.counters.localBodies++
    let pos = start
    for (;;) {
      let bytes = 0
      for (const s of piece.segments) bytes += s.length
      const fd = local.fdOf(socket)
      const sent = fd < 0 ? false : local.send(socket, fd, piece.segments, rendered)
      rendered = undefined
      const ok = sent === true || (sent !== false && (await sent))
      piece.release()
      piece = undefined
      if (!ok) {
        g.counters.aborted++
        res.destroy()
        return true
      }
      g.counters.bytesOut += bytes
      g.counters.localBytes += bytes
      pos += bytes
      if (pos >= end) break
      const next = pieceAt(local, object, stat.version, pos, end)
      piece = next instanceof Promise ? await next : next
      if (piece === undefined) {
        await streamRest(ctx, object, stat, pos, end - pos, cacheable)
        return true
      }
    }
    res.end()
    return true
  } finally {
    piece?.release()
  }
}

/** The rest of a body the local blocks no longer hold, through the route (head already sent). */
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
    // The head promised bytes that cannot come: a short body tells the client, never wrong bytes.
    g.counters.aborted++
    res.destroy()
  } finally {
    reader.close()
  }
}
