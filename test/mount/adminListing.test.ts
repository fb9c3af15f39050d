/**
 * Directory listings past Talon's 10,000-object reply, with the origin's mtimes: the
 * coordinator's paginated JSON listing (GET /api/v1/objects) over the origin stub's S3 API,
 * read by the mount's filesystem handlers; and the Talon-wire fallback when no admin API answers.
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { BackendStore, type ListOptions } from "../../src/backend/BackendStore.js"
import * as Router from "../../src/backend/Router.js"
import { makeTalonClient, TalonClient } from "../../src/client/TalonClient.js"
import { makeFilesystem } from "../../src/mount/Filesystem.js"
import { ROOT_INO } from "../../src/mount/InodeTable.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import type { ObjectListingPage } from "../../src/protocol/objectListing.js"
import { deadAddress } from "../support/deadAddress.js"
import { patientCoordinator } from "../support/loopbackCoordinator.js"
import { scopedTempDir } from "../support/scopedTempDir.js"
import { as, ask } from "./fixtures/replies.js"

const KEYS = 12_345
const WHEN = Date.UTC(2021, 2, 4, 5, 6, 7)

/**
 * The stub's S3 API, except that `many/` holds KEYS keys paged like S3 (the stub walks its
 * directory for every page, which would make this test about the stub's speed).
 */
const withManyKeys = (real: Layer.Layer<BackendStore>) =>
  Layer.effect(
    BackendStore,
    Effect.map(BackendStore, (store) => ({
      ...store,
      list: (bucket: string, options: ListOptions = {}) => {
        if (options.prefix !== "many/") return store.list(bucket, options)
        const start = Number(options.token ?? "0")
        const end = Math.min(KEYS, start + Math.min(options.maxKeys ?? 1000, 1000))
        const objects = Array.from({ length: end - start }, (_, j) => ({ key: `many/k${String(start + j).padStart(5, "0")}`, size: 1, version: "v", lastModified: new Date(WHEN) }))
        return Effect.succeed({ objects, commonPrefixes: [], nextToken: end < KEYS ? String(end) : undefined })
      }
    }))
  ).pipe(Layer.provide(real))

const world = Effect.gen(function* () {
  const dir = yield* scopedTempDir("talon-mount-list-")
  const bucket = path.join(dir, "origin", "bkt")
  yield* Effect.promise(async () => {
    await fs.mkdir(path.join(bucket, "dated", "sub"), { recursive: true })
    await fs.writeFile(path.join(bucket, "dated", "old.bin"), "old bytes")
    await fs.utimes(path.join(bucket, "dated", "old.bin"), WHEN / 1000, WHEN / 1000)
    await fs.writeFile(path.join(bucket, "dated", "sub", "deep.bin"), "deep")
  })
  const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
  const coordinator = yield* patientCoordinator(withManyKeys(Router.layerLocal(origin.url)))
  const client = yield* makeTalonClient({ coordinator: coordinator.controlAddress, statTtlMs: 0 })
  const mountOver = (coordinatorAdmin: ReadonlyArray<string>, coordinatorControlPorts?: ReadonlyArray<number>) =>
    makeFilesystem({
      exposed: [{ backend: "s3", bucket: "bkt" }],
      attrTtlMs: 60_000,
      entryTtlMs: 60_000,
      negativeTtlMs: 1000,
      maxInodes: 100_000,
      coordinatorAdmin,
      ...(coordinatorControlPorts === undefined ? {} : { coordinatorControlPorts })
    }).pipe(
      Effect.provideService(TalonClient, client)
    )
  return { coordinator, mountOver }
})

type Fs = Effect.Effect.Success<ReturnType<Effect.Effect.Success<typeof world>["mountOver"]>>

const lookup = (fs: Fs, parent: number, name: string) => Effect.map(ask((r) => fs.handlers.lookup(parent, name, r)), (a) => as("entry", a).attr)

/** Every name readdir gives for `ino`, following its offsets to the end; or the errno it fails with. */
const readAll = (fs: Fs, ino: number) =>
  Effect.gen(function* () {
    const opened = yield* ask((r) => fs.handlers.opendir(ino, r))
    if (opened._tag === "error") return opened.errno
    const fh = as("open", opened).fh
    const names: Array<string> = []
    let offset = 0
    for (;;) {
      const a = yield* ask((r) => fs.handlers.readdir(ino, fh, offset, r))
      if (a._tag === "error") return a.errno
      const batch = as("entries", a).entries
      if (batch.length === 0) return names
      for (const e of batch) names.push(e.name)
      offset = batch[batch.length - 1]!.nextOffset
    }
  })

const bucketIno = (fs: Fs) => Effect.flatMap(lookup(fs, ROOT_INO, "s3"), (s3) => Effect.map(lookup(fs, s3.ino, "bkt"), (b) => b.ino))

describe("mount listings through the coordinator's admin API", () => {
  it.live(`a directory of ${KEYS} keys lists fully; ls -l's mtime is the origin's; bad queries are refused with a reason`, () =>
    Effect.gen(function* () {
      const { coordinator, mountOver } = yield* world
      const fs = yield* mountOver([coordinator.adminAddress])
      const b = yield* bucketIno(fs)
      const many = yield* lookup(fs, b, "many")
      const names = yield* readAll(fs, many.ino)
      expect(Array.isArray(names) && names.length).toBe(KEYS + 2)
      if (!Array.isArray(names)) return
      expect(new Set(names).size).toBe(KEYS + 2)
      expect(names.slice(2, 4)).toEqual(["k00000", "k00001"])
      expect(names[names.length - 1]).toBe(`k${KEYS - 1}`)
      const dated = yield* lookup(fs, b, "dated")
      expect(yield* readAll(fs, dated.ino)).toEqual([".", "..", "old.bin", "sub"])
      const old = yield* lookup(fs, dated.ino, "old.bin")
      expect(old.mtimeMs).toBe(WHEN)
      expect(old.size).toBe(9)
      // Opening stats the object (a Talon-wire answer, no time in it): the origin's mtime stands.
      as("open", yield* ask((r) => fs.handlers.open(old.ino, 0, r)))
      expect(as("attr", yield* ask((r) => fs.handlers.getattr(old.ino, r))).attr.mtimeMs).toBe(WHEN)

      const get = (q: string) =>
        Effect.promise(async () => {
          const res = await fetch(`http://${coordinator.adminAddress}/api/v1/objects?${q}`)
          return { status: res.status, body: (await res.json()) as ObjectListingPage & { error?: string } }
        })
      const first = yield* get("prefix=/s3/bkt/dated/&delimiter=/&limit=1")
      expect(first.status).toBe(200)
      expect(first.body.control).toBe(coordinator.controlAddress)
      expect(first.body.entries).toEqual([{ path: "/s3/bkt/dated/old.bin", size: 9, version: expect.any(String), lastModified: new Date(WHEN).toISOString() }])
      expect(first.body.next).not.toBeNull()
      const second = yield* get(`prefix=/s3/bkt/dated/&delimiter=/&limit=1&cursor=${encodeURIComponent(first.body.next!)}`)
      expect([second.body.entries, second.body.prefixes, second.body.next]).toEqual([[], ["/s3/bkt/dated/sub/"], null])
      expect(yield* get("prefix=/s3/bkt/../x")).toMatchObject({ status: 400, body: { error: expect.stringMatching(/"\." or "\.\." component/) } })
      expect(yield* get("prefix=/s3/bkt/&limit=5000")).toMatchObject({ status: 400, body: { error: expect.stringMatching(/limit must be an integer in 1\.\.1000/) } })
      expect((yield* get("prefix=/s3/no-such-bucket/")).status).toBe(404)
      expect(yield* get("")).toMatchObject({ status: 400, body: { error: expect.stringMatching(/prefix is required/) } })
    }).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Error))
  )

  it.live("no admin API answering: listings fall back to the Talon wire (its 10,000-object bound, first-seen mtimes)", () =>
    Effect.gen(function* () {
      const { mountOver } = yield* world
      const fs = yield* mountOver([yield* deadAddress])
      const b = yield* bucketIno(fs)
      const dated = yield* lookup(fs, b, "dated")
      expect(yield* readAll(fs, dated.ino)).toEqual([".", "..", "old.bin", "sub"])
      expect((yield* lookup(fs, dated.ino, "old.bin")).mtimeMs).not.toBe(WHEN)
      const many = yield* lookup(fs, b, "many")
      expect(yield* readAll(fs, many.ino)).toBe(5)
    }).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Error))
  )

  it.live("a guessed admin address answered by another cluster's coordinator is not used: the listing comes over the wire", () =>
    Effect.gen(function* () {
      const { coordinator, mountOver } = yield* world
      const ownPort = Number(coordinator.controlAddress.split(":").pop())
      const fs = yield* mountOver([coordinator.adminAddress], [ownPort + 1])
      const b = yield* bucketIno(fs)
      const dated = yield* lookup(fs, b, "dated")
      expect(yield* readAll(fs, dated.ino)).toEqual([".", "..", "old.bin", "sub"])
      // The admin page (with the origin's mtime) was refused; the wire's listing has none.
      expect((yield* lookup(fs, dated.ino, "old.bin")).mtimeMs).not.toBe(WHEN)
      const same = yield* mountOver([coordinator.adminAddress], [ownPort])
      const dated2 = yield* lookup(same, yield* bucketIno(same), "dated")
      yield* readAll(same, dated2.ino)
      expect((yield* lookup(same, dated2.ino, "old.bin")).mtimeMs).toBe(WHEN)
    }).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Error))
  )
})
