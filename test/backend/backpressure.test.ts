import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Option, Stream } from "effect"
import * as Azure from "../../src/backend/Azure.js"
import * as S3 from "../../src/backend/S3.js"
import { Backend } from "../../src/core/ids.js"

const objectSize = 64 * 1024 * 1024
const chunk = Buffer.alloc(64 * 1024, 0x5a)

/** Streams a large range as fast as the socket takes it, and reports how far it got. */
const floodOrigin = Effect.acquireRelease(
  Effect.async<{ url: string; written: () => number; blocked: () => boolean; server: http.Server }>((resume) => {
    let written = 0
    let blocked = false
    const server = http.createServer((req, res) => {
      const match = /^bytes=(\d+)-(\d+)$/.exec(String(req.headers["x-ms-range"] ?? req.headers.range ?? ""))
      const start = match ? Number(match[1]) : 0
      const end = Math.min(match ? Number(match[2]) : objectSize - 1, objectSize - 1)
      res.writeHead(206, { "content-length": end - start + 1, "content-range": `bytes ${start}-${end}/${objectSize}`, etag: '"big"' })
      let left = end - start + 1
      const pump = () => {
        while (left > 0) {
          const piece = left >= chunk.length ? chunk : chunk.subarray(0, left)
          left -= piece.length
          written += piece.length
          if (!res.write(piece)) {
            blocked = true
            res.once("drain", () => {
              blocked = false
              pump()
            })
            return
          }
        }
        res.end()
      }
      pump()
    })
    server.listen(0, "127.0.0.1", () =>
      resume(
        Effect.succeed({
          url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
          written: () => written,
          blocked: () => blocked,
          server
        })
      )
    )
  }),
  (origin) =>
    Effect.promise(() => {
      origin.server.closeAllConnections()
      return new Promise<void>((resolve) => origin.server.close(() => resolve()))
    })
)

/** The provider's store over `url` and the flooded object's id. */
const storeOver = (provider: "S3" | "Azure", url: string) =>
  Effect.gen(function* () {
    const store = provider === "S3" ? yield* S3.make(S3.localOptions(url)) : yield* Azure.make(Azure.localOptions(url))
    const object = { backend: provider === "S3" ? Backend.S3 : Backend.Azure, bucket: "b", objectPath: "big.bin" }
    return { store, object }
  })

/** Waits until the origin is stuck (its write() said stop and nothing moved for a while) with a bounded amount sent. */
const expectOriginStuck = (origin: { readonly blocked: () => boolean; readonly written: () => number }) =>
  Effect.gen(function* () {
    let last = -1
    let stable = false
    for (let i = 0; i < 50 && !stable; i++) {
      yield* Effect.sleep("200 millis")
      stable = origin.blocked() && origin.written() === last
      last = origin.written()
    }
    expect(stable).toBe(true)
    expect(origin.written()).toBeLessThan(24 * 1024 * 1024)
  })

for (const provider of ["S3", "Azure"] as const) {
  describe(`${provider} getRange backpressure`, () => {
    it.scopedLive("a reader that stops pulling stops the origin: bytes in flight stay bounded", () =>
      Effect.gen(function* () {
        const origin = yield* floodOrigin
        const { store, object } = yield* storeOver(provider, origin.url)
        const pull = yield* Stream.toPull(store.getRange(object, 0, objectSize))
        const first = yield* pull
        expect(first.length).toBeGreaterThan(0)
        yield* expectOriginStuck(origin)
        // Pulling again drains the rest, byte-exactly in count.
        let total = Chunk.reduce(first, 0, (n, c) => n + c.length)
        for (;;) {
          const next = yield* Effect.option(pull)
          if (Option.isNone(next)) break
          total += Chunk.reduce(next.value, 0, (n, c) => n + c.length)
        }
        expect(total).toBe(objectSize)
      })
    )
  })
}

for (const provider of ["S3", "Azure"] as const) {
  describe(`${provider} openRange backpressure`, () => {
    it.scopedLive("a relay reader that stops pulling stops the origin: bytes in flight stay bounded", () =>
      Effect.gen(function* () {
        const origin = yield* floodOrigin
        const { store, object } = yield* storeOver(provider, origin.url)
        const reader = store.openRange!(object, 0, objectSize)
        yield* Effect.addFinalizer(() => Effect.sync(reader.close))
        const first = yield* Effect.promise(() => reader.next())
        expect(first?.length).toBeGreaterThan(0)
        yield* expectOriginStuck(origin)
        let total = first!.reduce((n, c) => n + c.length, 0)
        for (;;) {
          const next = yield* Effect.promise(() => reader.next())
          if (next === undefined) break
          total += next.reduce((n, c) => n + c.length, 0)
        }
        expect(total).toBe(objectSize)
      })
    )
  })
}
