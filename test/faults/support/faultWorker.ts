/**
 * Fault tests' harness: an origin stub in this process, `talon worker` as a real child process
 * (test/worker/support/workerProcess.ts), reads over fresh connections checked byte for byte,
 * /metrics, and the unit files a cache dir holds.
 * Every process and dir is released by the test's cleanup.
 */
import { randomBytes } from "node:crypto"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { Effect } from "effect"
import { Backend, type ObjectId } from "../../../src/core/ids.js"
import type { OriginStubShape } from "../../../src/origin/index.js"
import { decodeMeta, LAYOUT_VERSION, parsePageFileName } from "../../../src/worker/store/layout.js"
import { eventuallyAsync } from "../../support/eventually.js"
import type { Cleanup } from "../../worker/support/harness.js"
import { startOriginStub } from "../../worker/support/originFiles.js"
import { spawnWorker, stubCredentials, type WorkerChild } from "../../worker/support/workerProcess.js"

export const BUCKET = "faults"

export const objectId = (name: string): ObjectId => ({ backend: Backend.S3, bucket: BUCKET, objectPath: name })

export const startOrigin = async (cleanup: Cleanup): Promise<OriginStubShape> => {
  const stub = await startOriginStub(cleanup, "talon-faults-origin-")
  await fsp.mkdir(path.join(stub.root, BUCKET), { recursive: true })
  return stub
}

export const putObject = (stub: OriginStubShape, name: string, bytes: Uint8Array): Promise<void> =>
  fsp.writeFile(path.join(stub.root, BUCKET, name), bytes)

/**
 * An origin stub holding one object of `size` random bytes named `name`: the stub, the bytes,
 * the object's id, and the map `wrongUnitFiles` checks a cache dir against.
 */
export const originHolding = async (cleanup: Cleanup, name: string, size: number) => {
  const stub = await startOrigin(cleanup)
  const data = randomBytes(size)
  await putObject(stub, name, data)
  return { stub, data, object: objectId(name), objects: new Map([[name, data]]) }
}

export interface WorkerProcess extends WorkerChild {
  readonly dataPort: number
  readonly adminUrl: string
  /** SIGTERM (a clean stop), then wait for the exit. */
  readonly stop: () => Promise<void>
}

/** Starts `talon worker` standalone on ephemeral ports over `cacheDir`; resolves once both listeners are up. */
export const startWorker = async (
  cleanup: Cleanup,
  stub: OriginStubShape,
  cacheDir: string,
  flags: ReadonlyArray<string>
): Promise<WorkerProcess> => {
  const args = [
    "--coordinator", "",
    "--data-addr", "127.0.0.1:0",
    "--admin-addr", "127.0.0.1:0",
    "--cache-dir", cacheDir,
    "--version-ttl-ms", "600000",
    ...flags
  ]
  const w = spawnWorker(cleanup, args, { TALON_S3_ENDPOINT: stub.url, ...stubCredentials }, 180_000)
  const dataPort = Number((await w.waitFor(/worker data listener on 127\.0\.0\.1:(\d+)/))[1])
  const adminUrl = (await w.waitFor(/worker admin HTTP on (http:\/\/[0-9.:]+)/))[1]!
  return {
    ...w,
    dataPort,
    adminUrl,
    stop: async () => {
      if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGTERM")
      await w.exited
    }
  }
}

export { readRange, type ReadResult } from "../../worker/support/rawClient.js"

/** Value of one sample of the worker's /metrics (`name` may carry labels, e.g. `x{reason="short"}`). */
export const metric = async (w: WorkerProcess, name: string): Promise<number> => {
  const text = await (await fetch(`${w.adminUrl}/metrics`)).text()
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name} `)) return Number(line.slice(name.length + 1))
  }
  throw new Error(`no ${name} in /metrics:\n${text}`)
}

/** Polls `check` until it returns true (no fixed sleeps: the machine may be slow); throws with `what` after `ms`. */
export const eventually = (what: string, check: () => Promise<boolean>, ms = 120_000): Promise<void> =>
  eventuallyAsync(
    async () => {
      if (!(await check())) throw new Error("not yet")
    },
    { what, within: ms, every: "100 millis" }
  )

export interface UnitFile {
  readonly file: string
  /** First object byte the file holds. */
  readonly objectOffset: number
  readonly objectPath: string
}

/** Every unit file (page or whole block) in a cache dir, with where its bytes belong in its object. */
export const unitFiles = async (cacheDir: string): Promise<Array<UnitFile>> => {
  const out: Array<UnitFile> = []
  const top = path.join(cacheDir, LAYOUT_VERSION)
  for (const shard of await fsp.readdir(top).catch(() => [])) {
    for (const name of await fsp.readdir(path.join(top, shard))) {
      const dir = path.join(top, shard, name)
      const meta = decodeMeta(await fsp.readFile(path.join(dir, "meta"), "utf8").catch(() => ""))
      if (meta === undefined) continue
      for (const f of await fsp.readdir(dir)) {
        const index = f === "block" ? 0 : parsePageFileName(f)
        if (index === undefined) continue
        out.push({ file: path.join(dir, f), objectOffset: meta.id.offset + index * meta.pageSize, objectPath: meta.id.object.objectPath })
      }
    }
  }
  return out.sort((a, b) => a.objectOffset - b.objectOffset)
}

/** Unit files whose bytes differ from the object's at their place (none on a healthy cache dir). */
export const wrongUnitFiles = async (cacheDir: string, objects: ReadonlyMap<string, Uint8Array>): Promise<Array<string>> => {
  const wrong: Array<string> = []
  for (const u of await unitFiles(cacheDir)) {
    const data = await fsp.readFile(u.file)
    const want = objects.get(u.objectPath)
    if (want === undefined) wrong.push(`${u.file}: no object ${u.objectPath}`)
    else if (data.length === 0 || !data.equals(want.subarray(u.objectOffset, u.objectOffset + data.length))) {
      wrong.push(`${u.file}: ${data.length} bytes differ from the object's at ${u.objectOffset}`)
    }
  }
  return wrong
}

export const resetOrigin = (stub: OriginStubShape) =>
  Effect.runPromise(Effect.zipRight(stub.resetStats(), stub.setFaults({ bandwidthBytesPerSec: 0, latency: { kind: "none" } })))

export const originBytes = async (stub: OriginStubShape): Promise<number> => (await Effect.runPromise(stub.stats())).bytesServed
