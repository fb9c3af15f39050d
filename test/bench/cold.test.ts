import { spawn } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as fc from "fast-check"
import {
  type ColdResult,
  coldResult,
  cpuPerByte,
  firstMismatch,
  judge,
  MiB,
  parts,
  type Piece,
  RangeCheck,
  sequentialSlices,
  shuffledRanges,
  targetsFor
} from "../../bench/cold/plan.js"
import { originSettled, type OriginCounters } from "../../bench/cold/origin.js"
import { cpuDelta, cpuSnapshot } from "../../bench/cold/cpu.js"
import { oneGet, partedGet, runReaders } from "../../bench/cold/readers.js"
import { checkBenchData } from "../../bench/lib/chartsData.js"

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..")

/** Sorted by offset, the pieces tile [0, size) with no gap and no overlap. */
const tiles = (pieces: ReadonlyArray<Piece>, size: number): boolean => {
  const sorted = [...pieces].sort((a, b) => a.offset - b.offset)
  let at = 0
  for (const p of sorted) {
    if (p.offset !== at || p.length <= 0) return false
    at += p.length
  }
  return at === size
}

describe("cold-bench workloads", () => {
  it("sequential slices cover the object once, one contiguous slice per reader, even to a byte", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1 << 30 }), fc.integer({ min: 1, max: 64 }), (size, readers) => {
        const s = sequentialSlices(size, readers)
        expect(s.length).toBe(Math.min(size, readers))
        expect(tiles(s, size)).toBe(true)
        const lens = s.map((p) => p.length)
        expect(Math.max(...lens) - Math.min(...lens)).toBeLessThanOrEqual(1)
      })
    )
  })

  it("random ranges tile the object once, 1–8 MiB each (only the one ending the object may be shorter), same order for the same seed", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 300 * MiB }), fc.integer(), (size, seed) => {
        const r = shuffledRanges(size, seed)
        expect(tiles(r, size)).toBe(true)
        for (const p of r) {
          expect(p.length).toBeLessThanOrEqual(8 * MiB)
          if (p.offset + p.length !== size) expect(p.length).toBeGreaterThanOrEqual(MiB)
        }
        expect(shuffledRanges(size, seed)).toEqual(r)
      }),
      { numRuns: 50 }
    )
  })

  it("shuffles: a 256 MiB tiling is not in offset order", () => {
    const r = shuffledRanges(256 * MiB, 7)
    expect(r.some((p, i) => i > 0 && p.offset < r[i - 1]!.offset)).toBe(true)
  })

  it("parts split a range into consecutive pieces of at most the part size", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1 << 30 }), fc.integer({ min: 1, max: 1 << 28 }), fc.integer({ min: 1 << 16, max: 1 << 24 }), (offset, length, part) => {
        const ps = parts({ offset, length }, part)
        expect(ps.every((p) => p.length <= part && p.length > 0)).toBe(true)
        expect(tiles(ps.map((p) => ({ offset: p.offset - offset, length: p.length })), length)).toBe(true)
      }),
      { numRuns: 100 }
    )
  })
})

describe("cold-bench verification", () => {
  const expected = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 31 + (i >> 8)) & 0xff))

  it("accepts the right bytes in any chunking and finds the first wrong byte where it is", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4095 }).chain((off) => fc.tuple(fc.constant(off), fc.integer({ min: 1, max: 4096 - off }))),
        fc.array(fc.integer({ min: 1, max: 700 }), { minLength: 1, maxLength: 20 }),
        fc.option(fc.nat()),
        ([offset, length], cuts, flip) => {
          const body = Buffer.from(expected.subarray(offset, offset + length))
          const bad = flip === null ? -1 : flip % length
          if (bad >= 0) body[bad] = body[bad]! ^ 0x40
          const check = new RangeCheck(expected, { offset, length })
          let error: string | undefined
          for (let at = 0, i = 0; at < length && error === undefined; i++) {
            const n = Math.min(cuts[i % cuts.length]!, length - at)
            error = check.push(body.subarray(at, at + n))
            at += n
          }
          error ??= check.finish()
          if (bad < 0) expect(error).toBeUndefined()
          else expect(error).toContain(`wrong byte at object offset ${offset + bad} `)
        }
      )
    )
  })

  it("a short or long response is an error, and so are bytes past the object's end", () => {
    const short = new RangeCheck(expected, { offset: 10, length: 100 })
    expect(short.push(expected.subarray(10, 60))).toBeUndefined()
    expect(short.finish()).toBe("50 of 100 bytes at 10 arrived")
    const long = new RangeCheck(expected, { offset: 10, length: 100 })
    expect(long.push(expected.subarray(10, 111))).toContain("101 bytes for a range of 100")
    expect(firstMismatch(expected, 4090, new Uint8Array(10))).toBeGreaterThanOrEqual(0)
    expect(firstMismatch(expected, 0, expected.subarray(0, 4096))).toBe(-1)
  })
})

/** A ranged-GET server over `body`; `corrupt` flips one byte at that object offset in every response covering it. */
const serve = (body: Buffer, corrupt = -1) =>
  Effect.acquireRelease(
    Effect.async<http.Server>((resume) => {
      const server = http.createServer((req, res) => {
        const m = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? "")
        if (m === null) return res.writeHead(400).end()
        const [from, to] = [Number(m[1]), Number(m[2])]
        const out = Buffer.from(body.subarray(from, to + 1))
        if (corrupt >= from && corrupt <= to) out[corrupt - from] = out[corrupt - from]! ^ 1
        res.writeHead(206, { "content-length": out.length }).end(out)
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
  )

describe("cold-bench readers over real sockets", () => {
  const body = Buffer.from(Array.from({ length: 3 * MiB + 123 }, (_, i) => (i * 7 + (i >> 10)) & 0xff))

  it.live("readers drain the pieces, one GET or 1 MiB parts, every byte checked", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* serve(body)
        const base = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
        const agent = new http.Agent({ keepAlive: true })
        yield* Effect.addFinalizer(() => Effect.sync(() => agent.destroy()))
        const pieces = shuffledRanges(body.length, 3, 100_000, 900_000)
        const one = yield* runReaders(pieces, 4, oneGet(agent, base, "/b/k", body))
        expect(one.bytes).toBe(body.length)
        const parted = yield* runReaders(sequentialSlices(body.length, 1), 1, partedGet(agent, base, "/b/k", body, 3, MiB))
        expect(parted.bytes).toBe(body.length)
      })
    )
  )

  it.live("a wrong byte from the server fails the run, naming its offset", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* serve(body, 2 * MiB + 5)
        const base = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
        const agent = new http.Agent({ keepAlive: true })
        yield* Effect.addFinalizer(() => Effect.sync(() => agent.destroy()))
        const exit = yield* Effect.exit(runReaders(sequentialSlices(body.length, 2), 2, partedGet(agent, base, "/b/k", body, 2, MiB)))
        expect(Exit.isFailure(exit)).toBe(true)
        expect(JSON.stringify(exit)).toContain(`wrong byte at object offset ${2 * MiB + 5}`)
      })
    )
  )
})

describe("cold-bench targets", () => {
  const res = (mb_s: number, origin_ratio = 1): ColdResult => ({
    mb_s,
    seconds: 1,
    bytes: 1,
    origin_ratio,
    origin_gets: 0,
    origin_heads: 0,
    first_byte_ms: 0,
    load1: 0
  })

  it("names the issue's targets for the arms a workload ran", () => {
    const all = ["origin", "origin-8x", "client-cold", "client-warm", "gateway-cold", "gateway-warm", "gateway-par-cold", "gateway-par-warm"]
    const seq1 = targetsFor(["seq-1"], () => all)
    expect(seq1.map((t) => (t.kind === "speed" ? `${t.arm}/${t.baseline}≥${t.atLeast}` : `${t.arm}≤${t.atMost}`))).toEqual([
      "client-cold/origin-8x≥1",
      "gateway-cold/origin≥2",
      "client-warm/origin-8x≥5",
      "client-cold≤1.25",
      "gateway-cold≤1.25"
    ])
    const rand8 = targetsFor(["rand-8"], () => ["origin", "client-cold", "gateway-cold"])
    expect(rand8.map((t) => (t.kind === "speed" ? `${t.arm}/${t.baseline}≥${t.atLeast}` : `${t.arm}≤${t.atMost}`))).toEqual([
      "client-cold/origin≥0.9",
      "gateway-cold/origin≥0.9",
      "client-cold≤1.1",
      "gateway-cold≤1.1"
    ])
    expect(targetsFor(["seq-8"], () => ["client-cold"]).filter((t) => t.kind === "speed")).toEqual([])
    const seq32 = targetsFor(["seq-32"], () => ["origin", "client-cold", "client-warm"])
    expect(seq32.filter((t) => t.kind === "speed").map((t) => t.label)).toEqual([
      "cold sequential through TalonClient ≥ 1.0× the 32-stream direct read",
      "warm ≥ 5× the 32-stream direct read"
    ])
  })

  it("judges speed on the median of per-round ratios and fetch on the worst round", () => {
    const byArm = {
      origin: [res(100), res(200), res(100)],
      "client-cold": [res(95, 1.02), res(220, 1.3), res(120, 1.0)]
    }
    const [speed, fetch] = targetsFor(["rand-1"], () => ["origin", "client-cold"]).filter((t) => t.arm === "client-cold")
    const s = judge(speed!, byArm)
    expect(s.median).toBe(1.1)
    expect(s.per_round).toBe("0.95 1.1 1.2")
    expect(s.verdict).toBe("met")
    const f = judge(fetch!, byArm)
    expect(f.median).toBe(1.3)
    expect(f.verdict).toBe("not met")
    expect(judge(speed!, { origin: [] }).verdict).toBe("no data")
  })

  it("a run's result: decimal MB/s and origin bytes per byte read", () => {
    const r = coldResult({ bytes: 256 * MiB, seconds: 2, originBytes: 320 * MiB, originGets: 3, originHeads: 1, firstByteMs: 31.23456, load1: 2 })
    expect(r.mb_s).toBe(134.218)
    expect(r.origin_ratio).toBe(1.25)
    expect(r.first_byte_ms).toBe(31.235)
    expect(r.cpu_workers_s).toBeUndefined()
  })

  it("carries CPU seconds per role when measured", () => {
    const r = coldResult({
      bytes: MiB, seconds: 1, originBytes: MiB, originGets: 1, originHeads: 0, firstByteMs: 1, load1: 0,
      cpu: { origin: 0.4, workers: 2.5, gateway: 0.01, coordinator: 0, client: 1.2 }
    })
    expect([r.cpu_origin_s, r.cpu_workers_s, r.cpu_gateway_s, r.cpu_coordinator_s, r.cpu_client_s]).toEqual([0.4, 2.5, 0.01, 0, 1.2])
  })
})

describe("cpuPerByte", () => {
  const run = (workers: number | undefined) =>
    coldResult({
      bytes: 1e9, seconds: 1, originBytes: 1e9, originGets: 1, originHeads: 0, firstByteMs: 1, load1: 0,
      ...(workers === undefined ? {} : { cpu: { origin: 1, workers, gateway: 0, coordinator: 0, client: 2 } })
    })

  it("gives ns per byte read per role and in total, median over rounds", () => {
    expect(cpuPerByte([run(3), run(5), run(4)])).toEqual({ origin: 1, workers: 4, gateway: 0, client: 2, total: 7 })
  })

  it("is undefined when a run carries no CPU figures", () => {
    expect(cpuPerByte([run(3), run(undefined)])).toBeUndefined()
    expect(cpuPerByte([])).toBeUndefined()
  })
})

describe("cpuSnapshot", () => {
  const spin = "const t = Date.now(); while (Date.now() - t < 5000) {}"
  /** Snapshots of `roles` until `role` has used `seconds` of CPU since the first (a busy process gets there in well under a second). */
  const until = async (roles: Record<string, ReadonlyArray<number>>, role: string, seconds: number) => {
    const first = cpuSnapshot(roles)
    let last = first
    for (let i = 0; i < 250 && cpuDelta(first, last)[role]! < seconds; i++) {
      await new Promise((r) => setTimeout(r, 20))
      last = cpuSnapshot(roles)
    }
    return cpuDelta(first, last)
  }
  const stop = (pid: number) => {
    try {
      process.kill(-pid, "SIGKILL")
    } catch {
      // already gone
    }
  }

  it("counts a busy process's CPU, none for a pid that does not exist, and this process's own", async () => {
    const child = spawn(process.execPath, ["-e", spin], { stdio: "ignore", detached: true })
    try {
      const d = await until({ busy: [child.pid!], gone: [2 ** 22 + 1] }, "busy", 0.1)
      expect(d["busy"]).toBeGreaterThanOrEqual(0.1)
      expect(d["gone"]).toBe(0)
      expect(d["client"]).toBeGreaterThanOrEqual(0)
    } finally {
      stop(child.pid!)
    }
  })

  it("sums a process and its descendants", async () => {
    // The parent only waits; CPU that piles up is its busy child's.
    const parent = spawn(
      process.execPath,
      ["-e", `require("node:child_process").spawn(process.execPath, ["-e", ${JSON.stringify(spin)}], { stdio: "ignore" }); setTimeout(() => {}, 5000)`],
      { stdio: "ignore", detached: true }
    )
    try {
      const d = await until({ tree: [parent.pid!] }, "tree", 0.2)
      expect(d["tree"]).toBeGreaterThanOrEqual(0.2)
    } finally {
      stop(parent.pid!)
    }
  })
})

describe("originSettled", () => {
  const c = (bytesServed: number, inflight: number): OriginCounters => ({ bytesServed, requests: { get: 0, head: 0 }, inflight: { get: inflight } })

  it("waits for in-flight GETs to end and the byte count to hold still", async () => {
    const seq = [c(0, 2), c(10, 1), c(20, 0), c(25, 0), c(25, 0), c(99, 0)]
    let i = 0
    const settled = await originSettled(async () => seq[Math.min(i++, seq.length - 1)]!, 1, 1000, async () => {})()
    expect(settled.bytesServed).toBe(25)
  })

  it("gives up after its limit with the last counters", async () => {
    let n = 0
    const settled = await originSettled(async () => c(n++, 1), 10, 30, async () => {})()
    expect(settled.inflight.get).toBe(1)
    expect(n).toBe(4)
  })
})

describe("bench/data/cold.json", () => {
  const path = join(repoRoot, "bench/data/cold.json")
  it.skipIf(!existsSync(path))("is a bench data file with its mode, every target judged, and every arm's bytes read in full", () => {
    const d = JSON.parse(readFileSync(path, "utf8"))
    expect(checkBenchData(d, "cold")).toEqual([])
    expect(["quick", "full"]).toContain(d.params.mode)
    expect(d.date).toMatch(/^\d{4}-\d{2}-\d{2}$/)
    const targets = d.ratios.filter((r: { kind: string }) => r.kind === "target")
    expect(targets.length).toBeGreaterThan(0)
    for (const t of targets) expect(["met", "not met"]).toContain(t.verdict)
    expect(d.params.targets).toBe(targets.length)
    for (const r of d.runs) expect(r.bytes).toBe(r.object_bytes)
  })
})
