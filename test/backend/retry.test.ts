import { describe, expect, layer } from "@effect/vitest"
import { Chunk, Context, Effect, Layer, Stream } from "effect"
import * as Azure from "../../src/backend/Azure.js"
import type { BackendError, BackendStoreShape, GetRangeOptions } from "../../src/backend/BackendStore.js"
import type { RequestPolicy } from "../../src/backend/policy.js"
import * as S3 from "../../src/backend/S3.js"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { collectPush, collectReader } from "./contract.js"
import { faultyOrigin, type FaultyOrigin } from "./faultyOrigin.js"

const policy: RequestPolicy = { timeoutMs: 300, retries: 3, retryBaseMs: 5, retryMaxMs: 20, maxSockets: 8 }

const providers: ReadonlyArray<{
  readonly name: string
  readonly backend: Backend
  readonly make: (url: string) => ReturnType<typeof S3.make>
}> = [
  { name: "S3", backend: Backend.S3, make: (url) => S3.make({ ...S3.localOptions(url), policy }) },
  { name: "Azure", backend: Backend.Azure, make: (url) => Azure.make({ ...Azure.localOptions(url), policy }) }
]

class OriginAndStore extends Context.Tag("test/OriginAndStore")<
  OriginAndStore,
  { readonly origin: FaultyOrigin; readonly store: BackendStoreShape }
>() {}

const collect = <E>(stream: Stream.Stream<Uint8Array, E>) =>
  Effect.map(Stream.runCollect(stream), (chunks) => Buffer.concat(Chunk.toArray(chunks)))

type Read = (store: BackendStoreShape, object: ObjectId, offset: number, length: number, options?: GetRangeOptions) => Effect.Effect<Buffer, BackendError>

/** Every range read runs three ways: the Effect stream, the relay reader and the push read must retry alike. */
const readers: ReadonlyArray<readonly [string, Read]> = [
  ["getRange", (store, object, offset, length, options) => collect(store.getRange(object, offset, length, options))],
  ["openRange", (store, object, offset, length, options) => collectReader(store.openRange!(object, offset, length, options))],
  ["pushRange", collectPush]
]

for (const provider of providers) {
  const object: ObjectId = { backend: provider.backend, bucket: "b", objectPath: "dir/obj.bin" }
  const env = Layer.scoped(
    OriginAndStore,
    Effect.gen(function* () {
      const origin = yield* faultyOrigin
      const store = yield* provider.make(origin.url)
      return { origin, store }
    })
  )

  layer(env, { excludeTestServices: true, timeout: "30 seconds" })(`${provider.name} retries and timeouts`, (it) => {
    describe("which failures are retried", () => {
      it.effect("503 twice then success: three attempts, one answer", () =>
        Effect.gen(function* () {
          const { origin, store } = yield* OriginAndStore
          origin.reset(["503", "503"])
          const stat = yield* store.stat(object)
          expect(stat).toMatchObject({ size: origin.content.length, version: "v1" })
          expect(origin.seen.length).toBe(3)
        })
      )

      it.effect("429 throttling and a connection reset are retried", () =>
        Effect.gen(function* () {
          const { origin, store } = yield* OriginAndStore
          origin.reset(["429", "reset", "500"])
          expect((yield* store.stat(object)).size).toBe(origin.content.length)
          expect(origin.seen.length).toBe(4)
        })
      )

      it.effect("a failure that persists gives up after the policy's retries, saying so", () =>
        Effect.gen(function* () {
          const { origin, store } = yield* OriginAndStore
          origin.reset(Array(10).fill("503"))
          const error = yield* Effect.flip(store.stat(object))
          expect(error._tag).toBe("BackendRequestError")
          if (error._tag === "BackendRequestError") {
            expect(error).toMatchObject({ status: 503, retryable: true })
            expect(error.message).toContain("dir/obj.bin")
            expect(error.message).toContain("503")
          }
          expect(origin.seen.length).toBe(policy.retries + 1)
        })
      )

      for (const [fault, tag, status] of [
        ["404", "BackendNotFound", undefined],
        ["403", "BackendRequestError", 403]
      ] as const) {
        it.effect(`${fault} is never retried`, () =>
          Effect.gen(function* () {
            const { origin, store } = yield* OriginAndStore
            origin.reset([fault, "ok"])
            const error = yield* Effect.flip(store.stat(object))
            expect(error._tag).toBe(tag)
            if (error._tag === "BackendRequestError") expect(error).toMatchObject({ status, retryable: false })
            expect(origin.seen.length).toBe(1)
          })
        )
      }

      for (const [via, readRange] of readers) {
        it.effect(`${via}: 416 is a BackendRangeError, never retried`, () =>
          Effect.gen(function* () {
            const { origin, store } = yield* OriginAndStore
            origin.reset([])
            const error = yield* Effect.flip(readRange(store, object, origin.content.length + 5, 10))
            expect(error).toMatchObject({ _tag: "BackendRangeError", size: origin.content.length })
            expect(origin.seen.length).toBe(1)
          })
        )
      }

      it.effect("a put is retried after a 503", () =>
        Effect.gen(function* () {
          const { origin, store } = yield* OriginAndStore
          origin.reset(["503"])
          const put = yield* store.put(object, Buffer.from("new content"))
          expect(put.size).toBe(11)
          expect(origin.content.toString()).toBe("new content")
          expect(origin.seen.length).toBe(2)
        })
      )
    })

    describe("timeouts", () => {
      it.effect("an origin that never answers hits the per-request timeout on every attempt", () =>
        Effect.gen(function* () {
          const { origin, store } = yield* OriginAndStore
          origin.reset(Array(10).fill("hang"))
          const error = yield* Effect.flip(store.stat(object))
          expect(error).toMatchObject({ _tag: "BackendRequestError", retryable: true })
          expect(error.message).toContain(`within ${policy.timeoutMs} ms`)
          expect(origin.seen.length).toBe(policy.retries + 1)
        })
      )

      for (const [via, readRange] of readers) {
        it.effect(`${via}: one hung request is abandoned and the retry succeeds`, () =>
          Effect.gen(function* () {
            const { origin, store } = yield* OriginAndStore
            origin.reset(["hang"])
            const read = yield* readRange(store, object, 100, 1000)
            expect(read.equals(origin.content.subarray(100, 1100))).toBe(true)
            expect(origin.seen.length).toBe(2)
          })
        )
      }
    })

    describe("range reads resume from the byte reached", () => {
      for (const [via, readRange] of readers) {
        it.effect(`${via}: 503s before the first byte re-request the same range`, () =>
          Effect.gen(function* () {
            const { origin, store } = yield* OriginAndStore
            origin.reset(["503", "503"])
            const read = yield* readRange(store, object, 1000, 20_000)
            expect(read.equals(origin.content.subarray(1000, 21_000))).toBe(true)
            expect(origin.seen.map((r) => r.range)).toEqual(Array(3).fill("bytes=1000-20999"))
          })
        )

        it.effect(`${via}: a body cut mid-transfer resumes after the bytes already emitted, pinned by If-Match`, () =>
          Effect.gen(function* () {
            const { origin, store } = yield* OriginAndStore
            origin.reset(["partial"])
            const read = yield* readRange(store, object, 1000, 40_000)
            expect(read.length).toBe(40_000)
            expect(read.equals(origin.content.subarray(1000, 41_000))).toBe(true)
            expect(origin.seen.length).toBe(2)
            const resumed = origin.seen[1]!
            const resumedFrom = Number(/^bytes=(\d+)-40999$/.exec(resumed.range ?? "")?.[1])
            expect(resumedFrom).toBeGreaterThan(1000)
            expect(resumed.ifMatch).toBe('"v1"')
          })
        )

        it.effect(`${via}: a body that stalls hits the idle timeout and resumes`, () =>
          Effect.gen(function* () {
            const { origin, store } = yield* OriginAndStore
            origin.reset(["stall"])
            const read = yield* readRange(store, object, 0, origin.content.length)
            expect(read.equals(origin.content)).toBe(true)
            expect(origin.seen.length).toBe(2)
            expect(origin.seen[1]!.range).not.toBe("bytes=0-65535")
          })
        )

        it.effect(`${via}: if the object changed before the resume, the read fails with 412 rather than splicing`, () =>
          Effect.gen(function* () {
            const { origin, store } = yield* OriginAndStore
            origin.reset(["partial"])
            origin.afterRequest = (index) => {
              if (index === 0) origin.etag = "v2"
            }
            const error = yield* Effect.flip(readRange(store, object, 0, 40_000))
            expect(error).toMatchObject({ _tag: "BackendRequestError", status: 412, retryable: false })
            expect(origin.seen.length).toBe(2)
          })
        )

        it.effect(`${via}: a caller's version pin is sent from the first request`, () =>
          Effect.gen(function* () {
            const { origin, store } = yield* OriginAndStore
            origin.reset([])
            const error = yield* Effect.flip(readRange(store, object, 0, 10, { version: "old" }))
            expect(error).toMatchObject({ status: 412 })
            expect(origin.seen[0]!.ifMatch).toBe('"old"')
          })
        )
      }
    })
  })
}
