/**
 * The separate-process gateway's splice body path over a real cluster (origin stub,
 * coordinator, two workers, all on loopback): SHA-256 of ranges relayed from the workers
 * (64 KiB, 1 MiB, every block of an object spread over both workers), a reader that stops
 * reading (the relay parks on writability and completes), an overwrite at the origin meanwhile
 * (never new bytes under the old ETag), the same reads with the relay turned off (the route's
 * buffers), eight keep-alive connections at once, and the workers gone mid-body (a closed connection or the whole, right body:
 * never a short response that looks complete).
 */
import { expect, layer } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Layer, Scope } from "effect"
import * as Router from "../../src/backend/Router.js"
import { Gateway, type GatewayShape } from "../../src/gateway/Gateway.js"
import { makeSpliceRelay } from "../../src/gateway/spliceRelay.js"
import type { OriginStubShape } from "../../src/origin/OriginStub.js"
import { Worker, type WorkerShape } from "../../src/worker/Worker.js"
import { raw } from "../origin/fixtures/testOrigin.js"
import { pausedGet, put, sha, until } from "./fixtures/bodyGets.js"
import { loopbackWorkerSettings, originWithCoordinator } from "../support/loopbackWorker.js"

const BLOCK = 1024 * 1024
const PAGE = 256 * 1024
const OBJECT = 6 * BLOCK + 4321
/** Larger than loopback's socket buffers together, so a reader that stops reading fills them. */
const LARGE = 8 * BLOCK

interface Fixture {
  readonly origin: OriginStubShape
  readonly workers: ReadonlyArray<{ readonly worker: WorkerShape; readonly scope: Scope.CloseableScope }>
  readonly splice: GatewayShape
  readonly portable: GatewayShape
}
class Cluster extends Context.Tag("test/RemoteBodyCluster")<Cluster, Fixture>() {}

const fixture = Layer.scoped(
  Cluster,
  Effect.gen(function* () {
    const { dir, origin, backend, coordinator } = yield* originWithCoordinator("talon-remote-body-")
    const workers = []
    for (const id of ["w0", "w1"]) {
      // Each in its own scope, so a test can stop them (closed at the end if still open).
      const scope = yield* Scope.make()
      yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
      const ctx = yield* Layer.buildWithScope(
        Worker.layerSettings(
          loopbackWorkerSettings(id, dir, coordinator.controlAddress, {
            blockSize: BLOCK,
            pageSize: PAGE,
            versionTtlMs: 100
          })
        ).pipe(Layer.provide(backend)),
        scope
      )
      workers.push({ worker: Context.get(ctx, Worker), scope })
    }
    yield* coordinator.members.pipe(Effect.delay("20 millis"), Effect.repeat({ until: (m) => m.length === 2 }), Effect.timeout(Duration.seconds(30)))
    const gateway = (remoteSplice: boolean) =>
      Effect.map(
        Layer.build(
          Gateway.layerDeployment({
            gateway: { listen: "127.0.0.1:0", auth: false, statTtlMs: 100, idleTimeoutMs: 10_000, remoteSplice },
            route: "cache",
            router: Router.localOptions(origin.url),
            client: { coordinator: coordinator.controlAddress, blockSize: BLOCK, connectTimeoutMs: 2000, requestTimeoutMs: 10_000, statTtlMs: 100 }
          })
        ),
        (c) => Context.get(c, Gateway)
      )
    const splice = yield* gateway(true)
    const portable = yield* gateway(false)
    yield* Effect.promise(() => raw(origin.url, "PUT", "/bucket"))
    return { origin, workers, splice, portable }
  })
)

/** Bytes that are the same on every run, so the object's version, and so its placement, is too. */
const fixedBytes = (n: number, seed: number): Buffer => {
  const out = Buffer.alloc(Math.ceil(n / 4) * 4)
  let x = seed >>> 0
  for (let i = 0; i < out.length; i += 4) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0
    out.writeUInt32LE(x, i)
  }
  return out.subarray(0, n)
}

const relayWaits = () => {
  const relay = makeSpliceRelay({ connectTimeoutMs: 1000 })
  return typeof relay === "string" ? 0 : relay.counters().waits
}

const relaySlots = () => {
  const relay = makeSpliceRelay({ connectTimeoutMs: 1000 })
  return typeof relay === "string" ? -1 : relay.counters().slotsInUse
}

const ranges: ReadonlyArray<[number, number]> = [
  [0, 65535],
  [3 * BLOCK, 4 * BLOCK - 1],
  [BLOCK - 100, BLOCK + 99],
  [PAGE + 7, 5 * BLOCK + 12],
  [6 * BLOCK, OBJECT - 1]
]

layer(fixture, { excludeTestServices: true, timeout: "60 seconds" })("gateway splice body path", (it) => {
  it.effect("relays ranges from both workers, each range's SHA-256 the origin's; off, the route serves the same bytes", () =>
    Effect.gen(function* () {
      const f = yield* Cluster
      expect(f.splice.splice).toBe(true)
      expect(f.portable.splice).toBe(false)
      const data = fixedBytes(OBJECT, 26)
      yield* Effect.promise(() => put(f, "spread.bin", data))
      // The first read warms the workers (and the gateway's membership and stats).
      const warm = yield* Effect.promise(() => raw(f.splice.url, "GET", "/bucket/spread.bin"))
      expect(sha(warm.body)).toBe(sha(data))
      const served = () => f.workers.map((w) => w.worker.stats.hits + w.worker.stats.misses)
      for (const gw of [f.splice, f.portable]) {
        const before = served()
        const bodies = gw.stats().remoteBodies
        const whole = yield* Effect.promise(() => raw(gw.url, "GET", "/bucket/spread.bin"))
        expect(whole.status).toBe(200)
        expect(sha(whole.body)).toBe(sha(data))
        // Blocks of this object live on both workers: the one response spanned them.
        const after = served()
        expect(after[0]!).toBeGreaterThan(before[0]!)
        expect(after[1]!).toBeGreaterThan(before[1]!)
        for (const [a, b] of ranges) {
          const r = yield* Effect.promise(() => raw(gw.url, "GET", "/bucket/spread.bin", { Range: `bytes=${a}-${b}` }))
          expect(r.status).toBe(206)
          expect(r.headers["content-range"]).toBe(`bytes ${a}-${b}/${OBJECT}`)
          expect(sha(r.body)).toBe(sha(data.subarray(a, b + 1)))
        }
        expect(gw.stats().remoteBodies - bodies).toBe(gw === f.splice ? ranges.length + 1 : 0)
      }
    })
  )

  it.effect("eight keep-alive connections at once, each range relayed right and the connections reused", () =>
    Effect.gen(function* () {
      const f = yield* Cluster
      const data = fixedBytes(16 * BLOCK, 9)
      yield* Effect.promise(() => put(f, "big.bin", data))
      yield* Effect.promise(() => raw(f.splice.url, "GET", "/bucket/big.bin"))
      const http = yield* Effect.promise(() => import("node:http"))
      const get = (agent: InstanceType<typeof http.Agent>, range: string) =>
        new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
          const req = http.get(`${f.splice.url}/bucket/big.bin`, { agent, headers: { Range: range } }, (res) => {
            const chunks: Array<Buffer> = []
            res.on("data", (c: Buffer) => chunks.push(c))
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }))
            res.on("error", reject)
            res.on("aborted", () => reject(new Error("aborted")))
          })
          req.on("error", reject)
        })
      const one = async (k: number) => {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
        for (let i = 0; i < 8; i++) {
          const a = ((k * 7 + i * 13) % 16) * BLOCK
          const r = await get(agent, `bytes=${a}-${a + BLOCK - 1}`)
          if (sha(r.body) !== sha(data.subarray(a, a + BLOCK))) throw new Error(`bad body at ${a}: ${r.status} ${r.body.length}`)
        }
        const sockets = Object.values(agent.freeSockets).flat().length
        agent.destroy()
        return sockets
      }
      const before = f.splice.stats().remoteBodies
      const kept = yield* Effect.promise(() => Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(one)))
      // Every connection served all eight responses (none was closed under a response).
      expect(kept).toEqual([1, 1, 1, 1, 1, 1, 1, 1])
      expect(f.splice.stats().remoteBodies - before).toBe(64)
      expect(f.splice.stats().aborted).toBe(0)
      expect(relaySlots()).toBe(0)
    })
  )

  it.effect("a reader that stops reading gets every byte once it reads again; an overwrite meanwhile never changes them", () =>
    Effect.gen(function* () {
      const f = yield* Cluster
      const v1 = fixedBytes(LARGE, 1)
      const etag1 = yield* Effect.promise(() => put(f, "large.bin", v1))
      const warm = yield* Effect.promise(() => raw(f.splice.url, "GET", "/bucket/large.bin"))
      expect(sha(warm.body)).toBe(sha(v1))
      const waits = relayWaits()
      const bodies = f.splice.stats().remoteBodies
      const slow = pausedGet(f.splice.url, "large.bin")
      // The relay parks on the client's writability once the socket buffers are full.
      yield* until(() => f.splice.stats().remoteBodies > bodies && relayWaits() > waits, "a relay waiting on the client")
      const etag2 = yield* Effect.promise(() => put(f, "large.bin", fixedBytes(LARGE, 2)))
      expect(etag2).not.toBe(etag1)
      slow.socket.resume()
      const got = yield* Effect.promise(() => slow.done)
      // Every piece is pinned to the head's version: old bytes under the old ETag, or a cut.
      expect(got).not.toBe("cut")
      if (got === "cut") return
      expect(got.head.toLowerCase()).toContain(`etag: ${etag1.toLowerCase()}`)
      expect(sha(got.body)).toBe(sha(v1))
      yield* Effect.sleep("150 millis")
      const r = yield* Effect.promise(() => raw(f.splice.url, "GET", "/bucket/large.bin", { Range: `bytes=0-${BLOCK - 1}` }))
      expect(r.headers.etag).toBe(etag2)
      expect(sha(r.body)).toBe(sha(fixedBytes(LARGE, 2).subarray(0, BLOCK)))
    })
  )

  // Last: it stops the workers.
  it.effect("workers gone mid-body: the client sees a closed connection or the whole right body, never a short complete-looking one", () =>
    Effect.gen(function* () {
      const f = yield* Cluster
      const data = fixedBytes(LARGE, 3)
      yield* Effect.promise(() => put(f, "gone.bin", data))
      yield* Effect.promise(() => raw(f.splice.url, "GET", "/bucket/gone.bin"))
      const waits = relayWaits()
      const bodies = f.splice.stats().remoteBodies
      const slow = pausedGet(f.splice.url, "gone.bin")
      yield* until(() => f.splice.stats().remoteBodies > bodies && relayWaits() > waits, "a relay waiting on the client")
      for (const w of f.workers) yield* Scope.close(w.scope, Exit.void)
      slow.socket.resume()
      const got = yield* Effect.promise(() => slow.done)
      if (got !== "cut") expect(sha(got.body)).toBe(sha(data))
      // The gateway still answers (the route reads the origin with no workers).
      const r = yield* Effect.promise(() => raw(f.splice.url, "GET", "/bucket/gone.bin", { Range: "bytes=0-99" }))
      expect(sha(r.body)).toBe(sha(data.subarray(0, 100)))
    })
  )
})
