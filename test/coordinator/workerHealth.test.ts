/**
 * Worker health from a real signal: each cache dir takes a write probe every
 * heartbeat. A worker process (two cache dirs) whose second dir is replaced by
 * a file reports degraded and leaves placement, while a client reads the
 * object through the other worker, every byte checked; with the dir back it
 * reports healthy and rejoins. Plus the probe and the health it maps to.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import type { ClusterStatus } from "../../src/protocol/clusterStatus.js"
import { healthOf, probeDir } from "../../src/worker/membership/health.js"
import { freePort, originEnv, originWith, outputs, pollUntil, spawnTalon, tempDir, type Origin } from "../faults/fixtures/talon.js"
import type { Child } from "../cluster/fixtures/processes.js"

const T = 300_000
const START_MS = 180_000
const HEARTBEAT_MS = 200
const BLOCK = 64 * 1024
const URI = "s3://faults/a.bin"

const cluster = (admin: string) =>
  Effect.tryPromise(async () => (await (await fetch(`http://${admin}/api/v1/cluster`, { signal: AbortSignal.timeout(5000) })).json()) as ClusterStatus)
const ids = (ms: ClusterStatus["members"]) => ms.map((m) => m.id).join(",")

/** `talon worker` with the given cache dirs, sending statuses to `coordinator`. */
const worker = (origin: Origin, id: string, coordinator: string, cacheDirs: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const address = `127.0.0.1:${yield* freePort}`
    const admin = `127.0.0.1:${yield* freePort}`
    const child = yield* spawnTalon(
      ["worker", "--id", id, "--coordinator", coordinator, "--data-addr", address, "--admin-addr", admin,
        ...cacheDirs.flatMap((d) => ["--cache-dir", d]), "--block-size", String(BLOCK), "--page-size", "0", "--heartbeat-interval-ms", String(HEARTBEAT_MS)],
      originEnv(origin)
    )
    return { id, address, admin, child }
  })

describe("worker health", () => {
  it.live("a cache dir turned into a file: the worker reports degraded and leaves placement, reads go through the other worker; it rejoins when the dir is back", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const dir = yield* tempDir
        const origin = yield* originWith(dir, { "a.bin": 5 * BLOCK + 1234 })
        const bytes = origin.objects.get(URI)!
        const address = `127.0.0.1:${yield* freePort}`
        const admin = `127.0.0.1:${yield* freePort}`
        const coordinator = yield* spawnTalon(
          ["coordinator", "--listen", address, "--admin-listen", admin, "--heartbeat-interval-ms", String(HEARTBEAT_MS), "--missed-heartbeats", "3"],
          originEnv(origin)
        )
        const [d1, d2] = [path.join(dir, "w1-a"), path.join(dir, "w1-b")]
        const w1 = yield* worker(origin, "w1", address, [d1, d2])
        const w2 = yield* worker(origin, "w2", address, [path.join(dir, "w2")])
        const children: Array<readonly [string, Child]> = [["coordinator", coordinator], ["w1", w1.child], ["w2", w2.child]]
        const why = () => outputs(children)
        yield* pollUntil(cluster(admin), (s) => ids(s.members) === "w1,w2", START_MS, () => `workers never joined\n${why()}`)

        const client = yield* makeTalonClient({ coordinator: address, blockSize: BLOCK, membershipTtlMs: 100, requestTimeoutMs: 30_000 })
        const readAll = Effect.map(client.read(URI, 0, bytes.length), (got) => Buffer.from(got).equals(bytes))
        expect(yield* readAll).toBe(true)

        // The second cache dir becomes a file: its write probe fails.
        fs.renameSync(d2, `${d2}.away`)
        fs.writeFileSync(d2, "not a directory")
        const out = yield* pollUntil(cluster(admin), (s) => ids(s.members) === "w2", 60_000, () => `w1 stayed in placement\n${why()}`)
        expect(out.outOfPlacement.map((m) => [m.id, m.health, m.ready])).toEqual([["w1", "degraded", true]])
        expect(w1.child.output()).toMatch(/worker w1 degraded: cache dir \S*w1-b failed its write probe: ENOTDIR/)
        const readyz = yield* Effect.tryPromise(async () => (await fetch(`http://${w1.admin}/readyz`, { signal: AbortSignal.timeout(5000) })).text())
        const metrics = yield* Effect.tryPromise(async () => (await fetch(`http://${w1.admin}/metrics`, { signal: AbortSignal.timeout(5000) })).text())
        expect(metrics.split("\n")).toContain("talon_worker_cache_dirs_failing_probe 1")
        expect(readyz).toMatch(/reporting degraded \(out of placement\): cache dir \S*w1-b failed its write probe: ENOTDIR/)
        // Clients place on w2 alone now, and read every byte through it.
        yield* pollUntil(client.members(true), (ms) => ms.map((m) => m.id).join(",") === "w2", 30_000, () => `the client kept w1\n${why()}`)
        expect(yield* readAll).toBe(true)
        for (const [offset, length] of [[1, BLOCK], [BLOCK - 7, 3 * BLOCK], [4 * BLOCK + 5, BLOCK + 1229]] as const) {
          expect(Buffer.from(yield* client.read(URI, offset, length)).equals(bytes.subarray(offset, offset + length))).toBe(true)
        }

        // The dir is back: healthy again, and a member again.
        fs.rmSync(d2)
        fs.renameSync(`${d2}.away`, d2)
        const back = yield* pollUntil(cluster(admin), (s) => ids(s.members) === "w1,w2", 60_000, () => `w1 never rejoined\n${why()}`)
        expect(back.outOfPlacement).toEqual([])
        expect(back.members.map((m) => m.health)).toEqual(["healthy", "healthy"])
        expect(w1.child.output()).toContain("worker w1 healthy again")
        yield* pollUntil(client.members(true), (ms) => ms.length === 2, 30_000, () => `the client never saw w1 again\n${why()}`)
        expect(yield* readAll).toBe(true)
      })
    ),
    T
  )

  it.live("the probe passes on a writable dir and names the failure otherwise; health follows how many dirs fail", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const dir = yield* tempDir
        expect(yield* probeDir(dir, 5000)).toBeUndefined()
        expect(fs.readdirSync(dir)).toEqual([])
        const file = path.join(dir, "file")
        fs.writeFileSync(file, randomBytes(8))
        expect(yield* probeDir(file, 5000)).toMatch(/^ENOTDIR/)
        expect(yield* probeDir(path.join(dir, "missing"), 5000)).toMatch(/^ENOENT/)
        const ok = { dir: "a", problem: undefined }
        const bad = { dir: "b", problem: "ENOTDIR" }
        expect([healthOf([ok]), healthOf([ok, bad]), healthOf([bad, bad]), healthOf([bad])]).toEqual(["healthy", "degraded", "unhealthy", "unhealthy"])
      })
    )
  )
})
