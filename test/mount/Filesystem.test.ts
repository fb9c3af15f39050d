/**
 * The filesystem's FUSE handlers against an in-memory origin, on the TestClock: names and
 * listings, pinned reads, freshness after the TTLs, errno mapping.
 */
import * as os from "node:os"
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { makeFilesystem, type FilesystemOptions } from "../../src/mount/Filesystem.js"
import { ROOT_INO } from "../../src/mount/InodeTable.js"
import type { DirEntry, FuseHandlers } from "../../src/mount/fuse/types.js"
import { as, ask } from "./fixtures/replies.js"
import { memoryClient, memoryOrigin, type MemoryOrigin } from "./fixtures/memoryClient.js"

const E = os.constants.errno

const OPTIONS: FilesystemOptions = {
  exposed: [
    { backend: "s3", bucket: "b" },
    { backend: "az", bucket: "c" }
  ],
  attrTtlMs: 3000,
  entryTtlMs: 3000,
  negativeTtlMs: 1000,
  maxInodes: 100_000
}

interface Harness {
  readonly h: FuseHandlers
  readonly origin: MemoryOrigin
  readonly invalidated: Array<string>
  /** lookup along a path of names from the root; the inode of the last. */
  readonly walk: (...names: Array<string>) => Effect.Effect<number>
  readonly readAll: (ino: number, fh: number, size: number) => Effect.Effect<Buffer>
  readonly listDir: (ino: number) => Effect.Effect<ReadonlyArray<DirEntry>>
}

const harness = (setup: (origin: MemoryOrigin) => void, options: Partial<FilesystemOptions> = {}) =>
  Effect.gen(function* () {
    const origin = memoryOrigin()
    setup(origin)
    const fs = yield* makeFilesystem({ ...OPTIONS, ...options }).pipe(Effect.provide(memoryClient(origin)))
    const invalidated: Array<string> = []
    fs.attach({
      invalidateInode: (ino, offset, length) => invalidated.push(`inode ${ino} ${offset}+${length}`),
      invalidateEntry: (parent, name) => invalidated.push(`entry ${parent}/${name}`)
    })
    const h = fs.handlers
    const walk = (...names: Array<string>) =>
      Effect.gen(function* () {
        let ino = ROOT_INO
        for (const name of names) ino = as("entry", yield* ask((r) => h.lookup(ino, name, r))).attr.ino
        return ino
      })
    const readAll = (ino: number, fh: number, size: number) =>
      Effect.gen(function* () {
        const parts: Array<Buffer> = []
        for (let at = 0; ; ) {
          const got = as("data", yield* ask((r) => h.read(ino, fh, at, 4, r))).bytes
          if (got.length === 0) break
          parts.push(got)
          at += got.length
          if (at >= size) break
        }
        return Buffer.concat(parts)
      })
    const listDir = (ino: number) =>
      Effect.gen(function* () {
        const fh = as("open", yield* ask((r) => h.opendir(ino, r))).fh
        const all: Array<DirEntry> = []
        for (let offset = 0; ; ) {
          const batch = as("entries", yield* ask((r) => h.readdir(ino, fh, offset, r))).entries
          if (batch.length === 0) break
          all.push(...batch)
          offset = batch[batch.length - 1]!.nextOffset
        }
        as("ok", yield* ask((r) => h.releasedir(ino, fh, r)))
        return all
      })
    return { h, origin, invalidated, walk, readAll, listDir, metrics: fs.metrics, gauges: fs.gauges } satisfies Harness & Record<string, unknown>
  })

const names = (entries: ReadonlyArray<DirEntry>) => entries.map((e) => e.name)

describe("mount filesystem: namespace", () => {
  it.effect("the root shows the exposed backends, each its exposed buckets; anything else is a cached negative lookup", () =>
    Effect.gen(function* () {
      const t = yield* harness(() => {})
      expect(names(yield* t.listDir(ROOT_INO))).toEqual([".", "..", "s3", "az"])
      const s3 = yield* t.walk("s3")
      expect(names(yield* t.listDir(s3))).toEqual([".", "..", "b"])
      expect(as("negative", yield* ask((r) => t.h.lookup(ROOT_INO, "gcs", r))).entryTtl).toBe(1)
      expect(as("negative", yield* ask((r) => t.h.lookup(s3, "other", r)))._tag).toBe("negative")
      const attr = as("attr", yield* ask((r) => t.h.getattr(s3, r))).attr
      expect(attr.mode & 0o170000).toBe(0o040000)
    })
  )

  it.effect("directories are synthesised from key paths; odd names (spaces, unicode, %, +, deep prefixes) survive", () =>
    Effect.gen(function* () {
      const odd = ["with space.bin", "日本語 データ.bin", "100%+done.txt", "a+b=c %20.bin"]
      const t = yield* harness((o) => {
        for (const n of odd) o.put(`/s3/b/odd/${n}`, n)
        o.put("/s3/b/deep/1/2/3/4/5/6/leaf.bin", "leaf")
        o.put("/s3/b/top.bin", "top")
        o.put("/s3/b/dir-marker/", "")
      })
      const bucket = yield* t.walk("s3", "b")
      expect(names(yield* t.listDir(bucket))).toEqual([".", "..", "deep", "dir-marker", "odd", "top.bin"])
      const oddDir = yield* t.walk("s3", "b", "odd")
      expect(names(yield* t.listDir(oddDir)).slice(2).sort()).toEqual([...odd].sort())
      for (const n of odd) {
        const ino = yield* t.walk("s3", "b", "odd", n)
        const fh = as("open", yield* ask((r) => t.h.open(ino, 0, r))).fh
        expect((yield* t.readAll(ino, fh, 100)).toString()).toBe(n)
      }
      const leaf = yield* t.walk("s3", "b", "deep", "1", "2", "3", "4", "5", "6", "leaf.bin")
      expect(as("attr", yield* ask((r) => t.h.getattr(leaf, r))).attr.size).toBe(4)
    })
  )

  it.effect("a lookup without a listing finds a file by stat and a directory by listing under its name", () =>
    Effect.gen(function* () {
      const t = yield* harness((o) => {
        o.put("/s3/b/data/x.bin", "xx")
      })
      const data = yield* t.walk("s3", "b", "data")
      expect(as("attr", yield* ask((r) => t.h.getattr(data, r))).attr.mode & 0o170000).toBe(0o040000)
      expect(t.origin.calls).toEqual(["stat /s3/b/data", "list /s3/b/data/"])
      // The directory's listing answers the lookup inside it: no stat.
      const x = yield* t.walk("s3", "b", "data", "x.bin")
      expect(as("attr", yield* ask((r) => t.h.getattr(x, r))).attr.size).toBe(2)
      expect(t.origin.calls).toEqual(["stat /s3/b/data", "list /s3/b/data/"])
      expect(as("negative", yield* ask((r) => t.h.lookup(data, "nope", r)))._tag).toBe("negative")
    })
  )

  it.effect("a directory of 10,000 keys lists fully through readdir's offsets", () =>
    Effect.gen(function* () {
      const t = yield* harness((o) => {
        for (let i = 0; i < 10_000; i++) o.put(`/s3/b/many/k${String(i).padStart(5, "0")}`, "")
      })
      const many = yield* t.walk("s3", "b", "many")
      const entries = yield* t.listDir(many)
      expect(entries.length).toBe(10_002)
      expect(new Set(names(entries)).size).toBe(10_002)
      expect(entries[2]!.name).toBe("k00000")
      expect(entries[10_001]!.name).toBe("k09999")
      expect(new Set(entries.slice(2).map((e) => e.ino)).size).toBe(10_000)
    })
  )
})

describe("mount filesystem: reads", () => {
  it.effect("reads return the object's bytes, clamped at the end; xattrs name the version", () =>
    Effect.gen(function* () {
      const t = yield* harness((o) => o.put("/s3/b/f.bin", "0123456789"))
      const f = yield* t.walk("s3", "b", "f.bin")
      const fh = as("open", yield* ask((r) => t.h.open(f, 0, r))).fh
      expect(as("data", yield* ask((r) => t.h.read(f, fh, 3, 100, r))).bytes.toString()).toBe("3456789")
      expect(as("data", yield* ask((r) => t.h.read(f, fh, 10, 100, r))).bytes.length).toBe(0)
      expect(as("value", yield* ask((r) => t.h.getxattr(f, "user.talon.etag", r))).value.toString()).toBe("v1")
      expect(as("error", yield* ask((r) => t.h.getxattr(f, "user.other", r))).errno).toBe(E.ENODATA)
      expect(as("names", yield* ask((r) => t.h.listxattr(f, r))).names).toEqual(["user.talon.etag", "user.talon.version"])
      expect(as("statfs", yield* ask((r) => t.h.statfs(f, r))).statfs.nameMax).toBe(255)
      as("ok", yield* ask((r) => t.h.release(f, fh, r)))
      expect(as("error", yield* ask((r) => t.h.read(f, fh, 0, 1, r))).errno).toBe(E.EBADF)
    })
  )

  it.effect("a second open of the same version keeps the kernel's pages; opening a directory is EISDIR", () =>
    Effect.gen(function* () {
      const t = yield* harness((o) => o.put("/s3/b/d/f.bin", "abc"))
      const f = yield* t.walk("s3", "b", "d", "f.bin")
      expect(as("open", yield* ask((r) => t.h.open(f, 0, r))).flags.keepCache).toBe(false)
      expect(as("open", yield* ask((r) => t.h.open(f, 0, r))).flags.keepCache).toBe(true)
      const d = yield* t.walk("s3", "b", "d")
      expect(as("error", yield* ask((r) => t.h.open(d, 0, r))).errno).toBe(E.EISDIR)
    })
  )

  it.effect("errors map to errno: missing → ENOENT, origin 403 → EACCES, a version gone under a read → EIO", () =>
    Effect.gen(function* () {
      const t = yield* harness((o) => {
        o.put("/s3/b/secret.bin", "s")
        o.denied.add("/s3/b/secret.bin")
        o.put("/s3/b/f.bin", "abc")
      })
      const bucket = yield* t.walk("s3", "b")
      expect(as("error", yield* ask((r) => t.h.lookup(bucket, "secret.bin", r))).errno).toBe(E.EACCES)
      const f = yield* t.walk("s3", "b", "f.bin")
      const fh = as("open", yield* ask((r) => t.h.open(f, 0, r))).fh
      // Replaced at the origin behind the mount's back: the pinned read fails rather than return other bytes.
      t.origin.put("/s3/b/f.bin", "XYZ")
      expect(as("error", yield* ask((r) => t.h.read(f, fh, 0, 3, r))).errno).toBe(E.EIO)
      t.origin.objects.delete("/s3/b/f.bin")
      yield* TestClock.adjust("4 seconds")
      expect(as("error", yield* ask((r) => t.h.getattr(f, r))).errno).toBe(E.ENOENT)
    })
  )
})

describe("mount filesystem: freshness", () => {
  it.effect("an overwrite is seen after the attribute TTL: new size and mtime, pages dropped, old handle EIO, new handle new bytes", () =>
    Effect.gen(function* () {
      const t = yield* harness((o) => o.put("/s3/b/f.bin", "first"))
      const f = yield* t.walk("s3", "b", "f.bin")
      const old = as("open", yield* ask((r) => t.h.open(f, 0, r))).fh
      const before = as("attr", yield* ask((r) => t.h.getattr(f, r))).attr
      t.origin.put("/s3/b/f.bin", "second version")
      yield* TestClock.adjust("1 second")
      // Within the TTL the cached attributes stand (and the kernel was told how much of the TTL is left).
      const cached = as("attr", yield* ask((r) => t.h.getattr(f, r)))
      expect(cached.attr.size).toBe(5)
      expect(cached.attrTtl).toBeLessThanOrEqual(2)
      yield* TestClock.adjust("2 seconds")
      const after = as("attr", yield* ask((r) => t.h.getattr(f, r))).attr
      expect(after.size).toBe(14)
      expect(after.mtimeMs).toBeGreaterThan(before.mtimeMs)
      expect(t.invalidated).toEqual([`inode ${f} 0+0`])
      expect(as("error", yield* ask((r) => t.h.read(f, old, 0, 5, r))).errno).toBe(E.EIO)
      const fresh = as("open", yield* ask((r) => t.h.open(f, 0, r)))
      // getattr told the kernel the new size: the page cache is usable again, emptied.
      expect(fresh.flags).toEqual({ keepCache: false, directIo: false })
      expect((yield* t.readAll(f, fresh.fh, 14)).toString()).toBe("second version")
    })
  )

  it.effect("open always revalidates: a change inside the TTL is seen by the next open", () =>
    Effect.gen(function* () {
      const t = yield* harness((o) => o.put("/s3/b/f.bin", "one"))
      const f = yield* t.walk("s3", "b", "f.bin")
      const a = as("open", yield* ask((r) => t.h.open(f, 0, r))).fh
      as("ok", yield* ask((r) => t.h.release(f, a, r)))
      t.origin.put("/s3/b/f.bin", "three")
      const b = as("open", yield* ask((r) => t.h.open(f, 0, r)))
      // The kernel was told 3 bytes and clamps cached reads there: this handle reads around the page cache.
      expect(b.flags).toEqual({ keepCache: false, directIo: true })
      expect((yield* t.readAll(f, b.fh, 5)).toString()).toBe("three")
    })
  )

  it.effect("a delete is seen after the TTLs: getattr ENOENT, the name dropped from the kernel, lookup negative", () =>
    Effect.gen(function* () {
      const t = yield* harness((o) => {
        o.put("/s3/b/d/f.bin", "abc")
        o.put("/s3/b/d/g.bin", "g")
      })
      const d = yield* t.walk("s3", "b", "d")
      expect(names(yield* t.listDir(d))).toEqual([".", "..", "f.bin", "g.bin"])
      const f = yield* t.walk("s3", "b", "d", "f.bin")
      t.origin.objects.delete("/s3/b/d/f.bin")
      // Inside the entry TTL the listing still answers.
      expect(as("entry", yield* ask((r) => t.h.lookup(d, "f.bin", r))).attr.ino).toBe(f)
      yield* TestClock.adjust("3 seconds")
      expect(as("error", yield* ask((r) => t.h.getattr(f, r))).errno).toBe(E.ENOENT)
      expect(t.invalidated).toContain(`entry ${d}/f.bin`)
      expect(as("negative", yield* ask((r) => t.h.lookup(d, "f.bin", r)))._tag).toBe("negative")
      expect(names(yield* t.listDir(d))).toEqual([".", "..", "g.bin"])
    })
  )

  it.effect("a name dropped from a relisted directory is invalidated in the kernel", () =>
    Effect.gen(function* () {
      const t = yield* harness((o) => {
        o.put("/s3/b/d/f.bin", "abc")
        o.put("/s3/b/d/g.bin", "g")
      })
      const d = yield* t.walk("s3", "b", "d")
      yield* t.listDir(d)
      t.origin.objects.delete("/s3/b/d/g.bin")
      yield* TestClock.adjust("3 seconds")
      expect(names(yield* t.listDir(d))).toEqual([".", "..", "f.bin"])
      expect(t.invalidated).toEqual([`entry ${d}/g.bin`])
    })
  )
})
