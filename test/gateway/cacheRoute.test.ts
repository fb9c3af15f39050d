/**
 * The cache route's failure handling over real sockets: a piece whose workers are
 * unreachable (connection refused) or silent (accepts, never answers) comes from the
 * origin instead; a worker that stops mid-life makes later pieces fall back; an object
 * changed or deleted behind the gateway's back is served fresh or answered 404, never
 * as stale bytes under a new head; a write through the gateway is read back at once.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Layer, Scope } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import * as net from "node:net"
import * as path from "node:path"
import { BackendStore } from "../../src/backend/BackendStore.js"
import * as Router from "../../src/backend/Router.js"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import { NodeRole } from "../../src/core/ids.js"
import { Gateway, type GatewayShape } from "../../src/gateway/Gateway.js"
import type { GatewayOptions } from "../../src/gateway/config.js"
import type { TalonClientOptions } from "../../src/client/config.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { sampleBytes } from "../../src/origin/seed.js"
import { Worker } from "../../src/worker/Worker.js"
import { raw, tempDir } from "../origin/fixtures/testOrigin.js"
import { deadAddress } from "../support/deadAddress.js"
import { patientCoordinator } from "../support/loopbackCoordinator.js"

const MiB = 1024 * 1024
const BLOCK = 2 * MiB
const BUCKET = "cached"
const OBJECT = sampleBytes(3, 6 * MiB + 12345)
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")
const send = <O>(p: () => Promise<O>) => Effect.promise(p)

/** Origin stub with the test object, and a coordinator that never expires silent members. */
const base = Effect.gen(function* () {
  const dir = yield* tempDir
  const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
  yield* send(() => raw(origin.url, "PUT", `/${BUCKET}`))
  yield* send(() => raw(origin.url, "PUT", `/${BUCKET}/obj.bin`, {}, OBJECT))
  const backend = Layer.succeed(BackendStore, yield* Router.make(Router.localOptions(origin.url)))
  const coordinator = yield* patientCoordinator(backend)
  return { dir, origin, backend, coordinator }
})

const gatewayOn = (originUrl: string, coordinator: string, options: Partial<GatewayOptions> = {}, client: Partial<TalonClientOptions> = {}) =>
  Layer.build(
    Gateway.layerDeployment({
      // The route's own pieces and fallbacks are counted here; the splice relay has its own tests (remoteBody.test.ts).
      gateway: { listen: "127.0.0.1:0", auth: false, workerTimeoutMs: 500, remoteSplice: false, ...options },
      route: "cache",
      router: Router.localOptions(originUrl),
      client: { coordinator, blockSize: BLOCK, connectTimeoutMs: 500, requestTimeoutMs: 3000, statTtlMs: 200, membershipTtlMs: 500, ...client }
    })
  ).pipe(Effect.map((ctx): GatewayShape => Context.get(ctx, Gateway)))

const register = (coordinator: string, id: string, address: string) =>
  Effect.gen(function* () {
    const channel = yield* ControlChannel.make(coordinator)
    const reply = yield* channel.request({ _tag: "Register", node: { id, address, role: NodeRole.Worker } })
    expect(reply._tag).toBe("Ack")
  })

/** A TCP listener that accepts and never answers: a hung worker. */
const silentWorker = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ server: net.Server; address: string; sockets: Set<net.Socket> }>((resolve) => {
        const sockets = new Set<net.Socket>()
        const server = net.createServer((s) => {
          sockets.add(s)
          s.on("close", () => sockets.delete(s))
          s.resume()
        })
        server.listen(0, "127.0.0.1", () => resolve({ server, sockets, address: `127.0.0.1:${(server.address() as net.AddressInfo).port}` }))
      })
  ),
  ({ server, sockets }) =>
    Effect.sync(() => {
      for (const s of sockets) s.destroy()
      server.close()
    })
)


const getChecked = (gw: GatewayShape, originUrl: string, range?: string) =>
  Effect.gen(function* () {
    const headers: Record<string, string> = range === undefined ? {} : { Range: range }
    const r = yield* send(() => raw(gw.url, "GET", `/${BUCKET}/obj.bin`, headers))
    const ref = yield* send(() => raw(originUrl, "GET", `/${BUCKET}/obj.bin`, headers))
    expect(r.status).toBe(ref.status)
    expect(r.headers.etag).toBe(ref.headers.etag)
    expect(sha(r.body)).toBe(sha(ref.body))
    return r
  })

describe("gateway cache route", () => {
  it.scopedLive("pieces whose workers refuse connections or never answer come from the origin", () =>
    Effect.gen(function* () {
      const { origin, coordinator } = yield* base
      const silent = yield* silentWorker
      yield* register(coordinator.controlAddress, "dead-worker", yield* deadAddress)
      yield* register(coordinator.controlAddress, "silent-worker", silent.address)
      const gw = yield* gatewayOn(origin.url, coordinator.controlAddress)
      const whole = yield* getChecked(gw, origin.url)
      expect(whole.body.length).toBe(OBJECT.length)
      yield* getChecked(gw, origin.url, "bytes=1000000-3500000")
      const stats = gw.stats()
      expect(stats.cachePieces).toBe(0)
      expect(stats.fallbackPieces).toBe(7 + 4)
      expect(stats.aborted).toBe(0)
    })
  )

  it.scopedLive("serves from workers, then falls back when the worker stops; changed and deleted objects are never served stale", () =>
    Effect.gen(function* () {
      const { dir, origin, backend, coordinator } = yield* base
      const workerScope = yield* Scope.make()
      yield* Layer.buildWithScope(
        Worker.layerSettings({
          id: "w1",
          dataAddress: "127.0.0.1:0",
          adminAddress: "127.0.0.1:0",
          coordinator: coordinator.controlAddress,
          cacheDirs: [path.join(dir, "cache")],
          blockSize: BLOCK,
          pageSize: 256 * 1024,
          versionTtlMs: 200,
          heartbeatIntervalMs: 500
        }).pipe(Layer.provide(backend)),
        workerScope
      )
      yield* coordinator.members.pipe(
        Effect.delay("50 millis"),
        Effect.repeat({ until: (m) => m.length >= 1 }),
        Effect.timeout(Duration.seconds(20))
      )
      // No client read-ahead: the fallback below is about pieces only the (stopped) worker holds, not bytes
      // the gateway's client already read ahead into memory (those would be served, correctly, from there).
      const gw = yield* gatewayOn(
        origin.url,
        coordinator.controlAddress,
        { statTtlMs: 60_000, writeFreshMs: 400, workerTimeoutMs: 10_000 },
        { readAheadBytes: 0 }
      )

      yield* getChecked(gw, origin.url)
      yield* getChecked(gw, origin.url, "bytes=-100000")
      const warm = gw.stats()
      expect(warm.cachePieces).toBe(7 + 2)
      expect(warm.fallbackPieces).toBe(0)

      // A write through the gateway is read back at once, then through the cache once the window passes.
      const v2 = sampleBytes(99, 3 * MiB + 7)
      const put = yield* send(() => raw(gw.url, "PUT", `/${BUCKET}/obj.bin`, {}, v2))
      expect(put.status).toBe(200)
      const fresh = yield* getChecked(gw, origin.url)
      expect(fresh.body.equals(v2)).toBe(true)
      yield* Effect.sleep("600 millis")
      const before = gw.stats().cachePieces
      expect((yield* getChecked(gw, origin.url)).body.equals(v2)).toBe(true)
      expect(gw.stats().cachePieces).toBeGreaterThan(before)

      // Replaced behind the gateway's back while its stat is cached (TTL 60 s): the new bytes, never a splice.
      const v3 = sampleBytes(7, 2 * MiB + 99)
      yield* send(() => raw(origin.url, "PUT", `/${BUCKET}/obj.bin`, {}, v3))
      yield* Effect.sleep("300 millis")
      expect((yield* getChecked(gw, origin.url)).body.equals(v3)).toBe(true)

      // The worker goes away: pieces fall back to the origin, the client sees nothing.
      yield* Scope.close(workerScope, Exit.void)
      const fallbackBefore = gw.stats().fallbackPieces
      expect((yield* getChecked(gw, origin.url, "bytes=0-1500000")).body.equals(v3.subarray(0, 1500001))).toBe(true)
      expect(gw.stats().fallbackPieces).toBeGreaterThan(fallbackBefore)

      // Deleted behind the gateway's back: 404, not the cached size's worth of anything.
      yield* send(() => raw(origin.url, "DELETE", `/${BUCKET}/obj.bin`))
      const gone = yield* send(() => raw(gw.url, "GET", `/${BUCKET}/obj.bin`))
      expect(gone.status).toBe(404)
      expect(gone.body.toString()).toContain("<Code>NoSuchKey</Code>")
      expect(gw.stats().aborted).toBe(0)
      yield* Effect.promise(() => fs.rm(path.join(dir, "cache"), { recursive: true, force: true }))
    })
  )
})
