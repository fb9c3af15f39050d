/**
 * An object overwritten at the origin while it is read: a real origin stub, coordinator and
 * workers on loopback ports, a writer that PUTs new versions (same size, smaller, larger), and
 * a checker that tells whether a body is exactly one version's bytes (and if not, where each
 * run of it came from).
 */
import { randomBytes } from "node:crypto"
import * as path from "node:path"
import { Duration, Effect, Layer } from "effect"
import type { BackendStore } from "../../src/backend/BackendStore.js"
import * as Router from "../../src/backend/Router.js"
import { OriginStub, type OriginStubShape } from "../../src/origin/OriginStub.js"
import { Worker } from "../../src/worker/Worker.js"
import { raw } from "../origin/fixtures/testOrigin.js"
import { patientCoordinator } from "./loopbackCoordinator.js"
import { scopedTempDir } from "./scopedTempDir.js"

export const tempDir = scopedTempDir("talon-overwrite-")

export interface ClusterOptions {
  readonly workers: number
  readonly blockSize: number
  readonly pageSize: number
  readonly versionTtlMs: number
  /** The workers' data plane (default portable). */
  readonly dataPlane?: "portable" | "native" | "auto"
}

export interface Cluster {
  readonly dir: string
  readonly origin: OriginStubShape
  readonly backend: Layer.Layer<BackendStore>
  readonly coordinator: string
}

/** Worker `w<i>` of a loopback test cluster: ports 0, its cache under `dir`, portable plane unless said. */
export const loopbackWorker = (
  dir: string,
  coordinator: string,
  backend: Layer.Layer<BackendStore>,
  i: number,
  o: Pick<ClusterOptions, "blockSize" | "pageSize" | "dataPlane"> & { readonly versionTtlMs?: number }
) =>
  Worker.layerSettings({
    id: `w${i}`,
    dataAddress: "127.0.0.1:0",
    adminAddress: "127.0.0.1:0",
    coordinator,
    cacheDirs: [path.join(dir, `w${i}`)],
    blockSize: o.blockSize,
    pageSize: o.pageSize,
    dataPlane: o.dataPlane ?? "portable",
    ...(o.versionTtlMs === undefined ? {} : { versionTtlMs: o.versionTtlMs })
  }).pipe(Layer.provide(backend))

/** Origin stub, coordinator and `workers` in-process workers (portable plane), all scoped. */
export const startCluster = (o: ClusterOptions) =>
  Effect.gen(function* () {
    const dir = yield* tempDir
    const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
    const backend = Router.layerLocal(origin.url)
    const coordinator = yield* patientCoordinator(backend)
    for (let i = 0; i < o.workers; i++) {
      yield* Layer.build(loopbackWorker(dir, coordinator.controlAddress, backend, i, o))
    }
    yield* coordinator.members.pipe(
      Effect.delay("20 millis"),
      Effect.repeat({ until: (m) => m.length === o.workers }),
      Effect.timeout(Duration.seconds(30))
    )
    return { dir, origin, backend, coordinator: coordinator.controlAddress } satisfies Cluster
  })

/** A cluster whose origin has the bucket `bucket`, and the log that writes `bucket/obj.bin`'s versions there. */
export const clusterWithVersionLog = (o: ClusterOptions) =>
  Effect.gen(function* () {
    const cluster = yield* startCluster(o)
    yield* Effect.promise(() => raw(cluster.origin.url, "PUT", "/bucket"))
    return { cluster, log: new VersionLog(cluster.origin.url, "bucket", "obj.bin") }
  })

export interface Version {
  readonly etag: string
  readonly bytes: Buffer
}

/** Every version written so far, in order, by ETag (as the origin quotes it). */
export class VersionLog {
  readonly versions: Array<Version> = []
  readonly #byEtag = new Map<string, Version>()

  constructor(
    readonly originUrl: string,
    readonly bucket: string,
    readonly key: string
  ) {}

  async write(bytes: Buffer): Promise<Version> {
    const r = await raw(this.originUrl, "PUT", `/${this.bucket}/${this.key}`, {}, bytes)
    if (r.status !== 200) throw new Error(`PUT of a ${bytes.length}-byte version answered ${r.status}: ${r.body.toString()}`)
    const etag = String(r.headers.etag)
    const v = { etag, bytes }
    this.versions.push(v)
    this.#byEtag.set(unquote(etag), v)
    return v
  }

  byEtag(etag: string): Version | undefined {
    return this.#byEtag.get(unquote(etag))
  }
}

const unquote = (t: string) => t.replace(/^"|"$/g, "")

/** Version sizes around `base`: the same size, smaller and larger, in turn. */
export const sizeCycle = (base: number, blockSize: number): ReadonlyArray<number> => [
  base,
  base,
  base - 2 * blockSize - 777,
  base + blockSize + 4321,
  base - 3 * blockSize + 5,
  base + 2 * blockSize + 99
]

/** Content unique to one version (random bytes), so a run of another version's bytes cannot pass as this one's. */
export const versionBytes = (size: number): Buffer => randomBytes(size)

/** What `[offset, offset+length)` clamped at the end reads from `v`. */
export const expectedSlice = (v: Version, offset: number, length: number): Buffer =>
  v.bytes.subarray(Math.min(offset, v.bytes.length), Math.min(offset + length, v.bytes.length))

/** Index of the version whose bytes `body` is exactly (a read of `[offset, offset+length)`), or -1. */
export const matchingVersion = (log: VersionLog, offset: number, length: number, body: Uint8Array): number => {
  const b = Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  return log.versions.findIndex((v) => expectedSlice(v, offset, length).equals(b))
}

/** Where the runs of a wrong body came from: per 4 KiB run, the version and object offset holding those bytes. */
export const explain = (log: VersionLog, offset: number, body: Uint8Array): string => {
  const b = Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  const RUN = 4096
  const parts: Array<string> = []
  let last = ""
  for (let at = 0; at < b.length; at += RUN) {
    const run = b.subarray(at, Math.min(b.length, at + RUN))
    let where = "unknown bytes"
    for (let i = 0; i < log.versions.length; i++) {
      const v = log.versions[i]!.bytes
      const o = offset + at
      if (v.subarray(o, o + run.length).equals(run)) {
        where = `v${i}@same`
        break
      }
      const found = v.indexOf(run.subarray(0, Math.min(64, run.length)))
      if (found >= 0) where = `v${i}@${found - o >= 0 ? "+" : ""}${found - o}`
    }
    if (where !== last) parts.push(`[${at}…] ${where}`)
    last = where
  }
  return `${b.length} bytes at offset ${offset}: ${parts.join(", ")}`
}

/**
 * Writes `count` new versions, one every `everyMs` at the soonest and only once `progressed()`
 * says enough reads completed since the previous write (so reads interleave with writes however
 * slow the machine is), giving up on that wait after `deadlineMs` in all. Resolves with how many
 * versions it wrote.
 */
export const overwrite = async (
  log: VersionLog,
  sizes: ReadonlyArray<number>,
  o: { readonly count: number; readonly everyMs: number; readonly deadlineMs: number; readonly progressed?: () => boolean }
): Promise<number> => {
  const deadline = Date.now() + o.deadlineMs
  let n = 0
  while (n < o.count && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, o.everyMs))
    while (o.progressed !== undefined && !o.progressed() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    await log.write(versionBytes(sizes[log.versions.length % sizes.length]!))
    n++
  }
  return n
}
