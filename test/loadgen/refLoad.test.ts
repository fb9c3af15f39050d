/**
 * talon-ref-load (tools/ref/load.c), built from source: a clean verified run against
 * talon-ref-server reports sane numbers, and every way a server can misbehave (a wrong
 * byte, replies out of order, a wrong length, an error frame, silence) fails the run
 * with exit 1 and a message that says what happened; arbitrary reply bytes never crash it.
 */
import * as net from "node:net"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { refServerPerFile, runProcess, startFake, startRefServer } from "./servers.js"

const BLOB = 4 * 1024 * 1024
const RUN_TIMEOUT = 120_000
const ref = refServerPerFile(BLOB)

const load = (args: ReadonlyArray<string>) => runProcess(ref.scratch.load, args, RUN_TIMEOUT - 5_000)

const target = (port: number, over: Record<string, string> = {}): Array<string> =>
  Object.entries({
    "--addr": `127.0.0.1:${port}`,
    "--object": "az://container/blob",
    "--size": "4M",
    "--range": "64K",
    "--conns": "2",
    "--depth": "4",
    "--seconds": "0.5",
    "--warmup": "0.1",
    "--drain-timeout": "3",
    ...over
  }).flat()

describe("talon-ref-load against talon-ref-server", () => {
  it("a clean verified run: exit 0, JSON summary with samples, percentiles in order, server CPU and RSS", async () => {
    const r = await load([...target(ref.server.port, { "--verify": ref.scratch.blob, "--server-pid": String(ref.server.pid) }), "--json"])
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const j = JSON.parse(r.stdout.trim()) as Record<string, number>
    expect(j).toMatchObject({ conns: 2, depth: 4, range: 65536, errors: 0 })
    expect(j["samples"]).toBeGreaterThan(0)
    expect(j["rps"]).toBeCloseTo(j["samples"]! / 0.5, 0)
    expect(j["p50_us"]).toBeLessThanOrEqual(j["p90_us"]!)
    expect(j["p90_us"]).toBeLessThanOrEqual(j["p99_us"]!)
    expect(j["p99_us"]).toBeLessThanOrEqual(j["p999_us"]!)
    expect(j["p999_us"]).toBeLessThanOrEqual(j["max_us"]!)
    expect(j["server_rss_kb"]).toBeGreaterThan(0)
    expect(j["server_cores"]).not.toBeNull()
    expect(j["client_cores"]).toBeGreaterThanOrEqual(0)
  }, RUN_TIMEOUT)

  it("prints a one-line text summary without --json (server fields null without --server-pid)", async () => {
    const r = await load(target(ref.server.port, { "--range": "4K", "--conns": "1", "--depth": "1" }))
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^conns 1 depth 1 range 4096: \d+ rps, [\d.]+ MiB\/s, p50 \d+ p90 \d+ p99 \d+ p99\.9 \d+ max \d+ us, [1-9]\d* samples, 0 errors; server cores null/)
  }, RUN_TIMEOUT)

  it("fails on an error frame and prints the server's message verbatim", async () => {
    const failing = await startRefServer(ref.scratch.server, ref.scratch.blob, ["--error", "worker is not ready: cache dir /x is read-only"])
    try {
      const r = await load([...target(failing.port), "--json"])
      expect(r.code).toBe(1)
      expect(r.stderr).toMatch(/^talon-ref-load: error frame from server \(conn \d, id \d+, offset \d+\): worker is not ready: cache dir \/x is read-only\n$/)
      expect(JSON.parse(r.stdout.trim())["errors"]).toBeGreaterThan(0)
    } finally {
      await failing.stop()
    }
  }, RUN_TIMEOUT)

  it("fails a run that asks past the end of the file with the server's out-of-bounds message", async () => {
    const r = await load(target(ref.server.port, { "--size": "5M", "--conns": "1" }))
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/error frame from server \(conn 0, id \d+, offset \d+\): range out of bounds: offset \d+ \+ len 65536 exceeds object size 4194304/)
  }, RUN_TIMEOUT)

  it("exits 1 naming the address when nothing listens, and 2 on a usage error", async () => {
    const refused = await load(target(1))
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/^talon-ref-load: connect 127\.0\.0\.1:1 \(conn 0\): Connection refused/)
    const usage = await load(target(ref.server.port, { "--object": "ftp://x/y" }))
    expect(usage.code).toBe(2)
    expect(usage.stderr).toContain("--object ftp://x/y: want s3://bucket/key, gs://bucket/key or az://container/key")
  }, RUN_TIMEOUT)
})

describe("talon-ref-load against misbehaving servers", () => {
  it("--verify catches one wrong byte in a reply and says where", async () => {
    const fake = await startFake({
      answer: (o, l) => {
        const b = Buffer.from(ref.scratch.bytes.subarray(o, o + l))
        b[1000] = b[1000]! ^ 0x5a
        return b
      }
    })
    try {
      const r = await load(target(fake.port, { "--verify": ref.scratch.blob, "--conns": "1" }))
      expect(r.code).toBe(1)
      expect(r.stderr).toMatch(/^talon-ref-load: payload mismatch \(conn 0, id 1, offset \d+\): byte 1000 of the reply is 0x[0-9a-f]{2}, the file has 0x[0-9a-f]{2}\n/)
      // Without --verify the same bytes pass: the check is the client's, not the server's.
      expect((await load(target(fake.port, { "--conns": "1" }))).code).toBe(0)
    } finally {
      await fake.stop()
    }
  }, RUN_TIMEOUT)

  it("rejects replies out of request order on a connection", async () => {
    const fake = await startFake({ reverse: true, answer: (o, l) => ref.scratch.bytes.subarray(o, o + l) })
    try {
      const r = await load(target(fake.port, { "--depth": "8", "--conns": "1", "--verify": ref.scratch.blob }))
      expect(fake.stats.outOfOrder).toBeGreaterThan(0)
      expect(r.code).toBe(1)
      expect(r.stderr).toMatch(/^talon-ref-load: out-of-order reply \(conn 0\): expected id (\d+) \(offset \d+\), got id (?!\1\b)\d+\n/)
    } finally {
      await fake.stop()
    }
  }, RUN_TIMEOUT)

  it("rejects a reply whose length is not the range asked", async () => {
    const fake = await startFake({ lengthDelta: -1, answer: (o, l) => ref.scratch.bytes.subarray(o, o + l) })
    try {
      const r = await load(target(fake.port, { "--conns": "1" }))
      expect(r.code).toBe(1)
      expect(r.stderr).toMatch(/reply length 65535 \(expected 65536 for offset \d+\)/)
    } finally {
      await fake.stop()
    }
  }, RUN_TIMEOUT)

  it("fails a silent server with a drain timeout and no samples", async () => {
    const fake = await startFake({})
    try {
      const r = await load([...target(fake.port, { "--drain-timeout": "0.3", "--warmup": "0" }), "--json"])
      expect(r.code).toBe(1)
      expect(r.stderr).toMatch(/^talon-ref-load: drain timeout: 8 replies still outstanding 0\.3 s after the window\n$/)
      expect(JSON.parse(r.stdout.trim())).toMatchObject({ samples: 0, p50_us: null, errors: 2 })
      expect(fake.stats.requests).toBe(8)
    } finally {
      await fake.stop()
    }
  }, RUN_TIMEOUT)
})

describe("talon-ref-load against arbitrary replies", () => {
  /** Answers a connection's first request with `reply`, then closes it if `close`. */
  const junkServer = (reply: Buffer, close: boolean): Promise<{ port: number; stop: () => Promise<void> }> =>
    new Promise((resolve) => {
      const sockets = new Set<net.Socket>()
      const server = net.createServer((socket) => {
        sockets.add(socket)
        socket.on("error", () => {})
        socket.once("data", () => (close ? socket.end(reply) : socket.write(reply)))
      })
      server.listen(0, "127.0.0.1", () =>
        resolve({
          port: (server.address() as net.AddressInfo).port,
          stop: () =>
            new Promise<void>((done) => {
              for (const s of sockets) s.destroy()
              server.close(() => done())
            })
        })
      )
    })

  it("fails any malformed reply stream with exit 1 and one message, never a crash", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 200 }), fc.boolean(), async (bytes, close) => {
        // Start from a plausible header for request 1 so the checks past the header get exercised too.
        const reply = Buffer.concat([Buffer.from("544c0102000000000000000100", "hex"), Buffer.from(bytes)])
        const fake = await junkServer(reply, close)
        try {
          const r = await load([...target(fake.port, { "--conns": "1", "--depth": "2", "--seconds": "0.2", "--warmup": "0", "--drain-timeout": "0.3" }), "--json"])
          expect(r.code).toBe(1)
          expect(r.stderr).toMatch(/^talon-ref-load: [^\n]+\n$/)
          expect(JSON.parse(r.stdout.trim())["errors"]).toBeGreaterThan(0)
        } finally {
          await fake.stop()
        }
      }),
      { numRuns: 25 }
    )
  }, 300_000)
})
