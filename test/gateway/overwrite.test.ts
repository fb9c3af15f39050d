/**
 * One version per GET: concurrent GETs (whole and ranged, spanning blocks) through the
 * gateway's cache route while the object is overwritten at the origin (same size, smaller,
 * larger). Every complete body must be exactly the bytes of the version its ETag names; a
 * response may only fail as a whole (an error status before the head, or a cut body after it).
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Router from "../../src/backend/Router.js"
import { Gateway, type GatewayShape } from "../../src/gateway/Gateway.js"
import { raw } from "../origin/fixtures/testOrigin.js"
import { clusterWithVersionLog, expectedSlice, overwrite, sizeCycle, versionBytes } from "../support/overwrites.js"

const BLOCK = 64 * 1024
const PAGE = 16 * 1024
const BASE = 6 * BLOCK + 12345

const gatewayOn = (originUrl: string, coordinator: string) =>
  Layer.build(
    Gateway.layerDeployment({
      gateway: { listen: "127.0.0.1:0", auth: false, workerTimeoutMs: 5000, statTtlMs: 100, pieceBytes: 16 * 1024, readAhead: 6 },
      route: "cache",
      router: Router.localOptions(originUrl),
      client: { coordinator, blockSize: BLOCK, connectTimeoutMs: 2000, requestTimeoutMs: 10_000, statTtlMs: 100 }
    })
  ).pipe(Effect.map((ctx): GatewayShape => Context.get(ctx, Gateway)))

/** `bytes=a-b` of a 206's Content-Range (`bytes a-b/size`). */
const rangeOf = (contentRange: string | undefined): { start: number; end: number } | undefined => {
  const m = /^bytes (\d+)-(\d+)\/\d+$/.exec(contentRange ?? "")
  return m === null ? undefined : { start: Number(m[1]), end: Number(m[2]) }
}

describe("gateway GETs while the object is overwritten", () => {
  it.live(
    "every body is the bytes of the version its ETag names",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { cluster, log } = yield* clusterWithVersionLog({ workers: 2, blockSize: BLOCK, pageSize: PAGE, versionTtlMs: 150 })
          yield* Effect.promise(() => log.write(versionBytes(BASE)))
          const gw = yield* gatewayOn(cluster.origin.url, cluster.coordinator)

          let writing = true
          const bad: Array<string> = []
          const failed: Array<string> = []
          const etags = new Set<string>()
          const seen = new Set<unknown>()
          let ok = 0
          let cut = 0
          const statuses: Array<number> = []
          const reader = async (seed: number) => {
            let i = seed
            while (writing) {
              i++
              const ranged = i % 2 === 0
              const from = ((i * 7919) % 4) * BLOCK + (i % 997)
              const headers: Record<string, string> = ranged ? { Range: `bytes=${from}-${from + 3 * BLOCK + (i % 3001)}` } : {}
              let r: Awaited<ReturnType<typeof raw>>
              try {
                r = await raw(gw.url, "GET", "/bucket/obj.bin", headers)
              } catch {
                cut++ // the response was cut after its head: never wrong bytes
                continue
              }
              if (r.status !== 200 && r.status !== 206) {
                // A read that could not get one version is answered as a whole error; a range
                // past the end of a smaller version is a 416.
                statuses.push(r.status)
                if (r.status !== 416 && r.status !== 503) failed.push(`${r.status}: ${r.body.toString().slice(0, 200)}`)
                continue
              }
              if (r.body.length !== Number(r.headers["content-length"])) {
                cut++
                continue
              }
              const v = log.byEtag(String(r.headers.etag))
              if (v === undefined) {
                bad.push(`ETag ${r.headers.etag} names no version written`)
                continue
              }
              const span = r.status === 206 ? rangeOf(r.headers["content-range"]) : { start: 0, end: v.bytes.length - 1 }
              if (span === undefined) {
                bad.push(`206 without a Content-Range: ${r.headers["content-range"]}`)
                continue
              }
              const want = expectedSlice(v, span.start, span.end - span.start + 1)
              if (!want.equals(r.body)) {
                bad.push(`${r.status} ${r.headers.etag} [${span.start}, ${span.end}]: body is not that version's bytes`)
                continue
              }
              ok++
              etags.add(String(r.headers.etag))
              seen.add(v)
            }
          }
          yield* Effect.promise(() =>
            Promise.all([
              // Two complete reads between writes, one of them of the newest version, so every
              // version is read while the next ones are written (reads cut by a write do not count).
              overwrite(log, sizeCycle(BASE, BLOCK), {
                count: 16,
                everyMs: 150,
                deadlineMs: 90_000,
                progressed: () => ok >= 2 * (log.versions.length - 1) + 2 && seen.has(log.versions[log.versions.length - 1])
              }).finally(() => (writing = false)),
              ...[1, 2, 3, 4, 5, 6].map((s) => reader(s * 1000))
            ])
          )
          expect(bad.slice(0, 5), `${bad.length} bodies not of their ETag's version (of ${ok + bad.length})`).toEqual([])
          expect(failed.slice(0, 5)).toEqual([])
          expect(log.versions.length, `versions written (ok ${ok}, cut ${cut}, errors ${statuses.join(",")})`).toBe(17)
          expect(ok).toBeGreaterThanOrEqual(32)
          // Each version before the last was read whole before the next was written.
          expect(etags.size).toBeGreaterThanOrEqual(16)

          // After the writer stops and the TTLs pass, a GET returns the last version whole.
          const last = log.versions[log.versions.length - 1]!
          yield* Effect.sleep("400 millis")
          const final = yield* Effect.promise(() => raw(gw.url, "GET", "/bucket/obj.bin"))
          expect(final.status).toBe(200)
          expect(log.byEtag(String(final.headers.etag))).toBe(last)
          expect(final.body.equals(last.bytes)).toBe(true)
          expect(gw.stats().cachePieces).toBeGreaterThan(0)
        })
      ),
    120_000
  )
})
