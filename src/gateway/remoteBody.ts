/**
 * A GET's body relayed from the workers that hold it to the client's socket by splice(2)
 * (spliceRelay.ts): piece by piece (aligned to the route's piece size, so the workers see the
 * same requests the route would send), each a GetPinnedRange of the version the head's ETag
 * names. Like the route, it asks up to readAhead pieces ahead of the one being relayed (each on
 * its own worker connection): a cold piece is a fill at the worker, and asked one at a time
 * several readers of one object would each wait out the origin's first byte per piece. The first piece's reply header is in hand (exactly the bytes asked for, of that
 * version) before the head is written, so a miss, a refusal or an unreachable worker costs one
 * round trip and the route serves the read untouched. A later piece refused is read through
 * the route from there; a worker that fails mid-body closes the client's connection (a short
 * body is never a complete response).
 */
import type { ObjectStat } from "../backend/BackendStore.js"
import type { ObjectId } from "../core/ids.js"
import { DataErrorCode } from "../protocol/index.js"
import type { GwCtx } from "./context.js"
import { type BodyAsk, cutBody, startBody, streamRest } from "./bodyStart.js"
import { type RemotePlacement, RouteError } from "./Route.js"
import type { PieceRefusal, ReadyPiece, SpliceRelayShape } from "./spliceRelay.js"

/** What the gateway's remote body path needs: the relay and the route's placement. */
export interface RemoteBodies {
  readonly relay: SpliceRelayShape
  readonly placement: RemotePlacement
  readonly pieceBytes: number
  /** Pieces asked ahead of the one being relayed (the route's readAhead). */
  readonly readAhead: number
}

const pieceEnd = (pos: number, end: number, pieceBytes: number) => Math.min(end, (Math.floor(pos / pieceBytes) + 1) * pieceBytes)

/** The piece at `pos` asked of its first replica, its reply header read. */
const askPiece = (remote: RemoteBodies, object: ObjectId, stat: ObjectStat, pos: number, end: number): Promise<ReadyPiece | PieceRefusal> | undefined => {
  const owners = remote.placement.place(object, stat, pos)
  const address = owners?.[0]
  if (address === undefined) return undefined
  return remote.relay.request(address, object, stat.version, pos, pieceEnd(pos, end, remote.pieceBytes) - pos)
}

/**
 * Serves the asked body by splice. False when the first piece
 * cannot be relayed (nothing was written: the caller serves the read); a RouteError when the
 * workers refused it for the tenant's limit (nothing was written: the caller answers it).
 */
export const serveRemote = async (
  ctx: GwCtx,
  remote: RemoteBodies,
  ask: BodyAsk
): Promise<boolean | RouteError> => {
  const { res, g } = ctx
  const { object, stat, start, length, cacheable } = ask
  const socket = res.socket
  if (socket === null || remote.relay.fdOf(socket) < 0) return false
  const end = start + length
  const asked = askPiece(remote, object, stat, start, end)
  if (asked === undefined) return false
  let piece: ReadyPiece | PieceRefusal | undefined = await asked
  // Asked ahead: their bodies wait in their own connections until relayed or discarded.
  const window: Array<Promise<ReadyPiece | PieceRefusal> | undefined> = []
  let askPos = pieceEnd(start, end, remote.pieceBytes)
  const fillWindow = () => {
    while (window.length < remote.readAhead && askPos < end) {
      window.push(askPiece(remote, object, stat, askPos, end))
      askPos = pieceEnd(askPos, end, remote.pieceBytes)
    }
  }
  const dropWindow = () => {
    for (const w of window) void w?.then((p) => p._tag === "Ready" && remote.relay.discard(p), () => undefined)
    window.length = 0
  }
  // Over the tenant's limit: the route would be refused the same way, and asking again would charge the limit twice.
  if (piece._tag === "Rejected" && piece.code === DataErrorCode.RateLimited) return new RouteError({ kind: "unavailable", detail: piece.detail })
  // Refused otherwise (a changed version included: the route finds that out and stats again before the head) or unreachable.
  if (piece._tag !== "Ready") return false
  try {
    const started = startBody(ctx, ask)
    if (started === undefined) return false
    let rendered = started.rendered
    g.counters.remoteBodies++
    fillWindow()
    let pos = start
    for (;;) {
      const ready: ReadyPiece = piece
      piece = undefined
      const to = pieceEnd(pos, end, remote.pieceBytes)
      if (socket.writableLength > 0 && !(await drained(socket))) {
        remote.relay.discard(ready)
        res.destroy()
        return true
      }
      const fd = remote.relay.fdOf(socket)
      const ok = fd >= 0 && (await remote.relay.relay(ready, socket, fd, to - pos, rendered))
      rendered = undefined
      if (!ok) {
        cutBody(ctx)
        return true
      }
      g.counters.bytesOut += to - pos
      g.counters.remoteBytes += to - pos
      pos = to
      if (pos >= end) break
      const next = window.shift()
      fillWindow()
      const got = next === undefined ? undefined : await next
      if (got !== undefined && got._tag === "Rejected" && got.code === DataErrorCode.RateLimited) {
        // The rest would be refused through the route too: the head promised bytes that cannot come.
        cutBody(ctx)
        return true
      }
      if (got === undefined || got._tag !== "Ready") {
        // The pieces asked ahead would hold their worker connections while the route reads the rest.
        dropWindow()
        await streamRest(ctx, object, stat, pos, end - pos, cacheable)
        return true
      }
      piece = got
    }
    res.end()
    return true
  } finally {
    if (piece !== undefined && piece._tag === "Ready") remote.relay.discard(piece)
    dropWindow()
  }
}

/** Whether node's queued bytes (the head, when the kernel did not take it at once) went out. */
const drained = (socket: NonNullable<GwCtx["res"]["socket"]>): Promise<boolean> =>
  new Promise((resolve) => {
    const go = () => {
      socket.off("close", gone)
      resolve(true)
    }
    const gone = () => {
      socket.off("drain", go)
      resolve(false)
    }
    socket.once("drain", go)
    socket.once("close", gone)
  })
