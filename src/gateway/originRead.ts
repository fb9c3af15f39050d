/**
 * Reads from the origin through `BackendStore`, pinned to the version the response
 * head promised (If-Match), so a changed object fails the read instead of splicing
 * two versions into one body. Through the store's relay reader (`openRange`): one
 * runtime call per origin request, the body relayed batch by batch without a fiber
 * per chunk and without copying it.
 */
import type { Runtime } from "effect"
import type { BackendError, BackendStoreShape } from "../backend/BackendStore.js"
import { rangeReader } from "../backend/rangeReaders.js"
import { Payload } from "../client/SlabPool.js"
import type { ObjectId } from "../core/ids.js"
import { type ByteReader, RouteError, type RouteRead } from "./Route.js"

export const routeErrorOf = (e: BackendError): RouteError => {
  switch (e._tag) {
    case "BackendNotFound":
      return new RouteError({ kind: "not-found", detail: e.message })
    case "BackendRangeError":
      return new RouteError({ kind: "range", detail: e.message })
    case "BackendRequestError":
      if (e.status === 412) return new RouteError({ kind: "changed", detail: e.message })
      if (e.status === 401 || e.status === 403) return new RouteError({ kind: "denied", detail: e.message })
      return new RouteError({ kind: "unavailable", detail: e.message })
  }
}

const isBackendError = (e: unknown): e is BackendError =>
  typeof e === "object" && e !== null && "_tag" in e && ["BackendNotFound", "BackendRangeError", "BackendRequestError"].includes((e as { _tag: string })._tag)

const asRouteError = (e: unknown): RouteError =>
  isBackendError(e) ? routeErrorOf(e) : new RouteError({ kind: "unavailable", detail: `origin read failed: ${e instanceof Error ? e.message : String(e)}` })

const payloadOf = (batch: ReadonlyArray<Uint8Array>): Payload =>
  new Payload(batch, undefined, batch.reduce((n, c) => n + c.length, 0))

export type PieceResult = { readonly ok: true; readonly bytes: Payload } | { readonly ok: false; readonly error: RouteError }

/** A piece whose read was closed before it completed. */
export const readCancelled = (): PieceResult => ({ ok: false, error: new RouteError({ kind: "unavailable", detail: "read cancelled" }) })

/** The origin as the gateway reads it: through `backend`, every read pinned to a version. */
export interface OriginReads {
  /** The whole of `read`, streamed with the origin's own backpressure (its socket is read only as batches are pulled). */
  readonly reader: (read: RouteRead) => ByteReader
  /** One bounded piece, whole, as the batches that arrived (never concatenated). */
  readonly piece: (object: ObjectId, offset: number, length: number, version: string, isClosed: () => boolean) => Promise<PieceResult>
}

export const originReads = (runtime: Runtime.Runtime<never>, backend: BackendStoreShape): OriginReads => {
  const open = (object: ObjectId, offset: number, length: number, version: string) =>
    rangeReader(runtime, backend, object, offset, length, { version })

  const reader = (read: RouteRead): ByteReader => {
    const source = open(read.object, read.offset, read.length, read.stat.version)
    return {
      next: async () => {
        try {
          const batch = await source.next()
          return batch === undefined ? undefined : payloadOf(batch)
        } catch (e) {
          source.close()
          throw asRouteError(e)
        }
      },
      close: source.close
    }
  }

  const piece = async (object: ObjectId, offset: number, length: number, version: string, isClosed: () => boolean): Promise<PieceResult> => {
    const source = open(object, offset, length, version)
    const views: Array<Uint8Array> = []
    let total = 0
    try {
      for (let batch = await source.next(); batch !== undefined; batch = await source.next()) {
        if (isClosed()) return readCancelled()
        for (const c of batch) {
          views.push(c)
          total += c.length
        }
      }
    } catch (e) {
      return { ok: false, error: asRouteError(e) }
    } finally {
      source.close()
    }
    return total === length
      ? { ok: true, bytes: new Payload(views, undefined, total) }
      : { ok: false, error: new RouteError({ kind: "unavailable", detail: `origin returned ${total} of ${length} bytes at ${offset}` }) }
  }

  return { reader, piece }
}
