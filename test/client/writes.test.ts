/**
 * TalonClient.put and delete on a local cluster of two workers (what `talon up` runs): bytes,
 * a file and a stream go through a worker to the origin and read back byte-exact through the
 * cache, an overwrite is read new even though the workers trust versions for 10 minutes, a
 * stream of another length than declared writes nothing, and a deleted object is NotFound.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { BLOCK, connect, startCluster } from "./fixtures/prefetchCluster.js"

const KiB = 1024
const bytes = (n: number, seed: number) => {
  const b = Buffer.alloc(n)
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed * 7 + (i >>> 11)) & 0xff
  return b
}

describe("TalonClient writes", () => {
  it.scopedLive("put, overwrite, streamed and file bodies, delete", () =>
    Effect.gen(function* () {
      const cluster = yield* startCluster
      const { client } = yield* connect(cluster)
      const originFile = (key: string) => join(cluster.origin.root, "data", key)

      const v1 = bytes(2 * BLOCK + 300 * KiB, 1)
      const put1 = yield* client.put("s3://data/w/a.bin", v1)
      expect(put1.size).toBe(v1.length)
      expect(Buffer.compare(readFileSync(originFile("w/a.bin")), v1)).toBe(0)
      expect(Buffer.compare(Buffer.from(yield* client.read("s3://data/w/a.bin", 0, v1.length)), v1)).toBe(0)

      // Overwrite: every block is cached on some worker as v1; the read must be v2.
      const v2 = bytes(BLOCK + 5, 2)
      const put2 = yield* client.put("s3://data/w/a.bin", { stream: (async function* () { yield v2.subarray(0, 1000); yield v2.subarray(1000) })(), length: v2.length })
      expect(put2.version).not.toBe(put1.version)
      expect(yield* client.stat("s3://data/w/a.bin")).toMatchObject({ size: v2.length, version: put2.version })
      expect(Buffer.compare(Buffer.from(yield* client.read("s3://data/w/a.bin", 0, v2.length)), v2)).toBe(0)

      // A file body; 0 and 1 byte objects.
      const dir = mkdtempSync(join(tmpdir(), "talon-client-put-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const file = join(dir, "f.bin")
      const v3 = bytes(700 * KiB, 3)
      writeFileSync(file, v3)
      yield* client.put("s3://data/w/f.bin", { file })
      expect(Buffer.compare(Buffer.from(yield* client.read("s3://data/w/f.bin", 0, v3.length)), v3)).toBe(0)
      yield* client.put("s3://data/w/empty", new Uint8Array(0))
      expect((yield* client.stat("s3://data/w/empty")).size).toBe(0)
      yield* client.put("s3://data/w/one", Buffer.from([42]))
      expect([...(yield* client.read("s3://data/w/one", 0, 1))]).toEqual([42])

      // A stream shorter or longer than declared writes nothing.
      const short = yield* Effect.either(client.put("s3://data/w/short", { stream: (async function* () { yield v3.subarray(0, 10) })(), length: 11 }))
      expect(Either.isLeft(short) && short.left.message).toContain("ended after 10 of the 11 bytes")
      const long = yield* Effect.either(client.put("s3://data/w/long", { stream: (async function* () { yield v3.subarray(0, 12) })(), length: 11 }))
      expect(Either.isLeft(long) && long.left.message).toContain("longer than the 11 bytes")
      expect(existsSync(originFile("w/short")) || existsSync(originFile("w/long"))).toBe(false)

      // Delete, then read: NotFound.
      yield* client.delete("s3://data/w/a.bin")
      expect(existsSync(originFile("w/a.bin"))).toBe(false)
      const gone = yield* Effect.either(client.read("s3://data/w/a.bin", 0, 10))
      expect(Either.isLeft(gone) && gone.left._tag).toBe("ObjectNotFound")
    })
  , 120_000)
})
