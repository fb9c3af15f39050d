/** Servers the loadgen tests drive: the C reference server (tools/ref) and a scriptable JS one. */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll } from "vitest"
import { buildRefTools } from "../../tools/ref/build.js"
import { listenLoopback } from "../support/loopbackServer.js"

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..")

export interface Scratch {
  readonly dir: string
  readonly blob: string
  readonly bytes: Buffer
  /** talon-ref-server and talon-ref-load, built from tools/ref. */
  readonly server: string
  readonly load: string
  readonly cleanup: () => void
}

/** A temp dir with a random blob and freshly built C reference tools. */
export const makeScratch = (blobBytes: number): Scratch => {
  const dir = mkdtempSync(join(tmpdir(), "loadgen-test-"))
  const tools = buildRefTools(join(dir, "bin"))
  const bytes = randomBytes(blobBytes)
  const blob = join(dir, "blob")
  writeFileSync(blob, bytes)
  return {
    dir,
    blob,
    bytes,
    server: tools.server,
    load: tools.load,
    cleanup: () => rmSync(dir, { recursive: true, force: true })
  }
}

export interface Running {
  readonly port: number
  readonly pid: number
  readonly stop: () => Promise<void>
}

/** Starts talon-ref-server on an ephemeral port and reads the port from its banner line. */
export const startRefServer = (bin: string, file: string, extra: ReadonlyArray<string> = []): Promise<Running> =>
  new Promise((resolvePort, reject) => {
    const child: ChildProcess = spawn(bin, ["--listen", "127.0.0.1:0", "--file", file, ...extra], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    const stop = () =>
      new Promise<void>((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done()
        child.once("exit", () => done())
        child.kill("SIGTERM")
      })
    child.once("error", reject)
    child.once("exit", (code) => reject(new Error(`talon-ref-server exited (${code}) before listening: ${out}`)))
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString()
      const m = /listening on 127\.0\.0\.1:(\d+) pid (\d+)/.exec(out)
      if (m) resolvePort({ port: Number(m[1]), pid: Number(m[2]), stop })
    })
  })

export interface ProcessRun {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs `command args` in the repo to its exit and collects its output; SIGKILLed after `killAfterMs`, never left behind. */
export const runProcess = (command: string, args: ReadonlyArray<string>, killAfterMs: number): Promise<ProcessRun> =>
  new Promise((resolve) => {
    const child = spawn(command, args, { cwd: repoRoot })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), killAfterMs)
    child.on("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })

/**
 * A test file's scratch dir (a `blobBytes` blob, the tools built) and talon-ref-server over it,
 * started before the file's tests and stopped after them; read the fields inside tests.
 */
export const refServerPerFile = (blobBytes: number): { scratch: Scratch; server: Running } => {
  const ref = {} as { scratch: Scratch; server: Running }
  beforeAll(async () => {
    ref.scratch = makeScratch(blobBytes)
    ref.server = await startRefServer(ref.scratch.server, ref.scratch.blob)
  }, 120_000)
  afterAll(async () => {
    await ref.server?.stop()
    ref.scratch?.cleanup()
  })
  return ref
}

export interface FakeOptions {
  /** Bytes served for a range, or undefined to answer nothing (a silent server). */
  readonly answer?: (offset: number, len: number) => Buffer | undefined
  /** Answer each received batch of requests in reverse order (replies out of order). */
  readonly reverse?: boolean
  /** Lie about the length: header promises `len + lengthDelta` bytes and sends that many. */
  readonly lengthDelta?: number
  /**
   * How replies meet the socket: "split" writes reply n in two parts cut at byte
   * n mod (frame length + 1), the second part a moment later, so a reader sees
   * every cut of header and body; "coalesce" writes each batch's replies at once,
   * so one read holds several replies. Default: one write per reply.
   */
  readonly chunking?: "split" | "coalesce"
}

export interface FakeServer extends Running {
  readonly offsets: Array<number>
  readonly stats: { outOfOrder: number; requests: number; replies: number }
}

const splitQueue = new WeakMap<net.Socket, Array<Buffer>>()
const pumping = new WeakSet<net.Socket>()

/** Writes queued parts one at a time, a timer tick apart, so consecutive parts rarely share a read. */
const pump = (socket: net.Socket, queue: Array<Buffer>): void => {
  if (pumping.has(socket)) return
  pumping.add(socket)
  const next = (): void => {
    const part = queue.shift()
    if (part === undefined || socket.destroyed) {
      pumping.delete(socket)
      return
    }
    if (part.length > 0) socket.write(part)
    setTimeout(next, 1)
  }
  next()
}

/** A Talon GetRange server in plain JS, for behaviour the reference server does not have (reordering, lies, silence). */
export const startFake = (opts: FakeOptions): Promise<FakeServer> => {
  const offsets: Array<number> = []
  const stats = { outOfOrder: 0, requests: 0, replies: 0 }
  const server = net.createServer((socket) => {
    socket.on("error", () => {})
    let pending = Buffer.alloc(0)
    socket.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk])
      const batch: Array<{ id: number; offset: number; len: number }> = []
      while (pending.length >= 16) {
        const bodyLen = pending.readUInt32BE(12)
        if (pending.length < 16 + bodyLen) break
        const body = pending.subarray(16, 16 + bodyLen)
        const id = pending.readUInt32BE(8)
        const offset = Number(body.readBigUInt64LE(bodyLen - 16))
        const len = Number(body.readBigUInt64LE(bodyLen - 8))
        batch.push({ id, offset, len })
        offsets.push(offset)
        stats.requests++
        pending = pending.subarray(16 + bodyLen)
      }
      if (opts.reverse && batch.length > 1) {
        batch.reverse()
        stats.outOfOrder += batch.length - 1
      }
      const frames: Array<Buffer> = []
      for (const r of batch) {
        const payload = opts.answer?.(r.offset, r.len + (opts.lengthDelta ?? 0))
        if (payload === undefined) continue
        const h = Buffer.alloc(16)
        h.writeUInt16BE(0x544c, 0)
        h[2] = 1
        h[3] = 2
        h.writeUInt32BE(r.id, 8)
        h.writeUInt32BE(payload.length, 12)
        frames.push(Buffer.concat([h, payload]))
      }
      if (opts.chunking === "coalesce") {
        if (frames.length > 0) socket.write(Buffer.concat(frames))
      } else if (opts.chunking === "split") {
        // Each part goes out as its own segment (no Nagle); the pause lets the reader take it alone.
        socket.setNoDelay(true)
        const queue = splitQueue.get(socket) ?? []
        splitQueue.set(socket, queue)
        for (const f of frames) {
          const cut = stats.replies++ % (f.length + 1)
          queue.push(f.subarray(0, cut), f.subarray(cut))
        }
        pump(socket, queue)
      } else {
        for (const f of frames) socket.write(f)
      }
    })
  })
  return listenLoopback(server).then(({ port, close }) => ({ port, pid: process.pid, offsets, stats, stop: close }))
}

export interface RawBytes {
  readonly socket: net.Socket
  /** Everything received so far. */
  readonly received: () => Buffer
  /** Resolves with the first `n` bytes received; rejects if the connection closes first. */
  readonly take: (n: number) => Promise<Buffer>
  /** Resolves with every byte received once the server has closed the connection. */
  readonly closed: Promise<Buffer>
}

/** A loopback connection that keeps every received byte, for byte-exact checks of replies. */
export const rawBytes = (port: number): Promise<RawBytes> =>
  new Promise((resolveConn, reject) => {
    const socket = net.connect({ port, host: "127.0.0.1" })
    let got = Buffer.alloc(0)
    let ended = false
    const waiters: Array<() => void> = []
    const wake = () => waiters.splice(0).forEach((w) => w())
    socket.on("data", (d: Buffer) => {
      got = Buffer.concat([got, d])
      wake()
    })
    socket.on("error", () => {})
    const closed = new Promise<Buffer>((r) =>
      socket.on("close", () => {
        ended = true
        wake()
        r(got)
      })
    )
    const take = (n: number): Promise<Buffer> =>
      new Promise((res, rej) => {
        const check = () => {
          if (got.length >= n) res(got.subarray(0, n))
          else if (ended) rej(new Error(`connection closed after ${got.length} of ${n} bytes`))
          else waiters.push(check)
        }
        check()
      })
    socket.once("error", reject)
    socket.once("connect", () => resolveConn({ socket, received: () => got, take, closed }))
  })
