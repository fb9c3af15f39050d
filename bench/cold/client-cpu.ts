/**
 * The reader process's CPU per byte of warm reads through TalonClient against a real local
 * cluster (origin stub, coordinator, workers: each its own process), next to the floor: a raw
 * `net.Socket` speaking the binary protocol to the worker holding the block (pipelined
 * GetPinnedRange, reads into one reused buffer). Every arm checks every byte against the
 * expected content as it arrives (one memcmp per chunk), so the check's cost is in every arm.
 *
 * Arms, each over the whole warm object: `raw` (the floor), `stream` (`readStream`, one slice per
 * reader), `read` (`read` of consecutive 8 MiB pieces drained by the readers: read ahead of),
 * `into` (the same pieces by `readInto`, each reader reusing one buffer) and
 * `rand` (`read` of shuffled 1–8 MiB ranges, as cold-bench's random pattern: straight to the
 * workers), by 1 and 8 readers. Per
 * arm and round: ns of this process's CPU (process.cpuUsage, user + system) per byte, the
 * workers' ns per byte, MB/s, mark-compact and scavenge GCs. Arms rotate order each round.
 *
 * `--clients` adds TalonClients with other settings beside the default one, so settings are
 * compared in one process, paired: `--clients "deep:readAheadBytes=128M,connectionsPerWorker=8"`
 * and arms `stream,stream@deep` (an arm without `@` uses the default client).
 *
 *   npx tsx bench/cold/client-cpu.ts [--size 256M] [--rounds 2] [--readers 1,8] [--arms raw,stream,read]
 *   node --cpu-prof --import tsx bench/cold/client-cpu.ts --arms stream --readers 1
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PerformanceObserver, constants, performance } from "node:perf_hooks"
import { Effect } from "effect"
import type { ObjectId } from "../../src/core/ids.js"
import { makeTalonClient, type TalonClientShape } from "../../src/client/TalonClient.js"
import { encodeGetPinnedRangeFrame, HEADER_LEN, readHeader } from "../../src/protocol/index.js"
import { parseHostPort } from "../../src/transport/address.js"
import { sampleBytes } from "../../src/origin/seed.js"
import { buildDist, stubBackendEnv, talonBin } from "../lib/build.js"
import { Flag, parseFlags, runDriver } from "../lib/driver.js"
import * as Proc from "../lib/proc.js"
import { MiB, type Piece, RangeCheck, sequentialSlices, shuffledRanges, parts } from "./plan.js"
import { clientRead, clientStream, ColdBenchFailed, type ReadPiece, runReaders } from "./readers.js"
import { parseIntList } from "../../src/loadgen/options.js"
import { cpuDelta, cpuSnapshot } from "./cpu.js"

const flags = await parseFlags("client-cpu", "The reader process's CPU per byte of warm reads through TalonClient, against a raw binary-protocol reader.", {
  size: Flag.size("size", "256M", "Object size."),
  rounds: Flag.number("rounds", 2, "Rounds; the arms' order rotates each round."),
  readers: Flag.text("readers", "1,8", "Reader counts, comma-separated."),
  arms: Flag.text("arms", "raw,stream,read", "Arms, comma-separated: raw, stream, read, into, rand."),
  workers: Flag.number("workers", 2, "Workers in the cluster."),
  clients: Flag.text("clients", "", "More clients, `name:setting=value,...;name2:...` (sizes take K/M/G); arms name them as `stream@name`.")
})

/** `--clients`: named option overrides, numbers with an optional K/M/G suffix, else text. */
const clientVariants = (spec: string): Record<string, Record<string, unknown>> => {
  const out: Record<string, Record<string, unknown>> = {}
  for (const entry of spec.split(";").map((e) => e.trim()).filter((e) => e !== "")) {
    const [name, settings = ""] = entry.split(":", 2) as [string, string?]
    const options: Record<string, unknown> = {}
    for (const kv of settings.split(",").filter((x) => x !== "")) {
      const [k, v = ""] = kv.split("=", 2) as [string, string?]
      const m = /^(\d+)([KMG])?$/i.exec(v.trim())
      options[k.trim()] = m === null ? v.trim() : Number(m[1]) * ({ K: 1024, M: MiB, G: 1024 * MiB }[(m[2] ?? "").toUpperCase()] ?? 1)
    }
    out[name.trim()] = options
  }
  return out
}

const BUCKET = "clientcpu"
const PIECE = 8 * MiB
const RAW_IN_FLIGHT = 4

let majorGcs = 0
let minorGcs = 0
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = ((e as { detail?: unknown }).detail as { kind?: number } | undefined)?.kind
    if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) majorGcs++
    else if (kind === constants.NODE_PERFORMANCE_GC_MINOR) minorGcs++
  }
}).observe({ entryTypes: ["gc"] })

/**
 * The floor: one connection, `RAW_IN_FLIGHT` pinned 8 MiB requests pipelined, the kernel reading
 * into one reused buffer, headers parsed in place, body bytes compared where they landed.
 */
const rawReader = (address: string, object: ObjectId, version: string, expected: Uint8Array): ReadPiece => (piece) =>
  Effect.async<void, ColdBenchFailed>((resume) => {
    const target = parseHostPort(address)!
    const reqs = parts(piece, PIECE)
    const buf = Buffer.allocUnsafeSlow(256 * 1024)
    const hdr = Buffer.alloc(HEADER_LEN)
    let sent = 0
    let answered = 0
    let hdrFill = 0
    let body = -1 // bytes of the current body still to come; -1 between frames
    let check: RangeCheck | undefined
    let settled = false
    const done = (error?: string) => {
      if (settled) return
      settled = true
      socket.destroy()
      resume(error === undefined ? Effect.void : Effect.fail(new ColdBenchFailed({ message: `raw ${address}: ${error}` })))
    }
    const send = () => {
      while (sent < reqs.length && sent - answered < RAW_IN_FLIGHT) {
        const p = reqs[sent++]!
        socket.write(encodeGetPinnedRangeFrame(sent, { object, version, offset: p.offset, len: p.length }))
      }
    }
    const socket = new net.Socket({
      onread: {
        buffer: buf,
        callback: (n: number, b: Uint8Array) => {
          let p = 0
          while (p < n) {
            if (body < 0) {
              const take = Math.min(HEADER_LEN - hdrFill, n - p)
              hdr.set(b.subarray(p, p + take), hdrFill)
              hdrFill += take
              p += take
              if (hdrFill < HEADER_LEN) return true
              hdrFill = 0
              const h = readHeader(hdr, 0)
              if ("_tag" in h || (h.flags & 1) !== 0) return done(`bad reply header`), false
              body = h.length
              check = new RangeCheck(expected, reqs[answered]!)
            }
            const take = Math.min(body, n - p)
            const bad = check!.push(b.subarray(p, p + take))
            if (bad !== undefined) return done(bad), false
            p += take
            body -= take
            if (body === 0) {
              body = -1
              answered++
              if (answered === reqs.length) return done(), false
              send()
            }
          }
          return true
        }
      }
    } as net.SocketConstructorOpts)
    socket.on("error", (e) => done(e.message))
    socket.connect(target.port, target.host, send)
    return Effect.sync(() => socket.destroy())
  })

/** `readInto` of each piece into a buffer reused across pieces (one per reader in flight), checked in place. */
const clientInto = (client: TalonClientShape, target: string, expected: Uint8Array): ReadPiece => {
  const free: Array<Uint8Array> = []
  return (piece, firstByte) =>
    Effect.suspend(() => {
      const buf = free.pop() ?? new Uint8Array(PIECE)
      return client.readInto(target, piece.offset, buf.subarray(0, piece.length)).pipe(
        Effect.mapError((e) => new ColdBenchFailed({ message: `TalonClient.readInto ${target} ${piece.offset}+${piece.length}: ${e._tag}: ${e.message}` })),
        Effect.flatMap((bytes) => {
          firstByte()
          const check = new RangeCheck(expected, piece)
          const bad = check.push(bytes) ?? check.finish()
          return bad === undefined ? Effect.void : Effect.fail(new ColdBenchFailed({ message: `TalonClient.readInto ${target}: ${bad}` }))
        }),
        Effect.ensuring(Effect.sync(() => free.push(buf)))
      )
    })
}

const main = Effect.gen(function* () {
  const dir = mkdtempSync(join(tmpdir(), "client-cpu-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  buildDist()
  const talon = talonBin()
  const start = (name: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) => Proc.spawn(name, [...talon, ...args], { env, grace: "3 seconds" })
  const expected = sampleBytes(0, flags.size)
  mkdirSync(join(dir, "origin", BUCKET), { recursive: true })
  writeFileSync(join(dir, "origin", BUCKET, "warm.bin"), expected)
  const origin = yield* start("origin", ["origin", "--root", join(dir, "origin"), "--port", "0"])
  const originUrl = (yield* origin.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/, "180 seconds"))[1]!
  const env = stubBackendEnv(originUrl)
  const coordinator = yield* start("coordinator", ["coordinator", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"], env)
  const coord = (yield* coordinator.waitFor(/coordinator control on ([\d.]+:\d+)/, "180 seconds"))[1]!
  const workers = yield* Effect.forEach(Array.from({ length: flags.workers }, (_, i) => `worker-${i + 1}`), (id) =>
    start(id, ["worker", "--id", id, "--data-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--coordinator", coord, "--cache-dir", join(dir, id)], env)
  )
  yield* Effect.forEach(workers, (w) => w.waitFor(/worker data listener on/, "180 seconds"), { discard: true })
  const client = yield* makeTalonClient({ coordinator: coord })
  const variants: Record<string, typeof client> = {}
  for (const [name, options] of Object.entries(clientVariants(flags.clients))) variants[name] = yield* makeTalonClient({ ...options, coordinator: coord })
  for (let i = 0; (yield* client.members(true).pipe(Effect.orElseSucceed(() => []))).length < flags.workers; i++) {
    if (i > 600) return yield* Effect.fail(new ColdBenchFailed({ message: "workers did not register" }))
    yield* Effect.sleep("100 millis")
  }
  const target = `s3://${BUCKET}/warm.bin`
  const size = flags.size
  // Warm: every block read through the cluster once.
  yield* runReaders(sequentialSlices(size, 8), 8, clientStream(client, target, expected))
  const info = yield* client.stat(target)
  const readerCounts = parseIntList("--readers", flags.readers)
  if (readerCounts._tag === "Left") return yield* Effect.fail(new ColdBenchFailed({ message: readerCounts.left }))
  const arms = flags.arms.split(",").map((a) => a.trim())
  const blockSize = client.options.blockSize
  // The raw floor reads one block from its first replica; a multi-block object would need one reader per block.
  const rawFor = (piece: Piece): ReadPiece => {
    const address = client.placeBlock(info.object, info.version, piece.offset)![0]!
    return rawReader(address, info.object, info.version, expected)
  }
  const byBlock = (piece: Piece): Array<Piece> => {
    const out: Array<Piece> = []
    for (let at = piece.offset; at < piece.offset + piece.length; ) {
      const end = Math.min(piece.offset + piece.length, (Math.floor(at / blockSize) + 1) * blockSize)
      out.push({ offset: at, length: end - at })
      at = end
    }
    return out
  }
  const raw: ReadPiece = (piece, fb) => Effect.forEach(byBlock(piece), (p) => rawFor(p)(p, fb), { discard: true })
  const pieceList = (arm: string, readers: number): ReadonlyArray<Piece> =>
    arm.startsWith("read") || arm.startsWith("into") ? parts({ offset: 0, length: size }, PIECE) : arm.startsWith("rand") ? shuffledRanges(size, 7 + readers) : sequentialSlices(size, readers)
  const readOf = (armName: string): ReadPiece => {
    const [arm, variant] = armName.split("@", 2) as [string, string?]
    const c = variant === undefined ? client : variants[variant]
    if (c === undefined) throw new Error(`arm ${armName}: no client named ${variant} in --clients`)
    return arm === "raw" ? raw : arm === "stream" ? clientStream(c, target, expected) : arm === "into" ? clientInto(c, target, expected) : clientRead(c, target, expected)
  }
  for (const readers of readerCounts.right) for (const arm of arms) yield* runReaders(pieceList(arm, readers), readers, readOf(arm)) // warm-up
  for (let round = 0; round < flags.rounds; round++) {
    for (const readers of readerCounts.right) {
      for (let k = 0; k < arms.length; k++) {
        const arm = arms[(k + round) % arms.length]!
        const g0 = majorGcs
        const m0 = minorGcs
        const c0 = process.cpuUsage()
        const w0 = cpuSnapshot({ workers: workers.map((w) => w.pid) })
        const t0 = performance.now()
        yield* runReaders(pieceList(arm, readers), readers, readOf(arm))
        const seconds = (performance.now() - t0) / 1000
        const c = process.cpuUsage(c0)
        const w = cpuDelta(w0, cpuSnapshot({ workers: workers.map((w) => w.pid) }))
        const ns = (v: number) => +((v * 1000) / size).toFixed(2)
        console.log(
          JSON.stringify({
            bench: "client-cpu",
            round,
            readers,
            arm,
            nsPerByte: ns(c.user + c.system),
            userNsPerByte: ns(c.user),
            sysNsPerByte: ns(c.system),
            workerNsPerByte: +(((w["workers"] ?? 0) * 1e9) / size).toFixed(2),
            mbps: +(size / 1e6 / seconds).toFixed(0),
            majorGcs: majorGcs - g0,
            minorGcs: minorGcs - m0
          })
        )
      }
    }
  }
})

runDriver(main)
