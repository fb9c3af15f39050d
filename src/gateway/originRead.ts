/**
 * Reads from the origin through `BackendStore`, pinned to the version the response
 * head promised (If-Match), so a changed object fails the read instead of splicing
 * two versions into one body.
 */
import { Chunk, Effect, Either, type Runtime, Stream } from "effect"
import type { BackendError, BackendStoreShape } from "../backend/BackendStore.js"
import type { ObjectId } from "../core/ids.js"
import { type ByteReader, RouteError } from "./Route.js"

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

const concat = (chunks: Chunk.Chunk<Uint8Array>, length: number): Uint8Array => {
  if (Chunk.size(chunks) === 1) return Chunk.unsafeHead(chunks)
  const out = new Uint8Array(length)
  let at = 0
  for (const c of chunks) {
    out.set(c, at)
    at += c.length
  }
  return out
}

/** One bounded piece, whole. */
export const originPiece = (
  backend: BackendStoreShape,
  object: ObjectId,
  offset: number,
  length: number,
  version: string
): Effect.Effect<Uint8Array, RouteError> =>
  backend.getRange(object, offset, length, { version }).pipe(
    Stream.runCollect,
    Effect.mapError(routeErrorOf),
    Effect.flatMap((chunks) => {
      const bytes = concat(chunks, Chunk.reduce(chunks, 0, (n, c) => n + c.length))
      return bytes.length === length
        ? Effect.succeed(bytes)
        : Effect.fail(new RouteError({ kind: "unavailable", detail: `origin returned ${bytes.length} of ${length} bytes at ${offset}` }))
    })
  )

/** A streamed read: the backend's own backpressure (it reads the socket only as chunks are pulled). */
export const originReader = (
  runtime: Runtime.Runtime<never>,
  backend: BackendStoreShape,
  object: ObjectId,
  offset: number,
  length: number,
  version: string
): ByteReader => {
  const stream = backend.getRange(object, offset, length, { version }).pipe(
    Stream.mapError(routeErrorOf),
    Stream.either
  )
  const iterator = Stream.toAsyncIterableRuntime(stream, runtime)[Symbol.asyncIterator]()
  let closed = false
  return {
    next: async () => {
      if (closed) return undefined
      const r = await iterator.next()
      if (r.done === true) return undefined
      if (Either.isLeft(r.value)) throw r.value.left
      return r.value.right
    },
    close: () => {
      if (closed) return
      closed = true
      void iterator.return?.().catch(() => undefined)
    }
  }
}
