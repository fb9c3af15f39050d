/**
 * The raw front against node:http, on real sockets: two co-located gateways on one worker,
 * alike but for `front`, get the same requests and must give the same status, headers (all of
 * them, in order, but Date and request ids) and bodies; the raw one must have answered the
 * requests it can answer completely (local hits, cached stats) itself and handed the rest to
 * node:http. Metrics and audit lines of the two match. Then what only a socket shows: pipelined
 * heads, heads split over reads, HTTP/1.0 and close, a PUT on a connection after GETs, a slow
 * reader of a large range, an overwrite at the origin, and real clients (AWS SDK v3, aws CLI).
 */
import { GetObjectCommand, HeadObjectCommand, S3Client } from "@aws-sdk/client-s3"
import { expect, layer } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Context, Duration, Effect, Layer } from "effect"
import fc from "fast-check"
import * as Router from "../../src/backend/Router.js"
import * as S3Backend from "../../src/backend/S3.js"
import { Gateway, type GatewayShape } from "../../src/gateway/Gateway.js"
import type { GatewayOptions } from "../../src/gateway/config.js"
import type { OriginStubShape } from "../../src/origin/OriginStub.js"
import { makeLocalReads } from "../../src/worker/LocalReads.js"
import { Worker } from "../../src/worker/Worker.js"
import { raw } from "../origin/fixtures/testOrigin.js"
import { loopbackWorkerSettings, originWithCoordinator } from "../support/loopbackWorker.js"
import { pausedGet, put, sha, until } from "./fixtures/bodyGets.js"
import { comparable, exchange, type Exchange, headerOf, request, type WireResponse } from "./fixtures/frontWire.js"
import { awsCli, findTool } from "./fixtures/realClients.js"
import { authOn, S3_KEY } from "./fixtures/targets.js"

const BLOCK = 1024 * 1024
const SIZE = 3 * BLOCK + 12_345
const LARGE = 8 * 1024 * 1024

interface Pair {
  readonly raw: GatewayShape
  readonly node: GatewayShape
}
interface Fixture {
  readonly origin: OriginStubShape
  readonly dir: string
  /** Auth on (SigV4 with S3_KEY), audit lines to `<dir>/<front>.audit`. */
  readonly signed: Pair
  /** Auth off. */
  readonly open: Pair
}
class Fronts extends Context.Tag("test/Fronts")<Fronts, Fixture>() {}

const fixture = Layer.scoped(
  Fronts,
  Effect.gen(function* () {
    const { dir, origin, backend, coordinator } = yield* originWithCoordinator("talon-front-")
    const worker = Context.get(
      yield* Layer.build(
        Worker.layerSettings(
          loopbackWorkerSettings("w0", dir, coordinator.controlAddress, { blockSize: BLOCK, pageSize: 256 * 1024, dataPlane: "native" })
        ).pipe(Layer.provide(backend))
      ),
      Worker
    )
    yield* coordinator.members.pipe(Effect.delay("20 millis"), Effect.repeat({ until: (m) => m.length === 1 }), Effect.timeout(Duration.seconds(30)))
    const local = makeLocalReads([worker.readPath!])
    if (typeof local === "string") return yield* Effect.die(new Error(`no local reads: ${local}`))
    const gateway = (options: Partial<GatewayOptions>) =>
      Layer.build(
        Gateway.layerDeployment({
          // Stats trusted for a minute: whether the raw front answers must not depend on the test's pace.
          gateway: { listen: "127.0.0.1:0", adminListen: "127.0.0.1:0", statTtlMs: 60_000, writeFreshMs: 200, idleTimeoutMs: 10_000, ...options },
          route: "cache",
          router: Router.localOptions(origin.url),
          client: { coordinator: coordinator.controlAddress, blockSize: BLOCK, connectTimeoutMs: 2000, requestTimeoutMs: 10_000, statTtlMs: 100 },
          local
        })
      ).pipe(Effect.map((ctx) => Context.get(ctx, Gateway)))
    const signedAs = (front: "raw" | "node") => gateway({ ...authOn, front, auditLog: path.join(dir, `${front}.audit`) })
    const signed = { raw: yield* signedAs("raw"), node: yield* signedAs("node") }
    const open = { raw: yield* gateway({ auth: false, front: "raw" }), node: yield* gateway({ auth: false, front: "node" }) }
    yield* Effect.promise(() => raw(origin.url, "PUT", "/bucket"))
    return { origin, dir, signed, open }
  })
)

const answered = (gw: GatewayShape) => gw.stats().rawFront
const host = (gw: GatewayShape) => new URL(gw.url).host

/** A signed request's head for `gw` (SigV4 with S3_KEY unless `secret` says otherwise, now unless `at`). */
const signedHead = async (gw: GatewayShape, method: "GET" | "HEAD", key: string, headers: Record<string, string> = {}, opts: { secret?: string; at?: Date } = {}) => {
  const sign = S3Backend.makeS3Signer(S3Backend.localOptions(gw.url, { accessKeyId: S3_KEY.accessKeyId, secretAccessKey: opts.secret ?? S3_KEY.secretAccessKey }))
  const r = await sign({ method, bucket: "bucket", key, query: {}, headers }, opts.at)
  return request(method, r.path, r.headers)
}

/** The same exchange with both fronts: the responses must match; how many the raw front answered itself. */
const both = (pair: Pair, build: (gw: GatewayShape) => Exchange | Promise<Exchange>) =>
  Effect.promise(async () => {
    const before = answered(pair.raw)
    const viaRaw = await exchange(pair.raw.url, await build(pair.raw))
    const byRaw = answered(pair.raw) - before
    const viaNode = await exchange(pair.node.url, await build(pair.node))
    expect(viaRaw.map(comparable)).toEqual(viaNode.map(comparable))
    expect(answered(pair.node)).toBe(0)
    return { responses: viaRaw, byRaw }
  })

const one = (method: "GET" | "HEAD", head: string): Exchange => ({ parts: [head], heads: [method === "HEAD"] })

const localBodies = (gw: GatewayShape) => gw.stats().localBodies

/** Reads `key` through both gateways of `pair` until the raw front sends it from the worker's blocks (stat cached, blocks resident). */
const warm = (pair: Pair, key: string, signed: boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 100; i++) {
      const local = localBodies(pair.raw)
      const { byRaw } = yield* both(pair, async (gw) => one("GET", signed ? await signedHead(gw, "GET", key) : request("GET", `/bucket/${key}`, { Host: host(gw) })))
      if (byRaw === 1 && localBodies(pair.raw) > local) return
      yield* Effect.sleep("20 millis")
    }
    throw new Error(`the raw front never sent ${key} from local blocks`)
  })

/** Reads `key` (unsigned) through `gw` alone until its raw front sends it from the worker's blocks. */
const warmRaw = (gw: GatewayShape, key: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 100; i++) {
      const n = answered(gw)
      const local = localBodies(gw)
      yield* Effect.promise(() => exchange(gw.url, one("GET", request("GET", `/bucket/${key}`, { Host: host(gw) }))))
      if (answered(gw) > n && localBodies(gw) > local) return
      yield* Effect.sleep("20 millis")
    }
    throw new Error(`the raw front never sent ${key} from local blocks`)
  })

const metricLines = (text: string) =>
  text
    .split("\n")
    .filter((l) => /^talon_gateway_(requests_total|bytes_total|authentication_total|request_duration_seconds_count)/.test(l))
    .sort()

const auditLines = (file: string) =>
  fs
    .readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((l) => {
      const { time: _t, requestId: _r, ...rest } = JSON.parse(l) as Record<string, unknown>
      return rest
    })

layer(fixture, { excludeTestServices: true, timeout: "60 seconds" })("gateway raw front", (it) => {
  it.effect("signed GET/HEAD matrix: the same answers as node:http; local hits and cached stats answered raw; metrics and audit alike", () =>
    Effect.gen(function* () {
      const f = yield* Fronts
      const data = randomBytes(SIZE)
      const etag = yield* Effect.promise(() => put(f, "obj.bin", data))
      yield* warm(f.signed, "obj.bin", true)
      const lastModified = new Date(Date.now() - 3_600_000).toUTCString()
      const future = new Date(Date.now() + 3_600_000).toUTCString()
      const cases: ReadonlyArray<readonly [string, "GET" | "HEAD", Record<string, string>, number, boolean]> = [
        ["whole", "GET", {}, 200, true],
        ["head", "HEAD", {}, 200, true],
        ["first", "GET", { range: "bytes=0-65535" }, 206, true],
        ["middle across blocks", "GET", { range: `bytes=${BLOCK - 1000}-${2 * BLOCK + 999}` }, 206, true],
        ["suffix", "GET", { range: "bytes=-1000" }, 206, true],
        ["open-ended", "GET", { range: `bytes=${3 * BLOCK}-` }, 206, true],
        ["head of a range", "HEAD", { range: "bytes=5-9" }, 206, true],
        ["unsatisfiable", "GET", { range: `bytes=${SIZE}-` }, 416, false],
        ["multi-range", "GET", { range: "bytes=0-1,5-6" }, 0, false],
        ["if-match holds", "GET", { "if-match": etag, range: "bytes=10-20" }, 206, true],
        ["if-match fails", "GET", { "if-match": '"other"' }, 412, false],
        ["if-none-match matches", "GET", { "if-none-match": etag }, 304, false],
        ["if-none-match other", "GET", { "if-none-match": '"other"', range: "bytes=0-9" }, 206, true],
        ["if-modified-since later", "GET", { "if-modified-since": future }, 304, false],
        ["if-modified-since earlier", "HEAD", { "if-modified-since": lastModified }, 200, true],
        ["if-unmodified-since earlier", "GET", { "if-unmodified-since": lastModified }, 412, false],
        ["if-unmodified-since later", "GET", { "if-unmodified-since": future, range: "bytes=100-199" }, 206, true]
      ]
      for (const [name, method, headers, status, byRaw] of cases) {
        const r = yield* both(f.signed, async (gw) => one(method, await signedHead(gw, method, "obj.bin", headers)))
        expect(r.responses.length, name).toBe(1)
        const res = r.responses[0]!
        if (status !== 0) expect(res.status, name).toBe(status)
        expect(r.byRaw, name).toBe(byRaw ? 1 : 0)
        if (res.status === 206 && method === "GET") {
          const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(headerOf(res, "content-range") ?? "")!
          expect(sha(res.body), name).toBe(sha(data.subarray(Number(m[1]), Number(m[2]) + 1)))
        }
        if (res.status === 200 && method === "GET") expect(sha(res.body), name).toBe(sha(data))
        if (byRaw) expect(headerOf(res, "etag")).toBe(etag)
      }
      // Missing keys: S3's 404 (an XML error for GET), from node:http.
      const missing = yield* both(f.signed, async (gw) => one("GET", await signedHead(gw, "GET", "nope.bin")))
      expect(missing.responses[0]!.status).toBe(404)
      expect(missing.responses[0]!.body.toString()).toContain("<Code>NoSuchKey</Code>")
      expect(missing.byRaw).toBe(0)
      const missingHead = yield* both(f.signed, async (gw) => one("HEAD", await signedHead(gw, "HEAD", "nope.bin")))
      expect(missingHead.responses[0]!.status).toBe(404)
      // Bad signatures are node's to refuse, in S3's words.
      const badSecret = yield* both(f.signed, async (gw) => one("GET", await signedHead(gw, "GET", "obj.bin", {}, { secret: "wrong" })))
      expect(badSecret.responses[0]!.status).toBe(403)
      expect(badSecret.responses[0]!.body.toString()).toContain("<Code>SignatureDoesNotMatch</Code>")
      expect(badSecret.byRaw).toBe(0)
      const expired = yield* both(f.signed, async (gw) => one("GET", await signedHead(gw, "GET", "obj.bin", {}, { at: new Date(Date.now() - 20 * 60_000) })))
      expect(expired.responses[0]!.status).toBe(403)
      expect(expired.responses[0]!.body.toString()).toContain("RequestTimeTooSkewed")
      const unsigned = yield* both(f.signed, (gw) => one("GET", request("GET", "/bucket/obj.bin", { Host: host(gw) })))
      expect(unsigned.responses[0]!.status).toBe(403)
      expect(unsigned.byRaw).toBe(0)

      // Both gateways saw the same requests: the same counts, bytes and auth results, the same audit lines.
      const metrics = (gw: GatewayShape) => Effect.promise(() => fetch(`${gw.adminUrl}/metrics`).then((r) => r.text()))
      expect(metricLines(yield* metrics(f.signed.raw))).toEqual(metricLines(yield* metrics(f.signed.node)))
      yield* until(() => auditLines(path.join(f.dir, "raw.audit")).length === auditLines(path.join(f.dir, "node.audit")).length, "audit lines")
      expect(auditLines(path.join(f.dir, "raw.audit"))).toEqual(auditLines(path.join(f.dir, "node.audit")))
    })
  )

  it.effect("anonymous reads with auth off; pipelined heads in one write, in order; heads split over reads", () =>
    Effect.gen(function* () {
      const f = yield* Fronts
      const data = randomBytes(SIZE)
      yield* Effect.promise(() => put(f, "anon.bin", data))
      const get = (gw: GatewayShape, range: string, extra: Record<string, string> = {}) => request("GET", "/bucket/anon.bin", { Host: host(gw), Range: range, ...extra })
      // Cold (no stat cached, nothing resident): the raw front stats it and reads it through the route, keeping the connection.
      const cold = yield* Effect.promise(() =>
        exchange(f.open.raw.url, { parts: [get(f.open.raw, `bytes=${BLOCK - 10}-${BLOCK + 9}`) + get(f.open.raw, "bytes=0-0")], heads: [false, false] })
      )
      expect(cold.map((r) => r.status)).toEqual([206, 206])
      expect(cold[0]!.body).toEqual(data.subarray(BLOCK - 10, BLOCK + 10))
      expect(cold[1]!.body).toEqual(data.subarray(0, 1))
      expect(f.open.raw.stats().rawFront).toBeGreaterThanOrEqual(2)
      yield* warm(f.open, "anon.bin", false)
      const three = yield* both(f.open, (gw) => ({
        parts: [get(gw, "bytes=0-99") + request("HEAD", "/bucket/anon.bin", { Host: host(gw) }) + get(gw, "bytes=-5")],
        heads: [false, true, false]
      }))
      expect(three.byRaw).toBe(3)
      expect(three.responses.map((r) => r.status)).toEqual([206, 200, 206])
      expect(three.responses[0]!.body).toEqual(data.subarray(0, 100))
      expect(three.responses[2]!.body).toEqual(data.subarray(SIZE - 5))
      // A pipelined request the front cannot answer (a missing key) goes to node:http with the ones after it, in order.
      const mixed = yield* both(f.open, (gw) => ({
        parts: [get(gw, "bytes=0-9") + request("GET", "/bucket/none.bin", { Host: host(gw) }) + get(gw, "bytes=10-19")],
        heads: [false, false, false]
      }))
      expect(mixed.byRaw).toBe(1)
      expect(mixed.responses.map((r) => r.status)).toEqual([206, 404, 206])
      expect(mixed.responses[2]!.body).toEqual(data.subarray(10, 20))
      // Heads split at random points: answered by the raw front all the same.
      let runs = 0
      let byRaw = 0
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.uniqueArray(fc.integer({ min: 1, max: 60 }), { minLength: 1, maxLength: 3 }), async (cuts) => {
            const r = await Effect.runPromise(
              both(f.open, (gw) => {
                const head = get(gw, "bytes=1000-1999")
                const at = [0, ...cuts.filter((c) => c < head.length).sort((a, b) => a - b), head.length]
                return { parts: at.slice(1).map((end, i) => head.slice(at[i], end)), heads: [false] }
              })
            )
            runs++
            byRaw += r.byRaw
            expect(r.responses[0]!.body).toEqual(data.subarray(1000, 2000))
          }),
          { numRuns: 8 }
        )
      )
      expect(byRaw).toBe(runs)
      // HTTP/1.0 (node's), and Connection: close (the raw front's): the same bytes, the connection closed after.
      const old = yield* both(f.open, (gw) => one("GET", request("GET", "/bucket/anon.bin", { Host: host(gw), Range: "bytes=0-9" }, "1.0")))
      expect(old.byRaw).toBe(0)
      expect(old.responses[0]!.body).toEqual(data.subarray(0, 10))
      const close = yield* both(f.open, (gw) => ({ parts: [get(gw, "bytes=0-9", { Connection: "close" }) + get(gw, "bytes=0-9")], heads: [false, false] }))
      expect(close.byRaw).toBe(1)
      expect(close.responses.length).toBe(1)
      expect(headerOf(close.responses[0]!, "connection")).toBe("close")
    })
  )

  it.effect("a PUT on a keep-alive connection after GETs goes to node:http and overwrites; GETs after it name the new bytes", () =>
    Effect.gen(function* () {
      const f = yield* Fronts
      const before = randomBytes(100_000)
      const after = randomBytes(70_000)
      const oldEtag = yield* Effect.promise(() => put(f, "put.bin", before))
      yield* warm(f.open, "put.bin", false)
      const gw = f.open.raw
      const n0 = answered(gw)
      const rs: Array<WireResponse> = yield* Effect.promise(() =>
        exchange(gw.url, {
          parts: [
            request("GET", "/bucket/put.bin", { Host: host(gw), Range: "bytes=0-999" }) +
              request("GET", "/bucket/put.bin", { Host: host(gw) }) +
              request("PUT", "/bucket/put.bin", { Host: host(gw), "Content-Length": String(after.length) }),
            after,
            request("GET", "/bucket/put.bin", { Host: host(gw) })
          ],
          // node:http runs pipelined requests' handlers at once: the last GET waits for the PUT's answer.
          after: [0, 0, 3],
          heads: [false, false, false, false]
        })
      )
      expect(answered(gw) - n0).toBe(2)
      expect(rs.map((r) => r.status)).toEqual([206, 200, 200, 200])
      expect(rs[0]!.body).toEqual(before.subarray(0, 1000))
      expect(rs[1]!.body).toEqual(before)
      expect(headerOf(rs[1]!, "etag")).toBe(oldEtag)
      expect(sha(rs[3]!.body)).toBe(sha(after))
      expect(headerOf(rs[3]!, "etag")).not.toBe(oldEtag)
      // The new version becomes a raw-front hit of its own.
      yield* warmRaw(gw, "put.bin")
      const again = yield* Effect.promise(() => exchange(gw.url, one("GET", request("GET", "/bucket/put.bin", { Host: host(gw) }))))
      expect(sha(again[0]!.body)).toBe(sha(after))
      expect(headerOf(again[0]!, "etag")).toBe(headerOf(rs[3]!, "etag"))
    })
  )

  it.effect("an overwrite at the origin while the stat is cached: the ETag still names the bytes sent", () =>
    Effect.gen(function* () {
      const f = yield* Fronts
      const v1 = randomBytes(200_000)
      const etag1 = yield* Effect.promise(() => put(f, "over.bin", v1))
      yield* warm(f.open, "over.bin", false)
      yield* Effect.promise(() => put(f, "over.bin", randomBytes(200_000)))
      const r = yield* both(f.open, (gw) => one("GET", request("GET", "/bucket/over.bin", { Host: host(gw), Range: "bytes=0-149999" })))
      expect(r.byRaw).toBe(1)
      expect(headerOf(r.responses[0]!, "etag")).toBe(etag1)
      expect(r.responses[0]!.body).toEqual(v1.subarray(0, 150_000))
    })
  )

  it.effect("a slow reader of a large range gets every byte (short sends resumed), and the front keeps serving", () =>
    Effect.gen(function* () {
      const f = yield* Fronts
      const data = randomBytes(LARGE)
      yield* Effect.promise(() => put(f, "large.bin", data))
      const gw = f.open.raw
      yield* warmRaw(gw, "large.bin")
      const n0 = answered(gw)
      const { socket, done } = pausedGet(gw.url, "large.bin")
      yield* until(() => answered(gw) > n0, "the raw front to start the body")
      // Loopback's buffers take a few MiB: the rest waits for the reader.
      yield* Effect.sleep("100 millis")
      const meanwhile = yield* Effect.promise(() => exchange(gw.url, one("GET", request("GET", "/bucket/large.bin", { Host: host(gw), Range: "bytes=0-99" }))))
      expect(meanwhile[0]!.body).toEqual(data.subarray(0, 100))
      socket.resume()
      const got = yield* Effect.promise(() => done)
      if (got === "cut") throw new Error("the body was cut")
      expect(sha(got.body)).toBe(sha(data))
      expect(answered(gw) - n0).toBe(2)
    })
  )

  it.effect("real clients: the AWS SDK v3 and the aws CLI read through the raw front", () =>
    Effect.gen(function* () {
      const f = yield* Fronts
      const data = randomBytes(SIZE)
      const etag = yield* Effect.promise(() => put(f, "sdk.bin", data))
      yield* warm(f.signed, "sdk.bin", true)
      const gw = f.signed.raw
      const n0 = answered(gw)
      const s3 = new S3Client({ endpoint: gw.url, forcePathStyle: true, region: "us-east-1", credentials: S3_KEY, maxAttempts: 1 })
      const out = yield* Effect.promise(() => s3.send(new GetObjectCommand({ Bucket: "bucket", Key: "sdk.bin", Range: "bytes=1000-300000" })))
      const body = yield* Effect.promise(() => out.Body!.transformToByteArray())
      expect(sha(body)).toBe(sha(data.subarray(1000, 300_001)))
      expect(out.ETag).toBe(etag)
      const whole = yield* Effect.promise(() => s3.send(new GetObjectCommand({ Bucket: "bucket", Key: "sdk.bin" })))
      expect(sha(yield* Effect.promise(() => whole.Body!.transformToByteArray()))).toBe(sha(data))
      const head = yield* Effect.promise(() => s3.send(new HeadObjectCommand({ Bucket: "bucket", Key: "sdk.bin" })))
      expect(head.ContentLength).toBe(SIZE)
      s3.destroy()
      expect(answered(gw) - n0).toBe(3)
      const bin = findTool("aws")
      if (bin === undefined) {
        console.warn("\n!!! front: the aws CLI is not installed (apt-get install -y awscli); it is NOT tested here !!!\n")
        return
      }
      const home = path.join(f.dir, "aws-home")
      fs.mkdirSync(home, { recursive: true })
      const cli = awsCli(bin, home, gw.url, S3_KEY)
      const n1 = answered(gw)
      yield* Effect.promise(() => cli.exec(["s3api", "get-object", "--bucket", "bucket", "--key", "sdk.bin", "--range", "bytes=5-70004", path.join(home, "range.bin")]))
      expect(sha(fs.readFileSync(path.join(home, "range.bin")))).toBe(sha(data.subarray(5, 70_005)))
      expect(answered(gw) - n1).toBe(1)
    })
  )
})
