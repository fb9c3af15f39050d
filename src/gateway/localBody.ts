/**
 * A GET's body from the co-located worker's resident blocks: the head written by node:http,
 * then each block's piece sent by sendfile from the cache file to the client's socket. The
 * first piece is pinned before anything is written, so a range not resident here costs one
 * lookup and goes to the route untouched; a later piece that is not resident (evicted since)
 * is read through the route from there. Every piece is of the version the head's ETag names
 * (blocks are keyed by version), so an overwrite at the origin never mixes bytes.
 */
import type { ObjectId } from "../core/ids.js"
import { type BodyAsk, cutBody, startBody, streamRest } from "./bodyStart.js"
import type { GwCtx } from "./context.js"
import type { LocalBlocksShape, LocalPiece } from "./localBlocks.js"

const pieceAt = (local: LocalBlocksShape, object: ObjectId, version: string, pos: number, end: number) => {
  const bs = local.blockSize
  const to = Math.min(end, (Math.floor(pos / bs) + 1) * bs)
  return local.resident(object, version, pos, to - pos)
}

/**
 * Serves the asked body from local blocks. False when the first
 * block's piece is not resident here (nothing was written: the caller serves the read).
 */
export const serveLocal = async (
  ctx: GwCtx,
  local: LocalBlocksShape,
  ask: BodyAsk
): Promise<boolean> => {
  const { res, g } = ctx
  const { object, stat, start, length, cacheable } = ask
  const socket = res.socket
  if (socket === null || local.fdOf(socket) < 0) return false
  const end = start + length
  const first = pieceAt(local, object, stat.version, start, end)
  let piece: LocalPiece | undefined = first instanceof Promise ? await first : first
  if (piece === undefined) return false
  try {
    const started = startBody(ctx, ask)
    if (started === undefined) return false
    let rendered = started.rendered
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
        cutBody(ctx)
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
