/**
 * Reads from the origin through `BackendStore`, pinned to the version the response
 * head promised (If-Match), so a changed object fails the read instead of splicing
 * two versions into one body.
 */
import { Chunk, Effect, Either, Exit, Option, Runtime, Scope, Stream } from "effect"
import type { BackendError, BackendStoreShape } from "../backend/BackendStore.js"
import { Payload } from "../client/SlabPool.js"
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

/**
 * A streamed read: the backend's own backpressure (it reads the socket only as chunks
 * are pulled). Pulled a batch at a time (whatever the socket delivered since the last
 * pull), not a runtime call per chunk.
 */
export const originReader = (
  runtime: Runtime.Runtime<never>,
  backend: BackendStoreShape,
  object: ObjectId,
  offset: number,
  length: number,
  version: string
): ByteReader => {
  const run = Runtime.runPromise(runtime)
  const scope = Effect.runSync(Scope.make())
  const pull = run(
    Stream.toPull(backend.getRange(object, offset, length, { version }).pipe(Stream.mapError(routeErrorOf))).pipe(
      Scope.extend(scope)
    )
  )
  let batch: Array<Uint8Array> = []
  let done = false
  let closed = false
  const close = () => {
    if (closed) return
    closed = true
    void run(Scope.close(scope, Exit.void)).catch(() => undefined)
  }
  return {
    next: async () => {
      while (batch.length === 0) {
        if (done || closed) return undefined
        const r = await run(Effect.either((await pull).pipe(Effect.map(Chunk.toReadonlyArray)))).catch(
          (): Either.Either<ReadonlyArray<Uint8Array>, Option.Option<RouteError>> =>
            Either.left(Option.some(new RouteError({ kind: "unavailable", detail: "read cancelled" })))
        )
        if (Either.isLeft(r)) {
          if (Option.isNone(r.left)) {
            done = true
            return undefined
          }
          close()
          throw r.left.value
        }
        batch = [...r.right].reverse()
      }
      const chunk = batch.pop()
      return chunk === undefined ? undefined : Payload.of(chunk)
    },
    close
  }
}
