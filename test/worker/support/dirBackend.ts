/**
 * A BackendStore over a local directory (`<root>/<bucket>/<key>`), with
 * request and byte counters, for worker tests that must count origin traffic.
 * The version is the MD5 of the content, like an S3 ETag of a simple PUT; a range read pinned
 * to a version the file no longer has fails with 412, as an If-Match GET does.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Effect, Layer, Stream } from "effect"
import {
  BackendNotFound,
  BackendRequestError,
  BackendStore,
  type BackendStoreShape
} from "../../../src/backend/BackendStore.js"
import type { ObjectId } from "../../../src/core/ids.js"
import { objectIdToUri } from "../../../src/core/objectId.js"
import { type Cleanup, startWorker, tempDir } from "./harness.js"
import { putObjectAt } from "./originFiles.js"

export interface OriginCounters {
  stats: number
  gets: number
  bytes: number
  /** Every range GET as [offset, length]. */
  readonly ranges: Array<[number, number]>
}

export const makeDirBackend = (root: string, chunk = 16 * 1024) => {
  const counters: OriginCounters = { stats: 0, gets: 0, bytes: 0, ranges: [] }
  const file = (o: ObjectId) => path.join(root, o.bucket, o.objectPath)
  const readAll = (o: ObjectId) =>
    Effect.tryPromise({
      try: () => fs.readFile(file(o)),
      catch: (e) =>
        (e as { code?: string }).code === "ENOENT"
          ? new BackendNotFound({ object: objectIdToUri(o) })
          : new BackendRequestError({ object: objectIdToUri(o), operation: "GET", retryable: false, detail: String(e) })
    })
  const etag = (b: Uint8Array) => createHash("md5").update(b).digest("hex")
  const shape: BackendStoreShape = {
    stat: (o) =>
      Effect.suspend(() => {
        counters.stats++
        return readAll(o).pipe(Effect.map((b) => ({ size: b.length, version: etag(b) })))
      }),
    getRange: (o, offset, length, options) =>
      Stream.unwrap(
        Effect.suspend(() => {
          counters.gets++
          counters.ranges.push([offset, length])
          return readAll(o).pipe(
            Effect.filterOrFail(
              (b) => options?.version === undefined || etag(b) === options.version,
              () =>
                new BackendRequestError({ object: objectIdToUri(o), operation: "GET", status: 412, retryable: false, detail: "If-Match failed" })
            ),
            Effect.map((b) => {
              const slice = b.subarray(offset, Math.min(b.length, offset + length))
              const pieces: Array<Uint8Array> = []
              for (let i = 0; i < slice.length; i += chunk) pieces.push(slice.subarray(i, i + chunk))
              return Stream.fromIterable(pieces).pipe(
                Stream.tap((p) => Effect.sync(() => (counters.bytes += p.length)))
              )
            })
          )
        })
      ),
    list: () => Effect.die("not used"),
    put: () => Effect.die("not used"),
    delete: () => Effect.die("not used")
  }
  return { counters, layer: Layer.succeed(BackendStore, shape) }
}

/**
 * A worker (startWorker's defaults, a temp cache dir) over a dir backend in a temp dir: `put`
 * writes an object of bucket `bkt`, `origin` counts what the worker asked of it.
 */
export const startDirWorker = async (
  cleanup: Cleanup,
  settings: Parameters<typeof startWorker>[2],
  mode?: Parameters<typeof startWorker>[3],
  plane?: Parameters<typeof startWorker>[4]
) => {
  const originRoot = await tempDir(cleanup, "talon-origin-")
  const origin = makeDirBackend(originRoot)
  const cache = await tempDir(cleanup, "talon-cache-")
  const w = await startWorker(cleanup, origin.layer, { cacheDirs: [cache], ...settings }, mode, plane)
  const put = (key: string, bytes: Uint8Array) => putObjectAt(originRoot, "bkt", key, bytes)
  return { w, port: w.worker.dataPort, put, origin: origin.counters, cache }
}

/** Deterministic pseudo-random bytes. */
export const pattern = (n: number, seed = 1): Buffer => {
  const out = Buffer.alloc(n)
  let x = seed >>> 0 || 1
  for (let i = 0; i < n; i++) {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    out[i] = x & 0xff
  }
  return out
}
