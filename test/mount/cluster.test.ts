/**
 * The filesystem's handlers over the real TalonClient and an in-process cluster (origin stub,
 * coordinator, two workers): the listing paths, stat versions and pinned reads the kernel
 * tests rely on, without a kernel.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { makeTalonClient, TalonClient } from "../../src/client/TalonClient.js"
import { makeFilesystem } from "../../src/mount/Filesystem.js"
import { ROOT_INO } from "../../src/mount/InodeTable.js"
import { raw } from "../origin/fixtures/testOrigin.js"
import { startCluster } from "../support/overwrites.js"
import { as, ask } from "./fixtures/replies.js"

const BLOCK = 256 * 1024

describe("mount filesystem over a real cluster", () => {
  it.live("lists, stats and reads pinned to the opened version through TalonClient", () =>
    Effect.gen(function* () {
      const cluster = yield* startCluster({ workers: 2, blockSize: BLOCK, pageSize: 0, versionTtlMs: 0 })
      const put = (key: string, body: Buffer) => Effect.promise(() => raw(cluster.origin.url, "PUT", `/bkt/${key.split("/").map(encodeURIComponent).join("/")}`, {}, body))
      yield* Effect.promise(() => raw(cluster.origin.url, "PUT", "/bkt"))
      const big = Buffer.alloc(3 * BLOCK + 17)
      for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff
      yield* put("data/big.bin", big)
      yield* put("data/odd name %+ 日本.bin", Buffer.from("odd"))
      const client = yield* makeTalonClient({ coordinator: cluster.coordinator, blockSize: BLOCK, statTtlMs: 0 })
      const fs = yield* makeFilesystem({
        exposed: [{ backend: "s3", bucket: "bkt" }, { backend: "gcs", bucket: "bkt" }],
        attrTtlMs: 60_000,
        entryTtlMs: 60_000,
        negativeTtlMs: 1000,
        maxInodes: 1000
      }).pipe(Effect.provideService(TalonClient, client))
      const h = fs.handlers
      const lookup = (parent: number, name: string) => Effect.map(ask((r) => h.lookup(parent, name, r)), (a) => as("entry", a).attr)
      const s3 = yield* lookup(ROOT_INO, "s3")
      const b = yield* lookup(s3.ino, "bkt")
      const dirFh = as("open", yield* ask((r) => h.opendir(b.ino, r))).fh
      expect(as("entries", yield* ask((r) => h.readdir(b.ino, dirFh, 0, r))).entries.map((e) => e.name)).toEqual([".", "..", "data"])
      const data = yield* lookup(b.ino, "data")
      const dataFh = as("open", yield* ask((r) => h.opendir(data.ino, r))).fh
      expect(as("entries", yield* ask((r) => h.readdir(data.ino, dataFh, 0, r))).entries.map((e) => e.name)).toEqual([
        ".",
        "..",
        "big.bin",
        "odd name %+ 日本.bin"
      ])
      // The same bucket through GCS's JSON API (the stub serves one root to every protocol): listed and read as gs://.
      const gcsBkt = yield* lookup((yield* lookup(ROOT_INO, "gcs")).ino, "bkt")
      const gcsData = yield* lookup(gcsBkt.ino, "data")
      const gcsFh = as("open", yield* ask((r) => h.opendir(gcsData.ino, r))).fh
      expect(as("entries", yield* ask((r) => h.readdir(gcsData.ino, gcsFh, 0, r))).entries.map((e) => e.name)).toEqual([".", "..", "big.bin", "odd name %+ 日本.bin"])
      const gcsFile = yield* lookup(gcsData.ino, "big.bin")
      expect(gcsFile.size).toBe(big.length)
      const gcsFileFh = as("open", yield* ask((r) => h.open(gcsFile.ino, 0, r))).fh
      expect(as("data", yield* ask((r) => h.read(gcsFile.ino, gcsFileFh, BLOCK - 5, 100, r))).bytes.equals(big.subarray(BLOCK - 5, BLOCK + 95))).toBe(true)
      const file = yield* lookup(data.ino, "big.bin")
      expect(file.size).toBe(big.length)
      const fh = as("open", yield* ask((r) => h.open(file.ino, 0, r))).fh
      // Across block boundaries, and clamped at the end.
      expect(as("data", yield* ask((r) => h.read(file.ino, fh, BLOCK - 5, 2 * BLOCK, r))).bytes.equals(big.subarray(BLOCK - 5, 3 * BLOCK - 5))).toBe(true)
      expect(as("data", yield* ask((r) => h.read(file.ino, fh, 3 * BLOCK, 1 << 20, r))).bytes.equals(big.subarray(3 * BLOCK))).toBe(true)
      const odd = yield* lookup(data.ino, "odd name %+ 日本.bin")
      const oddFh = as("open", yield* ask((r) => h.open(odd.ino, 0, r))).fh
      expect(as("data", yield* ask((r) => h.read(odd.ino, oddFh, 0, 100, r))).bytes.toString()).toBe("odd")
      // Overwritten at the origin: the handle opened on the old version never returns the new bytes.
      yield* put("data/big.bin", Buffer.alloc(big.length, 7))
      const after = yield* ask((r) => h.read(file.ino, fh, 0, BLOCK, r))
      if (after._tag === "data") expect(after.bytes.equals(big.subarray(0, BLOCK))).toBe(true)
      else expect(as("error", after).errno).toBe(5)
      const fresh = as("open", yield* ask((r) => h.open(file.ino, 0, r)))
      expect(fresh.flags.keepCache).toBe(false)
      expect(as("data", yield* ask((r) => h.read(file.ino, fresh.fh, 0, 10, r))).bytes.equals(Buffer.alloc(10, 7))).toBe(true)
      expect(as("error", yield* ask((r) => h.read(file.ino, fh, 0, 10, r))).errno).toBe(5)
    }).pipe(Effect.scoped)
  )
})
