/**
 * `gs://` objects end to end: the origin stub's GCS front end (bearer tokens from its
 * metadata-server emulation), a coordinator and two workers filling from it, TalonClient and
 * `talon read` on top. Versions are GCS generations; an object overwritten while it is read
 * never yields a body mixing two generations.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Command } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { read } from "../../src/client/cli.js"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { clusterWithVersionLog, explain, matchingVersion, overwrite, sizeCycle, versionBytes } from "../support/overwrites.js"

const BLOCK = 64 * 1024
const PAGE = 16 * 1024
const BASE = 4 * BLOCK + 4321
const URI = "gs://bucket/obj.bin"

const runCli = (args: ReadonlyArray<string>) =>
  Command.run(read, { name: "talon", version: "test" })(["node", "talon", ...args]).pipe(Effect.provide(NodeContext.layer))

describe("gs:// through the cache", () => {
  it.live(
    "TalonClient and `talon read` serve the object; the version is its generation; overwrites mid-read never mix generations",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { cluster, log } = yield* clusterWithVersionLog({ workers: 2, blockSize: BLOCK, pageSize: PAGE, versionTtlMs: 150 })
          const first = yield* Effect.promise(() => log.write(versionBytes(BASE)))
          const client = yield* makeTalonClient({ coordinator: cluster.coordinator, blockSize: BLOCK, statTtlMs: 100, parallelism: 4 })

          const stat = yield* client.stat(URI)
          expect(stat.size).toBe(BASE)
          expect(stat.version).toMatch(/^\d+$/)
          const whole = yield* client.read(URI, 0, BASE)
          expect(Buffer.from(whole).equals(first.bytes)).toBe(true)
          const filled = yield* cluster.origin.stats()
          expect(filled.byProtocol.gcs).toBeGreaterThan(0)
          expect(filled.requests.get).toBeGreaterThan(0)
          // Warm: the second read is served from the workers' disks, no media download.
          const again = yield* client.read(URI, BLOCK - 10, 2 * BLOCK)
          expect(Buffer.from(again).equals(first.bytes.subarray(BLOCK - 10, 3 * BLOCK - 10))).toBe(true)
          expect((yield* cluster.origin.stats()).requests.get).toBe(filled.requests.get)

          // The CLI, against the same cluster.
          const out = path.join(cluster.dir, "cli.bin")
          yield* runCli(["--out", out, "--coordinator", cluster.coordinator, "--block-size", String(BLOCK), URI])
          expect(fs.readFileSync(out).equals(first.bytes)).toBe(true)

          let writing = true
          const bad: Array<string> = []
          const failures: Array<string> = []
          let ok = 0
          const reader = (seed: number) =>
            Effect.gen(function* () {
              let i = seed
              while (writing) {
                i++
                const offset = i % 2 === 0 ? 0 : (i % 3) * BLOCK + (i % 977)
                const length = i % 2 === 0 ? 8 * BLOCK : 2 * BLOCK + (i % 4099)
                const r = yield* Effect.either(client.read(URI, offset, length))
                if (r._tag === "Left") {
                  if (r.left._tag !== "VersionChanged") failures.push(`${r.left._tag}: ${r.left.message}`)
                  continue
                }
                if (matchingVersion(log, offset, length, r.right) < 0) bad.push(explain(log, offset, r.right))
                else ok++
              }
            })
          yield* Effect.all(
            [
              Effect.promise(() =>
                overwrite(log, sizeCycle(BASE, BLOCK), { count: 6, everyMs: 60, deadlineMs: 30_000, progressed: () => ok >= 2 * log.versions.length })
              ).pipe(Effect.ensuring(Effect.sync(() => (writing = false)))),
              ...[1, 2, 3].map((s) => reader(s * 1000))
            ],
            { concurrency: "unbounded", discard: true }
          )
          expect(bad.slice(0, 3), `${bad.length} mixed bodies of ${ok + bad.length}`).toEqual([])
          expect(failures.slice(0, 3)).toEqual([])
          expect(log.versions.length).toBe(7)
          expect(ok).toBeGreaterThanOrEqual(12)

          // After the writer stops, the newest generation is what a read returns.
          const last = log.versions[log.versions.length - 1]!
          yield* Effect.sleep("300 millis")
          const final = yield* client.read(URI, 0, last.bytes.length + BLOCK)
          expect(Buffer.from(final).equals(last.bytes)).toBe(true)
          const latest = yield* client.stat(URI)
          expect(BigInt(latest.version)).toBeGreaterThan(BigInt(stat.version))
        })
      ),
    60_000
  )
})
