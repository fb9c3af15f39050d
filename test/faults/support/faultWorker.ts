/**
 * Fault tests' harness: an origin stub in this process, `talon worker` as a real child
 * process (started through tsx, as test/worker/cli.test.ts does), reads over fresh
 * connections checked byte for byte, /metrics, and the unit files a cache dir holds.
 * Every process and dir is released by the test's cleanup.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { Effect, ManagedRuntime } from "effect"
import { Backend, type ObjectId } from "../../../src/core/ids.js"
import { OriginStub, type OriginStubShape } from "../../../src/origin/index.js"
import { encodeGetRangeFrame, Flags } from "../../../src/protocol/index.js"
import { decodeMeta, LAYOUT_VERSION, parsePageFileName } from "../../../src/worker/store/layout.js"
import { type Cleanup, tempDir } from "../../worker/support/harness.js"
import { connect } from "../../worker/support/rawClient.js"

const repoRoot = path.resolve(__dirname, "../../..")
const script = path.join(repoRoot, "test/worker/fixtures/workerCli.ts")

export const BUCKET = "faults"

export const objectId = (name: string): ObjectId => ({ backend: Backend.S3, bucket: BUCKET, objectPath: name })

export const startOrigin = async (cleanup: Cleanup): Promise<OriginStubShape> => {
  const root = await tempDir(cleanup, "talon-faults-origin-")
  const runtime = ManagedRuntime.make(OriginStub.layer({ root }))
  cleanup.add(() => runtime.dispose())
  const stub = await runtime.runPromise(OriginStub)
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

export interface WorkerProcess {
  readonly child: ChildProcess
  readonly dataPort: number
  readonly adminUrl: string
  readonly output: () => string
  readonly exited: Promise<number | null>
  /** SIGKILL, then wait for the exit. */
  readonly kill: () => Promise<void>
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
  const child = spawn(
    process.execPath,
    [
      "--import", "tsx", script,
      "--coordinator", "",
      "--data-addr", "127.0.0.1:0",
      "--admin-addr", "127.0.0.1:0",
      "--cache-dir", cacheDir,
      "--version-ttl-ms", "600000",
      ...flags
    ],
    {
      cwd: repoRoot,
      env: { ...process.env, TALON_S3_ENDPOINT: stub.url, TALON_S3_ACCESS_KEY_ID: "talon", TALON_S3_SECRET_ACCESS_KEY: "talon-secret" },
      stdio: ["ignore", "pipe", "pipe"]
    }
  )
  let out = ""
  child.stdout!.on("data", (d) => (out += d))
  child.stderr!.on("data", (d) => (out += d))
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)))
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    await exited
  }
  cleanup.add(kill)
  const waitFor = async (re: RegExp): Promise<RegExpExecArray> => {
    const deadline = Date.now() + 180_000
    for (;;) {
      const m = re.exec(out)
      if (m !== null) return m
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`no ${re} in the worker's output:\n${out}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  const dataPort = Number((await waitFor(/worker data listener on 127\.0\.0\.1:(\d+)/))[1])
  const adminUrl = (await waitFor(/worker admin HTTP on (http:\/\/[0-9.:]+)/))[1]!
  return {
    child,
    dataPort,
    adminUrl,
    output: () => out,
    exited,
    kill,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
      await exited
    }
  }
}

export type ReadResult = { readonly ok: true; readonly bytes: Buffer } | { readonly ok: false; readonly error: string }

/** One GetRange over a fresh connection: the payload, or why there is none (an ERROR frame, a cut reply). */
export const readRange = async (port: number, object: ObjectId, offset: number, len: number): Promise<ReadResult> => {
  let c
  try {
    c = await connect(port)
  } catch (e) {
    return { ok: false, error: `connect: ${String(e)}` }
  }
  try {
    c.send(encodeGetRangeFrame(1, { object, offset, len }))
    const f = await c.next()
    if ((f.header.flags & Flags.Error) !== 0) return { ok: false, error: Buffer.from(f.payload).toString("utf8") }
    return { ok: true, bytes: Buffer.from(f.payload) }
  } catch (e) {
    return { ok: false, error: String(e) }
  } finally {
    c.close()
  }
}

/** Value of one sample of the worker's /metrics (`name` may carry labels, e.g. `x{reason="short"}`). */
export const metric = async (w: WorkerProcess, name: string): Promise<number> => {
  const text = await (await fetch(`${w.adminUrl}/metrics`)).text()
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name} `)) return Number(line.slice(name.length + 1))
  }
  throw new Error(`no ${name} in /metrics:\n${text}`)
}

/** Polls `check` until it returns true (no fixed sleeps: the machine may be slow); throws with `what` after `ms`. */
export const eventually = async (what: string, check: () => Promise<boolean>, ms = 120_000): Promise<void> => {
  const deadline = Date.now() + ms
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

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
