/**
 * The co-located body path: a gateway in the worker's process sends resident blocks to the
 * client's socket by sendfile. Real sockets: SHA-256 of each range through that path, the
 * route serving what is not resident, a reader that stops reading (short sends resumed on
 * writability), a client gone mid-body (pins and fds released, the gateway keeps serving),
 * and an overwrite at the origin during a send (the body stays the version its ETag names).
 */
import { expect, layer } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import { Context, Duration, Effect, Layer } from "effect"
import * as Router from "../../src/backend/Router.js"
import { Gateway, type GatewayShape } from "../../src/gateway/Gateway.js"
import type { OriginStubShape } from "../../src/origin/OriginStub.js"
import { type LocalReads, makeLocalReads } from "../../src/worker/LocalReads.js"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { TenantLimiter } from "../../src/worker/tenants/TenantLimiter.js"
import { nativeCounters } from "../../src/worker/plane/Native.js"
import { Worker, type WorkerShape } from "../../src/worker/Worker.js"
import { raw } from "../origin/fixtures/testOrigin.js"
import { pausedGet, put, sha, until } from "./fixtures/bodyGets.js"
import { loopbackWorkerSettings, originWithCoordinator } from "../support/loopbackWorker.js"

const BLOCK = 1024 * 1024
const PAGE = 256 * 1024
const SMALL = 3 * BLOCK + 12_345
/** Larger than loopback's socket buffers together, so a reader that stops reading fills them. */
const LARGE = 8 * 1024 * 1024

interface Fixture {
  readonly local: LocalReads
  readonly origin: OriginStubShape
  readonly worker: WorkerShape
  readonly gateway: GatewayShape
}
class Colocated extends Context.Tag("test/Colocated")<Colocated, Fixture>() {}

const fixture = Layer.scoped(
  Colocated,
  Effect.gen(function* () {
    const { dir, origin, backend, coordinator } = yield* originWithCoordinator("talon-local-body-")
    const worker = Context.get(
      yield* Layer.build(
        Worker.layerSettings(
          loopbackWorkerSettings("w0", dir, coordinator.controlAddress, {
            blockSize: BLOCK,
            pageSize: PAGE,
            dataPlane: "native",
            versionTtlMs: 100
          })
        ).pipe(Layer.provide(backend))
      ),
      Worker
    )
    yield* coordinator.members.pipe(Effect.delay("20 millis"), Effect.repeat({ until: (m) => m.length === 1 }), Effect.timeout(Duration.seconds(30)))
    const local = makeLocalReads([worker.readPath!])
    if (typeof local === "string") return yield* Effect.die(new Error(`no local reads: ${local}`))
    const gateway = Context.get(
      yield* Layer.build(
        Gateway.layerDeployment({
          gateway: { listen: "127.0.0.1:0", auth: false, statTtlMs: 100, idleTimeoutMs: 10_000 },
          route: "cache",
          router: Router.localOptions(origin.url),
          client: { coordinator: coordinator.controlAddress, blockSize: BLOCK, connectTimeoutMs: 2000, requestTimeoutMs: 10_000, statTtlMs: 100 },
          local
        })
      ),
      Gateway
    )
    yield* Effect.promise(() => raw(origin.url, "PUT", "/bucket"))
    return { local, origin, worker, gateway }
  })
)

const keepAliveGet = (agent: http.Agent, url: string, range: string, sockets: Set<unknown>) =>
  new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
    const req = http.get(`${url}/bucket/small.bin`, { agent, headers: { Range: range } }, (res) => {
      sockets.add(res.socket)
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }))
      res.on("error", reject)
    })
    req.on("error", reject)
  })
const openFds = () => fs.readdirSync("/proc/self/fd").length

layer(fixture, { excludeTestServices: true, timeout: "60 seconds" })("gateway co-located body path", (it) => {
  it.effect("serves resident ranges by sendfile, each range's SHA-256 the origin's; what is not resident comes through the route", () =>
    Effect.gen(function* () {
      const f = yield* Colocated
      const data = randomBytes(SMALL)
      yield* Effect.promise(() => put(f, "small.bin", data))
      const stats = () => f.gateway.stats()
      // Nothing resident yet: the route serves it (and the worker fills as it does).
      const first = yield* Effect.promise(() => raw(f.gateway.url, "GET", "/bucket/small.bin"))
      expect(first.status).toBe(200)
      expect(sha(first.body)).toBe(sha(data))
      expect(stats().localBodies).toBe(0)
      const ranges: Array<[number, number]> = [
        [0, SMALL - 1],
        [0, 0],
        [5, PAGE + 7],
        [BLOCK - 100, BLOCK + 100],
        [BLOCK, 2 * BLOCK - 1],
        [PAGE * 3 + 1, 3 * BLOCK + 5],
        [3 * BLOCK, SMALL - 1],
        [SMALL - 1, SMALL - 1]
      ]
      for (const [a, b] of ranges) {
        const r = yield* Effect.promise(() => raw(f.gateway.url, "GET", "/bucket/small.bin", { Range: `bytes=${a}-${b}` }))
        expect(r.status).toBe(206)
        expect(r.headers["content-range"]).toBe(`bytes ${a}-${b}/${SMALL}`)
        expect(sha(r.body)).toBe(sha(data.subarray(a, b + 1)))
      }
      expect(stats().localBodies).toBe(ranges.length)
      expect(stats().localBytes).toBe(ranges.reduce((n, [a, b]) => n + b - a + 1, 0))
      // One keep-alive connection: each head goes out with its body's first bytes, and nothing else follows the body.
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
      const sockets = new Set<unknown>()
      for (const [a, b] of ranges) {
        const r = yield* Effect.promise(() => keepAliveGet(agent, f.gateway.url, `bytes=${a}-${b}`, sockets))
        expect(r.status).toBe(206)
        expect(sha(r.body)).toBe(sha(data.subarray(a, b + 1)))
      }
      agent.destroy()
      expect(sockets.size).toBe(1)
      expect(stats().localBodies).toBe(2 * ranges.length)
      // Another object, not resident: served right, through the route.
      const other = randomBytes(PAGE + 3)
      yield* Effect.promise(() => put(f, "other.bin", other))
      const before = stats().localBodies
      const r = yield* Effect.promise(() => raw(f.gateway.url, "GET", "/bucket/other.bin", { Range: "bytes=1-100" }))
      expect(sha(r.body)).toBe(sha(other.subarray(1, 101)))
      expect(stats().localBodies).toBe(before)
    })
  )

  it.effect("a reader that stops reading gets every byte once it reads again; an overwrite meanwhile never mixes versions", () =>
    Effect.gen(function* () {
      const f = yield* Colocated
      const v1 = randomBytes(LARGE)
      const etag1 = yield* Effect.promise(() => put(f, "large.bin", v1))
      const warm = yield* Effect.promise(() => raw(f.gateway.url, "GET", "/bucket/large.bin"))
      expect(sha(warm.body)).toBe(sha(v1))
      const waitsBefore = nativeCounters()!.waits
      const localBefore = f.gateway.stats().localBodies
      const slow = pausedGet(f.gateway.url, "large.bin")
      // The send parks on writability once the socket buffers are full.
      yield* until(() => f.gateway.stats().localBodies > localBefore && nativeCounters()!.waits > waitsBefore, "a short send")
      // A new version at the origin while the old one is mid-body.
      const v2 = randomBytes(LARGE)
      const etag2 = yield* Effect.promise(() => put(f, "large.bin", v2))
      expect(etag2).not.toBe(etag1)
      slow.socket.resume()
      const got = yield* Effect.promise(() => slow.done)
      expect(got).not.toBe("cut")
      if (got === "cut") return
      expect(got.head.toLowerCase()).toContain(`etag: ${etag1.toLowerCase()}`)
      expect(sha(got.body)).toBe(sha(v1))
      // Once the stat expires, readers get the new version (route first, then local blocks).
      yield* Effect.sleep("150 millis")
      for (let i = 0; i < 2; i++) {
        const r = yield* Effect.promise(() => raw(f.gateway.url, "GET", "/bucket/large.bin", { Range: `bytes=${BLOCK}-${3 * BLOCK - 1}` }))
        expect(r.headers.etag).toBe(etag2)
        expect(sha(r.body)).toBe(sha(v2.subarray(BLOCK, 3 * BLOCK)))
      }
    })
  )

  it.effect("a client gone mid-body: the send stops, pins and fds are released, the gateway keeps serving", () =>
    Effect.gen(function* () {
      const f = yield* Colocated
      const data = randomBytes(LARGE)
      yield* Effect.promise(() => put(f, "gone.bin", data))
      yield* Effect.promise(() => raw(f.gateway.url, "GET", "/bucket/gone.bin"))
      // Settle: connections of the warm-up closed.
      yield* Effect.sleep("50 millis")
      const fdsBefore = openFds()
      const abortedBefore = f.gateway.stats().aborted
      const localBefore = f.gateway.stats().localBodies
      for (let i = 0; i < 3; i++) {
        const waits = nativeCounters()!.waits
        const gone = pausedGet(f.gateway.url, "gone.bin")
        yield* until(() => f.gateway.stats().localBodies > localBefore + i && nativeCounters()!.waits > waits, "a short send")
        gone.socket.destroy()
        expect(yield* Effect.promise(() => gone.done)).toBe("cut")
      }
      yield* until(() => f.gateway.stats().aborted >= abortedBefore + 3, "the sends to stop")
      yield* until(() => openFds() <= fdsBefore, "fds back to their count")
      // Nothing is left pinned by the abandoned sends (pinned blocks are never evicted).
      expect(f.local.pinned()).toBe(0)
      const r = yield* Effect.promise(() => raw(f.gateway.url, "GET", "/bucket/gone.bin", { Range: `bytes=7-${2 * BLOCK}` }))
      expect(sha(r.body)).toBe(sha(data.subarray(7, 2 * BLOCK + 1)))
    })
  )

  it.effect("local hits count as worker requests and are charged to the front end's tenant; over its limit a local hit is not served here", () =>
    Effect.gen(function* () {
      const f = yield* Colocated
      const data = randomBytes(2 * BLOCK)
      yield* Effect.promise(() => put(f, "tenant.bin", data))
      yield* Effect.promise(() => raw(f.gateway.url, "GET", "/bucket/tenant.bin"))
      // talon_worker_requests_total is hits + misses + errors: a local hit of two blocks is two of them.
      const requests = () => f.worker.stats.hits + f.worker.stats.misses + f.worker.stats.errors
      const before = requests()
      const localBefore = f.gateway.stats().localBodies
      const r = yield* Effect.promise(() => raw(f.gateway.url, "GET", "/bucket/tenant.bin", { Range: `bytes=5-${BLOCK + 5}` }))
      expect(sha(r.body)).toBe(sha(data.subarray(5, BLOCK + 6)))
      expect(f.gateway.stats().localBodies).toBe(localBefore + 1)
      expect(requests()).toBe(before + 2)

      // The same blocks through a limiter of 3 requests at once (and a clock that never moves): 3 pieces, then none.
      const limiter = new TenantLimiter({ enabled: true, default: {}, overrides: { "team-a": { readIops: { rate: 1, burstRatio: 3 } } } }, () => 0)
      const limited = makeLocalReads([f.worker.readPath!], { limiters: [limiter], tenant: "team-a" })
      if (typeof limited === "string") throw new Error(limited)
      const version = r.headers.etag!.toString().replaceAll('"', "")
      const object: ObjectId = { backend: Backend.S3, bucket: "bucket", objectPath: "tenant.bin" }
      const pieces: Array<boolean> = []
      for (let i = 0; i < 5; i++) {
        const got = limited.resident(object, version, 0, 4096)
        const piece = got instanceof Promise ? yield* Effect.promise(() => got) : got
        pieces.push(piece !== undefined)
        piece?.release()
      }
      expect(pieces).toEqual([true, true, true, false, false])
      expect(limited.pinned()).toBe(0)
      expect(limiter.byLabel().get("team-a")).toEqual({ admitted: 3, admittedBytes: 3 * 4096, limited: 2 })
    })
  )
})
