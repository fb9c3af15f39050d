import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Backend } from "../../src/core/ids.js"
import { failureOf, type LoadSpec, runLoad } from "../../src/loadgen/run.js"
import { makeScratch, runProcess, type Running, type Scratch, startRefServer, startFake } from "./servers.js"

const RANGE = 64 * 1024
const BLOB = 8 * 1024 * 1024
const CLI_TIMEOUT = 180_000
const ERROR_MESSAGE = "worker is not ready: cache dir /x is read-only"

let scratch: Scratch
let refServer: Running
let failing: Running

beforeAll(async () => {
  scratch = makeScratch(BLOB)
  refServer = await startRefServer(scratch.server, scratch.blob)
  failing = await startRefServer(scratch.server, scratch.blob, ["--error", ERROR_MESSAGE])
})

afterAll(async () => {
  await refServer?.stop()
  await failing?.stop()
  scratch?.cleanup()
})

const spec = (port: number, over: Partial<LoadSpec> = {}): LoadSpec => ({
  host: "127.0.0.1",
  port,
  conns: 3,
  depth: 4,
  range: RANGE,
  seconds: 1,
  warmup: 0.2,
  threads: 2,
  object: { backend: Backend.Azure, bucket: "container", objectPath: "path/to/blob" },
  size: BLOB,
  missShare: 0,
  missStride: 1024 * 1024,
  seed: 1,
  serverPids: [],
  drainTimeout: 2,
  failFast: false,
  ...over
})

/**
 * Runs `talon loadgen` as a process (bin/talon.mjs: the CLI bundle when the build is fresh) and
 * collects its output. Startup through tsx can take tens of seconds on a loaded 2-core
 * machine, hence the long bound.
 */
const cli = (args: ReadonlyArray<string>) =>
  runProcess(process.execPath, ["bin/talon.mjs", "loadgen", ...args], CLI_TIMEOUT - 5_000)

describe("loadgen against the C reference server", () => {
  it.live("measures a clean run over two threads with every byte verified and the server sampled", () =>
    Effect.gen(function* () {
      const r = yield* runLoad(spec(refServer.port, { verify: scratch.blob, serverPids: [refServer.pid] }))
      expect(failureOf(r)).toBeUndefined()
      expect(r.errors).toBe(0)
      expect(r.samples).toBeGreaterThan(0)
      expect(r.threads).toBe(2)
      expect(r.bytes).toBe(r.samples * RANGE)
      expect(r.rps).toBe(r.samples / r.seconds)
      expect(r.p50_us).not.toBeNull()
      expect(r.p50_us!).toBeLessThanOrEqual(r.p99_us!)
      expect(r.p99_us!).toBeLessThanOrEqual(r.max_us!)
      expect(r.rss_kb).toBeGreaterThan(0)
      expect(r.cpu_percent).not.toBeNull()
      expect(r.cpu_us_per_req).not.toBeNull()
      expect(r.hit_samples).toBe(r.samples)
    }))

  it("prints JSON lines for a conns sweep and exits 0", async () => {
    const { code, stdout, stderr } = await cli([
      "--addr", `127.0.0.1:${refServer.port}`, "--conns", "1,4", "--depth", "2", "--seconds", "0.5", "--warmup", "0.1",
      "--object", "az://container/blob", "--size", "8M", "--range", "64K", "--server-pid", String(refServer.pid), "--json"
    ])
    expect(stderr).toBe("")
    expect(code).toBe(0)
    const lines = stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(lines.map((l) => l["conns"])).toEqual([1, 4])
    for (const l of lines) {
      for (const k of ["conns", "depth", "rps", "mib_s", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "samples", "errors", "cpu_percent", "kernel_share", "rss_kb"]) {
        expect(l).toHaveProperty(k)
      }
      expect(l["errors"]).toBe(0)
      expect(l["samples"] as number).toBeGreaterThan(0)
    }
  }, CLI_TIMEOUT)

  it("fails on an error frame and prints the server's message verbatim", async () => {
    const { code, stdout, stderr } = await cli([
      "--addr", `127.0.0.1:${failing.port}`, "--conns", "2", "--depth", "2", "--seconds", "0.5", "--warmup", "0",
      "--object", "s3://bucket/key", "--size", "8M"
    ])
    expect(code).toBe(1)
    expect(stderr).toContain(ERROR_MESSAGE)
    expect(stderr.split("\n")[0]).toMatch(/^loadgen: error frame from server \(conn \d+, id \d+, offset \d+\): worker is not ready: cache dir \/x is read-only$/)
    expect(stdout).toContain("| conns |") // the table is still printed
  }, CLI_TIMEOUT)

  it.live("fails a run that asks past the end of the object (byte counts are the server's, not assumed)", () =>
    Effect.gen(function* () {
      // One offset in 129 is out of bounds; 2 s gives hundreds of requests even on a loaded machine.
      const r = yield* runLoad(spec(refServer.port, { size: BLOB + RANGE, conns: 1, threads: 1, seconds: 2, warmup: 0 }))
      expect(failureOf(r)).toMatch(/^error frame from server \(conn 0, id \d+, offset \d+\): range out of bounds/)
      expect(r.error_frames).toBeGreaterThan(0)
    }))

  it.live("fails with a usable message when nothing listens", () =>
    Effect.gen(function* () {
      const e = yield* Effect.flip(runLoad(spec(1, { conns: 1, threads: 1 })))
      expect(e.message).toMatch(/^connect 127\.0\.0\.1:1 \(conn 0\): .*ECONNREFUSED/)
    }))
})

describe("loadgen against scripted servers", () => {
  it.live("matches out-of-order replies by request id", () =>
    Effect.gen(function* () {
      const fake = yield* Effect.promise(() =>
        startFake({ reverse: true, answer: (o, l) => scratch.bytes.subarray(o, o + l) })
      )
      const r = yield* runLoad(spec(fake.port, { depth: 8, conns: 2, verify: scratch.blob })).pipe(
        Effect.ensuring(Effect.promise(() => fake.stop()))
      )
      expect(fake.stats.outOfOrder).toBeGreaterThan(0)
      expect(r.errors).toBe(0)
      expect(r.samples).toBeGreaterThan(0)
    }))

  it.live("reassembles replies cut at every byte of header and body", () =>
    Effect.gen(function* () {
      const range = 32
      const fake = yield* Effect.promise(() =>
        startFake({ chunking: "split", answer: (o, l) => scratch.bytes.subarray(o, o + l) })
      )
      const r = yield* runLoad(spec(fake.port, { range, depth: 2, conns: 2, threads: 1, verify: scratch.blob, seconds: 0.5 })).pipe(
        Effect.ensuring(Effect.promise(() => fake.stop()))
      )
      expect(r.first_error).toBeNull()
      // Reply n is cut at byte n mod (16 + range + 1): more replies than cuts means every cut was served.
      expect(fake.stats.replies).toBeGreaterThan(16 + range + 1)
      expect(r.samples).toBeGreaterThan(0)
      expect(r.bytes).toBe(r.samples * range)
    }))

  it.live("takes several whole replies from one read", () =>
    Effect.gen(function* () {
      const range = 1024
      const fake = yield* Effect.promise(() =>
        startFake({ chunking: "coalesce", reverse: true, answer: (o, l) => scratch.bytes.subarray(o, o + l) })
      )
      const r = yield* runLoad(spec(fake.port, { range, depth: 16, conns: 2, threads: 1, verify: scratch.blob, seconds: 0.5 })).pipe(
        Effect.ensuring(Effect.promise(() => fake.stop()))
      )
      expect(r.first_error).toBeNull()
      expect(fake.stats.outOfOrder).toBeGreaterThan(0)
      expect(r.samples).toBeGreaterThan(0)
      expect(r.bytes).toBe(r.samples * range)
    }))

  it.live("rejects a reply longer than the range asked", () =>
    Effect.gen(function* () {
      const fake = yield* Effect.promise(() =>
        startFake({ lengthDelta: 1, answer: (o, l) => scratch.bytes.subarray(o, o + l) })
      )
      const r = yield* runLoad(spec(fake.port, { conns: 1, threads: 1, seconds: 0.3, warmup: 0 })).pipe(
        Effect.ensuring(Effect.promise(() => fake.stop()))
      )
      expect(failureOf(r)).toMatch(/reply length 65537 \(expected 65536 for offset \d+\)/)
    }))

  it.live("ramps every connection up to exactly --depth requests in flight during the warmup", () =>
    Effect.gen(function* () {
      // A silent server keeps every request outstanding, so what it received is what was put in flight.
      const fake = yield* Effect.promise(() => startFake({}))
      const r = yield* runLoad(spec(fake.port, { conns: 3, depth: 5, warmup: 0.4, ramp: 0.3, seconds: 0.1, drainTimeout: 0.2 })).pipe(
        Effect.ensuring(Effect.promise(() => fake.stop()))
      )
      expect(fake.stats.requests).toBe(3 * 5)
      expect(failureOf(r)).toContain("drain timeout")
    }))

  it.live("rejects a ramp longer than the warmup", () =>
    Effect.gen(function* () {
      const e = yield* Effect.flip(runLoad(spec(1, { warmup: 0.5, ramp: 1 })))
      expect(e.message).toBe("--ramp must be between 0 and --warmup (0.5 s), got 1")
    }))

  it.live("counts zero samples from a silent server as a failed run", () =>
    Effect.gen(function* () {
      const fake = yield* Effect.promise(() => startFake({}))
      const r = yield* runLoad(spec(fake.port, { seconds: 0.3, warmup: 0, drainTimeout: 0.2 })).pipe(
        Effect.ensuring(Effect.promise(() => fake.stop()))
      )
      expect(r.samples).toBe(0)
      expect(failureOf(r)).toContain("drain timeout")
      expect(r.errors).toBeGreaterThanOrEqual(2) // drain timeout + no samples
    }))

  it.live("rejects a reply whose length differs from the range asked", () =>
    Effect.gen(function* () {
      const fake = yield* Effect.promise(() =>
        startFake({ lengthDelta: -1, answer: (o, l) => scratch.bytes.subarray(o, o + l) })
      )
      const r = yield* runLoad(spec(fake.port, { conns: 1, threads: 1, seconds: 0.3, warmup: 0 })).pipe(
        Effect.ensuring(Effect.promise(() => fake.stop()))
      )
      expect(failureOf(r)).toMatch(/reply length 65535 \(expected 65536 for offset \d+\)/)
    }))

  it.live("sends the miss share to distinct never-read offsets past the hot region", () =>
    Effect.gen(function* () {
      // A virtual 1 GiB object (the blob repeated) leaves room for ~16k distinct cold offsets.
      const fake = yield* Effect.promise(() =>
        startFake({ answer: (o, l) => scratch.bytes.subarray(o % BLOB, (o % BLOB) + l) })
      )
      const stride = 64 * 1024
      const hotBytes = 1024 * 1024
      const r = yield* runLoad(
        spec(fake.port, { missShare: 0.3, size: 1024 ** 3, hotBytes, missStride: stride, seconds: 0.3, warmup: 0, depth: 1, conns: 2 })
      ).pipe(Effect.ensuring(Effect.promise(() => fake.stop())))
      expect(r.first_error).toBeNull()
      expect(r.hit_samples).toBeGreaterThan(0)
      expect(r.miss_samples).toBeGreaterThan(0)
      expect(r.miss_p50_us).not.toBeNull()
      const cold = fake.offsets.filter((o) => o >= hotBytes)
      const hot = fake.offsets.filter((o) => o < hotBytes)
      expect(hot.length).toBeGreaterThan(0)
      expect(cold.length).toBeGreaterThan(0)
      expect(new Set(cold).size).toBe(cold.length)
      expect(cold.every((o) => o % stride === 0)).toBe(true)
      expect(cold.length / fake.offsets.length).toBeGreaterThan(0.1)
      expect(cold.length / fake.offsets.length).toBeLessThan(0.5)
    }))

  it.live("fails loudly when the cold region runs out", () =>
    Effect.gen(function* () {
      const fake = yield* Effect.promise(() => startFake({ answer: (o, l) => scratch.bytes.subarray(o, o + l) }))
      const r = yield* runLoad(
        spec(fake.port, { missShare: 0.5, size: 2 * 1024 * 1024, missStride: 1024 * 1024, seconds: 0.3, warmup: 0 })
      ).pipe(Effect.ensuring(Effect.promise(() => fake.stop())))
      expect(failureOf(r)).toContain("cold region exhausted")
    }))
})
