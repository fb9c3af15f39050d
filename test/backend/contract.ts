import { randomBytes, randomUUID } from "node:crypto"
import { describe, expect, layer } from "@effect/vitest"
import { Chunk, Context, Effect, type Layer, Stream } from "effect"
import type { BackendError, BackendRequestError, BackendStoreShape, GetRangeOptions, RangeReader } from "../../src/backend/BackendStore.js"
import type { Backend, ObjectId } from "../../src/core/ids.js"

/** What a contract run needs: a store and an existing, writable bucket/container. */
export class ContractTarget extends Context.Tag("test/ContractTarget")<
  ContractTarget,
  {
    readonly store: BackendStoreShape
    readonly backend: Backend
    readonly bucket: string
    /** Origins that cannot do a feature say so here; the report lists every skip. */
    readonly lacks?: ReadonlyArray<"conditionalReads" | "continuationTokens">
  }
>() {}

const collect = <E>(stream: Stream.Stream<Uint8Array, E>) =>
  Effect.map(Stream.runCollect(stream), (chunks) => Buffer.concat(Chunk.toArray(chunks)))

/** `error` must be a refusal with `status` that is never retried; returned, narrowed, for further checks. */
export const expectTerminal = (error: BackendError, status: number): BackendRequestError => {
  expect(error._tag).toBe("BackendRequestError")
  const refused = error as BackendRequestError
  expect(refused.status).toBe(status)
  expect(refused.retryable).toBe(false)
  return refused
}

/** Every batch of a reader, joined; its error as the failure. */
export const collectReader = (reader: RangeReader): Effect.Effect<Buffer, BackendError> =>
  Effect.tryPromise({
    try: async () => {
      const out: Array<Uint8Array> = []
      try {
        for (let batch = await reader.next(); batch !== undefined; batch = await reader.next()) out.push(...batch)
      } finally {
        reader.close()
      }
      return Buffer.concat(out)
    },
    catch: (e) => e as BackendError
  })

/**
 * Every chunk `pushRange` delivers, copied at once (a chunk is valid only during the call); every
 * other chunk makes the read wait a tick, as a fill waiting on a disk write does.
 */
export const collectPush = (store: BackendStoreShape, object: ObjectId, offset: number, length: number, options?: GetRangeOptions): Effect.Effect<Buffer, BackendError> =>
  Effect.tryPromise({
    try: async (signal) => {
      const out: Array<Buffer> = []
      await store.pushRange!(object, offset, length, options, (chunk) => {
        out.push(Buffer.from(chunk))
        return out.length % 2 === 0 ? new Promise<void>((resolve) => setImmediate(resolve)) : undefined
      }, signal)
      return Buffer.concat(out)
    },
    catch: (e) => e as BackendError
  })

type Read = (store: BackendStoreShape, object: ObjectId, offset: number, length: number, options?: GetRangeOptions) => Effect.Effect<Buffer, BackendError>

/** Range reads three ways: the Effect stream, the relay reader (`openRange`) and the push read (`pushRange`), where the store has them. */
const readers: ReadonlyArray<readonly [string, Read]> = [
  ["getRange", (store, object, offset, length, options) => collect(store.getRange(object, offset, length, options))],
  [
    "openRange",
    (store, object, offset, length, options) =>
      store.openRange !== undefined ? collectReader(store.openRange(object, offset, length, options)) : collect(store.getRange(object, offset, length, options))
  ],
  [
    "pushRange",
    (store, object, offset, length, options) =>
      store.pushRange !== undefined ? collectPush(store, object, offset, length, options) : collect(store.getRange(object, offset, length, options))
  ]
]

/**
 * The behaviour every BackendStore must have, whatever the provider: one suite, run against
 * each backend and each origin (Azurite, s3rver, the origin stub).
 */
export const backendContract = (name: string, target: Layer.Layer<ContractTarget, unknown>) =>
  layer(target, { excludeTestServices: true, timeout: "60 seconds" })(name, (it) => {
    const fresh = Effect.map(ContractTarget, (t) => {
      const run = randomUUID().slice(0, 8)
      const id = (key: string): ObjectId => ({ backend: t.backend, bucket: t.bucket, objectPath: `${run}/${key}` })
      return { ...t, run, id }
    })

    describe("stat and getRange", () => {
      it.effect("put then stat reports the size and the version put returned", () =>
        Effect.gen(function* () {
          const { store, id } = yield* fresh
          const body = randomBytes(1000)
          const put = yield* store.put(id("a.bin"), body)
          const stat = yield* store.stat(id("a.bin"))
          expect(put.size).toBe(1000)
          expect(stat.size).toBe(1000)
          expect(stat.version).not.toBe("")
          expect(stat.version).toBe(put.version)
          expect(stat.version).not.toMatch(/^W\/|"/)
        })
      )

      for (const [via, readRange] of readers) {
        it.effect(`${via}: a full read returns every byte of a multi-chunk object`, () =>
          Effect.gen(function* () {
            const { store, id } = yield* fresh
            const body = randomBytes(3 * 1024 * 1024 + 17)
            yield* store.put(id("big.bin"), body)
            const read = yield* readRange(store, id("big.bin"), 0, body.length)
            expect(read.length).toBe(body.length)
            expect(read.equals(body)).toBe(true)
          })
        )

        it.effect(`${via}: partial reads return exactly the requested slice`, () =>
          Effect.gen(function* () {
            const { store, id } = yield* fresh
            const body = randomBytes(100_000)
            yield* store.put(id("p.bin"), body)
            for (const [offset, length] of [[0, 1], [1, 10], [4095, 4097], [50_000, 25_000], [99_999, 1]] as const) {
              const read = yield* readRange(store, id("p.bin"), offset, length)
              expect(read.equals(body.subarray(offset, offset + length))).toBe(true)
            }
          })
        )

        it.effect(`${via}: a range running past the end is clamped at EOF`, () =>
          Effect.gen(function* () {
            const { store, id } = yield* fresh
            const body = randomBytes(5000)
            yield* store.put(id("eof.bin"), body)
            const read = yield* readRange(store, id("eof.bin"), 4990, 1000)
            expect(read.equals(body.subarray(4990))).toBe(true)
          })
        )

        it.effect(`${via}: a range starting at or past the end fails with BackendRangeError`, () =>
          Effect.gen(function* () {
            const { store, id } = yield* fresh
            yield* store.put(id("r.bin"), randomBytes(5000))
            for (const offset of [5000, 9000]) {
              const error = yield* Effect.flip(readRange(store, id("r.bin"), offset, 10))
              expect(error._tag).toBe("BackendRangeError")
              if (error._tag === "BackendRangeError") {
                expect(error.offset).toBe(offset)
                expect(error.object).toContain("r.bin")
                if (error.size !== undefined) expect(error.size).toBe(5000)
              }
            }
          })
        )

        it.effect(`${via}: a missing object is BackendNotFound naming it, for stat and getRange`, () =>
          Effect.gen(function* () {
            const { store, id } = yield* fresh
            const stat = yield* Effect.flip(store.stat(id("missing.bin")))
            expect(stat._tag).toBe("BackendNotFound")
            expect(stat.message).toContain("missing.bin")
            const read = yield* Effect.flip(readRange(store, id("missing.bin"), 0, 10))
            expect(read._tag).toBe("BackendNotFound")
          })
        )

        it.effect(`${via}: a read pinned to a replaced version fails with 412 instead of mixing versions`, (ctx) =>
          Effect.gen(function* () {
            const { store, id, lacks } = yield* fresh
            if (lacks?.includes("conditionalReads")) return ctx.skip()
            const first = yield* store.put(id("v.bin"), randomBytes(2000))
            const pinned = yield* readRange(store, id("v.bin"), 0, 2000, { version: first.version })
            expect(pinned.length).toBe(2000)
            yield* store.put(id("v.bin"), randomBytes(2000))
            const error = yield* Effect.flip(readRange(store, id("v.bin"), 0, 10, { version: first.version }))
            expectTerminal(error, 412)
          })
        )

        it.effect(`${via}: abandoning a read early releases the connection for the next request`, () =>
          Effect.gen(function* () {
            const { store, id } = yield* fresh
            const body = randomBytes(4 * 1024 * 1024)
            yield* store.put(id("early.bin"), body)
            for (let i = 0; i < 4; i++) {
              if (via === "openRange" && store.openRange !== undefined) {
                const reader = store.openRange(id("early.bin"), 0, body.length)
                const first = yield* Effect.promise(() => reader.next())
                expect(first?.length).toBeGreaterThan(0)
                reader.close()
              } else {
                const first = yield* Stream.runHead(store.getRange(id("early.bin"), 0, body.length))
                expect(first._tag).toBe("Some")
              }
            }
            const tail = yield* readRange(store, id("early.bin"), body.length - 100, 100)
            expect(tail.equals(body.subarray(body.length - 100))).toBe(true)
          })
        )
      }
    })

    describe("writes", () => {
      it.effect("overwriting with different content changes the version and the size", () =>
        Effect.gen(function* () {
          const { store, id } = yield* fresh
          const a = yield* store.put(id("w.bin"), Buffer.from("first version"))
          const b = yield* store.put(id("w.bin"), Buffer.from("the second, longer version"))
          expect(b.version).not.toBe(a.version)
          const stat = yield* store.stat(id("w.bin"))
          expect(stat).toMatchObject({ size: 26, version: b.version })
          expect((yield* collect(store.getRange(id("w.bin"), 4, 6))).toString()).toBe("second")
        })
      )

      it.effect("delete then stat is BackendNotFound, and deleting again succeeds", () =>
        Effect.gen(function* () {
          const { store, id } = yield* fresh
          yield* store.put(id("d.bin"), Buffer.from("x"))
          yield* store.delete(id("d.bin"))
          expect((yield* Effect.flip(store.stat(id("d.bin"))))._tag).toBe("BackendNotFound")
          yield* store.delete(id("d.bin"))
        })
      )

      it.effect("an empty object has size 0 and reads back empty", () =>
        Effect.gen(function* () {
          const { store, id } = yield* fresh
          yield* store.put(id("empty"), new Uint8Array(0))
          expect((yield* store.stat(id("empty"))).size).toBe(0)
          expect((yield* collect(store.getRange(id("empty"), 0, 0))).length).toBe(0)
        })
      )
    })

    describe("keys and listing", () => {
      it.effect("keys with spaces, unicode, + and % round-trip through put, stat, read and list", () =>
        Effect.gen(function* () {
          const { store, id, bucket, run } = yield* fresh
          const keys = ["a b/c d.txt", "ünï cødé/空 格.bin", "plus+and%25percent%.txt", "deep/1/2/3/4/5/6/leaf"]
          for (const key of keys) {
            yield* store.put(id(key), Buffer.from(`content of ${key}`))
            expect((yield* store.stat(id(key))).size).toBe(Buffer.byteLength(`content of ${key}`))
            expect((yield* collect(store.getRange(id(key), 0, 1000))).toString()).toBe(`content of ${key}`)
          }
          const page = yield* store.list(bucket, { prefix: `${run}/` })
          expect(page.objects.map((o) => o.key).sort()).toEqual(keys.map((k) => `${run}/${k}`).sort())
        })
      )

      it.effect("prefix and delimiter split objects from common prefixes", () =>
        Effect.gen(function* () {
          const { store, id, bucket, run } = yield* fresh
          for (const key of ["p/a/1", "p/a/2", "p/b/1", "p/c", "p/d", "q/1"]) yield* store.put(id(key), Buffer.from(key))
          const page = yield* store.list(bucket, { prefix: `${run}/p/`, delimiter: "/" })
          expect(page.objects.map((o) => o.key)).toEqual([`${run}/p/c`, `${run}/p/d`])
          expect(page.objects.map((o) => o.size)).toEqual([3, 3])
          expect(page.objects.every((o) => o.version !== "" && !o.version.includes('"'))).toBe(true)
          // The origin's last-modified time, which `ls -l` on a mount shows (within a day of now, whatever the clocks).
          expect(page.objects.every((o) => o.lastModified !== undefined && Math.abs(o.lastModified.getTime() - Date.now()) < 86_400_000)).toBe(true)
          expect([...page.commonPrefixes].sort()).toEqual([`${run}/p/a/`, `${run}/p/b/`])
          expect(page.nextToken).toBeUndefined()
          const top = yield* store.list(bucket, { prefix: `${run}/`, delimiter: "/" })
          expect(top.objects).toEqual([])
          expect([...top.commonPrefixes].sort()).toEqual([`${run}/p/`, `${run}/q/`])
        })
      )

      it.effect("pagination with maxKeys visits every key once, in order", (ctx) =>
        Effect.gen(function* () {
          const { store, id, bucket, run, lacks } = yield* fresh
          if (lacks?.includes("continuationTokens")) return ctx.skip()
          const keys = ["k0", "k1", "k2", "k3", "k4", "k5", "k6"]
          for (const key of keys) yield* store.put(id(key), Buffer.from(key))
          const seen: Array<string> = []
          let token: string | undefined
          let pages = 0
          do {
            const page = yield* store.list(bucket, { prefix: `${run}/`, maxKeys: 3, ...(token ? { token } : {}) })
            expect(page.objects.length).toBeLessThanOrEqual(3)
            seen.push(...page.objects.map((o) => o.key))
            token = page.nextToken
            pages++
          } while (token !== undefined && pages < 10)
          expect(seen).toEqual(keys.map((k) => `${run}/${k}`))
          expect(pages).toBe(3)
        })
      )

      it.effect("listing a bucket that does not exist is BackendNotFound", () =>
        Effect.gen(function* () {
          const { store } = yield* fresh
          const error = yield* Effect.flip(store.list(`no-such-bucket-${randomUUID().slice(0, 8)}`))
          expect(error._tag).toBe("BackendNotFound")
        })
      )
    })
  })
