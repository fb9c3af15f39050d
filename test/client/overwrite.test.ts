/**
 * One read, one version: concurrent multi-block reads through TalonClient while the object is
 * overwritten at the origin (same size, smaller, larger). Every body must be exactly one
 * version's bytes; a read that cannot get one version may fail, but only with the typed
 * VersionChanged error. Two workers, short version TTLs, so pieces of one read go to workers
 * whose views of the object's version differ; on the portable plane and the default one
 * (native where it builds: its hit table leaves versioned requests to JS).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { clusterWithVersionLog, explain, matchingVersion, overwrite, sizeCycle, versionBytes } from "../support/overwrites.js"

const BLOCK = 64 * 1024
const PAGE = 16 * 1024
const BASE = 6 * BLOCK + 12345

describe.each(["portable", "auto"] as const)("TalonClient reads while the object is overwritten (%s plane)", (dataPlane) => {
  it.live(
    "every body is one version's bytes (same size, smaller, larger overwrites)",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { cluster, log } = yield* clusterWithVersionLog({ workers: 2, blockSize: BLOCK, pageSize: PAGE, versionTtlMs: 150, dataPlane })
          yield* Effect.promise(() => log.write(versionBytes(BASE)))
          const client = yield* makeTalonClient({ coordinator: cluster.coordinator, blockSize: BLOCK, statTtlMs: 100, parallelism: 4 })

          let writing = true
          const bad: Array<string> = []
          const failures: Array<string> = []
          const seen = new Set<number>()
          let ok = 0
          let versionChanged = 0
          const reader = (seed: number) =>
            Effect.gen(function* () {
              let i = seed
              while (writing) {
                i++
                // Whole reads and ranges that straddle blocks, past the end of the smaller versions too.
                const offset = i % 3 === 0 ? 0 : ((i * 7919) % 5) * BLOCK + (i % 977)
                const length = i % 3 === 0 ? 12 * BLOCK : 3 * BLOCK + (i % 4099)
                const r = yield* Effect.either(client.read("s3://bucket/obj.bin", offset, length))
                if (r._tag === "Left") {
                  if (r.left._tag !== "VersionChanged") failures.push(`${r.left._tag}: ${r.left.message}`)
                  else versionChanged++
                  continue
                }
                const v = matchingVersion(log, offset, length, r.right)
                if (v < 0) bad.push(explain(log, offset, r.right))
                else {
                  ok++
                  seen.add(v)
                }
              }
            })
          yield* Effect.all(
            [
              // Writes every 120 ms at the soonest, after two more complete reads, one of them of the
              // newest version: every version is read whole while the next ones are written (a read
              // cut by a write does not count).
              Effect.promise(() =>
                overwrite(log, sizeCycle(BASE, BLOCK), {
                  count: 24,
                  everyMs: 120,
                  deadlineMs: 90_000,
                  progressed: () => ok >= 2 * (log.versions.length - 1) + 2 && seen.has(log.versions.length - 1)
                })
              ).pipe(
                Effect.ensuring(Effect.sync(() => (writing = false)))
              ),
              ...[1, 2, 3, 4, 5, 6].map((s) => reader(s * 1000))
            ],
            { concurrency: "unbounded", discard: true }
          )
          expect(bad.slice(0, 5), `${bad.length} mixed bodies of ${ok + bad.length}`).toEqual([])
          expect(failures.slice(0, 5)).toEqual([])
          expect(log.versions.length, `versions written (${ok} reads ok, ${versionChanged} VersionChanged)`).toBe(25)
          expect(ok).toBeGreaterThanOrEqual(48)
          // Each version before the last was read whole before the next was written.
          expect(seen.size).toBeGreaterThanOrEqual(24)

          // Once the writer stops, a read after the TTLs returns the last version whole.
          const last = log.versions[log.versions.length - 1]!
          yield* Effect.sleep("400 millis")
          const final = yield* client.read("s3://bucket/obj.bin", 0, last.bytes.length + BLOCK)
          expect(Buffer.from(final).equals(last.bytes)).toBe(true)
        })
      ),
    120_000
  )
})
