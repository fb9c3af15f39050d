/**
 * The coordinator's management page (/ui): its rate arithmetic, the admin token on its
 * routes, and the page itself in headless Chromium against a running coordinator whose
 * workers report over the control port: it loads with no console errors, lists the
 * workers, and shows one leave after it stops reporting.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber, Schedule } from "effect"
import fc from "fast-check"
import { History } from "../../src/coordinator/ui/history.js"
import { emptyMetrics, type NodeStatus } from "../../src/protocol/status.js"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import { freshWorkerStatus } from "../../bench/kit/nodeStatus.js"
import { browserMissing, chromium } from "./fixtures/chromium.js"
import { testCoordinator } from "./fixtures/harness.js"

const HEARTBEAT_MS = 200

/** A worker as the coordinator sees one: a status every heartbeat, its counters growing, until its fiber is interrupted. */
const reportingWorker = (control: string, id: string, zone: string, extra: Partial<NodeStatus> = {}) =>
  Effect.forkScoped(
    Effect.scoped(
      Effect.gen(function* () {
        const ch = yield* ControlChannel.make(control)
        const fresh = freshWorkerStatus(id)
        const base = { ...fresh, node: { ...fresh.node, address: `127.0.0.1:${7100 + Number(id.slice(-1))}` }, labels: [["zone", zone]] as const, ...extra }
        let seq = 0
        yield* Effect.repeat(
          Effect.suspend(() => {
            seq++
            return ch.request({
              _tag: "NodeStatusHeartbeat",
              status: {
                ...base,
                heartbeatSeq: seq,
                reportedAtUnixMs: Date.now(),
                metrics: {
                  ...emptyMetrics,
                  requestsTotal: 40 * seq,
                  cacheHitsTotal: 36 * seq,
                  cacheMissesTotal: 4 * seq,
                  blockCount: 100 + seq,
                  residentBytes: (3 + Number(id.slice(-1))) * 2 ** 30,
                  capacityBytes: 16 * 2 ** 30
                }
              }
            })
          }),
          Schedule.spaced(HEARTBEAT_MS / 2)
        )
      })
    )
  )

const get = (url: string, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const res = await fetch(url, { headers })
    return { status: res.status, cookie: res.headers.get("set-cookie"), body: await res.text() }
  })

describe("management page", () => {
  it("rates: cluster points and a worker's rates are its counters' growth over the sampled time; a restarted worker counts from zero (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 1, max: 5000 }), fc.nat(1000), fc.nat(1000)), { minLength: 2, maxLength: 30 }), (steps) => {
        const h = new History(100)
        let t = 0
        let hits = 0
        let misses = 0
        for (const [dt, dh, dm] of steps) {
          t += dt
          hits += dh
          misses += dm
          h.record({ atMs: t, nodes: new Map([["w", { requests: hits + misses, hits, misses }]]) })
        }
        const first = steps[0]!
        const span = (t - first[0]) / 1000
        const grownHits = hits - first[1]
        const grownMisses = misses - first[2]
        const r = h.ratesOf("w", Number.MAX_SAFE_INTEGER)
        expect(r.requestsPerSec).toBeCloseTo((grownHits + grownMisses) / span, 6)
        expect(r.hitRatio).toBe(grownHits + grownMisses === 0 ? null : grownHits / (grownHits + grownMisses))
        expect(h.points()).toHaveLength(steps.length - 1)
      })
    )
    const h = new History(2)
    h.record({ atMs: 0, nodes: new Map([["w", { requests: 500, hits: 500, misses: 0 }]]) })
    h.record({ atMs: 1000, nodes: new Map([["w", { requests: 10, hits: 5, misses: 5 }]]) })
    expect(h.ratesOf("w", 60_000)).toEqual({ requestsPerSec: 10, hitRatio: 0.5 })
    h.record({ atMs: 2000, nodes: new Map() })
    expect(h.size).toBe(2)
  })

  it.live("with an admin token: the page and its JSON refuse a missing or wrong token, take the right one as a bearer, and /ui?token= leaves a cookie the polls carry", () =>
    testCoordinator({ heartbeatIntervalMs: HEARTBEAT_MS }, (c) =>
      Effect.gen(function* () {
        const base = `http://${c.adminAddress}`
        for (const p of ["/ui", "/ui/overview.json"]) {
          expect((yield* get(base + p)).status).toBe(401)
          expect((yield* get(base + p, { authorization: "Bearer wrong-token-0123456789" })).status).toBe(401)
          expect((yield* get(base + p, { authorization: "Bearer s3cret-token-0123456789" })).status).toBe(200)
        }
        expect((yield* get(`${base}/ui?token=wrong`)).status).toBe(401)
        const opened = yield* get(`${base}/ui?token=s3cret-token-0123456789`)
        expect(opened.status).toBe(200)
        expect(opened.cookie).toContain("HttpOnly")
        const cookie = opened.cookie!.split(";")[0]!
        const polled = yield* get(`${base}/ui/overview.json`, { cookie })
        expect(polled.status).toBe(200)
        expect(JSON.parse(polled.body)).toMatchObject({ clusterId: "default", stateBackend: "memory", workers: [] })
        // Health and metrics stay open.
        expect((yield* get(`${base}/healthz`)).status).toBe(200)
      })
    ).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["TALON_ADMIN_TOKEN", "s3cret-token-0123456789"]]))))
  )

  it.live("in headless Chromium: no console errors, the workers of a running cluster are listed, and one that stops reporting leaves", () => {
    const missing = browserMissing()
    if (missing !== undefined) throw new Error(missing)
    return testCoordinator({ heartbeatIntervalMs: HEARTBEAT_MS, missedHeartbeats: 3 }, (c) =>
      Effect.gen(function* () {
        yield* reportingWorker(c.controlAddress, "worker-1", "us-east-1a")
        const second = yield* reportingWorker(c.controlAddress, "worker-2", "us-east-1b")
        yield* reportingWorker(c.controlAddress, "worker-3", "us-east-1a", { health: "degraded" })
        const browser = yield* chromium()
        yield* browser.open(`http://${c.adminAddress}/ui`)
        const shown = browser.run<string | null>("return document.body.dataset.workers ?? null")
        const until = (want: string, why: string) =>
          Effect.repeat(shown, { until: (w) => w === want, schedule: Schedule.spaced("100 millis") }).pipe(
            Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => new Error(why) })
          )
        yield* until("worker-1,worker-2,worker-3", "the page never listed the three workers")
        const rows = yield* browser.run<ReadonlyArray<string>>(
          "return [...document.querySelectorAll('#workers tr')].map((r) => [...r.cells].map((c) => c.textContent.trim()).join('|'))"
        )
        expect(rows[0]).toMatch(/^worker-1\|127\.0\.0\.1:7101\|us-east-1a\|healthy\|in\|/)
        expect(rows[2]).toMatch(/^worker-3\|127\.0\.0\.1:7103\|us-east-1a\|degraded\|out\|/)
        expect(yield* browser.run<string>("return document.getElementById('epoch').textContent")).toMatch(/^[0-9a-f]{16}$/)
        // Rates need two samples of each worker; the hit ratio then is the reported 36 of 40.
        yield* Effect.repeat(browser.run<string>("return document.getElementById('c-hit').textContent"), {
          until: (t) => t === "90.0 %",
          schedule: Schedule.spaced("100 millis")
        }).pipe(Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => new Error("no hit ratio shown") }))

        if (process.env.TALON_UI_SCREENSHOT !== undefined) {
          fs.writeFileSync(path.resolve(__dirname, "../../docs/assets/management-page.png"), yield* browser.screenshotPng)
        }

        yield* Fiber.interrupt(second)
        yield* until("worker-1,worker-3", "the page still lists worker-2 after it stopped reporting")
        expect(yield* browser.consoleErrors).toEqual([])
      })
    )
  })
})
